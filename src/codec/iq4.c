/*
 * iq4.c - IQ4_NL (32 weights, 18 bytes) and IQ4_XS (256 weights, 136 bytes): 4-bit indices into
 * the non-linear 16-entry table kvalues_iq4nl, with a fp16 scale per 32 (IQ4_NL) or a fp16
 * super-block scale and 6-bit sub-block scales (IQ4_XS).
 *
 * Compat encoder: ggml 0.25.1 quantize_row_iq4_nl_impl (ggml-quants.c), ntry = 7, reproduced bit
 * for bit. Per 32-weight sub-block it evaluates 16 candidate scales (the initial -max/-127 one and
 * (itry - 127)/max for itry = -7..7); each candidate rounds every weight to the nearest table
 * value and accumulates sumqx = Σ w*q*x, sumq2 = Σ w*q*q sequentially over the 32 weights.
 * The SIMD paths put the 16 candidates in 16 float lanes (AVX-512: one register, AVX2: two), so
 * every lane performs exactly the reference's per-candidate operation order. The candidate
 * selection, which is order dependent, stays scalar.
 *
 * Nearest table value: ggml's best_index_int8 is a binary search ending with
 * `x - v[m-1] < v[m] - x ? m-1 : m`. Its result equals the number of k in 1..15 with
 * !(fl(x - v[k-1]) < fl(v[k] - x)), a condition that is monotone in x, so it is exactly
 * `x >= t_k` for the smallest float t_k that satisfies it. init() finds the 15 t_k by bisection
 * over float bit patterns. AVX2 counts thresholds with a 4-step branch-free binary search; the
 * scalar and AVX-512 candidate loops use 32 buckets of width 8 (at most one threshold each, none
 * near an edge) and compare against that one threshold. NaN counts as above every threshold, as
 * in the binary search.
 *
 * Also vectorised: weights/max/inverse scales per sub-block, and the sequential sigma2 sums of 8
 * super-blocks at once (one chain per lane, iqf_iq4_sumsq, shared with iq1.c).
 */
#include "best_scale.h"
#include "codec.h"
#include "util/fma.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>

#define QK4_NL 32

/* 4.25 bpw: fp16 super-block scale, 8 6-bit sub-block scales (low 4 bits in scales_l nibbles,
 * high 2 bits in scales_h), 256 4-bit indices laid out per 32 as in IQ4_NL. */

/* kvalues_iq4nl (MIT, ggml authors); declared in blocks.h. */
const int8_t iqf_kvalues_iq4nl[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113 };

#define IQ4_NTRY 7
#define IQ4_NCAND 16 /* 1 initial + 2*IQ4_NTRY+1 */
#define GROUP_MAX_EPS 1e-15f

/* ---------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------- */
static float kv_f[16];     /* kvalues as float */
static float kthresh[16];  /* kthresh[k] (k=1..15): smallest float x with index(x) >= k */
/* Buckets of width 8: bucket b = trunc(clamp(al/8 + BUCKET_BIAS, 0, 31)) covers
 * [8*(b - BUCKET_BIAS), 8*(b + 1 - BUCKET_BIAS)); thr = its threshold or NaN if none, base = the
 * index at its bottom, qlo/qhi = the table values below/above its threshold. */
#define BUCKET_BIAS 15.84375f /* 16 - 1.25/8: edges at 1.25 + 8k, away from every threshold */
static float bucket_thr[32], bucket_qlo[32], bucket_qhi[32];
static int32_t bucket_base[32];
static bool bucket_ok;     /* the bucket tables passed their self-check (else: binary search) */
static iqf_best_grid16 iq4_grid; /* kthresh and kv_f for the best-mode kernels (best_scale.c) */
static float cand_num[16]; /* numerators of the candidates' inverse scales: lane c = c-8-127 */
static pthread_once_t iq4_once = PTHREAD_ONCE_INIT;

/* The reference's nearest-value search (best_index_int8 with n = 16). */
static inline int best_index_iq4(float x) {
    const int8_t *val = iqf_kvalues_iq4nl;
    if (x <= val[0]) return 0;
    if (x >= val[15]) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        int mav = (ml + mu) / 2;
        if (x < val[mav]) mu = mav;
        else ml = mav;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* Monotone float order on bit patterns (for bisection). */
static inline int32_t f2ord(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int32_t)(INT32_MIN - (int64_t)i) : i; /* -0 and +0 map to 0 */
}
static inline float ord2f(int32_t o) {
    int32_t i = o < 0 ? (int32_t)((int64_t)INT32_MIN - o) : o;
    float f;
    memcpy(&f, &i, 4);
    return f;
}

