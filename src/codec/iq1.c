/*
 * iq1.c - IQ1_S (256 weights, 50 bytes) and IQ1_M (256 weights, 56 bytes): groups of 8 weights
 * coded as one of 2048 ternary grid points (iq1s_grid, values -1/0/+1) plus a shift of
 * ±IQ1S_DELTA, with 3-bit sub-block scales.
 *
 * Compat encoders: ggml 0.25.1 quantize_row_iq1_s_impl / quantize_row_iq1_m_impl, bit for bit.
 * Per sub-block (32 weights for IQ1_S, 16 for IQ1_M) the values are sorted (glibc's qsort is a
 * stable merge sort for these sizes, so the order is by value, then by position; -0 == +0), every
 * split of the sorted values into {-1, 0, +1} is scored with prefix sums, and groups of 8 that land
 * off the grid take the best of their neighbour list (iqgrid.h, nwant 3).
 *
 * SIMD (same bytes at every level; the kernels are written once in iq1_lanes.h over vec_lanes.h
 * and compiled for AVX2 and AVX-512):
 *  - sort: ranks by vector compares (ties by position), scalar placement, then the reference's
 *    sequential prefix sums;
 *  - split search: every (i1, i2) pair's sumqx/sumq2 in vector lanes with the reference's exact
 *    per-candidate operation order (AVX-512: pairs in lanes, tables by permutes; AVX2: 8
 *    consecutive i2 per vector); the order-dependent "accept if better" sequence is resolved by
 *    jumping to a provably accepted anchor and replaying the rest exactly (select_best);
 *  - neighbour search: 16 (8) neighbours per vector; per group a table
 *    term[i][l] = (w_i*(scale*xg[l] - x_i))*(scale*xg[l] - x_i) is built once and each lane adds
 *    term[i][level_i] for i = 0..7 in order (the reference's sum); first minimum wins.
 */
#include "codec.h"
#include "iqgrid.h"
#include "util/fma.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* 1.5625 bpw: fp16 d; qs = low 8 bits of the 11-bit grid index per group of 8; qh per 32:
 * bits 0..11 = 3 high index bits x 4 groups, bits 12..14 = scale s, bit 15 = delta sign. */

/* 1.75 bpw: qs = low 8 index bits per group of 8; qh per 16 weights: bits 0..2 / 4..6 = high
 * index bits of its two groups, bits 3 / 7 = their delta signs; scales: 4 uint16, 3-bit scales
 * per 16 weights in bits 0..11, the fp16 super-block scale in the top nibbles. */

#define IQ1S_DELTA 0.125f
#define IQ1M_DELTA 0.125f
#define GROUP_MAX_EPS_IQ1_M 1e-7f
#define GROUP_MAX_EPS_IQ1_S 1e-12f
#define NGRID_IQ1S 2048

/* Σx^2 of `count` super-blocks in parallel lanes (iq4.c). */
void iqf_iq4_sumsq(iqf_simd simd, const float *x, int stride, int len, int count, float *out);

/* ---------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------- */
static uint64_t iq1s_grid[NGRID_IQ1S]; /* dequantization grid: 8 int8 in {-1, 0, 1} */
static const iqf_iqgrid *grid1;
/* The neighbour lists as keys, parallel to grid1->neighbours ([n, key_1 .. key_n] per list), so
 * SIMD code loads 16 keys instead of gathering them and touches only this array (a key's grid
 * index is kmap[key]); padded by 32 entries for whole-vector loads. NULL if out of memory. */
static uint16_t *nb_keys;
static pthread_once_t iq1_once = PTHREAD_ONCE_INIT;

/* The split pairs (i1 <= i2 <= bs) in the reference's order, 16 per vector. */
typedef struct iq1_pairs {
    int8_t i1[576], i2[576];
} iq1_pairs;
static iq1_pairs pairs_s16, pairs_m16; /* bs = 32: 561 pairs; bs = 16: 153 pairs */

static void fill_pairs(iq1_pairs *p, int bs) {
    int n = 0;
    for (int i1 = 0; i1 <= bs; i1++)
        for (int i2 = i1; i2 <= bs; i2++) {
            p->i1[n] = (int8_t)i1;
            p->i2[n] = (int8_t)i2;
            n++;
        }
    for (; n < 576; n++) p->i1[n] = p->i2[n] = 0;
}

static void iq1_build(void) {
    static const int8_t lev[3] = { -1, 0, 1 };
    iqf_iqgrid_decode_table(iqf_iq1s_keys, NGRID_IQ1S, lev, iq1s_grid);
    grid1 = iqf_iqgrid_get(IQF_IQGRID_IQ1S);
    if (grid1) {
        size_t len = (size_t)grid1->n_offgrid + (size_t)grid1->n_neighbours;
        nb_keys = calloc(len + 32, sizeof(uint16_t));
        if (nb_keys) {
            for (size_t pos = 0; pos < len;) {
                int n = grid1->neighbours[pos];
                nb_keys[pos] = (uint16_t)n;
                for (int j = 1; j <= n; j++) nb_keys[pos + j] = iqf_iq1s_keys[grid1->neighbours[pos + j]];
                pos += (size_t)n + 1;
            }
        }
    }
    fill_pairs(&pairs_s16, 32);
    fill_pairs(&pairs_m16, 16);
}

