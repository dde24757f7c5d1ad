/*
 * test_model_dot_lowbit.c - the engine's products with weights in MXFP4, NVFP4, Q1_0, Q2_0,
 * TQ1_0 and TQ2_0 (src/model/matmul.c, float path): iqf_matmul against a float64 recomputation of
 * ggml 0.25.1's CPU semantics for these types - the activations quantized to the type's
 * vec_dot_type (Q8_0 for mxfp4/nvfp4/q1_0/q2_0, Q8_K for tq1_0/tq2_0, as ggml-cpu.c's
 * type_traits_cpu), then ggml-cpu/quants.c's vec_dot_*_generic: integer sums of the raw codes
 * times the int8 activations per block, times the weight and activation scales. The block bytes
 * are read here from ggml's layouts (ggml-common.h), not through our decoders. Agreement within
 * 1e-6 of the sum of |products| (float accumulation order), on rows with an all-zero block.
 * Then a small random llama whose matrices take the six types in turn (token_embd TQ2_0, output
 * NVFP4) loads and decodes: finite, non-trivial logits, bit-identical with 1 and 3 threads.
 */
#include "iqforge.h"
#include "model/model.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { N = 9, K = 1024, T = 5 };

static double half(const uint8_t *p) { return iqf_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8)); }

/* An activation row as ggml quantizes it: Q8_0 (x86 quantize_row_q8_0: d = fp16(amax/127),
 * q = round-half-even(x * 127/amax)) or Q8_K (quantize_row_q8_K_ref: iscale = -127/max,
 * q = min(127, nearest(iscale x)), d = 1/iscale). q[K]; d: one per 32 (Q8_0) or per 256 (Q8_K). */
static void act_q8_0(const float *x, int *q, double *d) {
    for (int b = 0; b < K / 32; b++) {
        double amax = 0;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs((double)x[32 * b + j]));
        d[b] = iqf_fp16_to_fp32(iqf_fp32_to_fp16((float)(amax / 127.0)));
        const float id = amax != 0 ? (float)(127.0 / amax) : 0.0f;
        for (int j = 0; j < 32; j++) {
            double v = nearbyint((double)(float)((double)x[32 * b + j] * id));
            q[32 * b + j] = (int)fmin(127, fmax(-128, v));
        }
    }
}
static void act_q8_K(const float *x, int *q, double *d) {
    for (int b = 0; b < K / 256; b++) {
        double amax = 0, mx = 0;
        for (int j = 0; j < 256; j++)
            if (fabs((double)x[256 * b + j]) > amax) { amax = fabs((double)x[256 * b + j]); mx = x[256 * b + j]; }
        if (amax == 0) {
            d[b] = 0;
            for (int j = 0; j < 256; j++) q[256 * b + j] = 0;
            continue;
        }
        const float iscale = (float)(-127.0 / mx);
        d[b] = (float)(1.0 / iscale);
        for (int j = 0; j < 256; j++)
            q[256 * b + j] = (int)fmin(127, nearbyint((double)(float)((double)iscale * x[256 * b + j])));
    }
}

static const int8_t kv_fp4[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

static double ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7F) return 0;
    const int e = (x >> 3) & 15, m = x & 7;
    return (e == 0 ? ldexp(m, -9) : ldexp(1 + m / 8.0, e - 7)) * 0.5;
}

/* ggml's vec_dot_<type>_q8_<0|K>_generic over one weight row (float64; also returns the sum of
 * |terms| for the tolerance). */
