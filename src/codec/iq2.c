/*
 * iq2.c - IQ2_XXS (2.0625 bpw), IQ2_XS (2.3125 bpw) and IQ2_S (2.5625 bpw): decoders and the
 * compat encoders, byte-identical to ggml 0.25.1 (quantize_row_iq2_xxs_impl / iq2_xs_impl /
 * iq2_s_impl, make_qp_quants; docs/FORMATS.md sections 0, 5 and 9).
 *
 * How the encoders stay exact while being 4-8x faster than ggml (docs/perf/iq2.md): every
 * float operation that produces a value ggml compares or stores is done with the same operands in
 * the same order (no FMA: the tree builds with -ffp-contract=off). What changes is only how the
 * work is arranged:
 *  - the neighbour search evaluates sum_i w_i (s q_i - x_i)^2 for grid points that share the 3
 *    possible q per coordinate, so the 24 terms (w_i*diff)*diff are computed once per
 *    (scale, group) and each neighbour's distance is the same sequential sum of 8 table values;
 *    SIMD: one neighbour per lane, two short lists per vector; one-point lists need no search;
 *  - the 13/19 scale candidates of a sub-block are independent until ggml's sequential
 *    acceptance test: rounding and sumqx/sumq2 run one candidate per lane (each lane in ggml's
 *    order), the acceptance test then runs in ggml's order;
 *  - kmap lookups of a sub-block are batched and the neighbour lists prefetched.
 * Per sub-block the steps are: weights/signs, candidates (round, resolve, sums, accept),
 * refinement at the accepted scale, packing; a better-than-compat mode can later re-choose the
 * grid points at the final decoded scale between refinement and packing.
 * Scalar, AVX2 and AVX-512 variants (ctx->simd) give identical bytes.
 */
#include "codec.h"
#include "iqgrid.h"
#include "iq_refine.h"
#include "util/fma.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define GROUP_MAX_EPS 1e-15f
#define GROUP_MAX_EPS_IQ2_S 1e-8f




/* ------------------------------------------------------------------------------------------ */
/* Tables                                                                                      */

/* Decode grids as floats (bytes 8, 25, 43 per level: ggml-common.h's iq2xxs/iq2xs/iq2s_grid),
 * the sign expansion (7 stored bits, even parity) and +-1 factors per sign byte. */
static float dec_xxs[256][8], dec_xs[512][8], dec_s[1024][8];
static float sgnf[256][8];
static uint8_t ksigns[128];
static const iqf_iqgrid *grid_xxs, *grid_xs, *grid_s;

static void float_grid(const uint16_t *keys, int size, float (*out)[8]) {
    static const int8_t lev[3] = { 8, 25, 43 };
    uint64_t tab[1024];
    iqf_iqgrid_decode_table(keys, size, lev, tab);
    for (int k = 0; k < size; k++)
        for (int j = 0; j < 8; j++) out[k][j] = (float)(uint8_t)(tab[k] >> 8 * j);
}

static void init_decode(void) {
    float_grid(iqf_iq2xxs_keys, 256, dec_xxs);
    float_grid(iqf_iq2xs_keys, 512, dec_xs);
    float_grid(iqf_iq2s_keys, 1024, dec_s);
    for (int i = 0; i < 128; i++) ksigns[i] = (uint8_t)(i | (__builtin_popcount(i) & 1 ? 0x80 : 0));
    for (int s = 0; s < 256; s++)
        for (int j = 0; j < 8; j++) sgnf[s][j] = s & (1 << j) ? -1.f : 1.f;
}
static pthread_once_t decode_once = PTHREAD_ONCE_INIT;

/* A grid is NULL if malloc failed while building it; the table-init hook then makes iqf_quantize
 * return IQF_E_NOMEM (decoding needs no grid). */
static void init_xxs_tables(void) { grid_xxs = iqf_iqgrid_get(IQF_IQGRID_IQ2XXS); }
static void init_xs_tables(void) { grid_xs = iqf_iqgrid_get(IQF_IQGRID_IQ2XS); }
static void init_s_tables(void) { grid_s = iqf_iqgrid_get(IQF_IQGRID_IQ2S); }
static pthread_once_t once_xxs = PTHREAD_ONCE_INIT, once_xs = PTHREAD_ONCE_INIT,
                      once_s = PTHREAD_ONCE_INIT;

static void init_iq2_xxs(void) {
    pthread_once(&decode_once, init_decode);
    pthread_once(&once_xxs, init_xxs_tables);
}
static void init_iq2_xs(void) {
    pthread_once(&decode_once, init_decode);
    pthread_once(&once_xs, init_xs_tables);
}
static void init_iq2_s(void) {
    pthread_once(&decode_once, init_decode);
    pthread_once(&once_s, init_s_tables);
}
/* The iq2 family's table-init hook (codec.c families[]): the type's grid, false if it could not be
 * built. */
