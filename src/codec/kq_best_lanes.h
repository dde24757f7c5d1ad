/* kq_best_lanes.h - the search of kq_best.c, written once: kq_best.c includes this file once per
 * instruction set with VL_TGT and VL_SFX defined; the AVX2 and AVX-512 copies (KQB_VEC 1) first
 * include vec_lanes.h (VL_W 8 and 16) and run the two hot kernels (errs, sym_ref) one candidate
 * per lane, the plain copy (KQB_VEC 0) runs them as loops over 8 candidates. Per candidate the
 * operations are the same IEEE ones in the same order in every copy, so the same bits. No include
 * guard on purpose. */

#if KQB_VEC
#define KQB_L VL_W /* candidates per group */
#else
#define KQB_L 8
#endif

/* The objective's weights (kq_best.h), computed on x and qw scaled by their block maxima. */
static VL_TGT void VL_SFX(weights)(const float *x, const float *qw, float sig, float *w) {
    float amax = 0, qmax = 0;
    for (int i = 0; i < QK_K; i++) {
        const float a = fabsf(x[i]);
        amax = a > amax ? a : amax;
    }
    if (qw)
        for (int i = 0; i < QK_K; i++) qmax = qw[i] > qmax ? qw[i] : qmax;
    float xs[QK_K], s2[8] = { 0 };
    const float ia = amax > 0 ? 1.f / amax : 0.f;
    if (isfinite(ia))
        for (int i = 0; i < QK_K; i++) xs[i] = x[i] * ia;
    else
        for (int i = 0; i < QK_K; i++) xs[i] = (float)((double)x[i] / amax);
    for (int i0 = 0; i0 < QK_K; i0 += 8)
        for (int l = 0; l < 8; l++) s2[l] += xs[i0 + l] * xs[i0 + l];
    const float sigma2 = sig * red8(s2) / QK_K;
    for (int i = 0; i < QK_K; i++) w[i] = sqrtf(sigma2 + xs[i] * xs[i]);
    if (!qw) return;
    const float iq = qmax > 0 ? 1.f / qmax : 0.f;
    if (isfinite(iq))
        for (int i = 0; i < QK_K; i++) w[i] *= qw[i] * iq;
    else
        for (int i = 0; i < QK_K; i++) w[i] *= (float)((double)qw[i] / qmax);
}

/* Codes of one sub-block at step s and offset mo: q = nearest((x + mo) / s) clamped to
 * [flo, fhi] (s == 0: the code nearest 0). */
static VL_TGT void VL_SFX(codes)(int n, const float *x, float s, float mo, float flo, float fhi,
                                   int8_t *q) {
    if (s == 0) {
        const int8_t z = (int8_t)(flo > 0 ? flo : fhi < 0 ? fhi : 0);
        memset(q, z, (size_t)n);
        return;
    }
    float is = 1.f / s;
    const bool inv = isfinite(is);
    if (!inv) is = 1.f;
    for (int i = 0; i < n; i++) {
        float v = inv ? (x[i] + mo) * is : (x[i] + mo) / s;
        v = v < flo ? flo : v;
        v = v > fhi ? fhi : v;
        /* a NaN (inputs near FLT_MAX overflow the weights) gets code 0, as x86's cvttss2si
         * truncated to a byte gives; the conversion of a NaN itself is undefined in C */
        q[i] = v == v ? (int8_t)((v + KQB_MAGIC) - KQB_MAGIC) : 0;
    }
}

#if KQB_VEC
/* errs() for the VL_W candidates s[0..], mo[0..], one per lane: a1 = sum w (x - y)^2,
 * a2 = sum w (y - x), each lane's sums over the values in order. */