static void iq1_init(void) { pthread_once(&iq1_once, iq1_build); }
/* The iq1 family's table-init hook (codec.c families[]): the grid is required; without nb_keys
 * (out of memory) the encoder takes its scalar route. */
bool iqf_iq1_tables_init(int type) {
    (void)type;
    iq1_init();
    return grid1 != NULL;
}

/* ---------------------------------------------------------------------------------------------
 * Decoders
 * ------------------------------------------------------------------------------------------- */
static void dequantize_row_iq1_s(const void *vx, float *y, int64_t n) {
    const block_iq1_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint16_t *qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float dl = d * (2 * ((qh[ib] >> 12) & 7) + 1);
            const float delta = qh[ib] & 0x8000 ? -IQ1S_DELTA : IQ1S_DELTA;
            for (int l = 0; l < 4; ++l) {
                const int8_t *grid = (const int8_t *)(iq1s_grid + (qs[l] | (((qh[ib] >> 3 * l) & 7) << 8)));
                for (int j = 0; j < 8; ++j) y[j] = dl * (grid[j] + delta);
                y += 8;
            }
            qs += 4;
        }
    }
}

static void dequantize_row_iq1_m(const void *vx, float *y, int64_t n) {
    const block_iq1_m *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, sizeof sc);
        const uint16_t u16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                        ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = IQF_FP16_TO_FP32(u16);
        const uint8_t *qs = x[i].qs;
        const uint8_t *qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
            const float dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
            uint16_t idx[4];
            float delta[4];
            idx[0] = (uint16_t)(qs[0] | ((qh[0] << 8) & 0x700));
            idx[1] = (uint16_t)(qs[1] | ((qh[0] << 4) & 0x700));
            idx[2] = (uint16_t)(qs[2] | ((qh[1] << 8) & 0x700));
            idx[3] = (uint16_t)(qs[3] | ((qh[1] << 4) & 0x700));
            delta[0] = qh[0] & 0x08 ? -IQ1S_DELTA : IQ1S_DELTA;
            delta[1] = qh[0] & 0x80 ? -IQ1S_DELTA : IQ1S_DELTA;
            delta[2] = qh[1] & 0x08 ? -IQ1S_DELTA : IQ1S_DELTA;
            delta[3] = qh[1] & 0x80 ? -IQ1S_DELTA : IQ1S_DELTA;
            for (int l = 0; l < 4; ++l) {
                const int8_t *grid = (const int8_t *)(iq1s_grid + idx[l]);
                const float dl = l < 2 ? dl1 : dl2;
                for (int j = 0; j < 8; ++j) y[j] = dl * (grid[j] + delta[l]);
                y += 8;
            }
            qs += 4;
            qh += 2;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Shared encoder pieces
 * ------------------------------------------------------------------------------------------- */

/* The order glibc's (stable) qsort with iq1_sort_helper gives: ascending value, ties (including
 * -0 vs +0) by position. Writes the positions in sorted order. n <= 32. */
