/*
 * codec.h - internal interface between the codec registry (codec.c) and the per-family codec
 * files (iq3.c, iq2.c, iq1.c, iq4.c, kquants.c, legacy.c, fp4.c, lowbit.c).
 *
 * Contract for a family file: it defines one `const iqf_codec iqf_codecs_<family>[]` array,
 * terminated by an entry with type == -1, and owns everything else it needs (tables built
 * thread-safely inside `init`, SIMD variants selected from ctx->simd).
 */
#ifndef IQF_CODEC_H
#define IQF_CODEC_H

#include "iqforge.h"
#include "util/arch.h"

#include <assert.h>
#include <stdint.h>
#include <string.h>

#define QK_K 256

#include "blocks.h" /* every block struct */

/* Per-call context handed to every encoder. */
typedef struct iqf_qctx {
    iqf_mode mode;
    iqf_simd simd; /* resolved: never IQF_SIMD_AUTO, never above what the CPU supports */
} iqf_qctx;

/* The candidate scales of an IQ grid search warm-started from a block (iq2.c, iq3.c; the error
 * feedback's re-encodings, iq_refine.h): the encoder's candidates are is = -nis .. nis (its
 * inverse scales base + step * is over the sub-block's max); with nw > 0 only the nw of them
 * around c, the continuous is of the sub-block's current scale, shifted to stay within range.
 * *lo, *nc: the first is and the count (all 2 nis + 1 when nw <= 0, nw too large, or c not
 * finite). */
static inline void iqf_iq_cand_window(int nis, int nw, float c, int *lo, int *nc) {
    *lo = -nis;
    *nc = 2 * nis + 1;
    if (nw <= 0 || nw >= *nc || !(c > -1e6f && c < 1e6f)) return;
    int l = iqf_nearest_int(c) - (nw - 1) / 2;
    if (l < -nis) l = -nis;
    if (l > nis - nw + 1) l = nis - nw + 1;
    *lo = l;
    *nc = nw;
}

/* Best mode's importance for an IQ grid row without an imatrix (iq2.c IQ2_S, iq3.c IQ3_XXS/IQ3_S):
 * uniform, i.e. weights sqrt(sigma2 + x^2) as ggml's search uses with an all-ones imatrix, in
 * place of ggml's x^2 (0.25 sigma2 + x^2 for IQ2_S), which over-protects the largest weights
 * (kjv-3m, token_embd in IQ3_S: mean KLD of the IQ3_XXS file -7.5%, docs/QUALITY.md). Fills
 * unit[0..n) with ones and returns it, or NULL (compat mode, or an imatrix given). */
static inline const float *iqf_best_flat_importance(const iqf_qctx *ctx, const float *qw, float *unit, int n) {
    if (ctx->mode != IQF_MODE_BEST || qw) return NULL;
    for (int i = 0; i < n; i++) unit[i] = 1;
    return unit;
}

typedef struct iqf_codec {
    int type;
    /* Builds lookup tables. Idempotent and thread-safe (pthread_once inside); may be NULL.
     * The registry calls it before the first quantize_row of a call. Encoder tables that can
     * fail to build (malloc) are the family's table-init hook instead (below), which the
     * registry calls after init. */
    void (*init)(void);
    /* Encode one row of n values (n a multiple of the block size; all finite).
     * qw: NULL or n per-column importance weights (finite, >= 0). Writes n/blck blocks to y.
     * Never fails: the registry has checked everything that can be wrong. NULL = no encoder. */
    void (*quantize_row)(const iqf_qctx *ctx, const float *x, void *y, int64_t n, const float *qw);
    /* Decode one row of n values. NULL = no decoder. */
    void (*dequantize_row)(const void *x, float *y, int64_t n);
} iqf_codec;

extern const iqf_codec iqf_codecs_float[];   /* f32, f16, bf16 (float.c) */
extern const iqf_codec iqf_codecs_iq3[];     /* iq3_xxs, iq3_s */
extern const iqf_codec iqf_codecs_iq2[];     /* iq2_xxs, iq2_xs, iq2_s */
extern const iqf_codec iqf_codecs_iq1[];     /* iq1_s, iq1_m */
extern const iqf_codec iqf_codecs_iq4[];     /* iq4_nl, iq4_xs */
extern const iqf_codec iqf_codecs_kquants[]; /* q2_K .. q6_K, q8_K */
extern const iqf_codec iqf_codecs_legacy[];  /* q4_0, q4_1, q5_0, q5_1, q8_0 */
extern const iqf_codec iqf_codecs_fp4[];     /* mxfp4, nvfp4 */
extern const iqf_codec iqf_codecs_lowbit[];  /* tq1_0, tq2_0, q1_0, q2_0 */

/* Table-init hooks of the families whose encoder tables can fail to build (malloc): build them
 * (idempotent, thread-safe) and return false if they could not (out of memory: iqf_quantize
 * returns IQF_E_NOMEM). codec.c's families[] names each family file's hook (NULL: none). */
bool iqf_iq1_tables_init(int type);
bool iqf_iq2_tables_init(int type);

/* The codec for a type, or NULL. */
const iqf_codec *iqf_codec_get(int type);

/* fp16 storage helpers used by block structs. */
#define IQF_FP16_TO_FP32(h) iqf_fp16_to_fp32(h)
#define IQF_FP32_TO_FP16(f) iqf_fp32_to_fp16(f)

#endif
