/* iq1_lanes.h - the SIMD kernels of iq1.c (iq1_kernels), written once over the lane count
 * (vec_lanes.h): iq1.c includes vec_lanes.h and this file once per instruction set (VL_W 8
 * under AVX2, 16 under AVX-512; the plain width at 8 for NEON). Per lane the float operations
 * are exactly the scalar reference's, in the same order, fused where it writes IQF_FMA_ARM
 * (vf_fma_arm, VL_FUSES: vec_lanes.h); the split searches store every candidate and let select_best
 * (scalar) find the reference's accepted one. No include guard on purpose.
 *
 * IQ1_PACKED (defined by the includer, needs vf_lut32, i.e. VL_W 16): the split searches put one
 * (i1, i2) pair of the reference's order per lane, packed (pairs_s16/pairs_m16), and fetch the
 * i1- and i2-indexed tables with two-register permutes; otherwise the layout is i1-major (lane l
 * of a vector is (i1, i2 + l): i1-indexed values are splats, i2-indexed ones plain loads). */

#ifndef IQ1_UNROLL
#define IQ1_UNROLL _Pragma("GCC unroll 16")
#endif

/* Lanes of one vector where some variant passes the acceptance test at `best`. */
VL_TGT static unsigned VL_SFX(condmask)(const float *sqx, const float *sq2, int K, float best) {
    const VF vb = vf_splat(best), zero = vf_splat(0.0f);
    uint32_t any = 0;
    for (int k = 0; k < K; k++) {
        const VF x = vf_load(sqx + VL_W * k), q = vf_load(sq2 + VL_W * k);
        any |= vm_bits(vm_and(vf_gt(q, zero), vf_gt(x * x, vb * q)));
    }
    return any;
}

/* Stores one vector of K variants (lanes < nl valid; (i1, i2) of lane 0 in the i1-major layout)
 * and the lane-wise largest valid approximate f = sqx^2/sq2 (reciprocal and one Newton step: relative
 * error < 2^-21, trusted for sq2 in [2^-60, 2^60]; outside that sets c->nan). */
VL_FN void VL_SFX(store_vec)(iq1_cands *c, const VF *sqx, const VF *sq2, int K, int nl, int i1,
                             int i2) {
    const int v = c->nv++;
    const VM lanes = vi_gt(vi_splat(nl), vi_iota());
    const VF zero = vf_splat(0.0f), none = vf_splat(-FLT_MAX);
    const VI lo = vi_splat(0x21800000 /* 2^-60 */), span = vi_splat(120 << 23);
    VF fmax = none;
    uint32_t bad = 0;
#pragma GCC unroll 4
    for (int k = 0; k < K; k++) {
        vf_store(c->sqx + (size_t)(v * K + k) * VL_W, sqx[k]);
        vf_store(c->sq2 + (size_t)(v * K + k) * VL_W, sq2[k]);
        const VM ok = vm_and(lanes, vf_gt(sq2[k], zero));
        VF f = sqx[k] * sqx[k] * vf_rcp_nr(sq2[k]);
        bad |= vm_bits(vm_and(ok, vi_gtu((VI)sq2[k] - lo, span))); /* sq2 outside [2^-60, 2^60] */
        f = vf_sel(ok, f, none); /* a NaN f (NaN sqx: never accepted) loses every max below */
        vf_store(c->f + (size_t)(v * K + k) * VL_W, f);
        fmax = vf_max(f, fmax);
    }
    if (bad) c->nan = true;
    vf_store(c->vmaxv + (size_t)v * VL_W, fmax);
    c->i1[v] = (int8_t)i1;
    c->i2[v] = (int8_t)i2;
    c->nl[v] = (int8_t)nl;
}

VL_TGT static float VL_SFX(vecmax)(const iq1_cands *c, int v) {
    return vf_hmax(vf_load(c->vmaxv + (size_t)v * VL_W));
}

/* Anchor: the first candidate (vector gv, lane gl, variant gk) holding the largest f, and the
 * largest f before it. Returns -1 if no candidate is valid, -2 if not found (then replay). */
