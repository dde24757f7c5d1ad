/*
 * blocks.h - the on-disk block of every quantized type, one definition shared by the codecs
 * (src/codec) and the engine's integer kernels (src/model/mm_int8.c), as ggml's ggml-common.h.
 * Layouts are ggml 0.25.1's (docs/FORMATS.md); each struct carries a static_assert on its size
 * and a bits-per-weight comment. Little-endian hosts only (as ggml's CPU backend).
 */
#ifndef IQF_BLOCKS_H
#define IQF_BLOCKS_H

#include <assert.h>
#include <stdint.h>

#ifndef QK_K
#define QK_K 256
#endif
typedef uint16_t iqf_half; /* an IEEE fp16 value, stored as is */

/* ---- legacy blocks (32 weights) ---- */
#define QK4_0 32
typedef struct { iqf_half d; uint8_t qs[16]; } block_q4_0;                 /* 4.5 bpw */
static_assert(sizeof(block_q4_0) == 18, "q4_0 block");
typedef struct { iqf_half d, m; uint8_t qs[16]; } block_q4_1;              /* 5.0 bpw */
static_assert(sizeof(block_q4_1) == 20, "q4_1 block");
typedef struct { iqf_half d; uint8_t qh[4]; uint8_t qs[16]; } block_q5_0;  /* 5.5 bpw */
static_assert(sizeof(block_q5_0) == 22, "q5_0 block");
typedef struct { iqf_half d, m; uint8_t qh[4]; uint8_t qs[16]; } block_q5_1; /* 6.0 bpw */
static_assert(sizeof(block_q5_1) == 24, "q5_1 block");
typedef struct { iqf_half d; int8_t qs[32]; } block_q8_0;                  /* 8.5 bpw */
static_assert(sizeof(block_q8_0) == 34, "q8_0 block");

/* ---- K-quant super-blocks (256 weights) ---- */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; iqf_half d, dmin; } block_q2_K;   /* 2.625 bpw */
static_assert(sizeof(block_q2_K) == 84, "q2_K block");
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; iqf_half d; } block_q3_K; /* 3.4375 bpw */
static_assert(sizeof(block_q3_K) == 110, "q3_K block");
typedef struct { iqf_half d, dmin; uint8_t scales[12]; uint8_t qs[128]; } block_q4_K;  /* 4.5 bpw */
static_assert(sizeof(block_q4_K) == 144, "q4_K block");
typedef struct { iqf_half d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } block_q5_K; /* 5.5 bpw */
static_assert(sizeof(block_q5_K) == 176, "q5_K block");
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; iqf_half d; } block_q6_K; /* 6.5625 bpw */
static_assert(sizeof(block_q6_K) == 210, "q6_K block");

/* ---- IQ types (256-weight super-blocks; IQ4_NL: 32-weight blocks) ---- */
typedef struct {
    iqf_half d;
    uint8_t qs[QK_K / 8];
    uint16_t qh[QK_K / 32];
} block_iq1_s;
static_assert(sizeof(block_iq1_s) == 50, "block_iq1_s size");

typedef struct {
    uint8_t qs[QK_K / 8];
    uint8_t qh[QK_K / 16];
    uint8_t scales[QK_K / 32];
} block_iq1_m;
static_assert(sizeof(block_iq1_m) == 56, "block_iq1_m size");

typedef struct {
    iqf_half d;
    uint16_t qs[QK_K / 8];
} block_iq2_xxs; /* 2.0625 bpw */
static_assert(sizeof(block_iq2_xxs) == 66, "iq2_xxs block");

typedef struct {
    iqf_half d;
    uint16_t qs[QK_K / 8];
    uint8_t scales[QK_K / 32];
} block_iq2_xs; /* 2.3125 bpw */
static_assert(sizeof(block_iq2_xs) == 74, "iq2_xs block");

typedef struct {
    iqf_half d;
    uint8_t qs[QK_K / 4];
    uint8_t qh[QK_K / 32];
    uint8_t scales[QK_K / 32];
} block_iq2_s; /* 2.5625 bpw */
static_assert(sizeof(block_iq2_s) == 82, "iq2_s block");

typedef struct {
    iqf_half d;
    uint8_t qs[3 * QK_K / 8]; /* 64 grid indices, then 8 LE uint32: 4 x sign7 | scale4 << 28 */
} block_iq3_xxs;              /* 98 bytes: 3.0625 bpw */
static_assert(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");

typedef struct {
    iqf_half d;
    uint8_t qs[QK_K / 4];      /* low 8 bits of the 9-bit grid index per group of 4 */
    uint8_t qh[QK_K / 32];     /* bit 8 of the index: byte = sub-block, bit = group */
    uint8_t signs[QK_K / 8];   /* one sign bit per weight */
    uint8_t scales[QK_K / 64]; /* 4-bit scales: low nibble even sub-block, high nibble odd */
} block_iq3_s;                 /* 110 bytes: 3.4375 bpw */
static_assert(sizeof(block_iq3_s) == 110, "block_iq3_s size");

/* 4.5 bpw: fp16 scale + 32 4-bit indices (low nibbles = weights 0..15, high = 16..31). */
typedef struct {
    iqf_half d;
    uint8_t qs[32 / 2];
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");

typedef struct {
    iqf_half d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

/* ---- FP4 blocks (E2M1 codes; kvalues_fp4 holds twice the E2M1 value) ---- */
#define QK_MXFP4 32
typedef struct { uint8_t e; uint8_t qs[QK_MXFP4 / 2]; } block_mxfp4;  /* E8M0 exponent: 4.25 bpw */
static_assert(sizeof(block_mxfp4) == 17, "mxfp4 block");
#define QK_NVFP4 64
#define QK_NVFP4_SUB 16
typedef struct { uint8_t d[QK_NVFP4 / QK_NVFP4_SUB]; uint8_t qs[QK_NVFP4 / 2]; } block_nvfp4; /* UE4M3 scales: 4.5 bpw */
static_assert(sizeof(block_nvfp4) == 36, "nvfp4 block");

/* ---- 1- and 2-bit blocks (Q1_0: sign bits; Q2_0: codes 0..3 = -1..2) ---- */
#define QK1_0 128
typedef struct { iqf_half d; uint8_t qs[QK1_0 / 8]; } block_q1_0;        /* 1.125 bpw */
static_assert(sizeof(block_q1_0) == 18, "q1_0 block");
#define QK2_0 64
typedef struct { iqf_half d; uint8_t qs[QK2_0 / 4]; } block_q2_0;        /* 2.25 bpw */
static_assert(sizeof(block_q2_0) == 18, "q2_0 block");

/* ---- ternary super-blocks (BitNet b1.58, TriLM) ---- */
typedef struct {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; /* 5 trits per byte (base 3, scaled to 0..255) */
    uint8_t qh[QK_K / 64];                  /* 4 trits per byte */
    iqf_half d;
} block_tq1_0; /* 1.6875 bpw */
static_assert(sizeof(block_tq1_0) == 54, "tq1_0 block");
typedef struct { uint8_t qs[QK_K / 4]; iqf_half d; } block_tq2_0;     /* 2.0625 bpw */
static_assert(sizeof(block_tq2_0) == 66, "tq2_0 block");

#endif
