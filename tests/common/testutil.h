/*
 * testutil.h - tiny test harness: CHECK counts failures, test_finish() prints
 * "N passed, N failed" and returns the exit code. Data helpers and a PRNG matching
 * shared/refvec's generator (splitmix64, Box-Muller cosine half).
 */
#ifndef IQF_TESTUTIL_H
#define IQF_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "iqforge.h"

extern int tu_passed, tu_failed;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (cond) {                                                                       \
            tu_passed++;                                                                  \
        } else {                                                                          \
            tu_failed++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fputc('\n', stderr);                                                          \
        }                                                                                 \
    } while (0)

/* Prints "<name>: N passed, N failed" and returns 0 if nothing failed (and something ran). */
int test_finish(const char *name);

/* Path under the source tree ($IQF_SOURCE_DIR, else "."); returns a static buffer per call slot. */
const char *src_path(const char *rel);
/* ../shared relative to the source tree if it exists, else NULL. Only CI-only tests may need it. */
const char *shared_dir(void);
/* Reads a whole file; returns a malloc'd buffer (NULL if unreadable) with a NUL after the n
 * bytes (size in *n). */
void *read_file(const char *path, size_t *n);
bool write_file(const char *path, const void *data, size_t n);

/* splitmix64 PRNG as in shared/refvec/README.md. */
typedef struct { uint64_t s; } tu_rng;
uint64_t tu_next(tu_rng *r);
double tu_uniform(tu_rng *r);   /* ((out >> 11) + 0.5) * 2^-53 */
double tu_normal(tu_rng *r);    /* sqrt(-2 ln U1) cos(2 pi U2) */

bool tu_ci(void); /* CI set to anything but "", 0, false, no (CI=true, CI=1) */

/* The path of a tool built beside the CLI under test ($IQF_CLI, default ./iqforge): its folder
 * plus name (e.g. "iqf-archmodel"), into buf (n bytes). Returns buf. */
char *tu_tool_path(char *buf, size_t n, const char *name);

/* An engine context on a chosen instruction set (iqf_context_new_ex). */
iqf_status tu_context_simd(const iqf_model *m, int n_ctx, int threads, iqf_simd simd, iqf_context **c,
                           char *err, size_t errlen);


/* A small llama model (n_embd 256, n_ff 512, 2 layers, 4 heads / 2 KV heads, vocab 300) with
 * random weights (seed 5: N(0,1) embeddings, N(0, 0.06^2) matrices, norms 1), written with the
 * GGUF writer. token_embd and output take the given types; the 14 layer matrices take
 * mats[(first + i) % n_mats] in turn. unit_imatrix: quantize with an importance matrix of ones
 * (types that need one), else with none. Returns false if a write or an encode fails. */
typedef struct tu_small_llama {
    int tok_embd_type, output_type;
    const int *mats;
    int n_mats, first;
    bool unit_imatrix;
} tu_small_llama;
bool tu_write_small_llama(const char *path, const tu_small_llama *spec);

/* The highest SIMD level: loops over SCALAR..TU_SIMD_TOP through the public API (which resolves
 * a level the CPU lacks to the best it has) cover every level, IQF_SIMD_NEON (the plain-width
 * kernels) also on x86-64. tu_simd_runs: whether level s runs as itself, so may also be passed
 * to an internal kernel directly (an x86 level only on an x86 CPU that has it; elsewhere the
 * API would resolve it to another level, already covered: skipped, which saves qemu time). */
#define TU_SIMD_TOP IQF_SIMD_NEON
static inline bool tu_simd_runs(int s) {
    const int h = (int)iqf_simd_detect();
    return s == IQF_SIMD_SCALAR || s == IQF_SIMD_NEON || ((h == IQF_SIMD_AVX2 || h == IQF_SIMD_AVX512) && s <= h);
}

#endif
