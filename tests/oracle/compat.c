/*
 * compat.c - where the oracle (ggml 0.25.1) writes corrupt blocks and iqforge deliberately
 * differs. Keep in sync with docs/COMPAT.md. One function per known case.
 */
#include "oracle.h"

#include "iqforge.h"

/* iq3_s (docs/compat/iq3.md): ggml skips an all-zero 32-weight sub-block (its max |x| is 0)
 * with `continue` before advancing its qs/signs pointers, so every later non-zero sub-block of
 * the super-block is stored one slot early. Corrupt exactly when an all-zero sub-block is
 * followed by a sub-block that is not all zero (when the block's fp16 scale underflows to 0
 * iqforge writes ggml's bytes, so such blocks never differ and are never asked about). */
static bool iq3_s_corrupt(const float *row, int64_t cols, int64_t block) {
    if ((block + 1) * 256 > cols) return false;
    const float *xb = row + block * 256;
    bool seen_zero = false;
    for (int ib = 0; ib < 8; ib++) {
        bool zero = true;
        for (int i = 0; i < 32; i++) zero = zero && xb[32 * ib + i] == 0.0f;
        if (zero) seen_zero = true;
        else if (seen_zero) return true;
    }
    return false;
}

bool compat_oracle_corrupt(int type, const float *row, int64_t cols, int64_t block) {
    if (type == IQF_TYPE_IQ3_S) return iq3_s_corrupt(row, cols, block);
    return false;
}
