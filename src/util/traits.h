/*
 * traits.h - one row of facts per ggml tensor type, the single place every part reads them from
 * (internal; the public geometry is iqf_type_get, the public views of this table are
 * iqf_type_family, iqf_ftype_* and iqf_ftype_at in include/iqforge.h).
 *
 * Adding a type: its codec file (its entry in that family's iqf_codecs_* array), one row in
 * traits.c and its tests (an id ggml has added since also needs its geometry row in types.c);
 * what the other parts know of a type they read from here:
 *  - recipe.c / iqf_ftype_*: the llama file types that default to the type (ftypes);
 *  - quantize --help (tools/cmd_quantize.c): the same names, listed by iqf_ftype_at;
 *  - the ladder's alarm (tools/ladder): the family, through iqf_type_family;
 *  - --target-size: the candidate order (target_rank, target_rows), iqf_traits_target_candidates;
 * The table is indexed by type id with designated initializers; traits.c static_asserts its
 * length against IQF_TYPE_COUNT and tests/util/test_types.c fails for a known type id that has no row,
 * checks the ggml facts (activation type, imatrix requirement) against the oracle and the file
 * type columns against each other.
 *
 * Sources (ggml/llama 0.25.1, the llama.cpp source bundled in node-llama-cpp@3.22.1):
 *  - act_type: ggml-cpu.c type_traits_cpu[].vec_dot_type (what ggml's CPU matmul converts the
 *    activations to before the dot products; F32 where the entry sets none);
 *  - fallback: llama-quant.cpp tensor_type_fallback;
 *  - ggml_imatrix: ggml-quants.c ggml_quantize_requires_imatrix;
 *  - llama_imatrix: llama-quant.cpp tensor_requires_imatrix (its Q2_K-in-Q2_K_S case is a file
 *    type rule and stays in recipe.c);
 *  - ftype: include/llama.h llama_ftype of a file that is mostly this type;
 *  - ftypes: tools/quantize/quantize.cpp QUANT_OPTIONS (names) and llama-quant.cpp
 *    llama_ftype_get_default_type (the row they sit in).
 */
#ifndef IQF_UTIL_TRAITS_H
#define IQF_UTIL_TRAITS_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

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

#define IQF_TRAITS_MAX_FTYPES 4 /* q3_K: Q3_K (alias), Q3_K_S, Q3_K_M, Q3_K_L */

/* The rows of a tensor a type is a --target-size candidate for (target_rows). */
#define IQF_TARGET_ROWS_256 1u   /* rows a multiple of 256 weights */
#define IQF_TARGET_ROWS_OTHER 2u /* the other rows (the type's block must still divide them) */

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
    /* The llama file types whose default type (llama_ftype_get_default_type) this is, as
     * llama-quantize names them; an alias (Q4_K) before the full name of the same id (Q4_K_M),
     * which iqf_ftype_name gives. Unused entries have no name. IQ2_S's default is iq2_xs: it
     * sits in iq2_xs's row, IQ2_M in iq2_s's. */
    iqf_ftype_info ftypes[IQF_TRAITS_MAX_FTYPES];
    /* --target-size: where the type stands among the candidates of a free tensor (1 first, ...;
     * 0: never one), for the rows target_rows names */
    int target_rank;
    unsigned target_rows; /* IQF_TARGET_ROWS_* */
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

/* --target-size's candidate types for a row of ncols weights, in target_rank order: those of
 * IQF_TARGET_ROWS_256 when ncols is a multiple of 256, else those of IQF_TARGET_ROWS_OTHER (not
 * yet filtered by block size, encoder or imatrix: the caller does that). At most cap of them
 * into out; returns how many. */
int iqf_traits_target_candidates(int64_t ncols, int *out, int cap);

/* The weight types with file types, in the order quantize --help lists them (iqf_ftype_at): by
 * family (IQ, K, legacy, FP4, low-bit, float), then bits per weight, then id. Returns how many
 * (at most cap into out). */
int iqf_traits_listing(int *out, int cap);

#endif
