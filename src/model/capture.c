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
 * Weights without an imatrix id (views: id -1) take no sums.
 */
#include "model.h"

void iqf_capture_from(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T, int first) {
    const int n = T - first;
    if (c->imat && w->id >= 0 && n >= 16) {
        /* llama-imatrix: sum of x^2 per input column over every token row of batches >= 16. */
        double *s = c->imat->sum2[w->id];
        for (int t = 0; t < n; t++) {
            const float *xr = x + (int64_t)(first + t) * ldx;
            for (int64_t k = 0; k < w->ncols; k++) s[k] += (double)xr[k] * xr[k];
        }
        c->imat->count[w->id][0] += n;
        c->imat->ncall[w->id]++;
    }
    if (c->hess) iqf_hessian_accumulate(c, w, x, ldx, T);
}

void iqf_capture(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T) {
    iqf_capture_from(c, w, x, ldx, T, 0);
}

void iqf_capture_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n) {
    if (c->hess) iqf_hessian_accumulate_expert(c, w, e, x, ldx, n);
    if (!c->imat || w->id < 0 || n <= 0) return;
    /* llama-imatrix collects MUL_MAT_ID for every batch size: per expert sums and counts */
    double *s = c->imat->sum2[w->id] + (int64_t)e * w->ncols;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (int64_t)t * ldx;
        for (int64_t k = 0; k < w->ncols; k++) s[k] += (double)xr[k] * xr[k];
    }
    c->imat->count[w->id][e] += n;
}
