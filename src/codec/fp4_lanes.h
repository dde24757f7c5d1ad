/* fp4_lanes.h - the vector kernel of fp4.c, written once over the lane count (vec_lanes.h
 * names): fp4.c includes it once per instruction set. No include guard on purpose. */

/* codes[0..n) = ggml's best_index_mxfp4(x[j], d) where d > 0 is a scale at which every level
 * k*d is exact and every |x| <= 16 d (fp4_fast_ok): then the two levels around |x| are at most a
 * factor 2 apart, so |x| minus either is exact (Sterbenz) and ggml's rounded comparison is the
 * exact one: the first index in table order with the least error is the level below |x| unless |x|
 * is strictly above the midpoint (midpoints m*d exact too), with the sign of x (no -0: index 0).
 * n: a multiple of VL_W. */
VL_FN void VL_SFX(fp4_codes)(const float *x, int n, float d, uint8_t *codes) {
    static const float mid[7] = { 0.5f, 1.5f, 2.5f, 3.5f, 5.0f, 7.0f, 10.0f };
    VF t[7];
    for (int m = 0; m < 7; m++) t[m] = vf_splat(mid[m] * d);
    for (int j = 0; j < n; j += VL_W) {
        const VF xv = vf_load(x + j), a = vf_abs(xv);
        VI k = vi_splat(0);
        for (int m = 0; m < 7; m++) k -= (VI)(a > t[m]); /* a compare is -1 where true */
        /* negative x with a non-zero level: index 8 + k */
        k += ((VI)xv < vi_splat(0)) & (k > vi_splat(0)) & vi_splat(8);
        vi_store_u8(codes + j, k);
    }
}

/* max |x[j]| over n values (a multiple of VL_W; finite input: order does not matter) */
VL_FN float VL_SFX(fp4_amax)(const float *x, int n) {
    VF m = vf_splat(0.0f);
    for (int j = 0; j < n; j += VL_W) m = vf_max(m, vf_abs(vf_load(x + j)));
    return vf_hmax(m);
}

/* MXFP4's encoder over nb blocks. */
VL_TGT static void VL_SFX(mxfp4_row)(const float *x, block_mxfp4 *y, int64_t nb) {
    uint8_t codes[QK_MXFP4];
    for (int64_t i = 0; i < nb; i++, x += QK_MXFP4) {
        const uint8_t e = mxfp4_exponent(VL_SFX(fp4_amax)(x, QK_MXFP4));
        y[i].e = e;
        VL_SFX(fp4_codes)(x, QK_MXFP4, e8m0_half(e), codes);
        fp4_pack(codes, QK_MXFP4 / 2, y[i].qs);
    }
}

/* NVFP4's encoder over nb blocks; a sub-block whose scale is 0 or below max|x| / 16 (UE4M3's clamp
 * at 448) takes ggml's search (fp4_fast_ok). */
VL_TGT static void VL_SFX(nvfp4_row)(const float *x, block_nvfp4 *y, int64_t nb) {
    uint8_t codes[QK_NVFP4_SUB];
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++, x += QK_NVFP4_SUB) {
            const float amax = VL_SFX(fp4_amax)(x, QK_NVFP4_SUB);
            const uint8_t ue = fp32_to_ue4m3(amax / 6.0f);
            y[i].d[s] = ue;
            const float d = ue4m3_to_fp32(ue);
            if (fp4_fast_ok(amax, d)) VL_SFX(fp4_codes)(x, QK_NVFP4_SUB, d, codes);
            else for (int j = 0; j < QK_NVFP4_SUB; j++) codes[j] = (uint8_t)best_index(x[j], d);
            fp4_pack(codes, QK_NVFP4_SUB / 2, y[i].qs + s * (QK_NVFP4_SUB / 2));
        }
    }
}
