/*
 * matmul.c - matrix products straight from quantized weights.
 *
 * Y = X W^T with X the activations (T rows of K floats) and W a weight matrix of any type the
 * codec registry decodes. The work is split over tiles of IQF_MM_TILE weight rows; a thread
 * decodes its tile once into a small float buffer (float32 weights are used in place) and
 * multiplies it with all T activation rows, so the decoding cost is shared by the whole batch and
 * no dequantized copy of the model ever exists. The inner kernel is AVX2/FMA or AVX-512 when
 * the CPU has them; at the NEON level (arm64; SSE on x86-64, a test level there) the scalar
 * reference's own four partial sums as the four lanes of a plain vector (vec_lanes.h's 4-lane
 * width), so that level gives the scalar path's bytes exactly.
 * The product is all it computes: statistics capture (imatrix sums, Hessians) is the forward
 * code's iqf_capture call beside each product (capture.c).
 */
#include "model.h"

#include "codec/codec.h"
#include "util/traits.h"
#include "util/arch.h"

#include <math.h>
#include <string.h>

/* The plain 4-lane width (GCC/clang vector extensions; NEON on arm64, no intrinsic header); its
 * short names (VF, vf_load ...) resolve through VL_SFX wherever used, so the macros stay defined. */
#define VL_W 4
#define VL_TGT
#define VL_SFX(name) name##_p4
#include "codec/vec_lanes.h"

/* ------------------------------------------------------------------------------------------ */
/* Decoding rows                                                                              */

#ifdef IQF_ARCH_X86
__attribute__((target("avx2,f16c"))) static void f16_to_f32_f16c(const uint8_t *src, float *dst,
                                                                  int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, 2);
        dst[i] = iqf_fp16_to_fp32(h);
    }
}
#endif

static void decode_rows(const iqf_weight *w, int64_t r0, int64_t nr, float *out, iqf_simd simd) {
    const uint8_t *src = w->data + (size_t)r0 * w->row_bytes;
    int64_t K = w->ncols;
    switch (w->type) {
    case IQF_TYPE_F32:
        memcpy(out, src, (size_t)(nr * K) * sizeof(float));
        return;
    case IQF_TYPE_F16:
#ifdef IQF_ARCH_X86
        if (IQF_SIMD_IS_X86(simd)) {
            f16_to_f32_f16c(src, out, nr * K);
            return;
        }
#else
        (void)simd;
#endif
        break;
    case IQF_TYPE_BF16:
        for (int64_t i = 0; i < nr * K; i++) {
            uint32_t u = (uint32_t)(src[2 * i] | (src[2 * i + 1] << 8)) << 16;
            memcpy(&out[i], &u, 4);
        }
        return;
    default:
        break;
    }
    const iqf_codec *c = iqf_codec_get(w->type);
    if (c->init) c->init(); /* lookup tables some decoders need (IQ1_S/IQ1_M grids); pthread_once */
    for (int64_t r = 0; r < nr; r++) c->dequantize_row(src + (size_t)r * w->row_bytes, out + r * K, K);
}

void iqf_weight_row(const iqf_weight *w, int64_t row, float *out) {
    decode_rows(w, row, 1, out, iqf_simd_detect());
}

/* ------------------------------------------------------------------------------------------ */
/* Kernels: Y[t*ldy + n] = dot(X[t*ldx ..], W[n*ldw ..]) for t < T, n < nr                     */

