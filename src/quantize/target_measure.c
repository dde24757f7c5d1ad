/*
 * target_measure.c - --target-size's measurement: each free tensor's error in every candidate
 * type, and the whole-tensor round trips the calibration needs.
 *
 * The rows measured are all rows, or for a tensor of more than 2^20 weights and more than
 * sample_min rows max(sample_min, ceil(sample * nrows)) rows spaced evenly (row
 * floor((k + 0.5) * nrows / n)); the tensor's error is nrows times the mean row error, its
 * standard error nrows * sqrt(var / n * (1 - n / nrows)). Encoding goes through iqf_quantize with
 * the run's mode (compat or best), one call per run of rows of one expert. With --hessian the
 * plan's errors and sensitivities are those of that inner encoder, without the feedback (see
 * iqf_target_measure in target.h); the check against the recipe encodes with it.
 */
#include "target.h"
#include "feedback.h"
#include "../util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* tensors of at most this many weights are measured on all rows */
#define SAMPLE_ALL_WEIGHTS (1 << 20)
/* rows read from the tensor at a time when all are measured */
#define MEASURE_RUN 256

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
}

static uint64_t padded(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

static int64_t n_rows(const iqf_gguf_tensor *t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

/* The item's tensor bytes: mapped, or produced now from its source (one tensor at a time; release
 * with item_unload). NULL with the source's "FILE: what" in err. */
static const uint8_t *item_load(const iqf_target_item *it, char *err, size_t errlen) {
    if (!it->g) return it->t->data;
    char msg[512] = "";
    const uint8_t *d = iqf_gguf_tensor_load(it->g, it->t, msg, sizeof msg);
    if (!d) iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    return d;
}

/* Rows row0 .. row0 + nrows - 1 of the item's tensor: mapped, or from a source only those rows
 * produced now (valid until the next load; release with item_unload). */
static const uint8_t *item_load_rows(const iqf_target_item *it, int64_t row0, int64_t nrows, char *err, size_t errlen) {
    const size_t rs = iqf_row_size(it->t->type, it->t->ne[0]);
    if (!it->g) return (const uint8_t *)it->t->data + (size_t)row0 * rs;
    char msg[512] = "";
    const uint8_t *d = iqf_gguf_tensor_load_rows(it->g, it->t, row0, nrows, msg, sizeof msg);
    if (!d) iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    return d;
}

static void item_unload(const iqf_target_item *it) {
    if (it->g) iqf_gguf_tensor_unload(it->g, it->t);
}

/* e plus the sum over the row of w * (x - y)^2 (w: the imatrix row of the row's expert, or 1),
 * added in column order */
static double row_err(double e, const float *xr, const float *yr, const float *w, int64_t ncols) {
    for (int64_t j = 0; j < ncols; j++) {
        const double d = (double)xr[j] - (double)yr[j];
        e += (w ? (double)w[j] : 1.0) * d * d;
    }
    return e;
}

/* Encodes rows (each row r has expert ex[r]) of item it with one call per run of one expert: the
 * run's encoder (iqf_quantize), or error feedback when the run has Hessians (it->fb). */
static iqf_status encode_rows(const iqf_target_item *it, int type, const float *x, void *q, int64_t n, int64_t ncols,
                              const int64_t *ex, const float *im, const iqf_quantize_params *qp, char *msg, size_t msglen) {
    const size_t rs = iqf_row_size(type, ncols);
    for (int64_t r = 0; r < n;) {
        int64_t e = r + 1;
        while (e < n && ex[e] == ex[r]) e++;
        const float *imx = im ? im + ex[r] * ncols : NULL;
        const float *xr = x + r * ncols;
        uint8_t *qr = (uint8_t *)q + (size_t)r * rs;
        iqf_status st = it->fb ? iqf_feedback_quantize(it->fb, it->t->name, ex[r], type, xr, qr, e - r, ncols, imx, qp, msg, msglen)
                               : iqf_quantize(type, xr, qr, e - r, ncols, imx, qp, msg, msglen);
        if (st) return st;
        r = e;
    }
    return IQF_OK;
}

/* p (capacity *cap elements of `size` bytes) with room for n: grown (contents dropped) when short. */
static void *grow(void *p, size_t *cap, size_t n, size_t size) {
    if (n <= *cap) return p;
    free(p);
    p = malloc(n * size);
    *cap = p ? n : 0;
    return p;
}

/* b->f32 and b->deq (which share b->fcap) with room for n floats each; false when out of memory. */
static bool grow_floats(iqf_target_buf *b, size_t n) {
    if (n > b->fcap) {
        free(b->f32), free(b->deq);
        b->f32 = malloc(n * sizeof(float));
        b->deq = malloc(n * sizeof(float));
        b->fcap = b->f32 && b->deq ? n : 0;
    }
    return b->fcap >= n;
}

iqf_status iqf_target_measure(iqf_target_item *it, const iqf_target_params *tp, const iqf_quantize_params *qp,
                              uint64_t align, iqf_target_buf *b, char *err, size_t errlen) {
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
    size_t maxrs = 0;
    for (int c = 0; c < it->n_cand; c++) {
        size_t rs = iqf_row_size(it->c[c].type, ncols);
        if (rs > maxrs) maxrs = rs;
    }
    grow_floats(b, (size_t)(n * ncols)); /* checked below with the others */
    b->ex = grow(b->ex, &b->ecap, (size_t)n, sizeof(int64_t));
    b->re = grow(b->re, &b->rcap, (size_t)n, sizeof(double));
    b->q = grow(b->q, &b->qcap, maxrs * (size_t)n + 1, 1);
    float *x = b->f32, *y = b->deq;
    int64_t *ex = b->ex;
    double *re = b->re;
    uint8_t *q = b->q;
    if (!x || !y || !ex || !re || !q) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (measuring %s)", t->name);
        goto done;
    }
    /* The measured rows only, a run of consecutive rows at a time (all rows: runs of up to
     * MEASURE_RUN; sampled: one row each): from a source (a checkpoint) only those rows are
     * converted, never the whole tensor. */
    const size_t src_rs = iqf_row_size(t->type, ncols);
    for (int64_t k = 0; k < n;) {
        const int64_t r = n == nrows ? k : (int64_t)(((double)k + 0.5) * (double)nrows / (double)n);
        const int64_t run = n == nrows ? (n - k < MEASURE_RUN ? n - k : MEASURE_RUN) : 1;
        const uint8_t *data = item_load_rows(it, r, run, err, errlen);
        if (!data) {
            st = IQF_E_FORMAT;
            goto done;
        }
        for (int64_t j = 0; j < run; j++) {
            ex[k + j] = (r + j) / t->ne[1];
            const uint8_t *src = data + (size_t)j * src_rs;
            float *xr = x + (k + j) * ncols;
            if (t->type == IQF_TYPE_F32) memcpy(xr, src, sizeof(float) * (size_t)ncols);
            else if ((st = iqf_dequantize(t->type, src, xr, 1, ncols, 1, msg, sizeof msg))) {
                st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
                item_unload(it);
                goto done;
            }
        }
        k += run;
    }
    item_unload(it);
    iqf_target_item nofb = *it; /* the errors without feedback: see iqf_target_measure in target.h */
    nofb.fb = NULL;
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
        iqf_target_cand *cd = &it->c[c];
        cd->bytes = padded((uint64_t)iqf_row_size(cd->type, ncols) * (uint64_t)nrows, align);
        st = encode_rows(&nofb, cd->type, x, q, n, ncols, ex, it->im, qp, msg, sizeof msg);
        if (!st) st = iqf_dequantize(cd->type, q, y, n, ncols, qp->n_threads, msg, sizeof msg);
        if (st) {
            st = iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(cd->type), msg);
            goto done;
        }
        double sum = 0, sum2 = 0;
        for (int64_t k = 0; k < n; k++) {
            const float *w = it->im ? it->im + ex[k] * ncols : NULL;
            const double e = row_err(0, x + k * ncols, y + k * ncols, w, ncols);
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
    return st;
}

void iqf_target_buf_free(iqf_target_buf *b) {
    free(b->f32), free(b->deq), free(b->q), free(b->ex), free(b->re);
    memset(b, 0, sizeof *b);
}

iqf_status iqf_target_load_tensor(const iqf_target_item *it, iqf_target_buf *b, int n_threads, char *err,
                                  size_t errlen) {
    char msg[512];
    const iqf_gguf_tensor *t = it->t;
    const int64_t ncols = t->ne[0], nrows = n_rows(t);
    const size_t need = (size_t)(nrows * ncols);
    const bool fl = grow_floats(b, need);
    b->ex = grow(b->ex, &b->ecap, (size_t)nrows, sizeof(int64_t));
    if (!fl || b->ecap < (size_t)nrows)
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", t->name);
    for (int64_t r = 0; r < nrows; r++) b->ex[r] = r / t->ne[1];
    const uint8_t *data = item_load(it, err, errlen);
    if (!data) return IQF_E_FORMAT;
    iqf_status st = IQF_OK;
    if (t->type == IQF_TYPE_F32) memcpy(b->f32, data, need * sizeof(float));
    else if ((st = iqf_dequantize(t->type, data, b->f32, nrows, ncols, n_threads, msg, sizeof msg)))
        st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
    item_unload(it);
    return st;
}

iqf_status iqf_target_roundtrip(const iqf_target_item *it, int type, iqf_target_buf *b, uint8_t *q,
                                const iqf_quantize_params *qp, double *e, char *err, size_t errlen) {
    char msg[512];
    const iqf_gguf_tensor *t = it->t;
    const int64_t ncols = t->ne[0], nrows = n_rows(t);
    if (!q) {
        const size_t qneed = iqf_row_size(type, ncols) * (size_t)nrows;
        b->q = grow(b->q, &b->qcap, qneed ? qneed : 1, 1);
        if (b->qcap < qneed) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", t->name);
        q = b->q;
    }
    iqf_status st = encode_rows(it, type, b->f32, q, nrows, ncols, b->ex, it->im, qp, msg, sizeof msg);
    if (!st) st = iqf_dequantize(type, q, b->deq, nrows, ncols, qp->n_threads, msg, sizeof msg);
    if (st) return iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(type), msg);
    double sum = 0;
    for (int64_t r = 0; r < nrows; r++)
        sum = row_err(sum, b->f32 + r * ncols, b->deq + r * ncols, it->im ? it->im + (r / t->ne[1]) * ncols : NULL, ncols);
    *e = sum;
    return IQF_OK;
}

