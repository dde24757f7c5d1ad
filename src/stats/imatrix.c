/*
 * imatrix.c - the importance matrix in memory (free, sort, find, filter), the legacy .dat reader and
 * the writers, with the semantics of
 * llama 0.25.1's common/imatrix-loader.cpp + tools/quantize/quantize.cpp (reading) and
 * tools/imatrix/imatrix.cpp (writing). See imatrix.h.
 */
#include "imatrix.h"
#include "../util/error.h"

#include "../util/outfile.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void iqf_imatrix_free(iqf_imatrix *im) {
    if (!im) return;
    for (int i = 0; i < im->n_entries; i++) {
        free(im->entries[i].name);
        free(im->entries[i].values);
    }
    free(im->entries);
    for (int i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    memset(im, 0, sizeof *im);
}

static int entry_cmp(const void *a, const void *b) {
    return strcmp(((const iqf_imatrix_entry *)a)->name, ((const iqf_imatrix_entry *)b)->name);
}

/* Sorts by name; for duplicate names the later entry wins (as std::map operator[] assignment). */
void iqf_imatrix_sort(iqf_imatrix *im) {
    for (int i = 0; i < im->n_entries; i++)
        for (int j = i + 1; j < im->n_entries && im->entries[i].name; j++)
            if (im->entries[j].name && !strcmp(im->entries[i].name, im->entries[j].name)) {
                free(im->entries[i].name);
                free(im->entries[i].values);
                im->entries[i].name = NULL;
                im->entries[i].values = NULL;
            }
    int k = 0;
    for (int i = 0; i < im->n_entries; i++)
        if (im->entries[i].name) im->entries[k++] = im->entries[i];
    im->n_entries = k;
    if (k > 1) qsort(im->entries, (size_t)k, sizeof *im->entries, entry_cmp);
}

const iqf_imatrix_entry *iqf_imatrix_find(const iqf_imatrix *im, const char *name) {
    if (!im || !im->n_entries) return NULL;
    iqf_imatrix_entry key = { (char *)name, NULL, 0 };
    return bsearch(&key, im->entries, (size_t)im->n_entries, sizeof key, entry_cmp);
}

void iqf_imatrix_filter(iqf_imatrix *im, const char *const *include, int n_include,
                        const char *const *exclude, int n_exclude) {
    int k = 0;
    for (int i = 0; i < im->n_entries; i++) {
        iqf_imatrix_entry *e = &im->entries[i];
        bool keep = true;
        for (int x = 0; x < n_exclude && keep; x++)
            if (strstr(e->name, exclude[x])) keep = false;
        if (keep && n_include > 0) {
            keep = false;
            for (int x = 0; x < n_include && !keep; x++)
                if (strstr(e->name, include[x])) keep = true;
        }
        if (keep) {
            im->entries[k++] = *e;
        } else {
            free(e->name);
            free(e->values);
        }
    }
    im->n_entries = k;
}

/* ------------------------------------------------------------------------------------------
 * Legacy .dat
 * ---------------------------------------------------------------------------------------- */
typedef struct reader {
    const uint8_t *p;
    size_t n, off;
} reader;

static bool rd_i32(reader *r, int32_t *v) {
    if (r->n - r->off < 4) return false;
    memcpy(v, r->p + r->off, 4);
    r->off += 4;
    return true;
}

iqf_status iqf_imatrix_parse_dat(const void *data, size_t size, iqf_imatrix *im, char *err,
                                 size_t errlen) {
    memset(im, 0, sizeof *im);
    reader r = { data, size, 0 };
    int32_t n_entries;
    if (!rd_i32(&r, &n_entries) || n_entries < 1)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "no data (entry count missing or < 1)");
    /* Each entry needs at least 4+4+4+4 bytes: bound the count by the size before allocating. */
    if ((uint64_t)n_entries > (size - 4) / 16)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "entry count %d does not fit in %zu bytes", n_entries, size);
    im->entries = calloc((size_t)n_entries, sizeof *im->entries);
    if (!im->entries) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    iqf_status st = IQF_OK;
    for (int i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!rd_i32(&r, &len) || len < 0 || (size_t)len > r.n - r.off) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "entry %d: bad or truncated name", i + 1);
            goto bad;
        }
        iqf_imatrix_entry *e = &im->entries[im->n_entries];
        e->name = malloc((size_t)len + 1);
        if (!e->name) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto bad;
        }
        memcpy(e->name, r.p + r.off, (size_t)len);
        e->name[len] = 0; /* the reference keeps the name up to its first NUL */
        r.off += (size_t)len;
        im->n_entries++;
        if (!rd_i32(&r, &ncall) || !rd_i32(&r, &nval) || nval < 1) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "entry %d (%s): bad or truncated value count", i + 1, e->name);
            goto bad;
        }
        if ((uint64_t)nval * 4 > r.n - r.off) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "entry %d (%s): %d values truncated", i + 1, e->name, nval);
            goto bad;
        }
        e->n = nval;
        e->values = malloc((size_t)nval * sizeof(float));
        if (!e->values) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto bad;
        }
        memcpy(e->values, r.p + r.off, (size_t)nval * 4);
        r.off += (size_t)nval * 4;
        if (ncall > 0)
            for (int32_t j = 0; j < nval; j++) e->values[j] = e->values[j] / (float)ncall;
    }
    /* Optional trailer: chunk count, then the dataset name. */
    if (r.off < r.n) {
        int32_t n_calls = 0, len = 0;
        if (rd_i32(&r, &n_calls)) im->chunk_count = n_calls;
        if (rd_i32(&r, &len) && len > 0 && (size_t)len <= r.n - r.off) {
            im->datasets = malloc(sizeof *im->datasets);
            char *d = malloc((size_t)len + 1);
            if (!im->datasets || !d) {
                free(d);
                st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
                goto bad;
            }
            memcpy(d, r.p + r.off, (size_t)len);
            d[len] = 0;
            im->datasets[0] = d;
            im->n_datasets = 1;
        }
    }
    im->is_legacy = true;
    iqf_imatrix_sort(im);
    return IQF_OK;
