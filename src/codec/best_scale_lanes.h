/* best_scale_lanes.h - the vector kernels of best_scale.c, written once over the lane count: best_scale.c includes
 * this file once per instruction set, with BS_PASS and its width macros defined. No include
 * guard on purpose. */

/* Native vectors of BS_W lanes (GCC/Clang vector extensions): 16 at AVX-512, 8 at AVX2, 4 (SSE2
 * or whatever the target has) in the plain pass. The computation is defined on 16 logical lanes
 * (candidate c of a batch, or value j mod 16 of an element loop); a pass covers them with
 * NH = 16 / BS_W vectors. Lane-wise IEEE operations: every pass gives the same bits. */
#define W BS_W
#define NH (16 / BS_W)
#define VF BS_SFX(vf)
#define VI BS_SFX(vi)
typedef float VF __attribute__((vector_size(BS_W * 4), aligned(4)));
typedef int32_t VI __attribute__((vector_size(BS_W * 4), aligned(4)));
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(splat)(float f) {
    const VF z = { 0 };
    return f - z; /* broadcast; exact for every f, -0 included */
}
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(ld)(const float *p) {
#if BS_PASS == 2
    return (VF)_mm512_loadu_ps(p);
#elif BS_PASS == 1
    /* not memcpy: GCC's generic tuning splits an unaligned 256-bit copy through a stack temporary
     * in two 128-bit halves, and the reload stalls on store forwarding */
    return (VF)_mm256_loadu_ps(p);
#else
    VF v;
    memcpy(&v, p, sizeof v);
    return v;
#endif
}
static inline __attribute__((always_inline)) BS_TGT void BS_SFX(st)(float *p, VF v) {
#if BS_PASS == 2
    _mm512_storeu_ps(p, (__m512)v);
#elif BS_PASS == 1
    _mm256_storeu_ps(p, (__m256)v);
#else
    memcpy(p, &v, sizeof v);
#endif
}
/* clamp to [lo, hi] then round half to even (|v| < 2^22) */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(clampround)(VF v, VF lo, VF hi) {
    VI m = v < lo;
    v = (VF)((m & (VI)lo) | (~m & (VI)v));
    m = v > hi;
    v = (VF)((m & (VI)hi) | (~m & (VI)v));
    const VF mg = BS_SFX(splat)(MAGIC);
    return (v + mg) - mg;
}
/* the 16 logical lanes held in NH vectors, summed in sum16's fixed tree */
static inline __attribute__((always_inline)) BS_TGT float BS_SFX(hsum)(const VF *v) {
    float a[16];
    for (int h = 0; h < NH; h++) BS_SFX(st)(a + h * W, v[h]);
    return sum16(a);
}
#define SPLAT BS_SFX(splat)
#define LD BS_SFX(ld)
#define CR BS_SFX(clampround)
#define HSUM BS_SFX(hsum)

static BS_TGT void BS_SFX(weights)(const float *x, const float *qw, float sigma2, float *w) {
    if (qw) {
        for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
    } else {
        for (int j = 0; j < QK; j++) w[j] = 1;
    }
}

/* ---- the fast search (no imatrix, q8_0): 16 blocks at a time, logical lane b = block b ----
 * (see best_scale.h). Per lane the same IEEE operations in the same order at every level; the
 * batch composition never changes a lane's result (lanes only stop early when a further round
 * could not change them). */
#define VU BS_SFX(vu)
typedef uint32_t VU __attribute__((vector_size(BS_W * 4), aligned(4)));
/* the transposed arrays are the kernel's own, aligned to 64: whole aligned vector accesses (an
 * unaligned 256-bit access would be split in two by GCC's generic tuning and stall the loads
 * that follow on store forwarding) */
#define VFA BS_SFX(vfa)
typedef float VFA __attribute__((vector_size(BS_W * 4)));
#define LDA(p) ((VF)*(const VFA *)(const void *)(p))
#define STA(p, v) (*(VFA *)(void *)(p) = (VFA)(v))
#define VUA BS_SFX(vua)
typedef uint32_t VUA __attribute__((vector_size(BS_W * 4)));
#define LDU(p) ((VU)*(const VUA *)(const void *)(p))
#define STU(p, v) (*(VUA *)(void *)(p) = (VUA)(v))
#define FORH _Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(sel)(VI m, VF a, VF b) {
    return (VF)((m & (VI)a) | (~m & (VI)b));
}
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(selu)(VI m, VU a, VU b) {
    return ((VU)m & a) | (~(VU)m & b);
}
#define SEL BS_SFX(sel)
#define SELU BS_SFX(selu)
/* iqf_fp32_to_fp16 lane-wise (the same bit algorithm, copied from float16.c), after saturating
 * to the largest finite fp16 as fp16_sat does; non-finite lanes must not reach it. */
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(f2h_full)(VF f) {
    const VU w = (VU)f;
    VF base = ((VF)(w & 0x7fffffffu) * SPLAT(0x1.0p+112f)) * SPLAT(0x1.0p-110f);
    const VU shl1 = w + w, sign = w & 0x80000000u;
    VU bias = shl1 & 0xFF000000u;
    bias = SELU(bias < 0x71000000u, bias - bias + 0x71000000u, bias);
    base = (VF)((bias >> 1) + 0x07800000u) + base;
    const VU bits = (VU)base;
    const VU nonsign = ((bits >> 13) & 0x00007C00u) + (bits & 0x00000FFFu);
    return (sign >> 16) | SELU(shl1 > 0xFF000000u, nonsign - nonsign + 0x7E00u, nonsign);
}
/* iqf_fp16_to_fp32 lane-wise (same bit algorithm) */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(h2f_full)(VU hb) {
    const VU w = hb << 16, sign = w & 0x80000000u, two_w = w + w;
    const VF nv = (VF)((two_w >> 4) + (0xE0u << 23)) * SPLAT(0x1.0p-112f);
    const VF dv = (VF)((two_w >> 17) | (126u << 23)) - SPLAT(0.5f);
    return (VF)(sign | SELU(two_w < (1u << 27), (VU)dv, (VU)nv));
}
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(vabs)(VF v) {
    return (VF)((VU)v & 0x7fffffffu);
}
/* any lane of one vector set (mask lanes are 0 or -1) */
static inline __attribute__((always_inline)) BS_TGT bool BS_SFX(any1)(VI m) {
#if BS_PASS == 2
    return _mm512_movepi32_mask((__m512i)m) != 0;
#elif BS_PASS == 1
    return _mm256_movemask_ps((__m256)m) != 0;
#elif defined(__SSE2__)
    return _mm_movemask_ps((__m128)m) != 0;
#else
    int32_t o = 0;
    for (int u = 0; u < W; u++) o |= m[u];
    return o != 0;
#endif
}
static inline __attribute__((always_inline)) BS_TGT bool BS_SFX(any)(const VI *m) {
    VI o = m[0];
    for (int h = 1; h < NH; h++) o |= m[h];
    return BS_SFX(any1)(o);
}
#define H2F BS_SFX(h2f)
#define F2H BS_SFX(f2h)
#define VABS BS_SFX(vabs)
#define ANY BS_SFX(any)
/* The same conversions with a short path when every lane is a normal fp16 (the usual case):
 * round to nearest even on the bits, which is what the full algorithm computes there. */
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(f2h)(VF f) {
    const VF lim = SPLAT(65504.f), nlim = SPLAT(-65504.f);
    f = SEL(f > lim, lim, f);
    f = SEL(f < nlim, nlim, f);
    const VU w = (VU)f, a = w & 0x7fffffffu;
    if (BS_SFX(any1)((VI)(a < 0x38800000u))) return BS_SFX(f2h_full)(f);
    return ((w >> 16) & 0x8000u) | ((a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13);
}
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(h2f)(VU hb) {
    const VU e = hb & 0x7C00u;
    if (BS_SFX(any1)((VI)(e == 0u) | (VI)(e == 0x7C00u))) return BS_SFX(h2f_full)(hb);
    return (VF)(((hb & 0x8000u) << 16) | (((hb & 0x7fffu) << 13) + 0x38000000u));
}

/* Transpose nb (1..16) blocks of 32 (lanes past nb repeat the last block) into t[j*16 + b]:
 * data movement only, so each level may do it its own way (in-register tile transposes). A batch
 * is transposed one batch ahead of its use (the row loop), so the loads find the stores retired. */
static inline __attribute__((always_inline)) BS_TGT void BS_SFX(transpose)(int nb, const float *x, float *t) {
    const float *xb[16];
    for (int b = 0; b < 16; b++) xb[b] = x + (b < nb ? b : nb - 1) * QK;
#if BS_PASS == 2
    for (int half = 0; half < 2; half++) {
        __m512 r[16], u[16], v[16];
        for (int b = 0; b < 16; b++) r[b] = _mm512_loadu_ps(xb[b] + 16 * half);
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
         * blocks 4g..4g+3 */
        for (int c = 0; c < 4; c++) {
            const __m512 a0 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0x88);      /* L0,L2 of g0 | g1 */
            const __m512 a1 = _mm512_shuffle_f32x4(v[c], v[4 + c], 0xDD);      /* L1,L3 */
            const __m512 b0 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0x88);
            const __m512 b1 = _mm512_shuffle_f32x4(v[8 + c], v[12 + c], 0xDD);
            /* a0 = [g0L0 g0L2 g1L0 g1L2], b0 = [g2L0 g2L2 g3L0 g3L2] */
            const __m512 l0 = _mm512_shuffle_f32x4(a0, b0, 0x88); /* g0L0 g1L0 g2L0 g3L0 */
            const __m512 l2 = _mm512_shuffle_f32x4(a0, b0, 0xDD); /* L2 */
            const __m512 l1 = _mm512_shuffle_f32x4(a1, b1, 0x88); /* L1 */
            const __m512 l3 = _mm512_shuffle_f32x4(a1, b1, 0xDD); /* L3 */
            float *o = t + (16 * half + c) * 16;
            _mm512_store_ps(o + 0 * 64, l0);
            _mm512_store_ps(o + 1 * 64, l1);
            _mm512_store_ps(o + 2 * 64, l2);
            _mm512_store_ps(o + 3 * 64, l3);
        }
    }
