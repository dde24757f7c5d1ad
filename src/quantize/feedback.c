/* feedback.c - GPTQ-style error feedback into the stock formats (see feedback.h). */
#include "feedback.h"
#include "fb_panel.h"
#include "../codec/fb_blocks.h"
#include "../stats/hessian_file.h"
#include "../util/error.h"
#include "../util/parallel.h"
#include "../util/traits.h"
#include "../codec/kq_best.h"
#include "../codec/iq_refine.h"
#include "../util/arch.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Rows                                                                                       */

#ifndef FB_ITERS
#define FB_ITERS 2
#endif
#ifndef FB_REFINE_NIT
#define FB_REFINE_NIT 2
#endif
#define FB_ITERS_DOC /* re-encodings of a unit from its fed-forward targets (stops when no gain) */
#define FB_IQ_WINDOW 1 /* candidate scales of a grid type's warm-started re-encoding */

/* Legacy encoders whose importance weighting uses a row-wide sigma2 (best mode's q8_0 too). */
static bool row_context(int type, const float *imatrix, iqf_mode mode) {
    const iqf_type_traits *tr = iqf_traits(type);
    if (!imatrix || !tr) return false;
    return tr->fb_sigma2 == IQF_FB_SIGMA2_ALWAYS || (tr->fb_sigma2 == IQF_FB_SIGMA2_BEST && mode == IQF_MODE_BEST);
}

#define FB_ROWS 8 /* rows processed together (fb_range) */

typedef struct fbscratch {
    float *w, *q, *q2, *t, *t2, *rw, *e, *e2, *v;
    uint8_t *row, *blk2;
    struct rr_state *rr; /* FB_ROWS of them */
    int64_t bad_row;
    iqf_status st;
    char msg[256];
} fbscratch;

typedef struct fbjob {
    const iqf_fb_factor *f;
    int type;
    const float *src;
    uint8_t *dst;
    int64_t ncols, blck;
    size_t row_bytes, tsz;
    const float *im;
    bool ctx_row;
    iqf_quantize_params qp; /* one thread */
    int iters;              /* in-unit re-encodings */
    bool reround;           /* in-unit GPTQ under the chosen scales (fb_blocks.c types) */
    bool grid;              /* a grid type (groups of 8 weights) */
    iqf_simd simd;          /* the level of the feedback loops (identical bits on every level) */
    int refine;             /* > 0: re-encodings are best mode's K-quant search from the current
                               block (iqf_kq_best_refine, that many alternations) */
    double tau;             /* a re-encoding that gains less than this fraction is the last */
    int iq_nw;              /* > 0: grid re-encodings search that many scales around the current
                               block's (iqf_iq3_refine, iqf_iq2_refine) */
    fbscratch *s;
} fbjob;

/* The SIMD level to use: the requested one, or the best the CPU has if it lacks it (or AUTO). */
static iqf_simd resolve_simd(iqf_simd want) { return iqf_simd_resolve(want); }

/* a and b hold the same n floats bit for bit. */
static bool same_bits(const float *a, const float *b, int n) {
    for (int k = 0; k < n; k++) {
        uint32_t x, y;
        memcpy(&x, &a[k], 4);
        memcpy(&y, &b[k], 4);
        if (x != y) return false;
    }
    return true;
}

/* In-unit re-rounding (reround_unit): the block being rewritten and its scales. */
typedef struct rr_state {
    int type, G;
    iqf_fb_block fbk;
    uint8_t *blk;
    const float *w0; /* the unit's weights before the sweep */
    const float *im; /* the unit's importance */
    int16_t code[256], pos[256]; /* codes chosen by the inline rounding, written after the sweep */
} rr_state;

/* The recursion over columns u0 .. u0+B-1 of a row. x[c - u0] is column c (valid up to lim) and
 * is updated in place. Column i's value is q[i - u0], or (rr) the value rr's rounding chooses
 * for x at the start of i's group (the encoder's q where no error arrived: x == w0 bit for bit);
 * e_i = (x_i - value_i) / U_ii, and the columns c in (i, min(end of i's block of H, lim)) get
 * x_c -= e_i * U_ic. Returns sum e_i^2; eout and vout (if not NULL) receive the B errors and
 * values. */
/* sweep_rows: R independent recursions over the same columns (R rows of a group, each with its
 * own x, q, rr, eout, vout), interleaved column by column so that their dependency chains
 * overlap; every row's operations are those of sweep() alone (the same bits). loss[r] receives
 * sum e_i^2 of row r. */
#define FB_MAXR FB_ROWS

/* The values of the group of rr's unit starting at weight l, whose targets are x[0..G-1]: the
 * group re-rounded where an error arrived (x differs from the weights), else the block's own
 * values (the grid types' q is not decoded, encode_unit; q[l] for single weights). */
static void group_values(rr_state *rr, int l, const float *x, const float *q, float *v) {
    if (!same_bits(x, &rr->w0[l], rr->G))
        iqf_fb_block_round_group(rr->type, &rr->fbk, rr->blk, l, x, rr->im + l, v);
    else if (rr->G > 1)
        iqf_fb_block_group_values(rr->type, &rr->fbk, rr->blk, l, v);
    else
        v[0] = q[l];
}