static void sort_order_scalar(const float *x, int n, int *order) {
    for (int j = 0; j < n; j++) {
        int k = j;
        while (k > 0 && x[order[k - 1]] > x[j]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = j;
    }
}

static float weights_scalar(const float *xb, const float *qw, float sigma2, int n, float *w) {
    if (qw) {
        for (int i = 0; i < n; ++i) w[i] = qw[i] * sqrtf(IQF_FMA_ARM(xb[i], xb[i], sigma2));
    } else {
        for (int i = 0; i < n; ++i) w[i] = xb[i] * xb[i];
    }
    float max = fabsf(xb[0]);
    for (int i = 1; i < n; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
    return max;
}

/* IQ1_S: sort order and the prefix sums sumx/sumw over the sorted values. */
static void sort_prefix_s_scalar(const float *xb, const float *weight, int *order, float *sumx,
                                 float *sumw) {
    sort_order_scalar(xb, 32, order);
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        int i = order[j];
        sumx[j + 1] = IQF_FMA_ARM(weight[i], xb[i], sumx[j]);
        sumw[j + 1] = sumw[j] + weight[i];
    }
}

/* IQ1_M: sort order and the per-half prefix sums px/pw over the sorted values. */
static void sort_prefix_m_scalar(const float *xb, const float *weight, int *order, float px[2][17],
                                 float pw[2][17]) {
    const int block_size = 16;
    sort_order_scalar(xb, block_size, order);
    px[0][0] = px[1][0] = 0;
    pw[0][0] = pw[1][0] = 0;
    float sx0 = 0, sx1 = 0, sw0 = 0, sw1 = 0; /* running px/pw of each half */
    for (int j = 0; j < block_size; ++j) {
        const int i = order[j];
        const float wi = weight[i];
        /* pw: the other half adds +0, which leaves it unchanged (these sums start at +0 and so
         * are never -0); px: ggml's px[h][j] + weight[i]*xb[i] (fused on arm64, fma.h). */
        const bool lo = i < block_size / 2;
        sx0 = lo ? IQF_FMA_ARM(weight[i], xb[i], sx0) : sx0;
        sx1 = lo ? sx1 : IQF_FMA_ARM(weight[i], xb[i], sx1);
        sw0 = sw0 + (lo ? wi : 0.f);
        sw1 = sw1 + (lo ? 0.f : wi);
        px[0][j + 1] = sx0;
        px[1][j + 1] = sx1;
        pw[0][j + 1] = sw0;
        pw[1][j + 1] = sw1;
    }
}

/* iq1_find_best_neighbour2: the neighbour minimising Σ (w*(scale*xg[l]-x))*(scale*xg[l]-x),
 * first one on ties. Writes the grid index (or -1 if no distance is below FLT_MAX). */
static int best_neighbour_scalar(const uint16_t *nb, const uint16_t *nbk, const float *xval,
                                 const float *weight, float scale, const float *xg) {
    (void)nbk;
    int n = nb[0];
    float best_score = FLT_MAX;
    int grid_index = -1;
    for (int j = 1; j <= n; ++j) {
        uint16_t key = iqf_iq1s_keys[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 8; ++i) {
            float q = xg[(key >> 2 * i) & 3];
            float w = weight[i];
            float diff = IQF_FMS_ARM(scale, q, xval[i]);
            d2 = IQF_FMA_ARM(w * diff, diff, d2);
        }
        if (d2 < best_score) {
            best_score = d2;
            grid_index = nb[j];
        }
    }
    return grid_index;
}

/* Off-grid group: its best neighbour. The reference then scans the whole grid with an
 * out-of-bounds read and aborts if nothing is found either (only possible when every distance
 * overflows to inf or is NaN); here the first neighbour is taken instead (docs/compat/iq1iq4.md). */
typedef int (*neighbour_fn)(const uint16_t *nb, const uint16_t *nbk, const float *xval,
                            const float *weight, float scale, const float *xg);

/* ---------------------------------------------------------------------------------------------
 * Kernel sets
 * ------------------------------------------------------------------------------------------- */
typedef struct iq1_kernels {
    iqf_simd simd;
    neighbour_fn neighbour;
    /* weights of n (16 or 32) values: qw*sqrt(sigma2 + x^2), or x^2 without qw; returns max|x| */
    float (*weights)(const float *xb, const float *qw, float sigma2, int n, float *w);
    void (*sort_prefix_m)(const float *xb, const float *weight, int *order, float px[2][17],
                          float pw[2][17]);
    void (*sort_prefix_s)(const float *xb, const float *weight, int *order, float *sumx, float *sumw);
    /* IQ1_S split search over prefix sums sumx/sumw (33 entries): returns best_shift (0 if
     * nothing accepted) and sets *i1, *i2, *scale exactly as the reference's double loop. */
    int (*search_s)(const float *sumx, const float *sumw, float *scale, int *i1, int *i2);
    /* IQ1_M split search over per-half prefix sums: returns best_k (-1 if none). */
    int (*search_m)(const float px[2][17], const float pw[2][17], float *scale, int *i1, int *i2);
} iq1_kernels;

/* padded to 4 for 128-bit loads */
static const float x_p[4] = { -1 + IQ1S_DELTA, IQ1S_DELTA, 1 + IQ1S_DELTA, 0 };
static const float x_m[4] = { -1 - IQ1S_DELTA, -IQ1S_DELTA, 1 - IQ1S_DELTA, 0 };

/* ggml's a*v0 + b*v1 + c*v2 and a*v0*v0 + b*v1*v1 + c*v2*v2, rounded as its build (fma.h) */
static inline float split_qx(float a, float b, float c, const float *v) {
    return IQF_FMA_ARM(c, v[2], IQF_FMA_ARM(a, v[0], b * v[1]));
}
static inline float split_q2(float a, float b, float c, const float *v) {
    return IQF_FMA_ARM(c * v[2], v[2], IQF_FMA_ARM(a * v[0], v[0], b * v[1] * v[1]));
}

static int search_s_scalar(const float *sumx, const float *sumw, float *scale_out, int *bi1,
                           int *bi2) {
    const int bs = 32;
    float best_score = -FLT_MAX, scale = *scale_out;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            float sumqx = split_qx(sumx[i1] - sumx[0], sumx[i2] - sumx[i1], sumx[bs] - sumx[i2], x_p);
            float sumq2 = split_q2(sumw[i1] - sumw[0], sumw[i2] - sumw[i1], sumw[bs] - sumw[i2], x_p);
            if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                scale = sumqx / sumq2;
                best_score = scale * sumqx;
                besti1 = i1;
                besti2 = i2;
                best_shift = 1;
            }
            sumqx = split_qx(sumx[i1] - sumx[0], sumx[i2] - sumx[i1], sumx[bs] - sumx[i2], x_m);
            sumq2 = split_q2(sumw[i1] - sumw[0], sumw[i2] - sumw[i1], sumw[bs] - sumw[i2], x_m);
            if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                scale = sumqx / sumq2;
                best_score = scale * sumqx;
                besti1 = i1;
                besti2 = i2;
                best_shift = -1;
            }
        }
    }
    *scale_out = scale;
    *bi1 = besti1;
    *bi2 = besti2;
    return besti1 < 0 || besti2 < 0 ? 0 : best_shift;
}

