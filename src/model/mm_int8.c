/*
 * mm_int8.c - integer matrix products for weight types whose blocks decode exactly to small
 * integers times a per-32 integer scale times a per-256 float scale (IQ3_XXS, IQ3_S; Q4_K also
 * with a per-32 integer min times a per-256 float scale, subtracted using the activations' sums;
 * Q6_K with a per-16 integer scale), as ggml computes them: activations quantized to
 * Q8_K (int8 per 256 values with one float scale, ggml's quantize_row_q8_K_ref), int8 dot
 * products with the integer sub-block scales, one float multiply per 256-block.
 *
 * The weight tile is decoded once per matrix product into unsigned magnitudes, signs and scales,
 * then used by every token row (ggml decodes each block again for every token). AVX2 only; the
 * scalar level (and every non-x86 build) uses the float path of matmul.c, which is why
 * iqf_mm_int8_supported() is false there; kernel_scalar is the plain-C statement of the same
 * integer sums, used by iqf_mm_int8_tile where the x86 kernels are not compiled.
 */
#include "model.h"

#include "codec/codec.h"
#include "codec/iq3_grids.h"
#include "codec/kq_common.h"
#include "util/arch.h"

#include <math.h>
#include <string.h>

bool iqf_mm_int8_supported(int type, iqf_simd s) {
    return IQF_SIMD_IS_X86(s) && (type == IQF_TYPE_IQ3_XXS || type == IQF_TYPE_IQ3_S || type == IQF_TYPE_Q4_K ||
                                  type == IQF_TYPE_Q6_K);
}

/* ggml's quantize_row_q8_K_ref, per 256 values (K a multiple of 256); stored as q + 128. */
void iqf_mm_quantize_act(const float *x, int64_t ldx, int T, int64_t K, uint8_t *xq, float *xd,
                         int32_t *xs) {
    const int64_t nb = K / QK_K;
    for (int t = 0; t < T; t++) {
        const float *xr = x + (int64_t)t * ldx;
        uint8_t *q = xq + (int64_t)t * K;
        float *d = xd + (int64_t)t * nb;
        int32_t *sums = xs + (int64_t)t * (K / 32);
        for (int64_t b = 0; b < nb; b++) {
            const float *v = xr + b * QK_K;
            float amax = 0, mx = 0;
            for (int j = 0; j < QK_K; j++) {
                const float ax = fabsf(v[j]);
                if (ax > amax) { amax = ax; mx = v[j]; }
            }
            if (!amax) {
                d[b] = 0;
                memset(q + b * QK_K, 128, QK_K);
                for (int j = 0; j < QK_K / 32; j++) sums[b * (QK_K / 32) + j] = 0;
                continue;
            }
            const float iscale = -127.f / mx;
            for (int j = 0; j < QK_K; j++) {
                int vi = iqf_nearest_int(iscale * v[j]);
                q[b * QK_K + j] = (uint8_t)((vi < 127 ? vi : 127) + 128);
            }
            d[b] = 1 / iscale;
            for (int j = 0; j < QK_K / 32; j++) {
                int32_t acc = 0;
                for (int l = 0; l < 32; l++) acc += (int32_t)q[b * QK_K + j * 32 + l] - 128;
                sums[b * (QK_K / 32) + j] = acc;
            }
        }
    }
}

/* Tile layout per row: K signed weights (int8, = +/-grid), K/16 int16 scales (one per 16
 * weights: Q6_K's sub-blocks; the types with per-32 scales store each twice), K/256 float block
 * scales, K/256 int32 sums (sum over sub-blocks of scale * sum of weights: the correction for
 * activations stored as unsigned q+128). */
#define SC_BYTES(K) ((K) / 16 * 2)
size_t iqf_mm_int8_row_bytes(int64_t K) { return (size_t)(K + SC_BYTES(K) + K / QK_K * 8 + K / 32 * 2 + K / QK_K * 4); }

/* The min section of a decoded row (after the wsums): K/32 int16 mins, K/256 float dmins; all
 * zero for types without mins. */
static int16_t *row_mins(uint8_t *row, int64_t K) { return (int16_t *)(row + K + SC_BYTES(K) + K / QK_K * 8); }
static float *row_dmin(uint8_t *row, int64_t K) { return (float *)(row + K + SC_BYTES(K) + K / 32 * 2 + K / QK_K * 8); }

