/* kq_common_lanes.h - the vector kernels of kq_common.c, written once over the lane count on
 * vec_lanes.h: kq_common.c includes vec_lanes.h and then this file once per instruction set, with
 * VL_W, VL_TGT and VL_SFX defined. Each lane is one group running the scalar function's sequence
 * (the same IEEE operations in the same order, branches as per-lane selects; fused on arm64
 * exactly where the scalar function writes IQF_FMA_ARM: vf_fma_arm, vec_lanes.h). No include
 * guard on purpose. */

/* clamp of int32 lanes to [lo, hi] */
VL_FN VI VL_SFX(clampi)(VI l, VI lo, VI hi) { return vi_max(vi_min(l, hi), lo); }
/* any lane of m set */
VL_FN bool VL_SFX(anym)(VM m) { return vm_bits(m) != 0; }
#define clampi VL_SFX(clampi)
#define anym VL_SFX(anym)

/* Per lane: the value of largest magnitude (the first, as the reference's loop); *allzero: the
 * lanes whose every |x| is below KQ_GROUP_MAX_EPS (make_qx/make_q3 return zeros there). */
static inline VL_TGT VF VL_SFX(lanes_max)(int n, const float *xt, VM *allzero) {
    const VF zero = vf_splat(0.f);
    VF max = zero, amax = zero;
    for (int i = 0; i < n; i++) {
        VF x = vf_load(xt + i * VL_W), ax = vf_abs(x);
        const VM gt = vf_gt(ax, amax);
        amax = vf_sel(gt, ax, amax);
        max = vf_sel(gt, x, max);
    }
    *allzero = vf_lt(amax, vf_splat(KQ_GROUP_MAX_EPS));
    return max;
}

/* The searches' outputs: codes Lb + off and the scale, zeros in the lanes of mask. */
static inline VL_TGT void VL_SFX(lanes_out)(int n, int off, VM mask, const VI *Lb, VF scale, VI *Lout,
                                            float *sc) {
    const VI voff = vi_splat(off), zi = vi_splat(0);
    for (int i = 0; i < n; i++) Lout[i] = vi_sel(mask, zi, Lb[i] + voff);
    vf_store(sc, vf_sel(mask, vf_splat(0.f), scale));
}

/* make_qx_quants(n, nmax, x, L, 1, w) per lane; xt/wt are [n][VL_W]; wt NULL: w = x*x. */
static VL_TGT void VL_SFX(qx_lanes)(int n, int nmax, const float *xt, const float *wt, VI *Lout,
                                    float *sc) {
    VI Lb[32];
    VM allzero;
    const VF zero = vf_splat(0.f);
    const VF max = VL_SFX(lanes_max)(n, xt, &allzero);
    const VI lo = vi_splat(-nmax), hi = vi_splat(nmax - 1);
    /* Per-value weights w and products w*x are the same for every candidate scale. */
    VF wv[32], wx[32];
    for (int i = 0; i < n; i++) {
        VF x = vf_load(xt + i * VL_W);
        wv[i] = wt ? vf_load(wt + i * VL_W) : x * x;
        wx[i] = wv[i] * x;
    }
    VF iscale = vf_splat((float)-nmax) / max;
    VF sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        VF x = vf_load(xt + i * VL_W);
        VI l = clampi(vf_nearest(iscale * x), lo, hi);
        Lb[i] = l;
        VF lf = vf_of_i(l);
        sumlx = sumlx + wx[i] * lf;
        suml2 = suml2 + wv[i] * lf * lf;
    }
    VF scale = vf_sel(vf_eq(suml2, zero), zero, sumlx / suml2);
    VF best = scale * sumlx;
    /* Candidates is = -9..9 (not 0) two at a time: their sums are independent, which halves the
     * add-latency chains; the winner test then runs in the reference's order (is, then is+1). */
    static const int order[18] = { -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    const bool fuse = VL_FUSES && n < 32;
    for (int c = 0; c < 18; c += 2) {
        const VF isa = vf_splat(-IQF_FMA_ARM(0.1f, (float)order[c], (float)nmax)) / max;
        const VF isb = vf_splat(-IQF_FMA_ARM(0.1f, (float)order[c + 1], (float)nmax)) / max;
        VF sxa = zero, s2a = zero, sxb = zero, s2b = zero;
        for (int i = 0; i < n; i++) {
            VF x = vf_load(xt + i * VL_W);
            VF la = vf_of_i(clampi(vf_nearest(isa * x), lo, hi));
            VF lb = vf_of_i(clampi(vf_nearest(isb * x), lo, hi));
            /* fused on arm64 for the 16-value groups only (make_qx_quants) */
            sxa = fuse ? vf_fma_arm(wx[i], la, sxa) : sxa + wx[i] * la;
            s2a = fuse ? vf_fma_arm(wv[i] * la, la, s2a) : s2a + wv[i] * la * la;
            sxb = fuse ? vf_fma_arm(wx[i], lb, sxb) : sxb + wx[i] * lb;
            s2b = fuse ? vf_fma_arm(wv[i] * lb, lb, s2b) : s2b + wv[i] * lb * lb;
        }
        for (int h = 0; h < 2; h++) {
            const VF isc = h ? isb : isa, sx = h ? sxb : sxa, s2 = h ? s2b : s2a;
            const VM upd = vm_and(vf_gt(s2, zero), vf_gt(sx * sx, best * s2));
            if (!anym(upd)) continue;
            for (int i = 0; i < n; i++)
                Lb[i] = vi_sel(upd, clampi(vf_nearest(isc * vf_load(xt + i * VL_W)), lo, hi), Lb[i]);
            scale = vf_sel(upd, sx / s2, scale);
            best = vf_sel(upd, scale * sx, best);
        }
    }
    VL_SFX(lanes_out)(n, nmax, allzero, Lb, scale, Lout, sc);
}

