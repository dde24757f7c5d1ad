/*
 * target.c - `quantize --target-size S | --target-bpw B`: the plan of the run (plan.c) says which
 * tensors are fixed (copied, or the user's choice) and which are free; each free tensor's error
 * is measured in every candidate type (target_measure.c), weighed by a sensitivity (relative, or
 * KLD calibrated with the engine: target_calib.c), types are allocated under the whole-file
 * budget (target_alloc.c), and the result is an exact per-tensor type array that the pipeline
 * quantizes (target_io.c). The file's size is the plan module's: metadata (with every KV the
 * pipeline writes, --override-kv and --prune-layers included) and padded tensor data.
 *
 * Sensitivity: see iqf_target_sens in iqforge.h.
 */
#include "iqforge.h"
#include "target.h"
#include "plan.h"
#include "../util/error.h"
#include "../util/progress.h"
#include "../util/traits.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

iqf_target_params iqf_target_default_params(void) {
    iqf_target_params p;
    memset(&p, 0, sizeof p);
    p.sens = IQF_TARGET_SENS_AUTO;
    p.calib_type = -1;
    p.calib_rounds = 0;
    return p;
}

static bool is_embd_or_output(const char *n) {
    return !strcmp(n, "token_embd.weight") || !strcmp(n, "per_layer_token_embd.weight") || !strcmp(n, "output.weight");
}

int iqf_target_candidates(const char *name, int64_t ncols, bool has_imatrix, int *out, int cap) {
    /* the registry's order (util/traits.c, target_rank): the IQ, K, q8_0, f16 and FP4 types for
     * rows of 256, the 32-blocks otherwise; never q1_0/q2_0/tq1_0/tq2_0 (with them the kjv-3m
     * plans put q1_0 on attention tensors, whose error lies far past the q3_K probe, and lose
     * 5-9% of KLD: 0.0204 without, 0.0223 with at the IQ3_XXS size, 80 held-out chunks) */
    int list[IQF_TYPE_COUNT];
    const int nl = iqf_traits_target_candidates(ncols, list, IQF_TYPE_COUNT);
    int n = 0;
    for (int i = 0; i < nl && n < cap; i++) {
        const int t = list[i];
        const iqf_type_info *ti = iqf_type_get(t);
        if (!ti || ncols % ti->blck_size != 0 || !iqf_can_encode(t)) continue;
        if (!has_imatrix) {
            /* ggml refuses these without one; llama-quantize the others except on embd/output */
            const iqf_type_traits *tr = iqf_traits(t);
            if (!tr || tr->ggml_imatrix || (tr->llama_imatrix && !is_embd_or_output(name))) continue;
        }
        out[n++] = t;
    }
    if (n == 0 && cap > 0) out[n++] = IQF_TYPE_F16; /* rows not a multiple of 32 */
    return n;
}


/* The llama file type recorded for a plan whose bytes are mostly of `type`. */
static int label_ftype(int type) {
    /* q8_0, f16: the override needs a quantized default */
    const iqf_type_traits *tr = iqf_traits(type);
    const iqf_type_info *ti = iqf_type_get(type);
    return tr && ti && ti->is_quantized && tr->ftype >= 0 ? tr->ftype : IQF_FTYPE_MOSTLY_Q8_0;
}

void iqf_target_plan_free(iqf_target_plan *p) {
    if (!p) return;
    iqf_target_spill_free(p->spill);
    free(p->e);
    free(p);
}

static uint64_t padded(uint64_t n, uint64_t align) { return (n + align - 1) / align * align; }