VL_FN void VL_SFX(errs_lanes)(int n, const float *x, const float *w, const float *s, const float *mo,
                              float flo, float fhi, float z, float *a1, float *a2) {
    const VF vs = vf_load(s), vm = vf_load(mo), zero = vf_splat(0.f), one = vf_splat(1.f);
    const VM szero = vf_eq(vs, zero);
    /* is = s == 0 ? 1 : 1 / s; where 1/s overflows, (x + mo) / s instead */
    const VF sdiv = vf_sel(szero, one, vs), vis = one / sdiv;
    const VM noinv = vm_or(vf_eq(vis, vf_splat(INFINITY)), vf_eq(vis, vf_splat(-INFINITY)));
    const bool need_div = vm_bits(vm_or(noinv, vf_unord(vis, vis))) != 0;
    const VF vz = vf_splat(z), vlo = vf_splat(flo), vhi = vf_splat(fhi), M = vf_splat(KQB_MAGIC);
    VF va = zero, vr = zero;
    if (!need_div && vm_bits(vf_eq(vm, zero)) == (1u << VL_W) - 1) {
        /* every offset 0 (the symmetric types): the same operations without the offset terms
         * (the same bits: a -0 from x + 0 = +0 rounds to the same code, s*r - 0 = s*r); res is
         * not needed without mins (left 0) */
        for (int i = 0; i < n; i++) {
            const VF xv = vf_splat(x[i]), wv = vf_splat(w[i]);
            /* v < lo ? lo : v, then v > hi ? hi : v (x86 max/min operand order) */
            const VF v = vf_min(vhi, vf_max(vlo, xv * vis));
            const VF r = vf_sel(szero, vz, (v + M) - M);
            const VF df = xv - vs * r;
            va = va + wv * df * df;
        }
    } else {
        for (int i = 0; i < n; i++) {
            const VF xv = vf_splat(x[i]), wv = vf_splat(w[i]);
            VF v = (xv + vm) * vis;
            if (need_div) v = vf_sel(noinv, (xv + vm) / sdiv, v);
            v = vf_min(vhi, vf_max(vlo, v));
            const VF r = vf_sel(szero, vz, (v + M) - M);
            const VF y = vs * r - vm;
            const VF df = xv - y;
            va = va + wv * df * df;
            vr = vr + wv * (y - xv);
        }
    }
    vf_store(a1, va);
    vf_store(a2, vr);
}
#endif

/* Weighted errors e[c] of nc candidates (s[c], mo[c]) for one sub-block, the codes re-rounded as
 * codes() does and the reconstruction y = s*q - mo computed as the decoder does; each sum runs
 * over the values in order. res[c] = sum w (y - x) (for the min's least-squares step).
 * The candidates run KQB_L at a time; s and mo need room for nc rounded up to 16. */
static VL_TGT void VL_SFX(errs)(int n, const float *x, const float *w, int nc, float *s, float *mo,
                                float flo, float fhi, float *e, float *res) {
    const float z = flo > 0 ? flo : fhi < 0 ? fhi : 0;
    int ncp = nc;
    while (ncp % KQB_L) { s[ncp] = s[nc - 1]; mo[ncp] = mo[nc - 1]; ncp++; }
    for (int c0 = 0; c0 < ncp; c0 += KQB_L) {
        float a1[KQB_L] = { 0 }, a2[KQB_L] = { 0 };
#if KQB_VEC
        VL_SFX(errs_lanes)(n, x, w, s + c0, mo + c0, flo, fhi, z, a1, a2);
#else
        float is[8];
        for (int l = 0; l < 8; l++) is[l] = s[c0 + l] == 0 ? 1.f : 1.f / s[c0 + l];
        for (int i = 0; i < n; i++)
            for (int l = 0; l < 8; l++) {
                const float sl = s[c0 + l], ml = mo[c0 + l];
                float r;
                if (sl == 0) {
                    r = z;
                } else {
                    float v = isfinite(is[l]) ? (x[i] + ml) * is[l] : (x[i] + ml) / sl;
                    v = v < flo ? flo : v;
                    v = v > fhi ? fhi : v;
                    r = (v + KQB_MAGIC) - KQB_MAGIC;
                }
                const float y = sl * r - ml;
                const float df = x[i] - y;
                a1[l] += w[i] * df * df;
                a2[l] += w[i] * (y - x[i]);
            }
#endif
        for (int l = 0; l < KQB_L && c0 + l < nc; l++) {
            e[c0 + l] = isfinite(a1[l]) ? a1[l] : INFINITY;
            res[c0 + l] = a2[l];
        }
    }
}

