/*
 * test_model_kernels.c - the inference engine's integer matrix-product path (mm_int8.c):
 * Q8_K activation quantization against ggml's definition, and the IQ3_XXS / IQ3_S / Q4_K / Q6_K tile kernels
 * (every SIMD level the CPU has) against a double-precision product of the weights decoded by the
 * codec registry and the dequantized Q8_K activations; then a small random llama model in each
 * type through the whole engine, integer path vs float path (both use Q8_K-rounded activations, so
 * they differ only by float summation order and the rare rounding decision it flips downstream:
 * <= 0.15% RMS on the logits here; wiring errors give ~100%).
 */
#include "iqforge.h"
#include "model/model.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


/* The test model with its matrices in `type` (testutil's small llama). */
static bool write_model(const char *path, int type) {
    const tu_small_llama spec = { IQF_TYPE_F32, type, &type, 1, 0, false };
    return tu_write_small_llama(path, &spec);
}

/* Logits of 40 tokens through the whole engine: the integer path vs the float-tile path
 * (IQF_SIMD_SCALAR), which rounds the activations to Q8_K the same way. */
static void end_to_end(int type) {
    char path[64], err[512];
    snprintf(path, sizeof path, "/tmp/iqf_test_kernels_%d.gguf", (int)getpid());
    CHECK(write_model(path, type), "write model");
    iqf_model *m = NULL;
    CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_OK, "%s", err);
    if (!m) return;
    enum { N = 40, V = 300 };
    int32_t toks[N];
    for (int i = 0; i < N; i++) toks[i] = (i * 37 + 1) % V;
    float *a = malloc(sizeof(float) * N * V), *b = malloc(sizeof(float) * N * V);
    iqf_context *c = NULL;
    CHECK(iqf_context_new(m, N, 2, &c, err, sizeof err) == IQF_OK && c->xq != NULL, "int path context");
    if (c) CHECK(iqf_decode(c, toks, N, 0, 0, a, err, sizeof err) == IQF_OK, "%s", err);
    iqf_context_free(c);
    c = NULL;
    CHECK(tu_context_simd(m, N, 2, IQF_SIMD_SCALAR, &c, err, sizeof err) == IQF_OK && c->xq == NULL,
          "float path context");
    if (c) CHECK(iqf_decode(c, toks, N, 0, 0, b, err, sizeof err) == IQF_OK, "%s", err);
    iqf_context_free(c);
    double num = 0, den = 0, mx = 0;
    for (int i = 0; i < N * V; i++) {
        num += (double)(a[i] - b[i]) * (a[i] - b[i]);
        den += (double)b[i] * b[i];
        mx = fmax(mx, fabs(b[i]));
    }
    double rel = sqrt(num / den);
    printf("%s end to end: integer vs float logits, relative RMS difference %.3g (max |logit| %.2f)\n",
           iqf_type_get(type)->name, rel, mx);
    CHECK(rel < 0.01 && mx > 0.1, "%s: integer path logits differ by %g", iqf_type_get(type)->name, rel);
    free(a);
    free(b);
    iqf_model_free(m);
    remove(path);
}

