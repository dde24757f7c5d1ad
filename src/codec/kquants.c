/*
 * kquants.c - q2_K, q3_K, q4_K, q5_K, q6_K (super-blocks of 256 weights), bit-exact with
 * ggml 0.25.1.
 *
 * Like ggml_quantize_chunk: without an importance matrix the quantize_row_q*_K_ref encoders run,
 * with one the quantize_row_q*_K_impl encoders. The per-sub-block scale searches (make_qkx2/3,
 * make_qx, make_q3) of a whole chunk of super-blocks go through kq_common's batch helpers, whose
 * SIMD paths run one sub-block per vector lane; the per-super-block parts (make_qp_quants, scale
 * packing) follow the reference directly, and the final re-quantization at the decoded fp16
 * scales goes through iqf_kq_requant (lanes over the values of a sub-block).
 *
 * IQF_MODE_BEST: every super-block's header (d, dmin, sub-block scales) is first chosen as compat
 * does; its codes are not re-rounded and packed: best_block below reads the header into kq_best's
 * (d, dmin, k, m, q) form, iqf_kqb_search starts from it (codes re-rounded at its decoded scales,
 * the error-optimal codes for that header) and searches for a better one, and the result is
 * packed.
 */
#include "kq_best.h"
#include "kq_common.h"
#include "util/fma.h"

#include <math.h>
#include <string.h>

#define NSB 16 /* super-blocks per batch */

/* Sequential sum of squares of one super-block, as the reference's sum_x2 / sumx2 loops. */
static inline float sb_sumx2(const float *x) {
    float s = 0;
    for (int j = 0; j < QK_K; ++j) s += x[j] * x[j]; /* unfused on arm64 too (fma.h) */
    return s;
}

/* The *_impl encoders' weights of ns super-blocks: w = qw*sqrt(sigma2 + x^2) with sigma2 =
 * fac * sum(x^2) / QK_K per super-block (q2_K: fac 1, q3_K/q4_K/q5_K: 2), and their sums sw over
 * sub-blocks of gs values. qw: the chunk's importance (super-block s at qw + s*QK_K). */
static void sb_impl_weights(iqf_simd simd, int ns, const float *xc, const float *qw, float fac, int gs,
                            float *w, float *sw) {
    for (int s = 0; s < ns; s++) {
        const float *xs = xc + s * QK_K;
        const float sigma2 = fac * sb_sumx2(xs) / QK_K;
        float *ws = w + s * QK_K;
        iqf_kq_impl_weights(simd, QK_K, xs, qw + s * QK_K, sigma2, ws);
        for (int j = 0; j < QK_K / gs; ++j) {
            float sum = 0;
            for (int l = 0; l < gs; ++l) sum += ws[gs * j + l];
            sw[s * (QK_K / gs) + j] = sum;
        }
    }
}

/* Best mode's search parameters per type (see kq_best.h): [type][0] without, [type][1] with an
 * importance matrix. */
enum { BQ2, BQ3, BQ4, BQ5, BQ6 };
static const kqb_fmt best_fmts[5][2] = {
    /* nsub sub  q range    k range   m range win winm scan step nit nstart sig */
    [BQ2] = { { 16, 16, 0, 3, 0, 15, 0, 15, 1, 1, 0, 0.f, 2, 1, 1.f },
              { 16, 16, 0, 3, 0, 15, 0, 15, 1, 1, 0, 0.f, 2, 3, 1.f } },
    [BQ3] = { { 16, 16, -4, 3, -32, 31, 0, 0, 2, 0, 0, 0.f, 3, 1, 2.f },
              { 16, 16, -4, 3, -32, 31, 0, 0, 2, 0, 0, 0.f, 3, 1, 2.f } },
    [BQ4] = { { 8, 32, 0, 15, 0, 63, 0, 63, 1, 1, 0, 0.f, 2, 1, 2.f },
              { 8, 32, 0, 15, 0, 63, 0, 63, 1, 1, 0, 0.f, 3, 3, 2.f } },
    [BQ5] = { { 8, 32, 0, 31, 0, 63, 0, 63, 1, 1, 0, 0.f, 2, 1, 2.f },
              { 8, 32, 0, 31, 0, 63, 0, 63, 1, 1, 0, 0.f, 3, 3, 2.f } },
    [BQ6] = { { 16, 16, -32, 31, -128, 127, 0, 0, 1, 0, 3, 0.2f, 1, 1, 2.f },
              { 16, 16, -32, 31, -128, 127, 0, 0, 1, 0, 3, 0.2f, 1, 1, 2.f } },
};

