/* feedback.c - GPTQ-style error feedback into the stock formats (see feedback.h). */
#include "feedback.h"
#include "fb_blocks.h"
#include "hessian_file.h"
#include "../util/error.h"
#include "../util/parallel.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Factor                                                                                     */

/* In-place lower Cholesky of the n x n matrix a (row-major; the upper part is ignored and
 * zeroed). False if a pivot is not positive. */
static bool cholesky(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t k = 0; k < j; k++) d -= a[j * n + k] * a[j * n + k];
        if (!(d > 0) || !isfinite(d)) return false;
        d = sqrt(d);
        a[j * n + j] = d;
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int64_t k = 0; k < j; k++) s -= a[i * n + k] * a[j * n + k];
            a[i * n + j] = s / d;
        }
        for (int64_t i = 0; i < j; i++) a[i * n + j] = 0;
    }
    return true;
}

/* U upper with U^T U = A^-1 for one bs x bs block (a: the dampened block, destroyed). */
static bool block_factor(double *a, double *t, int64_t bs, float *U) {
    if (!cholesky(a, bs)) return false; /* a = L */
    /* t = (L^-1)^T, stored transposed so that every inner loop runs over contiguous memory:
     * t[c][i] = (L^-1)[i][c] = -sum_{k=c}^{i-1} L[i][k] (L^-1)[k][c] / L[i][i] */
    memset(t, 0, (size_t)(bs * bs) * sizeof(double));
    for (int64_t c = 0; c < bs; c++) {
        double *tc = t + c * bs;
        tc[c] = 1.0 / a[c * bs + c];
        for (int64_t i = c + 1; i < bs; i++) {
            const double *li = a + i * bs;
            double s = 0;
            for (int64_t k = c; k < i; k++) s += li[k] * tc[k];
            tc[i] = -s / li[i];
        }
    }
    /* a = A^-1 = L^-T L^-1: a[i][j] = sum_{k >= i} t[i][k] t[j][k] (j <= i, lower part only) */
    for (int64_t i = 0; i < bs; i++)
        for (int64_t j = 0; j <= i; j++) {
            const double *ti = t + i * bs, *tj = t + j * bs;
            double s = 0;
            for (int64_t k = i; k < bs; k++) s += ti[k] * tj[k];
            a[i * bs + j] = s;
        }
    if (!cholesky(a, bs)) return false; /* a = M, A^-1 = M M^T, U = M^T */
    for (int64_t i = 0; i < bs; i++)
        for (int64_t j = 0; j < bs; j++) U[i * bs + j] = j >= i ? (float)a[j * bs + i] : 0.f;
    for (int64_t i = 0; i < bs; i++)
        if (!(U[i * bs + i] > 0) || !isfinite(U[i * bs + i])) return false;
    return true;
}

void iqf_fb_factor_free(iqf_fb_factor *f) {
    if (!f) return;
    free(f->U);
    free(f->diag);
    memset(f, 0, sizeof *f);
}

