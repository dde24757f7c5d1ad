/*
 * model.c - loading a GGUF model of an architecture in the table of arch.h (and simulated
 * quantization of its weights). iqf_model_load runs the stages in order: the architecture's row,
 * sizes, rope, global tensors, each layer's tensors, the vocabulary, the simulation.
 */
#include "model.h"
#include "arch.h"
#include "deltanet.h"
#include "model_load.h"
#include "../util/error.h"

#include "util/parallel.h"

#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>


iqf_model_params iqf_model_default_params(void) {
    iqf_model_params p;
    memset(&p, 0, sizeof p);
    p.simulate_type = -1;
    return p;
}

void iqf_model_free(iqf_model *m) {
    if (!m) return;
    if (m->layers)
        for (int l = 0; l < m->info.n_layer; l++) {
            free(m->layers[l].attn_norm);
            free(m->layers[l].ffn_norm);
            free(m->layers[l].bq);
            free(m->layers[l].bk);
            free(m->layers[l].bv);
            free(m->layers[l].q_norm);
            free(m->layers[l].k_norm);
            free(m->layers[l].bo);
            free(m->layers[l].bgate);
            free(m->layers[l].bup);
            free(m->layers[l].bdown);
            free(m->layers[l].sgate_exps);
            free(m->layers[l].sup_exps);
            free(m->layers[l].sdown_exps);
            free(m->layers[l].post_attn_norm);
            free(m->layers[l].post_ffn_norm);
            iqf_gdn_layer_free(m->layers[l].gdn);
            free(m->layers[l].attn_sinks);
            free(m->layers[l].bgate_inp);
            free(m->layers[l].bgate_exps);
            free(m->layers[l].bup_exps);
            free(m->layers[l].bdown_exps);
            free(m->layers[l].q_a_norm);
            free(m->layers[l].kv_a_norm);
            free(m->layers[l].exp_probs_b);
            free(m->layers[l].ple_post_norm);
            free(m->layers[l].gate_inp_s);
            free(m->layers[l].pre_ffn_norm2);
            free(m->layers[l].post_ffn_norm1);
            free(m->layers[l].post_ffn_norm2);
        }
    free(m->ple_proj_norm);
    free(m->layers);
    free(m->output_norm);
    free(m->output_b);
    free(m->rope_freqs);
    free(m->gdn_hp);
    free(m->mats);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    if (!m->gguf_borrowed) iqf_gguf_close(m->gguf);
    free(m);
}

const iqf_model_info *iqf_model_get_info(const iqf_model *m) { return &m->info; }
const iqf_gguf *iqf_model_gguf(const iqf_model *m) { return m->gguf; }


bool iqf_ld_key_int(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi,
                    int *out, iqf_status *st) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->m->info.arch, suffix);
    int64_t v;
    if (!iqf_gguf_get_int(ld->m->gguf, key, &v)) {
        if (iqf_gguf_find_kv(ld->m->gguf, key) >= 0) {
            *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: key %s is not an integer", ld->path, key);
            return false;
        }
        if (required) {
            *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: missing key %s", ld->path, key);
            return false;
        }
        v = def;
    }
    if (v < lo || v > hi) {
        *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s = %lld is out of range [%lld, %lld]",
                   ld->path, key, (long long)v, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int)v;
    return true;
}

bool iqf_ld_key_int_layers(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi,
                           int *out, iqf_status *st) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->m->info.arch, suffix);
    const iqf_gguf *g = ld->m->gguf;
    const int64_t k = iqf_gguf_find_kv(g, key);
    if (k < 0 || iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR) return iqf_ld_key_int(ld, suffix, required, def, lo, hi, out, st);
    const uint64_t n = iqf_gguf_arr_n(g, k);
    int64_t v0 = 0, v = 0;
    if (n != (uint64_t)ld->m->info.n_layer || !iqf_gguf_arr_int(g, k, 0, &v0)) {
        *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s is an array of %llu values for %d layers, not of integers",
                       ld->path, key, (unsigned long long)n, ld->m->info.n_layer);
        return false;
    }
    for (uint64_t i = 1; i < n; i++)
        if (!iqf_gguf_arr_int(g, k, i, &v) || v != v0) {
            *st = iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: %s differs between layers (%lld, then %lld at layer %llu): "
                           "this engine runs one width for every layer", ld->path, key, (long long)v0, (long long)v,
                           (unsigned long long)i);
            return false;
        }
    if (v0 < lo || v0 > hi) {
        *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s = %lld is out of range [%lld, %lld]", ld->path, key,
                       (long long)v0, (long long)lo, (long long)hi);
        return false;
    }
    *out = (int)v0;
    return true;
}

bool iqf_ld_key_int_per_layer(loader *ld, const char *suffix, bool required, int64_t def, int64_t lo, int64_t hi, int *max,
                              int *vals, iqf_status *st) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", ld->m->info.arch, suffix);
    const iqf_gguf *g = ld->m->gguf;
    const int64_t k = iqf_gguf_find_kv(g, key);
    const int L = ld->m->info.n_layer;
    if (k < 0 || iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR) {
        if (!iqf_ld_key_int(ld, suffix, required, def, lo, hi, max, st)) return false;
        for (int l = 0; vals && l < L; l++) vals[l] = *max;
        return true;
    }
    if (iqf_gguf_arr_n(g, k) != (uint64_t)L) {
        *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s is an array of %llu values for %d layers", ld->path, key,
                       (unsigned long long)iqf_gguf_arr_n(g, k), L);
        return false;
    }
    *max = 0;
    for (int l = 0; l < L; l++) {
        int64_t v = 0;
        if (!iqf_gguf_arr_int(g, k, (uint64_t)l, &v) || v < lo || v > hi) {
            *st = iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s[%d] is not an integer in [%lld, %lld]", ld->path, key, l,
                           (long long)lo, (long long)hi);
            return false;
        }
        if (vals) vals[l] = (int)v;
        if (v > *max) *max = (int)v;
    }
    return true;
}

