/*
 * fb_session.c - the pipeline's error-feedback handle (feedback.h's iqf_feedback): the Hessian
 * file checked against the model, the factors of the last tensors cached by name.
 */
#include "feedback.h"
#include "../stats/hessian_file.h"
#include "../util/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FB_CACHE 4

struct iqf_feedback {
    iqf_hessian_file hf;
    double damp;
    FILE *log;
    struct {
        char name[IQF_GGUF_MAX_NAME + 16];
        int64_t mat;       /* the expert of a per-expert entry, else 0 */
        iqf_fb_factor f;
        bool bad;          /* singular: plain encoder */
        uint64_t used;
    } cache[FB_CACHE];
    uint64_t tick;
    char last_tensor[IQF_GGUF_MAX_NAME + 16]; /* the tensor the last note was about */
};

void iqf_feedback_free(iqf_feedback *fb) {
    if (!fb) return;
    for (int i = 0; i < FB_CACHE; i++) iqf_fb_factor_free(&fb->cache[i].f);
    iqf_hessian_close(&fb->hf);
    free(fb);
}

iqf_status iqf_feedback_open(const char *path, const void *model, double damp, FILE *log,
                             iqf_feedback **out, char *err, size_t errlen) {
    *out = NULL;
    const iqf_gguf *g = model;
    if (!path || !g) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    if (!(damp >= 0) || !isfinite(damp) || damp > 100)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "Hessian dampening %g must be in [0, 100]", damp);
    iqf_feedback *fb = calloc(1, sizeof *fb);
    if (!fb) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    fb->damp = damp;
    fb->log = log;
    iqf_status st = iqf_hessian_open(path, &fb->hf, err, errlen);
    if (st) {
        free(fb);
        return st;
    }
    iqf_hessian_model_id id;
    iqf_hessian_model_id_get(g, &id);
    const iqf_hessian_model_id *h = &fb->hf.model;
    if (strcmp(id.arch, h->arch) || strcmp(id.name, h->name) || id.n_embd != h->n_embd || id.n_layer != h->n_layer) {
        st = iqf_fail(err, errlen, IQF_E_SHAPE,
                      "%s: Hessian made for another model ('%s', %s, n_embd %" PRId64 ", %" PRId64 " layers), not '%s' (%s, n_embd %" PRId64
                      ", %" PRId64 " layers)",
                      path, h->name, h->arch, h->n_embd, h->n_layer, id.name, id.arch, id.n_embd, id.n_layer);
        goto fail;
    }
    int matched = 0;
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        char hn[IQF_GGUF_MAX_NAME + 16];
        int64_t n, bs;
        if (t->n_dims < 2 || !iqf_hessian_name_for(t->name, hn, sizeof hn) || !iqf_hessian_find(&fb->hf, hn, &n, &bs)) continue;
        if (n != t->ne[0]) {
            st = iqf_fail(err, errlen, IQF_E_SHAPE, "%s: %s is %" PRId64 " wide, but %s has %" PRId64 " columns (wrong size)", path,
                          hn, n, t->name, t->ne[0]);
            goto fail;
        }
        /* a per-expert entry: one matrix per expert of the tensor (a 2-D entry serves all rows) */
        const int64_t nm = iqf_hessian_n_mat(&fb->hf, hn), ne = t->n_dims >= 3 ? t->ne[2] * (t->n_dims >= 4 ? t->ne[3] : 1) : 1;
        if (nm > 1 && nm != ne) {
            st = iqf_fail(err, errlen, IQF_E_SHAPE, "%s: %s holds %" PRId64 " experts, but %s has %" PRId64 " (wrong size)", path,
                          hn, nm, t->name, ne);
            goto fail;
        }
        matched++;
    }
    if (!matched) {
        st = iqf_fail(err, errlen, IQF_E_SHAPE, "%s: no entry matches a weight of the model (Hessian made for another model?)", path);
        goto fail;
    }
    *out = fb;
    return IQF_OK;
fail:
    iqf_feedback_free(fb);
    return st;
}

iqf_status iqf_feedback_write_meta(const iqf_feedback *fb, iqf_gguf_writer *w) {
    char s[128];
    snprintf(s, sizeof s, "%s", fb->hf.path);
    iqf_status st = iqf_gguf_writer_set_str(w, "quantize.feedback.file", s);
    if (!st) st = iqf_gguf_writer_set_u64(w, "quantize.feedback.token_count", fb->hf.token_count);
    if (!st) st = iqf_gguf_writer_set_f32(w, "quantize.feedback.damp", (float)fb->damp);
    return st;
}