iqf_status iqf_fb_factor_make(const float *H, int64_t n, int64_t bs, double damp, iqf_fb_factor *f,
                              char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (!H || n < 1 || bs < 1 || n % bs || !(damp >= 0) || !isfinite(damp))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad Hessian factor arguments (n %" PRId64 ", block %" PRId64 ", damp %g)",
                        n, bs, damp);
    f->n = n;
    f->bs = bs;
    f->U = malloc((size_t)(n * bs) * sizeof(float));
    f->diag = malloc((size_t)n * sizeof(float));
    double *a = malloc((size_t)(bs * bs) * sizeof(double)), *t = malloc((size_t)(bs * bs) * sizeof(double));
    iqf_status st = IQF_OK;
    if (!f->U || !f->diag || !a || !t) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for a Hessian factor of %" PRId64 " x %" PRId64, n, bs);
        goto done;
    }
    double mean = 0;
    for (int64_t r = 0; r < n; r++) {
        const float d = H[r * bs + r % bs];
        if (!isfinite(d) || d < 0) {
            st = iqf_fail(err, errlen, IQF_E_NONFINITE, "Hessian diagonal %" PRId64 " is %g", r, (double)d);
            goto done;
        }
        f->diag[r] = d;
        mean += d;
    }
    mean /= (double)n;
    if (!(mean > 0)) {
        st = iqf_fail(err, errlen, IQF_E_NONFINITE, "the Hessian is zero (singular)");
        goto done;
    }
    const double lambda = damp * mean;
    for (int64_t k = 0; k < n / bs; k++) {
        const float *hb = H + k * bs * bs;
        for (int64_t i = 0; i < bs; i++)
            for (int64_t j = 0; j < bs; j++) {
                const double v = 0.5 * ((double)hb[i * bs + j] + (double)hb[j * bs + i]);
                if (!isfinite(v)) {
                    st = iqf_fail(err, errlen, IQF_E_NONFINITE, "Hessian value (%" PRId64 ", %" PRId64 ") is not finite", k * bs + i, k * bs + j);
                    goto done;
                }
                a[i * bs + j] = v;
            }
        for (int64_t i = 0; i < bs; i++) {
            if (a[i * bs + i] == 0) { /* a dead input: nothing constrains it (GPTQ sets it to 1) */
                a[i * bs + i] = mean;
                f->n_dead++;
            }
            a[i * bs + i] += lambda;
        }
        if (!block_factor(a, t, bs, f->U + k * bs * bs)) {
            st = iqf_fail(err, errlen, IQF_E_NONFINITE,
                          "the Hessian is singular (not positive definite after dampening %g, block %" PRId64 ")", damp, k);
            goto done;
        }
    }
done:
    free(a);
    free(t);
    if (st) iqf_fb_factor_free(f);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Rows                                                                                       */

#define FB_ITERS 3 /* re-encodings of a unit from its fed-forward targets (stops when no gain) */

/* Legacy encoders whose importance weighting uses a row-wide sigma2 (best mode's q8_0 too). */
static bool row_context(int type, const float *imatrix, iqf_mode mode) {
    return imatrix && (type == IQF_TYPE_Q4_0 || type == IQF_TYPE_Q4_1 || type == IQF_TYPE_Q5_0 ||
                       type == IQF_TYPE_Q5_1 || (type == IQF_TYPE_Q8_0 && mode == IQF_MODE_BEST));
}

typedef struct fbscratch {
    float *w, *q, *q2, *t, *t2, *rw;
    uint8_t *row, *blk2;
    int64_t bad_row;
    iqf_status st;
    char msg[256];
} fbscratch;

typedef struct fbjob {
    const iqf_fb_factor *f;
    int type;
    const float *src;
    uint8_t *dst;
    int64_t ncols, blck;
    size_t row_bytes, tsz;
    const float *im;
    bool ctx_row;
    iqf_quantize_params qp; /* one thread */
    int iters;              /* in-unit re-encodings */
    bool reround;           /* in-unit GPTQ under the chosen scales (fb_blocks.c types) */
    fbscratch *s;
} fbjob;

/* The unit's own part of the GPTQ loss for codes q: the recursion e_i = (t_i - q_i) / U_ii,
 * t_j -= e_i U_ij over the unit's columns only (t starts as the current weights w), returning
 * sum e_i^2; t ends as the targets the columns had when each was fixed. */
static double unit_loss(const float *U, int64_t bs, int64_t u0, int64_t B, const float *w, const float *q, float *t) {
    memcpy(t, w + u0, (size_t)B * sizeof(float));
    double loss = 0;
    for (int64_t i = u0; i < u0 + B; i++) {
        const int64_t ii = i % bs, k0 = i - ii;
        const float *ur = U + i * bs;
        const float e = (t[i - u0] - q[i - u0]) / ur[ii];
        loss += (double)e * e;
        const int64_t end = k0 + bs < u0 + B ? k0 + bs : u0 + B;
        for (int64_t c = i + 1; c < end; c++) t[c - u0] -= e * ur[c - k0];
    }
    return loss;
}