static void iq4_build(void) {
    for (int k = 0; k < 16; k++) kv_f[k] = (float)iqf_kvalues_iq4nl[k];
    kthresh[0] = -INFINITY;
    for (int k = 1; k < 16; k++) {
        /* Bisection in the ordered-integer domain between v[k-1] (index k-1) and v[k]
         * (index k): find the smallest float with best_index >= k. */
        int64_t lo = f2ord(kv_f[k - 1]), hi = f2ord(kv_f[k]);
        while (hi - lo > 1) {
            int32_t mid = (int32_t)((lo + hi) >> 1);
            if (best_index_iq4(ord2f(mid)) >= k) hi = mid;
            else lo = mid;
        }
        kthresh[k] = ord2f((int32_t)hi);
    }
    for (int c = 0; c < 16; c++) cand_num[c] = (float)(c - 8 + iqf_kvalues_iq4nl[0]);
    for (int k = 0; k < 16; k++) {
        iq4_grid.thr[k] = kthresh[k];
        iq4_grid.v[k] = kv_f[k];
    }
    /* Buckets; self-check: one threshold at most per bucket, at least 0.5 from both edges. */
    bool ok = true;
    for (int b = 0; b < 32; b++) {
        double lo = 8.0 * (b - (double)BUCKET_BIAS), hi = lo + 8.0;
        int base = best_index_iq4((float)lo), nth = 0;
        bucket_base[b] = base;
        bucket_thr[b] = NAN;
        bucket_qlo[b] = bucket_qhi[b] = kv_f[base];
        for (int k = 1; k < 16; k++) {
            if (kthresh[k] >= lo - 0.5 && kthresh[k] < hi + 0.5) {
                nth++;
                if (kthresh[k] < lo + 0.5 || kthresh[k] >= hi - 0.5 || k != base + 1) ok = false;
                bucket_thr[b] = kthresh[k];
                bucket_qhi[b] = kv_f[k];
            }
        }
        if (nth > 1) ok = false;
    }
    /* The clamped end buckets must cover everything beyond them. */
    if (bucket_base[0] != 0 || !isnan(bucket_thr[0]) || bucket_base[31] != 15 || !isnan(bucket_thr[31]))
        ok = false;
    bucket_ok = ok;
}

static void iq4_init(void) { pthread_once(&iq4_once, iq4_build); }

/* ---------------------------------------------------------------------------------------------
 * Decoders
 * ------------------------------------------------------------------------------------------- */
static void dequantize_row_iq4_nl(const void *vx, float *y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t i = 0; i < n / QK4_NL; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            y[j] = d * iqf_kvalues_iq4nl[x[i].qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * iqf_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
        y += QK4_NL;
    }
}