#ifdef IQF_ARCH_X86
/* 8x8 transposes between 8 row pointers (p[r] + off .. + 7) and 8 column vectors (lane r). */
__attribute__((target("avx2"))) static inline void tr8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}
__attribute__((target("avx2"))) static inline void tr8_load(const float *const *p, int64_t off, __m256 c[8]) {
    for (int r = 0; r < 8; r++) c[r] = _mm256_loadu_ps(p[r] + off);
    tr8(c);
}
__attribute__((target("avx2"))) static inline void tr8_store(float *const *p, int64_t off, const __m256 c[8]) {
    __m256 t[8];
    memcpy(t, c, sizeof t);
    tr8(t);
    for (int r = 0; r < 8; r++) _mm256_storeu_ps(p[r] + off, t[r]);
}

/* sweep_rows for 8 rows of one type with 16-column panels, either linear levels (grid false:
 * every rr lin, sub a power of two sh) or a grid type (grid true: groups of 8): the rows are the
 * 8 lanes of a vector, so the recursion's per-column work (the error, loss, the panel's update;
 * for linear types also the comparison with the weights, the nearest code and its value) is one
 * vector operation for all 8 rows instead of one scalar sequence per row. A grid group is still
 * rounded row by row (iqf_fb_block_round_group, from the group's targets transposed back to rows).
 * Each lane runs exactly the scalar path's operations (iqf_fb_block_nearest_linear,
 * iqf_fb_block_value_linear, the error and loss, x_c -= e_i * U_ic in the same order): the same bits
 * as sweep_rows row by row (test_feedback's SIMD-level checks compare it with the scalar level).
 * The panel's columns are transposed in and out; the update of the columns after the panel stays
 * apply_rows on the rows. */
