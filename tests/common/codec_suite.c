/*
 * codec_suite.c - the randomized differential suite shared by block codec tests: every qgen
 * distribution x imatrix variant x seeds (10, or 2 under IQF_SANITIZED=1) x five row lengths,
 * then edge cases (all-zero, single values, imatrix zero exactly on the non-zero values, huge
 * and tiny magnitudes, overflowing intermediates, half-step ties, signed zeros). Every case runs
 * qgen_diff (bytes at every SIMD level, 1 and 3 threads, and our decoder on the oracle's bytes).
 *
 * codec_suite_run_iq is the variant the IQ1/IQ4 tests use: rows of 256/1024/2816, one-row edge
 * cases including table levels and their midpoints, and the decoder on random bytes.
 *
 * Every case of both variants also runs best_check for the types named by codec_suite_best_types
 * (a test opts in for the types whose best mode it owns): the best encoder mode (IQF_MODE_BEST) must
 * write the same bytes at every SIMD level and at 1 and 3 threads, blocks the oracle's
 * ggml_validate_row_data accepts, that the oracle's decoder and ours decode bitwise alike, to
 * finite values. codec_suite_best_refvec checks that best's weighted error is below compat's on
 * the golden-vector inputs (tests/data/refvec).
 */
#include "codec_suite.h"

#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int *types;
static int ntypes;

/* Types whose best mode the suites check (codec_suite_best_types). */
static const int *best_types;
static int nbest_types;

void codec_suite_best_types(const int *tv, int nt) {
    best_types = tv;
    nbest_types = nt;
}

/* Best mode on the same input (see the header comment). */
static void best_check(int type, const float *x, int64_t rows, int64_t cols, const float *im,
                       const char *label) {
    bool listed = false;
    for (int t = 0; t < nbest_types; t++) listed |= best_types[t] == type;
    if (!listed) return;
    if (!im && iqf_requires_imatrix(type)) return;
    const size_t bytes = iqf_row_size(type, cols) * (size_t)rows, n = (size_t)(rows * cols);
    uint8_t *ref = malloc(bytes), *q = malloc(bytes);
    float *ya = malloc(sizeof(float) * n), *yb = malloc(sizeof(float) * n);
    if (!ref || !q || !ya || !yb) { CHECK(0, "out of memory"); goto out; }
    bool have = false;
    char err[256];
    for (int simd = IQF_SIMD_SCALAR; simd <= TU_SIMD_TOP; simd++) {
        if (!tu_simd_runs(simd)) continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            iqf_quantize_params p = iqf_quantize_default_params();
            p.mode = IQF_MODE_BEST;
            p.simd = (iqf_simd)simd;
            p.n_threads = threads;
            memset(q, 0x55, bytes);
            iqf_status st = iqf_quantize(type, x, q, rows, cols, im, &p, err, sizeof err);
            CHECK(st == IQF_OK, "%s: best quantize: %s", label, err);
            if (st) goto out;
            if (!have) {
                memcpy(ref, q, bytes);
                have = true;
            } else {
                CHECK(memcmp(ref, q, bytes) == 0, "%s: best bytes at simd=%s threads=%d differ from scalar/1",
                      label, iqf_simd_name((iqf_simd)simd), threads);
            }
        }
    }
    CHECK(oracle_validate(type, ref, bytes), "%s: oracle rejects best-mode blocks", label);
    oracle_dequantize(type, ref, ya, (int64_t)n);
    iqf_dequantize(type, ref, yb, rows, cols, 1, NULL, 0);
    int64_t bad = -1, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        if (bad < 0 && memcmp(&ya[i], &yb[i], 4) != 0) bad = (int64_t)i;
        nonfinite += !isfinite(yb[i]);
    }
    CHECK(bad < 0, "%s: best-mode bytes decode differently (oracle vs ours) at value %lld", label, (long long)bad);
    CHECK(nonfinite == 0, "%s: best-mode blocks decode to %lld non-finite values", label, (long long)nonfinite);
out:
    free(ref);
    free(q);
    free(ya);
    free(yb);
}

/* refvec inputs: weighted squared error as ggml's *_impl encoders weigh it (with the imatrix) or
 * plain squared error (without), best vs compat. */
static int best_refvec(const int *tv, int nt, bool strict);
int codec_suite_best_refvec(const int *tv, int nt) { return best_refvec(tv, nt, true); }
int codec_suite_best_refvec_noworse(const int *tv, int nt) { return best_refvec(tv, nt, false); }