/* Encodes the unit at u0 from the values v (B of them; the row context, if any, is w with the unit
 * replaced by v) into blk and decodes it into q. */
static iqf_status encode_unit(const fbjob *j, fbscratch *s, const float *w, const float *v, int64_t u0,
                              uint8_t *blk, float *q) {
    const int64_t B = j->blck;
    iqf_status st;
    if (j->ctx_row) {
        float *rw = s->rw;
        memcpy(rw, w, (size_t)j->ncols * sizeof(float));
        memcpy(rw + u0, v, (size_t)B * sizeof(float));
        st = iqf_quantize(j->type, rw, s->row, 1, j->ncols, j->im, &j->qp, s->msg, sizeof s->msg);
        if (!st) memcpy(blk, s->row + (size_t)(u0 / B) * j->tsz, j->tsz);
    } else {
        st = iqf_quantize(j->type, v, blk, 1, B, j->im + u0, &j->qp, s->msg, sizeof s->msg);
    }
    if (!st) st = iqf_dequantize(j->type, blk, q, 1, B, 1, s->msg, sizeof s->msg);
    return st;
}

/* GPTQ inside the unit under the scales the encoder chose: the weights are rounded one by one
 * to the nearest code, each one's error fed forward to the later weights of the unit. A weight
 * that received no error (t == w bit for bit) keeps the encoder's code, so a diagonal H leaves
 * the encoder's bytes untouched. Then the block is decoded into q. */
static iqf_status reround_unit(const fbjob *j, fbscratch *s, const float *w, int64_t u0, uint8_t *blk, float *q) {
    const int64_t B = j->blck, bs = j->f->bs;
    const float *U = j->f->U;
    fb_block fbk;
    if (!fb_block_parse(j->type, blk, &fbk)) return IQF_OK;
    const int G = fb_block_group(j->type);
    float *t = s->t2;
    float v[8];
    memcpy(t, w + u0, (size_t)B * sizeof(float));
    for (int64_t g0 = u0; g0 < u0 + B; g0 += G) {
        const int l0 = (int)(g0 - u0);
        if (memcmp(&t[l0], &w[g0], (size_t)G * sizeof(float)))
            fb_block_round_group(j->type, &fbk, blk, l0, &t[l0], j->im + g0, v);
        else
            memcpy(v, &q[l0], (size_t)G * sizeof(float));
        for (int64_t i = g0; i < g0 + G; i++) {
            const int li = (int)(i - u0);
            const int64_t ii = i % bs, k0 = i - ii;
            const float *ur = U + i * bs;
            const float e = (t[li] - v[i - g0]) / ur[ii];
            const int64_t end = k0 + bs < u0 + B ? k0 + bs : u0 + B;
            for (int64_t c = i + 1; c < end; c++) t[c - u0] -= e * ur[c - k0];
        }
    }
    return iqf_dequantize(j->type, blk, q, 1, B, 1, s->msg, sizeof s->msg);
}

