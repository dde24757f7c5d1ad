/* vec_lanes.h - a small vector abstraction over the lane count, for kernels written once and
 * compiled per instruction set (AVX2: 8 float lanes, AVX-512: 16; and the plain width, 4 lanes of
 * GCC/Clang vector extensions with no instruction-set intrinsics, which any target compiles).
 *
 * The including file defines, before each inclusion:
 *   VL_W          lanes: 8 or 16 (x86 only), or 4 (plain: any target, no x86 header)
 *   VL_TGT        the function attribute, e.g. __attribute__((target("avx2,fma"))) (fma: vf_rcp_nr);
 *                 empty for the plain width
 *   VL_SFX(name)  the per-instruction-set name, e.g. name##_avx2
 * and includes this header, then its kernel header (which uses only the names below), then
 * #undefs the three macros. No include guard on purpose: each inclusion defines the helpers of
 * one width (their real names carry VL_SFX's suffix); the short names below are macros that
 * resolve to the current width wherever they are used.
 *
 * VL_PLAIN (optional, with VL_W 8): the plain width at 8 lanes (vec_lanes_plain.h).
 *
 * Types: VF (VL_W floats), VI (VL_W int32), VM (a lane mask: a VI of 0/-1 under AVX2 and at the
 * plain width, a __mmask16 under AVX-512). Arithmetic on VF/VI is GCC/clang vector-extension
 * operators (+ - * / & | ^ << >>), which compile to the same single IEEE instructions as the
 * intrinsics (the tree builds with -ffp-contract=off: no FMA is formed). The helpers are the
 * operations whose x86 semantics must be kept bit for bit (min/max operand order, ggml's
 * nearest_int, masks). The plain width has only the operations its kernels use so far
 * (best_scale's), each with the x86 semantics written in plain C. */
#if !defined(VL_W) || !defined(VL_TGT) || !defined(VL_SFX)
#error "vec_lanes.h: define VL_W, VL_TGT and VL_SFX first"
#endif
#if VL_W != 4 && VL_W != 8 && VL_W != 16
#error "vec_lanes.h: VL_W must be 4, 8 or 16"
#endif
/* the plain width: VL_W 4, or VL_W 8 with VL_PLAIN defined (the AVX2 lane layout in vector
 * extensions: the kernels written for 8 lanes run unchanged; the NEON level, IQF_SIMD_NEON) */
#undef VL_IS_PLAIN
#if VL_W == 4 || defined(VL_PLAIN)
#define VL_IS_PLAIN 1
#if defined(__GNUC__) || defined(__clang__)
/* 32-byte vectors on a target whose ABI passes them differently with AVX (x86-64 without it):
 * every plain-width function is static, so no vector crosses a translation unit */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
#if VL_W == 16
#error "vec_lanes.h: the plain width is VL_W 4 or 8"
#endif
#else
#define VL_IS_PLAIN 0
#include <immintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#ifndef VEC_LANES_NAMES
#define VEC_LANES_NAMES
#define VF VL_SFX(vl_vf)
#define VI VL_SFX(vl_vi)
#define VM VL_SFX(vl_vm)
#define VL_FN static inline __attribute__((always_inline)) VL_TGT
#define vf_splat VL_SFX(vl_fsplat)
#define vi_splat VL_SFX(vl_isplat)
#define vf_load VL_SFX(vl_fload)
#define vf_store VL_SFX(vl_fstore)
#define vi_load VL_SFX(vl_iload)
#define vi_store VL_SFX(vl_istore)
#define vi_load_u16 VL_SFX(vl_iload_u16)
#define vi_iota VL_SFX(vl_iota)
#define vf_of_i VL_SFX(vl_f_of_i)
#define vf_min VL_SFX(vl_fmin)
#define vf_max VL_SFX(vl_fmax)
#define vi_min VL_SFX(vl_imin)
#define vi_max VL_SFX(vl_imax)
#define vf_sqrt VL_SFX(vl_fsqrt)
#define vf_hmax VL_SFX(vl_fhmax)
#define vf_hmin VL_SFX(vl_fhmin)
#define vf_nearest VL_SFX(vl_fnearest)
#define vf_lt VL_SFX(vl_flt)
#define vf_le VL_SFX(vl_fle)
#define vf_gt VL_SFX(vl_fgt)
#define vf_ge VL_SFX(vl_fge)
#define vf_eq VL_SFX(vl_feq)
#define vf_ord VL_SFX(vl_ford)
#define vi_eq VL_SFX(vl_ieq)
#define vi_gt VL_SFX(vl_igt)
#define vi_gtu VL_SFX(vl_igtu)
#define vi_neg VL_SFX(vl_ineg)
#define vm_and VL_SFX(vl_mand)
#define vm_or VL_SFX(vl_mor)
#define vm_bits VL_SFX(vl_mbits)
#define vm_of_bits VL_SFX(vl_m_of_bits)
#define vf_sel VL_SFX(vl_fsel)
#define vi_sel VL_SFX(vl_isel)
#define vi_gather VL_SFX(vl_igather)
#define vf_lut8 VL_SFX(vl_flut8)
#define vf_perm VL_SFX(vl_fperm)
#define vf_perm_halves VL_SFX(vl_fperm_halves)
#define vf_min_halves VL_SFX(vl_fmin_halves)
#define vi_load_u16_pair VL_SFX(vl_iload_u16_pair)
#define vi_load_i8 VL_SFX(vl_iload_i8)
#define vi_count VL_SFX(vl_icount)
#define vf_abs VL_SFX(vl_fabs)
#define vf_rcp_nr VL_SFX(vl_frcp_nr)
#define vf_bcast4 VL_SFX(vl_fbcast4)
#define vf_lut32 VL_SFX(vl_flut32)
#define vf_rep4 VL_SFX(vl_frep4)
#define vf_rep8 VL_SFX(vl_frep8)
#define vi_store_u8 VL_SFX(vl_istore_u8)
#endif
/* added for kq_common / legacy */
#ifndef VEC_LANES_NAMES_KQL
#define VEC_LANES_NAMES_KQL
#define vm_not VL_SFX(vl_mnot)
#define vi_trunc VL_SFX(vl_itrunc)
#define vi_uncount VL_SFX(vl_iuncount)
#define vi_store_lo8 VL_SFX(vl_istore_lo8)
#define vf_transpose VL_SFX(vl_ftranspose)
#define vf_hmin_each VL_SFX(vl_fhmin_each)
#define vf_hmax_each VL_SFX(vl_fhmax_each)
#define vf_store_f16 VL_SFX(vl_fstore_f16)
#define vl_f16 VL_SFX(vl_f16_)
#endif

