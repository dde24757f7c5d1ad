/*
 * model_archload.c - the loading of what only some architectures have (model_load.h): deepseek2's
 * MLA and DeepSeek MoE hyper-parameters and tensors, qwen35's Gated-DeltaNet layers, qwen35moe's
 * shared expert, gpt-oss's per-expert bias matrices. model.c's stages call these from the
 * architecture's row.
 */
#include "model_load.h"
#include "arch.h"
#include "deltanet.h"
#include "../util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float yarn_get_mscale(float scale, float mscale) { return scale <= 1.0f ? 1.0f : 0.1f * mscale * logf(scale) + 1.0f; }

/* ggml_rope_yarn_corr_dims: the dimension range over which YaRN ramps from extrapolation to
 * interpolation (beta_fast 32, beta_slow 1: libllama's defaults, no key sets them for deepseek2). */
static float yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * 3.14159265358979323846f) /* (float)M_PI */) / (2 * logf(base));
}

/* deepseek2's sizes, routing keys and YaRN as llama_model_deepseek2::load_arch_hparams,
 * llama_context (yarn_attn_factor) and its graph (kq_scale) compute them. */
iqf_status iqf_ld_load_mla(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    struct iqf_mla_hp *p = &m->mla;
    if (m->arch->attn != IQF_ATTN_MLA) return IQF_OK;
    iqf_status st = IQF_OK;
    int nextn = 0, gating = 0, octx = 0;
    const bool lite = h->n_layer == 27 || h->n_layer == 26 || (h->n_layer == 48 && h->n_vocab == 128256);
    if (!iqf_ld_key_int(ld, "nextn_predict_layers", false, 0, 0, h->n_layer - 1, &nextn, &st) ||
        (!lite && !iqf_ld_key_int(ld, "attention.q_lora_rank", true, 0, 0, 1 << 16, &p->q_lora, &st)) ||
        !iqf_ld_key_int(ld, "attention.kv_lora_rank", true, 0, 1, 1 << 16, &p->kv_lora, &st) ||
        !iqf_ld_key_int(ld, "attention.key_length_mla", true, 0, h->n_rot + 1, 1 << 14, &p->k_mla, &st) ||
        !iqf_ld_key_int(ld, "attention.value_length_mla", true, 0, 1, 1 << 14, &p->v_mla, &st) ||
        !iqf_ld_key_int(ld, "leading_dense_block_count", false, 0, 0, h->n_layer, &p->n_dense_lead, &st) ||
        !iqf_ld_key_int(ld, "expert_shared_count", true, 0, 0, 64, &p->n_shared, &st) ||
        !iqf_ld_key_int(ld, "expert_gating_func", false, 0, 0, 3, &gating, &st) ||
        !iqf_ld_key_int(ld, "expert_group_count", false, 0, 0, h->n_expert, &p->n_groups, &st) ||
        !iqf_ld_key_int(ld, "expert_group_used_count", false, 0, 0, h->n_expert, &p->n_group_used, &st) ||
        !iqf_ld_key_int(ld, "rope.scaling.original_context_length", false, h->n_ctx_train, 1, INT32_MAX, &octx, &st))
        return st;
    h->n_layer -= nextn; /* the nextn (MTP) layers are not evaluated */
    if (p->n_dense_lead > 0 && h->n_ff < 1)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %d dense layers without feed_forward_length", ld->path,
                        p->n_dense_lead);
    if (h->n_head_kv != 1 || h->head_dim != p->kv_lora + h->n_rot)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: MLA with head_count_kv %d and key_length %d (expected 1 and "
                        "kv_lora_rank + rope = %d)", ld->path, h->n_head_kv, h->head_dim, p->kv_lora + h->n_rot);
    if (gating == 0) gating = (h->n_layer == 47 || h->n_layer == 48) && h->n_vocab == 154880 ? 2 : 1; /* V2 files */
    if (gating == 3)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: expert_gating_func sqrt-softplus is not supported", ld->path);
    p->sigmoid = gating == 2;
    if (p->n_groups > 1 && (h->n_expert % p->n_groups || p->n_group_used < 1 || p->n_group_used >= p->n_groups ||
                            p->n_groups > 256)) /* moe_ds.c's group buffers */
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %d experts in %d groups, %d used", ld->path, h->n_expert,
                        p->n_groups, p->n_group_used);
    char key[128];
    snprintf(key, sizeof key, "%s.expert_weights_norm", h->arch);
    bool nw = false;
    iqf_gguf_get_bool(m->gguf, key, &nw);
    h->expert_weights_norm = nw;
    iqf_ld_key_float(ld, "expert_weights_scale", &p->w_scale);
    float log_mul = 0.0f, tscale = 0.0f;
    if (iqf_ld_key_float(ld, "rope.scaling.yarn_log_multiplier", &log_mul)) log_mul /= 0.1f; /* the converter's factor */
    if (iqf_ld_key_float(ld, "attention.temperature_scale", &tscale) && tscale != 0.0f)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: attention temperature scaling is not supported", ld->path);
    const float fs = h->rope_freq_scale;
    float af = 1.0f;
    if (p->ext_factor != 0.0f) { /* llama_context: yarn_attn_factor */
        const float factor = 1.0f / fs;
        if (log_mul != 0.0f)
            af = yarn_get_mscale(factor, log_mul != 1.0f ? log_mul : 1.0f) / yarn_get_mscale(factor, log_mul);
        else
            af = yarn_get_mscale(factor, 1.0f);
        af *= 1.0f / (1.0f + 0.1f * logf(factor));
    }
    p->attn_factor = af * h->rope_attn_factor;
    const float af_org = p->attn_factor * (1.0f + 0.1f * logf(1.0f / fs));
    const float mscale = af_org * (1.0f + 0.1f * log_mul * logf(1.0f / fs));
    p->kq_scale = 1.0f * mscale * mscale / sqrtf((float)p->k_mla);
    const float start = floorf(yarn_corr_dim(h->n_rot, octx, 32.0f, h->rope_base));
    const float end = ceilf(yarn_corr_dim(h->n_rot, octx, 1.0f, h->rope_base));
    p->corr[0] = start > 0 ? start : 0;
    p->corr[1] = end < h->n_rot - 1 ? end : (float)(h->n_rot - 1);
    return IQF_OK;
}

