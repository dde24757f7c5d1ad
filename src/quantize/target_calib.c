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
#include "../util/progress.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>
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

/* --- the layer method (the default): cost a few forward passes whatever the model's size ---
 *
 * Every perturbation a layer's weights cause reaches the rest of the model through the residual
 * stream at that layer's output. So for each layer l, from the engine's layer cache:
 *   d(t)   = the mean squared change of layer l's output with tensor t alone at its probe type
 *            (layer l run alone: 1/n_layer of a forward pass per tensor);
 *   gain_l = KLD(all of layer l's free tensors at their probe types, layers l.. run) / the change
 *            of layer l's output they cause together, measured at up to calib_depths layers
 *            spread evenly from the first to the last, interpolated (log-linearly in the layer
 *            index) between them;
 *   sens(t) = gain_l * d(t) / err(t, probe).
 * token_embd (and other tensors before the layers) and output are probed alone with the whole
 * model / the head. Cost per probe type: about (tensors per layer + depths / 2 + 2) forward
 * passes over the calibration text, growing linearly with the layer count. */

typedef struct layer_probe {
    int *idx;          /* free items of this layer (their ids in the engine: id[]) */
    int n;
} layer_probe;

static int probe_of(const int *probes, int np, int q) { return probes[q < np ? q : np - 1]; }