/* Stores a per-32 scale for 32-weight sub-block j (both of its 16-weight halves). */
static inline void put_sc32(uint8_t *scp, int64_t j, int16_t sc) {
    memcpy(scp + j * 4, &sc, 2);
    memcpy(scp + j * 4 + 2, &sc, 2);
}

/* 8 sign bits -> 8 bytes 0xFF (bit set) / 0x00. */
static inline uint64_t sign_bytes(uint8_t s) {
    uint64_t v = ((uint64_t)s * 0x0101010101010101ull) & 0x8040201008040201ull;
    v = ((v + 0x7F7F7F7F7F7F7F7Full) | v) & 0x8080808080808080ull; /* 0x80 where non-zero */
    return (v >> 7) * 0xFF;
}

static void decode_iq3_xxs(const uint8_t *src, int64_t K, uint8_t *row) {
    const int64_t nb = K / QK_K;
    int8_t *wq = (int8_t *)row;
    uint8_t *scp = row + K, *dp = scp + SC_BYTES(K), *sp = dp + nb * 4;
    for (int64_t b = 0; b < nb; b++) {
        block_iq3_xxs blk;
        memcpy(&blk, src + b * sizeof(block_iq3_xxs), sizeof blk);
        const float d = 0.25f * IQF_FP16_TO_FP32(blk.d);
        memcpy(dp + b * 4, &d, 4);
        const uint8_t *qs = blk.qs, *sas = blk.qs + QK_K / 4;
        int32_t wsum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t aux;
            memcpy(&aux, sas + 4 * ib, 4);
            const int16_t sc = (int16_t)(2 * (aux >> 28) + 1);
            put_sc32(scp, b * (QK_K / 32) + ib, sc);
            int32_t sub = 0;
            for (int l = 0; l < 4; l++) {
                const uint64_t m = sign_bytes(iqf_iq3_ksigns[(aux >> 7 * l) & 127]);
                uint32_t g[2] = { iqf_iq3xxs_grid[qs[8 * ib + 2 * l]], iqf_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] };
                uint64_t v;
                memcpy(&v, g, 8);
                v = (v ^ m) + (m & 0x0101010101010101ull); /* negate the flagged bytes (no carries: g <= 62) */
                int8_t *o = wq + b * QK_K + ib * 32 + l * 8;
                memcpy(o, &v, 8);
                for (int j = 0; j < 8; j++) sub += o[j];
            }
            wsum += sc * sub;
        }
        memcpy(sp + b * 4, &wsum, 4);
    }
}

/* IQ3_S: weight = d * (1 + 2 s) * (+/- grid byte), grid bytes 1..15. */
static void decode_iq3_s(const uint8_t *src, int64_t K, uint8_t *row) {
    const int64_t nb = K / QK_K;
    int8_t *wq = (int8_t *)row;
    uint8_t *scp = row + K, *dp = scp + SC_BYTES(K), *sp = dp + nb * 4;
    for (int64_t b = 0; b < nb; b++) {
        block_iq3_s blk;
        memcpy(&blk, src + b * sizeof(block_iq3_s), sizeof blk);
        const float d = IQF_FP16_TO_FP32(blk.d);
        memcpy(dp + b * 4, &d, 4);
        int32_t wsum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int16_t sc = (int16_t)(1 + 2 * ((blk.scales[ib / 2] >> 4 * (ib & 1)) & 15));
            put_sc32(scp, b * (QK_K / 32) + ib, sc);
            int32_t sub = 0;
            for (int m = 0; m < 4; m++) {
                const int k0 = 2 * m;
                const uint64_t sg = sign_bytes(blk.signs[4 * ib + m]);
                uint32_t g[2] = { iqf_iq3s_grid[blk.qs[8 * ib + k0] | (((blk.qh[ib] >> k0) & 1) << 8)],
                                  iqf_iq3s_grid[blk.qs[8 * ib + k0 + 1] | (((blk.qh[ib] >> (k0 + 1)) & 1) << 8)] };
                uint64_t v;
                memcpy(&v, g, 8);
                v = (v ^ sg) + (sg & 0x0101010101010101ull);
                int8_t *o = wq + b * QK_K + ib * 32 + m * 8;
                memcpy(o, &v, 8);
                for (int j = 0; j < 8; j++) sub += o[j];
            }
            wsum += sc * sub;
        }
        memcpy(sp + b * 4, &wsum, 4);
    }
}

