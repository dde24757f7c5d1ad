/*
 * test_codec_fp4.c - MXFP4 and NVFP4 against the oracle (ggml 0.25.1): the shared randomized
 * differential suite (tests/common/codec_suite.c: bytes at every SIMD level, 1 and 3 threads, our
 * decoder on the oracle's bytes, edge cases: zeros, huge/tiny magnitudes, ties, signed zeros).
 */
#include "codec_suite.h"
#include "iqforge.h"

int main(void) {
    static const int types[] = { IQF_TYPE_MXFP4, IQF_TYPE_NVFP4 };
    static const int64_t lens[5] = { 64, 192, 512, 2112, 4096 };
    codec_suite_best_types(types, (int)(sizeof types / sizeof types[0]));
    codec_suite_best_refvec_noworse(types, (int)(sizeof types / sizeof types[0]));
    return codec_suite_run("test_codec_fp4", types, (int)(sizeof types / sizeof types[0]), lens);
}
