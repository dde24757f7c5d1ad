/*
 * bench_iq2.c - single-thread encode throughput of IQ2_XXS / IQ2_XS / IQ2_S, iqforge (every SIMD
 * level) vs the oracle (ggml 0.25.1), on ROWSx4096 N(0,1) floats with imatrix exp(N(0,1)).
 * Also checks that the bytes are identical. Usage: bench_iq2 [rows=4096] [type-name ...]
 * MB/s = megabytes (1e6) of float32 input per second of process CPU time; each figure is the
 * best of IQF_BENCH_REPS runs (default 3; the oracle: best of 2) to damp a shared machine.
 * Then single-thread decode speed (MB/s of float32 output) on the oracle's bytes.
 */
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 4096, cols = 4096;
    if (rows <= 0) rows = 4096;
    const char *names[8] = { "iq2_xxs", "iq2_xs", "iq2_s" };
    int nn = 3;
    if (argc > 2) {
        nn = 0;
        for (int i = 2; i < argc && nn < 8; i++) names[nn++] = argv[i];
    }
    bool have_oracle = oracle_load();
    const char *re = getenv("IQF_BENCH_REPS");
    int reps = re ? atoi(re) : 3;
    if (reps < 1) reps = 1;
    float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *w = malloc(sizeof(float) * (size_t)cols);
    tu_rng r = { 12345 };
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)tu_normal(&r);
    for (int64_t j = 0; j < cols; j++) w[j] = (float)exp(tu_normal(&r));
    double mb = (double)(rows * cols) * 4 / 1e6;
    char dqline[8][128];
    int ndq = 0;
    printf("| type | imatrix | impl | init ms | encode s | MB/s | vs oracle | bytes |\n|---|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < nn; t++) {
        int type = iqf_type_from_name(names[t]);
        if (type < 0) continue;
        size_t bytes = iqf_row_size(type, cols) * (size_t)rows;
        uint8_t *ref = malloc(bytes), *ours = malloc(bytes);
        for (int im = 0; im < 2; im++) {
            const float *qw = im == 0 ? w : NULL;
            if (!qw && iqf_requires_imatrix(type)) continue;
            double oracle_mbs = 0;
            if (have_oracle) {
                float tmp[256] = { 0 };
                uint8_t tb[128];
                double t0 = cpu_s();
                oracle_quantize(type, tmp, tb, 1, 256, w); /* table init */
                double t1 = cpu_s(), best = 1e30;
                for (int r = 0; r < (reps > 1 ? 2 : 1); r++) {
                    double a = cpu_s();
                    oracle_quantize(type, x, ref, rows, cols, qw);
                    double b = cpu_s();
                    best = b - a < best ? b - a : best;
                }
                double t2 = t1 + best;
                oracle_mbs = mb / (t2 - t1);
                printf("| %s | %s | oracle | %.0f | %.2f | %.1f | 1.00 | |\n", names[t], qw ? "yes" : "no",
                       1e3 * (t1 - t0), t2 - t1, oracle_mbs);
            }
            for (int s = IQF_SIMD_SCALAR; s <= (int)iqf_simd_detect(); s++) {
                iqf_quantize_params p = iqf_quantize_default_params();
                p.n_threads = 1;
                p.simd = (iqf_simd)s;
                char err[256];
                double t0 = cpu_s();
                iqf_quantize(type, x, ours, 1, 256, w, &p, err, sizeof err); /* table init */
                double t1 = cpu_s(), best = 1e30;
                for (int r = 0; r < reps; r++) {
                    double a = cpu_s();
                    if (iqf_quantize(type, x, ours, rows, cols, qw, &p, err, sizeof err) != IQF_OK) {
                        printf("error: %s\n", err);
                        return 1;
                    }
                    double b = cpu_s();
                    best = b - a < best ? b - a : best;
                }
                double t2 = t1 + best;
                double mbs = mb / (t2 - t1);
                const char *same = have_oracle ? (memcmp(ours, ref, bytes) == 0 ? "identical" : "DIFFER") : "-";
                printf("| %s | %s | iqforge %s | %.1f | %.2f | %.1f | %.2f | %s |\n", names[t], qw ? "yes" : "no",
                       iqf_simd_name((iqf_simd)s), 1e3 * (t1 - t0), t2 - t1, mbs,
                       oracle_mbs > 0 ? mbs / oracle_mbs : 0.0, same);
                fflush(stdout);
            }
        }
        if (have_oracle) { /* decode speed on the oracle's bytes of the last encode */
            float *y = malloc(sizeof(float) * (size_t)(rows * cols));
            char err[256];
            memset(y, 0, sizeof(float) * (size_t)(rows * cols)); /* page faults outside */
            double to = 1e30, ti = 1e30;
            for (int r = 0; r < 3; r++) {
                double a0 = cpu_s();
                iqf_dequantize(type, ref, y, rows, cols, 1, err, sizeof err);
                double a1 = cpu_s();
                oracle_dequantize(type, ref, y, rows * cols);
                double a2 = cpu_s();
                ti = a1 - a0 < ti ? a1 - a0 : ti;
                to = a2 - a1 < to ? a2 - a1 : to;
            }
            double a = 0, b = ti, c = ti + to;
            ndq++;
            snprintf(dqline[ndq - 1], sizeof dqline[0], "| %s | %.0f | %.0f | %.2f |", names[t],
                     mb / (c - b), mb / (b - a), (c - b) / (b - a));
            free(y);
        }
        free(ref);
        free(ours);
    }
    if (ndq) {
        printf("\n| decode | oracle MB/s | iqforge MB/s | ratio |\n|---|---|---|---|\n");
        for (int i = 0; i < ndq; i++) printf("%s\n", dqline[i]);
    }
    free(x);
    free(w);
    return 0;
}
