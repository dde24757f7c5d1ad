/* kq_common_lanes.h - the vector kernels of kq_common.c, written once over the lane count: kq_common.c includes
 * this file once per instruction set, with KQ_LANES_PASS and its width macros defined. No include
 * guard on purpose. */
#include <immintrin.h>

#define VF KQ_SFX(vf)
#define VI KQ_SFX(vi)
#define P_W KQ_W
#define P_TGT KQ_TGT
#define P_SFX KQ_SFX
#include "lanes_prelude.h"
#undef P_W
#undef P_TGT
#undef P_SFX
/* KQ_X(op): the intrinsic of this width (_mm256_op / _mm512_op); PS, PD: its vector types. */
#if KQ_W == 8
#define KQ_X(op) _mm256_##op
#define PS __m256
#define PD __m256d
#else
#define KQ_X(op) _mm512_##op
#define PS __m512
#define PD __m512d
#endif

static inline KQ_TGT VF KQ_SFX(ldf)(const float *p) { return (VF)KQ_X(loadu_ps)(p); }
static inline KQ_TGT VF KQ_SFX(self)(VI m, VF a, VF b) { return (VF)((m & (VI)a) | (~m & (VI)b)); }
static inline KQ_TGT VI KQ_SFX(seli)(VI m, VI a, VI b) { return (m & a) | (~m & b); }
static inline KQ_TGT VF KQ_SFX(tof)(VI a) { return __builtin_convertvector(a, VF); }
/* iqf_nearest_int per lane: identical bits for every input. */
static inline KQ_TGT VI KQ_SFX(nearest)(VF f) {
    VF v = f + KQ_SFX(splatf)(12582912.f);
    return ((VI)v & KQ_SFX(splati)(0x007fffff)) - KQ_SFX(splati)(0x00400000);
}
static inline KQ_TGT VI KQ_SFX(clampi)(VI l, VI lo, VI hi) {
    l = KQ_SFX(seli)(l < hi, l, hi);
    return KQ_SFX(seli)(l > lo, l, lo);
}
static inline KQ_TGT bool KQ_SFX(any)(VI m) {
#if KQ_W == 8
    return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#else
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#endif
}
/* Narrowing store of KQ_W lanes (values fit in 8 bits). */
static inline KQ_TGT void KQ_SFX(st8)(VI l, void *dst) {
#if KQ_W == 8
    __m256i v = (__m256i)(l & KQ_SFX(splati)(0xFF)); /* packus saturation = truncation on 0..255 */
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(w, w));
#else
    typedef uint8_t VB8 __attribute__((vector_size(KQ_W)));
    VB8 b = __builtin_convertvector(l, VB8);
    memcpy(dst, &b, KQ_W);
#endif
}

#define splatf KQ_SFX(splatf)
#define splati KQ_SFX(splati)
#define ldf KQ_SFX(ldf)
#define self KQ_SFX(self)
#define seli KQ_SFX(seli)
#define tof KQ_SFX(tof)
#define vabs KQ_SFX(vabs)
#define nearest KQ_SFX(nearest)
#define clampi KQ_SFX(clampi)
#define anym KQ_SFX(any)

/* Per lane: the value of largest magnitude (the first, as the reference's loop); *allzero: the
 * lanes whose every |x| is below KQ_GROUP_MAX_EPS (make_qx/make_q3 return zeros there). */
static inline KQ_TGT VF KQ_SFX(lanes_max)(int n, const float *xt, VI *allzero) {
    const VF zero = splatf(0.f);
    VF max = zero, amax = zero;
    for (int i = 0; i < n; i++) {
        VF x = ldf(xt + i * KQ_W), ax = vabs(x);
        VI gt = ax > amax;
        amax = self(gt, ax, amax);
        max = self(gt, x, max);
    }
    *allzero = amax < splatf(KQ_GROUP_MAX_EPS);
    return max;
}