static void dequantize_row_iq4_xs(const void *vx, float *y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        const uint8_t *qs = x[i].qs;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) |
                           (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * iqf_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * iqf_kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Encoder kernels. All levels share one contract, so they are interchangeable:
 *
 *  sumsq(x, stride, len, count, out): out[b] = Σ_j x[b*stride+j]^2 summed sequentially in j
 *    (the reference's sigma2 before scaling), for b < count.
 *  prep(xb, qw, sigma2, w, &max): the 32 weights (qw*sqrt(sigma2+x^2), or x^2 when qw is NULL);
 *    returns amax = max|x| and sets max to the first x with |x| == amax.
 *  cand_sums(xb, w, max, sqx, sq2): for the 16 candidates (c = 0: id = 1/(-max/-127);
 *    c = 1..15: id = (c-8-127)/max), the reference's sequential sums over the 32 weights:
 *    l = index(id*x), q = v[l], sqx += (w*q)*x, sq2 += (w*q)*q.
 *  indices(x, n, id, L): L[j] = index(id*x[j]) for n values (n a multiple of 32).
 * ------------------------------------------------------------------------------------------- */
typedef struct iq4_kernels {
    void (*sumsq)(const float *x, int stride, int len, int count, float *out);
    float (*prep)(const float *xb, const float *qw, float sigma2, float *w, float *max);
    void (*cand_sums)(const float *xb, const float *w, float max, float *sqx, float *sq2);
    void (*indices)(const float *x, int n, float id, uint8_t *L);
} iq4_kernels;

static void cand_ids(float max, float *id) {
    float d0 = -max / iqf_kvalues_iq4nl[0];
    id[0] = 1 / d0;
    for (int itry = -IQ4_NTRY; itry <= IQ4_NTRY; ++itry)
        id[itry + IQ4_NTRY + 1] = (itry + iqf_kvalues_iq4nl[0]) / max;
}

static void sumsq_scalar(const float *x, int stride, int len, int count, float *out) {
    for (int b = 0; b < count; b++) {
        float s = 0;
        for (int j = 0; j < len; j++) s += x[b * stride + j] * x[b * stride + j]; /* unfused on arm64 too (fma.h) */
        out[b] = s;
    }
}

static float prep_scalar(const float *xb, const float *qw, float sigma2, float *w, float *maxv) {
    if (qw) {
        for (int j = 0; j < 32; ++j) w[j] = qw[j] * sqrtf(IQF_FMA_ARM(xb[j], xb[j], sigma2));
    } else {
        for (int j = 0; j < 32; ++j) w[j] = xb[j] * xb[j];
    }
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j) {
        float ax = fabsf(xb[j]);
        if (ax > amax) {
            amax = ax;
            max = xb[j];
        }
    }
    *maxv = max;
    return amax;
}

static void cand_sums_scalar(const float *xb, const float *w, float max, float *sqx, float *sq2) {
    float id[IQ4_NCAND];
    cand_ids(max, id);
    for (int c = 0; c < IQ4_NCAND; c++) {
        float sumqx = 0, sumq2 = 0;
        const float idc = id[c];
        for (int j = 0; j < 32; j++) {
            float al = idc * xb[j];
            float q;
            if (bucket_ok) { /* branch-free bucket lookup (al is finite here) */
                float f = al * 0.125f + BUCKET_BIAS;
                f = f < 0.f ? 0.f : f > 31.f ? 31.f : f;
                int b = (int)f;
                q = al >= bucket_thr[b] ? bucket_qhi[b] : bucket_qlo[b];
            } else {
                q = kv_f[best_index_iq4(al)];
            }
            float wq = w[j] * q;
            sumqx = IQF_FMA_ARM(wq, xb[j], sumqx);
            sumq2 = IQF_FMA_ARM(wq, q, sumq2);
        }
        sqx[c] = sumqx;
        sq2[c] = sumq2;
    }
}

static void indices_scalar(const float *x, int n, float id, uint8_t *L) {
    for (int j = 0; j < n; j++) L[j] = (uint8_t)best_index_iq4(id * x[j]);
}

#ifdef IQF_ARCH_X86
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define AVX2_TARGET __attribute__((target("avx2,fma")))

/* ---- AVX2 ---- */

/* sigma2 of 8 super-blocks at once: 8x8 transposes, one sequential chain per lane. */
AVX2_TARGET static void sumsq8_avx2(const float *x, int stride, int len, float *out) {
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < len; j += 8) {
        __m256 r[8], t[8], s[8];
        for (int b = 0; b < 8; b++) r[b] = _mm256_loadu_ps(x + (size_t)b * stride + j);
        for (int b = 0; b < 8; b += 2) {
            t[b] = _mm256_unpacklo_ps(r[b], r[b + 1]);
            t[b + 1] = _mm256_unpackhi_ps(r[b], r[b + 1]);
        }
        for (int b = 0; b < 8; b += 4) {
            s[b + 0] = _mm256_shuffle_ps(t[b], t[b + 2], 0x44);
            s[b + 1] = _mm256_shuffle_ps(t[b], t[b + 2], 0xEE);
            s[b + 2] = _mm256_shuffle_ps(t[b + 1], t[b + 3], 0x44);
            s[b + 3] = _mm256_shuffle_ps(t[b + 1], t[b + 3], 0xEE);
        }
        __m256 c[8];
        for (int k = 0; k < 4; k++) {
            c[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
            c[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
        }
        for (int k = 0; k < 8; k++) acc = _mm256_add_ps(acc, _mm256_mul_ps(c[k], c[k]));
    }
    _mm256_storeu_ps(out, acc);
}

AVX2_TARGET static void sumsq_avx2(const float *x, int stride, int len, int count, float *out) {
    int b = 0;
    if (len % 8 == 0)
        for (; b + 8 <= count; b += 8) sumsq8_avx2(x + (size_t)b * stride, stride, len, out + b);
    if (b < count) sumsq_scalar(x + (size_t)b * stride, stride, len, count - b, out + b);
}

AVX2_TARGET static float prep_avx2(const float *xb, const float *qw, float sigma2, float *w,
                                   float *maxv) {
    const __m256 vs2 = _mm256_set1_ps(sigma2);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 a[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        __m256 x = _mm256_loadu_ps(xb + 8 * k), x2 = _mm256_mul_ps(x, x);
        __m256 wk = qw ? _mm256_mul_ps(_mm256_loadu_ps(qw + 8 * k), _mm256_sqrt_ps(_mm256_add_ps(vs2, x2)))
                       : x2;
        _mm256_storeu_ps(w + 8 * k, wk);
        a[k] = _mm256_and_ps(x, absmask);
        m = _mm256_max_ps(m, a[k]);
    }
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
    float amax = _mm_cvtss_f32(h);
    const __m256 vam = _mm256_set1_ps(amax);
    uint32_t mask = 0;
    for (int k = 0; k < 4; k++)
        mask |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(a[k], vam, _CMP_EQ_OQ)) << (8 * k);
    *maxv = mask ? xb[__builtin_ctz(mask)] : 0.f;
    return amax;
}

/* 16-entry tables as two 8-entry permutes. */
AVX2_TARGET static inline __m256 perm16_avx2(__m256i idx, __m256 lo, __m256 hi) {
    __m256 a = _mm256_permutevar8x32_ps(lo, idx);
    __m256 b = _mm256_permutevar8x32_ps(hi, idx);
    __m256 sel = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)); /* bit 3 -> sign bit */
    return _mm256_blendv_ps(a, b, sel);
}

/* Index among the thresholds: 4-step branchless binary search (kthresh[0] = -inf). Unordered
 * (NaN) compares as "above", like the reference's binary search. */
