/*
 * model_load.h - the loader's state and helpers shared by model.c (the stages every architecture
 * goes through) and model_archload.c (the hyper-parameters and layer tensors of the architectures
 * with a block of their own: qwen35's Gated-DeltaNet, deepseek2's MLA and MoE, shared experts,
 * gpt-oss's per-expert biases). Internal to src/model.
 */
#ifndef IQF_MODEL_LOAD_H
#define IQF_MODEL_LOAD_H

#include "model.h"

typedef struct loader {
    iqf_model *m;
    const char *path;
    char *err;
    size_t errlen;
} loader;

/* model.c: ARCH.suffix keys, tensors by name with their shapes, blk.<l>.<nm> tensors */
bool iqf_ld_key_int(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int *out,
                    iqf_status *st);
/* The same for a key libllama reads with get_key_or_arr: an integer, or an array of block_count
 * integers that must all be equal (else IQF_E_UNSUPPORTED naming the key). */
bool iqf_ld_key_int_layers(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int *out,
                           iqf_status *st);
/* The same where the values may differ (the row's layer_widths): *max the largest, vals (NULL or
 * n_layer ints) each layer's. */
bool iqf_ld_key_int_per_layer(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int *max,
                              int *vals, iqf_status *st);
bool iqf_ld_key_float(loader *ld, const char *suffix, float *out);
iqf_status iqf_ld_get_tensor(loader *ld, const char *name, int64_t ne0, int64_t ne1, bool optional,
                             const iqf_gguf_tensor **out);
iqf_status iqf_ld_load_vector(loader *ld, float **out, const char *name, int64_t n);
iqf_status iqf_ld_layer_vec(loader *ld, int l, const char *nm, const char *kind, int64_t n, bool optional, float **out);
iqf_status iqf_ld_layer_mat(loader *ld, int l, const char *nm, int64_t ne0, int64_t ne1, int n_mat, iqf_weight *w);
iqf_status iqf_ld_layer_scale(loader *ld, int l, const char *nm, int64_t n, float *out, float **arr);
/* A global matrix ne1 rows of ne0; product: it joins the model's matrix products (imatrix slots) */
iqf_status iqf_ld_global_mat(loader *ld, iqf_weight *w, const char *name, int64_t ne0, int64_t ne1, bool product);

/* model_archload.c */
iqf_status iqf_ld_load_mla(loader *ld);
iqf_status iqf_ld_load_gdn_hparams(loader *ld);
iqf_status iqf_ld_load_layer_gdn(loader *ld, int l);
iqf_status iqf_ld_load_layer_mla(loader *ld, int l);
iqf_status iqf_ld_load_layer_moe_ds(loader *ld, int l);
iqf_status iqf_ld_load_layer_shexp(loader *ld, int l);
iqf_status iqf_ld_load_shexp_hparams(loader *ld);
iqf_status iqf_ld_layer_mat_f32(loader *ld, int l, const char *nm, int64_t ne0, int64_t ne1, float **out);
/* Each layer's head size, rotated dims and K/V source (every architecture; gemma4's sliding
 * layers' own head size, its shared-KV layers), after load_attn_kind; per-layer embeddings'
 * global tensors and a layer's PLE tensors and output scale where the row has them. */
iqf_status iqf_ld_load_layer_geometry(loader *ld);
iqf_status iqf_ld_load_ple(loader *ld);
iqf_status iqf_ld_load_layer_ple(loader *ld, int l);

#endif
