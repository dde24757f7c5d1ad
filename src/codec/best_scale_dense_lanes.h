/* best_scale_dense_lanes.h - the dense searches of best mode, one block at a
 * time (with an imatrix; without one they hand over to the fast searches): symmetric (q4_0, q5_0,
 * q8_0) and asymmetric (q4_1, q5_1), candidate scales 16 to a batch of logical lanes, then fp16
 * refinement
 * (best_scale_lanes.h includes it once per width: VL_W 4, 8 or 16; no include guard). */

/* ---- symmetric: xa = x / amax in [-1, 1]; the scale in the same units ---- */

/* Weighted error of the block at normalized scale da (integers re-rounded at it); writes the
 * integers and the least-squares sums. */
static VL_TGT float VL_SFX(sym_eval)(const float *xa, const float *wn, float da, float lo,
                                     float hi, float *l, float *sxq, float *sq2) {
    const VF id = vf_splat(da != 0 ? 1 / da : 0), vlo = vf_splat(lo), vhi = vf_splat(hi), vd = vf_splat(da);
    VF e[NH], a[NH], b[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = vf_splat(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * VL_W;
            const VF x = vf_load(xa + j), w = vf_load(wn + j);
            const VF q = CR(x * id, vlo, vhi);
            vf_store(l + j, q);
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
static VL_TGT void VL_SFX(cand_sums)(int nc, float *ids, float off, const float *xs,
                                     const float *wx, const float *wn, float lo, float hi,
                                     float *sxq, float *sq2, float *sq) {
    while (nc % 16) {
        ids[nc] = ids[nc - 1];
        nc++;
    }
    const VF vlo = vf_splat(lo), vhi = vf_splat(hi);
    for (int c = 0; c < nc; c += VL_W) {
        const VF id = vf_load(ids + c), vo = vf_splat(off);
        /* two independent chains (even and odd j), added at the end: half the add latency */
        VF a = vf_splat(0), b = a, e = a, a1 = a, b1 = a, e1 = a;
        for (int j = 0; j < QK; j += 2) {
            const VF q = CR((vf_splat(xs[j]) - vo) * id, vlo, vhi);
            const VF q1 = CR((vf_splat(xs[j + 1]) - vo) * id, vlo, vhi);
            const VF wq = vf_splat(wn[j]) * q, wq1 = vf_splat(wn[j + 1]) * q1;
            a += vf_splat(wx[j]) * q;
            a1 += vf_splat(wx[j + 1]) * q1;
            b += wq * q;
            b1 += wq1 * q1;
            e += wq;
            e1 += wq1;
        }
        a += a1;
        b += b1;
        e += e1;
        vf_store(sxq + c, a);
        vf_store(sq2 + c, b);
        if (sq) vf_store(sq + c, e);
    }
}

/* The candidate with the largest score sxq^2/sq2 (sq2 > 0), the first one on ties; -1 if none.
 * Lane-wise over the batches of 16 (as cand_sums padded them), then across the lanes. */
static VL_TGT int VL_SFX(best_score)(int nc, const float *sxq, const float *sq2) {
    const VF none = vf_splat(-1);
    VF bs = none;
    VI bi = (VI)vf_splat(0) - 1, lane;
    for (int k = 0; k < VL_W; k++) lane[k] = k;
    for (int c = 0; c < (nc + 15) / 16 * 16; c += VL_W) {
        const VF a = vf_load(sxq + c), b = vf_load(sq2 + c);
        const VI pos = b > vf_splat(0);
        const VF sc = (VF)((pos & (VI)(a * a / b)) | (~pos & (VI)none));
        const VI better = sc > bs;
        bs = (VF)((better & (VI)sc) | (~better & (VI)bs));
        bi = (better & (lane + c)) | (~better & bi);
    }
    float best = -1;
    int idx = -1;
    for (int k = 0; k < VL_W; k++)
        if (bi[k] >= 0 && (bs[k] > best || (bs[k] == best && bi[k] < idx))) {
            best = bs[k];
            idx = bi[k];
        }
    return idx;
}

static VL_TGT iqf_half VL_SFX(sym_block)(const float *x, const float *w, int qmin, int qmax,
                                         uint8_t *L) {
    {
        /* the fast search: uniform weights (no imatrix), and q8_0 */
        float wn0[QK];
        const bool uni = uniform_weights(w, wn0);
        if (uni || qmax == -qmin) {
            _Alignas(64) float xt[QK * 16], wt[QK * 16];
            _Alignas(64) uint32_t ct[QK * 16], d[16];
            VL_SFX(transpose)(1, x, xt);
            if (!uni) {
                VL_SFX(transpose)(1, wn0, wt);
                VL_SFX(fast_sym_impl)(xt, wt, qmin, qmax, ct, d);
            } else if (qmax != -qmin) {
                VL_SFX(fast_sym_s)(xt, qmin, qmax, ct, d);
            } else {
                VL_SFX(fast_sym_u)(xt, qmin, qmax, ct, d);
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
    VL_SFX(cand_sums)(nc, ids, 0.f, xa, wx, wn, lo, hi, sxqs, sq2s, NULL);
    const int bc = VL_SFX(best_score)(nc, sxqs, sq2s);
    const bool have = bc >= 0;
    const float best_sxq = have ? sxqs[bc] : 0, best_sq2 = have ? sq2s[bc] : 0;

    /* Refine at fp16: round, re-round the integers, re-solve, while the error falls. */
    float l[QK], bl[QK];
    iqf_half bh = 0;
    float be = INFINITY;
    iqf_half h = fp16_sat(have ? (double)best_sxq / best_sq2 * amax : (double)max / lo);
    for (int it = 0; it < REFINE_ITERS; it++) {
        float sxq, sq2;
        const float e = VL_SFX(sym_eval)(xa, wn, IQF_FP16_TO_FP32(h) * ia, lo, hi, l, &sxq, &sq2);
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
            const float e = VL_SFX(sym_eval)(xa, wn, IQF_FP16_TO_FP32(nh) * ia, lo, hi, l, &sxq, &sq2);
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

static VL_TGT float VL_SFX(asym_eval)(const float *xa, const float *wn, float da, float ma,
                                      float hi, float *l, float s3[3]) {
    const VF id = vf_splat(da != 0 ? 1 / da : 0), vlo = vf_splat(0), vhi = vf_splat(hi), vd = vf_splat(da);
    const VF vm = vf_splat(ma);
    VF e[NH], a[NH], b[NH], c[NH];
    for (int h = 0; h < NH; h++) e[h] = a[h] = b[h] = c[h] = vf_splat(0);
    for (int j0 = 0; j0 < QK; j0 += 16) {
        for (int h = 0; h < NH; h++) {
            const int j = j0 + h * VL_W;
            const VF x = vf_load(xa + j), w = vf_load(wn + j);
            const VF q = CR((x - vm) * id, vlo, vhi);
            vf_store(l + j, q);
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

static VL_TGT void VL_SFX(asym_block)(const float *x, const float *w, int nmax, uint8_t *L,
                                      iqf_half *d, iqf_half *m) {
    {
        float wn0[QK];
        /* the fast search without an imatrix (fast_asym_i) */
        if (uniform_weights(w, wn0)) {
            _Alignas(64) float xt[QK * 16];
            _Alignas(64) uint32_t wq[9 * 16], dd[16], mm[16];
            VL_SFX(transpose)(1, x, xt);
            VL_SFX(fast_asym_i)(xt, nmax, wq, dd, mm);
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
        VL_SFX(cand_sums)(nc, ids, off, xr, wr, wn, 0, hi, sxqs, sq2s, sqs);
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
        const float e = VL_SFX(asym_eval)(xa, wn, IQF_FP16_TO_FP32(hd) * ia, IQF_FP16_TO_FP32(hm) * ia,
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
                const float e = VL_SFX(asym_eval)(xa, wn, IQF_FP16_TO_FP32(nd) * ia,
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
