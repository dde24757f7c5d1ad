/* legacy_lanes.h - the vector kernels of legacy.c, written once over the lane count: legacy.c includes
 * this file once per instruction set, with LEG_PASS and its width macros defined. No include
 * guard on purpose. */
/* LEG_PASS: LW lanes over one 32-value block (NV vectors). Blocks whose outcome depends on
       * signed zeros or a non-finite inverse scale take the scalar path. F16C converts the block
       * scales (round to nearest even, bitwise as iqf_fp32_to_fp16 for finite values). */
#include <immintrin.h>

#define NV (QK / LW)
#define VF LSFX(vf)
#define VI LSFX(vi)
#define P_W LW
#define P_TGT LTGT
#define P_SFX LSFX
#include "lanes_prelude.h"
#undef P_W
#undef P_TGT
#undef P_SFX
#define VB LSFX(vb)
typedef uint8_t VB __attribute__((vector_size(LW)));

/* LX(op): the intrinsic of this width (_mm256_op / _mm512_op); PS, SI: its vector types. */
#if LW == 8
#define LX(op) _mm256_##op
#define PS __m256
#define SI __m256i
#else
#define LX(op) _mm512_##op
#define PS __m512
#define SI __m512i
#endif

static inline LTGT VF LSFX(vmax)(VF a, VF b) { VI m = a > b; return (VF)((m & (VI)a) | (~m & (VI)b)); }
static inline LTGT VF LSFX(vmin)(VF a, VF b) { VI m = a < b; return (VF)((m & (VI)a) | (~m & (VI)b)); }
static inline LTGT VI LSFX(vmini)(VI a, VI b) { return (VI)LX(min_epi32)((SI)a, (SI)b); }
static inline LTGT iqf_half LSFX(fp16)(float f) { return (iqf_half)_cvtss_sh(f, 0); }
/* (int32_t)f for |f| < 2^31 (cvttps2dq). */
static inline LTGT VI LSFX(cvtt)(VF f) { return __builtin_convertvector(f, VI); }
static inline LTGT void LSFX(load)(const float *x, VF *v) {
    for (int k = 0; k < NV; k++) v[k] = (VF)LX(loadu_ps)(x + k * LW);
}
#if LW == 8
static inline LTGT float LSFX(hmax)(VF a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128((__m256)a), _mm256_extractf128_ps((__m256)a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
static inline LTGT float LSFX(hmin)(VF a) {
    __m128 m = _mm_min_ps(_mm256_castps256_ps128((__m256)a), _mm256_extractf128_ps((__m256)a, 1));
    m = _mm_min_ps(m, _mm_movehl_ps(m, m));
    m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}
/* bit k = bit 4 of lane k */
static inline LTGT uint32_t LSFX(bit4)(VI l) { return (uint32_t)_mm256_movemask_ps((__m256)(l << 27)); }
/* bit k = sign bit of lane k (of a compare mask) */
static inline LTGT uint32_t LSFX(bit31)(VI m) { return (uint32_t)_mm256_movemask_ps((__m256)m); }
/* Low bytes of the lanes (truncation, as a C cast to uint8_t/int8_t). */
static inline LTGT void LSFX(store_u8)(VI l, void *dst) {
    __m256i v = (__m256i)(l & LSFX(splati)(0xFF)); /* packus saturation = truncation on 0..255 */
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(w, w));
}
/* fp16 of the LW lanes, stored. */
static inline LTGT void LSFX(cvtph)(VF v, iqf_half *h) { _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph((__m256)v, 0)); }
#else
static inline LTGT float LSFX(hmax)(VF a) { return _mm512_reduce_max_ps((__m512)a); }
static inline LTGT float LSFX(hmin)(VF a) { return _mm512_reduce_min_ps((__m512)a); }
static inline LTGT uint32_t LSFX(bit4)(VI l) {
    return (uint32_t)_mm512_test_epi32_mask((__m512i)l, (__m512i)LSFX(splati)(16));
}
static inline LTGT uint32_t LSFX(bit31)(VI m) { return (uint32_t)_mm512_movepi32_mask((__m512i)m); }
static inline LTGT void LSFX(store_u8)(VI l, void *dst) {
    VB b = __builtin_convertvector(l, VB);
    memcpy(dst, &b, LW);
}
static inline LTGT void LSFX(cvtph)(VF v, iqf_half *h) { _mm256_storeu_si256((__m256i *)h, _mm512_cvtps_ph((__m512)v, 0)); }
#endif

