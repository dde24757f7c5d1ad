/* iq2_lanes.h - the SIMD encoder steps of iq2.c (enc_ops), written once over the lane count
 * (vec_lanes.h): iq2.c includes vec_lanes.h and this file once per instruction set (VL_W 8
 * under AVX2, 16 under AVX-512). The rounding and the sums run one candidate scale per lane, the
 * neighbour searches one grid neighbour per lane; per lane the float operations are exactly the
 * scalar reference's, in the same order, fused where it writes IQF_FMA_ARM (vf_fma_arm, VL_FUSES:
 * vec_lanes.h). Defines VL_SFX(ops). No include guard on purpose. */

#define IQ2_NP (32 / VL_W) /* term vectors of one group: VL_W/4 coordinates x 4 level slots each */

/* A group's values and weights spread for the term tables: vector p holds coordinates
 * (VL_W/4)p.., each repeated 4 times (one slot per level). */
typedef struct VL_SFX(iq2_spread) {
    VF x[IQ2_NP], w[IQ2_NP];
} VL_SFX(iq2_spread);

VL_FN void VL_SFX(iq2_spread8)(const float *xval, const float *waux, VL_SFX(iq2_spread) *sp) {
    for (int p = 0; p < IQ2_NP; p++) {
        sp->x[p] = vf_rep4(xval, p);
        sp->w[p] = vf_rep4(waux, p);
    }
}

/* e[p] lane 4c + l = (waux_i * diff) * diff, diff = scale*q_l - xval_i, i = (VL_W/4)p + c,
 * q = 1, 3, 5 (slot l = 3 unused). Where the platform fuses (VL_FUSES) the scalar search's
 * diff = fma(scale, q, -xval_i) and d2 = fma(waux_i * diff, diff, d2): e = waux_i * diff and
 * dd = diff, summed by IQ2_ADD. */
VL_FN void VL_SFX(iq2_terms)(VF *e, VF *dd, const VL_SFX(iq2_spread) *sp, float scale) {
    const VF sc = vf_splat(scale), lev = vf_load(iq2_lev), sq = sc * lev;
    for (int p = 0; p < IQ2_NP; p++) {
        const VF diff = VL_FUSES ? vf_fms_arm(sc, lev, sp->x[p]) : sq - sp->x[p];
        dd[p] = diff;
        e[p] = VL_FUSES ? sp->w[p] * diff : sp->w[p] * diff * diff;
    }
}
/* d2 plus one coordinate's term: e and dd picked alike by PICK(table) */
#define IQ2_ADD(d2, PICK) (VL_FUSES ? vf_fma_arm(PICK(e), PICK(dd), d2) : d2 + PICK(e))

/* The index of coordinate i's level l inside its term vector e[i / (VL_W/4)]. */
#define IQ2_SLOT(l, i) ((l) + vi_splat(4 * ((i) % (VL_W / 4))))

VL_FN int VL_SFX(best_nb_core)(const iqf_iqgrid *g, int u, const VL_SFX(iq2_spread) *sp,
                                       float scale) {
    VF e[IQ2_NP], dd[IQ2_NP];
    VL_SFX(iq2_terms)(e, dd, sp, scale);
    const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
    const uint16_t *nk = g->nbkeys + (nb - g->neighbours);
    const int n = nb[0];
    const VI three = vi_splat(3);
    const VF inf = vf_splat(INFINITY);
    float best = FLT_MAX;
    int gi = -1;
    for (int base = 1; base <= n; base += VL_W) {
        const VI keys = vi_load_u16(nk + base);
        VF d2 = vf_splat(0.0f);
        IQF_UNROLL8
        for (int i = 0; i < 8; i++) {
            const VI l = (keys >> (2 * i)) & three;
#define IQ2_PICK(t) vf_perm(t[i / (VL_W / 4)], IQ2_SLOT(l, i))
            d2 = IQ2_ADD(d2, IQ2_PICK);
#undef IQ2_PICK
        }
        const VM valid = vm_and(vi_gt(vi_splat(n - base + 1), vi_iota()), vf_ord(d2, d2));
        d2 = vf_sel(valid, d2, inf);
        const float mn = vf_hmin(d2);
        if (mn < best) {
            best = mn;
            gi = nb[base + __builtin_ctz(vm_bits(vf_eq(d2, vf_splat(mn))))];
        }
    }
    return gi >= 0 ? gi : nb[1];
}

