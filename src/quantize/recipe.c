/*
 * recipe.c - llama-quantize's per-tensor type choice, reimplemented from the behaviour of
 * llama 0.25.1 (src/llama-quant.cpp: tensor_get_category, tensor_allows_quantization,
 * llama_tensor_get_type[_impl], tensor_type_fallback, tensor_requires_imatrix,
 * llama_ftype_get_default_type) and tools/quantize/quantize.cpp (type names).
 */
#include "recipe.h"
#include "../util/error.h"
#include "../util/traits.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* File types (iqf_ftype_from_name, iqf_ftype_name, iqf_ftype_default_type): the names sit in the
 * traits table, each in the row of its default type (util/traits.c). */

/* ------------------------------------------------------------------------------------------
 * Names, order, categories
 * ---------------------------------------------------------------------------------------- */
int iqf_recipe_name_cmp(const char *a, const char *b) {
    int la = -1, lb = -1;
    if (sscanf(a, "blk.%d.", &la) != 1) la = -1;
    if (sscanf(b, "blk.%d.", &lb) != 1) lb = -1;
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

int iqf_recipe_n_dims(const int64_t ne[4]) {
    for (int i = 3; i >= 1; i--)
        if (ne[i] > 1) return i + 1;
    return 1;
}

typedef enum category {
    CAT_TOKEN_EMBD,
    CAT_ATTN_Q,
    CAT_ATTN_V,
    CAT_ATTN_K,
    CAT_ATTN_QKV,
    CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT,
    CAT_FFN_UP,
    CAT_FFN_GATE,
    CAT_FFN_DOWN,
    CAT_OUTPUT,
    CAT_OTHER,
} category;

static bool is_token_embd(const char *n) {
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight");
}
static bool is_output(const char *n) { return !strcmp(n, "output.weight"); }
static bool has(const char *n, const char *s) { return strstr(n, s) != NULL; }

static category get_category(const char *n) {
    if (is_output(n)) return CAT_OUTPUT;
    if (is_token_embd(n)) return CAT_TOKEN_EMBD;
    if (has(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (has(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (has(n, "attn_v.weight")) return CAT_ATTN_V;
    if (has(n, "attn_k.weight")) return CAT_ATTN_K;
    if (has(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (has(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (has(n, "ffn_up")) return CAT_FFN_UP;
    if (has(n, "ffn_gate")) return CAT_FFN_GATE;
    if (has(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool cat_is_attn_v(category c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

static bool allows_quantization(const iqf_recipe_opts *o, const iqf_recipe_tensor *t) {
    if (iqf_recipe_n_dims(t->ne) < 2) return false;
    const char *n = t->name;
    size_t len = strlen(n);
    if (len < 6 || strcmp(n + len - 6, "weight") != 0) return false;
    if (has(n, "_norm.weight")) return false;
    if (!o->quantize_output_tensor && !strcmp(n, "output.weight")) return false;
    static const char *const never[] = {
        "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
        "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight",
        "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos",
        ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
        if (has(n, never[i])) return false;
    if (!strcmp(n, "position_embd.weight") || !strcmp(n, "token_types.weight")) return false;
    return true;
}

/* ------------------------------------------------------------------------------------------
 * The mixture
 * ---------------------------------------------------------------------------------------- */
typedef struct state {
    const iqf_recipe_model *m;
    const iqf_recipe_opts *o;
    int n_attention_wv, n_ffn_down, n_ffn_gate, n_ffn_up;
    int i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;
    bool tied;
    bool is_70b, falcon;
    int n_gqa;
    char *err;
    size_t errlen;
} state;

static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static int64_t blck(int type) {
    const iqf_type_info *ti = iqf_type_get(type);
    return ti ? ti->blck_size : 1;
}

static bool is_quantized(int type) {
    const iqf_type_info *ti = iqf_type_get(type);
    return ti && ti->is_quantized;
}

/* layer_info: for MoE models the layer comes from the name. Returns false on a bad name. */
static bool layer_info(state *s, int *i_layer, int n_layer, const char *name) {
    int n_expert = s->m->n_expert > 1 ? s->m->n_expert : 1;
    if (n_expert > 1) {
        if (sscanf(name, "blk.%d.", i_layer) != 1) {
            snprintf(s->err, s->errlen, "failed to determine layer for tensor %s", name);
            return false;
        }
        if (*i_layer < 0 || *i_layer >= n_layer) {
            snprintf(s->err, s->errlen, "bad layer %d for tensor %s: must be in [0, %d)", *i_layer, name,
                     n_layer);
            return false;
        }
    }
    return true;
}

#define FT(x) (ftype == IQF_FTYPE_MOSTLY_##x)

static bool get_type_impl(state *s, int *io_type, const iqf_recipe_tensor *t, category cat) {
    const int ftype = s->o->ftype;
    const int n_expert = s->m->n_expert;
    int new_type = *io_type;
    const char *name = t->name;

    if (cat == CAT_OUTPUT || (s->tied && cat == CAT_TOKEN_EMBD)) {
        if (s->o->output_tensor_type >= 0) {
            new_type = s->o->output_tensor_type;
        } else {
            const int64_t nx = t->ne[0];
            if (FT(MXFP4_MOE)) new_type = IQF_TYPE_Q8_0;
            else if (s->falcon || nx % blck(new_type) != 0) new_type = IQF_TYPE_Q8_0;
            else if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ3_XXS) || FT(IQ1_S) || FT(IQ2_S) || FT(IQ2_M) ||
                     FT(IQ1_M))
                new_type = IQF_TYPE_Q5_K;
            else if (new_type != IQF_TYPE_Q8_0)
                new_type = IQF_TYPE_Q6_K;
        }
    } else if (FT(MXFP4_MOE)) {
        /* 3-D (expert) tensors -> mxfp4, the others q8_0; bailingmoe3's MLA projections are 3-D
         * too, so there only the FFN roles count as experts */
        const bool bailing = !strcmp(s->m->arch, "bailingmoe3");
        const bool ffn = cat == CAT_FFN_UP || cat == CAT_FFN_GATE || cat == CAT_FFN_DOWN;
        new_type = t->ne[2] > 1 && (!bailing || ffn) ? IQF_TYPE_MXFP4 : IQF_TYPE_Q8_0;
    } else if (cat == CAT_TOKEN_EMBD) {
        if (s->o->token_embedding_type >= 0) {
            new_type = s->o->token_embedding_type;
        } else {
            if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ1_M)) new_type = IQF_TYPE_Q2_K;
            else if (FT(IQ2_S) || FT(IQ2_M)) new_type = IQF_TYPE_IQ3_S;
            else if (FT(IQ3_XXS)) new_type = IQF_TYPE_IQ3_S;
            else if (FT(TQ1_0) || FT(TQ2_0) || FT(Q2_0)) new_type = IQF_TYPE_Q4_K;
        }
    } else if (FT(IQ2_XXS) || FT(IQ2_XS) || FT(IQ1_S) || FT(IQ2_S) || FT(IQ2_M) || FT(IQ1_M)) {
        if (cat_is_attn_v(cat)) {
            if (s->n_gqa >= 4 || n_expert >= 4) new_type = IQF_TYPE_Q4_K;
            else new_type = FT(IQ2_S) || FT(IQ2_M) ? IQF_TYPE_IQ3_S : IQF_TYPE_Q2_K;
            ++s->i_attention_wv;
        } else if (n_expert == 8 && cat == CAT_ATTN_K) {
            new_type = IQF_TYPE_Q4_K;
        } else if (cat == CAT_FFN_DOWN) {
            if (s->i_ffn_down < s->n_ffn_down / 8)
                new_type = FT(IQ2_S) || FT(IQ2_M) ? IQF_TYPE_IQ3_S : IQF_TYPE_Q2_K;
            ++s->i_ffn_down;
        } else if (cat == CAT_ATTN_OUTPUT) {
            if (n_expert == 8) {
                new_type = IQF_TYPE_Q5_K;
            } else {
                if (FT(IQ1_S) || FT(IQ1_M)) new_type = IQF_TYPE_IQ2_XXS;
                else if (FT(IQ2_S) || FT(IQ2_M)) new_type = IQF_TYPE_IQ3_S;
            }
        }
    } else if (cat_is_attn_v(cat)) {
        if (FT(Q2_K)) new_type = s->n_gqa >= 4 ? IQF_TYPE_Q4_K : IQF_TYPE_Q3_K;
        else if (FT(Q2_K_S) && s->n_gqa >= 4) new_type = IQF_TYPE_Q4_K;
        else if (FT(IQ3_XXS))
            new_type = s->n_gqa >= 4 ? IQF_TYPE_Q4_K : !s->o->has_imatrix ? IQF_TYPE_IQ3_S : IQF_TYPE_IQ3_XXS;
        else if ((FT(IQ3_XS) || FT(IQ3_S)) && s->n_gqa >= 4) new_type = IQF_TYPE_Q4_K;
        else if (FT(IQ3_M)) new_type = IQF_TYPE_Q4_K;
        else if (FT(Q3_K_M)) new_type = s->i_attention_wv < 2 ? IQF_TYPE_Q5_K : IQF_TYPE_Q4_K;
        else if (FT(Q3_K_L)) new_type = IQF_TYPE_Q5_K;
        else if ((FT(IQ4_NL) || FT(IQ4_XS)) && s->n_gqa >= 4) new_type = IQF_TYPE_Q5_K;
        else if ((FT(Q4_K_M) || FT(Q5_K_M)) && use_more_bits(s->i_attention_wv, s->n_attention_wv))
            new_type = IQF_TYPE_Q6_K;
        else if (FT(Q4_K_S) && s->i_attention_wv < 4) new_type = IQF_TYPE_Q5_K;
        if (s->is_70b && (new_type == IQF_TYPE_Q3_K || new_type == IQF_TYPE_Q4_K)) new_type = IQF_TYPE_Q5_K;
        if (n_expert == 8) new_type = IQF_TYPE_Q8_0;
        ++s->i_attention_wv;
    } else if (cat == CAT_ATTN_K) {
        if (n_expert == 8) new_type = IQF_TYPE_Q8_0;
        else if (FT(IQ3_XS)) new_type = IQF_TYPE_IQ3_XXS;
        else if (FT(IQ3_XXS)) new_type = IQF_TYPE_IQ2_S;
    } else if (cat == CAT_ATTN_Q) {
        if (FT(IQ3_XS)) new_type = IQF_TYPE_IQ3_XXS;
        else if (FT(IQ3_XXS)) new_type = IQF_TYPE_IQ2_S;
    } else if (cat == CAT_FFN_DOWN) {
        int i_layer = s->i_ffn_down, n_layer = s->n_ffn_down;
        if (!layer_info(s, &i_layer, n_layer, name)) return false;
        if (FT(Q2_K)) new_type = IQF_TYPE_Q3_K;
        else if (FT(Q2_K_S)) {
            if (i_layer < n_layer / 8) new_type = IQF_TYPE_Q4_K;
        } else if (FT(IQ3_XXS) && !s->o->has_imatrix) {
            new_type = i_layer < n_layer / 8 ? IQF_TYPE_Q4_K : IQF_TYPE_Q3_K;
        } else if (FT(Q3_K_M)) {
            new_type = i_layer < n_layer / 16                            ? IQF_TYPE_Q5_K
                       : !s->falcon || use_more_bits(i_layer, n_layer) ? IQF_TYPE_Q4_K
                                                                       : IQF_TYPE_Q3_K;
        } else if (FT(IQ3_M) && (i_layer < n_layer / 8 || (n_expert == 8 && use_more_bits(i_layer, n_layer)))) {
            new_type = IQF_TYPE_Q4_K;
        } else if (FT(Q3_K_L)) {
            new_type = s->falcon ? IQF_TYPE_Q4_K : IQF_TYPE_Q5_K;
        } else if (FT(Q4_K_M)) {
            if (s->falcon)
                new_type = i_layer < n_layer / 16          ? IQF_TYPE_Q6_K
                           : use_more_bits(i_layer, n_layer) ? IQF_TYPE_Q5_K
                                                             : IQF_TYPE_Q4_K;
            else if (use_more_bits(i_layer, n_layer))
                new_type = IQF_TYPE_Q6_K;
        } else if (i_layer < n_layer / 8 && (FT(IQ4_NL) || FT(IQ4_XS)) && !s->o->has_imatrix) {
            new_type = IQF_TYPE_Q5_K;
        } else if (FT(Q5_K_M) && use_more_bits(i_layer, n_layer)) {
            new_type = IQF_TYPE_Q6_K;
        } else if (FT(Q4_K_S) && !s->falcon && i_layer < n_layer / 8) {
            new_type = IQF_TYPE_Q5_K;
        } else if ((FT(Q4_0) || FT(Q5_0)) && s->o->has_imatrix && i_layer < n_layer / 8) {
            new_type = FT(Q4_0) ? IQF_TYPE_Q4_1 : IQF_TYPE_Q5_1;
        }
        ++s->i_ffn_down;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!s->falcon) {
            if (n_expert == 8) {
                if (FT(Q2_K) || FT(IQ3_XS) || FT(IQ3_XXS) || FT(Q3_K_S) || FT(Q3_K_M) || FT(IQ4_NL) ||
                    FT(Q4_K_S) || FT(Q4_K_M) || FT(IQ3_S) || FT(IQ3_M) || FT(IQ4_XS))
                    new_type = IQF_TYPE_Q5_K;
            } else {
                if (FT(Q2_K)) new_type = IQF_TYPE_Q3_K;
                else if (FT(IQ3_XXS)) new_type = IQF_TYPE_IQ3_S;
                else if (FT(Q3_K_M)) new_type = IQF_TYPE_Q4_K;
                else if (FT(Q3_K_L)) new_type = IQF_TYPE_Q5_K;
                else if (FT(IQ3_M)) new_type = IQF_TYPE_Q4_K;
            }
        } else {
            if (FT(Q3_K_L)) new_type = IQF_TYPE_Q4_K;
        }
    } else if (cat == CAT_ATTN_QKV) {
        if (FT(Q3_K_M) || FT(Q3_K_L) || FT(IQ3_M)) new_type = IQF_TYPE_Q4_K;
        else if (FT(Q4_K_M)) new_type = IQF_TYPE_Q5_K;
        else if (FT(Q5_K_M)) new_type = IQF_TYPE_Q6_K;
    } else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
        int *ctr = cat == CAT_FFN_GATE ? &s->i_ffn_gate : &s->i_ffn_up;
        int i_layer = *ctr, n_layer = cat == CAT_FFN_GATE ? s->n_ffn_gate : s->n_ffn_up;
        if (!layer_info(s, &i_layer, n_layer, name)) return false;
        if (FT(IQ3_XS) && (i_layer >= n_layer / 8 && i_layer < 7 * n_layer / 8)) new_type = IQF_TYPE_IQ3_XXS;
        ++*ctr;
    }
    *io_type = new_type;
    return true;
}

static bool fallback(state *s, const iqf_recipe_tensor *t, int *io_type, bool *fell) {
    int target = *io_type, ret = target;
    const int64_t ncols = t->ne[0];
    const int64_t qk = blck(target);
    *fell = false;
    if (ncols % qk == 0) return true;
    *fell = true;
    ++s->n_fallback;
    const iqf_type_traits *tr = iqf_traits(target);
    ret = tr ? tr->fallback : IQF_NO_FALLBACK;
    if (ret == IQF_NO_FALLBACK) {
        const char *tn = iqf_type_get(target) ? iqf_type_get(target)->name : "?";
        snprintf(s->err, s->errlen,
                 "tensor %s: row length %" PRId64 " is not a multiple of %s's block of %" PRId64
                 " weights, and %s has no fallback type (llama-quantize has none either)",
                 t->name, ncols, tn, qk, tn);
        return false;
    }
    if (ncols % blck(ret) != 0) ret = IQF_TYPE_F16;
    *io_type = ret;
    return true;
}

static bool requires_imatrix(const char *name, int type, int ftype) {
    if (is_token_embd(name) || is_output(name)) return false;
    if (type == IQF_TYPE_Q2_K && ftype == IQF_FTYPE_MOSTLY_Q2_K_S) return true;
    const iqf_type_traits *tr = iqf_traits(type);
    return tr && tr->llama_imatrix;
}

static bool override_match(const iqf_recipe_opts *o, const char *name, int *type) {
    for (int i = 0; i < o->n_overrides; i++)
        if (regexec(&o->overrides[i].re, name, 0, NULL, 0) == 0) {
            *type = o->overrides[i].type;
            return true;
        }
    return false;
}

static bool get_type(state *s, const iqf_recipe_tensor *t, category cat, int default_type, int *out,
                     bool *fell) {
    const iqf_recipe_opts *o = s->o;
    *fell = false;
    if (!allows_quantization(o, t)) {
        *out = t->type;
        return true;
    }
    if (o->token_embedding_type >= 0 && cat == CAT_TOKEN_EMBD) {
        int dummy;
        bool named = !strcmp(t->name, "per_layer_token_embd.weight") && override_match(o, t->name, &dummy);
        if (!named) {
            *out = o->token_embedding_type;
            return true;
        }
    }
    if (o->output_tensor_type >= 0 && cat == CAT_OUTPUT) {
        *out = o->output_tensor_type;
        return true;
    }
    int new_type = default_type;
    if (is_quantized(default_type)) {
        bool manual = override_match(o, t->name, &new_type);
        if (!manual && !o->pure && !get_type_impl(s, &new_type, t, cat)) return false;
        if (!fallback(s, t, &new_type, fell)) return false;
    }
    *out = new_type;
    return true;
}

/* llama's LLM_TYPE_70B (src/models/{llama,deci,olmo,qwen2,jais2}.cpp: load_arch_hparams), on
 * n_layer() = block_count - nextn_predict_layers; llama's own table is skipped with 8 experts. */
static bool model_is_70b(const iqf_recipe_model *m) {
    const char *a = m->arch;
    const int nl = m->n_layer - m->n_layer_nextn;
    if (!strcmp(a, "llama")) return m->n_expert != 8 && nl == 80 && m->n_head != m->n_head_kv;
    if (!strcmp(a, "deci") || !strcmp(a, "olmo") || !strcmp(a, "qwen2")) return nl == 80;
    if (!strcmp(a, "jais2")) return nl == 68;
    return false;
}

iqf_status iqf_recipe_plan(const iqf_recipe_model *model, const iqf_recipe_opts *opts,
                           const iqf_recipe_tensor *tensors, int n, iqf_recipe_choice *out,
                           int *n_fallback, char *err, size_t errlen) {
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    const int default_type = iqf_ftype_default_type(opts->ftype);
    if (default_type < 0) {
        snprintf(err, errlen, "invalid output file type %d", opts->ftype);
        return IQF_E_INVALID_ARG;
    }
    state s;
    memset(&s, 0, sizeof s);
    s.m = model;
    s.o = opts;
    s.err = err;
    s.errlen = errlen;
    s.tied = true;
    s.falcon = !strcmp(model->arch, "falcon");
    s.is_70b = model_is_70b(model);
    s.n_gqa = model->n_head_kv > 0 ? model->n_head / model->n_head_kv : 0;
    for (int i = 0; i < n; i++) {
        category c = get_category(tensors[i].name);
        if (cat_is_attn_v(c)) ++s.n_attention_wv;
        if (c == CAT_OUTPUT) s.tied = false;
    }
    s.n_ffn_down = s.n_ffn_gate = s.n_ffn_up = model->n_layer;
    for (int i = 0; i < n; i++) {
        const iqf_recipe_tensor *t = &tensors[i];
        category c = get_category(t->name);
        iqf_recipe_choice *ch = &out[i];
        memset(ch, 0, sizeof *ch);
        ch->allows_quantization = allows_quantization(opts, t);
        if (ch->allows_quantization) {
            if (!get_type(&s, t, c, default_type, &ch->type, &ch->fallback)) return IQF_E_UNSUPPORTED;
        } else {
            ch->type = t->type;
        }
        ch->requires_imatrix = requires_imatrix(t->name, ch->type, opts->ftype);
    }
    if (n_fallback) *n_fallback = s.n_fallback;
    return IQF_OK;
}

iqf_status iqf_recipe_overrides_compile(const char *const *patterns, const int *types, int n,
                                        iqf_recipe_override *ov, int *n_ov, char *err, size_t errlen) {
    *n_ov = 0;
    for (int i = 0; i < n; i++) {
        char pat[1024], msg[256];
        const char *src = patterns[i];
        size_t k = 0;
        for (size_t j = 0; src[j] && k + 8 < sizeof pat; j++) {
            if (src[j] == '\\' && (src[j + 1] == 'd' || src[j + 1] == 'D')) {
                k += (size_t)snprintf(pat + k, sizeof pat - k, "%s", src[j + 1] == 'd' ? "[0-9]" : "[^0-9]");
                j++;
            } else {
                pat[k++] = src[j];
                if (src[j] == '\\' && src[j + 1]) pat[k++] = src[++j];
            }
        }
        pat[k] = 0;
        int rcode = regcomp(&ov[i].re, pat, REG_EXTENDED | REG_NOSUB);
        if (rcode) {
            regerror(rcode, &ov[i].re, msg, sizeof msg);
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--tensor-type pattern '%s': %s", src, msg);
        }
        ov[i].type = types[i];
        (*n_ov)++;
    }
    return IQF_OK;
}

void iqf_recipe_overrides_free(iqf_recipe_override *ov, int n_ov) {
    for (int i = 0; ov && i < n_ov; i++) regfree(&ov[i].re);
}

bool iqf_recipe_requires_imatrix(const char *name, int type, int ftype) { return requires_imatrix(name, type, ftype); }
