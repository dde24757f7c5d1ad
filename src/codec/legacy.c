/*
 * legacy.c - q4_0, q4_1, q5_0, q5_1, q8_0 (blocks of 32 weights), bit-exact with ggml 0.25.1.
 *
 * Without an importance matrix ggml runs the *_ref encoders (max-abs / min-max scaling); with one
 * it runs quantize_row_q*_impl: a row-wide sigma2, per-value weights qw*sqrt(sigma2 + x^2) and a
 * scale search (make_qx_quants for q4_0/q5_0, make_qkx3_quants for q4_1/q5_1). q8_0 ignores the
 * importance matrix. The searches run through kq_common's batch helpers (SIMD across blocks).
 */
#include "best_scale.h"
#include "kq_common.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define QK 32
#define CHUNK 64 /* blocks per batch call */

/* (int32_t)f as x86's cvttss2si: out-of-range and NaN give INT32_MIN (no UB). */
static inline int32_t cvtt_i32(float f) {
    if (!(f > -2147483648.f && f < 2147483648.f)) return INT32_MIN;
    return (int32_t)f;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define LEG_HAVE_X86 1
static void q4_0_ref_avx2(const float *x, block_q4_0 *y, int64_t nb);
static void q4_0_ref_avx512(const float *x, block_q4_0 *y, int64_t nb);
static void q4_1_ref_avx2(const float *x, block_q4_1 *y, int64_t nb);
static void q4_1_ref_avx512(const float *x, block_q4_1 *y, int64_t nb);
static void q5_0_ref_avx2(const float *x, block_q5_0 *y, int64_t nb);
static void q5_0_ref_avx512(const float *x, block_q5_0 *y, int64_t nb);
static void q5_1_ref_avx2(const float *x, block_q5_1 *y, int64_t nb);
static void q5_1_ref_avx512(const float *x, block_q5_1 *y, int64_t nb);
static void q8_0_ref_avx2(const float *x, block_q8_0 *y, int64_t nb);
static void q8_0_ref_avx512(const float *x, block_q8_0 *y, int64_t nb);
#define LEG_DISPATCH(name, x, y, nb)                                                              \
    do {                                                                                          \
        if (ctx->simd == IQF_SIMD_AVX512) { name##_avx512(x, y, nb); return; }                    \
        if (ctx->simd == IQF_SIMD_AVX2) { name##_avx2(x, y, nb); return; }                        \
    } while (0)
#else
#define LEG_DISPATCH(name, x, y, nb) ((void)0)
#endif

/* ---- shared: row sigma2 and per-value weights of the *_impl encoders ---- */
static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}


/* ---- best mode (best_scale.c): one plain-C search, the same bytes at every SIMD level ---- */
static void pack_q4(const uint8_t *l, uint8_t *qs) {
    for (int j = 0; j < 16; ++j) qs[j] = (uint8_t)(l[j] | (l[j + 16] << 4));
}
static void pack_q5(const uint8_t *l0, const uint8_t *l1, uint8_t *qs, uint8_t qhb[4]);

/* Every block of a row: kind 0 q4_0, 1 q4_1, 2 q5_0, 3 q5_1, 4 q8_0. */
static void best_row(iqf_simd simd, int kind, const float *x, void *vy, int64_t n, const float *qw) {
    const float sigma2 = row_sigma2(x, n);
    float w[QK];
    uint8_t l[QK];
    for (int64_t i = 0; i < n / QK; i++) {
        const float *xb = x + i * QK;
        iqf_best_weights(simd, xb, qw ? qw + i * QK : NULL, sigma2, w);
        switch (kind) {
        case 0: {
            block_q4_0 *b = (block_q4_0 *)vy + i;
            b->d = iqf_best_sym_block(simd, xb, w, -8, 7, l);
            pack_q4(l, b->qs);
            break;
        }
        case 1: {
            block_q4_1 *b = (block_q4_1 *)vy + i;
            iqf_best_asym_block(simd, xb, w, 15, l, &b->d, &b->m);
            pack_q4(l, b->qs);
            break;
        }
        case 2: {
            block_q5_0 *b = (block_q5_0 *)vy + i;
            b->d = iqf_best_sym_block(simd, xb, w, -16, 15, l);
            pack_q5(l, l + 16, b->qs, b->qh);
            break;
        }
        case 3: {
            block_q5_1 *b = (block_q5_1 *)vy + i;
            iqf_best_asym_block(simd, xb, w, 31, l, &b->d, &b->m);
            pack_q5(l, l + 16, b->qs, b->qh);
            break;
        }
        default: {
            /* -127..127 as ggml writes: SIMD dot products negate weights with sign_epi8 */
            block_q8_0 *b = (block_q8_0 *)vy + i;
            b->d = iqf_best_sym_block(simd, xb, w, -127, 127, l);
            for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)(l[j] - 127);
            break;
        }
        }
    }
}

/* ================================ q4_0 ================================ */
static void q4_0_ref(const float *x, block_q4_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        for (int j = 0; j < QK / 2; ++j) {
            int8_t a = (int8_t)cvtt_i32(x[j] * id + 8.5f);
            int8_t b = (int8_t)cvtt_i32(x[QK / 2 + j] * id + 8.5f);
            uint8_t xi0 = (uint8_t)(a < 15 ? a : 15);
            uint8_t xi1 = (uint8_t)(b < 15 ? b : 15);
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static void quantize_row_q4_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_0 *y = vy;
    const int64_t nb = n / QK;
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, 0, x, vy, n, qw);
        return;
    }
    if (!qw) {
        LEG_DISPATCH(q4_0_ref, x, y, nb);
        q4_0_ref(x, y, nb);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[CHUNK * QK], sc[CHUNK];
    int8_t L[CHUNK * QK];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK) {
        int G = (int)(nb - b0 < CHUNK ? nb - b0 : CHUNK);
        const float *xb = x + b0 * QK;
        kq_impl_weights(ctx->simd, (int64_t)G * QK, xb, qw + b0 * QK, sigma2, w);
        kq_qx_batch(ctx->simd, G, QK, 8, xb, w, L, sc);
        for (int g = 0; g < G; g++) {
            block_q4_0 *b = &y[b0 + g];
            const int8_t *l = L + g * QK;
            b->d = IQF_FP32_TO_FP16(sc[g]);
            for (int j = 0; j < 16; ++j) b->qs[j] = (uint8_t)(l[j] | (l[j + 16] << 4));
        }
    }
}

