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
 * SIMD: the exhaustive split search evaluates 16 second split points (i2) per vector, each lane
 * with the reference's exact operation order; the order-dependent "accept if better" scan runs
 * scalar from the first lane that can be accepted. The neighbour search evaluates 16 neighbours
 * per vector: per group, a table term[i][l] = (w_i*(scale*xg[l] - x_i))*(scale*xg[l] - x_i) is
 * built once, and each lane adds term[i][level_i] for i = 0..7 in order (the reference's sum).
 */
#include "codec.h"
#include "iqgrid.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define IQ1_X86 1
#endif

/* 1.5625 bpw: fp16 d; qs = low 8 bits of the 11-bit grid index per group of 8; qh per 32:
 * bits 0..11 = 3 high index bits x 4 groups, bits 12..14 = scale s, bit 15 = delta sign. */
typedef struct {
    iqf_half d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
} block_iq1_s;
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s size");

/* 1.75 bpw: qs = low 8 index bits per group of 8; qh per 16 weights: bits 0..2 / 4..6 = high
 * index bits of its two groups, bits 3 / 7 = their delta signs; scales: 4 uint16, 3-bit scales
 * per 16 weights in bits 0..11, the fp16 super-block scale in the top nibbles. */
typedef struct {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32];
} block_iq1_m;
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m size");

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
static uint32_t grid_keys32[NGRID_IQ1S]; /* 2-bit level keys widened for gathers */
static const iqf_iqgrid *grid1;
static pthread_once_t iq1_once = PTHREAD_ONCE_INIT;

static void iq1_build(void) {
    static const int8_t lev[3] = { -1, 0, 1 };
    iqf_iqgrid_decode_table(iqf_iq1s_keys, NGRID_IQ1S, lev, iq1s_grid);
    for (int k = 0; k < NGRID_IQ1S; k++) grid_keys32[k] = iqf_iq1s_keys[k];
    grid1 = iqf_iqgrid_get(IQF_IQGRID_IQ1S);
}

static void iq1_init(void) { pthread_once(&iq1_once, iq1_build); }

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

/* iq1_find_best_neighbour2: the neighbour minimising Σ (w*(scale*xg[l]-x))*(scale*xg[l]-x),
 * first one on ties. Writes the grid index (or -1 if no distance is below FLT_MAX). */
static int best_neighbour_scalar(const uint16_t *nb, const float *xval, const float *weight,
                                 float scale, const float *xg) {
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
typedef int (*neighbour_fn)(const uint16_t *nb, const float *xval, const float *weight,
                            float scale, const float *xg);

/* ---------------------------------------------------------------------------------------------
 * Kernel sets
 * ------------------------------------------------------------------------------------------- */
typedef struct iq1_kernels {
    iqf_simd simd;
    neighbour_fn neighbour;
    /* IQ1_S split search over prefix sums sumx/sumw (33 entries): returns best_shift (0 if
     * nothing accepted) and sets *i1, *i2, *scale exactly as the reference's double loop. */
    int (*search_s)(const float *sumx, const float *sumw, float *scale, int *i1, int *i2);
    /* IQ1_M split search over per-half prefix sums: returns best_k (-1 if none). */
    int (*search_m)(const float px[2][17], const float pw[2][17], float *scale, int *i1, int *i2);
} iq1_kernels;

static const float x_p[3] = { -1 + IQ1S_DELTA, IQ1S_DELTA, 1 + IQ1S_DELTA };
static const float x_m[3] = { -1 - IQ1S_DELTA, -IQ1S_DELTA, 1 - IQ1S_DELTA };

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

static iq1_kernels pick_kernels(const iqf_qctx *ctx) {
    iq1_kernels k = { ctx->simd, best_neighbour_scalar, search_s_scalar, search_m_scalar };
    return k;
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
    gi = K->neighbour(nb, xb, w, scale, xx);
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
        const float *qw = qwbl + block_size * ib;
        for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
        float max = fabsf(xb[0]);
        for (int i = 1; i < block_size; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
        if (max < GROUP_MAX_EPS_IQ1_S) {
            scales[ib] = 0;
            shifts[ib] = 1;
            continue;
        }
        sort_order_scalar(xb, block_size, order);
        sumx[0] = sumw[0] = 0;
        for (int j = 0; j < block_size; ++j) {
            int i = order[j];
            sumx[j + 1] = sumx[j] + weight[i] * xb[i];
            sumw[j + 1] = sumw[j] + weight[i];
        }
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
    float scales[QK_K / 16], weight[16];
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
        if (qwbl) {
            const float *qw = qwbl + block_size * ib;
            for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
        } else {
            for (int i = 0; i < block_size; ++i) weight[i] = xb[i] * xb[i];
        }
        float max = fabsf(xb[0]);
        for (int i = 1; i < block_size; ++i) max = max > fabsf(xb[i]) ? max : fabsf(xb[i]);
        if (max < GROUP_MAX_EPS_IQ1_M) {
            scales[ib] = 0;
            shifts[ib] = 0;
            continue;
        }
        sort_order_scalar(xb, block_size, order);
        float px[2][17], pw[2][17];
        px[0][0] = px[1][0] = 0;
        pw[0][0] = pw[1][0] = 0;
        for (int j = 0; j < block_size; ++j) {
            const int i = order[j];
            const int h = i < block_size / 2 ? 0 : 1;
            px[h][j + 1] = px[h][j] + weight[i] * xb[i];
            px[1 - h][j + 1] = px[1 - h][j];
            pw[h][j + 1] = pw[h][j] + weight[i];
            pw[1 - h][j + 1] = pw[1 - h][j];
        }
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
        if (qwbl) {
            const float *qw = qwbl + block_size * ib;
            for (int i = 0; i < block_size; ++i) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
        } else {
            for (int i = 0; i < block_size; ++i) weight[i] = xb[i] * xb[i];
        }
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
