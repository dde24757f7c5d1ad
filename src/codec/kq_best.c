/*
 * kq_best.c - IQF_MODE_BEST search for q2_K..q6_K (see kq_best.h).
 *
 * The search works on the weights as the decoder reconstructs them: every candidate is scored by
 * the weighted squared error of y = (d*k)*q - dmin*m, with d and dmin already rounded to fp16
 * and k, m, q the integers that will be stored.
 *
 *  1. Per sub-block references: the compat search's continuous scale/min, or (f->scan > 0) a
 *     dense scan of inverse scales putting the largest |x| at either end of the code range, the
 *     codes re-rounded and the least-squares scale re-solved for each candidate.
 *  2. From a start (the compat block; optionally a second one whose d/dmin put the largest
 *     reference at the end of the integer range), alternate f->nit times: at the fixed fp16
 *     d/dmin every sub-block takes the integer scale in a window around its references (and the
 *     integer min by least squares for that scale) with the lowest error, its codes re-rounded;
 *     then d/dmin are re-solved by least squares for the chosen integers and rounded to fp16.
 *  3. The lowest error seen wins; the start (compat's block) is kept unless something is lower.
 *
 * Written once in plain C. Sums over the values of a sub-block go to 8 partial sums (value i to
 * lane i % 8, in order) added in a fixed tree, so the code can be compiled for any instruction
 * set (this file includes itself to build AVX2 and AVX-512 copies of the search) and every copy
 * gives the same bits: only element-wise IEEE operations, no contraction (-ffp-contract=off).
 */
#ifndef KQB_PASS

#include "kq_best.h"

#include <math.h>
#include <string.h>

#define KQB_FP16_MAX 65504.f
#define KQB_MAGIC 12582912.f /* 1.5 * 2^23: (v + M) - M rounds |v| < 2^22 half to even */

static inline float h2f(uint16_t h) { return IQF_FP16_TO_FP32(h); }

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline uint16_t f2h_finite(double v) {
    float f = (float)v;
    if (!(f == f)) f = 0;
    f = clampf(f, -KQB_FP16_MAX, KQB_FP16_MAX);
    return IQF_FP32_TO_FP16(f);
}