/* Every type's row: chunks of up to NSB super-blocks. A chunk encoder writes the compat encoding
 * of ns super-blocks at yc (qwc: their importance or NULL) and their per-sub-block scales (sref) and
 * mins (mref); in best mode it writes only the headers, and best_block then searches each
 * super-block from its header and sref/mref. */
typedef void k_chunk_fn(const iqf_qctx *ctx, const float *xc, const float *qwc, int ns, void *yc,
                        float *sref, float *mref);
static void best_block(iqf_simd simd, int t, const float *x, const float *qw, const float *sref,
                       const float *mref, void *vb);
static void k_row(const iqf_qctx *ctx, int t, const float *x, void *vy, int64_t n, const float *qw,
                  size_t bsize, k_chunk_fn *chunk) {
    const int64_t nb = n / QK_K;
    const int nsub = best_fmts[t][0].nsub;
    float sref[NSB * 16], mref[NSB * 16];
    for (int64_t i0 = 0; i0 < nb; i0 += NSB) {
        const int ns = (int)(nb - i0 < NSB ? nb - i0 : NSB);
        const float *xc = x + i0 * QK_K, *qwc = qw ? qw + i0 * QK_K : NULL;
        uint8_t *yc = (uint8_t *)vy + i0 * bsize;
        chunk(ctx, xc, qwc, ns, yc, sref, mref);
        if (ctx->mode != IQF_MODE_BEST) continue;
        for (int s = 0; s < ns; s++)
            best_block(ctx->simd, t, xc + s * QK_K, qwc ? qwc + s * QK_K : NULL, sref + nsub * s,
                       mref + nsub * s, yc + s * bsize);
    }
}

/* qs packing shared by q2_K and q3_K: four 2-bit values per byte, 32-byte strides. */
static void pack_2bit(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < QK_K; j += 128)
        for (int l = 0; l < 32; ++l)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) |
                                      (L[j + l + 96] << 6));
}

/* ================================ q2_K ================================ */
static void q2_K_finish(iqf_simd simd, const float *x, block_q2_K *y, uint8_t *L) {
    float d[16], dm[16];
    const float d0 = IQF_FP16_TO_FP32(y->d), m0 = IQF_FP16_TO_FP32(y->dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        d[j] = d0 * (y->scales[j] & 0xF);
        dm[j] = m0 * (y->scales[j] >> 4);
    }
    iqf_kq_requant(simd, 16, 16, x, d, dm, 0, 3, 0, L);
    pack_2bit(L, y->qs);
}