/* Finds a tensor and checks its shape (ne1 = 0 for a vector; ne2 > 1 for 3-D expert tensors). */
static iqf_status get_tensor3(loader *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                              bool optional, const iqf_gguf_tensor **out);
iqf_status iqf_ld_get_tensor(loader *ld, const char *name, int64_t ne0, int64_t ne1, bool optional,
                             const iqf_gguf_tensor **out) {
    return get_tensor3(ld, name, ne0, ne1, 1, optional, out);
}

static iqf_status get_tensor3(loader *ld, const char *name, int64_t ne0, int64_t ne1, int64_t ne2,
                              bool optional, const iqf_gguf_tensor **out) {
    *out = NULL;
    int64_t i = iqf_gguf_find_tensor(ld->m->gguf, name);
    if (i < 0) {
        if (optional) return IQF_OK;
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: missing tensor %s", ld->path, name);
    }
    const iqf_gguf_tensor *t = iqf_gguf_tensor_at(ld->m->gguf, i);
    bool ok = t->ne[0] == ne0 && t->ne[2] == ne2 && t->ne[3] == 1 && (ne1 ? t->ne[1] == ne1 : t->ne[1] == 1);
    if (!ok && ne2 > 1)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT,
                    "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", ld->path,
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)ne0, (long long)ne1, (long long)ne2);
    if (!ok)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT,
                    "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", ld->path,
                    name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                    (long long)t->ne[3], (long long)ne0, (long long)(ne1 ? ne1 : 1));
    if (!iqf_can_decode(t->type))
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: tensor %s has type %s, which this build cannot decode",
                    ld->path, name, iqf_type_get(t->type)->name);
    *out = t;
    return IQF_OK;
}

static iqf_status load_experts(loader *ld, iqf_weight *w, const char *name, int64_t ne0, int64_t ne1,
                               int64_t ne2, bool optional) {
    const iqf_gguf_tensor *t;
    iqf_status st = get_tensor3(ld, name, ne0, ne1, ne2, optional, &t);
    if (st || !t) return st;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->type = t->type;
    w->ncols = ne0;
    w->nrows = ne1;
    w->n_mat = (int)ne2;
    w->row_bytes = iqf_row_size(t->type, ne0);
    w->data = t->data;
    w->id = -1;
    ld->m->info.n_params += ne0 * ne1 * ne2;
    return IQF_OK;
}

static iqf_status load_matrix(loader *ld, iqf_weight *w, const char *name, int64_t ne0, int64_t ne1,
                              bool optional) {
    return load_experts(ld, w, name, ne0, ne1, 1, optional);
}

iqf_status iqf_ld_global_mat(loader *ld, iqf_weight *w, const char *name, int64_t ne0, int64_t ne1, bool product) {
    iqf_status st = load_experts(ld, w, name, ne0, ne1, 1, false);
    if (st || !product) return st;
    w->id = ld->m->n_mats;
    ld->m->mats[ld->m->n_mats++] = w;
    return IQF_OK;
}

static iqf_status load_vector_opt(loader *ld, float **out, const char *name, int64_t n, bool optional) {
    const iqf_gguf_tensor *t;
    iqf_status st = iqf_ld_get_tensor(ld, name, n, 0, optional, &t);
    if (st || !t) return st;
    *out = malloc((size_t)n * sizeof(float));
    if (!*out) return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    st = iqf_dequantize(t->type, t->data, *out, 1, n, 1, ld->err, ld->errlen);
    ld->m->info.n_params += n;
    return st;
}

iqf_status iqf_ld_load_vector(loader *ld, float **out, const char *name, int64_t n) {
    return load_vector_opt(ld, out, name, n, false);
}

static iqf_status load_vocab(loader *ld) {
    iqf_model *m = ld->m;
    const iqf_gguf *g = m->gguf;
    int64_t ti = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (ti >= 0 && iqf_gguf_arr_type(g, ti) == IQF_GGUF_STR) {
        uint64_t n = iqf_gguf_arr_n(g, ti);
        if (n != (uint64_t)m->info.n_vocab)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT,
                        "%s: tokenizer.ggml.tokens has %llu tokens but token_embd.weight has %d rows",
                        ld->path, (unsigned long long)n, m->info.n_vocab);
    }
    const char *tm = NULL;
    iqf_gguf_get_str(g, "tokenizer.ggml.model", &tm, NULL);
    bool spm = !tm || !strcmp(tm, "llama");
    int64_t v;
    m->info.bos_id = iqf_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &v) ? (int)v : (spm ? 1 : -1);
    m->info.eos_id = iqf_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &v) ? (int)v : (spm ? 2 : -1);
    bool ab = spm;
    iqf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &ab);
    m->info.add_bos = ab && m->info.bos_id >= 0 && m->info.bos_id < m->info.n_vocab;
    if (m->info.bos_id >= m->info.n_vocab) m->info.bos_id = -1;
    if (m->info.eos_id >= m->info.n_vocab) m->info.eos_id = -1;
    return IQF_OK;
}

/* ----------------------------------------------------------------------------------------- */
/* Simulated quantization                                                                     */

typedef struct simjob {
    const iqf_weight *w;
    const float *src;  /* nel floats */
    float *dst;
    const float *im;   /* ncols or NULL */
    int type;
    iqf_mode mode;
    _Atomic int st;    /* first error (0 = none); its writer alone fills msg */
    char msg[256];
    size_t rowq;
    uint8_t *qbuf;     /* per-thread row buffers */
    float *imrow;      /* per-thread 256 floats */
} simjob;

