/*
 * kq_best.c - IQF_MODE_BEST search for q2_K..q6_K (see kq_best.h).
 *
 * The search works on the weights as the decoder reconstructs them: every candidate is scored by
 * the weighted squared error of y = (d*k)*q - dmin*m, with d and dmin already rounded to fp16
 * and k, m, q the integers that will be stored.
 *
 *  1. Per sub-block references: the compat search's continuous scale/min, or (f->scan > 0) a
 *     dense scan of inverse scales putting the largest |x| at either end of the code range, the
 *     codes re-rounded and the least-squares scale re-solved for each candidate.
 *  2. From a start (the compat block; optionally a second one whose d/dmin put the largest
 *     reference at the end of the integer range), alternate f->nit times: at the fixed fp16
 *     d/dmin every sub-block takes the integer scale in a window around its references (and the
 *     integer min by least squares for that scale) with the lowest error, its codes re-rounded;
 *     then d/dmin are re-solved by least squares for the chosen integers and rounded to fp16.
 *  3. The lowest error seen wins; the start (compat's block) is kept unless something is lower.
 *
 * Written once in plain C. Sums over the values of a sub-block go to 8 partial sums (value i to
 * lane i % 8, in order) added in a fixed tree, so the code can be compiled for any instruction
 * set (kq_best_lanes.h, included once per instruction set: plain, AVX2, AVX-512) and every copy
 * gives the same bits: only element-wise IEEE operations, no contraction (-ffp-contract=off).
 */

#include "kq_best.h"

#include <math.h>
#include <string.h>

#define KQB_FP16_MAX 65504.f
#ifndef KQB_Q3_WIN
#define KQB_Q3_WIN 2
#endif
#ifndef KQB_Q3_NIT
#define KQB_Q3_NIT 1
#endif
#define KQB_MAGIC 12582912.f /* 1.5 * 2^23: (v + M) - M rounds |v| < 2^22 half to even */

static inline float h2f(uint16_t h) { return IQF_FP16_TO_FP32(h); }

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline uint16_t f2h_finite(double v) {
    float f = (float)v;
    if (!(f == f)) f = 0;
    f = clampf(f, -KQB_FP16_MAX, KQB_FP16_MAX);
    return IQF_FP32_TO_FP16(f);
}

/* The fixed reduction of 8 partial sums. */
static inline float red8(const float *a) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* The nearest integer to v/d in [lo, hi] (v/d may be huge, d zero). */
static inline int int_near(float v, float d, int lo, int hi) {
    if (d == 0) return lo > 0 ? lo : hi < 0 ? hi : 0;
    float c = v / d;
    if (c != c) return lo > 0 ? lo : hi < 0 ? hi : 0;
    return iqf_nearest_int(clampf(c, (float)lo, (float)hi));
}

#ifdef IQF_ARCH_X86
/* SIMD copies: the same code; the two hot kernels (errs, sym_ref) run one candidate per lane of
 * vec_lanes.h's vectors (8 under AVX2, 16 under AVX-512), the same operations lane by lane as the
 * scalar loops, so the same bits (no NaN reaches a comparison: inputs are finite and steps
 * non-zero). */
#define KQB_VEC 1
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "kq_best_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "kq_best_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#undef KQB_VEC
#endif
#define KQB_VEC 1
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "kq_best_lanes.h"
#include "lanes_neon.h"
#undef KQB_VEC
#define KQB_VEC 0
#define VL_TGT
#define VL_SFX(name) name##_scalar
#include "kq_best_lanes.h"
#undef VL_TGT
#undef VL_SFX
#undef KQB_VEC

void iqf_kqb_search(iqf_simd simd, const kqb_fmt *f0, const float *x, const float *qw,
                const float *sref0, const float *mref0, kqb_rep *r) {
    const kqb_fmt *f = f0;
    /* q3_K without an imatrix: a cheaper schedule, to keep ggml's speed (its reference encoder
     * is a one-pass search there; docs/PERFORMANCE.md). The table in kquants.c still says 3
     * alternations, window +-2. */
    kqb_fmt f3;
    if (!qw && f0->qlo == -4 && f0->qhi == 3 && f0->mhi == 0) {
        f3 = *f0;
        f3.win = KQB_Q3_WIN;
        f3.nit = KQB_Q3_NIT;
        f3.scan = -1;
        f = &f3;
    }
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) { search_avx512(f, x, qw, sref0, mref0, r); return; }
    if (simd == IQF_SIMD_AVX2) { search_avx2(f, x, qw, sref0, mref0, r); return; }
#endif
    if (simd == IQF_SIMD_NEON) { search_neon(f, x, qw, sref0, mref0, r); return; }
    (void)simd;
    search_scalar(f, x, qw, sref0, mref0, r);
}

