/*
 * iq2.c - IQ2_XXS (2.0625 bpw), IQ2_XS (2.3125 bpw) and IQ2_S (2.5625 bpw): decoders and the
 * compat encoders, byte-identical to ggml 0.25.1 (quantize_row_iq2_xxs_impl / iq2_xs_impl /
 * iq2_s_impl, make_qp_quants; FORMATS.md sections 0, 5 and 9).
 *
 * How the encoders stay exact while being faster than ggml: every float operation that
 * produces a value ggml compares or stores is done with the same operands in the same order
 * (no FMA: the tree builds with -ffp-contract=off). What changes is only WHAT is recomputed:
 *  - the neighbour search evaluates sum_i w_i (s q_i - x_i)^2 for many grid points that share
 *    the 3 possible q per coordinate, so the 24 terms (w_i*diff)*diff are computed once per
 *    (scale, group) and each neighbour's distance is the same sequential sum of 8 table values;
 *  - the per-candidate sums use (w*x)*q and (w*q)*q, which only depend on (i, level) and are
 *    tabulated per sub-block;
 *  - SIMD variants (AVX2, AVX-512) vectorise across independent values (the rounding of the 8
 *    coordinates, the 24 table terms, several neighbours at once) and never reorder a sum.
 * The scale-search structure is kept in separate functions (search / refine / pack) so that a
 * better-than-compat mode can later re-choose grid points at the final decoded scale.
 */
#include "codec.h"
#include "iqgrid.h"

#include <float.h>
#include <math.h>
#include <pthread.h>

#define GROUP_MAX_EPS 1e-15f
#define GROUP_MAX_EPS_IQ2_S 1e-8f

typedef struct {
    iqf_half d;
    uint16_t qs[QK_K / 8];
} block_iq2_xxs; /* 2.0625 bpw */
static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs block");

typedef struct {
    iqf_half d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
} block_iq2_xs; /* 2.3125 bpw */
static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs block");

