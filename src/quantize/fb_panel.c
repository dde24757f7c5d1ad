/* fb_panel.c - the panel kernels of the error feedback (fb_panel.h). */
#include "fb_panel.h"

#include <assert.h>

/* t[c] -= sum_k e[k] * Ub[k*bs + c] for c < n, k ascending (P rows of U starting at Ub). */
static void apply_scalar(float *t, const float *Ub, int64_t bs, const float *e, int P, int64_t n) {
    for (int64_t c = 0; c < n; c++) {
        float x = t[c];
        for (int k = 0; k < P; k++) x -= e[k] * Ub[k * bs + c];
        t[c] = x;
    }
}

/* One body for both vector widths (W floats: 8 AVX2, 16 AVX-512): t[c] -= e[k] * Ub[k][c] over k in
 * order, a multiply then a subtract per term as apply_scalar; 4 vectors per pass, then one, then
 * TAIL (the next narrower path) for the rest. */
#define FB_APPLY_BODY(W, VEC, LOADU, STOREU, SET1, MUL, SUB, TAIL)                                    \
    int64_t c = 0;                                                                                    \
    for (; c + 4 * (W) <= n; c += 4 * (W)) {                                                          \
        VEC x[4];                                                                                     \
        for (int v = 0; v < 4; v++) x[v] = LOADU(t + c + v * (W));                                    \
        for (int k = 0; k < P; k++) {                                                                 \
            const VEC ek = SET1(e[k]);                                                                \
            const float *u = Ub + k * bs + c;                                                         \
            for (int v = 0; v < 4; v++) x[v] = SUB(x[v], MUL(ek, LOADU(u + v * (W))));               \
        }                                                                                             \
        for (int v = 0; v < 4; v++) STOREU(t + c + v * (W), x[v]);                                    \
    }                                                                                                 \
    for (; c + (W) <= n; c += (W)) {                                                                  \
        VEC x0 = LOADU(t + c);                                                                        \
        for (int k = 0; k < P; k++) x0 = SUB(x0, MUL(SET1(e[k]), LOADU(Ub + k * bs + c)));            \
        STOREU(t + c, x0);                                                                            \
    }                                                                                                 \
    if (c < n) TAIL(t + c, Ub + c, bs, e, P, n - c);

#ifdef IQF_ARCH_X86
__attribute__((target("avx2"))) static void apply_avx2(float *t, const float *Ub, int64_t bs, const float *e, int P,
                                                     int64_t n) {
    FB_APPLY_BODY(8, __m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_mul_ps, _mm256_sub_ps,
                  apply_scalar)
}

__attribute__((target("avx512f"))) static void apply_avx512(float *t, const float *Ub, int64_t bs, const float *e,
                                                          int P, int64_t n) {
    FB_APPLY_BODY(16, __m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_mul_ps, _mm512_sub_ps,
                  apply_avx2)
}

#endif /* IQF_ARCH_X86 */

void iqf_fb_apply(iqf_simd simd, float *t, const float *Ub, int64_t bs, const float *e, int P, int64_t n) {
#ifdef IQF_ARCH_X86
    if (simd == IQF_SIMD_AVX512) apply_avx512(t, Ub, bs, e, P, n);
    else if (IQF_SIMD_IS_X86(simd)) apply_avx2(t, Ub, bs, e, P, n);
    else
#else
    (void)simd;
#endif
        apply_scalar(t, Ub, bs, e, P, n);
}

/* apply() for FB_APPLY_R rows at once, t_r[c] -= sum_k e_r[k] * Ub[k*bs + c] (ts[r], es[r]): each
 * vector of U is loaded once for all rows instead of once per row. Per element the same
 * operations in the same order as apply_scalar (the same bits). One body for both widths: NV
 * vectors of W floats per row and pass (AVX-512 2, AVX2 1: the accumulators stay in registers),
 * then single vectors, then TAIL row by row for the rest. */
/* The rows spelled out (FB_R8), so that their accumulators are registers, not an array; the
 * width W, vectors per row NV, the vector type and its operations are passed down as macro
 * arguments. */
