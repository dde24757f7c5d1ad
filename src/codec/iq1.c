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
 * SIMD (same bytes at every level):
 *  - sort: ranks by vector compares (ties by position), the inverse permutation in registers
 *    (AVX-512) or scalar placement (AVX2), then the reference's sequential prefix sums;
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

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IQ1_X86 1
#endif

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
/* The grid is required; without nb_keys (out of memory) the encoder takes its scalar route. */
bool iqf_iq1_tables_ok(void) { return grid1 != NULL; }

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
        for (int i = 0; i < n; ++i) w[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
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
        sumx[j + 1] = sumx[j] + weight[i] * xb[i];
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
        const float wx = weight[i] * xb[i], wi = weight[i];
        /* Branch-free: the other half adds +0, which leaves it unchanged (these sums start
         * at +0 and so are never -0). */
        const bool lo = i < block_size / 2;
        sx0 = sx0 + (lo ? wx : 0.f);
        sw0 = sw0 + (lo ? wi : 0.f);
        sx1 = sx1 + (lo ? 0.f : wx);
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
            float diff = scale * q - xval[i];
            d2 += w * diff * diff;
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

static int search_s_scalar(const float *sumx, const float *sumw, float *scale_out, int *bi1,
                           int *bi2) {
    const int bs = 32;
    float best_score = -FLT_MAX, scale = *scale_out;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            float sumqx = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] +
                          (sumx[bs] - sumx[i2]) * x_p[2];
            float sumq2 = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] +
                          (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] +
                          (sumw[bs] - sumw[i2]) * x_p[2] * x_p[2];
            if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
                scale = sumqx / sumq2;
                best_score = scale * sumqx;
                besti1 = i1;
                besti2 = i2;
                best_shift = 1;
            }
            sumqx = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] +
                    (sumx[bs] - sumx[i2]) * x_m[2];
            sumq2 = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] +
                    (sumw[bs] - sumw[i2]) * x_m[2] * x_m[2];
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
    const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
    const float cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
    const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
    const float cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
    float best_score = -FLT_MAX, scale = *scale_out;
    int besti1 = -1, besti2 = -1, best_k = -1;
    for (int i1 = 0; i1 <= bs; ++i1) {
        for (int i2 = i1; i2 <= bs; ++i2) {
            float qx_p[2], qx_m[2], q2_p[2], q2_m[2], sumqx[4], sumq2[4];
            for (int h = 0; h < 2; ++h) {
                const float sx = px[h][i1] + px[h][i2];
                qx_p[h] = txs[h] * p2 - sx;
                qx_m[h] = txs[h] * m2 - sx;
                q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
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

/* The reference's sumqx/sumq2 of one IQ1_S split (i1, i2) for x_p and x_m. */
static inline void scalar_pair_s(const float *sumx, const float *sumw, int i1, int i2, float *sqxp,
                                 float *sqxm, float *sq2p, float *sq2m) {
    const int bs = 32;
    *sqxp = (sumx[i1] - sumx[0]) * x_p[0] + (sumx[i2] - sumx[i1]) * x_p[1] + (sumx[bs] - sumx[i2]) * x_p[2];
    *sq2p = (sumw[i1] - sumw[0]) * x_p[0] * x_p[0] + (sumw[i2] - sumw[i1]) * x_p[1] * x_p[1] +
            (sumw[bs] - sumw[i2]) * x_p[2] * x_p[2];
    *sqxm = (sumx[i1] - sumx[0]) * x_m[0] + (sumx[i2] - sumx[i1]) * x_m[1] + (sumx[bs] - sumx[i2]) * x_m[2];
    *sq2m = (sumw[i1] - sumw[0]) * x_m[0] * x_m[0] + (sumw[i2] - sumw[i1]) * x_m[1] * x_m[1] +
            (sumw[bs] - sumw[i2]) * x_m[2] * x_m[2];
}

#ifdef IQ1_X86
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
    float vmax[IQ1_MAXV];
    _Alignas(64) float sqx[2048]; /* [(v*K + k)*W + lane]; 64-byte aligned: whole-line vectors */
    _Alignas(64) float sq2[2048];
    _Alignas(64) float f[2048];   /* approximately (sqx/sq2)*sqx where sq2 > 0, else -FLT_MAX */
    _Alignas(64) float vmaxv[IQ1_MAXV * 16]; /* AVX-512: per vector, lane-wise max of f */
    /* finds the anchor (see select_best): returns its vector (-1: none), sets its lane/variant
     * and the largest f before it; NULL: generic code from vmax[] */
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

static float vecmax_scalar(const iq1_cands *c, int v) { return c->vmax[v]; }

static void select_best(const iq1_cands *c, condmask_fn cm, iq1_acc *a) {
    const int K = c->K, W = c->W;
    if (c->nan) {
        replay_from(c, cm, a, 0, 0, 0);
        return;
    }
    float M = -FLT_MAX, before = -FLT_MAX, run = -FLT_MAX;
    int gv = -1, gl = -1, gk = -1;
    float U0;
    if (c->anchor) {
        gv = c->anchor(c, &gl, &gk, &U0);
        if (gv < 0) {
            if (gv == -2) replay_from(c, cm, a, 0, 0, 0);
            return;
        }
    } else {
        for (int v = 0; v < c->nv; v++) {
            if (c->vmax[v] > M) {
                M = c->vmax[v];
                gv = v;
                before = run;
            }
            run = c->vmax[v] > run ? c->vmax[v] : run;
        }
        if (gv < 0) return; /* no candidate with sq2 > 0: nothing is ever accepted */
        float inner = -FLT_MAX;
        const float *F = c->f + (size_t)gv * K * W;
        for (int l = 0; l < c->nl[gv] && gl < 0; l++) {
            for (int k = 0; k < K; k++) {
                float f = F[k * W + l];
                if (f == M) {
                    gl = l;
                    gk = k;
                    break;
                }
                inner = f > inner ? f : inner;
            }
        }
        U0 = before > inner ? before : inner;
        if (gl < 0) {
            replay_from(c, cm, a, 0, 0, 0);
            return;
        }
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

/* ---- AVX-512 ---- */

AVX512_TARGET static unsigned condmask_avx512(const float *sqx, const float *sq2, int K, float best) {
    const __m512 vb = _mm512_set1_ps(best), zero = _mm512_setzero_ps();
    __mmask16 any = 0;
    for (int k = 0; k < K; k++) {
        __m512 x = _mm512_loadu_ps(sqx + 16 * k), q = _mm512_loadu_ps(sq2 + 16 * k);
        any |= _mm512_cmp_ps_mask(q, zero, _CMP_GT_OQ) &
               _mm512_cmp_ps_mask(_mm512_mul_ps(x, x), _mm512_mul_ps(vb, q), _CMP_GT_OQ);
    }
    return any;
}

/* Stores one vector of K variants and its largest valid f. */
AVX512_TARGET __attribute__((always_inline)) static inline void
store_vec_avx512(iq1_cands *c, const __m512 *sqx, const __m512 *sq2, int K, __mmask16 valid, int nl) {
    const int v = c->nv++;
    const __m512 zero = _mm512_setzero_ps();
    const __m512i lo = _mm512_set1_epi32(0x21800000 /* 2^-60 */), span = _mm512_set1_epi32(120 << 23);
    __m512 fmax = _mm512_set1_ps(-FLT_MAX);
    __mmask16 bad = 0;
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        _mm512_storeu_ps(c->sqx + (size_t)(v * K + k) * 16, sqx[k]);
        _mm512_storeu_ps(c->sq2 + (size_t)(v * K + k) * 16, sq2[k]);
        __mmask16 ok = _mm512_mask_cmp_ps_mask(valid, sq2[k], zero, _CMP_GT_OQ);
        /* approximate f (see select_best): sqx^2 / sq2 with rcp14 and one Newton step (relative
         * error < 2^-21), trusted for sq2 in [2^-60, 2^60] (checked on the bit pattern). A NaN f
         * (NaN sqx: never accepted) loses every max below. */
        __m512 r = _mm512_rcp14_ps(sq2[k]);
        r = _mm512_mul_ps(r, _mm512_fnmadd_ps(sq2[k], r, _mm512_set1_ps(2.f)));
        __m512 f = _mm512_mul_ps(_mm512_mul_ps(sqx[k], sqx[k]), r);
        bad |= _mm512_mask_cmpgt_epu32_mask(ok, _mm512_sub_epi32(_mm512_castps_si512(sq2[k]), lo), span);
        f = _mm512_mask_mov_ps(_mm512_set1_ps(-FLT_MAX), ok, f);
        _mm512_storeu_ps(c->f + (size_t)(v * K + k) * 16, f);
        fmax = _mm512_max_ps(f, fmax);
    }
    if (bad) c->nan = true;
    _mm512_storeu_ps(c->vmaxv + (size_t)v * 16, fmax);
    c->nl[v] = (int8_t)nl;
}

AVX512_TARGET static float vecmax_avx512(const iq1_cands *c, int v) {
    return _mm512_reduce_max_ps(_mm512_load_ps(c->vmaxv + (size_t)v * 16));
}

/* Anchor: the first candidate (vector gv, lane gl, variant gk) holding the largest f, and the
 * largest f before it. Returns -1 if no candidate is valid, -2 if not found (then replay). */
AVX512_TARGET static int anchor_avx512(const iq1_cands *c, int *gl, int *gk, float *before) {
    const int K = c->K;
    __m512 gm = _mm512_set1_ps(-FLT_MAX);
    for (int v = 0; v < c->nv; v++) gm = _mm512_max_ps(_mm512_load_ps(c->vmaxv + (size_t)v * 16), gm);
    const float m = _mm512_reduce_max_ps(gm);
    if (!(m > -FLT_MAX)) return -1;
    const __m512 vm = _mm512_set1_ps(m);
    __m512 bm = _mm512_set1_ps(-FLT_MAX);
    for (int v = 0; v < c->nv; v++) {
        __m512 x = _mm512_load_ps(c->vmaxv + (size_t)v * 16);
        if (!_mm512_cmp_ps_mask(x, vm, _CMP_EQ_OQ)) {
            bm = _mm512_max_ps(x, bm);
            continue;
        }
        const float *F = c->f + (size_t)v * K * 16;
        unsigned eq[4] = { 0, 0, 0, 0 }, any = 0;
        for (int k = 0; k < K; k++) {
            eq[k] = _mm512_cmp_ps_mask(_mm512_load_ps(F + 16 * k), vm, _CMP_EQ_OQ);
            any |= eq[k];
        }
        const int l = __builtin_ctz(any);
        int k0 = 0;
        while (!(eq[k0] >> l & 1)) k0++;
        for (int k = 0; k < K; k++) {
            const __mmask16 earlier = (__mmask16)(((1u << l) - 1) | (k < k0 ? 1u << l : 0));
            bm = _mm512_mask_max_ps(bm, earlier, _mm512_load_ps(F + 16 * k), bm);
        }
        *gl = l;
        *gk = k0;
        *before = _mm512_reduce_max_ps(bm);
        return v;
    }
    return -2;
}

/* IQ1_S: lane = one (i1, i2) pair of the reference's order (pairs_s16: 561 pairs, 36 vectors);
 * variants x_p, x_m. Tables are gathered with two-register permutes: i1-indexed ones directly
 * (i1 <= 31 in vectors 0..34), i2-indexed ones shifted by one (i2 in 1..32); pair (0,0) and
 * the last pair (32,32) are patched in with scalar code. */
AVX512_TARGET static int search_s_avx512(const float *sumx, const float *sumw, float *scale_out,
                                         int *bi1, int *bi2) {
    const int bs = 32;
    /* i1-indexed: Ap, Am, WAp, WAm, X1, W1; i2-indexed (entry i2-1): X2, W2, Cp, Cm, WCp, WCm. */
    _Alignas(64) float t1[6][32];
    _Alignas(64) float t2[6][32];
    {
        const __m512 p0 = _mm512_set1_ps(x_p[0]), m0 = _mm512_set1_ps(x_m[0]);
        const __m512 p2 = _mm512_set1_ps(x_p[2]), m2 = _mm512_set1_ps(x_m[2]);
        const __m512 sx0 = _mm512_set1_ps(sumx[0]), sw0 = _mm512_set1_ps(sumw[0]);
        const __m512 sxb = _mm512_set1_ps(sumx[bs]), swb = _mm512_set1_ps(sumw[bs]);
        for (int h = 0; h < 32; h += 16) {
            const __m512 X = _mm512_loadu_ps(sumx + h), Wv = _mm512_loadu_ps(sumw + h);
            const __m512 A = _mm512_sub_ps(X, sx0), WA = _mm512_sub_ps(Wv, sw0);
            _mm512_store_ps(t1[0] + h, _mm512_mul_ps(A, p0));
            _mm512_store_ps(t1[1] + h, _mm512_mul_ps(A, m0));
            _mm512_store_ps(t1[2] + h, _mm512_mul_ps(_mm512_mul_ps(WA, p0), p0));
            _mm512_store_ps(t1[3] + h, _mm512_mul_ps(_mm512_mul_ps(WA, m0), m0));
            _mm512_store_ps(t1[4] + h, X);
            _mm512_store_ps(t1[5] + h, Wv);
            /* i2-indexed, entry i = value at i2 = i + 1 */
            const __m512 X2 = _mm512_loadu_ps(sumx + h + 1), W2 = _mm512_loadu_ps(sumw + h + 1);
            const __m512 C = _mm512_sub_ps(sxb, X2), WC = _mm512_sub_ps(swb, W2);
            _mm512_store_ps(t2[0] + h, X2);
            _mm512_store_ps(t2[1] + h, W2);
            _mm512_store_ps(t2[2] + h, _mm512_mul_ps(C, p2));
            _mm512_store_ps(t2[3] + h, _mm512_mul_ps(C, m2));
            _mm512_store_ps(t2[4] + h, _mm512_mul_ps(_mm512_mul_ps(WC, p2), p2));
            _mm512_store_ps(t2[5] + h, _mm512_mul_ps(_mm512_mul_ps(WC, m2), m2));
        }
    }
#define T1(j) _mm512_permutex2var_ps(_mm512_loadu_ps(t1[j]), idx1, _mm512_loadu_ps(t1[j] + 16))
#define T2(j) _mm512_permutex2var_ps(_mm512_loadu_ps(t2[j]), idx2, _mm512_loadu_ps(t2[j] + 16))
    iq1_cands c;
    c.nv = 0;
    c.K = 2;
    c.W = 16;
    c.nan = false;
    c.li1 = pairs_s16.i1;
    c.li2 = pairs_s16.i2;
    c.anchor = anchor_avx512;
    c.vecmax = vecmax_avx512;
    const __m512 p1 = _mm512_set1_ps(x_p[1]), m1 = _mm512_set1_ps(x_m[1]);
    for (int v = 0; v < 35; v++) {
        const __m512i idx1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pairs_s16.i1 + 16 * v)));
        const __m512i idx2 = _mm512_sub_epi32(
            _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pairs_s16.i2 + 16 * v))),
            _mm512_set1_epi32(1));
        __m512 B = _mm512_sub_ps(T2(0), T1(4));
        __m512 WB = _mm512_sub_ps(T2(1), T1(5));
        __m512 sqx[2], sq2[2];
        sqx[0] = _mm512_add_ps(_mm512_add_ps(T1(0), _mm512_mul_ps(B, p1)), T2(2));
        sqx[1] = _mm512_add_ps(_mm512_add_ps(T1(1), _mm512_mul_ps(B, m1)), T2(3));
        sq2[0] = _mm512_add_ps(_mm512_add_ps(T1(2), _mm512_mul_ps(_mm512_mul_ps(WB, p1), p1)), T2(4));
        sq2[1] = _mm512_add_ps(_mm512_add_ps(T1(3), _mm512_mul_ps(_mm512_mul_ps(WB, m1), m1)), T2(5));
        if (v == 0) {
            /* pair (0, 0): i2 = 0 is outside the shifted tables */
            float px_, mx_, p2_, m2_;
            scalar_pair_s(sumx, sumw, 0, 0, &px_, &mx_, &p2_, &m2_);
            sqx[0] = _mm512_mask_mov_ps(sqx[0], 1, _mm512_set1_ps(px_));
            sqx[1] = _mm512_mask_mov_ps(sqx[1], 1, _mm512_set1_ps(mx_));
            sq2[0] = _mm512_mask_mov_ps(sq2[0], 1, _mm512_set1_ps(p2_));
            sq2[1] = _mm512_mask_mov_ps(sq2[1], 1, _mm512_set1_ps(m2_));
        }
        store_vec_avx512(&c, sqx, sq2, 2, 0xffff, 16);
    }
