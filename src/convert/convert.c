/*
 * convert.c - iqf_convert_hf: a Hugging Face checkpoint directory to the GGUF file llama.cpp's
 * convert_hf_to_gguf.py writes from it (same keys, values and order; same tensor names, order,
 * types, shapes and data).
 *
 * Stages, in the converter's order:
 *   cv_load        config.json, the architecture row, the safetensors (mapped, validated)
 *   cv_plan        the output tensors: names (archs.c rows), stacking of experts, the llama q/k
 *                  permutation, rope_freqs; shapes and types; nothing is read yet
 *   cv_kvs         general.*, the hyper-parameters, then the vocabulary (cv_vocab_*)
 *   cv_write       header, then each tensor produced row by row from the mapped input
 *                  (pages dropped after each source tensor: memory stays bounded by one row
 *                  block, not by the model), committed by rename or removed on any error.
 */
#include "iqforge.h"

#include "convert_internal.h"
#include "json.h"
#include "safetensors.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CV_MAX_EXPERTS 1024
#define CV_MAX_BLOCKS 4096

typedef enum { K_PLAIN, K_PERMUTE, K_STACK, K_VALUES, K_GATHER, K_KB, K_VB } ot_kind;

typedef struct ot {
    char name[IQF_GGUF_MAX_NAME];
    int n_dims;
    int64_t ne[4]; /* ggml order */
    int type;
    ot_kind kind;
    const iqf_st_tensor *src;
    const iqf_st_tensor **srcs; /* K_STACK: one per expert */
    int n_src;
    int64_t perm_heads;
    float *vals; /* K_VALUES */
    float shift; /* added to every value (gemma's norm offset) */
    /* K_GATHER over a 2-D [E, N] or 3-D [E, A, B] source: out(e, r, c) = transpose ?
     * src(e, c, r*stride+off) : src(e, r, c) (3-D); out(e, k) = src(e, k*stride+off) (2-D) */
    bool transpose;
    int64_t stride, off;
    int64_t nope, vdim; /* K_KB / K_VB: MLA's kv_b split (per head: nope rows of k, then v rows) */
} ot;

typedef struct cv {
    const char *dir;
    char cfg_path[4096];
    yyjson_doc *cfg_doc;
    yyjson_val *hp; /* config root */
    yyjson_val *rope; /* rope_parameters or rope_scaling (object) or NULL */
    const cv_arch *arch;
    iqf_st *st;
    int ftype; /* llama file type after auto */
    ot *t;
    int64_t n_t, cap_t;
    int64_t block_count;
    char *err;
    size_t errlen;
    /* expert buckets: per block, the source tensors seen */
    const iqf_st_tensor **xb;
    int64_t *xb_n;
    int64_t n_experts;
    int64_t n_vocab_real; /* gemma3: len(model.vocab) + len(added_tokens), -1 unknown */
} cv;

static int cv_fail(cv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cv_fail(cv *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- hyper-parameters ---------------------------------------------------------------------- */

static yyjson_val *hget(cv *c, const char *key) { return iqf_json_get(c->hp, key); }

/* find_hparam: the first key present (even when null). */
static yyjson_val *hfind(cv *c, const char *const *keys, bool *present) {
    for (int i = 0; keys[i]; i++) {
        yyjson_val *v = hget(c, keys[i]);
        if (v) {
            if (present) *present = true;
            return v;
        }
    }
    if (present) *present = false;
    return NULL;
}

static int hint(cv *c, const char *key, yyjson_val *v, int64_t *out, int64_t lo, int64_t hi) {
    if (!iqf_json_int(v, out) || *out < lo || *out > hi)
        return cv_fail(c, "%s: %s is not an integer in [%lld, %lld]", c->cfg_path, key, (long long)lo, (long long)hi);
    return 0;
}

/* ---- small helpers ------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

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
    if (ends_with(hf, ".weight")) {
        suffix = ".weight";
        base -= 7;
    } else if (ends_with(hf, ".bias")) {
        suffix = ".bias";
        base -= 5;
    } else
        suffix = "";
    char stem[512];
    if (base >= sizeof stem) return -1;
    memcpy(stem, hf, base);
    stem[base] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < cv_n_names; i++) {
            const cv_name_row *r = &cv_names[i];
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
    if (n_dims <= 1 || ends_with(name, "_norm.weight")) return IQF_TYPE_F32;
    for (int i = 0; cv_f32_suffixes[i]; i++)
        if (ends_with(name, cv_f32_suffixes[i])) return IQF_TYPE_F32;
    if (!ends_with(name, ".weight")) return IQF_TYPE_F32;
    switch (c->ftype) {
    case IQF_FTYPE_ALL_F32: return IQF_TYPE_F32;
    case IQF_FTYPE_MOSTLY_F16: return IQF_TYPE_F16;
    case IQF_FTYPE_MOSTLY_BF16: return IQF_TYPE_BF16;
    default: return ne0 % 32 == 0 ? IQF_TYPE_Q8_0 : IQF_TYPE_F16; /* QuantError -> F16 */
    }
}

