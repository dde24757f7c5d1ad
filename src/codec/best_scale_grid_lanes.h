/* best_scale_grid_lanes.h - IQ4's best-mode kernels on 16-level non-uniform
 * grids (iqf_best_grid_cands / iqf_best_grid_eval, called by iq4.c)
 * (best_scale_lanes.h includes it once per width: VL_W 4, 8 or 16; no include guard). */

/* ---- 16-level non-uniform grids (IQ4): index = #{k in 1..15 : v >= thr[k]} ---- */

/* Candidate sums, 16 candidate inverse scales per vector, summed over the 32 values in order. */
static VL_TGT void VL_SFX(grid_cands)(const iqf_best_grid16 *g, const float *x, const float *w,
                                      float *ids, int nc, float *sxq, float *sq2) {
    while (nc % 16) {
        ids[nc] = ids[nc - 1];
        nc++;
    }
    VF thr[16], dk[16];
    for (int k = 1; k < 16; k++) {
        thr[k] = vf_splat(g->thr[k]);
        dk[k] = vf_splat(g->v[k] - g->v[k - 1]);
    }
    const VF v0 = vf_splat(g->v[0]);
    for (int c = 0; c < nc; c += VL_W) {
        const VF id = vf_load(ids + c);
        VF a = vf_splat(0), b = a;
        for (int j = 0; j < QK; j++) {
            const VF xj = vf_splat(x[j]), al = xj * id;
            VF q = v0;
            for (int k = 1; k < 16; k++) q += (VF)((VI)(al >= thr[k]) & (VI)dk[k]);
            const VF wq = vf_splat(w[j]) * q;
            a += wq * xj;
            b += wq * q;
        }
        vf_store(sxq + c, a);
        vf_store(sq2 + c, b);
    }
}

/* Weighted error of 32 values decoded at scale s (indices re-chosen, written to L). */
static VL_TGT float VL_SFX(grid_eval)(const iqf_best_grid16 *g, const float *x, const float *w,
                                      float s, uint8_t *L, float *sxq, float *sq2) {
    const VF id = vf_splat(s != 0 ? 1 / s : 0), vs = vf_splat(s), v0 = vf_splat(g->v[0]);
    VF e[NH], a[NH], b[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = vf_splat(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * VL_W;
            const VF xj = vf_load(x + j), wj = vf_load(w + j), al = xj * id;
            VF q = v0;
            VI li = (VI)vf_splat(0);
            for (int k = 1; k < 16; k++) {
                const VI ge = (VI)(al >= vf_splat(g->thr[k]));
                q += (VF)(ge & (VI)vf_splat(g->v[k] - g->v[k - 1]));
                li -= ge;
            }
            if (s == 0) { /* d = 0: every index decodes to 0; store the index of level 1 */
                li = (VI)vf_splat(0) + 8;
                q = vf_splat(0);
            }
            for (int u = 0; u < VL_W; u++) L[j + u] = (uint8_t)li[u];
            const VF r = xj - vs * q, wq = wj * q;
            e[h] += wj * r * r;
            a[h] += wq * xj;
            b[h] += wq * q;
        }
    }
    if (sxq) *sxq = HSUM(a);
    if (sq2) *sq2 = HSUM(b);
    return HSUM(e);
}
