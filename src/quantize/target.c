/*
 * target.c - `quantize --target-size S | --target-bpw B`: measure each tensor's error in every
 * candidate type, weigh it by a sensitivity, allocate types under the whole-file budget
 * (target_alloc.c) and quantize with the result as exact-name --tensor-type patterns, so the
 * pipeline (pipeline.c) is used unchanged and a saved plan is a --tensor-type-file.
 *
 * Measurement (measure_tensor): the rows measured are all rows, or for a tensor of more than 2^20
 * weights and more than sample_min rows max(sample_min, ceil(sample * nrows)) rows spaced evenly (row
 * floor((k + 0.5) * nrows / n)); the tensor's error is nrows times the mean row error, its
 * standard error nrows * sqrt(var / n * (1 - n / nrows)). Encoding goes through iqf_quantize with
 * the run's mode (compat or best), one call per candidate over the sampled rows, so measured
 * blocks are the blocks the file will hold. (Error feedback, when it lands, changes the encoder
 * of a whole tensor; encode_rows is the one place that would call it.)
 *
 * Sensitivity: see iqf_target_sens in iqforge.h. The KLD calibration loads the input with the
 * engine, swaps one weight at a time for a float32 copy of its probe-type quantization, and
 * compares next-token distributions with the unquantized model's on the calibration text.
 */
#include "iqforge.h"
#include "target.h"
#include "../util/error.h"

#include "../stats/imatrix.h"
#include "recipe.h"
#include "../model/model.h"
#include "../model/tokenizer.h"
#include "../util/outfile.h"
#include "../util/parallel.h"
#include "../util/progress.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

iqf_target_params iqf_target_default_params(void) {
    iqf_target_params p;
    memset(&p, 0, sizeof p);
    p.sens = IQF_TARGET_SENS_AUTO;
    p.calib_type = -1;
    p.calib_rounds = 0;
    return p;
}

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
}

static bool is_embd_or_output(const char *n) {
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight") || !strcmp(n, "output.weight");
}

int iqf_target_candidates(const char *name, int64_t ncols, bool has_imatrix, int *out, int cap) {
    static const int k256[] = {
        IQF_TYPE_IQ1_S, IQF_TYPE_IQ1_M, IQF_TYPE_IQ2_XXS, IQF_TYPE_IQ2_XS, IQF_TYPE_IQ2_S, IQF_TYPE_Q2_K,
        IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S, IQF_TYPE_Q3_K, IQF_TYPE_IQ4_XS, IQF_TYPE_Q4_K, IQF_TYPE_Q5_K,
        IQF_TYPE_Q6_K, IQF_TYPE_Q8_0, IQF_TYPE_F16,
    };
    static const int k32[] = {
        IQF_TYPE_IQ4_NL, IQF_TYPE_Q4_0, IQF_TYPE_Q4_1, IQF_TYPE_Q5_0, IQF_TYPE_Q5_1, IQF_TYPE_Q8_0, IQF_TYPE_F16,
    };
    const int *list = ncols % 256 == 0 ? k256 : k32;
    const int nl = ncols % 256 == 0 ? (int)(sizeof k256 / sizeof k256[0]) : (int)(sizeof k32 / sizeof k32[0]);
    int n = 0;
    for (int i = 0; i < nl && n < cap; i++) {
        const int t = list[i];
        const iqf_type_info *ti = iqf_type_get(t);
        if (!ti || ncols % ti->blck_size != 0 || !iqf_can_encode(t)) continue;
        if (!has_imatrix) {
            if (iqf_requires_imatrix(t)) continue;
            if (!is_embd_or_output(name) && (t == IQF_TYPE_IQ3_XXS || t == IQF_TYPE_IQ2_S || t == IQF_TYPE_IQ1_M))
                continue;
        }
        out[n++] = t;
    }
    if (n == 0 && cap > 0) out[n++] = IQF_TYPE_F16; /* rows not a multiple of 32 */
    return n;
}

/* ---------------------------------------------------------------------------------------------
 * Exact metadata size
 * ------------------------------------------------------------------------------------------- */
static uint64_t vsize(int vt) {
    switch (vt) {
    case IQF_GGUF_U8: case IQF_GGUF_I8: case IQF_GGUF_BOOL: return 1;
    case IQF_GGUF_U16: case IQF_GGUF_I16: return 2;
    case IQF_GGUF_U32: case IQF_GGUF_I32: case IQF_GGUF_F32: return 4;
    default: return 8;
    }
}

static uint64_t kv_size(const iqf_gguf *g, int64_t i) {
    uint64_t s = 8 + strlen(iqf_gguf_kv_key(g, i)) + 4;
    const int t = iqf_gguf_kv_type(g, i);
    if (t == IQF_GGUF_STR) return s + 8 + iqf_gguf_kv_str_len(g, i);
    if (t != IQF_GGUF_ARR) return s + vsize(t);
    const int et = iqf_gguf_arr_type(g, i);
    const uint64_t n = iqf_gguf_arr_n(g, i);
    s += 4 + 8;
    if (et == IQF_GGUF_STR) {
        for (uint64_t j = 0; j < n; j++) {
            size_t len = 0;
            iqf_gguf_arr_str(g, i, j, &len);
            s += 8 + len;
        }
        return s;
    }
    return s + n * vsize(et);
}

static bool is_removed_key(const char *k) {
    return !strcmp(k, "split.no") || !strcmp(k, "split.count") || !strcmp(k, "split.tensors.count") ||
           !strcmp(k, "general.quantization_version") || !strcmp(k, "general.file_type") ||
           !strncmp(k, "quantize.imatrix.", 17) || !strcmp(k, "quantize.mode");
}

static size_t cut127(const char *s) {
    size_t n = s ? strlen(s) : 0;
    return n > 127 ? 127 : n;
}

uint64_t iqf_target_meta_size(const iqf_gguf *g, const char *imatrix_file, const char *dataset, bool have_imatrix,
                              int chunk_count, int mode, const char *hessian_file, uint64_t *align_out) {
    uint64_t s = 24;
    for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++) {
        const char *k = iqf_gguf_kv_key(g, i);
        /* keys the pipeline sets (they are then removed and appended) or removes */
        if (is_removed_key(k)) {
            /* a quantize.imatrix.* or quantize.mode key the pipeline does not set again stays */
            bool set_again = !strncmp(k, "split.", 6) || !strcmp(k, "general.quantization_version") ||
                             !strcmp(k, "general.file_type");
            if (have_imatrix && (!strcmp(k, "quantize.imatrix.file") || !strcmp(k, "quantize.imatrix.entries_count")))
                set_again = true;
            if (have_imatrix && dataset && !strcmp(k, "quantize.imatrix.dataset")) set_again = true;
            if (have_imatrix && chunk_count > 0 && !strcmp(k, "quantize.imatrix.chunks_count")) set_again = true;
            if (mode != IQF_MODE_COMPAT && !strcmp(k, "quantize.mode")) set_again = true;
            if (set_again) continue;
        }
        if (hessian_file && !strncmp(k, "quantize.feedback.", 18)) continue; /* set again below */
        s += kv_size(g, i);
    }
    s += 8 + strlen("general.quantization_version") + 4 + 4;
    s += 8 + strlen("general.file_type") + 4 + 4;
    if (have_imatrix) {
        s += 8 + strlen("quantize.imatrix.file") + 4 + 8 + cut127(imatrix_file);
        if (dataset) s += 8 + strlen("quantize.imatrix.dataset") + 4 + 8 + cut127(dataset);
        s += 8 + strlen("quantize.imatrix.entries_count") + 4 + 4;
        if (chunk_count > 0) s += 8 + strlen("quantize.imatrix.chunks_count") + 4 + 4;
    }
    if (mode != IQF_MODE_COMPAT) s += 8 + strlen("quantize.mode") + 4 + 8 + strlen(iqf_mode_name(mode));
    if (hessian_file) { /* iqf_feedback_write_meta: file (cut at 127 bytes), token count u64, damp f32 */
        s += 8 + strlen("quantize.feedback.file") + 4 + 8 + cut127(hessian_file);
        s += 8 + strlen("quantize.feedback.token_count") + 4 + 8;
        s += 8 + strlen("quantize.feedback.damp") + 4 + 4;
    }
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        s += 8 + strlen(t->name) + 4 + 8 * (uint64_t)iqf_recipe_n_dims(t->ne) + 4 + 8;
    }
    uint64_t align = IQF_GGUF_DEFAULT_ALIGN;
    uint32_t a;
    if (iqf_gguf_get_u32(g, "general.alignment", &a) && a && !(a & (a - 1))) align = a;
    if (align_out) *align_out = align;
    return (s + align - 1) / align * align;
}

