/*
 * test_compat_platform.c - compat bytes against the oracle of this build's own platform
 * (ORACLE_PLATFORM: ggml's x64 build on x86-64, its arm64 build on aarch64, loaded under qemu in
 * scripts/arm64-ci.sh), for the types whose rounding depends on the platform's ggml: ggml's arm64
 * library is compiled with fused multiply-adds (GCC's default -ffp-contract=fast, FMA baseline
 * on arm64) and its x64 one without, so some blocks differ between the two oracles
 * (docs/COMPAT.md, "arm64"). Our encoders reproduce each platform's contractions (IQF_FMA_ARM,
 * src/util/fma.h); this test holds them to it on inputs where the two platforms' ggml disagree.
 *
 * Default: the platform-sensitive types on 2x2048 values of five distributions, with no imatrix,
 * a log-normal one and one with exact zeros, and IQ2_XS on 4x4096 Gaussian values (seconds
 * natively, about 1.5 minutes under qemu). At these sizes the two platforms' ggml disagree on at
 * least one block of every listed type but IQ2_XXS and NVFP4 (fused expressions, no differing
 * block seen in the survey either).
 * `test_compat_platform all` runs every encodable type on ten distributions (the survey behind
 * docs/COMPAT.md; minutes natively, long under qemu); further arguments name types instead.
 */
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Types with at least one block that differs between ggml's x64 and arm64 builds on the
 * inputs below (docs/COMPAT.md). */
static const char *const sensitive[] = {
    "q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
    "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "nvfp4",
};

/* IQF_COMPAT_DUMP=dir: instead of the comparison, the oracle's bytes of every case into
 * dir/<label>.bin (label with '/' as '.'), to compare the two platforms' ggml (docs/COMPAT.md's
 * table: run once natively, once under qemu, then cmp). Returns whether it dumped. */
static bool dump_oracle(int type, const float *x, int64_t rows, int64_t cols, const float *w, const char *label) {
    const char *dir = getenv("IQF_COMPAT_DUMP");
    if (!dir || !*dir) return false;
    size_t bytes = iqf_row_size(type, cols) * (size_t)rows;
    uint8_t *q = malloc(bytes);
    char path[512];
    int n = snprintf(path, sizeof path, "%s/%s.bin", dir, label);
    for (int i = (int)strlen(dir) + 1; i < n; i++)
        if (path[i] == '/') path[i] = '.';
    FILE *f = q ? fopen(path, "wb") : NULL;
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        CHECK(oracle_quantize(type, x, q, rows, cols, w) == bytes, "%s: oracle size", label);
        CHECK(fwrite(q, 1, bytes, f) == bytes, "%s: write", path);
        fclose(f);
    }
    free(q);
    return true;
}

static void run_type(int type, const qgen_dist *dists, int nd, int64_t rows, int64_t cols) {
    const iqf_type_info *ti = iqf_type_get(type);
    float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *w = malloc(sizeof(float) * (size_t)cols);
    if (!x || !w) { CHECK(0, "out of memory"); goto out; }
    for (int d = 0; d < nd; d++) {
        qgen_fill(x, rows, cols, dists[d], 1000u + (uint64_t)d);
        for (int m = 0; m < QGEN_IMAT_N; m++) {
            bool have = qgen_imatrix(w, cols, (qgen_imat)m, 77u + (uint64_t)d);
            if (!have && iqf_requires_imatrix(type)) continue;
            char label[128];
            snprintf(label, sizeof label, "%s/%s/%s", ti->name, qgen_dist_name(dists[d]), qgen_imat_name((qgen_imat)m));
            if (dump_oracle(type, x, rows, cols, have ? w : NULL, label)) continue;
            int f = qgen_diff(type, x, rows, cols, have ? w : NULL, label);
            printf("%-8s %-10s %-10s %s\n", ti->name, qgen_dist_name(dists[d]), qgen_imat_name((qgen_imat)m),
                   f ? "DIFFERS" : "same");
            fflush(stdout);
        }
    }
out:
    free(x);
    free(w);
}

int main(int argc, char **argv) {
    oracle_require();
    bool all = argc > 1 && strcmp(argv[1], "all") == 0;
    if (all) {
        static const qgen_dist dists[] = { QGEN_GAUSS, QGEN_HEAVY, QGEN_OUTLIER, QGEN_ZEROBLOCKS, QGEN_TINY,
                                           QGEN_HUGE, QGEN_MIXED, QGEN_SPARSE, QGEN_INTS, QGEN_CONST };
        for (int t = 0; t < IQF_TYPE_COUNT; t++)
            /* weight types only: ggml_quantize_chunk has no case for q8_1 (an activation type) */
            if (iqf_type_get(t) && iqf_can_encode(t) && iqf_type_get(t)->blck_size > 1 &&
                iqf_type_family(t) != IQF_FAMILY_OTHER)
                run_type(t, dists, (int)(sizeof dists / sizeof dists[0]), 4, 4096);
    } else {
        static const qgen_dist dists[] = { QGEN_GAUSS, QGEN_HEAVY, QGEN_SPARSE, QGEN_INTS, QGEN_CONST };
        int n = argc > 1 ? argc - 1 : (int)(sizeof sensitive / sizeof sensitive[0]);
        for (int i = 0; i < n; i++) {
            const char *name = argc > 1 ? argv[i + 1] : sensitive[i];
            int t = iqf_type_from_name(name);
            CHECK(t >= 0 && iqf_type_get(t) && iqf_can_encode(t), "unknown or non-encodable type %s", name);
            if (t >= 0 && iqf_type_get(t) && iqf_can_encode(t)) run_type(t, dists, 5, 2, 2048);
        }
        /* IQ2_XS: its first platform-dependent blocks appear on larger inputs (the survey's
         * gauss 4x4096 case, imatrix: 1-2 blocks of 64 differ between the two ggml builds). */
        if (argc == 1) run_type(iqf_type_from_name("iq2_xs"), dists, 1, 4, 4096);
    }
    return test_finish("test_compat_platform");
}