static int set_shape(cv *c, ot *o, const int64_t *hf_shape, int nd) {
    if (nd > 4) return cv_fail(c, "%s: tensor %s has %d dimensions (GGUF allows 4)", c->dir, o->name, nd);
    o->n_dims = nd;
    for (int i = 0; i < 4; i++) o->ne[i] = 1;
    for (int i = 0; i < nd; i++) o->ne[i] = hf_shape[nd - 1 - i];
    for (int i = 0; i < nd; i++)
        if (o->ne[i] <= 0) return cv_fail(c, "%s: tensor %s has an empty dimension", c->dir, o->name);
    o->type = choose_type(c, o->name, nd, o->ne[0]);
    return 0;
}

static int plan_plain(cv *c, const iqf_st_tensor *t, const char *hfname) {
    ot *o = add_ot(c);
    if (!o) return cv_fail(c, "%s: out of memory", c->dir);
    if (map_name(c, hfname, o->name, sizeof o->name) != 0)
        return cv_fail(c, "%s: tensor %s: no GGUF name for it in architecture %s", iqf_st_part_path(c->st, t->part),
                       hfname, c->arch->hf);
    o->kind = K_PLAIN;
    o->src = t;
    int64_t shape[IQF_ST_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    if (c->arch->flags & CV_F_GEMMA3) {
        /* Gemma3RMSNorm multiplies by (1 + weight); rows of token_embd past the tokenizer's
         * vocabulary + added tokens are dropped */
        if (ends_with(hfname, "norm.weight")) o->shift = 1.0f;
        if (strstr(hfname, "embed_tokens.weight") && t->n_dims >= 1 && c->n_vocab_real >= 0 &&
            shape[0] > c->n_vocab_real)
            shape[0] = c->n_vocab_real;
    }
    if (set_shape(c, o, shape, t->n_dims)) return -1;
    if (c->arch->flags & CV_F_PERMUTE_QK) {
        bool q = ends_with(hfname, "q_proj.weight") || ends_with(hfname, "q_proj.bias");
        bool k = ends_with(hfname, "k_proj.weight") || ends_with(hfname, "k_proj.bias");
        if (q || k) {
            int64_t nh, nkv;
            static const char *const kh[] = { "n_heads", "num_attention_heads", NULL };
            static const char *const kk[] = { "n_kv_heads", "num_key_value_heads", NULL };
            if (hint(c, "num_attention_heads", hfind(c, kh, NULL), &nh, 1, 1 << 20)) return -1;
            if (hint(c, "num_key_value_heads", hfind(c, kk, NULL), &nkv, 1, 1 << 20)) return -1;
            int64_t h = (k && nh != nkv) ? nkv : nh;
            int64_t rows = t->n_dims >= 1 ? t->shape[0] : 0;
            if (rows % (2 * h) != 0)
                return cv_fail(c, "%s: tensor %s: %lld rows do not split into %lld heads of 2 halves",
                               iqf_st_part_path(c->st, t->part), hfname, (long long)rows, (long long)h);
            o->kind = K_PERMUTE;
            o->perm_heads = h;
        }
    }
    return 0;
}

/* DeepSeek's MLA kv_b_proj split into k_b (transposed) and v_b: 1 consumed, 0 not, -1 error. */
static int plan_kvb(cv *c, const iqf_st_tensor *t) {
    if (!ends_with(t->name, "kv_b_proj.weight")) return 0;
    const char *path = iqf_st_part_path(c->st, t->part);
    int64_t hkv, vd, nope;
    if (hint(c, "num_key_value_heads", hget(c, "num_key_value_heads"), &hkv, 1, 1 << 20) ||
        hint(c, "v_head_dim", hget(c, "v_head_dim"), &vd, 1, 1 << 20) ||
        hint(c, "qk_nope_head_dim", hget(c, "qk_nope_head_dim"), &nope, 1, 1 << 20))
        return -1;
    if (t->n_dims != 2 || t->shape[0] != hkv * (vd + nope))
        return cv_fail(c, "%s: tensor %s: shape is not [num_key_value_heads * (v_head_dim + qk_nope_head_dim), rank]",
                       path, t->name);
    size_t stem = strlen(t->name) - strlen("kv_b_proj.weight");
    for (int p = 0; p < 2; p++) {
        char hf[512];
        snprintf(hf, sizeof hf, "%.*s%s", (int)stem, t->name, p ? "v_b_proj.weight" : "k_b_proj.weight");
        ot *o = add_ot(c);
        if (!o) return cv_fail(c, "%s: out of memory", c->dir);
        if (map_name(c, hf, o->name, sizeof o->name) != 0) return cv_fail(c, "%s: no GGUF name for %s", path, hf);
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
        if (!ends_with(n, rows[i].suffix)) continue;
        if (t->n_dims != rows[i].nd)
            return cv_fail(c, "%s: tensor %s is not %d-D", path, n, rows[i].nd);
        int parts = rows[i].outs[1] ? 2 : 1;
        int64_t last = t->shape[t->n_dims - 1];
        if (last % parts) return cv_fail(c, "%s: tensor %s: last dimension %lld is odd", path, n, (long long)last);
        size_t stem = strlen(n) - strlen(rows[i].suffix);
        for (int p = 0; p < parts; p++) {
            char hf[512];
            snprintf(hf, sizeof hf, "%.*s.mlp.experts.%s", (int)stem, n, rows[i].outs[p]);
            ot *o = add_ot(c);
            if (!o) return cv_fail(c, "%s: out of memory", c->dir);
            if (map_name(c, hf, o->name, sizeof o->name) != 0)
                return cv_fail(c, "%s: tensor %s: no GGUF name for %s", path, n, hf);
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
    if (ends_with(n, "_blocks") || ends_with(n, "_scales"))
        return cv_fail(c, "%s: tensor %s: MXFP4 checkpoints are not supported yet", path, n);
    return 0;
}

/* Returns 1 if t is a per-expert tensor (consumed), 0 if not, -1 on error. */
static int plan_expert(cv *c, const iqf_st_tensor *t) {
    for (int r = 0; r < cv_n_experts; r++) {
        const cv_expert_row *E = &cv_experts[r];
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
            if (hint(c, "num_local_experts", hfind(c, ke, NULL), &c->n_experts, 1, CV_MAX_EXPERTS)) return -1;
        }
        if (bid < 0 || bid >= c->block_count)
            return cv_fail(c, "%s: tensor %s: block %lld outside the %lld blocks", path, t->name, (long long)bid,
                           (long long)c->block_count);
        if (xid < 0 || xid >= c->n_experts)
            return cv_fail(c, "%s: tensor %s: expert %lld outside the %lld experts", path, t->name, (long long)xid,
                           (long long)c->n_experts);
        if (!c->xb) {
            c->xb = calloc((size_t)(c->block_count * c->n_experts * 3), sizeof *c->xb);
            c->xb_n = calloc((size_t)c->block_count, sizeof *c->xb_n);
            if (!c->xb || !c->xb_n) return cv_fail(c, "%s: out of memory", c->dir);
        }
        const iqf_st_tensor **slot = &c->xb[(bid * c->n_experts + xid) * 3 + part];
        if (*slot) return cv_fail(c, "%s: tensor %s given twice", path, t->name);
        if (t->n_dims != 2) return cv_fail(c, "%s: tensor %s is not 2-D", path, t->name);
        *slot = t;
        if (++c->xb_n[bid] < c->n_experts * 3) return 1;
        for (int p = 0; p < 3; p++) {
            const iqf_st_tensor **srcs = malloc((size_t)c->n_experts * sizeof *srcs);
            if (!srcs) return cv_fail(c, "%s: out of memory", c->dir);
            for (int64_t x = 0; x < c->n_experts; x++) {
                srcs[x] = c->xb[(bid * c->n_experts + x) * 3 + p];
                if (srcs[x]->shape[0] != srcs[0]->shape[0] || srcs[x]->shape[1] != srcs[0]->shape[1]) {
                    cv_fail(c, "%s: tensor %s: experts of block %lld differ in shape", path, srcs[x]->name,
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
                return cv_fail(c, "%s: out of memory", c->dir);
            }
            o->kind = K_STACK;
            o->srcs = srcs;
            o->n_src = (int)c->n_experts;
            if (map_name(c, merged, o->name, sizeof o->name) != 0)
                return cv_fail(c, "%s: no GGUF name for %s", c->dir, merged);
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
    if (!iqf_json_is_null_or_absent(hget(c, "head_dim"))) {
        if (hint(c, "head_dim", hget(c, "head_dim"), &dim, 2, 1 << 16)) return -1;
    } else {
        if (hint(c, "hidden_size", hget(c, "hidden_size"), &hs, 1, 1 << 24)) return -1;
        if (hint(c, "num_attention_heads", hget(c, "num_attention_heads"), &nh, 1, 1 << 20)) return -1;
        dim = hs / nh;
        if (dim < 2) return cv_fail(c, "%s: head dimension %lld is too small", c->cfg_path, (long long)dim);
    }
    if (!(lff < hff) || !(old > 0) || !(factor > 0))
        return cv_fail(c, "%s: rope_parameters of llama3 type are inconsistent", c->cfg_path);
    int64_t n = (dim + 1) / 2;
    ot *o = add_ot(c);
    if (!o) return cv_fail(c, "%s: out of memory", c->dir);
    o->vals = malloc((size_t)n * sizeof *o->vals);
    if (!o->vals) return cv_fail(c, "%s: out of memory", c->dir);
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

static int cv_plan(cv *c) {
    if (plan_rope_freqs(c)) return -1;
    for (int64_t i = 0; i < iqf_st_n_tensors(c->st); i++) {
        const iqf_st_tensor *t = iqf_st_tensor_at(c->st, i);
        if (ends_with(t->name, ".attention.masked_bias") || ends_with(t->name, ".attention.bias") ||
            ends_with(t->name, ".rotary_emb.inv_freq"))
            continue;
        if (c->arch->flags & CV_F_DEEPSEEK2) {
            if (yyjson_is_true(hget(c, "tie_word_embeddings")) &&
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
        if ((c->arch->flags & CV_F_GPTOSS) && ends_with(t->name, ".sinks")) {
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
                return cv_fail(c, "%s: block %lld has %lld of its %lld expert tensors", c->dir, (long long)b,
                               (long long)c->xb_n[b], (long long)(c->n_experts * 3));
    if (c->n_t == 0) return cv_fail(c, "%s: no tensors", c->dir);
    return 0;
}

/* ---- general.* ------------------------------------------------------------------------------- */

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
static void model_name(const char *dir, char *out, size_t n) {
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

static void size_label(cv *c, char *out, size_t n) {
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

#define W_OK(x) do { if ((x) != IQF_OK) return cv_fail(c, "%s", iqf_gguf_writer_error(w)); } while (0)

static int kv_u32(cv *c, iqf_gguf_writer *w, const char *suffix, yyjson_val *v, const char *what) {
    int64_t x;
    if (hint(c, what, v, &x, 0, UINT32_MAX)) return -1;
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch->gguf, suffix);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)x));
    return 0;
}

static int kv_f32(cv *c, iqf_gguf_writer *w, const char *suffix, yyjson_val *v, const char *what) {
    double x;
    if (!iqf_json_num(v, &x)) return cv_fail(c, "%s: %s is not a number", c->cfg_path, what);
    char key[256];
    snprintf(key, sizeof key, "%s.%s", c->arch->gguf, suffix);
    W_OK(iqf_gguf_writer_set_f32(w, key, (float)x));
    return 0;
}

static int cv_hparams(cv *c, iqf_gguf_writer *w) {
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
    static const char *const k_theta[] = { "global_rope_theta", "rope_global_theta", "rope_theta_global",
                                           "rope_theta", "rotary_emb_base", NULL };
    yyjson_val *v;
    char key[256];
    snprintf(key, sizeof key, "%s.block_count", c->arch->gguf);
    W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)c->block_count));
    if ((v = hfind(c, k_ctx, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "context_length", v, "max_position_embeddings"))
        return -1;
    if ((v = hfind(c, k_embd, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "embedding_length", v, "hidden_size"))
        return -1;
    if ((v = hfind(c, k_ff, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "feed_forward_length", v, "intermediate_size"))
        return -1;
    if ((v = hfind(c, k_head, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "attention.head_count", v, "num_attention_heads"))
        return -1;
    if (c->arch->flags & CV_F_DEEPSEEK2) { /* MLA is written as MQA: one KV head */
        snprintf(key, sizeof key, "%s.attention.head_count_kv", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, 1));
    } else if ((v = hfind(c, k_kv, NULL)) && !yyjson_is_null(v) &&
               kv_u32(c, w, "attention.head_count_kv", v, "num_key_value_heads"))
        return -1;
    if (yyjson_is_false(hget(c, "is_causal"))) {
        snprintf(key, sizeof key, "%s.attention.causal", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_bool(w, key, false));
    }
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
            return cv_fail(c, "%s: rope_type %s is not supported yet", c->cfg_path, rt);
        }
    }
    /* rope_theta: rope_parameters' own, else mirrored from the top level */
    yyjson_val *theta = rp ? iqf_json_get(rp, "rope_theta") : NULL;
    if (!theta && !rope_full) {
        theta = hfind(c, k_theta, NULL);
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
            sw = hfind(c, k_local, NULL);
            if (sw && yyjson_is_null(sw)) sw = NULL;
        }
        if (sw && kv_f32(c, w, "rope.freq_base_swa", sw, "sliding rope_theta")) return -1;
    }
    if ((v = hfind(c, k_rms, NULL)) && !yyjson_is_null(v) && kv_f32(c, w, "attention.layer_norm_rms_epsilon", v, "rms_norm_eps"))
        return -1;
    if (!v && (c->arch->flags & CV_F_DEEPSEEK2)) {
        snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_f32(w, key, 1e-6f));
    }
    if ((v = hfind(c, k_ln, NULL)) && !yyjson_is_null(v) && kv_f32(c, w, "attention.layer_norm_epsilon", v, "layer_norm_eps"))
        return -1;
    if ((v = hfind(c, k_ne, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "expert_count", v, "num_local_experts")) return -1;
    if ((v = hfind(c, k_nu, NULL)) && !yyjson_is_null(v) && kv_u32(c, w, "expert_used_count", v, "num_experts_per_tok"))
        return -1;
    if ((v = hget(c, "n_group")) && !yyjson_is_null(v) && kv_u32(c, w, "expert_group_count", v, "n_group")) return -1;
    if ((v = hget(c, "topk_group")) && !yyjson_is_null(v) && kv_u32(c, w, "expert_group_used_count", v, "topk_group"))
        return -1;
    int64_t kv_lora = 512, rope_hd = 0;
    bool head_dim_written = false;
    if (c->arch->flags & CV_F_DEEPSEEK2) {
        yyjson_val *x = hget(c, "kv_lora_rank");
        if (x && !yyjson_is_null(x) && hint(c, "kv_lora_rank", x, &kv_lora, 1, UINT32_MAX)) return -1;
        if (hint(c, "qk_rope_head_dim", hget(c, "qk_rope_head_dim"), &rope_hd, 0, UINT32_MAX)) return -1;
    }
    if ((v = hget(c, "head_dim")) && !yyjson_is_null(v)) {
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
    bool expert_count_written = (v = hfind(c, k_ne, NULL)) && !yyjson_is_null(v);
    W_OK(iqf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)c->ftype));
    if (c->arch->flags & CV_F_DEEPSEEK2) {
        yyjson_val *nre = hget(c, "n_routed_experts");
        bool has_moe = nre && !yyjson_is_null(nre);
        v = hget(c, "first_k_dense_replace");
        if (v && !yyjson_is_null(v)) {
            if (kv_u32(c, w, "leading_dense_block_count", v, "first_k_dense_replace")) return -1;
        } else {
            snprintf(key, sizeof key, "%s.leading_dense_block_count", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, has_moe ? 0 : (uint32_t)c->block_count));
        }
        if (kv_u32(c, w, "vocab_size", hget(c, "vocab_size"), "vocab_size")) return -1;
        v = hget(c, "q_lora_rank");
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
        if (hint(c, "qk_nope_head_dim", hget(c, "qk_nope_head_dim"), &nope, 0, UINT32_MAX) ||
            hint(c, "v_head_dim", hget(c, "v_head_dim"), &vd, 0, UINT32_MAX))
            return -1;
        snprintf(key, sizeof key, "%s.attention.key_length_mla", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(nope + rope_hd)));
        snprintf(key, sizeof key, "%s.attention.value_length_mla", c->arch->gguf);
        W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)vd));
        static const char *const k_moe[] = { "moe_intermediate_size", "intermediate_size", NULL };
        if (kv_u32(c, w, "expert_feed_forward_length", hfind(c, k_moe, NULL), "moe_intermediate_size")) return -1;
        if (has_moe && !expert_count_written && kv_u32(c, w, "expert_count", nre, "n_routed_experts")) return -1;
        v = hget(c, "n_shared_experts");
        if (v && !yyjson_is_null(v)) {
            if (kv_u32(c, w, "expert_shared_count", v, "n_shared_experts")) return -1;
        } else {
            snprintf(key, sizeof key, "%s.expert_shared_count", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, 0));
        }
        v = hget(c, "routed_scaling_factor");
        if (v && !yyjson_is_null(v) && kv_f32(c, w, "expert_weights_scale", v, "routed_scaling_factor")) return -1;
        v = hget(c, "norm_topk_prob");
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
    }
    /* model classes */
    if (c->arch->flags & CV_F_VOCAB_SIZE) {
        if (kv_u32(c, w, "vocab_size", hget(c, "vocab_size"), "vocab_size")) return -1;
    }
    if (c->arch->flags & CV_F_ROPE_DIM) {
        v = hget(c, "head_dim");
        if (v && !yyjson_is_null(v)) {
            if (kv_u32(c, w, "rope.dimension_count", v, "head_dim")) return -1;
        } else {
            int64_t hs, nh;
            if (hint(c, "hidden_size", hget(c, "hidden_size"), &hs, 1, UINT32_MAX)) return -1;
            if (hint(c, "num_attention_heads", hget(c, "num_attention_heads"), &nh, 1, UINT32_MAX)) return -1;
            snprintf(key, sizeof key, "%s.rope.dimension_count", c->arch->gguf);
            W_OK(iqf_gguf_writer_set_u32(w, key, (uint32_t)(hs / nh)));
        }
    }
    if (c->arch->flags & CV_F_GEMMA3) {
        if (!iqf_json_is_null_or_absent(hget(c, "attn_logit_softcapping")))
            return cv_fail(c, "%s: attn_logit_softcapping is set (not a Gemma 3)", c->cfg_path);
        v = hget(c, "final_logit_softcapping");
        double fs = 0;
        if (v && iqf_json_num(v, &fs) && fs != 0 && kv_f32(c, w, "final_logit_softcapping", v, "final_logit_softcapping"))
            return -1;
        int64_t pat = 0;
        if (!iqf_json_int(hget(c, "sliding_window_pattern"), &pat) || pat != 1)
            if (kv_u32(c, w, "attention.sliding_window", hget(c, "sliding_window"), "sliding_window")) return -1;
    }
    if (c->arch->flags & CV_F_GPTOSS) {
        if (kv_u32(c, w, "attention.sliding_window", hget(c, "sliding_window"), "sliding_window")) return -1;
        if (kv_u32(c, w, "expert_feed_forward_length", hget(c, "intermediate_size"), "intermediate_size")) return -1;
    }
    if (c->arch->flags & CV_F_EXPERT_FF) {
        v = hget(c, "moe_intermediate_size");
        if (v && !yyjson_is_null(v) && kv_u32(c, w, "expert_feed_forward_length", v, "moe_intermediate_size")) return -1;
        v = hget(c, "shared_expert_intermediate_size");
        if (v && !yyjson_is_null(v) && kv_u32(c, w, "expert_shared_feed_forward_length", v, "shared_expert_intermediate_size"))
            return -1;
    }
    return 0;
}