AVX2_TARGET static inline __m256i idx16_avx2(__m256 x, __m256 thlo, __m256 thhi) {
    __m256i idx = _mm256_setzero_si256();
    for (int step = 8; step >= 1; step >>= 1) {
        __m256i cand = _mm256_add_epi32(idx, _mm256_set1_epi32(step));
        __m256 t = step == 8 ? _mm256_set1_ps(kthresh[8]) : perm16_avx2(cand, thlo, thhi);
        __m256i ge = _mm256_castps_si256(_mm256_cmp_ps(x, t, _CMP_NLT_UQ));
        idx = _mm256_blendv_epi8(idx, cand, ge);
    }
    return idx;
}

AVX2_TARGET static void cand_sums_avx2(const float *xb, const float *w, float max, float *sqx,
                                       float *sq2) {
    float id[IQ4_NCAND];
    cand_ids(max, id);
    const __m256 thlo = _mm256_loadu_ps(kthresh), thhi = _mm256_loadu_ps(kthresh + 8);
    const __m256 kvlo = _mm256_loadu_ps(kv_f), kvhi = _mm256_loadu_ps(kv_f + 8);
    const __m256 id0 = _mm256_loadu_ps(id), id1 = _mm256_loadu_ps(id + 8);
    __m256 sx0 = _mm256_setzero_ps(), s20 = _mm256_setzero_ps();
    __m256 sx1 = _mm256_setzero_ps(), s21 = _mm256_setzero_ps();
    for (int j = 0; j < 32; j++) {
        __m256 xj = _mm256_set1_ps(xb[j]), wj = _mm256_set1_ps(w[j]);
        __m256 q0 = perm16_avx2(idx16_avx2(_mm256_mul_ps(id0, xj), thlo, thhi), kvlo, kvhi);
        __m256 q1 = perm16_avx2(idx16_avx2(_mm256_mul_ps(id1, xj), thlo, thhi), kvlo, kvhi);
        __m256 wq0 = _mm256_mul_ps(wj, q0), wq1 = _mm256_mul_ps(wj, q1);
        sx0 = _mm256_add_ps(sx0, _mm256_mul_ps(wq0, xj));
        s20 = _mm256_add_ps(s20, _mm256_mul_ps(wq0, q0));
        sx1 = _mm256_add_ps(sx1, _mm256_mul_ps(wq1, xj));
        s21 = _mm256_add_ps(s21, _mm256_mul_ps(wq1, q1));
    }
    _mm256_storeu_ps(sqx, sx0);
    _mm256_storeu_ps(sqx + 8, sx1);
    _mm256_storeu_ps(sq2, s20);
    _mm256_storeu_ps(sq2 + 8, s21);
}

AVX2_TARGET static void indices_avx2(const float *x, int n, float id, uint8_t *L) {
    const __m256 thlo = _mm256_loadu_ps(kthresh), thhi = _mm256_loadu_ps(kthresh + 8);
    const __m256 vid = _mm256_set1_ps(id);
    for (int j = 0; j < n; j += 8) {
        __m256i idx = idx16_avx2(_mm256_mul_ps(vid, _mm256_loadu_ps(x + j)), thlo, thhi);
        __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(idx), _mm256_extracti128_si256(idx, 1));
        p = _mm_packus_epi16(p, p);
        _mm_storel_epi64((__m128i *)(L + j), p);
    }
}

/* ---- AVX-512 ---- */

AVX512_TARGET static float prep_avx512(const float *xb, const float *qw, float sigma2, float *w,
                                       float *maxv) {
    __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
    __m512 q0 = _mm512_mul_ps(x0, x0), q1 = _mm512_mul_ps(x1, x1);
    if (qw) {
        const __m512 vs2 = _mm512_set1_ps(sigma2);
        q0 = _mm512_mul_ps(_mm512_loadu_ps(qw), _mm512_sqrt_ps(_mm512_add_ps(vs2, q0)));
        q1 = _mm512_mul_ps(_mm512_loadu_ps(qw + 16), _mm512_sqrt_ps(_mm512_add_ps(vs2, q1)));
    }
    _mm512_storeu_ps(w, q0);
    _mm512_storeu_ps(w + 16, q1);
    __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
    float amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    const __m512 vam = _mm512_set1_ps(amax);
    uint32_t mask = (uint32_t)_mm512_cmp_ps_mask(a0, vam, _CMP_EQ_OQ) |
                    ((uint32_t)_mm512_cmp_ps_mask(a1, vam, _CMP_EQ_OQ) << 16);
    *maxv = mask ? xb[__builtin_ctz(mask)] : 0.f;
    return amax;
}

/* Nearest table value by buckets of width 8 over [-126.75, 129.25) (bucket_*; each holds at
 * most one threshold, and no threshold is within 0.5 of a bucket edge, so the approximate
 * bucket arithmetic cannot matter): q = al >= thr[b] ? qhi[b] : qlo[b]. Finite al only. */
AVX512_TARGET static inline __m512i bucket_avx512(__m512 al) {
    __m512 f = _mm512_add_ps(_mm512_mul_ps(al, _mm512_set1_ps(0.125f)), _mm512_set1_ps(BUCKET_BIAS));
    f = _mm512_min_ps(_mm512_max_ps(f, _mm512_setzero_ps()), _mm512_set1_ps(31.f));
    return _mm512_cvttps_epi32(f);
}

