/*
 * test_codec_lowbit.c - TQ1_0, TQ2_0, Q1_0 and Q2_0 against the oracle (ggml 0.25.1): the shared
 * randomized differential suite (tests/common/codec_suite.c: bytes at every SIMD level, 1 and 3
 * threads, our decoder on the oracle's bytes, edge cases) over rows of whole 256-weight blocks.
 */
#include "codec_suite.h"
#include "iqforge.h"

int main(void) {
    static const int types[] = { IQF_TYPE_TQ1_0, IQF_TYPE_TQ2_0, IQF_TYPE_Q1_0, IQF_TYPE_Q2_0 };
    static const int64_t lens[5] = { 256, 768, 1280, 2304, 4096 };
    codec_suite_best_types(types, (int)(sizeof types / sizeof types[0]));
    codec_suite_best_refvec_noworse(types, (int)(sizeof types / sizeof types[0]));
    return codec_suite_run("test_codec_lowbit", types, (int)(sizeof types / sizeof types[0]), lens);
}