#if KQB_VEC
/* sym_ref()'s sums for the VL_W inverse scales is[0..], one per lane. */
VL_FN void VL_SFX(sym_lanes)(int n, const float *x, const float *w, const float *wx, const float *is,
                             float flo, float fhi, float *a1, float *a2) {
    const VF vis = vf_load(is), vlo = vf_splat(flo), vhi = vf_splat(fhi), M = vf_splat(KQB_MAGIC);
    VF v1 = vf_splat(0.f), v2 = vf_splat(0.f);
    for (int i = 0; i < n; i++) {
        const VF wv = vf_splat(w[i]), wxv = vf_splat(wx[i]);
        const VF v = vf_min(vhi, vf_max(vlo, vis * vf_splat(x[i])));
        const VF r = (v + M) - M;
        v1 = v1 + wxv * r;
        v2 = v2 + wv * r * r;
    }
    vf_store(a1, v1);
    vf_store(a2, v2);
}
#endif

/* Symmetric reference: the best least-squares scale over inverse scales that put the largest
 * |x| at either end of [qlo, qhi] (+- nstep steps of `step`). The candidates run KQB_L at a time,
 * one per lane; each candidate's sums run over the values in order. */
static VL_TGT float VL_SFX(sym_ref)(int n, const float *x, const float *w, int qlo, int qhi,
                                      int nstep, float step) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) { amax = a; mx = x[i]; }
    }
    if (amax == 0) return 0.f;
    const float fallback = mx / (float)qlo, flo = (float)qlo, fhi = (float)qhi;
    float wx[32], isv[2 * (2 * 16 + 1) + 16];
    for (int i = 0; i < n; i++) wx[i] = w[i] * x[i];
    int nc = 0;
    for (int side = 0; side < 2; side++) {
        const float end = side ? (float)qhi : (float)-qlo;
        for (int t = -nstep; t <= nstep; t++) {
            const float is = (side ? 1.f : -1.f) * (end + step * (float)t) / mx;
            if (is != 0 && isfinite(is)) isv[nc++] = is;
        }
    }
    if (nc == 0) return fallback;
    int ncp = nc;
    while (ncp % KQB_L) { isv[ncp] = isv[nc - 1]; ncp++; }
    float best = -1, bs = fallback;
    for (int c0 = 0; c0 < ncp; c0 += KQB_L) {
        float a1[KQB_L] = { 0 }, a2[KQB_L] = { 0 };
#if KQB_VEC
        VL_SFX(sym_lanes)(n, x, w, wx, isv + c0, flo, fhi, a1, a2);
#else
        for (int i = 0; i < n; i++)
            for (int l = 0; l < 8; l++) {
                float v = isv[c0 + l] * x[i];
                v = v < flo ? flo : v;
                v = v > fhi ? fhi : v;
                const float r = (v + KQB_MAGIC) - KQB_MAGIC;
                a1[l] += wx[i] * r;
                a2[l] += w[i] * r * r;
            }
#endif
        for (int l = 0; l < KQB_L && c0 + l < nc; l++) {
            if (a2[l] > 0) {
                const float score = a1[l] * a1[l] / a2[l];
                if (score > best) { best = score; bs = a1[l] / a2[l]; }
            }
        }
    }
    return isfinite(bs) ? bs : fallback;
}

#define KQB_NREF 2
#define KQB_MAXK (KQB_NREF * 5 + 1)
#define KQB_MAXC (KQB_MAXK * 7 + 8)