VL_TGT static int VL_SFX(anchor)(const iq1_cands *c, int *gl, int *gk, float *before) {
    const int K = c->K;
    VF gm = vf_splat(-FLT_MAX);
    for (int v = 0; v < c->nv; v++) gm = vf_max(vf_load(c->vmaxv + (size_t)v * VL_W), gm);
    const float m = vf_hmax(gm);
    if (!(m > -FLT_MAX)) return -1;
    const VF vm = vf_splat(m);
    VF bm = vf_splat(-FLT_MAX);
    for (int v = 0; v < c->nv; v++) {
        const VF x = vf_load(c->vmaxv + (size_t)v * VL_W);
        if (!vm_bits(vf_eq(x, vm))) {
            bm = vf_max(x, bm);
            continue;
        }
        const float *F = c->f + (size_t)v * K * VL_W;
        uint32_t eq[4] = { 0, 0, 0, 0 }, any = 0;
        for (int k = 0; k < K; k++) {
            eq[k] = vm_bits(vf_eq(vf_load(F + VL_W * k), vm));
            any |= eq[k];
        }
        const int l = __builtin_ctz(any);
        int k0 = 0;
        while (!(eq[k0] >> l & 1)) k0++;
        for (int k = 0; k < K; k++) {
            const uint32_t earlier = ((1u << l) - 1) | (k < k0 ? 1u << l : 0);
            bm = vf_sel(vm_of_bits(earlier), vf_max(vf_load(F + VL_W * k), bm), bm);
        }
        *gl = l;
        *gk = k0;
        *before = vf_hmax(bm);
        return v;
    }
    return -2;
}

/* Ranks (rank_i = #{j: x_j < x_i} + #{j < i: x_j == x_i}) of n = 16 or 32 values. */
VL_FN void VL_SFX(ranks)(const float *xb, int n, int32_t *rank) {
    for (int q = 0; q < n; q += VL_W) {
        const VF X = vf_load(xb + q);
        const VI lanes = vi_iota() + vi_splat(q);
        VI R = vi_splat(0);
        for (int j = 0; j < n; j++) {
            const VF xj = vf_splat(xb[j]);
            R = vi_count(R, vm_or(vf_gt(X, xj), vm_and(vi_gt(lanes, vi_splat(j)), vf_eq(X, xj))));
        }
        vi_store(rank + q, R);
    }
}

#ifdef IQ1_PACKED
/* The inverse permutation of n = 16 or 32 ranks in registers: lane r of O[q] is the position
 * with rank 16q + r. The sorted products then come by permutes (no scalar stores). */
VL_FN void VL_SFX(inverse16)(const int32_t *rank, int n, VI *O) {
    for (int q = 0; q < n / 16; q++) O[q] = vi_splat(0);
    for (int i = 0; i < n; i++) {
        const VI ri = vi_splat(rank[i]);
        for (int q = 0; q < n / 16; q++) O[q] = vi_sel(vi_eq(vi_iota() + vi_splat(16 * q), ri), vi_splat(i), O[q]);
    }
}
#endif

VL_TGT static void VL_SFX(sort_prefix_m)(const float *xb, const float *weight, int *order,
                                         float px[2][17], float pw[2][17]) {
    if (VL_FUSES) { /* the prefix sums are fmas there (sort_prefix_m_scalar) */
        sort_prefix_m_scalar(xb, weight, order, px, pw);
        return;
    }
    int32_t rank[16];
    VL_SFX(ranks)(xb, 16, rank);
#ifdef IQ1_PACKED
    VI O;
    VL_SFX(inverse16)(rank, 16, &O);
    vi_store(order, O);
    const VF W = vf_load(weight), zero = vf_splat(0.0f);
    const VF sw = vf_perm(W, O), swx = vf_perm(W * vf_load(xb), O);
    const VM lo = vi_gt(vi_splat(8), O); /* +0 for the other half, see sort_prefix_m_scalar */
    _Alignas(64) float ax0[16], ax1[16], aw0[16], aw1[16];
    vf_store(ax0, vf_sel(lo, swx, zero));
    vf_store(ax1, vf_sel(lo, zero, swx));
    vf_store(aw0, vf_sel(lo, sw, zero));
    vf_store(aw1, vf_sel(lo, zero, sw));
    prefix_m(ax0, ax1, aw0, aw1, px, pw);
#else
    place_prefix_m(xb, weight, rank, order, px, pw);
#endif
}