static void sim_range(void *arg, int64_t b, int64_t e, int tid) {
    simjob *j = arg;
    uint8_t *q = j->qbuf + (size_t)tid * j->rowq;
    float *imr = j->imrow + (size_t)tid * 256;
    iqf_quantize_params qp = iqf_quantize_default_params();
    qp.n_threads = 1;
    qp.mode = j->mode;
    for (int64_t r = b; r < e; r++) {
        const int64_t f = r * 256;
        if (j->im)
            for (int k = 0; k < 256; k++) imr[k] = j->im[(f + k) % j->w->ncols];
        char msg[256];
        iqf_status st = iqf_quantize(j->type, j->src + f, q, 1, 256, j->im ? imr : NULL, &qp, msg, sizeof msg);
        if (!st) st = iqf_dequantize(j->type, q, j->dst + f, 1, 256, 1, msg, sizeof msg);
        int expected = 0;
        if (st && atomic_compare_exchange_strong(&j->st, &expected, (int)st))
            snprintf(j->msg, sizeof j->msg, "%s", msg);
    }
}

static iqf_status simulate(loader *ld, const iqf_model_params *p, iqf_weight *w) {
    iqf_model *m = ld->m;
    const int64_t nel = w->ncols * w->nrows * (w->n_mat > 1 ? w->n_mat : 1);
    if (nel % 256)
        return iqf_fail(ld->err, ld->errlen, IQF_E_SHAPE, "%s: %s has %lld elements, not a multiple of 256",
                    ld->path, w->name, (long long)nel);
    float *src = malloc((size_t)nel * sizeof(float));
    float *dst = malloc((size_t)nel * sizeof(float));
    int nt = p->n_threads > 0 ? p->n_threads : iqf_cpu_count();
    size_t rowq = iqf_row_size(p->simulate_type, 256);
    uint8_t *qbuf = malloc((size_t)nt * rowq + 1);
    float *imrow = malloc((size_t)nt * 256 * sizeof(float));
    void **owned = realloc(m->owned, sizeof(void *) * (size_t)(m->n_owned + 1));
    if (owned) m->owned = owned;
    if (!src || !dst || !qbuf || !imrow || !owned) {
        free(src); free(dst); free(qbuf); free(imrow);
        return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    }
    iqf_status st = iqf_dequantize(w->type, w->data, src, nel / w->ncols, w->ncols, nt, ld->err, ld->errlen);
    const float *im = NULL;
    if (!st && p->imatrix) im = p->imatrix(p->imatrix_user, w->name, w->ncols);
    simjob j = { w, src, dst, im, p->simulate_type, p->simulate_mode, 0, "", rowq, qbuf, imrow };
    if (!st) {
        iqf_parallel_for(nt, nel / 256, 1, sim_range, &j);
        if (atomic_load(&j.st)) st = iqf_fail(ld->err, ld->errlen, (iqf_status)atomic_load(&j.st), "%s: simulating %s on %s: %s", ld->path,
                            iqf_type_get(p->simulate_type)->name, w->name, j.msg);
    }
    free(src); free(qbuf); free(imrow);
    if (st) { free(dst); return st; }
    m->owned[m->n_owned++] = dst;
    w->type = IQF_TYPE_F32;
    w->row_bytes = (size_t)w->ncols * sizeof(float);
    w->data = (const uint8_t *)dst;
    return IQF_OK;
}

/* ----------------------------------------------------------------------------------------- */
/* Loading, in stages: architecture, hyper-parameters, rope, global tensors, layers.          */

bool iqf_ld_key_float(loader *ld, const char *suffix, float *out) {
    char key[128];
    double d;
    snprintf(key, sizeof key, "%s.%s", ld->m->info.arch, suffix);
    if (!iqf_gguf_get_float(ld->m->gguf, key, &d)) return false;
    *out = (float)d;
    return true;
}

/* general.architecture -> the table row (arch.h). */
static iqf_status load_arch(loader *ld) {
    iqf_model *m = ld->m;
    const char *arch = NULL;
    if (!iqf_gguf_get_str(m->gguf, "general.architecture", &arch, NULL))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: missing key general.architecture", ld->path);
    m->arch = iqf_arch_find(arch);
    const char *why = m->arch ? NULL : iqf_arch_refusal(arch);
    if (why)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: architecture '%s' is not supported: %s", ld->path, arch, why);
    if (!m->arch)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: unsupported architecture '%.40s' (supported: %s)", ld->path,
                        arch, iqf_arch_names());
    snprintf(m->info.arch, sizeof m->info.arch, "%s", arch);
    m->info.rope_neox = m->arch->rope != IQF_ROPE_NORMAL; /* M-RoPE rotates neox pairs */
    return IQF_OK;
}

