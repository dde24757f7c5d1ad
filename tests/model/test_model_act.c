/*
 * test_model_act.c - the engine's activation rounding (matmul.c): ggml's CPU matmul converts the
 * activations to the weight type's vec_dot_type before the dot products, and the float path
 * rounds them the same way (x' = d * q).
 *
 *  1. iqf_mm_round_act for Q8_0, Q8_1, Q8_K, F16 and BF16 against an independent float64
 *     recomputation of ggml's x86 quantize_row_q8_0 / quantize_row_q8_1 (AVX2 path: d = amax/127
 *     as fp16, q = round-half-even(x * 127/amax), Q8_1's s = fp16(d * sum q)) and
 *     quantize_row_q8_K_ref (iscale = -127/max, d = 1/iscale, q = min(127, nearest(iscale*x))),
 *     with fp16/bf16 rounding recomputed in double: bit-exact, on random data, an all-zero block,
 *     exact ties and huge/tiny scales.
 *  2. iqf_matmul for every weight type on the float path against a float64 product of the
 *     decoded weights and the independently rounded activations (within 1e-6 of the sum of
 *     |products|): checks the per-type wiring (iqf_mm_act_type) too.
 *  3. A random llama model whose matrices mix 14 weight types: logits for 37 tokens (decoded in two
 *     pieces) with 1 and 3 threads are bit-identical, on the default path (integer kernels where
 *     the CPU has them) and on the float path (IQF_SIMD_SCALAR).
 */
#include "iqforge.h"
#include "model/model.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Independent references (double precision). A float operation a op b is correctly rounded,
 * and for + - * / of two floats the double result rounded to float is the same value (53 >= 2*24+2),
 * so (float)((double)a op b) reproduces ggml's float arithmetic exactly. */

static double round_half_even(double v) { return nearbyint(v); } /* default mode: to nearest even */

/* v rounded to a binary format with `mant` explicit mantissa bits and minimum normal exponent
 * emin (fp16: 10, -14; bf16: 7, -126), nearest even, no overflow handling needed here. */
static double round_fmt(double v, int mant, int emin) {
    if (v == 0 || !isfinite(v)) return v;
    int e;
    frexp(fabs(v), &e); /* |v| = m 2^e, m in [0.5, 1) */
    e -= 1;             /* |v| = m' 2^e, m' in [1, 2) */
    if (e < emin) e = emin;
    const double quantum = ldexp(1.0, e - mant);
    const double r = round_half_even(v / quantum) * quantum;
    /* overflow: past the largest finite value (halfway to the next power of two) -> inf */
    const double big = ldexp(2.0, emin == -14 ? 15 : 127) * (1 - ldexp(1.0, -mant - 2));
    return fabs(r) >= big ? copysign(INFINITY, v) : r;
}
static float ref_fp16(double v) { return (float)round_fmt(v, 10, -14); }
static float ref_bf16(double v) { return (float)round_fmt(v, 7, -126); }

static void ref_q8_0(const float *x, float *y, int64_t K, float *s) {
    for (int64_t b = 0; b < K; b += 32) {
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs((double)x[b + j]));
        const float d = (float)(amax / 127.0);
        const double dh = ref_fp16(d);
        const float id = amax != 0 ? (float)(127.0 / amax) : 0.0f;
        long sum = 0;
        for (int j = 0; j < 32; j++) {
            double q = round_half_even((double)(float)((double)x[b + j] * id));
            q = fmin(127, fmax(-128, q)) + 0.0; /* an int8: no -0 */
            sum += (long)q;
            y[b + j] = (float)(dh * q);
        }
        if (s) s[b / 32] = ref_fp16((double)(float)((double)d * (double)sum));
    }
}

static void ref_q8_K(const float *x, float *y, int64_t K) {
    for (int64_t b = 0; b < K; b += 256) {
        double amax = 0, mx = 0;
        for (int j = 0; j < 256; j++)
            if (fabs((double)x[b + j]) > amax) {
                amax = fabs((double)x[b + j]);
                mx = x[b + j];
            }
        if (amax == 0) {
            for (int j = 0; j < 256; j++) y[b + j] = 0;
            continue;
        }
        const float iscale = (float)(-127.0 / mx), d = (float)(1.0 / iscale);
        for (int j = 0; j < 256; j++) {
            const double q = fmin(127, round_half_even((double)(float)((double)iscale * x[b + j]))) + 0.0;
            y[b + j] = (float)((double)d * q);
        }
    }
}