/* qwen35's Gated-DeltaNet sizes and which layers are recurrent (llama_model_qwen35::load_arch_hparams):
 * ssm.{conv_kernel, inner_size, state_size, time_step_rank, group_count}; the flags from
 * attention.recurrent_layers, else every layer but each full_attention_interval-th (default 4);
 * the nextn (MTP) blocks after the trunk are not evaluated, as libllama's main graph does not. */
iqf_status iqf_ld_load_gdn_hparams(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    iqf_status st = IQF_OK;
    iqf_gdn_hparams *hp = m->gdn_hp = calloc(1, sizeof *hp);
    if (!hp) return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    int nextn = 0, interval = 4;
    if (!iqf_ld_key_int(ld, "nextn_predict_layers", false, 0, 0, h->n_layer - 1, &nextn, &st) ||
        !iqf_ld_key_int(ld, "ssm.conv_kernel", true, 0, 1, 64, &hp->d_conv, &st) ||
        !iqf_ld_key_int(ld, "ssm.inner_size", true, 0, 1, 1 << 20, &hp->d_inner, &st) ||
        !iqf_ld_key_int(ld, "ssm.state_size", true, 0, 1, 512, &hp->S, &st) ||
        !iqf_ld_key_int(ld, "ssm.time_step_rank", true, 0, 1, 4096, &hp->H_v, &st) ||
        !iqf_ld_key_int(ld, "ssm.group_count", true, 0, 1, 4096, &hp->H_k, &st) ||
        !iqf_ld_key_int(ld, "full_attention_interval", false, 4, 1, 1 << 20, &interval, &st))
        return st;
    if (hp->H_v % hp->H_k || (int64_t)hp->H_v * hp->S != hp->d_inner)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT,
                        "%s: ssm sizes inconsistent: %d value heads, %d key heads, state %d, inner %d", ld->path,
                        hp->H_v, hp->H_k, hp->S, hp->d_inner);
    const int n_all = h->n_layer;
    h->n_layer -= nextn;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", h->arch);
    int64_t ki = iqf_gguf_find_kv(m->gguf, key);
    int at = ki >= 0 && iqf_gguf_kv_type(m->gguf, ki) == IQF_GGUF_ARR ? iqf_gguf_arr_type(m->gguf, ki) : -1;
    uint64_t n = 0;
    const uint8_t *v = at == IQF_GGUF_I32 || at == IQF_GGUF_U32 ? iqf_gguf_arr_data(m->gguf, ki, at, &n) : NULL;
    int sum = 0;
    for (uint64_t i = 0; v && i < n && i < 4; i++) {
        int32_t x;
        memcpy(&x, v + 4 * i, 4);
        if (x < 0 || x > h->head_dim)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s[%d] = %d", ld->path, key, (int)i, (int)x);
        hp->sections[i] = x;
        sum += x;
    }
    if (!v || sum == 0 || sum > h->head_dim) /* ggml_rope_multi: some section, at most ne0 dims */
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: missing or bad %s", ld->path, key);
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", h->arch);
    ki = iqf_gguf_find_kv(m->gguf, key);
    at = ki >= 0 && iqf_gguf_kv_type(m->gguf, ki) == IQF_GGUF_ARR ? iqf_gguf_arr_type(m->gguf, ki) : -1;
    bool recr[4096] = { false };
    if (at == IQF_GGUF_BOOL || at == IQF_GGUF_U32 || at == IQF_GGUF_I32) {
        v = iqf_gguf_arr_data(m->gguf, ki, at, &n);
        const size_t es = at == IQF_GGUF_BOOL ? 1 : 4;
        if (!v || n != (uint64_t)n_all)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s has %llu values for %d layers", ld->path, key,
                            (unsigned long long)n, n_all);
        for (int l = 0; l < h->n_layer; l++) {
            uint32_t x = 0;
            memcpy(&x, v + (size_t)l * es, es);
            recr[l] = x != 0;
        }
    } else if (at >= 0) {
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s is an array of neither bools nor integers", ld->path, key);
    } else {
        for (int l = 0; l < h->n_layer; l++) recr[l] = (l + 1) % interval != 0;
    }
    for (int l = 0; l < h->n_layer; l++)
        if (recr[l] && !(m->layers[l].gdn = calloc(1, sizeof(iqf_gdn_layer))))
            return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    return IQF_OK;
}

