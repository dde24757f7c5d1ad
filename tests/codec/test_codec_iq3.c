/*
 * test_codec_iq3.c - IQ3_XXS and IQ3_S: generated tables, input validation, randomized
 * differential tests against the oracle (every distribution x imatrix variant, several seeds and
 * row lengths, every SIMD level, 1 and 3 threads) and targeted edge cases.
 */
#include "codec/iq3_grids.h"
#include "codec_suite.h"
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int types[] = { IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S };
#define NTYPES ((int)(sizeof types / sizeof types[0]))

/* The neighbour lists equal ggml's construction (distances to every grid point, qsort by
 * (distance, index), the points at the nwant smallest distinct distances), done independently. */
static int cmp_pair(const void *a, const void *b) {
    const int *l = a, *r = b;
    return l[0] != r[0] ? (l[0] < r[0] ? -1 : 1) : (l[1] < r[1] ? -1 : l[1] > r[1]);
}

static void test_neighbour_lists(int grid, const uint16_t *keys, int nwant) {
    int bad = 0, ongrid = 0;
    static int d2[512][2];
    for (int key = 0; key < 4096; key++) {
        int gi = -2;
        const uint16_t *nb = iqf_iq3_neighbours(grid, key, &gi);
        int want_gi = -1;
        for (int j = 0; j < grid; j++)
            if (keys[j] == key) want_gi = j;
        if (want_gi >= 0) {
            ongrid++;
            bad += nb != NULL || gi != want_gi;
            continue;
        }
        if (!nb || gi != -1) { bad++; continue; }
        for (int j = 0; j < grid; j++) {
            int s = 0;
            for (int c = 0; c < 4; c++) {
                int d = 2 * ((keys[j] >> 3 * c) & 7) - 2 * ((key >> 3 * c) & 7);
                s += d * d;
            }
            d2[j][0] = s;
            d2[j][1] = j;
        }
        qsort(d2, (size_t)grid, sizeof d2[0], cmp_pair);
        int n = 0, nhave = 1, cur = d2[0][0];
        for (int j = 0; j < grid; j++) {
            if (d2[j][0] > cur) {
                if (nhave == nwant) break;
                cur = d2[j][0];
                nhave++;
            }
            n++;
        }
        if (nb[0] != n) { bad++; continue; }
        for (int j = 0; j < n; j++) bad += nb[1 + j] != d2[j][1];
    }
    CHECK(bad == 0 && ongrid == grid, "grid %d: %d neighbour-list mismatches, %d keys on the grid", grid, bad, ongrid);
}

static void test_tables(void) {
    iqf_iq3_table_stats s;
    CHECK(iqf_iq3_tables_stats(256, &s) == 0, "256 grid");
    printf("iq3 tables 256: %d off-grid keys, %d neighbours (min %d, max %d), built in %.3f ms\n",
           s.n_offgrid, s.n_neighbours, s.min_list, s.max_list, s.build_ms);
    /* FORMATS.md section 3 */
    CHECK(s.n_offgrid == 3840 && s.n_neighbours == 18985 && s.min_list == 2 && s.max_list == 36,
          "256 grid tables: %d %d %d %d", s.n_offgrid, s.n_neighbours, s.min_list, s.max_list);
    CHECK(iqf_iq3_tables_stats(512, &s) == 0, "512 grid");
    printf("iq3 tables 512: %d off-grid keys, %d neighbours (min %d, max %d), built in %.3f ms\n",
           s.n_offgrid, s.n_neighbours, s.min_list, s.max_list, s.build_ms);
    CHECK(s.n_offgrid == 3584 && s.n_neighbours == 24733 && s.min_list == 3 && s.max_list == 38,
          "512 grid tables: %d %d %d %d", s.n_offgrid, s.n_neighbours, s.min_list, s.max_list);
    CHECK(iqf_iq3_tables_stats(128, &s) == -1, "other grid size");
    test_neighbour_lists(256, iqf_iq3xxs_keys, 2);
    test_neighbour_lists(512, iqf_iq3s_keys, 3);
    /* Decoder grids relate to the encoder keys as FORMATS.md section 0 says. */
    int bad = 0;
    for (int k = 0; k < 512; k++) {
        for (int c = 0; c < 4; c++) {
            int l = (iqf_iq3s_keys[k] >> 3 * c) & 7;
            bad += (int)((iqf_iq3s_grid[k] >> 8 * c) & 255) != 2 * l + 1;
            if (k < 256) {
                l = (iqf_iq3xxs_keys[k] >> 3 * c) & 7;
                bad += (int)((iqf_iq3xxs_grid[k] >> 8 * c) & 255) != (l == 7 ? 62 : 4 * (2 * l + 1));
            }
        }
    }
    for (int i = 0; i < 128; i++)
        bad += iqf_iq3_ksigns[i] != (i | (__builtin_popcount(i) & 1 ? 0x80 : 0));
    CHECK(bad == 0, "%d grid/sign table entries inconsistent", bad);
}