bool iqf_iq2_tables_init(int type) {
    switch (type) {
    case IQF_TYPE_IQ2_XXS: init_iq2_xxs(); return grid_xxs != NULL;
    case IQF_TYPE_IQ2_XS: init_iq2_xs(); return grid_xs != NULL;
    default: init_iq2_s(); return grid_s != NULL;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Decoders                                                                                    */

/* ggml: y[j] = db * grid[j] * (sign ? -1.f : 1.f), the same two products */
static inline void decode8(float *restrict y, float db, const float *restrict grid, uint8_t signs) {
    const float *restrict sg = sgnf[signs];
    for (int j = 0; j < 8; j++) y[j] = db * grid[j] * sg[j];
}

static void dequantize_row_iq2_xxs(const void *vx, float *y, int64_t n) {
    pthread_once(&decode_once, init_decode);
    const block_iq2_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = iqf_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t aux[2];
            memcpy(aux, x[i].qs + 4 * ib, 8);
            const float db = d * (0.5f + (float)(aux[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                decode8(y, db, dec_xxs[(aux[0] >> 8 * l) & 255], ksigns[(aux[1] >> 7 * l) & 127]);
                y += 8;
            }
        }
    }
}

static void dequantize_row_iq2_xs(const void *vx, float *y, int64_t n) {
    pthread_once(&decode_once, init_decode);
    const block_iq2_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = iqf_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                uint16_t q = x[i].qs[4 * ib + l];
                decode8(y, db[l / 2], dec_xs[q & 511], ksigns[q >> 9]);
                y += 8;
            }
        }
    }
}