void iqf_target_pattern(const char *name, char *out, size_t cap) {
    size_t k = 0;
    if (cap < 3) {
        if (cap) out[0] = 0;
        return;
    }
    out[k++] = '^';
    for (const char *p = name; *p && k + 3 < cap; p++) {
        if (strchr(".[]()*+?^$|\\{}", *p)) out[k++] = '\\';
        out[k++] = *p;
    }
    out[k++] = '$';
    out[k] = 0;
}

/* ---------------------------------------------------------------------------------------------
 * Measurement
 * ------------------------------------------------------------------------------------------- */
typedef struct cand {
    int type;
    uint64_t bytes;  /* padded */
    double err, se;  /* raw imatrix-weighted error of the tensor, its standard error */
    double sens;     /* cost per unit of err */
    double kld;      /* calibration: measured KLD when probed, else -1 */
} cand;

typedef struct titem {
    const iqf_gguf_tensor *t;
    iqf_recipe_choice rc;
    bool quantizable, fixed;
    int type;                  /* fixed type, or the chosen one */
    const float *im;           /* ne0 * ne2, or NULL */
    int n_cand;
    cand c[IQF_TARGET_MAX_CAND];
    double signal;             /* sum im * w^2 over the tensor (estimate) */
    double weight;             /* sensitivity */
    int chosen;                /* candidate index */
} titem;

/* tensors of at most this many weights are measured on all rows */
#define SAMPLE_ALL_WEIGHTS (1 << 20)

