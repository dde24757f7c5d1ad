/*
 * eval.c - perplexity, KL-divergence and importance-matrix collection, following
 * llama-perplexity and llama-imatrix (tools/perplexity/perplexity.cpp, tools/imatrix/).
 */
#include "model.h"
#include "../util/error.h"

#include "util/outfile.h"
#include "kld.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ggml's nearest_int (round half to even in float). */

/* Per scored row results, filled in parallel and summed in order (deterministic). */
typedef struct rowres {
    double nll;          /* -log p(target) */
    double kld;          /* KL(base || model) */
    float p_diff;        /* p - p_base of the target */
    float nll_f, nll_base;
    int same_top;
} rowres;

typedef struct scorejob {
    const float *logits;      /* rows of n_vocab */
    const int32_t *targets;   /* next tokens, one per row */
    int n_vocab, nv;
    int mode;                 /* 0 ppl, 1 write base, 2 kld */
    uint16_t *lp;             /* mode 1 out / mode 2 in: rows of nv uint16 */
    rowres *res;
} scorejob;

static void score_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const scorejob *j = arg;
    const int nvoc = j->n_vocab;
    for (int64_t i = b; i < e; i++) {
        const float *l = j->logits + (size_t)i * nvoc;
        const int tok = j->targets[i];
        rowres *r = &j->res[i];
        if (j->mode == 0) {
            r->nll = iqf_nll_row(l, nvoc, tok);
        } else if (j->mode == 1) {
            r->nll = iqf_kld_pack_row(l, nvoc, tok, j->lp + (size_t)i * j->nv);
        } else {
            iqf_kld_row k;
            iqf_kld_score_row(l, nvoc, tok, j->lp + (size_t)i * j->nv, &k);
            r->nll_f = k.nll;
            r->nll_base = k.nll_base;
            r->kld = k.kld;
            r->same_top = k.same_top;
            r->p_diff = expf(-k.nll) - expf(-k.nll_base);
        }
    }
}

typedef struct kldsum {
    double nll, nll2, nllb, nllb2, nllnllb, kld, kld2, pd, pd2, pd4;
    size_t same, count;
} kldsum;

static void mean_unc(double sum, double sum2, size_t n, double *f, double *df) {
    if (n < 1) { *f = *df = 0; return; }
    *f = sum / (double)n;
    double d = sum2 / (double)n - *f * *f;
    *df = d > 0 && n > 10 ? sqrt(d / (double)(n - 1)) : 0.;
}

