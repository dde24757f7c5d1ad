/*
 * target_calib.c - --target-size's KLD sensitivities. The engine (iqf_calib, src/model/calib.c)
 * holds the model and the unquantized distributions on the calibration text; here each free
 * tensor is quantized to its probe types, viewed by the engine in place of its weights, and the
 * KLD it causes alone gives its sensitivity (KLD / error), interpolated in log(error) between
 * probes for the other candidates. In-context rounds then apply every chosen type at once and
 * rescale each tensor's curve to its marginal KLD.
 */
#include "target.h"
#include "../util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
}

/* The candidates of it measured with the engine: the probe types of tp (F16 never). */
static int probe_list(const iqf_target_item *it, const iqf_target_params *tp, int *probes) {
    const int64_t ncols = it->t->ne[0];
    int np = 0;
    for (int c = 0; c < it->n_cand; c++) {
        const int ty = it->c[c].type;
        bool is_probe = tp->calib_all;
        for (int q = 0; q < tp->n_calib_types && !is_probe; q++) is_probe = tp->calib_types[q] == ty;
        if (!tp->calib_all && tp->n_calib_types <= 0)
            is_probe = ty == (tp->calib_type >= 0 ? tp->calib_type : ncols % 256 == 0 ? IQF_TYPE_Q3_K : IQF_TYPE_Q4_0);
        if (is_probe && ty != IQF_TYPE_F16) probes[np++] = c;
    }
    if (np == 0) probes[np++] = 0;
    return np;
}

/* Every candidate's sensitivity from the probes' (ps) at their log errors (pe): the nearest
 * probe's outside them, interpolated in between. */
