/*
 * lowbit.c - the 1- and 2-bit block types, bit-exact with ggml 0.25.1:
 *   Q1_0  (128 weights): d = mean |x|, one sign bit per weight (x >= 0 -> +d, else -d);
 *   Q2_0  (64): d = max |x|, codes round(x/d) + 1 clamped to 0..3 (values -d, 0, d, 2d);
 *   TQ1_0 (256, BitNet b1.58 / TriLM): d = max |x|, trits round(x/d) packed 5 per byte (base 3,
 *         scaled to 0..255) and 4 per byte in qh;
 *   TQ2_0 (256): the same trits, 2 bits each.
 * ggml ignores the importance matrix for all four (quantize_q1_0/q2_0 run the _ref encoder row by
 * row, quantize_tq*_0 drop it). Q1_0's mean is a sequential float sum, so its encoders keep that
 * order per block (the vector kernel runs one block per lane).
 */
#include "codec.h"

#include <math.h>
#include <string.h>

#if !defined(__aarch64__)
/* (int32_t)f as x86's cvttss2si: out-of-range and NaN give INT32_MIN (no UB). */
static inline int32_t cvtt_i32(float f) {
    if (!(f > -2147483648.f && f < 2147483648.f)) return INT32_MIN;
    return (int32_t)f;
}
#endif

/* roundf (half away from zero) for |v| < 2^23, exactly: truncate, then step by the remainder
 * (v - t is exact there). */
static inline int round_away(float v) {
    const int t = (int)v;
    const float r = v - (float)t;
    return t + (r >= 0.5f) - (r <= -0.5f);
}

/* ggml's `lroundf(v) + 1` as an int: a trit code 0..2 for the finite values the ternary encoders
 * see (|v| <= 1 + ulp); an infinite scale (a block max below 2^-126 / 2) gives lroundf's
 * overflow value, whose low 32 bits plus one are 1. */
static inline int trit(float v) {
    if (!(v > -8388608.f && v < 8388608.f)) return (int)(lroundf(v) + 1);
    return round_away(v) + 1;
}

/* ggml's (int)roundf(v) + 1 clamped to 0..3 (Q2_0). Out of int range (a block max below about
 * 2^-127 makes 1/d infinite, so x*id is +-inf, or NaN for a zero) the conversion is undefined in C
 * and each platform's ggml does what its hardware does: x64's cvttss2si gives INT32_MIN for all
 * of them (code 0); arm64's clang compiles `(int)roundf(v)` to fcvtas, which saturates (+inf ->
 * INT32_MAX, -inf -> INT32_MIN) and gives 0 for NaN, and clamps before the +1 (it may: overflow
 * is undefined): +inf -> 3, -inf -> 0, NaN -> 1 (objdump -d of the arm64 libggml-base.so's
 * quantize_row_q2_0_ref: fcvtas, csinv, csel, add). */
static inline int q2_code(float v) {
#if defined(__aarch64__)
    if (v != v) return 1;
    if (!(v > -8388608.f && v < 8388608.f)) return v > 0 ? 3 : 0;
    int q = round_away(v);
#else
    int q = (v > -8388608.f && v < 8388608.f) ? round_away(v) : cvtt_i32(roundf(v));
#endif
    q = q < -1 ? -1 : q > 2 ? 2 : q;
    return q + 1;
}

/* ---- Q1_0 ---- */
static inline void q1_0_pack(const float *x, float d, block_q1_0 *y) {
    y->d = IQF_FP32_TO_FP16(d);
    for (int b = 0; b < QK1_0 / 8; b++) {
        uint8_t q = 0;
        for (int k = 0; k < 8; k++) q |= (uint8_t)((x[8 * b + k] >= 0.0f) << k);
        y->qs[b] = q;
    }
}

/* The scalar reference, ggml's loop: one sequential sum per block. */
static void q1_0_row_ref(const float *x, block_q1_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK1_0) {
        float sum_abs = 0.0f;
        for (int j = 0; j < QK1_0; j++) sum_abs += fabsf(x[j]);
        q1_0_pack(x, sum_abs / QK1_0, &y[i]);
    }
}

