/*
 * compat.c - where the oracle (ggml 0.25.1) writes corrupt blocks and iqforge deliberately
 * differs. Keep in sync with docs/COMPAT.md. One function per known case.
 */
#include "qgen.h"

#include "iqforge.h"

bool compat_oracle_corrupt(int type, const float *row, int64_t cols, int64_t block) {
    (void)type; (void)row; (void)cols; (void)block;
    return false;
}