__attribute__((target("avx2"))) static void sweep_lanes8(iqf_simd simd, const float *U, int64_t bs, float *const *xs,
                                                       int64_t u0, int64_t B, int64_t lim, const float *const *qs,
                                                       rr_state *const *rrs, float *const *eouts, float *const *vouts,
                                                       double *loss, bool grid, int sh, int *nset) {
    const iqf_fb_block *f0 = &rrs[0]->fbk;
    const int nsb = grid ? 0 : (int)(B >> sh) < 16 ? (int)(B >> sh) : 16;
    float At[16][8], Bt[16][8], It[16][8];
    int Zt[16][8]; /* lanes whose a is 0 */
    for (int sb = 0; sb < nsb; sb++)
        for (int r = 0; r < 8; r++) {
            At[sb][r] = rrs[r]->fbk.a[sb];
            Bt[sb][r] = rrs[r]->fbk.b[sb];
            It[sb][r] = rrs[r]->fbk.ia[sb];
            Zt[sb][r] = rrs[r]->fbk.a[sb] == 0 ? -1 : 0;
        }
    const int zc = f0->cmin > 0 ? f0->cmin : (f0->cmax < 0 ? f0->cmax : 0);
    const bool no_b = f0->no_b;
    const __m256 fmax = _mm256_set1_ps((float)f0->cmax), fmin = _mm256_set1_ps((float)f0->cmin);
    const __m256i imax = _mm256_set1_epi32(f0->cmax), imin = _mm256_set1_epi32(f0->cmin), izc = _mm256_set1_epi32(zc);
    const __m256 magic = _mm256_set1_ps(12582912.f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000);
    __m256d l0 = _mm256_setzero_pd(), l1 = _mm256_setzero_pd();
    const float *w0s[8];
    /* eouts, vouts: NULL or 8 non-NULL rows (the caller checks) */
    const bool have_e = eouts != NULL, have_v = vouts != NULL;
    for (int r = 0; r < 8; r++) w0s[r] = rrs[r]->w0;
    float e[FB_MAXR][FB_PANEL];
    float *ts[FB_MAXR];
    for (int64_t p0 = u0; p0 < u0 + B; p0 += FB_PANEL) {
        const int64_t k0 = p0 - p0 % bs;
        const int64_t end = k0 + bs < lim ? k0 + bs : lim;
        const int64_t off = p0 - u0;
        __m256 X[FB_PANEL], W0[FB_PANEL], Q[FB_PANEL], E[FB_PANEL], V[FB_PANEL];
        __m256i C[FB_PANEL];
        int M[FB_PANEL];
        tr8_load((const float *const *)xs, off, X);
        tr8_load((const float *const *)xs, off + 8, X + 8);
        if (!grid) {
            tr8_load(w0s, off, W0);
            tr8_load(w0s, off + 8, W0 + 8);
            tr8_load(qs, off, Q);
            tr8_load(qs, off + 8, Q + 8);
        }
        __m256 G8[8]; /* grid: the current group's values, column vectors */
        for (int k = 0; k < FB_PANEL; k++) {
            const int64_t i = p0 + k;
            const float *ur = U + i * bs - k0; /* ur[c] = U_ic */
            const int l = (int)(i - u0);
            const __m256 x = X[k];
            __m256 vi;
            if (grid) {
                if ((k & 7) == 0) {
                    /* the group's targets as rows, each row's group rounded (or, where no error
                     * arrived, decoded) as sweep_rows does, the values back as columns */
                    __m256 T[8];
                    memcpy(T, X + k, sizeof T);
                    tr8(T);
                    for (int r = 0; r < 8; r++) {
                        rr_state *rr = rrs[r];
                        float t[8], v[8];
                        _mm256_storeu_ps(t, T[r]);
                        group_values(rr, l, t, NULL, v);
                        G8[r] = _mm256_loadu_ps(v);
                    }
                    tr8(G8);
                }
                vi = G8[k & 7];
                C[k] = _mm256_setzero_si256();
                M[k] = 0;
            } else {
                const int sb = l >> sh;
                const __m256i noerr = _mm256_cmpeq_epi32(_mm256_castps_si256(x), _mm256_castps_si256(W0[k]));
                const __m256 a = _mm256_loadu_ps(At[sb]), b = _mm256_loadu_ps(Bt[sb]);
                const __m256 v = _mm256_mul_ps(_mm256_sub_ps(x, b), _mm256_loadu_ps(It[sb]));
                const __m256i near = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(_mm256_add_ps(v, magic)), mant), bias);
                const __m256 hi = _mm256_cmp_ps(v, fmax, _CMP_GT_OQ), lo = _mm256_cmp_ps(v, fmin, _CMP_LT_OQ);
                __m256i c = _mm256_blendv_epi8(near, imin, _mm256_castps_si256(lo));
                c = _mm256_blendv_epi8(c, imax, _mm256_castps_si256(hi));
                c = _mm256_min_epi32(_mm256_max_epi32(c, imin), imax);
                c = _mm256_blendv_epi8(c, izc, _mm256_loadu_si256((const __m256i *)Zt[sb]));
                __m256 val = _mm256_mul_ps(a, _mm256_cvtepi32_ps(c));
                if (!no_b) val = _mm256_add_ps(val, b);
                vi = _mm256_blendv_ps(val, Q[k], _mm256_castsi256_ps(noerr));
                C[k] = c;
                M[k] = ~_mm256_movemask_ps(_mm256_castsi256_ps(noerr)) & 0xFF;
            }
            const __m256 ei = _mm256_mul_ps(_mm256_sub_ps(x, vi), _mm256_set1_ps(1.f / U[i * bs + (i - k0)]));
            const __m256d e0 = _mm256_cvtps_pd(_mm256_castps256_ps128(ei)), e1 = _mm256_cvtps_pd(_mm256_extractf128_ps(ei, 1));
            l0 = _mm256_add_pd(l0, _mm256_mul_pd(e0, e0));
            l1 = _mm256_add_pd(l1, _mm256_mul_pd(e1, e1));
            E[k] = ei;
            V[k] = vi;
            for (int c2 = k + 1; c2 < FB_PANEL; c2++)
                X[c2] = _mm256_sub_ps(X[c2], _mm256_mul_ps(ei, _mm256_set1_ps(ur[p0 + c2])));
        }
        tr8_store(xs, off, X);
        tr8_store(xs, off + 8, X + 8);
        if (have_e) {
            tr8_store(eouts, off, E);
            tr8_store(eouts, off + 8, E + 8);
        }
        if (have_v) {
            tr8_store(vouts, off, V);
            tr8_store(vouts, off + 8, V + 8);
        }
        for (int k = 0; k < FB_PANEL; k++) {
            int ck[8];
            float ek[8];
            _mm256_storeu_si256((__m256i *)ck, C[k]);
            _mm256_storeu_ps(ek, E[k]);
            for (int r = 0; r < 8; r++) {
                e[r][k] = ek[r];
                if (!grid && M[k] >> r & 1) {
                    rr_state *rr = rrs[r];
                    rr->code[nset[r]] = (int16_t)ck[r];
                    rr->pos[nset[r]++] = (int16_t)(off + k);
                }
            }
        }
        const int64_t pend = p0 + FB_PANEL < end ? p0 + FB_PANEL : end;
        if (pend < end) {
            for (int r = 0; r < 8; r++) ts[r] = xs[r] + (pend - u0);
            iqf_fb_apply_rows(simd, 8, ts, U + p0 * bs + (pend - k0), bs, (const float (*)[FB_PANEL])e, FB_PANEL, end - pend);
        }
    }
    double lv[8];
    _mm256_storeu_pd(lv, l0);
    _mm256_storeu_pd(lv + 4, l1);
    for (int r = 0; r < 8; r++) loss[r] = lv[r];
}

#endif /* IQF_ARCH_X86 */