/* The sums of Q1_G blocks interleaved (independent dependency chains, each in ggml's order). */
#define Q1_G 8
static inline void q1_0_sums(const float *xb, float *s) {
    for (int j = 0; j < QK1_0; j++)
        for (int g = 0; g < Q1_G; g++) s[g] += fabsf(xb[g * QK1_0 + j]);
}
static void q1_0_row_fast(const float *x, block_q1_0 *y, int64_t nb) {
    int64_t i = 0;
    for (; i + Q1_G <= nb; i += Q1_G) {
        const float *xb = x + i * QK1_0;
        float s[Q1_G] = { 0 };
        q1_0_sums(xb, s);
        for (int g = 0; g < Q1_G; g++) q1_0_pack(xb + g * QK1_0, s[g] / QK1_0, &y[i + g]);
    }
    q1_0_row_ref(x + i * QK1_0, y + i, nb - i);
}

/* ---- Q2_0 ---- */
static void q2_0_row_ref(const float *x, block_q2_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK2_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK2_0; j++) {
            const float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        const float d = amax, id = d > 0.0f ? 1.0f / d : 0.0f;
        y[i].d = IQF_FP32_TO_FP16(d);
        for (int b = 0; b < QK2_0 / 4; b++) {
            uint8_t q = 0;
            for (int k = 0; k < 4; k++) q |= (uint8_t)(q2_code(x[4 * b + k] * id) << (2 * k));
            y[i].qs[b] = q;
        }
    }
}

/* ---- TQ1_0, TQ2_0 ---- */
static inline float amax256(const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < QK_K; j++) {
        const float a = fabsf(x[j]);
        amax = amax > a ? amax : a;
    }
    return amax;
}

/* Trits t[0..256) (0..2 = -1, 0, 1) into TQ1_0's bytes: qs[m] holds t[m + 32 k] (k = 0..4) for
 * m < 32, qs[32 + m] holds t[160 + m + 16 k], qh[m] holds t[240 + m + 4 k] (k = 0..3) and a
 * zero trit; each base 3, most significant first, then ceil(q * 256 / 243). */
static inline uint8_t tq1_byte(const uint8_t *t, int stride, int n) {
    unsigned q = 0;
    for (int k = 0; k < n; k++) q = (uint8_t)(q * 3 + t[k * stride]);
    if (n == 4) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + (243 - 1)) / 243);
}
static void tq1_pack(const uint8_t *t, float d, block_tq1_0 *y) {
    y->d = IQF_FP32_TO_FP16(d);
    for (int m = 0; m < 32; m++) y->qs[m] = tq1_byte(t + m, 32, 5);
    for (int m = 0; m < 16; m++) y->qs[32 + m] = tq1_byte(t + 160 + m, 16, 5);
    for (int m = 0; m < 4; m++) y->qh[m] = tq1_byte(t + 240 + m, 4, 4);
}
/* TQ2_0: qs[j + m] holds t[4 j + m + 32 k] in bits 2k (j = 0, 32). */
static void tq2_pack(const uint8_t *t, float d, block_tq2_0 *y) {
    y->d = IQF_FP32_TO_FP16(d);
    for (int j = 0; j < QK_K / 4; j += 32)
        for (int m = 0; m < 32; m++) {
            const uint8_t *tt = t + 4 * j + m;
            y->qs[j + m] = (uint8_t)((tt[0] & 3) | (tt[32] & 3) << 2 | (tt[64] & 3) << 4 | (tt[96] & 3) << 6);
        }
}

/* ggml's trits of a block: lroundf(x/max|x|) + 1 (kept to its low byte, as ggml's uint8 sums). */
static float tq_trits(const float *x, uint8_t *t) {
    const float d = amax256(x), id = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < QK_K; j++) t[j] = (uint8_t)trit(x[j] * id);
    return d;
}

static void tq1_0_row_ref(const float *x, block_tq1_0 *y, int64_t nb) {
    uint8_t t[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) tq1_pack(t, tq_trits(x, t), &y[i]);
}

static void tq2_0_row_ref(const float *x, block_tq2_0 *y, int64_t nb) {
    uint8_t t[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) tq2_pack(t, tq_trits(x, t), &y[i]);
}

/* ---- SIMD instantiations (lowbit_lanes.h once per instruction set) ---- */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "lowbit_lanes.h"
#include "lanes_neon.h"
#ifdef IQF_ARCH_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma,f16c")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "lowbit_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,f16c")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "lowbit_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

