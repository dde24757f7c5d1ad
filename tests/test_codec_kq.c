/*
 * test_codec_kq.c - q2_K, q3_K, q4_K, q5_K, q6_K against the oracle (ggml 0.25.1): the shared randomized
 * differential suite (tests/common/codec_suite.c) over row lengths that cross SIMD batch boundaries.
 */
#include "codec_suite.h"
#include "iqforge.h"

int main(void) {
    static const int types[] = { IQF_TYPE_Q2_K, IQF_TYPE_Q3_K, IQF_TYPE_Q4_K, IQF_TYPE_Q5_K, IQF_TYPE_Q6_K };
    static const int64_t lens[5] = { 256, 768, 1024, 2304, 5120 };
    return codec_suite_run("test_codec_kq", types, (int)(sizeof types / sizeof types[0]), lens);
}
