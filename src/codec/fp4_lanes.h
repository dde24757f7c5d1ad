/* fp4_lanes.h - the vector kernel of fp4.c, written once over the lane count (vec_lanes.h
 * names): fp4.c includes it once per instruction set. No include guard on purpose. */

/* codes[0..n) = ggml's best_index_mxfp4(x[j], d): the first i (in table order) with the least
 * |kv[i]*d - x[j]|, each error rounded as ggml computes it (a multiply, then a subtract). Index 8
 * (-0) never wins: its error equals index 0's. n: a multiple of VL_W. */
VL_FN void VL_SFX(fp4_codes)(const float *x, int n, float d, int32_t *codes) {
    float c[16];
    for (int i = 0; i < 16; i++) c[i] = fp4_kv[i] * d;
    for (int j = 0; j < n; j += VL_W) {
        const VF xv = vf_load(x + j);
        VF best = vf_abs(vf_splat(c[0]) - xv);
        VI idx = vi_splat(0);
        for (int i = 1; i < 16; i++) {
            if (i == 8) continue;
            const VF e = vf_abs(vf_splat(c[i]) - xv);
            const VM m = vf_lt(e, best);
            best = vf_sel(m, e, best);
            idx = vi_sel(m, vi_splat(i), idx);
        }
        vi_store(codes + j, idx);
    }
}

/* max |x[j]| over n values (a multiple of VL_W; finite input: order does not matter) */
VL_FN float VL_SFX(fp4_amax)(const float *x, int n) {
    VF m = vf_splat(0.0f);
    for (int j = 0; j < n; j += VL_W) m = vf_max(m, vf_abs(vf_load(x + j)));
    return vf_hmax(m);
}

/* MXFP4 reference encoder over nb blocks. */
VL_TGT static void VL_SFX(mxfp4_row)(const float *x, block_mxfp4 *y, int64_t nb) {
    int32_t codes[QK_MXFP4];
    for (int64_t i = 0; i < nb; i++, x += QK_MXFP4) {
        const uint8_t e = mxfp4_exponent(VL_SFX(fp4_amax)(x, QK_MXFP4));
        y[i].e = e;
        VL_SFX(fp4_codes)(x, QK_MXFP4, e8m0_half(e), codes);
        for (int j = 0; j < QK_MXFP4 / 2; j++) y[i].qs[j] = (uint8_t)(codes[j] | codes[j + QK_MXFP4 / 2] << 4);
    }
}

/* NVFP4 reference encoder over nb blocks. */
VL_TGT static void VL_SFX(nvfp4_row)(const float *x, block_nvfp4 *y, int64_t nb) {
    int32_t codes[QK_NVFP4_SUB];
    for (int64_t i = 0; i < nb; i++) {
        for (int s = 0; s < QK_NVFP4 / QK_NVFP4_SUB; s++, x += QK_NVFP4_SUB) {
            const uint8_t ue = fp32_to_ue4m3(VL_SFX(fp4_amax)(x, QK_NVFP4_SUB) / 6.0f);
            y[i].d[s] = ue;
            VL_SFX(fp4_codes)(x, QK_NVFP4_SUB, ue4m3_to_fp32(ue), codes);
            for (int j = 0; j < QK_NVFP4_SUB / 2; j++)
                y[i].qs[s * (QK_NVFP4_SUB / 2) + j] = (uint8_t)(codes[j] | codes[j + QK_NVFP4_SUB / 2] << 4);
        }
    }
}
