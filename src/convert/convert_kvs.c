/*
 * convert_kvs.c - the metadata of a conversion: general.name and general.size_label as the
 * converter derives them, and the architecture's hyper-parameter keys (iqf_cv_hparams), in the
 * converter's order; below them in the folder, the error and hyper-parameter helpers every
 * convert file uses (iqf_cv_fail, iqf_cv_hget, iqf_cv_hfind, iqf_cv_hint, iqf_cv_ends_with).
 */
#include "convert_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int iqf_cv_fail(cv *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- hyper-parameters (find_hparam) ---------------------------------------------------- */

yyjson_val *iqf_cv_hget(cv *c, const char *key) { return iqf_json_get(c->hp, key); }

/* find_hparam: the first key present (even when null). */
yyjson_val *iqf_cv_hfind(cv *c, const char *const *keys, bool *present) {
    for (int i = 0; keys[i]; i++) {
        yyjson_val *v = iqf_cv_hget(c, keys[i]);
        if (v) {
            if (present) *present = true;
            return v;
        }
    }
    if (present) *present = false;
    return NULL;
}

int iqf_cv_hint(cv *c, const char *key, yyjson_val *v, int64_t *out, int64_t lo, int64_t hi) {
    if (!iqf_json_int(v, out) || *out < lo || *out > hi)
        return iqf_cv_fail(c, "%s: %s is not an integer in [%lld, %lld]", c->cfg_path, key, (long long)lo, (long long)hi);
    return 0;
}

/* ---- small helpers ------------------------------------------------------------------------- */

bool iqf_cv_ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

/* ---- general.name, general.size_label ---------------------------------------------------- */

/* Python's str.title() on ASCII (a letter after a non-letter is upper case, others lower). */
static void py_title(char *s) {
    bool prev_alpha = false;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (isalpha(ch)) {
            *s = (char)(prev_alpha ? tolower(ch) : toupper(ch));
            prev_alpha = true;
        } else
            prev_alpha = (ch & 0x80) != 0;
    }
}

static bool is_version_or_digit(const char *w) {
    if (isdigit((unsigned char)w[0])) return true;
    if (w[0] != 'v' || !isdigit((unsigned char)w[1])) return false;
    const char *p = w + 1;
    for (;;) {
        while (isdigit((unsigned char)*p)) p++;
        if (!*p) return true;
        if (*p != '.' || !isdigit((unsigned char)p[1])) return false;
        p++;
    }
}

/* Metadata.id_to_title of the directory name. */
void iqf_cv_model_name(const char *dir, char *out, size_t n) {
    char buf[512];
    size_t l = strlen(dir);
    while (l > 1 && dir[l - 1] == '/') l--;
    size_t b = l;
    while (b > 0 && dir[b - 1] != '/') b--;
    size_t m = l - b < sizeof buf - 1 ? l - b : sizeof buf - 1;
    memcpy(buf, dir + b, m);
    buf[m] = 0;
    for (char *p = buf; *p; p++)
        if (*p == '-') *p = ' ';
    out[0] = 0;
    size_t o = 0;
    char *save = NULL;
    for (char *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save)) {
        bool lower = false, upper = false;
        for (char *p = w; *p; p++) {
            if (islower((unsigned char)*p)) lower = true;
            if (isupper((unsigned char)*p)) upper = true;
        }
        if (lower && !upper && !is_version_or_digit(w)) py_title(w);
        o += (size_t)snprintf(out + o, o < n ? n - o : 0, "%s%s", o ? " " : "", w);
        if (o >= n) break;
    }
}

static void rounded_notation(uint64_t p, char *out, size_t n) {
    double x = (double)p;
    double s;
    const char *suf;
    if (x > 1e12) { s = x * 1e-12; suf = "T"; }
    else if (x > 1e9) { s = x * 1e-9; suf = "B"; }
    else if (x > 1e6) { s = x * 1e-6; suf = "M"; }
    else { s = x * 1e-3; suf = "K"; }
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.0f", nearbyint(s));
    const char *t = tmp;
    while (*t == '0') t++;
    int fix = 2 - (int)strlen(t);
    if (fix < 0) fix = 0;
    snprintf(out, n, "%.*f%s", fix, s, suf);
}

