/*
 * float16.c - fp16 and bf16 conversions, bit-exact with ggml's software paths.
 * fp32->fp16 and fp32->bf16 round to nearest, ties to even. NaN stays NaN.
 */
#include "iqforge.h"

#include <math.h>
#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float f32_from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Same algorithm as ggml_compute_fp32_to_fp16 (Maratyszcza's FP16 library, no FMA). */
uint16_t iqf_fp32_to_fp16(float f) {
    const float scale_to_inf = f32_from_bits(UINT32_C(0x77800000));
    const float scale_to_zero = f32_from_bits(UINT32_C(0x08800000));
    float base = fabsf(f) * scale_to_inf;
    base *= scale_to_zero;

    const uint32_t w = f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & UINT32_C(0x80000000);
    uint32_t bias = shl1_w & UINT32_C(0xFF000000);
    if (bias < UINT32_C(0x71000000)) bias = UINT32_C(0x71000000);

    base = f32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
    const uint32_t bits = f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
    const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (uint16_t)((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? UINT16_C(0x7E00) : nonsign));
}

float iqf_fp16_to_fp32(uint16_t h) {
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & UINT32_C(0x80000000);
    const uint32_t two_w = w + w;

    const uint32_t exp_offset = UINT32_C(0xE0) << 23;
    const float exp_scale = f32_from_bits(UINT32_C(0x7800000));
    const float normalized_value = f32_from_bits((two_w >> 4) + exp_offset) * exp_scale;

    const uint32_t magic_mask = UINT32_C(126) << 23;
    const float magic_bias = 0.5f;
    const float denormalized_value = f32_from_bits((two_w >> 17) | magic_mask) - magic_bias;

    const uint32_t denormalized_cutoff = UINT32_C(1) << 27;
    const uint32_t result = sign | (two_w < denormalized_cutoff ? f32_bits(denormalized_value)
                                                                 : f32_bits(normalized_value));
    return f32_from_bits(result);
}

/* As ggml_compute_fp32_to_bf16: NaN -> quiet NaN, otherwise RNE on the top 16 bits. */
uint16_t iqf_fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 64);
    return (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
}

float iqf_bf16_to_fp32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }
