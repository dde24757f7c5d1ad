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
#include "util/fma.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define QK 32
#define CHUNK 64 /* blocks per batch call */

/* (int32_t)f as the platform's ggml computes it in ggml's `(int8_t)(x * id + 8.5f)` (C leaves an
 * out-of-range conversion undefined; the hardware decides), without UB here. x86's cvttss2si:
 * out-of-range and NaN give INT32_MIN. arm64's fcvtzs saturates (+inf -> INT32_MAX, whose low
 * byte is -1) and gives 0 for NaN: the arm64 oracle writes 0xf nibbles where x86's writes 0 for
 * blocks whose scale is denormal (1/d overflows to inf). */
static inline int32_t cvtt_i32(float f) {
#if defined(__aarch64__)
    if (f != f) return 0;
    if (f <= -2147483648.f) return INT32_MIN;
    if (f >= 2147483648.f) return INT32_MAX;
#else
    if (!(f > -2147483648.f && f < 2147483648.f)) return INT32_MIN;
#endif
    return (int32_t)f;
}

/* The five formats by what differs: asym (q4_1/q5_1 store a min m), nmax (symmetric: codes
 * -nmax..nmax-1 stored +nmax; asymmetric: codes 0..nmax), top (the reference encoder's clamp;
 * q5_1's reference has none, and 255 is the same: a C cast keeps the low byte). The layout (which
 * fields a block has) is leg_block's. */
enum { K_Q4_0, K_Q4_1, K_Q5_0, K_Q5_1, K_Q8_0 };
static const struct leg_fmt {
    bool asym;
    int nmax, top;
} leg_fmts[5] = {
    [K_Q4_0] = { false, 8, 15 },
    [K_Q4_1] = { true, 15, 15 },
    [K_Q5_0] = { false, 16, 31 },
    [K_Q5_1] = { true, 31, 255 },
    [K_Q8_0] = { false, 127, 127 },
};

/* The fields of block i of a row of one kind (m, qh NULL where the format has none). */
typedef struct {
    void *p; /* the block */
    iqf_half *d, *m;
    uint8_t *qh, *qs;
} leg_blk;
static inline leg_blk leg_block(int kind, void *vy, int64_t i) {
    switch (kind) {
    case K_Q4_0: { block_q4_0 *b = (block_q4_0 *)vy + i; return (leg_blk){ b, &b->d, NULL, NULL, b->qs }; }
    case K_Q4_1: { block_q4_1 *b = (block_q4_1 *)vy + i; return (leg_blk){ b, &b->d, &b->m, NULL, b->qs }; }
    case K_Q5_0: { block_q5_0 *b = (block_q5_0 *)vy + i; return (leg_blk){ b, &b->d, NULL, b->qh, b->qs }; }
    case K_Q5_1: { block_q5_1 *b = (block_q5_1 *)vy + i; return (leg_blk){ b, &b->d, &b->m, b->qh, b->qs }; }
    default: { block_q8_0 *b = (block_q8_0 *)vy + i; return (leg_blk){ b, &b->d, NULL, NULL, (uint8_t *)b->qs }; }
    }
}

/* Codes l[0..31] into qs (low nibbles j | j+16 << 4) and, for the 5-bit types, bit 4 into qh. */
static inline void pack_codes(const uint8_t *l, leg_blk b) {
    if (!b.qh) {
        for (int j = 0; j < 16; ++j) b.qs[j] = (uint8_t)(l[j] | (l[j + 16] << 4));
        return;
    }
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t xi0 = l[j], xi1 = l[j + 16];
        b.qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(b.qh, &qh, 4);
}

/* ---- the scalar reference encoders (ggml's quantize_row_q*_ref), one block at a time ---- */
/* q4_0, q5_0: d = (signed value of largest magnitude) / -nmax, codes min(x/d + nmax + 1/2, top). */
static inline __attribute__((always_inline)) void sym_ref(int kind, const float *x, void *vy, int64_t nb) {
    const int nmax = leg_fmts[kind].nmax, top = leg_fmts[kind].top;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK; j++) {
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        }
        const float d = max / -nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        *b.d = IQF_FP32_TO_FP16(d);
        uint8_t l[QK];
        for (int j = 0; j < QK; ++j) {
            int8_t a = (int8_t)cvtt_i32(x[j] * id + (nmax + 0.5f));
            l[j] = (uint8_t)(a < top ? a : top);
        }
        pack_codes(l, b);
    }
}