/* The searches' outputs: codes Lb + off and the scale, zeros in the lanes of mask. */
static inline KQ_TGT void KQ_SFX(lanes_out)(int n, int off, VI mask, const VI *Lb, VF scale, VI *Lout,
                                            float *sc) {
    const VI voff = splati(off), zi = splati(0);
    for (int i = 0; i < n; i++) Lout[i] = seli(mask, zi, Lb[i] + voff);
    scale = self(mask, splatf(0.f), scale);
    memcpy(sc, &scale, sizeof scale);
}

/* make_qx_quants(n, nmax, x, L, 1, w) per lane; xt/wt are [n][KQ_W]; wt NULL: w = x*x. */
static KQ_TGT void KQ_SFX(qx_lanes)(int n, int nmax, const float *xt, const float *wt, VI *Lout,
                                    float *sc) {
    VI Lb[32], allzero;
    const VF zero = splatf(0.f);
    const VF max = KQ_SFX(lanes_max)(n, xt, &allzero);
    const VI lo = splati(-nmax), hi = splati(nmax - 1);
    /* Per-value weights w and products w*x are the same for every candidate scale. */
    VF wv[32], wx[32];
    for (int i = 0; i < n; i++) {
        VF x = ldf(xt + i * KQ_W);
        wv[i] = wt ? ldf(wt + i * KQ_W) : x * x;
        wx[i] = wv[i] * x;
    }
    VF iscale = splatf((float)-nmax) / max;
    VF sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        VF x = ldf(xt + i * KQ_W);
        VI l = clampi(nearest(iscale * x), lo, hi);
        Lb[i] = l;
        VF lf = tof(l);
        sumlx = sumlx + wx[i] * lf;
        suml2 = suml2 + wv[i] * lf * lf;
    }
    VF scale = self(suml2 != zero, sumlx / suml2, zero);
    VF best = scale * sumlx;
    /* Candidates is = -9..9 (not 0) two at a time: their sums are independent, which halves the
     * add-latency chains; the winner test then runs in the reference's order (is, then is+1). */
    static const int order[18] = { -9, -8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    for (int c = 0; c < 18; c += 2) {
        const VF isa = splatf(-(nmax + 0.1f * order[c])) / max;
        const VF isb = splatf(-(nmax + 0.1f * order[c + 1])) / max;
        VF sxa = zero, s2a = zero, sxb = zero, s2b = zero;
        for (int i = 0; i < n; i++) {
            VF x = ldf(xt + i * KQ_W);
            VF la = tof(clampi(nearest(isa * x), lo, hi));
            VF lb = tof(clampi(nearest(isb * x), lo, hi));
            sxa = sxa + wx[i] * la;
            s2a = s2a + wv[i] * la * la;
            sxb = sxb + wx[i] * lb;
            s2b = s2b + wv[i] * lb * lb;
        }
        for (int h = 0; h < 2; h++) {
            const VF isc = h ? isb : isa, sx = h ? sxb : sxa, s2 = h ? s2b : s2a;
            VI upd = (s2 > zero) & (sx * sx > best * s2);
            if (!anym(upd)) continue;
            for (int i = 0; i < n; i++)
                Lb[i] = seli(upd, clampi(nearest(isc * ldf(xt + i * KQ_W)), lo, hi), Lb[i]);
            scale = self(upd, sx / s2, scale);
            best = self(upd, scale * sx, best);
        }
    }
    KQ_SFX(lanes_out)(n, nmax, allzero, Lb, scale, Lout, sc);
}

