/*
 * target_io.c - a --target-size plan printed, saved as a --tensor-type-file, loaded back, and
 * quantized: its types go to the pipeline as an exact per-tensor array (plan.c), the file's size
 * is then checked against the plan's.
 */
#include "target.h"
#include "plan.h"
#include "../util/error.h"
#include "../util/outfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
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
    if (iqf_of_open(&of, path) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    for (int i = 0; i < p->n; i++) {
        if (!p->e[i].quantizable) continue;
        char pat[3 * IQF_GGUF_MAX_NAME + 8], line[4 * IQF_GGUF_MAX_NAME + 32];
        iqf_target_pattern(p->e[i].name, pat, sizeof pat);
        int n = snprintf(line, sizeof line, "%s=%s\n", pat, tname(p->e[i].type));
        if (iqf_of_write(&of, line, (size_t)n) != 0) break;
    }
    if (iqf_of_commit(&of) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
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
    const int n = plan->n;
    int *types = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    char(*names)[IQF_GGUF_MAX_NAME] = malloc(sizeof *names * (size_t)(n > 0 ? n : 1));
    if (!types || !names) {
        free(types), free(names);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    for (int i = 0; i < n; i++) { /* the fixed tensors keep the recipe's (the user's) types */
        types[i] = plan->e[i].quantizable && !plan->e[i].fixed ? plan->e[i].type : -1;
        memcpy(names[i], plan->e[i].name, sizeof names[i]);
    }
    iqf_model_quantize_params p = *qp;
    p.ftype = plan->ftype;
    p.pure = false;
    if (plan->spill && !p.pre_encoded) { /* the check's blocks: the same encoder, not run again */
        p.pre_encoded = iqf_target_spill_get;
        p.pre_encoded_user = plan->spill;
    }
    iqf_status st = iqf_model_quantize_typed(in, p.dry_run ? NULL : out, &p, types, (const char(*)[IQF_GGUF_MAX_NAME])names, n,
                                             report, log, err, errlen);
    free(types), free(names);
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