#elif BS_PASS == 1
    /* 8x8 tiles: 128-bit halves of rows b and b + 4 side by side (the insert takes its half from
     * memory), then 4x4 transposes within the 128-bit lanes */
    for (int g = 0; g < 2; g++)
        for (int j0 = 0; j0 < QK; j0 += 4) {
            __m256 r[4], u[4];
            for (int b = 0; b < 4; b++)
                r[b] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(xb[8 * g + b] + j0)),
                                            _mm_loadu_ps(xb[8 * g + b + 4] + j0), 1);
            u[0] = _mm256_unpacklo_ps(r[0], r[1]);
            u[1] = _mm256_unpackhi_ps(r[0], r[1]);
            u[2] = _mm256_unpacklo_ps(r[2], r[3]);
            u[3] = _mm256_unpackhi_ps(r[2], r[3]);
            _mm256_store_ps(t + (j0 + 0) * 16 + 8 * g, _mm256_shuffle_ps(u[0], u[2], 0x44));
            _mm256_store_ps(t + (j0 + 1) * 16 + 8 * g, _mm256_shuffle_ps(u[0], u[2], 0xEE));
            _mm256_store_ps(t + (j0 + 2) * 16 + 8 * g, _mm256_shuffle_ps(u[1], u[3], 0x44));
            _mm256_store_ps(t + (j0 + 3) * 16 + 8 * g, _mm256_shuffle_ps(u[1], u[3], 0xEE));
        }
#else
    for (int b = 0; b < 16; b++)
        for (int j = 0; j < QK; j++) t[j * 16 + b] = xb[b][j];
#endif
}

/* The integers of the 16 lanes, transposed: ct[j*16 + b] (q - qmin as an integer). */
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(toint)(VF q) {
    return (VU)(q + SPLAT(MAGIC)) & 0xFFFFu; /* q integer-valued in [0, 255] */
}

/* Symmetric evaluation of nc (1 or 2) candidate scales per lane (normalized units): the integers
 * re-rounded at each, e = sum w r^2, A = sum w q x, B = sum w q^2 (j = 0..31 in order). */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(fsym_eval)(const float *xt, const float *wt, int nc, VF dq[2][NH], VF lo, VF hi, VF e[2][NH],
                  VF A[2][NH], VF B[2][NH]) {
    VF id[2][NH];
    for (int c = 0; c < nc; c++)
        FORH {
            const VI nz = dq[c][h] != SPLAT(0);
            id[c][h] = SEL(nz, SPLAT(1) / SEL(nz, dq[c][h], SPLAT(1)), SPLAT(0));
            e[c][h] = A[c][h] = B[c][h] = SPLAT(0);
        }
    for (int j = 0; j < QK; j++)
        FORH {
            const VF xv = LDA(xt + j * 16 + h * W);
            const VF wv = wt ? LDA(wt + j * 16 + h * W) : SPLAT(1);
            _Pragma("GCC unroll 2") for (int c = 0; c < nc; c++) {
                const VF q = CR(xv * id[c][h], lo, hi), r = xv - q * dq[c][h];
                const VF wq = wt ? wv * q : q;
                e[c][h] += wt ? (wv * r) * r : r * r;
                A[c][h] += wq * xv;
                B[c][h] += wq * q;
            }
        }
}