/* The fixed reduction of 8 partial sums. */
static inline float red8(const float *a) {
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

/* The nearest integer to v/d in [lo, hi] (v/d may be huge, d zero). */
static inline int int_near(float v, float d, int lo, int hi) {
    if (d == 0) return lo > 0 ? lo : hi < 0 ? hi : 0;
    float c = v / d;
    if (c != c) return lo > 0 ? lo : hi < 0 ? hi : 0;
    return iqf_nearest_int(clampf(c, (float)lo, (float)hi));
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* SIMD copies: the same code; the two hot kernels (fit, sym_ref) run their 8 lanes as one 8-wide
 * vector (GCC/Clang vector extensions), the same operations lane by lane as the scalar loops, so
 * the same bits (no NaN reaches a comparison: inputs are finite and steps non-zero). */
typedef float kqb_v8f __attribute__((vector_size(32)));
typedef int32_t kqb_v8i __attribute__((vector_size(32)));
#define KQB_HAVE_X86 1
#define KQB_PASS 1
#define KQB_VEC 1
#define KQB_TGT __attribute__((target("avx2,fma")))
#define KQB_SFX(name) name##_avx2
#include "kq_best.c"
#undef KQB_TGT
#undef KQB_SFX
#define KQB_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define KQB_SFX(name) name##_avx512
#include "kq_best.c"
#undef KQB_TGT
#undef KQB_SFX
#undef KQB_PASS
#undef KQB_VEC
#endif
#define KQB_VEC 0
#define KQB_PASS 1
#define KQB_TGT
#define KQB_SFX(name) name##_scalar
#include "kq_best.c"
#undef KQB_TGT
#undef KQB_SFX
#undef KQB_PASS
#undef KQB_VEC


#ifdef KQB_DEV_KNOBS /* tuning builds only (-DKQB_DEV_KNOBS): parameters from the environment */
#include <stdlib.h>
#endif
void kqb_search(iqf_simd simd, const kqb_fmt *f0, const float *x, const float *qw,
                const float *sref0, const float *mref0, kqb_rep *r) {
    kqb_fmt ff = *f0;
    const kqb_fmt *f = &ff;
#ifdef KQB_DEV_KNOBS
    if (getenv("KQB_WIN")) ff.win = atoi(getenv("KQB_WIN"));
    if (getenv("KQB_WINM")) ff.winm = atoi(getenv("KQB_WINM"));
    if (getenv("KQB_SCAN")) ff.scan = atoi(getenv("KQB_SCAN"));
    if (getenv("KQB_NIT")) ff.nit = atoi(getenv("KQB_NIT"));
    if (getenv("KQB_NSTART")) ff.nstart = atoi(getenv("KQB_NSTART"));
    if (getenv("KQB_STEP")) ff.scan_step = (float)atof(getenv("KQB_STEP"));
    if (getenv("KQB_SIG")) ff.sig = (float)atof(getenv("KQB_SIG"));
#endif
#ifdef KQB_HAVE_X86
    if (simd == IQF_SIMD_AVX512) { search_avx512(f, x, qw, sref0, mref0, r); return; }
    if (simd == IQF_SIMD_AVX2) { search_avx2(f, x, qw, sref0, mref0, r); return; }
#endif
    (void)simd;
    search_scalar(f, x, qw, sref0, mref0, r);
}

#else /* KQB_PASS: the search, compiled once per instruction set */

/* The objective's weights (kq_best.h), computed on x and qw scaled by their block maxima. */
static KQB_TGT void KQB_SFX(weights)(const float *x, const float *qw, float sig, float *w) {
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

/* Codes of one sub-block (n a multiple of 8) at step s and offset mo,
 * q = nearest((x + mo) / s) clamped to [flo, fhi], and their weighted error with the
 * reconstruction computed as the decoder does. *res = sum w (y - x) (for the min's
 * least-squares step). */
static KQB_TGT float KQB_SFX(fit)(int n, const float *x, const float *w, float s, float mo, float flo,
                                  float fhi, int8_t *q, float *res) {
    float acc[8] = { 0 }, acr[8] = { 0 };
    if (s == 0) {
        const float z = flo > 0 ? flo : fhi < 0 ? fhi : 0;
        const float y = 0.f * z - mo;
        for (int i0 = 0; i0 < n; i0 += 8)
            for (int l = 0; l < 8; l++) {
                const int i = i0 + l;
                q[i] = (int8_t)z;
                float df = x[i] - y;
                acc[l] += w[i] * df * df;
                acr[l] += w[i] * (y - x[i]);
            }
    } else {
        float is = 1.f / s;
        const bool inv = isfinite(is);
        if (!inv) is = 1.f;
#if KQB_VEC
        const kqb_v8f vis = { is, is, is, is, is, is, is, is }, vs = { s, s, s, s, s, s, s, s };
        const kqb_v8f vmo = { mo, mo, mo, mo, mo, mo, mo, mo };
        const kqb_v8f vlo = { flo, flo, flo, flo, flo, flo, flo, flo }, vhi = { fhi, fhi, fhi, fhi, fhi, fhi, fhi, fhi };
        const kqb_v8f M = { KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC };
        kqb_v8f va = { 0 }, vr = { 0 };
        for (int i0 = 0; i0 < n; i0 += 8) {
            kqb_v8f xv, wv;
            memcpy(&xv, x + i0, sizeof xv);
            memcpy(&wv, w + i0, sizeof wv);
            kqb_v8f v = inv ? (xv + vmo) * vis : (xv + vmo) / vs;
            kqb_v8i m = v < vlo;
            v = (kqb_v8f)((m & (kqb_v8i)vlo) | (~m & (kqb_v8i)v));
            m = v > vhi;
            v = (kqb_v8f)((m & (kqb_v8i)vhi) | (~m & (kqb_v8i)v));
            const kqb_v8f r = (v + M) - M;
            const kqb_v8i ri = __builtin_convertvector(r, kqb_v8i);
            for (int l = 0; l < 8; l++) q[i0 + l] = (int8_t)ri[l];
            const kqb_v8f y = vs * r - vmo;
            const kqb_v8f df = xv - y;
            va = va + wv * df * df;
            vr = vr + wv * (y - xv);
        }
        memcpy(acc, &va, sizeof acc);
        memcpy(acr, &vr, sizeof acr);
#else
        for (int i0 = 0; i0 < n; i0 += 8)
            for (int l = 0; l < 8; l++) {
                const int i = i0 + l;
                float v = inv ? (x[i] + mo) * is : (x[i] + mo) / s;
                v = v < flo ? flo : v;
                v = v > fhi ? fhi : v;
                const float r = (v + KQB_MAGIC) - KQB_MAGIC;
                q[i] = (int8_t)r;
                const float y = s * r - mo;
                const float df = x[i] - y;
                acc[l] += w[i] * df * df;
                acr[l] += w[i] * (y - x[i]);
            }
#endif
    }
    *res = red8(acr);
    return red8(acc);
}

/* Error of a representation, sub-block by sub-block (inf if it decodes to non-finite values). */
static KQB_TGT double KQB_SFX(error)(const kqb_fmt *f, const float *x, const float *w, const kqb_rep *r) {
    const float d = h2f(r->hd), dm = f->mhi ? h2f(r->hdm) : 0.f;
    double e = 0;
    for (int j = 0; j < f->nsub; j++) {
        const float s = d * (float)r->k[j], mo = f->mhi ? dm * (float)r->m[j] : 0.f;
        const int o = j * f->sublen;
        float acc[8] = { 0 };
        for (int i0 = 0; i0 < f->sublen; i0 += 8)
            for (int l = 0; l < 8; l++) {
                const int i = o + i0 + l;
                const float y = s * (float)r->q[i] - mo;
                const float df = x[i] - y;
                acc[l] += w[i] * df * df;
            }
        e += red8(acc);
    }
    return isfinite(e) ? e : INFINITY;
}

/* Symmetric reference: the best least-squares scale over inverse scales that put the largest
 * |x| at either end of [qlo, qhi] (+- nstep steps of `step`). The candidates run 8 at a time,
 * one per lane; each candidate's sums run over the values in order. */
static KQB_TGT float KQB_SFX(sym_ref)(int n, const float *x, const float *w, int qlo, int qhi,
                                      int nstep, float step) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) { amax = a; mx = x[i]; }
    }
    if (amax == 0) return 0.f;
    const float fallback = mx / (float)qlo, flo = (float)qlo, fhi = (float)qhi;
    float wx[32], isv[2 * (2 * 16 + 1) + 8];
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
    while (ncp % 8) { isv[ncp] = isv[nc - 1]; ncp++; }
    float best = -1, bs = fallback;
    for (int c0 = 0; c0 < ncp; c0 += 8) {
        float a1[8] = { 0 }, a2[8] = { 0 };
#if KQB_VEC
        kqb_v8f vis, v1 = { 0 }, v2 = { 0 };
        memcpy(&vis, isv + c0, sizeof vis);
        const kqb_v8f vlo = { flo, flo, flo, flo, flo, flo, flo, flo }, vhi = { fhi, fhi, fhi, fhi, fhi, fhi, fhi, fhi };
        const kqb_v8f M = { KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC, KQB_MAGIC };
        for (int i = 0; i < n; i++) {
            const float xi = x[i], wi = w[i], wxi = wx[i];
            const kqb_v8f xv = { xi, xi, xi, xi, xi, xi, xi, xi }, wv = { wi, wi, wi, wi, wi, wi, wi, wi };
            const kqb_v8f wxv = { wxi, wxi, wxi, wxi, wxi, wxi, wxi, wxi };
            kqb_v8f v = vis * xv;
            kqb_v8i m = v < vlo;
            v = (kqb_v8f)((m & (kqb_v8i)vlo) | (~m & (kqb_v8i)v));
            m = v > vhi;
            v = (kqb_v8f)((m & (kqb_v8i)vhi) | (~m & (kqb_v8i)v));
            const kqb_v8f r = (v + M) - M;
            v1 = v1 + wxv * r;
            v2 = v2 + wv * r * r;
        }
        memcpy(a1, &v1, sizeof a1);
        memcpy(a2, &v2, sizeof a2);
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
        for (int l = 0; l < 8 && c0 + l < nc; l++) {
            if (a2[l] > 0) {
                const float score = a1[l] * a1[l] / a2[l];
                if (score > best) { best = score; bs = a1[l] / a2[l]; }
            }
        }
    }
    return isfinite(bs) ? bs : fallback;
}