static void sweep_rows(iqf_simd simd, const float *U, int64_t bs, int R, float *const *xs, int64_t u0, int64_t B,
                       int64_t lim, const float *const *qs, rr_state *const *rrs, float *const *eouts,
                       float *const *vouts, double *loss) {
    const int P = (bs % FB_PANEL == 0 && B % FB_PANEL == 0 && lim % FB_PANEL == 0) ? FB_PANEL : 1;
    float e[FB_MAXR][FB_PANEL], rd[FB_PANEL], v[FB_MAXR][8];
    int nset[FB_MAXR];
    bool lin[FB_MAXR];
    int gm[FB_MAXR], sh[FB_MAXR];
    for (int r = 0; r < R; r++) {
        const rr_state *rr = rrs ? rrs[r] : NULL;
        /* single-weight types with linear levels: the rounding inline, the codes written after
         * the sweep (nothing reads the block during it) */
        lin[r] = rr && rr->G == 1 && !rr->fbk.table;
        gm[r] = rr ? rr->G - 1 : 0; /* G is 1 or 8 */
        /* the sub-block of weight l as a shift when sub is a power of two (16 or 32: all the
         * single-weight types), not a division on the recursion's path */
        sh[r] = lin[r] && (rr->fbk.sub & (rr->fbk.sub - 1)) == 0 ? __builtin_ctz((unsigned)rr->fbk.sub) : -1;
        nset[r] = 0;
        loss[r] = 0;
        memset(v[r], 0, sizeof v[r]);
    }
    /* 8 rows of a linear or a grid type, 16-column panels: the rows as vector lanes (sweep_lanes8) */
    bool lanes8 = R == 8 && P == FB_PANEL && simd >= IQF_SIMD_AVX2 && rrs;
    const bool grid8 = lanes8 && rrs[0]->G == 8;
    for (int r = 0; lanes8 && r < R; r++)
        lanes8 = rrs[r] && rrs[r]->type == rrs[0]->type && (grid8 ? rrs[r]->G == 8 : lin[r] && sh[r] >= 0 && sh[r] == sh[0]) &&
                 (!eouts || eouts[r]) && (!vouts || vouts[r]);
#ifdef IQF_ARCH_X86
    if (lanes8) {
        sweep_lanes8(simd, U, bs, xs, u0, B, lim, qs, rrs, eouts, vouts, loss, grid8, sh[0], nset);
        for (int r = 0; r < R; r++)
            if (nset[r]) iqf_fb_block_set_many(rrs[r]->type, rrs[r]->blk, rrs[r]->pos, rrs[r]->code, nset[r]);
        return;
    }
#endif
    for (int64_t p0 = u0; p0 < u0 + B; p0 += P) {
        const int64_t k0 = p0 - p0 % bs;
        const int64_t end = k0 + bs < lim ? k0 + bs : lim;
        const int64_t pend = p0 + P < end ? p0 + P : end;
        /* 1 / U_ii of the panel's columns, off the recursion's critical path */
        for (int k = 0; k < P; k++) rd[k] = 1.f / U[(p0 + k) * bs + (p0 + k - k0)];
        for (int k = 0; k < P; k++) {
            const int64_t i = p0 + k;
            const float *ur = U + i * bs - k0; /* ur[c] = U_ic */
            const int l = (int)(i - u0);
            for (int r = 0; r < R; r++) {
                float *x = xs[r];
                const float *q = qs[r];
                rr_state *rr = rrs ? rrs[r] : NULL;
                float vi;
                if (lin[r]) {
                    if (same_bits(&x[l], &rr->w0[l], 1)) {
                        vi = q[l];
                    } else {
                        const iqf_fb_block *f = &rr->fbk;
                        const int sb = sh[r] >= 0 ? l >> sh[r] : l / f->sub;
                        const int c = iqf_fb_block_nearest_linear(f, sb, x[l]);
                        rr->code[nset[r]] = (int16_t)c;
                        rr->pos[nset[r]++] = (int16_t)l;
                        vi = iqf_fb_block_value_linear(f, sb, c);
                    }
                } else if (rr) {
                    const int g = l & gm[r];
                    if (g == 0) group_values(rr, l, &x[l], q, v[r]);
                    vi = v[r][g];
                } else {
                    vi = q[l];
                }
                const float ei = (x[l] - vi) * rd[k];
                e[r][k] = ei;
                loss[r] += (double)ei * ei;
                if (eouts && eouts[r]) eouts[r][l] = ei;
                if (vouts && vouts[r]) vouts[r][l] = vi;
#ifdef IQF_ARCH_X86
                if (P == FB_PANEL && simd >= IQF_SIMD_AVX2)
                    iqf_fb_panel_update(simd, x + (p0 - u0), ur + p0, k, ei);
                else
#endif
                    for (int64_t c = i + 1; c < pend; c++) x[c - u0] -= ei * ur[c];
            }
        }
        if (pend < end) {
            float *ts[FB_MAXR];
            for (int r = 0; r < R; r++) ts[r] = xs[r] + (pend - u0);
            iqf_fb_apply_rows(simd, R, ts, U + p0 * bs + (pend - k0), bs, (const float (*)[FB_PANEL])e, P, end - pend);
        }
    }
    for (int r = 0; r < R; r++)
        if (nset[r]) {
            rr_state *rr = rrs[r];
            iqf_fb_block_set_many(rr->type, rr->blk, rr->pos, rr->code, nset[r]);
        }
}

