/* override.h - --override-kv and --prune-layers of iqf_model_quantize (llama-quant.cpp's
 * kv_overrides loop and remap_layer). */
#ifndef IQF_QUANTIZE_OVERRIDE_H
#define IQF_QUANTIZE_OVERRIDE_H

#include "iqforge.h"
#include "recipe.h"

/* Checks every override against the schema of keys llama.cpp reads (an override that would
 * give such a key another type is refused) and that no key is empty. */
iqf_status iqf_kv_overrides_check(const iqf_kv_override *o, int n, const char *arch, char *err, size_t errlen);
/* Writes the overrides in order (gguf_set_val_*: an existing key moves to the end). */
iqf_status iqf_kv_overrides_write(iqf_gguf_writer *w, const iqf_kv_override *o, int n);
/* Int overrides of {arch}.block_count, attention.head_count, attention.head_count_kv and
 * expert_count replace the values the recipe sees, as llama's loader applies overrides. */
void iqf_kv_overrides_hparams(const iqf_kv_override *o, int n, iqf_recipe_model *hp);

/* remap_layer over the tensors in loader order (ascending layer). */
typedef struct iqf_prune_state {
    const int *layers; /* sorted, unique */
    int n;
    int64_t cur_blk;   /* layer of the last tensor seen, -1 none */
    int64_t cur_new;   /* its new number, -1 pruned */
    int next_id;       /* layers kept so far: the new block_count at the end */
} iqf_prune_state;

void iqf_prune_init(iqf_prune_state *s, const int *layers, int n);
/* Validates a --prune-layers list: sorted, unique, each >= 0 and < n_layer. */
iqf_status iqf_prune_check(const int *layers, int n, int n_layer, char *err, size_t errlen);
/* true: keep the tensor under the name written to out (cap bytes); false: pruned. */
bool iqf_prune_remap(iqf_prune_state *s, const char *name, char *out, size_t cap);

#endif