static int search_m_scalar(const float px[2][17], const float pw[2][17], float *scale_out,
                           int *bi1, int *bi2) {
    const int bs = 16;
    const float txs[2] = { px[0][bs], px[1][bs] };
    const float tws[2] = { pw[0][bs], pw[1][bs] };
    const float p2 = x_p[2], m2 = x_m[2];
    const float cp1 = IQF_FMS_ARM(x_p[0], x_p[0], x_p[1] * x_p[1]);
    const float cp2 = IQF_FMS_ARM(x_p[1], x_p[1], x_p[2] * x_p[2]);
    const float cm1 = IQF_FMS_ARM(x_m[0], x_m[0], x_m[1] * x_m[1]);
    const float cm2 = IQF_FMS_ARM(x_m[1], x_m[1], x_m[2] * x_m[2]);
    float best_score = -FLT_MAX, scale = *scale_out;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            float qx_p[2], qx_m[2], q2_p[2], q2_m[2], sumqx[4], sumq2[4];
            for (int h = 0; h < 2; ++h) {
                const float sx = px[h][i1] + px[h][i2];
                qx_p[h] = IQF_FMS_ARM(txs[h], p2, sx);
                qx_m[h] = IQF_FMS_ARM(txs[h], m2, sx);
                q2_p[h] = IQF_FMA_ARM(pw[h][i2], cp2, IQF_FMA_ARM(tws[h] * p2, p2, pw[h][i1] * cp1));
                q2_m[h] = IQF_FMA_ARM(pw[h][i2], cm2, IQF_FMA_ARM(tws[h] * m2, m2, pw[h][i1] * cm1));
            }
            sumqx[0] = qx_p[0] + qx_p[1];
            sumqx[1] = qx_p[0] + qx_m[1];
            sumqx[2] = qx_m[0] + qx_p[1];
            sumqx[3] = qx_m[0] + qx_m[1];
            sumq2[0] = q2_p[0] + q2_p[1];
            sumq2[1] = q2_p[0] + q2_m[1];
            sumq2[2] = q2_m[0] + q2_p[1];
            sumq2[3] = q2_m[0] + q2_m[1];
            for (int k = 0; k < 4; ++k) {
                if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
                    scale = sumqx[k] / sumq2[k];
                    best_score = scale * sumqx[k];
                    besti1 = i1;
                    besti2 = i2;
                    best_k = k;
                }
            }
        }
    }
    *scale_out = scale;
    *bi1 = besti1;
    *bi2 = besti2;
    return besti1 < 0 || besti2 < 0 ? -1 : best_k;
}

/* The reference's sumqx/sumq2 of one IQ1_S split (i1, i2) for x_p and x_m (used by the
 * vector kernels' edge cases only). */
static inline __attribute__((unused)) void scalar_pair_s(const float *sumx, const float *sumw, int i1, int i2, float *sqxp,
                                 float *sqxm, float *sq2p, float *sq2m) {
    const int bs = 32;
    *sqxp = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] + (sumx[bs] - sumx[i2]) * x_p[2];
    *sq2p = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] + (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] +
            (sumw[bs] - sumw[i2]) * x_p[2] * x_p[2];
    *sqxm = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] + (sumx[bs] - sumx[i2]) * x_m[2];
    *sq2m = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] +
            (sumw[bs] - sumw[i2]) * x_m[2] * x_m[2];
}

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX2_TARGET __attribute__((target("avx2,fma")))

/* ---------------------------------------------------------------------------------------------
 * Vectorised split search.
 *
 * The reference visits the candidates in the order (i1, i2, variant) and accepts candidate c when
 * sq2 > 0 && sqx*sqx > best*sq2, then best = (sqx/sq2)*sqx =: f(c). Acceptances are frequent
 * (~40 per IQ1_M sub-block), so replaying them one by one is slow. Instead:
 *  1. all candidates' sqx, sq2 are computed in vector lanes (exact per-lane operation order) and
 *     stored; per vector the largest f over its valid candidates is kept;
 *  2. g = the first candidate with the global maximum M of f, and U = the largest f before g;
 *  3. before g, `best` only ever holds -FLT_MAX or f values of earlier candidates, so best <= U;
 *     the acceptance test is monotone in best, hence if g passes it at U it is accepted in the
 *     reference's run, and from g on the state (best = f(g), g's split) is known exactly;
 *  4. the candidates after g are replayed exactly (vector pre-test, scalar acceptance).
 * If step 3 fails, or an f is NaN, the whole sequence is replayed exactly from the start.
 * ------------------------------------------------------------------------------------------- */
#define IQ1_MAXV 96 /* vectors: IQ1_S at 8 lanes needs 85 */

typedef struct iq1_cands {
    int nv, K, W;
    bool nan;
    int8_t i1[IQ1_MAXV], i2[IQ1_MAXV], nl[IQ1_MAXV]; /* i1-major layout: lane l is (i1, i2 + l) */
    const int8_t *li1, *li2; /* or, when not NULL, lane l of vector v is (li1, li2)[v*W + l] */
    _Alignas(64) float sqx[2048]; /* [(v*K + k)*W + lane]; 64-byte aligned: whole-line vectors */
    _Alignas(64) float sq2[2048];
    _Alignas(64) float f[2048];   /* approximately (sqx/sq2)*sqx where sq2 > 0, else -FLT_MAX */
    _Alignas(64) float vmaxv[IQ1_MAXV * 16]; /* per vector, lane-wise max of f over the variants */
    /* finds the anchor (see select_best): returns its vector (-1: no valid candidate, -2: not
     * found, replay), sets its lane/variant and the largest f before it */
    int (*anchor)(const struct iq1_cands *c, int *gl, int *gk, float *before);
    /* largest approximate f of vector v (see replay_from) */
    float (*vecmax)(const struct iq1_cands *c, int v);
} iq1_cands;

typedef struct iq1_acc {
    float best_score, scale;
    int i1, i2, k;
} iq1_acc;