/* Item i quantized to candidate c (kept in qd[i]); e: its error. The view is not set. */
static iqf_status quantize_item(iqf_target_item *it, int c, uint8_t **qd, iqf_target_buf *b, const iqf_quantize_params *qp,
                                double *e, char *err, size_t errlen) {
    const iqf_gguf_tensor *t = it->t;
    const int ty = it->c[c].type;
    const size_t qb = iqf_row_size(ty, t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    *qd = malloc(qb ? qb : 1);
    if (!*qd) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (calibrating %s)", t->name);
    return iqf_target_encode(it, ty, false, *qd, qp, b, e, err, errlen);
}

/* The probed depths: k of them spread evenly over 0..L-1 (all layers when k >= L or k < 0). */
static int depth_list(int L, int k, int *out) {
    if (k == 0) k = 8;
    if (k < 0 || k >= L) k = L;
    int n = 0;
    for (int j = 0; j < k; j++) {
        const int l = k == 1 ? L - 1 : (int)floor((double)j * (double)(L - 1) / (double)(k - 1) + 0.5);
        if (n == 0 || out[n - 1] != l) out[n++] = l;
    }
    return n;
}

/* Which half of its layer a tensor is in: 1 the feed-forward side (ffn_*: dense, experts,
 * shared experts, router), 0 the rest (attention, MLA, DeltaNet, per-layer embeddings). */
static int part_of(const iqf_target_item *it) { return strstr(it->t->name, ".ffn_") ? 1 : 0; }

/* One layer: each free tensor's d(t) at probe q, and when probed, the gains of its halves
 * (gain[0], gain[1]; -1 where not probed). */
static iqf_status probe_layer(iqf_calib *cb, iqf_target_item *items, const int *id, const layer_probe *lp, int l, bool depth,
                              int parts, int q, int (*probes)[IQF_TARGET_MAX_CAND], const int *np, double *dq, double *eq, double *gain,
                              const iqf_quantize_params *qp, iqf_target_buf *b, FILE *logf, char *err, size_t errlen) {
    uint8_t **qd = calloc((size_t)(lp->n ? lp->n : 1), sizeof *qd);
    if (!qd) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    iqf_status st = IQF_OK;
    double dsum = 0;
    for (int k = 0; k < lp->n && !st; k++) {
        const int i = lp->idx[k];
        iqf_target_item *it = &items[i];
        const int c = probe_of(probes[i], np[i], q);
        if ((st = quantize_item(it, c, &qd[k], b, qp, &eq[i], err, errlen))) break;
        iqf_calib_view(cb, id[i], it->c[c].type, qd[k]);
        st = iqf_calib_delta(cb, l, &dq[i], err, errlen);
        iqf_calib_view(cb, id[i], 0, NULL);
        dsum += dq[i];
        if (!depth) free(qd[k]), qd[k] = NULL;
    }
    gain[0] = gain[1] = -1;
    /* the gains of the layer's two halves (attention side, feed-forward side: part_of), each
     * from its own tensors quantized together; a half with none takes the other's */
    for (int p = 0; p < 2 && !st && depth; p++) {
        double kld = 0, d = 0;
        int n = 0;
        for (int k = 0; k < lp->n; k++) {
            const int i = lp->idx[k];
            if (part_of(&items[i]) != p && parts > 1) continue;
            iqf_calib_view(cb, id[i], items[i].c[probe_of(probes[i], np[i], q)].type, qd[k]);
            n++;
        }
        if (n) st = iqf_calib_kld_from(cb, l, &kld, err, errlen);
        if (n && !st) st = iqf_calib_delta(cb, l, &d, err, errlen);
        for (int k = 0; k < lp->n; k++) iqf_calib_view(cb, id[lp->idx[k]], 0, NULL);
        if (!n || st) continue;
        gain[p] = d > 0 ? kld / d : 0;
        if (parts == 1) gain[1] = gain[0];
        if (logf)
            fprintf(logf, "calibrate: layer %d%s: KLD %.6f, output change %.4e (tensors alone %.4e): gain %.4e\n", l,
                    parts == 1 ? "" : p ? " feed-forward" : " attention", kld, d, dsum, gain[p]);
        if (parts == 1) break;
    }
    if (depth && !st && lp->n > 0) {
        if (gain[0] < 0) gain[0] = gain[1];
        if (gain[1] < 0) gain[1] = gain[0];
    }
    for (int k = 0; k < lp->n; k++) free(qd[k]);
    free(qd);
    return st;
}

/* gain[l] for the layers not probed: log-linear between the probed neighbours (the nearest
 * one's outside them). */
static void interpolate_gains(double *gain, int L) {
    for (int l = 0; l < L; l++) {
        if (gain[l] >= 0) continue;
        int a = l - 1, z = l + 1;
        while (a >= 0 && gain[a] < 0) a--;
        while (z < L && gain[z] < 0) z++;
        if (a < 0 && z >= L) gain[l] = 0;
        else if (a < 0) gain[l] = gain[z];
        else if (z >= L) gain[l] = gain[a];
        else if (gain[a] > 0 && gain[z] > 0) gain[l] = exp(log(gain[a]) + (double)(l - a) / (double)(z - a) * (log(gain[z]) - log(gain[a])));
        else gain[l] = gain[a] + (double)(l - a) / (double)(z - a) * (gain[z] - gain[a]);
    }
}

/* The tensors outside the layers (token_embd, output, ...) alone at probe q: their KLD. */
static iqf_status probe_outside(iqf_calib *cb, iqf_target_item *it, int idv, int layer, int c, double *kld, double *e,
                                const iqf_quantize_params *qp, iqf_target_buf *b, char *err, size_t errlen) {
    uint8_t *qd = NULL;
    iqf_status st = quantize_item(it, c, &qd, b, qp, e, err, errlen);
    if (!st) {
        iqf_calib_view(cb, idv, it->c[c].type, qd);
        st = iqf_calib_kld_from(cb, layer, kld, err, errlen);
        iqf_calib_view(cb, idv, 0, NULL);
    }
    free(qd);
    return st;
}

typedef struct layer_run {
    iqf_calib *cb;
    iqf_target_item *items;
    int nt, L;
    const iqf_target_params *tp;
    const iqf_quantize_params *qp;
    FILE *logf;
    int *id, *layer;
    int (*probes)[IQF_TARGET_MAX_CAND];
    int *np;
    double *ps, *pe; /* [item][probe]: sensitivity, log err */
    layer_probe *lp; /* [L] */
    int parts;       /* gains per layer: 1, or 2 (attention and feed-forward halves) */
    iqf_target_buf b;
} layer_run;

/* Probe round q (the q-th probe type of every tensor). */
static iqf_status layer_round(layer_run *r, int q, const int *depths, int nd, char *err, size_t errlen) {
    const int nt = r->nt, L = r->L;
    double *dq = calloc((size_t)nt, sizeof *dq), *eq = calloc((size_t)nt, sizeof *eq), *gain = malloc(sizeof(double) * (size_t)(2 * L + 2));
    if (!dq || !eq || !gain) {
        free(dq), free(eq), free(gain);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    iqf_status st = IQF_OK;
    int di = 0;
    for (int l = 0; l < L && !st; l++) {
        const bool depth = di < nd && depths[di] == l;
        if (depth) di++;
        double g[2] = { -1, -1 };
        st = probe_layer(r->cb, r->items, r->id, &r->lp[l], l, depth, r->parts, q, r->probes, r->np, dq, eq, g, r->qp, &r->b,
                         r->logf, err, errlen);
        gain[l] = g[0], gain[L + l] = g[1];
    }
    if (!st) interpolate_gains(gain, L), interpolate_gains(gain + L, L);
    for (int i = 0; i < nt && !st; i++) {
        iqf_target_item *it = &r->items[i];
        if (r->id[i] < 0 || q >= r->np[i]) continue;
        const int c = probe_of(r->probes[i], r->np[i], q);
        double kld = 0, e = eq[i];
        if (r->layer[i] < 0 || r->layer[i] >= L) {
            if ((st = probe_outside(r->cb, it, r->id[i], r->layer[i], c, &kld, &e, r->qp, &r->b, err, errlen))) break;
        } else {
            kld = gain[part_of(it) * L + r->layer[i]] * dq[i];
        }
        it->c[c].kld = kld;
        r->ps[i * IQF_TARGET_MAX_CAND + q] = e > 0 ? kld / e : 0;
        r->pe[i * IQF_TARGET_MAX_CAND + q] = log(e > 1e-300 ? e : 1e-300);
        if (r->logf)
            fprintf(r->logf, "calibrate: %-32s %-7s err %.4e  KLD %.6f%s  sensitivity %.4e\n", it->t->name, tname(it->c[c].type), e,
                    kld, r->layer[i] >= 0 && r->layer[i] < L ? " (layer)" : "", r->ps[i * IQF_TARGET_MAX_CAND + q]);
    }
    free(dq), free(eq), free(gain);
    return st;
}

static iqf_status calibrate_layers(iqf_calib *cb, iqf_target_item *items, int nt, const iqf_target_params *tp,
                                   const iqf_quantize_params *qp, FILE *logf, char *err, size_t errlen) {
    layer_run r = { .cb = cb, .items = items, .nt = nt, .L = iqf_calib_n_layers(cb), .tp = tp, .qp = qp, .logf = logf,
                    .parts = tp->calib_halves ? 2 : 1 };
    const size_t n = (size_t)(nt > 0 ? nt : 1);
    r.id = malloc(n * sizeof *r.id);
    r.layer = malloc(n * sizeof *r.layer);
    r.probes = malloc(n * sizeof *r.probes);
    r.np = calloc(n, sizeof *r.np);
    r.ps = calloc(n * IQF_TARGET_MAX_CAND, sizeof *r.ps);
    r.pe = calloc(n * IQF_TARGET_MAX_CAND, sizeof *r.pe);
    r.lp = calloc((size_t)(r.L > 0 ? r.L : 1), sizeof *r.lp);
    int *depths = malloc(sizeof(int) * (size_t)(r.L > 0 ? r.L : 1));
    iqf_status st = r.id && r.layer && r.probes && r.np && r.ps && r.pe && r.lp && depths
                        ? IQF_OK
                        : iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    int maxp = 0;
    for (int l = 0; l < r.L && !st; l++)
        if (!(r.lp[l].idx = malloc(n * sizeof(int)))) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < nt && !st; i++) {
        iqf_target_item *it = &items[i];
        const iqf_gguf_tensor *t = it->t;
        r.id[i] = it->fixed || !it->quantizable ? -1 : iqf_calib_weight(cb, t->name, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
        r.layer[i] = iqf_calib_weight_layer(cb, r.id[i]);
        if (it->fixed || !it->quantizable) continue;
        if (r.id[i] < 0) { /* a tensor the engine does not use */
            for (int c = 0; c < it->n_cand; c++) it->c[c].sens = 0;
            continue;
        }
        r.np[i] = probe_list(it, tp, r.probes[i]);
        if (r.np[i] > maxp) maxp = r.np[i];
        if (r.layer[i] >= 0 && r.layer[i] < r.L) r.lp[r.layer[i]].idx[r.lp[r.layer[i]].n++] = i;
    }
    const int nd = st ? 0 : depth_list(r.L, tp->calib_depths, depths);
    if (!st && logf) fprintf(logf, "calibrate: layer method, %d probe round(s), gains at %d of %d layers\n", maxp, nd, r.L);
    const double t0 = iqf_now();
    for (int q = 0; q < maxp && !st; q++) st = layer_round(&r, q, depths, nd, err, errlen);
    if (!st && logf) fprintf(logf, "calibrate: probes in %.2f s\n", iqf_now() - t0);
    for (int i = 0; i < nt && !st; i++)
        if (r.id[i] >= 0 && r.np[i] > 0) interpolate(&items[i], r.ps + i * IQF_TARGET_MAX_CAND, r.pe + i * IQF_TARGET_MAX_CAND, r.np[i]);
    for (int l = 0; l < r.L && r.lp; l++) free(r.lp[l].idx);
    free(r.id), free(r.layer), free(r.probes), free(r.np), free(r.ps), free(r.pe), free(r.lp), free(depths);
    iqf_target_buf_free(&r.b);
    return st;
}

iqf_status iqf_target_calibrate(const char *in, iqf_target_item *items, int nt, const iqf_target_params *tp,
                                const iqf_quantize_params *qp, FILE *logf, iqf_calib **out, char *err, size_t errlen) {
    /* a checkpoint converted in memory: the engine loads the items' handle (materialized then) */
    iqf_gguf *src = nt > 0 && iqf_gguf_is_source(items[0].g) ? items[0].g : NULL;
    iqf_calib_params cp = { tp->calib_text, tp->calib_ctx, tp->calib_chunks, qp->n_threads, src, true,
                            tp->calib_delta_chunks > 0 ? tp->calib_delta_chunks : 2 };
    iqf_calib *cb = NULL;
    const double t0 = iqf_now();
    iqf_status st = iqf_calib_open(in, &cp, &cb, err, errlen);
    if (st) return st;
    if (logf) fprintf(logf, "calibrate: the model's distributions and layer cache in %.2f s\n", iqf_now() - t0);
    if (tp->calib_per_tensor) {
        iqf_target_buf b;
        memset(&b, 0, sizeof b);
        for (int i = 0; i < nt && !st; i++)
            if (!items[i].fixed && items[i].quantizable) st = probe_tensor(cb, &items[i], tp, qp, &b, logf, err, errlen);
        iqf_target_buf_free(&b);
    } else {
        st = calibrate_layers(cb, items, nt, tp, qp, logf, err, errlen);
    }
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

/* --- the joint KLD of a whole plan, one layer's tensors quantized at a time --- */

typedef struct stream_ctx {
    iqf_target_spill *spill; /* where the encoded blocks go (variant `variant`), or NULL */
    int variant;
    iqf_calib *cb;
    iqf_target_item *items;
    int nt, L;
    const int *types;
    int *id, *layer;
    uint8_t **qd;
    const iqf_quantize_params *qp;
    iqf_target_buf b;
} stream_ctx;

static iqf_status stream_fn(void *user, int layer, bool on, char *err, size_t errlen) {
    stream_ctx *s = user;
    for (int i = 0; i < s->nt; i++) {
        const int li = s->layer[i] < 0 ? -1 : s->layer[i];
        if (s->id[i] < 0 || li != layer || s->types[i] < 0 || s->types[i] == IQF_TYPE_F32) continue;
        if (!on) {
            iqf_calib_view(s->cb, s->id[i], 0, NULL);
            free(s->qd[i]);
            s->qd[i] = NULL;
            continue;
        }
        iqf_target_item *it = &s->items[i];
        const iqf_gguf_tensor *t = it->t;
        const size_t qb = iqf_row_size(s->types[i], t->ne[0]) * (size_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        double e = 0;
        s->qd[i] = malloc(qb ? qb : 1);
        if (!s->qd[i]) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (checking %s)", t->name);
        /* a tensor the other variant already encoded at this type: its blocks, read back */
        if (s->spill && iqf_target_spill_share(s->spill, 1 - s->variant, s->variant, i, s->types[i], s->qd[i], qb)) {
            iqf_calib_view(s->cb, s->id[i], s->types[i], s->qd[i]);
            continue;
        }
        iqf_status st = iqf_target_encode(it, s->types[i], true, s->qd[i], s->qp, &s->b, &e, err, errlen);
        if (!st && s->spill) st = iqf_target_spill_put(s->spill, s->variant, i, s->types[i], s->qd[i], qb, err, errlen);
        if (st) return st;
        iqf_calib_view(s->cb, s->id[i], s->types[i], s->qd[i]);
    }
    return IQF_OK;
}

iqf_status iqf_target_joint_kld(iqf_calib *cb, iqf_target_item *items, int nt, const int *types, const iqf_quantize_params *qp,
                                iqf_target_spill *spill, int variant, double *kld, char *err, size_t errlen) {
    stream_ctx s = { .spill = spill, .variant = variant, .cb = cb, .items = items, .nt = nt, .L = iqf_calib_n_layers(cb),
                     .types = types, .qp = qp };
    const size_t n = (size_t)(nt > 0 ? nt : 1);
    s.id = malloc(n * sizeof *s.id);
    s.layer = malloc(n * sizeof *s.layer);
    s.qd = calloc(n, sizeof *s.qd);
    iqf_status st = s.id && s.layer && s.qd ? IQF_OK : iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < nt && !st; i++) {
        const iqf_gguf_tensor *t = items[i].t;
        s.id[i] = types[i] < 0 ? -1 : iqf_calib_weight(cb, t->name, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3]);
        s.layer[i] = iqf_calib_weight_layer(cb, s.id[i]);
    }
    if (!st) st = iqf_calib_kld_stream(cb, stream_fn, &s, kld, err, errlen);
    for (int i = 0; i < nt && s.qd; i++)
        if (s.qd[i]) {
            iqf_calib_view(cb, s.id[i], 0, NULL);
            free(s.qd[i]);
        }
    free(s.id), free(s.layer), free(s.qd);
    iqf_target_buf_free(&s.b);
    return st;
}

/* --- the check's blocks kept for the file (iqf_target_spill) --- */

struct iqf_target_spill {
    int fd;
    int n;
    uint64_t end;
    char (*names)[IQF_GGUF_MAX_NAME]; /* the items' input tensor names */
    int64_t *off[2];  /* [variant][item]: offset of its blocks, -1: none */
    int *type[2];
    int variant;      /* the one the file takes */
    int last;         /* the item found last (the pipeline asks slab by slab) */
};

iqf_target_spill *iqf_target_spill_open(const char *dir, const iqf_target_item *items, int nt, char *err, size_t errlen) {
    iqf_target_spill *sp = calloc(1, sizeof *sp);
    char path[4096];
    if (!sp || snprintf(path, sizeof path, "%s/.iqforge-blocks-XXXXXX", dir && *dir ? dir : ".") >= (int)sizeof path) {
        free(sp);
        iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        return NULL;
    }
    sp->fd = mkstemp(path);
    if (sp->fd < 0) {
        iqf_fail(err, errlen, IQF_E_IO, "%s: cannot create a temporary file: %s", path, strerror(errno));
        free(sp);
        return NULL;
    }
    unlink(path); /* nothing is left behind, also when interrupted */
    sp->n = nt;
    sp->names = malloc(sizeof *sp->names * (size_t)(nt > 0 ? nt : 1));
    for (int i = 0; sp->names && i < nt; i++) snprintf(sp->names[i], sizeof sp->names[i], "%s", items[i].t->name);
    for (int v = 0; v < 2; v++) {
        sp->off[v] = malloc(sizeof(int64_t) * (size_t)(nt > 0 ? nt : 1));
        sp->type[v] = malloc(sizeof(int) * (size_t)(nt > 0 ? nt : 1));
        for (int i = 0; sp->off[v] && i < nt; i++) sp->off[v][i] = -1;
    }
    if (!sp->names || !sp->off[0] || !sp->off[1] || !sp->type[0] || !sp->type[1]) {
        iqf_target_spill_free(sp);
        iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        return NULL;
    }
    return sp;
}

void iqf_target_spill_free(iqf_target_spill *sp) {
    if (!sp) return;
    if (sp->fd >= 0) close(sp->fd);
    for (int v = 0; v < 2; v++) free(sp->off[v]), free(sp->type[v]);
    free(sp->names);
    free(sp);
}

void iqf_target_spill_choose(iqf_target_spill *sp, int variant) {
    if (sp) sp->variant = variant;
}

iqf_status iqf_target_spill_put(iqf_target_spill *sp, int variant, int i, int type, const void *q, size_t bytes, char *err,
                                size_t errlen) {
    const uint8_t *p = q;
    uint64_t off = sp->end;
    for (size_t done = 0; done < bytes;) {
        const ssize_t w = pwrite(sp->fd, p + done, bytes - done, (off_t)(off + done));
        if (w <= 0) return iqf_fail(err, errlen, IQF_E_IO, "the temporary file of encoded blocks: %s", w < 0 ? strerror(errno) : "short write");
        done += (size_t)w;
    }
    sp->end += bytes;
    sp->off[variant][i] = (int64_t)off;
    sp->type[variant][i] = type;
    return IQF_OK;
}

/* bytes of fd from offset off into dst, all of them (false on an error or a short file). */
static bool read_at(int fd, void *dst, size_t bytes, uint64_t off) {
    for (size_t done = 0; done < bytes;) {
        const ssize_t r = pread(fd, (uint8_t *)dst + done, bytes - done, (off_t)(off + done));
        if (r <= 0) return false;
        done += (size_t)r;
    }
    return true;
}

bool iqf_target_spill_share(iqf_target_spill *sp, int from, int to, int i, int type, void *dst, size_t bytes) {
    if (sp->off[from][i] < 0 || sp->type[from][i] != type || !read_at(sp->fd, dst, bytes, (uint64_t)sp->off[from][i]))
        return false;
    sp->off[to][i] = sp->off[from][i];
    sp->type[to][i] = type;
    return true;
}

bool iqf_target_spill_get(void *user, const char *tensor, int type, int64_t row0, int64_t nrows, int64_t ncols, void *dst) {
    iqf_target_spill *sp = user;
    const int v = sp->variant;
    int i = sp->last;
    if (i < 0 || i >= sp->n || strcmp(sp->names[i], tensor))
        for (i = 0; i < sp->n && strcmp(sp->names[i], tensor); i++) {}
    if (i >= sp->n || sp->off[v][i] < 0 || sp->type[v][i] != type) return false;
    sp->last = i;
    const size_t rs = iqf_row_size(type, ncols), bytes = rs * (size_t)nrows;
    /* false: the pipeline encodes the slab itself */
    return read_at(sp->fd, dst, bytes, (uint64_t)sp->off[v][i] + rs * (uint64_t)row0);
}