/* Q4_K: weight = d * sc * q - dmin * m, q 0..15, 6-bit sc and m per 32. */
static void decode_q4_K(const uint8_t *src, int64_t K, uint8_t *row) {
    const int64_t nb = K / QK_K;
    int8_t *wq = (int8_t *)row;
    uint8_t *scp = row + K, *dp = scp + SC_BYTES(K), *sp = dp + nb * 4;
    int16_t *mins = row_mins(row, K);
    float *dmin = row_dmin(row, K);
    for (int64_t b = 0; b < nb; b++) {
        block_q4_K blk;
        memcpy(&blk, src + b * sizeof(block_q4_K), sizeof blk);
        const float d = IQF_FP16_TO_FP32(blk.d);
        memcpy(dp + b * 4, &d, 4);
        dmin[b] = IQF_FP16_TO_FP32(blk.dmin);
        int32_t wsum = 0;
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, m;
            kq_get_scale_min_k4(j, blk.scales, &sc, &m);
            put_sc32(scp, b * (QK_K / 32) + j, (int16_t)sc);
            mins[b * (QK_K / 32) + j] = m;
            const uint8_t *q = blk.qs + (j / 2) * 32;
            int8_t *o = wq + b * QK_K + j * 32;
            int32_t sub = 0;
            for (int l = 0; l < 32; l++) {
                o[l] = (int8_t)((j & 1) ? q[l] >> 4 : q[l] & 0xF);
                sub += o[l];
            }
            wsum += sc * sub;
        }
        memcpy(sp + b * 4, &wsum, 4);
    }
}

/* Q6_K: weight = d * sc * (q - 32), q 0..63, int8 sc per 16 (ggml's dequantize_row_q6_K order:
 * per 128 weights, ql low nibbles / qh bits 0-1 for 0..31, ...; 16-weight group j uses scales[j]). */
