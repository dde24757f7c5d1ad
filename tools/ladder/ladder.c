/* ladder.c - the ladder's alarm and reports; see ladder.h for the contract. */
#include "ladder.h"
#include "report.h"

#include "iqforge.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* The alarm compares like with like: the type's family from the library's traits table
 * (iqf_type_family); the ladder's enum is the same list without IQF_FAMILY_NONE. */
ladder_family iqf_ladder_family_of_type(int type) {
    static const ladder_family of[] = {
        [IQF_FAMILY_NONE] = LADDER_FAMILY_OTHER, [IQF_FAMILY_IQ] = LADDER_FAMILY_IQ,
        [IQF_FAMILY_K] = LADDER_FAMILY_K,         [IQF_FAMILY_LEGACY] = LADDER_FAMILY_LEGACY,
        [IQF_FAMILY_FLOAT] = LADDER_FAMILY_FLOAT, [IQF_FAMILY_FP4] = LADDER_FAMILY_FP4,
        [IQF_FAMILY_LOWBIT] = LADDER_FAMILY_LOWBIT, [IQF_FAMILY_OTHER] = LADDER_FAMILY_OTHER,
    };
    const iqf_family f = iqf_type_family(type);
    return (unsigned)f < sizeof of / sizeof of[0] ? of[f] : LADDER_FAMILY_OTHER;
}

/* A file type's family is that of the type it defaults to (IQ3_XS: iq3_s, Q2_K_S: q2_K). */
ladder_family iqf_ladder_family_of_ftype(int ftype) { return iqf_ladder_family_of_type(iqf_ftype_default_type(ftype)); }

const char *iqf_ladder_family_name(ladder_family f) {
    static const char *const names[LADDER_FAMILY_COUNT] = { "IQ", "K", "legacy", "float", "FP4", "low-bit", "other" };
    return (unsigned)f < LADDER_FAMILY_COUNT ? names[f] : "?";
}

ladder_limits iqf_ladder_default_limits(void) {
    ladder_limits l;
    memset(&l, 0, sizeof l);
    l.z = 2.0;
    l.margin = 0.10;
    l.cross_factor = 2.0;
    l.max_ppl_ratio = 0;
    return l;
}

/* ------------------------------------------------------------------------------------------ */
/* The alarm                                                                                  */


static double combined(const ladder_rung *a, const ladder_rung *b) {
    return sqrt(a->kld_err * a->kld_err + b->kld_err * b->kld_err);
}

static double ppl_limit_for(const ladder_limits *l, const ladder_rung *r) {
    for (int i = 0; i < l->n_ppl_limits; i++)
        if (l->ppl_limit_ftype[i] == r->ftype && r->ftype >= 0) return l->ppl_limit[i];
    return l->max_ppl_ratio;
}

typedef struct finding_sink {
    ladder_finding *out;
    int max, n, n_alarms;
} finding_sink;

__attribute__((format(printf, 5, 6))) static void add(finding_sink *s, ladder_finding_kind k, int a,
                                                      int b, const char *fmt, ...) {
    if (k != LADDER_NOTE_INVERSION && k != LADDER_NOTE_MODE) s->n_alarms++;
    if (s->n >= s->max) return;
    ladder_finding *f = &s->out[s->n++];
    f->kind = k;
    f->a = a;
    f->b = b;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->text, sizeof f->text, fmt, ap);
    va_end(ap);
}