static void test_validation(void) {
    for (int ti = 0; ti < NTYPES; ti++) {
        const int type = types[ti];
        const char *name = iqf_type_get(type)->name;
        float x[512];
        uint8_t y[4 * 110];
        char err[256];
        for (int i = 0; i < 512; i++) x[i] = (float)sin(i);
        iqf_quantize_params p = iqf_quantize_default_params();
        err[0] = 0;
        CHECK(iqf_quantize(type, x, y, 1, 300, NULL, &p, err, sizeof err) == IQF_E_SHAPE, "%s shape", name);
        CHECK(strstr(err, "256") && strstr(err, "300"), "%s shape message: %s", name, err);
        x[300] = NAN;
        CHECK(iqf_quantize(type, x, y, 2, 256, NULL, &p, err, sizeof err) == IQF_E_NONFINITE, "%s NaN", name);
        CHECK(strstr(err, "row 1") && strstr(err, "column 44") && strstr(err, "NaN"), "%s NaN message: %s", name, err);
        x[300] = -INFINITY;
        CHECK(iqf_quantize(type, x, y, 2, 256, NULL, &p, err, sizeof err) == IQF_E_NONFINITE, "%s Inf", name);
        CHECK(strstr(err, "row 1") && strstr(err, "column 44") && strstr(err, "Inf"), "%s Inf message: %s", name, err);
        x[300] = 0;
        float im[256];
        for (int i = 0; i < 256; i++) im[i] = 1;
        im[7] = NAN;
        CHECK(iqf_quantize(type, x, y, 1, 256, im, &p, err, sizeof err) == IQF_E_NONFINITE, "%s imatrix NaN", name);
        CHECK(!iqf_requires_imatrix(type), "%s does not need an imatrix", name);
        CHECK(iqf_dequantize(type, y, x, 1, 100, 1, err, sizeof err) == IQF_E_SHAPE, "%s dequant shape", name);
    }
}

static void test_random(void) {
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED"));
    const int nseeds = san ? 1 : 6;
    static const int64_t lens[] = { 256, 768, 2048, 4096 };
    for (int ti = 0; ti < NTYPES; ti++) {
        for (int d = 0; d < QGEN_N; d++) {
            for (int m = 0; m < QGEN_IMAT_N; m++) {
                for (int s = 0; s < nseeds; s++) {
                    const int64_t cols = lens[(d + m + s) % 4];
                    const int64_t rows = cols >= 2048 ? 2 : 6;
                    float *x = malloc(sizeof(float) * (size_t)(rows * cols));
                    float *im = malloc(sizeof(float) * (size_t)cols);
                    const uint64_t seed = 1000 + 37 * (uint64_t)s + 7 * (uint64_t)d + (uint64_t)m;
                    qgen_fill(x, rows, cols, (qgen_dist)d, seed);
                    const bool has = qgen_imatrix(im, cols, (qgen_imat)m, seed);
                    char label[128];
                    snprintf(label, sizeof label, "%s %s/%s seed %llu %lldx%lld", iqf_type_get(types[ti])->name,
                             qgen_dist_name((qgen_dist)d), qgen_imat_name((qgen_imat)m),
                             (unsigned long long)seed, (long long)rows, (long long)cols);
                    qgen_diff(types[ti], x, rows, cols, has ? im : NULL, label);
                    free(x);
                    free(im);
                }
            }
        }
    }
}