static int best_refvec(const int *tv, int nt, bool strict) {
    static const char *dists[] = { "gauss", "heavy", "outlier", "zeroblocks", "tiny", "mixed" };
    const int R = 8, C = 2048;
    const char *src = getenv("IQF_SOURCE_DIR");
    char path[1024];
    float *x = malloc(sizeof(float) * R * C), *im = malloc(sizeof(float) * C), *y = malloc(sizeof(float) * R * C);
    uint8_t *q = malloc((size_t)R * C * 4);
    int failed_before = tu_failed;
    for (size_t d = 0; d < sizeof dists / sizeof dists[0]; d++) {
        snprintf(path, sizeof path, "%s/tests/data/refvec/%s/x.f32", src ? src : ".", dists[d]);
        FILE *f = fopen(path, "rb");
        bool ok = f && fread(x, sizeof(float), (size_t)R * C, f) == (size_t)R * C;
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/tests/data/refvec/%s/imatrix.f32", src ? src : ".", dists[d]);
        f = fopen(path, "rb");
        ok = ok && f && fread(im, sizeof(float), C, f) == (size_t)C;
        if (f) fclose(f);
        CHECK(ok, "%s: cannot read the refvec inputs (IQF_SOURCE_DIR=%s)", path, src ? src : "unset");
        if (!ok) break;
        for (int t = 0; t < nt; t++) {
            for (int with = 0; with < 2; with++) {
                double e[2];
                for (int mode = 0; mode < 2; mode++) {
                    iqf_quantize_params p = iqf_quantize_default_params();
                    p.mode = (iqf_mode)mode;
                    iqf_status st = iqf_quantize(tv[t], x, q, R, C, with ? im : NULL, &p, NULL, 0);
                    CHECK(st == IQF_OK, "refvec %s: quantize failed", dists[d]);
                    iqf_dequantize(tv[t], q, y, R, C, 1, NULL, 0);
                    /* ggml's *_impl weights: imatrix * sqrt(sigma2 + x^2), sigma2 the row's mean x^2 */
                    double s = 0;
                    for (int r = 0; r < R; r++) {
                        double s2 = 0;
                        for (int c = 0; c < C; c++) s2 += (double)x[r * C + c] * x[r * C + c];
                        s2 /= C;
                        for (int c = 0; c < C; c++) {
                            const double v = x[r * C + c], dv = v - y[r * C + c];
                            s += (with ? im[c] * sqrt(s2 + v * v) : 1.0) * dv * dv;
                        }
                    }
                    e[mode] = s;
                }
                const double ratio = e[0] > 0 ? e[1] / e[0] : 1.0;
                printf("refvec %-10s %-7s %-7s best/compat weighted error %.4f\n", dists[d],
                       iqf_type_get(tv[t])->name, with ? "imatrix" : "none", ratio);
                /* strictly lower (by 0.1%) except where both decode to zeros (tiny iq4_xs) */
                if (!strict) CHECK(e[1] <= e[0], "refvec %s %s imatrix=%d: best %g above compat %g", dists[d], iqf_type_get(tv[t])->name, with, e[1], e[0]);
                else if (strcmp(dists[d], "tiny") == 0) CHECK(e[1] <= e[0], "refvec %s %s: best %g above compat %g", dists[d], iqf_type_get(tv[t])->name, e[1], e[0]);
                else CHECK(ratio < 0.999, "refvec %s %s imatrix=%d: best/compat %.4f not below 0.999", dists[d], iqf_type_get(tv[t])->name, with, ratio);
            }
        }
    }
    free(x);
    free(im);
    free(y);
    free(q);
    return tu_failed - failed_before;
}

/* The IQ grids' best mode without an importance matrix (codec.h iqf_best_flat_importance): on every qgen
 * distribution its bytes equal compat's with a uniform importance matrix, pass best_check, and
 * its plain squared error is below compat's (ggml weighs by x^2 without an imatrix), by 1% on
 * the spread distributions (no higher on the others). With an imatrix best is compat. */
