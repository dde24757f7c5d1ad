/*
 * kq_common.c - scale searches shared by legacy.c and kquants.c (see kq_common.h).
 *
 * Scalar functions follow ggml 0.25.1 (ggml-quants.c, MIT, ggml authors) operation by
 * operation; comments name the reference's expression where the float evaluation order matters.
 *
 * The SIMD batch kernels are written once over vec_lanes.h and compiled twice
 * (kq_common_lanes.h, included once per width): 8 lanes under target("avx2,fma") and 16 lanes
 * under target("avx512f,..."). Each lane is one independent group running exactly the scalar
 * sequence (same sums in the same order, nearest_int by the same magic-number trick, branches
 * turned into per-lane selects), so results are bitwise those of the scalar functions.
 */

#include "kq_common.h"
#include "util/fma.h"

#include <math.h>
#include <string.h>

#define KQ_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KQ_MIN(a, b) ((a) < (b) ? (a) : (b))

/* The value of largest magnitude (the first one) into *max; false, with L zeroed, when every |x|
 * is below KQ_GROUP_MAX_EPS (make_qx_quants and make_q3_quants then return 0). */
static bool group_max(int n, const float *x, int8_t *L, float *max) {
    float amax;
    *max = kq_signed_max(n, x, &amax);
    if (amax < KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return false;
    }
    return true;
}

float iqf_kq_make_qx_quants(int n, int nmax, const float *x, int8_t *L, int rmse_type, const float *qw) {
    float max;
    if (!group_max(n, x, L, &max)) return 0.f;
    float iscale = -nmax / max;
    if (rmse_type == 0) {
        for (int i = 0; i < n; ++i) {
            int l = iqf_nearest_int(iscale * x[i]);
            L[i] = (int8_t)(nmax + KQ_MAX(-nmax, KQ_MIN(nmax - 1, l)));
        }
        return 1 / iscale;
    }
    bool return_early = false;
    if (rmse_type < 0) {
        rmse_type = -rmse_type;
        return_early = true;
    }
#define KQ_QX_W(i)                                                                               \
    (qw ? qw[i] : rmse_type == 1 ? x[i] * x[i] : rmse_type == 2 ? 1 : rmse_type == 3 ? fabsf(x[i]) \
                                                                                     : sqrtf(fabsf(x[i])))
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = iqf_nearest_int(iscale * x[i]);
        l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = KQ_QX_W(i);
        sumlx += w * x[i] * l; /* unfused on arm64 too (fma.h) */
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -IQF_FMA_ARM(0.1f, is, nmax) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = iqf_nearest_int(iscale * x[i]);
            l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
            float w = KQ_QX_W(i);
            /* fused on arm64 for the 16-value groups (q3_K, q6_K), not the 32 (q4_0, q5_0) */
            sumlx = IQF_FMA_ARM_IF(n < 32, w * x[i], l, sumlx);
            suml2 = IQF_FMA_ARM_IF(n < 32, w * l, l, suml2);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int l = iqf_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + KQ_MAX(-nmax, KQ_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
#undef KQ_QX_W
    return scale;
}

float iqf_kq_make_q3_quants(int n, int nmax, const float *x, int8_t *L, bool do_rmse) {
    float max;
    if (!group_max(n, x, L, &max)) return 0.f;
    float iscale = -nmax / max;
    if (do_rmse) {
        float sumlx = 0, suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = iqf_nearest_int(iscale * x[i]);
            l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
            L[i] = (int8_t)l;
            float w = x[i] * x[i];
            sumlx = IQF_FMA_ARM(w * x[i], l, sumlx);
            suml2 = IQF_FMA_ARM(w * l, l, suml2);
        }
        for (int itry = 0; itry < 5; ++itry) {
            int n_changed = 0;
            for (int i = 0; i < n; ++i) {
                float w = x[i] * x[i];
                float slx = IQF_FNMA_ARM(w * x[i], L[i], sumlx);
                if (slx > 0) {
                    float sl2 = IQF_FNMA_ARM(w * L[i], L[i], suml2);
                    int new_l = iqf_nearest_int(x[i] * sl2 / slx);
                    new_l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, new_l));
                    if (new_l != L[i]) {
                        slx = IQF_FMA_ARM(w * x[i], new_l, slx);
                        sl2 = IQF_FMA_ARM(w * new_l, new_l, sl2);
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            L[i] = (int8_t)new_l;
                            sumlx = slx;
                            suml2 = sl2;
                            ++n_changed;
                        }
                    }
                }
            }
            if (!n_changed) break;
        }
        for (int i = 0; i < n; ++i) L[i] = (int8_t)(L[i] + nmax);
        return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
    }
    for (int i = 0; i < n; ++i) {
        int l = iqf_nearest_int(iscale * x[i]);
        l = KQ_MAX(-nmax, KQ_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
    }
    return 1 / iscale;
}

