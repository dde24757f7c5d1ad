/* vec_lanes_plain.h - vec_lanes.h's plain width: VL_W 4, or VL_W 8 under VL_PLAIN. Every
 * operation in GCC/clang vector extensions and lane-wise C, no instruction-set header, with the
 * x86 instructions' semantics bit for bit (min/max operand order, blendv's sign-bit select,
 * packus saturation, and at 8 lanes AVX2's reduction and shuffle orders, so a kernel written
 * for AVX2 gives its AVX2 bytes here). The compiler lowers it to the target's vector unit: NEON
 * on arm64 (IQF_SIMD_NEON: one or two q registers per VF), SSE on x86-64. Included by
 * vec_lanes.h only, inside its width chain; no include guard on purpose. */

VL_FN VF vf_load(const float *p) {
    VF v;
    memcpy(&v, p, sizeof v);
    return v;
}
VL_FN void vf_store(float *p, VF v) { memcpy(p, &v, sizeof v); }
VL_FN VI vi_load(const int32_t *p) {
    VI v;
    memcpy(&v, p, sizeof v);
    return v;
}
VL_FN void vi_store(int32_t *p, VI v) { memcpy(p, &v, sizeof v); }
VL_FN VI vi_load_u16(const uint16_t *p) {
    VI v;
    for (int k = 0; k < VL_W; k++) v[k] = p[k];
    return v;
}
/* m ? t : f per lane, m's sign bit deciding (blendv) */
VL_FN VF vf_sel(VM m, VF t, VF f) { return vf_bsel(m >> 31, t, f); }
VL_FN VI vi_sel(VM m, VI t, VI f) {
    const VI s = m >> 31;
    return (s & t) | (~s & f);
}
/* x86 min/max: a < b ? a : b, a > b ? a : b (the second operand on NaN and on equal zeros) */
VL_FN VF vf_min(VF a, VF b) { return vf_bsel(a < b, a, b); }
VL_FN VF vf_max(VF a, VF b) { return vf_bsel(a > b, a, b); }
VL_FN VI vi_min(VI a, VI b) { return vi_sel(a < b, a, b); }
VL_FN VI vi_max(VI a, VI b) { return vi_sel(a > b, a, b); }
VL_FN VF vf_sqrt(VF a) {
    for (int k = 0; k < VL_W; k++) a[k] = sqrtf(a[k]);
    return a;
}
/* the AVX2 order (128-bit halves, then lanes 0,1 with 2,3, then lane 0 with lane 1); at 4 lanes
 * its last two steps */
#define VL_PLAIN_HRED(name, op)                                                                   \
    VL_FN float name(VF a) {                                                                      \
        float m[4];                                                                               \
        for (int k = 0; k < 4; k++) m[k] = VL_W == 8 ? (a[k] op a[(k + 4) % VL_W] ? a[k] : a[(k + 4) % VL_W]) : a[k]; \
        m[0] = m[0] op m[2] ? m[0] : m[2];                                                        \
        m[1] = m[1] op m[3] ? m[1] : m[3];                                                        \
        return m[0] op m[1] ? m[0] : m[1];                                                        \
    }
