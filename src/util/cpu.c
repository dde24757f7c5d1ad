/* cpu.c - runtime instruction-set detection and the online CPU count. */
#include "arch.h"

iqf_simd iqf_simd_detect(void) {
#ifdef IQF_ARCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2"))
        return IQF_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return IQF_SIMD_AVX2;
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
    return IQF_SIMD_NEON; /* Advanced SIMD is part of the AArch64 baseline */
#endif
    return IQF_SIMD_SCALAR;
}

/* The level to run for a request: AUTO -> the best; NEON (the vector-extension kernels build
 * for any GCC/clang target) as asked; an x86 level the CPU lacks -> the best it has. */
iqf_simd iqf_simd_resolve(iqf_simd want) {
    const iqf_simd have = iqf_simd_detect();
    if (want == IQF_SIMD_SCALAR) return want;
#if defined(__GNUC__) || defined(__clang__)
    if (want == IQF_SIMD_NEON) return want;
#endif
    if (want == IQF_SIMD_AVX2 && have == IQF_SIMD_AVX512) return want;
    return have;
}

const char *iqf_simd_name(iqf_simd s) {
    switch (s) {
    case IQF_SIMD_AUTO: return "auto";
    case IQF_SIMD_SCALAR: return "scalar";
    case IQF_SIMD_AVX2: return "avx2";
    case IQF_SIMD_AVX512: return "avx512";
    case IQF_SIMD_NEON: return "neon";
    }
    return "?";
}

/* The online CPU count (the thread pools' default, util/pool.c and util/parallel.c). */
#include <unistd.h>

int iqf_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}
