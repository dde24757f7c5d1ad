/*
 * traits.h - one row of facts per ggml tensor type, the single place every part reads them from
 * (internal; the public geometry is iqf_type_get in include/iqforge.h).
 *
 * Adding a type: its codec file, its geometry row in types.c and one row in traits.c. The table
 * is indexed by type id with designated initializers; traits.c static_asserts its length against
 * IQF_TYPE_COUNT and tests/test_types.c fails for a known type id that has no row, and checks
 * the ggml facts (activation type, imatrix requirement) against the oracle.
 *
 * Sources (ggml/llama 0.25.1, the llama.cpp source bundled in node-llama-cpp@3.22.1):
 *  - act_type: ggml-cpu.c type_traits_cpu[].vec_dot_type (what ggml's CPU matmul converts the
 *    activations to before the dot products; F32 where the entry sets none);
 *  - fallback: llama-quant.cpp tensor_type_fallback;
 *  - ggml_imatrix: ggml-quants.c ggml_quantize_requires_imatrix;
 *  - llama_imatrix: llama-quant.cpp tensor_requires_imatrix (its Q2_K-in-Q2_K_S case is a file
 *    type rule and stays in recipe.c);
 *  - ftype: include/llama.h llama_ftype of a file that is mostly this type.
 */
#ifndef IQF_UTIL_TRAITS_H
#define IQF_UTIL_TRAITS_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

/* Format families, as the ladder's alarm groups rungs (like compares with like). 0 is no row. */
typedef enum iqf_family {
    IQF_FAMILY_NONE = 0,  /* no row (a bug: test_types fails) */
    IQF_FAMILY_IQ,        /* grid / non-linear IQ types */
    IQF_FAMILY_K,         /* K-quants q2_K..q6_K */
    IQF_FAMILY_LEGACY,    /* q4_0..q8_0 */
    IQF_FAMILY_FLOAT,     /* f32, f16, bf16 */
    IQF_FAMILY_FP4,       /* mxfp4, nvfp4 */
    IQF_FAMILY_LOWBIT,    /* ternary and binary: tq1_0, tq2_0, q1_0, q2_0 */
    IQF_FAMILY_OTHER,     /* not a weight type: q8_1, q8_K (activations), integers, f64 */
} iqf_family;

/* How error feedback (quantize/feedback.c, fb_blocks.c) edits a block of the type. */
typedef enum iqf_fb_kind {
    IQF_FB_NONE = 0,      /* not supported */
    IQF_FB_SCALAR,        /* one code per weight on a scaled grid */
    IQF_FB_GRID,          /* IQ lattice types: groups of 8 weights (needs the grid tables) */
} iqf_fb_kind;

/* When feedback's legacy encoders weight with a row-wide sigma2 (needs an imatrix). */
typedef enum iqf_fb_sigma2 {
    IQF_FB_SIGMA2_NEVER = 0,
    IQF_FB_SIGMA2_ALWAYS,
    IQF_FB_SIGMA2_BEST,   /* best mode only */
} iqf_fb_sigma2;

#define IQF_NO_FALLBACK (-1) /* llama-quantize throws "no tensor type fallback is defined" */

typedef struct iqf_type_traits {
    iqf_family family;
    int act_type;         /* ggml CPU vec_dot_type (IQF_TYPE_F32: none, no rounding) */
    int fallback;         /* type tried when ne[0] is not a multiple of the block (then F16 if
                           * that does not fit either); the type itself for 32-blocks llama has
                           * no case for (-> F16); IQF_NO_FALLBACK: refused */
    bool ggml_imatrix;    /* ggml refuses to quantize without an importance matrix */
    bool llama_imatrix;   /* llama-quantize requires an imatrix for tensors of this type
                           * (other than token_embd/output) */
    int ftype;            /* llama file type of a file mostly of this type; -1: none */
    /* error feedback's tuning (docs/QUALITY.md has the measurements behind them) */
    iqf_fb_kind fb;
    iqf_fb_sigma2 fb_sigma2;
    bool fb_refine;       /* best mode: refine the K-quant scales after the sweep */
    int fb_warm_iters;    /* grid types: re-encodings warm-started from the block (0: full ones) */
    double fb_warm_tau;   /* ... the relative gain that opens the next one */
    double fb_tau;        /* full re-encodings: the gain that opens the second one (0: always) */
} iqf_type_traits;

/* The row of a type id; NULL for an id out of range or one without a row (removed ids). */
const iqf_type_traits *iqf_traits(int type);

#endif
