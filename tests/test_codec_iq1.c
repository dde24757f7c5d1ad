/*
 * test_codec_iq1.c - IQ1_S and IQ1_M against the oracle (ggml 0.25.1): randomized differential
 * tests over every distribution x imatrix variant (bytes at every SIMD level, 1 and 3 threads;
 * our decoder on the oracle's bytes bitwise), plus targeted edge cases. IQ1_S requires an
 * imatrix (as in ggml); IQ1_M is also tested without one.
 */
#include "codec/codec.h"
#include "codec/iqgrid.h"
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The IQ1 grid tables (built by iqgrid.c for ggml's iq2xs_init_impl(IQ1_S)): 2048 points, every
 * other 2-bit key of the 43692 has a non-empty neighbour list of grid indices. Build time is
 * printed (docs/perf/iq1iq4.md), not asserted. */
static void check_tables(void) {
    double t0 = now_ms();
    const iqf_iqgrid *g = iqf_iqgrid_get(IQF_IQGRID_IQ1S);
    double t1 = now_ms();
    const iqf_codec *c = iqf_codec_get(IQF_TYPE_IQ1_S);
    if (c && c->init) c->init();
    double t2 = now_ms();
    printf("test_codec_iq1: iq1s grid tables %.1f ms, codec init (neighbour keys) %.1f ms\n", t1 - t0, t2 - t1);
    CHECK(g != NULL, "iqgrid IQ1S");
    if (!g) return;
    CHECK(g->size == 2048 && g->nwant == 3, "grid size %d nwant %d", g->size, g->nwant);
    CHECK(g->n_offgrid == IQF_IQGRID_KMAP_SIZE - 2048, "off-grid keys %d", (int)g->n_offgrid);
    int bad = 0;
    for (int k = 0; k < 2048; k++)
        if (g->kmap[iqf_iq1s_keys[k]] != k) bad++;
    long total = 0;
    for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) {
        if (g->kmap[u] >= 0) continue;
        const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
        if (nb[0] < 1) bad++;
        for (int j = 1; j <= nb[0]; j++)
            if (nb[j] >= 2048) bad++;
        total += nb[0];
    }
    CHECK(bad == 0, "%d inconsistent kmap/neighbour entries", bad);
    CHECK(total == g->n_neighbours, "neighbour total %ld vs %d", total, (int)g->n_neighbours);
}

static const int types[] = { IQF_TYPE_IQ1_S, IQF_TYPE_IQ1_M };

static void diff_case(int type, float *x, int rows, int cols, const float *imat, const char *what) {
    char label[160];
    snprintf(label, sizeof label, "%s %s", iqf_type_get(type)->name, what);
    if (!imat && iqf_requires_imatrix(type)) {
        /* IQ1_S: ggml asserts; the registry refuses cleanly. */
        uint8_t q[64];
        iqf_status st = iqf_quantize(type, x, q, 1, 256, NULL, NULL, NULL, 0);
        CHECK(st == IQF_E_NEED_IMATRIX, "%s: status %d without imatrix", label, (int)st);
        return;
    }
    qgen_diff(type, x, rows, cols, imat, label);
}

int main(void) {
    check_tables();
    oracle_require();
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED"));
    const int nseeds = san ? 1 : 3;
    const int rows = san ? 2 : 6;
    const int colsv[] = { 256, 1024, 2816 };

    float *x = malloc(sizeof(float) * 8 * 4096), *im = malloc(sizeof(float) * 4096);

    /* Every distribution x imatrix variant x seed x row length. */
    for (size_t t = 0; t < 2; t++) {
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
    for (size_t t = 0; t < 2; t++) {
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
    for (size_t t = 0; t < 2; t++) {
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
    return test_finish("test_codec_iq1");
}