static uint64_t padded(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

static int64_t n_rows(const iqf_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* Encodes rows (each row r has expert ex[r]) with one iqf_quantize call per run of one expert. */
static iqf_status encode_rows(int type, const float *x, void *q, int64_t n, int64_t ncols, const int64_t *ex,
                              const float *im, const iqf_quantize_params *qp, char *msg, size_t msglen) {
    const size_t rs = iqf_row_size(type, ncols);
    for (int64_t r = 0; r < n;) {
        int64_t e = r + 1;
        while (e < n && ex[e] == ex[r]) e++;
        const float *imx = im ? im + ex[r] * ncols : NULL;
        iqf_status st = iqf_quantize(type, x + r * ncols, (uint8_t *)q + (size_t)r * rs, e - r, ncols, imx, qp, msg, msglen);
        if (st) return st;
        r = e;
    }
    return IQF_OK;
}

static iqf_status measure_tensor(titem *it, const iqf_target_params *tp, const iqf_quantize_params *qp,
                                 uint64_t align, char *err, size_t errlen) {
    const iqf_gguf_tensor *t = it->t;
    const int64_t ncols = t->ne[0], nrows = n_rows(t);
    const int smin = tp->sample_min > 0 ? tp->sample_min : 128;
    const double frac = tp->sample > 0 ? tp->sample : 1.0 / 32;
    int64_t n = nrows;
    if (frac < 1 && nrows > smin && nrows * ncols > SAMPLE_ALL_WEIGHTS) {
        n = (int64_t)ceil(frac * (double)nrows);
        if (n < smin) n = smin;
        if (n > nrows) n = nrows;
    }
    char msg[512];
    iqf_status st = IQF_OK;
    float *x = malloc(sizeof(float) * (size_t)(n * ncols));
    float *y = malloc(sizeof(float) * (size_t)(n * ncols));
    int64_t *ex = malloc(sizeof(int64_t) * (size_t)n);
    double *re = malloc(sizeof(double) * (size_t)n);
    size_t maxrs = 0;
    for (int c = 0; c < it->n_cand; c++) {
        size_t rs = iqf_row_size(it->c[c].type, ncols);
        if (rs > maxrs) maxrs = rs;
    }
    uint8_t *q = malloc(maxrs * (size_t)n + 1);
    if (!x || !y || !ex || !re || !q) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (measuring %s)", t->name);
        goto done;
    }
    const size_t src_rs = iqf_row_size(t->type, ncols);
    for (int64_t k = 0; k < n; k++) {
        const int64_t r = n == nrows ? k : (int64_t)(((double)k + 0.5) * (double)nrows / (double)n);
        ex[k] = r / t->ne[1];
        const uint8_t *src = (const uint8_t *)t->data + (size_t)r * src_rs;
        if (t->type == IQF_TYPE_F32) memcpy(x + k * ncols, src, sizeof(float) * (size_t)ncols);
        else if ((st = iqf_dequantize(t->type, src, x + k * ncols, 1, ncols, 1, msg, sizeof msg))) {
            st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
            goto done;
        }
    }
    /* signal energy */
    double sig = 0;
    for (int64_t k = 0; k < n; k++) {
        const float *w = it->im ? it->im + ex[k] * ncols : NULL;
        const float *xr = x + k * ncols;
        double s = 0;
        for (int64_t j = 0; j < ncols; j++) s += (w ? (double)w[j] : 1.0) * (double)xr[j] * (double)xr[j];
        sig += s;
    }
    it->signal = sig * (double)nrows / (double)n;
    for (int c = 0; c < it->n_cand; c++) {
        cand *cd = &it->c[c];
        cd->bytes = padded((uint64_t)iqf_row_size(cd->type, ncols) * (uint64_t)nrows, align);
        st = encode_rows(cd->type, x, q, n, ncols, ex, it->im, qp, msg, sizeof msg);
        if (!st) st = iqf_dequantize(cd->type, q, y, n, ncols, qp->n_threads, msg, sizeof msg);
        if (st) {
            st = iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(cd->type), msg);
            goto done;
        }
        double sum = 0, sum2 = 0;
        for (int64_t k = 0; k < n; k++) {
            const float *w = it->im ? it->im + ex[k] * ncols : NULL;
            const float *xr = x + k * ncols, *yr = y + k * ncols;
            double e = 0;
            for (int64_t j = 0; j < ncols; j++) {
                const double d = (double)xr[j] - (double)yr[j];
                e += (w ? (double)w[j] : 1.0) * d * d;
            }
            re[k] = e;
            sum += e;
        }
        const double mean = sum / (double)n;
        for (int64_t k = 0; k < n; k++) sum2 += (re[k] - mean) * (re[k] - mean);
        cd->err = sum * (double)nrows / (double)n;
        cd->se = 0;
        if (n < nrows && n > 1) {
            const double var = sum2 / (double)(n - 1);
            cd->se = (double)nrows * sqrt(var / (double)n * (1.0 - (double)n / (double)nrows));
        }
    }
done:
    free(x), free(y), free(ex), free(re), free(q);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * KLD calibration
 * ------------------------------------------------------------------------------------------- */
static iqf_weight *find_weight(iqf_model *m, const char *name) {
    if (!strcmp(m->tok_embd.name, name)) return &m->tok_embd;
    if (!m->info.tied_output && !strcmp(m->output.name, name)) return &m->output;
    for (int l = 0; l < m->info.n_layer; l++) {
        iqf_layer *L = &m->layers[l];
        iqf_weight *ws[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->wgate, &L->wup, &L->wdown };
        for (int i = 0; i < 7; i++)
            if (!strcmp(ws[i]->name, name)) return ws[i];
    }
    return NULL;
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

static void log_softmax(const float *l, int nv, float *out) {
    float mx = l[0];
    for (int v = 1; v < nv; v++) mx = fmaxf(mx, l[v]);
    double s = 0;
    for (int v = 0; v < nv; v++) s += exp((double)(l[v] - mx));
    const double ls = log(s);
    for (int v = 0; v < nv; v++) out[v] = (float)((double)(l[v] - mx) - ls);
}

typedef struct calib {
    iqf_model *m;
    iqf_context *c;
    int32_t *tok;
    int n_ctx, n_chunks, first, nv;
    float *base;   /* [chunk][row][nv] log-probs of the base model */
    float *logits, *lp;
} calib;

/* Mean KL(base || model) over the scored rows; base_out: store instead of comparing. */
static iqf_status calib_run(calib *cb, bool store, double *kld, char *err, size_t errlen) {
    const int nr = cb->n_ctx - cb->first;
    double sum = 0;
    for (int ch = 0; ch < cb->n_chunks; ch++) {
        iqf_context_reset(cb->c);
        iqf_status st = iqf_decode(cb->c, cb->tok + (size_t)ch * (size_t)cb->n_ctx, cb->n_ctx, 0, cb->first, cb->logits, err, errlen);
        if (st) return st;
        for (int r = 0; r < nr; r++) {
            float *b = cb->base + ((size_t)ch * (size_t)nr + (size_t)r) * (size_t)cb->nv;
            if (store) {
                log_softmax(cb->logits + (size_t)r * (size_t)cb->nv, cb->nv, b);
                continue;
            }
            log_softmax(cb->logits + (size_t)r * (size_t)cb->nv, cb->nv, cb->lp);
            double k = 0;
            for (int v = 0; v < cb->nv; v++) k += exp((double)b[v]) * ((double)b[v] - (double)cb->lp[v]);
            sum += k > 0 ? k : 0;
        }
    }
    if (kld) *kld = sum / ((double)cb->n_chunks * (double)nr);
    return IQF_OK;
}

static void calib_free(calib *c) {
    if (!c) return;
    free(c->tok), free(c->base), free(c->logits), free(c->lp);
    iqf_context_free(c->c);
    iqf_model_free(c->m);
    free(c);
}

/* Loads the model and the text, stores the base distributions, and measures every free tensor
 * alone at its probe types. On success *keep owns the loaded model (for calib_context). */
static iqf_status calibrate(const char *in, titem *items, int nt, const iqf_target_params *tp,
                            const iqf_quantize_params *qp, FILE *logf, calib **keep, char *err, size_t errlen) {
    char msg[512];
    iqf_status st = IQF_OK;
    calib *cbp = calloc(1, sizeof *cbp);
    if (!cbp) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    calib cb;
    memset(&cb, 0, sizeof cb);
    iqf_vocab *voc = NULL;
    char *text = NULL;
    float *f32 = NULL, *deq = NULL;
    uint8_t *qb = NULL;
    iqf_model_params mp = iqf_model_default_params();
    mp.n_threads = qp->n_threads;
    st = iqf_model_load(in, &mp, &cb.m, err, errlen);
    if (st) return st;
    const iqf_model_info *info = iqf_model_get_info(cb.m);
    cb.n_ctx = tp->calib_ctx > 0 ? tp->calib_ctx : 128;
    if (info->n_ctx_train > 0 && cb.n_ctx > info->n_ctx_train) cb.n_ctx = info->n_ctx_train;
    if (cb.n_ctx < 8) cb.n_ctx = 8;
    cb.n_chunks = tp->calib_chunks > 0 ? tp->calib_chunks : 8;
    const char *tname_ = tp->calib_text ? tp->calib_text : "the generated calibration text";
    int32_t ntok = 0;
    if (tp->calib_text) {
        FILE *f = fopen(tp->calib_text, "rb");
        if (!f) {
            st = iqf_fail(err, errlen, IQF_E_IO, "%s: cannot open: %s", tp->calib_text, strerror(errno));
            goto done;
        }
        size_t cap = 1 << 16, len = 0;
        text = malloc(cap + 1);
        while (text) {
            size_t r = fread(text + len, 1, cap - len, f);
            len += r;
            if (len < cap) break;
            if (cap > (256u << 20)) break;
            char *t2 = realloc(text, cap * 2 + 1);
            if (!t2) break;
            text = t2;
            cap *= 2;
        }
        const bool rerr = ferror(f);
        fclose(f);
        if (!text || rerr) {
            st = iqf_fail(err, errlen, text ? IQF_E_IO : IQF_E_NOMEM, "%s: cannot read", tp->calib_text);
            goto done;
        }
        text[len] = 0;
        voc = iqf_vocab_load(iqf_model_gguf(cb.m), msg, sizeof msg);
        if (!voc) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s", in, msg);
            goto done;
        }
        int32_t tcap = (int32_t)(len < (size_t)INT32_MAX / 2 ? len : (size_t)INT32_MAX / 2) + 4;
        cb.tok = malloc(sizeof(int32_t) * (size_t)tcap);
        ntok = cb.tok ? iqf_tokenize(voc, text, len, false, cb.tok, tcap) : IQF_TOKENIZE_ERROR;
        if (ntok < 0 && ntok != IQF_TOKENIZE_ERROR) {
            tcap = -ntok;
            free(cb.tok);
            cb.tok = malloc(sizeof(int32_t) * (size_t)tcap);
            ntok = cb.tok ? iqf_tokenize(voc, text, len, false, cb.tok, tcap) : IQF_TOKENIZE_ERROR;
        }
        if (ntok < 0) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: tokenization failed", tp->calib_text);
            goto done;
        }
    } else {
        /* No text: the model's own samples (temperature 1, from BOS, a fixed seed). */
        ntok = cb.n_ctx * cb.n_chunks;
        cb.tok = malloc(sizeof(int32_t) * (size_t)ntok);
        float *lg = malloc(sizeof(float) * (size_t)info->n_vocab);
        if (!cb.tok || !lg) {
            free(lg);
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration)");
            goto done;
        }
        if ((st = iqf_context_new(cb.m, cb.n_ctx, qp->n_threads, &cb.c, err, errlen))) {
            free(lg);
            goto done;
        }
        uint64_t rs = 0x9E3779B97F4A7C15ull;
        for (int ch = 0; ch < cb.n_chunks && !st; ch++) {
            int32_t *t = cb.tok + (size_t)ch * (size_t)cb.n_ctx;
            iqf_context_reset(cb.c);
            t[0] = info->bos_id >= 0 ? info->bos_id : 0;
            for (int p = 0; p + 1 < cb.n_ctx && !st; p++) {
                if ((st = iqf_decode(cb.c, t + p, 1, p, 0, lg, err, errlen))) break;
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
        if (st) goto done;
    }
    if (cb.n_chunks > ntok / cb.n_ctx) cb.n_chunks = ntok / cb.n_ctx;
    if (cb.n_chunks < 1) {
        st = iqf_fail(err, errlen, IQF_E_INVALID_ARG, "%s: %d tokens, fewer than one chunk of %d", tname_, ntok, cb.n_ctx);
        goto done;
    }
    if (info->add_bos && info->bos_id >= 0)
        for (int ch = 0; ch < cb.n_chunks; ch++) cb.tok[(size_t)ch * (size_t)cb.n_ctx] = info->bos_id;
    cb.first = cb.n_ctx / 2;
    cb.nv = info->n_vocab;
    const int nr = cb.n_ctx - cb.first;
    cb.base = malloc(sizeof(float) * (size_t)cb.n_chunks * (size_t)nr * (size_t)cb.nv);
    cb.logits = malloc(sizeof(float) * (size_t)nr * (size_t)cb.nv);
    cb.lp = malloc(sizeof(float) * (size_t)cb.nv);
    if (!cb.base || !cb.logits || !cb.lp) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibration)");
        goto done;
    }
    if (!cb.c && (st = iqf_context_new(cb.m, cb.n_ctx, qp->n_threads, &cb.c, err, errlen))) goto done;
    if ((st = calib_run(&cb, true, NULL, err, errlen))) goto done;
    size_t fcap = 0, qcap = 0;
    for (int i = 0; i < nt; i++) {
        titem *it = &items[i];
        if (it->fixed || !it->quantizable) continue;
        iqf_weight *w = find_weight(cb.m, it->t->name);
        const int64_t ncols = it->t->ne[0], nrows = n_rows(it->t);
        if (!w || w->ncols != ncols || w->nrows != nrows) {
            for (int c = 0; c < it->n_cand; c++) it->c[c].sens = 0; /* a tensor the engine does not use */
            continue;
        }
        /* the probe types this tensor takes */
        int probes[IQF_TARGET_MAX_CAND], np = 0;
        for (int c = 0; c < it->n_cand; c++) {
            const int ty = it->c[c].type;
            bool is_probe = tp->calib_all;
            for (int q = 0; q < tp->n_calib_types && !is_probe; q++) is_probe = tp->calib_types[q] == ty;
            if (!tp->calib_all && tp->n_calib_types <= 0)
                is_probe = ty == (tp->calib_type >= 0 ? tp->calib_type : ncols % 256 == 0 ? IQF_TYPE_Q3_K : IQF_TYPE_Q4_0);
            if (is_probe && ty != IQF_TYPE_F16) probes[np++] = c;
        }
        if (np == 0) probes[np++] = 0;
        const iqf_gguf_tensor *t = it->t;
        const size_t need = (size_t)(nrows * ncols);
        if (need > fcap) {
            free(f32), free(deq);
            f32 = malloc(need * sizeof(float));
            deq = malloc(need * sizeof(float));
            fcap = f32 && deq ? need : 0;
        }
        size_t qneed = 0;
        for (int q = 0; q < np; q++) {
            size_t b = iqf_row_size(it->c[probes[q]].type, ncols) * (size_t)nrows;
            if (b > qneed) qneed = b;
        }
        if (qneed > qcap) {
            free(qb);
            qb = malloc(qneed);
            qcap = qb ? qneed : 0;
        }
        int64_t *ex = malloc(sizeof(int64_t) * (size_t)nrows);
        if (fcap < need || qcap < qneed || !ex) {
            free(ex);
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", it->t->name);
            goto done;
        }
        for (int64_t r = 0; r < nrows; r++) ex[r] = r / t->ne[1];
        if (t->type == IQF_TYPE_F32) memcpy(f32, t->data, need * sizeof(float));
        else if ((st = iqf_dequantize(t->type, t->data, f32, nrows, ncols, qp->n_threads, msg, sizeof msg))) {
            free(ex);
            st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
            goto done;
        }
        double ps[IQF_TARGET_MAX_CAND], pe[IQF_TARGET_MAX_CAND]; /* sensitivity, log err of each probe */
        for (int q = 0; q < np; q++) {
            cand *cd = &it->c[probes[q]];
            const int pt = cd->type;
            st = encode_rows(pt, f32, qb, nrows, ncols, ex, it->im, qp, msg, sizeof msg);
            if (!st) st = iqf_dequantize(pt, qb, deq, nrows, ncols, qp->n_threads, msg, sizeof msg);
            if (st) {
                free(ex);
                st = iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(pt), msg);
                goto done;
            }
            double e = 0;
            for (int64_t r = 0; r < nrows; r++) {
                const float *wv = it->im ? it->im + (r / t->ne[1]) * ncols : NULL;
                for (int64_t j = 0; j < ncols; j++) {
                    const double d = (double)f32[r * ncols + j] - (double)deq[r * ncols + j];
                    e += (wv ? (double)wv[j] : 1.0) * d * d;
                }
            }
            const iqf_weight saved = *w;
            set_view(cb.m, w, IQF_TYPE_F32, (size_t)ncols * sizeof(float), (const uint8_t *)deq);
            double kld = 0;
            st = calib_run(&cb, false, &kld, err, errlen);
            set_view(cb.m, w, saved.type, saved.row_bytes, saved.data);
            if (st) {
                free(ex);
                goto done;
            }
            cd->kld = kld;
            ps[q] = e > 0 ? kld / e : 0;
            pe[q] = log(e > 1e-300 ? e : 1e-300);
            if (logf)
                fprintf(logf, "calibrate: %-32s %-7s err %.4e  KLD %.6f  sensitivity %.4e\n", t->name, tname(pt), e, kld, ps[q]);
        }
        free(ex);
        /* probes sorted by err (insertion sort) */
        for (int a = 1; a < np; a++)
            for (int b2 = a; b2 > 0 && pe[b2] < pe[b2 - 1]; b2--) {
                double x = pe[b2]; pe[b2] = pe[b2 - 1]; pe[b2 - 1] = x;
                x = ps[b2]; ps[b2] = ps[b2 - 1]; ps[b2 - 1] = x;
            }
        for (int c = 0; c < it->n_cand; c++) {
            cand *cd = &it->c[c];
            const double le = log(cd->err > 1e-300 ? cd->err : 1e-300);
            double s;
            if (np == 1 || le <= pe[0]) s = ps[0];
            else if (le >= pe[np - 1]) s = ps[np - 1];
            else {
                int q = 0;
                while (q + 1 < np - 1 && le > pe[q + 1]) q++;
                const double f = pe[q + 1] > pe[q] ? (le - pe[q]) / (pe[q + 1] - pe[q]) : 0;
                /* interpolate log s where both are positive, else linearly */
                if (ps[q] > 0 && ps[q + 1] > 0) s = exp(log(ps[q]) + f * (log(ps[q + 1]) - log(ps[q])));
                else s = ps[q] + f * (ps[q + 1] - ps[q]);
            }
            cd->sens = s;
        }
    }