VL_PLAIN_HRED(vf_hmax, >)
VL_PLAIN_HRED(vf_hmin, <)
#undef VL_PLAIN_HRED
/* ordered comparisons: false on NaN (the _OQ predicates) */
VL_FN VM vf_lt(VF a, VF b) { return a < b; }
VL_FN VM vf_le(VF a, VF b) { return a <= b; }
VL_FN VM vf_gt(VF a, VF b) { return a > b; }
VL_FN VM vf_ge(VF a, VF b) { return a >= b; }
VL_FN VM vf_eq(VF a, VF b) { return a == b; }
VL_FN VM vf_ord(VF a, VF b) { return (a == a) & (b == b); }
VL_FN VM vm_not(VM m) { return ~m; }
VL_FN uint32_t vm_bits(VM m) {
    uint32_t b = 0;
    for (int k = 0; k < VL_W; k++) b |= (uint32_t)(m[k] < 0) << k;
    return b;
}
VL_FN VI vi_gather(const int32_t *base, VI idx) {
    VI v;
    for (int k = 0; k < VL_W; k++) v[k] = base[idx[k]];
    return v;
}
/* lane k = t[idx_k], idx 0..7 (the low 3 bits, as permutevar8x32) */
VL_FN VF vf_lut8(const float *t, VI idx) {
    VF v;
    for (int k = 0; k < VL_W; k++) v[k] = t[idx[k] & 7];
    return v;
}
/* lane k = v[VL_W/4 * p + k/4] */
VL_FN VF vf_rep4(const float *v, int p) {
    VF r;
    for (int k = 0; k < VL_W; k++) r[k] = v[VL_W / 4 * p + k / 4];
    return r;
}
/* lane k = v[VL_W/8 * p + k/8] (8 lanes) */
VL_FN VF vf_rep8(const float *v, int p) { return vf_splat(v[p]); }
/* lane k = t[idx_k], idx 0..VL_W-1 */
VL_FN VF vf_perm(VF t, VI idx) {
    VF v;
    for (int k = 0; k < VL_W; k++) v[k] = t[idx[k] & (VL_W - 1)];
    return v;
}
/* lanes of the low half = a[idx_k], of the high half = b[idx_k] */
VL_FN VF vf_perm_halves(VF a, VF b, VI idx) {
    VF v;
    for (int k = 0; k < VL_W; k++) v[k] = k < VL_W / 2 ? a[idx[k] & (VL_W - 1)] : b[idx[k] & (VL_W - 1)];
    return v;
}
/* every lane = the minimum of its group of 4 lanes, AVX2's order: with lanes (2,3,0,1) of the
 * group, then with lanes (1,0,3,2) */
VL_FN VF vf_min_halves(VF a) {
    VF s;
    for (int k = 0; k < VL_W; k++) s[k] = a[k ^ 2];
    const VF m = vf_min(a, s);
    for (int k = 0; k < VL_W; k++) s[k] = m[k ^ 1];
    return vf_min(m, s);
}
VL_FN VI vi_load_i8(const int8_t *p) {
    VI v;
    for (int k = 0; k < VL_W; k++) v[k] = p[k];
    return v;
}
VL_FN VI vi_count(VI acc, VM m) { return acc - m; }
VL_FN VI vi_uncount(VI acc, VM m) { return acc + m; }
/* lane k = p[k & 3] */
VL_FN VF vf_bcast4(const float *p) {
    VF v;
    for (int k = 0; k < VL_W; k++) v[k] = p[k & 3];
    return v;
}
/* 1/a correctly rounded: the x86 levels' estimate plus a Newton step differs from it (and AVX2's
 * from AVX-512's); the kernels use it for bounds that are checked exactly afterwards */
VL_FN VF vf_rcp_nr(VF a) { return vf_splat(1.0f) / a; }
VL_FN VI vi_load_u16_pair(const uint16_t *a, const uint16_t *b) {
    VI v;
    for (int k = 0; k < VL_W / 2; k++) v[k] = a[k], v[k + VL_W / 2] = b[k];
    return v;
}
/* packus_epi32 then packus_epi16 (the lanes are 0..255 in use) */
VL_FN void vi_store_u8(uint8_t *p, VI v) {
    for (int k = 0; k < VL_W; k++) {
        const int32_t u = v[k] < 0 ? 0 : v[k] > 65535 ? 65535 : v[k];
        const int32_t s = u > 32767 ? u - 65536 : u;
        p[k] = (uint8_t)(s < 0 ? 0 : s > 255 ? 255 : s);
    }
}
VL_FN void vi_store_lo8(uint8_t *p, VI v) {
    for (int k = 0; k < VL_W; k++) p[k] = (uint8_t)(v[k] & 0xFF);
}
/* out[c] lane k = in[k] lane c */
VL_FN void vf_transpose(const VF *in, VF *out) {
    for (int c = 0; c < VL_W; c++)
        for (int k = 0; k < VL_W; k++) out[c][k] = in[k][c];
}
/* lane k = the minimum (maximum) of the lanes of v[k], k < VL_W. At 8 lanes the AVX2 section's
 * tree order (x86 min/max operand order: the sign of a zero depends on it): 128-bit halves
 * (permute2f128 0x20/0x31), then shuffle_ps 0x44/0xEE, then 0x88/0xDD, then the lanes reordered
 * (0,4,1,5,2,6,3,7); at 4 lanes vf_hmin/vf_hmax of each vector. */
