/* legacy_lanes.h - the *_ref encoders of legacy.c, written once over the lane count on
 * vec_lanes.h: legacy.c includes vec_lanes.h and then this file once per instruction set, with
 * VL_W, VL_TGT (naming f16c: vf_store_f16, vl_f16) and VL_SFX defined. VL_W lanes over one
 * 32-value block (LEG_NV vectors). Blocks whose outcome depends on signed zeros or a non-finite
 * inverse scale take the scalar path. F16C converts the block scales (round to nearest even,
 * bitwise as iqf_fp32_to_fp16 for finite values). No include guard on purpose. */

#define LEG_NV (QK / VL_W)

VL_FN void VL_SFX(load)(const float *x, VF *v) {
    for (int k = 0; k < LEG_NV; k++) v[k] = vf_load(x + k * VL_W);
}

/* Nibble packing qs[j] = l[j] | l[j+16] << 4 (low nibbles); 5-bit types: qh bit j = bit 4 of l[j]. */
VL_FN void VL_SFX(pack)(const VI *l, leg_blk b) {
    const VI m4 = vi_splat(15);
    for (int k = 0; k < LEG_NV / 2; k++) vi_store_lo8(b.qs + k * VL_W, (l[k] & m4) | ((l[k + LEG_NV / 2] & m4) << 4));
    if (!b.qh) return;
    uint32_t qh = 0;
    /* bit 4 of each lane moved to the sign bit */
    for (int k = 0; k < LEG_NV; k++) qh |= vm_bits(vi_neg(l[k] << 27)) << (k * VL_W);
    memcpy(b.qh, &qh, 4);
}

/* The registry validates a row right before encoding it, so the row is streamed from memory by
 * that check; fetching the NEXT row (rows are contiguous in iqf_quantize) while this one is encoded
 * overlaps that stream with the arithmetic. Prefetches never fault, also past the last row. */
/* Address arithmetic in integers: past the last row it is only ever prefetched, never read. */
#define LEG_NEXT_ROW(x, nb) ((const char *)((uintptr_t)(x) + (uintptr_t)(nb) * (QK * sizeof(float))))
#define LEG_PREFETCH(x, nb)                                                                      \
    do {                                                                                          \
        const char *pf_ = LEG_NEXT_ROW(x, nb);                                                    \
        __builtin_prefetch(pf_, 0, 3);                                                            \
        __builtin_prefetch(pf_ + 64, 0, 3);                                                       \
    } while (0)

/* Signed max-abs value (first occurrence), as the q4_0/q5_0 reference loops find it. */
VL_FN float VL_SFX(signed_amax)(const float *x, const VF *v) {
    VF a[LEG_NV];
    VF m = a[0] = vf_abs(v[0]);
    for (int k = 1; k < LEG_NV; k++) m = vf_max(m, a[k] = vf_abs(v[k]));
    const float amax = vf_hmax(m);
    if (amax == 0) return 0.0f;
    const VF va = vf_splat(amax);
    for (int k = 0; k < LEG_NV; k++) {
        const uint32_t bits = vm_bits(vf_eq(a[k], va));
        if (bits) return x[k * VL_W + __builtin_ctz(bits)];
    }
    return 0.0f; /* not reached */
}

/* q4_0 and q5_0 (sym_ref's arithmetic), one block at a time. */
VL_FN void VL_SFX(sym)(int kind, const float *x, void *vy, int64_t nb) {
    const int nmax = leg_fmts[kind].nmax;
    const VI top = vi_splat(leg_fmts[kind].top);
    for (int64_t i = 0; i < nb; i++, x += QK) {
        VF v[LEG_NV];
        LEG_PREFETCH(x, nb);
        VL_SFX(load)(x, v);
        const float max = VL_SFX(signed_amax)(x, v);
        const float d = max / -nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        if (isinf(id)) { ref_block(kind, x, b.p); continue; }
        *b.d = vl_f16(d);
        VI l[LEG_NV];
        for (int k = 0; k < LEG_NV; k++) l[k] = vi_min(vi_trunc(v[k] * vf_splat(id) + vf_splat(nmax + 0.5f)), top);
        VL_SFX(pack)(l, b);
    }
}

/* Per-block min and max of VL_W blocks, lane b = block b (vf_hmin_each/vf_hmax_each's trees:
 * signed zeros may come out in either order, so blocks with a zero min or max take the scalar
 * path). */
VL_FN void VL_SFX(minmaxB)(const float *x, VF *vmin, VF *vmax) {
    VF n[VL_W], m[VL_W];
#pragma GCC unroll 16
    for (int b = 0; b < VL_W; b++) {
        VF v[LEG_NV];
        VL_SFX(load)(x + b * QK, v);
        VF vn = v[0], vm = v[0];
#pragma GCC unroll 4
        for (int k = 1; k < LEG_NV; k++) {
            vn = vf_min(vn, v[k]);
            vm = vf_max(vm, v[k]);
        }
        n[b] = vn;
        m[b] = vm;
    }
    *vmin = vf_hmin_each(n);
    *vmax = vf_hmax_each(m);
}

