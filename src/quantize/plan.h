/*
 * plan.h - the plan of one quantization run: which tensors go out, under which names, in which
 * order, as which types, with which statistics, and the exact bytes of the file that results.
 *
 * The one place that opens the input and its statistics (importance matrix, Hessian file),
 * applies --override-kv and --prune-layers, runs the recipe with --tensor-type and the other
 * user choices (or takes an exact per-tensor type array: --target-size), checks every rule that
 * can refuse a run (imatrix required or of the wrong shape, requantizing, types this build cannot
 * encode), and says what the output's metadata and size are. The pipeline (pipeline.c) encodes
 * and writes a plan; --target-size (target.c) measures the tensors of a plan and gives its types
 * back as an exact array.
 *
 *   iqf_plan_open   input, hyper-parameters, statistics, tensors in output order (pruned, renamed)
 *   iqf_plan_types  the type of every tensor and every check; after it the plan is complete
 *   iqf_plan_write_kvs / iqf_plan_size   the output's KVs, and the file's exact size
 */
#ifndef IQF_QUANTIZE_PLAN_H
#define IQF_QUANTIZE_PLAN_H

#include "iqforge.h"
#include "feedback.h"
#include "../stats/imatrix.h"
#include "recipe.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* One output tensor. */
typedef struct iqf_plan_item {
    const iqf_gguf_tensor *t; /* the input tensor */
    iqf_recipe_choice choice; /* choice.type: the output type (== t->type: copied) */
    const float *imatrix;     /* ne0 * ne2 values, or NULL (set by iqf_plan_types) */
} iqf_plan_item;

typedef struct iqf_plan {
    const char *in;
    const iqf_model_quantize_params *p;
    FILE *log;                /* NULL: no log */
    char *err;
    size_t errlen;
    /* iqf_plan_open */
    iqf_gguf *g;
    const char *arch;
    iqf_recipe_model hp;      /* with --override-kv applied */
    iqf_imatrix im;
    bool have_im;             /* an imatrix with at least one entry left after include/exclude */
    iqf_feedback *fb;         /* --hessian, or NULL */
    /* items and rt are parallel arrays of nt entries in output order; rt[i].name is the output
     * name (renumbered by --prune-layers) */
    iqf_plan_item *items;
    iqf_recipe_tensor *rt;
    iqf_recipe_choice *rc;
    int64_t nt;
    char (*new_names)[IQF_GGUF_MAX_NAME];
    uint32_t pruned_block_count;
    /* iqf_plan_types */
    iqf_recipe_override *ov;
    int n_ov;
    int ftype;                /* general.file_type written */
    bool will_require_imatrix; /* dry run only */
    int n_fallback, n_quantized;
    bool complete;            /* iqf_plan_types accepted every tensor (the pipeline asserts it) */
} iqf_plan;

/* Opens `in` for params `p`: schema, architecture and hyper-parameters (with --override-kv),
 * --prune-layers checked, the importance matrix (filtered, checked finite and non-negative) and
 * the Hessian file loaded, the tensors in the loader's order (layer, then name) minus the pruned
 * layers, renamed, or by part and offset with --keep-split. Log lines go to `log`. Errors go to
 * err (kept by the plan for the later calls). On failure iqf_plan_free is still needed. */
iqf_status iqf_plan_open(iqf_plan *pl, const char *in, const iqf_model_quantize_params *p, FILE *log, char *err,
                         size_t errlen);

/* Chooses every tensor's type for file type `ftype`: the recipe with p's --tensor-type patterns,
 * output/token-embedding types, --pure, --leave-output-tensor; then, where `types` is not NULL
 * (n_types entries, one per output tensor in output order, which must be the plan's count and,
 * when `names` is not NULL, its output names), types[i] >= 0 replaces the type of the
 * quantizable item i exactly (no fallback: the row length must be a multiple of its block).
 * Then every check: imatrix required and present, of the tensor's shape and naming a tensor of
 * the model, input types convertible, requantizing allowed, target types encodable. With
 * p->dry_run a missing imatrix is not an error. */
iqf_status iqf_plan_types(iqf_plan *pl, int ftype, const int *types, const char (*names)[IQF_GGUF_MAX_NAME],
                          int64_t n_types);

/* The KVs of the output (its first part with --keep-split), in the order they are written. */
iqf_status iqf_plan_write_kvs(const iqf_plan *pl, iqf_gguf_writer *w);

/* The exact size of the (single-part) output file of a complete plan: returned, metadata in
 * *meta, alignment in *align (either may be NULL). 0 with the message in the plan's err on
 * failure. */
uint64_t iqf_plan_size(const iqf_plan *pl, uint64_t *meta, uint64_t *align);

/* Bytes of item i's data in the output (unpadded). */
uint64_t iqf_plan_item_bytes(const iqf_plan *pl, int64_t i);

void iqf_plan_free(iqf_plan *pl);

/* Quantizes with an exact per-tensor type array (iqf_plan_types' `types`, n_types entries, one
 * per output tensor in output order; -1: the recipe's), checking first that the plan has that
 * many tensors and, when names is not NULL, that they are these names. iqf_model_quantize is
 * this with types NULL. */
iqf_status iqf_model_quantize_typed(const char *in, const char *out, const iqf_model_quantize_params *params,
                                    const int *types, const char (*names)[IQF_GGUF_MAX_NAME], int64_t n_types,
                                    iqf_model_quantize_report *report, void *log, char *err, size_t errlen);

#endif
