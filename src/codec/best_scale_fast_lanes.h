/* best_scale_fast_lanes.h - the fast symmetric searches of best mode, 16 blocks at a time,
 * logical lane b = block b, on transposed batches (x[j * 16 + b]): q4_0/q5_0 without an imatrix on
 * sums (fast_sym_s), q8_0 without one (fast_sym_u) and q8_0 with one (fast_sym_impl); see
 * best_scale.h. Per lane the same IEEE operations in the same order at every width; the batch
 * composition never changes a lane's result (lanes only stop early when a further round could
 * not change them)
 * (best_scale_lanes.h includes it once per width: VL_W 4, 8 or 16; no include guard). */

/* Symmetric evaluation of nc (1 or 2) candidate scales per lane (normalized units): the integers
 * re-rounded at each, e = sum w r^2, A = sum w q x, B = sum w q^2 (j = 0..31 in order). */
VL_FN void
VL_SFX(fsym_eval)(const float *xt, const float *wt, int nc, VF dq[2][NH], VF lo, VF hi, VF e[2][NH],
                  VF A[2][NH], VF B[2][NH]) {
    VF id[2][NH];
    for (int c = 0; c < nc; c++)
        FORH {
            const VI nz = dq[c][h] != vf_splat(0);
            id[c][h] = vf_bsel(nz, vf_splat(1) / vf_bsel(nz, dq[c][h], vf_splat(1)), vf_splat(0));
            e[c][h] = A[c][h] = B[c][h] = vf_splat(0);
        }
    for (int j = 0; j < QK; j++)
        FORH {
            const VF xv = vf_loada(xt + j * 16 + h * VL_W);
            const VF wv = wt ? vf_loada(wt + j * 16 + h * VL_W) : vf_splat(1);
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
VL_FN void
VL_SFX(fast_sym_impl)(float *xt, const float *wp, int qmin, int qmax, uint32_t *ct, uint32_t *dout) {
    VF amax[NH], mx[NH], ia[NH];
    VI tiny[NH];
    FORH amax[h] = mx[h] = vf_splat(0);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = vf_loada(xt + j * 16 + h * VL_W), a = vf_abs(v);
            const VI g = a > amax[h];
            amax[h] = vf_bsel(g, a, amax[h]);
            mx[h] = vf_bsel(g, v, mx[h]);
        }
    FORH {
        tiny[h] = amax[h] < vf_splat(BS_TINY);
        ia[h] = vf_bsel(tiny[h], vf_splat(0), vf_splat(1) / vf_bsel(tiny[h], vf_splat(1), amax[h]));
    }
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = vf_loada(xt + j * 16 + h * VL_W) * ia[h];
            vf_storea(xt + j * 16 + h * VL_W, v);
        }
    const VF lo = vf_splat((float)qmin), hi = vf_splat((float)qmax);
    /* starts: ggml's scale (the max at qmin) and the max at the other end (q8_0, whose grid is
     * symmetric: the max a quarter step inside the end) */
    const float alt = qmax == -qmin ? (float)qmax + 0.25f : (float)qmax;
    VF dq[2][NH], e[2][NH], A[2][NH], B[2][NH], be[NH], bA[NH], bB[NH];
    VU hc[2][NH], bh[NH], cur[NH];
    FORH {
        hc[0][h] = F2H(mx[h] / lo);
        hc[1][h] = F2H(mx[h] / vf_splat(alt));
        dq[0][h] = H2F(hc[0][h]) * ia[h];
        dq[1][h] = H2F(hc[1][h]) * ia[h];
    }
    VL_SFX(fsym_eval)(xt, wp, 2, dq, lo, hi, e, A, B);
    VI live[NH];
    FORH {
        const VI g = e[1][h] < e[0][h];
        be[h] = vf_bsel(g, e[1][h], e[0][h]);
        bA[h] = vf_bsel(g, A[1][h], A[0][h]);
        bB[h] = vf_bsel(g, B[1][h], B[0][h]);
        bh[h] = vu_bsel(g, hc[1][h], hc[0][h]);
        cur[h] = bh[h];
        live[h] = ~tiny[h];
    }
    /* least-squares rescale of the rounded values, at fp16, while the error falls */
    for (int it = 0; it < FAST_ITERS; it++) {
        VI act[NH];
        FORH {
            const VI ok = live[h] & (bB[h] > vf_splat(0));
            const VF dn = (bA[h] / vf_bsel(ok, bB[h], vf_splat(1))) * amax[h];
            const VI fin = ok & (vf_abs(dn) <= vf_splat(3.0e38f));
            hc[0][h] = vu_bsel(fin, F2H(vf_bsel(fin, dn, vf_splat(0))), cur[h]);
            act[h] = fin & (VI)(hc[0][h] != cur[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
        }
        if (!ANY(act)) break;
        VL_SFX(fsym_eval)(xt, wp, 1, dq, lo, hi, e, A, B);
        FORH {
            const VI imp = act[h] & (e[0][h] < be[h]);
            be[h] = vf_bsel(imp, e[0][h], be[h]);
            bh[h] = vu_bsel(imp, hc[0][h], bh[h]);
            bA[h] = vf_bsel(imp, A[0][h], bA[h]);
            bB[h] = vf_bsel(imp, B[0][h], bB[h]);
            cur[h] = vu_bsel(imp, hc[0][h], cur[h]);
            live[h] = imp;
        }
    }
    /* neighbouring fp16 scales (one ulp in magnitude, -1 then +1) */
    for (int st = 0; st < FAST_WALK; st++) {
        VI moved[NH];
        FORH {
            const VU mag = bh[h] & 0x7fffu, sg = bh[h] & 0x8000u;
            hc[0][h] = vu_bsel(mag > 0u, sg | (mag - 1u), bh[h]);
            hc[1][h] = vu_bsel(mag < (VU)(mag - mag + FP16_MAX_BITS), sg | (mag + 1u), bh[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        VL_SFX(fsym_eval)(xt, wp, 2, dq, lo, hi, e, A, B);
        FORH {
            moved[h] = (VI)vf_splat(0);
            for (int c = 0; c < 2; c++) {
                const VI imp = ~tiny[h] & (e[c][h] < be[h]);
                be[h] = vf_bsel(imp, e[c][h], be[h]);
                bh[h] = vu_bsel(imp, hc[c][h], bh[h]);
                moved[h] |= imp;
            }
        }
        if (!ANY(moved)) break;
    }
    /* the integers at the chosen scale */
    FORH {
        bh[h] = vu_bsel(tiny[h], bh[h] - bh[h], bh[h]);
        const VF d = H2F(bh[h]) * ia[h];
        const VI nz = d != vf_splat(0);
        dq[0][h] = vf_bsel(nz, vf_splat(1) / vf_bsel(nz, d, vf_splat(1)), vf_splat(0));
        vu_storea(dout + h * VL_W, bh[h]);
    }
    for (int j = 0; j < QK; j++)
        FORH vu_storea(ct + j * 16 + h * VL_W, VL_SFX(toint)(CR(vf_loada(xt + j * 16 + h * VL_W) * dq[0][h], lo, hi) - lo));
}
static VL_TGT void VL_SFX(fast_sym_u)(float *xt, int qmin, int qmax, uint32_t *ct, uint32_t *d) {
    VL_SFX(fast_sym_impl)(xt, NULL, qmin, qmax, ct, d);
}


/* ---- the fast search on sums (q4_0, q5_0, q4_1, q5_1 without an imatrix) ----
 * One pass per candidate computes only the least-squares sums of its re-rounded integers; the
 * error of those integers at any scale follows from the sums (E = S2 - 2 d A + d^2 B), so the
 * least-squares rescale of a candidate is scored without another pass (an upper bound of the
 * error after re-rounding at it). */

/* sums of nc (1 or 2) candidates: A = sum q x, B = sum q^2 (j = 0..31 in order) */
VL_FN void
VL_SFX(fsym_sums)(const float *xt, int nc, VF dq[2][NH], VF lo, VF hi, VF A[2][NH], VF B[2][NH]) {
    VF id[2][NH];
    for (int c = 0; c < nc; c++)
        FORH {
            const VI nz = dq[c][h] != vf_splat(0);
            id[c][h] = vf_bsel(nz, vf_splat(1) / vf_bsel(nz, dq[c][h], vf_splat(1)), vf_splat(0));
            A[c][h] = B[c][h] = vf_splat(0);
        }
    FORH
        for (int j = 0; j < QK; j++) {
            const VF xv = vf_loada(xt + j * 16 + h * VL_W);
            _Pragma("GCC unroll 2") for (int c = 0; c < nc; c++) {
                const VF q = CRF(xv * id[c][h], lo, hi);
                A[c][h] += q * xv;
                B[c][h] += q * q;
            }
        }
}
VL_FN VF VL_SFX(sym_err)(VF S2, VF d, VF A, VF B) {
    return (S2 - (d + d) * A) + (d * d) * B;
}

static VL_TGT void VL_SFX(fast_sym_s)(float *xt, int qmin, int qmax, uint32_t *ct, uint32_t *dout) {
    VF amax[NH], mx[NH], ia[NH], S2[NH];
    VI tiny[NH], scl[NH];
    FORH amax[h] = mx[h] = S2[h] = vf_splat(0);
    for (int j = 0; j < QK; j++)
        FORH {
            const VF v = vf_loada(xt + j * 16 + h * VL_W), a = vf_abs(v);
            const VI g = a > amax[h];
            amax[h] = vf_bsel(g, a, amax[h]);
            mx[h] = vf_bsel(g, v, mx[h]);
            S2[h] += v * v;
        }
    /* units: a lane whose max |x| is within 2^-40..2^40 works on x itself (ia = amax = 1: nothing
     * can overflow), others on x / max|x| */
    FORH {
        const VF am = amax[h];
        tiny[h] = am < vf_splat(BS_TINY);
        scl[h] = ~tiny[h] & ((am > vf_splat(0x1.0p40f)) | (am < vf_splat(0x1.0p-40f)));
        amax[h] = vf_bsel(scl[h], am, vf_splat(1));
        ia[h] = vf_bsel(scl[h], vf_splat(1) / vf_bsel(scl[h], am, vf_splat(1)), vf_splat(1));
    }
    if (ANY(scl)) {
        FORH S2[h] = vf_splat(0);
        for (int j = 0; j < QK; j++)
            FORH {
                const VF v = vf_loada(xt + j * 16 + h * VL_W) * ia[h];
                vf_storea(xt + j * 16 + h * VL_W, v);
                S2[h] += v * v;
            }
    }
    const VF lo = vf_splat((float)qmin), hi = vf_splat((float)qmax);
    VF dq[2][NH], A[2][NH], B[2][NH], be[NH];
    VU hc[2][NH], bh[NH];
    VI act[NH];
    FORH {
        be[h] = vf_splat(INFINITY);
        bh[h] = F2H(mx[h] / lo);
        act[h] = (VI)vf_splat(0);
    }
    /* start pairs: the max at qmin (ggml's scale) and at qmax; then (SYM_PAIRS 2) the max
     * SYM_T2 beyond each end (finer grids, the max clipped). Candidates in order: each start
     * (exact error), its least-squares rescale (a bound). */
    for (int pr = 0; pr < SYM_PAIRS; pr++) {
        const VF l0 = pr ? lo - vf_splat(SYM_T2) : lo, l1 = pr ? hi + vf_splat(SYM_T2) : hi;
        FORH {
            hc[0][h] = F2H(mx[h] / l0);
            hc[1][h] = F2H(mx[h] / l1);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        VL_SFX(fsym_sums)(xt, 2, dq, lo, hi, A, B);
        FORH
            for (int c = 0; c < 2; c++) {
                const VF e = VL_SFX(sym_err)(S2[h], dq[c][h], A[c][h], B[c][h]);
                VI g = e < be[h];
                be[h] = vf_bsel(g, e, be[h]);
                bh[h] = vu_bsel(g, hc[c][h], bh[h]);
                act[h] &= ~g;
                const VI ok = ~tiny[h] & (B[c][h] > vf_splat(0));
                const VF dn = (A[c][h] / vf_bsel(ok, B[c][h], vf_splat(1))) * amax[h];
                const VI fin = ok & (vf_abs(dn) <= vf_splat(3.0e38f));
                const VU hn = F2H(vf_bsel(fin, dn, vf_splat(0)));
                const VF el = VL_SFX(sym_err)(S2[h], H2F(hn) * ia[h], A[c][h], B[c][h]);
                g = fin & (el < be[h]);
                be[h] = vf_bsel(g, el, be[h]);
                bh[h] = vu_bsel(g, hn, bh[h]);
                act[h] |= g;
            }
    }
    /* more rounds: the sums of the chosen rescale, its own rescale */
    for (int it = 1; it < FASTS_ITERS; it++) {
        if (!ANY(act)) break;
        FORH dq[0][h] = H2F(bh[h]) * ia[h];
        VL_SFX(fsym_sums)(xt, 1, dq, lo, hi, A, B);
        FORH {
            be[h] = vf_bsel(act[h], VL_SFX(sym_err)(S2[h], dq[0][h], A[0][h], B[0][h]), be[h]);
            const VI ok = act[h] & (B[0][h] > vf_splat(0));
            const VF dn = (A[0][h] / vf_bsel(ok, B[0][h], vf_splat(1))) * amax[h];
            const VI fin = ok & (vf_abs(dn) <= vf_splat(3.0e38f));
            const VU hn = F2H(vf_bsel(fin, dn, vf_splat(0)));
            const VF el = VL_SFX(sym_err)(S2[h], H2F(hn) * ia[h], A[0][h], B[0][h]);
            const VI g = fin & (el < be[h]);
            be[h] = vf_bsel(g, el, be[h]);
            bh[h] = vu_bsel(g, hn, bh[h]);
            act[h] = g;
        }
    }
    /* neighbouring fp16 scales (one ulp in magnitude), exact errors */
    for (int st = 0; st < FASTS_WALK; st++) {
        FORH {
            const VU mag = bh[h] & 0x7fffu, sg = bh[h] & 0x8000u;
            hc[0][h] = vu_bsel(mag > 0u, sg | (mag - 1u), bh[h]);
            hc[1][h] = vu_bsel(mag < (VU)(mag - mag + FP16_MAX_BITS), sg | (mag + 1u), bh[h]);
            dq[0][h] = H2F(hc[0][h]) * ia[h];
            dq[1][h] = H2F(hc[1][h]) * ia[h];
        }
        VL_SFX(fsym_sums)(xt, 2, dq, lo, hi, A, B);
        FORH {
            act[h] = (VI)vf_splat(0);
            for (int c = 0; c < 2; c++) {
                const VF e = VL_SFX(sym_err)(S2[h], dq[c][h], A[c][h], B[c][h]);
                const VI g = ~tiny[h] & (e < be[h]);
                be[h] = vf_bsel(g, e, be[h]);
                bh[h] = vu_bsel(g, hc[c][h], bh[h]);
                act[h] |= g;
            }
        }
        if (!ANY(act)) break;
    }
    FORH {
        bh[h] = vu_bsel(tiny[h], bh[h] - bh[h], bh[h]);
        const VF d = H2F(bh[h]) * ia[h];
        const VI nz = d != vf_splat(0);
        dq[0][h] = vf_bsel(nz, vf_splat(1) / vf_bsel(nz, d, vf_splat(1)), vf_splat(0));
        vu_storea(dout + h * VL_W, bh[h]);
    }
    for (int j = 0; j < QK; j++)
        FORH vu_storea(ct + j * 16 + h * VL_W, CRI(vf_loada(xt + j * 16 + h * VL_W) * dq[0][h], lo, hi));
}