/* One block of q4_1/q5_1 at its minimum and inverse scale. */
VL_FN void VL_SFX(asym_codes)(const float *x, float min, float id, VI top, leg_blk b) {
    VI l[LEG_NV];
    for (int k = 0; k < LEG_NV; k++)
        l[k] = vi_min(vi_trunc((vf_load(x + k * VL_W) - vf_splat(min)) * vf_splat(id) + vf_splat(0.5f)), top);
    VL_SFX(pack)(l, b);
}

/* q4_1 and q5_1 (asym_ref's arithmetic). VL_W blocks at a time: their min/max vectors are folded
 * by minmaxB into one vector (lane = block), so the scales of VL_W blocks cost one division each
 * instead of VL_W latency-bound horizontal reductions. d = (max - min)/nmax and 1/d are IEEE
 * divisions, correctly rounded as in the scalar code; blocks with a zero min/max (signed-zero
 * order) or an infinite 1/d go scalar. The last nb % VL_W blocks go one at a time. */
VL_FN void VL_SFX(asym)(int kind, const float *x, void *vy, int64_t nb) {
    const VF steps = vf_splat((float)leg_fmts[kind].nmax), zero = vf_splat(0.0f);
    const VI top = vi_splat(leg_fmts[kind].top);
    int64_t i = 0;
    for (; i + VL_W <= nb; i += VL_W, x += VL_W * QK) {
        const uintptr_t pf = (uintptr_t)LEG_NEXT_ROW(x, nb);
        VF vmin, vmax;
        VL_SFX(minmaxB)(x, &vmin, &vmax);
        const VF vd = (vmax - vmin) / steps;
        const VF vid = vf_sel(vf_eq(vd, zero), zero, vf_splat(1.0f) / vd);
        const uint32_t spec = vm_bits(vm_or(vm_or(vf_eq(vmin, zero), vf_eq(vmax, zero)),
                                            vf_eq(vf_abs(vid), vf_splat(INFINITY))));
        float fmin[VL_W], fid[VL_W];
        iqf_half hd[VL_W], hm[VL_W];
        vf_store(fmin, vmin);
        vf_store(fid, vid);
        vf_store_f16(hd, vd);
        vf_store_f16(hm, vmin);
        for (int j = 0; j < VL_W; j++) {
            __builtin_prefetch((const void *)(pf + j * QK * 4), 0, 2);
            __builtin_prefetch((const void *)(pf + j * QK * 4 + 64), 0, 2);
            const leg_blk b = leg_block(kind, vy, i + j);
            if (spec >> j & 1) { ref_block(kind, x + j * QK, b.p); continue; }
            *b.d = hd[j];
            *b.m = hm[j];
            VL_SFX(asym_codes)(x + j * QK, fmin[j], fid[j], top, b);
        }
    }
    for (; i < nb; i++, x += QK) {
        VF v[LEG_NV];
        LEG_PREFETCH(x, nb);
        VL_SFX(load)(x, v);
        VF mn = v[0], mx = v[0];
        for (int k = 1; k < LEG_NV; k++) {
            mn = vf_min(mn, v[k]);
            mx = vf_max(mx, v[k]);
        }
        const float min = vf_hmin(mn), max = vf_hmax(mx);
        const float d = (max - min) / leg_fmts[kind].nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        if (min == 0 || max == 0 || isinf(id)) { ref_block(kind, x, b.p); continue; }
        *b.d = vl_f16(d);
        *b.m = vl_f16(min);
        VL_SFX(asym_codes)(x, min, id, top, b);
    }
}

static VL_TGT void VL_SFX(q4_0_ref)(const float *x, void *vy, int64_t nb) { VL_SFX(sym)(K_Q4_0, x, vy, nb); }
static VL_TGT void VL_SFX(q5_0_ref)(const float *x, void *vy, int64_t nb) { VL_SFX(sym)(K_Q5_0, x, vy, nb); }
static VL_TGT void VL_SFX(q4_1_ref)(const float *x, void *vy, int64_t nb) { VL_SFX(asym)(K_Q4_1, x, vy, nb); }
static VL_TGT void VL_SFX(q5_1_ref)(const float *x, void *vy, int64_t nb) { VL_SFX(asym)(K_Q5_1, x, vy, nb); }

static VL_TGT void VL_SFX(q8_0_ref)(const float *x, void *vy, int64_t nb) {
    block_q8_0 *y = vy;
    const VF half = vf_splat(0.5f), mhalf = vf_splat(-0.5f);
    for (int64_t i = 0; i < nb; i++, x += QK) {
        VF v[LEG_NV];
        LEG_PREFETCH(x, nb);
        VL_SFX(load)(x, v);
        VF a = vf_abs(v[0]);
        for (int k = 1; k < LEG_NV; k++) a = vf_max(a, vf_abs(v[k]));
        const float amax = vf_hmax(a);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        if (isinf(id)) { q8_0_ref(x, &y[i], 1); continue; }
        y[i].d = vl_f16(d);
        for (int k = 0; k < LEG_NV; k++) {
            /* roundf: truncate, then step away from zero when the remainder is >= 1/2. */
            const VF s = v[k] * vf_splat(id);
            const VI q = vi_trunc(s);
            const VF r = s - vf_of_i(q);
            vi_store_lo8((uint8_t *)y[i].qs + k * VL_W, vi_uncount(vi_count(q, vf_ge(r, half)), vf_le(r, mhalf)));
        }
    }
}

#undef LEG_NV
#undef LEG_PREFETCH
#undef LEG_NEXT_ROW