/* Lanes of one vector where some variant passes the acceptance test at `best`. */
typedef unsigned (*condmask_fn)(const float *sqx, const float *sq2, int K, float best);

static inline void lane_pair(const iq1_cands *c, int v, int l, int *i1, int *i2) {
    if (c->li1) {
        *i1 = c->li1[v * c->W + l];
        *i2 = c->li2[v * c->W + l];
    } else {
        *i1 = c->i1[v];
        *i2 = c->i2[v] + l;
    }
}

/* The reference's test for one candidate. */
static inline bool accept1(iq1_acc *a, float sqx, float sq2, int i1, int i2, int k) {
    if (sq2 > 0 && sqx * sqx > a->best_score * sq2) {
        a->scale = sqx / sq2;
        a->best_score = a->scale * sqx;
        a->i1 = i1;
        a->i2 = i2;
        a->k = k;
        return true;
    }
    return false;
}

#ifndef IQ1_COUNT
#define IQ1_COUNT(x) ((void)0)
#endif

/* Exact replay of the acceptance sequence from position (v0, l0, k0) on. */
static void replay_from(const iq1_cands *c, condmask_fn cm, iq1_acc *a, int v0, int l0, int k0) {
    const int K = c->K, W = c->W;
    for (int v = v0; v < c->nv; v++) {
        const float *X = c->sqx + (size_t)v * K * W, *Q = c->sq2 + (size_t)v * K * W;
        unsigned rest = (1u << c->nl[v]) - 1;
        if (v == v0) {
            if (k0 > 0) {
                int i1, i2;
                lane_pair(c, v, l0, &i1, &i2);
                for (int k = k0; k < K; k++) accept1(a, X[k * W + l0], Q[k * W + l0], i1, i2, k);
                l0++;
            }
            rest &= ~((1u << l0) - 1);
        }
        /* Skip a vector no candidate of which can pass at the current best: a candidate that
         * passes has f > best*(1 - 2^-23), and its approximate f is within 2^-21 of f (sq2 in
         * [2^-60, 2^60], which !c->nan guarantees; best > 2^-50 rules out an underflowing
         * sqx^2). */
        if (v != v0 && !c->nan && a->best_score > 0x1p-50f &&
            c->vecmax(c, v) < a->best_score * (1.f - 0x1p-18f))
            continue;
        unsigned any = rest ? cm(X, Q, K, a->best_score) & rest : 0;
        while (any) {
            int l = __builtin_ctz(any), i1, i2;
            bool acc = false;
            lane_pair(c, v, l, &i1, &i2);
            for (int k = 0; k < K; k++) acc |= accept1(a, X[k * W + l], Q[k * W + l], i1, i2, k);
            rest &= ~((2u << l) - 1);
            any = acc ? cm(X, Q, K, a->best_score) & rest : any & rest;
        }
    }
}

static void select_best(const iq1_cands *c, condmask_fn cm, iq1_acc *a) {
    const int K = c->K, W = c->W;
    if (c->nan) {
        replay_from(c, cm, a, 0, 0, 0);
        return;
    }
    int gl = -1, gk = -1;
    float U0;
    const int gv = c->anchor(c, &gl, &gk, &U0);
    if (gv < 0) { /* -1: no candidate with sq2 > 0, nothing is ever accepted */
        if (gv == -2) replay_from(c, cm, a, 0, 0, 0);
        return;
    }
    const float *X = c->sqx + (size_t)gv * K * W, *Q = c->sq2 + (size_t)gv * K * W;
    /* U >= every exact f before g (approximation error < 2^-20 relative for sq2 in
     * [2^-60, 2^60]; an underflowing sqx^2 means f < 2^-64). */
    float U = U0 < 0 ? U0 : (float)((double)U0 * (1.0 + 0x1p-17) + 0x1p-64);
    float sx = X[gk * W + gl], s2 = Q[gk * W + gl];
    if (!(sx * sx > U * s2)) {
        IQ1_COUNT(anchor_fail);
        replay_from(c, cm, a, 0, 0, 0);
        return;
    }
    a->scale = sx / s2;
    a->best_score = a->scale * sx;
    lane_pair(c, gv, gl, &a->i1, &a->i2);
    a->k = gk;
    if (gk + 1 < K) replay_from(c, cm, a, gv, gl, gk + 1);
    else replay_from(c, cm, a, gv, gl + 1, 0);
}

/* ---- shared by the SIMD kernels (iq1_lanes.h) ---- */
static void cands_init(iq1_cands *c, int K, int W,
                       int (*anchor)(const iq1_cands *, int *, int *, float *),
                       float (*vecmax)(const iq1_cands *, int)) {
    c->nv = 0;
    c->K = K;
    c->W = W;
    c->nan = false;
    c->li1 = c->li2 = NULL;
    c->anchor = anchor;
    c->vecmax = vecmax;
}

/* select_best from the reference's initial state; returns the accepted variant (-1: none). */
static int run_select(const iq1_cands *c, condmask_fn cm, float *scale_out, int *bi1, int *bi2) {
    iq1_acc a = { -FLT_MAX, *scale_out, -1, -1, 0 };
    select_best(c, cm, &a);
    *scale_out = a.scale;
    *bi1 = a.i1;
    *bi2 = a.i2;
    return a.i1 < 0 || a.i2 < 0 ? -1 : a.k;
}

/* The reference's sequential prefix sums over the sorted increments (IQ1_M: per half, the other
 * half's increment +0; IQ1_S: sorted w*x and w). */