/* ---- best mode (IQF_MODE_BEST): a scale search on the weighted squared error ----
 * Weights: with an importance matrix qw[j] * sqrt(sigma2 + x[j]^2) (sigma2 the row's mean x^2,
 * as ggml's *_impl encoders weigh), without one uniform. Every candidate scale is rounded to fp16
 * first and evaluated with each value's nearest level (the best code whatever its weight); ggml's
 * own block is the first candidate and wins ties, so best is never worse than compat on that
 * error. Scalar: the same bytes at every SIMD level. */
static double row_sigma2(const float *x, int64_t n) { /* in double: no overflow at 1e18 */
    double s = 0;
    for (int64_t j = 0; j < n; j++) s += (double)x[j] * x[j];
    return s / (double)n;
}
static inline void best_weights(const float *x, const float *qw, double sigma2, int n, double *w) {
    for (int j = 0; j < n; j++) w[j] = qw ? (double)qw[j] * sqrt(sigma2 + (double)x[j] * x[j]) : 1.0;
}
static inline float fp16_round(float d) { return IQF_FP16_TO_FP32(IQF_FP32_TO_FP16(d)); }

/* Levels lo..hi times dh (dh as decoded): nearest level per value, codes c = level - lo, and the
 * weighted squared error. */
static double lvl_err(const float *x, const double *w, int n, float dh, int lo, int hi, uint8_t *c) {
    double e = 0;
    const double idh = dh != 0.0f ? 1.0 / dh : 0.0;
    for (int j = 0; j < n; j++) {
        int q = 0;
        if (dh != 0.0f) {
            const double v = (double)x[j] * idh;
            /* clamped first: v - lo + 0.5 > 0, so truncation is floor */
            q = v <= lo ? lo : v >= hi ? hi : (int)(v - lo + 0.5) + lo;
        }
        c[j] = (uint8_t)(q - lo);
        const double r = (double)x[j] - (double)((float)q * dh);
        e += w[j] * r * r;
    }
    return e;
}

/* The best fp16 scale of a block for levels lo..hi: the codes at amax * k / 16 (k = 5, 8, .. 20,
 * both signs where the levels are asymmetric), each refit by weighted least squares, and the
 * largest finite fp16. cb/eb: the compat block's codes and error on entry (kept unless strictly
 * beaten), the best on return. Returns the scale. */
static float lvl_search(const float *x, const double *w, int n, int lo, int hi, float d0, uint8_t *cb, double *eb) {
    uint8_t c[QK_K];
    if (!isfinite(fp16_round(d0)) || !(*eb == *eb)) *eb = INFINITY; /* compat's scale overflows fp16 */
    float best_d = d0;
    float amax = 0;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    if (amax == 0.0f) return best_d;
    for (int sgn = 1; sgn >= (lo == -hi ? 1 : -1); sgn -= 2) {
        for (int k = 5; k <= 20; k += 3) {
            const float dc = sgn * amax * (float)k / 16.0f;
            lvl_err(x, w, n, dc, lo, hi, c); /* the codes at dc */
            /* refit on the codes: d = sum w x q / sum w q^2 */
            double sxq = 0, sqq = 0;
            for (int j = 0; j < n; j++) {
                const int q = c[j] + lo;
                sxq += w[j] * x[j] * q;
                sqq += w[j] * q * q;
            }
            /* the refit, and the largest finite fp16 scale (blocks beyond fp16's range) */
            const float cand[2] = { sqq > 0 ? fp16_round((float)(sxq / sqq)) : 0.0f, k == 5 ? sgn * 65504.0f : 0.0f };
            for (int t = 0; t < 2; t++) {
                if (!isfinite(cand[t]) || cand[t] == 0.0f) continue;
                const double e = lvl_err(x, w, n, cand[t], lo, hi, c);
                if (e < *eb) {
                    *eb = e;
                    best_d = cand[t];
                    memcpy(cb, c, (size_t)n);
                }
            }
        }
    }
    return best_d;
}

static void tq_best(int type, const float *x, void *vy, int64_t nb, const float *qw, double sigma2) {
    double w[QK_K];
    uint8_t t[QK_K];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        best_weights(x, qw ? qw + i * QK_K : NULL, sigma2, QK_K, w);
        const float d = tq_trits(x, t), dh = fp16_round(d);
        double e = 0;
        for (int j = 0; j < QK_K; j++) {
            const double r = (double)x[j] - (double)((float)(t[j] - 1) * dh);
            e += w[j] * r * r;
        }
        const float bd = lvl_search(x, w, QK_K, -1, 1, d, t, &e);
        if (type == IQF_TYPE_TQ1_0) tq1_pack(t, bd, (block_tq1_0 *)vy + i);
        else tq2_pack(t, bd, (block_tq2_0 *)vy + i);
    }
}