VL_TGT static void VL_SFX(sort_prefix_s)(const float *xb, const float *weight, int *order,
                                         float *sumx, float *sumw) {
    if (VL_FUSES) { /* the prefix sums are fmas there (sort_prefix_s_scalar) */
        sort_prefix_s_scalar(xb, weight, order, sumx, sumw);
        return;
    }
    int32_t rank[32];
    VL_SFX(ranks)(xb, 32, rank);
#ifdef IQ1_PACKED
    VI O[2];
    VL_SFX(inverse16)(rank, 32, O);
    _Alignas(64) float wx[32], ax[32], aw[32];
    for (int q = 0; q < 2; q++) {
        vi_store(order + 16 * q, O[q]);
        vf_store(wx + 16 * q, vf_load(weight + 16 * q) * vf_load(xb + 16 * q));
    }
    for (int q = 0; q < 2; q++) {
        vf_store(ax + 16 * q, vf_lut32(wx, O[q]));
        vf_store(aw + 16 * q, vf_lut32(weight, O[q]));
    }
    prefix_s(ax, aw, sumx, sumw);
#else
    place_prefix_s(xb, weight, rank, order, sumx, sumw);
#endif
}

/* weights_scalar in SIMD (n = 16 or 32) */
VL_TGT static float VL_SFX(weights)(const float *xb, const float *qw, float sigma2, int n, float *w) {
    VF mx = vf_splat(0.0f);
    for (int i = 0; i < n; i += VL_W) {
        const VF x = vf_load(xb + i);
        VF x2 = x * x;
        if (qw) x2 = vf_load(qw + i) * vf_sqrt(vf_fma_arm(x, x, vf_splat(sigma2)));
        vf_store(w + i, x2);
        mx = vf_max(mx, vf_abs(x));
    }
    return vf_hmax(mx);
}

/* IQ1_S split tables (entries 0..32, then entry 32 repeated): i1-indexed t1 = Ap, Am, WAp, WAm,
 * X1, W1 and i2-indexed t2 = X2, W2, Cp, Cm, WCp, WCm with A = sumx[i1] - sumx[0],
 * C = sumx[bs] - sumx[i2] (W* the same over sumw), X = sumx, W = sumw: the reference's terms. */
VL_FN void VL_SFX(s_tables)(const float *sumx, const float *sumw, float t1[6][48], float t2[6][48]) {
    const int bs = 32;
    const VF p0 = vf_splat(x_p[0]), m0 = vf_splat(x_m[0]), p2 = vf_splat(x_p[2]), m2 = vf_splat(x_m[2]);
    const VF sx0 = vf_splat(sumx[0]), sw0 = vf_splat(sumw[0]);
    const VF sxb = vf_splat(sumx[bs]), swb = vf_splat(sumw[bs]);
    IQ1_UNROLL for (int i = 0; i < 48; i += VL_W) {
        const VF X = i < bs ? vf_load(sumx + i) : sxb, Wv = i < bs ? vf_load(sumw + i) : swb;
        const VF A = X - sx0, WA = Wv - sw0, C = sxb - X, WC = swb - Wv;
        /* where the platform fuses (split_qx/split_q2's fmas) the tables keep the operands
         * whose product is not rounded: A, WA*v0, C, WC*v2 (s_pair multiplies) */
        vf_store(t1[0] + i, VL_FUSES ? A : A * p0);
        vf_store(t1[1] + i, VL_FUSES ? A : A * m0);
        vf_store(t1[2] + i, VL_FUSES ? WA * p0 : WA * p0 * p0);
        vf_store(t1[3] + i, VL_FUSES ? WA * m0 : WA * m0 * m0);
        vf_store(t1[4] + i, X);
        vf_store(t1[5] + i, Wv);
        vf_store(t2[0] + i, X);
        vf_store(t2[1] + i, Wv);
        vf_store(t2[2] + i, VL_FUSES ? C : C * p2);
        vf_store(t2[3] + i, VL_FUSES ? C : C * m2);
        vf_store(t2[4] + i, VL_FUSES ? WC * p2 : WC * p2 * p2);
        vf_store(t2[5] + i, VL_FUSES ? WC * m2 : WC * m2 * m2);
    }
}