/* q4_1, q5_1: d = (max - min) / nmax, m = min, codes min((x - min)/d + 1/2, top). */
static inline __attribute__((always_inline)) void asym_ref(int kind, const float *x, void *vy, int64_t nb) {
    const int nmax = leg_fmts[kind].nmax, top = leg_fmts[kind].top;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        const float d = (max - min) / nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        *b.d = IQF_FP32_TO_FP16(d);
        *b.m = IQF_FP32_TO_FP16(min);
        uint8_t l[QK];
        for (int j = 0; j < QK; ++j) {
            int8_t a = (int8_t)cvtt_i32((x[j] - min) * id + 0.5f);
            l[j] = (uint8_t)(a < top ? a : top);
        }
        pack_codes(l, b);
    }
}

static void q4_0_ref(const float *x, void *vy, int64_t nb) { sym_ref(K_Q4_0, x, vy, nb); }
static void q5_0_ref(const float *x, void *vy, int64_t nb) { sym_ref(K_Q5_0, x, vy, nb); }
static void q4_1_ref(const float *x, void *vy, int64_t nb) { asym_ref(K_Q4_1, x, vy, nb); }
static void q5_1_ref(const float *x, void *vy, int64_t nb) { asym_ref(K_Q5_1, x, vy, nb); }

/* q8_0: d = max|x| / 127, codes round(x/d). */
static void q8_0_ref(const float *x, void *vy, int64_t nb) {
    block_q8_0 *y = vy;
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

/* The reference encoders at each SIMD level ([0] the plain C above, [1] AVX2, [2] AVX-512, [3] NEON). */
typedef void (*ref_fn)(const float *x, void *vy, int64_t nb);
#define LEG_FNS(sfx) { q4_0_ref##sfx, q4_1_ref##sfx, q5_0_ref##sfx, q5_1_ref##sfx, q8_0_ref##sfx }
#define LEG_DECLARE(sfx)                                                                          \
    static void q4_0_ref##sfx(const float *, void *, int64_t), q4_1_ref##sfx(const float *, void *, int64_t), \
        q5_0_ref##sfx(const float *, void *, int64_t), q5_1_ref##sfx(const float *, void *, int64_t),         \
        q8_0_ref##sfx(const float *, void *, int64_t);
LEG_DECLARE(_neon)
#ifdef IQF_ARCH_X86
LEG_DECLARE(_avx2)
LEG_DECLARE(_avx512)
static const ref_fn ref_fns[4][5] = { LEG_FNS(), LEG_FNS(_avx2), LEG_FNS(_avx512), LEG_FNS(_neon) };
#else
static const ref_fn ref_fns[4][5] = { LEG_FNS(), LEG_FNS(), LEG_FNS(), LEG_FNS(_neon) };
#endif
#undef LEG_DECLARE
#undef LEG_FNS

/* A row without an importance matrix: the reference encoder at the context's SIMD level
 * ([3]: the NEON level, the plain width). */
static void ref_row(iqf_simd simd, int kind, const float *x, void *vy, int64_t nb) {
    ref_fns[simd == IQF_SIMD_NEON ? 3 : simd == IQF_SIMD_AVX512 ? 2 : simd == IQF_SIMD_AVX2 ? 1 : 0][kind](x, vy, nb);
}

/* One block through the plain reference: the SIMD kernels' path for blocks they do not take. */
static void ref_block(int kind, const float *x, void *blk) { ref_fns[0][kind](x, blk, 1); }

/* ---- the row encoder of every kind ---- */
static float row_sigma2(const float *x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j]; /* unfused on arm64 too: vectorized (fma.h) */
    return sum_x2 / n;
}

/* best mode (best_scale.c): one search per row, the same bytes at every SIMD level. */
static void best_row(iqf_simd simd, int kind, const float *x, void *vy, int64_t n, const float *qw) {
    iqf_best_legacy_row(simd, kind, x, vy, n, qw);
}

/* compat: ggml_quantize_chunk's choice. Without an importance matrix the *_ref encoder; with one
 * quantize_row_q*_impl: per-value weights qw*sqrt(sigma2 + x^2), make_qx_quants (q4_0, q5_0) or
 * make_qkx3_quants (q4_1, q5_1), batched CHUNK blocks at a time. q8_0 ignores the imatrix. */