#undef T1
#undef T2
    {
        float px_, mx_, p2_, m2_;
        scalar_pair_s(sumx, sumw, bs, bs, &px_, &mx_, &p2_, &m2_);
        __m512 sqx[2] = { _mm512_set1_ps(px_), _mm512_set1_ps(mx_) };
        __m512 sq2[2] = { _mm512_set1_ps(p2_), _mm512_set1_ps(m2_) };
        store_vec_avx512(&c, sqx, sq2, 2, 1, 1);
    }
    iq1_acc a = { -FLT_MAX, *scale_out, -1, -1, 0 };
    select_best(&c, condmask_avx512, &a);
    *scale_out = a.scale;
    *bi1 = a.i1;
    *bi2 = a.i2;
    return a.i1 < 0 || a.i2 < 0 ? 0 : (a.k == 0 ? 1 : -1);
}

/* IQ1_M: lane = one (i1, i2) pair (pairs_m16: 153 pairs, 10 vectors); variants k = 0..3. */
AVX512_TARGET static int search_m_avx512(const float px[2][17], const float pw[2][17],
                                         float *scale_out, int *bi1, int *bi2) {
    const int bs = 16;
    const float p2 = x_p[2], m2 = x_m[2];
    const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
    const float cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
    const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
    const float cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
    /* per half: px, pw*cp1, pw*cp2, pw*cm1, pw*cm2 (17 entries, padded to 32) */
    _Alignas(64) float t[2][5][32];
    for (int h = 0; h < 2; h++) {
        /* entries 0..15, then entry 16 repeated (indices above 16 are never used) */
        const __m512 x0 = _mm512_loadu_ps(px[h]), x1 = _mm512_set1_ps(px[h][bs]);
        const __m512 w0 = _mm512_loadu_ps(pw[h]), w1 = _mm512_set1_ps(pw[h][bs]);
        const float cc[4] = { cp1, cp2, cm1, cm2 };
        _mm512_store_ps(t[h][0], x0);
        _mm512_store_ps(t[h][0] + 16, x1);
        for (int j = 0; j < 4; j++) {
            const __m512 cj = _mm512_set1_ps(cc[j]);
            _mm512_store_ps(t[h][j + 1], _mm512_mul_ps(w0, cj));
            _mm512_store_ps(t[h][j + 1] + 16, _mm512_mul_ps(w1, cj));
        }
    }
    iq1_cands c;
    c.nv = 0;
    c.K = 4;
    c.W = 16;
    c.nan = false;
    c.li1 = pairs_m16.i1;
    c.li2 = pairs_m16.i2;
    c.anchor = anchor_avx512;
    c.vecmax = vecmax_avx512;
    __m512 Tp[2], Tm[2], TWp[2], TWm[2];
    for (int h = 0; h < 2; h++) {
        Tp[h] = _mm512_set1_ps(px[h][bs] * p2);
        Tm[h] = _mm512_set1_ps(px[h][bs] * m2);
        TWp[h] = _mm512_set1_ps(pw[h][bs] * p2 * p2);
        TWm[h] = _mm512_set1_ps(pw[h][bs] * m2 * m2);
    }
#define TB(h, j, idx) _mm512_permutex2var_ps(_mm512_loadu_ps(t[h][j]), idx, _mm512_loadu_ps(t[h][j] + 16))
    for (int v = 0; v < 10; v++) {
        const int nl = v < 9 ? 16 : 153 - 16 * 9;
        const __m512i idx1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pairs_m16.i1 + 16 * v)));
        const __m512i idx2 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(pairs_m16.i2 + 16 * v)));
        __m512 sx0 = _mm512_add_ps(TB(0, 0, idx1), TB(0, 0, idx2));
        __m512 sx1 = _mm512_add_ps(TB(1, 0, idx1), TB(1, 0, idx2));
        __m512 qxp0 = _mm512_sub_ps(Tp[0], sx0), qxm0 = _mm512_sub_ps(Tm[0], sx0);
        __m512 qxp1 = _mm512_sub_ps(Tp[1], sx1), qxm1 = _mm512_sub_ps(Tm[1], sx1);
        __m512 q2p0 = _mm512_add_ps(_mm512_add_ps(TWp[0], TB(0, 1, idx1)), TB(0, 2, idx2));
        __m512 q2m0 = _mm512_add_ps(_mm512_add_ps(TWm[0], TB(0, 3, idx1)), TB(0, 4, idx2));
        __m512 q2p1 = _mm512_add_ps(_mm512_add_ps(TWp[1], TB(1, 1, idx1)), TB(1, 2, idx2));
        __m512 q2m1 = _mm512_add_ps(_mm512_add_ps(TWm[1], TB(1, 3, idx1)), TB(1, 4, idx2));
        __m512 sqx[4], sq2[4];
        sqx[0] = _mm512_add_ps(qxp0, qxp1);
        sqx[1] = _mm512_add_ps(qxp0, qxm1);
        sqx[2] = _mm512_add_ps(qxm0, qxp1);
        sqx[3] = _mm512_add_ps(qxm0, qxm1);
        sq2[0] = _mm512_add_ps(q2p0, q2p1);
        sq2[1] = _mm512_add_ps(q2p0, q2m1);
        sq2[2] = _mm512_add_ps(q2m0, q2p1);
        sq2[3] = _mm512_add_ps(q2m0, q2m1);
        store_vec_avx512(&c, sqx, sq2, 4, (__mmask16)((1u << nl) - 1), nl);
    }