static void fb_range(void *arg, int64_t b, int64_t e, int tid) {
    const fbjob *j = arg;
    fbscratch *s = &j->s[tid];
    const int64_t n = j->ncols, B = j->blck, bs = j->f->bs;
    const float *U = j->f->U;
    for (int64_t r = b; r < e; r++) {
        if (s->st) return;
        float *w = s->w, *q = s->q, *q2 = s->q2, *t = s->t;
        memcpy(w, j->src + r * n, (size_t)n * sizeof(float));
        uint8_t *out = j->dst + (size_t)r * j->row_bytes;
        for (int64_t u0 = 0; u0 < n; u0 += B) {
            uint8_t *blk = out + (size_t)(u0 / B) * j->tsz;
            iqf_status st = encode_unit(j, s, w, w + u0, u0, blk, q);
            if (!st && j->reround) st = reround_unit(j, s, w, u0, blk, q);
            /* Within the unit: re-encode from the targets the recursion gives the columns (the
             * errors of the earlier columns fed forward), keep the codes while the loss drops. */
            if (!st && j->iters > 0) {
                double best = unit_loss(U, bs, u0, B, w, q, t);
                for (int it = 0; it < j->iters && !st; it++) {
                    st = encode_unit(j, s, w, t, u0, s->blk2, q2);
                    if (!st && j->reround) st = reround_unit(j, s, w, u0, s->blk2, q2);
                    if (st) break;
                    float *t2 = s->t2;
                    const double l2 = unit_loss(U, bs, u0, B, w, q2, t2);
                    if (!(l2 < best)) break;
                    best = l2;
                    memcpy(blk, s->blk2, j->tsz);
                    memcpy(q, q2, (size_t)B * sizeof(float));
                    memcpy(t, t2, (size_t)B * sizeof(float));
                }
            }
            if (st) {
                s->st = st;
                s->bad_row = r;
                return;
            }
            for (int64_t i = u0; i < u0 + B; i++) {
                const int64_t ii = i % bs, k0 = i - ii;
                const float *ur = U + i * bs;
                const float err = (w[i] - q[i - u0]) / ur[ii];
                float *wk = w + k0;
                for (int64_t c = ii + 1; c < bs; c++) wk[c] -= err * ur[c];
            }
        }
    }
}

iqf_status iqf_fb_quantize_rows(const iqf_fb_factor *f, int type, const float *src, void *dst,
                                int64_t nrows, int64_t ncols, const float *imatrix,
                                const iqf_quantize_params *params, char *err, size_t errlen) {
    const iqf_type_info *ti = iqf_type_get(type);
    if (!f || !f->U || !ti) return iqf_fail(err, errlen, !ti ? IQF_E_UNKNOWN_TYPE : IQF_E_INVALID_ARG, "bad feedback arguments");
    if (ncols != f->n)
        return iqf_fail(err, errlen, IQF_E_SHAPE, "the Hessian is %" PRId64 " wide, the rows have %" PRId64 " columns", f->n, ncols);
    if (!iqf_can_encode(type)) return iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "type %s cannot be encoded", ti->name);
    if (ti->blck_size < 1 || ncols % ti->blck_size)
        return iqf_fail(err, errlen, IQF_E_SHAPE, "row length %" PRId64 " is not a multiple of %s's block size", ncols, ti->name);
    if (nrows < 0 || (nrows > 0 && (!src || !dst))) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad rows");
    /* non-finite input: the same message as iqf_quantize */
    for (int64_t r = 0; r < nrows; r++)
        for (int64_t c = 0; c < ncols; c++)
            if (!isfinite(src[r * ncols + c]))
                return iqf_fail(err, errlen, IQF_E_NONFINITE, "row %" PRId64 ", column %" PRId64 ": value is %s", r, c,
                                isnan(src[r * ncols + c]) ? "NaN" : "Inf");
    iqf_quantize_params qp = params ? *params : iqf_quantize_default_params();
    int nt = qp.n_threads > 0 ? qp.n_threads : iqf_cpu_count();
    if (nt > nrows) nt = nrows > 0 ? (int)nrows : 1;
    qp.n_threads = 1;
    const float *im = imatrix ? imatrix : f->diag;

    fbjob j = { f, type, src, dst, ncols, ti->blck_size, iqf_row_size(type, ncols), ti->type_size, im,
                row_context(type, im, qp.mode), qp, FB_ITERS, fb_block_supported(type), NULL };
    j.s = calloc((size_t)nt, sizeof *j.s);
    iqf_status st = IQF_OK;
    if (!j.s) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int t = 0; t < nt; t++) {
        j.s[t].w = malloc((size_t)ncols * sizeof(float));
        j.s[t].q = malloc((size_t)ncols * sizeof(float));
        j.s[t].row = malloc(j.row_bytes);
        j.s[t].q2 = malloc((size_t)ncols * sizeof(float));
        j.s[t].t = malloc((size_t)ncols * sizeof(float));
        j.s[t].t2 = malloc((size_t)ncols * sizeof(float));
        j.s[t].rw = malloc((size_t)ncols * sizeof(float));
        j.s[t].blk2 = malloc(ti->type_size);
        if (!j.s[t].w || !j.s[t].q || !j.s[t].row || !j.s[t].q2 || !j.s[t].t || !j.s[t].t2 || !j.s[t].rw || !j.s[t].blk2) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    if (!st && iqf_parallel_for(nt, nrows, 1, fb_range, &j))
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "could not start worker threads");
    if (!st) {
        int best = -1;
        for (int t = 0; t < nt; t++)
            if (j.s[t].st && (best < 0 || j.s[t].bad_row < j.s[best].bad_row)) best = t;
        if (best >= 0) st = iqf_fail(err, errlen, j.s[best].st, "row %" PRId64 ": %s", j.s[best].bad_row, j.s[best].msg);
    }
    for (int t = 0; t < nt; t++) {
        free(j.s[t].w);
        free(j.s[t].q);
        free(j.s[t].row);
        free(j.s[t].q2);
        free(j.s[t].t);
        free(j.s[t].t2);
        free(j.s[t].rw);
        free(j.s[t].blk2);
    }
    free(j.s);
    return st;
}