static void dequantize_row_iq2_s(const void *vx, float *y, int64_t n) {
    pthread_once(&decode_once, init_decode);
    const block_iq2_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = iqf_fp16_to_fp32(x[i].d);
        const uint8_t *qs = x[i].qs, *signs = qs + QK_K / 8;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            float db[2];
            db[0] = d * (0.5f + (float)(x[i].scales[ib] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (float)(x[i].scales[ib] >> 4)) * 0.25f;
            for (int l = 0; l < 4; l++) {
                int idx = qs[l] | ((x[i].qh[ib] << (8 - 2 * l)) & 0x300);
                decode8(y, db[l / 2], dec_s[idx], signs[l]);
                y += 8;
            }
            qs += 4;
            signs += 4;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Encoder building blocks                                                                     */
/*                                                                                             */
/* A sub-block's scale search tries NC candidate inverse scales. Per candidate and 8-value group:
 * round to levels 0..2 (key u), look u up in kmap, and if it is off the grid pick the best
 * neighbour at that candidate's scale. Then sumqx = sum_i (w_i x_i) q_i and sumq2 =
 * sum_i (w_i q_i) q_i in index order, and ggml's sequential acceptance test. The candidates are
 * independent until the acceptance test, so the rounding and the sums run with one candidate per
 * SIMD lane (each lane doing exactly ggml's operations in ggml's order); the neighbour searches
 * run one grid neighbour per lane.                                                            */

#define MAXC 32 /* candidate lanes (IQ2_XS/S use 19, IQ2_XXS 13) */

/* Full unrolling of the 8-coordinate loops: constant shifts, tables kept in registers. */
#define IQF_UNROLL8 _Pragma("GCC unroll 8")

typedef struct cand_set {
    _Alignas(64) float id[MAXC]; /* inverse scale */
    _Alignas(64) float sc[MAXC]; /* 1/id: the scale of the neighbour search */
    _Alignas(64) int32_t key[4][MAXC]; /* per group: rounded key, then the grid point's key */
    _Alignas(64) float sumqx[MAXC];
    _Alignas(64) float sumq2[MAXC];
    int32_t gi[4][MAXC];
    uint8_t og[4][MAXC];
    int nc;
} cand_set;

/* Best neighbour of off-grid key u at `scale` (ggml's iq2_find_best_neighbour): argmin over the
 * list of sum_i waux_i (scale q_i - xval_i)^2, first minimum wins; returns the grid index. */
typedef int (*best_nb_fn)(const iqf_iqgrid *g, int u, const float *xval, const float *waux,
                          float scale);

typedef struct enc_ops {
    best_nb_fn best_nb;
    /* step A: cs->key[k][c] = rounded key of group k at cs->id[c], for ng groups */
    void (*round)(cand_set *cs, const float *xval, int ng);
    /* step C: cs->sumqx/sumq2 from cs->key (final keys); wx = weight*xval */
    void (*sums)(cand_set *cs, const float *wx, const float *weight, int ng);
    /* step B: kmap lookups and neighbour searches; NULL = the generic resolve() */
    void (*resolve)(const iqf_iqgrid *g, cand_set *cs, const float *xval, const float *waux, int ng);
} enc_ops;

#if IQF_GGML_FUSES
/* Where ggml's build fuses (util/fma.h): diff = fma(scale, q, -xval_i), d2 = fma(waux_i * diff,
 * diff, d2) per neighbour, ggml's loop as written (no shared terms: the product is not rounded). */
static int best_nb_scalar(const iqf_iqgrid *g, int u, const float *xval, const float *waux,
                          float scale) {
    const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
    const uint16_t *nk = g->nbkeys + (nb - g->neighbours);
    float best = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= nb[0]; j++) {
        float d2 = 0;
        unsigned k = nk[j];
        for (int i = 0; i < 8; i++, k >>= 2) {
            float diff = IQF_FMS_ARM(scale, (float)(2 * (k & 3) + 1), xval[i]);
            d2 = IQF_FMA_ARM(waux[i] * diff, diff, d2);
        }
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    return gi >= 0 ? gi : nb[1];
}
#else
/* The 24 terms (waux_i * diff) * diff, diff = scale*q - xval_i, q = 1, 3, 5: e[4i + l]. */
static inline void nb_terms(float *e, const float *xval, const float *waux, float scale) {
    const float sq[3] = { scale * 1.f, scale * 3.f, scale * 5.f };
    for (int i = 0; i < 8; i++) {
        for (int l = 0; l < 3; l++) {
            float diff = sq[l] - xval[i];
            e[4 * i + l] = waux[i] * diff * diff;
        }
        e[4 * i + 3] = 0;
    }
}

static int best_nb_scalar(const iqf_iqgrid *g, int u, const float *xval, const float *waux,
                          float scale) {
    float e[32];
    nb_terms(e, xval, waux, scale);
    const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
    const uint16_t *nk = g->nbkeys + (nb - g->neighbours);
    const int n = nb[0];
    float best = FLT_MAX;
    int gi = -1;
    int j = 1;
    /* eight, then four neighbours side by side (independent sums, each in ggml's order; enough
     * chains to hide the add latency) */
    for (; j + 7 <= n; j += 8) {
        unsigned k0 = nk[j], k1 = nk[j + 1], k2 = nk[j + 2], k3 = nk[j + 3];
        unsigned k4 = nk[j + 4], k5 = nk[j + 5], k6 = nk[j + 6], k7 = nk[j + 7];
        float d0 = 0, d1 = 0, d2 = 0, d3 = 0, d4 = 0, d5 = 0, d6 = 0, d7 = 0;
        IQF_UNROLL8
        for (int i = 0; i < 8; i++) {
            const float *ei = e + 4 * i;
            d0 += ei[k0 & 3];
            d1 += ei[k1 & 3];
            d2 += ei[k2 & 3];
            d3 += ei[k3 & 3];
            d4 += ei[k4 & 3];
            d5 += ei[k5 & 3];
            d6 += ei[k6 & 3];
            d7 += ei[k7 & 3];
            k0 >>= 2;
            k1 >>= 2;
            k2 >>= 2;
            k3 >>= 2;
            k4 >>= 2;
            k5 >>= 2;
            k6 >>= 2;
            k7 >>= 2;
        }
        if (d0 < best) { best = d0; gi = nb[j]; }
        if (d1 < best) { best = d1; gi = nb[j + 1]; }
        if (d2 < best) { best = d2; gi = nb[j + 2]; }
        if (d3 < best) { best = d3; gi = nb[j + 3]; }
        if (d4 < best) { best = d4; gi = nb[j + 4]; }
        if (d5 < best) { best = d5; gi = nb[j + 5]; }
        if (d6 < best) { best = d6; gi = nb[j + 6]; }
        if (d7 < best) { best = d7; gi = nb[j + 7]; }
    }
    /* four neighbours side by side (independent sums, each in ggml's order) */
    for (; j + 3 <= n; j += 4) {
        unsigned k0 = nk[j], k1 = nk[j + 1], k2 = nk[j + 2], k3 = nk[j + 3];
        float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
        IQF_UNROLL8
        for (int i = 0; i < 8; i++) {
            const float *ei = e + 4 * i;
            d0 += ei[k0 & 3];
            d1 += ei[k1 & 3];
            d2 += ei[k2 & 3];
            d3 += ei[k3 & 3];
            k0 >>= 2;
            k1 >>= 2;
            k2 >>= 2;
            k3 >>= 2;
        }
        if (d0 < best) { best = d0; gi = nb[j]; }
        if (d1 < best) { best = d1; gi = nb[j + 1]; }
        if (d2 < best) { best = d2; gi = nb[j + 2]; }
        if (d3 < best) { best = d3; gi = nb[j + 3]; }
    }
    for (; j <= n; j++) {
        float d2 = 0;
        unsigned k = nk[j];
        IQF_UNROLL8
        for (int i = 0; i < 8; i++, k >>= 2) d2 += e[4 * i + (k & 3)];
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    /* gi < 0 only if every distance is +Inf or NaN: ggml aborts there; take the first. */
    return gi >= 0 ? gi : nb[1];
}
#endif

static void round_scalar(cand_set *cs, const float *xval, int ng) {
    for (int k = 0; k < ng; k++) {
        for (int c = 0; c < cs->nc; c++) cs->key[k][c] = 0;
        for (int i = 0; i < 8; i++) {
            for (int c = 0; c < cs->nc; c++) {
                int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(cs->id[c], xval[8 * k + i], 1));
                l = l < 0 ? 0 : l > 2 ? 2 : l;
                cs->key[k][c] |= l << 2 * i;
            }
        }
    }
}

static void sums_scalar(cand_set *cs, const float *wx, const float *weight, int ng) {
    for (int c = 0; c < cs->nc; c++) cs->sumqx[c] = cs->sumq2[c] = 0;
    for (int i = 0; i < 8 * ng; i++) {
        const int32_t *key = cs->key[i >> 3];
        const int sh = 2 * (i & 7);
        for (int c = 0; c < cs->nc; c++) {
            float q = (float)(2 * ((key[c] >> sh) & 3) + 1);
            cs->sumqx[c] = IQF_FMA_ARM_IF(ng == 2, wx[i], q, cs->sumqx[c]);
            cs->sumq2[c] = IQF_FMA_ARM_IF(ng == 2, weight[i] * q, q, cs->sumq2[c]);
        }
    }
}

/* step B, first half: all kmap lookups (independent loads), then prefetches of the off-grid
 * keys' neighbour lists, so that the cache misses overlap instead of queueing one by one. */
static inline void lookup_prefetch(const iqf_iqgrid *g, cand_set *cs, int ng) {
    for (int k = 0; k < ng; k++) {
        for (int c = 0; c < cs->nc; c++) {
            int gi = g->kmap[cs->key[k][c]];
            cs->gi[k][c] = gi;
            cs->og[k][c] = gi >= 0;
        }
    }
    for (int k = 0; k < ng; k++) {
        for (int c = 0; c < cs->nc; c++) {
            if (cs->og[k][c]) continue;
            const uint16_t *nb = iqf_iqgrid_neighbours(g, cs->key[k][c]);
            __builtin_prefetch(nb);
            __builtin_prefetch(g->nbkeys + (nb - g->neighbours));
        }
    }
}

static const enc_ops ops_scalar = { best_nb_scalar, round_scalar, sums_scalar, NULL };

static const float iq2_lev[16] = { 1.f, 3.f, 5.f, 0.f, 1.f, 3.f, 5.f, 0.f,
                                   1.f, 3.f, 5.f, 0.f, 1.f, 3.f, 5.f, 0.f }; /* q per level slot */

/* The SIMD steps (iq2_lanes.h), once per instruction set: ops_neon, ops_avx2, ops_avx512. */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "iq2_lanes.h"
#include "lanes_neon.h"

#ifdef IQF_ARCH_X86

#define T_AVX2 __attribute__((target("avx2,fma")))
#define T_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

#define VL_W 8
#define VL_TGT T_AVX2
#define VL_SFX(name) name##_avx2
#define VL_KERNELS "iq2_lanes.h"
#include "lanes_inst.h"

#define VL_W 16
#define VL_TGT T_AVX512
#define VL_SFX(name) name##_avx512
#define VL_KERNELS "iq2_lanes.h"
#include "lanes_inst.h"
#endif

static const enc_ops *select_ops(const iqf_qctx *ctx) {
#ifdef IQF_ARCH_X86
    if (ctx && ctx->simd == IQF_SIMD_AVX512) return &ops_avx512;
    if (ctx && ctx->simd == IQF_SIMD_AVX2) return &ops_avx2;
#endif
    if (ctx && ctx->simd == IQF_SIMD_NEON) return &ops_neon;
    return &ops_scalar;
}

/* step B: kmap lookups, neighbour search for the off-grid groups; key := the grid point's key */
static void resolve(const enc_ops *E, const iqf_iqgrid *g, cand_set *cs, const float *xval,
                    const float *waux, int ng) {
    if (E->resolve) {
        E->resolve(g, cs, xval, waux, ng);
        return;
    }
    lookup_prefetch(g, cs, ng);
    for (int k = 0; k < ng; k++) {
        for (int c = 0; c < cs->nc; c++) {
            if (cs->og[k][c]) continue;
            const uint16_t *nb = iqf_iqgrid_neighbours(g, cs->key[k][c]);
            int gi = nb[0] == 1 ? nb[1]
                                : E->best_nb(g, cs->key[k][c], xval + 8 * k, waux + 8 * k, cs->sc[c]);
            cs->gi[k][c] = gi;
            cs->key[k][c] = g->keys[gi];
        }
    }
}

/* step D: ggml's sequential acceptance over the candidates; returns the accepted one or -1. */
static int accept(const cand_set *cs, float *scale) {
    float best = 0;
    int sel = -1;
    for (int c = 0; c < cs->nc; c++) {
        float sumqx = cs->sumqx[c], sumq2 = cs->sumq2[c];
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            *scale = sumqx / sumq2;
            best = *scale * sumqx;
            sel = c;
        }
    }
    return sel;
}

/* Rounds 8 values at inverse scale id to levels 0..2; returns the key. */
static inline int round8(const float *xval, float id) {
    int u = 0;
    for (int i = 0; i < 8; i++) {
        int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, xval[i], 1));
        l = l < 0 ? 0 : l > 2 ? 2 : l;
        u |= l << 2 * i;
    }
    return u;
}

