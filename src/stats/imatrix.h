/*
 * imatrix.h - importance matrices: the readers llama-quantize uses (GGUF imatrix and the legacy
 * .dat format, docs/FORMATS.md section 6) and the writers `iqforge imatrix` uses.
 *
 * Reading gives, per weight name, the values llama-quantize hands to the quantizer:
 *   GGUF:   value[m*ne0 + j] = in_sum2[m*ne0 + j] / lround(counts[m])   (1.0 if that count is 0)
 *   legacy: value[j] = stored[j] / ncall                                  (stored if ncall <= 0)
 * Readers treat the file as hostile: every count, length and size is checked.
 */
#ifndef IQF_STATS_IMATRIX_H
#define IQF_STATS_IMATRIX_H

#include "iqforge.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct iqf_imatrix_entry {
    char *name;      /* weight name, e.g. "blk.0.attn_q.weight" */
    float *values;   /* n values: ne0 per matrix, n/ne0 matrices (experts) */
    int64_t n;
} iqf_imatrix_entry;

typedef struct iqf_imatrix {
    iqf_imatrix_entry *entries; /* sorted by name (strcmp), names unique */
    int n_entries;
    char **datasets;            /* GGUF: imatrix.datasets; legacy: the trailer's name (0 or 1) */
    int n_datasets;
    int chunk_count;            /* GGUF: imatrix.chunk_count; legacy: the trailer's count; else 0 */
    int chunk_size;             /* GGUF: imatrix.chunk_size; legacy: 0 */
    bool is_legacy;
    bool has_metadata;          /* GGUF: datasets, chunk_count and chunk_size all present */
} iqf_imatrix;

/* Loads `path`: a GGUF imatrix if it starts with the GGUF magic, else the legacy format (the
 * reference also falls back to the legacy reader when GGUF parsing fails). Errors:
 * IQF_E_IO, IQF_E_FORMAT; message "PATH: what is wrong". */
iqf_status iqf_imatrix_load(const char *path, iqf_imatrix *im, char *err, size_t errlen);

/* Parse from memory (used by the fuzz targets and by iqf_imatrix_load). */
iqf_status iqf_imatrix_parse_dat(const void *data, size_t size, iqf_imatrix *im, char *err,
                                 size_t errlen);
iqf_status iqf_imatrix_parse_gguf(const void *data, size_t size, iqf_imatrix *im, char *err,
                                  size_t errlen);

void iqf_imatrix_free(iqf_imatrix *im);

/* Sorts the entries by name; of entries with the same name the later one is kept. */
void iqf_imatrix_sort(iqf_imatrix *im);

/* The entry for a weight name, or NULL. */
const iqf_imatrix_entry *iqf_imatrix_find(const iqf_imatrix *im, const char *name);

/* llama-quantize's --exclude-weights (drop entries whose name contains any of the strings), then
 * --include-weights (keep only entries whose name contains one of them; none given: keep all). */
void iqf_imatrix_filter(iqf_imatrix *im, const char *const *include, int n_include,
                        const char *const *exclude, int n_exclude);

/* ------------------------------------------------------------------------------------------
 * Writers (for `iqforge imatrix`). One statistics record per weight matrix.
 * ---------------------------------------------------------------------------------------- */
typedef struct iqf_imatrix_stats {
    const char *name;       /* weight name */
    int64_t ne0;            /* input columns of the weight */
    int64_t n_mat;          /* 1, or the number of experts */
    const float *sum_x2;    /* ne0*n_mat raw sums of x^2 over the tokens seen */
    const int64_t *counts;  /* n_mat token counts */
} iqf_imatrix_stats;

typedef struct iqf_imatrix_meta {
    int chunk_count;        /* number of chunks processed */
    int chunk_size;         /* tokens per chunk (n_ctx / n_parallel) */
    const char *dataset;    /* the text file name (may be NULL) */
} iqf_imatrix_meta;

/* The GGUF imatrix as llama-imatrix writes it: general.type="imatrix", imatrix.datasets,
 * imatrix.chunk_count, imatrix.chunk_size; tensors NAME.in_sum2 [ne0, n_mat] and NAME.counts
 * [1, n_mat] (F32), entries sorted by name. Errors: IQF_E_IO, IQF_E_INVALID_ARG. */