void iqf_cv_size_label(cv *c, char *out, size_t n) {
    uint64_t total = 0, shared = 0, expert = 0, esum = 0, nexp = 0;
    for (int64_t i = 0; i < c->n_t; i++) {
        const ot *o = &c->t[i];
        uint64_t sz = 1;
        for (int d = 0; d < o->n_dims; d++) sz *= (uint64_t)o->ne[d];
        if (strstr(o->name, "_exps.") && o->n_dims >= 3) {
            uint64_t ec = (uint64_t)(strstr(o->name, ".bias") ? o->ne[1] : o->ne[2]);
            expert += sz / ec;
            esum += ec;
            nexp++;
        } else
            shared += sz;
        total += sz;
    }
    if (nexp) {
        char p[32];
        rounded_notation(shared + expert, p, sizeof p);
        snprintf(out, n, "%llux%s", (unsigned long long)(esum / nexp), p);
    } else
        rounded_notation(total, out, n);
}

/* ---- KVs -------------------------------------------------------------------------------------- */

#define W_OK(x) do { if ((x) != IQF_OK) return iqf_cv_fail(c, "%s", iqf_gguf_writer_error(w)); } while (0)

static int kv_u32(cv *c, iqf_gguf_writer *w, const char *suffix, yyjson_val *v, const char *what) {
    int64_t x;
    if (iqf_cv_hint(c, what, v, &x, 0, UINT32_MAX)) return -1;
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch->gguf, suffix);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)x));
    return 0;
}

static int kv_f32(cv *c, iqf_gguf_writer *w, const char *suffix, yyjson_val *v, const char *what) {
    double x;
    if (!iqf_json_num(v, &x)) return iqf_cv_fail(c, "%s: %s is not a number", c->cfg_path, what);
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch->gguf, suffix);
    W_OK(iqf_gguf_writer_set_f32(w, key, (float)x));
    return 0;
}

/* rope scaling, rope_theta and the sliding window's theta (the converter's rope_parameters or
 * rope_scaling, with the top-level keys mirrored). */
static int hp_rope(cv *c, iqf_gguf_writer *w) {
    static const char *const k_theta[] = { "global_rope_theta", "rope_global_theta", "rope_theta_global",
                                           "rope_theta", "rotary_emb_base", NULL };
    char key[256];
    yyjson_val *rope_full = c->rope ? iqf_json_get(c->rope, "full_attention") : NULL;
    yyjson_val *rp = rope_full ? rope_full : c->rope;
    const char *rt = rp ? iqf_json_str(iqf_json_get(rp, "rope_type"), NULL) : NULL;
    if (!rt && rp && !rope_full) rt = iqf_json_str(iqf_json_get(rp, "type"), NULL);
    if (rt) {
        yyjson_val *fac = iqf_json_get(rp, "factor");
        if (!strcmp(rt, "linear") && !iqf_json_is_null_or_absent(fac)) {
            snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_str(w, key, "linear"));
            if (kv_f32(c, w, "rope.scaling.factor", fac, "rope factor")) return -1;
        } else if (!strcmp(rt, "yarn") && !iqf_json_is_null_or_absent(fac)) {
            snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_str(w, key, "yarn"));
            if (kv_f32(c, w, "rope.scaling.factor", fac, "rope factor")) return -1;
            if (kv_u32(c, w, "rope.scaling.original_context_length", iqf_json_get(rp, "original_max_position_embeddings"),
                       "original_max_position_embeddings"))
                return -1;
            yyjson_val *x;
            if ((x = iqf_json_get(rp, "extrapolation_factor")) && !yyjson_is_null(x) &&
                kv_f32(c, w, "rope.scaling.yarn_ext_factor", x, "extrapolation_factor"))
                return -1;
            x = iqf_json_get(rp, "attention_factor");
            if (!x) x = iqf_json_get(rp, "attn_factor");
            if (x && !yyjson_is_null(x) && kv_f32(c, w, "rope.scaling.yarn_attn_factor", x, "attention_factor")) return -1;
            if ((x = iqf_json_get(rp, "beta_fast")) && !yyjson_is_null(x) &&
                kv_f32(c, w, "rope.scaling.yarn_beta_fast", x, "beta_fast"))
                return -1;
            if ((x = iqf_json_get(rp, "beta_slow")) && !yyjson_is_null(x) &&
                kv_f32(c, w, "rope.scaling.yarn_beta_slow", x, "beta_slow"))
                return -1;
        } else if (!strcmp(rt, "su") || !strcmp(rt, "longrope")) {
            return iqf_cv_fail(c, "%s: rope_type %s is not supported yet", c->cfg_path, rt);
        }
    }
    /* rope_theta: rope_parameters' own, else mirrored from the top level */
    yyjson_val *theta = rp ? iqf_json_get(rp, "rope_theta") : NULL;
    if (!theta && !rope_full) {
        theta = iqf_cv_hfind(c, k_theta, NULL);
        if (theta && yyjson_is_null(theta)) theta = NULL;
    }
    if (c->arch->flags & CV_F_GEMMA3) { /* Gemma3Model.set_gguf_parameters: a default when absent */
        if (theta) {
            if (kv_f32(c, w, "rope.freq_base", theta, "rope_theta")) return -1;
        } else {
            snprintf(key, sizeof key, "%s.rope.freq_base", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_f32(w, key, 1000000.0f));
        }
    } else if (theta && kv_f32(c, w, "rope.freq_base", theta, "rope_theta"))
        return -1;
    {
        static const char *const k_local[] = { "local_rope_theta", "rope_local_theta", "rope_theta_local",
                                               "swa_rope_theta", "rope_local_base_freq", NULL };
        yyjson_val *sw = c->rope ? iqf_json_get(iqf_json_get(c->rope, "sliding_attention"), "rope_theta") : NULL;
        if (!sw && !rope_full && !(c->rope && iqf_json_get(c->rope, "sliding_attention"))) {
            sw = iqf_cv_hfind(c, k_local, NULL);
            if (sw && yyjson_is_null(sw)) sw = NULL;
        }
        if (sw && kv_f32(c, w, "rope.freq_base_swa", sw, "sliding rope_theta")) return -1;
    }
    return 0;
}

