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