/* IQ1_M split tables per half h (entries 0..16, then entry 16 repeated): px, pw*cp1, pw*cp2,
 * pw*cm1, pw*cm2; tw[h] = px[bs]*p2, px[bs]*m2, pw[bs]*p2*p2, pw[bs]*m2*m2 (search_m_scalar's
 * terms). */
VL_FN void VL_SFX(m_tables)(const float px[2][17], const float pw[2][17], float t[2][5][32],
                            float tw[2][4]) {
    const int bs = 16;
    const float p2 = x_p[2], m2 = x_m[2];
    const float cc[4] = { IQF_FMS_ARM(x_p[0], x_p[0], x_p[1] * x_p[1]), IQF_FMS_ARM(x_p[1], x_p[1], x_p[2] * x_p[2]),
                          IQF_FMS_ARM(x_m[0], x_m[0], x_m[1] * x_m[1]), IQF_FMS_ARM(x_m[1], x_m[1], x_m[2] * x_m[2]) };
    IQ1_UNROLL for (int h = 0; h < 2; h++) {
        IQ1_UNROLL for (int i = 0; i < 32; i += VL_W) {
            const VF x = i < bs ? vf_load(px[h] + i) : vf_splat(px[h][bs]);
            const VF w = i < bs ? vf_load(pw[h] + i) : vf_splat(pw[h][bs]);
            vf_store(t[h][0] + i, x);
            /* fused (search_m_scalar's fmas): the i2-indexed pw*cp2, pw*cm2 are pw (m_pair) */
            IQ1_UNROLL for (int j = 0; j < 4; j++)
                vf_store(t[h][j + 1] + i, VL_FUSES && (j & 1) ? w : w * vf_splat(cc[j]));
        }
        tw[h][0] = VL_FUSES ? px[h][bs] : px[h][bs] * p2;
        tw[h][1] = VL_FUSES ? px[h][bs] : px[h][bs] * m2;
        tw[h][2] = VL_FUSES ? pw[h][bs] * p2 : pw[h][bs] * p2 * p2;
        tw[h][3] = VL_FUSES ? pw[h][bs] * m2 : pw[h][bs] * m2 * m2;
    }
}

/* IQ1_S split candidates: a = the i1-indexed operands (Ap, Am, WAp, WAm, X1, W1), b = the
 * i2-indexed ones (X2, W2, Cp, Cm, WCp, WCm), see s_tables; the reference's expressions. */
VL_FN void VL_SFX(s_pair)(const VF *a, const VF *b, VF *sqx, VF *sq2) {
    const VF p1 = vf_splat(x_p[1]), m1 = vf_splat(x_m[1]);
    const VF B = b[0] - a[4], WB = b[1] - a[5];
    if (VL_FUSES) { /* split_qx/split_q2: fma(c, v2, fma(a, v0, b*v1)) */
        const VF p0 = vf_splat(x_p[0]), m0 = vf_splat(x_m[0]), p2 = vf_splat(x_p[2]), m2 = vf_splat(x_m[2]);
        sqx[0] = vf_fma_arm(b[2], p2, vf_fma_arm(a[0], p0, B * p1));
        sqx[1] = vf_fma_arm(b[3], m2, vf_fma_arm(a[1], m0, B * m1));
        sq2[0] = vf_fma_arm(b[4], p2, vf_fma_arm(a[2], p0, WB * p1 * p1));
        sq2[1] = vf_fma_arm(b[5], m2, vf_fma_arm(a[3], m0, WB * m1 * m1));
        return;
    }
    sqx[0] = a[0] + B * p1 + b[2];
    sqx[1] = a[1] + B * m1 + b[3];
    sq2[0] = a[2] + WB * p1 * p1 + b[4];
    sq2[1] = a[3] + WB * m1 * m1 + b[5];
}