done:
    free(f32), free(deq), free(qb), free(text);
    iqf_vocab_free(voc);
    *cbp = cb;
    if (st) calib_free(cbp);
    else *keep = cbp;
    return st;
}

/* In context: every free tensor quantized to its chosen type at once (the engine decodes the
 * blocks), the joint KLD measured, then each tensor's marginal contribution (joint KLD minus the
 * KLD with only that tensor restored); each tensor's sensitivity curve is rescaled so that it
 * gives that marginal at its chosen type (the factor clamped to [1/8, 8]). */
static iqf_status calib_context(calib *cb, titem *items, int nt, const iqf_quantize_params *qp, FILE *logf,
                                double *joint, char *err, size_t errlen) {
    char msg[512];
    iqf_status st = IQF_OK;
    uint8_t **qd = calloc((size_t)(nt > 0 ? nt : 1), sizeof *qd);
    iqf_weight *saved = calloc((size_t)(nt > 0 ? nt : 1), sizeof *saved);
    iqf_weight **wp = calloc((size_t)(nt > 0 ? nt : 1), sizeof *wp);
    double *e_full = calloc((size_t)(nt > 0 ? nt : 1), sizeof *e_full);
    float *f32 = NULL, *deq = NULL;
    int64_t *ex = NULL;
    size_t fcap = 0;
    if (!qd || !saved || !wp || !e_full) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nt; i++) {
        titem *it = &items[i];
        if (it->fixed || !it->quantizable) continue;
        iqf_weight *w = find_weight(cb->m, it->t->name);
        const int64_t ncols = it->t->ne[0], nrows = n_rows(it->t);
        if (!w || w->ncols != ncols || w->nrows != nrows) continue;
        const int ty = it->c[it->chosen].type;
        const size_t need = (size_t)(nrows * ncols), qb = iqf_row_size(ty, ncols) * (size_t)nrows;
        if (need > fcap) {
            free(f32), free(deq);
            f32 = malloc(need * sizeof(float));
            deq = malloc(need * sizeof(float));
            fcap = f32 && deq ? need : 0;
        }
        free(ex);
        ex = malloc((size_t)nrows * sizeof(int64_t));
        qd[i] = malloc(qb ? qb : 1);
        if (fcap < need || !qd[i] || !ex) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", it->t->name);
            goto done;
        }
        const iqf_gguf_tensor *t = it->t;
        for (int64_t r = 0; r < nrows; r++) ex[r] = r / t->ne[1];
        if (t->type == IQF_TYPE_F32) memcpy(f32, t->data, need * sizeof(float));
        else st = iqf_dequantize(t->type, t->data, f32, nrows, ncols, qp->n_threads, msg, sizeof msg);
        if (!st) st = encode_rows(ty, f32, qd[i], nrows, ncols, ex, it->im, qp, msg, sizeof msg);
        if (!st) st = iqf_dequantize(ty, qd[i], deq, nrows, ncols, qp->n_threads, msg, sizeof msg);
        if (st) {
            st = iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(ty), msg);
            goto done;
        }
        double e = 0;
        for (int64_t r = 0; r < nrows; r++) {
            const float *wv = it->im ? it->im + (r / t->ne[1]) * ncols : NULL;
            for (int64_t j = 0; j < ncols; j++) {
                const double d = (double)f32[r * ncols + j] - (double)deq[r * ncols + j];
                e += (wv ? (double)wv[j] : 1.0) * d * d;
            }
        }
        e_full[i] = e;
        wp[i] = w;
        saved[i] = *w;
        set_view(cb->m, w, ty, iqf_row_size(ty, ncols), qd[i]);
    }
    double jk = 0;
    if ((st = calib_run(cb, false, &jk, err, errlen))) goto done;
    *joint = jk;
    for (int i = 0; i < nt; i++) {
        if (!wp[i]) continue;
        titem *it = &items[i];
        const iqf_weight q = *wp[i];
        set_view(cb->m, wp[i], saved[i].type, saved[i].row_bytes, saved[i].data);
        double k = 0;
        st = calib_run(cb, false, &k, err, errlen);
        set_view(cb->m, wp[i], q.type, q.row_bytes, q.data);
        if (st) goto done;
        cand *cd = &it->c[it->chosen];
        const double m = jk - k, cur = cd->sens * e_full[i];
        double f = cur > 0 ? m / cur : 1;
        if (!(f >= 0.125)) f = 0.125;
        if (f > 8) f = 8;
        for (int c = 0; c < it->n_cand; c++) it->c[c].sens *= f;
        if (logf)
            fprintf(logf, "calibrate: in context %-32s %-7s marginal KLD %.6f (alone predicted %.6f): x%.3f\n", it->t->name,
                    tname(cd->type), m, cur, f);
    }