/* Widths, depth, heads, experts. */
static iqf_status load_sizes(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    const iqf_arch *a = m->arch;
    iqf_status st = IQF_OK;
    const bool exp_key = a->exp_ff_key;
    /* the keys libllama reads with get_key_or_arr may be arrays of one value per layer (all
     * equal here: the engine runs one width) */
    if (!iqf_ld_key_int(ld, "embedding_length", true, 0, 1, 1 << 20, &h->n_embd, &st) ||
        !iqf_ld_key_int(ld, "block_count", true, 0, 1, 4096, &h->n_layer, &st) ||
        !iqf_ld_key_int(ld, "expert_count", false, 0, 0, 1024, &h->n_expert, &st) ||
        !iqf_ld_key_int_layers(ld, "expert_used_count", h->n_expert > 0, 0, h->n_expert > 0 ? 1 : 0, h->n_expert, &h->n_expert_used, &st) ||
        (a->layer_widths ? !iqf_ld_key_int_per_layer(ld, "feed_forward_length", h->n_expert == 0, 0, h->n_expert ? 0 : 1, 1 << 22, &h->n_ff, NULL, &st)
                         : !iqf_ld_key_int_layers(ld, "feed_forward_length", h->n_expert == 0, 0, h->n_expert ? 0 : 1, 1 << 22, &h->n_ff, &st)) ||
        /* read only where the row takes the experts' width from it and experts exist: a dense
         * model, or a llama MoE (experts n_ff wide), may carry 0 (llama.cpp's saver writes it);
         * where libllama reads it as optional (exp_ff_optional), absent or 0 means
         * feed_forward_length / expert_used_count (qwen3moe.cpp, qwen35moe.cpp) */
        (exp_key && h->n_expert > 0 &&
         !iqf_ld_key_int_layers(ld, "expert_feed_forward_length", !a->exp_ff_optional, 0, a->exp_ff_optional ? 0 : 1, 1 << 22,
                                &h->n_ff_exp, &st)) ||
        !iqf_ld_key_int_layers(ld, "attention.head_count", true, 0, 1, 1 << 16, &h->n_head, &st) ||
        (a->layer_widths ? !iqf_ld_key_int_per_layer(ld, "attention.head_count_kv", false, h->n_head, 1, h->n_head, &h->n_head_kv, NULL, &st)
                         : !iqf_ld_key_int_layers(ld, "attention.head_count_kv", false, h->n_head, 1, h->n_head, &h->n_head_kv, &st)) ||
        !iqf_ld_key_int(ld, "context_length", false, 2048, 0, INT32_MAX, &h->n_ctx_train, &st))
        return st;
    if (a->moe == IQF_MOE_REQUIRED && h->n_expert == 0)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s without %s.expert_count", ld->path, a->name, a->name);
    if (a->moe == IQF_MOE_NONE && h->n_expert > 0)
        return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: %s with %s.expert_count = %d: this engine runs %s dense only",
                        ld->path, a->name, a->name, h->n_expert, a->name);
    if (h->n_expert > 0) {
        if (!exp_key) h->n_ff_exp = h->n_ff; /* Mixtral: the experts are n_ff wide */
        else if (h->n_ff_exp == 0) h->n_ff_exp = h->n_ff / h->n_expert_used; /* exp_ff_optional */
        if (h->n_ff_exp < 1)
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: experts of width %d", ld->path, h->n_ff_exp);
        /* libllama's llama and qwen3moe graphs renormalise whatever expert_weights_norm says */
        h->expert_weights_norm = a->moe_norm_w;
    }
    if (h->n_head % h->n_head_kv)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: head_count %d is not a multiple of head_count_kv %d",
                        ld->path, h->n_head, h->n_head_kv);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.key_length", a->name);
    if (iqf_gguf_find_kv(m->gguf, key) < 0 && h->n_embd % h->n_head)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: embedding_length %d, head_count %d and head_count_kv %d are inconsistent",
                        ld->path, h->n_embd, h->n_head, h->n_head_kv);
    if (!iqf_ld_key_int(ld, "attention.key_length", false, h->n_embd / h->n_head, 2, 1 << 14, &h->head_dim, &st)) return st;
    const int hd = h->head_dim;
    int vl;
    if (!iqf_ld_key_int(ld, "rope.dimension_count", false, hd, 2, hd, &h->n_rot, &st) ||
        /* MLA files state the compressed widths: key kv_lora + rope, value kv_lora (load_mla) */
        !iqf_ld_key_int(ld, "attention.value_length", false, hd, a->attn == IQF_ATTN_MLA ? 1 : hd, hd, &vl, &st))
        return st;
    if (h->n_rot % 2) return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: odd rope.dimension_count %d", ld->path, h->n_rot);
    return IQF_OK;
}

/* YaRN as llama_context sets it up: ext_factor 1, beta_fast 32 and beta_slow 1 (hparams' defaults),
 * the original context rope.scaling.original_context_length (else context_length), attn_factor
 * get_mscale(factor) / (1 + 0.1 ln factor) times rope.scaling.attn_factor; ggml_rope_ext's
 * rope_yarn multiplies cos/sin by 1 + 0.1 ln factor again. rope.scaling.yarn_log_multiplier is
 * read by deepseek2 / mistral3 graphs only (not in the table). */
static iqf_status load_yarn(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    iqf_status st = IQF_OK;
    int n_orig;
    if (!iqf_ld_key_int(ld, "rope.scaling.original_context_length", false, h->n_ctx_train, 0, INT32_MAX, &n_orig, &st)) return st;
    m->n_ctx_orig_yarn = n_orig ? n_orig : h->n_ctx_train;
    m->yarn_ext = 1.0f;
    iqf_yarn_corr_dims(h->n_rot, m->n_ctx_orig_yarn, h->rope_base, 32.0f, 1.0f, m->yarn_corr);
    const float factor = 1.0f / h->rope_freq_scale;
    float af = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
    af *= 1.0f / (1.0f + 0.1f * logf(factor));
    h->rope_attn_factor *= af;
    return IQF_OK;
}

/* RoPE and the norm epsilon. RoPE scaling as llama_model::load_hparams and llama_context read
 * it: the type defaults to "linear"; the factor (0 = none) gives freq_scale = 1 / factor,
 * ignored for type "none"; attn_factor scales cos/sin. LongRoPE is not implemented. */