int main(void) {
    if (!iqf_mm_int8_supported(IQF_TYPE_IQ3_XXS, iqf_simd_detect()) || !iqf_can_encode(IQF_TYPE_IQ3_XXS)) {
        /* Nothing to test here: a skip (77), which CI counts as a failure. */
        fprintf(stderr, "skip: no AVX2 or no iq3_xxs encoder: the integer path is not used on this CPU\n");
        if (tu_ci()) {
            CHECK(0, "CI: the integer-path kernels were not tested (no AVX2)");
            return test_finish("test_model_kernels");
        }
        return 77;
    }
    enum { N = 37, K = 768, T = 13 };
    tu_rng r = { 99 };
    float *w = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
    float *x = malloc(sizeof(float) * T * K);
    for (int i = 0; i < N * K; i++) w[i] = (float)tu_normal(&r);
    for (int i = 0; i < T * K; i++) x[i] = (float)(tu_normal(&r) * (i % 7 == 0 ? 5 : 1));
    memset(x + 3 * K + 256, 0, 256 * sizeof(float)); /* an all-zero block */

    uint8_t *xq = malloc(T * K);
    float *xd = malloc(sizeof(float) * T * (K / 256));
    int32_t *xs = malloc(sizeof(int32_t) * T * (K / 32));
    iqf_mm_quantize_act(x, K, T, K, xq, xd, xs);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K / 32; j++) {
            int32_t acc = 0;
            for (int l = 0; l < 32; l++) acc += xq[t * K + j * 32 + l] - 128;
            if (acc != xs[t * (K / 32) + j]) { CHECK(0, "sum t %d j %d", t, j); break; }
        }
    /* Q8_K: the largest magnitude maps to -127 (ggml scales by -127/max), |q| <= 127 */
    for (int t = 0; t < T; t++)
        for (int b = 0; b < K / 256; b++) {
            const float *v = x + t * K + b * 256;
            int imax = 0;
            for (int j = 1; j < 256; j++)
                if (fabsf(v[j]) > fabsf(v[imax])) imax = j;
            if (v[imax] == 0) {
                CHECK(xd[t * (K / 256) + b] == 0, "zero block scale");
                continue;
            }
            CHECK(xq[t * K + b * 256 + imax] == 1, "max -> -127 (t %d b %d: %d)", t, b, xq[t * K + b * 256 + imax] - 128);
            double err = 0;
            for (int j = 0; j < 256; j++)
                err = fmax(err, fabs(v[j] - xd[t * (K / 256) + b] * (xq[t * K + b * 256 + j] - 128)));
            CHECK(err <= fabs(xd[t * (K / 256) + b]) * 0.5001, "rounding %g", err);
        }

    const int types[4] = { IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S, IQF_TYPE_Q4_K, IQF_TYPE_Q6_K };
    for (int ti = 0; ti < 4; ti++) {
    const int type = types[ti];
    CHECK(iqf_mm_int8_supported(type, iqf_simd_detect()), "%s supported", iqf_type_get(type)->name);
    size_t rb = iqf_row_size(type, K);
    uint8_t *q = malloc(rb * N);
    CHECK(iqf_quantize(type, w, q, N, K, NULL, NULL, NULL, 0) == IQF_OK, "quantize");
    CHECK(iqf_dequantize(type, q, wd, N, K, 1, NULL, 0) == IQF_OK, "dequantize");
    iqf_weight wt;
    memset(&wt, 0, sizeof wt);
    wt.type = type;
    wt.ncols = K;
    wt.nrows = N;
    wt.row_bytes = rb;
    wt.data = q;
    uint8_t *tile = malloc(iqf_mm_int8_tile_bytes(K));
    float *y = malloc(sizeof(float) * T * N);
    for (int lvl = IQF_SIMD_AVX2; lvl <= (int)iqf_simd_detect(); lvl++) {
    for (int r0 = 0; r0 < N; r0 += 16) {
        int nr = N - r0 < 16 ? N - r0 : 16;
        iqf_mm_int8_tile(&wt, r0, nr, tile, xq, xd, xs, T, y + r0, N, (iqf_simd)lvl);
    }
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double xv = (double)xd[t * (K / 256) + k / 256] * (xq[t * K + k] - 128);
                ref += (double)wd[n * K + k] * xv;
                mag += fabs((double)wd[n * K + k] * xv);
            }
            worst = fmax(worst, fabs(y[t * N + n] - ref) / (mag + 1e-30));
        }
    printf("%s integer kernel (%s): worst error %.3g of the sum of |products|\n", iqf_type_get(type)->name,
           iqf_simd_name((iqf_simd)lvl), worst);
    CHECK(worst < 1e-6, "integer kernel error %g (%s)", worst, iqf_simd_name((iqf_simd)lvl));
    }
    free(q);
    free(tile);
    free(y);
    }
    free(w); free(wd); free(x); free(xq); free(xd); free(xs);
    end_to_end(IQF_TYPE_IQ3_XXS);
    end_to_end(IQF_TYPE_IQ3_S);
    end_to_end(IQF_TYPE_Q4_K);
    end_to_end(IQF_TYPE_Q6_K);
    return test_finish("test_model_kernels");
}
