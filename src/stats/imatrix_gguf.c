/*
 * imatrix_gguf.c - the GGUF importance matrix (llama-imatrix's default output since 2025):
 * reader with common/imatrix-loader.cpp + quantize.cpp semantics, writer with imatrix.cpp's
 * layout. Built on the GGUF container (src/gguf).
 */
#include "imatrix.h"
#include "../util/error.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static bool strip_suffix(const char *name, const char *suffix, char *out, size_t outlen) {
    size_t n = strlen(name), s = strlen(suffix);
    if (n < s || strcmp(name + n - s, suffix) != 0 || n - s >= outlen) return false;
    memcpy(out, name, n - s);
    out[n - s] = 0;
    return true;
}

iqf_status iqf_imatrix_parse_gguf(const void *data, size_t size, iqf_imatrix *im, char *err,
                                  size_t errlen) {
    memset(im, 0, sizeof *im);
    char msg[256];
    iqf_gguf *g = iqf_gguf_open_memory(data, size, "imatrix", msg, sizeof msg);
    if (!g) return iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    iqf_status st = IQF_OK;
    const int64_t nt = iqf_gguf_n_tensors(g);
    if (nt < 1) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "no data (no tensors)");
        goto done;
    }
    int64_t kd = iqf_gguf_find_kv(g, "imatrix.datasets");
    int64_t kc = iqf_gguf_find_kv(g, "imatrix.chunk_count");
    int64_t ks = iqf_gguf_find_kv(g, "imatrix.chunk_size");
    if (kd >= 0 && iqf_gguf_kv_type(g, kd) == IQF_GGUF_ARR && iqf_gguf_arr_type(g, kd) == IQF_GGUF_STR) {
        uint64_t n = iqf_gguf_arr_n(g, kd);
        im->datasets = calloc(n ? n : 1, sizeof *im->datasets);
        if (!im->datasets) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        for (uint64_t i = 0; i < n; i++) {
            const char *s = iqf_gguf_arr_str(g, kd, i, NULL);
            im->datasets[i] = strdup(s ? s : "");
            if (!im->datasets[i]) {
                st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
                goto done;
            }
            im->n_datasets++;
        }
    }
    uint32_t v;
    if (kc >= 0) {
        if (!iqf_gguf_get_u32(g, "imatrix.chunk_count", &v)) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "imatrix.chunk_count is not a u32");
            goto done;
        }
        im->chunk_count = (int)v;
    }
    if (ks >= 0) {
        if (!iqf_gguf_get_u32(g, "imatrix.chunk_size", &v)) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "imatrix.chunk_size is not a u32");
            goto done;
        }
        im->chunk_size = (int)v;
    }
    im->has_metadata = kd >= 0 && kc >= 0 && ks >= 0;

    im->entries = calloc((size_t)nt, sizeof *im->entries);
    if (!im->entries) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    /* Pair NAME.in_sum2 with NAME.counts. Tensor names are unique, so each base name is met at
     * most once as a sum: iterate over sums and look the counts up; then report counts that have
     * no sums. */
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        char base[IQF_GGUF_MAX_NAME + 16], cname[IQF_GGUF_MAX_NAME + 32];
        if (strip_suffix(t->name, ".counts", base, sizeof base)) {
            snprintf(cname, sizeof cname, "%s.in_sum2", base);
            if (iqf_gguf_find_tensor(g, cname) < 0) {
                st = iqf_fail(err, errlen, IQF_E_FORMAT, "mismatched sums and counts for %s", base);
                goto done;
            }
            continue;
        }
        if (!strip_suffix(t->name, ".in_sum2", base, sizeof base)) continue;
        snprintf(cname, sizeof cname, "%s.counts", base);
        int64_t ci = iqf_gguf_find_tensor(g, cname);
        if (ci < 0) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "mismatched sums and counts for %s", base);
            goto done;
        }
        const iqf_gguf_tensor *c = iqf_gguf_tensor_at(g, ci);
        if (t->type != IQF_TYPE_F32 || c->type != IQF_TYPE_F32) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "sums and counts for %s must be F32", base);
            goto done;
        }
        const int64_t nval = iqf_gguf_tensor_nelements(t);
        const int64_t ncounts = iqf_gguf_tensor_nelements(c);
        iqf_imatrix_entry *e = &im->entries[im->n_entries];
        e->name = strdup(base);
        e->values = calloc((size_t)nval, sizeof(float));
        if (!e->name || !e->values) {
            free(e->name);
            free(e->values);
            e->name = NULL;
            e->values = NULL;
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        e->n = nval;
        im->n_entries++;
        const int64_t ne0 = nval / ncounts;
        for (int64_t j = 0; j < ncounts; j++) {
            float cf;
            memcpy(&cf, (const char *)c->data + 4 * j, 4);
            if (!isfinite(cf) || fabsf(cf) > 9.0e18f) {
                st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: count %lld is not a finite number", cname, (long long)j);
                goto done;
            }
            const float count = (float)lroundf(cf);
            for (int64_t k = 0; k < ne0; k++) {
                float s;
                memcpy(&s, (const char *)t->data + 4 * (j * ne0 + k), 4);
                e->values[j * ne0 + k] = count > 0.0f ? s / count : 1.0f;
            }
        }
    }
    im->is_legacy = false;
    /* sort by name (names are unique already) */
    iqf_imatrix_sort(im);
