/*
 * recipe.h - llama-quantize's per-tensor type selection (ggml/llama 0.25.1, src/llama-quant.cpp),
 * reimplemented: file types, tensor categories, which tensors are quantized, the type mixture
 * per file type, the shape fallbacks, the imatrix requirement and the loader's tensor order.
 *
 * Pure functions over names, shapes and a few model hyper-parameters: no I/O, no globals.
 */
#ifndef IQF_QUANTIZE_RECIPE_H
#define IQF_QUANTIZE_RECIPE_H

#include "iqforge.h"

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

/* Model facts the recipe looks at (read from the GGUF KVs by the pipeline). */
typedef struct iqf_recipe_model {
    char arch[64];      /* general.architecture */
    int n_layer;        /* {arch}.block_count */
    int n_head;         /* {arch}.attention.head_count (layer 0) */
    int n_head_kv;      /* {arch}.attention.head_count_kv (layer 0; defaults to n_head) */
    int n_expert;       /* {arch}.expert_count (0 if absent) */
    int n_layer_nextn;  /* {arch}.nextn_predict_layers (0 if absent): llama's n_layer() is
                         * n_layer - n_layer_nextn (the 70B rule reads it) */
} iqf_recipe_model;

/* One tensor as the recipe sees it. */
typedef struct iqf_recipe_tensor {
    const char *name;
    int64_t ne[4];      /* unused dims are 1 */
    int type;           /* current type */
} iqf_recipe_tensor;

typedef struct iqf_recipe_override {
    regex_t re;         /* compiled from the (lower-cased) pattern, POSIX extended, searched */
    int type;
} iqf_recipe_override;

/* Compile --tensor-type PATTERN=TYPE pairs into ov[0..n) (ov has room for n). llama-quantize uses
 * std::regex (ECMAScript); POSIX extended regexps cover the usual patterns, with \d and \D
 * rewritten as [0-9] and [^0-9] (glibc knows \w \s \b). *n_ov counts the entries compiled so far,
 * also on failure, so iqf_recipe_overrides_free(ov, *n_ov) is always right.
 * Errors: IQF_E_INVALID_ARG (a pattern does not compile; err names it). */
iqf_status iqf_recipe_overrides_compile(const char *const *patterns, const int *types, int n,
                                        iqf_recipe_override *ov, int *n_ov, char *err, size_t errlen);
void iqf_recipe_overrides_free(iqf_recipe_override *ov, int n_ov);

typedef struct iqf_recipe_opts {
    int ftype;                    /* IQF_FTYPE_* */
    int output_tensor_type;       /* -1: recipe */
    int token_embedding_type;     /* -1: recipe */
    bool quantize_output_tensor;  /* false with --leave-output-tensor */
    bool pure;
    bool has_imatrix;             /* an imatrix with at least one entry was given */
    const iqf_recipe_override *overrides; /* --tensor-type, first match wins */
    int n_overrides;
} iqf_recipe_opts;

/* Per-tensor result of iqf_recipe_plan. */
typedef struct iqf_recipe_choice {
    int type;                 /* target type (== current type: copied) */
    bool allows_quantization; /* tensor_allows_quantization */
    bool requires_imatrix;    /* tensor_requires_imatrix(name, type, ftype) */
    bool fallback;            /* the shape forced a fallback type */
} iqf_recipe_choice;

/* llama's weight_name_comparer: layer number of "blk.N." (-1 if none), then strcmp. */
int iqf_recipe_name_cmp(const char *a, const char *b);

/* ggml_n_dims: 1 + index of the last dimension > 1 (at least 1). */
int iqf_recipe_n_dims(const int64_t ne[4]);

/* Plans every tensor, in the order given (which must be the loader order, see
 * iqf_recipe_name_cmp). Returns IQF_OK or an error (message in err): a tensor whose layer
 * cannot be determined in an MoE model, or no fallback for a type. */
iqf_status iqf_recipe_plan(const iqf_recipe_model *model, const iqf_recipe_opts *opts,
                           const iqf_recipe_tensor *tensors, int n, iqf_recipe_choice *out,
                           int *n_fallback, char *err, size_t errlen);

/* tensor_requires_imatrix: whether llama-quantize refuses `type` for tensor `name` without an
 * importance matrix in file type `ftype` (iqf_recipe_plan's requires_imatrix). */
bool iqf_recipe_requires_imatrix(const char *name, int type, int ftype);

#endif