/* Nibble packing qs[j] = l[j] | l[j+16] << 4 (low nibbles); 5-bit types: qh bit j = bit 4 of l[j]. */
static inline LTGT void LSFX(pack)(const VI *l, leg_blk b) {
    for (int k = 0; k < NV / 2; k++)
        LSFX(store_u8)((l[k] & LSFX(splati)(15)) | ((l[k + NV / 2] & LSFX(splati)(15)) << 4), b.qs + k * LW);
    if (!b.qh) return;
    uint32_t qh = 0;
    for (int k = 0; k < NV; k++) qh |= LSFX(bit4)(l[k]) << (k * LW);
    memcpy(b.qh, &qh, 4);
}

/* The registry validates a row right before encoding it, so the row is streamed from memory by
 * that check; fetching the NEXT row (rows are contiguous in iqf_quantize) while this one is encoded
 * overlaps that stream with the arithmetic. Prefetches never fault, also past the last row. */
/* Address arithmetic in integers: past the last row it is only ever prefetched, never read. */
#define LEG_NEXT_ROW(x, nb) ((const char *)((uintptr_t)(x) + (uintptr_t)(nb) * (QK * sizeof(float))))
#define LEG_PREFETCH(x, nb)                                                                      \
    do {                                                                                          \
        const char *pf_ = LEG_NEXT_ROW(x, nb);                                        \
        __builtin_prefetch(pf_, 0, 3);                                                            \
        __builtin_prefetch(pf_ + 64, 0, 3);                                                       \
    } while (0)

/* Signed max-abs value (first occurrence), as the q4_0/q5_0 reference loops find it. */
static inline LTGT float LSFX(signed_amax)(const float *x, const VF *v) {
    VF a[NV];
    VF m = a[0] = LSFX(vabs)(v[0]);
    for (int k = 1; k < NV; k++) m = LSFX(vmax)(m, a[k] = LSFX(vabs)(v[k]));
    const float amax = LSFX(hmax)(m);
    if (amax == 0) return 0.0f;
    const VF va = LSFX(splatf)(amax);
    for (int k = 0; k < NV; k++) {
        uint32_t bits = LSFX(bit31)(a[k] == va);
        if (bits) return x[k * LW + __builtin_ctz(bits)];
    }
    return 0.0f; /* not reached */
}

/* q4_0 and q5_0 (sym_ref's arithmetic), one block at a time. */
static inline __attribute__((always_inline)) LTGT void LSFX(sym)(int kind, const float *x, void *vy, int64_t nb) {
    const int nmax = leg_fmts[kind].nmax;
    const VI top = LSFX(splati)(leg_fmts[kind].top);
    for (int64_t i = 0; i < nb; i++, x += QK) {
        VF v[NV];
        LEG_PREFETCH(x, nb);
        LSFX(load)(x, v);
        const float max = LSFX(signed_amax)(x, v);
        const float d = max / -nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        if (isinf(id)) { ref_block(kind, x, b.p); continue; }
        *b.d = LSFX(fp16)(d);
        VI l[NV];
        for (int k = 0; k < NV; k++)
            l[k] = LSFX(vmini)(LSFX(cvtt)(v[k] * LSFX(splatf)(id) + LSFX(splatf)(nmax + 0.5f)), top);
        LSFX(pack)(l, b);
    }
}

/* Per-block min and max of LW blocks, lane b = block b. A tree of LEG_LEVELS levels: each OPs
 * the two shuffles LEG_SHUF(level, a, b, 0/1) of adjacent vectors, which pair the partials of one
 * block (halving their count); LEG_TR then orders the lanes. Signed zeros may come out in either
 * order: blocks with a zero min or max take the scalar path. */
#if LW == 8
#define LEG_LEVELS 3
#define LEG_SHUF(l, a, b, h)                                                                        \
    ((l) == 0   ? _mm256_permute2f128_ps(a, b, (h) ? 0x31 : 0x20) /* 128-bit lane j: block 2k+j */ \
     : (l) == 1 ? _mm256_shuffle_ps(a, b, (h) ? 0xEE : 0x44)                                       \
                : _mm256_shuffle_ps(a, b, (h) ? 0xDD : 0x88))
