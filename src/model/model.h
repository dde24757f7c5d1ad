/*
 * model.h - internal structures of the inference engine (llama architecture).
 *
 * A weight matrix is a view of rows straight from the (mmapped) GGUF file, in whatever type the
 * file stores; the matrix products decode it tile by tile (matmul.c), never the whole model.
 * Simulated quantization replaces a view by an owned float32 copy (model.c).
 */
#ifndef IQF_MODEL_MODEL_H
#define IQF_MODEL_MODEL_H

#include "iqforge.h"
#include "util/pool.h"
#include "arch.h"

#include <stdio.h>

typedef struct iqf_weight {
    char name[96];
    int id;            /* index into the model's weight list (imatrix slots), -1 for vectors */
    int type;
    int64_t ncols;     /* ne0: input features */
    int64_t nrows;     /* ne1: output features */
    size_t row_bytes;
    const uint8_t *data;
    int n_mat;         /* 3-D expert tensors: n_expert matrices of nrows rows, expert e at
                        * data + e * nrows * row_bytes; 0 or 1 for a plain matrix */
} iqf_weight;

typedef struct iqf_layer {
    float *attn_norm, *ffn_norm; /* n_embd floats (owned) */
    iqf_weight wq, wk, wv, wo, wgate, wup, wdown;
    float *bq, *bk, *bv;         /* attention biases (qwen2), or NULL */
    float *q_norm, *k_norm;      /* per-head RMSNorm weights (qwen3), head_dim floats, or NULL */
    iqf_weight gate_inp;         /* MoE router [n_embd -> n_expert] */
    iqf_weight gate_exps, up_exps, down_exps; /* MoE experts (n_mat = n_expert) */
    float *bo, *bgate, *bup, *bdown; /* attn_output / ffn biases where the row reads them, or NULL */
    float sq, sk, sv, so;        /* per-tensor attn_{q,k,v,output}.scale (1 when absent) */
    float sgate, sup, sdown;     /* per-tensor ffn_{gate,up,down}.scale where the row applies them, else 1 */
    float *sgate_exps, *sup_exps, *sdown_exps; /* per-expert .scale [n_expert], or NULL */
    float *post_attn_norm, *post_ffn_norm; /* gemma3: RMS norms of the attention / FFN outputs, or NULL */
    bool swa;                    /* sliding-window layer (attends to the last n_swa positions) */
    struct iqf_gdn_layer *gdn;   /* qwen35: a Gated-DeltaNet layer (deltanet.h) instead of attention, or NULL */
    iqf_weight gate_up_exps;     /* gate and up experts in one tensor [n_embd -> 2 n_ff_exp] x n_expert, or no data */
    iqf_weight gate_inp_shexp, gate_shexp, up_shexp, down_shexp; /* shared expert and its gate [n_embd -> 1], or no data */
    float sgate_shexp, sup_shexp, sdown_shexp; /* their per-tensor .scale (1 when absent) */
    float *attn_sinks;           /* gpt-oss: per-head sink logits [n_head], or NULL */
    float *bgate_inp;            /* gpt-oss: router bias [n_expert], or NULL */
    float *bgate_exps, *bup_exps, *bdown_exps; /* gpt-oss: per-expert biases [n_expert][width], or NULL */
    /* deepseek2 (MLA, attn_mla.c): q through a low-rank pair (or plain wq), the compressed KV;
     * gate_up_exps and the shared experts above are its fused experts and expert_shared_count experts */
    iqf_weight wq_a, wq_b, wkv_a, wk_b, wv_b; /* wk_b, wv_b: one matrix per head (n_mat = n_head) */
    float *q_a_norm, *kv_a_norm;             /* RMS norms of the q / kv latents */
    float *exp_probs_b;                      /* expert selection bias [n_expert], or NULL */
    /* per-layer attention geometry (every architecture; gemma4's differ between layers) */
    int hd, n_rot;               /* head size (key = value length) and rotated dims */
    int kv_src;                  /* the layer whose K/V cache this one reads (itself unless shared) */
    int n_kv, n_ff;              /* KV heads, dense FFN width (info's n_head_kv / n_ff are the largest) */
    /* gemma4 */
    iqf_weight ple_gate, ple_proj; /* per-layer embedding: inp_gate [n_embd -> n_ple], proj [n_ple -> n_embd] */
    float *ple_post_norm;        /* post_norm [n_embd], or NULL without per-layer embeddings */
    float out_scale;             /* layer_output_scale (1 when absent) */
    float *gate_inp_s, *pre_ffn_norm2, *post_ffn_norm1, *post_ffn_norm2; /* gemma4's expert layers, or NULL */
} iqf_layer;

