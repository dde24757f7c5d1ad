/*
 * bench_codecs.c - encoder throughput of iqforge vs the oracle (ggml 0.25.1's
 * ggml_quantize_chunk), measured in the same run on the same data, bytes checked identical.
 *
 * Data: rows x cols float32 from N(0,1); imatrix[j] = exp(N(0,1)). Every type the registry can
 * encode is measured with the imatrix, and without it where ggml allows. Single thread; the
 * figure is MB/s of float32 input (1 MB = 1e6 bytes) from the thread's CPU time (robust on a
 * shared machine), best of --reps runs; oracle and iqforge runs are interleaved. Then thread
 * scaling of one type (wall time, 1..iqf_cpu_count threads, output checked identical).
 *
 *   bench_codecs [--types iq3_xxs,iq3_s] [--rows N] [--cols N] [--reps N]
 *                [--scaling-type iq3_xxs|none] [--scalar] [--simd scalar|avx2|avx512|neon] [--best]
 *
 * --best adds a row per type and imatrix setting for the `best` encoder mode (IQF_MODE_BEST),
 * timed against the same oracle run; its bytes are checked to decode bitwise alike with the
 * oracle's decoder and ours, and to be identical at the scalar level ("valid, same at scalar").
 * --simd picks iqforge's instruction set (default: the best the CPU has); --scalar also measures
 * the portable scalar path. Prints markdown tables.
 */
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct timing {
    double cpu, wall, proc; /* calling thread's CPU, wall, whole process's CPU (all threads) */
} timing;

static void usage(void) {
    fprintf(stderr,
            "usage: bench_codecs [--types t1,t2,...] [--rows N] [--cols N] [--reps N]\n"
            "                    [--scaling-type TYPE|none] [--scalar] [--simd scalar|avx2|avx512|neon]\n");
    exit(2);
}

static bool type_selected(const char *list, const char *name) {
    if (!list) return true;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0) return true;
        if (!e) break;
        p = e + 1;
    }
    return false;
}

/* Types ggml 0.25.1's ggml_quantize_chunk can produce (it aborts on the others, e.g. q8_K). */
static bool oracle_can_quantize(int type) {
    switch (type) {
    case IQF_TYPE_F32: case IQF_TYPE_F16: case IQF_TYPE_BF16:
    case IQF_TYPE_Q4_0: case IQF_TYPE_Q4_1: case IQF_TYPE_Q5_0: case IQF_TYPE_Q5_1: case IQF_TYPE_Q8_0:
    case IQF_TYPE_Q2_K: case IQF_TYPE_Q3_K: case IQF_TYPE_Q4_K: case IQF_TYPE_Q5_K: case IQF_TYPE_Q6_K:
    case IQF_TYPE_IQ2_XXS: case IQF_TYPE_IQ2_XS: case IQF_TYPE_IQ2_S: case IQF_TYPE_IQ3_XXS:
    case IQF_TYPE_IQ3_S: case IQF_TYPE_IQ1_S: case IQF_TYPE_IQ1_M: case IQF_TYPE_IQ4_NL:
    case IQF_TYPE_IQ4_XS: case IQF_TYPE_TQ1_0: case IQF_TYPE_TQ2_0: case IQF_TYPE_MXFP4:
    case IQF_TYPE_NVFP4: case IQF_TYPE_Q1_0: case IQF_TYPE_Q2_0:
        return oracle_blck_size(type) > 0;
    default:
        return false;
    }
}

/* Our encoder: returns the timing; status in *st. */
static iqf_mode bench_mode = IQF_MODE_COMPAT; /* set around the --best rows only */

static timing run_ours(int type, const float *x, void *dst, int64_t rows, int64_t cols,
                       const float *im, int threads, iqf_simd simd, iqf_status *st) {
    iqf_quantize_params p = iqf_quantize_default_params();
    p.mode = bench_mode;
    p.n_threads = threads;
    p.simd = simd;
    char err[256] = "";
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
    double p0 = now_s(CLOCK_PROCESS_CPUTIME_ID);
    *st = iqf_quantize(type, x, dst, rows, cols, im, &p, err, sizeof err);
    timing t = { now_s(CLOCK_THREAD_CPUTIME_ID) - c0, now_s(CLOCK_MONOTONIC) - w0,
                 now_s(CLOCK_PROCESS_CPUTIME_ID) - p0 };
    if (*st) fprintf(stderr, "iqf_quantize(%s): %s\n", iqf_type_get(type)->name, err);
    return t;
}

static timing run_oracle(int type, const float *x, void *dst, int64_t rows, int64_t cols,
                         const float *im) {
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID), w0 = now_s(CLOCK_MONOTONIC);
    oracle_quantize(type, x, dst, rows, cols, im);
    timing t = { now_s(CLOCK_THREAD_CPUTIME_ID) - c0, now_s(CLOCK_MONOTONIC) - w0, 0 };
    return t;
}