/* A Gated-DeltaNet layer's tensors (llama_model_qwen35::load_arch_tensors). */
iqf_status iqf_ld_load_layer_gdn(loader *ld, int l) {
    iqf_model *m = ld->m;
    const iqf_gdn_hparams *hp = m->gdn_hp;
    iqf_gdn_layer *g = m->layers[l].gdn;
    const int64_t E = m->info.n_embd, C = 2 * (int64_t)hp->H_k * hp->S + hp->d_inner;
    g->s_qkv = g->s_z = g->s_alpha = g->s_beta = g->s_out = 1.0f;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ssm_a", l);
    const iqf_gguf_tensor *t;
    iqf_status st;
    if ((st = iqf_ld_layer_mat(ld, l, "attn_qkv", E, C, 1, &g->qkv)) || (st = iqf_ld_layer_mat(ld, l, "attn_gate", E, hp->d_inner, 1, &g->z)) ||
        (st = iqf_ld_layer_mat(ld, l, "ssm_alpha", E, hp->H_v, 1, &g->alpha)) ||
        (st = iqf_ld_layer_mat(ld, l, "ssm_beta", E, hp->H_v, 1, &g->beta)) ||
        (st = iqf_ld_layer_mat(ld, l, "ssm_out", hp->d_inner, E, 1, &g->out)) ||
        (st = iqf_ld_layer_scale(ld, l, "attn_qkv", 1, &g->s_qkv, NULL)) || (st = iqf_ld_layer_scale(ld, l, "attn_gate", 1, &g->s_z, NULL)) ||
        (st = iqf_ld_layer_scale(ld, l, "ssm_alpha", 1, &g->s_alpha, NULL)) ||
        (st = iqf_ld_layer_scale(ld, l, "ssm_beta", 1, &g->s_beta, NULL)) || (st = iqf_ld_layer_scale(ld, l, "ssm_out", 1, &g->s_out, NULL)) ||
        (st = iqf_ld_layer_vec(ld, l, "ssm_dt", "bias", hp->H_v, false, &g->dt)) ||
        (st = iqf_ld_layer_vec(ld, l, "ssm_norm", "weight", hp->S, false, &g->norm)) ||
        (st = iqf_ld_load_vector(ld, &g->a, name, hp->H_v)))
        return st;
    snprintf(name, sizeof name, "blk.%d.ssm_conv1d.weight", l);
    if ((st = iqf_ld_get_tensor(ld, name, hp->d_conv, C, false, &t))) return st;
    if (!(g->conv = malloc((size_t)(C * hp->d_conv) * sizeof(float)))) return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    m->info.n_params += C * hp->d_conv;
    return iqf_dequantize(t->type, t->data, g->conv, C, hp->d_conv, 1, ld->err, ld->errlen);
}