#define IQF_MAX_WEIGHTS_PER_LAYER 16 /* deepseek2's MoE layers have 13 */

struct iqf_model {
    iqf_model_info info;
    const iqf_arch *arch;       /* the architecture's row (arch.h) */
    iqf_layer *layers;
    iqf_weight tok_embd, output;
    float *output_norm;
    float *output_b;            /* output.bias where the row reads it, or NULL */
    float *rope_freqs;          /* rope_freqs.weight [n_rot / 2] (Llama 3 frequency factors), or NULL */
    float attn_scale;           /* the softmax scale of Q.K (1/sqrt(head_dim) unless the row says otherwise) */
    int n_swa;                  /* sliding window (0: none) */
    float rope_base_swa;        /* rope base of the sliding-window layers (rope scaling 1 there) */
    float softcap;              /* final logit softcapping (0: none) */
    struct iqf_gdn_hparams *gdn_hp; /* qwen35: Gated-DeltaNet sizes and rope sections (deltanet.h), or NULL */
    int n_ff_shexp;             /* shared expert width (0: none) */
    float moe_w_scale;          /* expert_weights_scale where the row applies it (1: none) */
    float rope_scale_swa;       /* rope frequency scale of the sliding-window layers */
    float yarn_ext;             /* YaRN ext_factor (0: no YaRN) */
    int n_ctx_orig_yarn;        /* YaRN's original context (rope.scaling.original_context_length) */
    float yarn_corr[2], yarn_corr_swa[2]; /* ggml_rope_yarn_corr_dims of the global / sliding layers' base */
    struct iqf_mla_hp {         /* deepseek2: MLA sizes, YaRN, DeepSeek MoE routing (model.c loads) */
        int q_lora, kv_lora;    /* attention.q_lora_rank (0: plain attn_q), attention.kv_lora_rank */
        int k_mla, v_mla;       /* per-head key (nope + rope) and value widths after decompression */
        int n_dense_lead;       /* leading_dense_block_count: layers with a dense FFN */
        int n_shared;           /* expert_shared_count */
        int n_groups, n_group_used; /* expert groups (0/1: none) */
        bool sigmoid;           /* expert_gating_func 2; else softmax */
        float w_scale;          /* expert_weights_scale (0 or 1: none) */
        float kq_scale;         /* mscale^2 / sqrt(k_mla) */
        float ext_factor, attn_factor, corr[2]; /* YaRN (ext_factor 0: off) */
    } mla;
    int n_rot_swa;              /* rotated dims of the sliding layers (rope.dimension_count_swa) */
    int n_ple;                  /* gemma4: embedding_length_per_layer_input (0: no per-layer embeddings) */
    iqf_weight ple_tok;         /* per_layer_token_embd [n_ple * n_layer per token] (rows read, no product) */
    iqf_weight ple_model_proj;  /* per_layer_model_proj [n_embd -> n_ple * n_layer] */
    float *ple_proj_norm;       /* per_layer_proj_norm [n_ple] */
    iqf_weight **mats; /* every matrix product's weight (layers' 7, then output), n_mats */
    int n_mats;
    void *gguf;                 /* iqf_gguf* the weights point into */
    bool gguf_borrowed;         /* iqf_model_load_gguf without take: the caller closes gguf */
    void **owned;               /* simulate: float copies */
    int n_owned;
};

/* Per-thread scratch for decoding a tile of weight rows. */
#define IQF_MM_TILE 16
/* Tokens per forward step; longer decode calls are split (bounds the scratch buffers). */
#define IQF_MAX_BATCH 512

/* Imatrix accumulation: one slot per weight id; expert tensors have n_mat sections of ncols
 * sums and n_mat counts (count[id] points at them). */
typedef struct iqf_imat_acc {
    double **sum2;   /* [n_mats][n_mat * ncols] */
    int64_t **count; /* [n_mats][n_mat] */
} iqf_imat_acc;