/* DeepseekV2Model.set_gguf_parameters: MLA, the experts and the yarn multiplier. */
static int hp_deepseek2(cv *c, iqf_gguf_writer *w, int64_t kv_lora, int64_t rope_hd, bool head_dim_written,
                        bool expert_count_written) {
    yyjson_val *v;
    char key[256];
    yyjson_val *nre = iqf_cv_hget(c, "n_routed_experts");
    bool has_moe = nre && !yyjson_is_null(nre);
    v = iqf_cv_hget(c, "first_k_dense_replace");
    if (v && !yyjson_is_null(v)) {
        if (kv_u32(c, w, "leading_dense_block_count", v, "first_k_dense_replace")) return -1;
    } else {
        snprintf(key, sizeof key, "%s.leading_dense_block_count", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, has_moe ? 0 : (uint32_t)c->block_count));
    }
    if (kv_u32(c, w, "vocab_size", iqf_cv_hget(c, "vocab_size"), "vocab_size")) return -1;
    v = iqf_cv_hget(c, "q_lora_rank");
    if (v && !yyjson_is_null(v) && kv_u32(c, w, "attention.q_lora_rank", v, "q_lora_rank")) return -1;
    snprintf(key, sizeof key, "%s.attention.kv_lora_rank", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)kv_lora));
    if (!head_dim_written) {
        snprintf(key, sizeof key, "%s.attention.key_length", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(kv_lora + rope_hd)));
        snprintf(key, sizeof key, "%s.attention.value_length", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)kv_lora));
    }
    int64_t nope, vd;
    if (iqf_cv_hint(c, "qk_nope_head_dim", iqf_cv_hget(c, "qk_nope_head_dim"), &nope, 0, UINT32_MAX) ||
        iqf_cv_hint(c, "v_head_dim", iqf_cv_hget(c, "v_head_dim"), &vd, 0, UINT32_MAX))
        return -1;
    snprintf(key, sizeof key, "%s.attention.key_length_mla", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(nope + rope_hd)));
    snprintf(key, sizeof key, "%s.attention.value_length_mla", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)vd));
    static const char *const k_moe[] = { "moe_intermediate_size", "intermediate_size", NULL };
    if (kv_u32(c, w, "expert_feed_forward_length", iqf_cv_hfind(c, k_moe, NULL), "moe_intermediate_size")) return -1;
    if (has_moe && !expert_count_written && kv_u32(c, w, "expert_count", nre, "n_routed_experts")) return -1;
    v = iqf_cv_hget(c, "n_shared_experts");
    if (v && !yyjson_is_null(v)) {
        if (kv_u32(c, w, "expert_shared_count", v, "n_shared_experts")) return -1;
    } else {
        snprintf(key, sizeof key, "%s.expert_shared_count", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, 0));
    }
    v = iqf_cv_hget(c, "routed_scaling_factor");
    if (v && !yyjson_is_null(v) && kv_f32(c, w, "expert_weights_scale", v, "routed_scaling_factor")) return -1;
    v = iqf_cv_hget(c, "norm_topk_prob");
    if (yyjson_is_true(v)) {
        snprintf(key, sizeof key, "%s.expert_weights_norm", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_bool(w, key, true));
    }
    snprintf(key, sizeof key, "%s.rope.dimension_count", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)rope_hd));
    double ms;
    if (c->rope && iqf_json_num(iqf_json_get(c->rope, "mscale_all_dim"), &ms)) {
        snprintf(key, sizeof key, "%s.rope.scaling.yarn_log_multiplier", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_f32(w, key, (float)(0.1 * ms)));
    }
    return 0;
}