/* One log line per tensor (the first of its slabs). */
static void note(iqf_feedback *fb, const char *tensor, const char *what) {
    if (!fb->log || !strcmp(fb->last_tensor, tensor)) return;
    snprintf(fb->last_tensor, sizeof fb->last_tensor, "%s", tensor);
    fprintf(fb->log, "feedback: %s: %s\n", tensor, what);
    fflush(fb->log);
}

/* True if every diagonal value of the n x bs block-diagonal H is 0 (an expert no row reached). */
static bool all_zero_diag(const float *H, int64_t n, int64_t bs) {
    for (int64_t r = 0; r < n; r++)
        if (H[r * bs + r % bs] != 0) return false;
    return true;
}

iqf_status iqf_feedback_quantize(iqf_feedback *fb, const char *tensor, int64_t expert, int type, const float *src,
                                 void *dst, int64_t nrows, int64_t ncols, const float *imatrix,
                                 const iqf_quantize_params *params, char *err, size_t errlen) {
    char hn[IQF_GGUF_MAX_NAME + 16];
    int64_t n, bs;
    const iqf_type_info *ti = iqf_type_get(type);
    if (!ti || !ti->is_quantized || !iqf_hessian_name_for(tensor, hn, sizeof hn) || !iqf_hessian_find(&fb->hf, hn, &n, &bs) ||
        n != ncols) {
        if (ti && ti->is_quantized) note(fb, tensor, "no Hessian, plain encoder");
        return iqf_quantize(type, src, dst, nrows, ncols, imatrix, params, err, errlen);
    }
    const int64_t nm = iqf_hessian_n_mat(&fb->hf, hn);
    const int64_t mat = nm > 1 ? expert : 0; /* a 2-D entry for a 3-D tensor: the one matrix for all */
    if (mat < 0 || mat >= nm) return iqf_fail(err, errlen, IQF_E_SHAPE, "%s: no expert %" PRId64 " in %s", tensor, expert, hn);
    int slot = -1;
    for (int i = 0; i < FB_CACHE; i++)
        if (fb->cache[i].name[0] && !strcmp(fb->cache[i].name, hn) && fb->cache[i].mat == mat) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < FB_CACHE; i++)
            if (fb->cache[i].used < fb->cache[slot].used) slot = i;
        iqf_fb_factor_free(&fb->cache[slot].f);
        snprintf(fb->cache[slot].name, sizeof fb->cache[slot].name, "%s", hn);
        fb->cache[slot].mat = mat;
        fb->cache[slot].bad = false;
        float *H = malloc((size_t)(n * bs) * sizeof(float));
        if (!H) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for %s", hn);
        iqf_hessian_read_mat(&fb->hf, hn, mat, H);
        char msg[256];
        iqf_status st;
        if (nm > 1 && all_zero_diag(H, n, bs)) {
            st = IQF_E_SHAPE; /* no routed rows: nothing to weigh the errors by */
            snprintf(msg, sizeof msg, "expert %" PRId64 " saw no calibration rows", mat);
        } else {
            st = iqf_fb_factor_make(H, n, bs, fb->damp, params ? params->n_threads : 0, &fb->cache[slot].f, msg, sizeof msg);
        }
        free(H);
        if (st == IQF_E_NOMEM) {
            fb->cache[slot].name[0] = 0;
            return iqf_fail(err, errlen, st, "%s: %s", hn, msg);
        }
        if (st) {
            fb->cache[slot].bad = true;
            if (fb->log) {
                if (nm > 1) fprintf(fb->log, "feedback: %s: %s; plain encoder for that expert of %s\n", hn, msg, tensor);
                else fprintf(fb->log, "feedback: %s: %s; plain encoder for the tensors that use it\n", hn, msg);
            }
        }
    }
    fb->cache[slot].used = ++fb->tick;
    if (fb->cache[slot].bad) {
        if (nm <= 1) note(fb, tensor, "Hessian singular, plain encoder");
        return iqf_quantize(type, src, dst, nrows, ncols, imatrix, params, err, errlen);
    }
    if (fb->log && strcmp(fb->last_tensor, tensor)) {
        char what[160];
        snprintf(what, sizeof what, "error feedback with %s (%" PRId64 " x %" PRId64 "%s%s)", hn, n, bs, bs == n ? ", full" : " blocks",
                 nm > 1 ? ", per expert" : "");
        note(fb, tensor, what);
    }
    return iqf_fb_quantize_rows(&fb->cache[slot].f, type, src, dst, nrows, ncols, imatrix, params, err, errlen);
}