int codec_suite_best_flat(const int *tv, int nt) {
    enum { R = 4, C = 1024 };
    float *x = malloc(sizeof(float) * R * C), *one = malloc(sizeof(float) * C), *y = malloc(sizeof(float) * R * C);
    uint8_t *qb = malloc((size_t)R * C), *qc = malloc((size_t)R * C);
    int failed_before = tu_failed;
    const int *saved = best_types, nsaved = nbest_types;
    codec_suite_best_types(tv, nt);
    for (int c = 0; c < C; c++) one[c] = 1;
    for (int t = 0; t < nt; t++) {
        for (int d = 0; d < QGEN_N; d++) {
            char label[96];
            snprintf(label, sizeof label, "best-flat %s %s", iqf_type_get(tv[t])->name, qgen_dist_name((qgen_dist)d));
            qgen_fill(x, R, C, (qgen_dist)d, 4242 + (uint64_t)d);
            best_check(tv[t], x, R, C, NULL, label);
            iqf_quantize_params pb = iqf_quantize_default_params(), pc = pb;
            pb.mode = IQF_MODE_BEST;
            const size_t bytes = iqf_row_size(tv[t], C) * R;
            double e[2] = { 0, 0 };
            CHECK(iqf_quantize(tv[t], x, qb, R, C, NULL, &pb, NULL, 0) == IQF_OK, "%s: best", label);
            CHECK(iqf_quantize(tv[t], x, qc, R, C, one, &pc, NULL, 0) == IQF_OK, "%s: compat, unit imatrix", label);
            CHECK(memcmp(qb, qc, bytes) == 0, "%s: best without an imatrix differs from compat with a uniform one", label);
            iqf_dequantize(tv[t], qb, y, R, C, 1, NULL, 0);
            e[1] = qgen_sse(x, y, (int64_t)R * C);
            CHECK(iqf_quantize(tv[t], x, qc, R, C, NULL, &pc, NULL, 0) == IQF_OK, "%s: compat", label);
            iqf_dequantize(tv[t], qc, y, R, C, 1, NULL, 0);
            e[0] = qgen_sse(x, y, (int64_t)R * C);
            const double ratio = e[0] > 0 ? e[1] / e[0] : 1.0;
            printf("%-28s best/compat squared error %.4f\n", label, ratio);
            CHECK(e[1] <= e[0], "%s: best's squared error %g above compat's %g", label, e[1], e[0]);
            if (d == QGEN_GAUSS || d == QGEN_HEAVY || d == QGEN_OUTLIER)
                CHECK(ratio < 0.99, "%s: best/compat %.4f not below 0.99", label, ratio);
            /* with an importance matrix best writes compat's bytes */
            qgen_imatrix(one, C, QGEN_IMAT_LOGNORMAL, 77);
            CHECK(iqf_quantize(tv[t], x, qb, R, C, one, &pb, NULL, 0) == IQF_OK, "%s: best, imatrix", label);
            CHECK(iqf_quantize(tv[t], x, qc, R, C, one, &pc, NULL, 0) == IQF_OK, "%s: compat, imatrix", label);
            CHECK(memcmp(qb, qc, bytes) == 0, "%s: best with an imatrix differs from compat", label);
            for (int c = 0; c < C; c++) one[c] = 1;
        }
    }
    codec_suite_best_types(saved, nsaved);
    free(x);
    free(one);
    free(y);
    free(qb);
    free(qc);
    return tu_failed - failed_before;
}

static void diff_all(const float *x, int64_t rows, int64_t cols, const float *im, const char *what) {
    char label[160];
    for (int t = 0; t < ntypes; t++) {
        snprintf(label, sizeof label, "%s %s", what, iqf_type_get(types[t])->name);
        qgen_diff(types[t], x, rows, cols, im, label);
        best_check(types[t], x, rows, cols, im, label);
    }
}