typedef struct {
    iqf_half d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s; /* 2.5625 bpw */
static_assert(sizeof(block_iq2_s) == 82, "iq2_s block");

/* ------------------------------------------------------------------------------------------ */
/* Tables                                                                                      */

/* Decode grids (bytes 8, 25, 43 per level), the sign expansion (7 stored bits, even parity). */
static uint64_t dec_xxs[256], dec_xs[512], dec_s[1024];
static uint8_t ksigns[128];
static const iqf_iqgrid *grid_xxs, *grid_xs, *grid_s;

static void init_decode(void) {
    static const int8_t lev[3] = { 8, 25, 43 };
    iqf_iqgrid_decode_table(iqf_iq2xxs_keys, 256, lev, dec_xxs);
    iqf_iqgrid_decode_table(iqf_iq2xs_keys, 512, lev, dec_xs);
    iqf_iqgrid_decode_table(iqf_iq2s_keys, 1024, lev, dec_s);
    for (int i = 0; i < 128; i++) ksigns[i] = (uint8_t)(i | (__builtin_popcount(i) & 1 ? 0x80 : 0));
}
static pthread_once_t decode_once = PTHREAD_ONCE_INIT;

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

/* ------------------------------------------------------------------------------------------ */
/* Decoders                                                                                    */

static inline void decode8(float *y, float db, uint64_t grid, uint8_t signs) {
    for (int j = 0; j < 8; j++) {
        float g = (float)(uint8_t)(grid >> 8 * j);
        y[j] = db * g * (signs & (1u << j) ? -1.f : 1.f);
    }
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
/* Encoder building blocks (scalar reference path)                                             */

/* One 8-value group of a sub-block: the values, the neighbour-search weights (sqrt of weight). */
typedef struct group8 {
    const float *xval; /* 8 */
    const float *waux; /* 8 */
} group8;

/* ggml's iq2_find_best_neighbour: argmin over the list of sum_i waux_i (scale q_i - xval_i)^2,
 * first minimum wins. Writes the levels of the chosen point to L; returns its grid index. */
static int best_neighbour_scalar(const iqf_iqgrid *g, const uint16_t *nb, const float *xval,
                                 const float *waux, float scale, int8_t *L) {
    float e[8][4];
    const float sq[3] = { scale * 1.f, scale * 3.f, scale * 5.f };
    for (int i = 0; i < 8; i++) {
        for (int l = 0; l < 3; l++) {
            float diff = sq[l] - xval[i];
            e[i][l] = waux[i] * diff * diff;
        }
        e[i][3] = 0;
    }
    const int n = nb[0];
    float best = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= n; j++) {
        const unsigned key = g->keys[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; i++) d2 += e[i][(key >> 2 * i) & 3];
        if (d2 < best) {
            best = d2;
            gi = nb[j];
        }
    }
    /* gi < 0 only if every distance is +Inf or NaN: ggml aborts there; take the first. */
    if (gi < 0) gi = nb[1];
    const unsigned key = g->keys[gi];
    for (int i = 0; i < 8; i++) L[i] = (int8_t)((key >> 2 * i) & 3);
    return gi;
}

/* Rounds 8 values at inverse scale id to levels 0..2; returns the key. */
static inline unsigned round8(const float *xval, float id, int8_t *L) {
    unsigned u = 0;
    for (int i = 0; i < 8; i++) {
        int l = iqf_nearest_int(0.5f * (id * xval[i] - 1));
        l = l < 0 ? 0 : l > 2 ? 2 : l;
        L[i] = (int8_t)l;
        u |= (unsigned)l << 2 * i;
    }
    return u;
}

/* Levels -> grid point, with the neighbour search at `scale` when off the grid. Returns the grid
 * index; L holds the chosen point's levels; *on_grid says whether the rounding was on the grid. */
static inline int to_grid(const iqf_iqgrid *g, const float *xval, const float *waux, float id,
                          float scale, int8_t *L, bool *on_grid) {
    unsigned u = round8(xval, id, L);
    int gi = g->kmap[u];
    *on_grid = gi >= 0;
    if (gi < 0) gi = best_neighbour_scalar(g, iqf_iqgrid_neighbours(g, (int)u), xval, waux, scale, L);
    return gi;
}

/* Per-sub-block tables for the candidate sums: wx[i] = weight*xval, wq2[i][l] = weight*q*q. */
static inline void sum_tables(int n, const float *weight, const float *xval, float *wx,
                              float (*wq2)[3]) {
    for (int i = 0; i < n; i++) {
        wx[i] = weight[i] * xval[i];
        for (int l = 0; l < 3; l++) {
            float q = (float)(2 * l + 1);
            wq2[i][l] = weight[i] * q * q;
        }
    }
}

static inline void cand_sums(int n, const float *wx, const float (*wq2)[3], const int8_t *L,
                             float *sumqx, float *sumq2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        a += wx[i] * (float)(2 * L[i] + 1);
        b += wq2[i][L[i]];
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
        float diff = x[i] - scale * (float)L[i];
        best_mse += qw[i] * diff * diff;
    }
    for (int is = -4; is <= 4; is++) {
        if (is == 0) continue;
        float iscale_is = (0.1f * (float)is + (float)nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; i++) {
            int l = iqf_nearest_int(iscale_is * x[i]);
            l = l < nmax ? l : nmax;
            float diff = x[i] - scale_is * (float)l;
            mse += qw[i] * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
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
            float slx = sumlx - w * x[i] * (float)L[i];
            float sl2 = suml2 - w * (float)L[i] * (float)L[i];
            if (slx > 0 && sl2 > 0) {
                int new_l = iqf_nearest_int(x[i] * sl2 / slx);
                new_l = new_l < nmax ? new_l : nmax;
                if (new_l != L[i]) {
                    slx += w * x[i] * (float)new_l;
                    sl2 += w * (float)new_l * (float)new_l;
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
static inline uint8_t signs8(const float *xb, const float *weight, float *xval, bool parity) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; i++) {
        if (xb[i] >= 0) {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i];
            nflip++;
            s |= (uint8_t)(1u << i);
        }
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
        s ^= (uint8_t)(1u << imin);
    }
    return parity ? (uint8_t)(s & 127) : s;
}

static inline float sum_sq256(const float *x) {
    float s = 0;
    for (int i = 0; i < QK_K; i++) s += x[i] * x[i];
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* IQ2_XXS                                                                                     */

/* One 32-weight sub-block. Returns the scale (>= 0); fills gidx[4] and signs[4]. Returns 0 with
 * gidx/signs untouched-as-zero when ggml skips the sub-block. */
static float xxs_subblock(const iqf_iqgrid *g, const float *xb, const float *qw, float sigma2,
                          int *gidx, uint8_t *bsigns, bool *skipped) {
    const int kMaxQ = 3;
    float weight[32], waux[32], xval[32], wx[32], wq2[32][3];
    int8_t L[32], Laux[32];
    for (int i = 0; i < 32; i++) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
    for (int i = 0; i < 32; i++) waux[i] = sqrtf(weight[i]);
    for (int k = 0; k < 4; k++) bsigns[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
    float max = xval[0];
    for (int i = 1; i < 32; i++) max = xval[i] > max ? xval[i] : max;
    *skipped = true;
    if (max < GROUP_MAX_EPS) return 0;
    float scale = make_qp_quants(32, kMaxQ + 1, xval, (uint8_t *)L, weight);
    float eff_max = scale * (float)kMaxQ;
    if (eff_max <= 0) return 0;
    *skipped = false;
    sum_tables(32, weight, xval, wx, wq2);
    float best = 0;
    for (int is = -6; is <= 6; is++) {
        float id = ((float)(2 * kMaxQ - 1) + (float)is * 0.1f) / eff_max;
        float this_scale = 1 / id;
        bool og;
        for (int k = 0; k < 4; k++)
            to_grid(g, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k, &og);
        float sumqx, sumq2;
        cand_sums(32, wx, (const float(*)[3])wq2, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
        }
    }
    if (scale > 0) {
        float id = 1 / scale;
        bool og;
        for (int k = 0; k < 4; k++)
            to_grid(g, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k, &og);
        float sumqx, sumq2;
        cand_sums(32, wx, (const float(*)[3])wq2, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 4; k++) bsigns[k] = (uint8_t)(~bsigns[k] & 127);
    }
    for (int k = 0; k < 4; k++) {
        unsigned u = 0;
        for (int i = 0; i < 8; i++) u |= (unsigned)L[8 * k + i] << 2 * i;
        gidx[k] = g->kmap[u]; /* on the grid by construction */
    }
    return scale;
}

static void quantize_row_iq2_xxs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                                 const float *qw) {
    (void)ctx;
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
            bool skipped;
            float scale = xxs_subblock(g, xbl + 32 * ib, qw + QK_K * ibl + 32 * ib, sigma2, gidx,
                                       bs, &skipped);
            scales[ib] = scale;
            if (skipped) continue;
            for (int k = 0; k < 4; k++) {
                q2[2 * ib] |= (uint32_t)gidx[k] << 8 * k;
                q2[2 * ib + 1] |= (uint32_t)bs[k] << 7 * k;
            }
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
            int l = iqf_nearest_int(0.5f * (id * scales[ib] - 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            q2[2 * ib + 1] |= (uint32_t)l << 28;
        }
        memcpy(y[ibl].qs, q2, sizeof(q2));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* IQ2_XS and IQ2_S: 16-weight sub-blocks, two groups of 8                                     */

/* Search + refinement of one 16-weight sub-block (xval, weights ready). Returns the scale (may be
 * negative: the caller flips); L gets the chosen levels (on the grid); gidx the grid indices. */
static float search16(const iqf_iqgrid *g, const float *xval, const float *weight,
                      const float *waux, int8_t *L, int *gidx) {
    const int kMaxQ = 3;
    float wx[16], wq2[16][3];
    int8_t Laux[16];
    bool on_grid[2] = { true, true }, og_aux[2];
    int gaux[2];
    float max = xval[0];
    for (int i = 1; i < 16; i++) max = xval[i] > max ? xval[i] : max;
    sum_tables(16, weight, xval, wx, wq2);
    float best = 0;
    float scale = max / (float)(2 * kMaxQ - 1);
    gidx[0] = gidx[1] = -1;
    for (int is = -9; is <= 9; is++) {
        float id = ((float)(2 * kMaxQ - 1) + (float)is * 0.1f) / max;
        float this_scale = 1 / id;
        for (int k = 0; k < 2; k++)
            gaux[k] = to_grid(g, xval + 8 * k, waux + 8 * k, id, this_scale, Laux + 8 * k, &og_aux[k]);
        float sumqx, sumq2;
        cand_sums(16, wx, (const float(*)[3])wq2, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 16);
            on_grid[0] = og_aux[0];
            on_grid[1] = og_aux[1];
            gidx[0] = gaux[0];
            gidx[1] = gaux[1];
        }
    }
    if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
        float id = 1 / scale;
        for (int k = 0; k < 2; k++) {
            if (on_grid[k]) continue;
            bool og;
            gidx[k] = to_grid(g, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k, &og);
        }
        float sumqx, sumq2;
        cand_sums(16, wx, (const float(*)[3])wq2, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (gidx[0] < 0 || gidx[1] < 0) { /* no candidate accepted: L is all zeros (ggml's memset) */
        for (int k = 0; k < 2; k++) {
            if (gidx[k] >= 0) continue;
            unsigned u = 0;
            for (int i = 0; i < 8; i++) u |= (unsigned)L[8 * k + i] << 2 * i;
            gidx[k] = g->kmap[u];
        }
    }
    return scale;
}

static void quantize_row_iq2_xs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                                const float *qw) {
    (void)ctx;
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
            int8_t L[16];
            uint8_t bs[2];
            for (int i = 0; i < 16; i++) weight[i] = w[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
            for (int k = 0; k < 2; k++) bs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, true);
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = xval[i] > max ? xval[i] : max;
            memset(L, 0, 16);
            if (max < GROUP_MAX_EPS) {
                scales[ib] = 0;
                continue;
            }
            int gidx[2];
            float scale = search16(g, xval, weight, waux, L, gidx);
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
            int l = iqf_nearest_int(0.5f * (id * scales[ib] - 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            if (ib % 2 == 0) y[ibl].scales[ib / 2] = (uint8_t)l;
            else y[ibl].scales[ib / 2] |= (uint8_t)(l << 4);
        }
        memcpy(y[ibl].qs, q2, sizeof(q2));
    }
}

static void quantize_row_iq2_s(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                               const float *qw) {
    (void)ctx;
    const iqf_iqgrid *g = grid_s;
    block_iq2_s *y = vy;
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
            int8_t L[16];
            uint8_t bs[2];
            if (qw) {
                const float *w = qw + QK_K * ibl + 16 * ib;
                for (int i = 0; i < 16; i++) weight[i] = w[i] * sqrtf(sigma2 + xb[i] * xb[i]);
            } else {
                for (int i = 0; i < 16; i++) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
            }
            for (int i = 0; i < 16; i++) waux[i] = sqrtf(weight[i]);
            for (int k = 0; k < 2; k++) bs[k] = signs8(xb + 8 * k, weight + 8 * k, xval + 8 * k, false);
            float max = xval[0];
            for (int i = 1; i < 16; i++) max = xval[i] > max ? xval[i] : max;
            memset(L, 0, 16);
            if (max < GROUP_MAX_EPS_IQ2_S) {
                scales[ib] = 0;
                continue;
            }
            int gidx[2];
            float scale = search16(g, xval, weight, waux, L, gidx);
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
            int l = iqf_nearest_int(0.5f * (id * scales[ib] - 1));
            l = l < 0 ? 0 : l > 15 ? 15 : l;
            if (ib % 2 == 0) yb->scales[ib / 2] = (uint8_t)l;
            else yb->scales[ib / 2] |= (uint8_t)(l << 4);
        }
    }
}

const iqf_codec iqf_codecs_iq2[] = {
    { IQF_TYPE_IQ2_XXS, init_iq2_xxs, quantize_row_iq2_xxs, dequantize_row_iq2_xxs },
    { IQF_TYPE_IQ2_XS, init_iq2_xs, quantize_row_iq2_xs, dequantize_row_iq2_xs },
    { IQF_TYPE_IQ2_S, init_iq2_s, quantize_row_iq2_s, dequantize_row_iq2_s },
    { -1, NULL, NULL, NULL },
};
