/*
 * feedback.h - GPTQ-style error feedback (Frantar et al. 2022; LDLQ in QuIP) into the stock block
 * formats, for `iqforge quantize --hessian`.
 *
 * Per tensor: H (block-diagonal, hessian_file.h) is dampened, H' = H + damp * mean(diag H) * I,
 * and U = the upper Cholesky factor of H'^-1 is computed in double (per diagonal block).
 * Each row is then processed on its own, by one thread, left to right in units of the format's
 * independent block (256 for K/IQ super-blocks, 32 for the legacy formats):
 *   - the unit is encoded from the row's current (already updated) weights with the ordinary
 *     encoder (iqf_quantize, any mode) and decoded back to q;
 *   - for every column i of the unit in order: e = (w_i - q_i) / U_ii and w_j -= e * U_ij for
 *     the later columns j of the same diagonal block of H (later columns of the unit included,
 *     which makes the next e the exact conditional error; their codes are already fixed).
 * For the types fb_blocks.c can rewrite, the unit's codes are then re-chosen column by column
 * under the encoder's scales with the same recursion (GPTQ inside the unit; a grid type's group
 * of 8 at a time), and the unit is re-encoded from the targets that gives while its loss drops:
 * K-quants with best mode's warm-started search (iqf_kq_best_refine), IQ3_XXS and the IQ2 types
 * with a warm-started IQ search (iq_refine.h), the others with the full encoder; how many
 * re-encodings each type gets is set in feedback.c (iqf_fb_quantize_rows).
 * The legacy encoders with an importance matrix (q4_0, q4_1, q5_0, q5_1) weight by a row-wide
 * sigma2, so for them the unit is taken from an encoding of the whole current row.
 * The inner encoder's importance is the caller's imatrix row, or diag(H) when there is none.
 * With a diagonal H no weight changes, so the bytes are the plain encoder's with that imatrix.
 * Rows are independent: the output does not depend on the thread count.
 */
#ifndef IQF_QUANTIZE_FEEDBACK_H
#define IQF_QUANTIZE_FEEDBACK_H

#include "iqforge.h"

#include <stdio.h>

/* The factor of one tensor's H: n rows of bs (row k*bs+i = row i of U_k). */
typedef struct iqf_fb_factor {
    int64_t n, bs;
    float *U;
    float *diag;     /* the undampened diagonal of H (n), the default inner importance */
    int n_dead;      /* columns with H_ii == 0 (set to the mean diagonal before dampening) */
} iqf_fb_factor;

/* Factors H (n*bs floats, hessian_file.h layout), the diagonal blocks shared out over n_threads
 * (<= 0: one per CPU; the result does not depend on it). U = J L^-1 J with J the reversal of the
 * block's index order and J H' J = L L^T (one Cholesky and one triangular inverse per block).
 * Errors: IQF_E_INVALID_ARG (shape, damp < 0), IQF_E_NONFINITE (H not finite, or not positive
 * definite after dampening: "singular"), IQF_E_NOMEM. */
iqf_status iqf_fb_factor_make(const float *H, int64_t n, int64_t bs, double damp, int n_threads, iqf_fb_factor *f,
                              char *err, size_t errlen);
void iqf_fb_factor_free(iqf_fb_factor *f);

/* Encodes nrows rows of ncols (== f->n) with feedback. imatrix: NULL (diag H is used) or ncols
 * weights. Errors as iqf_quantize. */
iqf_status iqf_fb_quantize_rows(const iqf_fb_factor *f, int type, const float *src, void *dst,
                                int64_t nrows, int64_t ncols, const float *imatrix,
                                const iqf_quantize_params *params, char *err, size_t errlen);

/* The pipeline's handle: the Hessian file checked against the model, factors cached by name. */
typedef struct iqf_feedback iqf_feedback;

/* Opens `path` and checks it against the model `model` (an iqf_gguf*): same architecture, name,
 * n_embd and n_layer, and every weight with an entry has that entry's width. damp: fraction of
 * mean(diag H). log: where per-tensor notes go (NULL: none). Errors: IQF_E_IO, IQF_E_FORMAT,
 * IQF_E_NONFINITE, IQF_E_SHAPE ("made for another model", "wrong size"), IQF_E_INVALID_ARG. */
iqf_status iqf_feedback_open(const char *path, const void *model, double damp, FILE *log,
                             iqf_feedback **out, char *err, size_t errlen);
void iqf_feedback_free(iqf_feedback *fb);

/* Metadata for the output: quantize.feedback.{file,token_count,damp}. */
iqf_status iqf_feedback_write_meta(const iqf_feedback *fb, iqf_gguf_writer *w);

/* Encodes a slab of rows of `tensor`: with feedback when its Hessian exists and is usable,
 * otherwise with iqf_quantize (and a note in the log, once per tensor). Errors as iqf_quantize. */
/* `expert`: which expert of a 3-D tensor the rows belong to (0 for a 2-D one); a per-expert entry
 * gives each expert its own factor, and an expert that saw no calibration rows (all-zero matrix)
 * the plain encoder (logged). */
iqf_status iqf_feedback_quantize(iqf_feedback *fb, const char *tensor, int64_t expert, int type, const float *src,
                                 void *dst, int64_t nrows, int64_t ncols, const float *imatrix,
                                 const iqf_quantize_params *params, char *err, size_t errlen);

#endif