#if VL_W == 8
#define VL_PLAIN_EACH(name, op)                                                                   \
    VL_FN VF name(const VF *v) {                                                                  \
        float a[4][8], b[2][8], c[8];                                                             \
        VF r;                                                                                     \
        for (int k = 0; k < 4; k++)                                                               \
            for (int j = 0; j < 8; j++) {                                                         \
                const float x = v[2 * k + (j >> 2)][j & 3], y = v[2 * k + (j >> 2)][4 + (j & 3)]; \
                a[k][j] = x op y ? x : y;                                                         \
            }                                                                                     \
        for (int k = 0; k < 2; k++)                                                               \
            for (int h = 0; h < 2; h++)                                                           \
                for (int j = 0; j < 4; j++) {                                                     \
                    const float *src = a[2 * k + (j >> 1)] + 4 * h;                               \
                    const float x = src[j & 1], y = src[2 + (j & 1)];                             \
                    b[k][4 * h + j] = x op y ? x : y;                                             \
                }                                                                                 \
        for (int h = 0; h < 2; h++)                                                               \
            for (int j = 0; j < 4; j++) {                                                         \
                const float *src = b[j >> 1] + 4 * h;                                             \
                const float x = src[2 * (j & 1)], y = src[2 * (j & 1) + 1];                       \
                c[4 * h + j] = x op y ? x : y;                                                    \
            }                                                                                     \
        for (int k = 0; k < 8; k++) r[k] = c[(k >> 1) + 4 * (k & 1)];                             \
        return r;                                                                                 \
    }
VL_PLAIN_EACH(vf_hmin_each, <)
VL_PLAIN_EACH(vf_hmax_each, >)
#undef VL_PLAIN_EACH
#else
VL_FN VF vf_hmin_each(const VF *v) {
    VF r;
    for (int k = 0; k < VL_W; k++) r[k] = vf_hmin(v[k]);
    return r;
}
VL_FN VF vf_hmax_each(const VF *v) {
    VF r;
    for (int k = 0; k < VL_W; k++) r[k] = vf_hmax(v[k]);
    return r;
}
#endif
/* fp16 bits, round to nearest even (F16C's result for finite values) */
VL_FN void vf_store_f16(uint16_t *h, VF v) {
    for (int k = 0; k < VL_W; k++) h[k] = iqf_fp32_to_fp16(v[k]);
}
VL_FN uint16_t vl_f16(float f) { return iqf_fp32_to_fp16(f); }
/* added for best_scale */
VL_FN VM vm_of_vi(VI m) { return m; }
VL_FN VF vf_round(VF v) { /* |v| < 2^22 */
    const VF mg = vf_splat(12582912.f);
    return (v + mg) - mg;
}
VL_FN VI vi_round(VF v) { return vf_nearest(v); } /* |v| < 2^22 */
VL_FN VS vs_mulhrs(VS a, VS b) {
    VS r; /* (a b + 2^14) >> 15, the sum shifted non-negative first */
    for (int i = 0; i < 2 * VL_W; i++)
        r[i] = (int16_t)((int32_t)((uint32_t)((int32_t)a[i] * b[i] + 0x4000 + 0x40000000) >> 15) - 0x8000);
    return r;
}
VL_FN VI vs_madd(VS a, VS b) {
    VI r;
    for (int i = 0; i < VL_W; i++) r[i] = (int32_t)a[2 * i] * b[2 * i] + (int32_t)a[2 * i + 1] * b[2 * i + 1];
    return r;
}
VL_FN VS vs_min(VS a, VS b) {
    const VS m = a > b;
    return (m & b) | (~m & a);
}
VL_FN VS vs_max(VS a, VS b) {
    const VS m = a < b;
    return (m & b) | (~m & a);
}
VL_FN void vf_transpose16(const float *const *rows, float *t) {
    for (int b = 0; b < 16; b++)
        for (int j = 0; j < 32; j++) t[j * 16 + b] = rows[b][j];
}
