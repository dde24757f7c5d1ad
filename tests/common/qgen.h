/*
 * qgen.h - test inputs for codec tests and a generic differential check against the oracle.
 */
#ifndef IQF_TEST_QGEN_H
#define IQF_TEST_QGEN_H

#include <stdbool.h>
#include <stdint.h>

typedef enum qgen_dist {
    QGEN_GAUSS,      /* N(0,1) */
    QGEN_HEAVY,      /* Student-t nu=3, unit variance */
    QGEN_OUTLIER,    /* N(0,1), 0.5% of entries x20 */
    QGEN_ZEROBLOCKS, /* N(0,1); 1/8 of 32-sub-blocks exactly 0; one 256-super-block per row 0 */
    QGEN_TINY,       /* N(0,1) * 1e-6 (fp16 scales underflow) */
    QGEN_HUGE,       /* N(0,1) * 3000 */
    QGEN_MIXED,      /* N(0,1) * exp(2 N(0,1)) per row */
    QGEN_SPARSE,     /* 95% exact zeros, rest N(0,1) */
    QGEN_INTS,       /* small integers -4..4 (many exact ties) */
    QGEN_CONST,      /* every value 0.75, some rows -0.75 */
    QGEN_N
} qgen_dist;

typedef enum qgen_imat {
    QGEN_IMAT_NONE,      /* NULL */
    QGEN_IMAT_LOGNORMAL, /* exp(N(0,1)) */
    QGEN_IMAT_ZEROS,     /* log-normal with 1/16 exact zeros, columns [64,96) and 0 zero */
    QGEN_IMAT_N
} qgen_imat;

const char *qgen_dist_name(qgen_dist d);
const char *qgen_imat_name(qgen_imat m);

/* Fills rows*cols values. Deterministic for (dist, seed). */
void qgen_fill(float *x, int64_t rows, int64_t cols, qgen_dist d, uint64_t seed);
/* Fills cols weights, or returns false for QGEN_IMAT_NONE (caller passes NULL). */
bool qgen_imatrix(float *w, int64_t cols, qgen_imat m, uint64_t seed);

/*
 * Quantizes x with the oracle and with iqforge at every SIMD level this CPU has and with 1 and 3
 * threads; every byte must match. Blocks where the oracle is known to write corrupt data
 * (compat_oracle_corrupt) may differ, but then our reconstruction error of that block must be
 * lower than the oracle's. Also checks our decoder against the oracle's on the oracle's bytes
 * (bitwise). Records CHECKs; returns the number of failures it recorded.
 */
int qgen_diff(int type, const float *x, int64_t rows, int64_t cols, const float *imatrix,
              const char *label);

/* Sum of squared differences between x and y over n values (double). */
double qgen_sse(const float *x, const float *y, int64_t n);

#endif
