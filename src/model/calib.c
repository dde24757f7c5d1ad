/*
 * calib.c - the engine's side of --target-size's KLD calibration (iqf_calib in iqforge.h): the
 * model loaded, a calibration text tokenized (or sampled from the model), the unquantized
 * model's next-token log-probabilities stored, and the mean KL divergence of the model's with
 * some weights viewed as other data (a quantized copy) measured against them.
 */
#include "iqforge.h"
#include "calib.h"
#include "model.h"
#include "kld.h"
#include "tokenizer.h"
#include "../util/error.h"
#include "../util/infile.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The weights a view may replace, and the model's own view of each. */
typedef struct calib_weight {
    iqf_weight *w;
    iqf_weight own;
} calib_weight;

struct iqf_calib {
    iqf_model *m;
    iqf_context *c;
    int32_t *tok;
    int n_ctx, n_chunks, first, nv;
    float *base;   /* [chunk][row][nv] log-probs of the base model */
    float *logits, *lp;
    calib_weight *ws;
    int n_ws;
    /* the layer cache: every chunk's input of every layer and its final hidden state,
     * hid[(chunk * (n_layer + 1) + l) * n_ctx * n_embd], or NULL (iqf_calib_params.layers off) */
    float *hid;
    float *xw;     /* one chunk's working rows */
    int delta_chunks; /* iqf_calib_delta's chunks (the first ones) */
};

void iqf_calib_free(iqf_calib *c) {
    if (!c) return;
    for (int i = 0; i < c->n_ws; i++) iqf_calib_view(c, i, 0, NULL);
    free(c->tok), free(c->base), free(c->logits), free(c->lp), free(c->ws), free(c->hid), free(c->xw);
    iqf_context_free(c->c);
    iqf_model_free(c->m);
    free(c);
}

/* The whole calibration text (at most about 512 MiB read). */
static iqf_status read_text(const char *path, char **out, size_t *len, char *err, size_t errlen) {
    int why = 0;
    *out = iqf_read_file(path, 256u << 20, len, &why);
    if (*out) return IQF_OK;
    if (why == IQF_READ_OPEN) return iqf_fail(err, errlen, IQF_E_IO, "%s: cannot open: %s", path, strerror(errno));
    return iqf_fail(err, errlen, why == IQF_READ_NOMEM ? IQF_E_NOMEM : IQF_E_IO, "%s: cannot read", path);
}

/* The calibration text file tokenized with the model's vocabulary into c->tok (*ntok tokens). */
static iqf_status tokenize_text(iqf_calib *c, const char *model, const char *path, int32_t *ntok, char *err,
                                size_t errlen) {
    char msg[512];
    char *text = NULL;
    size_t len = 0;
    iqf_status st = read_text(path, &text, &len, err, errlen);
    if (st) return st;
    iqf_vocab *voc = iqf_vocab_load(iqf_model_gguf(c->m), msg, sizeof msg);
    if (!voc) {
        free(text);
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s", model, msg);
    }
    int32_t tcap = (int32_t)(len < (size_t)INT32_MAX / 2 ? len : (size_t)INT32_MAX / 2) + 4;
    c->tok = malloc(sizeof(int32_t) * (size_t)tcap);
    int32_t n = c->tok ? iqf_tokenize(voc, text, len, false, c->tok, tcap) : IQF_TOKENIZE_ERROR;
    if (n < 0 && n != IQF_TOKENIZE_ERROR) {
        tcap = -n;
        free(c->tok);
        c->tok = malloc(sizeof(int32_t) * (size_t)tcap);
        n = c->tok ? iqf_tokenize(voc, text, len, false, c->tok, tcap) : IQF_TOKENIZE_ERROR;
    }
    free(text);
    iqf_vocab_free(voc);
    if (n < 0) return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: tokenization failed", path);
    *ntok = n;
    return IQF_OK;
}

