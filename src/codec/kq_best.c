/*
 * kq_best.c - IQF_MODE_BEST search for q2_K..q6_K (see kq_best.h).
 *
 * The search works on the weights as the decoder reconstructs them: every candidate is scored by
 * the weighted squared error of y = (d*k)*q - dmin*m, with d and dmin already rounded to fp16
 * and k, m, q the integers that will be stored.
 *
 *  1. Per sub-block, a dense scan of continuous scales (and mins): for each candidate the codes
 *     are re-rounded and the least-squares scale (and min) re-solved; the best becomes the
 *     sub-block's reference.
 *  2. From a start (the compat block, and a start whose d/dmin put the largest reference at the
 *     end of the integer range), alternate: at the fixed fp16 d/dmin, every sub-block picks the
 *     integer scale (and min) in a window around its references that gives the lowest error with
 *     its codes re-rounded; then d/dmin are re-solved by least squares for the chosen integers
 *     and rounded to fp16.
 *  3. The lowest error seen wins; the start (compat's block) is kept unless something is lower.
 *
 * Plain C, sequential sums in a fixed order: the same bytes on every machine and SIMD level.
 */
#include "kq_best.h"

#include <math.h>
#include <string.h>

#define KQB_FP16_MAX 65504.f

static inline float h2f(uint16_t h) { return IQF_FP16_TO_FP32(h); }

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

void kqb_weights(const float *x, const float *qw, float sig_mul, float *w) {
    double amax = 0, qmax = 0;
    for (int i = 0; i < QK_K; i++) {
        double a = fabs((double)x[i]);
        if (a > amax) amax = a;
        if (qw && qw[i] > qmax) qmax = qw[i];
    }
    const double ia = amax > 0 ? 1.0 / amax : 0.0, iq = qmax > 0 ? 1.0 / qmax : 0.0;
    double s2 = 0;
    for (int i = 0; i < QK_K; i++) {
        double t = x[i] * ia;
        s2 += t * t;
    }
    const double sigma2 = sig_mul * s2 / QK_K;
    for (int i = 0; i < QK_K; i++) {
        double t = x[i] * ia;
        double v = sqrt(sigma2 + t * t);
        if (qw) v *= qw[i] * iq;
        w[i] = (float)v;
    }
}

/* Codes of one sub-block at step s and offset mo (q = nearest((x + mo) / s) clamped), and their
 * weighted error, the reconstruction computed as the decoder does. */
static double sub_fit(int n, const float *x, const float *w, float s, float mo, int qlo, int qhi,
                      int8_t *q) {
    double e = 0;
    if (s == 0) {
        const int z = qlo > 0 ? qlo : qhi < 0 ? qhi : 0;
        const float y = 0.f * (float)z - mo;
        for (int i = 0; i < n; i++) {
            q[i] = (int8_t)z;
            double df = (double)x[i] - (double)y;
            e += w[i] * df * df;
        }
        return e;
    }
    const float is = 1.f / s, flo = (float)qlo, fhi = (float)qhi;
    const bool inv_ok = isfinite(is);
    for (int i = 0; i < n; i++) {
        float v = inv_ok ? (x[i] + mo) * is : (x[i] + mo) / s;
        int l = iqf_nearest_int(clampf(v, flo, fhi));
        q[i] = (int8_t)l;
        float y = s * (float)l - mo;
        double df = (double)x[i] - (double)y;
        e += w[i] * df * df;
    }
    return e;
}

double kqb_error(const kqb_fmt *f, const float *x, const float *w, const kqb_rep *r) {
    const float d = h2f(r->hd), dm = f->mhi ? h2f(r->hdm) : 0.f;
    double e = 0;
    for (int j = 0; j < f->nsub; j++) {
        const float s = d * (float)r->k[j], mo = f->mhi ? dm * (float)r->m[j] : 0.f;
        const int o = j * f->sublen;
        for (int i = 0; i < f->sublen; i++) {
            float y = s * (float)r->q[o + i] - mo;
            if (!isfinite(y)) return INFINITY;
            double df = (double)x[o + i] - (double)y;
            e += w[o + i] * df * df;
        }
    }
    return e != e ? INFINITY : e;
}