/* element e of 128-bit lane j: block 2e+j */
#define LEG_TR(v) _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
#else
#define LEG_LEVELS 4
#define LEG_SHUF(l, a, b, h)                                                                        \
    ((l) == 0   ? _mm512_shuffle_f32x4(a, b, (h) ? 0xEE : 0x44)                                     \
     : (l) == 1 ? _mm512_shuffle_f32x4(a, b, (h) ? 0xDD : 0x88) /* 128-bit lane j: block 4k+j */  \
     : (l) == 2 ? _mm512_shuffle_ps(a, b, (h) ? 0xEE : 0x44)                                       \
                : _mm512_shuffle_ps(a, b, (h) ? 0xDD : 0x88))
/* element e of 128-bit lane j: block 4e+j */
#define LEG_TR(v) _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), v)
#endif
/* One level: the np adjacent pairs of n (and of m) OPed into n[k] (m[k]). */
static inline __attribute__((always_inline)) LTGT void LSFX(level)(int l, int np, PS *n, PS *m) {
#pragma GCC unroll 8
    for (int k = 0; k < np; k++) {
        n[k] = LX(min_ps)(LEG_SHUF(l, n[2 * k], n[2 * k + 1], 0), LEG_SHUF(l, n[2 * k], n[2 * k + 1], 1));
        m[k] = LX(max_ps)(LEG_SHUF(l, m[2 * k], m[2 * k + 1], 0), LEG_SHUF(l, m[2 * k], m[2 * k + 1], 1));
    }
}
static inline __attribute__((always_inline)) LTGT void LSFX(minmaxB)(const float *x, VF *vmin, VF *vmax) {
    PS n[LW], m[LW];
#pragma GCC unroll 16
    for (int b = 0; b < LW; b++) {
        VF v[NV];
        LSFX(load)(x + b * QK, v);
        PS vn = (PS)v[0], vm = (PS)v[0];
#pragma GCC unroll 4
        for (int k = 1; k < NV; k++) {
            vn = LX(min_ps)(vn, (PS)v[k]);
            vm = LX(max_ps)(vm, (PS)v[k]);
        }
        n[b] = vn;
        m[b] = vm;
    }
#pragma GCC unroll 4
    for (int l = 0, np = LW / 2; l < LEG_LEVELS; l++, np /= 2) LSFX(level)(l, np, n, m);
    *vmin = (VF)LEG_TR(n[0]);
    *vmax = (VF)LEG_TR(m[0]);
}
#undef LEG_LEVELS
#undef LEG_SHUF
#undef LEG_TR

/* q4_1 and q5_1 (asym_ref's arithmetic). LW blocks at a time: their min/max vectors are folded
 * by minmaxB into one vector (lane = block), so the scales of LW blocks cost one division each
 * instead of LW latency-bound horizontal reductions. d = (max - min)/nmax and 1/d are IEEE
 * divisions, correctly rounded as in the scalar code; blocks with a zero min/max (signed-zero
 * order) or an infinite 1/d go scalar. The last nb % LW blocks go one at a time. */
