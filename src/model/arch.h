/*
 * arch.h - one description per architecture the engine runs (arch.c holds the table).
 *
 * The loader (model.c) and the forward pass (forward.c) read a model's row instead of testing
 * its general.architecture name: which tensors a layer has, the rope style, the attention and
 * FFN kinds, the MoE gating, the extra norms and scales. Adding an architecture is a row, plus
 * a building block where its math is genuinely new. Each row states what libllama's graph for
 * that architecture does (llama.cpp src/models/<arch>.cpp), including the optional tensors it
 * reads and applies: a tensor libllama loads but one graph ignores is ignored here too.
 */
#ifndef IQF_MODEL_ARCH_H
#define IQF_MODEL_ARCH_H

#include <stdbool.h>

typedef enum {
    IQF_ROPE_NORMAL, /* pairs (2i, 2i+1) */
    IQF_ROPE_NEOX,   /* pairs (i, i + n_rot/2) */
    IQF_ROPE_IMROPE, /* neox pairs; interleaved M-RoPE sections (rope.dimension_sections): with text
                      * positions (t = h = w = p, e = 0) a pair outside the t/h/w sectors stays unrotated */
} iqf_rope_kind;
typedef enum {
    IQF_ATTN_GQA,
    IQF_ATTN_GDN_HYBRID, /* Gated-DeltaNet layers (deltanet.c) between GQA ones (qwen35) */
    IQF_ATTN_MLA, /* deepseek2: low-rank q, compressed KV latent + a shared rope key, k_b/v_b per head */
} iqf_attn_kind;
typedef enum { IQF_FFN_SWIGLU, IQF_FFN_GEGLU } iqf_ffn_kind; /* silu(gate) * up; gelu_tanh(gate) * up */
typedef enum { IQF_MOE_NONE, IQF_MOE_OPTIONAL, IQF_MOE_REQUIRED } iqf_moe_presence;
typedef enum {
    IQF_GATING_SOFTMAX_TOPK,   /* softmax over all experts, then the top k (room for sigmoid + bias, DeepSeek-V3) */
    IQF_GATING_SOFTMAX_WEIGHT, /* gpt-oss: top k of the (biased) router logits, softmax over those k (moe.c) */
    IQF_GATING_KEYED, /* deepseek2: expert_gating_func (softmax, sigmoid), exp_probs_b selection bias,
                       * expert groups, expert_weights_norm / _scale from their keys, shared experts */
} iqf_moe_gating;

typedef struct iqf_arch {
    const char *name;          /* general.architecture */
    iqf_rope_kind rope;
    iqf_attn_kind attn;
    iqf_ffn_kind ffn;
    iqf_moe_presence moe;      /* expert layers: none, optional (llama: Mixtral), required */
    iqf_moe_gating gating;
    bool moe_norm_w;           /* top-k weights renormalised (libllama passes it per graph, not from the key) */
    bool exp_ff_key;           /* the experts' width is expert_feed_forward_length (else feed_forward_length) */
    bool exp_ff_optional;      /* ... which may be absent or 0: then feed_forward_length / expert_used_count */
    bool qk_norm;              /* per-head RMS norms attn_q_norm / attn_k_norm (required) */
    bool post_norms;           /* post_attention_norm and post_ffw_norm after attention and FFN (required) */
    bool embd_scale;           /* token embeddings times sqrtf(n_embd) */
    bool q_prescale;           /* the attention scale multiplies Q before attention (ggml_scale), the
                                * product of Q and K is then not scaled again */
    bool rope_freqs;           /* rope_freqs.weight (Llama 3 frequency factors) read and applied */
    bool wo_bias;              /* attn_output.bias read and added */
    bool ffn_bias;             /* ffn_{up,gate,down}.bias read and added */
    bool ffn_scale;            /* per-tensor ffn_{up,gate,down}.scale applied (q/k/v/o scales always are) */
    bool output_bias;          /* output.bias read and added */
    bool swa;                  /* attention.sliding_window > 0 selects sliding-window layers */
    int swa_pattern;           /* default pattern: layer il slides unless il % pattern == pattern - 1 */
    bool softcap;              /* final_logit_softcapping read and applied when non-zero */
    bool attn_out_gate;        /* attn_q yields per head [q | gate]; attention output times sigmoid(gate) */
    const char *ffn_norm_name; /* the FFN's input norm tensor (NULL: "ffn_norm") */
    bool shared_expert;        /* ffn_{gate,up,down}_shexp beside the routed experts, gated by
                                * sigmoid(ffn_gate_inp_shexp . x) (qwen35moe) */
    /* gpt-oss (models/openai-moe.cpp) */
    bool attn_sinks;           /* attn_sinks.weight [n_head]: one extra logit per head in the softmax (required) */
    bool attn_scale_rot;       /* the attention scale is 1/sqrt(rope.dimension_count), not 1/sqrt(key_length) */
    bool swa_rope_global;      /* sliding layers default to the global rope base and scale (not 10000 and 1) */
    bool moe_biases;           /* ffn_gate_inp.bias and ffn_{gate,up,down}_exps.bias (required), swiglu_oai experts */
    bool dense_lead;           /* leading_dense_block_count layers have a dense FFN, the rest experts */
    /* gemma4 (models/gemma4.cpp) */
    bool swa_heads;            /* sliding layers have their own head size attention.key_length_swa (=
                                * value_length_swa, required) and rope.dimension_count_swa (default
                                * rope.dimension_count); the global layers key_length */
    bool rope_freqs_global;    /* rope_freqs.weight [key_length / 2] divides the global layers' angles
                                * only (proportional rope); the sliding layers rotate without it */
    bool v_norm;               /* V RMS-normed without a weight after its projection; attn_v optional
                                * (absent: V is K's projection, before K's norm) */
    bool attn_scale_one;       /* the softmax scale of Q.K is 1 (q/k norms carry it) */
    bool kv_shared;            /* attention.shared_kv_layers: the last ones reuse the K/V of the last
                                * sliding / global layer before them (no attn_k / attn_v of their own) */
    bool per_layer_embd;       /* embedding_length_per_layer_input > 0: per-layer embeddings (PLE) */
    bool layer_out_scale;      /* blk.*.layer_output_scale [1] (optional) multiplies the layer's output */
    bool moe_dense_ffn;        /* expert layers (those with ffn_gate_inp) keep the dense FFN too:
                                * its output post_ffw_norm_1-normed plus the experts' (GeGLU, input
                                * pre_ffw_norm_2, output post_ffw_norm_2), routed from
                                * rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale (gemma4 26B-A4B) */
    bool layer_widths;         /* feed_forward_length and head_count_kv may differ between layers
                                * (per-layer arrays: E2B's double-wide MLP, num_global_key_value_heads) */
} iqf_arch;

/* The row for a general.architecture value, or NULL if the engine does not run it. */
const iqf_arch *iqf_arch_find(const char *name);
/* For an architecture the engine knows but does not run (yet): one line naming what of its graph
 * is missing (the loader's refusal); NULL for any other name. */
const char *iqf_arch_refusal(const char *name);
/* "llama, qwen2, ..." for error messages. */
const char *iqf_arch_names(void);

#endif