#define KQB_NREF 2
#define KQB_MAXK (KQB_NREF * 16 + 1)

/* Best (k, m, codes) of one sub-block at d/dm: k in windows of +-W around the references (the
 * current k always a candidate), m for each k: the current reference's, then once re-solved
 * by least squares. Returns the sub-block's error. */
static KQB_TGT float KQB_SFX(sub_search)(const kqb_fmt *f, const float *x, const float *w, float sw,
                                         float d, float dm, const float *sref, const float *mref,
                                         int16_t *kio, int16_t *mio, int8_t *qio) {
    const int n = f->sublen, W = f->win;
    const bool asym = f->mhi != 0;
    const float flo = (float)f->qlo, fhi = (float)f->qhi;
    int8_t qt[32];
    int ks[KQB_MAXK], nk = 0;
    ks[nk++] = *kio;
    for (int r = 0; r < KQB_NREF; r++) {
        const int kc = int_near(sref[r], d, f->klo, f->khi);
        for (int k = kc - W; k <= kc + W; k++) {
            if (k < f->klo || k > f->khi) continue;
            bool seen = false;
            for (int t = 0; t < nk && !seen; t++) seen = ks[t] == k;
            if (!seen && nk < KQB_MAXK) ks[nk++] = k;
        }
    }
    int bk = *kio, bm = *mio;
    float res;
    float be = KQB_SFX(fit)(n, x, w, d * (float)bk, asym ? dm * (float)bm : 0.f, flo, fhi, qio, &res);
    const int mc = asym ? (dm == 0 ? bm : int_near(mref[0], dm, f->mlo, f->mhi)) : 0;
    const int WM = asym && dm != 0 ? f->winm : 0;
    for (int t = 0; t < nk; t++) {
        const int k = ks[t];
        const float s = d * (float)k;
        /* m candidates for this k: (the current m for the current k,) mc +- WM; the best of
         * them is then re-solved by least squares. */
        int km = t == 0 ? bm : mc;
        float ke = t == 0 ? be : INFINITY, kres = res;
        for (int m = mc - WM; m <= mc + WM; m++) {
            if (asym && (m < f->mlo || m > f->mhi)) continue;
            if (t == 0 && m == bm) continue;
            float r2;
            float e = KQB_SFX(fit)(n, x, w, s, asym ? dm * (float)m : 0.f, flo, fhi, qt, &r2);
            if (e < ke) { ke = e; km = m; kres = r2; }
            if (e < be) { be = e; bk = k; bm = m; memcpy(qio, qt, (size_t)n); }
        }
        if (!asym || dm == 0 || !(sw > 0) || !(ke < INFINITY)) continue;
        /* y = s q - mo: the least-squares mo for these codes is mo + sum w (y - x) / sum w. */
        const int m2 = int_near(dm * (float)km + kres / sw, dm, f->mlo, f->mhi);
        if (m2 == km) continue;
        float e = KQB_SFX(fit)(n, x, w, s, dm * (float)m2, flo, fhi, qt, &res);
        if (e < be) { be = e; bk = k; bm = m2; memcpy(qio, qt, (size_t)n); }
    }
    *kio = (int16_t)bk;
    *mio = (int16_t)bm;
    return be;
}

