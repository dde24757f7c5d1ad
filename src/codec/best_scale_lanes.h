/* best_scale_lanes.h - the vector kernels of best_scale.c, written once over the lane count
 * (vec_lanes.h): best_scale.c includes vec_lanes.h and this file once per instruction set (VL_W 4
 * in the plain pass, 8 under AVX2, 16 under AVX-512). No include guard on purpose.
 *
 * The computation is defined on 16 logical lanes (candidate c of a batch, block b of a batch, or
 * value j mod 16 of an element loop); a pass covers them with NH = 16 / VL_W vectors. Lane-wise
 * IEEE operations: every pass gives the same bits.
 *
 * This file holds what the families share (rounding, the 16-lane sums, fp16 conversions, the
 * batch transpose) and the row driver; the searches are one header per family:
 *   best_scale_fast_lanes.h   the fast symmetric searches on 16 transposed blocks (q4_0, q5_0,
 *                             q8_0 without an imatrix; q8_0 with one)
 *   best_scale_int_lanes.h    q4_1/q5_1 without an imatrix: the candidate search on integers
 *   best_scale_dense_lanes.h  the dense searches of one block with an imatrix (all five types)
 *   best_scale_grid_lanes.h   IQ4's 16-level grid kernels */
#define NH (16 / VL_W)
#define FORH _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)

/* clamp to [lo, hi] (by compares: NaN and -0 stay) then round half to even (|v| < 2^22). The
 * selects by VM and vf_sel (a masked move under AVX-512): the bitwise select compiles there to
 * two masked xors a clamp, 10% of q8_0's time. */
VL_FN VF VL_SFX(clampround)(VF v, VF lo, VF hi) {
    v = vf_sel(vf_lt(v, lo), lo, v);
    v = vf_sel(vf_gt(v, hi), hi, v);
    const VF mg = vf_splat(MAGIC);
    return (v + mg) - mg;
}
/* the 16 logical lanes held in NH vectors, summed in sum16's fixed tree */
VL_FN float VL_SFX(hsum)(const VF *v) {
    float a[16];
    for (int h = 0; h < NH; h++) vf_store(a + h * VL_W, v[h]);
    return sum16(a);
}
#define CR VL_SFX(clampround)
#define HSUM VL_SFX(hsum)

static VL_TGT void VL_SFX(weights)(const float *x, const float *qw, float sigma2, float *w) {
    if (qw) {
        for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
    } else {
        for (int j = 0; j < QK; j++) w[j] = 1;
    }
}

/* The transposed arrays of the batched searches are the kernels' own, aligned to 64: whole
 * aligned vector accesses (vf_loada, vu_loada: an unaligned 256-bit access would be split in two
 * by GCC's generic tuning and stall the loads that follow on store forwarding). */
/* iqf_fp32_to_fp16 lane-wise (the same bit algorithm, copied from float16.c), after saturating
 * to the largest finite fp16 as fp16_sat does; non-finite lanes must not reach it. */
VL_FN VU VL_SFX(f2h_full)(VF f) {
    const VU w = (VU)f;
    VF base = ((VF)(w & 0x7fffffffu) * vf_splat(0x1.0p+112f)) * vf_splat(0x1.0p-110f);
    const VU shl1 = w + w, sign = w & 0x80000000u;
    VU bias = shl1 & 0xFF000000u;
    bias = vu_bsel(bias < 0x71000000u, bias - bias + 0x71000000u, bias);
    base = (VF)((bias >> 1) + 0x07800000u) + base;
    const VU bits = (VU)base;
    const VU nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (sign >> 16) | vu_bsel(shl1 > 0xFF000000u, nonsign - nonsign + 0x7E00u, nonsign);
}
/* iqf_fp16_to_fp32 lane-wise (same bit algorithm) */
VL_FN VF VL_SFX(h2f_full)(VU hb) {
    const VU w = hb << 16, sign = w & 0x80000000u, two_w = w + w;
    const VF nv = (VF)((two_w >> 4) + (0xE0u << 23)) * vf_splat(0x1.0p-112f);
    const VF dv = (VF)((two_w >> 17) | (126u << 23)) - vf_splat(0.5f);
    return (VF)(sign | vu_bsel(two_w < (1u << 27), (VU)dv, (VU)nv));
}
/* any lane of the NH vectors set (mask lanes are 0 or -1) */
VL_FN bool VL_SFX(any)(const VI *m) {
    VI o = m[0];
    for (int h = 1; h < NH; h++) o |= m[h];
    return vm_bits(vm_of_vi(o)) != 0;
}
#define ANY VL_SFX(any)
#define H2F VL_SFX(h2f)
#define F2H VL_SFX(f2h)
/* The same conversions with a short path when every lane is a normal fp16 (the usual case):
 * round to nearest even on the bits, which is what the full algorithm computes there. */