/* sumqx / sumq2 of one level assignment (keys of ng groups), ggml's order. */
static inline void key_sums(const int *key, int ng, const float *wx, const float *weight,
                            float *sumqx, float *sumq2) {
    float a = 0, b = 0;
    for (int i = 0; i < 8 * ng; i++) {
        float q = (float)(2 * ((key[i >> 3] >> 2 * (i & 7)) & 3) + 1);
        a = IQF_FMA_ARM_IF(ng == 2, wx[i], q, a);
        b = IQF_FMA_ARM_IF(ng == 2, weight[i] * q, q, b);
    }
    *sumqx = a;
    *sumq2 = b;
}


/* ggml's make_qp_quants(n, nmax, x, L, w), including the uint8_t view of L (a -1 wraps to 255). */
static float make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *qw) {
    float max = 0;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = (float)nmax / max;
    for (int i = 0; i < n; i++) L[i] = (uint8_t)iqf_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; i++) {
        float diff = IQF_FNMA_ARM(scale, (float)L[i], x[i]);
        best_mse += qw[i] * diff * diff; /* unfused on arm64 too (n = 32) */
    }
    /* The 8 trial scales are independent sums: evaluated side by side (each one in ggml's order),
     * then compared in ggml's order is = -4..-1, 1..4. */
    float isc[8], ssc[8], mse[8];
    for (int c = 0; c < 8; c++) {
        int is = c < 4 ? c - 4 : c - 3;
        isc[c] = IQF_FMA_ARM(0.1f, (float)is, (float)nmax) / max;
        ssc[c] = 1 / isc[c];
        mse[c] = 0;
    }
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < 8; c++) {
            int l = iqf_nearest_int(isc[c] * x[i]);
            l = l < nmax ? l : nmax;
            float diff = IQF_FNMA_ARM(ssc[c], (float)l, x[i]);
            mse[c] += qw[i] * diff * diff;
        }
    }
    for (int c = 0; c < 8; c++) {
        if (mse[c] < best_mse) {
            best_mse = mse[c];
            iscale = isc[c];
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = iqf_nearest_int(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += qw[i] * x[i] * (float)l;
        suml2 += qw[i] * (float)l * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = qw[i];
            float slx = IQF_FNMA_ARM(w * x[i], (float)L[i], sumlx);
            float sl2 = IQF_FNMA_ARM(w * (float)L[i], (float)L[i], suml2);
            if (slx > 0 && sl2 > 0) {
                int new_l = iqf_nearest_int(x[i] * sl2 / slx);
                new_l = new_l < nmax ? new_l : nmax;
                if (new_l != L[i]) {
                    slx = IQF_FMA_ARM(w * x[i], (float)new_l, slx);
                    sl2 = IQF_FMA_ARM(w * (float)new_l, (float)new_l, sl2);
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Signs of 8 values; with `parity`, flips the least important one if the count of negatives is
 * odd (ggml's even-parity trick: the stored 7 bits imply the 8th). */
/* The largest of n (multiple of 4) values, as a tree: the same number as ggml's running MAX
 * (only the sign of a zero result could differ, and every use of it is `max < eps` first). */
static inline float max_of(const float *v, int n) {
    float m[4] = { v[0], v[1], v[2], v[3] };
    for (int i = 4; i < n; i += 4)
        for (int t = 0; t < 4; t++) m[t] = v[i + t] > m[t] ? v[i + t] : m[t];
    float a = m[0] > m[1] ? m[0] : m[1], b = m[2] > m[3] ? m[2] : m[3];
    return a > b ? a : b;
}

static inline uint8_t signs8(const float *xb, const float *weight, float *xval, bool parity) {
    /* branch-free: xval = x >= 0 ? x : -x (a sign-bit flip, so -0 stays -0 as in ggml) */
    unsigned nflip = 0, s = 0;
    for (int i = 0; i < 8; i++) {
        unsigned neg = xb[i] < 0;
        union { float f; uint32_t u; } v = { xb[i] };
        v.u ^= neg << 31;
        xval[i] = v.f;
        nflip += neg;
        s |= neg << i;
    }
    if (parity && (nflip & 1)) {
        int imin = 0;
        float min = weight[0] * xb[0] * xb[0];
        for (int i = 1; i < 8; i++) {
            float ax = weight[i] * xb[i] * xb[i];
            if (ax < min) {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1u << imin;
    }
    return parity ? (uint8_t)(s & 127) : (uint8_t)s;
}

static inline float sum_sq256(const float *x) {
    float s = 0;
    for (int i = 0; i < QK_K; i++) s += x[i] * x[i]; /* unfused on arm64 too (fma.h) */
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* IQ2_XXS                                                                                     */

/* One 32-weight sub-block. Returns false when ggml skips it (all zero, or no usable initial
 * scale): then it stays all-zero in q2. Otherwise the scale (>= 0), grid indices and signs. */
static bool xxs_subblock(const enc_ops *E, const iqf_iqgrid *g, const float *xb, const float *qw,
                         float sigma2, float s_cur, int nw, float *scale_out, int *gidx, uint8_t *bsigns) {
    const int kMaxQ = 3;
    float weight[32], waux[32], xval[32], wx[32];
    uint8_t Lqp[32];
    for (int i = 0; i < 32; i++) weight[i] = qw[i] * sqrtf(IQF_FMA_ARM(xb[i], xb[i], sigma2));
    for (int i = 0; i < 32; i++) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; k++) bsigns[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
    float max;
    max = max_of(xval, 32);
    if (max < GROUP_MAX_EPS) return false;
    float scale = make_qp_quants(32, kMaxQ + 1, xval, Lqp, weight);
    float eff_max = scale * (float)kMaxQ;
    if (eff_max <= 0) return false;
    for (int i = 0; i < 32; i++) wx[i] = weight[i] * xval[i];

    cand_set cs;
    int is_lo;
    iqf_iq_cand_window(6, s_cur > 0 ? nw : 0, 10 * (eff_max / s_cur - 5), &is_lo, &cs.nc);
    for (int c = 0; c < MAXC; c++) {
        int is = (c < cs.nc ? c : cs.nc - 1) + is_lo;
        cs.id[c] = IQF_FMA_ARM((float)is, 0.1f, (float)(2 * kMaxQ - 1)) / eff_max;
        cs.sc[c] = 1 / cs.id[c];
    }
    E->round(&cs, xval, 4);
    resolve(E, g, &cs, xval, waux, 4);
    E->sums(&cs, wx, weight, 4);
    int sel = accept(&cs, &scale);

    int key[4] = { 0, 0, 0, 0 };
    if (sel >= 0)
        for (int k = 0; k < 4; k++) key[k] = cs.key[k][sel];
    if (scale > 0) { /* unconditional refinement of all 4 groups at the accepted scale */
        float id = 1 / scale;
        for (int k = 0; k < 4; k++) {
            int u = round8(xval + 8 * k, id);
            int gi = g->kmap[u];
            if (gi < 0) gi = E->best_nb(g, u, xval + 8 * k, waux + 8 * k, scale);
            key[k] = g->keys[gi];
        }
        float sumqx, sumq2;
        key_sums(key, 4, wx, weight, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; k++) bsigns[k] = (uint8_t)(~bsigns[k] & 127);
    }
    for (int k = 0; k < 4; k++) gidx[k] = g->kmap[key[k]];
    *scale_out = scale;
    return true;
}

/* The row encoders; warm (a block per super-block, or NULL) and nw: the warm start's candidate
 * windows (iqf_iq_cand_window), 0 for the encoder itself. */
static void iq2_xxs_rows(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw,
                         const block_iq2_xxs *warm, int nw) {
    const enc_ops *E = select_ops(ctx);
    const iqf_iqgrid *g = grid_xxs;
    block_iq2_xxs *y = vy;
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++) {
        const float *xbl = x + QK_K * ibl;
        uint32_t q2[2 * (QK_K / 32)];
        float scales[QK_K / 32];
        memset(q2, 0, sizeof(q2));
        float max_scale = 0;
        const float sigma2 = sum_sq256(xbl) / (float)QK_K;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int gidx[4];
            uint8_t bs[4];
            float scale = 0;
            scales[ib] = 0;
            float s_cur = 0;
            if (warm) {
                uint32_t a;
                memcpy(&a, (const uint8_t *)warm[ibl].qs + 8 * ib + 4, 4);
                s_cur = iqf_fp16_to_fp32(warm[ibl].d) * (float)(2 * (a >> 28) + 1);
            }
            if (!xxs_subblock(E, g, xbl + 32 * ib, qw + QK_K * ibl + 32 * ib, sigma2, s_cur, nw, &scale, gidx, bs))
                continue;
            for (int k = 0; k < 4; k++) {
                q2[2 * ib] |= (uint32_t)gidx[k] << 8 * k;
                q2[2 * ib + 1] |= (uint32_t)bs[k] << 7 * k;
            }
            scales[ib] = scale;
            max_scale = scale > max_scale ? scale : max_scale;
        }
        if (!max_scale) {
            y[ibl].d = iqf_fp32_to_fp16(0.f);
            memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
            continue;
        }
        float d = max_scale / 31;
        y[ibl].d = iqf_fp32_to_fp16(d);
        float id = 1 / d;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scales[ib], 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            q2[2 * ib + 1] |= (uint32_t)l << 28;
        }
        memcpy(y[ibl].qs, q2, sizeof(q2));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* IQ2_XS and IQ2_S: 16-weight sub-blocks, two groups of 8                                     */

/* Scale search + refinement of one 16-weight sub-block with max >= eps. Returns the scale (may
 * be negative: the caller flips the signs); gidx[2] the grid indices. */
static float search16(const enc_ops *E, const iqf_iqgrid *g, const float *xval,
                      const float *weight, const float *waux, float max, float s_cur, int nw, int *gidx) {
    const int kMaxQ = 3;
    float wx[16];
    for (int i = 0; i < 16; i++) wx[i] = weight[i] * xval[i];
    cand_set cs;
    int is_lo;
    iqf_iq_cand_window(9, s_cur > 0 ? nw : 0, 10 * (max / s_cur - 5), &is_lo, &cs.nc);
    for (int c = 0; c < MAXC; c++) {
        int is = (c < cs.nc ? c : cs.nc - 1) + is_lo;
        cs.id[c] = IQF_FMA_ARM((float)is, 0.1f, (float)(2 * kMaxQ - 1)) / max;
        cs.sc[c] = 1 / cs.id[c];
    }
    E->round(&cs, xval, 2);
    resolve(E, g, &cs, xval, waux, 2);
    E->sums(&cs, wx, weight, 2);
    float scale = max / (float)(2 * kMaxQ - 1);
    int sel = accept(&cs, &scale);
    if (sel < 0) { /* nothing accepted: ggml keeps L = 0 (grid point 0) */
        gidx[0] = gidx[1] = g->kmap[0];
        return scale;
    }
    int key[2] = { cs.key[0][sel], cs.key[1][sel] };
    gidx[0] = cs.gi[0][sel];
    gidx[1] = cs.gi[1][sel];
    if ((!cs.og[0][sel] || !cs.og[1][sel]) && scale > 0) {
        float id = 1 / scale;
        for (int k = 0; k < 2; k++) {
            if (cs.og[k][sel]) continue;
            int u = round8(xval + 8 * k, id);
            int gi = g->kmap[u];
            if (gi < 0) gi = E->best_nb(g, u, xval + 8 * k, waux + 8 * k, scale);
            key[k] = g->keys[gi];
            gidx[k] = gi;
        }
        float sumqx, sumq2;
        key_sums(key, 2, wx, weight, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    return scale;
}

static void iq2_xs_rows(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw,
                        const block_iq2_xs *warm, int nw) {
    const enc_ops *E = select_ops(ctx);
    const iqf_iqgrid *g = grid_xs;
    block_iq2_xs *y = vy;
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++) {
        const float *xbl = x + QK_K * ibl;
        uint16_t q2[2 * (QK_K / 16)];
        float scales[QK_K / 16];
        memset(q2, 0, sizeof(q2));
        memset(y[ibl].scales, 0, sizeof(y[ibl].scales));
        float max_scale = 0;
        const float sigma2 = sum_sq256(xbl) / (float)QK_K;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            const float *xb = xbl + 16 * ib;
            const float *w = qw + QK_K * ibl + 16 * ib;
            float weight[16], waux[16], xval[16];
            uint8_t bs[2];
            for (int i = 0; i < 16; i++) weight[i] = w[i] * sqrtf(IQF_FMA_ARM(xb[i], xb[i], sigma2));
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
            for (int k = 0; k < 2; k++) bs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
            float max;
            max = max_of(xval, 16);
            scales[ib] = 0;
            if (max < GROUP_MAX_EPS) continue;
            int gidx[2];
            const float s_cur = warm ? iqf_fp16_to_fp32(warm[ibl].d) * (float)(2 * ((warm[ibl].scales[ib / 2] >> 4 * (ib & 1)) & 15) + 1) : 0;
            float scale = search16(E, g, xval, weight, waux, max, s_cur, nw, gidx);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; k++) bs[k] = (uint8_t)(~bs[k] & 127);
            }
            for (int k = 0; k < 2; k++) q2[2 * ib + k] = (uint16_t)(gidx[k] | (bs[k] << 9));
            scales[ib] = scale;
            max_scale = scale > max_scale ? scale : max_scale;
        }
        if (!max_scale) {
            y[ibl].d = iqf_fp32_to_fp16(0.f);
            memset(y[ibl].qs, 0, sizeof(y[ibl].qs));
            continue;
        }
        float d = max_scale / 31;
        y[ibl].d = iqf_fp32_to_fp16(d);
        float id = 1 / d;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scales[ib], 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            if (ib % 2 == 0) y[ibl].scales[ib / 2] = (uint8_t)l;
            else y[ibl].scales[ib / 2] |= (uint8_t)(l << 4);
        }
        memcpy(y[ibl].qs, q2, sizeof(q2));
    }
}

static void iq2_s_rows(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw,
                       const block_iq2_s *warm, int nw) {
    const enc_ops *E = select_ops(ctx);
    const iqf_iqgrid *g = grid_s;
    block_iq2_s *y = vy;
    float unit[16];
    const float *flat = iqf_best_flat_importance(ctx, qw, unit, 16); /* best mode, no imatrix */
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++) {
        const float *xbl = x + QK_K * ibl;
        block_iq2_s *yb = &y[ibl];
        memset(yb, 0, sizeof(*yb));
        float scales[QK_K / 16];
        float max_scale = 0;
        const float sigma2 = 2 * sum_sq256(xbl) / (float)QK_K;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            const float *xb = xbl + 16 * ib;
            float weight[16], waux[16], xval[16];
            uint8_t bs[2];
            if (qw || flat) {
                const float *w = qw ? qw + QK_K * ibl + 16 * ib : flat;
                for (int i = 0; i < 16; i++) weight[i] = w[i] * sqrtf(IQF_FMA_ARM(xb[i], xb[i], sigma2));
            } else {
                for (int i = 0; i < 16; i++) weight[i] = IQF_FMA_ARM(0.25f, sigma2, xb[i] * xb[i]);
            }
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
            for (int k = 0; k < 2; k++) bs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, false);
            float max;
            max = max_of(xval, 16);
            scales[ib] = 0;
            if (max < GROUP_MAX_EPS_IQ2_S) continue;
            int gidx[2];
            const float s_cur = warm ? iqf_fp16_to_fp32(warm[ibl].d) * (float)(2 * ((warm[ibl].scales[ib / 2] >> 4 * (ib & 1)) & 15) + 1) : 0;
            float scale = search16(E, g, xval, weight, waux, max, s_cur, nw, gidx);
            if (scale < 0) {
                scale = -scale;
                for (int k = 0; k < 2; k++) bs[k] = (uint8_t)~bs[k];
            }
            for (int k = 0; k < 2; k++) {
                const int i8 = 2 * ib + k;
                yb->qs[i8] = (uint8_t)(gidx[k] & 255);
                yb->qh[i8 / 4] |= (uint8_t)((gidx[k] >> 8) << 2 * (i8 % 4));
                yb->qs[QK_K / 8 + i8] = bs[k];
            }
            scales[ib] = scale;
            max_scale = scale > max_scale ? scale : max_scale;
        }
        if (!max_scale) continue;
        float d = max_scale / 31;
        yb->d = iqf_fp32_to_fp16(d * 0.9875f);
        float id = 1 / d;
        for (int ib = 0; ib < QK_K / 16; ib++) {
            int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scales[ib], 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            if (ib % 2 == 0) yb->scales[ib / 2] = (uint8_t)l;
            else yb->scales[ib / 2] |= (uint8_t)(l << 4);
        }
    }
}

static void quantize_row_iq2_xxs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    iq2_xxs_rows(ctx, x, vy, n, qw, NULL, 0);
}
static void quantize_row_iq2_xs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    iq2_xs_rows(ctx, x, vy, n, qw, NULL, 0);
}
static void quantize_row_iq2_s(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    iq2_s_rows(ctx, x, vy, n, qw, NULL, 0);
}

