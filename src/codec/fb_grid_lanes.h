/* fb_grid_lanes.h - the terms of the grid re-rounding's nearest-point search (fb_blocks.c's
 * grid_terms_ref), written once over the lane count (vec_lanes.h): fb_blocks.c includes
 * vec_lanes.h and this file once per instruction set (VL_W 8 under AVX2, 16 under AVX-512). No
 * include guard on purpose.
 *
 * Per component k the nl level terms (lane j: (imp_k * d) * d, d = u_k - db * lvl[j], as
 * grid_terms_ref computes them) are one vector; the first smallest lane is the component's
 * level in the key. */

VL_TGT static int VL_SFX(grid_terms)(const grid_tab *g, const float *u, const float *imp, float db, float (*A)[16]) {
    const VF lv = vf_load(g->lvl), vdb = vf_splat(db);
    const uint32_t valid = (1u << g->nl) - 1;
    const VM vmask = vm_of_bits(valid);
    bool nan = false;
    int key = 0;
    for (int k = 0; k < g->w; k++) {
        const VF d = vf_splat(u[k]) - vdb * lv;
        const VF t = vf_sel(vmask, vf_splat(imp ? imp[k] : 1.f) * d * d, vf_splat(INFINITY));
        vf_store(A[k], t);
        if ((vm_bits(vf_ord(t, t)) & valid) != valid) nan = true;
        const uint32_t eq = vm_bits(vf_eq(t, vf_splat(vf_hmin(t)))) & valid;
        key |= (eq ? __builtin_ctz(eq) : 0) << g->kbits * k;
    }
    return nan ? -1 : key;
}

/* nearest_point's scan of a neighbour list pts[0..n-1], VL_W points at a time: each point's error
 * is A[0][l0] + A[1][l1] + ... in point_error's order (the levels from g->pk through a table
 * lookup per component, nl <= 8), and the first point with the smallest error below INF wins
 * (NaN and INF never do), as in the scalar loop; best if none does. */
VL_TGT static int VL_SFX(list_scan)(const grid_tab *g, const float (*A)[16], const uint16_t *pts, int n, int best) {
    float be = INFINITY;
    for (int j0 = 0; j0 < n; j0 += VL_W) {
        const int m = n - j0 < VL_W ? n - j0 : VL_W;
        uint16_t buf[VL_W] = { 0 };
        memcpy(buf, pts + j0, (size_t)m * sizeof(uint16_t));
        const uint32_t valid = m == 32 ? ~0u : (1u << m) - 1;
        const VI pk = vi_gather((const int32_t *)g->pk, vi_load_u16(buf));
        VF e = vf_lut8(A[0], pk & vi_splat(15));
        for (int k = 1; k < g->w; k++) e = e + vf_lut8(A[k], (pk >> (4 * k)) & vi_splat(15));
        e = vf_sel(vm_and(vf_lt(e, vf_splat(INFINITY)), vm_of_bits(valid)), e, vf_splat(INFINITY));
        const float mn = vf_hmin(e);
        if (mn < be) {
            be = mn;
            best = pts[j0 + __builtin_ctz(vm_bits(vf_eq(e, vf_splat(mn))) & valid)];
        }
    }
    return best;
}