AVX512_TARGET static void cand_sums_avx512(const float *xb, const float *w, float max,
                                           float *sqx, float *sq2) {
    const __m512 thl = _mm512_loadu_ps(bucket_thr), thh = _mm512_loadu_ps(bucket_thr + 16);
    const __m512 qll = _mm512_loadu_ps(bucket_qlo), qlh = _mm512_loadu_ps(bucket_qlo + 16);
    const __m512 qhl = _mm512_loadu_ps(bucket_qhi), qhh = _mm512_loadu_ps(bucket_qhi + 16);
    /* The candidates' inverse scales: lane 0 = 1/(-max/-127), lane c = (c-8-127)/max. */
    __m512 vid = _mm512_div_ps(_mm512_loadu_ps(cand_num), _mm512_set1_ps(max));
    float d0 = -max / iqf_kvalues_iq4nl[0];
    vid = _mm512_mask_mov_ps(vid, 1, _mm512_set1_ps(1 / d0));
    __m512 sumqx = _mm512_setzero_ps(), sumq2 = _mm512_setzero_ps();
    for (int j = 0; j < 32; j++) {
        __m512 xj = _mm512_set1_ps(xb[j]);
        __m512 al = _mm512_mul_ps(vid, xj);
        __m512i b = bucket_avx512(al);
        __mmask16 ge = _mm512_cmp_ps_mask(al, _mm512_permutex2var_ps(thl, b, thh), _CMP_GE_OQ);
        __m512 q = _mm512_mask_blend_ps(ge, _mm512_permutex2var_ps(qll, b, qlh),
                                        _mm512_permutex2var_ps(qhl, b, qhh));
        __m512 wq = _mm512_mul_ps(_mm512_set1_ps(w[j]), q);
        sumqx = _mm512_add_ps(sumqx, _mm512_mul_ps(wq, xj));
        sumq2 = _mm512_add_ps(sumq2, _mm512_mul_ps(wq, q));
    }
    _mm512_storeu_ps(sqx, sumqx);
    _mm512_storeu_ps(sq2, sumq2);
}

AVX512_TARGET static void indices_avx512(const float *x, int n, float id, uint8_t *L) {
    const __m512 thl = _mm512_loadu_ps(bucket_thr), thh = _mm512_loadu_ps(bucket_thr + 16);
    const __m512i bl = _mm512_loadu_si512(bucket_base), bh = _mm512_loadu_si512(bucket_base + 16);
    const __m512 vid = _mm512_set1_ps(id);
    for (int j = 0; j < n; j += 16) {
        __m512 al = _mm512_mul_ps(vid, _mm512_loadu_ps(x + j));
        __m512i b = bucket_avx512(al);
        __mmask16 ge = _mm512_cmp_ps_mask(al, _mm512_permutex2var_ps(thl, b, thh), _CMP_GE_OQ);
        __m512i idx = _mm512_permutex2var_epi32(bl, b, bh);
        idx = _mm512_mask_add_epi32(idx, ge, idx, _mm512_set1_epi32(1));
        /* NaN (only from an infinite inverse scale times 0) goes to 15, as in the reference. */
        idx = _mm512_mask_mov_epi32(idx, _mm512_cmp_ps_mask(al, al, _CMP_UNORD_Q), _mm512_set1_epi32(15));
        _mm_storeu_si128((__m128i *)(L + j), _mm512_cvtepi32_epi8(idx));
    }
}
#endif

static iq4_kernels pick_kernels(const iqf_qctx *ctx) {
    iq4_kernels k = { sumsq_scalar, prep_scalar, cand_sums_scalar, indices_scalar };
#ifdef IQF_ARCH_X86
    if (IQF_SIMD_IS_X86(ctx->simd)) {
        k.sumsq = sumsq_avx2;
        k.prep = prep_avx2;
        k.cand_sums = cand_sums_avx2;
        k.indices = indices_avx2;
    }
    if (ctx->simd == IQF_SIMD_AVX512 && bucket_ok) {
        k.prep = prep_avx512;
        k.cand_sums = cand_sums_avx512;
        k.indices = indices_avx512;
    }
#else
    (void)ctx;
#endif
    return k;
}

/* Sequential Σx^2 of `count` runs of `len` values `stride` apart, in parallel lanes where the
 * SIMD level allows; shared with iq1.c (same bytes at every level). */
void iqf_iq4_sumsq(iqf_simd simd, const float *x, int stride, int len, int count, float *out);
void iqf_iq4_sumsq(iqf_simd simd, const float *x, int stride, int len, int count, float *out) {
#ifdef IQF_ARCH_X86
    if (IQF_SIMD_IS_X86(simd)) {
        sumsq_avx2(x, stride, len, count, out);
        return;
    }
#else
    (void)simd;
#endif
    sumsq_scalar(x, stride, len, count, out);
}

/* ---------------------------------------------------------------------------------------------
 * quantize_row_iq4_nl_impl (ntry = 7) for one super-block of `sbs` weights (32 or 256) made of
 * 32-weight sub-blocks. sumx2 is the sequential Σ x^2 of the super-block (only used with
 * quant_weights). Writes dh, q4 and, when sbs > 32, scales_h/scales_l.
 * ------------------------------------------------------------------------------------------- */