bool iqf_iq2_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nw) {
    const iqf_qctx ctx = { IQF_MODE_COMPAT, simd };
    if (type == IQF_TYPE_IQ2_XXS) {
        block_iq2_xxs cur;
        memcpy(&cur, blk, sizeof cur);
        init_iq2_xxs();
        iq2_xxs_rows(&ctx, x, blk, QK_K, qw, &cur, nw);
    } else if (type == IQF_TYPE_IQ2_XS) {
        block_iq2_xs cur;
        memcpy(&cur, blk, sizeof cur);
        init_iq2_xs();
        iq2_xs_rows(&ctx, x, blk, QK_K, qw, &cur, nw);
    } else if (type == IQF_TYPE_IQ2_S) {
        block_iq2_s cur;
        memcpy(&cur, blk, sizeof cur);
        init_iq2_s();
        iq2_s_rows(&ctx, x, blk, QK_K, qw, &cur, nw);
    } else {
        return false;
    }
    return true;
}

const iqf_codec iqf_codecs_iq2[] = {
    { IQF_TYPE_IQ2_XXS, init_iq2_xxs, quantize_row_iq2_xxs, dequantize_row_iq2_xxs },
    { IQF_TYPE_IQ2_XS, init_iq2_xs, quantize_row_iq2_xs, dequantize_row_iq2_xs },
    { IQF_TYPE_IQ2_S, init_iq2_s, quantize_row_iq2_s, dequantize_row_iq2_s },
    { -1, NULL, NULL, NULL },
};
