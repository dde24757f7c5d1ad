/*
 * bench_iq1iq4.c - single-thread encode throughput of IQ4_NL, IQ4_XS, IQ1_S, IQ1_M against the
 * oracle (ggml 0.25.1) in the same run, on ROWS x 4096 N(0,1) floats with imatrix exp(N(0,1)).
 * Times are thread CPU seconds, the minimum over REPS alternating runs (the machine is shared, so
 * single runs are noisy); every SIMD level's bytes are compared with the oracle's.
 *
 * usage: bench_iq1iq4 [rows=4096] [reps=3] [type ...]
 */
#include "codec/codec.h"
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int rows = argc > 1 ? atoi(argv[1]) : 4096;
    const int cols = 4096;
    if (rows <= 0) rows = 4096;
    if (!oracle_load()) {
        fprintf(stderr, "bench_iq1iq4: oracle not available\n");
        return 77;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 3;
    if (reps <= 0) reps = 1;
    const char *deftypes[] = { "iq4_nl", "iq4_xs", "iq1_s", "iq1_m" };
    int ntypes = argc > 3 ? argc - 3 : 4;
    const char **tnames = argc > 3 ? (const char **)(argv + 3) : deftypes;

    size_t n = (size_t)rows * cols;
    float *x = malloc(n * sizeof(float)), *im = malloc(cols * sizeof(float));
    tu_rng r = { 1234 };
    for (size_t i = 0; i < n; i++) x[i] = (float)tu_normal(&r);
    for (int j = 0; j < cols; j++) im[j] = (float)exp(tu_normal(&r));

    printf("| type | imatrix | oracle MB/s | simd | iqforge MB/s | speed-up | bytes | table init ms |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    for (int t = 0; t < ntypes; t++) {
        int type = iqf_type_from_name(tnames[t]);
        const iqf_codec *c = iqf_codec_get(type);
        if (!c || !c->quantize_row) {
            printf("| %s | - | no encoder |\n", tnames[t]);
            continue;
        }
        double t0 = cpu_now();
        if (c->init) c->init();
        double init_ms = 1e3 * (cpu_now() - t0);
        size_t bytes = iqf_row_size(type, cols) * (size_t)rows;
        uint8_t *ref = malloc(bytes), *ours = malloc(bytes);
        for (int withim = 0; withim <= 1; withim++) {
            const float *imat = withim ? im : NULL;
            if (!imat && iqf_requires_imatrix(type)) continue;
            oracle_quantize(type, x, ref, 1, cols, imat); /* oracle table init outside timing */
            double to = 1e30, tq[4] = { 1e30, 1e30, 1e30, 1e30 };
            int differ[4] = { 0, 0, 0, 0 };
            const int top = (int)iqf_simd_detect();
            for (int rep = 0; rep < reps; rep++) {
                t0 = cpu_now();
                oracle_quantize(type, x, ref, rows, cols, imat);
                double t = cpu_now() - t0;
                to = t < to ? t : to;
                for (int simd = IQF_SIMD_SCALAR; simd <= top; simd++) {
                    iqf_quantize_params p = iqf_quantize_default_params();
                    p.n_threads = 1;
                    p.simd = (iqf_simd)simd;
                    memset(ours, 0, bytes);
                    t0 = cpu_now();
                    iqf_quantize(type, x, ours, rows, cols, imat, &p, NULL, 0);
                    t = cpu_now() - t0;
                    tq[simd] = t < tq[simd] ? t : tq[simd];
                    if (memcmp(ours, ref, bytes)) differ[simd] = 1;
                }
            }
            double mb = (double)n * 4 / 1e6;
            for (int simd = IQF_SIMD_SCALAR; simd <= top; simd++) {
                printf("| %s | %s | %.1f | %s | %.1f | %.2fx | %s | %.2f |\n", tnames[t],
                       withim ? "yes" : "no", mb / to, iqf_simd_name((iqf_simd)simd), mb / tq[simd],
                       to / tq[simd], differ[simd] ? "DIFFER" : "identical", init_ms);
                fflush(stdout);
            }
        }
        free(ref);
        free(ours);
    }
    free(x);
    free(im);
    return 0;
}