static void iq4_superblock(const iq4_kernels *K, int sbs, const float *x, float sumx2,
                           iqf_half *dh, uint8_t *q4, uint16_t *scales_h, uint8_t *scales_l,
                           const float *quant_weights) {
    float scales[QK_K / 32];
    float weight[32];
    uint8_t L[QK_K];
    const int nsub = sbs / 32;

    float sigma2 = sumx2 * (2.f / sbs);
    dh[0] = IQF_FP32_TO_FP16(0.f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < nsub; ++ib) {
        const float *xb = x + ib * 32;
        float max;
        float amax = K->prep(xb, quant_weights ? quant_weights + ib * 32 : NULL, sigma2, weight, &max);
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float sqx[IQ4_NCAND], sq2[IQ4_NCAND];
        K->cand_sums(xb, weight, max, sqx, sq2);
        float d = sq2[0] > 0 ? sqx[0] / sq2[0] : 0.f;
        float best = d * sqx[0];
        for (int c = 1; c < IQ4_NCAND; ++c) {
            if (sq2[c] > 0 && sqx[c] * sqx[c] > best * sq2[c]) {
                d = sqx[c] / sq2[c];
                best = d * sqx[c];
            }
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) {
            amax_scale = abs_d;
            max_scale = d;
        }
    }

    if (nsub > 1) {
        *scales_h = 0;
        float d = -max_scale / 32;
        dh[0] = IQF_FP32_TO_FP16(d);
        float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < nsub; ++ib) {
            int l = iqf_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.f;
            K->indices(x + ib * 32, 32, idl, L + ib * 32);
            l += 32;
            uint8_t l_l = l & 0xf, l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            *scales_h |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        dh[0] = IQF_FP32_TO_FP16(scales[0]);
        float id = scales[0] ? 1 / scales[0] : 0;
        K->indices(x, sbs, id, L);
    }

    for (int i = 0; i < nsub; ++i)
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
}

/* ---------------------------------------------------------------------------------------------
 * Best mode (IQF_MODE_BEST): one search in C; its two hot kernels (candidate sums, exact error
 * at a scale) are best_scale.c's grid kernels, one source compiled per SIMD level with identical
 * results, so every level writes the same bytes. Values are normalized by the block's max |x|. The objective is the weighted squared error of the block as the decoder reconstructs
 * it: every scale is the fp16-rounded d (IQ4_NL) or fp16 d times the 6-bit sub-block scale
 * (IQ4_XS), and the indices are re-chosen at that scale (for a fixed scale the nearest table
 * value is each weight's best index).
 *  - Per 32-weight sub-block: a denser set of candidate inverse scales than ggml's 16 (the max
 *    maps to -127 + t for t = -15..15 and to +113 + t for t = -12..12 in steps of 2), least
 *    squares per assignment, best sxq^2/sq2.
 *  - IQ4_NL: fp16 refinement: round d, re-choose the indices, re-solve, repeat; then walk the
 *    neighbouring fp16 values.
 *  - IQ4_XS: joint choice of the fp16 super-block scale and the eight 6-bit sub-block scales:
 *    for each candidate d (the largest sub-block scale mapped to -32 or to +31, and a few
 *    relative steps around both), every sub-block takes the best of three neighbouring integer
 *    scales by exact error; the d with the lowest total wins.
 * Weights: ggml's (qw*sqrt(sigma2 + x^2), or x^2 without an importance matrix).
 * ------------------------------------------------------------------------------------------- */
/* Best continuous scale of a sub-block, in the units of xa (0 if it is empty). */
static float iq4b_sub_scale(iqf_simd simd, const float *xa, const float *w) {
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(xa[j]) > amax) {
            amax = fabsf(xa[j]);
            max = xa[j];
        }
    if (amax < 1e-9f) return 0;
    float ids[64], sxq[64], sq2[64];
    int nc = 0;
    for (int t = -15; t <= 15; t++) ids[nc++] = (t + iqf_kvalues_iq4nl[0]) / max; /* max -> -127 + t */
    for (int t = -12; t <= 12; t += 2) ids[nc++] = (113 + t) / max;             /* max -> 113 + t */
    iqf_best_grid_cands(simd, &iq4_grid, xa, w, ids, nc, sxq, sq2);
    float best_sxq = 0, best_sq2 = 0;
    bool have = false;
    for (int c = 0; c < nc; c++) {
        if (sq2[c] > 0 && (!have || sxq[c] * sxq[c] * best_sq2 > best_sxq * best_sxq * sq2[c])) {
            best_sxq = sxq[c];
            best_sq2 = sq2[c];
            have = true;
        }
    }
    return have ? best_sxq / best_sq2 : 0;
}

static iqf_half iq4b_fp16_sat(double v) {
    if (v > 65504.0) return 0x7bff;
    if (v < -65504.0) return 0xfbff;
    return IQF_FP32_TO_FP16((float)v);
}