/* No text: the model's own samples (temperature 1, from BOS, a fixed seed), n_chunks of n_ctx. */
static iqf_status sample_text(iqf_calib *c, int n_threads, int32_t *ntok, char *err, size_t errlen) {
    const iqf_model_info *info = iqf_model_get_info(c->m);
    *ntok = c->n_ctx * c->n_chunks;
    c->tok = malloc(sizeof(int32_t) * (size_t)*ntok);
    float *lg = malloc(sizeof(float) * (size_t)info->n_vocab);
    if (!c->tok || !lg) {
        free(lg);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration)");
    }
    iqf_status st = iqf_context_new(c->m, c->n_ctx, n_threads, &c->c, err, errlen);
    uint64_t rs = 0x9E3779B97F4A7C15ull;
    for (int ch = 0; ch < c->n_chunks && !st; ch++) {
        int32_t *t = c->tok + (size_t)ch * (size_t)c->n_ctx;
        iqf_context_reset(c->c);
        t[0] = info->bos_id >= 0 ? info->bos_id : 0;
        for (int p = 0; p + 1 < c->n_ctx && !st; p++) {
            if ((st = iqf_decode(c->c, t + p, 1, p, 0, lg, err, errlen))) break;
            float mx = lg[0];
            for (int v = 1; v < info->n_vocab; v++) mx = fmaxf(mx, lg[v]);
            double sum = 0;
            for (int v = 0; v < info->n_vocab; v++) sum += exp((double)(lg[v] - mx));
            /* splitmix64 */
            uint64_t z = (rs += 0x9E3779B97F4A7C15ull);
            z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
            z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
            z ^= z >> 31;
            double u = ((double)(z >> 11) + 0.5) * 0x1p-53 * sum, acc = 0;
            int pick = info->n_vocab - 1;
            for (int v = 0; v < info->n_vocab; v++) {
                acc += exp((double)(lg[v] - mx));
                if (acc >= u) {
                    pick = v;
                    break;
                }
            }
            t[p + 1] = pick;
        }
    }
    free(lg);
    return st;
}

/* The KL(base || logits) of chunk ch's scored rows, summed. */
static double chunk_kld(iqf_calib *cb, int ch) {
    const int nr = cb->n_ctx - cb->first;
    double sum = 0;
    for (int r = 0; r < nr; r++) {
        const float *b = cb->base + ((size_t)ch * (size_t)nr + (size_t)r) * (size_t)cb->nv;
        iqf_log_softmax(cb->logits + (size_t)r * (size_t)cb->nv, cb->nv, cb->lp);
        double k = 0;
        for (int v = 0; v < cb->nv; v++) k += exp((double)b[v]) * ((double)b[v] - (double)cb->lp[v]);
        sum += k > 0 ? k : 0;
    }
    return sum;
}

/* Mean KL(base || model) over the scored rows; store: keep the rows as the base instead. */
static iqf_status calib_run(iqf_calib *cb, bool store, double *kld, char *err, size_t errlen) {
    const int nr = cb->n_ctx - cb->first;
    double sum = 0;
    for (int ch = 0; ch < cb->n_chunks; ch++) {
        iqf_context_reset(cb->c);
        iqf_status st = iqf_decode(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, 0, cb->first, cb->logits, err, errlen);
        if (st) return st;
        if (!store) {
            sum += chunk_kld(cb, ch);
            continue;
        }
        for (int r = 0; r < nr; r++)
            iqf_log_softmax(cb->logits + (size_t)r * (size_t)cb->nv, cb->nv, cb->base + ((size_t)ch * (size_t)nr + (size_t)r) * (size_t)cb->nv);
    }
    if (kld) *kld = sum / ((double)cb->n_chunks * (double)nr);
    return IQF_OK;
}

static float *hid_at(const iqf_calib *cb, int ch, int l) {
    const size_t L1 = (size_t)cb->m->info.n_layer + 1, row = (size_t)cb->n_ctx * (size_t)cb->m->info.n_embd;
    return cb->hid + ((size_t)ch * L1 + (size_t)l) * row;
}

/* The first layer to run so that layers l.. see their K/V: l, or an earlier layer whose K/V a
 * later one reads (gemma4's shared KV). */
static int start_layer(const iqf_calib *cb, int l) {
    int s = l;
    for (int j = l; j < cb->m->info.n_layer; j++)
        if (cb->m->layers[j].kv_src < s) s = cb->m->layers[j].kv_src;
    return s;
}

int iqf_calib_n_layers(const iqf_calib *c) { return c ? c->m->info.n_layer : 0; }