/* deepseek2 attention (llama_model_deepseek2::load_arch_tensors, MLA layout): the q latent pair
 * attn_q_a / attn_q_a_norm / attn_q_b (or attn_q when q_lora_rank is 0), attn_kv_a_mqa (latent,
 * then the shared rope key), attn_kv_a_norm, attn_k_b and attn_v_b per head, attn_output. */
iqf_status iqf_ld_load_layer_mla(loader *ld, int l) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    const struct iqf_mla_hp *p = &m->mla;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = h->n_embd, H = h->n_head, nope = p->k_mla - h->n_rot;
    ly->sq = ly->sk = ly->sv = ly->so = ly->sgate = ly->sup = ly->sdown = 1.0f;
    iqf_status st;
    if ((st = iqf_ld_layer_vec(ld, l, "attn_norm", "weight", E, false, &ly->attn_norm)) ||
        (st = iqf_ld_layer_vec(ld, l, "attn_kv_a_norm", "weight", p->kv_lora, false, &ly->kv_a_norm)))
        return st;
    if (p->q_lora > 0) {
        if ((st = iqf_ld_layer_vec(ld, l, "attn_q_a_norm", "weight", p->q_lora, false, &ly->q_a_norm)) ||
            (st = iqf_ld_layer_mat(ld, l, "attn_q_a", E, p->q_lora, 1, &ly->wq_a)) ||
            (st = iqf_ld_layer_mat(ld, l, "attn_q_b", p->q_lora, H * p->k_mla, 1, &ly->wq_b)))
            return st;
    } else if ((st = iqf_ld_layer_mat(ld, l, "attn_q", E, H * p->k_mla, 1, &ly->wq))) {
        return st;
    }
    char name[96];
    snprintf(name, sizeof name, "blk.%d.attn_kv_b.weight", l);
    if (iqf_gguf_find_tensor(m->gguf, name) >= 0 && iqf_gguf_find_tensor(m->gguf, "blk.0.attn_k_b.weight") < 0)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: %s: the older unsplit MLA layout is not supported "
                        "(convert the model again: attn_k_b / attn_v_b)", ld->path, name);
    if ((st = iqf_ld_layer_mat(ld, l, "attn_kv_a_mqa", E, p->kv_lora + h->n_rot, 1, &ly->wkv_a)) ||
        (st = iqf_ld_layer_mat(ld, l, "attn_k_b", nope, p->kv_lora, (int)H, &ly->wk_b)) ||
        (st = iqf_ld_layer_mat(ld, l, "attn_v_b", p->kv_lora, p->v_mla, (int)H, &ly->wv_b)) ||
        (st = iqf_ld_layer_mat(ld, l, "attn_output", H * p->v_mla, E, 1, &ly->wo)) ||
        (st = iqf_ld_layer_scale(ld, l, "attn_output", 1, &ly->so, NULL))) /* build_attn's wo_s */
        return st;
    return IQF_OK;
}

/* deepseek2's expert layers: router, selection bias, experts (split or fused gate_up), shared
 * experts n_ff_exp * expert_shared_count wide. Its graph passes no FFN scales. */