static void dequantize_row_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* ================================ q4_1 ================================ */
static void q4_1_ref(const float *x, block_q4_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        y[i].m = IQF_FP32_TO_FP16(min);
        for (int j = 0; j < QK / 2; ++j) {
            int8_t a = (int8_t)cvtt_i32((x[j] - min) * id + 0.5f);
            int8_t b = (int8_t)cvtt_i32((x[QK / 2 + j] - min) * id + 0.5f);
            uint8_t xi0 = (uint8_t)(a < 15 ? a : 15);
            uint8_t xi1 = (uint8_t)(b < 15 ? b : 15);
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

static void quantize_row_q4_1(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    block_q4_1 *y = vy;
    const int64_t nb = n / QK;
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, 1, x, vy, n, qw);
        return;
    }
    if (!qw) {
        LEG_DISPATCH(q4_1_ref, x, y, nb);
        q4_1_ref(x, y, nb);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[CHUNK * QK], sc[CHUNK], mn[CHUNK];
    uint8_t L[CHUNK * QK];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK) {
        int G = (int)(nb - b0 < CHUNK ? nb - b0 : CHUNK);
        const float *xb = x + b0 * QK;
        kq_impl_weights(ctx->simd, (int64_t)G * QK, xb, qw + b0 * QK, sigma2, w);
        kq_qkx_batch(ctx->simd, G, QK, 15, xb, w, L, sc, mn, -0.9f, 0.05f, 36, false);
        for (int g = 0; g < G; g++) {
            block_q4_1 *b = &y[b0 + g];
            const uint8_t *l = L + g * QK;
            b->d = IQF_FP32_TO_FP16(sc[g]);
            b->m = IQF_FP32_TO_FP16(-mn[g]);
            for (int j = 0; j < 16; ++j) b->qs[j] = (uint8_t)(l[j] | (l[j + 16] << 4));
        }
    }
}

static void dequantize_row_q4_1(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = IQF_FP16_TO_FP32(x[i].d), m = IQF_FP16_TO_FP32(x[i].m);
        for (int j = 0; j < QK / 2; ++j) {
            y[j] = (x[i].qs[j] & 0x0F) * d + m;
            y[j + QK / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

/* ================================ q5_0 ================================ */
static void pack_q5(const uint8_t *l0, const uint8_t *l1, uint8_t *qs, uint8_t qhb[4]) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = l0[j], xi1 = l1[j];
        qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qhb, &qh, 4);
}

static void q5_0_ref(const float *x, block_q5_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        uint8_t l[QK];
        for (int j = 0; j < QK; ++j) {
            int8_t a = (int8_t)cvtt_i32(x[j] * id + 16.5f);
            l[j] = (uint8_t)(a < 31 ? a : 31);
        }
        pack_q5(l, l + 16, y[i].qs, y[i].qh);
    }
}