VL_TGT static int VL_SFX(search_s)(const float *sumx, const float *sumw, float *scale_out,
                                   int *bi1, int *bi2) {
    const int bs = 32;
    _Alignas(64) float t1[6][48], t2[6][48];
    VL_SFX(s_tables)(sumx, sumw, t1, t2);
    iq1_cands c;
    cands_init(&c, 2, VL_W, VL_SFX(anchor), VL_SFX(vecmax));
    VF a[6], b[6], sqx[2], sq2[2];
#ifdef IQ1_PACKED
    /* i1 <= 31 in vectors 0..34; i2-indexed tables shifted by one (i2 in 1..32); pair (0, 0)
     * and the last pair (32, 32) are patched in with scalar code. */
    c.li1 = pairs_s16.i1;
    c.li2 = pairs_s16.i2;
    for (int v = 0; v < 35; v++) {
        const VI idx1 = vi_load_i8(pairs_s16.i1 + VL_W * v);
        const VI idx2 = vi_load_i8(pairs_s16.i2 + VL_W * v) - vi_splat(1);
        IQ1_UNROLL for (int j = 0; j < 6; j++) {
            a[j] = vf_lut32(t1[j], idx1);
            b[j] = vf_lut32(t2[j] + 1, idx2);
        }
        VL_SFX(s_pair)(a, b, sqx, sq2);
        if (v == 0) { /* pair (0, 0): i2 = 0 is outside the shifted tables */
            float px_, mx_, p2_, m2_;
            scalar_pair_s(sumx, sumw, 0, 0, &px_, &mx_, &p2_, &m2_);
            const VM l0 = vm_of_bits(1);
            sqx[0] = vf_sel(l0, vf_splat(px_), sqx[0]);
            sqx[1] = vf_sel(l0, vf_splat(mx_), sqx[1]);
            sq2[0] = vf_sel(l0, vf_splat(p2_), sq2[0]);
            sq2[1] = vf_sel(l0, vf_splat(m2_), sq2[1]);
        }
        VL_SFX(store_vec)(&c, sqx, sq2, 2, VL_W, 0, 0);
    }
    {
        float px_, mx_, p2_, m2_;
        scalar_pair_s(sumx, sumw, bs, bs, &px_, &mx_, &p2_, &m2_);
        sqx[0] = vf_splat(px_);
        sqx[1] = vf_splat(mx_);
        sq2[0] = vf_splat(p2_);
        sq2[1] = vf_splat(m2_);
        VL_SFX(store_vec)(&c, sqx, sq2, 2, 1, 0, 0);
    }
#else
    for (int i1 = 0; i1 <= bs; ++i1) {
        IQ1_UNROLL for (int j = 0; j < 6; j++) a[j] = vf_splat(t1[j][i1]);
        for (int i2 = i1; i2 <= bs; i2 += VL_W) {
            IQ1_UNROLL for (int j = 0; j < 6; j++) b[j] = vf_load(t2[j] + i2);
            VL_SFX(s_pair)(a, b, sqx, sq2);
            VL_SFX(store_vec)(&c, sqx, sq2, 2, bs + 1 - i2 < VL_W ? bs + 1 - i2 : VL_W, i1, i2);
        }
    }
#endif
    const int k = run_select(&c, VL_SFX(condmask), scale_out, bi1, bi2);
    return k < 0 ? 0 : (k == 0 ? 1 : -1);
}

/* IQ1_M split candidates: a[h] = the i1-indexed table values of half h, b[h] the i2-indexed ones
 * (m_tables); w = per half Tp, Tm, TWp, TWm; the reference's expressions, variants k = 0..3. */
