/*
 * hessian.h - capture of H = E[x x^T] for every linear layer's input during a forward pass
 * (`iqforge imatrix --hessian`), for the error-feedback quantizer (src/quantize/feedback.c).
 *
 * iqf_hessian_attach gives a context an accumulator; from then on every capture (capture.c: the
 * forward code's iqf_capture beside each product) whose weight owns a slot adds X^T X of its activation rows (q/k/v share one slot owned by attn_k, gate/up
 * one owned by ffn_gate; attn_output, ffn_down and output have their own; the slot map in
 * src/stats/hessian_file.c, iqf_hessian_slot_map, lists every architecture's owners and the
 * weights that share their slots, for this capture and for iqf_hessian_name_for alike). MoE layers' 3-D expert tensors have expert slots: one matrix per expert, fed by
 * iqf_capture_expert with the rows routed to that expert (token then slot order, as llama-imatrix's
 * per-expert sums), owned by ffn_gate_up_exps or else ffn_gate_exps (gate's and up's input) and
 * by ffn_down_exps; each expert's mean is over its own rows (ecount), so its diagonal is
 * llama-imatrix's per-expert E[x^2]. Sums are kept in
 * double per batch of token rows: each batch is summed in float32 (in token order) and added to
 * the double total, so the result does not depend on the thread count or SIMD level.
 * A slot wider than `max_block` (> 0) keeps only the diagonal blocks of max_block x max_block.
 */
#ifndef IQF_MODEL_HESSIAN_H
#define IQF_MODEL_HESSIAN_H

#include "model.h"
#include "stats/hessian_file.h"

typedef struct iqf_hess_slot {
    char name[IQF_GGUF_MAX_NAME];  /* "blk.0.attn_qkv.hessian" */
    const iqf_weight *owner;
    int64_t n, bs;
    double *sum;                   /* n * bs: row r = k*bs + i holds row i of diagonal block k;
                                    * an expert slot: n_mat such matrices, expert e's at e*n*bs */
    int64_t count;                 /* token rows */
    int64_t n_mat;                 /* 1, or n_expert for an expert slot */
    int64_t *ecount;               /* an expert slot: rows routed to each expert; else NULL */
} iqf_hess_slot;

struct iqf_hess_acc {
    iqf_hess_slot *slots;
    int n_slots;
    int64_t max_bs;
};
typedef struct iqf_hess_acc iqf_hess_acc;

/* The automatic representation (max_block == 0): full matrices when the double accumulators of
 * all of them (the expert slots' too) take at most IQF_HESSIAN_AUTO_FULL_BYTES (kjv-3m: 25 MB), otherwise diagonal blocks
 * of IQF_HESSIAN_AUTO_BLOCK (the K/IQ super-block) for every input wider than that. A
 * Mistral-7B shape then costs (3 x 4096 + 14336) x 256 values per layer: 27.3 MiB in F32 (0.86
 * GiB for 32 layers), 13.6 MiB in F16, 54.5 MiB of accumulators; full matrices would be 30 GiB
 * in F32 (doc/QUALITY.md, error feedback). */
#define IQF_HESSIAN_AUTO_FULL_BYTES (INT64_C(1) << 30)
#define IQF_HESSIAN_AUTO_BLOCK 256
/* The most the per-expert accumulators may take under the automatic rule (8 GiB; see
 * iqf_hessian_attach_ex). A gpt-oss-20B shape (2880 wide in and out, 32 experts, 24 layers)
 * takes 6.3 GiB at its automatic 192-blocks (3.2 GiB of F32 in the file, 1.6 GiB F16); a
 * Qwen3-30B-A3B shape (2048 -> 768, 128 experts, 48 layers) would take 33 GiB at 256-blocks, so
 * it gets 32-blocks (4.1 GiB); a DeepSeek-V3 shape (7168 -> 2048, 256 experts, 58 MoE layers)
 * 33 GiB even then: no expert slots unless --hessian-experts asks. */
#define IQF_HESSIAN_EXPERT_BYTES (INT64_C(8) << 30)
/* The automatic block for an input n wide: n if n <= 256, else the largest multiple of 32 that
 * is <= 256 and divides n, else n (full). */
int64_t iqf_hessian_auto_block(int64_t n);

/* Creates the accumulator and sets c->hess. max_block > 0: diagonal blocks of max_block for the
 * inputs wider than that (max_block must divide them); 0: automatic (above); < 0: full
 * matrices. Errors: IQF_E_INVALID_ARG (max_block does not divide a width), IQF_E_NOMEM. */
iqf_status iqf_hessian_attach(iqf_context *c, int64_t max_block, iqf_hess_acc **out, char *err,
                              size_t errlen);
/* The same with the 3-D expert tensors' per-expert slots set apart. expert_block > 0: blocks of
 * at most expert_block (the largest multiple of 32 <= it dividing the width; the width itself if
 * none does or it is narrower); < 0: no expert slots; 0 (iqf_hessian_attach): the rule above,
 * unless the expert accumulators would then take more than IQF_HESSIAN_EXPERT_BYTES, in which
 * case 32-blocks, and no expert slots if those still take more. */
iqf_status iqf_hessian_attach_ex(iqf_context *c, int64_t max_block, int64_t expert_block, iqf_hess_acc **out,
                                 char *err, size_t errlen);
/* The slot named `name` ("blk.0.attn_k.hessian"), or NULL. */
iqf_hess_slot *iqf_hessian_slot(iqf_hess_acc *a, const char *name);
/* Clears c->hess (the accumulator stays valid). */
void iqf_hessian_detach(iqf_context *c);
void iqf_hessian_acc_free(iqf_hess_acc *a);

/* Called by iqf_capture: adds X^T X of T rows if w owns a slot. */
void iqf_hessian_accumulate(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T);
/* Called by iqf_capture_expert with the n rows routed to expert e (token then slot order): adds their
 * X^T X to expert e's matrix if the 3-D weight w owns an expert slot. */
void iqf_hessian_accumulate_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n);

/* Writes the accumulated means (hessian_file.h layout; first fills in the mirrored lower
 * triangles, so call it once, after the last batch). Errors as iqf_hessian_write. */
iqf_status iqf_hessian_acc_write(iqf_hess_acc *a, const iqf_model *m, const char *path,
                                 int chunk_count, int chunk_size, const char *dataset, bool f16,
                                 char *err, size_t errlen);

#endif