iqf_status iqf_ld_load_layer_moe_ds(loader *ld, int l) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = h->n_embd, NE = h->n_expert, F = h->n_ff_exp, FS = F * m->mla.n_shared;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", l);
    const bool fused = iqf_gguf_find_tensor(m->gguf, name) >= 0;
    iqf_status st;
    if ((st = iqf_ld_layer_mat(ld, l, "ffn_gate_inp", E, NE, 1, &ly->gate_inp)) ||
        (st = iqf_ld_layer_vec(ld, l, "exp_probs_b", "bias", NE, true, &ly->exp_probs_b)) ||
        (fused && (st = iqf_ld_layer_mat(ld, l, "ffn_gate_up_exps", E, 2 * F, (int)NE, &ly->gate_up_exps))) ||
        (!fused && (st = iqf_ld_layer_mat(ld, l, "ffn_gate_exps", E, F, (int)NE, &ly->gate_exps))) ||
        (!fused && (st = iqf_ld_layer_mat(ld, l, "ffn_up_exps", E, F, (int)NE, &ly->up_exps))) ||
        (st = iqf_ld_layer_mat(ld, l, "ffn_down_exps", F, E, (int)NE, &ly->down_exps)))
        return st;
    if (FS > 0 && ((st = iqf_ld_layer_mat(ld, l, "ffn_gate_shexp", E, FS, 1, &ly->gate_shexp)) ||
                   (st = iqf_ld_layer_mat(ld, l, "ffn_up_shexp", E, FS, 1, &ly->up_shexp)) ||
                   (st = iqf_ld_layer_mat(ld, l, "ffn_down_shexp", FS, E, 1, &ly->down_shexp))))
        return st;
    return IQF_OK;
}

/* qwen35moe's shared expert: ffn_{gate,up,down}_shexp (n_ff_shexp wide) with their scales and the
 * gate ffn_gate_inp_shexp [n_embd] (a one-row product, no scale). */
iqf_status iqf_ld_load_layer_shexp(loader *ld, int l) {
    iqf_model *m = ld->m;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = m->info.n_embd, F = m->n_ff_shexp;
    ly->sgate_shexp = ly->sup_shexp = ly->sdown_shexp = 1.0f;
    iqf_status st;
    if ((st = iqf_ld_layer_mat(ld, l, "ffn_gate_inp_shexp", E, 0, 1, &ly->gate_inp_shexp))) return st;
    ly->gate_inp_shexp.nrows = 1; /* a vector in the file: one row */
    if ((st = iqf_ld_layer_mat(ld, l, "ffn_gate_shexp", E, F, 1, &ly->gate_shexp)) ||
        (st = iqf_ld_layer_mat(ld, l, "ffn_up_shexp", E, F, 1, &ly->up_shexp)) ||
        (st = iqf_ld_layer_mat(ld, l, "ffn_down_shexp", F, E, 1, &ly->down_shexp)) ||
        (st = iqf_ld_layer_scale(ld, l, "ffn_gate_shexp", 1, &ly->sgate_shexp, NULL)) ||
        (st = iqf_ld_layer_scale(ld, l, "ffn_up_shexp", 1, &ly->sup_shexp, NULL)) ||
        (st = iqf_ld_layer_scale(ld, l, "ffn_down_shexp", 1, &ly->sdown_shexp, NULL)))
        return st;
    return IQF_OK;
}

/* Shared-expert width (expert_shared_feed_forward_length, default feed_forward_length) and
 * expert_weights_scale (0 or 1: none), as llama_model_qwen35moe::load_arch_hparams reads them. */
iqf_status iqf_ld_load_shexp_hparams(loader *ld) {
    iqf_model *m = ld->m;
    iqf_status st = IQF_OK;
    m->moe_w_scale = 1.0f;
    float ws = 0.0f;
    if (iqf_ld_key_float(ld, "expert_weights_scale", &ws) && ws != 0.0f) m->moe_w_scale = ws;
    if (!isfinite(m->moe_w_scale))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad expert_weights_scale", ld->path);
    if (!iqf_ld_key_int(ld, "expert_shared_feed_forward_length", false, 0, 0, 1 << 22, &m->n_ff_shexp, &st)) return st;
    if (m->n_ff_shexp == 0) m->n_ff_shexp = m->info.n_ff;
    if (m->n_ff_shexp < 1) return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: shared expert of width 0", ld->path);
    return IQF_OK;
}