done:
    iqf_gguf_close(g);
    if (st) iqf_imatrix_free(im);
    return st;
}

static int stats_cmp(const void *a, const void *b) {
    const iqf_imatrix_stats *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

iqf_status iqf_imatrix_write_gguf(const char *path, const iqf_imatrix_stats *stats, int n,
                                  const iqf_imatrix_meta *meta, char *err, size_t errlen) {
    if (!meta) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    const char *ds = meta->dataset;
    return iqf_imatrix_write_gguf_ds(path, stats, n, meta, &ds, ds ? 1 : 0, err, errlen);
}

iqf_status iqf_imatrix_write_gguf_ds(const char *path, const iqf_imatrix_stats *stats, int n,
                                     const iqf_imatrix_meta *meta, const char *const *datasets,
                                     int n_datasets, char *err, size_t errlen) {
    if (!path || (n > 0 && !stats) || n < 0 || !meta || n_datasets < 0 || (n_datasets > 0 && !datasets))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    const iqf_imatrix_stats **v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const iqf_imatrix_stats *s = &stats[i];
        if (!s->name || s->ne0 < 1 || s->n_mat < 1 || !s->sum_x2 || !s->counts ||
            strlen(s->name) + 8 >= IQF_GGUF_MAX_NAME) {
            free(v);
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "imatrix entry %d is malformed or its name too long", i);
        }
        v[i] = s;
    }
    qsort(v, (size_t)n, sizeof *v, stats_cmp);
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, errlen);
    if (!w) {
        free(v);
        return IQF_E_IO;
    }
    iqf_status st = iqf_gguf_writer_set_str(w, "general.type", "imatrix");
    const char *none = "";
    if (!st) st = iqf_gguf_writer_set_arr_str(w, "imatrix.datasets", n_datasets ? datasets : &none, NULL, (uint64_t)n_datasets);
    if (!st) st = iqf_gguf_writer_set_u32(w, "imatrix.chunk_count", (uint32_t)meta->chunk_count);
    if (!st) st = iqf_gguf_writer_set_u32(w, "imatrix.chunk_size", (uint32_t)meta->chunk_size);
    char name[IQF_GGUF_MAX_NAME + 32];
    for (int i = 0; i < n && !st; i++) {
        int64_t ne[2] = { v[i]->ne0, v[i]->n_mat };
        snprintf(name, sizeof name, "%s.in_sum2", v[i]->name);
        st = iqf_gguf_writer_add_tensor(w, name, 2, ne, IQF_TYPE_F32);
        int64_t nc[2] = { 1, v[i]->n_mat };
        snprintf(name, sizeof name, "%s.counts", v[i]->name);
        if (!st) st = iqf_gguf_writer_add_tensor(w, name, 2, nc, IQF_TYPE_F32);
    }
    if (!st) st = iqf_gguf_writer_write_header(w);
    for (int i = 0; i < n && !st; i++) {
        st = iqf_gguf_writer_write_data(w, v[i]->sum_x2, (size_t)(v[i]->ne0 * v[i]->n_mat) * sizeof(float));
        for (int64_t m = 0; m < v[i]->n_mat && !st; m++) {
            float c = (float)v[i]->counts[m];
            st = iqf_gguf_writer_write_data(w, &c, sizeof c);
        }
    }
    free(v);
    if (st) {
        iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(w));
        iqf_gguf_writer_abort(w);
        return st;
    }
    return iqf_gguf_writer_finish(w, err, errlen);
}
