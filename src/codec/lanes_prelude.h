/* lanes_prelude.h - the vector types and the three element helpers that the width-generic kernel
 * headers of kq_common.c (kq_common_lanes.h) and legacy.c (legacy_lanes.h) share: VF (P_W float
 * lanes) and VI (P_W int32 lanes) as GCC vector types, splatf, splati and vabs. The including
 * header defines P_W (8 or 16), P_TGT (the function's target attribute), P_SFX(name) (the
 * per-width name) and the names VF and VI (per width, e.g. P_SFX(vf)) first. No include guard on purpose: one inclusion per width. The IQ kernels
 * use the larger abstraction of vec_lanes.h (masks, permutes, gathers). */
typedef float VF __attribute__((vector_size(P_W * 4)));
typedef int32_t VI __attribute__((vector_size(P_W * 4)));

static inline P_TGT VF P_SFX(splatf)(float s) {
    VF v;
    for (int k = 0; k < P_W; k++) v[k] = s;
    return v;
}
static inline P_TGT VI P_SFX(splati)(int32_t s) {
    VI v;
    for (int k = 0; k < P_W; k++) v[k] = s;
    return v;
}
static inline P_TGT VF P_SFX(vabs)(VF a) { return (VF)((VI)a & P_SFX(splati)(0x7fffffff)); }
