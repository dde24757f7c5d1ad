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
#define VB LSFX(vb)
typedef float VF __attribute__((vector_size(LW * 4)));
typedef int32_t VI __attribute__((vector_size(LW * 4)));
typedef uint8_t VB __attribute__((vector_size(LW)));

static inline LTGT VF LSFX(splatf)(float s) {
    VF v;
    for (int k = 0; k < LW; k++) v[k] = s;
    return v;
}
static inline LTGT VI LSFX(splati)(int32_t s) {
    VI v;
    for (int k = 0; k < LW; k++) v[k] = s;
    return v;
}
static inline LTGT VF LSFX(vabs)(VF a) { return (VF)((VI)a & LSFX(splati)(0x7fffffff)); }
static inline LTGT VF LSFX(vmax)(VF a, VF b) { VI m = a > b; return (VF)((m & (VI)a) | (~m & (VI)b)); }
static inline LTGT VF LSFX(vmin)(VF a, VF b) { VI m = a < b; return (VF)((m & (VI)a) | (~m & (VI)b)); }
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
#else
static inline LTGT float LSFX(hmax)(VF a) { return _mm512_reduce_max_ps((__m512)a); }
static inline LTGT float LSFX(hmin)(VF a) { return _mm512_reduce_min_ps((__m512)a); }
static inline LTGT uint32_t LSFX(bit4)(VI l) {
    return (uint32_t)_mm512_test_epi32_mask((__m512i)l, (__m512i)LSFX(splati)(16));
}
static inline LTGT uint32_t LSFX(bit31)(VI m) { return (uint32_t)_mm512_movepi32_mask((__m512i)m); }
#endif
static inline LTGT iqf_half LSFX(fp16)(float f) { return (iqf_half)_cvtss_sh(f, 0); }
/* (int32_t)f for |f| < 2^31 (cvttps2dq). */
static inline LTGT VI LSFX(cvtt)(VF f) { return __builtin_convertvector(f, VI); }
static inline LTGT void LSFX(load)(const float *x, VF *v) {
#if LW == 8
    for (int k = 0; k < NV; k++) v[k] = (VF)_mm256_loadu_ps(x + k * LW);
#else
    for (int k = 0; k < NV; k++) v[k] = (VF)_mm512_loadu_ps(x + k * LW);
#endif
}
/* Low bytes of the lanes (truncation, as a C cast to uint8_t/int8_t). */
static inline LTGT void LSFX(store_u8)(VI l, void *dst) {
#if LW == 8
    __m256i v = (__m256i)(l & LSFX(splati)(0xFF)); /* packus saturation = truncation on 0..255 */
    __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64((__m128i *)dst, _mm_packus_epi16(w, w));
#else
    VB b = __builtin_convertvector(l, VB);
    memcpy(dst, &b, LW);
#endif
}
/* Nibble packing qs[j] = l[j] | l[j+16] << 4 (low nibbles); q5: qh bit j = bit 4 of l[j]. */
static inline LTGT void LSFX(pack4)(const VI *l, uint8_t *qs) {
    for (int k = 0; k < NV / 2; k++)
        LSFX(store_u8)((l[k] & LSFX(splati)(15)) | ((l[k + NV / 2] & LSFX(splati)(15)) << 4), qs + k * LW);
}
static inline LTGT void LSFX(pack5)(const VI *l, uint8_t *qs, uint8_t *qhb) {
    LSFX(pack4)(l, qs);
    uint32_t qh = 0;
    for (int k = 0; k < NV; k++) qh |= LSFX(bit4)(l[k]) << (k * LW);
    memcpy(qhb, &qh, 4);
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

/* q4_0 (nmax 8, top 15) and q5_0 (nmax 16, top 31). */
#define LEG_SYM(NAME, BT, NMAXF, BIAS, TOP, PACK)                                                   \
    static LTGT void LSFX(NAME)(const float *x, BT *y, int64_t nb) {                                \
        for (int64_t i = 0; i < nb; i++, x += QK) {                                                 \
            VF v[NV];                                                                               \
            LEG_PREFETCH(x, nb);                                                                    \
            LSFX(load)(x, v);                                                                       \
            const float max = LSFX(signed_amax)(x, v);                                              \
            const float d = max / NMAXF;                                                            \
            const float id = d ? 1.0f / d : 0.0f;                                                   \
            if (isinf(id)) { NAME(x, &y[i], 1); continue; }                                         \
            y[i].d = LSFX(fp16)(d);                                                                 \
            VI l[NV];                                                                               \
            for (int k = 0; k < NV; k++) {                                                          \
                VI q = LSFX(cvtt)(v[k] * LSFX(splatf)(id) + LSFX(splatf)(BIAS));                    \
                VI top = LSFX(splati)(TOP);                                                         \
                VI m = q < top;                                                                     \
                l[k] = (m & q) | (~m & top);                                                        \
            }                                                                                       \
            PACK;                                                                                   \
        }                                                                                           \
    }
LEG_SYM(q4_0_ref, block_q4_0, -8, 8.5f, 15, LSFX(pack4)(l, y[i].qs))
LEG_SYM(q5_0_ref, block_q5_0, -16, 16.5f, 31, LSFX(pack5)(l, y[i].qs, y[i].qh))

/* q4_1 (15 steps, clamp 15) and q5_1 (31 steps, no clamp). */
#define LEG_ASYM(NAME, BT, STEPS, TOP, PACK)                                                        \
    static LTGT void LSFX(NAME)(const float *x, BT *y, int64_t nb) {                                \
        int64_t i = 0;                                                                              \
        LEG_BATCH(NAME);                                                                            \
        for (; i < nb; i++, x += QK) {                                                              \
            VF v[NV];                                                                               \
            LEG_PREFETCH(x, nb);                                                                    \
            LSFX(load)(x, v);                                                                       \
            VF mn = v[0], mx = v[0];                                                                \
            for (int k = 1; k < NV; k++) { mn = LSFX(vmin)(mn, v[k]); mx = LSFX(vmax)(mx, v[k]); } \
            const float min = LSFX(hmin)(mn), max = LSFX(hmax)(mx);                                 \
            const float d = (max - min) / STEPS;                                                    \
            const float id = d ? 1.0f / d : 0.0f;                                                   \
            if (min == 0 || max == 0 || isinf(id)) { NAME(x, &y[i], 1); continue; }                 \
            y[i].d = LSFX(fp16)(d);                                                                 \
            y[i].m = LSFX(fp16)(min);                                                               \
            VI l[NV];                                                                               \
            for (int k = 0; k < NV; k++) {                                                          \
                VI q = LSFX(cvtt)((v[k] - LSFX(splatf)(min)) * LSFX(splatf)(id) + LSFX(splatf)(0.5f)); \
                VI top = LSFX(splati)(TOP);                                                         \
                VI m = q < top;                                                                     \
                l[k] = (m & q) | (~m & top);                                                        \
            }                                                                                       \
            PACK;                                                                                   \
        }                                                                                           \
    }
/* LW blocks at a time: the per-block min/max vectors are folded by a shuffle tree into one vector
 * (lane = block), so the scales of LW blocks cost one division each instead of LW latency-bound
 * horizontal reductions. d = (max - min)/STEPS and 1/d are IEEE divisions, correctly rounded as in
 * the scalar code; blocks with a zero min/max (signed-zero order) or an infinite 1/d go scalar. */
#if LW == 16
#define LEG_F4(OP, a, b, i1, i2) OP(_mm512_shuffle_f32x4(a, b, i1), _mm512_shuffle_f32x4(a, b, i2))
#define LEG_FP(OP, a, b, i1, i2) OP(_mm512_shuffle_ps(a, b, i1), _mm512_shuffle_ps(a, b, i2))
/* Per-block min and max of 4 blocks: 128-bit lane j of the result holds 4 partials of block j. */
static inline __attribute__((always_inline)) LTGT void LSFX(minmax4)(const float *x, __m512 *mn, __m512 *mx) {
    __m512 n[4], m[4];
#pragma GCC unroll 4
    for (int b = 0; b < 4; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * QK), v1 = _mm512_loadu_ps(x + b * QK + 16);
        n[b] = _mm512_min_ps(v0, v1);
        m[b] = _mm512_max_ps(v0, v1);
    }
    /* block 2k in 128-bit lanes 0-1, block 2k+1 in lanes 2-3 */
    const __m512 n0 = LEG_F4(_mm512_min_ps, n[0], n[1], 0x44, 0xEE), n1 = LEG_F4(_mm512_min_ps, n[2], n[3], 0x44, 0xEE);
    const __m512 m0 = LEG_F4(_mm512_max_ps, m[0], m[1], 0x44, 0xEE), m1 = LEG_F4(_mm512_max_ps, m[2], m[3], 0x44, 0xEE);
    *mn = LEG_F4(_mm512_min_ps, n0, n1, 0x88, 0xDD);
    *mx = LEG_F4(_mm512_max_ps, m0, m1, 0x88, 0xDD);
}
/* min/max of 16 blocks, lane b = block b. */
static inline __attribute__((always_inline)) LTGT void LSFX(minmaxB)(const float *x, VF *vmin, VF *vmax) {
    __m512 n[4], m[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) LSFX(minmax4)(x + q * 4 * QK, &n[q], &m[q]);
    /* lane j, elements 0-1: block 8k+j, elements 2-3: block 8k+4+j */
    const __m512 n0 = LEG_FP(_mm512_min_ps, n[0], n[1], 0x44, 0xEE), n1 = LEG_FP(_mm512_min_ps, n[2], n[3], 0x44, 0xEE);
    const __m512 m0 = LEG_FP(_mm512_max_ps, m[0], m[1], 0x44, 0xEE), m1 = LEG_FP(_mm512_max_ps, m[2], m[3], 0x44, 0xEE);
    /* element e of 128-bit lane j: block 4e+j; transpose to lane = block */
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    *vmin = (VF)_mm512_permutexvar_ps(tr, LEG_FP(_mm512_min_ps, n0, n1, 0x88, 0xDD));
    *vmax = (VF)_mm512_permutexvar_ps(tr, LEG_FP(_mm512_max_ps, m0, m1, 0x88, 0xDD));
}
#undef LEG_F4
#undef LEG_FP
static inline LTGT void LSFX(cvtph)(VF v, iqf_half *h) {
    _mm256_storeu_si256((__m256i *)h, _mm512_cvtps_ph((__m512)v, 0));
}
static inline LTGT VI LSFX(vmini)(VI a, VI b) { return (VI)_mm512_min_epi32((__m512i)a, (__m512i)b); }
#else
/* min/max of 8 blocks, lane b = block b. */
static inline __attribute__((always_inline)) LTGT void LSFX(minmaxB)(const float *x, VF *vmin, VF *vmax) {
    __m256 n[8], m[8];
#pragma GCC unroll 8
    for (int b = 0; b < 8; b++) {
        const __m256 v0 = _mm256_loadu_ps(x + b * QK), v1 = _mm256_loadu_ps(x + b * QK + 8);
        const __m256 v2 = _mm256_loadu_ps(x + b * QK + 16), v3 = _mm256_loadu_ps(x + b * QK + 24);
        n[b] = _mm256_min_ps(_mm256_min_ps(v0, v1), _mm256_min_ps(v2, v3));
        m[b] = _mm256_max_ps(_mm256_max_ps(v0, v1), _mm256_max_ps(v2, v3));
    }
#define LEG_P2(OP, a, b, i1, i2) OP(_mm256_permute2f128_ps(a, b, i1), _mm256_permute2f128_ps(a, b, i2))
#define LEG_SP(OP, a, b, i1, i2) OP(_mm256_shuffle_ps(a, b, i1), _mm256_shuffle_ps(a, b, i2))
    __m256 rn[4], rm[4], sn[2], sm[2];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* 128-bit lane j: block 2k+j */
        rn[k] = LEG_P2(_mm256_min_ps, n[2 * k], n[2 * k + 1], 0x20, 0x31);
        rm[k] = LEG_P2(_mm256_max_ps, m[2 * k], m[2 * k + 1], 0x20, 0x31);
    }
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++) { /* lane j, elements 0-1: block 4k+j, elements 2-3: block 4k+2+j */
        sn[k] = LEG_SP(_mm256_min_ps, rn[2 * k], rn[2 * k + 1], 0x44, 0xEE);
        sm[k] = LEG_SP(_mm256_max_ps, rm[2 * k], rm[2 * k + 1], 0x44, 0xEE);
    }
    /* element e of 128-bit lane j: block 2e+j; transpose to lane = block */
    const __m256i tr = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    *vmin = (VF)_mm256_permutevar8x32_ps(LEG_SP(_mm256_min_ps, sn[0], sn[1], 0x88, 0xDD), tr);
    *vmax = (VF)_mm256_permutevar8x32_ps(LEG_SP(_mm256_max_ps, sm[0], sm[1], 0x88, 0xDD), tr);