static void decode_q6_K(const uint8_t *src, int64_t K, uint8_t *row) {
    const int64_t nb = K / QK_K;
    int8_t *wq = (int8_t *)row;
    uint8_t *scp = row + K, *dp = scp + SC_BYTES(K), *sp = dp + nb * 4;
    for (int64_t b = 0; b < nb; b++) {
        block_q6_K blk;
        memcpy(&blk, src + b * sizeof(block_q6_K), sizeof blk);
        const float d = IQF_FP16_TO_FP32(blk.d);
        memcpy(dp + b * 4, &d, 4);
        int8_t *o = wq + b * QK_K;
        for (int n = 0; n < QK_K / 128; n++) {
            const uint8_t *ql = blk.ql + 64 * n, *qh = blk.qh + 32 * n;
            int8_t *y = o + 128 * n;
            for (int l = 0; l < 32; l++) {
                y[l] = (int8_t)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
        int32_t wsum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            const int16_t sc = blk.scales[j];
            memcpy(scp + (b * (QK_K / 16) + j) * 2, &sc, 2);
            int32_t sub = 0;
            for (int l = 0; l < 16; l++) sub += o[16 * j + l];
            wsum += sc * sub;
        }
        memcpy(sp + b * 4, &wsum, 4);
    }
}

static void decode_row(int type, const uint8_t *src, int64_t K, uint8_t *row) {
    if (type == IQF_TYPE_Q4_K) {
        decode_q4_K(src, K, row);
        return;
    }
    memset(row_mins(row, K), 0, (size_t)(K / 32 * 2 + K / QK_K * 4));
    if (type == IQF_TYPE_Q6_K) decode_q6_K(src, K, row);
    else if (type == IQF_TYPE_IQ3_S) decode_iq3_s(src, K, row);
    else decode_iq3_xxs(src, K, row);
}

void iqf_mm_int8_decode(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf) {
    const size_t rb = iqf_mm_int8_row_bytes(w->ncols);
    for (int r = 0; r < nr; r++)
        decode_row(w->type, w->data + (size_t)(r0 + r) * w->row_bytes, w->ncols, buf + (size_t)r * rb);
}

#ifndef IQF_ARCH_X86
/* The same sums in plain C: per 16 weights an integer dot product times the int16 scale, the
 * 128*w excess removed with the block's sum, one float multiply per 256-block. */
static void kernel_scalar(const uint8_t *tile, int nr, int64_t K, const uint8_t *xq, const float *xd,
                          int T, float *Y, int64_t ldy) {
    const size_t rb = iqf_mm_int8_row_bytes(K);
    const int64_t nb = K / QK_K;
    for (int t = 0; t < T; t++) {
        const uint8_t *x = xq + (int64_t)t * K;
        for (int n = 0; n < nr; n++) {
            const uint8_t *row = tile + (size_t)n * rb;
            const int8_t *w = (const int8_t *)row;
            const int16_t *sc = (const int16_t *)(row + K);
            const float *dw = (const float *)(row + K + SC_BYTES(K));
            const int32_t *ws = (const int32_t *)(row + K + SC_BYTES(K) + nb * 4);
            float f = 0;
            for (int64_t b = 0; b < nb; b++) {
                int32_t tot = -128 * ws[b];
                for (int s = 0; s < QK_K / 16; s++) {
                    int32_t acc = 0;
                    for (int l = 0; l < 16; l++) acc += (int32_t)x[b * QK_K + s * 16 + l] * w[b * QK_K + s * 16 + l];
                    tot += acc * sc[b * (QK_K / 16) + s];
                }
                f += (float)tot * (dw[b] * xd[(int64_t)t * nb + b]);
            }
            Y[(int64_t)t * ldy + n] = f;
        }
    }
}
#else
/* Y[t][n] for t < T, n < nr from a decoded tile, 4 token rows x 1 weight row per step. Per 32
 * products: maddubs(q+128, w) and a multiply-add of the int16 pairs by the sub-block scale
 * (one VNNI dpwssd, or madd + add). The 128*w excess is removed with the row's block sums. */
#define IQF_INT8_KERNEL(NAME, TARGET, SCALE_ADD)                                                     \
    __attribute__((target(TARGET))) static void NAME(const uint8_t *tile, int nr, int64_t K,        \
                                                     const uint8_t *xq, const float *xd, int T,     \
                                                     float *Y, int64_t ldy) {                       \
        const size_t rb = iqf_mm_int8_row_bytes(K);                                                  \
        const int64_t nb = K / QK_K;                                                                 \
        for (int t = 0; t < T; t += 4) {                                                             \
            const int nt = T - t < 4 ? T - t : 4;                                                    \
            const uint8_t *x0 = xq + (int64_t)(t + (0 < nt ? 0 : nt - 1)) * K;                       \
            const uint8_t *x1 = xq + (int64_t)(t + (1 < nt ? 1 : nt - 1)) * K;                       \
            const uint8_t *x2 = xq + (int64_t)(t + (2 < nt ? 2 : nt - 1)) * K;                       \
            const uint8_t *x3 = xq + (int64_t)(t + (3 < nt ? 3 : nt - 1)) * K;                       \
            const float *d0 = xd + (x0 - xq) / K * nb, *d1 = xd + (x1 - xq) / K * nb;                \
            const float *d2 = xd + (x2 - xq) / K * nb, *d3 = xd + (x3 - xq) / K * nb;                \
            for (int n = 0; n < nr; n++) {                                                           \
                const uint8_t *row = tile + (size_t)n * rb;                                          \
                const int16_t *sc = (const int16_t *)(row + K);                                      \
                const float *dw = (const float *)(row + K + SC_BYTES(K));                            \
                const int32_t *ws = (const int32_t *)(row + K + SC_BYTES(K) + nb * 4);               \
                __m128 f = _mm_setzero_ps();                                                         \
                for (int64_t b = 0; b < nb; b++) {                                                   \
                    const __m256i c0 = _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, -128 * ws[b]);          \
                    __m256i s0 = c0, s1 = c0, s2 = c0, s3 = c0;                                      \
                    for (int sb = 0; sb < QK_K / 32; sb++) {                                         \
                        const int64_t k = b * QK_K + sb * 32;                                        \
                        const __m256i w = _mm256_loadu_si256((const __m256i *)(row + k));            \
                        const int64_t si = 2 * (b * (QK_K / 32) + sb); /* lanes 0-7: weights 0-15 */ \
                        const __m256i scl = _mm256_set_m128i(_mm_set1_epi16(sc[si + 1]),             \
                                                             _mm_set1_epi16(sc[si]));                \
                        __m256i p;                                                                   \
                        p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(x0 + k)), w);  \
                        s0 = SCALE_ADD(s0, p, scl);                                                  \
                        p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(x1 + k)), w);  \
                        s1 = SCALE_ADD(s1, p, scl);                                                  \
                        p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(x2 + k)), w);  \
                        s2 = SCALE_ADD(s2, p, scl);                                                  \
                        p = _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(x3 + k)), w);  \
                        s3 = SCALE_ADD(s3, p, scl);                                                  \
                    }                                                                                \
                    /* the lanes carry the 128*w excess and lane 0 its correction: sum them as      \
                 * integers (exact) before converting, or the float rounding of the large lanes    \
                 * would not cancel */                                                             \
                const __m256i h01 = _mm256_hadd_epi32(s0, s1), h23 = _mm256_hadd_epi32(s2, s3);  \
                const __m256i h = _mm256_hadd_epi32(h01, h23);                                   \
                const __m128i tot = _mm_add_epi32(_mm256_castsi256_si128(h),                     \
                                                  _mm256_extracti128_si256(h, 1));               \
                const float d = dw[b];                                                           \
                const __m128 dd = _mm_set_ps(d * d3[b], d * d2[b], d * d1[b], d * d0[b]);         \
                f = _mm_fmadd_ps(_mm_cvtepi32_ps(tot), dd, f);                                   \
            }                                                                                    \
            float r[4];                                                                          \
            _mm_storeu_ps(r, f);                                                                 \
                for (int i = 0; i < nt; i++) Y[(int64_t)(t + i) * ldy + n] = r[i];                   \
            }                                                                                        \
        }                                                                                            \
    }