/* make_q3_quants(n, nmax, x, L, true) per lane. */
static VL_TGT void VL_SFX(q3_lanes)(int n, int nmax, const float *xt, VI *Lout, float *sc) {
    VI Lb[32];
    VM allzero;
    const VF zero = vf_splat(0.f);
    const VF max = VL_SFX(lanes_max)(n, xt, &allzero);
    const VI lo = vi_splat(-nmax), hi = vi_splat(nmax - 1);
    VF iscale = vf_splat((float)-nmax) / max;
    VF sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        VF x = vf_load(xt + i * VL_W);
        VF w = x * x;
        VI l = clampi(vf_nearest(iscale * x), lo, hi);
        Lb[i] = l;
        VF lf = vf_of_i(l);
        sumlx = vf_fma_arm(w * x, lf, sumlx);
        suml2 = vf_fma_arm(w * lf, lf, suml2);
    }
    VM active = vm_not(allzero);
    for (int itry = 0; itry < 5 && anym(active); ++itry) {
        VM changed = vm_of_bits(0);
        for (int i = 0; i < n; i++) {
            VF x = vf_load(xt + i * VL_W);
            VF w = x * x;
            VF Lf = vf_of_i(Lb[i]);
            VF slx = vf_fnma_arm(w * x, Lf, sumlx);
            VF sl2 = vf_fnma_arm(w * Lf, Lf, suml2);
            VI new_l = clampi(vf_nearest(x * sl2 / slx), lo, hi);
            const VM cand = vm_and(vm_and(active, vf_gt(slx, zero)), vm_not(vi_eq(new_l, Lb[i])));
            /* Updates are rare: branching keeps sumlx/suml2 off this value's dependency chain. */
            if (!anym(cand)) continue;
            VF nf = vf_of_i(new_l);
            VF slx2 = vf_fma_arm(w * x, nf, slx);
            VF sl22 = vf_fma_arm(w * nf, nf, sl2);
            const VM upd = vm_and(vm_and(cand, vf_gt(sl22, zero)), vf_gt(slx2 * slx2 * suml2, sumlx * sumlx * sl22));
            Lb[i] = vi_sel(upd, new_l, Lb[i]);
            sumlx = vf_sel(upd, slx2, sumlx);
            suml2 = vf_sel(upd, sl22, suml2);
            changed = vm_or(changed, upd);
        }
        active = vm_and(active, changed);
    }
    VL_SFX(lanes_out)(n, nmax, allzero, Lb, vf_sel(vf_gt(suml2, zero), sumlx / suml2, zero), Lout, sc);
}