VL_FN void VL_SFX(m_pair)(VF a[2][5], VF b[2][5], const VF w[2][4], VF *sqx, VF *sq2) {
    VF qxp[2], qxm[2], q2p[2], q2m[2];
    const VF p2 = vf_splat(x_p[2]), m2 = vf_splat(x_m[2]);
    const VF cp2 = vf_splat(IQF_FMS_ARM(x_p[1], x_p[1], x_p[2] * x_p[2]));
    const VF cm2 = vf_splat(IQF_FMS_ARM(x_m[1], x_m[1], x_m[2] * x_m[2]));
    IQ1_UNROLL for (int h = 0; h < 2; h++) {
        const VF sx = a[h][0] + b[h][0];
        if (VL_FUSES) { /* search_m_scalar's fmas (m_tables keeps their operands) */
            qxp[h] = vf_fms_arm(w[h][0], p2, sx);
            qxm[h] = vf_fms_arm(w[h][1], m2, sx);
            q2p[h] = vf_fma_arm(b[h][2], cp2, vf_fma_arm(w[h][2], p2, a[h][1]));
            q2m[h] = vf_fma_arm(b[h][4], cm2, vf_fma_arm(w[h][3], m2, a[h][3]));
        } else {
            (void)p2, (void)m2, (void)cp2, (void)cm2;
            qxp[h] = w[h][0] - sx;
            qxm[h] = w[h][1] - sx;
            q2p[h] = w[h][2] + a[h][1] + b[h][2];
            q2m[h] = w[h][3] + a[h][3] + b[h][4];
        }
    }
    sqx[0] = qxp[0] + qxp[1];
    sqx[1] = qxp[0] + qxm[1];
    sqx[2] = qxm[0] + qxp[1];
    sqx[3] = qxm[0] + qxm[1];
    sq2[0] = q2p[0] + q2p[1];
    sq2[1] = q2p[0] + q2m[1];
    sq2[2] = q2m[0] + q2p[1];
    sq2[3] = q2m[0] + q2m[1];
}

VL_TGT static int VL_SFX(search_m)(const float px[2][17], const float pw[2][17], float *scale_out,
                                   int *bi1, int *bi2) {
    _Alignas(64) float t[2][5][32];
    float tw[2][4];
    VL_SFX(m_tables)(px, pw, t, tw);
    iq1_cands c;
    cands_init(&c, 4, VL_W, VL_SFX(anchor), VL_SFX(vecmax));
    VF w[2][4], a[2][5], b[2][5], sqx[4], sq2[4];
    IQ1_UNROLL for (int h = 0; h < 2; h++)
        IQ1_UNROLL for (int j = 0; j < 4; j++) w[h][j] = vf_splat(tw[h][j]);
#ifdef IQ1_PACKED
    c.li1 = pairs_m16.i1;
    c.li2 = pairs_m16.i2;
    for (int v = 0; v < 10; v++) {
        const VI idx1 = vi_load_i8(pairs_m16.i1 + VL_W * v), idx2 = vi_load_i8(pairs_m16.i2 + VL_W * v);
        IQ1_UNROLL for (int h = 0; h < 2; h++)
            IQ1_UNROLL for (int j = 0; j < 5; j++) {
                a[h][j] = vf_lut32(t[h][j], idx1);
                b[h][j] = vf_lut32(t[h][j], idx2);
            }
        VL_SFX(m_pair)(a, b, (const VF(*)[4])w, sqx, sq2);
        VL_SFX(store_vec)(&c, sqx, sq2, 4, v < 9 ? VL_W : 153 - VL_W * 9, 0, 0);
    }
#else
    const int bs = 16;
    for (int i1 = 0; i1 <= bs; ++i1) {
        IQ1_UNROLL for (int h = 0; h < 2; h++)
            IQ1_UNROLL for (int j = 0; j < 5; j++) a[h][j] = vf_splat(t[h][j][i1]);
        for (int i2 = i1; i2 <= bs; i2 += VL_W) {
            IQ1_UNROLL for (int h = 0; h < 2; h++)
                IQ1_UNROLL for (int j = 0; j < 5; j++) b[h][j] = vf_load(t[h][j] + i2);
            VL_SFX(m_pair)(a, b, (const VF(*)[4])w, sqx, sq2);
            VL_SFX(store_vec)(&c, sqx, sq2, 4, bs + 1 - i2 < VL_W ? bs + 1 - i2 : VL_W, i1, i2);
        }
    }
#endif
    return run_select(&c, VL_SFX(condmask), scale_out, bi1, bi2);
}