#define MADD_ADD(acc, p, s) _mm256_add_epi32(acc, _mm256_madd_epi16(p, s))
IQF_INT8_KERNEL(kernel_avx2, "avx2,fma", MADD_ADD)
#endif

/* ---------------------------------------------------------------------------------------------
 * AVX-512 VNNI panel kernel. A tile of 16 rows is repacked into 2 panels of 8 rows in which every
 * 32-byte step holds 4 consecutive weights of each of the 8 rows, so one vpdpbusd with the
 * 4 activation bytes broadcast computes 32 products for 8 rows at once (ggml's IQ gemm does the
 * same). Per 32-weight sub-block the 8 rows' integer scales are applied with one vpmulld; per
 * 256-block the float scales; the outputs of 8 rows come out in one vector (no horizontal sums).
 * Panel layout: K/4 steps x 32 bytes; then K/SPAN x 8 int32 scales (SPAN 32, or 16 for Q6_K;
 * room for K/16); K/256 x 8 float scales; K/256 x 8 int32 corrections (-128 * sum of scale *
 * weights).
 * ------------------------------------------------------------------------------------------- */
#define PSC_BYTES(K) ((K) / 16 * 32)
static size_t panel_bytes(int64_t K) { return (size_t)(8 * K + PSC_BYTES(K) + K / QK_K * 64); }

#ifdef IQF_ARCH_X86
/* Weights per integer scale: 16 for Q6_K, else 32. */
static int scale_span(int type) { return type == IQF_TYPE_Q6_K ? 16 : 32; }

#endif

size_t iqf_mm_int8_tile_bytes(int64_t K) {
    const size_t a = 2 * panel_bytes(K) + iqf_mm_int8_row_bytes(K), b = 16 * iqf_mm_int8_row_bytes(K);
    return (a > b ? a : b) + 16 * (size_t)(K / 32 * 2 + K / QK_K * 4);
}

/* Per-tile copy of the rows' min sections (16 rows), after the panels or rows. */
static uint8_t *tile_mins(uint8_t *buf, int64_t K) {
    const size_t a = 2 * panel_bytes(K) + iqf_mm_int8_row_bytes(K), b = 16 * iqf_mm_int8_row_bytes(K);
    return buf + (a > b ? a : b);
}

