/*
 * mm_int8.c - integer matrix products for weight types whose blocks decode exactly to small
 * integers times a per-32 scale (IQ3_XXS), as ggml computes them: activations quantized to
 * Q8_K (int8 per 256 values with one float scale, ggml's quantize_row_q8_K_ref), int8 dot
 * products with the integer sub-block scales, one float multiply per 256-block.
 *
 * The weight tile is decoded once per matrix product into unsigned magnitudes, signs and scales,
 * then used by every token row (ggml decodes each block again for every token). AVX2 only; the
 * scalar build uses the float path of matmul.c.
 */
#include "model.h"

#include "codec/codec.h"
#include "codec/iq3_grids.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

bool iqf_mm_int8_supported(int type, iqf_simd s) {
    return s >= IQF_SIMD_AVX2 && type == IQF_TYPE_IQ3_XXS;
}

/* ggml's quantize_row_q8_K_ref, per 256 values (K a multiple of 256). */
void iqf_mm_quantize_act(const float *x, int64_t ldx, int T, int64_t K, int8_t *xq, float *xd) {
    const int64_t nb = K / QK_K;
    for (int t = 0; t < T; t++) {
        const float *xr = x + (int64_t)t * ldx;
        int8_t *q = xq + (int64_t)t * K;
        float *d = xd + (int64_t)t * nb;
        for (int64_t b = 0; b < nb; b++) {
            const float *v = xr + b * QK_K;
            float amax = 0, mx = 0;
            for (int j = 0; j < QK_K; j++) {
                const float ax = fabsf(v[j]);
                if (ax > amax) { amax = ax; mx = v[j]; }
            }
            if (!amax) {
                d[b] = 0;
                memset(q + b * QK_K, 0, QK_K);
                continue;
            }
            const float iscale = -127.f / mx;
            for (int j = 0; j < QK_K; j++) {
                int vi = iqf_nearest_int(iscale * v[j]);
                q[b * QK_K + j] = (int8_t)(vi < 127 ? vi : 127);
            }
            d[b] = 1 / iscale;
        }
    }
}

/* Tile layout per row: K magnitudes (u8), K signs (+1/-1 as int8), K/32 int16 scales, K/256
 * float block scales. */
size_t iqf_mm_int8_row_bytes(int64_t K) { return (size_t)(2 * K + K / 32 * 2 + K / QK_K * 4); }

typedef struct {
    iqf_half d;
    uint8_t qs[3 * QK_K / 8];
} blk_iq3_xxs;

static void decode_iq3_xxs(const uint8_t *src, int64_t K, uint8_t *row) {
    const int64_t nb = K / QK_K;
    uint8_t *mag = row, *sgn = row + K;
    int16_t sc[QK_K / 32];
    uint8_t *scp = row + 2 * K, *dp = scp + K / 32 * 2;
    for (int64_t b = 0; b < nb; b++) {
        blk_iq3_xxs blk;
        memcpy(&blk, src + b * sizeof(blk_iq3_xxs), sizeof blk);
        const float d = 0.25f * IQF_FP16_TO_FP32(blk.d);
        memcpy(dp + b * 4, &d, 4);
        const uint8_t *qs = blk.qs, *sas = blk.qs + QK_K / 4;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t aux;
            memcpy(&aux, sas + 4 * ib, 4);
            sc[ib] = (int16_t)(2 * (aux >> 28) + 1);
            for (int l = 0; l < 4; l++) {
                const uint8_t signs = iqf_iq3_ksigns[(aux >> 7 * l) & 127];
                uint32_t g[2] = { iqf_iq3xxs_grid[qs[8 * ib + 2 * l]], iqf_iq3xxs_grid[qs[8 * ib + 2 * l + 1]] };
                uint8_t *m = mag + b * QK_K + ib * 32 + l * 8;
                int8_t *s = (int8_t *)sgn + b * QK_K + ib * 32 + l * 8;
                memcpy(m, g, 8);
                for (int j = 0; j < 8; j++) s[j] = (signs >> j) & 1 ? -1 : 1;
            }
        }
        memcpy(scp + b * (QK_K / 32) * 2, sc, sizeof sc);
    }
}

void iqf_mm_int8_decode(const iqf_weight *w, int64_t r0, int nr, uint8_t *buf) {
    const size_t rb = iqf_mm_int8_row_bytes(w->ncols);
    for (int r = 0; r < nr; r++)
        decode_iq3_xxs(w->data + (size_t)(r0 + r) * w->row_bytes, w->ncols, buf + (size_t)r * rb);
}

__attribute__((target("avx2,fma"))) static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Y[t][n] for t < T, n < nr from a decoded tile. 4 token rows x 1 weight row per step. */
__attribute__((target("avx2,fma"))) void iqf_mm_int8_kernel(const uint8_t *tile, int nr, int64_t K,
                                                            const int8_t *xq, const float *xd, int T,
                                                            float *Y, int64_t ldy) {
    const size_t rb = iqf_mm_int8_row_bytes(K);
    const int64_t nb = K / QK_K;
    int t = 0;
    for (; t < T; t += 4) {
        const int nt = T - t < 4 ? T - t : 4;
        const int8_t *x[4];
        const float *dx[4];
        for (int i = 0; i < 4; i++) {
            const int ti = t + (i < nt ? i : nt - 1);
            x[i] = xq + (int64_t)ti * K;
            dx[i] = xd + (int64_t)ti * nb;
        }
        for (int n = 0; n < nr; n++) {
            const uint8_t *mag = tile + (size_t)n * rb, *sgn = mag + K;
            const int16_t *sc = (const int16_t *)(mag + 2 * K);
            const float *dw = (const float *)(mag + 2 * K + K / 32 * 2);
            __m256 f0 = _mm256_setzero_ps(), f1 = f0, f2 = f0, f3 = f0;
            for (int64_t b = 0; b < nb; b++) {
                __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
                const int64_t o = b * QK_K;
                for (int sb = 0; sb < QK_K / 32; sb++) {
                    const int64_t k = o + sb * 32;
                    const __m256i m = _mm256_loadu_si256((const __m256i *)(mag + k));
                    const __m256i g = _mm256_loadu_si256((const __m256i *)(sgn + k));
                    const __m256i scl = _mm256_set1_epi16(sc[b * (QK_K / 32) + sb]);
                    s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(x[0] + k)), g)), scl));
                    s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(x[1] + k)), g)), scl));
                    s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(x[2] + k)), g)), scl));
                    s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(x[3] + k)), g)), scl));
                }
                const float d = dw[b];
                f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s0), _mm256_set1_ps(d * dx[0][b]), f0);
                f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s1), _mm256_set1_ps(d * dx[1][b]), f1);
                f2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s2), _mm256_set1_ps(d * dx[2][b]), f2);
                f3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s3), _mm256_set1_ps(d * dx[3][b]), f3);
            }
            const float r[4] = { hsum8(f0), hsum8(f1), hsum8(f2), hsum8(f3) };
            for (int i = 0; i < nt; i++) Y[(int64_t)(t + i) * ldy + n] = r[i];
        }
    }
}