/* The model classes' own keys. */
static int hp_classes(cv *c, iqf_gguf_writer *w) {
    yyjson_val *v;
    char key[256];
    if (c->arch->flags & CV_F_VOCAB_SIZE) {
        if (kv_u32(c, w, "vocab_size", iqf_cv_hget(c, "vocab_size"), "vocab_size")) return -1;
    }
    if (c->arch->flags & CV_F_ROPE_DIM) {
        v = iqf_cv_hget(c, "head_dim");
        if (v && !yyjson_is_null(v)) {
            if (kv_u32(c, w, "rope.dimension_count", v, "head_dim")) return -1;
        } else {
            int64_t hs, nh;
            if (iqf_cv_hint(c, "hidden_size", iqf_cv_hget(c, "hidden_size"), &hs, 1, UINT32_MAX)) return -1;
            if (iqf_cv_hint(c, "num_attention_heads", iqf_cv_hget(c, "num_attention_heads"), &nh, 1, UINT32_MAX)) return -1;
            snprintf(key, sizeof key, "%s.rope.dimension_count", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(hs / nh)));
        }
    }
    if (c->arch->flags & CV_F_GEMMA3) {
        if (!iqf_json_is_null_or_absent(iqf_cv_hget(c, "attn_logit_softcapping")))
            return iqf_cv_fail(c, "%s: attn_logit_softcapping is set (not a Gemma 3)", c->cfg_path);
        v = iqf_cv_hget(c, "final_logit_softcapping");
        double fs = 0;
        if (v && iqf_json_num(v, &fs) && fs != 0 && kv_f32(c, w, "final_logit_softcapping", v, "final_logit_softcapping"))
            return -1;
        int64_t pat = 0;
        if (!iqf_json_int(iqf_cv_hget(c, "sliding_window_pattern"), &pat) || pat != 1)
            if (kv_u32(c, w, "attention.sliding_window", iqf_cv_hget(c, "sliding_window"), "sliding_window")) return -1;
    }
    if (c->arch->flags & CV_F_GPTOSS) {
        if (kv_u32(c, w, "attention.sliding_window", iqf_cv_hget(c, "sliding_window"), "sliding_window")) return -1;
        if (kv_u32(c, w, "expert_feed_forward_length", iqf_cv_hget(c, "intermediate_size"), "intermediate_size")) return -1;
    }
    if (c->arch->flags & CV_F_EXPERT_FF) {
        v = iqf_cv_hget(c, "moe_intermediate_size");
        if (v && !yyjson_is_null(v) && kv_u32(c, w, "expert_feed_forward_length", v, "moe_intermediate_size")) return -1;
        v = iqf_cv_hget(c, "shared_expert_intermediate_size");
        if (v && !yyjson_is_null(v) && kv_u32(c, w, "expert_shared_feed_forward_length", v, "shared_expert_intermediate_size"))
            return -1;
    }
    return 0;
}