VL_FN VU VL_SFX(f2h)(VF f) {
    const VF lim = vf_splat(65504.f), nlim = vf_splat(-65504.f);
    f = vf_sel(vf_gt(f, lim), lim, f);
    f = vf_sel(vf_lt(f, nlim), nlim, f);
    const VU w = (VU)f, a = w & 0x7fffffffu;
    if (vm_bits(vm_of_vi((VI)(a < 0x38800000u))) != 0) return VL_SFX(f2h_full)(f);
    return ((w >> 16) & 0x8000u) | ((a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13);
}
VL_FN VF VL_SFX(h2f)(VU hb) {
    const VU e = hb & 0x7C00u;
    if (vm_bits(vm_of_vi((VI)(e == 0u) | (VI)(e == 0x7C00u))) != 0) return VL_SFX(h2f_full)(hb);
    return (VF)(((hb & 0x8000u) << 16) | (((hb & 0x7fffu) << 13) + 0x38000000u));
}

/* Transpose nb (1..16) blocks of 32 (lanes past nb repeat the last block) into t[j*16 + b]
 * (vf_transpose16: data movement only, each width its own way). A batch is transposed one batch
 * ahead of its use (the row loop), so the loads find the stores retired. */
VL_FN void VL_SFX(transpose)(int nb, const float *x, float *t) {
    const float *xb[16];
    for (int b = 0; b < 16; b++) xb[b] = x + (b < nb ? b : nb - 1) * QK;
    vf_transpose16(xb, t);
}

/* The integers of the 16 lanes, transposed: ct[j*16 + b] (q - qmin as an integer). */
VL_FN VU VL_SFX(toint)(VF q) {
    return (VU)(q + vf_splat(MAGIC)) & 0xFFFFu; /* q integer-valued in [0, 255] */
}
/* CR for the fast kernels: x86 max then min, and the width's rounding. For finite v the same
 * value as CR (max/min select exactly as CR's compares do; a -0 that CR keeps and max turns into
 * +0 rounds to +0 either way; round-to-nearest-even as the magic-number trick). */
VL_FN VF VL_SFX(crf)(VF v, VF lo, VF hi) { return vf_round(vf_min(vf_max(v, lo), hi)); }
/* toint(CR(v, lo, hi) - lo): the integer minus lo, by the width's conversion (round to nearest
 * even, the default mode, as CR) */
VL_FN VU VL_SFX(cri)(VF v, VF lo, VF hi) {
    return (VU)(vi_round(vf_min(vf_max(v, lo), hi)) - vi_round(lo));
}
#define CRF VL_SFX(crf)
#define CRI VL_SFX(cri)

#include "best_scale_fast_lanes.h"
#include "best_scale_int_lanes.h"
#include "best_scale_dense_lanes.h"
#include "best_scale_grid_lanes.h"

/* ---- a whole row of a legacy type (best_scale.h: iqf_best_legacy_row) ---- */

VL_FN void
VL_SFX(store_words)(int kind, const uint32_t *wq, const uint32_t *d, const uint32_t *m, int nb, void *vy,
                    int64_t i0);
/* Packs the 16 lanes' integers ct (transposed) into blocks i0 .. i0+nb-1 of a legacy row (kind as
 * iqf_best_legacy_row): the packed words are built lane-wise, then stored per block. */
VL_FN void
VL_SFX(pack_batch)(int kind, const uint32_t *ct, const uint32_t *d, const uint32_t *m, int nb,
                   void *vy, int64_t i0) {
    _Alignas(64) uint32_t wq[9 * 16];
    const int nw = kind == 4 ? 8 : 4;
    for (int k = 0; k < nw; k++)
        FORH {
            VU v = vu_loada(ct + h * VL_W) - vu_loada(ct + h * VL_W); /* 0 */
            for (int t = 0; t < 4; t++) {
                VU byte;
                if (kind == 4) byte = (vu_loada(ct + (4 * k + t) * 16 + h * VL_W) - 127u) & 0xFFu;
                else byte = (vu_loada(ct + (4 * k + t) * 16 + h * VL_W) & 0xFu) | ((vu_loada(ct + (4 * k + t + 16) * 16 + h * VL_W) & 0xFu) << 4);
                v |= byte << (8 * t);
            }
            vu_storea(wq + k * 16 + h * VL_W, v);
        }
    if (kind == 2 || kind == 3)
        FORH {
            VU v = vu_loada(ct + h * VL_W) - vu_loada(ct + h * VL_W);
            for (int j = 0; j < QK; j++) {
                const VU b4 = vu_loada(ct + j * 16 + h * VL_W) & 0x10u; /* bit 4 to bit j */
                v |= j >= 4 ? b4 << (j - 4) : b4 >> (4 - j);
            }
            vu_storea(wq + 8 * 16 + h * VL_W, v);
        }
    VL_SFX(store_words)(kind, wq, d, m, nb, vy, i0);
}
/* Stores blocks i0 .. i0+nb-1 from the lane-wise packed words wq (word k of lane b at
 * wq[k * 16 + b]: 4 nibble words (8 for q8_0), q5's high bits at wq[8 * 16 + b]). */
VL_FN void
VL_SFX(store_words)(int kind, const uint32_t *wq, const uint32_t *d, const uint32_t *m, int nb, void *vy,
                    int64_t i0) {
    const int nw = kind == 4 ? 8 : 4;
    for (int b = 0; b < nb; b++) {
        /* word by word: a 16-byte copy of words stored one by one would stall on forwarding */
        uint8_t *qs, *qh = NULL;
        const iqf_half hd = (iqf_half)d[b], hm = (iqf_half)m[b];
        switch (kind) {
        case 0: { block_q4_0 *y = (block_q4_0 *)vy + i0 + b; y->d = hd; qs = y->qs; break; }
        case 1: { block_q4_1 *y = (block_q4_1 *)vy + i0 + b; y->d = hd; y->m = hm; qs = y->qs; break; }
        case 2: { block_q5_0 *y = (block_q5_0 *)vy + i0 + b; y->d = hd; qs = y->qs; qh = y->qh; break; }
        case 3: { block_q5_1 *y = (block_q5_1 *)vy + i0 + b; y->d = hd; y->m = hm; qs = y->qs; qh = y->qh; break; }
        default: { block_q8_0 *y = (block_q8_0 *)vy + i0 + b; y->d = hd; qs = (uint8_t *)y->qs; break; }
        }
        for (int k = 0; k < nw; k++) memcpy(qs + 4 * k, &wq[k * 16 + b], 4);
        if (qh) memcpy(qh, &wq[8 * 16 + b], 4);
    }
}

/* A row's mean square in 16 partial sums (value i to sum i % 16, in order) added as sum16: the
 * same bits at every level (legacy.c's row_sigma2 sums serially: 3-4 cycles a value). */
VL_FN float VL_SFX(row_sigma2_16)(const float *x, int64_t n) {
    VF a[NH];
    FORH a[h] = vf_splat(0);
    for (int64_t j = 0; j < n; j += 16)
        FORH {
            const VF v = vf_load(x + j + h * VL_W);
            a[h] += v * v;
        }
    return HSUM(a) / (float)n;
}

/* The normalized weights of 16 transposed blocks: w = qw * sqrt(sigma2 + x^2) (weights()), then
 * norm_weights()'s rules lane-wise (the same IEEE operations, so the same bits). */
VL_FN void VL_SFX(batch_weights)(const float *xt, const float *qt,
                                                                              float sigma2, float *wt) {
    const VF s2 = vf_splat(sigma2), one = vf_splat(1), zero = vf_splat(0), inf = vf_splat(INFINITY);
    VF mw[NH];
    FORH mw[h] = zero;
    FORH
        for (int j = 0; j < QK; j++) {
            const VF xv = vf_loada(xt + j * 16 + h * VL_W);
            const VF w = vf_loada(qt + j * 16 + h * VL_W) * vf_sqrt(s2 + xv * xv);
            vf_storea(wt + j * 16 + h * VL_W, w);
            mw[h] = vf_bsel(w > mw[h], w, mw[h]);
        }
    FORH {
        const VI z = mw[h] == zero, isi = mw[h] == inf;
        const VF dv = vf_bsel(z | isi, one, mw[h]);
        for (int j = 0; j < QK; j++) {
            const VF w = vf_loada(wt + j * 16 + h * VL_W);
            const VF nrm = vf_bsel(w >= zero, w / dv, zero);
            const VF fin = vf_bsel(vf_abs(w) == inf, one, zero);
            vf_storea(wt + j * 16 + h * VL_W, vf_bsel(z, one, vf_bsel(isi, fin, nrm)));
        }
    }
}

/* ---- a whole row of a legacy type (best_scale.h: iqf_best_legacy_row) ---- */
static VL_TGT void VL_SFX(legacy_row)(int kind, const float *x, void *vy, int64_t n, const float *qw) {
    const int64_t nb = n / QK;
    static const int qmins[5] = { -8, 0, -16, 0, -127 }, qmaxs[5] = { 7, 15, 15, 31, 127 };
    const int qmin = qmins[kind], qmax = qmaxs[kind];
    const bool asym = kind == 1 || kind == 3;
    if (qw && kind != 4) { /* the dense search, block by block */
        const float sigma2 = qw ? row_sigma2(x, n) : 0.f;
        float w[QK];
        uint8_t L[QK];
        for (int64_t i = 0; i < nb; i++) {
            iqf_half d, m = 0;
            VL_SFX(weights)(x + i * QK, qw ? qw + i * QK : NULL, sigma2, w);
            if (asym) VL_SFX(asym_block)(x + i * QK, w, qmax, L, &d, &m);
            else d = VL_SFX(sym_block)(x + i * QK, w, qmin, qmax, L);
            pack_block(kind, L, d, m, vy, i);
        }
        return;
    }
    /* the fast search, 16 blocks at a time, the next batch prepared one ahead (q8_0 with an
     * imatrix: its weights computed lane-wise as weights() and norm_weights() do per block) */
    const float sigma2 = qw ? VL_SFX(row_sigma2_16)(x, n) : 0.f;
    _Alignas(64) float xt[2][QK * 16], qt[2][QK * 16], wt[QK * 16];
    _Alignas(64) uint32_t ct[QK * 16], d[16], m[16];
    for (int64_t i0 = 0, k = 0; i0 < nb; i0 += 16, k ^= 1) {
        for (int64_t p = i0 == 0 ? 0 : i0 + 16; p <= i0 + 16 && p < nb; p += 16) {
            const int np = nb - p < 16 ? (int)(nb - p) : 16, kp = p == i0 ? (int)k : (int)k ^ 1;
            VL_SFX(transpose)(np, x + p * QK, xt[kp]);
            if (qw) VL_SFX(transpose)(np, qw + p * QK, qt[kp]);
        }
        const int nbb = nb - i0 < 16 ? (int)(nb - i0) : 16;
        if (qw) {
            VL_SFX(batch_weights)(xt[k], qt[k], sigma2, wt);
            VL_SFX(fast_sym_impl)(xt[k], wt, qmin, qmax, ct, d);
        } else if (asym) {
            VL_SFX(fast_asym_i)(xt[k], qmax, ct, d, m); /* packed words (ct as wq) */
            VL_SFX(store_words)(kind, ct, d, m, nbb, vy, i0);
            continue;
        } else if (kind == 4) VL_SFX(fast_sym_u)(xt[k], qmin, qmax, ct, d);
        else VL_SFX(fast_sym_s)(xt[k], qmin, qmax, ct, d);
        VL_SFX(pack_batch)(kind, ct, d, m, nbb, vy, i0);
    }
}

#undef NH
#undef FORH
#undef CR
#undef HSUM
#undef ANY
#undef H2F
#undef F2H
#undef CRF
#undef CRI