struct iqf_context {
    const iqf_model *m;
    int n_ctx;
    iqf_pool *pool;
    iqf_simd simd;
    bool kv_f16;               /* K/V entries rounded to F16 (llama.cpp's default cache type) */
    float *kcache, *vcache;    /* [n_layer][n_ctx][n_kv*head_dim] */
    int n_past;                /* positions filled */
    int max_batch;             /* tokens per decode call the buffers hold */
    float *x, *xn, *q, *att, *g, *u, *tmp;
    float *wtile;              /* [n_threads][IQF_MM_TILE * max_ncols] */
    float *scores;             /* [n_threads][n_ctx] */
    float *rope_cs;            /* [max_batch][head_dim] cos/sin pairs */
    int64_t max_ncols;
    iqf_imat_acc *imat;        /* NULL unless collecting */
    uint8_t *xq;               /* Q8_K activations + 128 for the integer path: [max_batch][max_ncols] */
    float *xd;                 /* their scales: [max_batch][max_ncols / 256] */
    int32_t *xs;               /* their sums per 32: [max_batch][max_ncols / 32] */
    float *xr;                 /* activations rounded to a vec_dot_type: [max_batch][max_ncols] */
    /* mixture of experts */
    float *probs;              /* router probabilities [max_batch][n_expert] */
    int *sel;                  /* selected experts [max_batch][n_expert_used] */
    float *selw;               /* their weights [max_batch][n_expert_used] */
    int *rows;                 /* token rows routed to one expert [max_batch] */
    float *ex_in, *ex_out;     /* gathered rows [max_batch][n_embd], expert outputs [max_batch][n_embd] */
    float *moe;                /* per (token, slot) expert outputs [max_batch][n_expert_used][n_embd] */
    struct iqf_hess_acc *hess; /* NULL unless capturing Hessians (hessian.h) */
    float *ds;                 /* deepseek2 scratch (attn_mla.c, moe_ds.c), or NULL */
    iqf_eval_progress_fn progress; /* NULL or called after each chunk (iqf_context_set_progress) */
    void *progress_user;
    struct iqf_gdn_ctx *gdn;   /* qwen35: recurrent states and scratch (deltanet.c), or NULL */
    float *ple, *ple_g;        /* gemma4: per-layer inputs [max_batch][n_layer][n_ple], gate scratch [max_batch][n_ple] */
    float *ffa, *ffb;          /* gemma4's expert layers: dense FFN output, expert / router input [max_batch][n_embd] */
};

/* Statistics capture (capture.c), called by the forward code right before each product whose input
 * is captured (iqf_matmul captures nothing): x are the product's T input rows, ldx apart.
 * iqf_capture: the imatrix sums of a MUL_MAT (batches of at least 16 rows) and the Hessian.
 * iqf_capture_from: the Hessian over all T rows, the imatrix sums over rows first.. only (the
 * output head, whose product takes only the rows whose logits are wanted).
 * iqf_capture_expert: the n rows routed to expert e of a 3-D weight (llama-imatrix's MUL_MAT_ID:
 * every batch, per-expert sums and counts), and that expert's Hessian.
 * iqf_capture_mat: the n rows of a product with matrix h of a 3-D weight (deepseek2's per-head
 * attn_k_b / attn_v_b): a MUL_MAT's imatrix sums into matrix h's section; no Hessian slot. */
void iqf_capture(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T);
void iqf_capture_from(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T, int first);
void iqf_capture_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n);
void iqf_capture_mat(iqf_context *c, const iqf_weight *w, int h, const float *x, int64_t ldx, int n);

/* Hessian capture (hessian.c): X^T X of the rows if w owns a slot of c->hess. */
void iqf_hessian_accumulate(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T);
/* The same for the n rows routed to expert e of a 3-D weight (hessian.h). */
void iqf_hessian_accumulate_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n);

/* Y[t][n] = sum_k X[t][k] W[n][k] for t < T, n < W->nrows. X rows ldx apart, Y rows ldy apart. */
void iqf_matmul(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T, float *y,
                int64_t ldy);
/* Decode one row of w into out (w->ncols floats). */
void iqf_weight_row(const iqf_weight *w, int64_t row, float *out);

/* Integer path (mm_int8.c): types whose blocks decode exactly to int8 x sub-block scales. */
bool iqf_mm_int8_supported(int type, iqf_simd s);
size_t iqf_mm_int8_row_bytes(int64_t K);
void iqf_mm_quantize_act(const float *x, int64_t ldx, int T, int64_t K, uint8_t *xq, float *xd,
                         int32_t *xs);