int codec_suite_run(const char *name, const int *types_, int ntypes_, const int64_t lens[5]) {
    types = types_;
    ntypes = ntypes_;
    oracle_require();
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED")) == 1;
    const int nseeds = san ? 2 : 10;
    const int rows = 4;
    float *x = malloc(sizeof(float) * rows * 8192), *im = malloc(sizeof(float) * 8192);

    /* Randomized: distributions x imatrix variants x seeds x row lengths. */
    for (int d = 0; d < QGEN_N; d++) {
        for (int m = 0; m < QGEN_IMAT_N; m++) {
            for (int s = 0; s < nseeds; s++) {
                int64_t cols = lens[(d + m + s) % 5];
                uint64_t seed = 1000 + (uint64_t)(d * 31 + m * 7 + s);
                qgen_fill(x, rows, cols, (qgen_dist)d, seed);
                bool has = qgen_imatrix(im, cols, (qgen_imat)m, seed);
                char what[96];
                snprintf(what, sizeof what, "%s/%s/seed%d/%lld", qgen_dist_name((qgen_dist)d),
                         qgen_imat_name((qgen_imat)m), s, (long long)cols);
                diff_all(x, rows, cols, has ? im : NULL, what);
            }
        }
    }

    /* Edge cases. */
    const int64_t cols = 256;
    qgen_imatrix(im, cols, QGEN_IMAT_LOGNORMAL, 7);
    memset(x, 0, sizeof(float) * rows * cols);
    diff_all(x, rows, cols, NULL, "all-zero");
    diff_all(x, rows, cols, im, "all-zero+imat");

    memset(x, 0, sizeof(float) * rows * cols);
    x[5] = 1.5f; x[cols + 40] = -2.25f; x[2 * cols + 255] = 1e-3f;
    diff_all(x, rows, cols, NULL, "single");
    diff_all(x, rows, cols, im, "single+imat");

    /* imatrix zero exactly where the values are non-zero. */
    qgen_fill(x, rows, cols, QGEN_SPARSE, 99);
    for (int64_t j = 0; j < cols; j++) {
        bool nz = false;
        for (int r = 0; r < rows; r++) nz |= x[r * cols + j] != 0;
        im[j] = nz ? 0.f : 1.f + (float)j;
    }
    diff_all(x, rows, cols, im, "imat-zero-on-nonzero");

    /* Huge and tiny magnitudes (fp16 overflow/underflow of the block scales). */
    static const float mags[] = { 1e-41f, 1e-38f, 1e-20f, 1e-9f, 1e-6f, 3e-5f, 1e4f, 6e4f, 1e8f, 1e18f };
    qgen_imatrix(im, cols, QGEN_IMAT_LOGNORMAL, 8);
    for (size_t k = 0; k < sizeof(mags) / sizeof(mags[0]); k++) {
        qgen_fill(x, rows, cols, QGEN_GAUSS, 50 + k);
        for (int64_t j = 0; j < rows * cols; j++) x[j] *= mags[k];
        char what[64];
        snprintf(what, sizeof what, "magnitude %g", (double)mags[k]);
        diff_all(x, rows, cols, NULL, what);
        diff_all(x, rows, cols, im, what);
    }

    /* Overflowing intermediates: x^2 = inf with zero importance (NaN weights), huge importance. */
    qgen_fill(x, rows, cols, QGEN_OUTLIER, 61);
    for (int64_t j = 0; j < rows * cols; j++) x[j] *= 1e18f;
    qgen_imatrix(im, cols, QGEN_IMAT_ZEROS, 9);
    diff_all(x, rows, cols, im, "1e18 + imatrix zeros");
    qgen_fill(x, rows, cols, QGEN_GAUSS, 62);
    for (int64_t j = 0; j < cols; j++) im[j] = (j % 3) ? 1e30f : 1e-30f;
    diff_all(x, rows, cols, im, "imatrix 1e30/1e-30");

    /* Ties: values on exact half-steps of the scale, constant blocks, sign-symmetric maxima. */
    for (int64_t j = 0; j < rows * cols; j++) x[j] = (float)((int)(j % 17) - 8) * 0.5f;
    diff_all(x, rows, cols, NULL, "half-steps");
    diff_all(x, rows, cols, im, "half-steps+imat");
    for (int64_t j = 0; j < rows * cols; j++) x[j] = (j & 1) ? 2.0f : -2.0f;
    diff_all(x, rows, cols, NULL, "pm2");
    diff_all(x, rows, cols, im, "pm2+imat");

    /* Signed zeros: blocks of +-0 only, and +-0 next to a few positive or negative values. */
    {
        tu_rng r = { 1234 };
        for (int64_t j = 0; j < rows * cols; j++) {
            uint64_t u = tu_next(&r);
            x[j] = (u & 1) ? -0.0f : 0.0f;
            if ((j / 32) % 3 == 1 && (u & 6) == 0) x[j] = (u & 8) ? 1.25f : -0.5f;
            if ((j / 32) % 3 == 2 && (u & 6) == 0) x[j] = 0.75f;
        }
        diff_all(x, rows, cols, NULL, "signed-zeros");
        diff_all(x, rows, cols, im, "signed-zeros+imat");
    }

    free(x);
    free(im);
    return test_finish(name);
}