static double ref_dot(int type, const uint8_t *w, const int *q, const double *d, double *mag) {
    double s = 0;
    *mag = 0;
    switch (type) {
    case IQF_TYPE_MXFP4:
        for (int b = 0; b < K / 32; b++, w += 17) {
            const double dw = ldexp(1.0, w[0] - 128) * d[b];
            long si = 0, sa = 0;
            for (int j = 0; j < 16; j++) {
                si += q[32 * b + j] * kv_fp4[w[1 + j] & 15] + q[32 * b + j + 16] * kv_fp4[w[1 + j] >> 4];
                sa += labs((long)q[32 * b + j] * kv_fp4[w[1 + j] & 15]) + labs((long)q[32 * b + j + 16] * kv_fp4[w[1 + j] >> 4]);
            }
            s += dw * si;
            *mag += fabs(dw) * sa;
        }
        break;
    case IQF_TYPE_NVFP4:
        for (int b = 0; b < K / 64; b++, w += 36)
            for (int sb = 0; sb < 4; sb++) {
                const double dw = ue4m3_half(w[sb]) * d[2 * b + sb / 2];
                const int *qa = q + 64 * b + 16 * sb;
                long si = 0, sa = 0;
                for (int j = 0; j < 8; j++) {
                    const uint8_t c = w[4 + 8 * sb + j];
                    si += qa[j] * kv_fp4[c & 15] + qa[j + 8] * kv_fp4[c >> 4];
                    sa += labs((long)qa[j] * kv_fp4[c & 15]) + labs((long)qa[j + 8] * kv_fp4[c >> 4]);
                }
                s += dw * si;
                *mag += fabs(dw) * sa;
            }
        break;
    case IQF_TYPE_Q1_0:
        for (int b = 0; b < K / 128; b++, w += 18)
            for (int k = 0; k < 4; k++) {
                const double dw = half(w) * d[4 * b + k];
                long si = 0, sa = 0;
                for (int j = 0; j < 32; j++) {
                    const int v = q[128 * b + 32 * k + j];
                    si += (w[2 + 4 * k + j / 8] >> (j % 8)) & 1 ? v : -v;
                    sa += labs((long)v);
                }
                s += dw * si;
                *mag += fabs(dw) * sa;
            }
        break;
    case IQF_TYPE_Q2_0:
        for (int b = 0; b < K / 64; b++, w += 18)
            for (int k = 0; k < 2; k++) {
                const double dw = half(w) * d[2 * b + k];
                long si = 0, sa = 0;
                for (int j = 0; j < 32; j++) {
                    const int c = ((w[2 + 8 * k + j / 4] >> (2 * (j % 4))) & 3) - 1;
                    si += c * q[64 * b + 32 * k + j];
                    sa += labs((long)c * q[64 * b + 32 * k + j]);
                }
                s += dw * si;
                *mag += fabs(dw) * sa;
            }
        break;
    case IQF_TYPE_TQ1_0: {
        static const uint8_t pow3[5] = { 1, 3, 9, 27, 81 };
        for (int b = 0; b < K / 256; b++, w += 54) {
            const int *qa = q + 256 * b;
            long si = 0, sa = 0;
            int pos = 0;
            /* qs[0..32): 5 trits each, trit l of byte m is value 32 l + m; qs[32..48): 160 + 16 l + m;
             * qh[0..4): 240 + 4 l + j (4 trits) */
            for (int l = 0; l < 5; l++)
                for (int m = 0; m < 32; m++, pos++) {
                    const int t = (int)((((uint8_t)(w[m] * pow3[l])) * 3u) >> 8) - 1;
                    si += t * qa[32 * l + m];
                    sa += labs((long)t * qa[32 * l + m]);
                }
            for (int l = 0; l < 5; l++)
                for (int m = 0; m < 16; m++, pos++) {
                    const int t = (int)((((uint8_t)(w[32 + m] * pow3[l])) * 3u) >> 8) - 1;
                    si += t * qa[160 + 16 * l + m];
                    sa += labs((long)t * qa[160 + 16 * l + m]);
                }
            for (int l = 0; l < 4; l++)
                for (int j = 0; j < 4; j++, pos++) {
                    const int t = (int)((((uint8_t)(w[48 + j] * pow3[l])) * 3u) >> 8) - 1;
                    si += t * qa[240 + 4 * l + j];
                    sa += labs((long)t * qa[240 + 4 * l + j]);
                }
            const double dw = (double)(float)(iqf_fp16_to_fp32((uint16_t)(w[52] | w[53] << 8)) * (float)d[b]);
            s += dw * si;
            *mag += fabs(dw) * sa;
        }
        break;
    }
    case IQF_TYPE_TQ2_0:
        for (int b = 0; b < K / 256; b++, w += 66) {
            const int *qa = q + 256 * b;
            long si = 0, sa = 0;
            for (int j = 0; j < 64; j += 32)
                for (int l = 0; l < 4; l++)
                    for (int m = 0; m < 32; m++) {
                        const int t = ((w[j + m] >> (2 * l)) & 3) - 1;
                        si += t * qa[4 * j + 32 * l + m];
                        sa += labs((long)t * qa[4 * j + 32 * l + m]);
                    }
            const double dw = (double)(float)((float)d[b] * iqf_fp16_to_fp32((uint16_t)(w[64] | w[65] << 8)));
            s += dw * si;
            *mag += fabs(dw) * sa;
        }
        break;
    }
    return s;
}