done:
    for (int i = 0; i < nt; i++) {
        if (wp && wp[i]) set_view(cb->m, wp[i], saved[i].type, saved[i].row_bytes, saved[i].data);
        if (qd) free(qd[i]);
    }
    free(qd), free(saved), free(wp), free(e_full), free(f32), free(deq), free(ex);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * The plan
 * ------------------------------------------------------------------------------------------- */
static int cmp_tensor(const void *a, const void *b) {
    return iqf_recipe_name_cmp((*(const iqf_gguf_tensor *const *)a)->name, (*(const iqf_gguf_tensor *const *)b)->name);
}

/* The llama file type recorded for a plan whose bytes are mostly of `type`. */
static int label_ftype(int type) {
    switch (type) {
    case IQF_TYPE_IQ1_S: return IQF_FTYPE_MOSTLY_IQ1_S;
    case IQF_TYPE_IQ1_M: return IQF_FTYPE_MOSTLY_IQ1_M;
    case IQF_TYPE_IQ2_XXS: return IQF_FTYPE_MOSTLY_IQ2_XXS;
    case IQF_TYPE_IQ2_XS: return IQF_FTYPE_MOSTLY_IQ2_XS;
    case IQF_TYPE_IQ2_S: return IQF_FTYPE_MOSTLY_IQ2_S;
    case IQF_TYPE_IQ3_XXS: return IQF_FTYPE_MOSTLY_IQ3_XXS;
    case IQF_TYPE_IQ3_S: return IQF_FTYPE_MOSTLY_IQ3_S;
    case IQF_TYPE_IQ4_XS: return IQF_FTYPE_MOSTLY_IQ4_XS;
    case IQF_TYPE_IQ4_NL: return IQF_FTYPE_MOSTLY_IQ4_NL;
    case IQF_TYPE_Q2_K: return IQF_FTYPE_MOSTLY_Q2_K;
    case IQF_TYPE_Q3_K: return IQF_FTYPE_MOSTLY_Q3_K_M;
    case IQF_TYPE_Q4_K: return IQF_FTYPE_MOSTLY_Q4_K_M;
    case IQF_TYPE_Q5_K: return IQF_FTYPE_MOSTLY_Q5_K_M;
    case IQF_TYPE_Q6_K: return IQF_FTYPE_MOSTLY_Q6_K;
    case IQF_TYPE_Q4_0: return IQF_FTYPE_MOSTLY_Q4_0;
    case IQF_TYPE_Q4_1: return IQF_FTYPE_MOSTLY_Q4_1;
    case IQF_TYPE_Q5_0: return IQF_FTYPE_MOSTLY_Q5_0;
    case IQF_TYPE_Q5_1: return IQF_FTYPE_MOSTLY_Q5_1;
    default: return IQF_FTYPE_MOSTLY_Q8_0; /* q8_0, f16: the override needs a quantized default */
    }
}

void iqf_target_plan_free(iqf_target_plan *p) {
    if (!p) return;
    free(p->e);
    free(p);
}