/* ---- step 1: per-sub-block references ---- */

/* Symmetric (q in [qlo, qhi], qlo = -qhi - 1): the best least-squares scale over candidate
 * inverse scales that put the largest |x| at either end of the code range. */
static float sym_ref(int n, const float *x, const float *w, int qlo, int qhi, int nstep, float step) {
    float amax = 0, mx = 0;
    for (int i = 0; i < n; i++) {
        float a = fabsf(x[i]);
        if (a > amax) { amax = a; mx = x[i]; }
    }
    if (amax == 0) return 0.f;
    const float fallback = mx / (float)qlo;
    double best = -1, bs = fallback;
    for (int side = 0; side < 2; side++) {
        const float end = side ? (float)qhi : (float)-qlo;
        for (int t = -nstep; t <= nstep; t++) {
            const float is = (side ? 1.f : -1.f) * (end + step * (float)t) / mx;
            if (!(is != 0) || !isfinite(is)) continue;
            double sxq = 0, sqq = 0;
            for (int i = 0; i < n; i++) {
                int l = iqf_nearest_int(clampf(is * x[i], (float)qlo, (float)qhi));
                sxq += (double)w[i] * x[i] * l;
                sqq += (double)w[i] * l * l;
            }
            if (sqq > 0) {
                double score = sxq * sxq / sqq;
                if (score > best) { best = score; bs = sxq / sqq; }
            }
        }
    }
    return isfinite((float)bs) ? (float)bs : fallback;
}

/* Asymmetric (q in [0, qhi], y = s*q - mo, mo >= 0): candidate inverse scales over [min, max]
 * with the least-squares (s, mo) re-solved for each. */
static void asym_ref(int n, const float *x, const float *w, int qhi, float rmin, float rdelta,
                     int nstep, float *sref, float *mref) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    if (mn > 0) mn = 0;
    if (mx <= mn) { *sref = 0; *mref = -mn; return; }
    double sw = 0, sx = 0, sxx = 0;
    for (int i = 0; i < n; i++) {
        sw += w[i];
        sx += (double)w[i] * x[i];
        sxx += (double)w[i] * x[i] * x[i];
    }
    double best = INFINITY, bs = (mx - mn) / qhi, bm = -mn;
    for (int t = 0; t <= nstep; t++) {
        const float is = ((float)qhi + rmin + rdelta * (float)t) / (mx - mn);
        if (!isfinite(is)) continue;
        double sq = 0, sqq = 0, sxq = 0;
        for (int i = 0; i < n; i++) {
            int l = iqf_nearest_int(clampf(is * (x[i] - mn), 0.f, (float)qhi));
            sq += (double)w[i] * l;
            sqq += (double)w[i] * l * l;
            sxq += (double)w[i] * l * x[i];
        }
        double D = sw * sqq - sq * sq;
        if (!(D > 0)) continue;
        double s = (sw * sxq - sx * sq) / D, b = (sqq * sx - sq * sxq) / D;
        if (b > 0) { b = 0; s = sxq / sqq; }
        double e = sxx - 2 * s * sxq - 2 * b * sx + s * s * sqq + 2 * s * b * sq + b * b * sw;
        if (e < best) { best = e; bs = s; bm = -b; }
    }
    *sref = isfinite((float)bs) ? (float)bs : 0.f;
    *mref = isfinite((float)bm) ? (float)bm : 0.f;
}

/* ---- step 2: integer sub-block scales at fixed fp16 d/dmin ---- */

#define KQB_NREF 2