static iqf_status load_rope(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    h->rope_base = 10000.0f;
    iqf_ld_key_float(ld, "rope.freq_base", &h->rope_base);
    h->rms_eps = 1e-5f;
    iqf_ld_key_float(ld, "attention.layer_norm_rms_epsilon", &h->rms_eps);
    const char *sc = "linear";
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", h->arch);
    iqf_gguf_get_str(m->gguf, key, &sc, NULL);
    m->mla.ext_factor = m->arch->attn == IQF_ATTN_MLA && !strcmp(sc, "yarn") ? 1.0f : 0.0f; /* MLA's rope has YaRN */
    if (strcmp(sc, "none") != 0 && strcmp(sc, "linear") != 0 && strcmp(sc, "yarn") != 0)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: unsupported RoPE scaling '%.40s'", ld->path, sc);
    float factor = 0.0f;
    if (!iqf_ld_key_float(ld, "rope.scaling.factor", &factor)) iqf_ld_key_float(ld, "rope.scale_linear", &factor); /* the older name */
    h->rope_freq_scale = factor == 0.0f || !strcmp(sc, "none") ? 1.0f : 1.0f / factor;
    m->rope_scale_swa = factor == 0.0f ? 1.0f : 1.0f / factor; /* hparams' rope_freq_scale_train */
    h->rope_attn_factor = 1.0f;
    iqf_ld_key_float(ld, "rope.scaling.attn_factor", &h->rope_attn_factor);
    if (!strcmp(sc, "yarn")) {
        iqf_status st = load_yarn(ld);
        if (st) return st;
    }
    if (!isfinite(h->rope_freq_scale) || !(h->rope_freq_scale > 0) || !isfinite(h->rope_attn_factor))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad rope.scaling.factor %g or attn_factor %g", ld->path,
                        (double)factor, (double)h->rope_attn_factor);
    if (iqf_gguf_find_tensor(m->gguf, "rope_freqs.weight") >= 0) {
        /* libllama's llama graph divides each dimension pair's angle by its factor (ggml_rope_ext
         * freq_factors); its other graphs here do not read the tensor */
        if (!m->arch->rope_freqs)
            return iqf_fail(ld->err, ld->errlen, IQF_E_UNSUPPORTED, "%s: tensor rope_freqs.weight on a %s model (only llama and gemma4 read it)",
                            ld->path, h->arch);
        /* gemma4: [key_length / 2] (its global layers' head size), ggml reads the first n_rot / 2 */
        const int nf = (m->arch->rope_freqs_global ? h->head_dim : h->n_rot) / 2;
        iqf_status st = iqf_ld_load_vector(ld, &m->rope_freqs, "rope_freqs.weight", nf);
        if (st) return st;
        for (int i = 0; i < nf; i++)
            if (!isfinite(m->rope_freqs[i]) || m->rope_freqs[i] == 0.0f)
                return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: rope_freqs.weight[%d] = %g", ld->path, i, (double)m->rope_freqs[i]);
    }
    if (!(h->rope_base > 0) || !(h->rms_eps > 0) || !isfinite(h->rope_base))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad rope.freq_base or layer_norm_rms_epsilon", ld->path);
    return IQF_OK;
}

/* The vocabulary size from the embedding matrix, the embeddings, the output norm and matrix. */
static iqf_status load_globals(loader *ld) {
    iqf_model *m = ld->m;
    iqf_model_info *h = &m->info;
    int64_t ti = iqf_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (ti < 0) return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: missing tensor token_embd.weight", ld->path);
    int64_t nv = iqf_gguf_tensor_at(m->gguf, ti)->ne[1];
    if (nv < 1 || nv > INT32_MAX)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad vocabulary size %lld", ld->path, (long long)nv);
    h->n_vocab = (int)nv;
    const int64_t E = h->n_embd;
    iqf_status st;
    if ((st = load_matrix(ld, &m->tok_embd, "token_embd.weight", E, h->n_vocab, false)) ||
        (st = iqf_ld_load_vector(ld, &m->output_norm, "output_norm.weight", E)) ||
        (st = load_matrix(ld, &m->output, "output.weight", E, h->n_vocab, true)))
        return st;
    if (!m->output.data) {
        m->output = m->tok_embd;
        snprintf(m->output.name, sizeof m->output.name, "output.weight");
        h->tied_output = true;
    }
    m->output.id = -1;
    if (m->arch->output_bias && (st = load_vector_opt(ld, &m->output_b, "output.bias", h->n_vocab, true))) return st;
    m->layers = calloc((size_t)h->n_layer, sizeof(iqf_layer));
    m->mats = calloc((size_t)h->n_layer * IQF_MAX_WEIGHTS_PER_LAYER, sizeof(iqf_weight *));
    if (!m->layers || !m->mats) return iqf_fail(ld->err, ld->errlen, IQF_E_NOMEM, "out of memory");
    return IQF_OK;
}

/* Attention scale, logit softcapping, sliding-window layers (after load_globals: the layers
 * exist). llama_model_gemma3::load_arch_hparams: the window from attention.sliding_window (none
 * when absent or 0), the pattern an array of per-layer flags or a period (layer il slides
 * unless il % period == period - 1; default the row's), rope base rope.freq_base_swa (default
 * 10000) and rope scale 1 on the sliding layers; 1/sqrt(n_embd / n_head) for the 62-layer 27B. */