/* One run of iqf_target_plan_make: the stages below fill it in order. */
typedef struct target_run {
    const char *in;
    const iqf_model_quantize_params *qp;
    const iqf_target_params *tp;
    FILE *log;
    char *err;
    size_t errlen;
    iqf_quantize_params qz;
    iqf_plan pl;
    iqf_target_item *items;     /* pl's items, in output order */
    int nt, n_free;
    int64_t n_weights;
    uint64_t align, meta, fixed_bytes, min_size, max_size, budget;
    iqf_calib *cal;
    /* the allocation: n_free items, f -> items[map[f]] */
    int *kk, *choice, *map;
    const uint64_t **bb;
    const double **cc;
    double *costs;
    uint64_t *bytes;
    double total;
    double t0, t1, t2, t3;
    /* check_recipe */
    double joint_kld, recipe_kld;
    int recipe_ftype;
    bool recipe_chosen;
    iqf_target_spill *spill;
} target_run;

static iqf_status check_args(const iqf_model_quantize_params *qp, const iqf_target_params *tp, char *err, size_t errlen) {
    if (qp->pure) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--pure cannot be combined with --target-size/--target-bpw");
    if (!qp->imatrix_path)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--target-size/--target-bpw need an importance matrix (--imatrix)");
    if ((tp->target_size > 0) == (tp->target_bpw > 0))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "give exactly one of --target-size and --target-bpw");
    if (tp->target_bpw < 0 || !isfinite(tp->target_bpw))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid --target-bpw %g", tp->target_bpw);
    if (!iqf_mode_name(qp->mode)) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "unknown encoder mode %d", (int)qp->mode);
    return IQF_OK;
}

/* Whether the user chose the type of quantizable item i (--tensor-type, --output-tensor-type,
 * --token-embedding-type); a tied output's type goes to token_embd. */