/* make_q3_quants(n, nmax, x, L, true) per lane. */
static KQ_TGT void KQ_SFX(q3_lanes)(int n, int nmax, const float *xt, VI *Lout, float *sc) {
    VI Lb[32], allzero;
    const VF zero = splatf(0.f);
    const VF max = KQ_SFX(lanes_max)(n, xt, &allzero);
    const VI lo = splati(-nmax), hi = splati(nmax - 1);
    VF iscale = splatf((float)-nmax) / max;
    VF sumlx = zero, suml2 = zero;
    for (int i = 0; i < n; i++) {
        VF x = ldf(xt + i * KQ_W);
        VF w = x * x;
        VI l = clampi(nearest(iscale * x), lo, hi);
        Lb[i] = l;
        VF lf = tof(l);
        sumlx = sumlx + w * x * lf;
        suml2 = suml2 + w * lf * lf;
    }
    VI active = ~allzero;
    for (int itry = 0; itry < 5 && anym(active); ++itry) {
        VI changed = splati(0);
        for (int i = 0; i < n; i++) {
            VF x = ldf(xt + i * KQ_W);
            VF w = x * x;
            VF Lf = tof(Lb[i]);
            VF slx = sumlx - w * x * Lf;
            VF sl2 = suml2 - w * Lf * Lf;
            VI new_l = clampi(nearest(x * sl2 / slx), lo, hi);
            VI cand = active & (slx > zero) & (new_l != Lb[i]);
            /* Updates are rare: branching keeps sumlx/suml2 off this value's dependency chain. */
            if (!anym(cand)) continue;
            VF nf = tof(new_l);
            VF slx2 = slx + w * x * nf;
            VF sl22 = sl2 + w * nf * nf;
            VI upd = cand & (sl22 > zero) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl22);
            Lb[i] = seli(upd, new_l, Lb[i]);
            sumlx = self(upd, slx2, sumlx);
            suml2 = self(upd, sl22, suml2);
            changed |= upd;
        }
        active &= changed;
    }
    KQ_SFX(lanes_out)(n, nmax, allzero, Lb, self(suml2 > zero, sumlx / suml2, zero), Lout, sc);
}

/* make_qkx2/3_quants per lane (weights given). */
static KQ_TGT void KQ_SFX(qkx_lanes)(int n, int nmax, const float *xt, const float *wt, VI *Lout,
                                     float *sc, float *mn, float rmin, float rdelta, int nstep,
                                     bool use_mad) {
    VI Lb[32], La[32];
    const VF zero = splatf(0.f);
    VF min = ldf(xt), max = min;
    VF sum_w = ldf(wt);
    VF sum_x = sum_w * min;
    for (int i = 1; i < n; i++) {
        VF x = ldf(xt + i * KQ_W), w = ldf(wt + i * KQ_W);
        min = self(x < min, x, min);
        max = self(x > max, x, max);
        sum_w = sum_w + w;
        sum_x = sum_x + w * x;
    }
    min = self(min > zero, zero, min);
    const VI degen = max <= min;
    const VF min0 = min;
    const VI lo = splati(0), hi = splati(nmax);
    VF iscale = splatf((float)nmax) / (max - min);
    VF scale = splatf(1.f) / iscale;
    VF best = zero;
    for (int i = 0; i < n; i++) {
        VF x = ldf(xt + i * KQ_W), w = ldf(wt + i * KQ_W);
        VI l = clampi(nearest(iscale * (x - min)), lo, hi);
        Lb[i] = l;
        VF diff = scale * tof(l) + min - x;
        diff = use_mad ? vabs(diff) : diff * diff;
        best = best + w * diff;
    }
    for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
        float num = rmin + rdelta * is + nmax;
        iscale = splatf(num) / (max - min);
        VF sum_l = zero, sum_l2 = zero, sum_xl = zero;
        for (int i = 0; i < n; i++) {
            VF x = ldf(xt + i * KQ_W), w = ldf(wt + i * KQ_W);
            VI l = clampi(nearest(iscale * (x - min)), lo, hi);
            La[i] = l;
            VF lf = tof(l);
            sum_l = sum_l + w * lf;
            sum_l2 = sum_l2 + w * lf * lf;
            sum_xl = sum_xl + w * lf * x;
        }
        VF D = sum_w * sum_l2 - sum_l * sum_l;
        VI dpos = D > zero;
        if (!anym(dpos)) continue;
        VF this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        VF this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        VI mpos = this_min > zero;
        this_min = self(mpos, zero, this_min);
        this_scale = self(mpos, sum_xl / sum_l2, this_scale);
        VF cur = zero;
        for (int i = 0; i < n; i++) {
            VF x = ldf(xt + i * KQ_W), w = ldf(wt + i * KQ_W);
            VF diff = this_scale * tof(La[i]) + this_min - x;
            diff = use_mad ? vabs(diff) : diff * diff;
            cur = cur + w * diff;
        }
        VI better = dpos & (cur < best);
        if (!anym(better)) continue;
        for (int i = 0; i < n; i++) Lb[i] = seli(better, La[i], Lb[i]);
        best = self(better, cur, best);
        scale = self(better, this_scale, scale);
        min = self(better, this_min, min);
    }
    KQ_SFX(lanes_out)(n, 0, degen, Lb, scale, Lout, sc);
    const VF nm = -self(degen, min0, min);
    memcpy(mn, &nm, sizeof nm);
}

