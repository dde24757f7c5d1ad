/* iq3_lanes.h - the SIMD kernels of iq3.c, written once over the lane count (vec_lanes.h): iq3.c
 * includes vec_lanes.h and this file once per instruction set (VL_W 8 under AVX2, 16 under
 * AVX-512; the plain width at 8 for NEON). Per lane the float operations are exactly the scalar
 * reference's (search_ref, prepare_sub, best_neighbour), in the same order, fused on arm64 where
 * it writes IQF_FMA_ARM (vf_fma_arm, VL_FUSES: vec_lanes.h). No include guard on purpose.
 * Optional: IQ3_CANDS_TAIL(...) evaluates a remainder of 8 candidates with narrower code. */

/* prepare_sub with the element-wise part in SIMD (the same IEEE operations per value: products,
 * sqrt, sign tests); the parity fix is prepare_sub's scalar code. */
VL_TGT static void VL_SFX(prepare_sub)(const float *xb, const float *qw, float sigma2, bool parity,
                                       iq3_sub *sb, uint8_t signs[4]) {
    const VF zero = vf_splat(0.0f), s2 = vf_splat(sigma2);
    uint32_t neg = 0;
    for (int h = 0; h < 32 / VL_W; h++) {
        const VF x = vf_load(xb + VL_W * h);
        const VF xx = x * x;
        const VF w = qw ? vf_load(qw + VL_W * h) * vf_sqrt(vf_fma_arm(x, x, s2)) : xx;
        vf_store(sb->w + VL_W * h, w);
        vf_store(sb->waux + VL_W * h, vf_sqrt(w));
        const VM ge = vf_ge(x, zero);
        vf_store(sb->xval + VL_W * h, vf_sel(ge, x, zero - x));
        neg |= (~vm_bits(ge) & ((1u << VL_W) - 1)) << VL_W * h;
    }
    for (int k = 0; k < 4; k++) signs[k] = (uint8_t)(neg >> 8 * k);
    if (parity) parity_fix(xb, sb, signs);
    VF m = vf_load(sb->xval);
    for (int h = 1; h < 32 / VL_W; h++) m = vf_max(m, vf_load(sb->xval + VL_W * h));
    sb->max = vf_hmax(m);
}

/* best_neighbour for one scale: the 32 terms waux_i*(scale*q_l - x_i)^2 (coordinate i, level l)
 * in SIMD with best_neighbour's operations, then nb_scan. */
VL_TGT static int VL_SFX(best_neighbour)(const iq3_tab *t, int u, const float *xval,
                                         const float *waux, float scale) {
    float A[32];
    const VF sq = vf_splat(scale) * vf_load(iq3_qlev);
    for (int p = 0; p < 32 / VL_W; p++) {
        const VF d = sq - vf_rep8(xval, p);
        vf_store(A + VL_W * p, vf_rep8(waux, p) * d * d);
    }
    return nb_scan(t, u, A);
}

/*
 * The neighbour search of one key for VL_W candidate scales at once. A holds, per coordinate i
 * and level l, the term waux_i*(s*q_l - x_i)^2 for every lane (the same float operations as
 * best_neighbour, computed once per group instead of once per neighbour), so a neighbour costs
 * 3 adds in best_neighbour's order. Returns per lane the key of the first neighbour with the
 * smallest distance (the first one if none is below FLT_MAX).
 * Out of line: inside the search loop the compiler runs out of vector registers.
 */
__attribute__((noinline)) VL_TGT static VI VL_SFX(nb_keys)(const uint16_t *nbk,
                                                           const uint8_t (*nbo)[4], const VF *A,
                                                           const VF *P, const VF *D) {
    const int cnt = nbk[0];
    VF best = vf_splat(FLT_MAX);
    VI bk = vi_splat(nbk[1]);
    for (int j = 1; j <= cnt; j++) {
        const int key = nbk[j];
        const uint8_t *o = nbo[j];
        VF d2;
        if (VL_FUSES) { /* best_neighbour's fused d2 += waux*diff*diff: P = waux*diff, D = diff */
            d2 = vf_fma_arm(P[o[1]], D[o[1]], A[o[0]]);
            d2 = vf_fma_arm(P[o[2]], D[o[2]], d2);
            d2 = vf_fma_arm(P[o[3]], D[o[3]], d2);
        } else {
            (void)P, (void)D;
            d2 = A[o[0]] + A[o[1]];
            d2 = d2 + A[o[2]];
            d2 = d2 + A[o[3]];
        }
        bk = vi_sel(vf_lt(d2, best), vi_splat(key), bk);
        best = vf_min(d2, best); /* d2 < best ? d2 : best, a short dependency chain */
    }
    return bk;
}