#ifdef IQF_ARCH_X86
static void decode_panels(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf) {
    const int64_t K = w->ncols, nb = K / QK_K;
    uint8_t *tmp = buf + 2 * panel_bytes(K);
    for (int p = 0; p < 2; p++) {
        uint8_t *pw = buf + (size_t)p * panel_bytes(K);
        int32_t *psc = (int32_t *)(pw + 8 * K);
        float *pd = (float *)(pw + 8 * K + PSC_BYTES(K));
        int32_t *pc = (int32_t *)(pw + 8 * K + PSC_BYTES(K) + nb * 32);
        const int span = scale_span(w->type);
        for (int j = 0; j < 8; j++) {
            const int r = p * 8 + j;
            if (r < nr) {
                decode_row(w->type, w->data + (size_t)(r0 + r) * w->row_bytes, K, tmp);
            } else {
                memset(tmp, 0, iqf_mm_int8_row_bytes(K));
            }
            const int16_t *sc = (const int16_t *)(tmp + K);
            const float *dw = (const float *)(tmp + K + SC_BYTES(K));
            const int32_t *ws = (const int32_t *)(tmp + K + SC_BYTES(K) + nb * 4);
            for (int64_t k = 0; k < K; k += 4) memcpy(pw + k * 8 + 4 * j, tmp + k, 4);
            memcpy(tile_mins(buf, K) + (size_t)r * (size_t)(K / 32 * 2 + nb * 4), row_mins(tmp, K),
                   (size_t)(K / 32 * 2 + nb * 4));
            for (int64_t s = 0; s < K / span; s++) psc[s * 8 + j] = sc[s * (span / 16)];
            for (int64_t b = 0; b < nb; b++) {
                pd[b * 8 + j] = dw[b];
                pc[b * 8 + j] = -128 * ws[b];
            }
        }
    }
}

/* acc += a (u8) . b (s8) in groups of 4. Inline asm: GCC copies the accumulator register around
 * the intrinsic in this loop (one extra move per product instruction). */
__attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni"))) static inline __m256i
dpbusd(__m256i acc, __m256i a, __m256i b) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
    return acc;
}

__attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni"), always_inline)) static inline void
kernel_panels_span(const uint8_t *buf, int nr, int64_t K, const uint8_t *xq, const float *xd, int T,
                   float *Y, int64_t ldy, const int span) {
    const int64_t nb = K / QK_K;
    const size_t pb = panel_bytes(K);
    const uint8_t *w0 = buf, *w1 = buf + pb;
    const int32_t *sc0 = (const int32_t *)(w0 + 8 * K), *sc1 = (const int32_t *)(w1 + 8 * K);
    const float *dw0 = (const float *)(w0 + 8 * K + PSC_BYTES(K)), *dw1 = (const float *)(w1 + 8 * K + PSC_BYTES(K));
    const int32_t *cr0 = (const int32_t *)(w0 + 8 * K + PSC_BYTES(K) + nb * 32);
    const int32_t *cr1 = (const int32_t *)(w1 + 8 * K + PSC_BYTES(K) + nb * 32);
    const bool two = nr > 8;
    for (int t = 0; t < T; t += 4) {
        const int nt = T - t < 4 ? T - t : 4;
        const uint8_t *x[4];
        const float *dx[4];
        for (int i = 0; i < 4; i++) {
            const int ti = t + (i < nt ? i : nt - 1);
            x[i] = xq + (int64_t)ti * K;
            dx[i] = xd + (int64_t)ti * nb;
        }
        __m256 f00 = _mm256_setzero_ps(), f01 = f00, f02 = f00, f03 = f00;
        __m256 f10 = f00, f11 = f00, f12 = f00, f13 = f00;
        for (int64_t b = 0; b < nb; b++) {
            __m256i a00 = _mm256_loadu_si256((const __m256i *)(cr0 + b * 8)), a01 = a00, a02 = a00, a03 = a00;
            __m256i a10 = _mm256_loadu_si256((const __m256i *)(cr1 + b * 8)), a11 = a10, a12 = a10, a13 = a10;
            for (int sb = 0; sb < QK_K / span; sb++) {
                const int64_t k0 = b * QK_K + sb * span;
                __m256i s00 = _mm256_setzero_si256(), s01 = s00, s02 = s00, s03 = s00;
                __m256i s10 = s00, s11 = s00, s12 = s00, s13 = s00;
                /* two interleaved accumulator sets (k and k+4): 16 independent dpbusd chains */
                __m256i t00 = _mm256_setzero_si256(), t01 = t00, t02 = t00, t03 = t00;
                __m256i t10 = t00, t11 = t00, t12 = t00, t13 = t00;
                for (int64_t k = k0; k < k0 + span; k += 8) {
                    const __m256i p0 = _mm256_loadu_si256((const __m256i *)(w0 + k * 8));
                    const __m256i p1 = _mm256_loadu_si256((const __m256i *)(w1 + k * 8));
                    const __m256i r0 = _mm256_loadu_si256((const __m256i *)(w0 + k * 8 + 32));
                    const __m256i r1 = _mm256_loadu_si256((const __m256i *)(w1 + k * 8 + 32));
                    int32_t v;
                    __m256i xb;
#define STEP(i, A0, A1, B0, B1)                                                                    \
    memcpy(&v, x[i] + k, 4);                                                                       \
    xb = _mm256_set1_epi32(v);                                                                     \
    A0 = dpbusd(A0, xb, p0);                                                                       \
    A1 = dpbusd(A1, xb, p1);                                                                       \
    memcpy(&v, x[i] + k + 4, 4);                                                                   \
    xb = _mm256_set1_epi32(v);                                                                     \
    B0 = dpbusd(B0, xb, r0);                                                                       \
    B1 = dpbusd(B1, xb, r1);
                    STEP(0, s00, s10, t00, t10)
                    STEP(1, s01, s11, t01, t11)
                    STEP(2, s02, s12, t02, t12)
                    STEP(3, s03, s13, t03, t13)
#undef STEP
                }
                s00 = _mm256_add_epi32(s00, t00);
                s01 = _mm256_add_epi32(s01, t01);
                s02 = _mm256_add_epi32(s02, t02);
                s03 = _mm256_add_epi32(s03, t03);
                s10 = _mm256_add_epi32(s10, t10);
                s11 = _mm256_add_epi32(s11, t11);
                s12 = _mm256_add_epi32(s12, t12);
                s13 = _mm256_add_epi32(s13, t13);
                const __m256i q0 = _mm256_loadu_si256((const __m256i *)(sc0 + (b * (QK_K / span) + sb) * 8));
                const __m256i q1 = _mm256_loadu_si256((const __m256i *)(sc1 + (b * (QK_K / span) + sb) * 8));
                a00 = _mm256_add_epi32(a00, _mm256_mullo_epi32(s00, q0));
                a01 = _mm256_add_epi32(a01, _mm256_mullo_epi32(s01, q0));
                a02 = _mm256_add_epi32(a02, _mm256_mullo_epi32(s02, q0));
                a03 = _mm256_add_epi32(a03, _mm256_mullo_epi32(s03, q0));
                a10 = _mm256_add_epi32(a10, _mm256_mullo_epi32(s10, q1));
                a11 = _mm256_add_epi32(a11, _mm256_mullo_epi32(s11, q1));
                a12 = _mm256_add_epi32(a12, _mm256_mullo_epi32(s12, q1));
                a13 = _mm256_add_epi32(a13, _mm256_mullo_epi32(s13, q1));
            }
            const __m256 d0 = _mm256_loadu_ps(dw0 + b * 8), d1 = _mm256_loadu_ps(dw1 + b * 8);
            f00 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a00), _mm256_mul_ps(d0, _mm256_set1_ps(dx[0][b])), f00);
            f01 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a01), _mm256_mul_ps(d0, _mm256_set1_ps(dx[1][b])), f01);
            f02 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a02), _mm256_mul_ps(d0, _mm256_set1_ps(dx[2][b])), f02);
            f03 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a03), _mm256_mul_ps(d0, _mm256_set1_ps(dx[3][b])), f03);
            f10 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a10), _mm256_mul_ps(d1, _mm256_set1_ps(dx[0][b])), f10);
            f11 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a11), _mm256_mul_ps(d1, _mm256_set1_ps(dx[1][b])), f11);
            f12 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a12), _mm256_mul_ps(d1, _mm256_set1_ps(dx[2][b])), f12);
            f13 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a13), _mm256_mul_ps(d1, _mm256_set1_ps(dx[3][b])), f13);
        }
        float o[2][4][8];
        _mm256_storeu_ps(o[0][0], f00);
        _mm256_storeu_ps(o[0][1], f01);
        _mm256_storeu_ps(o[0][2], f02);
        _mm256_storeu_ps(o[0][3], f03);
        _mm256_storeu_ps(o[1][0], f10);
        _mm256_storeu_ps(o[1][1], f11);
        _mm256_storeu_ps(o[1][2], f12);
        _mm256_storeu_ps(o[1][3], f13);
        for (int i = 0; i < nt; i++)
            for (int n = 0; n < nr; n++) Y[(int64_t)(t + i) * ldy + n] = o[n / 8][i][n % 8];
        (void)two;
    }
}