#undef TB
    iq1_acc a = { -FLT_MAX, *scale_out, -1, -1, 0 };
    select_best(&c, condmask_avx512, &a);
    *scale_out = a.scale;
    *bi1 = a.i1;
    *bi2 = a.i2;
    return a.i1 < 0 || a.i2 < 0 ? -1 : a.k;
}

/* Neighbour search, 16 neighbours per vector. term table T_i: lane e holds
 * (w_i*(scale*xg[e&3] - x_i))*(scale*xg[e&3] - x_i), so permutexvar by key >> 2i (low 4 bits)
 * picks the term of coordinate i's level. */
AVX512_TARGET static int best_neighbour_avx512(const uint16_t *nb, const uint16_t *nbk,
                                               const float *xval, const float *weight, float scale,
                                               const float *xg) {
    const int n = nbk[0];
    if (n > 240) return best_neighbour_scalar(nb, nbk, xval, weight, scale, xg);
    /* Lane e of T[i] (i >= 2): term of level e & 3; T01 lane e = (0 + term0[e & 3]) +
     * term1[e >> 2], the reference's first two steps of d2 for levels (e & 3, e >> 2). */
    const __m512 vs = _mm512_set1_ps(scale);
    const __m512 g0 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0, 0, 1, 2, 0),
                                            _mm512_castps128_ps512(_mm_loadu_ps(xg)));
    const __m512 g1 = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 0, 0, 0),
                                            _mm512_castps128_ps512(_mm_loadu_ps(xg)));
    const __m512 SQ = _mm512_mul_ps(vs, g0), SQ1 = _mm512_mul_ps(vs, g1);
    __m512 T[8];
    for (int i = 0; i < 8; i++) {
        __m512 diff = _mm512_sub_ps(i == 1 ? SQ1 : SQ, _mm512_set1_ps(xval[i]));
        T[i] = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(weight[i]), diff), diff);
    }
    const __m512 T01 = _mm512_add_ps(_mm512_add_ps(_mm512_setzero_ps(), T[0]), T[1]);
    /* All distances, then one minimum (NaN never wins, as in `d2 < best`), then its first
     * occurrence: the reference's strict-< scan. */
    _Alignas(64) float d2buf[256];
    __m512 vmin = _mm512_set1_ps(INFINITY);
    for (int j0 = 0; j0 < n; j0 += 16) {
        __m512i keys = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(nbk + 1 + j0)));
        __m512 d2 = _mm512_permutexvar_ps(keys, T01);
        for (int i = 2; i < 8; i++)
            d2 = _mm512_add_ps(d2, _mm512_permutexvar_ps(_mm512_srli_epi32(keys, 2 * i), T[i]));
        if (n - j0 < 16)
            d2 = _mm512_mask_mov_ps(_mm512_set1_ps(INFINITY), (__mmask16)((1u << (n - j0)) - 1), d2);
        _mm512_storeu_ps(d2buf + j0, d2);
        vmin = _mm512_min_ps(d2, vmin);
    }
    const float m = _mm512_reduce_min_ps(vmin);
    if (!(m < FLT_MAX)) return -1;
    const __m512 vm = _mm512_set1_ps(m);
    for (int j0 = 0;; j0 += 16) {
        __mmask16 eq = _mm512_cmp_ps_mask(_mm512_loadu_ps(d2buf + j0), vm, _CMP_EQ_OQ);
        if (eq) return grid1->kmap[nbk[1 + j0 + __builtin_ctz((unsigned)eq)]];
    }
}