static void ref_round(int vt, const float *x, float *y, int64_t K, float *s) {
    switch (vt) {
    case IQF_TYPE_Q8_0: ref_q8_0(x, y, K, NULL); break;
    case IQF_TYPE_Q8_1: ref_q8_0(x, y, K, s); break;
    case IQF_TYPE_Q8_K: ref_q8_K(x, y, K); break;
    case IQF_TYPE_F16: for (int64_t i = 0; i < K; i++) y[i] = ref_fp16(x[i]); break;
    case IQF_TYPE_BF16: for (int64_t i = 0; i < K; i++) y[i] = ref_bf16(x[i]); break;
    default: memcpy(y, x, (size_t)K * sizeof(float)); break;
    }
}

/* Test rows: random normals with outliers, an all-zero block, exact ties, extreme scales. */
static void make_rows(float *x, int T, int64_t K, tu_rng *r) {
    for (int64_t i = 0; i < (int64_t)T * K; i++)
        x[i] = (float)(tu_normal(r) * (i % 11 == 0 ? 7 : 1));
    memset(x + K + 256, 0, 256 * sizeof(float)); /* row 1: a zero Q8_K block (8 zero Q8_0 blocks) */
    /* row 2, first 32: amax 127 -> id 1, so x*id = x exactly: ties k + 0.5 must go to even */
    float *t = x + 2 * K;
    t[0] = 127;
    for (int j = 1; j < 32; j++) t[j] = (float)(j % 2 ? (j / 2) + 0.5 : -((j / 2) + 0.5));
    /* row 2, 256..511: Q8_K with max -127 -> iscale 1: the same ties */
    t[256] = -127;
    for (int j = 1; j < 256; j++) t[256 + j] = (float)((j % 7) - 3) + 0.5f;
    /* row 3: tiny and huge blocks (fp16 subnormal d; bf16 range) */
    for (int j = 0; j < 256; j++) x[3 * K + j] *= 1e-6f;
    for (int j = 256; j < 512; j++) x[3 * K + j] *= 1e3f;
    x[3 * K + 300] = 7e4f; /* beyond fp16's range: inf, as ggml's conversion gives */
}

static void test_rounding(void) {
    enum { T = 6, K = 1024 };
    tu_rng r = { 7 };
    float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * K), *z = malloc(sizeof(float) * K);
    float s1[K / 32], s2[K / 32];
    make_rows(x, T, K, &r);
    const int vts[5] = { IQF_TYPE_Q8_0, IQF_TYPE_Q8_1, IQF_TYPE_Q8_K, IQF_TYPE_F16, IQF_TYPE_BF16 };
    for (int v = 0; v < 5; v++) {
        int bad = 0, changed = 0;
        for (int t = 0; t < T; t++) {
            const float *xr = x + (int64_t)t * K;
            iqf_mm_round_act(vts[v], xr, y, K, s1);
            ref_round(vts[v], xr, z, K, s2);
            for (int k = 0; k < K; k++) {
                if (memcmp(&y[k], &z[k], 4)) {
                    if (!bad++) printf("%s row %d col %d: %.9g vs reference %.9g (x %.9g)\n", iqf_type_get(vts[v])->name, t, k, y[k], z[k], xr[k]);
                }
                changed += y[k] != xr[k];
            }
            if (vts[v] == IQF_TYPE_Q8_1)
                for (int b = 0; b < K / 32; b++) bad += memcmp(&s1[b], &s2[b], 4) != 0;
        }
        printf("%s: %d of %d values differ from the float64 reference (%d rounded away from x)\n",
               iqf_type_get(vts[v])->name, bad, T * K, changed);
        CHECK(bad == 0 && changed > T * K / 2, "%s rounding", iqf_type_get(vts[v])->name);
    }
    /* the ties of row 2 went to even (round-half-even, not roundf) */
    iqf_mm_round_act(IQF_TYPE_Q8_0, x + 2 * K, y, K, NULL);
    CHECK(y[1] == 0 && y[2] == -2 && y[3] == 2 && y[4] == -2 && y[5] == 2, "Q8_0 ties to even: %g %g %g %g %g", y[1], y[2], y[3], y[4], y[5]);
    /* in place (y == x) gives the same */
    memcpy(y, x, sizeof(float) * K);
    iqf_mm_round_act(IQF_TYPE_Q8_K, y, y, K, NULL);
    ref_round(IQF_TYPE_Q8_K, x, z, K, NULL);
    CHECK(!memcmp(y, z, sizeof(float) * K), "in-place rounding");
    /* the vec_dot_type table (ggml 0.25.1's type traits) */
    CHECK(iqf_mm_act_type(IQF_TYPE_F32) < 0 && iqf_mm_act_type(IQF_TYPE_Q4_0) == IQF_TYPE_Q8_0 &&
              iqf_mm_act_type(IQF_TYPE_IQ4_NL) == IQF_TYPE_Q8_0 && iqf_mm_act_type(IQF_TYPE_Q5_1) == IQF_TYPE_Q8_1 &&
              iqf_mm_act_type(IQF_TYPE_Q6_K) == IQF_TYPE_Q8_K && iqf_mm_act_type(IQF_TYPE_IQ1_M) == IQF_TYPE_Q8_K &&
              iqf_mm_act_type(IQF_TYPE_IQ4_XS) == IQF_TYPE_Q8_K && iqf_mm_act_type(IQF_TYPE_F16) == IQF_TYPE_F16 &&
              iqf_mm_act_type(IQF_TYPE_BF16) == IQF_TYPE_BF16,
          "vec_dot_type table");
    free(x);
    free(y);
    free(z);
}