/* The nearest integer to v/d in [lo, hi] (v/d may be huge or d zero). */
static inline int int_near(float v, float d, int lo, int hi) {
    if (d == 0) return lo > 0 ? lo : hi < 0 ? hi : 0;
    float c = v / d;
    if (c != c) return 0;
    return iqf_nearest_int(clampf(c, (float)lo, (float)hi));
}

/* Best (k, m, codes) of sub-block j at d/dm among windows around the references; cur holds the
 * current choice (always a candidate). Returns the sub-block's error. */
static double sub_search(const kqb_fmt *f, const float *x, const float *w, float d, float dm,
                         const float *sref, const float *mref, int W, int WM, int16_t *kio,
                         int16_t *mio, int8_t *qio) {
    const int n = f->sublen;
    int8_t qt[32];
    int tried_k[KQB_NREF * 24 + 1], tried_m[KQB_NREF * 24 + 1], ntried = 0;
    int bk = *kio, bm = *mio;
    double be = sub_fit(n, x, w, d * (float)bk, f->mhi ? dm * (float)bm : 0.f, f->qlo, f->qhi, qio);
    tried_k[ntried] = bk;
    tried_m[ntried++] = bm;
    for (int r = 0; r < KQB_NREF; r++) {
        const int kc = int_near(sref[r], d, f->klo, f->khi);
        const int mc = f->mhi ? (dm == 0 ? bm : int_near(mref[r], dm, f->mlo, f->mhi)) : 0;
        const int wm = f->mhi && dm != 0 ? WM : 0;
        for (int k = kc - W; k <= kc + W; k++) {
            if (k < f->klo || k > f->khi) continue;
            for (int m = mc - wm; m <= mc + wm; m++) {
                if (f->mhi && (m < f->mlo || m > f->mhi)) continue;
                bool seen = false;
                for (int t = 0; t < ntried && !seen; t++) seen = tried_k[t] == k && tried_m[t] == m;
                if (seen) continue;
                if (ntried < (int)(sizeof tried_k / sizeof tried_k[0])) {
                    tried_k[ntried] = k;
                    tried_m[ntried++] = m;
                }
                double e = sub_fit(n, x, w, d * (float)k, f->mhi ? dm * (float)m : 0.f, f->qlo, f->qhi, qt);
                if (e < be) {
                    be = e;
                    bk = k;
                    bm = m;
                    memcpy(qio, qt, (size_t)n);
                }
            }
        }
    }
    *kio = (int16_t)bk;
    *mio = (int16_t)bm;
    return be;
}

static inline uint16_t f2h_finite(double v) {
    float f = (float)v;
    if (!(f == f)) f = 0;
    f = clampf(f, -KQB_FP16_MAX, KQB_FP16_MAX);
    return IQF_FP32_TO_FP16(f);
}

/* Least-squares d (and dmin) for the integers of r; false if singular. */
static bool ls_scales(const kqb_fmt *f, const float *x, const float *w, const kqb_rep *r,
                      uint16_t *hd, uint16_t *hdm) {
    double saa = 0, sab = 0, sbb = 0, sax = 0, sbx = 0;
    for (int j = 0; j < f->nsub; j++) {
        const int o = j * f->sublen;
        const double b = f->mhi ? r->m[j] : 0;
        for (int i = 0; i < f->sublen; i++) {
            const double a = (double)r->k[j] * r->q[o + i], wi = w[o + i], xi = x[o + i];
            saa += wi * a * a;
            sab += wi * a * b;
            sbb += wi * b * b;
            sax += wi * a * xi;
            sbx += wi * b * xi;
        }
    }
    if (!f->mhi) {
        if (!(saa > 0)) return false;
        *hd = f2h_finite(sax / saa);
        *hdm = r->hdm;
        return true;
    }
    /* minimise sum w (d a - dm b - x)^2 */
    const double det = saa * sbb - sab * sab;
    if (!(det > 0)) {
        if (!(saa > 0)) return false;
        *hd = f2h_finite(sax / saa);
        *hdm = r->hdm;
        return true;
    }
    *hd = f2h_finite((sax * sbb - sbx * sab) / det);
    *hdm = f2h_finite((sax * sab - sbx * saa) / det);
    return true;
}

