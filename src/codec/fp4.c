/*
 * fp4.c - MXFP4 (blocks of 32 E2M1 codes, one E8M0 exponent) and NVFP4 (blocks of 64, four UE4M3
 * scales of 16 each), bit-exact with ggml 0.25.1's quantize_row_mxfp4_ref / quantize_row_nvfp4_ref.
 *
 * ggml ignores the importance matrix for both (quantize_mxfp4 / quantize_nvfp4 call the _ref
 * encoders): MXFP4's exponent is floor(log2(max|x|)) - 2, NVFP4's scales are UE4M3(max|x| / 6),
 * and every value takes the nearest of the 16 table levels times the scale (first index on ties).
 * The SIMD kernels (fp4_lanes.h) run that search on whole vectors with the same arithmetic.
 */
#include "codec.h"
#include "util/fma.h"

#include <math.h>
#include <string.h>

/* ggml's kvalues_fp4: twice the E2M1 values. */
static const float fp4_kv[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/* ggml_e8m0_to_fp32_half: 2^(e - 128). */
static inline float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* UE4M3 (4 exponent bits, bias 7, 3 mantissa bits) times 0.5, as ggml_ue4m3_to_fp32. */
static inline float ue4m3_to_fp32(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0.0f;
    const int exp = (x >> 3) & 0xF, man = x & 0x7;
    const float raw = exp == 0 ? ldexpf((float)man, -9) : ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return raw * 0.5f;
}

/* ggml_fp32_to_ue4m3 (round half up on the mantissa, saturating at 0x7E). */
static inline uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    uint32_t bits;
    memcpy(&bits, &x, 4);
    const int fp32_exp = (int)((bits >> 23) & 0xFF) - 127, fp32_man = (int)((bits >> 20) & 0x7);
    int ue4m3_exp = fp32_exp + 7;
    if (ue4m3_exp <= 0) {
        int man = (int)(x * 512.0f + 0.5f);
        if (man > 7) man = 7;
        if (man < 1) return 0;
        return (uint8_t)man;
    }
    if (ue4m3_exp >= 15) return 0x7E;
    int ue4m3_man = fp32_man + (int)((bits >> 19) & 1);
    if (ue4m3_man > 7) {
        ue4m3_man = 0;
        if (++ue4m3_exp >= 15) return 0x7E;
    }
    return (uint8_t)((ue4m3_exp << 3) | ue4m3_man);
}

/* (uint8_t)f as x86 code converts a float to an 8-bit integer (cvttss2si, low byte): ggml's
 * exponent of a block whose max is below 2^-125 is negative before the cast. */
static inline uint8_t cvt_u8(float f) {
    if (!(f > -2147483648.f && f < 2147483648.f)) return 0;
    return (uint8_t)(int32_t)f;
}

/* MXFP4's E8M0 exponent of a block with max |x| = amax, as ggml: floor(log2f(amax)) - 2 + 127.
 * Where the mantissa is well inside (1, 2) the floor is the binary exponent whatever log2f's last
 * bit; elsewhere (near a power of two, subnormals) log2f decides, as in ggml. */
static inline uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    uint32_t u;
    memcpy(&u, &amax, 4);
    const uint32_t ef = (u >> 23) & 0xFF, m = u & 0x7FFFFF;
    if (ef >= 1 && ef <= 254 && m >= 0x2000 && m <= 0x7FE000) return (uint8_t)((int)ef - 127 - 2 + 127);
    return cvt_u8(floorf(log2f(amax)) - 2 + 127);
}

/* ---- the scalar reference (ggml's loops) ---- */
static inline int best_index(float x, float e) {
    int best = 0;
    float best_err = fabsf(IQF_FMS_ARM(fp4_kv[0], e, x));
    for (int i = 1; i < 16; i++) {
        const float err = fabsf(IQF_FMS_ARM(fp4_kv[i], e, x));
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

static void mxfp4_row_ref(const float *x, block_mxfp4 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = amax > 0.0f ? cvt_u8(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < QK_MXFP4 / 2; j++)
            y[i].qs[j] = (uint8_t)(best_index(x[j], d) | best_index(x[j + QK_MXFP4 / 2], d) << 4);
    }
}

static void nvfp4_row_ref(const float *x, block_nvfp4 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++, x += QK_NVFP4_SUB) {
            float amax = 0.0f;
            for (int j = 0; j < QK_NVFP4_SUB; j++)
                if (amax < fabsf(x[j])) amax = fabsf(x[j]);
            const uint8_t ue = fp32_to_ue4m3(amax / 6.0f);
            y[i].d[s] = ue;
            const float d = ue4m3_to_fp32(ue);
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++)
                y[i].qs[s * (QK_NVFP4_SUB / 2) + j] =
                    (uint8_t)(best_index(x[j], d) | best_index(x[j + QK_NVFP4_SUB / 2], d) << 4);
        }
    }
}

/* The vector kernels' exact shortcut (fp4_lanes.h fp4_codes) holds for a scale d > 0 whose
 * levels and midpoints are exact floats (a power of two: MXFP4; UE4M3's 4 significant bits times
 * at most 12: NVFP4) and a block with max |x| <= 16 d. MXFP4's exponent always satisfies it
 * (max|x| < 16 d; a wrapped-around exponent makes d huge, codes 0). */
static inline bool fp4_fast_ok(float amax, float d) { return d > 0.0f && amax <= 16.0f * d; }

/* 2 h code bytes (each < 16) as h packed bytes: codes[j] | codes[j + h] << 4 (h: 8 or 16). */
static inline void fp4_pack(const uint8_t *codes, int h, uint8_t *qs) {
    for (int j = 0; j < h; j += 8) {
        uint64_t a, b;
        memcpy(&a, codes + j, 8);
        memcpy(&b, codes + j + h, 8);
        a |= b << 4;
        memcpy(qs + j, &a, 8);
    }
}

/* ---- SIMD instantiations (fp4_lanes.h once per instruction set) ---- */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "fp4_lanes.h"
#include "lanes_neon.h"
#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "fp4_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "fp4_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

static void mxfp4_compat(iqf_simd simd, const float *x, void *vy, int64_t nb) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) { mxfp4_row_avx512(x, vy, nb); return; }
    if (simd == IQF_SIMD_AVX2) { mxfp4_row_avx2(x, vy, nb); return; }
#endif
    if (simd == IQF_SIMD_NEON) { mxfp4_row_neon(x, vy, nb); return; }
    mxfp4_row_ref(x, vy, nb);
}

static void nvfp4_compat(iqf_simd simd, const float *x, void *vy, int64_t nb) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) { nvfp4_row_avx512(x, vy, nb); return; }
    if (simd == IQF_SIMD_AVX2) { nvfp4_row_avx2(x, vy, nb); return; }
#endif
    if (simd == IQF_SIMD_NEON) { nvfp4_row_neon(x, vy, nb); return; }
    nvfp4_row_ref(x, vy, nb);
}

/* ---- best mode (IQF_MODE_BEST): a scale search on the weighted squared error ----
 * Weights: with an importance matrix qw[j] * sqrt(sigma2 + x[j]^2) (sigma2 the row's mean x^2,
 * as ggml's *_impl encoders weigh), without one uniform. For a given scale every value's nearest
 * level is its best code whatever its weight, so the search is over the scale only: MXFP4's
 * exponent around the block's (e-3 .. e+1), NVFP4's UE4M3 codes around ggml's (ue-8 .. ue+4).
 * ggml's own scale is a candidate and wins ties, so best is never worse than compat on that
 * error (except that best never writes ggml's wrapped-around exponent 0xFF, a NaN scale, for a
 * block whose max is below 2^-126).
 * Scalar, the same bytes at every SIMD level. */
static double row_sigma2(const float *x, int64_t n) { /* in double: no overflow at 1e18 */
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += (double)x[j] * x[j];
    return s / (double)n;
}

static inline void best_weights(const float *x, const float *qw, double sigma2, int n, double *w) {
    for (int j = 0; j < n; j++) w[j] = qw ? (double)qw[j] * sqrt(sigma2 + (double)x[j] * x[j]) : 1.0;
}

/* Weighted squared error of n values at scale d (nearest levels), codes into c. */
static double fp4_err(const float *x, const double *w, int n, float d, uint8_t *c) {
    double e = 0;
    for (int j = 0; j < n; j++) {
        c[j] = (uint8_t)best_index(x[j], d);
        const double r = (double)x[j] - (double)(fp4_kv[c[j]] * d);
        e += w[j] * r * r;
    }
    return e;
}

