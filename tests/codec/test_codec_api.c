/* test_codec_api.c - the registry's request checks: shapes, NaN/Inf reporting (first bad row and
 * column, whatever the thread count), imatrix validation and requirement. */
#include "iqforge.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    const int64_t rows = 64, cols = 512;
    float *x = malloc(sizeof(float) * rows * cols), im[512];
    uint8_t *q = malloc(sizeof(float) * rows * cols); /* large enough for every type */
    tu_rng r = { 9 };
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)tu_normal(&r);
    for (int j = 0; j < cols; j++) im[j] = 1.0f;
    char err[256];
    iqf_quantize_params p = iqf_quantize_default_params();

    /* Two bad rows: every thread count must name the first one. */
    x[37 * cols + 100] = NAN;
    x[5 * cols + 300] = INFINITY;
    x[5 * cols + 301] = NAN;
    for (int t = 1; t <= 8; t++) {
        p.n_threads = t;
        for (int type = 0; type < IQF_TYPE_COUNT; type++) {
            if (!iqf_can_encode(type) || type == IQF_TYPE_F32 || iqf_type_get(type)->blck_size > cols) continue;
            iqf_status st = iqf_quantize(type, x, q, rows, cols, im, &p, err, sizeof err);
            CHECK(st == IQF_E_NONFINITE && strcmp(err, "row 5, column 300: value is Inf") == 0,
                  "%s threads=%d: status %d '%s'", iqf_type_get(type)->name, t, st, err);
        }
    }
    x[5 * cols + 300] = 0;
    x[5 * cols + 301] = 0;
    p.n_threads = 3;
    CHECK(iqf_quantize(IQF_TYPE_Q4_K, x, q, rows, cols, NULL, &p, err, sizeof err) == IQF_E_NONFINITE &&
              !strcmp(err, "row 37, column 100: value is NaN"), "%s", err);
    x[37 * cols + 100] = 0;
    CHECK(iqf_quantize(IQF_TYPE_Q4_K, x, q, rows, cols, NULL, &p, err, sizeof err) == IQF_OK, "%s", err);

    /* Shapes and types. */
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, x, q, 1, 300, NULL, &p, err, sizeof err) == IQF_E_SHAPE &&
              strstr(err, "not a multiple of 256"), "%s", err);
    CHECK(iqf_quantize(4, x, q, 1, 256, NULL, &p, err, sizeof err) == IQF_E_UNKNOWN_TYPE, "%s", err);
    CHECK(iqf_quantize(999, x, q, 1, 256, NULL, &p, err, sizeof err) == IQF_E_UNKNOWN_TYPE, "%s", err);
    CHECK(iqf_quantize(IQF_TYPE_Q8_K, x, q, 1, 256, NULL, &p, err, sizeof err) == IQF_E_UNSUPPORTED ||
              iqf_can_encode(IQF_TYPE_Q8_K), "%s", err);
    CHECK(iqf_quantize(IQF_TYPE_IQ2_XXS, x, q, 1, 256, NULL, &p, err, sizeof err) == IQF_E_NEED_IMATRIX,
          "%s", err);

    /* Importance matrix values. */
    im[7] = -1.0f;
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, x, q, 1, cols, im, &p, err, sizeof err) == IQF_E_NONFINITE &&
              strstr(err, "column 7"), "%s", err);
    im[7] = NAN;
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, x, q, 1, cols, im, &p, err, sizeof err) == IQF_E_NONFINITE, "%s", err);
    im[7] = 0;
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, x, q, 1, cols, im, &p, err, sizeof err) == IQF_OK, "%s", err);

    /* Zero rows are fine; dequantize rejects bad shapes too. */
    CHECK(iqf_quantize(IQF_TYPE_IQ3_XXS, x, q, 0, cols, NULL, &p, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_dequantize(IQF_TYPE_IQ3_XXS, q, x, 1, 100, 1, err, sizeof err) == IQF_E_SHAPE, "%s", err);
    free(x);
    free(q);
    return test_finish("test_codec_api");
}