__attribute__((target("avx2,fma,avx512f,avx512vl,avx512vnni"))) static void
kernel_panels(const uint8_t *buf, int nr, int64_t K, const uint8_t *xq, const float *xd, int T,
              float *Y, int64_t ldy, int span) {
    if (span == 16) kernel_panels_span(buf, nr, K, xq, xd, T, Y, ldy, 16);
    else kernel_panels_span(buf, nr, K, xq, xd, T, Y, ldy, 32);
}

static bool have_vnni(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl");
}
#endif /* IQF_ARCH_X86 */

/* Subtracts sum_j dmin * m_j * (sum of the activations of sub-block j) for types with mins. */
static void min_correction(const uint8_t *mins_sec, int nr, int64_t K, const float *xd,
                           const int32_t *xs, int T, float *Y, int64_t ldy) {
    const int64_t nb = K / QK_K, ns = K / 32;
    const size_t stride = (size_t)(ns * 2 + nb * 4);
    for (int n = 0; n < nr; n++) {
        const int16_t *m = (const int16_t *)(mins_sec + (size_t)n * stride);
        const float *dmin = (const float *)(mins_sec + (size_t)n * stride + ns * 2);
        for (int t = 0; t < T; t++) {
            const int32_t *sums = xs + (int64_t)t * ns;
            float corr = 0;
            for (int64_t b = 0; b < nb; b++) {
                int32_t acc = 0;
                for (int j = 0; j < QK_K / 32; j++) acc += m[b * (QK_K / 32) + j] * sums[b * (QK_K / 32) + j];
                corr += dmin[b] * xd[(int64_t)t * nb + b] * (float)acc;
            }
            Y[(int64_t)t * ldy + n] -= corr;
        }
    }
}

/* Decodes rows r0..r0+nr (nr <= 16) of w into buf (iqf_mm_int8_tile_bytes) and multiplies. */
void iqf_mm_int8_tile(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf, const uint8_t *xq,
                      const float *xd, const int32_t *xs, int T, float *Y, int64_t ldy, iqf_simd s) {
    const int64_t K = w->ncols;
#ifndef IQF_ARCH_X86
    (void)s;
    iqf_mm_int8_decode(w, r0, nr, buf);
    kernel_scalar(buf, nr, K, xq, xd, T, Y, ldy);
    if (w->type == IQF_TYPE_Q4_K) {
        const size_t rb = iqf_mm_int8_row_bytes(K), ms = (size_t)(K / 32 * 2 + K / QK_K * 4);
        for (int r = 0; r < nr; r++) memcpy(tile_mins(buf, K) + (size_t)r * ms, row_mins(buf + (size_t)r * rb, K), ms);
    }
#else
    /* Panels pay a repacking step per tile: worth it when many token rows share the tile. */
    if (T >= 8 && s == IQF_SIMD_AVX512 && have_vnni()) {
        decode_panels(w, r0, nr, buf);
        kernel_panels(buf, nr, K, xq, xd, T, Y, ldy, scale_span(w->type));
    } else {
        iqf_mm_int8_decode(w, r0, nr, buf);
        kernel_avx2(buf, nr, K, xq, xd, T, Y, ldy);
        if (w->type == IQF_TYPE_Q4_K) {
            const size_t rb = iqf_mm_int8_row_bytes(K), ms = (size_t)(K / 32 * 2 + K / QK_K * 4);
            for (int r = 0; r < nr; r++) memcpy(tile_mins(buf, K) + (size_t)r * ms, row_mins(buf + (size_t)r * rb, K), ms);
        }
    }
#endif
    if (w->type == IQF_TYPE_Q4_K) min_correction(tile_mins(buf, K), nr, K, xd, xs, T, Y, ldy);
}
