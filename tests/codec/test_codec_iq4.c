/*
 * test_codec_iq4.c - IQ4_NL and IQ4_XS against the oracle (ggml 0.25.1): randomized differential
 * tests over every distribution x imatrix variant (bytes at every SIMD level, 1 and 3 threads;
 * our decoder on the oracle's bytes bitwise), plus targeted edge cases (tests/common/codec_suite.c);
 * best mode: validity/determinism on every case, weighted error below compat's on tests/data/refvec.
 */
#include "codec_suite.h"
#include "iqforge.h"

int main(void) {
    static const int types[] = { IQF_TYPE_IQ4_NL, IQF_TYPE_IQ4_XS };
    codec_suite_best_types(types, 2);
    codec_suite_best_refvec(types, 2);
    return codec_suite_run_iq("test_codec_iq4", types, 2);
}
