/*
 * kq_best.h - the IQF_MODE_BEST search of the K-quants (q2_K..q6_K), plain C (the reference;
 * every SIMD level runs this code, so best-mode bytes are the same at every level).
 *
 * A super-block of 256 weights is described, whatever its packing, as
 *     y[i] = (d * k[j]) * q[i] - (dmin * m[j])      (j = the sub-block of i)
 * with d, dmin fp16, k/m the integer sub-block scale/min and q the integer code, evaluated in
 * float exactly as ggml's decoders do. kquants.c unpacks the compat encoder's block into this
 * form, iqf_kqb_search improves it, and kquants.c packs the result.
 */
#ifndef IQF_KQ_BEST_H
#define IQF_KQ_BEST_H

#include "codec.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kqb_fmt {
    int nsub, sublen; /* sub-blocks per super-block and values per sub-block (nsub*sublen = 256) */
    int qlo, qhi;     /* code range */
    int klo, khi;     /* sub-block scale range */
    int mlo, mhi;     /* sub-block min range (mhi = 0: no mins, dmin unused) */
    /* search parameters */
    int win;          /* integer scales tried: +-win around each reference */
    int winm;         /* integer mins tried for each scale: +-winm around the reference */
    int scan;         /* symmetric types: > 0 scans +-scan steps for the references (else compat's);
                       * -1: compat's reference only, not also the previous choice (one window:
                       * at most 2 win + 2 candidates, one batch of 8 lanes for win 3) */
    float scan_step;  /* step of that scan */
    int nit;          /* alternations (sub-block integers, then d/dmin) per start */
    int nstart;       /* bit 0: start from the given block; bit 1: from d/dmin of the largest references */
    float sig;        /* the objective's sigma2 factor (below) */
} kqb_fmt;

typedef struct kqb_rep {
    uint16_t hd, hdm;  /* fp16 d, dmin */
    int16_t k[16], m[16];
    int8_t q[QK_K];
} kqb_rep;

/*
 * The objective: sum over the super-block of w_i (x_i - y_i)^2 with
 *     w_i = qw_i * sqrt(sigma2 + x_i^2)   (qw NULL: w_i = sqrt(sigma2 + x_i^2)),
 *     sigma2 = f->sig * mean(x^2),
 * computed on x and qw scaled by their block maxima (the argmin does not change) so that nothing
 * overflows.
 *
 * r: a valid start on entry (compat's block); on return the representation with the lowest
 (compat's block); on return the representation with the lowest
 * weighted error found (never higher than the start's; the start is kept on ties).
 * sref0/mref0: the continuous per-sub-block scale (and min, y = s*q - mo) the compat search
 * found (mref0 unused, may be NULL, for symmetric types; sref0 unused when f->scan > 0).
 * Every simd level returns the same bits. */
void iqf_kqb_search(iqf_simd simd, const kqb_fmt *f, const float *x, const float *qw,
                const float *sref0, const float *mref0, kqb_rep *r);

/* kquants.c: best mode's search for one q2_K..q6_K super-block blk (in place) from its own header
 * only (no compat search, one start, at most nit alternations, nit <= 0: the type's), scored on
 * x with importance qw (may be NULL). False (blk untouched) for another type. */
bool iqf_kq_best_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nit);

#endif