int iqf_ladder_judge(ladder_rung *r, int n, const ladder_limits *lim, ladder_finding *out, int max,
                 int *n_alarms) {
    finding_sink alarms = { out, max, 0, 0 };
    /* Notes are collected behind the alarms: first count the alarms' room, so do two passes. */
    ladder_finding *notes = calloc((size_t)(max > 0 ? max : 1), sizeof *notes);
    finding_sink nsink = { notes, notes ? max : 0, 0, 0 };
    for (int i = 0; i < n; i++) r[i].alarm = false;
    for (int a = 0; a < n; a++) {
        ladder_rung *A = &r[a];
        if (!A->done) continue;
        if (A->failed) {
            A->alarm = true;
            add(&alarms, LADDER_ALARM_FAILED, a, -1, "%s (%s): measurement failed: %s", A->name,
                iqf_ladder_mode_str(A->mode), A->error);
            continue;
        }
        /* The worst smaller rung of each rule. */
        int worst_fam = -1, worst_cross = -1;
        double wf = 0, wc = 0;
        for (int b = 0; b < n; b++) {
            const ladder_rung *B = &r[b];
            if (b == a || !ladder_usable(B) || B->mode != A->mode || B->file_bytes >= A->file_bytes) continue;
            if (!(A->kld > B->kld)) continue;
            const bool stat = A->kld - B->kld > lim->z * combined(A, B);
            const double ratio = B->kld > 0 ? A->kld / B->kld : INFINITY;
            if (A->family == B->family) {
                if (stat && A->kld > B->kld * (1.0 + lim->margin) && ratio > wf) { wf = ratio; worst_fam = b; }
            } else {
                if (stat && A->kld > B->kld * lim->cross_factor && ratio > wc) { wc = ratio; worst_cross = b; }
            }
        }
        if (worst_fam >= 0) {
            const ladder_rung *B = &r[worst_fam];
            A->alarm = true;
            add(&alarms, LADDER_ALARM_FAMILY, a, worst_fam,
                "%s (%s, %.4f bpw) has mean KLD %.6f +/- %.6f, %.2fx that of the smaller %s (%.4f bpw) "
                "%.6f +/- %.6f in the same family (%s): a broken encoder, not a quality cliff",
                A->name, iqf_ladder_mode_str(A->mode), A->bpw, A->kld, A->kld_err, wf, B->name, B->bpw, B->kld,
                B->kld_err, iqf_ladder_family_name(A->family));
        }
        if (worst_cross >= 0) {
            const ladder_rung *B = &r[worst_cross];
            A->alarm = true;
            add(&alarms, LADDER_ALARM_CROSS, a, worst_cross,
                "%s (%s, %.4f bpw) has mean KLD %.6f +/- %.6f, %.2fx that of the smaller %s (%.4f bpw, "
                "%s family) %.6f +/- %.6f (limit %.2fx)",
                A->name, iqf_ladder_mode_str(A->mode), A->bpw, A->kld, A->kld_err, wc, B->name, B->bpw,
                iqf_ladder_family_name(B->family), B->kld, B->kld_err, lim->cross_factor);
        }
        const double pl = ppl_limit_for(lim, A);
        if (pl > 0 && A->ppl_ratio > pl) {
            A->alarm = true;
            add(&alarms, LADDER_ALARM_PPL, a, -1, "%s (%s): PPL(Q)/PPL(base) %.4f +/- %.4f exceeds the limit %.4f",
                A->name, iqf_ladder_mode_str(A->mode), A->ppl_ratio, A->ppl_ratio_err, pl);
        }
        if (A->smoke_run && !A->smoke_ok) {
            A->alarm = true;
            add(&alarms, LADDER_ALARM_SMOKE, a, -1, "%s (%s): smoke test failed: the greedy continuation \"%s\" "
                "does not contain the expected text", A->name, iqf_ladder_mode_str(A->mode), A->smoke_text);
        }
        if (worst_fam >= 0 || worst_cross >= 0) continue;
        /* Inversions that are no alarm: notes. */
        for (int b = 0; b < n; b++) {
            const ladder_rung *B = &r[b];
            if (b == a || !ladder_usable(B) || B->mode != A->mode || B->file_bytes >= A->file_bytes) continue;
            if (!(A->kld > B->kld)) continue;
            add(&nsink, LADDER_NOTE_INVERSION, a, b,
                "inversion: %s (%s, %.4f bpw) KLD %.6f +/- %.6f is above the smaller %s's (%.4f bpw) "
                "%.6f +/- %.6f (%s; within the alarm's limits)",
                A->name, iqf_ladder_mode_str(A->mode), A->bpw, A->kld, A->kld_err, B->name, B->bpw, B->kld, B->kld_err,
                A->family == B->family ? "same family" : "across families");
        }
    }
    /* A better mode that is worse than compat on the same type: a note. */
    for (int a = 0; a < n; a++) {
        const ladder_rung *A = &r[a];
        if (!ladder_usable(A) || A->mode == IQF_MODE_COMPAT) continue;
        for (int c = 0; c < n; c++) {
            const ladder_rung *C = &r[c];
            if (!ladder_usable(C) || C->mode != IQF_MODE_COMPAT || strcmp(C->name, A->name)) continue;
            if (A->kld - C->kld > lim->z * combined(A, C))
                add(&nsink, LADDER_NOTE_MODE, a, c, "%s: mode %s KLD %.6f +/- %.6f is worse than compat's %.6f +/- %.6f",
                    A->name, iqf_ladder_mode_str(A->mode), A->kld, A->kld_err, C->kld, C->kld_err);
        }
    }
    int nw = alarms.n;
    for (int i = 0; i < nsink.n && nw < max; i++) out[nw++] = notes[i];
    free(notes);
    if (n_alarms) *n_alarms = alarms.n_alarms;
    return nw;
}