static float dot_scalar(const float *a, const float *b, int64_t n) {
    float s[4] = { 0, 0, 0, 0 };
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += a[i + j] * b[i + j];
    float r = (s[0] + s[1]) + (s[2] + s[3]);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

static void kern_scalar(const float *W, int64_t ldw, int nr, const float *X, int64_t ldx, int T,
                        float *Y, int64_t ldy, int64_t K) {
    for (int t = 0; t < T; t++)
        for (int n = 0; n < nr; n++) Y[(int64_t)t * ldy + n] = dot_scalar(X + t * ldx, W + n * ldw, K);
}

/* The NEON level: dot_scalar's partial sums s[0..3] are the lanes of one vector, added in the
 * same order (-ffp-contract=off: no fused multiply-add), then reduced as dot_scalar reduces them,
 * so every product below equals kern_scalar's bit for bit (test_model_kernels). */
static inline float hsum_p4(VF s) { return (s[0] + s[1]) + (s[2] + s[3]); }

static float dot_p4(const float *a, const float *b, int64_t n) {
    VF s = vf_splat(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) s += vf_load(a + i) * vf_load(b + i);
    float r = hsum_p4(s);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* 4 activation rows x 3 weight rows per step: 12 accumulators (16 of NEON's 32 registers). */
static void kern_p4(const float *W, int64_t ldw, int nr, const float *X, int64_t ldx, int T, float *Y,
                    int64_t ldy, int64_t K) {
    const int64_t K4 = K & ~(int64_t)3;
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        const float *xs[4] = { X + (int64_t)t * ldx, X + (int64_t)(t + 1) * ldx, X + (int64_t)(t + 2) * ldx,
                               X + (int64_t)(t + 3) * ldx };
        int n = 0;
        for (; n + 3 <= nr; n += 3) {
            const float *ws[3] = { W + n * ldw, W + (n + 1) * ldw, W + (n + 2) * ldw };
            VF acc[4][3];
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) acc[i][j] = vf_splat(0.0f);
            for (int64_t k = 0; k < K4; k += 4) {
                const VF v0 = vf_load(ws[0] + k), v1 = vf_load(ws[1] + k), v2 = vf_load(ws[2] + k);
                for (int i = 0; i < 4; i++) {
                    const VF u = vf_load(xs[i] + k);
                    acc[i][0] += u * v0;
                    acc[i][1] += u * v1;
                    acc[i][2] += u * v2;
                }
            }
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) {
                    float r = hsum_p4(acc[i][j]);
                    for (int64_t k = K4; k < K; k++) r += xs[i][k] * ws[j][k];
                    Y[(int64_t)(t + i) * ldy + n + j] = r;
                }
        }
        for (; n < nr; n++)
            for (int i = 0; i < 4; i++) Y[(int64_t)(t + i) * ldy + n] = dot_p4(xs[i], W + n * ldw, K);
    }
    for (; t < T; t++)
        for (int n = 0; n < nr; n++) Y[(int64_t)t * ldy + n] = dot_p4(X + (int64_t)t * ldx, W + n * ldw, K);
}

