/*
 * bench_kq.c - single-thread encode throughput of the legacy and K-quant codecs vs the oracle
 * (ggml 0.25.1), on ROWS x 4096 N(0,1) float32 with and without an exp(N(0,1)) imatrix.
 * Every run's bytes are compared with the oracle's.
 *
 * usage: bench_kq [rows (default 1024)] [type names...]   (BENCH_SIMD=3: time only AVX-512;
 *        BENCH_IMAT=0/1: only without/with the imatrix; BENCH_MODE=best: time IQF_MODE_BEST
 *        against the same oracle runs, its bytes compared across SIMD levels instead)
 * MB/s = float32 input bytes / seconds (best of several runs).
 */
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Best of up to 9 interleaved rounds (at least 3; stop after ~3 s) to see through a shared
 * machine's noise. */
#define REPS_MAX 9

/* BENCH_CPUTIME=1: the thread's CPU time instead of wall time (steadier on a loaded machine). */
static double now(void) {
    static int cpu = -1;
    if (cpu < 0) cpu = getenv("BENCH_CPUTIME") && atoi(getenv("BENCH_CPUTIME")) == 1;
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    oracle_require();
    int64_t rows = argc > 1 ? atoll(argv[1]) : 1024, cols = 4096;
    if (rows <= 0) rows = 1024;
    static const char *const all[] = { "q4_0", "q4_1", "q5_0", "q5_1", "q8_0",
                                       "q2_K", "q3_K", "q4_K", "q5_K", "q6_K" };
    const char *const *names = argc > 2 ? (const char *const *)argv + 2 : all;
    int ntypes = argc > 2 ? argc - 2 : (int)(sizeof(all) / sizeof(all[0]));

    float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *im = malloc(sizeof(float) * (size_t)cols);
    qgen_fill(x, rows, cols, QGEN_GAUSS, 1);
    qgen_imatrix(im, cols, QGEN_IMAT_LOGNORMAL, 1);
    const double mb = (double)(rows * cols) * 4 / 1e6;
    iqf_simd top = iqf_simd_detect();
    /* BENCH_SIMD=2 or 3: time only levels from there up (for profiling). */
    int lo_simd = getenv("BENCH_SIMD") ? atoi(getenv("BENCH_SIMD")) : IQF_SIMD_SCALAR;
    if (lo_simd < IQF_SIMD_SCALAR || lo_simd > (int)top) lo_simd = IQF_SIMD_SCALAR;

    const bool best_mode = getenv("BENCH_MODE") && strcmp(getenv("BENCH_MODE"), "best") == 0;
    if (best_mode) printf("mode best: bytes column compares the SIMD levels with each other\n");
    printf("| type | imatrix | oracle MB/s | scalar MB/s | avx2 MB/s | avx512 MB/s | best/oracle | bytes |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---|\n");
    for (int t = 0; t < ntypes; t++) {
        int type = iqf_type_from_name(names[t]);
        if (type < 0 || !iqf_can_encode(type)) { fprintf(stderr, "skip %s\n", names[t]); continue; }
        size_t bytes = iqf_row_size(type, cols) * (size_t)rows;
        uint8_t *ref = malloc(bytes), *ours = malloc(bytes), *first = malloc(bytes);
        for (int withim = 0; withim < 2; withim++) {
            if (getenv("BENCH_IMAT") && atoi(getenv("BENCH_IMAT")) != withim) continue;
            const float *imat = withim ? im : NULL;
            /* Runs interleave (oracle, then each SIMD level, repeated) so that load changes on a
             * shared machine hit all contenders alike; each keeps its best time. */
            double best_o = 1e30, best_s[4] = { 1e30, 1e30, 1e30, 1e30 }, spent = 0;
            bool same = true;
            for (int r = 0; r < REPS_MAX && (r < 3 || spent < 3.0); r++) {
                double t0 = now();
                oracle_quantize(type, x, ref, rows, cols, imat);
                double dt = now() - t0;
                spent += dt;
                if (dt < best_o) best_o = dt;
                for (int s = lo_simd; s <= (int)top; s++) {
                    iqf_quantize_params p = iqf_quantize_default_params();
                    p.n_threads = 1;
                    p.simd = (iqf_simd)s;
                    if (best_mode) p.mode = IQF_MODE_BEST;
                    memset(ours, 0, bytes);
                    t0 = now();
                    iqf_quantize(type, x, ours, rows, cols, imat, &p, NULL, 0);
                    dt = now() - t0;
                    spent += dt;
                    if (dt < best_s[s]) best_s[s] = dt;
                    if (!best_mode) same &= memcmp(ours, ref, bytes) == 0;
                    else if (r == 0 && s == lo_simd) memcpy(first, ours, bytes);
                    else same &= memcmp(ours, first, bytes) == 0;
                }
            }
            double mbs[4] = { 0, 0, 0, 0 }, best_ours = 0;
            for (int s = lo_simd; s <= (int)top; s++) {
                mbs[s] = mb / best_s[s];
                if (mbs[s] > best_ours) best_ours = mbs[s];
            }
            printf("| %s | %s | %.0f | %.0f | %.0f | %.0f | %.2fx | %s |\n", names[t], withim ? "yes" : "no",
                   mb / best_o, mbs[1], mbs[2], mbs[3], best_ours / (mb / best_o),
                   same ? "identical" : "DIFFER");
            fflush(stdout);
        }
        free(ref);
        free(ours);
        free(first);
    }
    free(x);
    free(im);
    return 0;
}