/* ------------------------------------------------------------------------------------------ */
/* Reports                                                                                    */

void iqf_ladder_print_table(FILE *f, const ladder_rung *r, int n, const ladder_finding *fd, int nf) {
    fprintf(f, "| %-8s | %-8s | %10s | %7s | %-20s | %-22s | %9s | %8s | %7s | %7s | %-6s |\n", "type", "mode",
            "bytes", "bpw", "PPL", "mean KLD", "KLD p99", "same top", "quant s", "eval s", "status");
    fprintf(f, "|----------|----------|-----------:|--------:|----------------------|------------------------|"
               "----------:|---------:|--------:|--------:|--------|\n");
    for (int i = 0; i < n; i++) {
        const ladder_rung *x = &r[i];
        if (!x->done) {
            fprintf(f, "| %-8s | %-8s | %10s | %7s | %-20s | %-22s | %9s | %8s | %7s | %7s | %-6s |\n", x->name,
                    iqf_ladder_mode_str(x->mode), "-", "-", "-", "-", "-", "-", "-", "-", "todo");
            continue;
        }
        if (x->failed) {
            fprintf(f, "| %-8s | %-8s | %10s | %7s | %-20s | %-22s | %9s | %8s | %7s | %7s | %-6s |\n", x->name,
                    iqf_ladder_mode_str(x->mode), "-", "-", "-", "-", "-", "-", "-", "-", "FAILED");
            continue;
        }
        char ppl[32], kld[40], top[16];
        snprintf(ppl, sizeof ppl, "%.4f +/- %.4f", x->ppl, x->ppl_err);
        snprintf(kld, sizeof kld, "%.6f +/- %.6f", x->kld, x->kld_err);
        snprintf(top, sizeof top, "%.3f%%", 100.0 * x->same_top);
        const char *st = x->alarm ? "ALARM" : x->smoke_run ? "ok+sm" : "ok";
        fprintf(f, "| %-8s | %-8s | %10llu | %7.4f | %-20s | %-22s | %9.6f | %8s | %7.2f | %7.2f | %-6s |\n",
                x->name, iqf_ladder_mode_str(x->mode), (unsigned long long)x->file_bytes, x->bpw, ppl, kld, x->kld_p99, top,
                x->quantize_s, x->eval_s, st);
    }
    /* With several modes: each type's KLD side by side, as ratios to compat. */
    bool other = false;
    for (int i = 0; i < n; i++) other |= r[i].mode != IQF_MODE_COMPAT && ladder_usable(&r[i]);
    if (other) {
        fprintf(f, "\n| %-8s | %-22s | %-8s | %-22s | %8s |\n", "type", "compat KLD", "mode", "KLD", "x compat");
        fprintf(f, "|----------|------------------------|----------|------------------------|---------:|\n");
        double lsum[LADDER_N_MODES] = { 0 };
        int cnt[LADDER_N_MODES] = { 0 };
        for (int c = 0; c < n; c++) {
            const ladder_rung *C = &r[c];
            if (!ladder_usable(C) || C->mode != IQF_MODE_COMPAT) continue;
            for (int a = 0; a < n; a++) {
                const ladder_rung *A = &r[a];
                if (!ladder_usable(A) || A->mode == IQF_MODE_COMPAT || strcmp(A->name, C->name)) continue;
                char ck[40], ak[40];
                snprintf(ck, sizeof ck, "%.6f +/- %.6f", C->kld, C->kld_err);
                snprintf(ak, sizeof ak, "%.6f +/- %.6f", A->kld, A->kld_err);
                const double ratio = C->kld > 0 ? A->kld / C->kld : 1.0;
                fprintf(f, "| %-8s | %-22s | %-8s | %-22s | %8.4f |\n", C->name, ck, iqf_ladder_mode_str(A->mode), ak, ratio);
                if ((unsigned)A->mode < LADDER_N_MODES && ratio > 0) {
                    lsum[A->mode] += log(ratio);
                    cnt[A->mode]++;
                }
            }
        }
        for (int m = 1; m < LADDER_N_MODES; m++)
            if (cnt[m])
                fprintf(f, "geometric mean of %s/compat KLD over %d types: %.4f\n", iqf_ladder_mode_str(m), cnt[m],
                        exp(lsum[m] / cnt[m]));
        fputc('\n', f);
    }
    for (int i = 0; i < nf; i++) {
        const bool note = fd[i].kind == LADDER_NOTE_INVERSION || fd[i].kind == LADDER_NOTE_MODE;
        fprintf(f, "%s %s\n", note ? "note: " : "ALARM:", fd[i].text);
    }
}

