/*
 * kq_common.h - block layouts and the scale-search helpers shared by the legacy (q4_0..q8_0)
 * and K-quant (q2_K..q6_K) codecs.
 *
 * The helpers reproduce ggml 0.25.1's make_qx_quants / make_q3_quants / make_qkx2_quants /
 * make_qkx3_quants / make_qp_quants exactly (same float32 operation order, nearest_int as
 * iqf_nearest_int). The *_batch variants solve many independent groups at once; their SIMD
 * paths put one group per vector lane and run the reference's per-value operation sequence in
 * every lane, so every SIMD level returns the scalar reference's bits.
 */
#ifndef IQF_KQ_COMMON_H
#define IQF_KQ_COMMON_H

#include "codec.h"

#include "blocks.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define KQ_GROUP_MAX_EPS 1e-15f


/* q3_K's sub-block scale j (-32..31) of the 12 packed scale bytes. */
static inline int kq_q3_K_scale(const uint8_t *scales, int j) {
    int sc = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
    return (sc | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

/* q4_K / q5_K's sub-block scale and min j (0..63) of the 12 packed scale bytes q. */
static inline void kq_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The value of largest magnitude (the first one; 0 if none is above 0) and, in *amax, its magnitude:
 * the reference's `if (ax > amax) { amax = ax; max = x[i]; }` loop. */
static inline float kq_signed_max(int n, const float *x, float *amax) {
    float max = 0;
    *amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = fabsf(x[i]);
        if (ax > *amax) { *amax = ax; max = x[i]; }
    }
    return max;
}

/* ---- scalar references (one group) ---- */
float iqf_kq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw);
float iqf_kq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse);
/* make_qkx2_quants and make_qkx3_quants (identical when weights are given; weights NULL means
 * x*x as in make_qkx3_quants). */
float iqf_kq_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                         bool use_mad);
float iqf_kq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights);

/* ---- batches of G independent groups of n values (n <= 32), group g at x + g*n ----
 * Results are bitwise those of calling the scalar function per group. simd selects the path. */

/* make_qx_quants(n, nmax, x_g, L_g, 1, qw_g) (qw NULL: weights x*x); scales[g] = result. */
void iqf_kq_qx_batch(iqf_simd simd, int G, int n, int nmax, const float *x, const float *qw, int8_t *L,
                 float *scales);
/* make_q3_quants(n, nmax, x_g, L_g, true). */
void iqf_kq_q3_batch(iqf_simd simd, int G, int n, int nmax, const float *x, int8_t *L, float *scales);
/* make_qkx2/3_quants(n, nmax, x_g, w_g, L_g, &mins[g], ., rmin, rdelta, nstep, use_mad). */
void iqf_kq_qkx_batch(iqf_simd simd, int G, int n, int nmax, const float *x, const float *w, uint8_t *L,
                  float *scales, float *mins, float rmin, float rdelta, int nstep, bool use_mad);


/* w[j] = qw[j] * sqrtf(sigma2 + x[j]*x[j]) for j < n (the *_impl encoders' weights). */
void iqf_kq_impl_weights(iqf_simd simd, int64_t n, const float *x, const float *qw, float sigma2, float *w);

/* Final re-quantization at the decoded scales, for ng groups of gs values (gs a multiple of 16):
 * where d[g] != 0, L[g*gs+i] = off + clamp(nearest_int((x + dm[g]) / d[g]), lo, hi)
 * (dm NULL: nearest_int(x / d[g])); groups with d[g] == 0 keep their L. */
void iqf_kq_requant(iqf_simd simd, int ng, int gs, const float *x, const float *d, const float *dm,
                int lo, int hi, int off, uint8_t *L);

#endif