float iqf_kq_make_qkx_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L,
                         float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                         bool use_mad) {
#define KQ_KX_W(i) (weights ? weights[i] : x[i] * x[i])
    float min = x[0], max = x[0];
    float sum_w = KQ_KX_W(0);
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = KQ_KX_W(i);
        sum_w += w;
        sum_x = IQF_FMA_ARM(w, x[i], sum_x);
    }
    if (min > 0) min = 0;
    if (max <= min) { /* make_qkx2 tests max == min: the same once min <= 0 <= ... */
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        int l = iqf_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)KQ_MAX(0, KQ_MIN(nmax, l));
        float diff = IQF_FMA_ARM(scale, L[i], min) - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float w = KQ_KX_W(i);
        best_error = IQF_FMA_ARM_IF(n < 32, w, diff, best_error); /* fused on arm64 for 16 values (q2_K) */
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (IQF_FMA_ARM(rdelta, is, rmin) + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = iqf_nearest_int(iscale * (x[i] - min));
            l = KQ_MAX(0, KQ_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            float w = KQ_KX_W(i);
            sum_l += w * l; /* these three unfused on arm64 too (fma.h) */
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = IQF_FMS_ARM(sum_w, sum_l2, sum_l * sum_l);
        if (D > 0) {
            float this_scale = IQF_FMS_ARM(sum_w, sum_xl, sum_x * sum_l) / D;
            float this_min = IQF_FMS_ARM(sum_l2, sum_x, sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = IQF_FMA_ARM(this_scale, Laux[i], this_min) - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float w = KQ_KX_W(i);
                cur_error = IQF_FMA_ARM(w, diff, cur_error);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
#undef KQ_KX_W
    *the_min = -min;
    return scale;
}

float iqf_kq_make_qp_quants(int n, int nmax, const float *x, uint8_t *L, const float *quant_weights) {
    float max = 0;
    for (int i = 0; i < n; ++i) max = KQ_MAX(max, x[i]);
    if (max < KQ_GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.f;
    }
    float iscale = nmax / max;
    for (int i = 0; i < n; ++i) L[i] = (uint8_t)iqf_nearest_int(iscale * x[i]);
    float scale = 1 / iscale;
    float best_mse = 0;
    for (int i = 0; i < n; ++i) {
        float diff = IQF_FNMA_ARM(scale, L[i], x[i]);
        float w = quant_weights[i];
        best_mse += w * diff * diff; /* unfused on arm64 too for n % 8 == 0 (fma.h) */
    }
    for (int is = -4; is <= 4; ++is) {
        if (is == 0) continue;
        float iscale_is = IQF_FMA_ARM(0.1f, is, nmax) / max;
        float scale_is = 1 / iscale_is;
        float mse = 0;
        for (int i = 0; i < n; ++i) {
            int l = iqf_nearest_int(iscale_is * x[i]);
            l = KQ_MIN(nmax, l);
            float diff = IQF_FNMA_ARM(scale_is, l, x[i]);
            float w = quant_weights[i];
            mse += w * diff * diff;
        }
        if (mse < best_mse) {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = iqf_nearest_int(iscale * x[i]);
        l = KQ_MIN(nmax, l);
        L[i] = (uint8_t)l;
        float w = quant_weights[i];
        sumlx += w * x[i] * l; /* unfused on arm64 too for n % 4 == 0: vectorized (fma.h) */
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            float w = quant_weights[i];
            float slx = IQF_FNMA_ARM(w * x[i], L[i], sumlx);
            float sl2 = IQF_FNMA_ARM(w * L[i], L[i], suml2);
            if (slx > 0 && sl2 > 0) {
                int new_l = iqf_nearest_int(x[i] * sl2 / slx);
                new_l = KQ_MIN(nmax, new_l);
                if (new_l != L[i]) {
                    slx = IQF_FMA_ARM(w * x[i], new_l, slx);
                    sl2 = IQF_FMA_ARM(w * new_l, new_l, sl2);
                    if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (uint8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- the batches: one search kind and its parameters (those of the kind's scalar function) ---- */
enum { KQ_QX, KQ_Q3, KQ_QKX };
typedef struct {
    int kind, n, nmax;
    float rmin, rdelta; /* KQ_QKX */
    int nstep;
    bool use_mad;
} kq_search;

/* ---- SIMD instantiations ---- */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "kq_common_lanes.h"
#include "lanes_neon.h"
#ifdef IQF_ARCH_X86

#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "kq_common_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX

#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#include "vec_lanes.h"
#include "kq_common_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

/* G groups of one search kind: the lane kernels at the SIMD levels, the scalar function per group
 * otherwise (the same bits). */
static void run_batch(iqf_simd simd, const kq_search *s, int G, const float *x, const float *w, void *L,
                      float *scales, float *mins) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) { batch_avx512(s, G, x, w, L, scales, mins); return; }
    if (simd == IQF_SIMD_AVX2) { batch_avx2(s, G, x, w, L, scales, mins); return; }
#endif
    if (simd == IQF_SIMD_NEON) { batch_neon(s, G, x, w, L, scales, mins); return; }
    (void)simd;
    const int n = s->n;
    uint8_t Laux[32];
    for (int g = 0; g < G; g++) {
        const float *xg = x + (size_t)g * n, *wg = w ? w + (size_t)g * n : NULL;
        void *Lg = (uint8_t *)L + (size_t)g * n;
        if (s->kind == KQ_QX) scales[g] = iqf_kq_make_qx_quants(n, s->nmax, xg, Lg, 1, wg);
        else if (s->kind == KQ_Q3) scales[g] = iqf_kq_make_q3_quants(n, s->nmax, xg, Lg, true);
        else scales[g] = iqf_kq_make_qkx_quants(n, s->nmax, xg, wg, Lg, &mins[g], Laux, s->rmin, s->rdelta, s->nstep, s->use_mad);
    }
}

void iqf_kq_qx_batch(iqf_simd simd, int G, int n, int nmax, const float *x, const float *qw, int8_t *L,
                 float *scales) {
    const kq_search s = { KQ_QX, n, nmax, 0, 0, 0, false };
    run_batch(simd, &s, G, x, qw, L, scales, NULL);
}

void iqf_kq_q3_batch(iqf_simd simd, int G, int n, int nmax, const float *x, int8_t *L, float *scales) {
    const kq_search s = { KQ_Q3, n, nmax, 0, 0, 0, false };
    run_batch(simd, &s, G, x, NULL, L, scales, NULL);
}

void iqf_kq_qkx_batch(iqf_simd simd, int G, int n, int nmax, const float *x, const float *w, uint8_t *L,
                  float *scales, float *mins, float rmin, float rdelta, int nstep, bool use_mad) {
    const kq_search s = { KQ_QKX, n, nmax, rmin, rdelta, nstep, use_mad };
    run_batch(simd, &s, G, x, w, L, scales, mins);
}

void iqf_kq_impl_weights(iqf_simd simd, int64_t n, const float *x, const float *qw, float sigma2, float *w) {
    int64_t j = 0;
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) j = impl_weights_avx512(n, x, qw, sigma2, w);
    else if (simd == IQF_SIMD_AVX2) j = impl_weights_avx2(n, x, qw, sigma2, w);
#endif
    if (simd == IQF_SIMD_NEON) j = impl_weights_neon(n, x, qw, sigma2, w);
    (void)simd;
    for (; j < n; ++j) w[j] = qw[j] * sqrtf(IQF_FMA_ARM(x[j], x[j], sigma2));
}

void iqf_kq_requant(iqf_simd simd, int ng, int gs, const float *x, const float *d, const float *dm,
                int lo, int hi, int off, uint8_t *L) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) { requant_avx512(ng, gs, x, d, dm, lo, hi, off, L); return; }
    if (simd == IQF_SIMD_AVX2) { requant_avx2(ng, gs, x, d, dm, lo, hi, off, L); return; }
#endif
    if (simd == IQF_SIMD_NEON) { requant_neon(ng, gs, x, d, dm, lo, hi, off, L); return; }
    (void)simd;
    for (int g = 0; g < ng; g++) {
        if (!d[g]) continue;
        const float *xg = x + (size_t)g * gs;
        uint8_t *Lg = L + (size_t)g * gs;
        for (int i = 0; i < gs; i++) {
            int l = iqf_nearest_int(dm ? (xg[i] + dm[g]) / d[g] : xg[i] / d[g]);
            l = KQ_MAX(lo, KQ_MIN(hi, l));
            Lg[i] = (uint8_t)(l + off);
        }
    }
}