/* A JSON string literal (quotes included). */
static void put_jstr(ladder_rep *o, const char *s) {
    if (!s) { iqf_ladder_put(o, "null"); return; }
    iqf_ladder_put(o, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') iqf_ladder_put(o, "\\%c", *p);
        else if (*p < 0x20) iqf_ladder_put(o, "\\u%04x", *p);
        else iqf_ladder_put(o, "%c", *p);
    }
    iqf_ladder_put(o, "\"");
}

/* Non-finite numbers are not JSON: null. */
static void put_jnum(ladder_rep *o, double v) {
    if (isfinite(v)) iqf_ladder_put(o, "%.9g", v);
    else iqf_ladder_put(o, "null");
}

static const char *kind_name(ladder_finding_kind k) {
    switch (k) {
    case LADDER_NOTE_INVERSION: return "note-inversion";
    case LADDER_ALARM_FAMILY: return "alarm-family";
    case LADDER_ALARM_CROSS: return "alarm-cross-family";
    case LADDER_ALARM_PPL: return "alarm-ppl-ratio";
    case LADDER_ALARM_SMOKE: return "alarm-smoke";
    case LADDER_ALARM_FAILED: return "alarm-failed";
    case LADDER_NOTE_MODE: return "note-mode";
    }
    return "?";
}

int iqf_ladder_write_json(const char *path, const ladder_inputs *in, const ladder_rung *r, int n,
                      const ladder_finding *fd, int nf, int n_alarms, char *err, size_t errlen) {
    ladder_rep o;
    if (iqf_ladder_rep_open(&o, path, err, errlen)) return -1;
    iqf_ladder_put(&o, "{\n  \"tool\": \"iqforge ladder\",\n  \"version\": ");
    put_jstr(&o, IQF_VERSION);
    iqf_ladder_put(&o, ",\n  \"inputs\": {\n    \"model\": ");
    put_jstr(&o, in->model);
    iqf_ladder_put(&o, ",\n    \"model_bytes\": %llu,\n    \"weights\": %llu,\n    \"eval_text\": ",
        (unsigned long long)in->model_bytes, (unsigned long long)in->n_weights);
    put_jstr(&o, in->eval_text);
    iqf_ladder_put(&o, ",\n    \"imatrix\": ");
    put_jstr(&o, in->imatrix);
    iqf_ladder_put(&o, ",\n    \"calibration\": ");
    put_jstr(&o, in->calibration);
    iqf_ladder_put(&o, ",\n    \"n_ctx\": %d,\n    \"chunks\": %d,\n    \"threads\": %d,\n    \"simulate\": %s,\n    \"prompt\": ",
        in->n_ctx, in->n_chunks, in->n_threads, in->simulate ? "true" : "false");
    put_jstr(&o, in->prompt);
    iqf_ladder_put(&o, ",\n    \"expect\": ");
    put_jstr(&o, in->expect);
    iqf_ladder_put(&o, ",\n    \"key\": ");
    put_jstr(&o, in->key);
    iqf_ladder_put(&o, "\n  },\n  \"base\": { \"ppl\": ");
    put_jnum(&o, in->base_ppl);
    iqf_ladder_put(&o, ", \"ppl_err\": ");
    put_jnum(&o, in->base_ppl_err);
    iqf_ladder_put(&o, " },\n  \"rungs\": [");
    for (int i = 0; i < n; i++) {
        const ladder_rung *x = &r[i];
        iqf_ladder_put(&o, "%s\n    { \"type\": ", i ? "," : "");
        put_jstr(&o, x->name);
        iqf_ladder_put(&o, ", \"mode\": ");
        put_jstr(&o, iqf_ladder_mode_str(x->mode));
        iqf_ladder_put(&o, ", \"family\": ");
        put_jstr(&o, iqf_ladder_family_name(x->family));
        iqf_ladder_put(&o, ", \"done\": %s, \"failed\": %s", x->done ? "true" : "false", x->failed ? "true" : "false");
        if (x->failed) {
            iqf_ladder_put(&o, ", \"error\": ");
            put_jstr(&o, x->error);
        }
        if (x->done && !x->failed) {
            iqf_ladder_put(&o, ", \"bytes\": %llu, \"bpw\": ", (unsigned long long)x->file_bytes);
            put_jnum(&o, x->bpw);
            const struct { const char *k; double v; } nums[] = {
                { "ppl", x->ppl }, { "ppl_err", x->ppl_err }, { "ppl_ratio", x->ppl_ratio },
                { "ppl_ratio_err", x->ppl_ratio_err }, { "kld", x->kld }, { "kld_err", x->kld_err },
                { "kld_p99", x->kld_p99 }, { "kld_max", x->kld_max }, { "same_top", x->same_top },
                { "same_top_err", x->same_top_err }, { "quantize_s", x->quantize_s }, { "eval_s", x->eval_s },
            };
            for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
                iqf_ladder_put(&o, ", \"%s\": ", nums[k].k);
                put_jnum(&o, nums[k].v);
            }
            iqf_ladder_put(&o, ", \"chunks\": %d, \"cached\": %s", x->n_chunks, x->cached ? "true" : "false");
            if (x->smoke_run) {
                iqf_ladder_put(&o, ", \"smoke_ok\": %s, \"smoke_text\": ", x->smoke_ok ? "true" : "false");
                put_jstr(&o, x->smoke_text);
            }
        }
        iqf_ladder_put(&o, ", \"alarm\": %s }", x->alarm ? "true" : "false");
    }
    iqf_ladder_put(&o, "\n  ],\n  \"findings\": [");
    for (int i = 0; i < nf; i++) {
        iqf_ladder_put(&o, "%s\n    { \"kind\": ", i ? "," : "");
        put_jstr(&o, kind_name(fd[i].kind));
        iqf_ladder_put(&o, ", \"rung\": ");
        put_jstr(&o, r[fd[i].a].name);
        iqf_ladder_put(&o, ", \"mode\": ");
        put_jstr(&o, iqf_ladder_mode_str(r[fd[i].a].mode));
        iqf_ladder_put(&o, ", \"other\": ");
        put_jstr(&o, fd[i].b >= 0 ? r[fd[i].b].name : NULL);
        iqf_ladder_put(&o, ", \"text\": ");
        put_jstr(&o, fd[i].text);
        iqf_ladder_put(&o, " }");
    }
    iqf_ladder_put(&o, "\n  ],\n  \"alarms\": %d\n}\n", n_alarms);
    return iqf_ladder_rep_close(&o, err, errlen);
}

