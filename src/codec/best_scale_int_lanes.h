/* best_scale_int_lanes.h - q4_1/q5_1 in best mode without an imatrix: the
 * candidate search on integers, 16 blocks at a time on transposed batches
 * (best_scale_lanes.h includes it once per width: VL_W 4, 8 or 16; no include guard). */

/* ---- q4_1/q5_1 without an imatrix: the candidate search on integers (best_scale.h) ----
 * A block's values as integers U = (x - min) * 2^k / range in [0, 2^k] (k = 12 for q5_1, 11 for
 * q4_1), two per 32-bit lane
 * (value p in the low half, value p + 16 in the high half), so one candidate costs a handful of
 * 16-bit operations per pair: q = clamp(round((U - B) * A / 2^15), 0, nmax) (A = N 2^(15-k) maps
 * the range to N steps, B the first level's offset), sum q, sum q^2 and sum q U (the 32-bit sums of
 * adjacent products). Each candidate is scored by the error of its least-squares (d, m) in U
 * units (the largest C^2 / D, C = n sum q U - sum q sum U, D = n sum q^2 - (sum q)^2). All of it is
 * integer arithmetic (exact, the same at every level) up to that score. */
/* round to the nearest integer (even on ties) of v in [0, 65535], as an integer */
VL_FN VU VL_SFX(rndu)(VF v) { return (VU)vi_round(v); }
/* vf_bsel by the width's blend instruction (m lanes 0 or -1) */
VL_FN VF VL_SFX(blend)(VI m, VF a, VF b) { return vf_sel(vm_of_vi(m), a, b); }
/* One candidate per lane (a2, b2: A and B in both 16-bit halves): its sums over the 16 pairs.
 * sub/lo/hi (constants at every call): whether B is applied and q clamped below / above; a
 * candidate skips a clamp only where it cannot bind (iq_clamps). */
VL_FN void
VL_SFX(icand)(const uint32_t *pt, int h, VU a2, VU b2, VS qhi, bool sub, bool lo, bool hi, VI *sq, VI *sqq,
              VI *squ) {
    const VS a = (VS)a2, b = (VS)b2, z = (VS)(a2 - a2);
    VS s = z;
    VI s2 = (VI)(a2 - a2), su = s2;
    _Pragma("GCC unroll 16") for (int p = 0; p < 16; p++) {
        const VS u = (VS)vu_loada(pt + p * 16 + h * VL_W);
        VS q = vs_mulhrs(sub ? u - b : u, a);
        if (lo && hi) q = vs_min(vs_max(q, z), qhi);
        else if (lo) q = vs_max(q, z);
        else if (hi) q = vs_min(q, qhi);
        s += q;
        s2 += vs_madd(q, q);
        su += vs_madd(q, u);
    }
    *sq = (VI)(((VU)s & 0xFFFFu) + ((VU)s >> 16));
    *sqq = s2;
    *squ = su;
}
/* Which clamps candidate (a, b) needs for U in [0, 2^k]: q = (v a + 2^14) >> 15 is >= 0 for
 * every v >= -b if b a < 2^14 (or b <= 0), and <= nmax for every v <= 2^k - b if
 * (2^k - b) a + 2^14 < (nmax + 1) 2^15. */
static inline int VL_SFX(iq_clamps)(int a, int b, int nmax, int k) {
    const int lo = b > 0 && b * a >= (1 << 14);
    const int hi = ((1 << k) - b) * a + (1 << 14) >= (nmax + 1) * (1 << 15);
    return lo | hi << 1;
}

/* The candidates: N steps over the range (A = N 2^(15-k)) and the first level B = O / N of the
 * range above the min (O = 0 or a fraction of a step: the min still rounds into level 0).
 * U in [0, 2^k]: k = 12 for q5_1, 11 for q4_1 (A about 240 either way). Chosen on kjv-3m's
 * weights and checked on N(0,1) data (docs/PERFORMANCE.md). */
#define IQ_NC5 10
static const int16_t VL_SFX(iq_a5)[IQ_NC5] = { 234, 238, 243, 248, 252, 234, 238, 243, 248, 252 };
static const int16_t VL_SFX(iq_b5)[IQ_NC5] = { 0, 0, 0, 0, 0, 35, 34, 34, 33, 33 };
#define IQ_NC4 4
static const int16_t VL_SFX(iq_a4)[IQ_NC4] = { 224, 248, 224, 248 };
static const int16_t VL_SFX(iq_b4)[IQ_NC4] = { 0, 0, 59, 53 };