int iqf_calib_weight_layer(const iqf_calib *c, int id) {
    if (!c || id < 0 || id >= c->n_ws) return -1;
    const iqf_weight *w = c->ws[id].w;
    if (w == &c->m->tok_embd) return -1;
    if (w == &c->m->output) return c->m->info.n_layer;
    for (int l = 0; l < c->m->info.n_layer; l++) {
        const char *a = (const char *)&c->m->layers[l], *p = (const char *)w;
        if (p >= a && p < a + sizeof(iqf_layer)) return l;
    }
    return -1; /* the model's own (e.g. per_layer_model_proj): before the layers */
}

iqf_status iqf_calib_kld_from(iqf_calib *cb, int layer, double *kld, char *err, size_t errlen) {
    if (!cb || !kld) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    const int L = cb->m->info.n_layer;
    if (!cb->hid || layer < 0) return iqf_calib_kld(cb, kld, err, errlen);
    if (layer > L) layer = L;
    const int s = start_layer(cb, layer);
    const size_t xb = sizeof(float) * (size_t)cb->n_ctx * (size_t)cb->m->info.n_embd;
    double sum = 0;
    for (int ch = 0; ch < cb->n_chunks; ch++) {
        memcpy(cb->xw, hid_at(cb, ch, s), xb);
        iqf_status st = iqf_decode_layers(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, hid_at(cb, ch, 0), s, L,
                                          cb->xw, cb->first, cb->logits, err, errlen);
        if (st) return st;
        sum += chunk_kld(cb, ch);
    }
    *kld = sum / ((double)cb->n_chunks * (double)(cb->n_ctx - cb->first));
    return IQF_OK;
}

iqf_status iqf_calib_delta(iqf_calib *cb, int layer, double *delta, char *err, size_t errlen) {
    const int L = cb ? cb->m->info.n_layer : 0;
    if (!cb || !delta || !cb->hid || layer < 0 || layer >= L)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad layer-delta arguments");
    const int s = start_layer(cb, layer), E = cb->m->info.n_embd;
    const size_t n = (size_t)cb->n_ctx * (size_t)E;
    const int nch = cb->delta_chunks > 0 && cb->delta_chunks < cb->n_chunks ? cb->delta_chunks : cb->n_chunks;
    double sum = 0;
    for (int ch = 0; ch < nch; ch++) {
        memcpy(cb->xw, hid_at(cb, ch, s), n * sizeof(float));
        iqf_status st = iqf_decode_layers(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, hid_at(cb, ch, 0), s,
                                          layer + 1, cb->xw, cb->n_ctx, NULL, err, errlen);
        if (st) return st;
        const float *ref = hid_at(cb, ch, layer + 1);
        for (size_t i = 0; i < n; i++) {
            const double d = (double)cb->xw[i] - (double)ref[i];
            sum += d * d;
        }
    }
    *delta = sum / ((double)nch * (double)cb->n_ctx);
    return IQF_OK;
}

iqf_status iqf_calib_kld_stream(iqf_calib *cb, iqf_calib_layer_fn fn, void *user, double *kld, char *err, size_t errlen) {
    if (!cb || !fn || !kld || !cb->hid) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    const int L = cb->m->info.n_layer, E = cb->m->info.n_embd;
    const size_t row = (size_t)cb->n_ctx * (size_t)E;
    float *x = malloc(sizeof(float) * row * (size_t)cb->n_chunks), *x0 = malloc(sizeof(float) * row);
    iqf_status st = x && x0 ? IQF_OK : iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration)");
    /* token_embd (and what is before the layers) first; every layer over all chunks; output */
    if (!st) st = fn(user, -1, true, err, errlen);
    for (int ch = 0; ch < cb->n_chunks && !st; ch++)
        iqf_decode_embed(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, x + (size_t)ch * row);
    for (int l = 0; l < L && !st; l++) {
        if ((st = fn(user, l, true, err, errlen))) break;
        for (int ch = 0; ch < cb->n_chunks && !st; ch++) {
            const int32_t *tk = cb->tok + (size_t)ch * (size_t)cb->n_ctx;
            if (cb->m->n_ple) iqf_decode_embed(cb->c, tk, cb->n_ctx, x0); /* (with the viewed token_embd) */
            st = iqf_decode_layers(cb->c, tk, cb->n_ctx, x0, l, l + 1, x + (size_t)ch * row, cb->n_ctx, NULL, err, errlen);
        }
        if (!st) st = fn(user, l, false, err, errlen);
    }
    if (!st) st = fn(user, L, true, err, errlen);
    double sum = 0;
    for (int ch = 0; ch < cb->n_chunks && !st; ch++) {
        st = iqf_decode_layers(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, NULL, L, L, x + (size_t)ch * row,
                               cb->first, cb->logits, err, errlen);
        if (!st) sum += chunk_kld(cb, ch);
    }
    if (!st) st = fn(user, L, false, err, errlen);
    if (!st) st = fn(user, -1, false, err, errlen);
    free(x), free(x0);
    if (!st) *kld = sum / ((double)cb->n_chunks * (double)(cb->n_ctx - cb->first));
    return st;
}