/* The recursion over columns u0 .. u0+B-1 of a row (see above), one row. */
static double sweep(iqf_simd simd, const float *U, int64_t bs, float *x, int64_t u0, int64_t B, int64_t lim,
                    const float *q, rr_state *rr, float *eout, float *vout) {
    double loss;
    sweep_rows(simd, U, bs, 1, &x, u0, B, lim, &q, rr ? &rr : NULL, &eout, &vout, &loss);
    return loss;
}

/* The unit's own part of the GPTQ loss for codes q: the recursion over the unit's columns only
 * (t starts as the current weights w), returning sum e_i^2; t ends as the targets the columns
 * had when each was fixed, e as their errors. */
static double unit_loss(iqf_simd simd, const float *U, int64_t bs, int64_t u0, int64_t B, const float *w,
                        const float *q, float *t, float *e) {
    memcpy(t, w + u0, (size_t)B * sizeof(float));
    return sweep(simd, U, bs, t, u0, B, u0 + B, q, NULL, e, NULL);
}

/* Encodes the unit at u0 from the values v (B of them; the row context, if any, is w with the unit
 * replaced by v) into blk and decodes it into q. */
static iqf_status encode_unit(const fbjob *j, fbscratch *s, const float *w, const float *v, int64_t u0,
                              uint8_t *blk, float *q) {
    const int64_t B = j->blck;
    iqf_status st;
    if (j->ctx_row) {
        float *rw = s->rw;
        memcpy(rw, w, (size_t)j->ncols * sizeof(float));
        memcpy(rw + u0, v, (size_t)B * sizeof(float));
        st = iqf_quantize(j->type, rw, s->row, 1, j->ncols, j->im, &j->qp, s->msg, sizeof s->msg);
        if (!st) memcpy(blk, s->row + (size_t)(u0 / B) * j->tsz, j->tsz);
    } else {
        st = iqf_quantize(j->type, v, blk, 1, B, j->im + u0, &j->qp, s->msg, sizeof s->msg);
    }
    /* the grid types' re-rounding decodes the groups it keeps from the block itself, and its
     * values are the decoder's (reround_rows): q is not needed */
    if (!st && !(j->reround && j->grid)) st = iqf_dequantize(j->type, blk, q, 1, B, 1, s->msg, sizeof s->msg);
    return st;
}

/* The unit's errors e (from unit_loss) applied to the columns after the unit (u0 + B .. the
 * end of each column's block of H): the cross-unit part of the feedback, in the same order as
 * sweep() over the whole row would apply it. */
static void feed_beyond(iqf_simd simd, const float *U, int64_t bs, float *w, int64_t u0, int64_t B, int64_t n,
                        const float *e) {
    const int P = (bs % FB_PANEL == 0 && B % FB_PANEL == 0 && n % FB_PANEL == 0) ? FB_PANEL : 1;
    const int64_t c0 = u0 + B;
    for (int64_t p0 = u0; p0 < u0 + B; p0 += P) {
        const int64_t k0 = p0 - p0 % bs, end = k0 + bs < n ? k0 + bs : n;
        if (end > c0) iqf_fb_apply(simd, w + c0, U + p0 * bs + (c0 - k0), bs, e + (p0 - u0), P, end - c0);
    }
}

/* GPTQ inside the unit under the scales the encoder chose: the weights are rounded one by one
 * (one grid group at a time) to the nearest code, each one's error fed forward to the later
 * weights of the unit. A weight that received no error (t == w bit for bit) keeps the encoder's
 * code, so a diagonal H leaves the encoder's bytes untouched. Then the block is decoded into q.
 * When the decoded values are the ones the rounding steered by (bit for bit, the usual case),
 * the sweep was unit_loss's recursion for q: *loss, t and e are then its results and *have is
 * set; otherwise the caller runs unit_loss.
 *
 * Done for the units of rows ids[0..m-1] of a group at once, their sweeps interleaved: blk[g],
 * q[g], t[g], e[g] are row g's block, values, targets and errors; loss[g], have[g] its loss and
 * flag. */