/* In-register transpose of a KQ_W x KQ_W tile of 32-bit values: out[c][k] = in[k][c]. Within
 * every 128-bit lane: 4x4 transposes by unpacks of 32-bit then 64-bit pairs; then the 128-bit
 * lanes themselves (a 2x2 transpose at AVX2, 4x4 at AVX-512). */
static inline KQ_TGT void KQ_SFX(transpose)(const VF *in, VF *out) {
    PS t[KQ_W], u[KQ_W];
    for (int k = 0; k < KQ_W / 2; k++) {
        t[2 * k] = KQ_X(unpacklo_ps)((PS)in[2 * k], (PS)in[2 * k + 1]);
        t[2 * k + 1] = KQ_X(unpackhi_ps)((PS)in[2 * k], (PS)in[2 * k + 1]);
    }
    for (int k = 0; k < KQ_W / 4; k++) {
        PD a = KQ_X(castps_pd)(t[4 * k]), b = KQ_X(castps_pd)(t[4 * k + 2]);
        PD c = KQ_X(castps_pd)(t[4 * k + 1]), d = KQ_X(castps_pd)(t[4 * k + 3]);
        u[4 * k + 0] = KQ_X(castpd_ps)(KQ_X(unpacklo_pd)(a, b));
        u[4 * k + 1] = KQ_X(castpd_ps)(KQ_X(unpackhi_pd)(a, b));
        u[4 * k + 2] = KQ_X(castpd_ps)(KQ_X(unpacklo_pd)(c, d));
        u[4 * k + 3] = KQ_X(castpd_ps)(KQ_X(unpackhi_pd)(c, d));
    }
    for (int j = 0; j < 4; j++) {
#if KQ_W == 8
        out[j] = (VF)_mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        out[4 + j] = (VF)_mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
#else
        __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
        __m512 w = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44), w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
        out[j] = (VF)_mm512_shuffle_f32x4(v, w, 0x88);
        out[4 + j] = (VF)_mm512_shuffle_f32x4(v, w, 0xDD);
        out[8 + j] = (VF)_mm512_shuffle_f32x4(v2, w2, 0x88);
        out[12 + j] = (VF)_mm512_shuffle_f32x4(v2, w2, 0xDD);
#endif
    }
}

/* Gather KQ_W groups of n values (n a multiple of KQ_W; lanes >= cnt repeat the last group)
 * into [n][KQ_W]. */
static inline KQ_TGT void KQ_SFX(gather)(int cnt, int n, const float *src, float *dst) {
    VF rows[KQ_W], cols[KQ_W];
    for (int i0 = 0; i0 < n; i0 += KQ_W) {
        for (int k = 0; k < KQ_W; k++) rows[k] = ldf(src + (size_t)(k < cnt ? k : cnt - 1) * n + i0);
        KQ_SFX(transpose)(rows, cols);
        memcpy(dst + (size_t)i0 * KQ_W, cols, sizeof cols);
    }
}