typedef float VF __attribute__((vector_size(VL_W * 4)));
typedef int32_t VI __attribute__((vector_size(VL_W * 4)));
#if VL_W == 16 && !VL_IS_PLAIN
typedef __mmask16 VM;
#else
typedef VI VM;
#endif

/* added for best_scale: uint32 lanes (VU), VL_W pairs of int16 (VS: 16-bit lane 2k and 2k + 1
 * share 32-bit lane k), bitwise selects by a 0/-1 VI mask (and/andnot/or, not a blend), aligned
 * loads and stores (p aligned to the vector size), and the operations below per width:
 *   vm_of_vi      a 0/-1 VI mask as a VM
 *   vf_round      round to the nearest integer, ties to even (|v| < 2^22 at the plain width)
 *   vi_round      the same, as int32 (cvtps2dq in the default mode; |v| < 2^22 at the plain width)
 *   vs_mulhrs     (a b + 2^14) >> 15 per int16 lane (pmulhrsw)
 *   vs_madd       a[2k] b[2k] + a[2k+1] b[2k+1] as int32 (pmaddwd)
 *   vs_min/vs_max int16 min / max
 *   vf_transpose16  t[j * 16 + b] = rows[b][j] for 16 rows of 32 floats (t aligned to 64) */
#ifndef VEC_LANES_NAMES_BS
#define VEC_LANES_NAMES_BS
#define VU VL_SFX(vl_vu)
#define VS VL_SFX(vl_vs)
#define vf_bsel VL_SFX(vl_fbsel)
#define vu_bsel VL_SFX(vl_ubsel)
#define vf_loada VL_SFX(vl_floada)
#define vf_storea VL_SFX(vl_fstorea)
#define vu_loada VL_SFX(vl_uloada)
#define vu_storea VL_SFX(vl_ustorea)
#define vm_of_vi VL_SFX(vl_m_of_vi)
#define vf_round VL_SFX(vl_fround)
#define vi_round VL_SFX(vl_iround)
#define vs_mulhrs VL_SFX(vl_smulhrs)
#define vs_madd VL_SFX(vl_smadd)
#define vs_min VL_SFX(vl_smin)
#define vs_max VL_SFX(vl_smax)
#define vf_transpose16 VL_SFX(vl_ftranspose16)
#endif
typedef uint32_t VU __attribute__((vector_size(VL_W * 4)));
typedef int16_t VS __attribute__((vector_size(VL_W * 4)));
/* m ? t : f per lane, m 0 or -1 (bitwise) */
VL_FN VF vf_bsel(VI m, VF t, VF f) { return (VF)((m & (VI)t) | (~m & (VI)f)); }
VL_FN VU vu_bsel(VI m, VU t, VU f) { return ((VU)m & t) | (~(VU)m & f); }
VL_FN VF vf_loada(const float *p) { return *(const VF *)(const void *)p; }
VL_FN void vf_storea(float *p, VF v) { *(VF *)(void *)p = v; }
VL_FN VU vu_loada(const uint32_t *p) { return *(const VU *)(const void *)p; }
VL_FN void vu_storea(uint32_t *p, VU v) { *(VU *)(void *)p = v; }