/* IQ4_NL: fp16 refinement of the sub-block's scale (sa in xa units; amax = the block's scale). */
static void iq4b_nl_block(iqf_simd simd, const float *xa, const float *w, float amax, block_iq4_nl *y) {
    const float ia = 1 / amax;
    uint8_t L[32], bL[32];
    const float s0 = iq4b_sub_scale(simd, xa, w);
    iqf_half h = iq4b_fp16_sat((double)s0 * amax), bh = 0;
    if ((h & 0x7fff) == 0 && s0 != 0) h = (iqf_half)(s0 < 0 ? 0x8001 : 0x0001); /* smallest subnormal */
    float be = iqf_best_grid_eval(simd, &iq4_grid, xa, w, 0, bL, NULL, NULL); /* d = 0 */
    for (int it = 0; it < 4; it++) {
        float sxq, sq2;
        const float e = iqf_best_grid_eval(simd, &iq4_grid, xa, w, IQF_FP16_TO_FP32(h) * ia, L, &sxq, &sq2);
        if (e < be) {
            be = e;
            bh = h;
            memcpy(bL, L, 32);
        } else if (it > 0) break;
        if (!(sq2 > 0)) break;
        const iqf_half nh = iq4b_fp16_sat((double)sxq / sq2 * amax);
        if (nh == h) break;
        h = nh;
    }
    for (int st = 0; st < 4 && bh != 0; st++) {
        bool moved = false;
        for (int dir = -1; dir <= 1; dir += 2) {
            int nm = (bh & 0x7fff) + dir;
            if (nm <= 0 || nm > 0x7bff) continue;
            const iqf_half nh = (iqf_half)((bh & 0x8000) | nm);
            const float e = iqf_best_grid_eval(simd, &iq4_grid, xa, w, IQF_FP16_TO_FP32(nh) * ia, L, NULL, NULL);
            if (e < be) {
                be = e;
                bh = nh;
                memcpy(bL, L, 32);
                moved = true;
            }
        }
        if (!moved) break;
    }
    y->d = bh;
    for (int j = 0; j < 16; ++j) y->qs[j] = (uint8_t)(bL[j] | (bL[16 + j] << 4));
}

/* IQ4_XS: total error of the super-block at fp16 scale h; writes the 6-bit scales (0..63). */
static float iq4b_xs_total(iqf_simd simd, const float *xa, const float *w, const float *scales,
                           iqf_half h, float ia, uint8_t *ls, uint8_t *L) {
    const float df = IQF_FP16_TO_FP32(h);
    const float id = df != 0 ? 1 / (df * ia) : 0;
    float tot = 0;
    uint8_t Lt[32];
    for (int ib = 0; ib < 8; ib++) {
        const float *xb = xa + 32 * ib, *wb = w + 32 * ib;
        int l0 = iqf_nearest_int(fmaxf(-40.f, fminf(40.f, id * scales[ib])));
        l0 = l0 < -31 ? -31 : l0 > 30 ? 30 : l0;
        float be = INFINITY;
        int bl = 0;
        for (int l = l0 - 1; l <= l0 + 1; l++) {
            /* the decoder's scale: d * (ls - 32) in float, then in xa units */
            const float e = iqf_best_grid_eval(simd, &iq4_grid, xb, wb, (df * (float)l) * ia, Lt, NULL, NULL);
            if (e < be) {
                be = e;
                bl = l;
                memcpy(L + 32 * ib, Lt, 32);
            }
        }
        ls[ib] = (uint8_t)(bl + 32);
        tot += be;
    }
    return tot;
}

static void iq4b_xs_block(iqf_simd simd, const float *xa, const float *w, float amax, block_iq4_xs *y) {
    const float ia = 1 / amax;
    float scales[8];
    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < 8; ib++) {
        scales[ib] = iq4b_sub_scale(simd, xa + 32 * ib, w + 32 * ib);
        if (fabsf(scales[ib]) > amax_scale) {
            amax_scale = fabsf(scales[ib]);
            max_scale = scales[ib];
        }
    }
    uint8_t ls[8], L[256], bls[8], bL[256];
    iqf_half bh = 0;
    float be = INFINITY;
    if (amax_scale > 0) {
        static const float rel[5] = { 1.0f, 0.985f, 1.015f, 0.97f, 1.03f };
        for (int side = 0; side < 2; side++) {
            const double d0 = (side ? max_scale / 31.0 : -max_scale / 32.0) * amax;
            for (int k = 0; k < 5; k++) {
                iqf_half h = iq4b_fp16_sat(d0 * rel[k]);
                /* below fp16's range: the smallest subnormals (k-th) with the sign of d0 */
                if ((h & 0x7fff) == 0) h = (iqf_half)((d0 < 0 ? 0x8000 : 0) | (k + 1));
                const float e = iq4b_xs_total(simd, xa, w, scales, h, ia, ls, L);
                if (e < be) {
                    be = e;
                    bh = h;
                    memcpy(bls, ls, 8);
                    memcpy(bL, L, 256);
                }
            }
        }
    }
    if (!(be < INFINITY)) { /* empty super-block: d = 0 decodes zeros */
        bh = 0;
        memset(bls, 32, 8);
        memset(bL, 8, 256);
    }
    y->d = bh;
    y->scales_h = 0;
    memset(y->scales_l, 0, sizeof y->scales_l);
    for (int ib = 0; ib < 8; ib++) {
        const int l = bls[ib];
        y->scales_l[ib / 2] |= (uint8_t)((l & 0xf) << 4 * (ib % 2));
        y->scales_h |= (uint16_t)((l >> 4) << 2 * ib);
    }
    for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 16; ++j) y->qs[16 * i + j] = (uint8_t)(bL[32 * i + j] | (bL[32 * i + 16 + j] << 4));
}