static bool user_choice(target_run *r, int i, bool tied) {
    const iqf_model_quantize_params *qp = r->qp;
    const char *name = r->pl.rt[i].name;
    bool user = false;
    for (int o = 0; o < r->pl.n_ov && !user; o++) user = regexec(&r->pl.ov[o].re, name, 0, NULL, 0) == 0;
    if (qp->token_embedding_type >= 0 && (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")))
        user = true;
    if (qp->output_tensor_type >= 0 && !strcmp(name, "output.weight")) user = true;
    if (qp->output_tensor_type >= 0 && tied && !strcmp(name, "token_embd.weight")) {
        user = true;
        if (qp->token_embedding_type < 0) r->items[i].type = qp->output_tensor_type;
    }
    return user;
}

/* The plan with the recipe's types (q8_0 standing for the free tensors), its metadata size, and
 * the items: fixed or free, the candidates of the free ones. */
static iqf_status classify(target_run *r) {
    iqf_plan *pl = &r->pl;
    iqf_status st = iqf_plan_open(pl, r->in, r->qp, NULL, r->err, r->errlen);
    if (st) return st;
    if (!pl->have_im)
        return iqf_fail(r->err, r->errlen, IQF_E_INVALID_ARG, "%s: no importance-matrix entries left to use", r->qp->imatrix_path);
    if ((st = iqf_plan_types(pl, IQF_FTYPE_MOSTLY_Q8_0, NULL, NULL, 0))) return st;
    if (!iqf_plan_size(pl, &r->meta, &r->align)) return IQF_E_INVALID_ARG;
    r->nt = (int)pl->nt;
    r->items = calloc((size_t)(r->nt > 0 ? r->nt : 1), sizeof *r->items);
    if (!r->items) return iqf_fail(r->err, r->errlen, IQF_E_NOMEM, "out of memory");
    const bool tied = iqf_gguf_find_tensor(pl->g, "output.weight") < 0;
    uint64_t min_free = 0, max_free = 0;
    for (int i = 0; i < r->nt; i++) {
        iqf_target_item *it = &r->items[i];
        const iqf_gguf_tensor *t = pl->items[i].t;
        it->t = t;
        it->g = pl->g;
        it->fb = pl->fb;
        it->name = pl->rt[i].name;
        it->im = pl->items[i].imatrix;
        it->type = pl->items[i].choice.type;
        r->n_weights += iqf_gguf_tensor_nelements(t);
        it->quantizable = pl->items[i].choice.allows_quantization;
        it->fixed = !it->quantizable || user_choice(r, i, tied);
        const uint64_t nrows = (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        if (it->fixed) {
            const uint64_t nb = it->type == t->type ? t->nbytes : (uint64_t)iqf_row_size(it->type, t->ne[0]) * nrows;
            r->fixed_bytes += padded(nb, r->align);
            continue;
        }
        it->type = -1;
        int types[IQF_TARGET_MAX_CAND];
        it->n_cand = iqf_target_candidates(it->name, t->ne[0], it->im != NULL, types, IQF_TARGET_MAX_CAND);
        uint64_t mn = UINT64_MAX, mx = 0;
        for (int c = 0; c < it->n_cand; c++) {
            it->c[c].type = types[c];
            it->c[c].bytes = padded((uint64_t)iqf_row_size(types[c], t->ne[0]) * nrows, r->align);
            if (it->c[c].bytes < mn) mn = it->c[c].bytes;
            if (it->c[c].bytes > mx) mx = it->c[c].bytes;
        }
        min_free += mn;
        max_free += mx;
        r->n_free++;
    }
    r->min_size = r->meta + r->fixed_bytes + min_free;
    r->max_size = r->meta + r->fixed_bytes + max_free;
    return IQF_OK;
}

/* The budget in bytes, within what the candidates allow. */
static iqf_status set_budget(target_run *r) {
    const iqf_target_params *tp = r->tp;
    const double nw = (double)r->n_weights;
    r->budget = tp->target_size;
    if (tp->target_bpw > 0) {
        const double b = floor(tp->target_bpw * nw / 8.0);
        r->budget = b >= 1.8e19 ? UINT64_MAX : (uint64_t)b;
    }
    if (r->budget < r->min_size)
        return iqf_fail(r->err, r->errlen, IQF_E_INVALID_ARG,
                        "target size %" PRIu64 " bytes (%.4f bpw) is below the smallest file the candidate types allow (%" PRIu64 " bytes, %.4f bpw)",
                        r->budget, (double)r->budget * 8.0 / nw, r->min_size, (double)r->min_size * 8.0 / nw);
    if (r->budget > r->max_size)
        return iqf_fail(r->err, r->errlen, IQF_E_INVALID_ARG,
                        "target size %" PRIu64 " bytes (%.4f bpw) is above the largest file the candidate types allow (%" PRIu64 " bytes, %.4f bpw, F16)",
                        r->budget, (double)r->budget * 8.0 / nw, r->max_size, (double)r->max_size * 8.0 / nw);
    if (r->log)
        fprintf(r->log, "target: %" PRIu64 " bytes (%.4f bpw); %d tensors to choose, %d fixed; metadata %" PRIu64 " bytes, fixed tensors %" PRIu64 " bytes\n",
                r->budget, (double)r->budget * 8.0 / nw, r->n_free, r->nt - r->n_free, r->meta, r->fixed_bytes);
    return IQF_OK;
}

/* Every free tensor's candidates measured; sensitivities relative (or none). */
static iqf_status measure_all(target_run *r) {
    int64_t done_w = 0, tot_w = 0;
    for (int i = 0; i < r->nt; i++)
        if (!r->items[i].fixed) tot_w += iqf_gguf_tensor_nelements(r->items[i].t);
    iqf_progress prog;
    iqf_progress_init(&prog, r->qp->progress, r->qp->progress_user, r->nt, tot_w);
    double max_rse = 0;
    iqf_status st = IQF_OK;
    iqf_target_buf buf = { 0 };
    for (int i = 0; i < r->nt && !st; i++) {
        iqf_target_item *it = &r->items[i];
        if (it->fixed) continue;
        iqf_progress_update(&prog, i + 1, it->t->name, "measure", done_w);
        if ((st = iqf_target_measure(it, r->tp, &r->qz, r->align, &buf, r->err, r->errlen))) break;
        done_w += iqf_gguf_tensor_nelements(it->t);
        for (int c = 0; c < it->n_cand; c++)
            if (it->c[c].err > 0 && it->c[c].se / it->c[c].err > max_rse && it->c[c].type != IQF_TYPE_F16)
                max_rse = it->c[c].se / it->c[c].err;
        it->weight = r->tp->sens == IQF_TARGET_SENS_NONE ? 1.0 : it->signal > 0 ? 1.0 / it->signal : 1.0;
        for (int c = 0; c < it->n_cand; c++) {
            it->c[c].sens = it->weight;
            it->c[c].kld = -1;
        }
    }
    iqf_progress_done(&prog);
    iqf_target_buf_free(&buf);
    if (st) return st;
    r->t1 = iqf_now();
    if (r->log)
        fprintf(r->log, "target: measured in %.2f s (largest relative standard error from row sampling: %.2f%%)\n", r->t1 - r->t0,
                100 * max_rse);
    return IQF_OK;
}

/* KLD sensitivities (the layer method, target_calib.c) by default, at every model size; the
 * relative weights only with --no-calibrate, or when the engine cannot run the model. */
static iqf_status calibrate(target_run *r) {
    const iqf_target_params *tp = r->tp;
    if (tp->sens == IQF_TARGET_SENS_KLD)
        return iqf_target_calibrate(r->in, r->items, r->nt, tp, &r->qz, r->log, &r->cal, r->err, r->errlen);
    if (tp->sens != IQF_TARGET_SENS_AUTO) return IQF_OK;
    iqf_target_params t2 = *tp;
    t2.sens = IQF_TARGET_SENS_KLD;
    char e2[512];
    iqf_status st = iqf_target_calibrate(r->in, r->items, r->nt, &t2, &r->qz, r->log, &r->cal, e2, sizeof e2);
    if (st && r->log) fprintf(r->log, "target: no calibration (%s); errors weighed by relative error\n", e2);
    if (st) /* the sensitivities were not all set: back to the relative weights */
        for (int i = 0; i < r->nt; i++)
            for (int c = 0; c < r->items[i].n_cand; c++) r->items[i].c[c].sens = r->items[i].weight;
    return IQF_OK;
}

/* The allocator's tables: costs (sens * err) and bytes of every free item's candidates. */
static iqf_status alloc_tables(target_run *r) {
    const size_t nf = (size_t)(r->n_free ? r->n_free : 1);
    r->kk = calloc(nf, sizeof *r->kk);
    r->choice = calloc(nf, sizeof *r->choice);
    r->map = calloc(nf, sizeof *r->map);
    r->bb = calloc(nf, sizeof *r->bb);
    r->cc = calloc(nf, sizeof *r->cc);
    r->costs = calloc(nf * IQF_TARGET_MAX_CAND, sizeof *r->costs);
    r->bytes = calloc(nf * IQF_TARGET_MAX_CAND, sizeof *r->bytes);
    if (!r->kk || !r->choice || !r->map || !r->bb || !r->cc || !r->costs || !r->bytes)
        return iqf_fail(r->err, r->errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0, f = 0; i < r->nt; i++) {
        const iqf_target_item *it = &r->items[i];
        if (it->fixed) continue;
        r->map[f] = i;
        r->kk[f] = it->n_cand;
        for (int c = 0; c < it->n_cand; c++) r->bytes[f * IQF_TARGET_MAX_CAND + c] = it->c[c].bytes;
        r->bb[f] = r->bytes + f * IQF_TARGET_MAX_CAND;
        r->cc[f] = r->costs + f * IQF_TARGET_MAX_CAND;
        f++;
    }
    return IQF_OK;
}

/* Costs from the current sensitivities, then the allocation. */
static iqf_status allocate(target_run *r) {
    for (int f = 0; f < r->n_free; f++)
        for (int c = 0; c < r->items[r->map[f]].n_cand; c++)
            r->costs[f * IQF_TARGET_MAX_CAND + c] = r->items[r->map[f]].c[c].sens * r->items[r->map[f]].c[c].err;
    uint64_t used = 0;
    return iqf_target_allocate(r->n_free, r->kk, r->bb, r->cc, r->budget - r->meta - r->fixed_bytes, r->choice, &used,
                               &r->total, r->err, r->errlen);
}

/* In-context rounds: measure the plan jointly, rescale, reallocate; keep the plan whose joint KLD
 * on the calibration text is lowest. */
static iqf_status context_rounds(target_run *r) {
    const int rounds = r->tp->calib_rounds >= 0 ? r->tp->calib_rounds : 3;
    int *best_choice = malloc(sizeof(int) * (size_t)(r->n_free ? r->n_free : 1));
    if (!best_choice) return iqf_fail(r->err, r->errlen, IQF_E_NOMEM, "out of memory");
    double best = INFINITY;
    iqf_status st = IQF_OK;
    for (int k = 0; k <= rounds; k++) {
        for (int f = 0; f < r->n_free; f++) r->items[r->map[f]].chosen = r->choice[f];
        double jk = 0;
        if ((st = iqf_target_calib_context(r->cal, r->items, r->nt, &r->qz, k < rounds ? r->log : NULL, &jk, r->err, r->errlen)))
            break;
        if (r->log) fprintf(r->log, "calibrate: round %d: plan of predicted KLD %.6f has joint KLD %.6f\n", k, r->total, jk);
        if (jk < best) {
            best = jk;
            if (r->n_free > 0) memcpy(best_choice, r->choice, sizeof(int) * (size_t)r->n_free);
        }
        if (k == rounds) break;
        if ((st = allocate(r))) break;
    }
    if (!st && r->n_free > 0) memcpy(r->choice, best_choice, sizeof(int) * (size_t)r->n_free);
    free(best_choice);
    return st;
}

/* The llama file type whose recipe file is the largest at or under the budget (with the run's
 * fixed choices): its id (-1: none), its size, the types it gives the free items (-1 others). */
static int nearest_recipe(target_run *r, int *rtypes, uint64_t *size) {
    int best = -1;
    uint64_t bs = 0;
    for (int ft = 1; ft < 64; ft++) {
        const int dt = iqf_ftype_name(ft) ? iqf_ftype_default_type(ft) : -1;
        const iqf_type_info *ti = dt >= 0 ? iqf_type_get(dt) : NULL;
        if (!ti || !ti->is_quantized || iqf_plan_types(&r->pl, ft, NULL, NULL, 0)) continue;
        const uint64_t sz = iqf_plan_size(&r->pl, NULL, NULL);
        if (sz && sz <= r->budget && sz > bs) best = ft, bs = sz;
    }
    if (best < 0 || iqf_plan_types(&r->pl, best, NULL, NULL, 0)) return -1;
    for (int i = 0; i < r->nt; i++) rtypes[i] = r->items[i].fixed ? -1 : r->pl.items[i].choice.type;
    *size = bs;
    return best;
}

/* Item it's candidate of type `type`, added (bytes, no measured error) if it is not one. */
static int cand_of(target_run *r, iqf_target_item *it, int type) {
    for (int c = 0; c < it->n_cand; c++)
        if (it->c[c].type == type) return c;
    if (it->n_cand >= IQF_TARGET_MAX_CAND) return -1;
    iqf_target_cand *cd = &it->c[it->n_cand];
    memset(cd, 0, sizeof *cd);
    cd->type = type;
    cd->kld = -1;
    cd->bytes = padded((uint64_t)iqf_row_size(type, it->t->ne[0]) * (uint64_t)(it->t->ne[1] * it->t->ne[2] * it->t->ne[3]), r->align);
    return it->n_cand++;
}

/* Never worse than the recipe: the joint KLD of the plan and of the recipe nearest under the
 * budget on the calibration text; the better is kept (the recipe's types become the plan). */
static iqf_status check_recipe(target_run *r) {
    int *pt = malloc(sizeof(int) * (size_t)(r->nt > 0 ? r->nt : 1)), *rt = malloc(sizeof(int) * (size_t)(r->nt > 0 ? r->nt : 1));
    iqf_status st = pt && rt ? IQF_OK : iqf_fail(r->err, r->errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < r->nt && !st; i++) pt[i] = -1;
    for (int f = 0; f < r->n_free && !st; f++) pt[r->map[f]] = r->items[r->map[f]].c[r->choice[f]].type;
    const double t0 = iqf_now();
    if (!st && r->tp->spill_dir && !r->qp->dry_run && !(r->spill = iqf_target_spill_open(r->tp->spill_dir, r->items, r->nt, r->err, r->errlen)))
        st = IQF_E_IO;
    if (!st) st = iqf_target_joint_kld(r->cal, r->items, r->nt, pt, &r->qz, r->spill, 0, &r->joint_kld, r->err, r->errlen);
    uint64_t rsize = 0;
    r->recipe_ftype = st ? -1 : nearest_recipe(r, rt, &rsize);
    r->recipe_kld = -1;
    if (!st && r->recipe_ftype >= 0) {
        st = iqf_target_joint_kld(r->cal, r->items, r->nt, rt, &r->qz, r->spill, 1, &r->recipe_kld, r->err, r->errlen);
    }
    if (!st && r->recipe_ftype >= 0 && r->recipe_kld < r->joint_kld) {
        r->recipe_chosen = true;
        for (int f = 0; f < r->n_free; f++) {
            iqf_target_item *it = &r->items[r->map[f]];
            const int c = cand_of(r, it, rt[r->map[f]]);
            if (c < 0) {
                r->recipe_chosen = false;
                break;
            }
            r->choice[f] = c;
        }
    }
    iqf_target_spill_choose(r->spill, r->recipe_chosen ? 1 : 0);
    if (!st && r->log) {
        if (r->recipe_ftype < 0)
            fprintf(r->log, "target: plan joint KLD %.6f on the calibration text; no recipe fits the target\n", r->joint_kld);
        else
            fprintf(r->log, "target: joint KLD on the calibration text: plan %.6f, recipe %s (%" PRIu64 " bytes) %.6f: writing the %s (checked in %.2f s)\n",
                    r->joint_kld, iqf_ftype_name(r->recipe_ftype), rsize, r->recipe_kld, r->recipe_chosen ? "recipe" : "plan", iqf_now() - t0);
    }
    free(pt), free(rt);
    return st;
}

/* The chosen types as the plan's exact array; the file type to record; the exact size. */
static iqf_status finish_plan(target_run *r, iqf_target_plan *plan) {
    int *types = malloc(sizeof(int) * (size_t)(r->nt > 0 ? r->nt : 1));
    if (!types) return iqf_fail(r->err, r->errlen, IQF_E_NOMEM, "out of memory");
    uint64_t by_type[IQF_TYPE_COUNT];
    memset(by_type, 0, sizeof by_type);
    for (int f = 0; f < r->n_free; f++) {
        iqf_target_item *it = &r->items[r->map[f]];
        it->chosen = r->choice[f];
        it->type = it->c[it->chosen].type;
        if (it->type >= 0 && it->type < IQF_TYPE_COUNT) by_type[it->type] += it->c[it->chosen].bytes;
    }
    for (int i = 0; i < r->nt; i++) types[i] = r->items[i].fixed ? -1 : r->items[i].type;
    int dom = IQF_TYPE_Q8_0;
    for (int t = 0; t < IQF_TYPE_COUNT; t++)
        if (by_type[t] > by_type[dom]) dom = t;
    const int uf = r->qp->ftype;
    plan->ftype = uf > 0 && iqf_ftype_default_type(uf) >= 0 && iqf_type_get(iqf_ftype_default_type(uf))->is_quantized
                      ? uf
                      : label_ftype(dom);
    iqf_status st = iqf_plan_types(&r->pl, plan->ftype, types, NULL, r->nt);
    free(types);
    if (st) return st;
    plan->file_size = iqf_plan_size(&r->pl, &plan->meta_size, NULL);
    if (!plan->file_size) return IQF_E_INVALID_ARG;
    plan->n = r->nt;
    for (int i = 0; i < r->nt; i++) {
        const iqf_target_item *it = &r->items[i];
        iqf_target_entry *e = &plan->e[i];
        snprintf(e->name, sizeof e->name, "%s", it->name);
        e->type = r->pl.items[i].choice.type;
        e->quantizable = it->quantizable;
        e->fixed = it->fixed;
        e->bytes = padded(iqf_plan_item_bytes(&r->pl, i), r->align);
        if (it->fixed) continue;
        const iqf_target_cand *c = &it->c[it->chosen];
        e->weight = c->sens;
        e->error = c->sens * c->err;
        e->error_se = c->sens * c->se;
        plan->total_error += e->error;
    }
    if (plan->file_size > r->budget) /* cannot happen: the allocator never exceeds its budget */
        return iqf_fail(r->err, r->errlen, IQF_E_FORMAT, "internal error: plan of %" PRIu64 " bytes over the target %" PRIu64,
                        plan->file_size, r->budget);
    return IQF_OK;
}

static void run_free(target_run *r) {
    free(r->kk), free(r->choice), free(r->map), free(r->bb), free(r->cc), free(r->costs), free(r->bytes);
    iqf_calib_free(r->cal);
    iqf_target_spill_free(r->spill);
    free(r->items);
    iqf_plan_free(&r->pl);
}

iqf_status iqf_target_plan_make(const char *in, const iqf_model_quantize_params *qp, const iqf_target_params *tp,
                                iqf_target_plan **out, FILE *log, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!in || !qp || !tp || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing argument");
    iqf_status st = check_args(qp, tp, err, errlen);
    if (st) return st;
    target_run r = { .in = in, .qp = qp, .tp = tp, .log = log, .err = err, .errlen = errlen, .t0 = iqf_now(), .recipe_ftype = -1 };
    r.qz = iqf_quantize_default_params();
    r.qz.n_threads = qp->n_threads > 0 ? qp->n_threads : iqf_cpu_count();
    r.qz.mode = qp->mode;
    iqf_target_plan *plan = calloc(1, sizeof *plan);
    st = classify(&r);
    if (!st) st = set_budget(&r);
    if (!st) st = measure_all(&r);
    if (!st) st = calibrate(&r);
    r.t2 = iqf_now();
    if (!st) st = alloc_tables(&r);
    if (!st) st = allocate(&r);
    r.t3 = iqf_now();
    if (!st && r.cal && r.tp->calib_rounds != 0) st = context_rounds(&r);
    if (!st && r.cal) st = check_recipe(&r);
    if (r.cal) r.t2 = r.t3 = iqf_now();
    if (!st && plan) plan->e = calloc((size_t)(r.nt > 0 ? r.nt : 1), sizeof *plan->e);
    if (!st && (!plan || !plan->e)) st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    if (!st) st = finish_plan(&r, plan);
    if (!st) {
        plan->budget = r.budget;
        plan->min_size = r.min_size;
        plan->max_size = r.max_size;
        plan->n_weights = r.n_weights;
        plan->seconds_measure = r.t1 - r.t0;
        plan->seconds_calib = r.t2 - r.t1;
        plan->seconds_alloc = r.t3 - r.t2;
        plan->joint_kld = r.cal ? r.joint_kld : -1;
        plan->recipe_kld = r.cal ? r.recipe_kld : -1;
        plan->recipe_ftype = r.cal ? r.recipe_ftype : -1;
        plan->recipe_chosen = r.recipe_chosen;
        plan->spill = r.spill;
        r.spill = NULL;
        *out = plan;
        plan = NULL;
    }
    iqf_target_plan_free(plan);
    run_free(&r);
    return st;
}
