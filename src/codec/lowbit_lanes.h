/* lowbit_lanes.h - the vector kernels of lowbit.c, written once over the lane count (vec_lanes.h
 * names): lowbit.c includes it once per instruction set. No include guard on purpose. */

/* max |x[j]|, n a multiple of VL_W (finite input: the order does not matter) */
VL_FN float VL_SFX(lb_amax)(const float *x, int n) {
    VF m = vf_splat(0.0f);
    for (int j = 0; j < n; j += VL_W) m = vf_max(m, vf_abs(vf_load(x + j)));
    return vf_hmax(m);
}

/* The code min(3, max(0, round_away(v) + 1)) of v = x * id (finite, |v| < 2^23): ggml's
 * lroundf / (int)roundf, half away from zero, exactly (truncate, then step by the exact
 * remainder). */
VL_FN VI VL_SFX(lb_code)(VF v) {
    VI t = __builtin_convertvector(v, VI);
    const VF r = v - vf_of_i(t);
    t = t - (VI)(r >= vf_splat(0.5f)) + (VI)(r <= vf_splat(-0.5f)) + vi_splat(1);
    return vi_min(vi_max(t, vi_splat(0)), vi_splat(3));
}

/* codes c[0..n) of x[0..n) (n a multiple of VL_W) */
VL_FN void VL_SFX(lb_codes)(const float *x, int n, float id, uint8_t *c) {
    const VF vid = vf_splat(id);
    for (int j = 0; j < n; j += VL_W) {
        vi_store_u8(c + j, VL_SFX(lb_code)(vf_load(x + j) * vid));
    }
}

/* TQ1_0 bytes out[m] (m < count, a multiple of VL_W) of the 5 trits of x[m + k stride]:
 * ceil(base-3 value q * 256 / 243) = (q * 256 + 242) * 69043 >> 24 (exact for every q <= 242,
 * in unsigned 32-bit lanes). */
typedef uint32_t VL_SFX(lb_vu) __attribute__((vector_size(VL_W * 4)));
VL_FN void VL_SFX(tq1_bytes)(const float *x, int stride, int count, VF vid, uint8_t *out) {
    for (int m = 0; m < count; m += VL_W) {
        VI q = vi_splat(0);
        for (int k = 0; k < 5; k++) q = q * vi_splat(3) + VL_SFX(lb_code)(vf_load(x + m + k * stride) * vid);
        const VL_SFX(lb_vu) u = ((VL_SFX(lb_vu))q * 256u + 242u) * 69043u >> 24;
        vi_store_u8(out + m, (VI)u);
    }
}

/* TQ rows: ggml's trits where 1/max|x| is finite; the scalar reference for other blocks. */
VL_TGT static void VL_SFX(tq1_0_row)(const float *x, block_tq1_0 *y, int64_t nb) {
    uint8_t t[16];
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        const float d = VL_SFX(lb_amax)(x, QK_K), id = d ? 1.0f / d : 0.0f;
        if (!(id < INFINITY)) { tq1_0_row_ref(x, &y[i], 1); continue; }
        const VF vid = vf_splat(id);
        y[i].d = IQF_FP32_TO_FP16(d);
        VL_SFX(tq1_bytes)(x, 32, 32, vid, y[i].qs);
        VL_SFX(tq1_bytes)(x + 160, 16, 16, vid, y[i].qs + 32);
        VL_SFX(lb_codes)(x + 240, 16, id, t);
        for (int m = 0; m < 4; m++) y[i].qh[m] = tq1_byte(t + m, 4, 4);
    }
}

VL_TGT static void VL_SFX(tq2_0_row)(const float *x, block_tq2_0 *y, int64_t nb) {
    for (int64_t i = 0; i < nb; i++, x += QK_K) {
        const float d = VL_SFX(lb_amax)(x, QK_K), id = d ? 1.0f / d : 0.0f;
        if (!(id < INFINITY)) { tq2_0_row_ref(x, &y[i], 1); continue; }
        const VF vid = vf_splat(id);
        y[i].d = IQF_FP32_TO_FP16(d);
        for (int j = 0; j < QK_K / 4; j += 32)
            for (int m = 0; m < 32; m += VL_W) {
                const float *xx = x + 4 * j + m;
                const VI b = VL_SFX(lb_code)(vf_load(xx) * vid) | VL_SFX(lb_code)(vf_load(xx + 32) * vid) << 2 |
                             VL_SFX(lb_code)(vf_load(xx + 64) * vid) << 4 | VL_SFX(lb_code)(vf_load(xx + 96) * vid) << 6;
                vi_store_u8(y[i].qs + j + m, b);
            }
    }
}

/* Q2_0: codes of 4 consecutive values in one byte: as a little-endian uint32 u of 4 code bytes,
 * u | u >> 6 | u >> 12 | u >> 18 has them at bits 0, 2, 4, 6 of its low byte. */
VL_TGT static void VL_SFX(q2_0_row)(const float *x, block_q2_0 *y, int64_t nb) {
    uint8_t c[QK2_0];
    for (int64_t i = 0; i < nb; i++, x += QK2_0) {
        const float d = VL_SFX(lb_amax)(x, QK2_0), id = d > 0.0f ? 1.0f / d : 0.0f;
        if (!(id < INFINITY)) { q2_0_row_ref(x, &y[i], 1); continue; }
        VL_SFX(lb_codes)(x, QK2_0, id, c);
        y[i].d = IQF_FP32_TO_FP16(d);
        for (int b = 0; b < QK2_0 / 4; b += VL_W) {
            VI u;
            memcpy(&u, c + 4 * b, sizeof u);
            u = (u | u >> 6 | u >> 12 | u >> 18) & vi_splat(0xFF);
            vi_store_u8(y[i].qs + b, u);
        }
    }
}

/* Q1_0: VL_W sign bits per compare (x >= 0, so -0 too); the sums as the scalar fast path. */
VL_TGT static void VL_SFX(q1_0_row)(const float *x, block_q1_0 *y, int64_t nb) {
    int64_t i = 0;
    for (; i < nb; i += Q1_G) {
        const int G = nb - i < Q1_G ? (int)(nb - i) : Q1_G;
        const float *xb = x + i * QK1_0;
        float s[Q1_G] = { 0 };
        if (G == Q1_G) q1_0_sums(xb, s);
        else
            for (int g = 0; g < G; g++)
                for (int j = 0; j < QK1_0; j++) s[g] += fabsf(xb[g * QK1_0 + j]);
        for (int g = 0; g < G; g++) {
            y[i + g].d = IQF_FP32_TO_FP16(s[g] / QK1_0);
            for (int j = 0; j < QK1_0; j += VL_W) {
                const uint32_t bits = vm_bits(vf_ge(vf_load(xb + g * QK1_0 + j), vf_splat(0.0f)));
                memcpy(y[i + g].qs + j / 8, &bits, VL_W / 8);
            }
        }
    }
}