static void q2_K_chunk(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, void *yc,
                       float *scales, float *mins) {
    block_q2_K *y = yc;
    uint8_t L[NSB * QK_K];
    float w[NSB * QK_K];
    if (ns < 1) return; /* never (k_row); tells the compiler that w is written below */
    if (!qw) {
        for (int j = 0; j < ns * QK_K; ++j) w[j] = fabsf(xc[j]);
        iqf_kq_qkx_batch(ctx->simd, ns * 16, 16, 3, xc, w, L, scales, mins, -0.5f, 0.1f, 15, true);
        for (int s = 0; s < ns; s++) {
            const float *xs = xc + s * QK_K, *sc = scales + s * 16, *mn = mins + s * 16;
            block_q2_K *b = &y[s];
            float max_scale = 0, max_min = 0;
            for (int j = 0; j < 16; ++j) {
                if (sc[j] > max_scale) max_scale = sc[j];
                if (mn[j] > max_min) max_min = mn[j];
            }
            if (max_scale > 0) {
                float iscale = 15.f / max_scale;
                for (int j = 0; j < 16; ++j) b->scales[j] = (uint8_t)iqf_nearest_int(iscale * sc[j]);
                b->d = IQF_FP32_TO_FP16(max_scale / 15.f);
            } else {
                for (int j = 0; j < 16; ++j) b->scales[j] = 0;
                b->d = IQF_FP32_TO_FP16(0.f);
            }
            if (max_min > 0) {
                float iscale = 15.f / max_min;
                for (int j = 0; j < 16; ++j)
                    b->scales[j] = (uint8_t)(b->scales[j] | ((unsigned)iqf_nearest_int(iscale * mn[j]) << 4));
                b->dmin = IQF_FP32_TO_FP16(max_min / 15.f);
            } else {
                b->dmin = IQF_FP32_TO_FP16(0.f);
            }
            if (ctx->mode != IQF_MODE_BEST) q2_K_finish(ctx->simd, xs, b, L + s * QK_K);
        }
    } else {
        float sw[NSB * 16];
        sb_impl_weights(ctx->simd, ns, xc, qw, 1.f, 16, w, sw);
        iqf_kq_qkx_batch(ctx->simd, ns * 16, 16, 3, xc, w, L, scales, mins, -0.9f, 0.05f, 36, false);
        for (int s = 0; s < ns; s++) {
            block_q2_K *b = &y[s];
            uint8_t Ls[16], Lm[16];
            float dm = iqf_kq_make_qp_quants(16, 15, scales + s * 16, Ls, sw + s * 16);
            float mm = iqf_kq_make_qp_quants(16, 15, mins + s * 16, Lm, sw + s * 16);
            b->d = IQF_FP32_TO_FP16(dm);
            b->dmin = IQF_FP32_TO_FP16(mm);
            for (int j = 0; j < 16; ++j) b->scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
            if (ctx->mode != IQF_MODE_BEST) q2_K_finish(ctx->simd, xc + s * QK_K, b, L + s * QK_K);
        }
    }
}

static void dequantize_row_q2_K(const void *vx, float *y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d), min = IQF_FP16_TO_FP32(x[i].dmin);
        const uint8_t *q = x[i].qs;
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = IQF_FMS_ARM(dl, (float)((q[l + 16 * h] >> shift) & 3), ml);
                }
            }
            q += 32;
        }
    }
}

/* ================================ q3_K ================================ */
static void q3_K_pack_scale(uint8_t *scales, int j, int l) {
    if (j < 8) scales[j] = (uint8_t)(l & 0xF);
    else scales[j - 8] = (uint8_t)(scales[j - 8] | ((l & 0xF) << 4));
    l >>= 4;
    scales[j % 4 + 8] = (uint8_t)(scales[j % 4 + 8] | (l << (2 * (j / 4))));
}


/* Codes 0..7 (L, clobbered) into hmask and qs. */
static void q3_K_pack_codes(block_q3_K *y, uint8_t *L) {
    /* High bit of value j goes to bit j/32 of hmask[j%32]; the low two bits stay. */
    for (int m = 0; m < QK_K / 8; ++m) {
        uint8_t h = 0;
        for (int b = 0; b < 8; ++b) h = (uint8_t)(h | ((L[32 * b + m] > 3) << b));
        y->hmask[m] = h;
    }
    for (int j = 0; j < QK_K; ++j) L[j] &= 3;
    pack_2bit(L, y->qs);
}

static void q3_K_finish(iqf_simd simd, const float *x, block_q3_K *y, int8_t *Ls) {
    uint8_t *L = (uint8_t *)Ls; /* values 0..7 */
    float d[16];
    const float d0 = IQF_FP16_TO_FP32(y->d);
    for (int j = 0; j < QK_K / 16; ++j) d[j] = d0 * kq_q3_K_scale(y->scales, j);
    iqf_kq_requant(simd, 16, 16, x, d, NULL, -4, 3, 4, L);
    q3_K_pack_codes(y, L);
}

