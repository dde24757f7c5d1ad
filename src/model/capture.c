/*
 * capture.c - statistics capture beside the forward pass's matrix products.
 *
 * The forward code (forward.c, attn_mla.c, moe.c, moe_ds.c, deltanet.c) calls one of these right
 * before each product whose input is captured; iqf_matmul itself computes only the product. Two
 * accumulators may be attached to the context, independently:
 *  - c->imat (eval.c's imatrix collection): per input column, the sum of x^2 over the product's
 *    rows, in double, row by row, and the row count, as llama-imatrix collects them: a MUL_MAT
 *    (a 2-D weight, or one matrix of a 3-D weight) only in batches of at least 16 rows, a
 *    MUL_MAT_ID (the experts) in every batch, per expert;
 *  - c->hess (hessian.c): X^T X of the rows if the weight owns a slot (hessian.h).
 * Weights without an imatrix id (views: id -1) take no sums. The x^2 sums are one function
 * (imat_add) for the three kinds of product; only the batch rule depends on the kind.
 */
#include "model.h"

/* llama-imatrix's minimum batch for a MUL_MAT's collection (its "ne[1] >= 16" rule). */
#define IMAT_MIN_ROWS 16

/* Matrix mat's section of w's imatrix sums: x^2 of n rows (ldx apart), column by column in
 * double, and the count. */
static void imat_add(iqf_imat_acc *a, const iqf_weight *w, int mat, const float *x, int64_t ldx, int n) {
    double *s = a->sum2[w->id] + (int64_t)mat * w->ncols;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (int64_t)t * ldx;
        for (int64_t k = 0; k < w->ncols; k++) s[k] += (double)xr[k] * xr[k];
    }
    a->count[w->id][mat] += n;
}

void iqf_capture_from(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T, int first) {
    const int n = T - first;
    if (c->imat && w->id >= 0 && n >= IMAT_MIN_ROWS) imat_add(c->imat, w, 0, x + (int64_t)first * ldx, ldx, n);
    if (c->hess) iqf_hessian_accumulate(c, w, x, ldx, T);
}

void iqf_capture(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T) {
    iqf_capture_from(c, w, x, ldx, T, 0);
}

void iqf_capture_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n) {
    if (c->hess) iqf_hessian_accumulate_expert(c, w, e, x, ldx, n);
    if (c->imat && w->id >= 0 && n > 0) imat_add(c->imat, w, e, x, ldx, n);
}

void iqf_capture_mat(iqf_context *c, const iqf_weight *w, int h, const float *x, int64_t ldx, int n) {
    if (c->imat && w->id >= 0 && n >= IMAT_MIN_ROWS) imat_add(c->imat, w, h, x, ldx, n);
}