static double covariance(double a, double b, double ab, size_t n) {
    if (n < 10) return 0.0;
    double v = ab / (double)n - (a / (double)n) * (b / (double)n);
    return v / (double)(n - 1);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float percentile(const float *v, size_t n, float fraction) {
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static void kld_line(FILE *log, int chunk, const kldsum *k) {
    if (!log) return;
    double lp, lpu, lb, lbu, kl, klu, mse, mseu;
    mean_unc(k->nll, k->nll2, k->count, &lp, &lpu);
    mean_unc(k->nllb, k->nllb2, k->count, &lb, &lbu);
    double cov = covariance(k->nll, k->nllb, k->nllnllb, k->count);
    double ratio_unc = sqrt(fmax(0, lpu * lpu + lbu * lbu - 2.0 * cov));
    mean_unc(k->kld, k->kld2, k->count, &kl, &klu);
    mean_unc(k->pd2, k->pd4, k->count, &mse, &mseu);
    double rms = sqrt(mse), rmsu = rms > 0 ? 0.5 / rms * mseu : 0;
    double top = (double)k->same / (double)k->count;
    double topu = k->count > 1 ? sqrt(top * (1 - top) / (double)(k->count - 1)) : 0;
    fprintf(log, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
            chunk, exp(lp), exp(lp) * lpu, lp - lb, ratio_unc, kl, klu, 100.0 * rms, 100.0 * rmsu,
            100.0 * top, 100.0 * topu);
    fflush(log);
}

/* One scored row of a --kld run into the sums. */
static void kld_add(kldsum *ks, const rowres *r) {
    ks->nll += r->nll_f;
    ks->nll2 += (double)(r->nll_f * r->nll_f);
    ks->nllb += r->nll_base;
    ks->nllb2 += (double)(r->nll_base * r->nll_base);
    ks->nllnllb += (double)(r->nll_f * r->nll_base);
    ks->kld += r->kld;
    ks->kld2 += r->kld * r->kld;
    ks->pd += r->p_diff;
    double d2 = (double)(r->p_diff * r->p_diff);
    ks->pd2 += d2;
    ks->pd4 += d2 * d2;
    ks->same += (size_t)r->same_top;
    ks->count++;
}

/* A --kld run's results from its sums and the ks->count row KLDs kvals (sorted here). */
static void kld_results(const kldsum *ks, float *kvals, iqf_ppl_result *res) {
    double lpm, lpu, lbm, lbu;
    mean_unc(ks->nll, ks->nll2, ks->count, &lpm, &lpu);
    mean_unc(ks->nllb, ks->nllb2, ks->count, &lbm, &lbu);
    res->ppl = exp(lpm);
    res->ppl_err = res->ppl * lpu;
    res->ppl_base = exp(lbm);
    res->ppl_base_err = res->ppl_base * lbu;
    double cov = covariance(ks->nll, ks->nllb, ks->nllnllb, ks->count);
    res->ln_ppl_ratio = lpm - lbm;
    res->ln_ppl_ratio_err = sqrt(fmax(0, lpu * lpu + lbu * lbu - 2.0 * cov));
    res->ppl_ratio = exp(res->ln_ppl_ratio);
    res->ppl_ratio_err = res->ppl_ratio * res->ln_ppl_ratio_err;
    mean_unc(ks->kld, ks->kld2, ks->count, &res->kld_mean, &res->kld_err);
    double mse, mseu;
    mean_unc(ks->pd2, ks->pd4, ks->count, &mse, &mseu);
    res->dp_rms = sqrt(mse);
    res->dp_rms_err = res->dp_rms > 0 ? 0.5 / res->dp_rms * mseu : 0;
    res->same_top = ks->count ? (double)ks->same / (double)ks->count : 0;
    res->same_top_err = ks->count > 1 ? sqrt(res->same_top * (1 - res->same_top) / (double)(ks->count - 1)) : 0;
    size_t n = ks->count;
    if (n > 0) {
        qsort(kvals, n, sizeof(float), cmp_float);
        res->kld_max = kvals[n - 1];
        res->kld_median = n % 2 == 0 ? 0.5f * (kvals[n / 2] + kvals[n / 2 - 1]) : kvals[n / 2];
        res->kld_p99 = percentile(kvals, n, 0.99f);
        res->kld_p999 = percentile(kvals, n, 0.999f);
    }
}

iqf_status iqf_perplexity(iqf_context *c, const int32_t *tokens, size_t n_tokens,
                          const iqf_ppl_params *p, iqf_ppl_result *res, char *err, size_t errlen) {
    if (!c || !p || !res) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    memset(res, 0, sizeof *res);
    const iqf_model_info *h = &c->m->info;
    const int n_vocab = h->n_vocab, nv = 2 * ((n_vocab + 1) / 2) + 4;
    int n_ctx = p->n_ctx;
    int n_chunk;
    FILE *fin = NULL;
    iqf_outfile of;
    bool of_open = false;
    int32_t *toks = NULL, *ftoks = NULL;
    float *logits = NULL, *kvals = NULL, *pvals = NULL;
    uint16_t *lp = NULL;
    rowres *rr = NULL;
    iqf_status st = IQF_OK;
    const int mode = p->kld_in ? 2 : p->kld_base_out ? 1 : 0;
    if (p->kld_in && p->kld_base_out)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--kld and --kld-base cannot be used together");

    if (mode == 2) {
        /* The header is checked against the file's length before anything is sized from it. */
        iqf_kld_header kh;
        st = iqf_kld_open(p->kld_in, &fin, &kh, err, errlen);
        if (st) goto done;
        if (kh.n_vocab != n_vocab) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: made with a vocabulary of %d tokens, the model has %d", p->kld_in, kh.n_vocab, n_vocab);
            goto done;
        }
        if (kh.n_ctx > c->n_ctx) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: n_ctx %d does not fit this context (%d)", p->kld_in, kh.n_ctx, c->n_ctx);
            goto done;
        }
        const int fchunk = kh.n_chunk;
        n_ctx = kh.n_ctx;
        st = iqf_kld_read_tokens(fin, &kh, p->kld_in, &ftoks, err, errlen);
        if (st) goto done;
        tokens = ftoks;
        n_tokens = (size_t)n_ctx * fchunk;
        n_chunk = fchunk;
        if (p->n_chunks >= 0 && p->n_chunks < n_chunk) n_chunk = p->n_chunks;
    } else {
        if (n_ctx < 4 || n_ctx > c->n_ctx)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "n_ctx %d must be in [4, %d] (the context size)", n_ctx, c->n_ctx);
        if (!tokens || n_tokens < 2 * (size_t)n_ctx)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG,
                        "you need at least %d tokens to evaluate perplexity with a context of %d (the text gives %zu)",
                        2 * n_ctx, n_ctx, n_tokens);
        size_t mx = n_tokens / (size_t)n_ctx;
        n_chunk = (int)(mx > (1u << 30) ? (1u << 30) : mx);
        if (p->n_chunks >= 0 && p->n_chunks < n_chunk) n_chunk = p->n_chunks;
    }
    const int first = n_ctx / 2, n_score = n_ctx - 1 - first;
    toks = malloc((size_t)n_ctx * sizeof(int32_t));
    logits = malloc((size_t)(n_ctx - first) * (size_t)n_vocab * sizeof(float));
    rr = calloc((size_t)n_score + 1, sizeof(rowres));
    if (mode) lp = malloc((size_t)n_score * (size_t)nv * sizeof(uint16_t) + 1);
    if (mode == 2) {
        kvals = malloc(sizeof(float) * (size_t)n_score * (size_t)(n_chunk > 0 ? n_chunk : 1));
        pvals = malloc(sizeof(float) * (size_t)n_score * (size_t)(n_chunk > 0 ? n_chunk : 1));
    }
    if (!toks || !logits || !rr || (mode && !lp) || (mode == 2 && (!kvals || !pvals))) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    if (mode == 1) {
        if (iqf_of_open(&of, p->kld_base_out)) { st = iqf_fail(err, errlen, IQF_E_IO, "%s", of.err); goto done; }
        of_open = true;
        uint32_t u = (uint32_t)n_ctx;
        int32_t a = n_vocab, b = n_chunk;
        iqf_of_write(&of, "_logits_", 8);
        iqf_of_write(&of, &u, 4);
        iqf_of_write(&of, &a, 4);
        iqf_of_write(&of, &b, 4);
        iqf_of_write(&of, tokens, sizeof(int32_t) * (size_t)n_chunk * n_ctx);
    }
    double nll = 0, nll2 = 0;
    int64_t count = 0;
    kldsum ks;
    memset(&ks, 0, sizeof ks);
    double t0 = now();
    if (p->log && mode == 2)
        fprintf(p->log, "\nchunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p\n");
    for (int ch = 0; ch < n_chunk; ch++) {
        const int32_t *src = tokens + (size_t)ch * n_ctx;
        memcpy(toks, src, (size_t)n_ctx * sizeof(int32_t));
        if (h->add_bos) toks[0] = h->bos_id;
        iqf_context_reset(c);
        st = iqf_decode(c, toks, n_ctx, 0, first, logits, err, errlen);
        if (st) goto done;
        if (mode == 2 && fread(lp, sizeof(uint16_t), (size_t)n_score * nv, fin) != (size_t)n_score * nv) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: truncated at chunk %d", p->kld_in, ch + 1);
            goto done;
        }
        scorejob sj = { logits, src + first + 1, n_vocab, nv, mode, lp, rr };
        iqf_pool_run(c->pool, n_score, 8, score_range, &sj);
        for (int i = 0; i < n_score; i++) {
            if (mode == 2) {
                const rowres *r = &rr[i];
                kld_add(&ks, r);
                kvals[(size_t)ch * n_score + i] = (float)r->kld;
                pvals[(size_t)ch * n_score + i] = r->p_diff;
            } else {
                nll += rr[i].nll;
                nll2 += rr[i].nll * rr[i].nll;
            }
        }
        count += n_score;
        if (mode == 1 && iqf_of_write(&of, lp, sizeof(uint16_t) * (size_t)n_score * nv)) {
            st = iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
            goto done;
        }
        /* before the chunk's line, so that a progress line ends before it begins */
        if (c->progress) c->progress(c->progress_user, ch + 1, n_chunk, now() - t0);
        if (mode == 2) kld_line(p->log, ch + 1, &ks);
        else if (p->log) {
            fprintf(p->log, "[%d]%.4f,", ch + 1, exp(nll / (double)count));
            fflush(p->log);
        }
    }
    res->seconds = now() - t0;
    if (p->log && mode != 2) fprintf(p->log, "\n");
    res->n_chunks = n_chunk;
    res->n_scored = count;
    res->tokens_per_second = res->seconds > 0 ? (double)n_chunk * n_ctx / res->seconds : 0;
    if (mode == 2) {
        kld_results(&ks, kvals, res);
    } else if (count > 0) {
        nll /= (double)count;
        nll2 /= (double)count;
        res->ppl = exp(nll);
        nll2 -= nll * nll;
        res->ppl_err = nll2 > 0 && count > 1 ? sqrt(nll2 / (double)(count - 1)) * res->ppl : 0;
    }
    if (of_open) {
        of_open = false;
        if (iqf_of_commit(&of)) st = iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    }