/* Fast symmetric search of nb blocks (see best_scale.h); wn: normalized weights (nb*32) or NULL
 * (uniform). Writes q - qmin to L[nb*32] and the fp16 scales to d[nb]. */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(fast_sym_impl)(float *xt, const float *wp, int qmin, int qmax, uint32_t *ct, uint32_t *dout) {
    VF amax[NH], mx[NH], ia[NH];
    VI tiny[NH];
    FORH amax[h] = mx[h] = SPLAT(0);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = LDA(xt + j * 16 + h * W), a = VABS(v);
            const VI g = a > amax[h];
            amax[h] = SEL(g, a, amax[h]);
            mx[h] = SEL(g, v, mx[h]);
        }
    FORH {
        tiny[h] = amax[h] < SPLAT(BS_TINY);
        ia[h] = SEL(tiny[h], SPLAT(0), SPLAT(1) / SEL(tiny[h], SPLAT(1), amax[h]));
    }
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = LDA(xt + j * 16 + h * W) * ia[h];
            STA(xt + j * 16 + h * W, v);
        }
    const VF lo = SPLAT((float)qmin), hi = SPLAT((float)qmax);
    /* starts: ggml's scale (the max at qmin) and the max at the other end (q8_0, whose grid is
     * symmetric: the max a quarter step inside the end) */
    const float alt = qmax == -qmin ? (float)qmax + 0.25f : (float)qmax;
    VF dq[2][NH], e[2][NH], A[2][NH], B[2][NH], be[NH], bA[NH], bB[NH];
    VU hc[2][NH], bh[NH], cur[NH];
    FORH {
        hc[0][h] = F2H(mx[h] / lo);
        hc[1][h] = F2H(mx[h] / SPLAT(alt));
        dq[0][h] = H2F(hc[0][h]) * ia[h];
        dq[1][h] = H2F(hc[1][h]) * ia[h];
    }
    BS_SFX(fsym_eval)(xt, wp, 2, dq, lo, hi, e, A, B);
    VI live[NH];
    FORH {
        const VI g = e[1][h] < e[0][h];
        be[h] = SEL(g, e[1][h], e[0][h]);
        bA[h] = SEL(g, A[1][h], A[0][h]);
        bB[h] = SEL(g, B[1][h], B[0][h]);
        bh[h] = SELU(g, hc[1][h], hc[0][h]);
        cur[h] = bh[h];
        live[h] = ~tiny[h];
    }
    /* least-squares rescale of the rounded values, at fp16, while the error falls */
    for (int it = 0; it < FAST_ITERS; it++) {
        VI act[NH];
        FORH {
            const VI ok = live[h] & (bB[h] > SPLAT(0));
            const VF dn = (bA[h] / SEL(ok, bB[h], SPLAT(1))) * amax[h];
            const VI fin = ok & (VABS(dn) <= SPLAT(3.0e38f));
            hc[0][h] = SELU(fin, F2H(SEL(fin, dn, SPLAT(0))), cur[h]);
            act[h] = fin & (VI)(hc[0][h] != cur[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
        }
        if (!ANY(act)) break;
        BS_SFX(fsym_eval)(xt, wp, 1, dq, lo, hi, e, A, B);
        FORH {
            const VI imp = act[h] & (e[0][h] < be[h]);
            be[h] = SEL(imp, e[0][h], be[h]);
            bh[h] = SELU(imp, hc[0][h], bh[h]);
            bA[h] = SEL(imp, A[0][h], bA[h]);
            bB[h] = SEL(imp, B[0][h], bB[h]);
            cur[h] = SELU(imp, hc[0][h], cur[h]);
            live[h] = imp;
        }
    }
    /* neighbouring fp16 scales (one ulp in magnitude, -1 then +1) */
    for (int st = 0; st < FAST_WALK; st++) {
        VI moved[NH];
        FORH {
            const VU mag = bh[h] & 0x7fffu, sg = bh[h] & 0x8000u;
            hc[0][h] = SELU(mag > 0u, sg | (mag - 1u), bh[h]);
            hc[1][h] = SELU(mag < (VU)(mag - mag + FP16_MAX_BITS), sg | (mag + 1u), bh[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        BS_SFX(fsym_eval)(xt, wp, 2, dq, lo, hi, e, A, B);
        FORH {
            moved[h] = (VI)SPLAT(0);
            for (int c = 0; c < 2; c++) {
                const VI imp = ~tiny[h] & (e[c][h] < be[h]);
                be[h] = SEL(imp, e[c][h], be[h]);
                bh[h] = SELU(imp, hc[c][h], bh[h]);
                moved[h] |= imp;
            }
        }
        if (!ANY(moved)) break;
    }
    /* the integers at the chosen scale */
    FORH {
        bh[h] = SELU(tiny[h], bh[h] - bh[h], bh[h]);
        const VF d = H2F(bh[h]) * ia[h];
        const VI nz = d != SPLAT(0);
        dq[0][h] = SEL(nz, SPLAT(1) / SEL(nz, d, SPLAT(1)), SPLAT(0));
        STU(dout + h * W, bh[h]);
    }
    for (int j = 0; j < QK; j++)
        FORH STU(ct + j * 16 + h * W, BS_SFX(toint)(CR(LDA(xt + j * 16 + h * W) * dq[0][h], lo, hi) - lo));
}
static BS_TGT void BS_SFX(fast_sym_u)(float *xt, int qmin, int qmax, uint32_t *ct, uint32_t *d) {
    BS_SFX(fast_sym_impl)(xt, NULL, qmin, qmax, ct, d);
}

/* CR for the fast kernels: the level's own min/max and rounding instructions. For finite v the
 * same value as CR (max/min select exactly as CR's compares do; a -0 that CR keeps and max turns
 * into +0 rounds to +0 either way; round-to-nearest-even as the magic-number trick). */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(crf)(VF v, VF lo, VF hi) {
#if BS_PASS == 2
    const __m512 c = _mm512_min_ps(_mm512_max_ps((__m512)v, (__m512)lo), (__m512)hi);
    return (VF)_mm512_roundscale_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#elif BS_PASS == 1
    const __m256 c = _mm256_min_ps(_mm256_max_ps((__m256)v, (__m256)lo), (__m256)hi);
    return (VF)_mm256_round_ps(c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
    return CR(v, lo, hi);
#endif
}
#define CRF BS_SFX(crf)
/* v < m ? v : m and v > m ? v : m (finite input: the level's min/max instructions select alike) */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(vmin)(VF v, VF m) {
#if BS_PASS == 2
    return (VF)_mm512_min_ps((__m512)v, (__m512)m);
#elif BS_PASS == 1
    return (VF)_mm256_min_ps((__m256)v, (__m256)m);
#elif defined(__SSE2__)
    return (VF)_mm_min_ps((__m128)v, (__m128)m);
#else
    return SEL(v < m, v, m);
#endif
}
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(vmax)(VF v, VF m) {
#if BS_PASS == 2
    return (VF)_mm512_max_ps((__m512)v, (__m512)m);
#elif BS_PASS == 1
    return (VF)_mm256_max_ps((__m256)v, (__m256)m);
#elif defined(__SSE2__)
    return (VF)_mm_max_ps((__m128)v, (__m128)m);
#else
    return SEL(v > m, v, m);
#endif
}
/* toint(CR(v, lo, hi) - lo): the integer minus lo, by the level's conversion where it has one
 * (round to nearest even, the default mode, as CR) */
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(cri)(VF v, VF lo, VF hi) {
#if BS_PASS == 2
    const __m512i q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps((__m512)v, (__m512)lo), (__m512)hi));
    return (VU)q - (VU)_mm512_cvtps_epi32((__m512)lo);
#elif BS_PASS == 1
    const __m256i q = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps((__m256)v, (__m256)lo), (__m256)hi));
    return (VU)q - (VU)_mm256_cvtps_epi32((__m256)lo);
#else
    return BS_SFX(toint)(CR(v, lo, hi) - lo);
#endif
}
#define CRI BS_SFX(cri)
#define VMIN BS_SFX(vmin)
#define VMAX BS_SFX(vmax)

/* ---- the fast search on sums (q4_0, q5_0, q4_1, q5_1 without an imatrix) ----
 * One pass per candidate computes only the least-squares sums of its re-rounded integers; the
 * error of those integers at any scale follows from the sums (E = S2 - 2 d A + d^2 B), so the
 * least-squares rescale of a candidate is scored without another pass (an upper bound of the
 * error after re-rounding at it). */

/* sums of nc (1 or 2) candidates: A = sum q x, B = sum q^2 (j = 0..31 in order) */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(fsym_sums)(const float *xt, int nc, VF dq[2][NH], VF lo, VF hi, VF A[2][NH], VF B[2][NH]) {
    VF id[2][NH];
    for (int c = 0; c < nc; c++)
        FORH {
            const VI nz = dq[c][h] != SPLAT(0);
            id[c][h] = SEL(nz, SPLAT(1) / SEL(nz, dq[c][h], SPLAT(1)), SPLAT(0));
            A[c][h] = B[c][h] = SPLAT(0);
        }
    FORH
        for (int j = 0; j < QK; j++) {
            const VF xv = LDA(xt + j * 16 + h * W);
            _Pragma("GCC unroll 2") for (int c = 0; c < nc; c++) {
                const VF q = CRF(xv * id[c][h], lo, hi);
                A[c][h] += q * xv;
                B[c][h] += q * q;
            }
        }
}
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(sym_err)(VF S2, VF d, VF A, VF B) {
    return (S2 - (d + d) * A) + (d * d) * B;
}

static BS_TGT void BS_SFX(fast_sym_s)(float *xt, int qmin, int qmax, uint32_t *ct, uint32_t *dout) {
    VF amax[NH], mx[NH], ia[NH], S2[NH];
    VI tiny[NH], scl[NH];
    FORH amax[h] = mx[h] = S2[h] = SPLAT(0);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = LDA(xt + j * 16 + h * W), a = VABS(v);
            const VI g = a > amax[h];
            amax[h] = SEL(g, a, amax[h]);
            mx[h] = SEL(g, v, mx[h]);
            S2[h] += v * v;
        }
    /* units: a lane whose max |x| is within 2^-40..2^40 works on x itself (ia = amax = 1: nothing
     * can overflow), others on x / max|x| */
    FORH {
        const VF am = amax[h];
        tiny[h] = am < SPLAT(BS_TINY);
        scl[h] = ~tiny[h] & ((am > SPLAT(0x1.0p40f)) | (am < SPLAT(0x1.0p-40f)));
        amax[h] = SEL(scl[h], am, SPLAT(1));
        ia[h] = SEL(scl[h], SPLAT(1) / SEL(scl[h], am, SPLAT(1)), SPLAT(1));
    }
    if (ANY(scl)) {
        FORH S2[h] = SPLAT(0);
        for (int j = 0; j < QK; j++)
            FORH {
                const VF v = LDA(xt + j * 16 + h * W) * ia[h];
                STA(xt + j * 16 + h * W, v);
                S2[h] += v * v;
            }
    }
    const VF lo = SPLAT((float)qmin), hi = SPLAT((float)qmax);
    VF dq[2][NH], A[2][NH], B[2][NH], be[NH];
    VU hc[2][NH], bh[NH];
    VI act[NH];
    FORH {
        be[h] = SPLAT(INFINITY);
        bh[h] = F2H(mx[h] / lo);
        act[h] = (VI)SPLAT(0);
    }
    /* start pairs: the max at qmin (ggml's scale) and at qmax; then (SYM_PAIRS 2) the max
     * SYM_T2 beyond each end (finer grids, the max clipped). Candidates in order: each start
     * (exact error), its least-squares rescale (a bound). */
    for (int pr = 0; pr < SYM_PAIRS; pr++) {
        const VF l0 = pr ? lo - SPLAT(SYM_T2) : lo, l1 = pr ? hi + SPLAT(SYM_T2) : hi;
        FORH {
            hc[0][h] = F2H(mx[h] / l0);
            hc[1][h] = F2H(mx[h] / l1);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        BS_SFX(fsym_sums)(xt, 2, dq, lo, hi, A, B);
        FORH
            for (int c = 0; c < 2; c++) {
                const VF e = BS_SFX(sym_err)(S2[h], dq[c][h], A[c][h], B[c][h]);
                VI g = e < be[h];
                be[h] = SEL(g, e, be[h]);
                bh[h] = SELU(g, hc[c][h], bh[h]);
                act[h] &= ~g;
                const VI ok = ~tiny[h] & (B[c][h] > SPLAT(0));
                const VF dn = (A[c][h] / SEL(ok, B[c][h], SPLAT(1))) * amax[h];
                const VI fin = ok & (VABS(dn) <= SPLAT(3.0e38f));
                const VU hn = F2H(SEL(fin, dn, SPLAT(0)));
                const VF el = BS_SFX(sym_err)(S2[h], H2F(hn) * ia[h], A[c][h], B[c][h]);
                g = fin & (el < be[h]);
                be[h] = SEL(g, el, be[h]);
                bh[h] = SELU(g, hn, bh[h]);
                act[h] |= g;
            }
    }
    /* more rounds: the sums of the chosen rescale, its own rescale */
    for (int it = 1; it < FASTS_ITERS; it++) {
        if (!ANY(act)) break;
        FORH dq[0][h] = H2F(bh[h]) * ia[h];
        BS_SFX(fsym_sums)(xt, 1, dq, lo, hi, A, B);
        FORH {
            be[h] = SEL(act[h], BS_SFX(sym_err)(S2[h], dq[0][h], A[0][h], B[0][h]), be[h]);
            const VI ok = act[h] & (B[0][h] > SPLAT(0));
            const VF dn = (A[0][h] / SEL(ok, B[0][h], SPLAT(1))) * amax[h];
            const VI fin = ok & (VABS(dn) <= SPLAT(3.0e38f));
            const VU hn = F2H(SEL(fin, dn, SPLAT(0)));
            const VF el = BS_SFX(sym_err)(S2[h], H2F(hn) * ia[h], A[0][h], B[0][h]);
            const VI g = fin & (el < be[h]);
            be[h] = SEL(g, el, be[h]);
            bh[h] = SELU(g, hn, bh[h]);
            act[h] = g;
        }
    }
    /* neighbouring fp16 scales (one ulp in magnitude), exact errors */
    for (int st = 0; st < FASTS_WALK; st++) {
        FORH {
            const VU mag = bh[h] & 0x7fffu, sg = bh[h] & 0x8000u;
            hc[0][h] = SELU(mag > 0u, sg | (mag - 1u), bh[h]);
            hc[1][h] = SELU(mag < (VU)(mag - mag + FP16_MAX_BITS), sg | (mag + 1u), bh[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        BS_SFX(fsym_sums)(xt, 2, dq, lo, hi, A, B);
        FORH {
            act[h] = (VI)SPLAT(0);
            for (int c = 0; c < 2; c++) {
                const VF e = BS_SFX(sym_err)(S2[h], dq[c][h], A[c][h], B[c][h]);
                const VI g = ~tiny[h] & (e < be[h]);
                be[h] = SEL(g, e, be[h]);
                bh[h] = SELU(g, hc[c][h], bh[h]);
                act[h] |= g;
            }
        }
        if (!ANY(act)) break;
    }
    FORH {
        bh[h] = SELU(tiny[h], bh[h] - bh[h], bh[h]);
        const VF d = H2F(bh[h]) * ia[h];
        const VI nz = d != SPLAT(0);
        dq[0][h] = SEL(nz, SPLAT(1) / SEL(nz, d, SPLAT(1)), SPLAT(0));
        STU(dout + h * W, bh[h]);
    }
    for (int j = 0; j < QK; j++)
        FORH STU(ct + j * 16 + h * W, CRI(LDA(xt + j * 16 + h * W) * dq[0][h], lo, hi));
}


/* ---- q4_1/q5_1 without an imatrix: the candidate search on integers (best_scale.h) ----
 * A block's values as integers U = (x - min) * 2^k / range in [0, 2^k] (k = 12 for q5_1, 11 for
 * q4_1), two per 32-bit lane
 * (value p in the low half, value p + 16 in the high half), so one candidate costs a handful of
 * 16-bit operations per pair: q = clamp(round((U - B) * A / 2^15), 0, nmax) (A = N 2^(15-k) maps
 * the range to N steps, B the first level's offset), sum q, sum q^2 and sum q U (the 32-bit sums of
 * adjacent products). Each candidate is scored by the error of its least-squares (d, m) in U
 * units (the largest C^2 / D, C = n sum q U - sum q sum U, D = n sum q^2 - (sum q)^2). All of it is
 * integer arithmetic (exact, the same at every level) up to that score. */
#define VS BS_SFX(vs)
typedef int16_t VS __attribute__((vector_size(BS_W * 4)));
static inline __attribute__((always_inline)) BS_TGT VS BS_SFX(mulhrs16)(VS a, VS b) {
#if BS_PASS == 2
    return (VS)_mm512_mulhrs_epi16((__m512i)a, (__m512i)b);
#elif BS_PASS == 1
    return (VS)_mm256_mulhrs_epi16((__m256i)a, (__m256i)b);
#else
    /* round(a b / 2^15), halves up, as pmulhrsw: (a b + 2^14) >> 15 (shifted non-negative first) */
    VS r;
    for (int i = 0; i < 2 * W; i++)
        r[i] = (int16_t)((int32_t)((uint32_t)((int32_t)a[i] * b[i] + 0x4000 + 0x40000000) >> 15) - 0x8000);
    return r;
#endif
}
/* 32-bit sums of adjacent 16-bit products (pmaddwd) */
static inline __attribute__((always_inline)) BS_TGT VI BS_SFX(madd16)(VS a, VS b) {
#if BS_PASS == 2
    return (VI)_mm512_madd_epi16((__m512i)a, (__m512i)b);
#elif BS_PASS == 1
    return (VI)_mm256_madd_epi16((__m256i)a, (__m256i)b);
#else
    VI r;
    for (int i = 0; i < W; i++) r[i] = (int32_t)a[2 * i] * b[2 * i] + (int32_t)a[2 * i + 1] * b[2 * i + 1];
    return r;
#endif
}
static inline __attribute__((always_inline)) BS_TGT VS BS_SFX(clamp16)(VS v, VS lo, VS hi) {
#if BS_PASS == 2
    return (VS)_mm512_min_epi16(_mm512_max_epi16((__m512i)v, (__m512i)lo), (__m512i)hi);
#elif BS_PASS == 1
    return (VS)_mm256_min_epi16(_mm256_max_epi16((__m256i)v, (__m256i)lo), (__m256i)hi);
#else
    VS m = v < lo;
    v = (m & lo) | (~m & v);
    m = v > hi;
    return (m & hi) | (~m & v);
#endif
}
static inline __attribute__((always_inline)) BS_TGT VS BS_SFX(max16)(VS v, VS lo) {
#if BS_PASS == 2
    return (VS)_mm512_max_epi16((__m512i)v, (__m512i)lo);
#elif BS_PASS == 1
    return (VS)_mm256_max_epi16((__m256i)v, (__m256i)lo);
#else
    const VS m = v < lo;
    return (m & lo) | (~m & v);
#endif
}
static inline __attribute__((always_inline)) BS_TGT VS BS_SFX(min16)(VS v, VS hi) {
#if BS_PASS == 2
    return (VS)_mm512_min_epi16((__m512i)v, (__m512i)hi);
#elif BS_PASS == 1
    return (VS)_mm256_min_epi16((__m256i)v, (__m256i)hi);
#else
    const VS m = v > hi;
    return (m & hi) | (~m & v);
#endif
}
/* round to the nearest integer (even on ties) of v in [0, 65535], as an integer */
static inline __attribute__((always_inline)) BS_TGT VU BS_SFX(rndu)(VF v) {
#if BS_PASS == 2
    return (VU)_mm512_cvtps_epi32((__m512)v);
#elif BS_PASS == 1
    return (VU)_mm256_cvtps_epi32((__m256)v);
#else
    return BS_SFX(toint)(CR(v, SPLAT(0), SPLAT(65535)));
#endif
}
/* SEL by the level's blend instruction (m lanes 0 or -1) */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(blend)(VI m, VF a, VF b) {
#if BS_PASS == 2
    return (VF)_mm512_mask_blend_ps(_mm512_movepi32_mask((__m512i)m), (__m512)b, (__m512)a);
#elif BS_PASS == 1
    return (VF)_mm256_blendv_ps((__m256)b, (__m256)a, (__m256)m);
#else
    return SEL(m, a, b);
#endif
}
/* One candidate per lane (a2, b2: A and B in both 16-bit halves): its sums over the 16 pairs.
 * sub/lo/hi (constants at every call): whether B is applied and q clamped below / above; a
 * candidate skips a clamp only where it cannot bind (iq_clamps). */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(icand)(const uint32_t *pt, int h, VU a2, VU b2, VS qhi, bool sub, bool lo, bool hi, VI *sq, VI *sqq,
              VI *squ) {
    const VS a = (VS)a2, b = (VS)b2, z = (VS)(a2 - a2);
    VS s = z;
    VI s2 = (VI)(a2 - a2), su = s2;
    _Pragma("GCC unroll 16") for (int p = 0; p < 16; p++) {
        const VS u = (VS)LDU(pt + p * 16 + h * W);
        VS q = BS_SFX(mulhrs16)(sub ? u - b : u, a);
        if (lo && hi) q = BS_SFX(clamp16)(q, z, qhi);
        else if (lo) q = BS_SFX(max16)(q, z);
        else if (hi) q = BS_SFX(min16)(q, qhi);
        s += q;
        s2 += BS_SFX(madd16)(q, q);
        su += BS_SFX(madd16)(q, u);
    }
    *sq = (VI)(((VU)s & 0xFFFFu) + ((VU)s >> 16));
    *sqq = s2;
    *squ = su;
}
/* Which clamps candidate (a, b) needs for U in [0, 2^k]: q = (v a + 2^14) >> 15 is >= 0 for
 * every v >= -b if b a < 2^14 (or b <= 0), and <= nmax for every v <= 2^k - b if
 * (2^k - b) a + 2^14 < (nmax + 1) 2^15. */
static inline __attribute__((always_inline)) int BS_SFX(iq_clamps)(int a, int b, int nmax, int k) {
    const int lo = b > 0 && b * a >= (1 << 14);
    const int hi = ((1 << k) - b) * a + (1 << 14) >= (nmax + 1) * (1 << 15);
    return lo | hi << 1;
}

/* The candidates: N steps over the range (A = N 2^(15-k)) and the first level B = O / N of the
 * range above the min (O = 0 or a fraction of a step: the min still rounds into level 0).
 * U in [0, 2^k]: k = 12 for q5_1, 11 for q4_1 (A about 240 either way). Chosen on kjv-3m's
 * weights and checked on N(0,1) data (docs/PERFORMANCE.md). */
#define IQ_NC5 10
static const int16_t BS_SFX(iq_a5)[IQ_NC5] = { 234, 238, 243, 248, 252, 234, 238, 243, 248, 252 };
static const int16_t BS_SFX(iq_b5)[IQ_NC5] = { 0, 0, 0, 0, 0, 35, 34, 34, 33, 33 };
#define IQ_NC4 4
static const int16_t BS_SFX(iq_a4)[IQ_NC4] = { 224, 248, 224, 248 };
static const int16_t BS_SFX(iq_b4)[IQ_NC4] = { 0, 0, 59, 53 };

/* Writes the packed words of the 16 lanes to wq (as pack_batch: nibble word k at wq[k * 16 + b],
 * q5_1's high bits at wq[8 * 16 + b]) and the fp16 d and m to dout, mout. */
static BS_TGT void BS_SFX(fast_asym_i)(float *xt, int nmax, uint32_t *wq, uint32_t *dout, uint32_t *mout) {
    VF mn[NH], mx[NH], amax[NH], ia[NH];
    VI tiny[NH], flat[NH], scl[NH], live[NH];
    FORH mn[h] = mx[h] = LDA(xt + h * W);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = LDA(xt + j * 16 + h * W);
            mn[h] = VMIN(v, mn[h]);
            mx[h] = VMAX(v, mx[h]);
        }
    /* units: a lane whose max |x| is within 2^-40..2^40 works on x itself (ia = amax = 1: nothing
     * can overflow), others on x / max|x| */
    FORH {
        const VF a0 = VABS(mn[h]), a1 = VABS(mx[h]);
        const VF am = SEL(a1 > a0, a1, a0);
        tiny[h] = am < SPLAT(BS_TINY);
        flat[h] = ~tiny[h] & (mn[h] == mx[h]);
        live[h] = ~tiny[h] & ~flat[h];
        scl[h] = ~tiny[h] & ((am > SPLAT(0x1.0p40f)) | (am < SPLAT(0x1.0p-40f)));
        amax[h] = SEL(scl[h], am, SPLAT(1));
        ia[h] = SEL(scl[h], SPLAT(1) / SEL(scl[h], am, SPLAT(1)), SPLAT(1));
    }
    if (ANY(scl))
        for (int j = 0; j < QK; j++)
            FORH STA(xt + j * 16 + h * W, LDA(xt + j * 16 + h * W) * ia[h]); /* x 1 elsewhere: exact */
    const VF hi = SPLAT((float)nmax);
    /* q4_1: no Lloyd step (it cost 9% of the time, SSE 0.818 -> 0.802 on kjv-3m) */
    const int ik = nmax == 15 ? 11 : 12, nc = nmax == 15 ? IQ_NC4 : IQ_NC5, nll = nmax == 15 ? 0 : 1;
    const int16_t *ta = nmax == 15 ? BS_SFX(iq_a4) : BS_SFX(iq_a5), *tb = nmax == 15 ? BS_SFX(iq_b4) : BS_SFX(iq_b5);
    const float top = (float)(1 << ik);
    /* the integers U, in working units (mn * ia is the min of the scaled values) */
    _Alignas(64) uint32_t pt[16 * 16];
    VF mnw[NH], rw[NH];
    VU su[NH];
    FORH {
        mnw[h] = mn[h] * ia[h];
        rw[h] = SEL(live[h], mx[h] * ia[h] - mnw[h], SPLAT(1));
        const VF sc = SPLAT(top) / rw[h];
        su[h] = (VU)(tiny[h] - tiny[h]);
        for (int p = 0; p < 16; p++) {
            /* x - min >= 0 and (x - min) * sc <= range * sc rounds to at most 2^k: no clamp */
            const VU u0 = BS_SFX(rndu)((LDA(xt + p * 16 + h * W) - mnw[h]) * sc);
            const VU u1 = BS_SFX(rndu)((LDA(xt + (p + 16) * 16 + h * W) - mnw[h]) * sc);
            STU(pt + p * 16 + h * W, u0 | (u1 << 16));
            su[h] += u0 + u1;
        }
    }
    const VS qhi = (VS)((VU)(su[0] - su[0]) + (uint32_t)(nmax | (nmax << 16)));
    /* the candidates, then one Lloyd step from the winner's least squares. The best so far per
     * lane: its C^2 (bcc), C, D and sum q as floats; a candidate wins if C^2 / D is larger
     * (compared as C^2 bD > bC^2 D, D > 0), the first one on ties. */
    VF bcc[NH], bcf[NH], bdf[NH];
    VI bq[NH];
    FORH {
        bcc[h] = SPLAT(-1);
        bcf[h] = SPLAT(0);
        bdf[h] = SPLAT(1);
        bq[h] = (VI)(su[h] - su[h]);
    }
    for (int c = 0; c < nc + nll; c++)
        FORH {
            VU a2, b2;
            if (c < nc) {
                a2 = (VU)(su[h] - su[h]) + (uint32_t)(uint16_t)ta[c] * 0x10001u;
                b2 = (VU)(su[h] - su[h]) + (uint32_t)(uint16_t)tb[c] * 0x10001u;
            } else {
                /* the winner's least-squares step and first level, rounded to integers (no winner:
                 * ggml's grid) */
                const VI ok = bcc[h] >= SPLAT(0);
                const VF du = SEL(ok, bcf[h] / bdf[h], SPLAT(top / (float)nmax));
                const VF muf = (__builtin_convertvector((VI)su[h], VF) - du * __builtin_convertvector(bq[h], VF)) * SPLAT(1.f / QK);
                const VU av = CRI(SPLAT(32768.f) / SEL(du > SPLAT(1), du, SPLAT(1)), SPLAT(1), SPLAT(32767));
                const VU bv = CRI(muf + SPLAT(16384.f), SPLAT(0), SPLAT(32767)) - 16384u;
                a2 = (av + 1u) * 0x10001u; /* CRI returns q - lo */
                b2 = (bv & 0xFFFFu) * 0x10001u;
            }
            VI sq, sqq, squ;
            const int cl = c < nc ? BS_SFX(iq_clamps)(ta[c], tb[c], nmax, ik) : 3;
            const bool sub = c == nc || tb[c] != 0;
            if (cl == 3) BS_SFX(icand)(pt, h, a2, b2, qhi, true, true, true, &sq, &sqq, &squ);
            else if (cl == 2) BS_SFX(icand)(pt, h, a2, b2, qhi, sub, false, true, &sq, &sqq, &squ);
            else if (cl == 1) BS_SFX(icand)(pt, h, a2, b2, qhi, sub, true, false, &sq, &sqq, &squ);
            else if (sub) BS_SFX(icand)(pt, h, a2, b2, qhi, true, false, false, &sq, &sqq, &squ);
            else BS_SFX(icand)(pt, h, a2, b2, qhi, false, false, false, &sq, &sqq, &squ);
            /* D >= 0 (Cauchy-Schwarz) and D = 0 only if every q is equal, then C = 0 too, and
             * 0 > bC^2 * 0 is false: such a candidate never wins */
            const VI C = (VI)(QK * squ - sq * (VI)su[h]), D = QK * sqq - sq * sq;
            const VF cf = __builtin_convertvector(C, VF), df = __builtin_convertvector(D, VF);
            const VF c2 = cf * cf;
            const VI g = c2 * bdf[h] > bcc[h] * df;
            bcc[h] = BS_SFX(blend)(g, c2, bcc[h]);
            bcf[h] = BS_SFX(blend)(g, cf, bcf[h]);
            bdf[h] = BS_SFX(blend)(g, df, bdf[h]);
            bq[h] = (VI)BS_SFX(blend)(g, (VF)sq, (VF)bq[h]);
        }
    /* the winner's (d, m) at fp16 and the integers re-rounded there (a least-squares step on the
     * floats after it gains about a tenth of the next candidate's worth and costs five: none) */
    FORH {
        const VI ok = bcc[h] >= SPLAT(0);
        const VF du = SEL(ok, bcf[h] / bdf[h], SPLAT(top / (float)nmax));
        const VF muf = (__builtin_convertvector((VI)su[h], VF) - du * __builtin_convertvector(bq[h], VF)) * SPLAT(1.f / QK);
        const VF s = rw[h] * SPLAT(1.f / top);
        const VF d = (du * s) * amax[h], m = (mnw[h] + muf * s) * amax[h];
        const VU z = (VU)(su[h] - su[h]);
        const VU hd = SELU(live[h], F2H(SEL(live[h], d, SPLAT(0))), z);
        const VU hm = SELU(live[h], F2H(SEL(live[h], m, SPLAT(0))), SELU(flat[h], F2H(SEL(flat[h], mn[h], SPLAT(0))), z));
        STU(dout + h * W, hd);
        STU(mout + h * W, hm);
        const VF dq = H2F(hd) * ia[h], mq = H2F(hm) * ia[h];
        const VI nz = dq != SPLAT(0);
        const VF id = SEL(nz, SPLAT(1) / SEL(nz, dq, SPLAT(1)), SPLAT(0));
        /* packed as they are rounded: value j and j + 16 share a byte, q5_1's bit 4 to bit j */
        VU qh = z;
        for (int k = 0; k < 4; k++) {
            VU v = z;
            for (int t = 0; t < 4; t++) {
                const int j = 4 * k + t;
                const VU qa = CRI((LDA(xt + j * 16 + h * W) - mq) * id, SPLAT(0), hi);
                const VU qb = CRI((LDA(xt + (j + 16) * 16 + h * W) - mq) * id, SPLAT(0), hi);
                if (nmax == 31) {
                    v |= ((qa & 0xFu) | ((qb & 0xFu) << 4)) << (8 * t);
                    qh |= (j >= 4 ? (qa & 0x10u) << (j - 4) : (qa & 0x10u) >> (4 - j)) | ((qb & 0x10u) << (j + 12));
                } else {
                    v |= (qa | (qb << 4)) << (8 * t); /* q <= 15 */
                }
            }
            STU(wq + k * 16 + h * W, v);
        }
        if (nmax == 31) STU(wq + 8 * 16 + h * W, qh);
    }
}

static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(store_words)(int kind, const uint32_t *wq, const uint32_t *d, const uint32_t *m, int nb, void *vy,
                    int64_t i0);
/* Packs the 16 lanes' integers ct (transposed) into blocks i0 .. i0+nb-1 of a legacy row (kind as
 * iqf_best_legacy_row): the packed words are built lane-wise, then stored per block. */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(pack_batch)(int kind, const uint32_t *ct, const uint32_t *d, const uint32_t *m, int nb,
                   void *vy, int64_t i0) {
    _Alignas(64) uint32_t wq[9 * 16];
    const int nw = kind == 4 ? 8 : 4;
    for (int k = 0; k < nw; k++)
        FORH {
            VU v = LDU(ct + h * W) - LDU(ct + h * W); /* 0 */
            for (int t = 0; t < 4; t++) {
                VU byte;
                if (kind == 4) byte = (LDU(ct + (4 * k + t) * 16 + h * W) - 127u) & 0xFFu;
                else byte = (LDU(ct + (4 * k + t) * 16 + h * W) & 0xFu) | ((LDU(ct + (4 * k + t + 16) * 16 + h * W) & 0xFu) << 4);
                v |= byte << (8 * t);
            }
            STU(wq + k * 16 + h * W, v);
        }
    if (kind == 2 || kind == 3)
        FORH {
            VU v = LDU(ct + h * W) - LDU(ct + h * W);
            for (int j = 0; j < QK; j++) {
                const VU b4 = LDU(ct + j * 16 + h * W) & 0x10u; /* bit 4 to bit j */
                v |= j >= 4 ? b4 << (j - 4) : b4 >> (4 - j);
            }
            STU(wq + 8 * 16 + h * W, v);
        }
    BS_SFX(store_words)(kind, wq, d, m, nb, vy, i0);
}
/* Stores blocks i0 .. i0+nb-1 from the lane-wise packed words wq (word k of lane b at
 * wq[k * 16 + b]: 4 nibble words (8 for q8_0), q5's high bits at wq[8 * 16 + b]). */
static inline __attribute__((always_inline)) BS_TGT void
BS_SFX(store_words)(int kind, const uint32_t *wq, const uint32_t *d, const uint32_t *m, int nb, void *vy,
                    int64_t i0) {
    const int nw = kind == 4 ? 8 : 4;
    for (int b = 0; b < nb; b++) {
        /* word by word: a 16-byte copy of words stored one by one would stall on forwarding */
        uint8_t *qs, *qh = NULL;
        const iqf_half hd = (iqf_half)d[b], hm = (iqf_half)m[b];
        switch (kind) {
        case 0: { block_q4_0 *y = (block_q4_0 *)vy + i0 + b; y->d = hd; qs = y->qs; break; }
        case 1: { block_q4_1 *y = (block_q4_1 *)vy + i0 + b; y->d = hd; y->m = hm; qs = y->qs; break; }
        case 2: { block_q5_0 *y = (block_q5_0 *)vy + i0 + b; y->d = hd; qs = y->qs; qh = y->qh; break; }
        case 3: { block_q5_1 *y = (block_q5_1 *)vy + i0 + b; y->d = hd; y->m = hm; qs = y->qs; qh = y->qh; break; }
        default: { block_q8_0 *y = (block_q8_0 *)vy + i0 + b; y->d = hd; qs = (uint8_t *)y->qs; break; }
        }
        for (int k = 0; k < nw; k++) memcpy(qs + 4 * k, &wq[k * 16 + b], 4);
        if (qh) memcpy(qh, &wq[8 * 16 + b], 4);
    }
}

/* ---- symmetric: xa = x / amax in [-1, 1]; the scale in the same units ---- */

/* Weighted error of the block at normalized scale da (integers re-rounded at it); writes the
 * integers and the least-squares sums. */
static BS_TGT float BS_SFX(sym_eval)(const float *xa, const float *wn, float da, float lo,
                                     float hi, float *l, float *sxq, float *sq2) {
    const VF id = SPLAT(da != 0 ? 1 / da : 0), vlo = SPLAT(lo), vhi = SPLAT(hi), vd = SPLAT(da);
    VF e[NH], a[NH], b[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = SPLAT(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * W;
            const VF x = LD(xa + j), w = LD(wn + j);
            const VF q = CR(x * id, vlo, vhi);
            BS_SFX(st)(l + j, q);
            const VF r = x - q * vd, wq = w * q;
            e[h] += w * r * r;
            a[h] += wq * x;
            b[h] += wq * q;
        }
    }
    *sxq = HSUM(a);
    *sq2 = HSUM(b);
    return HSUM(e);
}

/* Candidate sums, 16 candidates per vector (lane c: inverse scale ids[c]), each summed over the
 * 32 values in order: q = round(clamp(id * (xs - off), lo, hi)), sxq += wx*q, sq2 += (wn*q)*q and, if
 * sq is not NULL, sq += wn*q. nc is padded to a multiple of 16 by repeating the last id. */
static BS_TGT void BS_SFX(cand_sums)(int nc, float *ids, float off, const float *xs,
                                     const float *wx, const float *wn, float lo, float hi,
                                     float *sxq, float *sq2, float *sq) {
    while (nc % 16) {
        ids[nc] = ids[nc - 1];
        nc++;
    }
    const VF vlo = SPLAT(lo), vhi = SPLAT(hi);
    for (int c = 0; c < nc; c += W) {
        const VF id = LD(ids + c), vo = SPLAT(off);
        /* two independent chains (even and odd j), added at the end: half the add latency */
        VF a = SPLAT(0), b = a, e = a, a1 = a, b1 = a, e1 = a;
        for (int j = 0; j < QK; j += 2) {
            const VF q = CR((SPLAT(xs[j]) - vo) * id, vlo, vhi);
            const VF q1 = CR((SPLAT(xs[j + 1]) - vo) * id, vlo, vhi);
            const VF wq = SPLAT(wn[j]) * q, wq1 = SPLAT(wn[j + 1]) * q1;
            a += SPLAT(wx[j]) * q;
            a1 += SPLAT(wx[j + 1]) * q1;
            b += wq * q;
            b1 += wq1 * q1;
            e += wq;
            e1 += wq1;
        }
        a += a1;
        b += b1;
        e += e1;
        BS_SFX(st)(sxq + c, a);
        BS_SFX(st)(sq2 + c, b);
        if (sq) BS_SFX(st)(sq + c, e);
    }
}

/* The candidate with the largest score sxq^2/sq2 (sq2 > 0), the first one on ties; -1 if none.
 * Lane-wise over the batches of 16 (as cand_sums padded them), then across the lanes. */
static BS_TGT int BS_SFX(best_score)(int nc, const float *sxq, const float *sq2) {
    const VF none = SPLAT(-1);
    VF bs = none;
    VI bi = (VI)SPLAT(0) - 1, lane;
    for (int k = 0; k < W; k++) lane[k] = k;
    for (int c = 0; c < (nc + 15) / 16 * 16; c += W) {
        const VF a = LD(sxq + c), b = LD(sq2 + c);
        const VI pos = b > SPLAT(0);
        const VF sc = (VF)((pos & (VI)(a * a / b)) | (~pos & (VI)none));
        const VI better = sc > bs;
        bs = (VF)((better & (VI)sc) | (~better & (VI)bs));
        bi = (better & (lane + c)) | (~better & bi);
    }
    float best = -1;
    int idx = -1;
    for (int k = 0; k < W; k++)
        if (bi[k] >= 0 && (bs[k] > best || (bs[k] == best && bi[k] < idx))) {
            best = bs[k];
            idx = bi[k];
        }
    return idx;
}

static BS_TGT iqf_half BS_SFX(sym_block)(const float *x, const float *w, int qmin, int qmax,
                                         uint8_t *L) {
    {
        /* the fast search: uniform weights (no imatrix), and q8_0 */
        float wn0[QK];
        const bool uni = uniform_weights(w, wn0);
        if (uni || qmax == -qmin) {
            _Alignas(64) float xt[QK * 16], wt[QK * 16];
            _Alignas(64) uint32_t ct[QK * 16], d[16];
            BS_SFX(transpose)(1, x, xt);
            if (!uni) {
                BS_SFX(transpose)(1, wn0, wt);
                BS_SFX(fast_sym_impl)(xt, wt, qmin, qmax, ct, d);
            } else if (qmax != -qmin) {
                BS_SFX(fast_sym_s)(xt, qmin, qmax, ct, d);
            } else {
                BS_SFX(fast_sym_u)(xt, qmin, qmax, ct, d);
            }
            for (int j = 0; j < QK; j++) L[j] = (uint8_t)ct[j * 16];
            return (iqf_half)d[0];
        }
    }
    float amax = 0, max = 0;
    for (int j = 0; j < QK; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax < BS_TINY) {
        for (int j = 0; j < QK; j++) L[j] = (uint8_t)(-qmin);
        return 0;
    }
    float wn[QK], xa[QK], wx[QK];
    norm_weights(w, wn);
    const float ia = 1 / amax;
    for (int j = 0; j < QK; j++) {
        xa[j] = x[j] * ia;
        wx[j] = wn[j] * xa[j];
    }
    const float s = max > 0 ? 1.f : -1.f, lo = (float)qmin, hi = (float)qmax;

    /* Candidates: the max maps to qmin or to qmax, +-t. Score: sxq^2 / sq2 (maximize). */
    float ids[MAXC], sxqs[MAXC], sq2s[MAXC];
    int nc = 0;
    for (int side = 0; side < 2; side++) {
        const float lv = side ? hi : -lo; /* magnitude of the target level */
        const float sg = side ? s : -s;   /* sign of the inverse scale */
        for (int k = -SYM_NT; k < SYM_NT && nc < MAXC; k++) {
            const float m = lv + (SYM_T / SYM_NT) * (float)k;
            if (m > 0.5f) ids[nc++] = sg * m;
        }
    }
    BS_SFX(cand_sums)(nc, ids, 0.f, xa, wx, wn, lo, hi, sxqs, sq2s, NULL);
    const int bc = BS_SFX(best_score)(nc, sxqs, sq2s);
    const bool have = bc >= 0;
    const float best_sxq = have ? sxqs[bc] : 0, best_sq2 = have ? sq2s[bc] : 0;

    /* Refine at fp16: round, re-round the integers, re-solve, while the error falls. */
    float l[QK], bl[QK];
    iqf_half bh = 0;
    float be = INFINITY;
    iqf_half h = fp16_sat(have ? (double)best_sxq / best_sq2 * amax : (double)max / lo);
    for (int it = 0; it < REFINE_ITERS; it++) {
        float sxq, sq2;
        const float e = BS_SFX(sym_eval)(xa, wn, IQF_FP16_TO_FP32(h) * ia, lo, hi, l, &sxq, &sq2);
        if (!(e < be)) break;
        be = e;
        bh = h;
        memcpy(bl, l, sizeof bl);
        if (!(sq2 > 0)) break;
        const iqf_half nh = fp16_sat((double)sxq / sq2 * amax);
        if (nh == h) break;
        h = nh;
    }
    /* Neighbouring fp16 scales. */
    for (int st = 0; st < WALK_STEPS; st++) {
        bool moved = false;
        for (int dir = -1; dir <= 1; dir += 2) {
            iqf_half nh;
            if (!fp16_step(bh, dir, &nh)) continue;
            float sxq, sq2;
            const float e = BS_SFX(sym_eval)(xa, wn, IQF_FP16_TO_FP32(nh) * ia, lo, hi, l, &sxq, &sq2);
            if (e < be) {
                be = e;
                bh = nh;
                memcpy(bl, l, sizeof bl);
                moved = true;
            }
        }
        if (!moved) break;
    }
    if (!(be < INFINITY)) { /* not reached for finite input; keep the block valid anyway */
        for (int j = 0; j < QK; j++) L[j] = (uint8_t)(-qmin);
        return 0;
    }
    for (int j = 0; j < QK; j++) L[j] = (uint8_t)((int)bl[j] - qmin);
    return bh;
}

/* ---- asymmetric: x ~ d*q + m. Candidates on xr = (x - min)/range in [0, 1]; evaluation on
 * xa = x / amax ---- */

static BS_TGT float BS_SFX(asym_eval)(const float *xa, const float *wn, float da, float ma,
                                      float hi, float *l, float s3[3]) {
    const VF id = SPLAT(da != 0 ? 1 / da : 0), vlo = SPLAT(0), vhi = SPLAT(hi), vd = SPLAT(da);
    const VF vm = SPLAT(ma);
    VF e[NH], a[NH], b[NH], c[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = c[h] = SPLAT(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * W;
            const VF x = LD(xa + j), w = LD(wn + j);
            const VF q = CR((x - vm) * id, vlo, vhi);
            BS_SFX(st)(l + j, q);
            const VF r = x - (q * vd + vm), wq = w * q;
            e[h] += w * r * r;
            a[h] += wq;
            b[h] += wq * q;
            c[h] += wq * x;
        }
    }
    s3[0] = HSUM(a);
    s3[1] = HSUM(b);
    s3[2] = HSUM(c);
    return HSUM(e);
}

static BS_TGT void BS_SFX(asym_block)(const float *x, const float *w, int nmax, uint8_t *L,
                                      iqf_half *d, iqf_half *m) {
    {
        float wn0[QK];
        /* the fast search without an imatrix (fast_asym_i) */
        if (uniform_weights(w, wn0)) {
            _Alignas(64) float xt[QK * 16];
            _Alignas(64) uint32_t wq[9 * 16], dd[16], mm[16];
            BS_SFX(transpose)(1, x, xt);
            BS_SFX(fast_asym_i)(xt, nmax, wq, dd, mm);
            for (int j = 0; j < 16; j++) {
                const uint32_t by = (wq[(j / 4) * 16] >> (8 * (j % 4))) & 0xFFu, qh = wq[8 * 16];
                L[j] = (uint8_t)((by & 0xFu) | (nmax == 31 ? ((qh >> j) & 1u) << 4 : 0u));
                L[j + 16] = (uint8_t)((by >> 4) | (nmax == 31 ? ((qh >> (j + 16)) & 1u) << 4 : 0u));
            }
            *d = (iqf_half)dd[0];
            *m = (iqf_half)mm[0];
            return;
        }
    }
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK; j++) {
        mn = x[j] < mn ? x[j] : mn;
        mx = x[j] > mx ? x[j] : mx;
    }
    const float amax = fmaxf(fabsf(mn), fabsf(mx));
    if (amax < BS_TINY || mn == mx) {
        memset(L, 0, QK);
        *d = 0;
        *m = amax < BS_TINY ? 0 : fp16_sat(mn);
        return;
    }
    const float ia = 1 / amax;
    float wn[QK], xa[QK], xr[QK], wr[QK];
    norm_weights(w, wn);
    const float mna = mn * ia, ra = mx * ia - mna; /* range in xa units, > 0 */
    const float ir = 1 / ra;
    float t0[16] = { 0 }, t1[16] = { 0 }, t2[16] = { 0 };
    for (int j = 0; j < QK; j += 16) {
        for (int u = 0; u < 16; u++) {
            xa[j + u] = x[j + u] * ia;
            xr[j + u] = (xa[j + u] - mna) * ir;
            wr[j + u] = wn[j + u] * xr[j + u];
            t0[u] += wn[j + u];
            t1[u] += wr[j + u];
            t2[u] += wr[j + u] * xr[j + u];
        }
    }
    const double sw = sum16(t0), swx = sum16(t1), swx2 = sum16(t2);
    const float hi = (float)nmax;
    double best_e = INFINITY, bd = 1.0 / nmax, bm = 0;
    float ids[MAXC], sxqs[MAXC], sq2s[MAXC], sqs[MAXC];
    int nc = 0;
    /* Stage 1 (4 passes): the block's min maps to 0 or is clipped, offset o = p/(3 nmax)
     * (p = 0..3) in xr units; inverse scales (nmax + t) / (1 - o), t in [-0.8, 0.7].
     * Stage 2: the offset and scale of the winner (as ggml's sequential search shifts its min),
     * inverse scales +-16% around it in steps of 1%. */
    for (int stage = 0; stage < 5; stage++) {
        float off;
        nc = 0;
        if (stage < 4) {
            off = (float)stage / (3 * hi);
            for (int k = -8; k < 8; k++) ids[nc++] = (hi + 0.1f * (float)k) / (1 - off);
        } else {
            if (!(best_e < INFINITY) || !(bd > 0)) break;
            off = (float)bm;
            for (int k = -16; k < 16; k++) ids[nc++] = (float)(1 / bd) * (1 + 0.01f * (float)k);
        }
        BS_SFX(cand_sums)(nc, ids, off, xr, wr, wn, 0, hi, sxqs, sq2s, sqs);
        for (int k = 0; k < nc; k++) {
            /* sums of q against xr: sxq = sum wn*xr*q (xr, not xr - off) */
            const double sxq = sxqs[k], sq2 = sq2s[k], sq = sqs[k];
            const double D = sw * sq2 - sq * sq;
            if (!(D > 1e-9 * sw * sq2)) continue;
            const double dd = (sw * sxq - swx * sq) / D, mm = (sq2 * swx - sq * sxq) / D;
            const double e = swx2 - dd * sxq - mm * swx;
            if (e < best_e) {
                best_e = e;
                bd = dd;
                bm = mm;
            }
        }
    }

    /* fp16 refinement in xa units: da = d/amax, ma = m/amax. */
    double swa = 0;
    for (int j = 0; j < QK; j++) swa += (double)wn[j] * xa[j];
    float l[QK], bl[QK];
    float be = INFINITY;
    iqf_half bhd = 0, bhm = 0;
    iqf_half hd = fp16_sat(bd * ra * amax), hm = fp16_sat(((double)mna + bm * ra) * amax);
    for (int it = 0; it < REFINE_ITERS; it++) {
        float s3[3];
        const float e = BS_SFX(asym_eval)(xa, wn, IQF_FP16_TO_FP32(hd) * ia, IQF_FP16_TO_FP32(hm) * ia,
                                          hi, l, s3);
        if (!(e < be)) break;
        be = e;
        bhd = hd;
        bhm = hm;
        memcpy(bl, l, sizeof bl);
        const double D = sw * s3[1] - (double)s3[0] * s3[0];
        if (!(D > 1e-9 * sw * s3[1])) break;
        const double dd = (sw * s3[2] - swa * s3[0]) / D, mm = (s3[1] * swa - (double)s3[0] * s3[2]) / D;
        const iqf_half nd = fp16_sat(dd * amax), nm = fp16_sat(mm * amax);
        if (nd == hd && nm == hm) break;
        hd = nd;
        hm = nm;
    }
    for (int st = 0; st < WALK_STEPS; st++) {
        bool moved = false;
        for (int which = 0; which < 2; which++) {
            for (int dir = -1; dir <= 1; dir += 2) {
                iqf_half nd = bhd, nm = bhm;
                if (!fp16_step(which ? bhm : bhd, dir, which ? &nm : &nd)) continue;
                float s3[3];
                const float e = BS_SFX(asym_eval)(xa, wn, IQF_FP16_TO_FP32(nd) * ia,
                                                  IQF_FP16_TO_FP32(nm) * ia, hi, l, s3);
                if (e < be) {
                    be = e;
                    bhd = nd;
                    bhm = nm;
                    memcpy(bl, l, sizeof bl);
                    moved = true;
                }
            }
        }
        if (!moved) break;
    }
    if (!(be < INFINITY)) { /* not reached for finite input */
        memset(L, 0, QK);
        *d = 0;
        *m = fp16_sat(mn);
        return;
    }
    for (int j = 0; j < QK; j++) L[j] = (uint8_t)bl[j];
    *d = bhd;
    *m = bhm;
}


/* ---- 16-level non-uniform grids (IQ4): index = #{k in 1..15 : v >= thr[k]} ---- */

/* Candidate sums, 16 candidate inverse scales per vector, summed over the 32 values in order. */
static BS_TGT void BS_SFX(grid_cands)(const iqf_best_grid16 *g, const float *x, const float *w,
                                      float *ids, int nc, float *sxq, float *sq2) {
    while (nc % 16) {
        ids[nc] = ids[nc - 1];
        nc++;
    }
    VF thr[16], dk[16];
    for (int k = 1; k < 16; k++) {
        thr[k] = SPLAT(g->thr[k]);
        dk[k] = SPLAT(g->v[k] - g->v[k - 1]);
    }
    const VF v0 = SPLAT(g->v[0]);
    for (int c = 0; c < nc; c += W) {
        const VF id = LD(ids + c);
        VF a = SPLAT(0), b = a;
        for (int j = 0; j < QK; j++) {
            const VF xj = SPLAT(x[j]), al = xj * id;
            VF q = v0;
            for (int k = 1; k < 16; k++) q += (VF)((VI)(al >= thr[k]) & (VI)dk[k]);
            const VF wq = SPLAT(w[j]) * q;
            a += wq * xj;
            b += wq * q;
        }
        BS_SFX(st)(sxq + c, a);
        BS_SFX(st)(sq2 + c, b);
    }
}

/* Weighted error of 32 values decoded at scale s (indices re-chosen, written to L). */
static BS_TGT float BS_SFX(grid_eval)(const iqf_best_grid16 *g, const float *x, const float *w,
                                      float s, uint8_t *L, float *sxq, float *sq2) {
    const VF id = SPLAT(s != 0 ? 1 / s : 0), vs = SPLAT(s), v0 = SPLAT(g->v[0]);
    VF e[NH], a[NH], b[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = SPLAT(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * W;
            const VF xj = LD(x + j), wj = LD(w + j), al = xj * id;
            VF q = v0;
            VI li = (VI)SPLAT(0);
            for (int k = 1; k < 16; k++) {
                const VI ge = (VI)(al >= SPLAT(g->thr[k]));
                q += (VF)(ge & (VI)SPLAT(g->v[k] - g->v[k - 1]));
                li -= ge;
            }
            if (s == 0) { /* d = 0: every index decodes to 0; store the index of level 1 */
                li = (VI)SPLAT(0) + 8;
                q = SPLAT(0);
            }
            for (int u = 0; u < W; u++) L[j + u] = (uint8_t)li[u];
            const VF r = xj - vs * q, wq = wj * q;
            e[h] += wj * r * r;
            a[h] += wq * xj;
            b[h] += wq * q;
        }
    }
    if (sxq) *sxq = HSUM(a);
    if (sq2) *sq2 = HSUM(b);
    return HSUM(e);
}

/* A row's mean square in 16 partial sums (value i to sum i % 16, in order) added as sum16: the
 * same bits at every level (legacy.c's row_sigma2 sums serially: 3-4 cycles a value). */
static inline __attribute__((always_inline)) BS_TGT float BS_SFX(row_sigma2_16)(const float *x, int64_t n) {
    VF a[NH];
    FORH a[h] = SPLAT(0);
    for (int64_t j = 0; j < n; j += 16)
        FORH {
            const VF v = LD(x + j + h * W);
            a[h] += v * v;
        }
    return HSUM(a) / (float)n;
}

/* The normalized weights of 16 transposed blocks: w = qw * sqrt(sigma2 + x^2) (weights()), then
 * norm_weights()'s rules lane-wise (the same IEEE operations, so the same bits). */
static inline __attribute__((always_inline)) BS_TGT VF BS_SFX(vsqrt)(VF v) {
#if BS_PASS == 2
    return (VF)_mm512_sqrt_ps((__m512)v);
#elif BS_PASS == 1
    return (VF)_mm256_sqrt_ps((__m256)v);
#elif defined(__SSE2__)
    return (VF)_mm_sqrt_ps((__m128)v);
#else
    for (int u = 0; u < W; u++) v[u] = sqrtf(v[u]);
    return v;
#endif
}
static inline __attribute__((always_inline)) BS_TGT void BS_SFX(batch_weights)(const float *xt, const float *qt,
                                                                              float sigma2, float *wt) {
    const VF s2 = SPLAT(sigma2), one = SPLAT(1), zero = SPLAT(0), inf = SPLAT(INFINITY);
    VF mw[NH];
    FORH mw[h] = zero;
    FORH
        for (int j = 0; j < QK; j++) {
            const VF xv = LDA(xt + j * 16 + h * W);
            const VF w = LDA(qt + j * 16 + h * W) * BS_SFX(vsqrt)(s2 + xv * xv);
            STA(wt + j * 16 + h * W, w);
            mw[h] = BS_SFX(sel)(w > mw[h], w, mw[h]);
        }
    FORH {
        const VI z = mw[h] == zero, isi = mw[h] == inf;
        const VF dv = BS_SFX(sel)(z | isi, one, mw[h]);
        for (int j = 0; j < QK; j++) {
            const VF w = LDA(wt + j * 16 + h * W);
            const VF nrm = BS_SFX(sel)(w >= zero, w / dv, zero);
            const VF fin = BS_SFX(sel)(VABS(w) == inf, one, zero);
            STA(wt + j * 16 + h * W, BS_SFX(sel)(z, one, BS_SFX(sel)(isi, fin, nrm)));
        }
    }
}

/* ---- a whole row of a legacy type (best_scale.h: iqf_best_legacy_row) ---- */
static BS_TGT void BS_SFX(legacy_row)(int kind, const float *x, void *vy, int64_t n, const float *qw) {
    const int64_t nb = n / QK;
    static const int qmins[5] = { -8, 0, -16, 0, -127 }, qmaxs[5] = { 7, 15, 15, 31, 127 };
    const int qmin = qmins[kind], qmax = qmaxs[kind];
    const bool asym = kind == 1 || kind == 3;
    if (qw && kind != 4) { /* the dense search, block by block */
        const float sigma2 = qw ? row_sigma2(x, n) : 0.f;
        float w[QK];
        uint8_t L[QK];
        for (int64_t i = 0; i < nb; i++) {
            iqf_half d, m = 0;
            BS_SFX(weights)(x + i * QK, qw ? qw + i * QK : NULL, sigma2, w);
            if (asym) BS_SFX(asym_block)(x + i * QK, w, qmax, L, &d, &m);
            else d = BS_SFX(sym_block)(x + i * QK, w, qmin, qmax, L);
            pack_block(kind, L, d, m, vy, i);
        }
        return;
    }
    /* the fast search, 16 blocks at a time, the next batch prepared one ahead (q8_0 with an
     * imatrix: its weights computed lane-wise as weights() and norm_weights() do per block) */
    const float sigma2 = qw ? BS_SFX(row_sigma2_16)(x, n) : 0.f;
    _Alignas(64) float xt[2][QK * 16], qt[2][QK * 16], wt[QK * 16];
    _Alignas(64) uint32_t ct[QK * 16], d[16], m[16];
    for (int64_t i0 = 0, k = 0; i0 < nb; i0 += 16, k ^= 1) {
        for (int64_t p = i0 == 0 ? 0 : i0 + 16; p <= i0 + 16 && p < nb; p += 16) {
            const int np = nb - p < 16 ? (int)(nb - p) : 16, kp = p == i0 ? (int)k : (int)k ^ 1;
            BS_SFX(transpose)(np, x + p * QK, xt[kp]);
            if (qw) BS_SFX(transpose)(np, qw + p * QK, qt[kp]);
        }
        const int nbb = nb - i0 < 16 ? (int)(nb - i0) : 16;
        if (qw) {
            BS_SFX(batch_weights)(xt[k], qt[k], sigma2, wt);
            BS_SFX(fast_sym_impl)(xt[k], wt, qmin, qmax, ct, d);
        } else if (asym) {
            BS_SFX(fast_asym_i)(xt[k], qmax, ct, d, m); /* packed words (ct as wq) */
            BS_SFX(store_words)(kind, ct, d, m, nbb, vy, i0);
            continue;
        } else if (kind == 4) BS_SFX(fast_sym_u)(xt[k], qmin, qmax, ct, d);
        else BS_SFX(fast_sym_s)(xt[k], qmin, qmax, ct, d);
        BS_SFX(pack_batch)(kind, ct, d, m, nbb, vy, i0);
    }
}

#undef W
#undef NH
#undef VF
#undef VI
#undef VU
#undef SPLAT
#undef LD
#undef CR
#undef HSUM
#undef ANY
#undef CRF
#undef CRI
#undef F2H
#undef FORH
#undef H2F
#undef LDA
#undef LDU
#undef SEL
#undef SELU
#undef STA
#undef STU
#undef VABS
#undef VFA
#undef VMAX
#undef VMIN
#undef VUA
#undef VS