static void prefix_m(const float *ax0, const float *ax1, const float *aw0, const float *aw1,
                     float px[2][17], float pw[2][17]) {
    float sx0 = 0, sx1 = 0, sw0 = 0, sw1 = 0;
    px[0][0] = px[1][0] = 0;
    pw[0][0] = pw[1][0] = 0;
    for (int j = 0; j < 16; ++j) {
        sx0 = sx0 + ax0[j];
        sw0 = sw0 + aw0[j];
        sx1 = sx1 + ax1[j];
        sw1 = sw1 + aw1[j];
        px[0][j + 1] = sx0;
        px[1][j + 1] = sx1;
        pw[0][j + 1] = sw0;
        pw[1][j + 1] = sw1;
    }
}

static void prefix_s(const float *ax, const float *aw, float *sumx, float *sumw) {
    float sx = 0, sw = 0;
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        sx = sx + ax[j];
        sw = sw + aw[j];
        sumx[j + 1] = sx;
        sumw[j + 1] = sw;
    }
}

/* The sorted products placed by rank (scalar stores), then the prefix sums. */
static void place_prefix_m(const float *xb, const float *weight, const int32_t *rank, int *order,
                           float px[2][17], float pw[2][17]) {
    float ax0[16], ax1[16], aw0[16], aw1[16];
    for (int i = 0; i < 16; i++) {
        const int r = rank[i];
        const float wx = weight[i] * xb[i], wi = weight[i];
        order[r] = i;
        ax0[r] = i < 8 ? wx : 0.f; /* +0 for the other half, see sort_prefix_m_scalar */
        aw0[r] = i < 8 ? wi : 0.f;
        ax1[r] = i < 8 ? 0.f : wx;
        aw1[r] = i < 8 ? 0.f : wi;
    }
    prefix_m(ax0, ax1, aw0, aw1, px, pw);
}

static void place_prefix_s(const float *xb, const float *weight, const int32_t *rank, int *order,
                           float *sumx, float *sumw) {
    float ax[32], aw[32];
    for (int i = 0; i < 32; i++) {
        const int r = rank[i];
        order[r] = i;
        ax[r] = weight[i] * xb[i];
        aw[r] = weight[i];
    }
    prefix_s(ax, aw, sumx, sumw);
}

/* ---- the kernels (iq1_lanes.h), once per instruction set ---- */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "iq1_lanes.h"
#include "lanes_neon.h"

#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT AVX2_TARGET
#define VL_SFX(name) name##_avx2
#define VL_KERNELS "iq1_lanes.h"
#include "lanes_inst.h"

#define VL_W 16
#define VL_TGT AVX512_TARGET
#define VL_SFX(name) name##_avx512
#define IQ1_PACKED 1
#define VL_KERNELS "iq1_lanes.h"
#include "lanes_inst.h"
#undef IQ1_PACKED
#endif

static iq1_kernels pick_kernels(const iqf_qctx *ctx) {
    iq1_kernels k = { ctx->simd, best_neighbour_scalar, weights_scalar,
                      sort_prefix_m_scalar, sort_prefix_s_scalar, search_s_scalar, search_m_scalar };
#ifdef IQF_ARCH_X86
    if (ctx->simd == IQF_SIMD_AVX512) k = kernels_avx512;
    else if (IQF_SIMD_IS_X86(ctx->simd)) k = kernels_avx2;
#endif
    if (ctx->simd == IQF_SIMD_NEON) k = kernels_neon;
    k.simd = ctx->simd;
    return k;
}

/* Starts loading the neighbour lists of the off-grid groups among `ng` groups of 8 levels, so
 * that their memory latency overlaps the work on the groups before them. */
static inline void prefetch_groups(const int8_t *L, int ng) {
    if (!nb_keys) return;
    for (int k = 0; k < ng; k++) {
        uint16_t u = 0;
        for (int j = 0; j < 8; ++j) u |= (uint16_t)(L[8 * k + j] << 2 * j);
        const int32_t m = grid1->kmap[u];
        if (m >= 0) continue;
        const uint16_t *p = nb_keys + (-m - 1);
        for (int off = 0; off < 256; off += 32) __builtin_prefetch(p + off);
    }
}

/* Grid index of a group of 8 levels L (0..2), or its best neighbour (then L is rewritten). */
static int group_index(const iq1_kernels *K, int8_t *L, const float *xb, const float *w,
                       float scale, const float *xx, bool *on_grid) {
    const iqf_iqgrid *g = grid1;
    uint16_t u = 0;
    for (int j = 0; j < 8; ++j) u |= (uint16_t)(L[j] << 2 * j);
    int gi = g->kmap[u];
    if (gi >= 0) return gi;
    *on_grid = false;
    const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
    gi = nb_keys ? K->neighbour(nb, nb_keys + (nb - g->neighbours), xb, w, scale, xx)
                 : best_neighbour_scalar(nb, NULL, xb, w, scale, xx);
    if (gi < 0) gi = nb[1];
    uint16_t key = iqf_iq1s_keys[gi];
    for (int i = 0; i < 8; ++i) L[i] = (int8_t)((key >> 2 * i) & 3);
    return gi;
}

/* The levels of a sub-block from its sorted split (i1, i2): 0 below i1, 1 up to i2, 2 above.
 * A negative scale is made positive by mirroring the levels (then returns true). */
