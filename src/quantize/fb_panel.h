/*
 * fb_panel.h - the panel kernels of the error feedback's GPTQ recursion (fb_panel.c), shared by
 * the sweeps of feedback.c.
 *
 * Columns are swept in panels of FB_PANEL: the errors of a panel's columns are applied at once
 * to the panel's later columns (immediately, one by one) and then, lazily, to all columns after
 * the panel (a P x n matrix product). Per element the updates still come in ascending column
 * order, each a float multiply and then a subtraction, on every SIMD level (no fused
 * multiply-add): the same bits as the plain column-by-column loop.
 */
#ifndef IQF_QUANTIZE_FB_PANEL_H
#define IQF_QUANTIZE_FB_PANEL_H

#include "iqforge.h"
#include "../util/arch.h"

#include <stdint.h>

#define FB_PANEL 16
#define FB_APPLY_R 8 /* rows iqf_fb_apply_rows handles together on the SIMD levels */

/* t[c] -= sum_k e[k] * Ub[k*bs + c] for c < n, k ascending (P rows of U starting at Ub), a
 * multiply then a subtraction per term: the same bits on every SIMD level. */
void iqf_fb_apply(iqf_simd simd, float *t, const float *Ub, int64_t bs, const float *e, int P, int64_t n);
/* iqf_fb_apply to R rows: ts[r] at the same columns, es[r] their errors (P <= FB_PANEL of them). */
void iqf_fb_apply_rows(iqf_simd simd, int R, float *const *ts, const float *Ub, int64_t bs,
                       const float (*es)[FB_PANEL], int P, int64_t n);

/* x[c] -= e * u[c] for the panel's columns c in (k, FB_PANEL): the same operations as the scalar
 * loop, lane by lane (masked lanes are left untouched). */
static inline void fb_panel_update_scalar(float *x, const float *u, int k, float e) {
    for (int c = k + 1; c < FB_PANEL; c++) x[c] -= e * u[c];
}

#ifdef IQF_ARCH_X86
__attribute__((target("avx2"))) static inline void fb_panel_update_avx2(float *x, const float *u, int k, float e) {
    const __m256 ev = _mm256_set1_ps(e);
    const __m256i kk = _mm256_set1_epi32(k), lo = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                  hi = _mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15);
    const __m256 m0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(lo, kk)), m1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(hi, kk));
    const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    const __m256 r0 = _mm256_sub_ps(x0, _mm256_mul_ps(ev, _mm256_loadu_ps(u)));
    const __m256 r1 = _mm256_sub_ps(x1, _mm256_mul_ps(ev, _mm256_loadu_ps(u + 8)));
    _mm256_storeu_ps(x, _mm256_blendv_ps(x0, r0, m0));
    _mm256_storeu_ps(x + 8, _mm256_blendv_ps(x1, r1, m1));
}

__attribute__((target("avx512f"))) static inline void fb_panel_update_avx512(float *x, const float *u, int k, float e) {
    const __mmask16 m = (__mmask16)(0xFFFFu << (k + 1));
    const __m512 xv = _mm512_loadu_ps(x);
    _mm512_storeu_ps(x, _mm512_mask_sub_ps(xv, m, xv, _mm512_mul_ps(_mm512_set1_ps(e), _mm512_loadu_ps(u))));
}

#endif /* IQF_ARCH_X86 */

static inline void iqf_fb_panel_update(iqf_simd simd, float *x, const float *u, int k, float e) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) fb_panel_update_avx512(x, u, k, e);
    else if (IQF_SIMD_IS_X86(simd)) fb_panel_update_avx2(x, u, k, e);
    else
#else
    (void)simd;
#endif
        fb_panel_update_scalar(x, u, k, e);
}

#endif