/* Least-squares d (and dmin) for the integers of r; false if singular. */
static KQB_TGT bool KQB_SFX(ls_scales)(const kqb_fmt *f, const float *x, const float *w, const kqb_rep *r,
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

static KQB_TGT void KQB_SFX(search)(const kqb_fmt *f, const float *x, const float *qw,
                                    const float *sref0, const float *mref0, kqb_rep *r) {
    float w[QK_K];
    KQB_SFX(weights)(x, qw, f->sig, w);
    const bool sym = f->mhi == 0;
    /* The start's codes: re-rounded at its decoded scales (the error-optimal codes for them). */
    {
        const float d = h2f(r->hd), dm = sym ? 0.f : h2f(r->hdm);
        for (int j = 0; j < f->nsub; j++) {
            float res;
            KQB_SFX(fit)(f->sublen, x + j * f->sublen, w + j * f->sublen, d * (float)r->k[j],
                         sym ? 0.f : dm * (float)r->m[j], (float)f->qlo, (float)f->qhi,
                         r->q + j * f->sublen, &res);
        }
    }
    double ebest = KQB_SFX(error)(f, x, w, r);
    kqb_rep best = *r;
    float sref[16], mref[16], sw[16];
    for (int j = 0; j < f->nsub; j++) {
        const float *xj = x + j * f->sublen, *wj = w + j * f->sublen;
        float a[8] = { 0 };
        for (int i0 = 0; i0 < f->sublen; i0 += 8)
            for (int l = 0; l < 8; l++) a[l] += wj[i0 + l];
        sw[j] = red8(a);
        if (f->scan > 0 && sym) sref[j] = KQB_SFX(sym_ref)(f->sublen, xj, wj, f->qlo, f->qhi, f->scan, f->scan_step);
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
                float res;
                s->k[j] = (int16_t)int_near(sref[j], d, f->klo, f->khi);
                s->m[j] = (int16_t)(sym ? 0 : int_near(mref[j], dm, f->mlo, f->mhi));
                KQB_SFX(fit)(f->sublen, x + j * f->sublen, w + j * f->sublen, d * (float)s->k[j],
                             sym ? 0.f : dm * (float)s->m[j], (float)f->qlo, (float)f->qhi,
                             s->q + j * f->sublen, &res);
            }
            nstart++;
        }
    }
    for (int st = 0; st < nstart; st++) {
        kqb_rep cur = start[st];
        float dprev = h2f(cur.hd), dmprev = sym ? 0.f : h2f(cur.hdm);
        for (int it = 0; it < f->nit; it++) {
            const float d = h2f(cur.hd), dm = sym ? 0.f : h2f(cur.hdm);
            double e = 0;
            for (int j = 0; j < f->nsub; j++) {
                const float sr[KQB_NREF] = { sref[j], dprev * (float)cur.k[j] };
                const float mr[KQB_NREF] = { it == 0 ? mref[j] : dmprev * (float)cur.m[j], 0.f };
                e += KQB_SFX(sub_search)(f, x + j * f->sublen, w + j * f->sublen, sw[j], d, dm, sr,
                                         mr, &cur.k[j], &cur.m[j], cur.q + j * f->sublen);
            }
            if (e < ebest) {
                ebest = e;
                best = cur;
            }
            if (it + 1 == f->nit) break;
            uint16_t hd, hdm;
            if (!KQB_SFX(ls_scales)(f, x, w, &cur, &hd, &hdm)) break;
            if (hd == cur.hd && hdm == cur.hdm) break;
            dprev = d;
            dmprev = dm;
            cur.hd = hd;
            cur.hdm = hdm;
        }
    }
    *r = best;
}

#endif /* KQB_PASS */
