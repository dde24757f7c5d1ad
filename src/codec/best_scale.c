/*
 * best_scale.c - best-mode scale searches for the uniform 32-weight formats (see best_scale.h).
 *
 * Written once, in C with GCC/Clang vector extensions. The computation is defined on 16 logical
 * lanes: in the candidate loops lane c is one candidate scale (its sums run over the 32 values in
 * a fixed order: two chains, even and odd values, added at the end), in the element loops lane u
 * sums the values j = u, u+16, and the 16 lanes are added in a fixed tree. The file is compiled
 * three times (vec_lanes.h and best_scale_lanes.h, included once per width): plain (VL_W 4: vector
 * extensions only, any target), under target("avx2") (8 lanes) and under target("avx512f,...")
 * (16 lanes); each covers the 16 logical lanes with native vectors
 * and performs the same IEEE operations per lane, so every level returns the same bytes (no FMA:
 * the tree builds with -ffp-contract=off; no reassociation). Rounding: the float magic-number
 * trick after clamping to the grid (round half to even, as iqf_nearest_int).
 *
 * IQ4's grid kernels (iqf_best_grid_cands/_eval) live here too, for the same reason.
 *
 * All arithmetic is on values normalized by the block's max |x| and on weights normalized to a
 * max of 1, so nothing overflows whatever the magnitude of the input.
 */
#include "best_scale.h"
#include "blocks.h"

/* Vectors wider than the plain pass's ABI between always-inlined helpers: no ABI crosses. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#include <math.h>
#include <stdbool.h>
#include <string.h>

#define QK IQF_BEST_QK
#define MAGIC 12582912.f /* 1.5 * 2^23: (v + MAGIC) - MAGIC rounds |v| < 2^22 half to even */
#define FP16_MAX_BITS 0x7bffu
/* Below this max |x| every fp16 scale but 0 reconstructs worse than zeros (the smallest fp16
 * subnormal is 5.96e-8): the block is stored as zeros. */
#define BS_TINY 1e-9f

/* Symmetric candidates: the block's max |x| maps to level L + t (L = qmin or qmax: both ends),
 * t = k * SYM_T / SYM_NT for -SYM_NT <= k < SYM_NT (48 candidates). */
#define SYM_NT 12
#define SYM_T 1.2f
#define MAXC 96 /* candidate capacity (multiple of 16) */
#define REFINE_ITERS 4 /* fp16 round / re-round / re-solve rounds */
#define WALK_STEPS 4   /* fp16 neighbour steps */
/* The fast search's rounds and fp16 neighbour steps per type (by the top of its grid: q4_0 7,
 * q5_0 15, q8_0 127; q4_1/q5_1's integer search has its own constants, best_scale_lanes.h). */
#define FAST_ITERS 2                          /* q8_0: least-squares rescales */
#define FAST_WALK 1                           /* q8_0: fp16 neighbour steps */
#define FASTS_ITERS (qmax == 7 ? 2 : 2)       /* q4_0 / q5_0: rounds */
#define FASTS_WALK (qmax == 7 ? 1 : 1)        /* q4_0 / q5_0: fp16 neighbour steps */
#ifndef SYM_PAIRS
#define SYM_PAIRS 2                           /* q4_0 / q5_0: start pairs */
#endif
#ifndef SYM_T2
#define SYM_T2 0.5f                           /* q4_0 / q5_0: the second pair's finer grid */
#endif

/* Normalized weights: max 1. NaN counts as 0; if the largest weight is infinite, the infinite
 * ones count 1 and the rest 0; if every weight is 0, all count 1. */
static void norm_weights(const float *w, float *wn) {
    float mw = 0;
    for (int j = 0; j < QK; j++)
        if (w[j] > mw) mw = w[j];
    if (mw == 0) {
        for (int j = 0; j < QK; j++) wn[j] = 1;
    } else if (isinf(mw)) {
        for (int j = 0; j < QK; j++) wn[j] = isinf(w[j]) ? 1.f : 0.f;
    } else {
        for (int j = 0; j < QK; j++) wn[j] = w[j] >= 0 ? w[j] / mw : 0.f; /* NaN -> 0 */
    }
}

/* fp16 of v, saturated to the largest finite fp16 (a stored scale must decode finite). */
static iqf_half fp16_sat(double v) {
    if (v > 65504.0) return (iqf_half)FP16_MAX_BITS;
    if (v < -65504.0) return (iqf_half)(0x8000u | FP16_MAX_BITS);
    return IQF_FP32_TO_FP16((float)v);
}

/* The fp16 `steps` ulps away from h in magnitude (same sign); false if out of range. */
static bool fp16_step(iqf_half h, int steps, iqf_half *out) {
    int nm = (h & 0x7fff) + steps;
    if (nm < 0 || nm > (int)FP16_MAX_BITS) return false;
    *out = (iqf_half)((h & 0x8000) | nm);
    return true;
}

/* True if the normalized weights (written to wn) are all 1: the fast search's plain squared error. */
static bool uniform_weights(const float *w, float *wn) {
    norm_weights(w, wn);
    bool u = true;
    for (int j = 0; j < QK; j++) u &= wn[j] == 1.f;
    return u;
}