AVX512_TARGET static float weights_avx512(const float *xb, const float *qw, float sigma2, int n,
                                         float *w) {
    __m512 mx = _mm512_setzero_ps();
    for (int i = 0; i < n; i += 16) {
        __m512 x = _mm512_loadu_ps(xb + i), x2 = _mm512_mul_ps(x, x);
        if (qw)
            x2 = _mm512_mul_ps(_mm512_loadu_ps(qw + i),
                               _mm512_sqrt_ps(_mm512_add_ps(_mm512_set1_ps(sigma2), x2)));
        _mm512_storeu_ps(w + i, x2);
        mx = _mm512_max_ps(mx, _mm512_abs_ps(x));
    }
    return _mm512_reduce_max_ps(mx);
}

/* IQ1_M sort + prefix sums: ranks rank_i = #{j: x_j < x_i} + #{j < i: x_j == x_i}, then the
 * inverse permutation in a register (order[r] = i with rank_i = r), the sorted products by permutes, and the sequential
 * sums over contiguous data. */
AVX512_TARGET static void sort_prefix_m_avx512(const float *xb, const float *weight, int *order,
                                               float px[2][17], float pw[2][17]) {
    const __m512 X = _mm512_loadu_ps(xb);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i R = _mm512_setzero_si512();
    for (int j = 0; j < 16; j++) {
        const __m512 xj = _mm512_set1_ps(xb[j]);
        __mmask16 m = _mm512_cmp_ps_mask(X, xj, _CMP_GT_OQ) |
                      _mm512_mask_cmp_ps_mask((__mmask16)(0xffffu << (j + 1)), X, xj, _CMP_EQ_OQ);
        R = _mm512_mask_add_epi32(R, m, R, one);
    }
    __m512i O = _mm512_setzero_si512();
    for (int i = 0; i < 16; i++) {
        __mmask16 at = _mm512_cmpeq_epi32_mask(iota, _mm512_permutexvar_epi32(_mm512_set1_epi32(i), R));
        O = _mm512_mask_mov_epi32(O, at, _mm512_set1_epi32(i));
    }
    _mm512_storeu_si512(order, O);
    const __m512 W = _mm512_loadu_ps(weight);
    const __m512 WX = _mm512_mul_ps(W, X);
    const __mmask16 lo = _mm512_cmplt_epi32_mask(O, _mm512_set1_epi32(8));
    const __m512 sw = _mm512_permutexvar_ps(O, W), swx = _mm512_permutexvar_ps(O, WX);
    /* per sorted position: the increment of each half (+0 for the other half, see the scalar) */
    _Alignas(64) float ax0[16], ax1[16], aw0[16], aw1[16];
    _mm512_store_ps(ax0, _mm512_maskz_mov_ps(lo, swx));
    _mm512_store_ps(ax1, _mm512_maskz_mov_ps((__mmask16)~lo, swx));
    _mm512_store_ps(aw0, _mm512_maskz_mov_ps(lo, sw));
    _mm512_store_ps(aw1, _mm512_maskz_mov_ps((__mmask16)~lo, sw));
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

/* IQ1_S sort + prefix sums, as sort_prefix_m_avx512 for 32 values. */
AVX512_TARGET static void sort_prefix_s_avx512(const float *xb, const float *weight, int *order,
                                               float *sumx, float *sumw) {
    const __m512 X0 = _mm512_loadu_ps(xb), X1 = _mm512_loadu_ps(xb + 16);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i iota16 = _mm512_add_epi32(iota, _mm512_set1_epi32(16));
    __m512i R0 = _mm512_setzero_si512(), R1 = _mm512_setzero_si512();
    for (int j = 0; j < 32; j++) {
        const __m512 xj = _mm512_set1_ps(xb[j]);
        const __mmask16 after0 = (__mmask16)(j < 16 ? 0xffffu << (j + 1) : 0);
        const __mmask16 after1 = (__mmask16)(j < 16 ? 0xffffu : 0xffffu << (j - 15));
        __mmask16 m0 = _mm512_cmp_ps_mask(X0, xj, _CMP_GT_OQ) |
                       _mm512_mask_cmp_ps_mask(after0, X0, xj, _CMP_EQ_OQ);
        __mmask16 m1 = _mm512_cmp_ps_mask(X1, xj, _CMP_GT_OQ) |
                       _mm512_mask_cmp_ps_mask(after1, X1, xj, _CMP_EQ_OQ);
        R0 = _mm512_mask_add_epi32(R0, m0, R0, one);
        R1 = _mm512_mask_add_epi32(R1, m1, R1, one);
    }
    __m512i O0 = _mm512_setzero_si512(), O1 = _mm512_setzero_si512();
    for (int i = 0; i < 32; i++) {
        const __m512i Ri = _mm512_permutexvar_epi32(_mm512_set1_epi32(i & 15), i < 16 ? R0 : R1);
        O0 = _mm512_mask_mov_epi32(O0, _mm512_cmpeq_epi32_mask(iota, Ri), _mm512_set1_epi32(i));
        O1 = _mm512_mask_mov_epi32(O1, _mm512_cmpeq_epi32_mask(iota16, Ri), _mm512_set1_epi32(i));
    }
    _mm512_storeu_si512(order, O0);
    _mm512_storeu_si512(order + 16, O1);
    const __m512 W0 = _mm512_loadu_ps(weight), W1 = _mm512_loadu_ps(weight + 16);
    const __m512 WX0 = _mm512_mul_ps(W0, X0), WX1 = _mm512_mul_ps(W1, X1);
    _Alignas(64) float ax[32], aw[32];
    _mm512_store_ps(ax, _mm512_permutex2var_ps(WX0, O0, WX1));
    _mm512_store_ps(ax + 16, _mm512_permutex2var_ps(WX0, O1, WX1));
    _mm512_store_ps(aw, _mm512_permutex2var_ps(W0, O0, W1));
    _mm512_store_ps(aw + 16, _mm512_permutex2var_ps(W0, O1, W1));
    float sx = 0, sw = 0;
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        sx = sx + ax[j];
        sw = sw + aw[j];
        sumx[j + 1] = sx;
        sumw[j + 1] = sw;
    }
}