static iqf_status load_attn_kind(loader *ld) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    const iqf_arch *a = m->arch;
    iqf_status st = IQF_OK;
    m->attn_scale = a->attn_scale_one ? 1.0f : 1.0f / sqrtf((float)(a->attn_scale_rot ? h->n_rot : h->head_dim));
    if (a->q_prescale && h->n_layer == 62) m->attn_scale = 1.0f / sqrtf((float)(h->n_embd / h->n_head));
    if (a->softcap && iqf_ld_key_float(ld, "final_logit_softcapping", &m->softcap) && (!isfinite(m->softcap) || m->softcap < 0))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad final_logit_softcapping %g", ld->path, (double)m->softcap);
    if (!a->swa) return IQF_OK;
    if (!iqf_ld_key_int(ld, "attention.sliding_window", false, 0, 0, INT32_MAX, &m->n_swa, &st)) return st;
    if (m->n_swa == 0) return IQF_OK;
    /* gemma3: base 10000 and scale 1 unless the key says; gpt-oss: the global base and scale */
    m->rope_base_swa = a->swa_rope_global ? h->rope_base : 10000.0f;
    if (!a->swa_rope_global) m->rope_scale_swa = 1.0f;
    iqf_ld_key_float(ld, "rope.freq_base_swa", &m->rope_base_swa);
    if (!(m->rope_base_swa > 0) || !isfinite(m->rope_base_swa))
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: bad rope.freq_base_swa", ld->path);
    if (m->yarn_ext != 0.0f) iqf_yarn_corr_dims(h->n_rot, m->n_ctx_orig_yarn, m->rope_base_swa, 32.0f, 1.0f, m->yarn_corr_swa);
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", h->arch);
    const int64_t ki = iqf_gguf_find_kv(m->gguf, key);
    const int at = ki >= 0 && iqf_gguf_kv_type(m->gguf, ki) == IQF_GGUF_ARR ? iqf_gguf_arr_type(m->gguf, ki) : -1;
    if (at == IQF_GGUF_BOOL || at == IQF_GGUF_U32 || at == IQF_GGUF_I32) {
        uint64_t n = 0;
        const uint8_t *v = iqf_gguf_arr_data(m->gguf, ki, at, &n);
        const size_t es = at == IQF_GGUF_BOOL ? 1 : 4;
        for (uint64_t l = 0; v && l < n && l < (uint64_t)h->n_layer; l++) {
            uint32_t x = 0;
            memcpy(&x, v + l * es, es); /* non-zero: sliding (bools are one byte) */
            m->layers[l].swa = x != 0;
        }
        return IQF_OK;
    }
    if (at >= 0)
        return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: %s is an array of neither bools nor integers", ld->path, key);
    int period;
    if (!iqf_ld_key_int(ld, "attention.sliding_window_pattern", false, a->swa_pattern, 0, 1 << 20, &period, &st)) return st;
    for (int l = 0; l < h->n_layer; l++) m->layers[l].swa = period == 0 || l % period < period - 1;
    return IQF_OK;
}

/* Layer tensors: blk.<l>.<nm>.weight / .bias. A matrix joins the model's list of products
 * (imatrix slots, simulation). */
iqf_status iqf_ld_layer_vec(loader *ld, int l, const char *nm, const char *kind, int64_t n, bool optional, float **out) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.%s", l, nm, kind);
    return load_vector_opt(ld, out, name, n, optional);
}

iqf_status iqf_ld_layer_mat(loader *ld, int l, const char *nm, int64_t ne0, int64_t ne1, int n_mat, iqf_weight *w) {
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s.weight", l, nm);
    iqf_status st = load_experts(ld, w, name, ne0, ne1, n_mat, false);
    if (st) return st;
    w->id = ld->m->n_mats;
    ld->m->mats[ld->m->n_mats++] = w;
    return IQF_OK;
}

/* A per-tensor scale blk.<l>.<nm>.scale of n floats (libllama's generic pass loads them for
 * every architecture, ggml_mul on the product): *out (n = 1, 1 when absent) or *arr (n > 1). */
iqf_status iqf_ld_layer_scale(loader *ld, int l, const char *nm, int64_t n, float *out, float **arr) {
    float *v = NULL;
    iqf_status st = iqf_ld_layer_vec(ld, l, nm, "scale", n, true, &v);
    if (st || !v) {
        free(v);
        return st;
    }
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) {
            free(v);
            return iqf_fail(ld->err, ld->errlen, IQF_E_FORMAT, "%s: blk.%d.%s.scale is not finite", ld->path, l, nm);
        }
    if (arr) {
        *arr = v;
        return IQF_OK;
    }
    *out = v[0];
    free(v);
    return IQF_OK;
}