int iqf_cv_hparams(cv *c, iqf_gguf_writer *w) {
    static const char *const k_ctx[] = { "max_position_embeddings", "n_ctx", "n_positions", "max_length",
                                         "max_sequence_length", "model_max_length", NULL };
    static const char *const k_embd[] = { "hidden_size", "n_embd", "dim", NULL };
    static const char *const k_ff[] = { "prefix_dense_intermediate_size", "dense_intermediate_size",
                                        "intermediate_size", "n_inner", "hidden_dim", NULL };
    static const char *const k_head[] = { "num_attention_heads", "n_head", "n_heads", NULL };
    static const char *const k_kv[] = { "num_key_value_heads", "n_kv_heads", NULL };
    static const char *const k_rms[] = { "rms_norm_eps", "norm_eps", NULL };
    static const char *const k_ln[] = { "layer_norm_eps", "layer_norm_epsilon", "norm_epsilon", NULL };
    static const char *const k_ne[] = { "num_local_experts", "num_experts", "n_routed_experts", NULL };
    static const char *const k_nu[] = { "num_experts_per_tok", "num_experts_per_token", "top_k_experts", NULL };
    yyjson_val *v;
    char key[256];
    snprintf(key, sizeof key, "%s.block_count", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)c->block_count));
    if ((v = iqf_cv_hfind(c, k_ctx, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "context_length", v, "max_position_embeddings"))
        return -1;
    if ((v = iqf_cv_hfind(c, k_embd, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "embedding_length", v, "hidden_size"))
        return -1;
    if ((v = iqf_cv_hfind(c, k_ff, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "feed_forward_length", v, "intermediate_size"))
        return -1;
    if ((v = iqf_cv_hfind(c, k_head, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "attention.head_count", v, "num_attention_heads"))
        return -1;
    if (c->arch->flags & CV_F_DEEPSEEK2) { /* MLA is written as MQA: one KV head */
        snprintf(key, sizeof key, "%s.attention.head_count_kv", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, 1));
    } else if ((v = iqf_cv_hfind(c, k_kv, NULL)) && !yyjson_is_null(v) &&
               kv_u32(c, w, "attention.head_count_kv", v, "num_key_value_heads"))
        return -1;
    if (yyjson_is_false(iqf_cv_hget(c, "is_causal"))) {
        snprintf(key, sizeof key, "%s.attention.causal", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_bool(w, key, false));
    }
    if (hp_rope(c, w)) return -1;
    if ((v = iqf_cv_hfind(c, k_rms, NULL)) && !yyjson_is_null(v) && kv_f32(c, w, "attention.layer_norm_rms_epsilon", v, "rms_norm_eps"))
        return -1;
    if (!v && (c->arch->flags & CV_F_DEEPSEEK2)) {
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_f32(w, key, 1e-6f));
    }
    if ((v = iqf_cv_hfind(c, k_ln, NULL)) && !yyjson_is_null(v) && kv_f32(c, w, "attention.layer_norm_epsilon", v, "layer_norm_eps"))
        return -1;
    if ((v = iqf_cv_hfind(c, k_ne, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "expert_count", v, "num_local_experts")) return -1;
    if ((v = iqf_cv_hfind(c, k_nu, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "expert_used_count", v, "num_experts_per_tok"))
        return -1;
    if ((v = iqf_cv_hget(c, "n_group")) && !yyjson_is_null(v) && kv_u32(c, w, "expert_group_count", v, "n_group")) return -1;
    if ((v = iqf_cv_hget(c, "topk_group")) && !yyjson_is_null(v) && kv_u32(c, w, "expert_group_used_count", v, "topk_group"))
        return -1;
    int64_t kv_lora = 512, rope_hd = 0;
    bool head_dim_written = false;
    if (c->arch->flags & CV_F_DEEPSEEK2) {
        yyjson_val *x = iqf_cv_hget(c, "kv_lora_rank");
        if (x && !yyjson_is_null(x) && iqf_cv_hint(c, "kv_lora_rank", x, &kv_lora, 1, UINT32_MAX)) return -1;
        if (iqf_cv_hint(c, "qk_rope_head_dim", iqf_cv_hget(c, "qk_rope_head_dim"), &rope_hd, 0, UINT32_MAX)) return -1;
    }
    if ((v = iqf_cv_hget(c, "head_dim")) && !yyjson_is_null(v)) {
        if (c->arch->flags & CV_F_DEEPSEEK2) { /* the class sets them again: same place, its values */
            snprintf(key, sizeof key, "%s.attention.key_length", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(kv_lora + rope_hd)));
            snprintf(key, sizeof key, "%s.attention.value_length", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)kv_lora));
        } else {
            if (kv_u32(c, w, "attention.key_length", v, "head_dim")) return -1;
            if (kv_u32(c, w, "attention.value_length", v, "head_dim")) return -1;
        }
        head_dim_written = true;
    }
    bool expert_count_written = (v = iqf_cv_hfind(c, k_ne, NULL)) && !yyjson_is_null(v);
    W_OK(iqf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)c->ftype));
    if ((c->arch->flags & CV_F_DEEPSEEK2) && hp_deepseek2(c, w, kv_lora, rope_hd, head_dim_written, expert_count_written))
        return -1;
    return hp_classes(c, w);
}