done:
    if (fin) fclose(fin);
    if (of_open) iqf_of_abort(&of);
    free(ftoks);
    free(toks);
    free(logits);
    free(rr);
    free(lp);
    free(kvals);
    free(pvals);
    return st;
}

/* ----------------------------------------------------------------------------------------- */

void iqf_imatrix_data_free(iqf_imatrix_data *d) {
    if (!d) return;
    for (int i = 0; i < d->n_entries; i++) {
        if (d->sum2) free(d->sum2[i]);
        if (d->mat_counts && d->n_mat && d->n_mat[i] > 1) free(d->mat_counts[i]);
    }
    free(d->sum2);
    free(d->names);
    free(d->ncols);
    free(d->counts);
    free(d->n_mat);
    free(d->mat_counts);
    free(d);
}


typedef struct name_ref {
    const char *name;
    int id;
} name_ref;

static int cmp_name_ref(const void *a, const void *b) {
    return strcmp(((const name_ref *)a)->name, ((const name_ref *)b)->name);
}

iqf_status iqf_imatrix_collect(iqf_context *c, const int32_t *tokens, size_t n_tokens, int n_ctx,
                               int n_chunks, FILE *logf, iqf_imatrix_data **out, char *err,
                               size_t errlen) {
    const iqf_imatrix_params p = { n_ctx, n_chunks, logf, false };
    return iqf_imatrix_collect_ex(c, tokens, n_tokens, &p, out, err, errlen);
}