static void q2_0_best(const float *x, block_q2_0 *y, int64_t nb, const float *qw, double sigma2) {
    double w[QK2_0];
    uint8_t c[QK2_0];
    for (int64_t i = 0; i < nb; i++, x += QK2_0) {
        best_weights(x, qw ? qw + i * QK2_0 : NULL, sigma2, QK2_0, w);
        q2_0_row_ref(x, &y[i], 1); /* compat's block: its codes and error */
        const float dh = IQF_FP16_TO_FP32(y[i].d);
        double e = 0;
        for (int j = 0; j < QK2_0; j++) {
            c[j] = (y[i].qs[j / 4] >> (2 * (j % 4))) & 3;
            const double r = (double)x[j] - (double)((float)((int)c[j] - 1) * dh);
            e += w[j] * r * r;
        }
        const float bd = lvl_search(x, w, QK2_0, -1, 2, dh, c, &e);
        y[i].d = IQF_FP32_TO_FP16(bd);
        for (int b = 0; b < QK2_0 / 4; b++)
            y[i].qs[b] = (uint8_t)(c[4 * b] | c[4 * b + 1] << 2 | c[4 * b + 2] << 4 | c[4 * b + 3] << 6);
    }
}

/* Q1_0: for fixed signs the weighted least-squares scale is sum w|x| / sum w; candidates: its fp16
 * value and neighbours, after ggml's mean |x|. */
static void q1_0_best(const float *x, block_q1_0 *y, int64_t nb, const float *qw, double sigma2) {
    double w[QK1_0];
    for (int64_t i = 0; i < nb; i++, x += QK1_0) {
        best_weights(x, qw ? qw + i * QK1_0 : NULL, sigma2, QK1_0, w);
        q1_0_row_ref(x, &y[i], 1);
        double swa = 0, sw = 0;
        for (int j = 0; j < QK1_0; j++) {
            swa += w[j] * fabsf(x[j]);
            sw += w[j];
        }
        const iqf_half h0 = y[i].d;
        iqf_half best_h = h0;
        double best = INFINITY; /* compat's error, or inf where its scale overflows fp16 */
        for (int k = -1; k <= 3; k++) {
            iqf_half h = h0;
            if (k == 3) h = 0x7BFF; /* the largest finite fp16 */
            else if (k >= 0) {
                if (!(sw > 0)) continue;
                h = IQF_FP32_TO_FP16((float)(swa / sw));
                h = (iqf_half)(h + (k == 1 ? 1 : k == 2 ? -1 : 0)); /* the fp16 neighbours (positive h) */
            }
            const float dh = IQF_FP16_TO_FP32(h);
            if (!isfinite(dh) || dh < 0) continue;
            double e = 0;
            for (int j = 0; j < QK1_0; j++) {
                const double r = fabs((double)x[j]) - dh; /* x >= 0 -> +dh, else -dh (and |0 - (-dh)| = dh) */
                e += w[j] * r * r;
            }
            if (k < 0) best = e == e ? e : INFINITY;
            else if (e < best || (best == INFINITY && !isfinite(IQF_FP16_TO_FP32(best_h)))) {
                best = e;
                best_h = h;
            }
        }
        y[i].d = best_h;
    }
}