static void q3_K_chunk(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, void *yc,
                       float *scales, float *mins) {
    (void)mins;
    block_q3_K *y = yc;
    int8_t L[NSB * QK_K];
    if (!qw) {
        iqf_kq_q3_batch(ctx->simd, ns * 16, 16, 4, xc, L, scales);
        for (int s = 0; s < ns; s++) {
            block_q3_K *b = &y[s];
            const float *sc = scales + s * 16;
            float amax;
            const float max_scale = kq_signed_max(16, sc, &amax);
            memset(b->scales, 0, 12);
            if (max_scale) {
                float iscale = -32.f / max_scale;
                for (int j = 0; j < 16; ++j) {
                    int8_t l = (int8_t)iqf_nearest_int(iscale * sc[j]);
                    l = (int8_t)((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
                    q3_K_pack_scale(b->scales, j, l);
                }
                b->d = IQF_FP32_TO_FP16(1 / iscale);
            } else {
                b->d = IQF_FP32_TO_FP16(0.f);
            }
            if (ctx->mode != IQF_MODE_BEST) q3_K_finish(ctx->simd, xc + s * QK_K, b, L + s * QK_K);
        }
    } else {
        float w[NSB * QK_K], sw[NSB * 16];
        sb_impl_weights(ctx->simd, ns, xc, qw, 2.f, 16, w, sw);
        iqf_kq_qx_batch(ctx->simd, ns * 16, 16, 4, xc, w, L, scales);
        for (int s = 0; s < ns; s++) {
            block_q3_K *b = &y[s];
            int8_t Ls[16];
            memset(b->scales, 0, 12);
            float d_block = iqf_kq_make_qx_quants(16, 32, scales + s * 16, Ls, 1, sw + s * 16);
            for (int j = 0; j < 16; ++j) q3_K_pack_scale(b->scales, j, Ls[j]);
            b->d = IQF_FP32_TO_FP16(d_block);
            if (ctx->mode != IQF_MODE_BEST) q3_K_finish(ctx->simd, xc + s * QK_K, b, L + s * QK_K);
        }
    }
}

static void dequantize_row_q3_K(const void *vx, float *y, int64_t n) {
    const block_q3_K *x = vx;
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d_all = IQF_FP16_TO_FP32(x[i].d);
        const uint8_t *q = x[i].qs, *hm = x[i].hmask;
        uint8_t m = 1;
        uint32_t aux[4];
        int8_t scales[16];
        memcpy(aux, x[i].scales, 12);
        uint32_t tmp = aux[2];
        aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
        aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
        aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
        aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
        memcpy(scales, aux, 16);
        int is = 0;
        for (int k = 0; k < QK_K; k += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int h = 0; h < 2; h++) {
                    const float dl = d_all * (scales[is++] - 32);
                    for (int l = 0; l < 16; ++l)
                        *y++ = dl * (float)(((q[l + 16 * h] >> shift) & 3) - ((hm[l + 16 * h] & m) ? 0 : 4));
                }
                m = (uint8_t)(m << 1);
            }
            q += 32;
        }
    }
}

/* ============================ q4_K and q5_K ============================ */
/* The two differ only in the code width (q4_K: nmax 15, q5_K: nmax 31, the fifth bit in qh), the
 * search parameters without an imatrix and q5_K's clamp of the imatrix scales: one body each
 * below, over nmax. */
/* The fields of super-block i (qh NULL for q4_K). */
typedef struct {
    iqf_half *d, *dmin;
    uint8_t *scales, *qh, *qs;
} k45_blk;
static inline k45_blk k45_block(int nmax, void *vy, int64_t i) {
    if (nmax == 15) {
        block_q4_K *b = (block_q4_K *)vy + i;
        return (k45_blk){ &b->d, &b->dmin, b->scales, NULL, b->qs };
    }
    block_q5_K *b = (block_q5_K *)vy + i;
    return (k45_blk){ &b->d, &b->dmin, b->scales, b->qh, b->qs };
}