/* "yes", "yes (N corrupt-oracle blocks corrected)" or "NO (N blocks differ)". */
static const char *compare(int type, const float *x, const uint8_t *a, const uint8_t *b,
                           int64_t rows, int64_t cols, char *buf, size_t len) {
    const iqf_type_info *ti = iqf_type_get(type);
    size_t rb = iqf_row_size(type, cols);
    if (memcmp(a, b, rb * (size_t)rows) == 0) return "yes";
    int64_t nb = cols / ti->blck_size, bad = 0, fixed = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < nb; k++) {
            size_t off = (size_t)r * rb + (size_t)k * ti->type_size;
            if (memcmp(a + off, b + off, ti->type_size) == 0) continue;
            if (compat_oracle_corrupt(type, x + r * cols, cols, k)) fixed++;
            else bad++;
        }
    if (bad) snprintf(buf, len, "NO (%lld blocks differ)", (long long)bad);
    else snprintf(buf, len, "yes (%lld corrupt-oracle blocks corrected)", (long long)fixed);
    return buf;
}

int main(int argc, char **argv) {
    const char *types = NULL, *scaling = "iq3_xxs";
    int64_t rows = 4096, cols = 4096;
    int reps = 1;
    bool scalar = false, best = false;
    iqf_simd simd = iqf_simd_detect();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--types") && i + 1 < argc) types = argv[++i];
        else if (!strcmp(argv[i], "--rows") && i + 1 < argc) rows = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cols") && i + 1 < argc) cols = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scaling-type") && i + 1 < argc) scaling = argv[++i];
        else if (!strcmp(argv[i], "--scalar")) scalar = true;
        else if (!strcmp(argv[i], "--best")) best = true;
        else if (!strcmp(argv[i], "--simd") && i + 1 < argc) {
            const char *sv = argv[++i];
            simd = !strcmp(sv, "scalar") ? IQF_SIMD_SCALAR : !strcmp(sv, "avx2") ? IQF_SIMD_AVX2
                 : !strcmp(sv, "avx512") ? IQF_SIMD_AVX512 : !strcmp(sv, "neon") ? IQF_SIMD_NEON : IQF_SIMD_AUTO;
            if (simd == IQF_SIMD_AUTO) usage();
            if (simd > iqf_simd_detect()) simd = iqf_simd_detect();
        }
        else usage();
    }
    if (rows < 1 || cols < 256 || cols % 256 || reps < 1) usage();
    oracle_require();

    const size_t n = (size_t)(rows * cols);
    float *x = malloc(n * sizeof(float)), *im = malloc((size_t)cols * sizeof(float));
    /* Worst case bytes per value is f32's 4. */
    uint8_t *qo = malloc(n * 4), *qi = malloc(n * 4);
    if (!x || !im || !qo || !qi) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    tu_rng rng = { 20250101 };
    for (size_t i = 0; i < n; i++) x[i] = (float)tu_normal(&rng);
    for (int64_t j = 0; j < cols; j++) im[j] = (float)exp(tu_normal(&rng));
    const double mb = (double)n * 4 / 1e6;

    printf("## Encoder throughput, single thread (%lldx%lld N(0,1), imatrix exp(N(0,1)), best of %d, simd %s)\n\n",
           (long long)rows, (long long)cols, reps, iqf_simd_name(simd));
    printf("| type | imatrix | oracle MB/s | iqforge MB/s | ratio |%s bytes identical |\n",
           scalar ? " iqforge scalar MB/s | scalar ratio |" : "");
    printf("|---|---|---:|---:|---:|%s---|\n", scalar ? "---:|---:|" : "");
    fflush(stdout);
    int failures = 0;
    for (int type = 0; type < IQF_TYPE_COUNT; type++) {
        const iqf_type_info *ti = iqf_type_get(type);
        if (!ti || !iqf_can_encode(type) || !type_selected(types, ti->name)) continue;
        const bool have_oracle = oracle_can_quantize(type);
        for (int with = 1; with >= 0; with--) {
            if (!with && iqf_requires_imatrix(type)) continue;
            if (with && !ti->is_quantized) continue; /* float formats ignore it */
            const float *w = with ? im : NULL;
            if (!have_oracle) { /* ours only */
                iqf_status st;
                double best_i = 1e30;
                for (int r = 0; r < reps; r++) {
                    timing tq = run_ours(type, x, qi, rows, cols, w, 1, simd, &st);
                    if (tq.cpu < best_i) best_i = tq.cpu;
                }
                printf("| %s | %s | - | %.1f | - |%s %s |\n", ti->name, with ? "yes" : "no", mb / best_i,
                       scalar ? " - | - |" : "", st ? "NO (error)" : "no oracle encoder");
                if (st) failures++;
                continue;
            }
            /* Warm up (table building on both sides is not timed). */
            iqf_status st;
            oracle_quantize(type, x, qo, 1, cols, w);
            run_ours(type, x, qi, 1, cols, w, 1, simd, &st);
            double best_o = 1e30, best_i = 1e30, best_s = 1e30;
            for (int r = 0; r < reps; r++) {
                timing to = run_oracle(type, x, qo, rows, cols, w);
                timing tq = run_ours(type, x, qi, rows, cols, w, 1, simd, &st);
                if (to.cpu < best_o) best_o = to.cpu;
                if (tq.cpu < best_i) best_i = tq.cpu;
            }
            char buf[96];
            const char *same = st ? "NO (error)" : compare(type, x, qi, qo, rows, cols, buf, sizeof buf);
            if (same[0] == 'N') failures++;
            printf("| %s | %s | %.1f | %.1f | %.2fx |", ti->name, with ? "yes" : "no", mb / best_o,
                   mb / best_i, best_o / best_i);
            if (scalar) {
                for (int r = 0; r < reps; r++) {
                    timing ts = run_ours(type, x, qi, rows, cols, w, 1, IQF_SIMD_SCALAR, &st);
                    if (ts.cpu < best_s) best_s = ts.cpu;
                }
                char buf2[96];
                const char *same2 = st ? "NO (error)" : compare(type, x, qi, qo, rows, cols, buf2, sizeof buf2);
                if (same2[0] == 'N') failures++;
                printf(" %.1f | %.2fx |", mb / best_s, best_o / best_s);
                if (strcmp(same, same2)) same = "NO (scalar differs)";
            }
            printf(" %s |\n", same);
            fflush(stdout);
            if (best) {
                /* best mode: timed against the oracle's best time above */
                bench_mode = IQF_MODE_BEST;
                run_ours(type, x, qi, 1, cols, w, 1, simd, &st);
                double best_b = 1e30;
                for (int r = 0; r < reps; r++) {
                    timing tb = run_ours(type, x, qi, rows, cols, w, 1, simd, &st);
                    if (tb.cpu < best_b) best_b = tb.cpu;
                }
                const char *ok = st ? "NO (error)" : "valid, same at scalar";
                if (!st) {
                    /* decoders agree bitwise; the scalar level writes the same bytes */
                    float *ya = malloc(n * sizeof(float)), *yb = malloc(n * sizeof(float));
                    oracle_dequantize(type, qi, ya, (int64_t)n);
                    iqf_dequantize(type, qi, yb, rows, cols, 1, NULL, 0);
                    if (memcmp(ya, yb, n * sizeof(float))) ok = "NO (decoders differ)";
                    free(ya);
                    free(yb);
                    run_ours(type, x, qo, rows, cols, w, 1, IQF_SIMD_SCALAR, &st);
                    if (st || memcmp(qo, qi, iqf_row_size(type, cols) * (size_t)rows)) ok = "NO (scalar differs)";
                }
                if (ok[0] == 'N') failures++;
                printf("| %s best | %s | %.1f | %.1f | %.2fx |%s %s |\n", ti->name, with ? "yes" : "no",
                       mb / best_o, mb / best_b, best_o / best_b, scalar ? " - | - |" : "", ok);
                fflush(stdout);
                bench_mode = IQF_MODE_COMPAT;
            }
        }
    }

    int stype = strcmp(scaling, "none") ? iqf_type_from_name(scaling) : -1;
    if (stype >= 0 && iqf_can_encode(stype)) {
        const int ncpu = iqf_cpu_count();
        printf("\n## Thread scaling: %s with imatrix (%lldx%lld, wall time, best of %d, %d CPUs)\n\n",
               iqf_type_get(stype)->name, (long long)rows, (long long)cols, reps, ncpu);
        printf("| threads | wall s | MB/s | speed-up | CPU s, all threads | bytes identical to 1 thread |\n"
               "|---:|---:|---:|---:|---:|---|\n");
        size_t bytes = iqf_row_size(stype, cols) * (size_t)rows;
        double t1 = 0;
        iqf_status st;
        run_ours(stype, x, qo, rows, cols, im, 1, simd, &st); /* reference bytes */
        for (int t = 1; t <= ncpu; t++) {
            double best = 1e30, cpu = 0;
            for (int r = 0; r < reps; r++) {
                memset(qi, 0, bytes);
                timing tq = run_ours(stype, x, qi, rows, cols, im, t, simd, &st);
                if (tq.wall < best) {
                    best = tq.wall;
                    cpu = tq.proc;
                }
            }
            if (t == 1) t1 = best;
            bool same = !st && memcmp(qi, qo, bytes) == 0;
            if (!same) failures++;
            printf("| %d | %.3f | %.1f | %.2fx | %.3f | %s |\n", t, best, mb / best, t1 / best, cpu,
                   same ? "yes" : "NO");
            fflush(stdout);
        }
    }
    free(x);
    free(im);
    free(qo);
    free(qi);
    return failures ? 1 : 0;
}