/* A 2-D tensor blk.<l>.<nm> of ne1 rows of ne0 read as floats (gpt-oss's per-expert biases). */
iqf_status iqf_ld_layer_mat_f32(loader *ld, int l, const char *nm, int64_t ne0, int64_t ne1, float **out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", l, nm);
    const iqf_gguf_tensor *t;
    iqf_status st = iqf_ld_get_tensor(ld, name, ne0, ne1, false, &t);
    if (st) return st;
    *out = malloc((size_t)(ne0 * ne1) * sizeof(float));
    if (!*out) return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    ld->m->info.n_params += ne0 * ne1;
    return iqf_dequantize(t->type, t->data, *out, ne1, ne0, 1, ld->err, ld->errlen);
}


/* Per-layer head sizes, rotated dims and K/V sources. Every layer starts with key_length and
 * rope.dimension_count on its own cache. gemma4 (llama_model_gemma4::load_arch_hparams and
 * llama_model::load_hparams): the sliding layers' key_length_swa (= value_length_swa, both
 * required) and rope.dimension_count_swa (default rope.dimension_count), its pattern an array;
 * with attention.shared_kv_layers n, layer il >= n_layer - n reads the cache of layer
 * n_layer - n - 2 if it slides, else n_layer - n - 1 (the memory's reuse callback). */
iqf_status iqf_ld_load_layer_geometry(loader *ld) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    const iqf_arch *a = m->arch;
    iqf_status st = IQF_OK;
    int hd_swa = h->head_dim, vl_swa = h->head_dim, n_shared = 0;
    m->n_rot_swa = h->n_rot;
    if (a->swa_heads) {
        char key[128];
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", h->arch);
        const int64_t ki = iqf_gguf_find_kv(m->gguf, key);
        if (ki < 0 || iqf_gguf_kv_type(m->gguf, ki) != IQF_GGUF_ARR)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s must be an array of per-layer flags", ld->path, key);
        if (!iqf_ld_key_int(ld, "attention.key_length_swa", true, 0, 2, h->head_dim, &hd_swa, &st) ||
            !iqf_ld_key_int(ld, "attention.value_length_swa", true, 0, 2, h->head_dim, &vl_swa, &st) ||
            !iqf_ld_key_int(ld, "rope.dimension_count_swa", false, h->n_rot, 2, hd_swa, &m->n_rot_swa, &st))
            return st;
        if (vl_swa != hd_swa || m->n_rot_swa % 2)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: key_length_swa %d, value_length_swa %d, rope.dimension_count_swa %d",
                            ld->path, hd_swa, vl_swa, m->n_rot_swa);
    }
    if (a->kv_shared && !iqf_ld_key_int(ld, "attention.shared_kv_layers", false, 0, 0, h->n_layer, &n_shared, &st)) return st;
    const int from = h->n_layer - n_shared;
    if (n_shared > 0 && from < 2)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %d shared KV layers of %d leave fewer than 2 with their own K/V",
                        ld->path, n_shared, h->n_layer);
    int *kv = calloc((size_t)h->n_layer, sizeof(int)), *ff = calloc((size_t)h->n_layer, sizeof(int)), mx;
    if (!kv || !ff) {
        free(kv);
        free(ff);
        return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    }
    for (int l = 0; l < h->n_layer; l++) {
        kv[l] = h->n_head_kv;
        ff[l] = h->n_ff;
    }
    if (a->layer_widths && (!iqf_ld_key_int_per_layer(ld, "feed_forward_length", h->n_expert == 0, 0, 0, 1 << 22, &mx, ff, &st) ||
                            !iqf_ld_key_int_per_layer(ld, "attention.head_count_kv", false, h->n_head, 1, h->n_head, &mx, kv, &st))) {
        free(kv);
        free(ff);
        return st;
    }
    for (int l = 0; l < h->n_layer; l++) {
        iqf_layer *ly = &m->layers[l];
        ly->n_kv = kv[l];
        ly->n_ff = ff[l];
        if (ly->n_kv < 1 || h->n_head % ly->n_kv || (h->n_expert == 0 && ly->n_ff < 1)) {
            free(kv);
            free(ff);
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: layer %d: %d KV heads for %d heads, FFN width %d", ld->path, l,
                            ly->n_kv, h->n_head, ly->n_ff);
        }
    }
    free(kv);
    free(ff);
    for (int l = 0; l < h->n_layer; l++) {
        iqf_layer *ly = &m->layers[l];
        const bool own = a->swa_heads && ly->swa;
        ly->hd = own ? hd_swa : h->head_dim;
        ly->n_rot = own ? m->n_rot_swa : h->n_rot;
        ly->kv_src = l >= from ? from - (ly->swa ? 2 : 1) : l;
        if (ly->kv_src != l && (m->layers[ly->kv_src].swa != ly->swa || m->layers[ly->kv_src].n_kv != ly->n_kv))
            return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: shared-KV layer %d (%s, %d KV heads) would read layer %d's cache (%s, %d)",
                            ld->path, l, ly->swa ? "sliding" : "global", ly->n_kv, ly->kv_src,
                            m->layers[ly->kv_src].swa ? "sliding" : "global", m->layers[ly->kv_src].n_kv);
    }
    return IQF_OK;
}