/* make_qkx2/3_quants per lane (weights given). */
static VL_TGT void VL_SFX(qkx_lanes)(int n, int nmax, const float *xt, const float *wt, VI *Lout,
                                     float *sc, float *mn, float rmin, float rdelta, int nstep,
                                     bool use_mad) {
    VI Lb[32], La[32];
    const VF zero = vf_splat(0.f);
    VF min = vf_load(xt), max = min;
    VF sum_w = vf_load(wt);
    VF sum_x = sum_w * min;
    for (int i = 1; i < n; i++) {
        VF x = vf_load(xt + i * VL_W), w = vf_load(wt + i * VL_W);
        min = vf_sel(vf_lt(x, min), x, min);
        max = vf_sel(vf_gt(x, max), x, max);
        sum_w = sum_w + w;
        sum_x = vf_fma_arm(w, x, sum_x);
    }
    min = vf_sel(vf_gt(min, zero), zero, min);
    const VM degen = vf_le(max, min);
    const VF min0 = min;
    const VI lo = vi_splat(0), hi = vi_splat(nmax);
    VF iscale = vf_splat((float)nmax) / (max - min);
    VF scale = vf_splat(1.f) / iscale;
    VF best = zero;
    for (int i = 0; i < n; i++) {
        VF x = vf_load(xt + i * VL_W), w = vf_load(wt + i * VL_W);
        VI l = clampi(vf_nearest(iscale * (x - min)), lo, hi);
        Lb[i] = l;
        VF diff = vf_fma_arm(scale, vf_of_i(l), min) - x;
        diff = use_mad ? vf_abs(diff) : diff * diff;
        best = VL_FUSES && n < 32 ? vf_fma_arm(w, diff, best) : best + w * diff; /* fused: 16 values (q2_K) */
    }
    for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
        float num = IQF_FMA_ARM(rdelta, (float)is, rmin) + nmax;
        iscale = vf_splat(num) / (max - min);
        VF sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; i++) {
            VF x = vf_load(xt + i * VL_W), w = vf_load(wt + i * VL_W);
            VI l = clampi(vf_nearest(iscale * (x - min)), lo, hi);
            La[i] = l;
            VF lf = vf_of_i(l);
            sum_l = sum_l + w * lf;
            sum_l2 = sum_l2 + w * lf * lf;
            sum_xl = sum_xl + w * lf * x;
        }
        VF D = vf_fms_arm(sum_w, sum_l2, sum_l * sum_l);
        const VM dpos = vf_gt(D, zero);
        if (!anym(dpos)) continue;
        VF this_scale = vf_fms_arm(sum_w, sum_xl, sum_x * sum_l) / D;
        VF this_min = vf_fms_arm(sum_l2, sum_x, sum_l * sum_xl) / D;
        const VM mpos = vf_gt(this_min, zero);
        this_min = vf_sel(mpos, zero, this_min);
        this_scale = vf_sel(mpos, sum_xl / sum_l2, this_scale);
        VF cur = zero;
        for (int i = 0; i < n; i++) {
            VF x = vf_load(xt + i * VL_W), w = vf_load(wt + i * VL_W);
            VF diff = vf_fma_arm(this_scale, vf_of_i(La[i]), this_min) - x;
            diff = use_mad ? vf_abs(diff) : diff * diff;
            cur = vf_fma_arm(w, diff, cur);
        }
        const VM better = vm_and(dpos, vf_lt(cur, best));
        if (!anym(better)) continue;
        for (int i = 0; i < n; i++) Lb[i] = vi_sel(better, La[i], Lb[i]);
        best = vf_sel(better, cur, best);
        scale = vf_sel(better, this_scale, scale);
        min = vf_sel(better, this_min, min);
    }
    VL_SFX(lanes_out)(n, 0, degen, Lb, scale, Lout, sc);
    vf_store(mn, -vf_sel(degen, min0, min));
}

/* Gather VL_W groups of n values (n a multiple of VL_W; lanes >= cnt repeat the last group)
 * into [n][VL_W]. */