static void test_model(const int *types, int ntypes) {
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/iqf_test_dot_lowbit_%d.gguf", (int)getpid());
    const tu_small_llama spec = { IQF_TYPE_TQ2_0, IQF_TYPE_NVFP4, types, ntypes, 0, false };
    CHECK(tu_write_small_llama(path, &spec), "write the model");
    iqf_model *m = NULL;
    CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_OK, "%s", err);
    remove(path);
    if (!m) return;
    enum { NT = 12 };
    const int V = m->info.n_vocab;
    int32_t toks[NT];
    for (int i = 0; i < NT; i++) toks[i] = (i * 37 + 1) % V;
    float *a = malloc(sizeof(float) * NT * V), *b = malloc(sizeof(float) * NT * V);
    for (int pass = 0; pass < 2; pass++) {
        float *out = pass ? b : a;
        iqf_context *c = NULL;
        CHECK(tu_context_simd(m, NT, pass ? 3 : 1, IQF_SIMD_AUTO, &c, err, sizeof err) == IQF_OK, "%s", err);
        if (!c) break;
        CHECK(iqf_decode(c, toks, NT, 0, 0, out, err, sizeof err) == IQF_OK, "decode: %s", err);
        iqf_context_free(c);
    }
    double mx = 0;
    size_t diff = 0, bad = 0;
    for (int i = 0; i < NT * V; i++) {
        diff += memcmp(&a[i], &b[i], 4) != 0;
        bad += !isfinite(a[i]);
        mx = fmax(mx, fabs(a[i]));
    }
    printf("model with mxfp4..tq2_0 matrices: max |logit| %.2f, %zu non-finite, %zu differ between 1 and 3 threads\n",
           mx, bad, diff);
    CHECK(bad == 0 && mx > 0.1 && diff == 0, "logits of the low-bit model");
    free(a);
    free(b);
    iqf_model_free(m);
}

int main(void) {
    static const int types[] = { IQF_TYPE_MXFP4, IQF_TYPE_NVFP4, IQF_TYPE_Q1_0,
                                 IQF_TYPE_Q2_0,  IQF_TYPE_TQ1_0, IQF_TYPE_TQ2_0 };
    tu_rng r = { 23 };
    float *w = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N);
    int *q = malloc(sizeof(int) * K);
    double *d = malloc(sizeof(double) * (K / 32));
    for (int i = 0; i < N * K; i++) w[i] = (float)(tu_normal(&r) * (i % 13 == 0 ? 5 : 1));
    for (int i = 0; i < T * K; i++) x[i] = (float)(tu_normal(&r) * (i % 7 == 0 ? 9 : 1));
    memset(w + 2 * K + 256, 0, 256 * sizeof(float)); /* an all-zero weight block */
    memset(x + K, 0, 256 * sizeof(float));           /* an all-zero activation block */
    iqf_context c;
    memset(&c, 0, sizeof c);
    c.pool = iqf_pool_new(2);
    c.simd = iqf_simd_detect();
    c.max_ncols = K;
    c.max_batch = T;
    c.wtile = malloc(sizeof(float) * (size_t)iqf_pool_size(c.pool) * IQF_MM_TILE * K);
    c.xr = malloc(sizeof(float) * T * K); /* the float path */
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        const char *name = iqf_type_get(type)->name;
        const bool k_act = type == IQF_TYPE_TQ1_0 || type == IQF_TYPE_TQ2_0;
        CHECK(iqf_mm_act_type(type) == (k_act ? IQF_TYPE_Q8_K : IQF_TYPE_Q8_0), "%s: vec_dot_type", name);
        const size_t rb = iqf_row_size(type, K);
        uint8_t *qw = malloc(rb * N);
        char err[256];
        CHECK(iqf_quantize(type, w, qw, N, K, NULL, NULL, err, sizeof err) == IQF_OK, "quantize %s: %s", name, err);
        iqf_weight wt;
        memset(&wt, 0, sizeof wt);
        wt.id = -1;
        wt.type = type;
        wt.ncols = K;
        wt.nrows = N;
        wt.row_bytes = rb;
        wt.data = qw;
        iqf_matmul(&c, &wt, x, K, T, y, N);
        double worst = 0;
        for (int t = 0; t < T; t++) {
            if (k_act) act_q8_K(x + t * K, q, d);
            else act_q8_0(x + t * K, q, d);
            for (int n = 0; n < N; n++) {
                double mag;
                const double ref = ref_dot(type, qw + n * rb, q, d, &mag);
                worst = fmax(worst, fabs(y[t * N + n] - ref) / (mag + 1e-30));
            }
        }
        printf("%-6s (activations as %s): worst |engine - ggml vec_dot| %.2g of the sum of |terms|\n", name,
               k_act ? "q8_K" : "q8_0", worst);
        CHECK(worst < 1e-6, "%s: engine product differs from ggml's vec_dot by %g", name, worst);
        free(qw);
    }
    iqf_pool_free(c.pool);
    free(c.wtile);
    free(c.xr);
    free(w); free(x); free(y); free(q); free(d);
    test_model(types, (int)(sizeof types / sizeof types[0]));
    return test_finish("test_model_dot_lowbit");
}
