/*
 * test_codec_kq.c - q2_K, q3_K, q4_K, q5_K, q6_K against the oracle (ggml 0.25.1): the shared randomized
 * differential suite (tests/common/codec_suite.c) over row lengths that cross SIMD batch boundaries,
 * in compat mode (bytes equal to the oracle's) and in best mode (codec_suite_best: deterministic,
 * decoded alike by the oracle, accepted by ggml_validate_row_data).
 *
 * Best-mode regression on the golden-vector inputs (tests/data/refvec, every distribution, with and
 * without the imatrix): best's weighted squared error, recomputed here in double from the decoded
 * values, is no higher than compat's on every distribution and at least 0.1% lower in total over
 * the distributions other than "tiny", for every type. The
 * objective is kq_best's: per super-block, w_i = imatrix_i * sqrt(c * mean(x^2) + x_i^2) (without an
 * imatrix the factor imatrix_i is dropped); c = 1 for q2_K, 2 for the others.
 */
#include "codec_suite.h"
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double weighted_error(const float *x, const float *y, const float *im, int64_t rows, int64_t cols,
                             double c) {
    double e = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < cols / 256; b++) {
            const float *xb = x + r * cols + b * 256, *yb = y + r * cols + b * 256;
            double amax = 0, s2 = 0, eb = 0;
            for (int i = 0; i < 256; i++) amax = fmax(amax, fabs((double)xb[i]));
            if (amax == 0) continue;
            for (int i = 0; i < 256; i++) s2 += (xb[i] / amax) * (xb[i] / amax);
            for (int i = 0; i < 256; i++) {
                double v = xb[i] / amax, w = sqrt(c * s2 / 256 + v * v) * (im ? im[b * 256 + i] : 1.0);
                double df = ((double)xb[i] - (double)yb[i]) / amax;
                eb += w * df * df;
            }
            e += eb;
        }
    return e;
}

static void refvec_regression(const int *types, int ntypes) {
    static const char *const dists[] = { "gauss", "heavy", "outlier", "zeroblocks", "tiny", "mixed" };
    const int64_t rows = 8, cols = 2048;
    float *x = malloc(sizeof(float) * rows * cols), *y = malloc(sizeof(float) * rows * cols);
    float *im = malloc(sizeof(float) * cols);
    uint8_t *q = malloc(8 * 1024 * 1024);
    for (int t = 0; t < ntypes; t++) {
        const int type = types[t];
        const double c = type == IQF_TYPE_Q2_K ? 1.0 : 2.0;
        for (int withim = 0; withim < 2; withim++) {
            double tot[2] = { 0, 0 };
            for (size_t d = 0; d < sizeof dists / sizeof dists[0]; d++) {
                char path[160];
                size_t n = 0;
                snprintf(path, sizeof path, "tests/data/refvec/%s/x.f32", dists[d]);
                void *bx = read_file(src_path(path), &n);
                CHECK(bx && n == sizeof(float) * rows * cols, "%s unreadable", path);
                snprintf(path, sizeof path, "tests/data/refvec/%s/imatrix.f32", dists[d]);
                void *bi = read_file(src_path(path), &n);
                CHECK(bi && n == sizeof(float) * cols, "%s unreadable", path);
                if (!bx || !bi) { free(bx); free(bi); continue; }
                memcpy(x, bx, sizeof(float) * rows * cols);
                memcpy(im, bi, sizeof(float) * cols);
                free(bx);
                free(bi);
                double e[2];
                for (int mode = 0; mode < 2; mode++) {
                    iqf_quantize_params p = iqf_quantize_default_params();
                    p.mode = mode ? IQF_MODE_BEST : IQF_MODE_COMPAT;
                    char err[200];
                    iqf_status st = iqf_quantize(type, x, q, rows, cols, withim ? im : NULL, &p, err, sizeof err);
                    CHECK(st == IQF_OK, "quantize: %s", err);
                    iqf_dequantize(type, q, y, rows, cols, 1, NULL, 0);
                    e[mode] = weighted_error(x, y, withim ? im : NULL, rows, cols, c);
                    /* "tiny": fp16 scales underflow, errors dwarf the others'; checked per dist only */
                    if (strcmp(dists[d], "tiny") != 0) tot[mode] += e[mode];
                }
                CHECK(e[1] <= e[0] * (1 + 1e-6), "%s %s imatrix=%d: best's weighted error %.6g above compat's %.6g",
                      iqf_type_get(type)->name, dists[d], withim, e[1], e[0]);
            }
            printf("test_codec_kq: %s imatrix=%d: best/compat weighted error %.4f\n", iqf_type_get(type)->name,
                   withim, tot[1] / tot[0]);
            CHECK(tot[1] < 0.999 * tot[0], "%s imatrix=%d: best's total weighted error %.6g not below compat's %.6g",
                  iqf_type_get(type)->name, withim, tot[1], tot[0]);
        }
    }
    free(x);
    free(y);
    free(im);
    free(q);
}

int main(void) {
    static const int types[] = { IQF_TYPE_Q2_K, IQF_TYPE_Q3_K, IQF_TYPE_Q4_K, IQF_TYPE_Q5_K, IQF_TYPE_Q6_K };
    static const int64_t lens[5] = { 256, 768, 1024, 2304, 5120 };
    const int nt = (int)(sizeof types / sizeof types[0]);
    refvec_regression(types, nt);
    codec_suite_best(types, nt, lens);
    return codec_suite_run("test_codec_kq", types, nt, lens);
}