static iqf_status reround_rows(const fbjob *j, fbscratch *s, int m, const int *ids, float *const *w, int64_t u0,
                               uint8_t *const *blk, float *const *q, float *const *t, float *const *e, double *loss,
                               bool *have) {
    const int64_t B = j->blck;
    float *xs[FB_MAXR], *es[FB_MAXR], *vs[FB_MAXR];
    const float *qs[FB_MAXR];
    rr_state *rrs[FB_MAXR];
    int gs[FB_MAXR], R = 0;
    double l[FB_MAXR];
    for (int k = 0; k < m; k++) {
        const int g = ids[k];
        rr_state *rr = &s->rr[g];
        have[g] = false;
        if (!iqf_fb_block_parse(j->type, blk[g], &rr->fbk)) continue;
        rr->fbk.simd = j->simd;
        rr->type = j->type;
        rr->G = iqf_fb_block_group(j->type);
        rr->blk = blk[g];
        rr->w0 = w[g] + u0;
        rr->im = j->im + u0;
        memcpy(t[g], w[g] + u0, (size_t)B * sizeof(float));
        xs[R] = t[g];
        qs[R] = q[g];
        rrs[R] = rr;
        es[R] = e[g];
        vs[R] = s->v + (size_t)g * B;
        gs[R++] = g;
    }
    if (R) sweep_rows(j->simd, j->f->U, j->f->bs, R, xs, u0, B, u0 + B, qs, rrs, es, vs, l);
    for (int r = 0; r < R; r++) {
        const int g = gs[r];
        if (rrs[r]->G > 1 || (!rrs[r]->fbk.table && rrs[r]->fbk.dec_exact)) {
            /* grid types: a group's values are the decoder's (the same products of the block's
             * scale and grid point); linear types: iqf_fb_block_value_linear is the decoder's value
             * of the code (test_feedback's block_access checks both bit for bit). So the block
             * decodes to the values steered by. */
            memcpy(q[g], vs[r], (size_t)B * sizeof(float));
            loss[g] = l[r];
            have[g] = true;
            continue;
        }
        const iqf_status st = iqf_dequantize(j->type, blk[g], q[g], 1, B, 1, s->msg, sizeof s->msg);
        if (st) return st;
        if (same_bits(q[g], vs[r], (int)B)) {
            loss[g] = l[r];
            have[g] = true;
        }
    }
    return IQF_OK;
}

/* The units at u0 of the nr rows of a group (w[g]: row g's weights, out[g]: its blocks): each
 * encoded, re-rounded, re-encoded from its targets while its loss drops, and its errors fed
 * forward; the rows' steps are done together (their sweeps interleaved), each row's the same as
 * alone. *bad: the row that failed. */
static iqf_status fb_group(const fbjob *j, fbscratch *s, int nr, float *const *w, uint8_t *const *out, int64_t u0,
                           int *bad) {
    const int64_t n = j->ncols, B = j->blck, bs = j->f->bs;
    const float *U = j->f->U;
    float *q[FB_MAXR], *q2[FB_MAXR], *t[FB_MAXR], *t2[FB_MAXR], *ev[FB_MAXR], *e2[FB_MAXR];
    uint8_t *blk[FB_MAXR], *blk2[FB_MAXR];
    double best[FB_MAXR], l2[FB_MAXR];
    bool have[FB_MAXR];
    int ids[FB_MAXR], m = 0;
    iqf_status st = IQF_OK;
    for (int g = 0; g < nr; g++) {
        q[g] = s->q + (size_t)g * B;
        q2[g] = s->q2 + (size_t)g * B;
        t[g] = s->t + (size_t)g * B;
        t2[g] = s->t2 + (size_t)g * B;
        ev[g] = s->e + (size_t)g * B;
        e2[g] = s->e2 + (size_t)g * B;
        blk[g] = out[g] + (size_t)(u0 / B) * j->tsz;
        blk2[g] = s->blk2 + (size_t)g * j->tsz;
        have[g] = false;
        ids[g] = g;
        *bad = g;
        st = encode_unit(j, s, w[g], w[g] + u0, u0, blk[g], q[g]);
        if (st) return st;
    }
    *bad = 0;
    if (j->reround && (st = reround_rows(j, s, nr, ids, w, u0, blk, q, t, ev, best, have))) return st;
    if (j->iters > 0) {
        for (int g = 0; g < nr; g++)
            if (!have[g]) best[g] = unit_loss(j->simd, U, bs, u0, B, w[g], q[g], t[g], ev[g]);
        /* Within the unit: re-encode from the targets the recursion gives the columns (the
         * errors of the earlier columns fed forward), keep the codes while the loss drops. */
        bool active[FB_MAXR];
        for (int g = 0; g < nr; g++) active[g] = true;
        for (int it = 0; it < j->iters; it++) {
            m = 0;
            for (int g = 0; g < nr; g++) {
                /* targets equal to the weights (no error arrived): the encoder would give the
                 * same block again */
                if (active[g] && same_bits(t[g], w[g] + u0, (int)B)) active[g] = false;
                if (!active[g]) continue;
                *bad = g;
                if (j->refine) {
                    memcpy(blk2[g], blk[g], j->tsz);
                    iqf_kq_best_refine(j->simd, j->type, t[g], j->im + u0, blk2[g], j->refine);
                    st = iqf_dequantize(j->type, blk2[g], q2[g], 1, B, 1, s->msg, sizeof s->msg);
                } else if (j->iq_nw) {
                    memcpy(blk2[g], blk[g], j->tsz);
                    if (!iqf_iq3_refine(j->simd, j->type, t[g], j->im + u0, blk2[g], j->iq_nw))
                        iqf_iq2_refine(j->simd, j->type, t[g], j->im + u0, blk2[g], j->iq_nw);
                    if (!j->reround) st = iqf_dequantize(j->type, blk2[g], q2[g], 1, B, 1, s->msg, sizeof s->msg);
                } else {
                    st = encode_unit(j, s, w[g], t[g], u0, blk2[g], q2[g]);
                }
                if (st) return st;
                have[g] = false;
                ids[m++] = g;
            }
            if (!m) break;
            *bad = ids[0];
            if (j->reround && (st = reround_rows(j, s, m, ids, w, u0, blk2, q2, t2, e2, l2, have))) return st;
            for (int k = 0; k < m; k++) {
                const int g = ids[k];
                if (!have[g]) l2[g] = unit_loss(j->simd, U, bs, u0, B, w[g], q2[g], t2[g], e2[g]);
                if (!(l2[g] < best[g])) {
                    active[g] = false;
                    continue;
                }
                if (!(l2[g] < best[g] * (1 - j->tau))) active[g] = false; /* small gain: the last */
                best[g] = l2[g];
                memcpy(blk[g], blk2[g], j->tsz);
                float *x;
                x = q[g], q[g] = q2[g], q2[g] = x;
                x = t[g], t[g] = t2[g], t2[g] = x;
                x = ev[g], ev[g] = e2[g], e2[g] = x;
            }
        }
    }
    /* The unit's errors fed forward: inside the unit, w becomes the targets t (what the
     * recursion with the final codes gives; read again by row-context encoders), and the
     * later columns of each block of H receive the errors. */
    for (int g = 0; g < nr; g++) {
        /* (iters 0: the re-rounding's recursion, when it was the decoded values', is the sweep) */
        if (j->iters > 0 || have[g]) {
            memcpy(w[g] + u0, t[g], (size_t)B * sizeof(float));
            feed_beyond(j->simd, U, bs, w[g], u0, B, n, ev[g]);
        } else {
            sweep(j->simd, U, bs, w[g] + u0, u0, B, n, q[g], NULL, NULL, NULL);
        }
    }
    return IQF_OK;
}

