/* float.c - the float "codecs": f32 (copy), f16 and bf16 (round to nearest even). */
#include "codec.h"

static void quantize_row_f32(const iqf_qctx *ctx, const float *x, void *y, int64_t n,
                             const float *qw) {
    (void)ctx; (void)qw;
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void dequantize_row_f32(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void quantize_row_f16(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                             const float *qw) {
    (void)ctx; (void)qw;
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = iqf_fp32_to_fp16(x[i]);
        memcpy(y + 2 * i, &h, 2);
    }
}
static void dequantize_row_f16(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, x + 2 * i, 2);
        y[i] = iqf_fp16_to_fp32(h);
    }
}
static void quantize_row_bf16(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                              const float *qw) {
    (void)ctx; (void)qw;
    uint8_t *y = vy;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = iqf_fp32_to_bf16(x[i]);
        memcpy(y + 2 * i, &h, 2);
    }
}
static void dequantize_row_bf16(const void *vx, float *y, int64_t n) {
    const uint8_t *x = vx;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, x + 2 * i, 2);
        y[i] = iqf_bf16_to_fp32(h);
    }
}

const iqf_codec iqf_codecs_float[] = {
    { IQF_TYPE_F32, NULL, quantize_row_f32, dequantize_row_f32 },
    { IQF_TYPE_F16, NULL, quantize_row_f16, dequantize_row_f16 },
    { IQF_TYPE_BF16, NULL, quantize_row_bf16, dequantize_row_bf16 },
    { -1, NULL, NULL, NULL },
};