static iqf_status load_layer_attn(loader *ld, int l) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    const iqf_arch *a = m->arch;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = h->n_embd, hd = ly->hd, qdim = hd * h->n_head, kvdim = hd * ly->n_kv;
    const int64_t qmul = a->attn_out_gate ? 2 : 1; /* per head [q | gate] */
    /* a shared-KV layer (gemma4) reads another layer's cache: its attn_k / attn_v, if any, unused */
    const bool kv = ly->kv_src == l;
    char vname[96];
    snprintf(vname, sizeof vname, "blk.%d.attn_v.weight", l);
    const bool has_v = kv && (!a->v_norm || iqf_gguf_find_tensor(m->gguf, vname) >= 0); /* gemma4: V = K without attn_v */
    ly->sq = ly->sk = ly->sv = ly->so = ly->sgate = ly->sup = ly->sdown = 1.0f;
    iqf_status st;
    if ((st = iqf_ld_layer_vec(ld, l, "attn_norm", "weight", E, false, &ly->attn_norm))) return st;
    if (ly->gdn) return iqf_ld_load_layer_gdn(ld, l);
    if ((st = iqf_ld_layer_mat(ld, l, "attn_q", E, qdim * qmul, 1, &ly->wq)) ||
        (kv && (st = iqf_ld_layer_mat(ld, l, "attn_k", E, kvdim, 1, &ly->wk))) ||
        (has_v && (st = iqf_ld_layer_mat(ld, l, "attn_v", E, kvdim, 1, &ly->wv))) ||
        (st = iqf_ld_layer_mat(ld, l, "attn_output", qdim, E, 1, &ly->wo)) ||
        (st = iqf_ld_layer_vec(ld, l, "attn_q", "bias", qdim * qmul, true, &ly->bq)) ||
        (kv && (st = iqf_ld_layer_vec(ld, l, "attn_k", "bias", kvdim, true, &ly->bk))) ||
        (has_v && (st = iqf_ld_layer_vec(ld, l, "attn_v", "bias", kvdim, true, &ly->bv))) ||
        (st = iqf_ld_layer_scale(ld, l, "attn_q", 1, &ly->sq, NULL)) ||
        (kv && (st = iqf_ld_layer_scale(ld, l, "attn_k", 1, &ly->sk, NULL))) ||
        (has_v && (st = iqf_ld_layer_scale(ld, l, "attn_v", 1, &ly->sv, NULL))) ||
        (st = iqf_ld_layer_scale(ld, l, "attn_output", 1, &ly->so, NULL)))
        return st;
    if (a->wo_bias && (st = iqf_ld_layer_vec(ld, l, "attn_output", "bias", E, true, &ly->bo))) return st;
    if (a->qk_norm && ((st = iqf_ld_layer_vec(ld, l, "attn_q_norm", "weight", hd, false, &ly->q_norm)) ||
                       (kv && (st = iqf_ld_layer_vec(ld, l, "attn_k_norm", "weight", hd, false, &ly->k_norm)))))
        return st;
    if (a->attn_sinks && (st = iqf_ld_layer_vec(ld, l, "attn_sinks", "weight", h->n_head, false, &ly->attn_sinks))) return st;
    if (a->post_norms && ((st = iqf_ld_layer_vec(ld, l, "post_attention_norm", "weight", E, false, &ly->post_attn_norm)) ||
                          (st = iqf_ld_layer_vec(ld, l, "post_ffw_norm", "weight", E, false, &ly->post_ffn_norm))))
        return st;
    return IQF_OK;
}

static iqf_status load_layer_ffn(loader *ld, int l) {
    iqf_model *m = ld->m;
    const iqf_model_info *h = &m->info;
    const iqf_arch *a = m->arch;
    iqf_layer *ly = &m->layers[l];
    const int64_t E = h->n_embd, F = ly->n_ff;
    iqf_status st;
    if ((st = iqf_ld_layer_vec(ld, l, a->ffn_norm_name ? a->ffn_norm_name : "ffn_norm", "weight", E, false, &ly->ffn_norm))) return st;
    char gname[96];
    snprintf(gname, sizeof gname, "blk.%d.ffn_gate_inp.weight", l);
    /* gemma4: a layer has experts iff it has a router; the dense FFN is there either way */
    const bool both = a->moe_dense_ffn && h->n_expert > 0 && iqf_gguf_find_tensor(m->gguf, gname) >= 0;
    if (both && ((st = iqf_ld_layer_vec(ld, l, "ffn_gate_inp", "scale", E, false, &ly->gate_inp_s)) ||
                 (st = iqf_ld_layer_vec(ld, l, "pre_ffw_norm_2", "weight", E, false, &ly->pre_ffn_norm2)) ||
                 (st = iqf_ld_layer_vec(ld, l, "post_ffw_norm_1", "weight", E, false, &ly->post_ffn_norm1)) ||
                 (st = iqf_ld_layer_vec(ld, l, "post_ffw_norm_2", "weight", E, false, &ly->post_ffn_norm2))))
        return st;
    if (h->n_expert == 0 || (a->dense_lead && l < m->mla.n_dense_lead) || a->moe_dense_ffn) {
        if ((st = iqf_ld_layer_mat(ld, l, "ffn_gate", E, F, 1, &ly->wgate)) || (st = iqf_ld_layer_mat(ld, l, "ffn_up", E, F, 1, &ly->wup)) ||
            (st = iqf_ld_layer_mat(ld, l, "ffn_down", F, E, 1, &ly->wdown)))
            return st;
        if (a->ffn_bias && ((st = iqf_ld_layer_vec(ld, l, "ffn_gate", "bias", F, true, &ly->bgate)) ||
                            (st = iqf_ld_layer_vec(ld, l, "ffn_up", "bias", F, true, &ly->bup)) ||
                            (st = iqf_ld_layer_vec(ld, l, "ffn_down", "bias", E, true, &ly->bdown))))
            return st;
        if (a->ffn_scale && ((st = iqf_ld_layer_scale(ld, l, "ffn_gate", 1, &ly->sgate, NULL)) ||
                             (st = iqf_ld_layer_scale(ld, l, "ffn_up", 1, &ly->sup, NULL)) ||
                             (st = iqf_ld_layer_scale(ld, l, "ffn_down", 1, &ly->sdown, NULL))))
            return st;
        if (!both) return IQF_OK;
    }
    const int NE = h->n_expert;
    if (a->gating == IQF_GATING_KEYED) return iqf_ld_load_layer_moe_ds(ld, l);
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_up_exps.weight", l);
    const bool fused = iqf_gguf_find_tensor(m->gguf, name) >= 0; /* create_tensor_gate_up_exps */
    if ((st = iqf_ld_layer_mat(ld, l, "ffn_gate_inp", E, NE, 1, &ly->gate_inp)) ||
        (fused && (st = iqf_ld_layer_mat(ld, l, "ffn_gate_up_exps", E, 2 * (int64_t)h->n_ff_exp, NE, &ly->gate_up_exps))) ||
        (!fused && (st = iqf_ld_layer_mat(ld, l, "ffn_gate_exps", E, h->n_ff_exp, NE, &ly->gate_exps))) ||
        (!fused && (st = iqf_ld_layer_mat(ld, l, "ffn_up_exps", E, h->n_ff_exp, NE, &ly->up_exps))) ||
        (st = iqf_ld_layer_mat(ld, l, "ffn_down_exps", h->n_ff_exp, E, NE, &ly->down_exps)))
        return st;
    /* libllama reads the gate and up scales only beside separate gate and up tensors */
    if (a->ffn_scale && ((!fused && (st = iqf_ld_layer_scale(ld, l, "ffn_gate_exps", NE, NULL, &ly->sgate_exps))) ||
                         (!fused && (st = iqf_ld_layer_scale(ld, l, "ffn_up_exps", NE, NULL, &ly->sup_exps))) ||
                         (st = iqf_ld_layer_scale(ld, l, "ffn_down_exps", NE, NULL, &ly->sdown_exps))))
        return st;
    if (a->moe_biases && ((st = iqf_ld_layer_vec(ld, l, "ffn_gate_inp", "bias", NE, false, &ly->bgate_inp)) ||
                          (st = iqf_ld_layer_mat_f32(ld, l, "ffn_gate_exps.bias", h->n_ff_exp, NE, &ly->bgate_exps)) ||
                          (st = iqf_ld_layer_mat_f32(ld, l, "ffn_up_exps.bias", h->n_ff_exp, NE, &ly->bup_exps)) ||
                          (st = iqf_ld_layer_mat_f32(ld, l, "ffn_down_exps.bias", E, NE, &ly->bdown_exps))))
        return st;
    return a->shared_expert ? iqf_ld_load_layer_shexp(ld, l) : IQF_OK;
}