/* Hand-made inputs for the odd paths of the encoders. */
static void test_edges(void) {
    enum { C = 1024 };
    static float x[4 * C], im[C];
    for (int ti = 0; ti < NTYPES; ti++) {
        const int type = types[ti];
        const char *name = iqf_type_get(type)->name;
        char label[128];
        tu_rng r = { 99 };
        for (int i = 0; i < C; i++) im[i] = (float)exp(tu_normal(&r));

        /* All-zero rows (and -0.0). */
        for (int i = 0; i < 4 * C; i++) x[i] = (i & 1) ? -0.0f : 0.0f;
        snprintf(label, sizeof label, "%s all zero", name);
        qgen_diff(type, x, 4, C, NULL, label);
        qgen_diff(type, x, 4, C, im, label);

        /* A single non-zero value per row, at various positions and signs. */
        for (int i = 0; i < 4 * C; i++) x[i] = 0;
        x[5] = 1.5f; x[C + 300] = -2.0f; x[2 * C + 1023] = 1e-3f; x[3 * C + 512] = -7e4f;
        snprintf(label, sizeof label, "%s single value", name);
        qgen_diff(type, x, 4, C, NULL, label);
        qgen_diff(type, x, 4, C, im, label);

        /* Gaussian with zero sub-blocks and super-blocks, and sub-blocks below 1e-8. */
        for (int i = 0; i < 4 * C; i++) x[i] = (float)tu_normal(&r);
        for (int row = 0; row < 4; row++) {
            float *xr = x + row * C;
            memset(xr + 32 * (row + 1), 0, 32 * sizeof(float));       /* a zero sub-block */
            memset(xr + 256 * ((row + 2) % 4), 0, 256 * sizeof(float)); /* a zero super-block */
            for (int i = 0; i < 32; i++) xr[32 * (6 - row) + i] = (float)(tu_normal(&r) * 1e-9);
            for (int i = 224; i < 256; i++) xr[i] = 0; /* last sub-block of super-block 0 */
        }
        snprintf(label, sizeof label, "%s zero and tiny sub-blocks", name);
        qgen_diff(type, x, 4, C, NULL, label);
        qgen_diff(type, x, 4, C, im, label);

        /* Importance zero exactly where the values are non-zero (and the reverse). */
        for (int i = 0; i < 4 * C; i++) x[i] = (i % 3) ? (float)tu_normal(&r) : 0.0f;
        float imz[C];
        for (int i = 0; i < C; i++) imz[i] = (i % 3) ? 0.0f : 1.0f;
        snprintf(label, sizeof label, "%s imatrix zero on the values", name);
        qgen_diff(type, x, 4, C, imz, label);
        for (int i = 0; i < C; i++) imz[i] = (i % 3) ? 1.0f : 0.0f;
        qgen_diff(type, x, 4, C, imz, label);
        /* -0.0 importance (accepted by the registry: not < 0) and values of both zero signs. */
        for (int i = 0; i < C; i++) imz[i] = (i % 5 == 1) ? -0.0f : im[i];
        for (int i = 0; i < 4 * C; i++) if (i % 7 == 3) x[i] = (i & 8) ? -0.0f : 0.0f;
        snprintf(label, sizeof label, "%s imatrix -0.0", name);
        qgen_diff(type, x, 4, C, imz, label);

        /* Only the parity-flipped value carries weight: the fitted scale comes out negative
         * (ggml's "should never happen" branch that flips the signs). */
        for (int i = 0; i < 4 * C; i++) x[i] = (float)tu_normal(&r);
        for (int i = 0; i < C; i++) imz[i] = (i % 8 == 0) ? 1.0f : 0.0f;
        for (int row = 0; row < 4; row++)
            for (int g = 0; g < C / 8; g++) {
                float *xg = x + row * C + 8 * g;
                xg[0] = 1e-25f * (float)(1 + row);                         /* smallest weight*x^2 */
                for (int i = 1; i < 8; i++) xg[i] = fabsf(xg[i]) + 0.1f;
                xg[3] = -xg[3];                                            /* one negative */
            }
        snprintf(label, sizeof label, "%s negative scale", name);
        qgen_diff(type, x, 4, C, imz, label);

        /* Huge and tiny magnitudes (fp16 d overflow/underflow, subnormal scales). */
        static const float mags[] = { 1e-30f, 1e-20f, 3e-8f, 1e-5f, 60000.f, 1e8f };
        for (size_t mi = 0; mi < sizeof mags / sizeof mags[0]; mi++) {
            for (int i = 0; i < 4 * C; i++) x[i] = (float)tu_normal(&r) * mags[mi];
            snprintf(label, sizeof label, "%s magnitude %g", name, (double)mags[mi]);
            qgen_diff(type, x, 4, C, NULL, label);
            qgen_diff(type, x, 4, C, im, label);
        }
        /* Mixed magnitudes inside one super-block. */
        for (int i = 0; i < 4 * C; i++) x[i] = (float)(tu_normal(&r) * pow(10.0, (double)((i / 32) % 9) - 4));
        snprintf(label, sizeof label, "%s mixed magnitudes", name);
        qgen_diff(type, x, 4, C, NULL, label);
        qgen_diff(type, x, 4, C, im, label);
    }
}