bad:
    iqf_imatrix_free(im);
    return st;
}

/* ------------------------------------------------------------------------------------------
 * Writers
 * ---------------------------------------------------------------------------------------- */
static int stats_cmp(const void *a, const void *b) {
    const iqf_imatrix_stats *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

static iqf_status sorted_stats(const iqf_imatrix_stats *stats, int n, const iqf_imatrix_stats ***out,
                               char *err, size_t errlen) {
    const iqf_imatrix_stats **v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        if (!stats[i].name || stats[i].ne0 < 1 || stats[i].n_mat < 1 || !stats[i].sum_x2 || !stats[i].counts) {
            free(v);
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "imatrix entry %d is malformed", i);
        }
        v[i] = &stats[i];
    }
    qsort(v, (size_t)n, sizeof *v, stats_cmp);
    *out = v;
    return IQF_OK;
}

static int wr_i32(iqf_outfile *of, int32_t v) { return iqf_of_write(of, &v, 4); }

iqf_status iqf_imatrix_write_dat(const char *path, const iqf_imatrix_stats *stats, int n,
                                 const iqf_imatrix_meta *meta, char *err, size_t errlen) {
    if (!path || (n > 0 && !stats) || n < 0 || !meta)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    const iqf_imatrix_stats **v = NULL;
    iqf_status st = sorted_stats(stats, n, &v, err, errlen);
    if (st) return st;
    int32_t chunk_size = meta->chunk_size > 0 ? meta->chunk_size : 1;
    int32_t n_entries = 0;
    for (int i = 0; i < n; i++) {
        bool any = false;
        for (int64_t m = 0; m < v[i]->n_mat; m++) any |= v[i]->counts[m] != 0;
        if (any) n_entries++;
        else v[i] = NULL; /* no data: skipped, as the reference does */
    }
    iqf_outfile of;
    if (iqf_of_open(&of, path) != 0) {
        free(v);
        return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    }
    float *tmp = NULL;
    size_t tmp_n = 0;
    wr_i32(&of, n_entries);
    for (int i = 0; i < n; i++) {
        const iqf_imatrix_stats *s = v[i];
        if (!s) continue;
        int32_t len = (int32_t)strlen(s->name);
        wr_i32(&of, len);
        iqf_of_write(&of, s->name, (size_t)len);
        int64_t maxc = 0;
        for (int64_t m = 0; m < s->n_mat; m++)
            if (s->counts[m] > maxc) maxc = s->counts[m];
        int32_t ncall = (int32_t)((maxc + (chunk_size - 1)) / chunk_size);
        int64_t nval = s->ne0 * s->n_mat;
        wr_i32(&of, ncall);
        wr_i32(&of, (int32_t)nval);
        if ((size_t)nval > tmp_n) {
            free(tmp);
            tmp = malloc((size_t)nval * sizeof *tmp);
            tmp_n = tmp ? (size_t)nval : 0;
            if (!tmp) {
                iqf_of_abort(&of);
                free(v);
                return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            }
        }
        for (int64_t j = 0; j < nval; j++) {
            float count = (float)s->counts[j / s->ne0];
            float value = s->sum_x2[j];
            if (count == 0.0f) {
                value = 1.0f;
                count = 1.0f;
            }
            tmp[j] = (value / count) * (float)ncall;
        }
        iqf_of_write(&of, tmp, (size_t)nval * sizeof(float));
    }
    wr_i32(&of, meta->chunk_count);
    const char *ds = meta->dataset ? meta->dataset : "";
    wr_i32(&of, (int32_t)strlen(ds));
    iqf_of_write(&of, ds, strlen(ds));
    free(tmp);
    free(v);
    if (iqf_of_commit(&of) != 0) return iqf_fail(err, errlen, IQF_E_IO, "%s", of.err);
    return IQF_OK;
}