/* ---- row entry points ---- */
static void quantize_row_q1_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        q1_0_best(x, vy, n / QK1_0, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
#ifdef IQF_ARCH_X86
    if (ctx->simd == IQF_SIMD_AVX512) { q1_0_row_avx512(x, vy, n / QK1_0); return; }
    if (ctx->simd == IQF_SIMD_AVX2) { q1_0_row_avx2(x, vy, n / QK1_0); return; }
#endif
    if (ctx->simd == IQF_SIMD_NEON) { q1_0_row_neon(x, vy, n / QK1_0); return; }
    if (ctx->simd == IQF_SIMD_SCALAR) q1_0_row_ref(x, vy, n / QK1_0);
    else q1_0_row_fast(x, vy, n / QK1_0);
}
static void quantize_row_q2_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        q2_0_best(x, vy, n / QK2_0, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
#ifdef IQF_ARCH_X86
    if (ctx->simd == IQF_SIMD_AVX512) { q2_0_row_avx512(x, vy, n / QK2_0); return; }
    if (ctx->simd == IQF_SIMD_AVX2) { q2_0_row_avx2(x, vy, n / QK2_0); return; }
#endif
    if (ctx->simd == IQF_SIMD_NEON) { q2_0_row_neon(x, vy, n / QK2_0); return; }
    q2_0_row_ref(x, vy, n / QK2_0);
}
static void quantize_row_tq1_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        tq_best(IQF_TYPE_TQ1_0, x, vy, n / QK_K, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
#ifdef IQF_ARCH_X86
    if (ctx->simd == IQF_SIMD_AVX512) { tq1_0_row_avx512(x, vy, n / QK_K); return; }
    if (ctx->simd == IQF_SIMD_AVX2) { tq1_0_row_avx2(x, vy, n / QK_K); return; }
#endif
    if (ctx->simd == IQF_SIMD_NEON) { tq1_0_row_neon(x, vy, n / QK_K); return; }
    tq1_0_row_ref(x, vy, n / QK_K);
}
static void quantize_row_tq2_0(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    if (ctx->mode == IQF_MODE_BEST) {
        tq_best(IQF_TYPE_TQ2_0, x, vy, n / QK_K, qw, qw ? row_sigma2(x, n) : 0.0);
        return;
    }
#ifdef IQF_ARCH_X86
    if (ctx->simd == IQF_SIMD_AVX512) { tq2_0_row_avx512(x, vy, n / QK_K); return; }
    if (ctx->simd == IQF_SIMD_AVX2) { tq2_0_row_avx2(x, vy, n / QK_K); return; }
#endif
    if (ctx->simd == IQF_SIMD_NEON) { tq2_0_row_neon(x, vy, n / QK_K); return; }
    tq2_0_row_ref(x, vy, n / QK_K);
}

/* ---- decoders (ggml's) ---- */
static void dequantize_row_q1_0(const void *vx, float *y, int64_t n) {
    const block_q1_0 *x = vx;
    for (int64_t i = 0; i < n / QK1_0; i++, y += QK1_0) {
        const float d = IQF_FP16_TO_FP32(x[i].d), neg_d = -d;
        for (int j = 0; j < QK1_0; j++) y[j] = (x[i].qs[j / 8] >> (j % 8)) & 1 ? d : neg_d;
    }
}

static void dequantize_row_q2_0(const void *vx, float *y, int64_t n) {
    const block_q2_0 *x = vx;
    for (int64_t i = 0; i < n / QK2_0; i++, y += QK2_0) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < QK2_0; j++) y[j] = (float)((int)((x[i].qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

static void dequantize_row_tq1_0(const void *vx, float *y, int64_t n) {
    static const uint8_t pow3[6] = { 1, 3, 9, 27, 81, 243 };
    const block_tq1_0 *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < 48; j += (j < 32 ? 32 : 16)) {
            const int w = j < 32 ? 32 : 16;
            for (int k = 0; k < 5; k++)
                for (int m = 0; m < w; m++) {
                    const uint8_t q = (uint8_t)(x[i].qs[j + m] * pow3[k]);
                    *y++ = (float)((int16_t)(((uint16_t)q * 3) >> 8) - 1) * d;
                }
        }
        for (int k = 0; k < 4; k++)
            for (int j = 0; j < 4; j++) {
                const uint8_t q = (uint8_t)(x[i].qh[j] * pow3[k]);
                *y++ = (float)((int16_t)(((uint16_t)q * 3) >> 8) - 1) * d;
            }
    }
}

static void dequantize_row_tq2_0(const void *vx, float *y, int64_t n) {
    const block_tq2_0 *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < QK_K / 4; j += 32)
            for (int l = 0; l < 4; l++)
                for (int m = 0; m < 32; m++) *y++ = (float)(((x[i].qs[j + m] >> (2 * l)) & 3) - 1) * d;
    }
}

const iqf_codec iqf_codecs_lowbit[] = {
    { IQF_TYPE_TQ1_0, NULL, quantize_row_tq1_0, dequantize_row_tq1_0 },
    { IQF_TYPE_TQ2_0, NULL, quantize_row_tq2_0, dequantize_row_tq2_0 },
    { IQF_TYPE_Q1_0, NULL, quantize_row_q1_0, dequantize_row_q1_0 },
    { IQF_TYPE_Q2_0, NULL, quantize_row_q2_0, dequantize_row_q2_0 },
    { -1, NULL, NULL, NULL },
};