/* Best (k, m, codes) of one sub-block at d/dm: k in windows of +-win around the references, for
 * each k the mins +-winm around the reference, then each k's best min re-solved by least
 * squares. The current (k, m) is the first candidate, so ties keep it; *e0 = its error.
 * Returns the error of the choice. */
static VL_TGT float VL_SFX(sub_search)(const kqb_fmt *f, const float *x, const float *w, float sw,
                                         float d, float dm, const float *sref, const float *mref,
                                         int16_t *kio, int16_t *mio, int8_t *qio, float *e0) {
    const int n = f->sublen, W = f->win;
    const bool asym = f->mhi != 0;
    const float flo = (float)f->qlo, fhi = (float)f->qhi;
    int ks[KQB_MAXK], nk = 0;
    ks[nk++] = *kio;
    for (int r = 0; r < (!asym && f->scan < 0 ? 0 : KQB_NREF); r++) {
        const int kc = int_near(sref[r], d, f->klo, f->khi);
        for (int k = kc - W; k <= kc + W; k++) {
            if (k < f->klo || k > f->khi) continue;
            bool seen = false;
            for (int t = 0; t < nk && !seen; t++) seen = ks[t] == k;
            if (!seen && nk < KQB_MAXK) ks[nk++] = k;
        }
    }
    const bool use_m = asym && dm != 0;
    const int WM = use_m ? f->winm : 0;
    const int mc = !asym ? 0 : !use_m ? *mio : int_near(mref[0], dm, f->mlo, f->mhi);
    int ck[KQB_MAXC], cm[KQB_MAXC], nc = 0;
    float cs[KQB_MAXC + 16], cmo[KQB_MAXC + 16], e[KQB_MAXC], res[KQB_MAXC];
#define KQB_ADD(K, M)                                                                          \
    do {                                                                                       \
        bool dup_ = false;                                                                     \
        for (int u_ = 0; u_ < nc && !dup_; u_++) dup_ = ck[u_] == (K) && cm[u_] == (M);        \
        if (!dup_ && nc < KQB_MAXC) {                                                          \
            ck[nc] = (K);                                                                      \
            cm[nc] = (M);                                                                      \
            cs[nc] = d * (float)(K);                                                           \
            cmo[nc] = asym ? dm * (float)(M) : 0.f;                                            \
            nc++;                                                                              \
        }                                                                                      \
    } while (0)
    if (!asym && f->scan < 0) {
        /* one window, no mins: the candidates are [current k, the window without it], the same
         * list (and order) as the general loop below, built without its duplicate scans */
        const int kc = int_near(sref[0], d, f->klo, f->khi);
        ck[0] = *kio;
        cm[0] = *mio;
        cs[0] = d * (float)*kio;
        cmo[0] = 0.f;
        nc = 1;
        for (int k = kc - W; k <= kc + W; k++) {
            if (k < f->klo || k > f->khi || k == *kio || nc >= KQB_MAXC) continue;
            ck[nc] = k;
            cm[nc] = *mio;
            cs[nc] = d * (float)k;
            cmo[nc] = 0.f;
            nc++;
        }
    } else {
        KQB_ADD(*kio, *mio);
        for (int t = 0; t < nk; t++)
            for (int m = mc - WM; m <= mc + WM; m++)
                if (!asym || (m >= f->mlo && m <= f->mhi)) KQB_ADD(ks[t], asym ? m : *mio);
    }
    VL_SFX(errs)(n, x, w, nc, cs, cmo, flo, fhi, e, res);
    if (use_m && sw > 0) {
        /* y = s q - mo: the least-squares mo for a candidate's codes is mo + sum w (y - x) / sum w. */
        const int n1 = nc;
        for (int t = 0; t < nk; t++) {
            int bc = -1;
            for (int c = 0; c < n1; c++)
                if (ck[c] == ks[t] && (bc < 0 || e[c] < e[bc])) bc = c;
            if (bc < 0 || !(e[bc] < INFINITY)) continue;
            const int m2 = int_near(cmo[bc] + res[bc] / sw, dm, f->mlo, f->mhi);
            KQB_ADD(ks[t], m2);
        }
        if (nc > n1) VL_SFX(errs)(n, x, w, nc - n1, cs + n1, cmo + n1, flo, fhi, e + n1, res + n1);
    }
#undef KQB_ADD
    *e0 = e[0];
    int bc = 0;
    for (int c = 1; c < nc; c++) bc = e[c] < e[bc] ? c : bc;
    *kio = (int16_t)ck[bc];
    *mio = (int16_t)cm[bc];
    VL_SFX(codes)(n, x, cs[bc], cmo[bc], flo, fhi, qio);
    return e[bc];
}