VL_FN VF vf_splat(float s) {
    VF v;
    for (int k = 0; k < VL_W; k++) v[k] = s;
    return v;
}
VL_FN VI vi_splat(int32_t s) {
    VI v;
    for (int k = 0; k < VL_W; k++) v[k] = s;
    return v;
}
/* lane k = k */
VL_FN VI vi_iota(void) {
    VI v;
    for (int k = 0; k < VL_W; k++) v[k] = k;
    return v;
}
/* int32 -> float (cvtdq2ps) */
VL_FN VF vf_of_i(VI a) { return __builtin_convertvector(a, VF); }
/* |a| (sign bit cleared) */
VL_FN VF vf_abs(VF a) { return (VF)((VI)a & vi_splat(0x7fffffff)); }
/* 2^23 + 2^22 added, low mantissa bits: ggml's nearest_int (round half to even), |v| < 2^22 */
VL_FN VI vf_nearest(VF v) {
    const VI b = (VI)(v + vf_splat(12582912.f));
    return (b & vi_splat(0x7fffff)) - vi_splat(0x400000);
}
/* added for kq_common / legacy */
/* (int32_t)f per lane, truncated toward zero (cvttps2dq), |f| < 2^31 */
VL_FN VI vi_trunc(VF a) { return __builtin_convertvector(a, VI); }

#if VL_IS_PLAIN || VL_W == 8
/* where VM is a 0/-1 VI (every width but AVX-512's mask registers) */
VL_FN VM vi_eq(VI a, VI b) { return a == b; }
VL_FN VM vi_gt(VI a, VI b) { return a > b; }
/* unsigned a > b */
VL_FN VM vi_gtu(VI a, VI b) { return (a ^ vi_splat(INT32_MIN)) > (b ^ vi_splat(INT32_MIN)); }
/* lanes with the sign bit set */
VL_FN VM vi_neg(VI a) { return a < vi_splat(0); }
VL_FN VM vm_and(VM a, VM b) { return a & b; }
VL_FN VM vm_or(VM a, VM b) { return a | b; }
VL_FN VM vm_of_bits(uint32_t b) { return ((vi_splat((int32_t)b) >> vi_iota()) & vi_splat(1)) == vi_splat(1); }
#endif