static void quantize_row_q5_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_0 *y = vy;
    const int64_t nb = n / QK;
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, 2, x, vy, n, qw);
        return;
    }
    if (!qw) {
        LEG_DISPATCH(q5_0_ref, x, y, nb);
        q5_0_ref(x, y, nb);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[CHUNK * QK], sc[CHUNK];
    int8_t L[CHUNK * QK];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK) {
        int G = (int)(nb - b0 < CHUNK ? nb - b0 : CHUNK);
        const float *xb = x + b0 * QK;
        kq_impl_weights(ctx->simd, (int64_t)G * QK, xb, qw + b0 * QK, sigma2, w);
        kq_qx_batch(ctx->simd, G, QK, 16, xb, w, L, sc);
        for (int g = 0; g < G; g++) {
            block_q5_0 *b = &y[b0 + g];
            const uint8_t *l = (const uint8_t *)(L + g * QK);
            b->d = IQF_FP32_TO_FP16(sc[g]);
            pack_q5(l, l + 16, b->qs, b->qh);
        }
    }
}

static void dequantize_row_q5_0(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < QK / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
            const int32_t x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
            y[j] = x0 * d;
            y[j + QK / 2] = x1 * d;
        }
    }
}

/* ================================ q5_1 ================================ */
static void q5_1_ref(const float *x, block_q5_1 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        y[i].m = IQF_FP32_TO_FP16(min);
        uint8_t l[QK];
        for (int j = 0; j < QK; ++j) l[j] = (uint8_t)cvtt_i32((x[j] - min) * id + 0.5f);
        pack_q5(l, l + 16, y[i].qs, y[i].qh);
    }
}

static void quantize_row_q5_1(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    block_q5_1 *y = vy;
    const int64_t nb = n / QK;
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, 3, x, vy, n, qw);
        return;
    }
    if (!qw) {
        LEG_DISPATCH(q5_1_ref, x, y, nb);
        q5_1_ref(x, y, nb);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[CHUNK * QK], sc[CHUNK], mn[CHUNK];
    uint8_t L[CHUNK * QK];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK) {
        int G = (int)(nb - b0 < CHUNK ? nb - b0 : CHUNK);
        const float *xb = x + b0 * QK;
        kq_impl_weights(ctx->simd, (int64_t)G * QK, xb, qw + b0 * QK, sigma2, w);
        kq_qkx_batch(ctx->simd, G, QK, 31, xb, w, L, sc, mn, -0.9f, 0.05f, 36, false);
        for (int g = 0; g < G; g++) {
            block_q5_1 *b = &y[b0 + g];
            const uint8_t *l = L + g * QK;
            b->d = IQF_FP32_TO_FP16(sc[g]);
            b->m = IQF_FP32_TO_FP16(-mn[g]);
            pack_q5(l, l + 16, b->qs, b->qh);
        }
    }
}

static void dequantize_row_q5_1(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = IQF_FP16_TO_FP32(x[i].d), m = IQF_FP16_TO_FP32(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < QK / 2; ++j) {
            const uint8_t xh_0 = (uint8_t)(((qh >> (j + 0)) << 4) & 0x10);
            const uint8_t xh_1 = (uint8_t)(((qh >> (j + 12))) & 0x10);
            const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
            const int x1 = (x[i].qs[j] >> 4) | xh_1;
            y[j] = x0 * d + m;
            y[j + QK / 2] = x1 * d + m;
        }
    }
}

/* ================================ q8_0 ================================ */
static void q8_0_ref(const float *x, block_q8_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f;
        for (int j = 0; j < QK; j++) {
            float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        for (int j = 0; j < QK; ++j) y[i].qs[j] = (int8_t)cvtt_i32(roundf(x[j] * id));
    }
}

static void quantize_row_q8_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, 4, x, vy, n, qw);
        return;
    }
    (void)qw; /* ggml ignores the importance matrix for q8_0 */
    block_q8_0 *y = vy;
    LEG_DISPATCH(q8_0_ref, x, y, n / QK);
    q8_0_ref(x, y, n / QK);
}

static void dequantize_row_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < QK; ++j) y[j] = x[i].qs[j] * d;
    }
}

const iqf_codec iqf_codecs_legacy[] = {
    { IQF_TYPE_Q4_0, NULL, quantize_row_q4_0, dequantize_row_q4_0 },
    { IQF_TYPE_Q4_1, NULL, quantize_row_q4_1, dequantize_row_q4_1 },
    { IQF_TYPE_Q5_0, NULL, quantize_row_q5_0, dequantize_row_q5_0 },
    { IQF_TYPE_Q5_1, NULL, quantize_row_q5_1, dequantize_row_q5_1 },
    { IQF_TYPE_Q8_0, NULL, quantize_row_q8_0, dequantize_row_q8_0 },
    { -1, NULL, NULL, NULL },
};

/* ---- SIMD instantiations of the *_ref encoders (legacy_lanes.h once per instruction set) ---- */
#ifdef LEG_HAVE_X86
#define LEG_PASS 1
#define LW 8
#define LTGT __attribute__((target("avx2,f16c")))
#define LSFX(name) name##_avx2
#include "legacy_lanes.h"
#undef LEG_PASS
#undef LW
#undef LTGT
#undef LSFX
#define LEG_PASS 2
#define LW 16
#define LTGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))
#define LSFX(name) name##_avx512
#include "legacy_lanes.h"
#endif