/* A row's mean square, summed in order as legacy.c's row_sigma2 (copied: the same weights as
 * legacy.c's best_row computes, so iqf_best_legacy_row writes the same bytes). */
static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

/* Packing of one block's integers (as legacy.c's pack_q4 / pack_q5 and best_row). kind: 0 q4_0,
 * 1 q4_1, 2 q5_0, 3 q5_1, 4 q8_0. */
static void pack_block(int kind, const uint8_t *l, iqf_half d, iqf_half m, void *vy, int64_t i) {
    uint8_t *qs;
    switch (kind) {
    case 0: ((block_q4_0 *)vy)[i].d = d; qs = ((block_q4_0 *)vy)[i].qs; break;
    case 1: ((block_q4_1 *)vy)[i].d = d; ((block_q4_1 *)vy)[i].m = m; qs = ((block_q4_1 *)vy)[i].qs; break;
    case 2: ((block_q5_0 *)vy)[i].d = d; qs = ((block_q5_0 *)vy)[i].qs; break;
    case 3: ((block_q5_1 *)vy)[i].d = d; ((block_q5_1 *)vy)[i].m = m; qs = ((block_q5_1 *)vy)[i].qs; break;
    default: {
        block_q8_0 *b = (block_q8_0 *)vy + i;
        b->d = d;
        for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)(l[j] - 127);
        return;
    }
    }
    for (int j = 0; j < 16; ++j) qs[j] = (uint8_t)((l[j] & 0xF) | ((l[j + 16] & 0xF) << 4));
    if (kind >= 2) {
        uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            qh |= (uint32_t)((l[j] & 0x10) >> 4) << j;
            qh |= (uint32_t)((l[j + 16] & 0x10) >> 4) << (j + 16);
        }
        uint8_t *qhb = kind == 2 ? ((block_q5_0 *)vy)[i].qh : ((block_q5_1 *)vy)[i].qh;
        memcpy(qhb, &qh, 4);
    }
}

static inline float sum16(const float *a) {
    float s[8];
    for (int u = 0; u < 8; u++) s[u] = a[u] + a[u + 8];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

#define VL_W 4
#define VL_TGT
#define VL_SFX(name) name##_plain
#include "vec_lanes.h"
#include "best_scale_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "best_scale_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "best_scale_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

#ifdef IQF_ARCH_X86
#define BS_DISPATCH(call)                                                                          \
    do {                                                                                           \
        if (simd == IQF_SIMD_AVX512) return call##_avx512;                                         \
        if (simd == IQF_SIMD_AVX2) return call##_avx2;                                             \
        return call##_plain;                                                                       \
    } while (0)
#else
#define BS_DISPATCH(call) do { (void)simd; return call##_plain; } while (0)
#endif

/* (each dispatch returns the variant's function pointer, called below) */
typedef void (*weights_fn)(const float *, const float *, float, float *);
typedef iqf_half (*sym_fn)(const float *, const float *, int, int, uint8_t *);
typedef void (*asym_fn)(const float *, const float *, int, uint8_t *, iqf_half *, iqf_half *);
typedef void (*gcands_fn)(const iqf_best_grid16 *, const float *, const float *, float *, int,
                          float *, float *);
typedef float (*geval_fn)(const iqf_best_grid16 *, const float *, const float *, float, uint8_t *,
                          float *, float *);
static weights_fn pick_weights(iqf_simd simd) { BS_DISPATCH(weights); }
static gcands_fn pick_gcands(iqf_simd simd) { BS_DISPATCH(grid_cands); }
static geval_fn pick_geval(iqf_simd simd) { BS_DISPATCH(grid_eval); }
void iqf_best_grid_cands(iqf_simd simd, const iqf_best_grid16 *g, const float *x, const float *w,
                         float *ids, int nc, float *sxq, float *sq2) {
    pick_gcands(simd)(g, x, w, ids, nc, sxq, sq2);
}
float iqf_best_grid_eval(iqf_simd simd, const iqf_best_grid16 *g, const float *x, const float *w,
                         float s, uint8_t *L, float *sxq, float *sq2) {
    return pick_geval(simd)(g, x, w, s, L, sxq, sq2);
}
static sym_fn pick_sym(iqf_simd simd) { BS_DISPATCH(sym_block); }
typedef void (*row_fn)(int, const float *, void *, int64_t, const float *);
static row_fn pick_row(iqf_simd simd) { BS_DISPATCH(legacy_row); }
void iqf_best_legacy_row(iqf_simd simd, int kind, const float *x, void *vy, int64_t n, const float *qw) {
    pick_row(simd)(kind, x, vy, n, qw);
}
static asym_fn pick_asym(iqf_simd simd) { BS_DISPATCH(asym_block); }

void iqf_best_weights(iqf_simd simd, const float *x, const float *qw, float sigma2, float *w) {
    pick_weights(simd)(x, qw, sigma2, w);
}
iqf_half iqf_best_sym_block(iqf_simd simd, const float *x, const float *w, int qmin, int qmax,
                            uint8_t *L) {
    return pick_sym(simd)(x, w, qmin, qmax, L);
}
void iqf_best_asym_block(iqf_simd simd, const float *x, const float *w, int nmax, uint8_t *L,
                         iqf_half *d, iqf_half *m) {
    pick_asym(simd)(x, w, nmax, L, d, m);
}