void iqf_mm_int8_decode(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf);
size_t iqf_mm_int8_tile_bytes(int64_t K); /* buffer for one tile of IQF_MM_TILE rows */
void iqf_mm_int8_tile(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf, const uint8_t *xq,
                      const float *xd, const int32_t *xs, int T, float *Y, int64_t ldy, iqf_simd s);

/* ggml's vec_dot_type of a weight type (the type the CPU backend converts activations to before
 * the dot products): IQF_TYPE_Q8_0, Q8_1, Q8_K, F16, BF16, or -1 (used as they are: F32). */
int iqf_mm_act_type(int wtype);
/* Rounds one activation row of K values to vtype and back to float (y = d * q; y may be x).
 * For Q8_1, s (K/32 floats, or NULL) receives the blocks' fp16 s = d * sum q. */
void iqf_mm_round_act(int vtype, const float *x, float *y, int64_t K, float *s);

/* Mixture-of-experts pieces shared by forward.c, moe.c and moe_ds.c (forward.c):
 * ggml_soft_max_f32 over one row; the k best of n scores, descending, ties to the lower index
 * (ggml_argsort_top_k's order); expert e of a 3-D weight as a one-matrix view (no imatrix id). */
void iqf_softmax_row(float *x, int n);
void iqf_top_k(const float *s, int n, int k, int *out);
iqf_weight iqf_expert_view(const iqf_weight *w, int e);
/* Routed inputs: the rows of the tokens that chose expert e into c->ex_in, their slots into c->rows
 * (iqf_moe_gather, returns the count). Routed outputs: an expert's rows weighted into c->moe (iqf_moe_scatter), the K slots summed per
 * token (iqf_moe_sum), the routing weights normalized and scaled (iqf_moe_weights). */
int iqf_moe_gather(iqf_context *c, const float *xn, int nr, int K, int E, int e);
void iqf_moe_scatter(iqf_context *c, int n, int E);
void iqf_moe_sum(const iqf_context *c, int nr, int K, int E, float *out);
void iqf_moe_weights(float *w, int K, bool norm, float scale);
/* gpt-oss's mixture of experts (moe.c): biased router logits, softmax over the top k, experts
 * with biases and swiglu_oai; rows xn (nr of them, ld n_embd), result into out (ld n_embd). */
void iqf_moe_ffn_oai(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out);
/* YaRN (ggml_rope_yarn_corr_dims): the start and end correction dims for a rope base. */
void iqf_yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast, float beta_slow, float dims[2]);
/* deepseek2 blocks: scratch for a context (false: out of memory); MLA attention of rows r0..T-1
 * of layer l from c->xn (K/V of all T rows into the cache), after attn_output into out (ld n_embd);
 * DeepSeek MoE FFN (keyed gating, selection bias, groups, shared experts) of nr rows xn. */
bool iqf_ds_alloc(iqf_context *c);
void iqf_mla_attention(iqf_context *c, int l, int T, int pos, int r0, float *out);
/* Layer-range decoding (the calibration's probes, calib.c): one sequence of T <= max-batch tokens
 * at positions 0..T-1. iqf_decode_embed writes the T rows of embeddings (layer 0's input) into x.
 * iqf_decode_layers runs layers [l0, l1) with x (T x n_embd) as layer l0's input, in place: x
 * becomes layer l1's input (the final hidden state when l1 = n_layer), and with l1 = n_layer and
 * logits, the logits of rows first_out.. (then the last layer skips the rows before first_out, so
 * x's are not complete). x_embd: the embeddings, for the per-layer inputs of gemma4 (else NULL
 * is fine). A layer that reads an earlier layer's K/V (shared KV) needs that layer in the range.
 * Same floats as iqf_decode over the whole model. */
void iqf_decode_embed(iqf_context *c, const int32_t *tokens, int T, float *x);
iqf_status iqf_decode_layers(iqf_context *c, const int32_t *tokens, int T, const float *x_embd, int l0, int l1, float *x,
                             int first_out, float *logits, char *err, size_t errlen);
void iqf_moe_ds(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out);
/* ggml_rms_norm times the weight (forward.c), shared with the blocks above. */
void iqf_rmsnorm(const float *x, const float *w, float *y, int64_t n, float eps);

/* Vector helpers (SIMD chosen at run time). */
float iqf_dot_f32(iqf_simd s, const float *a, const float *b, int64_t n);
void iqf_axpy_f32(iqf_simd s, float a, const float *x, float *y, int64_t n); /* y += a*x */

#endif