/* Packs 6-bit scale/min pairs into the 12-byte K-quant layout (get_scale_min_k4's inverse). */
static void pack_scale_min_k4(uint8_t *scales, const uint8_t *ls, const uint8_t *lm) {
    for (int j = 0; j < QK_K / 32; ++j) {
        if (j < 4) {
            scales[j] = ls[j];
            scales[j + 4] = lm[j];
        } else {
            scales[j + 4] = (uint8_t)((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            scales[j - 4] = (uint8_t)(scales[j - 4] | ((ls[j] >> 4) << 6));
            scales[j - 0] = (uint8_t)(scales[j - 0] | ((lm[j] >> 4) << 6));
        }
    }
}

/* Final re-quantization at the decoded scales (q4_K: nmax 15, q5_K: nmax 31). */
static void k4_requant(iqf_simd simd, const float *x, iqf_half hd, iqf_half hdmin,
                       const uint8_t *scales, int nmax, uint8_t *L) {
    float d[8], dm[8];
    const float d0 = IQF_FP16_TO_FP32(hd), m0 = IQF_FP16_TO_FP32(hdmin);
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        kq_get_scale_min_k4(j, scales, &sc, &m);
        d[j] = d0 * sc;
        dm[j] = m0 * m;
    }
    iqf_kq_requant(simd, 8, 32, x, d, dm, 0, nmax, 0, L);
}

/* Scale search of ns super-blocks (8 sub-blocks of 32 each) for q4_K / q5_K. Fills
 * scales/mins/L and, for the imatrix path, sw. */
static void k4_search(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, int nmax,
                      float *w, float *sw, uint8_t *L, float *scales, float *mins) {
    if (!qw) {
        for (int g = 0; g < ns * 8; ++g) {
            const float *xg = xc + 32 * g;
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 = IQF_FMA_ARM(xg[l], xg[l], sum_x2);
            const float av_x = sqrtf(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) w[32 * g + l] = av_x + fabsf(xg[l]);
        }
        if (nmax == 15)
            iqf_kq_qkx_batch(ctx->simd, ns * 8, 32, 15, xc, w, L, scales, mins, -1.f, 0.1f, 20, false);
        else
            iqf_kq_qkx_batch(ctx->simd, ns * 8, 32, 31, xc, w, L, scales, mins, -0.5f, 0.1f, 15, false);
        return;
    }
    sb_impl_weights(ctx->simd, ns, xc, qw, 2.f, 32, w, sw);
    iqf_kq_qkx_batch(ctx->simd, ns * 8, 32, nmax, xc, w, L, scales, mins, -0.9f, 0.05f, 36, false);
}

/* Block header (d, dmin, 12 scale bytes) of one q4_K/q5_K super-block. */
static void k4_header(const float *sc, const float *mn, const float *sw, bool imat, bool clamp63,
                      uint8_t *scales, iqf_half *hd, iqf_half *hdmin) {
    uint8_t ls[8], lm[8];
    if (!imat) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            if (sc[j] > max_scale) max_scale = sc[j];
            if (mn[j] > max_min) max_min = mn[j];
        }
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; ++j) {
            uint8_t a = (uint8_t)iqf_nearest_int(inv_scale * sc[j]);
            uint8_t b = (uint8_t)iqf_nearest_int(inv_min * mn[j]);
            ls[j] = a < 63 ? a : 63;
            lm[j] = b < 63 ? b : 63;
        }
        pack_scale_min_k4(scales, ls, lm);
        *hd = IQF_FP32_TO_FP16(max_scale / 63.f);
        *hdmin = IQF_FP32_TO_FP16(max_min / 63.f);
    } else {
        float d_block = iqf_kq_make_qp_quants(8, 63, sc, ls, sw);
        float m_block = iqf_kq_make_qp_quants(8, 63, mn, lm, sw);
        for (int j = 0; clamp63 && j < 8; ++j) { /* q5_K clamps, q4_K does not */
            ls[j] = ls[j] < 63 ? ls[j] : 63;
            lm[j] = lm[j] < 63 ? lm[j] : 63;
        }
        pack_scale_min_k4(scales, ls, lm);
        *hd = IQF_FP32_TO_FP16(d_block);
        *hdmin = IQF_FP32_TO_FP16(m_block);
    }
}

/* ============================== best mode ============================== */
/* Codes 0..15 (q4_K) or 0..31 (q5_K: bit 4 into qh) into qs: 32-byte strides, low nibble value j,
 * high nibble value j + 32 of each 64. */