static void axpy_p4(float a, const float *x, float *y, int64_t n) {
    const VF va = vf_splat(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vf_store(y + i, vf_load(y + i) + va * vf_load(x + i));
    for (; i < n; i++) y[i] += a * x[i];
}

#ifdef IQF_ARCH_X86
__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sums 4 vectors into one __m128 of 4 horizontal sums. */
__attribute__((target("avx2,fma"))) static inline __m128 hsum4x256(__m256 a, __m256 b, __m256 c,
                                                                   __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    __m256 cd = _mm256_hadd_ps(c, d);
    __m256 abcd = _mm256_hadd_ps(ab, cd); /* a0123 b0123 c0123 d0123 | a4567 ... */
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b,
                                                          int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float r = hsum256(_mm256_add_ps(s0, s1));
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* 4 activation rows x 3 weight rows per step: 12 accumulators. */
__attribute__((target("avx2,fma"))) static void kern_avx2(const float *W, int64_t ldw, int nr,
                                                          const float *X, int64_t ldx, int T,
                                                          float *Y, int64_t ldy, int64_t K) {
    const int64_t K8 = K & ~(int64_t)7;
    int t = 0;
    for (; t + 4 <= T; t += 4) {
        const float *x0 = X + (int64_t)t * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
        int n = 0;
        for (; n + 3 <= nr; n += 3) {
            const float *w0 = W + n * ldw, *w1 = w0 + ldw, *w2 = w1 + ldw;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00,
                   a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
            for (int64_t k = 0; k < K8; k += 8) {
                __m256 v0 = _mm256_loadu_ps(w0 + k), v1 = _mm256_loadu_ps(w1 + k),
                       v2 = _mm256_loadu_ps(w2 + k);
                __m256 u = _mm256_loadu_ps(x0 + k);
                a00 = _mm256_fmadd_ps(u, v0, a00);
                a01 = _mm256_fmadd_ps(u, v1, a01);
                a02 = _mm256_fmadd_ps(u, v2, a02);
                u = _mm256_loadu_ps(x1 + k);
                a10 = _mm256_fmadd_ps(u, v0, a10);
                a11 = _mm256_fmadd_ps(u, v1, a11);
                a12 = _mm256_fmadd_ps(u, v2, a12);
                u = _mm256_loadu_ps(x2 + k);
                a20 = _mm256_fmadd_ps(u, v0, a20);
                a21 = _mm256_fmadd_ps(u, v1, a21);
                a22 = _mm256_fmadd_ps(u, v2, a22);
                u = _mm256_loadu_ps(x3 + k);
                a30 = _mm256_fmadd_ps(u, v0, a30);
                a31 = _mm256_fmadd_ps(u, v1, a31);
                a32 = _mm256_fmadd_ps(u, v2, a32);
            }
            float r[12];
            _mm_storeu_ps(r + 0, hsum4x256(a00, a01, a02, a10));
            _mm_storeu_ps(r + 4, hsum4x256(a11, a12, a20, a21));
            _mm_storeu_ps(r + 8, hsum4x256(a22, a30, a31, a32));
            if (K8 < K) {
                const float *xs[4] = { x0, x1, x2, x3 }, *ws[3] = { w0, w1, w2 };
                for (int i = 0; i < 4; i++)
                    for (int j = 0; j < 3; j++) {
                        float s = 0;
                        for (int64_t k = K8; k < K; k++) s += xs[i][k] * ws[j][k];
                        r[i * 3 + j] += s;
                    }
            }
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 3; j++) Y[(int64_t)(t + i) * ldy + n + j] = r[i * 3 + j];
        }
        for (; n < nr; n++) {
            const float *w0 = W + n * ldw;
            Y[(int64_t)t * ldy + n] = dot_avx2(x0, w0, K);
            Y[(int64_t)(t + 1) * ldy + n] = dot_avx2(x1, w0, K);
            Y[(int64_t)(t + 2) * ldy + n] = dot_avx2(x2, w0, K);
            Y[(int64_t)(t + 3) * ldy + n] = dot_avx2(x3, w0, K);
        }
    }
    for (; t < T; t++) {
        const float *x0 = X + (int64_t)t * ldx;
        for (int n = 0; n < nr; n++) Y[(int64_t)t * ldy + n] = dot_avx2(x0, W + n * ldw, K);
    }
}

#endif

float iqf_dot_f32(iqf_simd s, const float *a, const float *b, int64_t n) {
#ifdef IQF_ARCH_X86
    if (IQF_SIMD_IS_X86(s)) return dot_avx2(a, b, n);
#endif
    if (s == IQF_SIMD_NEON) return dot_p4(a, b, n);
    return dot_scalar(a, b, n);
}

#ifdef IQF_ARCH_X86
__attribute__((target("avx2,fma"))) static void axpy_avx2(float a, const float *x, float *y,
                                                          int64_t n) {
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
#endif

void iqf_axpy_f32(iqf_simd s, float a, const float *x, float *y, int64_t n) {
#ifdef IQF_ARCH_X86
    if (IQF_SIMD_IS_X86(s)) {
        axpy_avx2(a, x, y, n);
        return;
    }
#endif
    if (s == IQF_SIMD_NEON) {
        axpy_p4(a, x, y, n);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

/* ------------------------------------------------------------------------------------------ */
/* Activation rounding: ggml's CPU matmul converts the activations to the weight type's          */
/* vec_dot_type before the dot products; the float path rounds them the same way (x' = d * q)    */

int iqf_mm_act_type(int wtype) {
    const iqf_type_traits *tr = iqf_traits(wtype);
    return tr && tr->act_type != IQF_TYPE_F32 ? tr->act_type : -1;
}

/* Q8_0 / Q8_1 as ggml's x86 quantize_row_q8_0/q8_1 (AVX2 path): d = amax/127 stored as fp16,
 * q = round-half-even(x * (127/amax)). Q8_1's s = fp16(d * sum q) is returned in s (one per
 * 32) when s is not NULL. */
static void round_q8_0(const float *x, float *y, int64_t K, float *s) {
    for (int64_t b = 0; b + 32 <= K; b += 32) {
        float amax = 0;
        for (int j = 0; j < 32; j++) {
            const float a = fabsf(x[b + j]);
            amax = a > amax ? a : amax;
        }
        const float d = amax / 127.f;
        const float dh = iqf_fp16_to_fp32(iqf_fp32_to_fp16(d));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            int q = iqf_nearest_int(x[b + j] * id);
            q = q > 127 ? 127 : q < -128 ? -128 : q;
            sum += q;
            y[b + j] = dh * (float)q;
        }
        if (s) s[b / 32] = iqf_fp16_to_fp32(iqf_fp32_to_fp16(d * (float)sum));
    }
}

/* Q8_K as ggml's quantize_row_q8_K_ref (what x86 runs): scale -127/max of the largest
 * magnitude, d = 1/iscale as float. */
static void round_q8_K(const float *x, float *y, int64_t K) {
    for (int64_t b = 0; b + 256 <= K; b += 256) {
        const float *v = x + b;
        float amax = 0, mx = 0;
        for (int j = 0; j < 256; j++) {
            const float ax = fabsf(v[j]);
            if (ax > amax) { amax = ax; mx = v[j]; }
        }
        if (!amax) {
            for (int j = 0; j < 256; j++) y[b + j] = 0;
            continue;
        }
        const float iscale = -127.f / mx, d = 1 / iscale;
        for (int j = 0; j < 256; j++) {
            const int q = iqf_nearest_int(iscale * v[j]);
            y[b + j] = d * (float)(q < 127 ? q : 127);
        }
    }
}

void iqf_mm_round_act(int vtype, const float *x, float *y, int64_t K, float *s) {
    switch (vtype) {
    case IQF_TYPE_Q8_0: round_q8_0(x, y, K, NULL); break;
    case IQF_TYPE_Q8_1: round_q8_0(x, y, K, s); break;
    case IQF_TYPE_Q8_K: round_q8_K(x, y, K); break;
    case IQF_TYPE_F16:
        for (int64_t i = 0; i < K; i++) y[i] = iqf_fp16_to_fp32(iqf_fp32_to_fp16(x[i]));
        break;
    case IQF_TYPE_BF16:
        for (int64_t i = 0; i < K; i++) y[i] = iqf_bf16_to_fp32(iqf_fp32_to_bf16(x[i]));
        break;
    default:
        if (y != x) memcpy(y, x, (size_t)K * sizeof(float));
        break;
    }
}

/* ------------------------------------------------------------------------------------------ */

typedef struct mmjob {
    iqf_context *c;
    const iqf_weight *w;
    const float *x;
    int64_t ldx;
    int T;
    float *y;
    int64_t ldy;
    bool int8;
} mmjob;

static void mm_range(void *arg, int64_t b, int64_t e, int tid) {
    const mmjob *j = arg;
    const iqf_weight *w = j->w;
    iqf_context *c = j->c;
    const int64_t K = w->ncols;
    if (j->int8) {
        uint8_t *buf = (uint8_t *)(c->wtile + (size_t)tid * IQF_MM_TILE * (size_t)c->max_ncols);
        for (int64_t r0 = b; r0 < e; r0 += IQF_MM_TILE) {
            int nr = (int)(e - r0 < IQF_MM_TILE ? e - r0 : IQF_MM_TILE);
            iqf_mm_int8_tile(w, r0, nr, buf, c->xq, c->xd, c->xs, j->T, j->y + r0, j->ldy, c->simd);
        }
        return;
    }
    for (int64_t r0 = b; r0 < e; r0 += IQF_MM_TILE) {
        int nr = (int)(e - r0 < IQF_MM_TILE ? e - r0 : IQF_MM_TILE);
        const float *W;
        if (w->type == IQF_TYPE_F32) {
            W = (const float *)(w->data + (size_t)r0 * w->row_bytes);
        } else {
            float *buf = c->wtile + (size_t)tid * IQF_MM_TILE * (size_t)c->max_ncols;
            decode_rows(w, r0, nr, buf, c->simd);
            W = buf;
        }
#ifdef IQF_ARCH_X86
        if (IQF_SIMD_IS_X86(c->simd))
            kern_avx2(W, K, nr, j->x, j->ldx, j->T, j->y + r0, j->ldy, K);
        else
#endif
        if (c->simd == IQF_SIMD_NEON)
            kern_p4(W, K, nr, j->x, j->ldx, j->T, j->y + r0, j->ldy, K);
        else
            kern_scalar(W, K, nr, j->x, j->ldx, j->T, j->y + r0, j->ldy, K);
    }
}

typedef struct qajob {
    const float *x;
    int64_t ldx, K;
    uint8_t *xq;
    float *xd;
    int32_t *xs;
} qajob;

/* Q8_K quantization of activation rows b..e (rows are independent). */
static void qa_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const qajob *q = arg;
    iqf_mm_quantize_act(q->x + b * q->ldx, q->ldx, (int)(e - b), q->K, q->xq + b * q->K,
                        q->xd + b * (q->K / 256), q->xs + b * (q->K / 32));
}

typedef struct rajob {
    const float *x;
    int64_t ldx, K;
    int vtype;
    float *xr;
} rajob;

/* Rounds activation rows b..e to the weight's vec_dot_type (rows are independent). */
static void ra_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const rajob *r = arg;
    for (int64_t t = b; t < e; t++) iqf_mm_round_act(r->vtype, r->x + t * r->ldx, r->xr + t * r->K, r->K, NULL);
}

void iqf_matmul(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T, float *y,
                int64_t ldy) {
    mmjob j = { c, w, x, ldx, T, y, ldy, false };
    if (c->xq && iqf_mm_int8_supported(w->type, c->simd)) {
        qajob q = { x, ldx, w->ncols, c->xq, c->xd, c->xs };
        iqf_pool_run(c->pool, T, 16, qa_range, &q);
        j.int8 = true;
    } else if (c->xr && iqf_mm_act_type(w->type) >= 0) {
        rajob r = { x, ldx, w->ncols, iqf_mm_act_type(w->type), c->xr };
        iqf_pool_run(c->pool, T, 16, ra_range, &r);
        j.x = c->xr;
        j.ldx = w->ncols;
    }
    iqf_pool_run(c->pool, w->nrows, IQF_MM_TILE, mm_range, &j);
}