/* ------------------------------------------------------------------------------------------- */

static const int all_types[] = { IQF_TYPE_F32,     IQF_TYPE_F16,    IQF_TYPE_BF16,   IQF_TYPE_Q4_0,
                                 IQF_TYPE_Q4_1,    IQF_TYPE_Q5_0,   IQF_TYPE_Q5_1,   IQF_TYPE_Q8_0,
                                 IQF_TYPE_Q2_K,    IQF_TYPE_Q3_K,   IQF_TYPE_Q4_K,   IQF_TYPE_Q5_K,
                                 IQF_TYPE_Q6_K,    IQF_TYPE_IQ2_XXS, IQF_TYPE_IQ2_XS, IQF_TYPE_IQ2_S,
                                 IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S,  IQF_TYPE_IQ1_S,  IQF_TYPE_IQ1_M,
                                 IQF_TYPE_IQ4_NL,  IQF_TYPE_IQ4_XS };
#define N_TYPES ((int)(sizeof all_types / sizeof all_types[0]))

static void test_matmul(void) {
    enum { N = 41, K = 512, T = 9 };
    tu_rng r = { 11 };
    float *w = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
    float *x = malloc(sizeof(float) * T * K), *xr = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
    float *im = malloc(sizeof(float) * K);
    for (int i = 0; i < N * K; i++) w[i] = (float)tu_normal(&r);
    for (int i = 0; i < K; i++) im[i] = (float)(0.5 + tu_uniform(&r));
    make_rows(x, T, K, &r);
    x[3 * K + 300] = 1e3f; /* finite in fp16 here */
    iqf_context c;
    memset(&c, 0, sizeof c);
    c.pool = iqf_pool_new(2);
    c.simd = iqf_simd_detect();
    c.max_ncols = K;
    c.max_batch = T;
    c.wtile = malloc(sizeof(float) * (size_t)iqf_pool_size(c.pool) * IQF_MM_TILE * K);
    c.xr = malloc(sizeof(float) * T * K); /* c.xq NULL: the float path for every type */
    for (int ti = 0; ti < N_TYPES; ti++) {
        const int type = all_types[ti];
        if (!iqf_can_encode(type) || !iqf_can_decode(type)) continue;
        const size_t rb = iqf_row_size(type, K);
        uint8_t *q = malloc(rb * N);
        char err[256];
        CHECK(iqf_quantize(type, w, q, N, K, im, NULL, err, sizeof err) == IQF_OK, "quantize %s: %s", iqf_type_get(type)->name, err);
        CHECK(iqf_dequantize(type, q, wd, N, K, 1, err, sizeof err) == IQF_OK, "dequantize");
        iqf_weight wt;
        memset(&wt, 0, sizeof wt);
        wt.id = -1;
        wt.type = type;
        wt.ncols = K;
        wt.nrows = N;
        wt.row_bytes = rb;
        wt.data = q;
        iqf_matmul(&c, &wt, x, K, T, y, N);
        const int vt = iqf_mm_act_type(type);
        for (int t = 0; t < T; t++) ref_round(vt, x + t * K, xr + t * K, K, NULL);
        double worst = 0, worst_raw = 0;
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) {
                double ref = 0, raw = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    ref += (double)wd[n * K + k] * xr[t * K + k];
                    raw += (double)wd[n * K + k] * x[t * K + k];
                    mag += fabs((double)wd[n * K + k] * xr[t * K + k]);
                }
                worst = fmax(worst, fabs(y[t * N + n] - ref) / (mag + 1e-30));
                worst_raw = fmax(worst_raw, fabs(y[t * N + n] - raw) / (mag + 1e-30));
            }
        printf("%-8s (activations as %-4s): worst error %.2g of the sum of |products| (%.2g against unrounded activations)\n",
               iqf_type_get(type)->name, vt >= 0 ? iqf_type_get(vt)->name : "f32", worst, worst_raw);
        CHECK(worst < 1e-6, "%s matmul error %g", iqf_type_get(type)->name, worst);
        /* the rounding is really applied: against raw activations the error is the rounding's */
        if (vt >= 0) CHECK(worst_raw > 10 * worst || worst_raw > 1e-5, "%s: no rounding visible", iqf_type_get(type)->name);
        free(q);
    }
    iqf_pool_free(c.pool);
    free(c.wtile);
    free(c.xr);
    free(w); free(wd); free(x); free(xr); free(y); free(im);
}

