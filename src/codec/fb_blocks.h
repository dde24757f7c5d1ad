/* fb_blocks.h - codes of K-quant, legacy and IQ blocks under their stored scales (fb_blocks.c), for
 * the error feedback (src/quantize/feedback.c). */
#ifndef IQF_CODEC_FB_BLOCKS_H
#define IQF_CODEC_FB_BLOCKS_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct iqf_fb_block {
    float a[16], b[16]; /* value of weight i = a[i/sub] * code + b[i/sub] */
    float ia[16];       /* 1 / a (0 where a is 0) */
    int sub;            /* weights per sub-block */
    int cmin, cmax;     /* code range */
    const int8_t *table;/* non-NULL: value = a * table[code] + b (IQ4 levels) */
    bool no_b;          /* the decoder computes a * code with no addition (q3_K q6_K q8_0): b is 0
                           and is not added, so that a zero product keeps its sign as decoded */
    bool dec_exact;     /* linear types: iqf_fb_block_value_linear is the decoder's value bit for bit;
                           false for q4_0 and q5_0, whose decoder's (q - 8) * d is -0 at a zero
                           level under a negative d where a * q + b is +0 */
    iqf_simd simd;      /* set by the caller after iqf_fb_block_parse: the grid search's level
                           (IQF_SIMD_AVX512 vectorises it; the same codes on every level) */
} iqf_fb_block;

/* q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs (one weight at a time); iq3_xxs
 * iq3_s (groups of 8: two 4-point grid entries), iq2_xxs iq2_xs iq2_s (one 8-point entry), with an
 * even-parity sign byte (iq3_xxs, iq2_xxs, iq2_xs) or 8 free sign bits (iq3_s, iq2_s). The grids
 * are read once through iqf_dequantize from crafted blocks. Not: iq1_s, iq1_m (block level only).
 * For the grid types a is the sub-block's db, b is 0, and codes are set per group. */
bool iqf_fb_block_supported(int type);
/* Weights rounded together: 1, or 8 for the grid types. */
int iqf_fb_block_group(int type);
/* The value of weight i with code (single-weight types). */
float iqf_fb_block_value(const iqf_fb_block *f, int i, int code);
/* Rounds the group of weights i0.. (iqf_fb_block_group of them) to the targets t under the block's
 * scales (importance imp, may be NULL), writes the codes and the decoded values v. */
void iqf_fb_block_round_group(int type, const iqf_fb_block *f, uint8_t *blk, int i0, const float *t, const float *imp, float *v);
/* The decoded values of the group of 8 weights i0.. of a grid type's block under its scales f:
 * bit for bit the decoder's (iqf_dequantize), as are iqf_fb_block_round_group's v. */
void iqf_fb_block_group_values(int type, const iqf_fb_block *f, const uint8_t *blk, int i0, float *v);
/* Reads the scales of one block. False for an unsupported type. */
bool iqf_fb_block_parse(int type, const uint8_t *blk, iqf_fb_block *f);
/* The code nearest to t for weight i (clamped to the range). */
int iqf_fb_block_nearest(const iqf_fb_block *f, int i, float t);
/* The nearest code of a linear (f->table NULL) sub-block sb to t, and a code's value there: the
 * rounding and value iqf_fb_block_nearest / iqf_fb_block_value use for such blocks, inline for the
 * feedback sweep's critical path (feedback.c). */
static inline int iqf_fb_block_nearest_linear(const iqf_fb_block *f, int sb, float t) {
    if (f->a[sb] == 0) return f->cmin > 0 ? f->cmin : (f->cmax < 0 ? f->cmax : 0);
    const float v = (t - f->b[sb]) * f->ia[sb];
    int c = v > (float)f->cmax ? f->cmax : v < (float)f->cmin ? f->cmin : iqf_nearest_int(v);
    if (c < f->cmin) c = f->cmin;
    if (c > f->cmax) c = f->cmax;
    return c;
}
static inline float iqf_fb_block_value_linear(const iqf_fb_block *f, int sb, int code) {
    const float p = f->a[sb] * (float)code;
    return f->no_b ? p : p + f->b[sb];
}
/* Writes weight i's code into the block. */
void iqf_fb_block_set(int type, uint8_t *blk, int i, int code);
/* iqf_fb_block_set for weights pos[k] with codes code[k], k < n, in that order. pos must be strictly
 * ascending (then n == 256 with pos[0] == 0 and pos[255] == 255 means every weight, which q2_K..q6_K
 * pack whole). */
void iqf_fb_block_set_many(int type, uint8_t *blk, const int16_t *pos, const int16_t *code, int n);

#endif