#define KQB_NIT 3

void kqb_search(const kqb_fmt *f, const float *x, const float *w, kqb_rep *r) {
    double ebest = kqb_error(f, x, w, r);
    kqb_rep best = *r;
    const bool sym = f->mhi == 0;
    float sref[16][KQB_NREF], mref[16][KQB_NREF];
    for (int j = 0; j < f->nsub; j++) {
        const float *xj = x + j * f->sublen, *wj = w + j * f->sublen;
        if (sym) {
            const int nstep = f->qhi >= 16 ? 6 : 12;
            sref[j][0] = sym_ref(f->sublen, xj, wj, f->qlo, f->qhi, nstep, 0.1f);
            mref[j][0] = 0;
        } else {
            asym_ref(f->sublen, xj, wj, f->qhi, -0.9f, 0.05f, 36, &sref[j][0], &mref[j][0]);
        }
    }
    /* Starts: the given block, and d/dmin from the largest references. */
    kqb_rep start[2];
    int nstart = 1;
    start[0] = *r;
    {
        kqb_rep *s = &start[1];
        *s = *r;
        float smax = 0, amax = 0, mmax = 0;
        for (int j = 0; j < f->nsub; j++) {
            if (fabsf(sref[j][0]) > amax) { amax = fabsf(sref[j][0]); smax = sref[j][0]; }
            if (mref[j][0] > mmax) mmax = mref[j][0];
        }
        if (amax > 0) {
            s->hd = f2h_finite(sym ? smax / (double)f->klo : amax / (double)f->khi);
            if (!sym) s->hdm = f2h_finite(mmax / (double)f->mhi);
            const float d = h2f(s->hd), dm = sym ? 0.f : h2f(s->hdm);
            for (int j = 0; j < f->nsub; j++) {
                s->k[j] = (int16_t)int_near(sref[j][0], d, f->klo, f->khi);
                s->m[j] = (int16_t)(sym ? 0 : int_near(mref[j][0], dm, f->mlo, f->mhi));
                sub_fit(f->sublen, x + j * f->sublen, w + j * f->sublen, d * (float)s->k[j],
                        sym ? 0.f : dm * (float)s->m[j], f->qlo, f->qhi, s->q + j * f->sublen);
            }
            nstart = 2;
        }
    }
    const int W = 2, WM = 2;
    for (int st = 0; st < nstart; st++) {
        kqb_rep cur = start[st];
        float dprev = h2f(cur.hd), dmprev = sym ? 0.f : h2f(cur.hdm);
        for (int it = 0; it < KQB_NIT; it++) {
            const float d = h2f(cur.hd), dm = sym ? 0.f : h2f(cur.hdm);
            double e = 0;
            for (int j = 0; j < f->nsub; j++) {
                const float sr[KQB_NREF] = { sref[j][0], dprev * (float)cur.k[j] };
                const float mr[KQB_NREF] = { mref[j][0], dmprev * (float)cur.m[j] };
                e += sub_search(f, x + j * f->sublen, w + j * f->sublen, d, dm, sr, mr, W, WM,
                                &cur.k[j], &cur.m[j], cur.q + j * f->sublen);
            }
            if (e < ebest) {
                double ee = kqb_error(f, x, w, &cur);
                if (ee < ebest) {
                    ebest = ee;
                    best = cur;
                }
            }
            uint16_t hd, hdm;
            if (!ls_scales(f, x, w, &cur, &hd, &hdm)) break;
            if (hd == cur.hd && hdm == cur.hdm) break;
            dprev = d;
            dmprev = dm;
            cur.hd = hd;
            cur.hdm = hdm;
        }
    }
    *r = best;
}