/* ---- AVX2 ---- */

AVX2_TARGET static unsigned condmask_avx2(const float *sqx, const float *sq2, int K, float best) {
    const __m256 vb = _mm256_set1_ps(best), zero = _mm256_setzero_ps();
    __m256 any = _mm256_setzero_ps();
    for (int k = 0; k < K; k++) {
        __m256 x = _mm256_loadu_ps(sqx + 8 * k), q = _mm256_loadu_ps(sq2 + 8 * k);
        any = _mm256_or_ps(any, _mm256_and_ps(_mm256_cmp_ps(q, zero, _CMP_GT_OQ),
                                              _mm256_cmp_ps(_mm256_mul_ps(x, x), _mm256_mul_ps(vb, q), _CMP_GT_OQ)));
    }
    return (unsigned)_mm256_movemask_ps(any);
}

AVX2_TARGET __attribute__((always_inline)) static inline void
store_vec_avx2(iq1_cands *c, const __m256 *sqx, const __m256 *sq2, int K, int nl, int i1, int i2) {
    const int v = c->nv++;
    const __m256 lanes = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nl),
                                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    __m256 fmax = _mm256_set1_ps(-FLT_MAX), nan = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        _mm256_storeu_ps(c->sqx + (size_t)(v * K + k) * 8, sqx[k]);
        _mm256_storeu_ps(c->sq2 + (size_t)(v * K + k) * 8, sq2[k]);
        __m256 ok = _mm256_and_ps(lanes, _mm256_cmp_ps(sq2[k], _mm256_setzero_ps(), _CMP_GT_OQ));
        __m256 r = _mm256_rcp_ps(sq2[k]);
        r = _mm256_mul_ps(r, _mm256_fnmadd_ps(sq2[k], r, _mm256_set1_ps(2.f)));
        __m256 f = _mm256_mul_ps(_mm256_mul_ps(sqx[k], sqx[k]), r);
        __m256 bad = _mm256_or_ps(_mm256_cmp_ps(f, f, _CMP_UNORD_Q),
                                  _mm256_or_ps(_mm256_cmp_ps(sq2[k], _mm256_set1_ps(0x1p-60f), _CMP_LT_OQ),
                                               _mm256_cmp_ps(sq2[k], _mm256_set1_ps(0x1p60f), _CMP_GT_OQ)));
        nan = _mm256_or_ps(nan, _mm256_and_ps(ok, bad));
        f = _mm256_blendv_ps(_mm256_set1_ps(-FLT_MAX), f, ok);
        _mm256_storeu_ps(c->f + (size_t)(v * K + k) * 8, f);
        fmax = _mm256_max_ps(fmax, f);
    }
    if (_mm256_movemask_ps(nan)) c->nan = true;
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(fmax), _mm256_extractf128_ps(fmax, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float vmax = _mm_cvtss_f32(h);
    c->vmax[v] = vmax;
    c->i1[v] = (int8_t)i1;
    c->i2[v] = (int8_t)i2;
    c->nl[v] = (int8_t)nl;
}