static void k45_pack_codes(k45_blk b, const uint8_t *Ls) {
    uint8_t *ql = b.qs;
    if (b.qh) memset(b.qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int k = 0; k < QK_K; k += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = Ls[k + j], l2 = Ls[k + j + 32];
            if (l1 > 15) { l1 -= 16; b.qh[j] |= m1; }
            if (l2 > 15) { l2 -= 16; b.qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
        ql += 32;
    }
}

/* Codes 0..63 into q6_K's ql and qh. */
static void q6_K_pack_codes(block_q6_K *b, const uint8_t *Ls) {
    uint8_t *ql = b->ql, *qh = b->qh;
    for (int j = 0; j < QK_K; j += 128, ql += 64, qh += 32) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = Ls[j + l + 0] & 0xF, q2 = Ls[j + l + 32] & 0xF;
            const uint8_t q3 = Ls[j + l + 64] & 0xF, q4 = Ls[j + l + 96] & 0xF;
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((Ls[j + l] >> 4) | ((Ls[j + l + 32] >> 4) << 2) |
                              ((Ls[j + l + 64] >> 4) << 4) | ((Ls[j + l + 96] >> 4) << 6));
        }
    }
}

static void k4_unpack(const uint8_t *scales, kqb_rep *r) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        kq_get_scale_min_k4(j, scales, &sc, &m);
        r->k[j] = sc;
        r->m[j] = m;
    }
}

static void k4_pack(const kqb_rep *r, uint8_t *scales) {
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        ls[j] = (uint8_t)r->k[j];
        lm[j] = (uint8_t)r->m[j];
    }
    pack_scale_min_k4(scales, ls, lm);
}

/* A super-block's header as kq_best's representation (d, dmin, integer scales k and mins m). */
static void best_get(int t, const void *vb, kqb_rep *r) {
    r->hdm = 0;
    memset(r->m, 0, sizeof r->m);
    switch (t) {
    case BQ2: {
        const block_q2_K *b = vb;
        r->hd = b->d;
        r->hdm = b->dmin;
        for (int j = 0; j < 16; j++) {
            r->k[j] = (int16_t)(b->scales[j] & 0xF);
            r->m[j] = (int16_t)(b->scales[j] >> 4);
        }
        break;
    }
    case BQ3: {
        const block_q3_K *b = vb;
        r->hd = b->d;
        for (int j = 0; j < 16; j++) r->k[j] = (int16_t)kq_q3_K_scale(b->scales, j);
        break;
    }
    case BQ4:
    case BQ5: {
        const k45_blk b = k45_block(t == BQ4 ? 15 : 31, (void *)vb, 0); /* read only */
        r->hd = *b.d;
        r->hdm = *b.dmin;
        k4_unpack(b.scales, r);
        break;
    }
    default: {
        const block_q6_K *b = vb;
        r->hd = b->d;
        for (int j = 0; j < 16; j++) r->k[j] = b->scales[j];
    }
    }
}

/* The representation back into the super-block, with its codes L (0-based). */
static void best_put(int t, const kqb_rep *r, uint8_t *L, void *vb) {
    switch (t) {
    case BQ2: {
        block_q2_K *b = vb;
        for (int j = 0; j < 16; j++) b->scales[j] = (uint8_t)(r->k[j] | (r->m[j] << 4));
        b->d = r->hd;
        b->dmin = r->hdm;
        pack_2bit(L, b->qs);
        break;
    }
    case BQ3: {
        block_q3_K *b = vb;
        memset(b->scales, 0, 12);
        for (int j = 0; j < 16; j++) q3_K_pack_scale(b->scales, j, r->k[j] + 32);
        b->d = r->hd;
        q3_K_pack_codes(b, L);
        break;
    }
    case BQ4:
    case BQ5: {
        const k45_blk b = k45_block(t == BQ4 ? 15 : 31, vb, 0);
        *b.d = r->hd;
        *b.dmin = r->hdm;
        k4_pack(r, b.scales);
        k45_pack_codes(b, L);
        break;
    }
    default: {
        block_q6_K *b = vb;
        for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)r->k[j];
        b->d = r->hd;
        q6_K_pack_codes(b, L);
    }
    }
}