static bool split_levels(int8_t *L, const int *order, int i1, int i2, int n, float *scale) {
    for (int j = 0; j < i1; ++j) L[order[j]] = 0;
    for (int j = i1; j < i2; ++j) L[order[j]] = 1;
    for (int j = i2; j < n; ++j) L[order[j]] = 2;
    if (!(*scale < 0)) return false;
    for (int j = 0; j < n; ++j) L[j] = (int8_t)(2 - L[j]);
    *scale = -*scale;
    return true;
}

/* ---------------------------------------------------------------------------------------------
 * IQ1_S
 * ------------------------------------------------------------------------------------------- */
static void iq1_s_superblock(const iq1_kernels *K, const float *xbl, float sumx2, block_iq1_s *y,
                             const float *qwbl) {
    const int block_size = 32;
    float scales[QK_K / 32], weight[32], sumx[33], sumw[33];
    int8_t L[32], shifts[QK_K / 32];
    int order[32];
    uint16_t index[4];

    y->d = IQF_FP32_TO_FP16(0.f);
    memset(y->qs, 0, sizeof y->qs);
    memset(y->qh, 0, sizeof y->qh);
    float max_scale = 0;
    float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / block_size; ++ib) {
        const float *xb = xbl + block_size * ib;
        float max = K->weights(xb, qwbl + block_size * ib, sigma2, block_size, weight);
        if (max < GROUP_MAX_EPS_IQ1_S) {
            scales[ib] = 0;
            shifts[ib] = 1;
            continue;
        }
        K->sort_prefix_s(xb, weight, order, sumx, sumw);
        float scale = max;
        int besti1, besti2;
        int best_shift = K->search_s(sumx, sumw, &scale, &besti1, &besti2);
        if (best_shift == 0) {
            scales[ib] = 0;
            shifts[ib] = 1;
            continue;
        }
        if (split_levels(L, order, besti1, besti2, block_size, &scale)) {
            best_shift = -best_shift;
        }
        bool all_on_grid = true;
        const float *xx = best_shift == 1 ? x_p : x_m;
        prefetch_groups(L, block_size / 8);
        for (int k = 0; k < block_size / 8; ++k)
            index[k] = (uint16_t)group_index(K, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx,
                                             &all_on_grid);
        if (!all_on_grid) {
            float sumqx = 0, sumq2 = 0;
            for (int k = 0; k < block_size / 8; ++k) {
                uint16_t key = iqf_iq1s_keys[index[k]];
                for (int j = 0; j < 8; ++j) {
                    float w = weight[8 * k + j];
                    float q = xx[(key >> 2 * j) & 3];
                    sumqx = IQF_FMA_ARM(w * q, xb[8 * k + j], sumqx);
                    sumq2 = IQF_FMA_ARM(w * q, q, sumq2);
                }
            }
            if (sumqx > 0 && sumq2 > 0) scale = sumqx / sumq2;
        }
        uint16_t h = 0;
        for (int k = 0; k < block_size / 8; ++k) {
            y->qs[(block_size / 8) * ib + k] = (uint8_t)(index[k] & 255);
            h |= (uint16_t)((index[k] >> 8) << 3 * k);
        }
        y->qh[ib] = h;
        scales[ib] = scale;
        shifts[ib] = (int8_t)best_shift;
        max_scale = max_scale > scale ? max_scale : scale;
    }

    if (!max_scale) return;

    float d = max_scale / 15;
    y->d = IQF_FP32_TO_FP16(d * 1.125f);
    float id = 1 / d;
    for (int ib = 0; ib < QK_K / block_size; ++ib) {
        int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scales[ib], 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        if (shifts[ib] == -1) l |= 8;
        y->qh[ib] |= (uint16_t)(l << 12);
    }
}

/* ---------------------------------------------------------------------------------------------
 * IQ1_M
 * ------------------------------------------------------------------------------------------- */