#define FB_R8(M, ...) M(0, __VA_ARGS__) M(1, __VA_ARGS__) M(2, __VA_ARGS__) M(3, __VA_ARGS__) \
    M(4, __VA_ARGS__) M(5, __VA_ARGS__) M(6, __VA_ARGS__) M(7, __VA_ARGS__)
#define FB_AR_LOAD(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB) \
    VEC x##r[NV];                                                 \
    for (int v = 0; v < NV; v++) x##r[v] = LOADU(ts[r] + c + v * W);
#define FB_AR_STEP(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                \
    {                                                                           \
        const VEC ek = SET1(es[r][k]);                                          \
        for (int v = 0; v < NV; v++) x##r[v] = SUB(x##r[v], MUL(ek, u[v]));     \
    }
#define FB_AR_STORE(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB) \
    for (int v = 0; v < NV; v++) STOREU(ts[r] + c + v * W, x##r[v]);
#define FB_AR_LOAD1(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB) VEC y##r = LOADU(ts[r] + c);
#define FB_AR_STEP1(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB) y##r = SUB(y##r, MUL(SET1(es[r][k]), u));
#define FB_AR_STORE1(r, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB) STOREU(ts[r] + c, y##r);
#define FB_APPLY_ROWS_BODY(TAIL, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                            \
    int64_t c = 0;                                                                                    \
    for (; c + NV * W <= n; c += NV * W) {                                                            \
        FB_R8(FB_AR_LOAD, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                                  \
        for (int k = 0; k < P; k++) {                                                                 \
            VEC u[NV];                                                                                \
            for (int v = 0; v < NV; v++) u[v] = LOADU(Ub + k * bs + c + v * W);                       \
            FB_R8(FB_AR_STEP, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                              \
        }                                                                                             \
        FB_R8(FB_AR_STORE, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                                 \
    }                                                                                                 \
    for (; c + W <= n; c += W) {                                                                      \
        FB_R8(FB_AR_LOAD1, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                                 \
        for (int k = 0; k < P; k++) {                                                                 \
            const VEC u = LOADU(Ub + k * bs + c);                                                     \
            FB_R8(FB_AR_STEP1, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                             \
        }                                                                                             \
        FB_R8(FB_AR_STORE1, W, NV, VEC, LOADU, STOREU, SET1, MUL, SUB)                                \
    }                                                                                                 \
    if (c < n)                                                                                        \
        for (int r = 0; r < FB_APPLY_R; r++) TAIL(ts[r] + c, Ub + c, bs, es[r], P, n - c);

#ifdef IQF_ARCH_X86
__attribute__((target("avx2"))) static void apply_rows_avx2(float *const *ts, const float *Ub, int64_t bs,
                                                          const float (*es)[FB_PANEL], int P, int64_t n) {
    FB_APPLY_ROWS_BODY(apply_scalar, 8, 1, __m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_mul_ps,
                       _mm256_sub_ps)
}

__attribute__((target("avx512f"))) static void apply_rows_avx512(float *const *ts, const float *Ub, int64_t bs,
                                                               const float (*es)[FB_PANEL], int P, int64_t n) {
    FB_APPLY_ROWS_BODY(apply_avx2, 16, 2, __m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_mul_ps,
                       _mm512_sub_ps)
}

#endif /* IQF_ARCH_X86 */

/* apply() to R rows: ts[r] at the same columns, es[r] their errors (P <= FB_PANEL of them). */
void iqf_fb_apply_rows(iqf_simd simd, int R, float *const *ts, const float *Ub, int64_t bs,
                       const float (*es)[FB_PANEL], int P, int64_t n) {
    assert(P >= 1 && P <= FB_PANEL);
#ifdef IQF_ARCH_X86
    if (R == FB_APPLY_R && simd == IQF_SIMD_AVX512) apply_rows_avx512(ts, Ub, bs, es, P, n);
    else if (R == FB_APPLY_R && IQF_SIMD_IS_X86(simd)) apply_rows_avx2(ts, Ub, bs, es, P, n);
    else
#endif
        for (int r = 0; r < R; r++) iqf_fb_apply(simd, ts[r], Ub, bs, es[r], P, n);
}