/* Per-layer embeddings (llama_model_gemma4::load_arch_tensors): embedding_length_per_layer_input
 * n (required; 0: none), per_layer_token_embd [n * n_layer, n_vocab], per_layer_model_proj
 * [n_embd, n * n_layer], per_layer_proj_norm [n]. */
iqf_status iqf_ld_load_ple(loader *ld) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    iqf_status st = IQF_OK;
    if (!m->arch->per_layer_embd) return IQF_OK;
    if (!iqf_ld_key_int(ld, "embedding_length_per_layer_input", true, 0, 0, 1 << 16, &m->n_ple, &st)) return st;
    if (m->n_ple == 0) return IQF_OK;
    const int64_t W = (int64_t)m->n_ple * h->n_layer;
    if ((st = iqf_ld_global_mat(ld, &m->ple_tok, "per_layer_token_embd.weight", W, h->n_vocab, false)) ||
        /* no imatrix slot: llama-imatrix collects blk.* matrices only (and --simulate quantizes those) */
        (st = iqf_ld_global_mat(ld, &m->ple_model_proj, "per_layer_model_proj.weight", h->n_embd, W, false)) ||
        (st = iqf_ld_load_vector(ld, &m->ple_proj_norm, "per_layer_proj_norm.weight", m->n_ple)))
        return st;
    return IQF_OK;
}

/* A layer's inp_gate [n_embd -> n_ple], proj [n_ple -> n_embd] and post_norm, where the model has
 * per-layer embeddings; layer_output_scale [1] where the row reads it. */
iqf_status iqf_ld_load_layer_ple(loader *ld, int l) {
    iqf_model *m = ld->m;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = m->info.n_embd;
    iqf_status st;
    ly->out_scale = 1.0f;
    if (m->arch->layer_out_scale) {
        float *v = NULL;
        if ((st = iqf_ld_layer_vec(ld, l, "layer_output_scale", "weight", 1, true, &v))) return st;
        if (v) {
            ly->out_scale = v[0];
            free(v);
            if (!isfinite(ly->out_scale))
                return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: blk.%d.layer_output_scale is not finite", ld->path, l);
        }
    }
    if (m->n_ple == 0) return IQF_OK;
    if ((st = iqf_ld_layer_mat(ld, l, "inp_gate", E, m->n_ple, 1, &ly->ple_gate)) ||
        (st = iqf_ld_layer_mat(ld, l, "proj", m->n_ple, E, 1, &ly->ple_proj)) ||
        (st = iqf_ld_layer_vec(ld, l, "post_norm", "weight", E, false, &ly->ple_post_norm)))
        return st;
    return IQF_OK;
}