iqf_status iqf_target_plan_make(const char *in, const iqf_model_quantize_params *qp, const iqf_target_params *tp,
                                iqf_target_plan **out, FILE *log, char *err, size_t errlen) {
    char msg[512];
    iqf_status st = IQF_OK;
    iqf_gguf *g = NULL;
    iqf_imatrix im;
    memset(&im, 0, sizeof im);
    const iqf_gguf_tensor **ts = NULL;
    titem *items = NULL;
    iqf_recipe_tensor *rt = NULL;
    iqf_recipe_choice *rc = NULL;
    iqf_recipe_override *ov = NULL;
    int n_ov = 0;
    iqf_target_plan *plan = NULL;
    int *kk = NULL, *choice = NULL, *map = NULL, *best_choice = NULL;
    calib *cal = NULL;
    const uint64_t **bb = NULL;
    const double **cc = NULL;
    double *costs = NULL;
    uint64_t *bytes = NULL;
    if (out) *out = NULL;
    if (!in || !qp || !tp || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    if (qp->pure) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--pure cannot be combined with --target-size/--target-bpw");
    if (!qp->imatrix_path)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--target-size/--target-bpw need an importance matrix (--imatrix)");
    if ((tp->target_size > 0) == (tp->target_bpw > 0))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "give exactly one of --target-size and --target-bpw");
    if (tp->target_bpw < 0 || !isfinite(tp->target_bpw))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid --target-bpw %g", tp->target_bpw);
    if (!iqf_mode_name(qp->mode)) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "unknown encoder mode %d", (int)qp->mode);
    const double t0 = iqf_now();
    iqf_quantize_params qz = iqf_quantize_default_params();
    qz.n_threads = qp->n_threads > 0 ? qp->n_threads : iqf_cpu_count();
    qz.mode = qp->mode;

    g = iqf_gguf_open(in, msg, sizeof msg);
    if (!g) return iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    if ((st = iqf_imatrix_load(qp->imatrix_path, &im, err, errlen))) goto done;
    iqf_imatrix_filter(&im, qp->include_weights, qp->n_include, qp->exclude_weights, qp->n_exclude);
    for (int i = 0; i < im.n_entries; i++)
        for (int64_t j = 0; j < im.entries[i].n; j++) {
            const float x = im.entries[i].values[j];
            if (!isfinite(x) || x < 0) {
                st = iqf_fail(err, errlen, IQF_E_NONFINITE, "%s: entry %s has a %s value (%g) at column %" PRId64,
                              qp->imatrix_path, im.entries[i].name, isfinite(x) ? "negative" : "non-finite", (double)x, j);
                goto done;
            }
        }
    const bool have_im = im.n_entries > 0;
    if (!have_im) {
        st = iqf_fail(err, errlen, IQF_E_INVALID_ARG, "%s: no importance-matrix entries left to use", qp->imatrix_path);
        goto done;
    }

    /* Tensors in loader order, the recipe's view of them (which may be quantized, user choices). */
    const int nt = (int)iqf_gguf_n_tensors(g);
    ts = calloc((size_t)(nt > 0 ? nt : 1), sizeof *ts);
    items = calloc((size_t)(nt > 0 ? nt : 1), sizeof *items);
    rt = calloc((size_t)(nt > 0 ? nt : 1), sizeof *rt);
    rc = calloc((size_t)(nt > 0 ? nt : 1), sizeof *rc);
    ov = calloc((size_t)(qp->n_tensor_types > 0 ? qp->n_tensor_types : 1), sizeof *ov);
    if (!ts || !items || !rt || !rc || !ov) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nt; i++) ts[i] = iqf_gguf_tensor_at(g, i);
    qsort(ts, (size_t)nt, sizeof *ts, cmp_tensor);
    for (int i = 0; i < nt; i++) {
        rt[i].name = ts[i]->name;
        memcpy(rt[i].ne, ts[i]->ne, sizeof rt[i].ne);
        rt[i].type = ts[i]->type;
    }
    if ((st = iqf_recipe_overrides_compile(qp->tensor_type_patterns, qp->tensor_type_types, qp->n_tensor_types, ov,
                                             &n_ov, err, errlen)))
        goto done;
    iqf_recipe_model hp;
    memset(&hp, 0, sizeof hp);
    const char *arch;
    if (!iqf_gguf_get_str(g, "general.architecture", &arch, NULL) || !*arch || strlen(arch) >= sizeof hp.arch) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: general.architecture missing or not a string", in);
        goto done;
    }
    snprintf(hp.arch, sizeof hp.arch, "%s", arch);
    {
        char k[128];
        int64_t v;
        snprintf(k, sizeof k, "%s.block_count", arch);
        hp.n_layer = iqf_gguf_get_int(g, k, &v) && v >= 0 && v < 100000 ? (int)v : 0;
    }
    iqf_recipe_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ftype = IQF_FTYPE_MOSTLY_Q8_0;
    ro.output_tensor_type = qp->output_tensor_type;
    ro.token_embedding_type = qp->token_embedding_type;
    ro.quantize_output_tensor = !qp->leave_output_tensor;
    ro.has_imatrix = true;
    ro.overrides = ov;
    ro.n_overrides = n_ov;
    if ((st = iqf_recipe_plan(&hp, &ro, rt, nt, rc, NULL, msg, sizeof msg))) {
        st = iqf_fail(err, errlen, st, "%s: %s", in, msg);
        goto done;
    }
    bool tied = iqf_gguf_find_tensor(g, "output.weight") < 0;
    uint64_t align = 32;
    const uint64_t meta = iqf_target_meta_size(g, qp->imatrix_path, im.n_datasets > 0 ? im.datasets[0] : NULL, true,
                                               im.chunk_count, qp->mode, qp->hessian_path, &align);
    uint64_t fixed_bytes = 0, min_free = 0, max_free = 0;
    int64_t n_weights = 0;
    int n_free = 0;
    for (int i = 0; i < nt; i++) {
        titem *it = &items[i];
        it->t = ts[i];
        it->rc = rc[i];
        n_weights += iqf_gguf_tensor_nelements(ts[i]);
        it->quantizable = rc[i].allows_quantization;
        const char *name = ts[i]->name;
        bool user = false;
        if (it->quantizable) {
            for (int o = 0; o < n_ov && !user; o++) user = regexec(&ov[o].re, name, 0, NULL, 0) == 0;
            if (qp->token_embedding_type >= 0 && (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")))
                user = true;
            if (qp->output_tensor_type >= 0 && !strcmp(name, "output.weight")) user = true;
            if (qp->output_tensor_type >= 0 && tied && !strcmp(name, "token_embd.weight")) {
                user = true;
                if (qp->token_embedding_type < 0) rc[i].type = it->rc.type = qp->output_tensor_type;
            }
        }
        it->fixed = !it->quantizable || user;
        it->type = it->fixed ? rc[i].type : -1;
        if (it->fixed) {
            const uint64_t nb = it->type == ts[i]->type ? ts[i]->nbytes
                                                        : (uint64_t)iqf_row_size(it->type, ts[i]->ne[0]) * (uint64_t)n_rows(ts[i]);
            fixed_bytes += padded(nb, align);
            continue;
        }
        const iqf_imatrix_entry *e = iqf_imatrix_find(&im, name);
        if (e && e->n == ts[i]->ne[0] * ts[i]->ne[2]) it->im = e->values;
        else if (e && strcmp(name, "token_embd.weight") && strcmp(name, "per_layer_token_embd.weight")) {
            st = iqf_fail(err, errlen, IQF_E_SHAPE,
                          "imatrix size %" PRId64 " is different from tensor size %" PRId64 " for %s (imatrix made for another model?)",
                          e->n, ts[i]->ne[0] * ts[i]->ne[2], name);
            goto done;
        }
        if (!iqf_type_get(ts[i]->type)->is_quantized ? false : !qp->allow_requantize) {
            st = iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "%s: tensor %s is already quantized (%s); requantizing is disabled (--allow-requantize)",
                          in, name, tname(ts[i]->type));
            goto done;
        }
        if (ts[i]->type != IQF_TYPE_F32 && !iqf_can_decode(ts[i]->type)) {
            st = iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "%s: tensor %s has type %s, which cannot be converted", in, name, tname(ts[i]->type));
            goto done;
        }
        int types[IQF_TARGET_MAX_CAND];
        it->n_cand = iqf_target_candidates(name, ts[i]->ne[0], it->im != NULL, types, IQF_TARGET_MAX_CAND);
        uint64_t mn = UINT64_MAX, mx = 0;
        for (int c = 0; c < it->n_cand; c++) {
            it->c[c].type = types[c];
            it->c[c].bytes = padded((uint64_t)iqf_row_size(types[c], ts[i]->ne[0]) * (uint64_t)n_rows(ts[i]), align);
            if (it->c[c].bytes < mn) mn = it->c[c].bytes;
            if (it->c[c].bytes > mx) mx = it->c[c].bytes;
        }
        min_free += mn;
        max_free += mx;
        n_free++;
    }
    const uint64_t min_size = meta + fixed_bytes + min_free, max_size = meta + fixed_bytes + max_free;
    uint64_t budget = tp->target_size;
    if (tp->target_bpw > 0) {
        const double b = floor(tp->target_bpw * (double)n_weights / 8.0);
        budget = b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
    }
    if (budget < min_size) {
        st = iqf_fail(err, errlen, IQF_E_INVALID_ARG,
                      "target size %" PRIu64 " bytes (%.4f bpw) is below the smallest file the candidate types allow (%" PRIu64 " bytes, %.4f bpw)",
                      budget, (double)budget * 8.0 / (double)n_weights, min_size, (double)min_size * 8.0 / (double)n_weights);
        goto done;
    }
    if (budget > max_size) {
        st = iqf_fail(err, errlen, IQF_E_INVALID_ARG,
                      "target size %" PRIu64 " bytes (%.4f bpw) is above the largest file the candidate types allow (%" PRIu64 " bytes, %.4f bpw, F16)",
                      budget, (double)budget * 8.0 / (double)n_weights, max_size, (double)max_size * 8.0 / (double)n_weights);
        goto done;
    }
    if (log)
        fprintf(log, "target: %" PRIu64 " bytes (%.4f bpw); %d tensors to choose, %d fixed; metadata %" PRIu64 " bytes, fixed tensors %" PRIu64 " bytes\n",
                budget, (double)budget * 8.0 / (double)n_weights, n_free, nt - n_free, meta, fixed_bytes);

    /* Measure. */
    int64_t done_w = 0, tot_w = 0;
    for (int i = 0; i < nt; i++)
        if (!items[i].fixed) tot_w += iqf_gguf_tensor_nelements(items[i].t);
    iqf_progress prog;
    iqf_progress_init(&prog, log == NULL, nt, tot_w);
    double max_rse = 0;
    for (int i = 0; i < nt; i++) {
        titem *it = &items[i];
        if (it->fixed) continue;
        iqf_progress_update(&prog, i + 1, it->t->name, "measure", done_w);
        if ((st = measure_tensor(it, tp, &qz, align, err, errlen))) goto done;
        done_w += iqf_gguf_tensor_nelements(it->t);
        for (int c = 0; c < it->n_cand; c++)
            if (it->c[c].err > 0 && it->c[c].se / it->c[c].err > max_rse && it->c[c].type != IQF_TYPE_F16)
                max_rse = it->c[c].se / it->c[c].err;
        it->weight = tp->sens == IQF_TARGET_SENS_NONE ? 1.0 : it->signal > 0 ? 1.0 / it->signal : 1.0;
        for (int c = 0; c < it->n_cand; c++) {
            it->c[c].sens = it->weight;
            it->c[c].kld = -1;
        }
    }
    iqf_progress_done(&prog);
    const double t1 = iqf_now();
    if (log) fprintf(log, "target: measured in %.2f s (largest relative standard error from row sampling: %.2f%%)\n", t1 - t0, 100 * max_rse);

    /* Calibrate. */
    if (tp->sens == IQF_TARGET_SENS_KLD) {
        if ((st = calibrate(in, items, nt, tp, &qz, log, &cal, err, errlen))) goto done;
    } else if (tp->sens == IQF_TARGET_SENS_AUTO) {
        const double ctx = tp->calib_ctx > 0 ? tp->calib_ctx : 128, ch = tp->calib_chunks > 0 ? tp->calib_chunks : 8;
        const double cost = (double)n_free * ctx * ch * (double)n_weights;
        if (cost <= 5e11) {
            iqf_target_params t2 = *tp;
            t2.sens = IQF_TARGET_SENS_KLD;
            char e2[512];
            st = calibrate(in, items, nt, &t2, &qz, log, &cal, e2, sizeof e2);
            if (st && log) fprintf(log, "target: no calibration (%s); errors weighed by relative error\n", e2);
            if (st) /* the sensitivities were not all set: back to the relative weights */
                for (int i = 0; i < nt; i++)
                    for (int c = 0; c < items[i].n_cand; c++) items[i].c[c].sens = items[i].weight;
            st = IQF_OK;
        } else if (log) {
            fprintf(log, "target: model too large for the automatic calibration (%.1e multiply-adds); errors weighed "
                         "by relative error (--calibrate TEXT or --calibrate-self to calibrate anyway)\n", cost);
        }
    }
    double t2 = iqf_now();

    /* Allocate. */
    kk = calloc((size_t)(n_free ? n_free : 1), sizeof *kk);
    choice = calloc((size_t)(n_free ? n_free : 1), sizeof *choice);
    map = calloc((size_t)(n_free ? n_free : 1), sizeof *map);
    bb = calloc((size_t)(n_free ? n_free : 1), sizeof *bb);
    cc = calloc((size_t)(n_free ? n_free : 1), sizeof *cc);
    costs = calloc((size_t)(n_free ? n_free : 1) * IQF_TARGET_MAX_CAND, sizeof *costs);
    bytes = calloc((size_t)(n_free ? n_free : 1) * IQF_TARGET_MAX_CAND, sizeof *bytes);
    if (!kk || !choice || !map || !bb || !cc || !costs || !bytes) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0, f = 0; i < nt; i++) {
        const titem *it = &items[i];
        if (it->fixed) continue;
        map[f] = i;
        kk[f] = it->n_cand;
        for (int c = 0; c < it->n_cand; c++) {
            costs[f * IQF_TARGET_MAX_CAND + c] = it->c[c].sens * it->c[c].err;
            bytes[f * IQF_TARGET_MAX_CAND + c] = it->c[c].bytes;
        }
        bb[f] = bytes + f * IQF_TARGET_MAX_CAND;
        cc[f] = costs + f * IQF_TARGET_MAX_CAND;
        f++;
    }
    uint64_t used = 0;
    double total = 0;
    if ((st = iqf_target_allocate(n_free, kk, bb, cc, budget - meta - fixed_bytes, choice, &used, &total, err, errlen)))
        goto done;
    double t3 = iqf_now();
    if (cal) {
        /* In-context rounds: measure the plan jointly, rescale, reallocate; keep the plan whose
         * joint KLD on the calibration text is lowest. */
        const int rounds = tp->calib_rounds >= 0 ? tp->calib_rounds : 3;
        best_choice = malloc(sizeof(int) * (size_t)(n_free ? n_free : 1));
        if (!best_choice) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        double best = INFINITY;
        for (int r = 0; r <= rounds; r++) {
            for (int f = 0; f < n_free; f++) items[map[f]].chosen = choice[f];
            double jk = 0;
            if ((st = calib_context(cal, items, nt, &qz, r < rounds ? log : NULL, &jk, err, errlen))) goto done;
            if (log) fprintf(log, "calibrate: round %d: plan of predicted KLD %.6f has joint KLD %.6f\n", r, total, jk);
            if (jk < best) {
                best = jk;
                if (n_free > 0) memcpy(best_choice, choice, sizeof(int) * (size_t)n_free);
            }
            if (r == rounds) break;
            for (int f = 0; f < n_free; f++)
                for (int c = 0; c < items[map[f]].n_cand; c++)
                    costs[f * IQF_TARGET_MAX_CAND + c] = items[map[f]].c[c].sens * items[map[f]].c[c].err;
            if ((st = iqf_target_allocate(n_free, kk, bb, cc, budget - meta - fixed_bytes, choice, &used, &total, err, errlen)))
                goto done;
        }
        if (n_free > 0) memcpy(choice, best_choice, sizeof(int) * (size_t)n_free);
        t2 = iqf_now();
        t3 = t2;
    }

    plan = calloc(1, sizeof *plan);
    if (plan) plan->e = calloc((size_t)(nt > 0 ? nt : 1), sizeof *plan->e);
    if (!plan || !plan->e) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int f = 0; f < n_free; f++) {
        items[map[f]].chosen = choice[f];
        items[map[f]].type = items[map[f]].c[choice[f]].type;
    }
    plan->n = nt;
    uint64_t size = meta, by_type[IQF_TYPE_COUNT];
    memset(by_type, 0, sizeof by_type);
    for (int i = 0; i < nt; i++) {
        const titem *it = &items[i];
        iqf_target_entry *e = &plan->e[i];
        snprintf(e->name, sizeof e->name, "%s", it->t->name);
        e->type = it->type;
        e->quantizable = it->quantizable;
        e->fixed = it->fixed;
        if (it->fixed) {
            const uint64_t nb = it->type == it->t->type ? it->t->nbytes
                                                        : (uint64_t)iqf_row_size(it->type, it->t->ne[0]) * (uint64_t)n_rows(it->t);
            e->bytes = padded(nb, align);
        } else {
            const cand *c = &it->c[it->chosen];
            e->bytes = c->bytes;
            e->weight = c->sens;
            e->error = c->sens * c->err;
            e->error_se = c->sens * c->se;
            plan->total_error += e->error;
            if (it->type >= 0 && it->type < IQF_TYPE_COUNT) by_type[it->type] += e->bytes;
        }
        size += e->bytes;
    }
    int dom = IQF_TYPE_Q8_0;
    for (int t = 0; t < IQF_TYPE_COUNT; t++)
        if (by_type[t] > by_type[dom]) dom = t;
    plan->ftype = qp->ftype > 0 && iqf_ftype_default_type(qp->ftype) >= 0 && iqf_type_get(iqf_ftype_default_type(qp->ftype))->is_quantized
                      ? qp->ftype
                      : label_ftype(dom);
    plan->budget = budget;
    plan->file_size = size;
    plan->min_size = min_size;
    plan->max_size = max_size;
    plan->meta_size = meta;
    plan->n_weights = n_weights;
    plan->seconds_measure = t1 - t0;
    plan->seconds_calib = t2 - t1;
    plan->seconds_alloc = t3 - t2;
    if (size > budget) { /* cannot happen: the allocator never exceeds its budget */
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "internal error: plan of %" PRIu64 " bytes over the target %" PRIu64, size, budget);
        goto done;
    }
    *out = plan;
    plan = NULL;
