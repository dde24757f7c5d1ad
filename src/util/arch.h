/* arch.h - which instruction-set code this translation unit may compile. IQF_ARCH_X86 is set
 * (and <immintrin.h> included) only when compiling for x86 with GCC or clang, whose
 * target attributes the AVX2/AVX-512 kernels use; everywhere else (arm64, other compilers) only
 * the scalar kernels are compiled and the run-time dispatch never leaves them
 * (iqf_simd_detect() returns IQF_SIMD_SCALAR there). */
#ifndef IQF_UTIL_ARCH_H
#define IQF_UTIL_ARCH_H
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define IQF_ARCH_X86 1
#include <immintrin.h>
#endif
#endif