iqf_status iqf_calib_kld(iqf_calib *c, double *kld, char *err, size_t errlen) {
    if (!c || !kld) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    return calib_run(c, false, kld, err, errlen);
}

/* The matrices a view may replace: token_embd and every matrix product's weight (the model's
 * list: the layers' attention, feed-forward and expert matrices) and output when not tied. */
static iqf_status list_weights(iqf_calib *c) {
    iqf_model *m = c->m;
    c->ws = calloc((size_t)m->n_mats + 2, sizeof *c->ws);
    if (!c->ws) return IQF_E_NOMEM;
    c->ws[c->n_ws++].w = &m->tok_embd;
    if (!m->info.tied_output) c->ws[c->n_ws++].w = &m->output;
    for (int i = 0; i < m->n_mats; i++)
        if (m->mats[i] != &m->output && m->mats[i] != &m->tok_embd) c->ws[c->n_ws++].w = m->mats[i];
    for (int i = 0; i < c->n_ws; i++) c->ws[i].own = *c->ws[i].w;
    return IQF_OK;
}

int iqf_calib_weight(const iqf_calib *c, const char *name, int64_t ncols, int64_t nrows) {
    if (!c || !name) return -1;
    for (int i = 0; i < c->n_ws; i++) {
        const iqf_weight *w = c->ws[i].w;
        if (!strcmp(w->name, name)) return w->ncols == ncols && w->nrows * (w->n_mat > 1 ? w->n_mat : 1) == nrows ? i : -1;
    }
    return -1;
}

/* Points weight w at (type, data); a tied output (the model's copy of token_embd) follows it. */
static void set_view(iqf_model *m, iqf_weight *w, int type, size_t row_bytes, const uint8_t *data) {
    w->type = type;
    w->row_bytes = row_bytes;
    w->data = data;
    if (w == &m->tok_embd && m->info.tied_output) {
        m->output.type = type;
        m->output.row_bytes = row_bytes;
        m->output.data = data;
    }
}

void iqf_calib_view(iqf_calib *c, int id, int type, const void *data) {
    if (!c || id < 0 || id >= c->n_ws) return;
    const calib_weight *cw = &c->ws[id];
    if (!data) set_view(c->m, cw->w, cw->own.type, cw->own.row_bytes, cw->own.data);
    else set_view(c->m, cw->w, type, iqf_row_size(type, cw->w->ncols), data);
}

/* After the tokens: chunk count, BOS, the buffers, and the base distributions. */
/* The base pass layer by layer: every layer's input of every chunk kept (the layer cache), then
 * the base distributions from the final hidden states. The same floats as iqf_decode. */