/* best mode for one super-block of type t: iqf_kqb_search from its compat header. */
static void best_block(iqf_simd simd, int t, const float *x, const float *qw, const float *sref,
                       const float *mref, void *vb) {
    const kqb_fmt *f = &best_fmts[t][qw != NULL];
    kqb_rep r;
    best_get(t, vb, &r);
    iqf_kqb_search(simd, f, x, qw, sref, f->mhi ? mref : NULL, &r);
    uint8_t L[QK_K];
    for (int i = 0; i < QK_K; i++) L[i] = (uint8_t)(r.q[i] - f->qlo);
    best_put(t, &r, L, vb);
}

static void k45_chunk(const iqf_qctx *ctx, int nmax, const float *xc, const float *qw, int ns, void *yc,
                      float *scales, float *mins) {
    uint8_t L[NSB * QK_K];
    float w[NSB * QK_K], sw[NSB * 8];
    k4_search(ctx, xc, qw, ns, nmax, w, sw, L, scales, mins);
    for (int s = 0; s < ns; s++) {
        const k45_blk b = k45_block(nmax, yc, s);
        uint8_t *Ls = L + s * QK_K;
        k4_header(scales + 8 * s, mins + 8 * s, sw + 8 * s, qw != NULL, nmax == 31, b.scales, b.d, b.dmin);
        if (ctx->mode == IQF_MODE_BEST) continue; /* best_block re-rounds the codes */
        k4_requant(ctx->simd, xc + s * QK_K, *b.d, *b.dmin, b.scales, nmax, Ls);
        k45_pack_codes(b, Ls);
    }
}
static void q4_K_chunk(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, void *yc, float *sref, float *mref) {
    k45_chunk(ctx, 15, xc, qw, ns, yc, sref, mref);
}
static void q5_K_chunk(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, void *yc, float *sref, float *mref) {
    k45_chunk(ctx, 31, xc, qw, ns, yc, sref, mref);
}

static inline __attribute__((always_inline)) void k45_dequantize(int nmax, const void *vx, float *y, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; i++) {
        const k45_blk b = k45_block(nmax, (void *)vx, i); /* read only */
        const uint8_t *ql = b.qs, *qh = b.qh;
        const float d = IQF_FP16_TO_FP32(*b.d), min = IQF_FP16_TO_FP32(*b.dmin);
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            kq_get_scale_min_k4(is + 0, b.scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            kq_get_scale_min_k4(is + 1, b.scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = IQF_FMS_ARM(d1, ((ql[l] & 0xF) + ((qh && (qh[l] & u1)) ? 16 : 0)), m1);
            for (int l = 0; l < 32; ++l) *y++ = IQF_FMS_ARM(d2, ((ql[l] >> 4) + ((qh && (qh[l] & u2)) ? 16 : 0)), m2);
            ql += 32;
            is += 2;
            u1 = (uint8_t)(u1 << 2);
            u2 = (uint8_t)(u2 << 2);
        }
    }
}

static void dequantize_row_q4_K(const void *vx, float *y, int64_t n) { k45_dequantize(15, vx, y, n); }
static void dequantize_row_q5_K(const void *vx, float *y, int64_t n) { k45_dequantize(31, vx, y, n); }

