/*
 * hessian_combine.c - Hessian files as sums, for `iqforge imatrix --combine` (hessian_file.h).
 *
 * A file holds means m = float(S * (1/c)) of double sums S over c rows. m * c is exact in double
 * for c below 2^29 rows (a 24-bit significand times a 29-bit count), so the sums read back are
 * the capture's to within the float rounding of m (2^-24 relative); adding the shards' sums in
 * double and dividing by the total rows gives the whole text's mean to within about 1 ulp of
 * F32 (an F16 file: of F16) - bitwise equal for most values, not for all.
 */
#include "hessian_file.h"
#include "../util/error.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iqf_hessian_sums_free(iqf_hessian_sums *s) {
    if (!s) return;
    for (int i = 0; i < s->n_entries; i++) {
        free(s->entries[i].name);
        free(s->entries[i].sum);
        free(s->entries[i].counts);
    }
    free(s->entries);
    free(s->dataset);
    memset(s, 0, sizeof *s);
}

iqf_status iqf_hessian_sums_load(const char *path, iqf_hessian_sums *out, char *err, size_t errlen) {
    if (!out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    memset(out, 0, sizeof *out);
    iqf_hessian_file hf;
    iqf_status st = iqf_hessian_open(path, &hf, err, errlen);
    if (st) return st;
    const iqf_gguf *g = hf.g;
    out->model = hf.model;
    out->token_count = (int64_t)hf.token_count;
    out->chunk_count = hf.chunk_count;
    out->chunk_size = hf.chunk_size;
    out->f16 = true;
    const char *ds;
    if (iqf_gguf_get_str(g, "hessian.dataset", &ds, NULL) && !(out->dataset = strdup(ds))) goto nomem;
    if (hf.token_count > (UINT64_C(1) << 40)) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: hessian.token_count %" PRIu64 " is implausible", path, hf.token_count);
        goto fail;
    }
    const int64_t nt = iqf_gguf_n_tensors(g);
    out->entries = calloc((size_t)nt, sizeof *out->entries);
    if (!out->entries) goto nomem;
    float *row = NULL;
    size_t row_n = 0;
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        iqf_hessian_sentry *e = &out->entries[out->n_entries];
        e->bs = t->ne[0];
        e->n = t->ne[1];
        e->n_mat = t->ne[2];
        out->f16 = out->f16 && t->type == IQF_TYPE_F16;
        const size_t m = (size_t)(e->n * e->bs);
        e->name = strdup(t->name);
        e->sum = malloc((size_t)e->n_mat * m * sizeof *e->sum);
        if (e->n_mat > 1) e->counts = calloc((size_t)e->n_mat, sizeof *e->counts);
        if (m > row_n) {
            free(row);
            row = malloc(m * sizeof *row);
            row_n = row ? m : 0;
        }
        out->n_entries++;
        if (!e->name || !e->sum || (e->n_mat > 1 && !e->counts) || !row) {
            free(row);
            goto nomem;
        }
        if (e->n_mat > 1) {
            char key[IQF_GGUF_MAX_NAME + 32];
            snprintf(key, sizeof key, IQF_HESSIAN_EXPERT_COUNTS_KEY "%s", t->name);
            const int64_t k = iqf_gguf_find_kv(g, key);
            uint64_t nc = 0;
            const uint64_t *c = k >= 0 ? iqf_gguf_arr_data(g, k, IQF_GGUF_U64, &nc) : NULL;
            if (!c || nc != (uint64_t)e->n_mat) {
                free(row);
                st = iqf_fail(err, errlen, IQF_E_FORMAT,
                              "%s: %s holds %" PRId64 " experts but %s is %s (a file from before per-expert row "
                              "counts were kept: capture it again)", path, t->name, e->n_mat, key,
                              k < 0 ? "missing" : "not a u64 array of that length");
                goto fail;
            }
            for (int64_t x = 0; x < e->n_mat; x++) {
                if (c[x] > (UINT64_C(1) << 40)) {
                    free(row);
                    st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s: expert %" PRId64 " count %" PRIu64 " is implausible",
                                  path, key, x, c[x]);
                    goto fail;
                }
                e->counts[x] = (int64_t)c[x];
            }
        }
        for (int64_t x = 0; x < e->n_mat; x++) {
            iqf_hessian_read_mat(&hf, t->name, x, row);
            const double c = e->n_mat > 1 ? (double)e->counts[x] : (double)hf.token_count;
            double *s = e->sum + (size_t)x * m;
            for (size_t j = 0; j < m; j++) s[j] = (double)row[j] * c; /* exact below 2^29 rows */
        }
    }
    free(row);
    iqf_hessian_close(&hf);
    return IQF_OK;
