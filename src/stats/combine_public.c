/* combine_public.c - iqf_stats_combine (iqforge.h): the kind of each input, then the
 * importance-matrix (imatrix_combine.c) or Hessian (hessian_combine.c) combination. */
#include "hessian_file.h"
#include "imatrix.h"
#include "../util/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int iqf_stats_file_kind(const char *path, char *err, size_t errlen) {
    if (!path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL path"), 0;
    FILE *f = fopen(path, "rb");
    if (!f) return iqf_fail(err, errlen, IQF_E_IO, "%s: %s", path, strerror(errno)), 0;
    char magic[4] = { 0 };
    const size_t got = fread(magic, 1, 4, f);
    fclose(f);
    if (got < 4 || memcmp(magic, "GGUF", 4)) return IQF_STATS_IMATRIX; /* legacy .dat, or garbage */
    char msg[256];
    iqf_gguf *g = iqf_gguf_open(path, msg, sizeof msg);
    if (!g) return IQF_STATS_IMATRIX; /* the imatrix loader says what is wrong */
    const char *type;
    const bool hess = iqf_gguf_get_str(g, "general.type", &type, NULL) && !strcmp(type, "hessian");
    iqf_gguf_close(g);
    return hess ? IQF_STATS_HESSIAN : IQF_STATS_IMATRIX;
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static const char *kind_name(int k) { return k == IQF_STATS_HESSIAN ? "a Hessian file" : "an importance matrix"; }

iqf_status iqf_stats_combine(const char *const *paths, int n, const char *out, int format,
                             int legacy_chunk_size, iqf_combine_info *info, char *err, size_t errlen) {
    if (info) memset(info, 0, sizeof *info);
    if (!paths || n < 1 || !out || format < 0 || format > 2 || legacy_chunk_size < 0)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    for (int i = 0; i < n; i++)
        if (!paths[i]) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "input %d has no path", i + 1);
    const int kind = iqf_stats_file_kind(paths[0], err, errlen);
    if (!kind) return IQF_E_IO;
    for (int i = 1; i < n; i++) {
        const int k = iqf_stats_file_kind(paths[i], err, errlen);
        if (!k) return IQF_E_IO;
        if (k != kind)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s, but %s is %s (combine files of one kind)", paths[i],
                            kind_name(k), paths[0], kind_name(kind));
    }
    iqf_status st = IQF_OK;
    if (kind == IQF_STATS_HESSIAN) {
        if (format == 2)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "%s: Hessian files are written as GGUF only", out);
        iqf_hessian_sums acc, next;
        st = iqf_hessian_sums_load(paths[0], &acc, err, errlen);
        if (st) return st;
        for (int i = 1; i < n && !st; i++) {
            st = iqf_hessian_sums_load(paths[i], &next, err, errlen);
            if (!st) st = iqf_hessian_sums_merge(&acc, &next, paths[i], err, errlen);
            iqf_hessian_sums_free(&next);
        }
        if (!st) st = iqf_hessian_sums_write(&acc, out, err, errlen);
        if (!st && info) *info = (iqf_combine_info){ kind, acc.n_entries, acc.chunk_count, acc.chunk_size, acc.token_count,
                                                     false };
        iqf_hessian_sums_free(&acc);
        return st;
    }
    const bool dat = format == 2 || (format == 0 && !ends_with(out, ".gguf"));
    const int lcs = legacy_chunk_size ? legacy_chunk_size : 512;
    iqf_imatrix_raw acc, next;
    st = iqf_imatrix_raw_load(paths[0], lcs, &acc, err, errlen);
    if (st) return st;
    for (int i = 1; i < n && !st; i++) {
        st = iqf_imatrix_raw_load(paths[i], lcs, &next, err, errlen);
        if (!st) st = iqf_imatrix_raw_merge(&acc, &next, paths[i], err, errlen);
        iqf_imatrix_raw_free(&next);
    }
    if (!st) st = iqf_imatrix_raw_write(&acc, out, dat, err, errlen);
    if (!st && info) {
        int64_t mx = 0;
        for (int i = 0; i < acc.n_entries; i++)
            for (int64_t j = 0; j < acc.entries[i].n_mat; j++)
                if (acc.entries[i].counts[j] > mx) mx = acc.entries[i].counts[j];
        *info = (iqf_combine_info){ kind, acc.n_entries, acc.chunk_count, acc.chunk_size, mx, dat };
    }
    iqf_imatrix_raw_free(&acc);
    return st;
}