int iqf_cv_vocab(const char *dir, const char *cfg_path, yyjson_val *hp, int kind, iqf_gguf_writer *w, char *err,
                 size_t errlen);

/* ---- data ------------------------------------------------------------------------------------ */

/* Row r (ne[0] floats) of output tensor o. */
static void get_row(const ot *o, int64_t r, float *dst) {
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

static size_t row_bytes(int type, int64_t n) {
    switch (type) {
    case IQF_TYPE_F32: return (size_t)n * 4;
    case IQF_TYPE_F16:
    case IQF_TYPE_BF16: return (size_t)n * 2;
    default: return (size_t)(n / 32) * 34;
    }
}

static void encode_row(int type, const float *x, int64_t n, uint8_t *out) {
    if (type == IQF_TYPE_F32) {
        memcpy(out, x, (size_t)n * 4);
    } else if (type == IQF_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = iqf_fp32_to_fp16(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else if (type == IQF_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = iqf_fp32_to_bf16(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else { /* Q8_0 as gguf-py's quants.Q8_0 (= ggml's reference) */
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + b * 32;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
            float d = amax / 127.0f;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            uint16_t dh = iqf_fp32_to_fp16(d);
            uint8_t *blk = out + b * 34;
            memcpy(blk, &dh, 2);
            for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)roundf(v[i] * id);
        }
    }
}

static int cv_write_data(cv *c, iqf_gguf_writer *w) {
    int64_t maxn = 1;
    for (int64_t i = 0; i < c->n_t; i++)
        if (c->t[i].ne[0] > maxn) maxn = c->t[i].ne[0];
    /* rows are encoded in slabs of about 4 MiB of output */
    size_t rb_max = row_bytes(IQF_TYPE_F32, maxn);
    size_t slab = ((size_t)4 << 20) / rb_max;
    if (slab < 1) slab = 1;
    float *row = malloc((size_t)maxn * sizeof *row);
    uint8_t *buf = malloc(slab * rb_max);
    if (!row || !buf) {
        free(row);
        free(buf);
        return cv_fail(c, "%s: out of memory", c->dir);
    }
    int rc = 0;
    for (int64_t i = 0; i < c->n_t && !rc; i++) {
        const ot *o = &c->t[i];
        int64_t nrows = o->ne[1] * o->ne[2] * o->ne[3];
        size_t rb = row_bytes(o->type, o->ne[0]);
        size_t fill = 0;
        for (int64_t r = 0; r < nrows; r++) {
            get_row(o, r, row);
            encode_row(o->type, row, o->ne[0], buf + fill);
            fill += rb;
            if (fill + rb > slab * rb_max || r == nrows - 1) {
                if (iqf_gguf_writer_write_data(w, buf, fill) != IQF_OK) {
                    rc = cv_fail(c, "%s", iqf_gguf_writer_error(w));
                    break;
                }
                fill = 0;
                /* drop the input pages already consumed: resident memory stays at a slab */
                if (o->kind == K_PLAIN)
                    iqf_st_release_prefix(c->st, o->src, (uint64_t)(r + 1) * (uint64_t)o->ne[0] *
                                                             iqf_st_dtype_size(o->src->dtype));
                else if (o->kind == K_STACK && (r + 1) % o->ne[1] == 0)
                    iqf_st_release(c->st, o->srcs[r / o->ne[1]]);
            }
        }
        if (o->kind == K_PLAIN || o->kind == K_PERMUTE || o->kind == K_GATHER || o->kind == K_KB || o->kind == K_VB)
            iqf_st_release(c->st, o->src);
        if (o->kind == K_STACK)
            for (int x = 0; x < o->n_src; x++) iqf_st_release(c->st, o->srcs[x]);
    }
    free(row);
    free(buf);
    return rc;
}

/* ---- the whole ------------------------------------------------------------------------------ */

static void cv_free(cv *c) {
    for (int64_t i = 0; i < c->n_t; i++) {
        free(c->t[i].srcs);
        free(c->t[i].vals);
    }
    free(c->t);
    free(c->xb);
    free(c->xb_n);
    iqf_st_close(c->st);
    yyjson_doc_free(c->cfg_doc);
}

static int cv_load(cv *c, int outtype) {
    snprintf(c->cfg_path, sizeof c->cfg_path, "%s/config.json", c->dir);
    c->cfg_doc = iqf_json_read_file(c->cfg_path, c->err, c->errlen);
    if (!c->cfg_doc) return -1;
    c->hp = yyjson_doc_get_root(c->cfg_doc);
    if (!yyjson_is_obj(c->hp)) return cv_fail(c, "%s: not a JSON object", c->cfg_path);
    if (iqf_json_get(c->hp, "text_config"))
        return cv_fail(c, "%s: configurations with a text_config are not supported yet", c->cfg_path);
    yyjson_val *archs = hget(c, "architectures");
    const char *a = yyjson_is_arr(archs) ? iqf_json_str(yyjson_arr_get_first(archs), NULL) : NULL;
    if (!a) return cv_fail(c, "%s: no architectures list", c->cfg_path);
    c->arch = cv_find_arch(a);
    if (!c->arch) return cv_fail(c, "%s: architecture %.100s is not supported", c->cfg_path, a);
    yyjson_val *rp = hget(c, "rope_parameters");
    if (!rp) rp = hget(c, "rope_scaling");
    c->rope = yyjson_is_obj(rp) ? rp : NULL;
    static const char *const k_blocks[] = { "n_layers", "num_hidden_layers", "n_layer", "num_layers", NULL };
    if (hint(c, "num_hidden_layers", hfind(c, k_blocks, NULL), &c->block_count, 0, CV_MAX_BLOCKS)) return -1;
    c->n_vocab_real = -1;
    if (c->arch->flags & CV_F_GEMMA3) {
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer.json", c->dir);
        yyjson_doc *td = iqf_json_read_file(tp, c->err, c->errlen);
        if (!td) return -1;
        yyjson_val *tr = yyjson_doc_get_root(td);
        yyjson_val *voc = iqf_json_get(iqf_json_get(tr, "model"), "vocab"), *add = iqf_json_get(tr, "added_tokens");
        if (yyjson_is_obj(voc) && yyjson_is_arr(add))
            c->n_vocab_real = (int64_t)(yyjson_obj_size(voc) + yyjson_arr_size(add));
        yyjson_doc_free(td);
        if (c->n_vocab_real < 0) return cv_fail(c, "%s: no model.vocab object or added_tokens list", tp);
    }
    c->st = iqf_st_open_dir(c->dir, c->err, c->errlen);
    if (!c->st) return -1;
    if (iqf_st_n_tensors(c->st) == 0) return cv_fail(c, "%s: the checkpoint has no tensors", c->dir);
    switch (outtype) {
    case IQF_CONVERT_F32: c->ftype = IQF_FTYPE_ALL_F32; break;
    case IQF_CONVERT_F16: c->ftype = IQF_FTYPE_MOSTLY_F16; break;
    case IQF_CONVERT_BF16: c->ftype = IQF_FTYPE_MOSTLY_BF16; break;
    case IQF_CONVERT_Q8_0: c->ftype = IQF_FTYPE_MOSTLY_Q8_0; break;
    default: /* auto: the first tensor's float type (F16 stays F16, anything else BF16) */
        c->ftype = iqf_st_tensor_at(c->st, 0)->dtype == IQF_ST_F16 ? IQF_FTYPE_MOSTLY_F16 : IQF_FTYPE_MOSTLY_BF16;
    }
    return 0;
}

iqf_status iqf_convert_hf(const char *dir, const char *out_path, iqf_convert_outtype outtype, char *err,
                          size_t errlen) {
    char dummy[8];
    if (!err || !errlen) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = 0;
    if (!dir || !out_path || (int)outtype < 0 || (int)outtype > IQF_CONVERT_Q8_0) {
        snprintf(err, errlen, "iqf_convert_hf: invalid argument");
        return IQF_E_INVALID_ARG;
    }
    cv c;
    memset(&c, 0, sizeof c);
    c.dir = dir;
    c.err = err;
    c.errlen = errlen;
    iqf_gguf_writer *w = NULL;
    iqf_status st = IQF_E_FORMAT;
    if (cv_load(&c, (int)outtype) || cv_plan(&c)) goto fail;
    w = iqf_gguf_writer_open(out_path, err, errlen);
    if (!w) {
        st = IQF_E_IO;
        goto fail;
    }
    for (int p = 0; iqf_st_part_path(c.st, p); p++)
        if (iqf_gguf_writer_set_input(w, iqf_st_part_path(c.st, p)) != IQF_OK) {
            snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
            st = IQF_E_INVALID_ARG;
            goto fail;
        }
    char name[512], label[96];
    model_name(dir, name, sizeof name);
    size_label(&c, label, sizeof label);
    if (iqf_gguf_writer_set_str(w, "general.architecture", c.arch->gguf) != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.type", "model") != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.name", name) != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.size_label", label) != IQF_OK) {
        snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
        goto fail;
    }
    if (cv_hparams(&c, w)) goto fail;
    if (iqf_gguf_writer_set_u32(w, "general.quantization_version", 2) != IQF_OK) {
        snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
        goto fail;
    }
    if (iqf_cv_vocab(dir, c.cfg_path, c.hp, c.arch->vocab, w, err, errlen)) goto fail;
    for (int64_t i = 0; i < c.n_t; i++)
        if (iqf_gguf_writer_add_tensor(w, c.t[i].name, c.t[i].n_dims, c.t[i].ne, c.t[i].type) != IQF_OK ||
            (i == c.n_t - 1 && iqf_gguf_writer_write_header(w) != IQF_OK)) {
            snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
            goto fail;
        }
    if (cv_write_data(&c, w)) goto fail;
    st = iqf_gguf_writer_finish(w, err, errlen);
    w = NULL;
    cv_free(&c);
    return st;
fail:
    iqf_gguf_writer_abort(w);
    cv_free(&c);
    if (st == IQF_OK) st = IQF_E_FORMAT;
    return st;
}