/* rows per slab of iqf_target_encode: about 4M weights */
#define ENCODE_SLAB_WEIGHTS (1 << 22)

iqf_status iqf_target_encode(const iqf_target_item *item, int type, bool feedback, uint8_t *q, const iqf_quantize_params *qp,
                             iqf_target_buf *b, double *e, char *err, size_t errlen) {
    iqf_target_item nofb = *item;
    if (!feedback) nofb.fb = NULL;
    const iqf_target_item *it = &nofb;
    char msg[512];
    const iqf_gguf_tensor *t = it->t;
    const int64_t ncols = t->ne[0], nrows = n_rows(t);
    int64_t slab = ENCODE_SLAB_WEIGHTS / (ncols > 0 ? ncols : 1);
    if (slab < 1) slab = 1;
    if (slab > nrows) slab = nrows;
    const bool fl = grow_floats(b, (size_t)(slab * ncols));
    b->ex = grow(b->ex, &b->ecap, (size_t)slab, sizeof(int64_t));
    if (!fl || b->ecap < (size_t)slab) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (encoding %s)", t->name);
    const size_t qrs = iqf_row_size(type, ncols);
    double sum = 0;
    iqf_status st = IQF_OK;
    for (int64_t r0 = 0; r0 < nrows && !st; r0 += slab) {
        const int64_t n = nrows - r0 < slab ? nrows - r0 : slab;
        const uint8_t *data = item_load_rows(it, r0, n, err, errlen);
        if (!data) return IQF_E_FORMAT;
        for (int64_t r = 0; r < n; r++) b->ex[r] = (r0 + r) / t->ne[1];
        if (t->type == IQF_TYPE_F32) memcpy(b->f32, data, sizeof(float) * (size_t)(n * ncols));
        else st = iqf_dequantize(t->type, data, b->f32, n, ncols, qp->n_threads, msg, sizeof msg);
        uint8_t *qs = q + (size_t)r0 * qrs;
        if (!st) st = encode_rows(it, type, b->f32, qs, n, ncols, b->ex, it->im, qp, msg, sizeof msg);
        if (!st) st = iqf_dequantize(type, qs, b->deq, n, ncols, qp->n_threads, msg, sizeof msg);
        if (st) st = iqf_fail(err, errlen, st, "tensor %s as %s: %s", t->name, tname(type), msg);
        for (int64_t r = 0; r < n && !st; r++)
            sum = row_err(sum, b->f32 + r * ncols, b->deq + r * ncols, it->im ? it->im + b->ex[r] * ncols : NULL, ncols);
    }
    item_unload(it);
    *e = sum;
    return st;
}
