/*
 * convert_plan.c - the output tensors of a conversion (iqf_cv_plan): each safetensors tensor's
 * GGUF name (archs.c rows), the stacking of per-expert tensors, the llama q/k permutation, MLA's
 * kv_b split, gpt-oss's fused experts, rope_freqs; shapes and types; and iqf_cv_get_row, which
 * produces one row of an output tensor from the mapped input by that plan.
 */
#include "convert_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Match `s` against pattern with {bid}/{xid} (decimal numbers); returns chars consumed or -1
 * (full = pattern must consume s entirely). */
static int pmatch(const char *pat, const char *s, int64_t *bid, int64_t *xid, bool full) {
    const char *p = pat, *q = s;
    while (*p) {
        if (*p == '{') {
            int64_t *dst = !strncmp(p, "{bid}", 5) ? bid : !strncmp(p, "{xid}", 5) ? xid : NULL;
            if (!dst) return -1;
            if (!isdigit((unsigned char)*q)) return -1;
            int64_t v = 0;
            int nd = 0;
            while (isdigit((unsigned char)*q)) {
                if (++nd > 9) return -1;
                v = v * 10 + (*q++ - '0');
            }
            *dst = v;
            p += 5;
        } else {
            if (*p != *q) return -1;
            p++;
            q++;
        }
    }
    if (full && *q) return -1;
    return (int)(q - s);
}

static void pfill(char *out, size_t n, const char *pat, int64_t bid) {
    size_t o = 0;
    for (const char *p = pat; *p && o + 1 < n;) {
        if (!strncmp(p, "{bid}", 5)) {
            o += (size_t)snprintf(out + o, n - o, "%lld", (long long)bid);
            if (o >= n) o = n - 1;
            p += 5;
        } else
            out[o++] = *p++;
    }
    out[o < n ? o : n - 1] = 0;
}

/* The GGUF name of a (possibly merged) HF tensor name, or -1. */
static int map_name(cv *c, const char *hf, char *out, size_t n) {
    const char *suffix = NULL;
    size_t base = strlen(hf);
    if (iqf_cv_ends_with(hf, ".weight")) {
        suffix = ".weight";
        base -= 7;
    } else if (iqf_cv_ends_with(hf, ".bias")) {
        suffix = ".bias";
        base -= 5;
    } else
        suffix = "";
    char stem[512];
    if (base >= sizeof stem) return -1;
    memcpy(stem, hf, base);
    stem[base] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < iqf_cv_n_names; i++) {
            const cv_name_row *r = &iqf_cv_names[i];
            if (pass == 0 ? (!r->arch || strcmp(r->arch, c->arch->gguf)) : r->arch != NULL) continue;
            int64_t bid = -1, xid = -1;
            if (pmatch(r->hf, stem, &bid, &xid, true) < 0) continue;
            char g[256];
            pfill(g, sizeof g, r->gguf, bid);
            if (strlen(g) + strlen(suffix) + 1 > n) return -1;
            memcpy(out, g, strlen(g));
            memcpy(out + strlen(g), suffix, strlen(suffix) + 1);
            return 0;
        }
    return -1;
}

/* ---- planning -------------------------------------------------------------------------------- */

static ot *add_ot(cv *c) {
    if (c->n_t == c->cap_t) {
        int64_t nc = c->cap_t ? c->cap_t * 2 : 64;
        ot *nt = realloc(c->t, (size_t)nc * sizeof *nt);
        if (!nt) return NULL;
        c->t = nt;
        c->cap_t = nc;
    }
    ot *o = &c->t[c->n_t++];
    memset(o, 0, sizeof *o);
    return o;
}

/* The converter's type choice (prepare_tensors) for a tensor of n_dims dims. */
static int choose_type(cv *c, const char *name, int n_dims, int64_t ne0) {
    if (n_dims <= 1 || iqf_cv_ends_with(name, "_norm.weight")) return IQF_TYPE_F32;
    for (int i = 0; iqf_cv_f32_suffixes[i]; i++)
        if (iqf_cv_ends_with(name, iqf_cv_f32_suffixes[i])) return IQF_TYPE_F32;
    if (!iqf_cv_ends_with(name, ".weight")) return IQF_TYPE_F32;
    switch (c->ftype) {
    case IQF_FTYPE_ALL_F32: return IQF_TYPE_F32;
    case IQF_FTYPE_MOSTLY_F16: return IQF_TYPE_F16;
    case IQF_FTYPE_MOSTLY_BF16: return IQF_TYPE_BF16;
    default: return ne0 % 32 == 0 ? IQF_TYPE_Q8_0 : IQF_TYPE_F16; /* QuantError -> F16 */
    }
}

