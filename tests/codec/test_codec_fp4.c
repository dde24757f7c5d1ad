/*
 * test_codec_fp4.c - MXFP4 and NVFP4 against the oracle (ggml 0.25.1): the shared randomized
 * differential suite (tests/common/codec_suite.c: bytes at every SIMD level, 1 and 3 threads, our
 * decoder on the oracle's bytes, edge cases: zeros, huge/tiny magnitudes, ties, signed zeros),
 * best mode's validity/determinism and weighted error, and rows made of exact E2M1 levels, their
 * midpoints and the floats next to the midpoints at many scales (the vector kernels' shortcut
 * compares with midpoints: ties must go to the lower level as ggml's first-index search).
 */
#include "codec_suite.h"
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>

/* Levels, midpoints and their float neighbours, both signs, block maxima at the top level or
 * just below/above a power of two, over scales 2^-130 .. 2^100. */
static void levels_and_midpoints(void) {
    static const float lv[8] = { 0, 0.5f, 1, 1.5f, 2, 3, 4, 6 };
    enum { R = 4, C = 512 };
    static float x[R * C];
    tu_rng r = { 2024 };
    for (int e = -130; e <= 100; e += 23) {
        for (int i = 0; i < R * C; i++) {
            const uint64_t u = tu_next(&r);
            const int k = (int)(u % 8);
            float v = lv[k];
            switch ((u >> 3) % 4) {
            case 0: break;
            case 1: v = k < 7 ? 0.5f * (lv[k] + lv[k + 1]) : 5.0f; break;
            case 2: v = nextafterf(k < 7 ? 0.5f * (lv[k] + lv[k + 1]) : 5.0f, 0.0f); break;
            default: v = nextafterf(k < 7 ? 0.5f * (lv[k] + lv[k + 1]) : 5.0f, 100.0f); break;
            }
            x[i] = ldexpf((u >> 5) & 1 ? -v : v, e);
        }
        for (int b = 0; b < R * C; b += 32) x[b + (b / 32) % 32] = ldexpf((b / 32) % 3 ? 6.0f : nextafterf(8.0f, 0.0f), e);
        char label[64];
        snprintf(label, sizeof label, "levels/midpoints 2^%d", e);
        qgen_diff(IQF_TYPE_MXFP4, x, R, C, NULL, label);
        qgen_diff(IQF_TYPE_NVFP4, x, R, C, NULL, label);
    }
}

int main(void) {
    static const int types[] = { IQF_TYPE_MXFP4, IQF_TYPE_NVFP4 };
    static const int64_t lens[5] = { 64, 192, 512, 2112, 4096 };
    oracle_require();
    levels_and_midpoints();
    codec_suite_best_types(types, (int)(sizeof types / sizeof types[0]));
    codec_suite_best_refvec_noworse(types, (int)(sizeof types / sizeof types[0]));
    return codec_suite_run("test_codec_fp4", types, (int)(sizeof types / sizeof types[0]), lens);
}