iqf_status iqf_imatrix_collect_ex(iqf_context *c, const int32_t *tokens, size_t n_tokens,
                                  const iqf_imatrix_params *p, iqf_imatrix_data **out, char *err,
                                  size_t errlen) {
    if (!c || !out || !p) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    *out = NULL;
    const int n_ctx = p->n_ctx, n_chunks = p->n_chunks;
    const bool no_ppl = p->no_ppl;
    FILE *const logf = no_ppl ? NULL : p->log;
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    if (n_ctx < 4 || n_ctx > c->n_ctx)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "n_ctx %d must be in [4, %d]", n_ctx, c->n_ctx);
    if (!tokens || n_tokens < 2 * (size_t)n_ctx)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG,
                    "you need at least %d tokens for a context of %d (the text gives %zu)", 2 * n_ctx, n_ctx, n_tokens);
    size_t mx = n_tokens / (size_t)n_ctx;
    int n_chunk = (int)(mx > (1u << 30) ? (1u << 30) : mx);
    if (n_chunks >= 0 && n_chunks < n_chunk) n_chunk = n_chunks;

    iqf_imat_acc acc;
    acc.sum2 = calloc((size_t)m->n_mats, sizeof(double *));
    acc.count = calloc((size_t)m->n_mats, sizeof(int64_t *));
    int32_t *toks = malloc((size_t)n_ctx * sizeof(int32_t));
    float *logits = no_ppl ? NULL : malloc((size_t)(n_ctx - n_ctx / 2) * (size_t)h->n_vocab * sizeof(float));
    iqf_status st = IQF_OK;
    bool ok = acc.sum2 && acc.count && toks && (logits || no_ppl);
    for (int i = 0; ok && i < m->n_mats; i++) {
        const int nm = m->mats[i]->n_mat > 1 ? m->mats[i]->n_mat : 1;
        acc.sum2[i] = calloc((size_t)m->mats[i]->ncols * (size_t)nm, sizeof(double));
        acc.count[i] = calloc((size_t)nm, sizeof(int64_t));
        ok = acc.sum2[i] != NULL && acc.count[i] != NULL;
    }
    iqf_imatrix_data *d = calloc(1, sizeof *d);
    if (!ok || !d) { st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory"); goto done; }
    c->imat = &acc;
    double nll = 0;
    int64_t count = 0;
    const int first = n_ctx / 2;
    const double t0 = now();
    for (int ch = 0; ch < n_chunk; ch++) {
        memcpy(toks, tokens + (size_t)ch * n_ctx, (size_t)n_ctx * sizeof(int32_t));
        if (h->add_bos) toks[0] = h->bos_id;
        iqf_context_reset(c);
        /* logits of the scored half only, or none (every row still runs through every layer) */
        st = iqf_decode(c, toks, n_ctx, 0, no_ppl ? n_ctx : first, logits, err, errlen);
        if (st) break;
        if (c->progress) c->progress(c->progress_user, ch + 1, n_chunk, now() - t0);
        if (no_ppl) continue;
        /* llama-imatrix's running perplexity over the second half of each chunk */
        const int32_t *src = tokens + (size_t)ch * n_ctx;
        for (int i = first; i < n_ctx - 1; i++) {
            const float *l = logits + (size_t)(i - first) * h->n_vocab;
            float mxl = l[0];
            for (int v = 1; v < h->n_vocab; v++) mxl = fmaxf(mxl, l[v]);
            double s = 0;
            for (int v = 0; v < h->n_vocab; v++) s += expf(l[v] - mxl);
            nll += -((double)(l[src[i + 1]] - mxl) - log(s));
            count++;
        }
        if (logf) {
            fprintf(logf, "[%d]%.4f,", ch + 1, exp(nll / (double)count));
            fflush(logf);
        }
    }
    c->imat = NULL;
    if (logf) fprintf(logf, "\n");
    if (st) goto done;
    d->n_entries = m->n_mats;
    d->names = calloc((size_t)m->n_mats, sizeof *d->names);
    d->ncols = calloc((size_t)m->n_mats, sizeof(int64_t));
    d->sum2 = calloc((size_t)m->n_mats, sizeof(float *));
    d->counts = calloc((size_t)m->n_mats, sizeof(int64_t));
    d->n_mat = calloc((size_t)m->n_mats, sizeof(int));
    d->mat_counts = calloc((size_t)m->n_mats, sizeof(int64_t *));
    name_ref *refs = calloc((size_t)m->n_mats, sizeof(name_ref));
    if (!d->names || !d->ncols || !d->sum2 || !d->counts || !d->n_mat || !d->mat_counts || !refs) {
        free(refs);
        d->n_entries = 0;
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < m->n_mats; i++) refs[i] = (name_ref){ m->mats[i]->name, i };
    qsort(refs, (size_t)m->n_mats, sizeof(name_ref), cmp_name_ref);
    for (int k = 0; k < m->n_mats; k++) {
        const iqf_weight *w = m->mats[refs[k].id];
        snprintf(d->names[k], sizeof d->names[k], "%s", w->name);
        d->ncols[k] = w->ncols;
        const int nm = w->n_mat > 1 ? w->n_mat : 1;
        d->n_mat[k] = nm;
        d->counts[k] = acc.count[refs[k].id][0];
        if (nm > 1) {
            d->mat_counts[k] = malloc((size_t)nm * sizeof(int64_t));
            if (!d->mat_counts[k]) { d->n_mat[k] = 1; st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory"); break; }
            memcpy(d->mat_counts[k], acc.count[refs[k].id], (size_t)nm * sizeof(int64_t));
        } else {
            d->mat_counts[k] = &d->counts[k];
        }
        d->sum2[k] = malloc((size_t)w->ncols * (size_t)nm * sizeof(float));
        if (!d->sum2[k]) { st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory"); break; }
        for (int64_t j = 0; j < w->ncols * nm; j++) d->sum2[k][j] = (float)acc.sum2[refs[k].id][j];
    }
    free(refs);
    d->n_chunks = n_chunk;
    d->chunk_size = n_ctx;
    d->ppl = count ? exp(nll / (double)count) : 0;
done:
    c->imat = NULL;
    if (acc.sum2)
        for (int i = 0; i < m->n_mats; i++) free(acc.sum2[i]);
    if (acc.count)
        for (int i = 0; i < m->n_mats; i++) free(acc.count[i]);
    free(acc.sum2);
    free(acc.count);
    free(toks);
    free(logits);
    if (st) iqf_imatrix_data_free(d);
    else *out = d;
    return st;
}