static void iq1_m_superblock(const iq1_kernels *K, const float *xbl, float sumx2, block_iq1_m *y,
                             const float *qwbl) {
    const int block_size = 16;
    static const uint8_t masks[4] = { 0x00, 0x80, 0x08, 0x88 };
    float scales[QK_K / 16], wall[QK_K];
    int8_t L[16], shifts[QK_K / 16];
    int order[16];
    uint16_t index[2];
    const float *xx;

    memset(y->qs, 0, sizeof y->qs);
    memset(y->qh, 0, sizeof y->qh);
    memset(y->scales, 0, sizeof y->scales);
    float max_scale = 0;
    float sigma2 = 2 * sumx2 / QK_K;

    for (int ib = 0; ib < QK_K / block_size; ++ib) {
        const float *xb = xbl + block_size * ib;
        float *weight = wall + block_size * ib; /* kept for the final pass, which in the
                                                   reference recomputes the same values */
        float max = K->weights(xb, qwbl ? qwbl + block_size * ib : NULL, sigma2, block_size, weight);
        if (max < GROUP_MAX_EPS_IQ1_M) {
            scales[ib] = 0;
            shifts[ib] = 0;
            continue;
        }
        float px[2][17], pw[2][17];
        K->sort_prefix_m(xb, weight, order, px, pw);
        float scale = max;
        int besti1, besti2;
        int best_k = K->search_m((const float(*)[17])px, (const float(*)[17])pw, &scale, &besti1, &besti2);
        if (best_k < 0) {
            scales[ib] = 0;
            shifts[ib] = 0;
            continue;
        }
        if (split_levels(L, order, besti1, besti2, block_size, &scale)) {
            best_k = 3 - best_k; /* 0 <-> 3, 1 <-> 2 */
        }
        bool all_on_grid = true;
        prefetch_groups(L, block_size / 8);
        for (int k = 0; k < block_size / 8; ++k) {
            if (k == 0) xx = best_k < 2 ? x_p : x_m;
            else xx = best_k % 2 == 0 ? x_p : x_m;
            index[k] = (uint16_t)group_index(K, L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx,
                                             &all_on_grid);
        }
        if (!all_on_grid) {
            float sumqx_f = 0, sumq2_f = 0;
            for (int k = 0; k < block_size / 8; ++k) {
                if (k == 0) xx = best_k < 2 ? x_p : x_m;
                else xx = best_k % 2 == 0 ? x_p : x_m;
                uint16_t key = iqf_iq1s_keys[index[k]];
                for (int j = 0; j < 8; ++j) {
                    float w = weight[8 * k + j];
                    float q = xx[(key >> 2 * j) & 3];
                    sumqx_f = IQF_FMA_ARM(w * q, xb[8 * k + j], sumqx_f);
                    sumq2_f = IQF_FMA_ARM(w * q, q, sumq2_f);
                }
            }
            if (sumqx_f > 0 && sumq2_f > 0) scale = sumqx_f / sumq2_f;
        }
        y->qs[2 * ib + 0] = (uint8_t)(index[0] & 255);
        y->qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
        y->qh[ib] = (uint8_t)((index[0] >> 8) | ((index[1] >> 8) << 4));
        scales[ib] = scale;
        shifts[ib] = (int8_t)best_k;
        max_scale = max_scale > scale ? max_scale : scale;
    }

    if (!max_scale) return;

    uint16_t sc[4] = { 0, 0, 0, 0 };
    float d = max_scale / 15;
    float id = 1 / d;
    float sumqx_f = 0, sumq2_f = 0;
    for (int ib = 0; ib < QK_K / block_size; ++ib) {
        int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scales[ib], 1));
        l = l < 0 ? 0 : l > 7 ? 7 : l;
        sc[ib / 4] |= (uint16_t)(l << 3 * (ib % 4));
        y->qh[ib] |= masks[shifts[ib]];
        const float *xb = xbl + block_size * ib;
        const float *weight = wall + block_size * ib;
        for (int k = 0; k < block_size / 8; ++k) {
            if (k == 0) xx = shifts[ib] < 2 ? x_p : x_m;
            else xx = shifts[ib] % 2 == 0 ? x_p : x_m;
            int gi = y->qs[2 * ib + k] + ((y->qh[ib] << (8 - 4 * k)) & 0x700);
            uint16_t key = iqf_iq1s_keys[gi];
            for (int j = 0; j < 8; ++j) {
                float w = weight[8 * k + j];
                float q = xx[(key >> 2 * j) & 3] * (2 * l + 1);
                sumqx_f = IQF_FMA_ARM(w * q, xb[8 * k + j], sumqx_f);
                sumq2_f = IQF_FMA_ARM(w * q, q, sumq2_f);
            }
        }
    }
    if (sumq2_f > 0) d = sumqx_f / sumq2_f;
    uint16_t s = IQF_FP32_TO_FP16(d * 1.1125f);
    sc[0] |= (uint16_t)((s & 0x000f) << 12);
    sc[1] |= (uint16_t)((s & 0x00f0) << 8);
    sc[2] |= (uint16_t)((s & 0x0f00) << 4);
    sc[3] |= (uint16_t)((s & 0xf000) << 0);
    memcpy(y->scales, sc, sizeof sc);
}

/* ---------------------------------------------------------------------------------------------
 * Rows: super-blocks in groups of 8 so that their Σx^2 run in parallel lanes.
 * ------------------------------------------------------------------------------------------- */
static void iq1_row(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw,
                    bool m) {
    iq1_kernels K = pick_kernels(ctx);
    const int64_t nsb = n / QK_K;
    float sumx2[8];
    for (int64_t i0 = 0; i0 < nsb; i0 += 8) {
        int cnt = nsb - i0 < 8 ? (int)(nsb - i0) : 8;
        iqf_iq4_sumsq(ctx->simd, x + i0 * QK_K, QK_K, QK_K, cnt, sumx2);
        for (int k = 0; k < cnt; k++) {
            int64_t i = i0 + k;
            const float *q = qw ? qw + i * QK_K : NULL;
            if (m) iq1_m_superblock(&K, x + i * QK_K, sumx2[k], (block_iq1_m *)vy + i, q);
            else iq1_s_superblock(&K, x + i * QK_K, sumx2[k], (block_iq1_s *)vy + i, q);
        }
    }
}

static void quantize_row_iq1_s(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                               const float *qw) {
    iq1_row(ctx, x, vy, n, qw, false);
}

static void quantize_row_iq1_m(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                               const float *qw) {
    iq1_row(ctx, x, vy, n, qw, true);
}

const iqf_codec iqf_codecs_iq1[] = {
    { IQF_TYPE_IQ1_S, iq1_init, quantize_row_iq1_s, dequantize_row_iq1_s },
    { IQF_TYPE_IQ1_M, iq1_init, quantize_row_iq1_m, dequantize_row_iq1_m },
    { -1, NULL, NULL, NULL },
};