static int set_shape(cv *c, ot *o, const int64_t *hf_shape, int nd) {
    if (nd > 4) return iqf_cv_fail(c, "%s: tensor %s has %d dimensions (GGUF allows 4)", c->dir, o->name, nd);
    o->n_dims = nd;
    for (int i = 0; i < 4; i++) o->ne[i] = 1;
    for (int i = 0; i < nd; i++) o->ne[i] = hf_shape[nd - 1 - i];
    for (int i = 0; i < nd; i++)
        if (o->ne[i] <= 0) return iqf_cv_fail(c, "%s: tensor %s has an empty dimension", c->dir, o->name);
    o->type = choose_type(c, o->name, nd, o->ne[0]);
    return 0;
}

static int plan_plain(cv *c, const iqf_st_tensor *t, const char *hfname) {
    ot *o = add_ot(c);
    if (!o) return iqf_cv_fail(c, "%s: out of memory", c->dir);
    if (map_name(c, hfname, o->name, sizeof o->name) != 0)
        return iqf_cv_fail(c, "%s: tensor %s: no GGUF name for it in architecture %s", iqf_st_part_path(c->st, t->part),
                       hfname, c->arch->hf);
    o->kind = K_PLAIN;
    o->src = t;
    int64_t shape[IQF_ST_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    if (c->arch->flags & CV_F_GEMMA3) {
        /* Gemma3RMSNorm multiplies by (1 + weight); rows of token_embd past the tokenizer's
         * vocabulary + added tokens are dropped */
        if (iqf_cv_ends_with(hfname, "norm.weight")) o->shift = 1.0f;
        if (strstr(hfname, "embed_tokens.weight") && t->n_dims >= 1 && c->n_vocab_real >= 0 &&
            shape[0] > c->n_vocab_real)
            shape[0] = c->n_vocab_real;
    }
    if (set_shape(c, o, shape, t->n_dims)) return -1;
    if (c->arch->flags & CV_F_PERMUTE_QK) {
        bool q = iqf_cv_ends_with(hfname, "q_proj.weight") || iqf_cv_ends_with(hfname, "q_proj.bias");
        bool k = iqf_cv_ends_with(hfname, "k_proj.weight") || iqf_cv_ends_with(hfname, "k_proj.bias");
        if (q || k) {
            int64_t nh, nkv;
            static const char *const kh[] = { "n_heads", "num_attention_heads", NULL };
            static const char *const kk[] = { "n_kv_heads", "num_key_value_heads", NULL };
            if (iqf_cv_hint(c, "num_attention_heads", iqf_cv_hfind(c, kh, NULL), &nh, 1, 1 << 20)) return -1;
            if (iqf_cv_hint(c, "num_key_value_heads", iqf_cv_hfind(c, kk, NULL), &nkv, 1, 1 << 20)) return -1;
            int64_t h = (k && nh != nkv) ? nkv : nh;
            int64_t rows = t->n_dims >= 1 ? t->shape[0] : 0;
            if (rows % (2 * h) != 0)
                return iqf_cv_fail(c, "%s: tensor %s: %lld rows do not split into %lld heads of 2 halves",
                               iqf_st_part_path(c->st, t->part), hfname, (long long)rows, (long long)h);
            o->kind = K_PERMUTE;
            o->perm_heads = h;
        }
    }
    return 0;
}

/* DeepSeek's MLA kv_b_proj split into k_b (transposed) and v_b: 1 consumed, 0 not, -1 error. */
static int plan_kvb(cv *c, const iqf_st_tensor *t) {
    if (!iqf_cv_ends_with(t->name, "kv_b_proj.weight")) return 0;
    const char *path = iqf_st_part_path(c->st, t->part);
    int64_t hkv, vd, nope;
    if (iqf_cv_hint(c, "num_key_value_heads", iqf_cv_hget(c, "num_key_value_heads"), &hkv, 1, 1 << 20) ||
        iqf_cv_hint(c, "v_head_dim", iqf_cv_hget(c, "v_head_dim"), &vd, 1, 1 << 20) ||
        iqf_cv_hint(c, "qk_nope_head_dim", iqf_cv_hget(c, "qk_nope_head_dim"), &nope, 1, 1 << 20))
        return -1;
    if (t->n_dims != 2 || t->shape[0] != hkv * (vd + nope))
        return iqf_cv_fail(c, "%s: tensor %s: shape is not [num_key_value_heads * (v_head_dim + qk_nope_head_dim), rank]",
                       path, t->name);
    size_t stem = strlen(t->name) - strlen("kv_b_proj.weight");
    for (int p = 0; p < 2; p++) {
        char hf[512];
        snprintf(hf, sizeof hf, "%.*s%s", (int)stem, t->name, p ? "v_b_proj.weight" : "k_b_proj.weight");
        ot *o = add_ot(c);
        if (!o) return iqf_cv_fail(c, "%s: out of memory", c->dir);
        if (map_name(c, hf, o->name, sizeof o->name) != 0) return iqf_cv_fail(c, "%s: no GGUF name for %s", path, hf);
        o->kind = p ? K_VB : K_KB;
        o->src = t;
        o->nope = nope;
        o->vdim = vd;
        int64_t sh[3] = { hkv, p ? vd : t->shape[1], p ? t->shape[1] : nope };
        if (set_shape(c, o, sh, 3)) return -1;
    }
    return 1;
}

/* gpt-oss's fused expert tensors (GptOssModel.modify_tensors): 1 consumed, 0 not, -1 error. */
static int plan_gptoss(cv *c, const iqf_st_tensor *t) {
    const char *n = t->name;
    const char *path = iqf_st_part_path(c->st, t->part);
    struct { const char *suffix; const char *outs[2]; int nd; bool transpose; } rows[] = {
        { ".mlp.experts.down_proj", { "down_proj.weight", NULL }, 3, true },
        { ".mlp.experts.down_proj_bias", { "down_proj.bias", NULL }, 2, false },
        { ".mlp.experts.gate_up_proj", { "gate_proj.weight", "up_proj.weight" }, 3, true },
        { ".mlp.experts.gate_up_proj_bias", { "gate_proj.bias", "up_proj.bias" }, 2, false },
    };
    for (int i = 0; i < 4; i++) {
        if (!iqf_cv_ends_with(n, rows[i].suffix)) continue;
        if (t->n_dims != rows[i].nd)
            return iqf_cv_fail(c, "%s: tensor %s is not %d-D", path, n, rows[i].nd);
        int parts = rows[i].outs[1] ? 2 : 1;
        int64_t last = t->shape[t->n_dims - 1];
        if (last % parts) return iqf_cv_fail(c, "%s: tensor %s: last dimension %lld is odd", path, n, (long long)last);
        size_t stem = strlen(n) - strlen(rows[i].suffix);
        for (int p = 0; p < parts; p++) {
            char hf[512];
            snprintf(hf, sizeof hf, "%.*s.mlp.experts.%s", (int)stem, n, rows[i].outs[p]);
            ot *o = add_ot(c);
            if (!o) return iqf_cv_fail(c, "%s: out of memory", c->dir);
            if (map_name(c, hf, o->name, sizeof o->name) != 0)
                return iqf_cv_fail(c, "%s: tensor %s: no GGUF name for %s", path, n, hf);
            o->kind = K_GATHER;
            o->src = t;
            o->transpose = rows[i].transpose;
            o->stride = parts;
            o->off = p;
            int64_t sh[3];
            if (rows[i].nd == 3) {
                sh[0] = t->shape[0];
                sh[1] = t->shape[2] / parts;
                sh[2] = t->shape[1];
            } else {
                sh[0] = t->shape[0];
                sh[1] = t->shape[1] / parts;
            }
            if (set_shape(c, o, sh, rows[i].nd)) return -1;
        }
        return 1;
    }
    if (iqf_cv_ends_with(n, "_blocks") || iqf_cv_ends_with(n, "_scales"))
        return iqf_cv_fail(c, "%s: tensor %s: MXFP4 checkpoints are not supported yet", path, n);
    return 0;
}

/* Returns 1 if t is a per-expert tensor (consumed), 0 if not, -1 on error. */
static int plan_expert(cv *c, const iqf_st_tensor *t) {
    for (int r = 0; r < iqf_cv_n_experts; r++) {
        const cv_expert_row *E = &iqf_cv_experts[r];
        int64_t bid = -1, xid = -1;
        int n = pmatch(E->prefix, t->name, &bid, &xid, false);
        if (n < 0) continue;
        int part = -1;
        for (int p = 0; p < 3; p++) {
            size_t pl = strlen(E->parts[p]);
            if (!strncmp(t->name + n, E->parts[p], pl) && !strcmp(t->name + n + pl, ".weight")) part = p;
        }
        if (part < 0) continue;
        const char *path = iqf_st_part_path(c->st, t->part);
        if (c->n_experts <= 0) {
            static const char *const ke[] = { "num_local_experts", "num_experts", "n_routed_experts", NULL };
            if (iqf_cv_hint(c, "num_local_experts", iqf_cv_hfind(c, ke, NULL), &c->n_experts, 1, CV_MAX_EXPERTS)) return -1;
        }
        if (bid < 0 || bid >= c->block_count)
            return iqf_cv_fail(c, "%s: tensor %s: block %lld outside the %lld blocks", path, t->name, (long long)bid,
                           (long long)c->block_count);
        if (xid < 0 || xid >= c->n_experts)
            return iqf_cv_fail(c, "%s: tensor %s: expert %lld outside the %lld experts", path, t->name, (long long)xid,
                           (long long)c->n_experts);
        if (!c->xb) {
            c->xb = calloc((size_t)(c->block_count * c->n_experts * 3), sizeof *c->xb);
            c->xb_n = calloc((size_t)c->block_count, sizeof *c->xb_n);
            if (!c->xb || !c->xb_n) return iqf_cv_fail(c, "%s: out of memory", c->dir);
        }
        const iqf_st_tensor **slot = &c->xb[(bid * c->n_experts + xid) * 3 + part];
        if (*slot) return iqf_cv_fail(c, "%s: tensor %s given twice", path, t->name);
        if (t->n_dims != 2) return iqf_cv_fail(c, "%s: tensor %s is not 2-D", path, t->name);
        *slot = t;
        if (++c->xb_n[bid] < c->n_experts * 3) return 1;
        for (int p = 0; p < 3; p++) {
            const iqf_st_tensor **srcs = malloc((size_t)c->n_experts * sizeof *srcs);
            if (!srcs) return iqf_cv_fail(c, "%s: out of memory", c->dir);
            for (int64_t x = 0; x < c->n_experts; x++) {
                srcs[x] = c->xb[(bid * c->n_experts + x) * 3 + p];
                if (srcs[x]->shape[0] != srcs[0]->shape[0] || srcs[x]->shape[1] != srcs[0]->shape[1]) {
                    iqf_cv_fail(c, "%s: tensor %s: experts of block %lld differ in shape", path, srcs[x]->name,
                            (long long)bid);
                    free(srcs);
                    return -1;
                }
            }
            char merged[256], pat[256];
            snprintf(pat, sizeof pat, "%s%s.weight", E->stacked, E->parts[p]);
            pfill(merged, sizeof merged, pat, bid);
            ot *o = add_ot(c);
            if (!o) {
                free(srcs);
                return iqf_cv_fail(c, "%s: out of memory", c->dir);
            }
            o->kind = K_STACK;
            o->srcs = srcs;
            o->n_src = (int)c->n_experts;
            if (map_name(c, merged, o->name, sizeof o->name) != 0)
                return iqf_cv_fail(c, "%s: no GGUF name for %s", c->dir, merged);
            int64_t sh[3] = { c->n_experts, srcs[0]->shape[0], srcs[0]->shape[1] };
            if (set_shape(c, o, sh, 3)) return -1;
        }
        return 1;
    }
    return 0;
}

/* rope_freqs of Llama 3 rope scaling (generate_extra_tensors), computed as the converter does:
 * freqs in float32 (torch), the rest in Python doubles, stored as float32. */
static int plan_rope_freqs(cv *c) {
    if (!(c->arch->flags & CV_F_LLAMA3_ROPE) || !c->rope) return 0;
    const char *rt = iqf_json_str(iqf_json_get(c->rope, "rope_type"), NULL);
    if (!rt || strcasecmp(rt, "llama3")) return 0;
    double base = 10000.0, factor = 8.0, lff = 1.0, hff = 4.0, old = 8192.0;
    iqf_json_num(iqf_json_get(c->rope, "rope_theta"), &base);
    iqf_json_num(iqf_json_get(c->rope, "factor"), &factor);
    iqf_json_num(iqf_json_get(c->rope, "low_freq_factor"), &lff);
    iqf_json_num(iqf_json_get(c->rope, "high_freq_factor"), &hff);
    iqf_json_num(iqf_json_get(c->rope, "original_max_position_embeddings"), &old);
    int64_t dim, hs, nh;
    if (!iqf_json_is_null_or_absent(iqf_cv_hget(c, "head_dim"))) {
        if (iqf_cv_hint(c, "head_dim", iqf_cv_hget(c, "head_dim"), &dim, 2, 1 << 16)) return -1;
    } else {
        if (iqf_cv_hint(c, "hidden_size", iqf_cv_hget(c, "hidden_size"), &hs, 1, 1 << 24)) return -1;
        if (iqf_cv_hint(c, "num_attention_heads", iqf_cv_hget(c, "num_attention_heads"), &nh, 1, 1 << 20)) return -1;
        dim = hs / nh;
        if (dim < 2) return iqf_cv_fail(c, "%s: head dimension %lld is too small", c->cfg_path, (long long)dim);
    }
    if (!(lff < hff) || !(old > 0) || !(factor > 0))
        return iqf_cv_fail(c, "%s: rope_parameters of llama3 type are inconsistent", c->cfg_path);
    int64_t n = (dim + 1) / 2;
    ot *o = add_ot(c);
    if (!o) return iqf_cv_fail(c, "%s: out of memory", c->dir);
    o->vals = malloc((size_t)n * sizeof *o->vals);
    if (!o->vals) return iqf_cv_fail(c, "%s: out of memory", c->dir);
    double lw = old / lff, hw = old / hff;
    for (int64_t i = 0; i < n; i++) {
        /* torch: arange(0, dim, 2, float32) / dim, base ** that, 1.0 / that, all float32 */
        float e = (float)(2 * i) / (float)dim;
        float p = powf((float)base, e);
        float freq = 1.0f / p;
        double wl = 2 * M_PI / (double)freq;
        double v;
        if (wl < hw) v = 1;
        else if (wl > lw) v = factor;
        else {
            double smooth = (old / wl - lff) / (hff - lff);
            v = 1 / ((1 - smooth) / factor + smooth);
        }
        o->vals[i] = (float)v;
    }
    o->kind = K_VALUES;
    snprintf(o->name, sizeof o->name, "rope_freqs.weight");
    int64_t sh[1] = { n };
    return set_shape(c, o, sh, 1);
}

int iqf_cv_plan(cv *c) {
    if (plan_rope_freqs(c)) return -1;
    for (int64_t i = 0; i < iqf_st_n_tensors(c->st); i++) {
        const iqf_st_tensor *t = iqf_st_tensor_at(c->st, i);
        if (iqf_cv_ends_with(t->name, ".attention.masked_bias") || iqf_cv_ends_with(t->name, ".attention.bias") ||
            iqf_cv_ends_with(t->name, ".rotary_emb.inv_freq"))
            continue;
        if (c->arch->flags & CV_F_DEEPSEEK2) {
            if (yyjson_is_true(iqf_cv_hget(c, "tie_word_embeddings")) &&
                (!strcmp(t->name, "lm_head.weight") || !strcmp(t->name, "model.lm_head.weight")))
                continue;
            int64_t lb = -1, lx = -1;
            if (pmatch("model.layers.{bid}", t->name, &lb, &lx, false) > 0 && lb >= c->block_count) continue; /* MTP */
        }
        int r = (c->arch->flags & CV_F_GPTOSS) ? plan_gptoss(c, t) : 0;
        if (r == 0 && (c->arch->flags & CV_F_DEEPSEEK2)) r = plan_kvb(c, t);
        if (r == 0) r = plan_expert(c, t);
        if (r < 0) return -1;
        if (r == 1) continue;
        if ((c->arch->flags & CV_F_GPTOSS) && iqf_cv_ends_with(t->name, ".sinks")) {
            char hf[512];
            snprintf(hf, sizeof hf, "%s.weight", t->name);
            if (plan_plain(c, t, hf)) return -1;
            continue;
        }
        if (plan_plain(c, t, t->name)) return -1;
    }
    if (c->xb_n)
        for (int64_t b = 0; b < c->block_count; b++)
            if (c->xb_n[b] % (c->n_experts * 3))
                return iqf_cv_fail(c, "%s: block %lld has %lld of its %lld expert tensors", c->dir, (long long)b,
                               (long long)c->xb_n[b], (long long)(c->n_experts * 3));
    if (c->n_t == 0) return iqf_cv_fail(c, "%s: no tensors", c->dir);
    return 0;
}


/* Row r (ne[0] floats) of output tensor o. */
void iqf_cv_get_row(const ot *o, int64_t r, float *dst) {
    int64_t n = o->ne[0];
    switch (o->kind) {
    case K_VALUES:
        memcpy(dst, o->vals, (size_t)n * sizeof *dst);
        return;
    case K_PLAIN:
        for (int64_t i = 0; i < n; i++) dst[i] = iqf_st_get_f32(o->src, (uint64_t)(r * n + i)) + o->shift;
        return;
    case K_STACK: {
        int64_t rows = o->ne[1];
        const iqf_st_tensor *s = o->srcs[r / rows];
        int64_t rr = r % rows;
        for (int64_t i = 0; i < n; i++) dst[i] = iqf_st_get_f32(s, (uint64_t)(rr * n + i));
        return;
    }
    case K_GATHER: {
        const iqf_st_tensor *s = o->src;
        if (s->n_dims == 2) {
            int64_t N = s->shape[1];
            for (int64_t k = 0; k < n; k++) dst[k] = iqf_st_get_f32(s, (uint64_t)(r * N + k * o->stride + o->off));
            return;
        }
        int64_t A = s->shape[1], B = s->shape[2], R = o->ne[1];
        int64_t e = r / R, rr = r % R;
        for (int64_t c = 0; c < n; c++) {
            uint64_t idx = o->transpose ? (uint64_t)((e * A + c) * B + rr * o->stride + o->off)
                                        : (uint64_t)((e * A + rr) * B + c);
            dst[c] = iqf_st_get_f32(s, idx);
        }
        return;
    }
    case K_KB: { /* out [H, lora, nope]: out(h, r, c) = src(h*(nope+v) + c, r) */
        int64_t lora = o->ne[1], cols = o->src->shape[1];
        int64_t h = r / lora, rr = r % lora;
        for (int64_t c = 0; c < n; c++)
            dst[c] = iqf_st_get_f32(o->src, (uint64_t)((h * (o->nope + o->vdim) + c) * cols + rr));
        return;
    }
    case K_VB: { /* out [H, v, lora]: out(h, r, c) = src(h*(nope+v) + nope + r, c) */
        int64_t vd = o->ne[1];
        int64_t h = r / vd, rr = r % vd;
        for (int64_t c = 0; c < n; c++)
            dst[c] = iqf_st_get_f32(o->src, (uint64_t)((h * (o->nope + o->vdim) + o->nope + rr) * n + c));
        return;
    }
    case K_PERMUTE: {
        if (o->n_dims == 1) { /* a bias: permute elements */
            int64_t half = n / o->perm_heads / 2;
            for (int64_t e = 0; e < n; e++) {
                int64_t h = e / (2 * half), rem = e % (2 * half), i = rem / 2, j = rem % 2;
                dst[e] = iqf_st_get_f32(o->src, (uint64_t)(h * 2 * half + j * half + i));
            }
            return;
        }
        int64_t rows = o->ne[1];
        int64_t half = rows / o->perm_heads / 2;
        int64_t h = r / (2 * half), rem = r % (2 * half), i = rem / 2, j = rem % 2;
        int64_t sr = h * 2 * half + j * half + i;
        for (int64_t k = 0; k < n; k++) dst[k] = iqf_st_get_f32(o->src, (uint64_t)(sr * n + k));
        return;
    }
    }
}