static inline __attribute__((always_inline)) LTGT void LSFX(asym)(int kind, const float *x, void *vy, int64_t nb) {
    const VF steps = LSFX(splatf)((float)leg_fmts[kind].nmax), zero = LSFX(splatf)(0.0f);
    const VI top = LSFX(splati)(leg_fmts[kind].top);
    int64_t i = 0;
    for (; i + LW <= nb; i += LW, x += LW * QK) {
        const uintptr_t pf = (uintptr_t)LEG_NEXT_ROW(x, nb);
        VF vmin, vmax;
        LSFX(minmaxB)(x, &vmin, &vmax);
        const VF vd = (vmax - vmin) / steps;
        const VF vid = (VF)((VI)(LSFX(splatf)(1.0f) / vd) & (vd != zero));
        const uint32_t spec = LSFX(bit31)((vmin == zero) | (vmax == zero) |
                                          (LSFX(vabs)(vid) == LSFX(splatf)(INFINITY)));
        float fmin[LW], fid[LW];
        iqf_half hd[LW], hm[LW];
        memcpy(fmin, &vmin, sizeof fmin);
        memcpy(fid, &vid, sizeof fid);
        LSFX(cvtph)(vd, hd);
        LSFX(cvtph)(vmin, hm);
        for (int j = 0; j < LW; j++) {
            __builtin_prefetch((const void *)(pf + j * QK * 4), 0, 2);
            __builtin_prefetch((const void *)(pf + j * QK * 4 + 64), 0, 2);
            const leg_blk b = leg_block(kind, vy, i + j);
            if (spec >> j & 1) { ref_block(kind, x + j * QK, b.p); continue; }
            *b.d = hd[j];
            *b.m = hm[j];
            VF v[NV];
            LSFX(load)(x + j * QK, v);
            VI l[NV];
            for (int k = 0; k < NV; k++)
                l[k] = LSFX(vmini)(LSFX(cvtt)((v[k] - LSFX(splatf)(fmin[j])) * LSFX(splatf)(fid[j]) + LSFX(splatf)(0.5f)), top);
            LSFX(pack)(l, b);
        }
    }
    for (; i < nb; i++, x += QK) {
        VF v[NV];
        LEG_PREFETCH(x, nb);
        LSFX(load)(x, v);
        VF mn = v[0], mx = v[0];
        for (int k = 1; k < NV; k++) { mn = LSFX(vmin)(mn, v[k]); mx = LSFX(vmax)(mx, v[k]); }
        const float min = LSFX(hmin)(mn), max = LSFX(hmax)(mx);
        const float d = (max - min) / leg_fmts[kind].nmax;
        const float id = d ? 1.0f / d : 0.0f;
        const leg_blk b = leg_block(kind, vy, i);
        if (min == 0 || max == 0 || isinf(id)) { ref_block(kind, x, b.p); continue; }
        *b.d = LSFX(fp16)(d);
        *b.m = LSFX(fp16)(min);
        VI l[NV];
        for (int k = 0; k < NV; k++)
            l[k] = LSFX(vmini)(LSFX(cvtt)((v[k] - LSFX(splatf)(min)) * LSFX(splatf)(id) + LSFX(splatf)(0.5f)), top);
        LSFX(pack)(l, b);
    }
}

static LTGT void LSFX(q4_0_ref)(const float *x, void *vy, int64_t nb) { LSFX(sym)(K_Q4_0, x, vy, nb); }
static LTGT void LSFX(q5_0_ref)(const float *x, void *vy, int64_t nb) { LSFX(sym)(K_Q5_0, x, vy, nb); }
static LTGT void LSFX(q4_1_ref)(const float *x, void *vy, int64_t nb) { LSFX(asym)(K_Q4_1, x, vy, nb); }
static LTGT void LSFX(q5_1_ref)(const float *x, void *vy, int64_t nb) { LSFX(asym)(K_Q5_1, x, vy, nb); }

static LTGT void LSFX(q8_0_ref)(const float *x, void *vy, int64_t nb) {
    block_q8_0 *y = vy;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        VF v[NV];
        LEG_PREFETCH(x, nb);
        LSFX(load)(x, v);
        VF a = LSFX(vabs)(v[0]);
        for (int k = 1; k < NV; k++) a = LSFX(vmax)(a, LSFX(vabs)(v[k]));
        const float amax = LSFX(hmax)(a);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        if (isinf(id)) { q8_0_ref(x, &y[i], 1); continue; }
        y[i].d = LSFX(fp16)(d);
        for (int k = 0; k < NV; k++) {
            /* roundf: truncate, then step away from zero when the remainder is >= 1/2. */
            VF s = v[k] * LSFX(splatf)(id);
            VI q = LSFX(cvtt)(s);
            VF r = s - __builtin_convertvector(q, VF);
            q = q - (r >= LSFX(splatf)(0.5f)) + (r <= LSFX(splatf)(-0.5f));
            LSFX(store_u8)(q, y[i].qs + k * LW);
        }
    }
}

#undef NV
#undef VF
#undef VI
#undef VB
#undef LX
#undef PS
#undef SI
#undef LEG_PREFETCH
#undef LEG_NEXT_ROW
