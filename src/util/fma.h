/* fma.h - the multiply-adds that ggml's build of the platform fuses.
 *
 * ggml's libggml-base.so (npm @node-llama-cpp 3.22.1, the oracle) is compiled by clang 21 with
 * its default -ffp-contract=on: every a*b+c (also a*b-c, c-a*b, s += a*b) written inside ONE C
 * expression may become a fused multiply-add, and does wherever the target has FMA in its
 * baseline - on arm64, never on x86-64 (the x64 build targets baseline x86-64). A product stored
 * in a variable and added in a later statement is not fused. In an expression with several
 * candidates clang fuses the left operand's product first: a*b + c*d is fma(a, b, c*d),
 * a*b + c*d + e*f is fma(e, f, fma(a, b, c*d)). One exception decided by the optimizer, not the
 * source: a sum s += a*b in a loop that the vectorizer turns into an in-order reduction is split
 * into a (vector) multiply and sequential adds, unfused - e.g. sum(x^2) over a row or a
 * super-block, make_qx_quants' sums over 32 values but not over 16 (ggml's arm64 disassembly;
 * each use below names its case). IQF_FMA_ARM_IF(cond, ...) fuses only where cond holds.
 * So ggml's compat bytes differ between the platforms wherever such a rounding decides a block
 * (docs/COMPAT.md, "arm64").
 *
 * Our tree builds with -ffp-contract=off (no implicit contraction, by any compiler); each place
 * where ggml's source has such an expression is written with these macros, which are fmaf on
 * arm64 (one fmadd: -fno-math-errno) and the unfused expression elsewhere, so the x86 bytes are
 * those of before:
 *   IQF_FMA_ARM(a, b, c)   a*b + c
 *   IQF_FMS_ARM(a, b, c)   a*b - c   (fma(a, b, -c))
 *   IQF_FNMA_ARM(a, b, c)  c - a*b   (fma(-a, b, c))
 * The scalar code uses them; the x86 SIMD kernels reproduce the unfused x86 bytes. A NEON
 * kernel must fuse exactly where the scalar code does (vec_lanes.h's vf_fma_arm, vf_fms_arm,
 * vf_fnma_arm; VL_FUSES where a kernel's unfused form reuses rounded products). */
#ifndef IQF_UTIL_FMA_H
#define IQF_UTIL_FMA_H
#include <math.h>
#if defined(__aarch64__)
#define IQF_GGML_FUSES 1
#define IQF_FMA_ARM(a, b, c) fmaf((a), (b), (c))
#define IQF_FMS_ARM(a, b, c) fmaf((a), (b), -(c))
#define IQF_FNMA_ARM(a, b, c) fmaf(-(a), (b), (c))
#define IQF_FMA_ARM_IF(cond, a, b, c) ((cond) ? fmaf((a), (b), (c)) : (a) * (b) + (c))
#else
#define IQF_GGML_FUSES 0
#define IQF_FMA_ARM(a, b, c) ((a) * (b) + (c))
#define IQF_FMS_ARM(a, b, c) ((a) * (b) - (c))
#define IQF_FNMA_ARM(a, b, c) ((c) - (a) * (b))
#define IQF_FMA_ARM_IF(cond, a, b, c) ((a) * (b) + (c))
#endif
#endif