/* Ranks (rank_i = #{j: x_j < x_i} + #{j < i: x_j == x_i}) of n = 16 or 32 values, 8 lanes at a
 * time; then the sorted products are placed with scalar stores (no dependent loads later). */
AVX2_TARGET static void ranks_avx2(const float *xb, int n, int32_t *rank) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int q = 0; q < n; q += 8) {
        const __m256 X = _mm256_loadu_ps(xb + q);
        const __m256i lanes = _mm256_add_epi32(iota, _mm256_set1_epi32(q));
        __m256i R = _mm256_setzero_si256();
        for (int j = 0; j < n; j++) {
            const __m256 xj = _mm256_set1_ps(xb[j]);
            const __m256i after = _mm256_cmpgt_epi32(lanes, _mm256_set1_epi32(j));
            const __m256i m = _mm256_or_si256(_mm256_castps_si256(_mm256_cmp_ps(X, xj, _CMP_GT_OQ)),
                                              _mm256_and_si256(after, _mm256_castps_si256(_mm256_cmp_ps(X, xj, _CMP_EQ_OQ))));
            R = _mm256_sub_epi32(R, m);
        }
        _mm256_storeu_si256((__m256i *)(rank + q), R);
    }
}

AVX2_TARGET static void sort_prefix_m_avx2(const float *xb, const float *weight, int *order,
                                           float px[2][17], float pw[2][17]) {
    int32_t rank[16];
    ranks_avx2(xb, 16, rank);
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

AVX2_TARGET static void sort_prefix_s_avx2(const float *xb, const float *weight, int *order,
                                           float *sumx, float *sumw) {
    int32_t rank[32];
    ranks_avx2(xb, 32, rank);
    float ax[32], aw[32];
    for (int i = 0; i < 32; i++) {
        const int r = rank[i];
        order[r] = i;
        ax[r] = weight[i] * xb[i];
        aw[r] = weight[i];
    }
    float sx = 0, sw = 0;
    sumx[0] = sumw[0] = 0;
    for (int j = 0; j < 32; ++j) {
        sx = sx + ax[j];
        sw = sw + aw[j];
        sumx[j + 1] = sx;
        sumw[j + 1] = sw;
    }
}

AVX2_TARGET static int search_s_avx2(const float *sumx, const float *sumw, float *scale_out,
                                     int *bi1, int *bi2) {
    const int bs = 32;
    float Cp[48], Cm[48], WCp[48], WCm[48], X[48], W[48];
    for (int i2 = 0; i2 <= bs; i2++) {
        float C = sumx[bs] - sumx[i2], WC = sumw[bs] - sumw[i2];
        Cp[i2] = C * x_p[2];
        Cm[i2] = C * x_m[2];
        WCp[i2] = WC * x_p[2] * x_p[2];
        WCm[i2] = WC * x_m[2] * x_m[2];
        X[i2] = sumx[i2];
        W[i2] = sumw[i2];
    }
    for (int i2 = bs + 1; i2 < 48; i2++) Cp[i2] = Cm[i2] = WCp[i2] = WCm[i2] = X[i2] = W[i2] = 0;
    iq1_cands c;
    c.nv = 0;
    c.K = 2;
    c.W = 8;
    c.nan = false;
    c.li1 = c.li2 = NULL;
    c.anchor = NULL;
    c.vecmax = vecmax_scalar;
    const __m256 p1 = _mm256_set1_ps(x_p[1]), m1 = _mm256_set1_ps(x_m[1]);
    for (int i1 = 0; i1 <= bs; ++i1) {
        const float A = sumx[i1] - sumx[0], WA = sumw[i1] - sumw[0];
        const __m256 Ap = _mm256_set1_ps(A * x_p[0]), Am = _mm256_set1_ps(A * x_m[0]);
        const __m256 WAp = _mm256_set1_ps(WA * x_p[0] * x_p[0]), WAm = _mm256_set1_ps(WA * x_m[0] * x_m[0]);
        const __m256 X1 = _mm256_set1_ps(sumx[i1]), W1 = _mm256_set1_ps(sumw[i1]);
        for (int i2 = i1; i2 <= bs; i2 += 8) {
            int nl = bs + 1 - i2 < 8 ? bs + 1 - i2 : 8;
            __m256 B = _mm256_sub_ps(_mm256_loadu_ps(X + i2), X1);
            __m256 WB = _mm256_sub_ps(_mm256_loadu_ps(W + i2), W1);
            __m256 sqx[2], sq2[2];
            sqx[0] = _mm256_add_ps(_mm256_add_ps(Ap, _mm256_mul_ps(B, p1)), _mm256_loadu_ps(Cp + i2));
            sqx[1] = _mm256_add_ps(_mm256_add_ps(Am, _mm256_mul_ps(B, m1)), _mm256_loadu_ps(Cm + i2));
            sq2[0] = _mm256_add_ps(_mm256_add_ps(WAp, _mm256_mul_ps(_mm256_mul_ps(WB, p1), p1)),
                                   _mm256_loadu_ps(WCp + i2));
            sq2[1] = _mm256_add_ps(_mm256_add_ps(WAm, _mm256_mul_ps(_mm256_mul_ps(WB, m1), m1)),
                                   _mm256_loadu_ps(WCm + i2));
            store_vec_avx2(&c, sqx, sq2, 2, nl, i1, i2);
        }
    }
    iq1_acc a = { -FLT_MAX, *scale_out, -1, -1, 0 };
    select_best(&c, condmask_avx2, &a);
    *scale_out = a.scale;
    *bi1 = a.i1;
    *bi2 = a.i2;
    return a.i1 < 0 || a.i2 < 0 ? 0 : (a.k == 0 ? 1 : -1);
}

AVX2_TARGET static int search_m_avx2(const float px[2][17], const float pw[2][17],
                                     float *scale_out, int *bi1, int *bi2) {
    const int bs = 16;
    const float p2 = x_p[2], m2 = x_m[2];
    const float cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
    const float cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
    const float cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
    const float cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
    _Alignas(32) float PX[2][24], PWp[2][24], PWm[2][24];
    for (int h = 0; h < 2; h++) {
        const __m256 vcp2 = _mm256_set1_ps(cp2), vcm2 = _mm256_set1_ps(cm2);
        const __m256 tail = _mm256_setr_ps(1, 0, 0, 0, 0, 0, 0, 0); /* entry 16 only */
        for (int q = 0; q < 24; q += 8) {
            __m256 x = q < 16 ? _mm256_loadu_ps(px[h] + q) : _mm256_mul_ps(_mm256_set1_ps(px[h][bs]), tail);
            __m256 w = q < 16 ? _mm256_loadu_ps(pw[h] + q) : _mm256_mul_ps(_mm256_set1_ps(pw[h][bs]), tail);
            _mm256_store_ps(PX[h] + q, x);
            _mm256_store_ps(PWp[h] + q, _mm256_mul_ps(w, vcp2));
            _mm256_store_ps(PWm[h] + q, _mm256_mul_ps(w, vcm2));
        }
    }
    iq1_cands c;
    c.nv = 0;
    c.K = 4;
    c.W = 8;
    c.nan = false;
    c.li1 = c.li2 = NULL;
    c.anchor = NULL;
    c.vecmax = vecmax_scalar;
    for (int i1 = 0; i1 <= bs; ++i1) {
        __m256 Tp[2], Tm[2], Sp[2], Sm[2], P1[2];
        for (int h = 0; h < 2; h++) {
            Tp[h] = _mm256_set1_ps(px[h][bs] * p2);
            Tm[h] = _mm256_set1_ps(px[h][bs] * m2);
            Sp[h] = _mm256_set1_ps(pw[h][bs] * p2 * p2 + pw[h][i1] * cp1);
            Sm[h] = _mm256_set1_ps(pw[h][bs] * m2 * m2 + pw[h][i1] * cm1);
            P1[h] = _mm256_set1_ps(px[h][i1]);
        }
        for (int i2 = i1; i2 <= bs; i2 += 8) {
            int nl = bs + 1 - i2 < 8 ? bs + 1 - i2 : 8;
            __m256 qxp[2], qxm[2], q2p[2], q2m[2];
            for (int h = 0; h < 2; h++) {
                __m256 sx = _mm256_add_ps(P1[h], _mm256_loadu_ps(PX[h] + i2));
                qxp[h] = _mm256_sub_ps(Tp[h], sx);
                qxm[h] = _mm256_sub_ps(Tm[h], sx);
                q2p[h] = _mm256_add_ps(Sp[h], _mm256_loadu_ps(PWp[h] + i2));
                q2m[h] = _mm256_add_ps(Sm[h], _mm256_loadu_ps(PWm[h] + i2));
            }
            __m256 sqx[4], sq2[4];
            sqx[0] = _mm256_add_ps(qxp[0], qxp[1]);
            sqx[1] = _mm256_add_ps(qxp[0], qxm[1]);
            sqx[2] = _mm256_add_ps(qxm[0], qxp[1]);
            sqx[3] = _mm256_add_ps(qxm[0], qxm[1]);
            sq2[0] = _mm256_add_ps(q2p[0], q2p[1]);
            sq2[1] = _mm256_add_ps(q2p[0], q2m[1]);
            sq2[2] = _mm256_add_ps(q2m[0], q2p[1]);
            sq2[3] = _mm256_add_ps(q2m[0], q2m[1]);
            store_vec_avx2(&c, sqx, sq2, 4, nl, i1, i2);
        }
    }
    iq1_acc a = { -FLT_MAX, *scale_out, -1, -1, 0 };
    select_best(&c, condmask_avx2, &a);
    *scale_out = a.scale;
    *bi1 = a.i1;
    *bi2 = a.i2;
    return a.i1 < 0 || a.i2 < 0 ? -1 : a.k;
}

AVX2_TARGET static int best_neighbour_avx2(const uint16_t *nb, const uint16_t *nbk,
                                           const float *xval, const float *weight, float scale,
                                           const float *xg) {
    (void)nb;
    const int n = nbk[0];
    const float sq0 = scale * xg[0], sq1 = scale * xg[1], sq2 = scale * xg[2];
    const __m256 SQ = _mm256_setr_ps(sq0, sq1, sq2, sq0, sq0, sq1, sq2, sq0);
    __m256 T[8];
    for (int i = 0; i < 8; i++) {
        __m256 diff = _mm256_sub_ps(SQ, _mm256_set1_ps(xval[i]));
        T[i] = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(weight[i]), diff), diff);
    }
    float best_score = FLT_MAX;
    int best_j = -1;
    for (int j0 = 0; j0 < n; j0 += 8) {
        int nl = n - j0 < 8 ? n - j0 : 8;
        __m256i k = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(nbk + 1 + j0)));
        __m256 d2 = _mm256_setzero_ps();
        for (int i = 0; i < 8; i++)
            d2 = _mm256_add_ps(d2, _mm256_permutevar8x32_ps(T[i], _mm256_srli_epi32(k, 2 * i)));
        float dd[8];
        _mm256_storeu_ps(dd, d2);
        for (int l = 0; l < nl; l++) {
            if (dd[l] < best_score) {
                best_score = dd[l];
                best_j = j0 + l;
            }
        }
    }
    return best_j < 0 ? -1 : grid1->kmap[nbk[1 + best_j]];
}
#endif