/* ---------------------------------------------------------------------------------------- */

static void diff_case(int type, float *x, int rows, int cols, const float *imat, const char *what) {
    char label[160];
    snprintf(label, sizeof label, "%s %s", iqf_type_get(type)->name, what);
    if (!imat && iqf_requires_imatrix(type)) {
        /* e.g. IQ1_S: ggml asserts; the registry refuses cleanly. */
        uint8_t q[64];
        iqf_status st = iqf_quantize(type, x, q, 1, 256, NULL, NULL, NULL, 0);
        CHECK(st == IQF_E_NEED_IMATRIX, "%s: status %d without imatrix", label, (int)st);
        return;
    }
    qgen_diff(type, x, rows, cols, imat, label);
    best_check(type, x, rows, cols, imat, label);
}

int codec_suite_run_iq(const char *name, const int *types, int ntypes) {
    oracle_require();
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED"));
    const int nseeds = san ? 1 : 3;
    const int rows = san ? 2 : 6;
    const int colsv[] = { 256, 1024, 2816 };

    float *x = malloc(sizeof(float) * 8 * 4096), *im = malloc(sizeof(float) * 4096);

    /* Every distribution x imatrix variant x seed x row length. */
    for (int t = 0; t < ntypes; t++) {
        for (int d = 0; d < QGEN_N; d++) {
            for (int m = 0; m < QGEN_IMAT_N; m++) {
                for (int s = 0; s < nseeds; s++) {
                    int cols = colsv[(d + m + s) % 3];
                    uint64_t seed = 1000 + 97 * (uint64_t)s + (uint64_t)d;
                    qgen_fill(x, rows, cols, (qgen_dist)d, seed);
                    bool has = qgen_imatrix(im, cols, (qgen_imat)m, seed);
                    char what[96];
                    snprintf(what, sizeof what, "%s/%s seed %d cols %d", qgen_dist_name((qgen_dist)d),
                             qgen_imat_name((qgen_imat)m), s, cols);
                    diff_case(types[t], x, rows, cols, has ? im : NULL, what);
                }
            }
        }
    }

    /* Edge cases, one row of 512 each. */
    const int n = 512;
    tu_rng r = { 77 };
    for (int t = 0; t < ntypes; t++) {
        int type = types[t];
        /* All zero. */
        memset(x, 0, sizeof(float) * n);
        qgen_imatrix(im, n, QGEN_IMAT_LOGNORMAL, 5);
        diff_case(type, x, 1, n, NULL, "all zero");
        diff_case(type, x, 1, n, im, "all zero, imatrix");
        /* Imatrix zero exactly where values are non-zero (and the reverse). */
        for (int j = 0; j < n; j++) {
            x[j] = (j % 3 == 0) ? (float)tu_normal(&r) : 0.f;
            im[j] = (j % 3 == 0) ? 0.f : (float)exp(tu_normal(&r));
        }
        diff_case(type, x, 1, n, im, "imatrix zero where x non-zero");
        for (int j = 0; j < n; j++) im[j] = 0;
        diff_case(type, x, 1, n, im, "imatrix all zero");
        /* A single non-zero value, at several positions and signs. */
        for (int pos = 0; pos < 4; pos++) {
            memset(x, 0, sizeof(float) * n);
            x[pos * 97 + 3] = pos % 2 ? -1.5f : 2.25f;
            qgen_imatrix(im, n, QGEN_IMAT_LOGNORMAL, 9);
            diff_case(type, x, 1, n, NULL, "single non-zero");
            diff_case(type, x, 1, n, im, "single non-zero, imatrix");
        }
        /* Huge and tiny magnitudes, values just above and below the zero threshold, subnormals. */
        const double mags[] = { 6e4, 1e10, 1e30, 1e-5, 1e-12, 1e-14, 1e-15, 9e-16, 1e-30, 1e-40 };
        for (size_t k = 0; k < sizeof mags / sizeof mags[0]; k++) {
            for (int j = 0; j < n; j++) x[j] = (float)(tu_normal(&r) * mags[k]);
            qgen_imatrix(im, n, QGEN_IMAT_ZEROS, 11 + k);
            char what[64];
            snprintf(what, sizeof what, "magnitude %g", mags[k]);
            diff_case(type, x, 1, n, NULL, what);
            diff_case(type, x, 1, n, im, what);
        }
        /* Tiny and huge imatrix weights. */
        for (int j = 0; j < n; j++) {
            x[j] = (float)tu_normal(&r);
            im[j] = (float)(exp(tu_normal(&r)) * ((j / 32) % 2 ? 1e-30 : 1e30));
        }
        diff_case(type, x, 1, n, im, "extreme imatrix");
        /* Values exactly on the table levels and on midpoints between them (ties). */
        static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113 };
        for (int j = 0; j < n; j++) {
            int k = (int)(tu_next(&r) % 16);
            x[j] = (j % 2) ? kv[k] : (k < 15 ? 0.5f * (kv[k] + kv[k + 1]) : -127.f);
            im[j] = 1.0f;
        }
        diff_case(type, x, 1, n, NULL, "levels and midpoints");
        diff_case(type, x, 1, n, im, "levels and midpoints, flat imatrix");
    }

    /* Decoder on random bytes (any bit pattern decodes like the oracle; NaN fp16 excluded). */
    for (int t = 0; t < ntypes; t++) {
        int type = types[t];
        size_t rb = iqf_row_size(type, 4096);
        uint8_t *b = malloc(rb);
        float *yo = malloc(sizeof(float) * 4096), *yr = malloc(sizeof(float) * 4096);
        for (size_t i = 0; i < rb; i++) b[i] = (uint8_t)tu_next(&r);
        size_t bs = iqf_type_get(type)->type_size;
        for (size_t off = 0; off < rb; off += bs) b[off + 1] &= 0x3f; /* finite fp16 d */
        iqf_dequantize(type, b, yo, 1, 4096, 1, NULL, 0);
        oracle_dequantize(type, b, yr, 4096);
        CHECK(memcmp(yo, yr, sizeof(float) * 4096) == 0, "%s: random-byte decode",
              iqf_type_get(type)->name);
        free(b);
        free(yo);
        free(yr);
    }
    free(x);
    free(im);
    return test_finish(name);
}