/* Rows are taken FB_ROWS at a time and their units interleaved (unit column by unit column), so
 * that the block of U a unit reads is reused from cache by the group's other rows, and their
 * sweeps run together (fb_group). Every row's computation is the same as alone: the order
 * changes no bit. */

static void fb_range(void *arg, int64_t b, int64_t e, int tid) {
    const fbjob *j = arg;
    fbscratch *s = &j->s[tid];
    const int64_t n = j->ncols, B = j->blck;
    for (int64_t r0 = b; r0 < e; r0 += FB_ROWS) {
        if (s->st) return;
        const int nr = (int)(e - r0 < FB_ROWS ? e - r0 : FB_ROWS);
        float *w[FB_MAXR];
        uint8_t *out[FB_MAXR];
        for (int g = 0; g < nr; g++) {
            w[g] = s->w + g * n;
            out[g] = j->dst + (size_t)(r0 + g) * j->row_bytes;
            memcpy(w[g], j->src + (r0 + g) * n, (size_t)n * sizeof(float));
        }
        for (int64_t u0 = 0; u0 < n; u0 += B) {
            int bad = 0;
            const iqf_status st = fb_group(j, s, nr, w, out, u0, &bad);
            if (st) {
                s->st = st;
                s->bad_row = r0 + bad;
                return;
            }
        }
    }
}