/* Weights (ggml's; without an importance matrix 1, i.e. plain squared error), normalized to a
 * max of 1 so that no sum overflows: NaN (0 * inf) counts 0; if the largest is infinite, the
 * infinite ones count 1 and the rest 0; all zero: all 1. */
static void iq4b_weights(const float *x, const float *qw, float sigma2, int n, float *w) {
    float mw = 0;
    for (int j = 0; j < n; j++) {
        w[j] = qw ? qw[j] * sqrtf(sigma2 + x[j] * x[j]) : 1.f;
        if (!(w[j] >= 0)) w[j] = 0;
        if (w[j] > mw) mw = w[j];
    }
    for (int j = 0; j < n; j++) w[j] = mw == 0 ? 1.f : isinf(mw) ? (isinf(w[j]) ? 1.f : 0.f) : w[j] / mw;
}

static void iq4_best_row(iqf_simd simd, const float *x, void *vy, int64_t n, const float *qw, bool xs) {
    const int sbs = xs ? QK_K : QK4_NL;
    float w[QK_K], xa[QK_K];
    for (int64_t i = 0; i < n / sbs; i++) {
        const float *xb = x + i * sbs;
        float sumx2 = 0, amax = 0;
        for (int j = 0; j < sbs; j++) {
            sumx2 += xb[j] * xb[j];
            amax = fmaxf(amax, fabsf(xb[j]));
        }
        iq4b_weights(xb, qw ? qw + i * sbs : NULL, sumx2 * (2.f / sbs), sbs, w);
        if (amax < 1e-10f) { /* below every non-zero fp16 scale's resolution: zeros */
            if (xs) {
                block_iq4_xs *y = (block_iq4_xs *)vy + i;
                memset(y, 0, sizeof *y);
                memset(y->qs, 0x88, sizeof y->qs);
            } else {
                block_iq4_nl *y = (block_iq4_nl *)vy + i;
                y->d = 0;
                memset(y->qs, 0x88, sizeof y->qs);
            }
            continue;
        }
        const float ia = 1 / amax;
        for (int j = 0; j < sbs; j++) xa[j] = xb[j] * ia;
        if (xs) iq4b_xs_block(simd, xa, w, amax, (block_iq4_xs *)vy + i);
        else iq4b_nl_block(simd, xa, w, amax, (block_iq4_nl *)vy + i);
    }
}

/* Row driver: super-blocks in groups of 8 so that their Σx^2 run in parallel lanes. */
static void iq4_row(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw,
                    bool xs) {
    if (ctx->mode == IQF_MODE_BEST) {
        iq4_best_row(ctx->simd, x, vy, n, qw, xs);
        return;
    }
    iq4_kernels K = pick_kernels(ctx);
    const int sbs = xs ? QK_K : QK4_NL;
    const int64_t nsb = n / sbs;
    float sumx2[8] = { 0 };
    for (int64_t i0 = 0; i0 < nsb; i0 += 8) {
        int cnt = nsb - i0 < 8 ? (int)(nsb - i0) : 8;
        if (qw) K.sumsq(x + i0 * sbs, sbs, sbs, cnt, sumx2);
        for (int k = 0; k < cnt; k++) {
            int64_t i = i0 + k;
            const float *q = qw ? qw + i * sbs : NULL;
            if (xs) {
                block_iq4_xs *y = (block_iq4_xs *)vy + i;
                iq4_superblock(&K, sbs, x + i * sbs, sumx2[k], &y->d, y->qs, &y->scales_h,
                               y->scales_l, q);
            } else {
                block_iq4_nl *y = (block_iq4_nl *)vy + i;
                iq4_superblock(&K, sbs, x + i * sbs, sumx2[k], &y->d, y->qs, NULL, NULL, q);
            }
        }
    }
}

static void quantize_row_iq4_nl(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                                const float *qw) {
    iq4_row(ctx, x, vy, n, qw, false);
}

static void quantize_row_iq4_xs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                                const float *qw) {
    iq4_row(ctx, x, vy, n, qw, true);
}

const iqf_codec iqf_codecs_iq4[] = {
    { IQF_TYPE_IQ4_NL, iq4_init, quantize_row_iq4_nl, dequantize_row_iq4_nl },
    { IQF_TYPE_IQ4_XS, iq4_init, quantize_row_iq4_xs, dequantize_row_iq4_xs },
    { -1, NULL, NULL, NULL },
};