#if VL_IS_PLAIN
#include "vec_lanes_plain.h"
#elif VL_W == 8
VL_FN VF vf_load(const float *p) { return (VF)_mm256_loadu_ps(p); }
VL_FN void vf_store(float *p, VF v) { _mm256_storeu_ps(p, (__m256)v); }
VL_FN VI vi_load(const int32_t *p) { return (VI)_mm256_loadu_si256((const __m256i *)p); }
VL_FN void vi_store(int32_t *p, VI v) { _mm256_storeu_si256((__m256i *)p, (__m256i)v); }
/* VL_W uint16 widened */
VL_FN VI vi_load_u16(const uint16_t *p) {
    return (VI)_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
}
/* x86 min/max: a < b ? a : b, a > b ? a : b (the second operand on NaN and on equal zeros) */
VL_FN VF vf_min(VF a, VF b) { return (VF)_mm256_min_ps((__m256)a, (__m256)b); }
VL_FN VF vf_max(VF a, VF b) { return (VF)_mm256_max_ps((__m256)a, (__m256)b); }
VL_FN VI vi_min(VI a, VI b) { return (VI)_mm256_min_epi32((__m256i)a, (__m256i)b); }
VL_FN VI vi_max(VI a, VI b) { return (VI)_mm256_max_epi32((__m256i)a, (__m256i)b); }
VL_FN VF vf_sqrt(VF a) { return (VF)_mm256_sqrt_ps((__m256)a); }
VL_FN float vf_hmax(VF a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128((__m256)a), _mm256_extractf128_ps((__m256)a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
VL_FN float vf_hmin(VF a) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128((__m256)a), _mm256_extractf128_ps((__m256)a, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
#define VL_FCMP(name, pred)                                                                       \
    VL_FN VM name(VF a, VF b) { return (VM)_mm256_castps_si256(_mm256_cmp_ps((__m256)a, (__m256)b, pred)); }
VL_FN uint32_t vm_bits(VM m) { return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps((__m256i)m)); }
/* m ? t : f per lane */
VL_FN VF vf_sel(VM m, VF t, VF f) { return (VF)_mm256_blendv_ps((__m256)f, (__m256)t, _mm256_castsi256_ps((__m256i)m)); }
VL_FN VI vi_sel(VM m, VI t, VI f) { return (VI)_mm256_blendv_epi8((__m256i)f, (__m256i)t, (__m256i)m); }
VL_FN VI vi_gather(const int32_t *base, VI idx) { return (VI)_mm256_i32gather_epi32(base, (__m256i)idx, 4); }
/* lane k = t[idx_k], idx 0..7 */
VL_FN VF vf_lut8(const float *t, VI idx) { return (VF)_mm256_permutevar8x32_ps(_mm256_loadu_ps(t), (__m256i)idx); }
/* lane k = v[VL_W/4 * p + k/4] (v: 8 floats, p < 4 / (VL_W / 8)) */
VL_FN VF vf_rep4(const float *v, int p) {
    const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(2 * p), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    return (VF)_mm256_permutevar8x32_ps(_mm256_loadu_ps(v), idx);
}
/* lane k = v[VL_W/8 * p + k/8] (v: 4 floats) */
VL_FN VF vf_rep8(const float *v, int p) { return vf_splat(v[p]); }
/* lane k = t[idx_k], idx 0..VL_W-1 */
VL_FN VF vf_perm(VF t, VI idx) { return (VF)_mm256_permutevar8x32_ps((__m256)t, (__m256i)idx); }
/* lanes of the low half = a[idx_k], of the high half = b[idx_k], idx 0..VL_W-1 */
VL_FN VF vf_perm_halves(VF a, VF b, VI idx) {
    return (VF)_mm256_blend_ps(_mm256_permutevar8x32_ps((__m256)a, (__m256i)idx),
                               _mm256_permutevar8x32_ps((__m256)b, (__m256i)idx), 0xF0);
}
/* every lane = the minimum of its half (no NaN expected: x86 min order otherwise) */
VL_FN VF vf_min_halves(VF a) {
    __m256 m = _mm256_min_ps((__m256)a, _mm256_shuffle_ps((__m256)a, (__m256)a, _MM_SHUFFLE(1, 0, 3, 2)));
    return (VF)_mm256_min_ps(m, _mm256_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
}
/* VL_W int8 widened */
VL_FN VI vi_load_i8(const int8_t *p) { return (VI)_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)p)); }
/* acc + 1 in the lanes of m */
VL_FN VI vi_count(VI acc, VM m) { return acc - m; }
/* lane k = p[k & 3] */
VL_FN VF vf_bcast4(const float *p) { return (VF)_mm256_broadcast_ps((const __m128 *)p); }
/* approximately 1/a: rcp (|rel. error| <= 1.5*2^-12) and one Newton step (fnmadd) */
VL_FN VF vf_rcp_nr(VF a) {
    const __m256 r = _mm256_rcp_ps((__m256)a);
    return (VF)_mm256_mul_ps(r, _mm256_fnmadd_ps((__m256)a, r, _mm256_set1_ps(2.f)));
}
/* VL_W/2 uint16 from a (low half), VL_W/2 from b (high half), widened */
VL_FN VI vi_load_u16_pair(const uint16_t *a, const uint16_t *b) {
    return (VI)_mm256_cvtepu16_epi32(_mm_unpacklo_epi64(_mm_loadl_epi64((const __m128i *)a),
                                                        _mm_loadl_epi64((const __m128i *)b)));
}
/* the VL_W lanes (each 0..255) stored as bytes */
VL_FN void vi_store_u8(uint8_t *p, VI v) {
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128((__m256i)v), _mm256_extracti128_si256((__m256i)v, 1));
    _mm_storel_epi64((__m128i *)p, _mm_packus_epi16(w, w));
}
/* added for kq_common / legacy */
/* the lanes not in m */
VL_FN VM vm_not(VM m) { return ~m; }
/* acc - 1 in the lanes of m */
VL_FN VI vi_uncount(VI acc, VM m) { return acc + m; }
/* the low bytes of the VL_W lanes stored (truncation, as a C cast to uint8_t) */
VL_FN void vi_store_lo8(uint8_t *p, VI v) { vi_store_u8(p, v & vi_splat(0xFF)); /* packus = truncation on 0..255 */ }
/* out[c] lane k = in[k] lane c, c, k < VL_W: 32-bit then 64-bit unpacks within the 128-bit lanes,
 * then the 128-bit lanes themselves (a 2x2 transpose) */