nomem:
    st = iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory", path);
fail:
    iqf_hessian_close(&hf);
    iqf_hessian_sums_free(out);
    return st;
}

static const iqf_hessian_sentry *find(const iqf_hessian_sums *s, const char *name) {
    for (int i = 0; i < s->n_entries; i++)
        if (!strcmp(s->entries[i].name, name)) return &s->entries[i];
    return NULL;
}

iqf_status iqf_hessian_sums_merge(iqf_hessian_sums *dst, const iqf_hessian_sums *src, const char *src_name,
                                  char *err, size_t errlen) {
    if (!dst || !src) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    if (!src_name) src_name = "input";
    const iqf_hessian_model_id *a = &dst->model, *b = &src->model;
    if (strcmp(a->name, b->name) || strcmp(a->arch, b->arch) || a->n_embd != b->n_embd || a->n_layer != b->n_layer ||
        a->n_ff != b->n_ff || a->n_vocab != b->n_vocab)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: made from another model (%s '%s') than the files before it (%s '%s')",
                        src_name, b->arch, b->name, a->arch, a->name);
    if (dst->chunk_size != src->chunk_size)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: chunk size %d, the files before it %d (shards of one capture share -c)",
                        src_name, src->chunk_size, dst->chunk_size);
    for (int i = 0; i < src->n_entries; i++) {
        const iqf_hessian_sentry *s = &src->entries[i], *d = find(dst, s->name);
        if (!d)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: has %s, the files before it do not (same --hessian-block and "
                            "--hessian-experts for every shard)", src_name, s->name);
        if (d->n != s->n || d->bs != s->bs || d->n_mat != s->n_mat)
            return iqf_fail(err, errlen, IQF_E_FORMAT,
                            "%s: %s is [%" PRId64 ", %" PRId64 ", %" PRId64 "], the files before it [%" PRId64 ", %" PRId64
                            ", %" PRId64 "] (block, width, experts)", src_name, s->name, s->bs, s->n, s->n_mat, d->bs, d->n,
                            d->n_mat);
    }
    if (src->n_entries != dst->n_entries) {
        for (int i = 0; i < dst->n_entries; i++)
            if (!find(src, dst->entries[i].name))
                return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: has no %s, the files before it do (same --hessian-block and "
                                "--hessian-experts for every shard)", src_name, dst->entries[i].name);
    }
    if (src->dataset && (!dst->dataset || strcmp(dst->dataset, src->dataset))) {
        const size_t la = dst->dataset ? strlen(dst->dataset) : 0, lb = strlen(src->dataset);
        char *j = malloc(la + lb + 4);
        if (!j) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        if (la) snprintf(j, la + lb + 4, "%s + %s", dst->dataset, src->dataset);
        else memcpy(j, src->dataset, lb + 1);
        free(dst->dataset);
        dst->dataset = j;
    }
    for (int i = 0; i < src->n_entries; i++) {
        const iqf_hessian_sentry *s = &src->entries[i];
        iqf_hessian_sentry *d = (iqf_hessian_sentry *)find(dst, s->name);
        const int64_t m = s->n_mat * s->n * s->bs;
        for (int64_t j = 0; j < m; j++) d->sum[j] += s->sum[j];
        for (int64_t x = 0; s->n_mat > 1 && x < s->n_mat; x++) d->counts[x] += s->counts[x];
    }
    dst->token_count += src->token_count;
    dst->chunk_count += src->chunk_count;
    dst->f16 = dst->f16 && src->f16;
    return IQF_OK;
}

iqf_status iqf_hessian_sums_write(const iqf_hessian_sums *s, const char *path, char *err, size_t errlen) {
    if (!s || !path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    iqf_hessian_wentry *e = calloc((size_t)s->n_entries + 1, sizeof *e);
    if (!e) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < s->n_entries; i++) {
        const iqf_hessian_sentry *x = &s->entries[i];
        e[i] = (iqf_hessian_wentry){ x->name, x->n, x->bs, x->sum, s->token_count, x->n_mat, x->counts };
    }
    iqf_hessian_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.model = s->model;
    meta.chunk_count = s->chunk_count;
    meta.chunk_size = s->chunk_size;
    meta.dataset = s->dataset;
    meta.f16 = s->f16;
    iqf_status st = iqf_hessian_write(path, e, s->n_entries, &meta, err, errlen);
    free(e);
    return st;
}
