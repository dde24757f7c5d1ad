/*
 * best_scale.h - the `best` encoder mode's block-scale searches for the uniform 32-weight formats
 * (q4_0, q4_1, q5_0, q5_1, q8_0) and the kernels of IQ4's (iq4.c), written once (one C source
 * compiled per SIMD level with identical per-lane arithmetic, so every level writes the same
 * bytes; `simd` arguments only pick the compilation).
 *
 * Objective: the importance-weighted squared error of the block AS THE DECODER RECONSTRUCTS IT,
 * Σ w_j (x_j - (d16 q_j [+ m16]))^2 with d16, m16 the fp16-rounded scale and min. For a fixed
 * (d16, m16) the best integer of every weight is its clamped nearest level, so the search is
 * over the scale (and min) only: a dense set of candidate inverse scales proposes integer
 * assignments, each assignment's least-squares (d, m) is solved and scored, and the best one is
 * refined at fp16: round d (and m) to fp16, re-round every weight at the stored values, re-solve
 * the least squares on the new integers, and repeat while the exact error falls; finally the
 * neighbouring fp16 values of d (and m) are tried.
 *  - symmetric (q4_0, q5_0, q8_0): 48 candidates, the max |x| mapped to either end of the grid
 *    (qmin or qmax) +-t, t in [-1.2, 1.2) in steps of 0.1 (ggml tries one end, t in [-0.9, 0.9]);
 *  - asymmetric (q4_1, q5_1): 64 candidates with the block's min mapped to 0 or clipped (offsets
 *    p/(3 nmax) of the range, p = 0..3) and t in [-0.8, 0.8), then 32 around the winner's scale
 *    with its min as the offset (ggml's search shifts its min the same way); the min is free
 *    (ggml clamps it to <= 0).
 *
 * The fast search (uniform weights, i.e. no imatrix, for all five; q8_0 always, where ggml runs
 * no search): 16 blocks at a time, lane b of a vector = block b, so every operation is a full
 * vector. q4_0/q5_0: two pairs of starts (the max at qmin, which is ggml's scale, and at qmax;
 * then the max 0.5 beyond each end), each start's integers scored with their least-squares
 * rescale, 2 rounds, one fp16 neighbour step. q4_1/q5_1: a search on integers (the fast path's
 * candidates cost a handful of 16-bit operations per pair of values): the block as
 * U = (x - min) 2^k / range in [0, 2^k] (k = 11 for q4_1, 12 for q5_1), two values per 32-bit
 * lane; a candidate maps the range to N steps with its first level O steps above the min,
 * q = clamp(round((U - B) A / 2^15)) (pmulhrsw; A = N 2^(15-k), B = O 2^k / N), its sums
 * sum q, sum q^2, sum q U (pmaddwd) score it by the error of its least-squares (d, m); q5_1:
 * N = 29.25..31.5 (5 values) x O in {0, 0.25} and one Lloyd step (the winner's least-squares
 * (d, m) rounded to a candidate of its own), q4_1: N in {14, 15.5} x O in {0, 0.4}; then the
 * winner's (d, m) at fp16 and the integers re-rounded there. Integer arithmetic up to the score
 * (exact, the same at every level).
 * q8_0: the same rounds with exact errors (E from sums is too coarse at 8 bits), 2 starts (the
 * max at 127 and 127.25), 2 rescales, one neighbour step, weighted by the imatrix when given.
 *
 * Robustness: weights are normalized per block (max 1; non-finite weights count as 1 when every
 * weight is zero or unusable, see best_scale.c), values by the block's max |x|, so no sum
 * overflows; the exact error is summed in double. The stored fp16 values are always finite.
 */
#ifndef IQF_BEST_SCALE_H
#define IQF_BEST_SCALE_H

#include "codec.h"

#include <stdint.h>

#define IQF_BEST_QK 32

/* Symmetric uniform grid: x ~ d*q with q in [qmin, qmax] (q4_0 -8..7, q5_0 -16..15,
 * q8_0 -127..127). w: 32 weights >= 0 (NaN/inf tolerated). Writes q - qmin to L[32] and returns
 * the fp16 bits of d. Uniform weights (no imatrix) and q8_0 take the fast search (below). */
iqf_half iqf_best_sym_block(iqf_simd simd, const float *x, const float *w, int qmin, int qmax, uint8_t *L);

/* Asymmetric uniform grid: x ~ d*q + m with q in [0, nmax] (q4_1 15, q5_1 31). Writes q to L[32]
 * and the fp16 bits of d and m. */
void iqf_best_asym_block(iqf_simd simd, const float *x, const float *w, int nmax, uint8_t *L, iqf_half *d,
                         iqf_half *m);

/* A whole row (n a multiple of 32) of a legacy type in best mode: the same bytes as calling
 * iqf_best_weights and iqf_best_sym_block / iqf_best_asym_block per block (as legacy.c's best_row
 * does), but 16 blocks at a time where the fast search applies and with no per-block dispatch;
 * one exception: q8_0 with an imatrix sums the row's sigma2 in 16 partial sums (legacy.c's
 * row_sigma2 sums serially, 3-4 cycles a value: a third of ggml's time for q8_0), so its weights,
 * and rarely its bytes, differ in the last bits from the per-block path. legacy.c's best_row
 * should call this (one line; docs/PERFORMANCE.md): the fast search's speed needs it.
 * kind: 0 q4_0, 1 q4_1, 2 q5_0, 3 q5_1, 4 q8_0 (q8_0 as ggml writes it, -127..127). qw: the
 * row's importance (n values) or NULL. */
void iqf_best_legacy_row(iqf_simd simd, int kind, const float *x, void *vy, int64_t n, const float *qw);

/* Best mode's per-value weights for a block of 32 values of a row whose mean square is sigma2:
 * with an importance matrix qw, w = qw * sqrt(sigma2 + x^2) (ggml's *_impl weights); without,
 * w = 1 (plain squared error: measured better for KLD than x^2-based weights, see docs/QUALITY.md).
 * simd: which compilation of the (single) source runs; every level gives the same bits. */
void iqf_best_weights(iqf_simd simd, const float *x, const float *qw, float sigma2, float *w);

/* A 16-level non-uniform grid (IQ4's kvalues): v[16] ascending levels; thr[k] (k = 1..15) the
 * smallest float whose nearest level (as ggml's best_index_int8 decides) has index >= k, so the
 * index of a value a is #{k : a >= thr[k]}; thr[0] is unused. */
typedef struct iqf_best_grid16 {
    float thr[16];
    float v[16];
} iqf_best_grid16;

/* For nc (<= 80) candidate inverse scales ids[] (ids must have room for nc rounded up to 16):
 * sxq[c] = sum w*q*x, sq2[c] = sum w*q*q over 32 values, q the level of ids[c]*x. Finite input. */
void iqf_best_grid_cands(iqf_simd simd, const iqf_best_grid16 *g, const float *x, const float *w,
                         float *ids, int nc, float *sxq, float *sq2);
/* Weighted squared error of 32 values decoded at scale s, the indices chosen at s (L[32];
 * s = 0: index 8). sxq/sq2 (may be NULL): the least-squares sums of that assignment. */
float iqf_best_grid_eval(iqf_simd simd, const iqf_best_grid16 *g, const float *x, const float *w,
                         float s, uint8_t *L, float *sxq, float *sq2);

#endif
