/*
 * imatrix_public.c - the public importance-matrix file API of iqforge.h (iqf_imatrix_data_save,
 * iqf_imatrix_file_*) over the readers and writers of imatrix.h.
 */
#include "imatrix.h"

#include "util/error.h"

#include <stdlib.h>

struct iqf_imatrix_file {
    iqf_imatrix im;
};

iqf_status iqf_imatrix_data_save(const iqf_imatrix_data *d, const char *path, bool dat,
                                 const char *dataset, char *err, size_t errlen) {
    if (!d || !path || d->n_entries < 0)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing importance data or path");
    iqf_imatrix_stats *stats = calloc((size_t)d->n_entries + 1, sizeof *stats);
    if (!stats) return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory", path);
    for (int i = 0; i < d->n_entries; i++)
        stats[i] = (iqf_imatrix_stats){ d->names[i], d->ncols[i], d->n_mat ? d->n_mat[i] : 1, d->sum2[i],
                                        d->mat_counts ? d->mat_counts[i] : &d->counts[i] };
    const iqf_imatrix_meta meta = { d->n_chunks, d->chunk_size, dataset };
    iqf_status st = dat ? iqf_imatrix_write_dat(path, stats, d->n_entries, &meta, err, errlen)
                        : iqf_imatrix_write_gguf(path, stats, d->n_entries, &meta, err, errlen);
    free(stats);
    return st;
}

iqf_status iqf_imatrix_file_load(const char *path, iqf_imatrix_file **out, char *err, size_t errlen) {
    if (!out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing output pointer");
    *out = NULL;
    if (!path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing path");
    iqf_imatrix_file *f = calloc(1, sizeof *f);
    if (!f) return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory", path);
    iqf_status st = iqf_imatrix_load(path, &f->im, err, errlen);
    if (st) {
        free(f);
        return st;
    }
    *out = f;
    return IQF_OK;
}

void iqf_imatrix_file_free(iqf_imatrix_file *f) {
    if (!f) return;
    iqf_imatrix_free(&f->im);
    free(f);
}

const float *iqf_imatrix_file_find(const iqf_imatrix_file *f, const char *name, int64_t *n) {
    const iqf_imatrix_entry *e = f && name ? iqf_imatrix_find(&f->im, name) : NULL;
    if (n) *n = e ? e->n : 0;
    return e ? e->values : NULL;
}
