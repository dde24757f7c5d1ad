/*
 * imatrix_public.c - loading an importance matrix file (iqf_imatrix_load: the GGUF reader of
 * imatrix_gguf.c or the legacy one of imatrix.c) and the public importance-matrix file API of
 * iqforge.h (iqf_imatrix_data_save, iqf_imatrix_file_*) over the readers and writers of imatrix.h.
 * It sits on both format files, which never call each other's loader.
 */
#include "imatrix.h"

#include "util/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------
 * Loading a file
 * ---------------------------------------------------------------------------------------- */
static iqf_status slurp(const char *path, uint8_t **out, size_t *n, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return iqf_fail(err, errlen, IQF_E_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_IO, "%s: not a regular file", path);
    }
    size_t sz = (size_t)st.st_size;
    uint8_t *buf = malloc(sz ? sz : 1);
    if (!buf) {
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory (%zu bytes)", path, sz);
    }
    if (sz && fread(buf, 1, sz, f) != sz) {
        int e = errno;
        free(buf);
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_IO, "%s: read failed: %s", path, e ? strerror(e) : "short read");
    }
    fclose(f);
    *out = buf;
    *n = sz;
    return IQF_OK;
}

iqf_status iqf_imatrix_load(const char *path, iqf_imatrix *im, char *err, size_t errlen) {
    memset(im, 0, sizeof *im);
    uint8_t *buf = NULL;
    size_t n = 0;
    iqf_status st = slurp(path, &buf, &n, err, errlen);
    if (st) return st;
    char msg[256];
    if (n >= 4 && !memcmp(buf, "GGUF", 4)) {
        st = iqf_imatrix_parse_gguf(buf, n, im, msg, sizeof msg);
        if (st == IQF_OK && !im->has_metadata) {
            iqf_imatrix_free(im);
            snprintf(msg, sizeof msg, "missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size)");
            st = IQF_E_FORMAT;
        }
    } else {
        st = iqf_imatrix_parse_dat(buf, n, im, msg, sizeof msg);
    }
    free(buf);
    if (st) return iqf_fail(err, errlen, st, "%s: %s", path, msg);
    return IQF_OK;
}

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