static void interpolate(iqf_target_item *it, double *ps, double *pe, int np) {
    for (int a = 1; a < np; a++) /* probes sorted by err (insertion sort) */
        for (int b2 = a; b2 > 0 && pe[b2] < pe[b2 - 1]; b2--) {
            double x = pe[b2]; pe[b2] = pe[b2 - 1]; pe[b2 - 1] = x;
            x = ps[b2]; ps[b2] = ps[b2 - 1]; ps[b2 - 1] = x;
        }
    for (int c = 0; c < it->n_cand; c++) {
        iqf_target_cand *cd = &it->c[c];
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

/* One free tensor alone at each of its probe types. */
static iqf_status probe_tensor(iqf_calib *cb, iqf_target_item *it, const iqf_target_params *tp,
                               const iqf_quantize_params *qp, iqf_target_buf *b, FILE *logf, char *err, size_t errlen) {
    const iqf_gguf_tensor *t = it->t;
    const int id = iqf_calib_weight(cb, it->t->name, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
    if (id < 0) {
        for (int c = 0; c < it->n_cand; c++) it->c[c].sens = 0; /* a tensor the engine does not use */
        return IQF_OK;
    }
    int probes[IQF_TARGET_MAX_CAND];
    const int np = probe_list(it, tp, probes);
    iqf_status st = iqf_target_load_tensor(it, b, qp->n_threads, err, errlen);
    if (st) return st;
    double ps[IQF_TARGET_MAX_CAND], pe[IQF_TARGET_MAX_CAND]; /* sensitivity, log err of each probe */
    for (int q = 0; q < np; q++) {
        iqf_target_cand *cd = &it->c[probes[q]];
        const int pt = cd->type;
        double e = 0, kld = 0;
        if ((st = iqf_target_roundtrip(it, pt, b, NULL, qp, &e, err, errlen))) return st;
        iqf_calib_view(cb, id, IQF_TYPE_F32, b->deq);
        st = iqf_calib_kld(cb, &kld, err, errlen);
        iqf_calib_view(cb, id, 0, NULL);
        if (st) return st;
        cd->kld = kld;
        ps[q] = e > 0 ? kld / e : 0;
        pe[q] = log(e > 1e-300 ? e : 1e-300);
        if (logf)
            fprintf(logf, "calibrate: %-32s %-7s err %.4e  KLD %.6f  sensitivity %.4e\n", t->name, tname(pt), e, kld, ps[q]);
    }
    interpolate(it, ps, pe, np);
    return IQF_OK;
}

iqf_status iqf_target_calibrate(const char *in, iqf_target_item *items, int nt, const iqf_target_params *tp,
                                const iqf_quantize_params *qp, FILE *logf, iqf_calib **out, char *err, size_t errlen) {
    /* a checkpoint converted in memory: the engine loads the items' handle (materialized then) */
    iqf_gguf *src = nt > 0 && iqf_gguf_is_source(items[0].g) ? items[0].g : NULL;
    iqf_calib_params cp = { tp->calib_text, tp->calib_ctx, tp->calib_chunks, qp->n_threads, src };
    iqf_calib *cb = NULL;
    iqf_status st = iqf_calib_open(in, &cp, &cb, err, errlen);
    if (st) return st;
    iqf_target_buf b;
    memset(&b, 0, sizeof b);
    for (int i = 0; i < nt && !st; i++)
        if (!items[i].fixed && items[i].quantizable) st = probe_tensor(cb, &items[i], tp, qp, &b, logf, err, errlen);
    iqf_target_buf_free(&b);
    if (st) iqf_calib_free(cb);
    else *out = cb;
    return st;
}

/* In context: every free tensor quantized to its chosen type at once (the engine decodes the
 * blocks), the joint KLD measured, then each tensor's marginal contribution (joint KLD minus the
 * KLD with only that tensor restored); each tensor's sensitivity curve is rescaled so that it
 * gives that marginal at its chosen type (the factor clamped to [1/8, 8]). */
iqf_status iqf_target_calib_context(iqf_calib *cb, iqf_target_item *items, int nt, const iqf_quantize_params *qp,
                                    FILE *logf, double *joint, char *err, size_t errlen) {
    iqf_status st = IQF_OK;
    uint8_t **qd = calloc((size_t)(nt > 0 ? nt : 1), sizeof *qd);
    int *id = malloc((size_t)(nt > 0 ? nt : 1) * sizeof *id);
    double *e_full = calloc((size_t)(nt > 0 ? nt : 1), sizeof *e_full);
    iqf_target_buf b;
    memset(&b, 0, sizeof b);
    if (!qd || !id || !e_full) {
        free(qd), free(id), free(e_full);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < nt; i++) {
        iqf_target_item *it = &items[i];
        const iqf_gguf_tensor *t = it->t;
        const int64_t ncols = t->ne[0], nrows = t->ne[1] * t->ne[2] * t->ne[3];
        id[i] = it->fixed || !it->quantizable ? -1 : iqf_calib_weight(cb, t->name, ncols, nrows);
        if (id[i] < 0 || st) continue;
        const int ty = it->c[it->chosen].type;
        const size_t qb = iqf_row_size(ty, ncols) * (size_t)nrows;
        qd[i] = malloc(qb ? qb : 1);
        if (!qd[i]) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", t->name);
        if (!st) st = iqf_target_load_tensor(it, &b, qp->n_threads, err, errlen);
        if (!st) st = iqf_target_roundtrip(it, ty, &b, qd[i], qp, &e_full[i], err, errlen);
        if (!st) iqf_calib_view(cb, id[i], ty, qd[i]);
    }
    double jk = 0;
    if (!st) st = iqf_calib_kld(cb, &jk, err, errlen);
    if (!st) *joint = jk;
    for (int i = 0; i < nt && !st; i++) {
        if (id[i] < 0) continue;
        iqf_target_item *it = &items[i];
        const int ty = it->c[it->chosen].type;
        double k = 0;
        iqf_calib_view(cb, id[i], 0, NULL);
        st = iqf_calib_kld(cb, &k, err, errlen);
        iqf_calib_view(cb, id[i], ty, qd[i]);
        if (st) break;
        iqf_target_cand *cd = &it->c[it->chosen];
        const double m = jk - k, cur = cd->sens * e_full[i];
        double f = cur > 0 ? m / cur : 1;
        if (!(f >= 0.125)) f = 0.125;
        if (f > 8) f = 8;
        for (int c = 0; c < it->n_cand; c++) it->c[c].sens *= f;
        if (logf)
            fprintf(logf, "calibrate: in context %-32s %-7s marginal KLD %.6f (alone predicted %.6f): x%.3f\n", it->t->name,
                    tname(cd->type), m, cur, f);
    }
    for (int i = 0; i < nt; i++) {
        if (id[i] >= 0) iqf_calib_view(cb, id[i], 0, NULL);
        free(qd[i]);
    }
    free(qd), free(id), free(e_full);
    iqf_target_buf_free(&b);
    return st;
}
