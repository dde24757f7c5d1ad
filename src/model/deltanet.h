/*
 * deltanet.h - qwen35's Gated-DeltaNet (linear attention) layers and the pieces of its
 * full-attention layers that are new to the engine (deltanet.c): the sigmoid output gate and the
 * interleaved M-RoPE sections. Numerics follow llama.cpp's models/qwen35.cpp with the CPU backend's
 * fused ggml_gated_delta_net (its default there) and ggml_ssm_conv.
 */
#ifndef IQF_MODEL_DELTANET_H
#define IQF_MODEL_DELTANET_H

#include "model.h"

/* Hyper-parameters (ssm.*): S = state_size (head width of q, k and v), H_k = group_count,
 * H_v = time_step_rank, d_inner = H_v * S, conv channels 2 * H_k * S + d_inner. */
typedef struct iqf_gdn_hparams {
    int d_conv, d_inner, S, H_k, H_v;
    int sections[4];           /* rope.dimension_sections */
} iqf_gdn_hparams;

/* One Gated-DeltaNet layer's tensors. */
typedef struct iqf_gdn_layer {
    iqf_weight qkv, z, alpha, beta, out; /* attn_qkv, attn_gate, ssm_alpha, ssm_beta, ssm_out */
    float s_qkv, s_z, s_alpha, s_beta, s_out; /* their per-tensor .scale (1 when absent) */
    float *conv;               /* ssm_conv1d [conv channels][d_conv] */
    float *dt, *a;             /* ssm_dt.bias, ssm_a [H_v] */
    float *norm;               /* ssm_norm [S] */
} iqf_gdn_layer;

void iqf_gdn_layer_free(iqf_gdn_layer *g);

/* Context side: per-layer recurrent state (conv and SSM) and scratch. NULL-safe free. */
bool iqf_gdn_ctx_new(iqf_context *c);
void iqf_gdn_ctx_free(struct iqf_gdn_ctx *g);
void iqf_gdn_ctx_reset(iqf_context *c); /* a new sequence: states zeroed */

/* Layer l over the T rows of c->xn (the attention norm's output): updates the layer's states
 * and writes ssm_out's product for rows r0..T-1 to out (ld n_embd). */
void iqf_gdn_forward(iqf_context *c, int l, int T, int r0, float *out);

/* Full-attention layers with an output gate: the Q projection of nr rows x (ld n_embd) gives
 * per head [q | gate]; q (scaled, biased) to q (ld n_head * head_dim), the gate kept. */
void iqf_gated_q(iqf_context *c, const iqf_layer *ly, const float *x, int nr, float *q);
/* att (nr rows, ld n_head * head_dim) times sigmoid(gate) of the same rows. */
void iqf_attn_gate_apply(iqf_context *c, float *att, int nr);

/* Interleaved M-RoPE with text positions: the cos/sin pairs of the e sector become (mscale, 0). */
void iqf_imrope_fix(float *cs, int n_rot, const int sections[4], float mscale);

#endif