/* Writes the packed words of the 16 lanes to wq (as pack_batch: nibble word k at wq[k * 16 + b],
 * q5_1's high bits at wq[8 * 16 + b]) and the fp16 d and m to dout, mout. */
static VL_TGT void VL_SFX(fast_asym_i)(float *xt, int nmax, uint32_t *wq, uint32_t *dout, uint32_t *mout) {
    VF mn[NH], mx[NH], amax[NH], ia[NH];
    VI tiny[NH], flat[NH], scl[NH], live[NH];
    FORH mn[h] = mx[h] = vf_loada(xt + h * VL_W);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = vf_loada(xt + j * 16 + h * VL_W);
            mn[h] = vf_min(v, mn[h]);
            mx[h] = vf_max(v, mx[h]);
        }
    /* units: a lane whose max |x| is within 2^-40..2^40 works on x itself (ia = amax = 1: nothing
     * can overflow), others on x / max|x| */
    FORH {
        const VF a0 = vf_abs(mn[h]), a1 = vf_abs(mx[h]);
        const VF am = vf_bsel(a1 > a0, a1, a0);
        tiny[h] = am < vf_splat(BS_TINY);
        flat[h] = ~tiny[h] & (mn[h] == mx[h]);
        live[h] = ~tiny[h] & ~flat[h];
        scl[h] = ~tiny[h] & ((am > vf_splat(0x1.0p40f)) | (am < vf_splat(0x1.0p-40f)));
        amax[h] = vf_bsel(scl[h], am, vf_splat(1));
        ia[h] = vf_bsel(scl[h], vf_splat(1) / vf_bsel(scl[h], am, vf_splat(1)), vf_splat(1));
    }
    if (ANY(scl))
        for (int j = 0; j < QK; j++)
            FORH vf_storea(xt + j * 16 + h * VL_W, vf_loada(xt + j * 16 + h * VL_W) * ia[h]); /* x 1 elsewhere: exact */
    const VF hi = vf_splat((float)nmax);
    /* q4_1: no Lloyd step (it cost 9% of the time, SSE 0.818 -> 0.802 on kjv-3m) */
    const int ik = nmax == 15 ? 11 : 12, nc = nmax == 15 ? IQ_NC4 : IQ_NC5, nll = nmax == 15 ? 0 : 1;
    const int16_t *ta = nmax == 15 ? VL_SFX(iq_a4) : VL_SFX(iq_a5), *tb = nmax == 15 ? VL_SFX(iq_b4) : VL_SFX(iq_b5);
    const float top = (float)(1 << ik);
    /* the integers U, in working units (mn * ia is the min of the scaled values) */
    _Alignas(64) uint32_t pt[16 * 16];
    VF mnw[NH], rw[NH];
    VU su[NH];
    FORH {
        mnw[h] = mn[h] * ia[h];
        rw[h] = vf_bsel(live[h], mx[h] * ia[h] - mnw[h], vf_splat(1));
        const VF sc = vf_splat(top) / rw[h];
        su[h] = (VU)(tiny[h] - tiny[h]);
        for (int p = 0; p < 16; p++) {
            /* x - min >= 0 and (x - min) * sc <= range * sc rounds to at most 2^k: no clamp */
            const VU u0 = VL_SFX(rndu)((vf_loada(xt + p * 16 + h * VL_W) - mnw[h]) * sc);
            const VU u1 = VL_SFX(rndu)((vf_loada(xt + (p + 16) * 16 + h * VL_W) - mnw[h]) * sc);
            vu_storea(pt + p * 16 + h * VL_W, u0 | (u1 << 16));
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
        bcc[h] = vf_splat(-1);
        bcf[h] = vf_splat(0);
        bdf[h] = vf_splat(1);
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
                const VI ok = bcc[h] >= vf_splat(0);
                const VF du = vf_bsel(ok, bcf[h] / bdf[h], vf_splat(top / (float)nmax));
                const VF muf = (vf_of_i((VI)su[h]) - du * vf_of_i(bq[h])) * vf_splat(1.f / QK);
                const VU av = CRI(vf_splat(32768.f) / vf_bsel(du > vf_splat(1), du, vf_splat(1)), vf_splat(1), vf_splat(32767));
                const VU bv = CRI(muf + vf_splat(16384.f), vf_splat(0), vf_splat(32767)) - 16384u;
                a2 = (av + 1u) * 0x10001u; /* CRI returns q - lo */
                b2 = (bv & 0xFFFFu) * 0x10001u;
            }
            VI sq, sqq, squ;
            const int cl = c < nc ? VL_SFX(iq_clamps)(ta[c], tb[c], nmax, ik) : 3;
            const bool sub = c == nc || tb[c] != 0;
            if (cl == 3) VL_SFX(icand)(pt, h, a2, b2, qhi, true, true, true, &sq, &sqq, &squ);
            else if (cl == 2) VL_SFX(icand)(pt, h, a2, b2, qhi, sub, false, true, &sq, &sqq, &squ);
            else if (cl == 1) VL_SFX(icand)(pt, h, a2, b2, qhi, sub, true, false, &sq, &sqq, &squ);
            else if (sub) VL_SFX(icand)(pt, h, a2, b2, qhi, true, false, false, &sq, &sqq, &squ);
            else VL_SFX(icand)(pt, h, a2, b2, qhi, false, false, false, &sq, &sqq, &squ);
            /* D >= 0 (Cauchy-Schwarz) and D = 0 only if every q is equal, then C = 0 too, and
             * 0 > bC^2 * 0 is false: such a candidate never wins */
            const VI C = (VI)(QK * squ - sq * (VI)su[h]), D = QK * sqq - sq * sq;
            const VF cf = vf_of_i(C), df = vf_of_i(D);
            const VF c2 = cf * cf;
            const VI g = c2 * bdf[h] > bcc[h] * df;
            bcc[h] = VL_SFX(blend)(g, c2, bcc[h]);
            bcf[h] = VL_SFX(blend)(g, cf, bcf[h]);
            bdf[h] = VL_SFX(blend)(g, df, bdf[h]);
            bq[h] = (VI)VL_SFX(blend)(g, (VF)sq, (VF)bq[h]);
        }
    /* the winner's (d, m) at fp16 and the integers re-rounded there (a least-squares step on the
     * floats after it gains about a tenth of the next candidate's worth and costs five: none) */
    FORH {
        const VI ok = bcc[h] >= vf_splat(0);
        const VF du = vf_bsel(ok, bcf[h] / bdf[h], vf_splat(top / (float)nmax));
        const VF muf = (vf_of_i((VI)su[h]) - du * vf_of_i(bq[h])) * vf_splat(1.f / QK);
        const VF s = rw[h] * vf_splat(1.f / top);
        const VF d = (du * s) * amax[h], m = (mnw[h] + muf * s) * amax[h];
        const VU z = (VU)(su[h] - su[h]);
        const VU hd = vu_bsel(live[h], F2H(vf_bsel(live[h], d, vf_splat(0))), z);
        const VU hm = vu_bsel(live[h], F2H(vf_bsel(live[h], m, vf_splat(0))), vu_bsel(flat[h], F2H(vf_bsel(flat[h], mn[h], vf_splat(0))), z));
        vu_storea(dout + h * VL_W, hd);
        vu_storea(mout + h * VL_W, hm);
        const VF dq = H2F(hd) * ia[h], mq = H2F(hm) * ia[h];
        const VI nz = dq != vf_splat(0);
        const VF id = vf_bsel(nz, vf_splat(1) / vf_bsel(nz, dq, vf_splat(1)), vf_splat(0));
        /* packed as they are rounded: value j and j + 16 share a byte, q5_1's bit 4 to bit j */
        VU qh = z;
        for (int k = 0; k < 4; k++) {
            VU v = z;
            for (int t = 0; t < 4; t++) {
                const int j = 4 * k + t;
                const VU qa = CRI((vf_loada(xt + j * 16 + h * VL_W) - mq) * id, vf_splat(0), hi);
                const VU qb = CRI((vf_loada(xt + (j + 16) * 16 + h * VL_W) - mq) * id, vf_splat(0), hi);
                if (nmax == 31) {
                    v |= ((qa & 0xFu) | ((qb & 0xFu) << 4)) << (8 * t);
                    qh |= (j >= 4 ? (qa & 0x10u) << (j - 4) : (qa & 0x10u) >> (4 - j)) | ((qb & 0x10u) << (j + 12));
                } else {
                    v |= (qa | (qb << 4)) << (8 * t); /* q <= 15 */
                }
            }
            vu_storea(wq + k * 16 + h * VL_W, v);
        }
        if (nmax == 31) vu_storea(wq + 8 * 16 + h * VL_W, qh);
    }
}