done:
    iqf_target_plan_free(plan);
    free(kk), free(choice), free(map), free(bb), free(cc), free(costs), free(bytes), free(best_choice);
    calib_free(cal);
    iqf_recipe_overrides_free(ov, n_ov);
    free(ov), free(ts), free(items), free(rt), free(rc);
    iqf_imatrix_free(&im);
    iqf_gguf_close(g);
    return st;
}

void iqf_target_plan_print(const iqf_target_plan *p, FILE *f) {
    if (!p || !f) return;
    fprintf(f, "%-5s %-36s %-8s %12s %12s %10s\n", "#", "tensor", "type", "bytes", "pred.error", "rel.se");
    for (int i = 0; i < p->n; i++) {
        const iqf_target_entry *e = &p->e[i];
        if (e->fixed)
            fprintf(f, "%-5d %-36s %-8s %12" PRIu64 " %12s %10s\n", i + 1, e->name, tname(e->type), e->bytes,
                    e->quantizable ? "(fixed)" : "(copied)", "");
        else
            fprintf(f, "%-5d %-36s %-8s %12" PRIu64 " %12.4e %9.2f%%\n", i + 1, e->name, tname(e->type), e->bytes, e->error,
                    e->error > 0 ? 100.0 * e->error_se / e->error : 0.0);
    }
    const double nw = p->n_weights > 0 ? (double)p->n_weights : 1;
    fprintf(f, "total: file %" PRIu64 " bytes (%.4f bpw) for a target of %" PRIu64 " bytes (%.4f bpw); metadata %" PRIu64
               " bytes; predicted error %.6e; file type %s\n",
            p->file_size, (double)p->file_size * 8 / nw, p->budget, (double)p->budget * 8 / nw, p->meta_size, p->total_error,
            iqf_ftype_name(p->ftype) ? iqf_ftype_name(p->ftype) : "?");
}