VL_FN void vf_transpose(const VF *in, VF *out) {
    __m256 t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_ps((__m256)in[2 * k], (__m256)in[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps((__m256)in[2 * k], (__m256)in[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        const __m256d a = _mm256_castps_pd(t[4 * k]), b = _mm256_castps_pd(t[4 * k + 2]);
        const __m256d c = _mm256_castps_pd(t[4 * k + 1]), d = _mm256_castps_pd(t[4 * k + 3]);
        u[4 * k + 0] = _mm256_castpd_ps(_mm256_unpacklo_pd(a, b));
        u[4 * k + 1] = _mm256_castpd_ps(_mm256_unpackhi_pd(a, b));
        u[4 * k + 2] = _mm256_castpd_ps(_mm256_unpacklo_pd(c, d));
        u[4 * k + 3] = _mm256_castpd_ps(_mm256_unpackhi_pd(c, d));
    }
    for (int j = 0; j < 4; j++) {
        out[j] = (VF)_mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        out[4 + j] = (VF)_mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}
/* lane k = the minimum (maximum) of the lanes of v[k], k < VL_W: a tree of x86 min (max) over
 * shuffles of adjacent vectors (its operand order is not vf_hmin's: a zero's sign may differ) */
#define VL_EACH(name, op)                                                                         \
    VL_FN VF name(const VF *v) {                                                                  \
        __m256 a[4], b[2];                                                                        \
        _Pragma("GCC unroll 8") for (int k = 0; k < 4; k++)                                                               \
            a[k] = op(_mm256_permute2f128_ps((__m256)v[2 * k], (__m256)v[2 * k + 1], 0x20),        \
                      _mm256_permute2f128_ps((__m256)v[2 * k], (__m256)v[2 * k + 1], 0x31));       \
        _Pragma("GCC unroll 8") for (int k = 0; k < 2; k++)                                                               \
            b[k] = op(_mm256_shuffle_ps(a[2 * k], a[2 * k + 1], 0x44), _mm256_shuffle_ps(a[2 * k], a[2 * k + 1], 0xEE)); \
        const __m256 c = op(_mm256_shuffle_ps(b[0], b[1], 0x88), _mm256_shuffle_ps(b[0], b[1], 0xDD)); \
        return (VF)_mm256_permutevar8x32_ps(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));         \
    }
VL_EACH(vf_hmin_each, _mm256_min_ps)
VL_EACH(vf_hmax_each, _mm256_max_ps)
#undef VL_EACH
/* the VL_W lanes as fp16 (round to nearest even), stored; F16C: VL_TGT must name f16c */
VL_FN void vf_store_f16(uint16_t *h, VF v) { _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph((__m256)v, 0)); }
/* added for best_scale */
VL_FN VM vm_of_vi(VI m) { return m; }
VL_FN VF vf_round(VF v) { return (VF)_mm256_round_ps((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
VL_FN VI vi_round(VF v) { return (VI)_mm256_cvtps_epi32((__m256)v); }
VL_FN VS vs_mulhrs(VS a, VS b) { return (VS)_mm256_mulhrs_epi16((__m256i)a, (__m256i)b); }
VL_FN VI vs_madd(VS a, VS b) { return (VI)_mm256_madd_epi16((__m256i)a, (__m256i)b); }
VL_FN VS vs_min(VS a, VS b) { return (VS)_mm256_min_epi16((__m256i)a, (__m256i)b); }
VL_FN VS vs_max(VS a, VS b) { return (VS)_mm256_max_epi16((__m256i)a, (__m256i)b); }
/* 8x8 tiles: 128-bit halves of rows b and b + 4 side by side (the insert takes its half from
 * memory), then 4x4 transposes within the 128-bit lanes */
VL_FN void vf_transpose16(const float *const *rows, float *t) {
    for (int g = 0; g < 2; g++)
        for (int j0 = 0; j0 < 32; j0 += 4) {
            __m256 r[4], u[4];
            for (int b = 0; b < 4; b++)
                r[b] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(rows[8 * g + b] + j0)),
                                            _mm_loadu_ps(rows[8 * g + b + 4] + j0), 1);
            u[0] = _mm256_unpacklo_ps(r[0], r[1]);
            u[1] = _mm256_unpackhi_ps(r[0], r[1]);
            u[2] = _mm256_unpacklo_ps(r[2], r[3]);
            u[3] = _mm256_unpackhi_ps(r[2], r[3]);
            _mm256_store_ps(t + (j0 + 0) * 16 + 8 * g, _mm256_shuffle_ps(u[0], u[2], 0x44));
            _mm256_store_ps(t + (j0 + 1) * 16 + 8 * g, _mm256_shuffle_ps(u[0], u[2], 0xEE));
            _mm256_store_ps(t + (j0 + 2) * 16 + 8 * g, _mm256_shuffle_ps(u[1], u[3], 0x44));
            _mm256_store_ps(t + (j0 + 3) * 16 + 8 * g, _mm256_shuffle_ps(u[1], u[3], 0xEE));
        }
}
#else
VL_FN VF vf_load(const float *p) { return (VF)_mm512_loadu_ps(p); }
VL_FN void vf_store(float *p, VF v) { _mm512_storeu_ps(p, (__m512)v); }
VL_FN VI vi_load(const int32_t *p) { return (VI)_mm512_loadu_si512(p); }
VL_FN void vi_store(int32_t *p, VI v) { _mm512_storeu_si512(p, (__m512i)v); }
VL_FN VI vi_load_u16(const uint16_t *p) {
    return (VI)_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
}
VL_FN VF vf_min(VF a, VF b) { return (VF)_mm512_min_ps((__m512)a, (__m512)b); }
VL_FN VF vf_max(VF a, VF b) { return (VF)_mm512_max_ps((__m512)a, (__m512)b); }
VL_FN VI vi_min(VI a, VI b) { return (VI)_mm512_min_epi32((__m512i)a, (__m512i)b); }
VL_FN VI vi_max(VI a, VI b) { return (VI)_mm512_max_epi32((__m512i)a, (__m512i)b); }
VL_FN VF vf_sqrt(VF a) { return (VF)_mm512_sqrt_ps((__m512)a); }
VL_FN float vf_hmax(VF a) { return _mm512_reduce_max_ps((__m512)a); }
VL_FN float vf_hmin(VF a) { return _mm512_reduce_min_ps((__m512)a); }
#define VL_FCMP(name, pred)                                                                       \
    VL_FN VM name(VF a, VF b) { return _mm512_cmp_ps_mask((__m512)a, (__m512)b, pred); }
VL_FN VM vi_eq(VI a, VI b) { return _mm512_cmpeq_epi32_mask((__m512i)a, (__m512i)b); }
VL_FN VM vi_gt(VI a, VI b) { return _mm512_cmpgt_epi32_mask((__m512i)a, (__m512i)b); }
VL_FN VM vi_gtu(VI a, VI b) { return _mm512_cmpgt_epu32_mask((__m512i)a, (__m512i)b); }
VL_FN VM vi_neg(VI a) { return _mm512_movepi32_mask((__m512i)a); }
VL_FN VM vm_and(VM a, VM b) { return (VM)(a & b); }
VL_FN VM vm_or(VM a, VM b) { return (VM)(a | b); }
VL_FN uint32_t vm_bits(VM m) { return (uint32_t)m; }
VL_FN VM vm_of_bits(uint32_t b) { return (VM)b; }
VL_FN VF vf_sel(VM m, VF t, VF f) { return (VF)_mm512_mask_blend_ps(m, (__m512)f, (__m512)t); }
VL_FN VI vi_sel(VM m, VI t, VI f) { return (VI)_mm512_mask_mov_epi32((__m512i)f, m, (__m512i)t); }
VL_FN VI vi_gather(const int32_t *base, VI idx) { return (VI)_mm512_i32gather_epi32((__m512i)idx, base, 4); }
VL_FN VF vf_lut8(const float *t, VI idx) {
    return (VF)_mm512_permutexvar_ps((__m512i)idx, _mm512_castps256_ps512(_mm256_loadu_ps(t)));
}
VL_FN VF vf_rep4(const float *v, int p) {
    const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(4 * p),
                                         _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    return (VF)_mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_loadu_ps(v)));
}
VL_FN VF vf_rep8(const float *v, int p) {
    return (VF)_mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(v[2 * p]), _mm512_set1_ps(v[2 * p + 1]));
}
VL_FN VF vf_perm(VF t, VI idx) { return (VF)_mm512_permutexvar_ps((__m512i)idx, (__m512)t); }
VL_FN VF vf_perm_halves(VF a, VF b, VI idx) {
    const __m512i hi = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16, 16);
    return (VF)_mm512_permutex2var_ps((__m512)a, _mm512_add_epi32((__m512i)idx, hi), (__m512)b);
}
VL_FN VF vf_min_halves(VF a) {
    __m512 m = _mm512_min_ps((__m512)a, _mm512_shuffle_f32x4((__m512)a, (__m512)a, _MM_SHUFFLE(2, 3, 0, 1)));
    m = _mm512_min_ps(m, _mm512_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    return (VF)_mm512_min_ps(m, _mm512_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
}
VL_FN VI vi_load_i8(const int8_t *p) { return (VI)_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)); }
VL_FN VI vi_count(VI acc, VM m) { return (VI)_mm512_mask_add_epi32((__m512i)acc, m, (__m512i)acc, _mm512_set1_epi32(1)); }
VL_FN VF vf_bcast4(const float *p) { return (VF)_mm512_broadcast_f32x4(_mm_loadu_ps(p)); }
/* rcp14 (|rel. error| < 2^-14) and one Newton step */
VL_FN VF vf_rcp_nr(VF a) {
    const __m512 r = _mm512_rcp14_ps((__m512)a);
    return (VF)_mm512_mul_ps(r, _mm512_fnmadd_ps((__m512)a, r, _mm512_set1_ps(2.f)));
}
/* lane k = t[idx_k & 31] (t: 32 floats; two-register permute, AVX-512 only) */
VL_FN VF vf_lut32(const float *t, VI idx) {
    return (VF)_mm512_permutex2var_ps(_mm512_loadu_ps(t), (__m512i)idx, _mm512_loadu_ps(t + 16));
}
VL_FN void vi_store_u8(uint8_t *p, VI v) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8((__m512i)v)); }
VL_FN VI vi_load_u16_pair(const uint16_t *a, const uint16_t *b) {
    return (VI)_mm512_cvtepu16_epi32(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)), _mm_loadu_si128((const __m128i *)b), 1));
}
/* added for kq_common / legacy */
VL_FN VM vm_not(VM m) { return (VM)~m; }
VL_FN VI vi_uncount(VI acc, VM m) { return (VI)_mm512_mask_sub_epi32((__m512i)acc, m, (__m512i)acc, _mm512_set1_epi32(1)); }
VL_FN void vi_store_lo8(uint8_t *p, VI v) { _mm_storeu_si128((__m128i *)p, _mm512_cvtepi32_epi8((__m512i)v)); }
/* 32-bit then 64-bit unpacks within the 128-bit lanes, then those lanes (a 4x4 transpose) */
VL_FN void vf_transpose(const VF *in, VF *out) {
    __m512 t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps((__m512)in[2 * k], (__m512)in[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps((__m512)in[2 * k], (__m512)in[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) {
        const __m512d a = _mm512_castps_pd(t[4 * k]), b = _mm512_castps_pd(t[4 * k + 2]);
        const __m512d c = _mm512_castps_pd(t[4 * k + 1]), d = _mm512_castps_pd(t[4 * k + 3]);
        u[4 * k + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
        u[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
        u[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
        u[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int j = 0; j < 4; j++) {
        const __m512 v = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44), v2 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
        const __m512 w = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44), w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
        out[j] = (VF)_mm512_shuffle_f32x4(v, w, 0x88);
        out[4 + j] = (VF)_mm512_shuffle_f32x4(v, w, 0xDD);
        out[8 + j] = (VF)_mm512_shuffle_f32x4(v2, w2, 0x88);
        out[12 + j] = (VF)_mm512_shuffle_f32x4(v2, w2, 0xDD);
    }
}
#define VL_EACH(name, op)                                                                         \
    VL_FN VF name(const VF *v) {                                                                  \
        __m512 a[8], b[4], c[2];                                                                  \
        _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)                                                               \
            a[k] = op(_mm512_shuffle_f32x4((__m512)v[2 * k], (__m512)v[2 * k + 1], 0x44),          \
                      _mm512_shuffle_f32x4((__m512)v[2 * k], (__m512)v[2 * k + 1], 0xEE));         \
        _Pragma("GCC unroll 8") for (int k = 0; k < 4; k++)                                                               \
            b[k] = op(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x88), _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xDD)); \
        _Pragma("GCC unroll 8") for (int k = 0; k < 2; k++)                                                               \
            c[k] = op(_mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0x44), _mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0xEE)); \
        const __m512 e = op(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD)); \
        return (VF)_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e); \
    }