int iqf_ladder_write_csv(const char *path, const ladder_rung *r, int n, char *err, size_t errlen) {
    ladder_rep o;
    if (iqf_ladder_rep_open(&o, path, err, errlen)) return -1;
    iqf_ladder_put(&o, "type,mode,family,bytes,bpw,ppl,ppl_err,ppl_ratio,ppl_ratio_err,kld,kld_err,kld_p99,kld_max,"
            "same_top,same_top_err,quantize_s,eval_s,chunks,smoke,alarm,status\n");
    for (int i = 0; i < n; i++) {
        const ladder_rung *x = &r[i];
        const char *status = !x->done ? "todo" : x->failed ? "failed" : "ok";
        if (!x->done || x->failed) {
            iqf_ladder_put(&o, "%s,%s,%s,,,,,,,,,,,,,,,,,%d,%s\n", x->name, iqf_ladder_mode_str(x->mode), iqf_ladder_family_name(x->family),
                x->alarm ? 1 : 0, status);
            continue;
        }
        iqf_ladder_put(&o, "%s,%s,%s,%llu,%.6f,%.6f,%.6f,%.6f,%.6f,%.8f,%.8f,%.8f,%.8f,%.6f,%.6f,%.3f,%.3f,%d,%s,%d,%s\n",
            x->name, iqf_ladder_mode_str(x->mode), iqf_ladder_family_name(x->family), (unsigned long long)x->file_bytes, x->bpw,
            x->ppl, x->ppl_err, x->ppl_ratio, x->ppl_ratio_err, x->kld, x->kld_err, x->kld_p99, x->kld_max,
            x->same_top, x->same_top_err, x->quantize_s, x->eval_s, x->n_chunks,
            !x->smoke_run ? "" : x->smoke_ok ? "pass" : "fail", x->alarm ? 1 : 0, status);
    }
    return iqf_ladder_rep_close(&o, err, errlen);
}

/* ------------------------------------------------------------------------------------------ */
/* The cache record                                                                           */