/* Least-squares d (and dmin) for the integers of r; false if singular. */
static VL_TGT bool VL_SFX(ls_scales)(const kqb_fmt *f, const float *x, const float *w, const kqb_rep *r,
                                       uint16_t *hd, uint16_t *hdm) {
    double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
    for (int j = 0; j < f->nsub; j++) {
        const int o = j * f->sublen;
        const float kj = (float)r->k[j];
        float a2[8] = { 0 }, a1[8] = { 0 }, ax[8] = { 0 }, ws[8] = { 0 }, wx[8] = { 0 };
        for (int i0 = 0; i0 < f->sublen; i0 += 8)
            for (int l = 0; l < 8; l++) {
                const int i = o + i0 + l;
                const float a = kj * (float)r->q[i];
                a2[l] += w[i] * a * a;
                a1[l] += w[i] * a;
                ax[l] += w[i] * a * x[i];
                ws[l] += w[i];
                wx[l] += w[i] * x[i];
            }
        const double b = f->mhi ? r->m[j] : 0;
        saa += red8(a2);
        sab += b * red8(a1);
        sbb += b * b * red8(ws);
        sax += red8(ax);
        sbx += b * red8(wx);
    }
    if (!(saa > 0)) return false;
    const double det = saa * sbb - sab * sab;
    if (!f->mhi || !(det > 1e-12 * saa * sbb)) {
        *hd = f2h_finite(sax / saa);
        *hdm = r->hdm;
        return true;
    }
    /* minimise sum w (d a - dm b - x)^2 */
    *hd = f2h_finite((sax * sbb - sbx * sab) / det);
    *hdm = f2h_finite((sax * sab - sbx * saa) / det);
    return true;
}