static void mxfp4_best(const float *x, block_mxfp4 *y, int64_t nb, const float *qw, double sigma2) {
    double w[QK_MXFP4];
    uint8_t c[QK_MXFP4], cb[QK_MXFP4];
    for (int64_t i = 0; i < nb; i++, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        best_weights(x, qw ? qw + i * QK_MXFP4 : NULL, sigma2, QK_MXFP4, w);
        /* ggml's exponent, and the true one: below 2^-125 ggml's wraps around (0xFF: NaN) */
        const int e0 = mxfp4_exponent(amax);
        int et = amax > 0.0f ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
        et = et < 0 ? 0 : et;
        int be = e0;
        double best = e0 == 0xFF ? INFINITY : fp4_err(x, w, QK_MXFP4, e8m0_half((uint8_t)e0), cb);
        for (int e = et - 3; e <= et + 1; e++) {
            if (e == e0 || e < 0 || e > 254) continue;
            const double err = fp4_err(x, w, QK_MXFP4, e8m0_half((uint8_t)e), c);
            if (err < best || be == 0xFF) {
                best = err;
                be = e;
                memcpy(cb, c, sizeof c);
            }
        }
        y[i].e = (uint8_t)be;
        for (int j = 0; j < QK_MXFP4 / 2; j++) y[i].qs[j] = (uint8_t)(cb[j] | cb[j + QK_MXFP4 / 2] << 4);
    }
}

static void nvfp4_best(const float *x, block_nvfp4 *y, int64_t nb, const float *qw, double sigma2) {
    double w[QK_NVFP4_SUB];
    uint8_t c[QK_NVFP4_SUB], cb[QK_NVFP4_SUB];
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++, x += QK_NVFP4_SUB) {
            float amax = 0.0f;
            for (int j = 0; j < QK_NVFP4_SUB; j++)
                if (amax < fabsf(x[j])) amax = fabsf(x[j]);
            best_weights(x, qw ? qw + i * QK_NVFP4 + s * QK_NVFP4_SUB : NULL, sigma2, QK_NVFP4_SUB, w);
            const int u0 = fp32_to_ue4m3(amax / 6.0f);
            int bu = u0;
            double best = fp4_err(x, w, QK_NVFP4_SUB, ue4m3_to_fp32((uint8_t)u0), cb);
            for (int u = u0 - 8; u <= u0 + 4; u++) {
                if (u == u0 || u < 1 || u > 0x7E) continue;
                const double err = fp4_err(x, w, QK_NVFP4_SUB, ue4m3_to_fp32((uint8_t)u), c);
                if (err < best) {
                    best = err;
                    bu = u;
                    memcpy(cb, c, sizeof c);
                }
            }
            y[i].d[s] = (uint8_t)bu;
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++)
                y[i].qs[s * (QK_NVFP4_SUB / 2) + j] = (uint8_t)(cb[j] | cb[j + QK_NVFP4_SUB / 2] << 4);
        }
    }
}

static void quantize_row_mxfp4(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        mxfp4_best(x, vy, n / QK_MXFP4, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
    /* compat: ggml ignores the importance matrix */
    mxfp4_compat(ctx->simd, x, vy, n / QK_MXFP4);
}

static void quantize_row_nvfp4(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        nvfp4_best(x, vy, n / QK_NVFP4, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
    nvfp4_compat(ctx->simd, x, vy, n / QK_NVFP4);
}

static void dequantize_row_mxfp4(const void *vx, float *y, int64_t n) {
    const block_mxfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_MXFP4; i++, y += QK_MXFP4) {
        const float d = e8m0_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; j++) {
            y[j] = fp4_kv[x[i].qs[j] & 0x0F] * d;
            y[j + QK_MXFP4 / 2] = fp4_kv[x[i].qs[j] >> 4] * d;
        }
    }
}

static void dequantize_row_nvfp4(const void *vx, float *y, int64_t n) {
    const block_nvfp4 *x = vx;
    for (int64_t i = 0; i < n / QK_NVFP4; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++, y += QK_NVFP4_SUB) {
            const float d = ue4m3_to_fp32(x[i].d[s]);
            const uint8_t *q = x[i].qs + s * (QK_NVFP4_SUB / 2);
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++) {
                y[j] = fp4_kv[q[j] & 0x0F] * d;
                y[j + QK_NVFP4_SUB / 2] = fp4_kv[q[j] >> 4] * d;
            }
        }
    }
}

const iqf_codec iqf_codecs_fp4[] = {
    { IQF_TYPE_MXFP4, NULL, quantize_row_mxfp4, dequantize_row_mxfp4 },
    { IQF_TYPE_NVFP4, NULL, quantize_row_nvfp4, dequantize_row_nvfp4 },
    { -1, NULL, NULL, NULL },
};
