/*
 * test_model_kernels.c - the inference engine's integer matrix-product path (mm_int8.c):
 * Q8_K activation quantization against ggml's definition, and the IQ3_XXS tile kernel against
 * a double-precision product of the decoded weights and the dequantized Q8_K activations.
 */
#include "iqforge.h"
#include "model/model.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    if (!iqf_mm_int8_supported(IQF_TYPE_IQ3_XXS, iqf_simd_detect()) || !iqf_can_encode(IQF_TYPE_IQ3_XXS)) {
        printf("no AVX2 or no iq3_xxs encoder: integer path not used\n");
        CHECK(1, "skip");
        return test_finish("test_model_kernels");
    }
    enum { N = 37, K = 768, T = 13 };
    tu_rng r = { 99 };
    float *w = malloc(sizeof(float) * N * K), *wd = malloc(sizeof(float) * N * K);
    float *x = malloc(sizeof(float) * T * K);
    for (int i = 0; i < N * K; i++) w[i] = (float)tu_normal(&r);
    for (int i = 0; i < T * K; i++) x[i] = (float)(tu_normal(&r) * (i % 7 == 0 ? 5 : 1));
    memset(x + 3 * K + 256, 0, 256 * sizeof(float)); /* an all-zero block */
    size_t rb = iqf_row_size(IQF_TYPE_IQ3_XXS, K);
    uint8_t *q = malloc(rb * N);
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, w, q, N, K, NULL, NULL, NULL, 0) == IQF_OK, "quantize");
    CHECK(iqf_dequantize(IQF_TYPE_IQ3_XXS, q, wd, N, K, 1, NULL, 0) == IQF_OK, "dequantize");

    int8_t *xq = malloc(T * K);
    float *xd = malloc(sizeof(float) * T * (K / 256));
    iqf_mm_quantize_act(x, K, T, K, xq, xd);
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
            CHECK(xq[t * K + b * 256 + imax] == -127, "max -> -127 (t %d b %d: %d)", t, b, xq[t * K + b * 256 + imax]);
            double err = 0;
            for (int j = 0; j < 256; j++)
                err = fmax(err, fabs(v[j] - xd[t * (K / 256) + b] * xq[t * K + b * 256 + j]));
            CHECK(err <= fabs(xd[t * (K / 256) + b]) * 0.5001, "rounding %g", err);
        }

    iqf_weight wt;
    memset(&wt, 0, sizeof wt);
    wt.type = IQF_TYPE_IQ3_XXS;
    wt.ncols = K;
    wt.nrows = N;
    wt.row_bytes = rb;
    wt.data = q;
    uint8_t *tile = malloc(iqf_mm_int8_row_bytes(K) * 16);
    float *y = malloc(sizeof(float) * T * N);
    for (int r0 = 0; r0 < N; r0 += 16) {
        int nr = N - r0 < 16 ? N - r0 : 16;
        iqf_mm_int8_decode(&wt, r0, nr, tile);
        iqf_mm_int8_kernel(tile, nr, K, xq, xd, T, y + r0, N);
    }
    double worst = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < N; n++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double xv = (double)xd[t * (K / 256) + k / 256] * xq[t * K + k];
                ref += (double)wd[n * K + k] * xv;
                mag += fabs((double)wd[n * K + k] * xv);
            }
            worst = fmax(worst, fabs(y[t * N + n] - ref) / (mag + 1e-30));
        }
    printf("iq3_xxs integer kernel: worst error %.3g of the sum of |products|\n", worst);
    CHECK(worst < 1e-6, "integer kernel error %g", worst);
    free(w); free(wd); free(x); free(q); free(xq); free(xd); free(tile); free(y);
    return test_finish("test_model_kernels");
}