VL_EACH(vf_hmin_each, _mm512_min_ps)
VL_EACH(vf_hmax_each, _mm512_max_ps)
#undef VL_EACH
VL_FN void vf_store_f16(uint16_t *h, VF v) { _mm256_storeu_si256((__m256i *)h, _mm512_cvtps_ph((__m512)v, 0)); }
/* added for best_scale */
VL_FN VM vm_of_vi(VI m) { return _mm512_movepi32_mask((__m512i)m); }
VL_FN VF vf_round(VF v) { return (VF)_mm512_roundscale_ps((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
VL_FN VI vi_round(VF v) { return (VI)_mm512_cvtps_epi32((__m512)v); }
VL_FN VS vs_mulhrs(VS a, VS b) { return (VS)_mm512_mulhrs_epi16((__m512i)a, (__m512i)b); }
VL_FN VI vs_madd(VS a, VS b) { return (VI)_mm512_madd_epi16((__m512i)a, (__m512i)b); }
VL_FN VS vs_min(VS a, VS b) { return (VS)_mm512_min_epi16((__m512i)a, (__m512i)b); }
VL_FN VS vs_max(VS a, VS b) { return (VS)_mm512_max_epi16((__m512i)a, (__m512i)b); }
/* per half of 16 values: 4x4 transposes within the 128-bit lanes, then the 128-bit lanes
 * regrouped (shuffle_f32x4) */
VL_FN void vf_transpose16(const float *const *rows, float *t) {
    for (int half = 0; half < 2; half++) {
        __m512 r[16], u[16], v[16];
        for (int b = 0; b < 16; b++) r[b] = _mm512_loadu_ps(rows[b] + 16 * half);
        for (int b = 0; b < 16; b += 2) {
            u[b] = _mm512_unpacklo_ps(r[b], r[b + 1]);
            u[b + 1] = _mm512_unpackhi_ps(r[b], r[b + 1]);
        }
        for (int b = 0; b < 16; b += 4) {
            v[b] = _mm512_shuffle_ps(u[b], u[b + 2], 0x44);
            v[b + 1] = _mm512_shuffle_ps(u[b], u[b + 2], 0xEE);
            v[b + 2] = _mm512_shuffle_ps(u[b + 1], u[b + 3], 0x44);
            v[b + 3] = _mm512_shuffle_ps(u[b + 1], u[b + 3], 0xEE);
        }
        /* v[4g + c] holds, per 128-bit lane L (values 4L..4L+3 of the half), the value 4L + c of
         * rows 4g..4g+3 */
        for (int c = 0; c < 4; c++) {
            const __m512 a0 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x88); /* L0,L2 of g0 | g1 */
            const __m512 a1 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xDD); /* L1,L3 */
            const __m512 b0 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x88);
            const __m512 b1 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xDD);
            /* a0 = [g0L0 g0L2 g1L0 g1L2], b0 = [g2L0 g2L2 g3L0 g3L2] */
            float *o = t + (16 * half + c) * 16;
            _mm512_store_ps(o + 0 * 64, _mm512_shuffle_f32x4(a0, b0, 0x88)); /* g0L0 g1L0 g2L0 g3L0 */
            _mm512_store_ps(o + 1 * 64, _mm512_shuffle_f32x4(a1, b1, 0x88)); /* L1 */
            _mm512_store_ps(o + 2 * 64, _mm512_shuffle_f32x4(a0, b0, 0xDD)); /* L2 */
            _mm512_store_ps(o + 3 * 64, _mm512_shuffle_f32x4(a1, b1, 0xDD)); /* L3 */
        }
    }
}
#endif
#if !VL_IS_PLAIN
/* added for kq_common / legacy: one float as fp16 bits (F16C, round to nearest even) */
VL_FN uint16_t vl_f16(float f) { return (uint16_t)_cvtss_sh(f, 0); }
#endif
#if !VL_IS_PLAIN
VL_FCMP(vf_lt, _CMP_LT_OQ)
VL_FCMP(vf_le, _CMP_LE_OQ)
VL_FCMP(vf_gt, _CMP_GT_OQ)
VL_FCMP(vf_ge, _CMP_GE_OQ)
VL_FCMP(vf_eq, _CMP_EQ_OQ)
VL_FCMP(vf_ord, _CMP_ORD_Q)
#undef VL_FCMP
#endif