/* The IQ3_S corrupt-oracle case, explicitly: a zero sub-block followed by non-zero ones. Our
 * block must differ from the oracle's, be registered in compat_oracle_corrupt, reconstruct with
 * a lower error, and keep the non-zero sub-blocks in their own slots (decode close to x). */
static void test_iq3_s_corrupt_oracle(void) {
    enum { C = 1024 };
    static float x[C], yo[C], yr[C];
    static uint8_t qo[4 * 110], qr[4 * 110];
    tu_rng r = { 7 };
    for (int i = 0; i < C; i++) x[i] = (float)tu_normal(&r);
    memset(x + 0, 0, 32 * sizeof(float));         /* block 0: sub-block 0 zero */
    memset(x + 256 + 96, 0, 32 * sizeof(float));   /* block 1: sub-block 3 zero */
    memset(x + 512 + 224, 0, 32 * sizeof(float));  /* block 2: last sub-block zero: not corrupt */
    for (int imat = 0; imat < 2; imat++) {
        float im[C];
        for (int i = 0; i < C; i++) im[i] = (float)exp(tu_normal(&r));
        const float *w = imat ? im : NULL;
        iqf_quantize_params p = iqf_quantize_default_params();
        char err[256];
        CHECK(iqf_quantize(IQF_TYPE_IQ3_S, x, qo, 1, C, w, &p, err, sizeof err) == IQF_OK, "%s", err);
        oracle_quantize(IQF_TYPE_IQ3_S, x, qr, 1, C, w);
        iqf_dequantize(IQF_TYPE_IQ3_S, qo, yo, 1, C, 1, NULL, 0);
        oracle_dequantize(IQF_TYPE_IQ3_S, qr, yr, C);
        for (int b = 0; b < 4; b++) {
            const bool corrupt = b < 2;
            CHECK(compat_oracle_corrupt(IQF_TYPE_IQ3_S, x, C, b) == corrupt, "block %d registration", b);
            const bool differ = memcmp(qo + 110 * b, qr + 110 * b, 110) != 0;
            CHECK(differ == corrupt, "imat %d block %d: bytes %s", imat, b, differ ? "differ" : "equal");
            const double eo = qgen_sse(x + 256 * b, yo + 256 * b, 256), er = qgen_sse(x + 256 * b, yr + 256 * b, 256);
            if (corrupt) {
                printf("iq3_s corrupt-oracle block %d (%s imatrix): squared error ours %.2f, oracle %.2f\n", b,
                       imat ? "with" : "no", eo, er);
                CHECK(eo < 0.5 * er, "imat %d block %d: our error %g vs oracle %g", imat, b, eo, er);
            }
            else CHECK(eo == er, "imat %d block %d: same bytes, same error", imat, b);
        }
    }
}

int main(void) {
    test_tables();
    test_validation();
    oracle_require();
    test_iq3_s_corrupt_oracle();
    test_edges();
    test_random();
    codec_suite_best_flat(types, NTYPES);
    return test_finish("test_codec_iq3");
}