iqf_status iqf_target_plan_save(const iqf_target_plan *p, const char *path, char *err, size_t errlen) {
    if (!p || !path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    iqf_outfile of;
    if (iqf_outfile_open(&of, path) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    for (int i = 0; i < p->n; i++) {
        if (!p->e[i].quantizable) continue;
        char pat[3 * IQF_GGUF_MAX_NAME + 8], line[4 * IQF_GGUF_MAX_NAME + 32];
        iqf_target_pattern(p->e[i].name, pat, sizeof pat);
        int n = snprintf(line, sizeof line, "%s=%s\n", pat, tname(p->e[i].type));
        if (iqf_outfile_write(&of, line, (size_t)n) != 0) break;
    }
    if (iqf_outfile_commit(&of) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    return IQF_OK;
}

iqf_status iqf_target_plan_load(const char *path, char (**names)[IQF_GGUF_MAX_NAME], int **types, int *n, char *err,
                                size_t errlen) {
    if (!path || !names || !types || !n) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    *names = NULL;
    *types = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return iqf_fail(err, errlen, IQF_E_IO, "%s: cannot open: %s", path, strerror(errno));
    char word[1024];
    int cap = 0, cnt = 0;
    char(*nm)[IQF_GGUF_MAX_NAME] = NULL;
    int *ty = NULL;
    iqf_status st = IQF_OK;
    while (fscanf(f, "%1023s", word) == 1) {
        char *eq = strrchr(word, '=');
        size_t wl = strlen(word);
        if (!eq || word[0] != '^' || eq == word || eq[-1] != '$' || wl >= sizeof word - 1) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: entry %d is not ^NAME$=TYPE", path, cnt + 1);
            break;
        }
        const int t = iqf_type_from_name(eq + 1);
        if (t < 0) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: entry %d: unknown type '%s'", path, cnt + 1, eq + 1);
            break;
        }
        if (cnt == cap) {
            cap = cap ? 2 * cap : 64;
            void *a = realloc(nm, (size_t)cap * sizeof *nm), *b = a ? realloc(ty, (size_t)cap * sizeof *ty) : NULL;
            if (a) nm = a;
            if (b) ty = b;
            if (!a || !b) {
                st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
                break;
            }
        }
        size_t k = 0;
        bool bad = false;
        for (char *p = word + 1; p < eq - 1; p++) {
            if (*p == '\\') {
                p++;
                if (p >= eq - 1) bad = true;
            } else if (strchr(".[]()*+?^$|{}", *p)) {
                bad = true; /* an unescaped special: a pattern, not one name */
            }
            if (bad || k + 1 >= IQF_GGUF_MAX_NAME) {
                bad = true;
                break;
            }
            nm[cnt][k++] = *p;
        }
        if (bad || k == 0) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: entry %d is not an exact tensor name", path, cnt + 1);
            break;
        }
        nm[cnt][k] = 0;
        ty[cnt] = t;
        cnt++;
    }
    if (!st && ferror(f)) st = iqf_fail(err, errlen, IQF_E_IO, "%s: read error", path);
    fclose(f);
    if (st) {
        free(nm), free(ty);
        return st;
    }
    *names = nm;
    *types = ty;
    *n = cnt;
    return IQF_OK;
}

iqf_status iqf_target_quantize(const char *in, const char *out, const iqf_model_quantize_params *qp,
                               const iqf_target_plan *plan, iqf_model_quantize_report *report, FILE *log, char *err,
                               size_t errlen) {
    if (!in || !out || !qp || !plan) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    const int n0 = qp->n_tensor_types;
    int n = n0;
    for (int i = 0; i < plan->n; i++) n += plan->e[i].quantizable && !plan->e[i].fixed;
    const char **pats = calloc((size_t)(n ? n : 1), sizeof *pats);
    int *types = calloc((size_t)(n ? n : 1), sizeof *types);
    char *buf = calloc((size_t)(n ? n : 1), 3 * IQF_GGUF_MAX_NAME + 8);
    if (!pats || !types || !buf) {
        free(pats), free(types), free(buf);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n0; i++) {
        pats[i] = qp->tensor_type_patterns[i];
        types[i] = qp->tensor_type_types[i];
    }
    for (int i = 0, k = n0; i < plan->n; i++) {
        if (!plan->e[i].quantizable || plan->e[i].fixed) continue;
        char *b = buf + (size_t)(k - n0) * (3 * IQF_GGUF_MAX_NAME + 8);
        iqf_target_pattern(plan->e[i].name, b, 3 * IQF_GGUF_MAX_NAME + 8);
        pats[k] = b;
        types[k] = plan->e[i].type;
        k++;
    }
    iqf_model_quantize_params p = *qp;
    p.ftype = plan->ftype;
    p.tensor_type_patterns = pats;
    p.tensor_type_types = types;
    p.n_tensor_types = n;
    p.pure = false;
    iqf_status st = iqf_model_quantize(in, p.dry_run ? NULL : out, &p, report, log, err, errlen);
    free(pats), free(types), free(buf);
    if (st || p.dry_run) return st;
    struct stat sb;
    if (stat(out, &sb) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s: cannot stat the output: %s", out, strerror(errno));
    if ((uint64_t)sb.st_size > plan->budget) {
        unlink(out);
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: internal error: %lld bytes written, over the target of %" PRIu64 " (file removed)",
                        out, (long long)sb.st_size, plan->budget);
    }
    if ((uint64_t)sb.st_size != plan->file_size && log)
        fprintf(log, "warning: %s has %lld bytes, the plan predicted %" PRIu64 "\n", out, (long long)sb.st_size, plan->file_size);
    return IQF_OK;
}