iqf_status iqf_quantize_feedback(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                                 const float *hessian, int64_t hblock, float damp, const float *imatrix,
                                 const iqf_quantize_params *params, char *err, size_t errlen) {
    if (hblock <= 0) hblock = ncols;
    iqf_fb_factor f;
    iqf_status st = iqf_fb_factor_make(hessian, ncols, hblock, damp, &f, err, errlen);
    if (st) return st;
    st = iqf_fb_quantize_rows(&f, type, src, dst, nrows, ncols, imatrix, params, err, errlen);
    iqf_fb_factor_free(&f);
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Pipeline handle                                                                            */

#define FB_CACHE 4

struct iqf_feedback {
    iqf_hessian_file hf;
    double damp;
    FILE *log;
    struct {
        char name[IQF_GGUF_MAX_NAME + 16];
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

iqf_status iqf_feedback_quantize(iqf_feedback *fb, const char *tensor, int type, const float *src,
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
    int slot = -1;
    for (int i = 0; i < FB_CACHE; i++)
        if (fb->cache[i].name[0] && !strcmp(fb->cache[i].name, hn)) slot = i;
    if (slot < 0) {
        slot = 0;
        for (int i = 1; i < FB_CACHE; i++)
            if (fb->cache[i].used < fb->cache[slot].used) slot = i;
        iqf_fb_factor_free(&fb->cache[slot].f);
        snprintf(fb->cache[slot].name, sizeof fb->cache[slot].name, "%s", hn);
        fb->cache[slot].bad = false;
        float *H = malloc((size_t)(n * bs) * sizeof(float));
        if (!H) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for %s", hn);
        iqf_hessian_read(&fb->hf, hn, H);
        char msg[256];
        iqf_status st = iqf_fb_factor_make(H, n, bs, fb->damp, &fb->cache[slot].f, msg, sizeof msg);
        free(H);
        if (st == IQF_E_NOMEM) {
            fb->cache[slot].name[0] = 0;
            return iqf_fail(err, errlen, st, "%s: %s", hn, msg);
        }
        if (st) {
            fb->cache[slot].bad = true;
            if (fb->log) fprintf(fb->log, "feedback: %s: %s; plain encoder for the tensors that use it\n", hn, msg);
        }
    }
    fb->cache[slot].used = ++fb->tick;
    if (fb->cache[slot].bad) {
        note(fb, tensor, "Hessian singular, plain encoder");
        return iqf_quantize(type, src, dst, nrows, ncols, imatrix, params, err, errlen);
    }
    if (fb->log && strcmp(fb->last_tensor, tensor)) {
        char what[160];
        snprintf(what, sizeof what, "error feedback with %s (%" PRId64 " x %" PRId64 "%s)", hn, n, bs, bs == n ? ", full" : " blocks");
        note(fb, tensor, what);
    }
    return iqf_fb_quantize_rows(&fb->cache[slot].f, type, src, dst, nrows, ncols, imatrix, params, err, errlen);
}
