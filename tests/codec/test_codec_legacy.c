/*
 * test_codec_legacy.c - q4_0, q4_1, q5_0, q5_1, q8_0 against the oracle (ggml 0.25.1): the shared randomized
 * differential suite (tests/common/codec_suite.c) over row lengths that cross SIMD batch boundaries,
 * the best mode's validity/determinism on every case, and best's weighted error below compat's on
 * tests/data/refvec.
 */
#include "codec_suite.h"
#include "iqforge.h"

int main(void) {
    static const int types[] = { IQF_TYPE_Q4_0, IQF_TYPE_Q4_1, IQF_TYPE_Q5_0, IQF_TYPE_Q5_1, IQF_TYPE_Q8_0 };
    static const int64_t lens[5] = { 32, 96, 512, 2080, 4096 };
    codec_suite_best_types(types, (int)(sizeof types / sizeof types[0]));
    codec_suite_best_refvec(types, (int)(sizeof types / sizeof types[0]));
    return codec_suite_run("test_codec_legacy", types, (int)(sizeof types / sizeof types[0]), lens);
}