static iqf_status store_layers(iqf_calib *cb, char *err, size_t errlen) {
    const int L = cb->m->info.n_layer, nr = cb->n_ctx - cb->first;
    const size_t row = (size_t)cb->n_ctx * (size_t)cb->m->info.n_embd;
    cb->hid = malloc(sizeof(float) * row * (size_t)(L + 1) * (size_t)cb->n_chunks);
    cb->xw = malloc(sizeof(float) * row);
    if (!cb->hid || !cb->xw) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration layer cache)");
    for (int ch = 0; ch < cb->n_chunks; ch++) {
        const int32_t *tk = cb->tok + (size_t)ch * (size_t)cb->n_ctx;
        iqf_decode_embed(cb->c, tk, cb->n_ctx, hid_at(cb, ch, 0));
        for (int l = 1; l <= L; l++) {
            float *x = hid_at(cb, ch, l);
            memcpy(x, hid_at(cb, ch, l - 1), row * sizeof(float));
            iqf_status st = iqf_decode_layers(cb->c, tk, cb->n_ctx, hid_at(cb, ch, 0), l - 1, l, x, cb->n_ctx, NULL, err, errlen);
            if (st) return st;
        }
        memcpy(cb->xw, hid_at(cb, ch, L), row * sizeof(float));
        iqf_status st = iqf_decode_layers(cb->c, tk, cb->n_ctx, NULL, L, L, cb->xw, cb->first, cb->logits, err, errlen);
        if (st) return st;
        for (int r = 0; r < nr; r++)
            iqf_log_softmax(cb->logits + (size_t)r * (size_t)cb->nv, cb->nv,
                            cb->base + ((size_t)ch * (size_t)nr + (size_t)r) * (size_t)cb->nv);
    }
    return IQF_OK;
}

static iqf_status store_base(iqf_calib *cb, const char *what, int32_t ntok, int n_threads, bool layers, char *err,
                             size_t errlen) {
    const iqf_model_info *info = iqf_model_get_info(cb->m);
    if (cb->n_chunks > ntok / cb->n_ctx) cb->n_chunks = ntok / cb->n_ctx;
    if (cb->n_chunks < 1)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "%s: %d tokens, fewer than one chunk of %d", what, ntok, cb->n_ctx);
    if (info->add_bos && info->bos_id >= 0)
        for (int ch = 0; ch < cb->n_chunks; ch++) cb->tok[(size_t)ch * (size_t)cb->n_ctx] = info->bos_id;
    cb->first = cb->n_ctx / 2;
    cb->nv = info->n_vocab;
    const int nr = cb->n_ctx - cb->first;
    cb->base = malloc(sizeof(float) * (size_t)cb->n_chunks * (size_t)nr * (size_t)cb->nv);
    cb->logits = malloc(sizeof(float) * (size_t)nr * (size_t)cb->nv);
    cb->lp = malloc(sizeof(float) * (size_t)cb->nv);
    if (!cb->base || !cb->logits || !cb->lp) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration)");
    iqf_status st = IQF_OK;
    if (!cb->c) st = iqf_context_new(cb->m, cb->n_ctx, n_threads, &cb->c, err, errlen);
    if (!st && layers) st = store_layers(cb, err, errlen);
    else if (!st) st = calib_run(cb, true, NULL, err, errlen);
    return st;
}

iqf_status iqf_calib_open(const char *model, const iqf_calib_params *p, iqf_calib **out, char *err, size_t errlen) {
    if (!model || !p || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    *out = NULL;
    iqf_calib *cb = calloc(1, sizeof *cb);
    if (!cb) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    iqf_model_params mp = iqf_model_default_params();
    mp.n_threads = p->n_threads;
    iqf_status st = p->input ? iqf_model_load_gguf(p->input, false, &mp, &cb->m, err, errlen)
                             : iqf_model_load(model, &mp, &cb->m, err, errlen);
    if (st) {
        iqf_calib_free(cb);
        return st;
    }
    if (list_weights(cb)) {
        iqf_calib_free(cb);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    const iqf_model_info *info = iqf_model_get_info(cb->m);
    cb->n_ctx = p->n_ctx > 0 ? p->n_ctx : 128;
    if (info->n_ctx_train > 0 && cb->n_ctx > info->n_ctx_train) cb->n_ctx = info->n_ctx_train;
    if (p->layers && cb->n_ctx > IQF_MAX_BATCH) cb->n_ctx = IQF_MAX_BATCH; /* one decode piece per chunk */
    if (cb->n_ctx < 8) cb->n_ctx = 8;
    cb->n_chunks = p->n_chunks > 0 ? p->n_chunks : 4;
    cb->delta_chunks = p->delta_chunks;
    int32_t ntok = 0;
    st = p->text ? tokenize_text(cb, model, p->text, &ntok, err, errlen) : sample_text(cb, p->n_threads, &ntok, err, errlen);
    if (!st) st = store_base(cb, p->text ? p->text : "the generated calibration text", ntok, p->n_threads, p->layers, err, errlen);
    if (st) {
        iqf_calib_free(cb);
        return st;
    }
    *out = cb;
    return IQF_OK;
}