iqf_status iqf_imatrix_write_gguf(const char *path, const iqf_imatrix_stats *stats, int n,
                                  const iqf_imatrix_meta *meta, char *err, size_t errlen);

/* The legacy .dat as llama-imatrix --output-format dat writes it: entries with no data are
 * skipped, ncall = ceil(max count / chunk_size), values = sum/count*ncall (1 for count 0),
 * trailer chunk_count + dataset. */
iqf_status iqf_imatrix_write_dat(const char *path, const iqf_imatrix_stats *stats, int n,
                                 const iqf_imatrix_meta *meta, char *err, size_t errlen);

/* iqf_imatrix_write_gguf with a list of datasets (imatrix.datasets as given, n_datasets >= 0)
 * instead of meta->dataset: what `iqforge imatrix --combine` writes, the inputs' datasets in order. */
iqf_status iqf_imatrix_write_gguf_ds(const char *path, const iqf_imatrix_stats *stats, int n,
                                     const iqf_imatrix_meta *meta, const char *const *datasets,
                                     int n_datasets, char *err, size_t errlen);

/* ------------------------------------------------------------------------------------------
 * Combining (`iqforge imatrix --combine`): llama-imatrix's state as its --in-file loads it, the
 * raw sums of x^2 and the row counts per weight, so that the captures of shards of a text add up
 * to the capture of the whole text.
 * ---------------------------------------------------------------------------------------- */
typedef struct iqf_imatrix_raw_entry {
    char *name;       /* weight name */
    int64_t nval;     /* values: ne0 * n_mat */
    int64_t n_mat;    /* counts (1, or the number of experts) */
    double *sum;      /* nval sums of x^2, in double while combining */
    int64_t *counts;  /* n_mat row counts */
} iqf_imatrix_raw_entry;

typedef struct iqf_imatrix_raw {
    iqf_imatrix_raw_entry *entries; /* sorted by name, names unique */
    int n_entries;
    char **datasets;                /* imatrix.datasets (legacy: the trailer's name), in order */
    int n_datasets;
    int chunk_count, chunk_size;    /* as stored (legacy: chunk_size is the one assumed) */
    bool is_legacy;
} iqf_imatrix_raw;

/* Loads `path` as llama-imatrix's load_imatrix does: GGUF: sums = NAME.in_sum2, counts =
 * lround(NAME.counts) (NAME.in_sum, if present, is not kept); legacy .dat: sums = stored *
 * legacy_chunk_size and every count = ncall * legacy_chunk_size (the format keeps only the means
 * times ncall; llama-imatrix assumes its own -c). Errors: IQF_E_IO, IQF_E_FORMAT, IQF_E_NOMEM;
 * message "PATH: what is wrong". */
iqf_status iqf_imatrix_raw_load(const char *path, int legacy_chunk_size, iqf_imatrix_raw *out, char *err,
                                size_t errlen);
void iqf_imatrix_raw_free(iqf_imatrix_raw *r);

/* Adds src into dst as llama-imatrix's --in-file does: per weight the sums add and the counts
 * add; a weight only in src is added; a single count meets n_mat counts by broadcast (an older
 * file's 3-D entry). The datasets are appended. A weight whose value count or expert count
 * differs is an error (IQF_E_FORMAT, "SRC_NAME: what differs"), and so are chunk sizes that
 * differ (the shards of one capture share -c); dst is then unchanged (IQF_E_NOMEM can leave it
 * part-merged). chunk_count becomes the
 * largest count / chunk_size, as llama-imatrix recomputes it. */
iqf_status iqf_imatrix_raw_merge(iqf_imatrix_raw *dst, const iqf_imatrix_raw *src, const char *src_name,
                                 char *err, size_t errlen);

/* Writes r as llama-imatrix's GGUF (sums rounded once to F32) or, dat, its legacy .dat
 * (dataset: the last one, as llama-imatrix writes after --in-file). */
iqf_status iqf_imatrix_raw_write(const iqf_imatrix_raw *r, const char *path, bool dat, char *err, size_t errlen);

#endif