/* ---------------------------------------------------------------------------------------- */
/* IQF_MODE_BEST of the K-quants (and any type whose best mode needs the same checks). */

static int best_checked_rows;

/* One case in best mode: the same bytes at every SIMD level and at 1 and 3 threads; our
 * decoder and the oracle's agree bitwise on them; the oracle's validator accepts them whenever
 * it accepts the compat (oracle) bytes of the same input. */
static void best_case(int type, const float *x, int64_t rows, int64_t cols, const float *im,
                      const char *what) {
    const iqf_type_info *ti = iqf_type_get(type);
    const size_t bytes = iqf_row_size(type, cols) * (size_t)rows;
    uint8_t *ref = malloc(bytes), *b0 = malloc(bytes), *b1 = malloc(bytes);
    float *yo = malloc(sizeof(float) * (size_t)(rows * cols)), *yr = malloc(sizeof(float) * (size_t)(rows * cols));
    char err[256];
    iqf_quantize_params p = iqf_quantize_default_params();
    p.mode = IQF_MODE_BEST;
    p.simd = IQF_SIMD_SCALAR;
    p.n_threads = 1;
    iqf_status st = iqf_quantize(type, x, b0, rows, cols, im, &p, err, sizeof err);
    CHECK(st == IQF_OK, "%s %s best: %s", ti->name, what, err);
    if (st != IQF_OK) goto out;
    const iqf_simd top = TU_SIMD_TOP;
    for (int simd = IQF_SIMD_SCALAR; simd <= (int)top; simd++) {
        if (!tu_simd_runs(simd)) continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            if (simd == IQF_SIMD_SCALAR && threads == 1) continue;
            p.simd = (iqf_simd)simd;
            p.n_threads = threads;
            memset(b1, 0x5A, bytes);
            st = iqf_quantize(type, x, b1, rows, cols, im, &p, err, sizeof err);
            CHECK(st == IQF_OK && memcmp(b0, b1, bytes) == 0, "%s %s best: simd=%s threads=%d differs from scalar/1",
                  ti->name, what, iqf_simd_name((iqf_simd)simd), threads);
        }
    }
    iqf_dequantize(type, b0, yo, rows, cols, 1, NULL, 0);
    oracle_dequantize(type, b0, yr, rows * cols);
    int64_t bad = -1;
    for (int64_t i = 0; i < rows * cols && bad < 0; i++)
        if (memcmp(&yo[i], &yr[i], 4) != 0) bad = i;
    CHECK(bad < 0, "%s %s best: our decoder and the oracle's differ at value %lld", ti->name, what, (long long)bad);
    oracle_quantize(type, x, ref, rows, cols, im);
    const size_t rb = iqf_row_size(type, cols);
    for (int64_t r = 0; r < rows; r++) {
        if (!oracle_validate(type, ref + r * rb, rb)) continue;
        CHECK(oracle_validate(type, b0 + r * rb, rb), "%s %s best: row %lld rejected by ggml_validate_row_data",
              ti->name, what, (long long)r);
        best_checked_rows++;
    }