/* Neighbour search, VL_W neighbours per vector. Term table T_i: lane e holds
 * (w_i*(scale*xg[e&3] - x_i))*(scale*xg[e&3] - x_i), so a permute by key >> 2i (low bits) picks
 * the term of coordinate i's level. All distances, then one minimum (NaN never wins, as in
 * `d2 < best`), then its first occurrence: the reference's strict-< scan. */
VL_TGT static int VL_SFX(best_neighbour)(const uint16_t *nb, const uint16_t *nbk, const float *xval,
                                         const float *weight, float scale, const float *xg) {
    const int n = nbk[0];
    if (n > 240) return best_neighbour_scalar(nb, nbk, xval, weight, scale, xg);
    const VF SQ = vf_splat(scale) * vf_bcast4(xg);
    /* where the platform fuses (best_neighbour_scalar's fmas): T = w*diff and D = diff */
    VF T[8], D[8];
    IQ1_UNROLL for (int i = 0; i < 8; i++) {
        const VF diff = VL_FUSES ? vf_fms_arm(vf_splat(scale), vf_bcast4(xg), vf_splat(xval[i]))
                                 : SQ - vf_splat(xval[i]);
        D[i] = diff;
        T[i] = VL_FUSES ? vf_splat(weight[i]) * diff : vf_splat(weight[i]) * diff * diff;
    }
#if VL_W == 16
    /* 16 lanes: one table for coordinates 0 and 1, lane e = (0 + term0[e & 3]) + term1[e >> 2],
     * the reference's first two steps of d2 for levels (e & 3, e >> 2). */
    {
        const VF diff = vf_splat(scale) * vf_perm(vf_bcast4(xg), vi_iota() >> 2) - vf_splat(xval[1]);
        T[1] = vf_splat(0.0f) + T[0] + vf_splat(weight[1]) * diff * diff;
    }
#define IQ1_NB_FIRST 1 /* T[1] covers coordinates 0 and 1 */
#else
#define IQ1_NB_FIRST 0
#endif
    _Alignas(64) float d2buf[256];
    const VF inf = vf_splat(INFINITY);
    VF vmin = inf;
    for (int j0 = 0; j0 < n; j0 += VL_W) {
        const VI keys = vi_load_u16(nbk + 1 + j0);
        VF d2 = IQ1_NB_FIRST ? vf_perm(T[1], keys) : vf_splat(0.0f);
        IQ1_UNROLL for (int i = 2 * IQ1_NB_FIRST; i < 8; i++) {
            const VI k = keys >> (2 * i);
            d2 = VL_FUSES ? vf_fma_arm(vf_perm(T[i], k), vf_perm(D[i], k), d2) : d2 + vf_perm(T[i], k);
        }
        if (n - j0 < VL_W) d2 = vf_sel(vi_gt(vi_splat(n - j0), vi_iota()), d2, inf);
        vf_store(d2buf + j0, d2);
        vmin = vf_min(d2, vmin);
    }
    const float m = vf_hmin(vmin);
    if (!(m < FLT_MAX)) return -1;
    const VF vm = vf_splat(m);
    for (int j0 = 0;; j0 += VL_W) {
        const uint32_t eq = vm_bits(vf_eq(vf_load(d2buf + j0), vm));
        if (eq) return grid1->kmap[nbk[1 + j0 + __builtin_ctz(eq)]];
    }
}
#undef IQ1_NB_FIRST

/* This instruction set's kernel set (pick_kernels sets .simd). */
static const iq1_kernels VL_SFX(kernels) = { IQF_SIMD_AUTO, VL_SFX(best_neighbour), VL_SFX(weights),
                                             VL_SFX(sort_prefix_m), VL_SFX(sort_prefix_s),
                                             VL_SFX(search_s), VL_SFX(search_m) };