static VL_TGT void VL_SFX(search)(const kqb_fmt *f, const float *x, const float *qw,
                                    const float *sref0, const float *mref0, kqb_rep *r) {
    float w[QK_K];
    VL_SFX(weights)(x, qw, f->sig, w);
    const bool sym = f->mhi == 0;
    /* The start's error: that of its codes re-rounded at its decoded scales (the error-optimal
     * codes for them), measured by the first alternation (its first candidates) when the
     * alternations start there, else here. */
    const float d0 = h2f(r->hd), dm0 = sym ? 0.f : h2f(r->hdm);
    double ebest = 0;
    bool best_is_start = true, start_codes = false;
    kqb_rep best = *r;
    if (!(f->nstart & 1)) {
        for (int j = 0; j < f->nsub; j++) {
            float s1[16] = { d0 * (float)r->k[j] }, m1[16] = { sym ? 0.f : dm0 * (float)r->m[j] }, e1, r1;
            VL_SFX(errs)(f->sublen, x + j * f->sublen, w + j * f->sublen, 1, s1, m1, (float)f->qlo,
                          (float)f->qhi, &e1, &r1);
            ebest += e1;
        }
    }
    float sref[16], mref[16], sw[16];
    for (int j = 0; j < f->nsub; j++) {
        const float *xj = x + j * f->sublen, *wj = w + j * f->sublen;
        float a[8] = { 0 };
        for (int i0 = 0; i0 < f->sublen; i0 += 8)
            for (int l = 0; l < 8; l++) a[l] += wj[i0 + l];
        sw[j] = red8(a);
        if (f->scan > 0 && sym) sref[j] = VL_SFX(sym_ref)(f->sublen, xj, wj, f->qlo, f->qhi, f->scan, f->scan_step);
        else sref[j] = sref0[j];
        mref[j] = sym ? 0.f : mref0[j];
    }
    kqb_rep start[2];
    int nstart = 0;
    if (f->nstart & 1) start[nstart++] = *r;
    if (f->nstart & 2) {
        kqb_rep *s = &start[nstart];
        *s = *r;
        float smax = 0, amax = 0, mmax = 0;
        for (int j = 0; j < f->nsub; j++) {
            if (fabsf(sref[j]) > amax) { amax = fabsf(sref[j]); smax = sref[j]; }
            if (mref[j] > mmax) mmax = mref[j];
        }
        if (amax > 0) {
            s->hd = f2h_finite(sym ? smax / (double)f->klo : amax / (double)f->khi);
            if (!sym) s->hdm = f2h_finite(mmax / (double)f->mhi);
            const float d = h2f(s->hd), dm = sym ? 0.f : h2f(s->hdm);
            for (int j = 0; j < f->nsub; j++) {
                s->k[j] = (int16_t)int_near(sref[j], d, f->klo, f->khi);
                s->m[j] = (int16_t)(sym ? 0 : int_near(mref[j], dm, f->mlo, f->mhi));
                VL_SFX(codes)(f->sublen, x + j * f->sublen, d * (float)s->k[j],
                               sym ? 0.f : dm * (float)s->m[j], (float)f->qlo, (float)f->qhi,
                               s->q + j * f->sublen);
            }
            nstart++;
        }
    }
    for (int st = 0; st < nstart; st++) {
        kqb_rep cur = start[st];
        float dprev = h2f(cur.hd), dmprev = sym ? 0.f : h2f(cur.hdm);
        for (int it = 0; it < f->nit; it++) {
            const float d = h2f(cur.hd), dm = sym ? 0.f : h2f(cur.hdm);
            double e = 0, es = 0;
            for (int j = 0; j < f->nsub; j++) {
                const float sr[KQB_NREF] = { sref[j], f->scan < 0 ? sref[j] : dprev * (float)cur.k[j] };
                const float mr[KQB_NREF] = { it == 0 ? mref[j] : dmprev * (float)cur.m[j], 0.f };
                float e0;
                e += VL_SFX(sub_search)(f, x + j * f->sublen, w + j * f->sublen, sw[j], d, dm, sr,
                                         mr, &cur.k[j], &cur.m[j], cur.q + j * f->sublen, &e0);
                es += e0;
            }
            if (st == 0 && it == 0 && (f->nstart & 1)) {
                ebest = es;
                /* no sub-block moved (ties keep the start): cur holds the start's re-rounded
                 * codes, the same ones the recomputation below would write */
                if (!(e < ebest)) {
                    best = cur;
                    start_codes = true;
                }
            }
            if (e < ebest) {
                ebest = e;
                best = cur;
                best_is_start = false;
            }
            if (it + 1 == f->nit) break;
            uint16_t hd, hdm;
            if (!VL_SFX(ls_scales)(f, x, w, &cur, &hd, &hdm)) break;
            if (hd == cur.hd && hdm == cur.hdm) break;
            dprev = d;
            dmprev = dm;
            cur.hd = hd;
            cur.hdm = hdm;
        }
    }
    if (best_is_start && !start_codes)
        for (int j = 0; j < f->nsub; j++)
            VL_SFX(codes)(f->sublen, x + j * f->sublen, d0 * (float)best.k[j],
                           sym ? 0.f : dm0 * (float)best.m[j], (float)f->qlo, (float)f->qhi,
                           best.q + j * f->sublen);
    *r = best;
}
#undef KQB_L