out:
    free(ref);
    free(b0);
    free(b1);
    free(yo);
    free(yr);
}

void codec_suite_best(const int *types_, int ntypes_, const int64_t lens[5]) {
    oracle_require();
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED")) == 1;
    const int nseeds = san ? 1 : 3, rows = 3;
    float *x = malloc(sizeof(float) * rows * 8192), *im = malloc(sizeof(float) * 8192);
    char what[128];
    for (int t = 0; t < ntypes_; t++) {
        const int type = types_[t];
        for (int d = 0; d < QGEN_N; d++)
            for (int m = 0; m < QGEN_IMAT_N; m++)
                for (int s = 0; s < nseeds; s++) {
                    const int64_t cols = lens[(d + m + s) % 5];
                    const uint64_t seed = 5000 + (uint64_t)(d * 31 + m * 7 + s);
                    qgen_fill(x, rows, cols, (qgen_dist)d, seed);
                    const bool has = qgen_imatrix(im, cols, (qgen_imat)m, seed);
                    snprintf(what, sizeof what, "%s/%s/seed%d/%lld", qgen_dist_name((qgen_dist)d),
                             qgen_imat_name((qgen_imat)m), s, (long long)cols);
                    best_case(type, x, rows, cols, has ? im : NULL, what);
                }
        /* Edge cases (one row of 256 each, with and without an imatrix). */
        const int64_t cols = 256;
        qgen_imatrix(im, cols, QGEN_IMAT_LOGNORMAL, 7);
        memset(x, 0, sizeof(float) * cols);
        best_case(type, x, 1, cols, NULL, "all-zero");
        best_case(type, x, 1, cols, im, "all-zero+imat");
        x[5] = 1.5f; x[40] = -2.25f; x[255] = 1e-3f;
        best_case(type, x, 1, cols, NULL, "three values");
        best_case(type, x, 1, cols, im, "three values+imat");
        static const float mags[] = { 1e-41f, 1e-38f, 1e-9f, 1e-6f, 3e-5f, 6e4f, 1e8f, 1e18f };
        for (size_t k = 0; k < sizeof mags / sizeof mags[0]; k++) {
            qgen_fill(x, 1, cols, QGEN_OUTLIER, 70 + k);
            for (int64_t j = 0; j < cols; j++) x[j] *= mags[k];
            snprintf(what, sizeof what, "magnitude %g", (double)mags[k]);
            best_case(type, x, 1, cols, NULL, what);
            best_case(type, x, 1, cols, im, what);
        }
        qgen_fill(x, 1, cols, QGEN_GAUSS, 62);
        for (int64_t j = 0; j < cols; j++) im[j] = (j % 3) ? 1e30f : 1e-30f;
        best_case(type, x, 1, cols, im, "imatrix 1e30/1e-30");
        for (int64_t j = 0; j < cols; j++) im[j] = (j / 16) % 2 ? 1.f : 0.f;
        best_case(type, x, 1, cols, im, "imatrix zero on alternate sub-blocks");
        for (int64_t j = 0; j < cols; j++) x[j] = (float)((int)(j % 17) - 8) * 0.5f;
        best_case(type, x, 1, cols, NULL, "half-steps");
        for (int64_t j = 0; j < cols; j++) x[j] = (j & 1) ? 2.0f : -2.0f;
        best_case(type, x, 1, cols, NULL, "pm2");
        for (int64_t j = 0; j < cols; j++) x[j] = (j % 32) < 16 ? 0.75f : -0.0f;
        best_case(type, x, 1, cols, NULL, "constant and signed-zero sub-blocks");
    }
    CHECK(best_checked_rows > 0, "no best-mode row was validated");
    free(x);
    free(im);
}