static inline __attribute__((always_inline)) void leg_quantize(const iqf_qctx *ctx, int kind, const float *x,
                                                               void *vy, int64_t n, const float *qw) {
    const struct leg_fmt f = leg_fmts[kind];
    const int64_t nb = n / QK;
    if (ctx->mode == IQF_MODE_BEST) {
        best_row(ctx->simd, kind, x, vy, n, qw);
        return;
    }
    if (!qw || kind == K_Q8_0) {
        ref_row(ctx->simd, kind, x, vy, nb);
        return;
    }
    const float sigma2 = row_sigma2(x, n);
    float w[CHUNK * QK], sc[CHUNK], mn[CHUNK];
    uint8_t L[CHUNK * QK];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK) {
        int G = (int)(nb - b0 < CHUNK ? nb - b0 : CHUNK);
        const float *xb = x + b0 * QK;
        iqf_kq_impl_weights(ctx->simd, (int64_t)G * QK, xb, qw + b0 * QK, sigma2, w);
        if (f.asym) iqf_kq_qkx_batch(ctx->simd, G, QK, f.nmax, xb, w, L, sc, mn, -0.9f, 0.05f, 36, false);
        else iqf_kq_qx_batch(ctx->simd, G, QK, f.nmax, xb, w, (int8_t *)L, sc);
        for (int g = 0; g < G; g++) {
            const leg_blk b = leg_block(kind, vy, b0 + g);
            *b.d = IQF_FP32_TO_FP16(sc[g]);
            if (f.asym) *b.m = IQF_FP32_TO_FP16(-mn[g]);
            pack_codes(L + g * QK, b);
        }
    }
}

static inline __attribute__((always_inline)) void leg_dequantize(int kind, const void *vx, float *y, int64_t n) {
    const struct leg_fmt f = leg_fmts[kind];
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        const leg_blk b = leg_block(kind, (void *)vx, i); /* read only */
        const float d = IQF_FP16_TO_FP32(*b.d), m = f.asym ? IQF_FP16_TO_FP32(*b.m) : 0.0f;
        if (kind == K_Q8_0) {
            for (int j = 0; j < QK; ++j) y[j] = (int8_t)b.qs[j] * d;
            continue;
        }
        uint32_t qh = 0;
        if (b.qh) memcpy(&qh, b.qh, 4);
        for (int j = 0; j < QK / 2; ++j) {
            const int x0 = (b.qs[j] & 0x0F) | (int)(((qh >> (j + 0)) << 4) & 0x10);
            const int x1 = (b.qs[j] >> 4) | (int)((qh >> (j + 12)) & 0x10);
            if (f.asym) {
                y[j] = IQF_FMA_ARM(x0, d, m); /* ggml: x0*d + m, fused on arm64 */
                y[j + QK / 2] = IQF_FMA_ARM(x1, d, m);
            } else {
                y[j] = (x0 - f.nmax) * d;
                y[j + QK / 2] = (x1 - f.nmax) * d;
            }
        }
    }
}

#define LEG_CODEC(name, KIND)                                                                      \
    static void quantize_row_##name(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,     \
                                    const float *qw) {                                            \
        leg_quantize(ctx, KIND, x, vy, n, qw);                                                    \
    }                                                                                             \
    static void dequantize_row_##name(const void *vx, float *y, int64_t n) { leg_dequantize(KIND, vx, y, n); }
LEG_CODEC(q4_0, K_Q4_0)
LEG_CODEC(q4_1, K_Q4_1)
LEG_CODEC(q5_0, K_Q5_0)
LEG_CODEC(q5_1, K_Q5_1)
LEG_CODEC(q8_0, K_Q8_0)
#undef LEG_CODEC

const iqf_codec iqf_codecs_legacy[] = {
    { IQF_TYPE_Q4_0, NULL, quantize_row_q4_0, dequantize_row_q4_0 },
    { IQF_TYPE_Q4_1, NULL, quantize_row_q4_1, dequantize_row_q4_1 },
    { IQF_TYPE_Q5_0, NULL, quantize_row_q5_0, dequantize_row_q5_0 },
    { IQF_TYPE_Q5_1, NULL, quantize_row_q5_1, dequantize_row_q5_1 },
    { IQF_TYPE_Q8_0, NULL, quantize_row_q8_0, dequantize_row_q8_0 },
    { -1, NULL, NULL, NULL },
};

/* ---- SIMD instantiations of the *_ref encoders (legacy_lanes.h once per instruction set) ---- */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "legacy_lanes.h"
#include "lanes_neon.h"
#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma,f16c")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "legacy_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "legacy_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