/* Two searches with lists of at most VL_W/2 points in one vector (low and high half). */
VL_FN void VL_SFX(best_nb_pair)(const iqf_iqgrid *g, int ua, int ub, const VL_SFX(iq2_spread) *sp,
                                float sa, float sb, int *ga, int *gb) {
    VF ea[IQ2_NP], eb[IQ2_NP], dda[IQ2_NP], ddb[IQ2_NP];
    VL_SFX(iq2_terms)(ea, dda, sp, sa);
    VL_SFX(iq2_terms)(eb, ddb, sp, sb);
    const uint16_t *nba = iqf_iqgrid_neighbours(g, ua), *nbb = iqf_iqgrid_neighbours(g, ub);
    const uint16_t *nka = g->nbkeys + (nba - g->neighbours), *nkb = g->nbkeys + (nbb - g->neighbours);
    const int na = nba[0], nb = nbb[0];
    const VI keys = vi_load_u16_pair(nka + 1, nkb + 1);
    const VI three = vi_splat(3);
    VF d2 = vf_splat(0.0f);
    IQF_UNROLL8
    for (int i = 0; i < 8; i++) {
        const VI l = (keys >> (2 * i)) & three;
#define IQ2_PICK(t) vf_perm_halves(t##a[i / (VL_W / 4)], t##b[i / (VL_W / 4)], IQ2_SLOT(l, i))
        d2 = IQ2_ADD(d2, IQ2_PICK);
#undef IQ2_PICK
    }
    const uint32_t cnt = ((1u << na) - 1) | ((1u << nb) - 1) << VL_W / 2;
    const VM valid = vm_and(vm_of_bits(cnt), vf_ord(d2, d2));
    d2 = vf_sel(valid, d2, vf_splat(INFINITY));
    const VF m = vf_min_halves(d2);
    const uint32_t eq = vm_bits(vf_eq(d2, m));
    const float mna = m[0], mnb = m[VL_W / 2];
    *ga = mna < FLT_MAX ? nba[1 + __builtin_ctz(eq & ((1u << VL_W / 2) - 1))] : nba[1];
    *gb = mnb < FLT_MAX ? nbb[1 + __builtin_ctz(eq >> VL_W / 2)] : nbb[1];
}

VL_TGT static int VL_SFX(best_nb)(const iqf_iqgrid *g, int u, const float *xval, const float *waux,
                                  float scale) {
    VL_SFX(iq2_spread) sp;
    VL_SFX(iq2_spread8)(xval, waux, &sp);
    return VL_SFX(best_nb_core)(g, u, &sp, scale);
}

VL_TGT static void VL_SFX(resolve)(const iqf_iqgrid *g, cand_set *cs, const float *xval,
                                   const float *waux, int ng) {
    lookup_prefetch(g, cs, ng);
    for (int k = 0; k < ng; k++) {
        VL_SFX(iq2_spread) sp;
        VL_SFX(iq2_spread8)(xval + 8 * k, waux + 8 * k, &sp);
        int pend = -1; /* an off-grid candidate with a short list waiting for a partner */
        for (int c = 0; c < cs->nc; c++) {
            if (cs->og[k][c]) continue;
            int u = cs->key[k][c];
            const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
            if (nb[0] == 1) { /* a single candidate: ggml's search returns it */
                cs->gi[k][c] = nb[1];
                cs->key[k][c] = g->keys[nb[1]];
            } else if (nb[0] > VL_W / 2) {
                int gi = VL_SFX(best_nb_core)(g, u, &sp, cs->sc[c]);
                cs->gi[k][c] = gi;
                cs->key[k][c] = g->keys[gi];
            } else if (pend < 0) {
                pend = c;
            } else {
                int ga, gb;
                VL_SFX(best_nb_pair)(g, cs->key[k][pend], u, &sp, cs->sc[pend], cs->sc[c], &ga, &gb);
                cs->gi[k][pend] = ga;
                cs->key[k][pend] = g->keys[ga];
                cs->gi[k][c] = gb;
                cs->key[k][c] = g->keys[gb];
                pend = -1;
            }
        }
        if (pend >= 0) {
            int gi = VL_SFX(best_nb_core)(g, cs->key[k][pend], &sp, cs->sc[pend]);
            cs->gi[k][pend] = gi;
            cs->key[k][pend] = g->keys[gi];
        }
    }
}

VL_TGT static void VL_SFX(round)(cand_set *cs, const float *xval, int ng) {
    const VF one = vf_splat(1.f), half = vf_splat(0.5f);
    const VI zero = vi_splat(0), two = vi_splat(2);
    for (int v = 0; v < cs->nc; v += VL_W) {
        const VF id = vf_load(cs->id + v);
        for (int k = 0; k < ng; k++) {
            VI u = zero;
            IQF_UNROLL8
            for (int i = 0; i < 8; i++) {
                const VF t = half * vf_fms_arm(id, vf_splat(xval[8 * k + i]), one);
                const VI l = vi_min(vi_max(vf_nearest(t), zero), two);
                u = u | (l << (2 * i));
            }
            vi_store(cs->key[k] + v, u);
        }
    }
}

VL_TGT static void VL_SFX(sums)(cand_set *cs, const float *wx, const float *weight, int ng) {
    const VI three = vi_splat(3), one = vi_splat(1);
    const bool fuse = VL_FUSES && ng == 2; /* sums_scalar's IQF_FMA_ARM_IF */
    for (int v = 0; v < cs->nc; v += VL_W) {
        VF a = vf_splat(0.0f), b = vf_splat(0.0f);
        for (int k = 0; k < ng; k++) {
            const VI key = vi_load(cs->key[k] + v);
            IQF_UNROLL8
            for (int i = 0; i < 8; i++) {
                const VI l = (key >> (2 * i)) & three;
                const VF q = vf_of_i(l + l + one);
                const VF wq = vf_splat(weight[8 * k + i]) * q;
                a = fuse ? vf_fma_arm(vf_splat(wx[8 * k + i]), q, a) : a + vf_splat(wx[8 * k + i]) * q;
                b = fuse ? vf_fma_arm(wq, q, b) : b + wq * q;
            }
        }
        vf_store(cs->sumqx + v, a);
        vf_store(cs->sumq2 + v, b);
    }
}

static const enc_ops VL_SFX(ops) = { VL_SFX(best_nb), VL_SFX(round), VL_SFX(sums), VL_SFX(resolve) };

#undef IQ2_ADD
#undef IQ2_SLOT
#undef IQ2_NP