uint64_t iqf_ladder_fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The numeric fields of a record, by name; %a (hex float) keeps them exact. */
#define RUNG_FIELDS(X)                                                                             \
    X(bpw) X(ppl) X(ppl_err) X(ppl_ratio) X(ppl_ratio_err) X(kld) X(kld_err) X(kld_p99) X(kld_max)   \
    X(same_top) X(same_top_err) X(quantize_s) X(eval_s)

int iqf_ladder_rung_save(const char *path, const char *key, const ladder_rung *r, char *err, size_t errlen) {
    ladder_rep o;
    if (iqf_ladder_rep_open(&o, path, err, errlen)) return -1;
    iqf_ladder_put(&o, "iqforge-ladder-rung 1\nkey %s\nname %s\nmode %d\nfile_bytes %llu\nn_chunks %d\n", key, r->name,
        r->mode, (unsigned long long)r->file_bytes, r->n_chunks);
#define PUT_FIELD(f) iqf_ladder_put(&o, #f " %a\n", r->f);
    RUNG_FIELDS(PUT_FIELD)
#undef PUT_FIELD
    iqf_ladder_put(&o, "smoke %d %d\n", r->smoke_run ? 1 : 0, r->smoke_ok ? 1 : 0);
    /* The continuation last, on its own line, control characters replaced. */
    char t[sizeof r->smoke_text];
    snprintf(t, sizeof t, "%s", r->smoke_text);
    for (char *c = t; *c; c++)
        if ((unsigned char)*c < 0x20) *c = ' ';
    iqf_ladder_put(&o, "smoke_text %s\nend\n", t);
    return iqf_ladder_rep_close(&o, err, errlen);
}

bool iqf_ladder_rung_load(const char *path, const char *key, ladder_rung *r) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char line[600];
    ladder_rung x = *r;
    unsigned seen = 0, want = 0;
    int nf = 0;
    bool ok = fgets(line, sizeof line, f) && !strcmp(line, "iqforge-ladder-rung 1\n");
    while (ok && fgets(line, sizeof line, f)) {
        size_t len = strlen(line);
        if (!len || line[len - 1] != '\n') { ok = false; break; }
        line[--len] = 0;
        if (!strcmp(line, "end")) { seen |= 1u << 31; break; }
        char *sp = strchr(line, ' ');
        if (!sp) { ok = false; break; }
        *sp = 0;
        const char *k = line, *v = sp + 1;
        char *end = NULL;
        errno = 0;
        if (!strcmp(k, "key")) { ok = !strcmp(v, key); seen |= 1; }
        else if (!strcmp(k, "name")) { ok = !strcmp(v, r->name); seen |= 2; }
        else if (!strcmp(k, "mode")) { ok = strtol(v, &end, 10) == r->mode && !*end; seen |= 4; }
        else if (!strcmp(k, "file_bytes")) {
            unsigned long long b = strtoull(v, &end, 10);
            ok = *v >= '0' && *v <= '9' && !*end && !errno && b > 0;
            x.file_bytes = b;
            seen |= 8;
        } else if (!strcmp(k, "n_chunks")) {
            long c = strtol(v, &end, 10);
            ok = !*end && end != v && c > 0 && c < (1 << 30);
            x.n_chunks = (int)c;
            seen |= 16;
        } else if (!strcmp(k, "smoke")) {
            int a, b;
            ok = sscanf(v, "%d %d", &a, &b) == 2 && (a == 0 || a == 1) && (b == 0 || b == 1);
            x.smoke_run = a == 1;
            x.smoke_ok = b == 1;
            seen |= 32;
        } else if (!strcmp(k, "smoke_text")) {
            snprintf(x.smoke_text, sizeof x.smoke_text, "%s", v);
            seen |= 64;
        }
#define GET_FIELD(fld)                                                                             \
        else if (!strcmp(k, #fld)) {                                                               \
            x.fld = strtod(v, &end);                                                               \
            ok = end != v && !*end && isfinite(x.fld);                                             \
            nf++;                                                                                  \
        }
        RUNG_FIELDS(GET_FIELD)
#undef GET_FIELD
        else ok = false;
    }
    fclose(f);
    want = 1 | 2 | 4 | 8 | 16 | 32 | 64 | (1u << 31);
#define COUNT_FIELD(f) +1
    const int n_fields = 0 RUNG_FIELDS(COUNT_FIELD);
#undef COUNT_FIELD
    if (!ok || seen != want || nf != n_fields) return false;
    x.done = true;
    x.failed = false;
    x.cached = true;
    *r = x;
    return true;
}