#undef LEG_P2
#undef LEG_SP
}
static inline LTGT void LSFX(cvtph)(VF v, iqf_half *h) {
    _mm_storeu_si128((__m128i *)h, _mm256_cvtps_ph((__m256)v, 0));
}
static inline LTGT VI LSFX(vmini)(VI a, VI b) { return (VI)_mm256_min_epi32((__m256i)a, (__m256i)b); }
#endif
#define LEG_ASYMB(NAME, BT, STEPS, TOP, PACK)                                                       \
    static LTGT void LSFX(NAME##_B)(const float *x, BT *y, uintptr_t pf) {                          \
        VF vmin, vmax;                                                                              \
        LSFX(minmaxB)(x, &vmin, &vmax);                                                             \
        const VF vd = (vmax - vmin) / LSFX(splatf)(STEPS);                                          \
        const VF vid = (VF)((VI)(LSFX(splatf)(1.0f) / vd) & (vd != LSFX(splatf)(0.0f)));            \
        const VF zero = LSFX(splatf)(0.0f);                                                         \
        const uint32_t spec = LSFX(bit31)((vmin == zero) | (vmax == zero) |                         \
                                          (LSFX(vabs)(vid) == LSFX(splatf)(INFINITY)));             \
        float fmin[LW], fid[LW];                                                                    \
        iqf_half hd[LW], hm[LW];                                                                    \
        memcpy(fmin, &vmin, sizeof fmin);                                                           \
        memcpy(fid, &vid, sizeof fid);                                                              \
        LSFX(cvtph)(vd, hd);                                                                        \
        LSFX(cvtph)(vmin, hm);                                                                      \
        for (int i = 0; i < LW; i++) {                                                              \
            __builtin_prefetch((const void *)(pf + i * QK * 4), 0, 2);                              \
            __builtin_prefetch((const void *)(pf + i * QK * 4 + 64), 0, 2);                         \
            if (spec >> i & 1) { NAME(x + i * QK, &y[i], 1); continue; }                            \
            y[i].d = hd[i];                                                                         \
            y[i].m = hm[i];                                                                         \
            VF v[NV];                                                                               \
            LSFX(load)(x + i * QK, v);                                                              \
            VI l[NV];                                                                               \
            for (int k = 0; k < NV; k++) {                                                          \
                VI q = LSFX(cvtt)((v[k] - LSFX(splatf)(fmin[i])) * LSFX(splatf)(fid[i]) + LSFX(splatf)(0.5f)); \
                l[k] = LSFX(vmini)(q, LSFX(splati)(TOP));                                           \
            }                                                                                       \
            PACK;                                                                                   \
        }                                                                                           \
    }
LEG_ASYMB(q4_1_ref, block_q4_1, 15, 15, LSFX(pack4)(l, y[i].qs))
LEG_ASYMB(q5_1_ref, block_q5_1, 31, 255, LSFX(pack5)(l, y[i].qs, y[i].qh))
#undef LEG_ASYMB
#define LEG_BATCH(NAME)                                                                             \
    for (; i + LW <= nb; i += LW, x += LW * QK) {                                                   \
        LSFX(NAME##_B)(x, y + i, (uintptr_t)LEG_NEXT_ROW(x, nb));                                   \
    }

LEG_ASYM(q4_1_ref, block_q4_1, 15, 15, LSFX(pack4)(l, y[i].qs))
LEG_ASYM(q5_1_ref, block_q5_1, 31, 255, LSFX(pack5)(l, y[i].qs, y[i].qh))

static LTGT void LSFX(q8_0_ref)(const float *x, block_q8_0 *y, int64_t nb) {
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
#undef LEG_SYM
#undef LEG_ASYM
#undef LEG_PREFETCH
#undef LEG_NEXT_ROW
#undef LEG_BATCH
