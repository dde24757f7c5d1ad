/*
 * genmodel.h - writes a synthetic llama-architecture GGUF model with Mistral-7B's structure
 * (n_embd 4096, n_ff 14336, 32 heads / 8 KV heads, vocab 32000) divided by a scale factor, with
 * realistic weight statistics, plus a matching importance matrix (GGUF and legacy .dat).
 * Deterministic for a given seed. Used by the tests, the benchmark and `make demo`.
 */
#ifndef IQF_GENMODEL_H
#define IQF_GENMODEL_H

#include "iqforge.h"

#include <stdint.h>

typedef struct iqf_genmodel_opts {
    int scale;      /* 1: Mistral-7B shapes; s: every width / s (heads stay 32/8) */
    int n_layer;    /* layers (Mistral has 32) */
    int type;       /* IQF_TYPE_F16, IQF_TYPE_BF16 or IQF_TYPE_F32 */
    uint64_t seed;
    bool tied;      /* no output.weight (tied embeddings) */
    /* Architecture: NULL or "llama" (Mistral shapes), "qwen2" (q/k/v biases, NEOX rope),
     * "qwen3" (per-head q/k RMSNorm, head_dim 2 * n_embd / n_head as Qwen3-0.6B), "mixtral"
     * (general.architecture llama with n_expert experts of width n_ff), "qwen3moe" (qwen3
     * attention, n_expert experts of width 2 * n_ff / 7: 4096 at scale 1), "gemma3" (qwen3-sized
     * heads with q/k norms, post-attention/FFN norms, window 32, every 2nd layer global),
     * "gpt-oss" (qwen3-sized heads with q/k/v/o biases and sinks, window 32 on even layers,
     * YaRN factor 32 over 4096, qwen3moe-wide experts with router and expert biases). */
    const char *arch;
    int n_expert, n_expert_used; /* MoE only (defaults 8 and 2) */
    const char *vocab;           /* NULL, or a GGUF whose tokenizer.* keys are copied (n_vocab
                                  * then is its token count; e.g. tests/data/vocab/ggml-vocab-gpt-2.gguf) */
    /* Optional keys as other writers put them (all off by default): {arch}.rope.scaling.type
     * (NULL: absent) with rope.scaling.factor / attn_factor (0: absent); expert_feed_forward_length
     * = 0 on a dense model (llama.cpp's model saver writes it). */
    const char *rope_scaling;
    float rope_scaling_factor, rope_attn_factor;
    bool dense_exp_ff_zero;
} iqf_genmodel_opts;

iqf_genmodel_opts iqf_genmodel_default_opts(void); /* scale 1, 2 layers, F16, seed 1, llama */

/* Writes the model to `model_path` and, if not NULL, the imatrix to `imatrix_gguf` / `imatrix_dat`
 * (entries for every blk.* weight matrix, 100 chunks of 512 tokens, dataset "synthetic"). */
iqf_status iqf_genmodel_write(const iqf_genmodel_opts *o, const char *model_path,
                              const char *imatrix_gguf, const char *imatrix_dat, char *err,
                              size_t errlen);

#endif