/* ------------------------------------------------------------------------------------------- */
/* testutil's small llama whose matrices take types from all_types in turn (the quantized ones
 * first), token_embd Q4_K, output Q6_K, encoded with an importance matrix of ones. */
static bool write_mixed_model(const char *path) {
    const tu_small_llama spec = { IQF_TYPE_Q4_K, IQF_TYPE_Q6_K, all_types, N_TYPES, 3, true };
    return tu_write_small_llama(path, &spec);
}

static bool logits(const iqf_model *m, int threads, iqf_simd simd, const int32_t *toks, int n, float *out) {
    char err[512];
    iqf_context *c = NULL;
    if (tu_context_simd(m, n, threads, simd, &c, err, sizeof err) != IQF_OK) return false;
    /* in two pieces, so the KV cache path is exercised too */
    bool ok = iqf_decode(c, toks, 20, 0, 0, out, err, sizeof err) == IQF_OK &&
              iqf_decode(c, toks + 20, n - 20, 20, 0, out + 20 * m->info.n_vocab, err, sizeof err) == IQF_OK;
    iqf_context_free(c);
    return ok;
}

static void test_threads(void) {
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/iqf_test_act_%d.gguf", (int)getpid());
    CHECK(write_mixed_model(path), "write model");
    iqf_model *m = NULL;
    CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_OK, "%s", err);
    remove(path);
    if (!m) return;
    enum { N = 37 };
    const int V = m->info.n_vocab;
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (i * 37 + 1) % V;
    float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
    double mx = 0;
    for (int pass = 0; pass < 2; pass++) { /* pass 1: the float path for every type */
        const iqf_simd simd = pass ? IQF_SIMD_SCALAR : IQF_SIMD_AUTO;
        CHECK(logits(m, 1, simd, toks, N, a), "1 thread");
        CHECK(logits(m, 3, simd, toks, N, b), "3 threads");
        size_t diff = 0;
        for (int i = 0; i < N * V; i++) {
            diff += memcmp(&a[i], &b[i], 4) != 0;
            mx = fmax(mx, fabs(a[i]));
        }
        printf("mixed-type model (%s): %zu of %d logits differ between 1 and 3 threads (max |logit| %.2f)\n",
               pass ? "float path" : "default path", diff, N * V, mx);
        CHECK(diff == 0 && mx > 0.1, "logits depend on the thread count");
    }
    free(a);
    free(b);
    iqf_model_free(m);
}

int main(void) {
    test_rounding();
    test_matmul();
    test_threads();
    return test_finish("test_model_act");
}