static inline VL_TGT void VL_SFX(gather)(int cnt, int n, const float *src, float *dst) {
    VF rows[VL_W], cols[VL_W];
    for (int i0 = 0; i0 < n; i0 += VL_W) {
        for (int k = 0; k < VL_W; k++) rows[k] = vf_load(src + (size_t)(k < cnt ? k : cnt - 1) * n + i0);
        vf_transpose(rows, cols);
        for (int c = 0; c < VL_W; c++) vf_store(dst + (size_t)(i0 + c) * VL_W, cols[c]);
    }
}

/* Codes per lane (Lv[i] = value i of every lane) back to group-major bytes, lanes < cnt. */
static inline VL_TGT void VL_SFX(scatter)(int cnt, int n, const VI *Lv, void *dst) {
    VF rows[VL_W], cols[VL_W];
    for (int i0 = 0; i0 < n; i0 += VL_W) {
        for (int c = 0; c < VL_W; c++) rows[c] = (VF)Lv[i0 + c];
        vf_transpose(rows, cols);
        for (int k = 0; k < cnt; k++) vi_store_lo8((uint8_t *)dst + (size_t)k * n + i0, (VI)cols[k]);
    }
}

/* The batch of G groups (kq_common.c's run_batch): VL_W groups at a time, moved into lane layout,
 * searched by the kind's lane kernel and moved back. */
static VL_TGT void VL_SFX(batch)(const kq_search *s, int G, const float *x, const float *w, void *L,
                                 float *scales, float *mins) {
    const int n = s->n;
    float xt[32 * VL_W], wt[32 * VL_W], sc[VL_W], mn[VL_W];
    VI Lv[32];
    for (int g0 = 0; g0 < G; g0 += VL_W) {
        int cnt = G - g0 < VL_W ? G - g0 : VL_W;
        VL_SFX(gather)(cnt, n, x + (size_t)g0 * n, xt);
        if (w) VL_SFX(gather)(cnt, n, w + (size_t)g0 * n, wt);
        if (s->kind == KQ_QX) VL_SFX(qx_lanes)(n, s->nmax, xt, w ? wt : NULL, Lv, sc);
        else if (s->kind == KQ_Q3) VL_SFX(q3_lanes)(n, s->nmax, xt, Lv, sc);
        else VL_SFX(qkx_lanes)(n, s->nmax, xt, wt, Lv, sc, mn, s->rmin, s->rdelta, s->nstep, s->use_mad);
        VL_SFX(scatter)(cnt, n, Lv, (uint8_t *)L + (size_t)g0 * n);
        for (int k = 0; k < cnt; k++) scales[g0 + k] = sc[k];
        for (int k = 0; mins && k < cnt; k++) mins[g0 + k] = mn[k];
    }
}

/* kq_impl_weights: whole vectors; returns how many values it did (sqrt is correctly rounded). */
static VL_TGT int64_t VL_SFX(impl_weights)(int64_t n, const float *x, const float *qw, float sigma2,
                                           float *w) {
    const VF s2 = vf_splat(sigma2);
    int64_t j = 0;
    for (; j + VL_W <= n; j += VL_W) {
        VF xv = vf_load(x + j), q = vf_load(qw + j);
        VF a = vf_fma_arm(xv, xv, s2);
        vf_store(w + j, q * vf_sqrt(a));
    }
    return j;
}

/* kq_requant: lanes over the values of one group. */
static VL_TGT void VL_SFX(requant)(int ng, int gs, const float *x, const float *d, const float *dm,
                                   int lo, int hi, int off, uint8_t *L) {
    const VI vlo = vi_splat(lo), vhi = vi_splat(hi), voff = vi_splat(off);
    for (int g = 0; g < ng; g++) {
        if (!d[g]) continue;
        const VF vd = vf_splat(d[g]), vm = vf_splat(dm ? dm[g] : 0.f);
        for (int k = 0; k < gs; k += VL_W) {
            VF xv = vf_load(x + (size_t)g * gs + k);
            VF q = dm ? (xv + vm) / vd : xv / vd;
            vi_store_lo8(L + (size_t)g * gs + k, clampi(vf_nearest(q), vlo, vhi) + voff);
        }
    }
}

#undef clampi
#undef anym