static iqf_status load_layer(loader *ld, int l) {
    iqf_status st = ld->m->arch->attn == IQF_ATTN_MLA ? iqf_ld_load_layer_mla(ld, l) : load_layer_attn(ld, l);
    if (!st) st = load_layer_ffn(ld, l);
    return st ? st : iqf_ld_load_layer_ple(ld, l);
}

/* The stages on an open handle (m->gguf set); frees m on failure. */
static iqf_status load_stages(iqf_model *m, const iqf_model_params *params, iqf_model **out, char *err, size_t errlen) {
    iqf_model_params p = params ? *params : iqf_model_default_params();
    loader ld = { m, iqf_gguf_path(m->gguf), err, errlen };
    iqf_status st = load_arch(&ld);
    if (!st) st = load_sizes(&ld);
    if (!st) st = load_rope(&ld);
    if (!st) st = load_globals(&ld);
    if (!st) st = load_attn_kind(&ld);
    if (!st) st = iqf_ld_load_layer_geometry(&ld);
    if (!st) st = iqf_ld_load_ple(&ld);
    if (!st && m->arch->attn == IQF_ATTN_GDN_HYBRID) st = iqf_ld_load_gdn_hparams(&ld);
    if (!st && m->arch->shared_expert) st = iqf_ld_load_shexp_hparams(&ld);
    if (!st) st = iqf_ld_load_mla(&ld);
    for (int l = 0; !st && l < m->info.n_layer; l++) st = load_layer(&ld, l);
    if (!st) st = load_vocab(&ld);
    if (!st && p.simulate_type >= 0)
        for (int i = 0; !st && i < m->n_mats; i++)
            if (!strstr(m->mats[i]->name, "ffn_gate_inp")) st = simulate(&ld, &p, m->mats[i]);
    if (st) {
        iqf_model_free(m);
        return st;
    }
    *out = m;
    return IQF_OK;
}

static iqf_status check_sim(const iqf_model_params *p, char *err, size_t errlen) {
    if (p && p->simulate_type >= 0 && !iqf_can_encode(p->simulate_type))
        return iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "cannot simulate %s: this build has no encoder for it",
                    iqf_type_get(p->simulate_type) ? iqf_type_get(p->simulate_type)->name : "an unknown type");
    return IQF_OK;
}

iqf_status iqf_model_load(const char *path, const iqf_model_params *params, iqf_model **out,
                          char *err, size_t errlen) {
    if (!path || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL path or output");
    *out = NULL;
    iqf_status st = check_sim(params, err, errlen);
    if (st) return st;
    iqf_model *m = calloc(1, sizeof *m);
    if (!m) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    char gerr[512];
    m->gguf = iqf_gguf_open(path, gerr, sizeof gerr);
    if (!m->gguf) {
        free(m);
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s", gerr);
    }
    return load_stages(m, params, out, err, errlen);
}

/* A handle rather than a path: a source (a checkpoint converted in memory, iqf_convert_open) has
 * its tensors produced into memory first, since the engine reads any weight at any time. */
iqf_status iqf_model_load_gguf(iqf_gguf *g, bool take, const iqf_model_params *params, iqf_model **out, char *err,
                               size_t errlen) {
    if (!g || !out) {
        if (take) iqf_gguf_close(g);
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL model handle or output");
    }
    *out = NULL;
    iqf_status st = check_sim(params, err, errlen);
    iqf_model *m = st ? NULL : calloc(1, sizeof *m);
    if (!st && !m) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    if (!st) st = iqf_gguf_materialize(g, err, errlen);
    if (st) {
        free(m);
        if (take) iqf_gguf_close(g);
        return st;
    }
    m->gguf = g;
    m->gguf_borrowed = !take;
    return load_stages(m, params, out, err, errlen);
}