/* additions for best_scale/kq_best (lanesa) */
#ifndef VEC_LANES_NAMES_A
#define VEC_LANES_NAMES_A
#define vf_unord VL_SFX(vl_funord)
#endif
#if VL_IS_PLAIN
VL_FN VM vf_unord(VF a, VF b) { return ~((a == a) & (b == b)); }
#elif VL_W == 8
/* lanes where a or b is NaN */
VL_FN VM vf_unord(VF a, VF b) {
    return (VM)_mm256_castps_si256(_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_UNORD_Q));
}
#else
VL_FN VM vf_unord(VF a, VF b) { return _mm512_cmp_ps_mask((__m512)a, (__m512)b, _CMP_UNORD_Q); }
#endif

/* a*b + c as the scalar code's IQF_FMA_ARM (util/fma.h): one fused rounding per lane where the
 * platform's ggml fuses (the plain width on arm64), the two roundings elsewhere (every x86
 * width: the x86 bytes are the unfused ones). A kernel writes it exactly where the scalar code
 * it mirrors writes IQF_FMA_ARM; vf_fms_arm (a*b - c) and vf_fnma_arm (c - a*b) where it writes
 * IQF_FMS_ARM and IQF_FNMA_ARM. VL_FUSES is 1 where they fuse, for a kernel whose unfused form
 * reuses a rounded product (a table of a*b) that the fused form cannot. */
#ifndef VEC_LANES_NAMES_FMA
#define VEC_LANES_NAMES_FMA
#define vf_fma_arm VL_SFX(vl_ffma_arm)
#define vf_fms_arm VL_SFX(vl_ffms_arm)
#define vf_fnma_arm VL_SFX(vl_ffnma_arm)
#endif
#undef VL_FUSES
#if VL_IS_PLAIN && defined(__aarch64__)
#define VL_FUSES 1
VL_FN VF vf_fma_arm(VF a, VF b, VF c) {
    for (int k = 0; k < VL_W; k++) c[k] = __builtin_fmaf(a[k], b[k], c[k]);
    return c;
}
VL_FN VF vf_fms_arm(VF a, VF b, VF c) { return vf_fma_arm(a, b, -c); }
VL_FN VF vf_fnma_arm(VF a, VF b, VF c) { return vf_fma_arm(-a, b, c); }
#else
#define VL_FUSES 0
VL_FN VF vf_fma_arm(VF a, VF b, VF c) { return a * b + c; }
VL_FN VF vf_fms_arm(VF a, VF b, VF c) { return a * b - c; }
VL_FN VF vf_fnma_arm(VF a, VF b, VF c) { return c - a * b; }
#endif