/* Codes per lane (Lv[i] = value i of every lane) back to group-major bytes, lanes < cnt. */
static inline KQ_TGT void KQ_SFX(scatter)(int cnt, int n, const VI *Lv, void *dst) {
    VF rows[KQ_W], cols[KQ_W];
    for (int i0 = 0; i0 < n; i0 += KQ_W) {
        for (int c = 0; c < KQ_W; c++) rows[c] = (VF)Lv[i0 + c];
        KQ_SFX(transpose)(rows, cols);
        for (int k = 0; k < cnt; k++) KQ_SFX(st8)((VI)cols[k], (uint8_t *)dst + (size_t)k * n + i0);
    }
}

/* The batch of G groups (kq_common.c's run_batch): KQ_W groups at a time, moved into lane layout,
 * searched by the kind's lane kernel and moved back. */
static KQ_TGT void KQ_SFX(batch)(const kq_search *s, int G, const float *x, const float *w, void *L,
                                 float *scales, float *mins) {
    const int n = s->n;
    float xt[32 * KQ_W], wt[32 * KQ_W], sc[KQ_W], mn[KQ_W];
    VI Lv[32];
    for (int g0 = 0; g0 < G; g0 += KQ_W) {
        int cnt = G - g0 < KQ_W ? G - g0 : KQ_W;
        KQ_SFX(gather)(cnt, n, x + (size_t)g0 * n, xt);
        if (w) KQ_SFX(gather)(cnt, n, w + (size_t)g0 * n, wt);
        if (s->kind == KQ_QX) KQ_SFX(qx_lanes)(n, s->nmax, xt, w ? wt : NULL, Lv, sc);
        else if (s->kind == KQ_Q3) KQ_SFX(q3_lanes)(n, s->nmax, xt, Lv, sc);
        else KQ_SFX(qkx_lanes)(n, s->nmax, xt, wt, Lv, sc, mn, s->rmin, s->rdelta, s->nstep, s->use_mad);
        KQ_SFX(scatter)(cnt, n, Lv, (uint8_t *)L + (size_t)g0 * n);
        for (int k = 0; k < cnt; k++) scales[g0 + k] = sc[k];
        for (int k = 0; mins && k < cnt; k++) mins[g0 + k] = mn[k];
    }
}

/* kq_impl_weights: whole vectors; returns how many values it did (sqrt is correctly rounded). */
static KQ_TGT int64_t KQ_SFX(impl_weights)(int64_t n, const float *x, const float *qw, float sigma2,
                                           float *w) {
    const VF s2 = splatf(sigma2);
    int64_t j = 0;
    for (; j + KQ_W <= n; j += KQ_W) {
        VF xv = ldf(x + j), q = ldf(qw + j);
        VF a = s2 + xv * xv;
        VF r = q * (VF)KQ_X(sqrt_ps)((PS)a);
        memcpy(w + j, &r, sizeof r);
    }
    return j;
}

/* kq_requant: lanes over the values of one group. */
static KQ_TGT void KQ_SFX(requant)(int ng, int gs, const float *x, const float *d, const float *dm,
                                   int lo, int hi, int off, uint8_t *L) {
    const VI vlo = splati(lo), vhi = splati(hi), voff = splati(off);
    for (int g = 0; g < ng; g++) {
        if (!d[g]) continue;
        const VF vd = splatf(d[g]), vm = splatf(dm ? dm[g] : 0.f);
        for (int k = 0; k < gs; k += KQ_W) {
            VF xv = ldf(x + (size_t)g * gs + k);
            VF q = dm ? (xv + vm) / vd : xv / vd;
            KQ_SFX(st8)(clampi(nearest(q), vlo, vhi) + voff, L + (size_t)g * gs + k);
        }
    }
}

#undef splatf
#undef splati
#undef ldf
#undef self
#undef seli
#undef tof
#undef vabs
#undef nearest
#undef clampi
#undef anym
#undef VF
#undef VI
#undef KQ_X
#undef PS
#undef PD