/* ================================ q6_K ================================ */
static void q6_K_chunk(const iqf_qctx *ctx, const float *xc, const float *qw, int ns, void *yc,
                       float *scales, float *mins) {
    (void)mins;
    block_q6_K *y = yc;
    int8_t L[NSB * QK_K];
    /* ref: weights x*x (qw NULL); impl: the raw importance matrix. */
    iqf_kq_qx_batch(ctx->simd, ns * 16, 16, 32, xc, qw, L, scales);
    for (int s = 0; s < ns; s++) {
        block_q6_K *b = &y[s];
        const float *xs = xc + s * QK_K, *sc = scales + s * 16;
        int8_t *Ls = L + s * QK_K;
        float max_abs_scale;
        const float max_scale = kq_signed_max(16, sc, &max_abs_scale);
        if (max_abs_scale < KQ_GROUP_MAX_EPS) {
            memset(b, 0, sizeof *b);
            b->d = IQF_FP32_TO_FP16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        b->d = IQF_FP32_TO_FP16(1 / iscale);
        for (int ib = 0; ib < 16; ++ib) {
            int l = iqf_nearest_int(iscale * sc[ib]);
            b->scales[ib] = (int8_t)(l < 127 ? l : 127);
        }
        if (ctx->mode == IQF_MODE_BEST) continue; /* best_block re-rounds the codes */
        float d[16];
        for (int j = 0; j < 16; ++j) d[j] = IQF_FP16_TO_FP32(b->d) * b->scales[j];
        iqf_kq_requant(ctx->simd, 16, 16, xs, d, NULL, -32, 31, 32, (uint8_t *)Ls);
        q6_K_pack_codes(b, (const uint8_t *)Ls);
    }
}

static void dequantize_row_q6_K(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        const uint8_t *ql = x[i].ql, *qh = x[i].qh;
        const int8_t *sc = x[i].scales;
        for (int k = 0; k < QK_K; k += 128) {
            for (int l = 0; l < 32; ++l) {
                int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l + 0] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

static void quantize_row_q2_K(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    k_row(ctx, BQ2, x, vy, n, qw, sizeof(block_q2_K), q2_K_chunk);
}
static void quantize_row_q3_K(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    k_row(ctx, BQ3, x, vy, n, qw, sizeof(block_q3_K), q3_K_chunk);
}
static void quantize_row_q4_K(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    k_row(ctx, BQ4, x, vy, n, qw, sizeof(block_q4_K), q4_K_chunk);
}
static void quantize_row_q5_K(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    k_row(ctx, BQ5, x, vy, n, qw, sizeof(block_q5_K), q5_K_chunk);
}
static void quantize_row_q6_K(const iqf_qctx *ctx, const float *x, void *vy, int64_t n, const float *qw) {
    k_row(ctx, BQ6, x, vy, n, qw, sizeof(block_q6_K), q6_K_chunk);
}

const iqf_codec iqf_codecs_kquants[] = {
    { IQF_TYPE_Q2_K, NULL, quantize_row_q2_K, dequantize_row_q2_K },
    { IQF_TYPE_Q3_K, NULL, quantize_row_q3_K, dequantize_row_q3_K },
    { IQF_TYPE_Q4_K, NULL, quantize_row_q4_K, dequantize_row_q4_K },
    { IQF_TYPE_Q5_K, NULL, quantize_row_q5_K, dequantize_row_q5_K },
    { IQF_TYPE_Q6_K, NULL, quantize_row_q6_K, dequantize_row_q6_K },
    { -1, NULL, NULL, NULL },
};

/* Best mode's search for one super-block of q2_K..q6_K started from the block's own header only
 * (no compat search, the start is not joined by a second one), at most nit alternations; for
 * re-encoding a block after its weights moved a little (error feedback, quantize/feedback.c).
 * The references of the search are the block's own decoded sub-block scales and mins (no scan). Every
 * SIMD level writes the same bytes. False for another type. */
bool iqf_kq_best_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nit) {
    int t;
    switch (type) {
    case IQF_TYPE_Q2_K: t = BQ2; break;
    case IQF_TYPE_Q3_K: t = BQ3; break;
    case IQF_TYPE_Q4_K: t = BQ4; break;
    case IQF_TYPE_Q5_K: t = BQ5; break;
    case IQF_TYPE_Q6_K: t = BQ6; break;
    default: return false;
    }
    kqb_fmt f = best_fmts[t][qw != NULL];
    f.nstart = 1;
    if (nit > 0 && nit < f.nit) f.nit = nit;
    f.scan = 0; /* q6_K: the block's own scales as the references, no scan */
    kqb_rep r;
    best_get(t, blk, &r);
    const float d = IQF_FP16_TO_FP32(r.hd), dm = IQF_FP16_TO_FP32(r.hdm);
    float sref[16], mref[16];
    for (int j = 0; j < f.nsub; j++) {
        sref[j] = d * (float)r.k[j];
        mref[j] = dm * (float)r.m[j];
    }
    iqf_kqb_search(simd, &f, x, qw, sref, f.mhi ? mref : NULL, &r);
    uint8_t L[QK_K];
    for (int i = 0; i < QK_K; i++) L[i] = (uint8_t)(r.q[i] - f.qlo);
    best_put(t, &r, L, blk);
    return true;
}
