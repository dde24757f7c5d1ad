/* codec_suite.h - see codec_suite.c. */
#ifndef IQF_TEST_CODEC_SUITE_H
#define IQF_TEST_CODEC_SUITE_H

#include <stdint.h>

/* Runs the suite for the given types with rows of lens[0..4] values (multiples of the block
 * size, at most 8192; the edge cases use 256). Returns test_finish(name). */
int codec_suite_run(const char *name, const int *types, int ntypes, const int64_t lens[5]);

/* The IQ1/IQ4 variant (see codec_suite.c). Types that need an imatrix are checked to be refused
 * without one. Returns test_finish(name). */
int codec_suite_run_iq(const char *name, const int *types, int ntypes);

/* IQF_MODE_BEST: for every qgen distribution x imatrix variant (rows of lens[]) and edge cases,
 * the same bytes at every SIMD level and 1/3 threads, the oracle's decoder equal to ours on
 * them, and ggml_validate_row_data accepting every row whose compat bytes it accepts.
 * Records CHECKs (the caller calls test_finish). */
void codec_suite_best(const int *types, int ntypes, const int64_t lens[5]);

/* The types whose best mode (IQF_MODE_BEST) the suites above also check on every case: same
 * bytes at every SIMD level and at 1 and 3 threads, accepted by the oracle's
 * ggml_validate_row_data, decoded bitwise alike by the oracle and by us, finite. The array must
 * outlive the suite run. Default: none. */
void codec_suite_best_types(const int *types, int ntypes);

/* Best mode vs compat on tests/data/refvec (found through $IQF_SOURCE_DIR): for every type,
 * distribution and with/without the imatrix, best's weighted squared error (with the imatrix:
 * weights imatrix*sqrt(sigma2 + x^2), sigma2 the row's mean square, as ggml's *_impl encoders;
 * without: plain) must be below compat's (by 0.1%; no higher on "tiny").
 * Records CHECKs; returns the number of failures. Needs no oracle. */
int codec_suite_best_refvec(const int *types, int ntypes);

/* As codec_suite_best_refvec, but best's weighted error need only be no higher than compat's
 * (for types whose compat scale is already optimal for some inputs, e.g. Q1_0's mean |x| under
 * uniform weights). */
int codec_suite_best_refvec_noworse(const int *types, int ntypes);

/* The IQ grids' best mode without an importance matrix (IQ3_XXS, IQ3_S, IQ2_S): compat's search
 * under a uniform importance. On every qgen distribution: best_check, bytes equal to compat's
 * with an all-ones imatrix, plain squared error no higher than compat's (below 0.99x on the
 * gauss, heavy and outlier rows); with an imatrix, compat's bytes. Records CHECKs; returns the
 * number of failures. Needs the oracle (best_check). */
int codec_suite_best_flat(const int *types, int ntypes);

#endif
