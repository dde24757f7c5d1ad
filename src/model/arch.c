/*
 * arch.c - the architecture table (arch.h): one designated-initializer row per architecture.
 * Fields left out are false / 0 / the first enumerator: GQA attention, normal rope, SwiGLU.
 */
#include "arch.h"

#include <string.h>

static const iqf_arch ARCHS[] = {
    /* llama.cpp models/llama.cpp; with expert_count > 0 the Mixtral layout (experts n_ff wide).
     * Llama 3's rope_freqs, optional attn_output and FFN biases, FFN scales. */
    { .name = "llama", .rope = IQF_ROPE_NORMAL, .ffn = IQF_FFN_SWIGLU, .moe = IQF_MOE_OPTIONAL,
      .gating = IQF_GATING_SOFTMAX_TOPK, .moe_norm_w = true, .rope_freqs = true, .wo_bias = true,
      .ffn_bias = true, .ffn_scale = true },
    /* models/qwen2.cpp: q/k/v biases (read for every architecture, as create_tensor_qkv does), an
     * optional output.bias; its build_ffn call passes no FFN scales */
    { .name = "qwen2", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_SWIGLU, .output_bias = true },
    /* models/qwen3.cpp: per-head q/k RMS norms before rope */
    { .name = "qwen3", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_SWIGLU, .qk_norm = true, .ffn_scale = true },
    /* models/qwen3moe.cpp: qwen3 attention, softmax top-k experts expert_feed_forward_length wide */
    { .name = "qwen3moe", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_SWIGLU, .qk_norm = true,
      .moe = IQF_MOE_REQUIRED, .gating = IQF_GATING_SOFTMAX_TOPK, .moe_norm_w = true, .exp_ff_key = true,
      .exp_ff_optional = true, .ffn_scale = true },
    /* models/gemma3.cpp: (1 + w) norms baked into the weights by the converter, embeddings times
     * sqrt(n_embd), per-head q/k norms, Q scaled before attention, post-attention and post-FFN
     * norms, GeGLU, sliding-window layers (rope base 10000 or rope.freq_base_swa there) */
    { .name = "gemma3", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_GEGLU, .qk_norm = true, .post_norms = true,
      .embd_scale = true, .q_prescale = true, .swa = true, .swa_pattern = 6, .softcap = true },
    /* models/qwen35.cpp: Gated-DeltaNet layers (attention.recurrent_layers, or every layer but each
     * full_attention_interval-th, default 4) between full-attention ones whose Q projection carries
     * a sigmoid output gate; per-head q/k norms, interleaved M-RoPE, post_attention_norm as the FFN's
     * input norm, SwiGLU FFN; final_logit_softcapping is not read */
    { .name = "qwen35", .rope = IQF_ROPE_IMROPE, .attn = IQF_ATTN_GDN_HYBRID, .ffn = IQF_FFN_SWIGLU,
      .qk_norm = true, .ffn_scale = true, .attn_out_gate = true, .ffn_norm_name = "post_attention_norm" },
    /* models/qwen35moe.cpp: qwen35 with softmax top-k experts (renormalised, times
     * expert_weights_scale when neither 0 nor 1; gate and up possibly one ffn_gate_up_exps tensor)
     * plus a sigmoid-gated shared expert */
    { .name = "qwen35moe", .rope = IQF_ROPE_IMROPE, .attn = IQF_ATTN_GDN_HYBRID, .ffn = IQF_FFN_SWIGLU,
      .moe = IQF_MOE_REQUIRED, .gating = IQF_GATING_SOFTMAX_TOPK, .moe_norm_w = true, .exp_ff_key = true,
      .exp_ff_optional = true, .qk_norm = true, .ffn_scale = true, .attn_out_gate = true, .ffn_norm_name = "post_attention_norm",
      .shared_expert = true },
    /* models/openai-moe.cpp: q/k/v/o biases, attention sinks, scale 1/sqrt(n_rot), sliding-window
     * layers (period 2, their rope base rope.freq_base_swa else the global one, the global scale),
     * post_attention_norm as the FFN norm, softmax over the top-k biased router logits, experts
     * with biases and swiglu_oai (moe.c), YaRN rope from the generic rope.scaling keys */
    { .name = "gpt-oss", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_SWIGLU, .moe = IQF_MOE_REQUIRED,
      .gating = IQF_GATING_SOFTMAX_WEIGHT, .exp_ff_key = true, .wo_bias = true, .swa = true, .swa_pattern = 2,
      .attn_sinks = true, .attn_scale_rot = true, .swa_rope_global = true, .moe_biases = true,
      .ffn_norm_name = "post_attention_norm" },
    /* models/deepseek2.cpp (DeepSeek V2/V3, MLA files with attn_k_b / attn_v_b): normal rope on the
     * rope part only, YaRN; dense first layers, then routed + shared experts; its build_ffn and
     * build_moe_ffn calls pass no FFN scales (attn_output.scale is applied); nextn not evaluated */
    { .name = "deepseek2", .rope = IQF_ROPE_NORMAL, .attn = IQF_ATTN_MLA, .ffn = IQF_FFN_SWIGLU,
      .moe = IQF_MOE_REQUIRED, .gating = IQF_GATING_KEYED, .exp_ff_key = true, .dense_lead = true },
    /* models/gemma4.cpp (dense: E2B, E4B, 31B): gemma3's layer without the Q prescale (scale 1),
     * the sliding layers (an array pattern) with their own head size and rope dims, rope_freqs on
     * the global layers only, V RMS-normed (attn_v optional), the last shared_kv_layers layers on
     * the K/V of earlier ones, per-layer embeddings, the optional layer_output_scale; per-tensor
     * scales on every projection; on 26B-A4B expert layers beside the dense FFN (moe_dense_ffn). */
    { .name = "gemma4", .rope = IQF_ROPE_NEOX, .ffn = IQF_FFN_GEGLU, .qk_norm = true, .post_norms = true,
      .embd_scale = true, .swa = true, .swa_pattern = 0, .softcap = true, .rope_freqs = true, .ffn_scale = true,
      .swa_heads = true, .rope_freqs_global = true, .v_norm = true, .attn_scale_one = true, .kv_shared = true,
      .per_layer_embd = true, .layer_out_scale = true, .layer_widths = true,
      .moe = IQF_MOE_OPTIONAL, .gating = IQF_GATING_SOFTMAX_TOPK, .moe_norm_w = true, .exp_ff_key = true,
      .moe_dense_ffn = true },
};

/* Architectures whose graph shares most of a row above but needs blocks the engine lacks: the
 * loader refuses them with the reason, rather than as an unknown name. (None at present: gemma4,
 * the last one, has its row.) */
static const struct { const char *name, *why; } REFUSED[] = {
    { NULL, NULL },
};

const char *iqf_arch_refusal(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (REFUSED[i].name && !strcmp(REFUSED[i].name, name)) return REFUSED[i].why;
    return NULL;
}

const iqf_arch *iqf_arch_find(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(ARCHS[i].name, name)) return &ARCHS[i];
    return NULL;
}

const char *iqf_arch_names(void) { return "llama, qwen2, qwen3, qwen3moe, gemma3, qwen35, qwen35moe, gpt-oss, deepseek2, gemma4"; }