/* Evaluates the VL_W candidate scales in lanes c0.. (ids, scl indexed by lane) into cd. */
VL_TGT static void VL_SFX(cands)(const iq3_variant *v, const iq3_sub *sb, const float *wx,
                                 const float *ids, const float *scl, int c0, iq3_cands *cd) {
    const iq3_tab *t = v->t;
    const VF one = vf_splat(1.0f), half = vf_splat(0.5f);
    const VI zero = vi_splat(0), seven = vi_splat(7);
    VF sq[8], A[32], P[VL_FUSES ? 32 : 1], D[VL_FUSES ? 32 : 1];
    const VF vid = vf_load(ids + c0), vs = vf_load(scl + c0);
    for (int l = 0; l < 8; l++) sq[l] = vs * vf_splat((float)(2 * l + 1));
    VF sqx = vf_splat(0.0f), sq2 = vf_splat(0.0f);
    /* Keys and key-map lookups of all 8 groups first: the gathers overlap. */
    VI uk[8], gk[8];
    for (int k = 0; k < 8; k++) {
        const float *xk = sb->xval + 4 * k;
        VI u = zero;
        for (int i = 0; i < 4; i++) {
            const VF tt = half * vf_fms_arm(vid, vf_splat(xk[i]), one);
            const VI l = vi_min(vi_max(vf_nearest(tt), zero), seven);
            u = u | (l << (3 * i));
        }
        uk[k] = u;
        gk[k] = vi_gather(t->kmap, u);
    }
    for (int k = 0; k < 8; k++) {
        const float *xk = sb->xval + 4 * k, *wk = sb->waux + 4 * k;
        const VI u = uk[k];
        uint32_t offm = vm_bits(vi_neg(gk[k]));
        VI key = u;
        cd->off[k] |= offm << c0;
        if (offm) {
            for (int i = 0; i < 4; i++) {
                const VF xi = vf_splat(xk[i]), wi = vf_splat(wk[i]);
                for (int l = 0; l < 8; l++) {
                    if (VL_FUSES) { /* best_neighbour's fused diff = scale*q - x */
                        const VF d = vf_fms_arm(vs, vf_splat((float)(2 * l + 1)), xi);
                        D[8 * i + l] = d;
                        P[8 * i + l] = wi * d;
                        A[8 * i + l] = P[8 * i + l] * d;
                    } else {
                        const VF d = sq[l] - xi;
                        A[8 * i + l] = wi * d * d;
                    }
                }
            }
            int32_t ua[VL_W];
            vi_store(ua, u);
            while (offm) {
                const int u0 = ua[__builtin_ctz(offm)];
                const VM mm = vi_eq(u, vi_splat(u0));
                offm &= ~vm_bits(mm);
                const VI bk = VL_SFX(nb_keys)(t->nbk - t->kmap[u0] - 1, t->nbo - t->kmap[u0] - 1, A, P, D);
                key = vi_sel(mm, bk, key);
            }
        }
        vi_store(cd->gkey[k] + c0, key);
        for (int i = 0; i < 4; i++) {
            const VF q = vf_lut8(iq3_qlev, (key >> (3 * i)) & seven);
            sqx = sqx + vf_splat(wx[4 * k + i]) * q;
            sq2 = sq2 + vf_splat(sb->w[4 * k + i]) * q * q;
        }
    }
    vf_store(cd->sumqx + c0, sqx);
    vf_store(cd->sumq2 + c0, sq2);
}

/* VL_W lanes at a time; with IQ3_CANDS_TAIL a remainder of 8 candidates (iq3_s at 16 lanes:
 * 19 = 16 + 3) takes the 8-lane code, which costs half as much. */
VL_TGT static float VL_SFX(search)(const iq3_variant *v, const iq3_sub *sb, int8_t L[32]) {
    float ids[32], scl[32], wx[32];
    const int nlanes = candidate_scales(sb, 8, ids, scl);
    for (int i = 0; i < 32; i++) wx[i] = sb->w[i] * sb->xval[i];
    iq3_cands cd;
    memset(cd.off, 0, sizeof cd.off);
    int c0 = 0;
    for (; c0 + VL_W <= nlanes; c0 += VL_W) VL_SFX(cands)(v, sb, wx, ids, scl, c0, &cd);
#ifdef IQ3_CANDS_TAIL
    if (c0 < nlanes) IQ3_CANDS_TAIL(v, sb, wx, ids, scl, c0, &cd);
#endif
    return finish_search(v, sb, &cd, L);
}

/* This instruction set's implementation of the variant's steps. */
static void VL_SFX(pick)(iq3_variant *v) {
    /* where the platform fuses, best_neighbour's d2 sums are not the table's adds (refine only) */
    v->neighbour = VL_FUSES ? best_neighbour : VL_SFX(best_neighbour);
    v->prepare = VL_SFX(prepare_sub);
    v->search = VL_SFX(search);
}