iqf_status iqf_fb_quantize_rows(const iqf_fb_factor *f, int type, const float *src, void *dst,
                                int64_t nrows, int64_t ncols, const float *imatrix,
                                const iqf_quantize_params *params, char *err, size_t errlen) {
    const iqf_type_info *ti = iqf_type_get(type);
    if (!f || !f->U || !ti) return iqf_fail(err, errlen, !ti ? IQF_E_UNKNOWN_TYPE : IQF_E_INVALID_ARG, "bad feedback arguments");
    if (ncols != f->n)
        return iqf_fail(err, errlen, IQF_E_SHAPE, "the Hessian is %" PRId64 " wide, the rows have %" PRId64 " columns", f->n, ncols);
    if (!iqf_can_encode(type)) return iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "type %s cannot be encoded", ti->name);
    if (ti->blck_size < 1 || ncols % ti->blck_size)
        return iqf_fail(err, errlen, IQF_E_SHAPE, "row length %" PRId64 " is not a multiple of %s's block size", ncols, ti->name);
    if (nrows < 0 || (nrows > 0 && (!src || !dst))) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad rows");
    /* non-finite input: the same message as iqf_quantize */
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t c = 0; c < ncols; c++)
            if (!isfinite(src[r * ncols + c]))
                return iqf_fail(err, errlen, IQF_E_NONFINITE, "row %" PRId64 ", column %" PRId64 ": value is %s", r, c,
                                isnan(src[r * ncols + c]) ? "NaN" : "Inf");
    iqf_quantize_params qp = params ? *params : iqf_quantize_default_params();
    int nt = qp.n_threads > 0 ? qp.n_threads : iqf_cpu_count();
    if (nt > nrows) nt = nrows > 0 ? (int)nrows : 1;
    qp.n_threads = 1;
    const float *im = imatrix ? imatrix : f->diag;

    fbjob j = { f, type, src, dst, ncols, ti->blck_size, iqf_row_size(type, ncols), ti->type_size, im,
                row_context(type, im, qp.mode), qp, FB_ITERS, iqf_fb_block_supported(type), false, resolve_simd(qp.simd), 0, 0, 0, NULL };
    /* q3_K keeps full re-encodings: warm-started ones cost it ~0.8% KLD on kjv-3m Q3_K_M */
    const iqf_type_traits *tr = iqf_traits(type);
    if (!tr) return iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "type %s has no traits row", ti->name);
    if (qp.mode == IQF_MODE_BEST && tr->fb_refine) j.refine = FB_REFINE_NIT;
    j.grid = iqf_fb_block_group(type) > 1;
    /* The grid types' re-encodings are warm-started from the current block: the encoder's search
     * at the one candidate scale nearest each sub-block's current scale (iq_refine.h). On kjv-3m
     * (docs/QUALITY.md) that is better than the full encoder for IQ3_XXS (0.02144 with one
     * re-encoding, 0.02156 with two full ones) at a fraction of its cost; IQ2 types take two, the
     * second only after a gain of 2% (IQ2_XS 0.08055, two full ones 0.07965), for feedback
     * within 3x best's time at the 7B shape (docs/PERFORMANCE.md). IQ3_S keeps two full
     * re-encodings: warm ones cost the IQ3_S file 1.5-2% KLD. */
    if (j.grid && j.reround && tr->fb_warm_iters > 0) {
        j.iq_nw = FB_IQ_WINDOW;
        j.iters = tr->fb_warm_iters;
        j.tau = tr->fb_warm_tau;
    }
    /* q3_K's re-encodings are the full encoder (above): the second only after a gain of 5%
     * (kjv-3m Q3_K_M 0.011867 vs 0.011846). One full re-encoding: Q3_K_M 0.011881, Q3_K_S
     * 0.016624 (+0.7%), for no time at the 7B shape, where the gate never opens; warm-started
     * ones with 2 or 3 alternations: Q3_K_M 0.01202 / 0.01198. */
    if (tr->fb_tau > 0) j.tau = tr->fb_tau;
    j.s = calloc((size_t)nt, sizeof *j.s);
    iqf_status st = IQF_OK;
    if (!j.s) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int t = 0; t < nt; t++) {
        j.s[t].w = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].q = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].row = malloc(j.row_bytes);
        j.s[t].q2 = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].t = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].t2 = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].rw = malloc((size_t)ncols * sizeof(float));
        j.s[t].blk2 = malloc(ti->type_size * FB_ROWS);
        j.s[t].rr = malloc(sizeof(rr_state) * FB_ROWS);
        j.s[t].e = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].e2 = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        j.s[t].v = malloc((size_t)(ncols * FB_ROWS) * sizeof(float));
        if (!j.s[t].e || !j.s[t].e2 || !j.s[t].v) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        if (!j.s[t].w || !j.s[t].q || !j.s[t].row || !j.s[t].q2 || !j.s[t].t || !j.s[t].t2 || !j.s[t].rw || !j.s[t].blk2 || !j.s[t].rr) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    if (!st && iqf_parallel_for(nt, nrows, FB_ROWS, fb_range, &j))
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "could not start worker threads");
    if (!st) {
        int best = -1;
        for (int t = 0; t < nt; t++)
            if (j.s[t].st && (best < 0 || j.s[t].bad_row < j.s[best].bad_row)) best = t;
        if (best >= 0) st = iqf_fail(err, errlen, j.s[best].st, "row %" PRId64 ": %s", j.s[best].bad_row, j.s[best].msg);
    }
    for (int t = 0; t < nt; t++) {
        free(j.s[t].w);
        free(j.s[t].q);
        free(j.s[t].row);
        free(j.s[t].q2);
        free(j.s[t].t);
        free(j.s[t].t2);
        free(j.s[t].rw);
        free(j.s[t].blk2);
        free(j.s[t].rr);
        free(j.s[t].e);
        free(j.s[t].e2);
        free(j.s[t].v);
    }
    free(j.s);
    return st;
}

iqf_status iqf_quantize_feedback(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                                 const float *hessian, int64_t hblock, float damp, const float *imatrix,
                                 const iqf_quantize_params *params, char *err, size_t errlen) {
    if (hblock <= 0) hblock = ncols;
    iqf_fb_factor f;
    iqf_status st = iqf_fb_factor_make(hessian, ncols, hblock, damp, params ? params->n_threads : 0, &f, err, errlen);
    if (st) return st;
    st = iqf_fb_quantize_rows(&f, type, src, dst, nrows, ncols, imatrix, params, err, errlen);
    iqf_fb_factor_free(&f);
    return st;
}