static iq1_kernels pick_kernels(const iqf_qctx *ctx) {
    iq1_kernels k = { ctx->simd, best_neighbour_scalar, weights_scalar,
                      sort_prefix_m_scalar, sort_prefix_s_scalar, search_s_scalar, search_m_scalar };
#ifdef IQ1_X86
    if (ctx->simd >= IQF_SIMD_AVX512) {
        k.neighbour = best_neighbour_avx512;
        k.weights = weights_avx512;
        k.sort_prefix_m = sort_prefix_m_avx512;
        k.sort_prefix_s = sort_prefix_s_avx512;
        k.search_s = search_s_avx512;
        k.search_m = search_m_avx512;
    } else if (ctx->simd >= IQF_SIMD_AVX2) {
        k.neighbour = best_neighbour_avx2;
        k.sort_prefix_m = sort_prefix_m_avx2;
        k.sort_prefix_s = sort_prefix_s_avx2;
        k.search_s = search_s_avx2;
        k.search_m = search_m_avx2;
    }
#endif
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
        for (int j = 0; j < besti1; ++j) L[order[j]] = 0;
        for (int j = besti1; j < besti2; ++j) L[order[j]] = 1;
        for (int j = besti2; j < block_size; ++j) L[order[j]] = 2;
        if (scale < 0) {
            for (int j = 0; j < block_size; ++j) L[j] = (int8_t)(2 - L[j]);
            scale = -scale;
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
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
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
        int l = iqf_nearest_int(0.5f * (id * scales[ib] - 1));
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
        for (int j = 0; j < besti1; ++j) L[order[j]] = 0;
        for (int j = besti1; j < besti2; ++j) L[order[j]] = 1;
        for (int j = besti2; j < block_size; ++j) L[order[j]] = 2;
        if (scale < 0) {
            for (int j = 0; j < block_size; ++j) L[j] = (int8_t)(2 - L[j]);
            scale = -scale;
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
                    sumqx_f += w * q * xb[8 * k + j];
                    sumq2_f += w * q * q;
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
        int l = iqf_nearest_int(0.5f * (id * scales[ib] - 1));
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
                sumqx_f += w * q * xb[8 * k + j];
                sumq2_f += w * q * q;
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
