/* arch.h - which instruction-set code this translation unit may compile. IQF_ARCH_X86 is set
 * (and <immintrin.h> included) only when compiling for x86 with GCC or clang, whose
 * target attributes the AVX2/AVX-512 kernels use; everywhere else (arm64, other compilers) the
 * scalar kernels and the plain-width (vector-extension) ones of the NEON level are compiled
 * (iqf_simd_detect() returns IQF_SIMD_NEON on arm64 with GCC/clang, else IQF_SIMD_SCALAR). */
#ifndef IQF_UTIL_ARCH_H
#define IQF_UTIL_ARCH_H
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define IQF_ARCH_X86 1
#include <immintrin.h>
#endif
/* A resolved level whose kernels are the x86 ones (AVX2 or AVX-512): IQF_SIMD_NEON (the
 * 4/8-lane vector-extension kernels, any target) is numbered above them, so "level >= AVX2"
 * does not mean "x86 code" (iqforge.h). */
#define IQF_SIMD_IS_X86(s) ((s) == IQF_SIMD_AVX2 || (s) == IQF_SIMD_AVX512)
#include "iqforge.h"
/* The level to run for a request (util/cpu.c): AUTO -> iqf_simd_detect(); SCALAR and NEON as
 * asked (both build everywhere); an x86 level the CPU lacks -> the best level it has. */
iqf_simd iqf_simd_resolve(iqf_simd want);
#endif
