/*
 * hessian_file.h - the Hessian file that `iqforge imatrix --hessian OUT` writes and `iqforge
 * quantize --hessian FILE` reads: per linear layer input, H = E[x x^T] over the calibration
 * tokens, for GPTQ-style error feedback (src/quantize/feedback.c).
 *
 * Layout (a GGUF file):
 *   general.type                = "hessian"
 *   hessian.model.name          str   general.name of the model ("" if it has none)
 *   hessian.model.architecture  str   general.architecture
 *   hessian.model.n_embd, hessian.model.n_layer, hessian.model.n_ff, hessian.model.n_vocab  u32
 *   hessian.token_count         u64   token rows accumulated (every entry saw the same rows)
 *   hessian.chunk_count, hessian.chunk_size  u32;  hessian.dataset  str (the text file)
 *   one tensor per distinct input, named after the weights that read it:
 *     blk.N.attn_qkv.hessian     input of attn_q, attn_k, attn_v (shared)
 *     blk.N.attn_output.hessian, blk.N.ffn_down.hessian, output.hessian
 *     blk.N.ffn_gate_up.hessian  input of ffn_gate and ffn_up (shared)
 *     blk.N.ffn_gate_up_exps.hessian  input of expert e's ffn_gate_exps, ffn_up_exps and
 *                                     ffn_gate_up_exps, per expert (ne2 = n_expert)
 *     blk.N.ffn_down_exps.hessian     input of ffn_down_exps, per expert
 *   Each tensor is F32 or F16 with ne0 = bs (diagonal block size), ne1 = n (input width),
 *   n % bs == 0: H is block-diagonal with n/bs blocks of bs x bs; row r = k*bs + i of the tensor
 *   is row i of block k (columns k*bs .. k*bs+bs-1 of H). bs == n is the full matrix.
 *   Values are means (sums / token_count). A per-expert tensor has ne2 = n_expert matrices of
 *   that layout, each the mean over the rows routed to that expert (llama-imatrix's per-expert
 *   E[x^2] on its diagonal); an expert that saw no rows is all zeros. Files without expert
 *   entries (older ones) read as before.
 *   hessian.expert_counts.NAME  u64[n_expert]  the rows routed to each expert of per-expert
 *                               tensor NAME (only `imatrix --combine` needs them; older files
 *                               lack them and cannot be combined if they have expert entries)
 *
 * The reader treats the file as hostile: every key type, shape and value (finite, diagonal >= 0)
 * is checked at open; values are then read on demand from the mapping.
 */
#ifndef IQF_STATS_HESSIAN_FILE_H
#define IQF_STATS_HESSIAN_FILE_H

#include "iqforge.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The key prefix of a per-expert entry's row counts (the tensor name follows). */
#define IQF_HESSIAN_EXPERT_COUNTS_KEY "hessian.expert_counts."

/* The most matrices (experts) one entry may hold. */
#define IQF_HESSIAN_MAX_MATS 4096

/* What identifies the model a Hessian was made from. */
typedef struct iqf_hessian_model_id {
    char name[128];
    char arch[32];
    int64_t n_embd, n_layer, n_ff, n_vocab;
} iqf_hessian_model_id;

/* Reads the identity from a model GGUF (missing numbers are 0). */
void iqf_hessian_model_id_get(const iqf_gguf *g, iqf_hessian_model_id *id);

/* The slot map, the one place that says which weights read the same input and so share one
 * Hessian: a row per tensor of a layer (blk.N.<tensor>.weight) and its slot (blk.N.<slot>.hessian).
 * owner 1: the tensor's product feeds a plain slot during capture; 2: a per-expert slot (3-D
 * weights with at least 2 experts); 0: it only reads its slot. A layer's slots are made in the
 * owner rows' order, each by the first owner of its slot the layer has (src/model/hessian.c);
 * iqf_hessian_name_for maps every row to its slot, any other weight to its own name. */
typedef struct iqf_hessian_slot_row {
    const char *tensor, *slot;
    int owner;
} iqf_hessian_slot_row;
const iqf_hessian_slot_row *iqf_hessian_slot_map(int *n);

/* The Hessian tensor name for a weight name ("blk.3.attn_k.weight" -> "blk.3.attn_qkv.hessian",
 * "output.weight" -> "output.hessian"); false if the name does not end in ".weight" or is too
 * long. */
bool iqf_hessian_name_for(const char *weight, char *out, size_t outlen);

/* One tensor to write: sums of x x^T over `count` token rows, in double, laid out as in the file
 * (n rows of bs). */
typedef struct iqf_hessian_wentry {
    const char *name;   /* e.g. "blk.0.attn_qkv.hessian" */
    int64_t n, bs;
    const double *sum;  /* n * bs */
    int64_t count;
    /* A per-expert entry (3-D expert tensors): n_mat > 1 experts of n rows of bs (sum holds
     * n_mat * n * bs), counts[e] the rows routed to expert e; its means are sum / counts[e] (all
     * zero for an expert that saw no rows). n_mat 0 or 1: one matrix over `count`. */
    int64_t n_mat;
    const int64_t *counts;
} iqf_hessian_wentry;

typedef struct iqf_hessian_meta {
    iqf_hessian_model_id model;
    int chunk_count, chunk_size;
    const char *dataset;  /* may be NULL */
    bool f16;             /* store F16 instead of F32 */
} iqf_hessian_meta;

/* Writes the file (entries in the order given). Every entry must have the same count (> 0).
 * Errors: IQF_E_INVALID_ARG, IQF_E_NONFINITE (a mean too large for F16), IQF_E_IO, IQF_E_NOMEM. */
iqf_status iqf_hessian_write(const char *path, const iqf_hessian_wentry *e, int n,
                             const iqf_hessian_meta *meta, char *err, size_t errlen);

typedef struct iqf_hessian_file {
    void *g;                    /* iqf_gguf* */
    char *path;
    iqf_hessian_model_id model;
    uint64_t token_count;
    int chunk_count, chunk_size;
} iqf_hessian_file;

/* Opens and validates. Errors (IQF_E_IO, IQF_E_FORMAT, IQF_E_NONFINITE, IQF_E_NOMEM), message
 * "PATH: what is wrong". */
iqf_status iqf_hessian_open(const char *path, iqf_hessian_file *hf, char *err, size_t errlen);
void iqf_hessian_close(iqf_hessian_file *hf);

/* The entry named `hname`: true and its width and block size, or false if absent. */
bool iqf_hessian_find(const iqf_hessian_file *hf, const char *hname, int64_t *n, int64_t *bs);
/* How many matrices the entry holds (1, or n_expert for a per-expert entry); 0 if absent. */
int64_t iqf_hessian_n_mat(const iqf_hessian_file *hf, const char *hname);
/* Copies the entry's n*bs values as float (a per-expert entry: its first expert's). False if
 * absent. */
bool iqf_hessian_read(const iqf_hessian_file *hf, const char *hname, float *out);
/* Copies matrix `mat` (an expert) of the entry. False if absent or mat is out of range. */
bool iqf_hessian_read_mat(const iqf_hessian_file *hf, const char *hname, int64_t mat, float *out);

/* ------------------------------------------------------------------------------------------
 * Combining (`iqforge imatrix --combine`, hessian_combine.c): a file's means turned back into
 * sums (mean * rows, exact in double), added entry by entry, written as means again.
 * ---------------------------------------------------------------------------------------- */
typedef struct iqf_hessian_sentry {
    char *name;        /* "blk.0.attn_qkv.hessian" */
    int64_t n, bs, n_mat;
    double *sum;       /* n_mat * n * bs sums */
    int64_t *counts;   /* n_mat > 1: the rows of each expert; else NULL (the file's token_count) */
} iqf_hessian_sentry;

typedef struct iqf_hessian_sums {
    iqf_hessian_model_id model;
    int64_t token_count;
    int chunk_count, chunk_size;
    char *dataset;                 /* NULL if none */
    bool f16;                      /* every file read was F16 */
    iqf_hessian_sentry *entries;   /* in the first file's order */
    int n_entries;
} iqf_hessian_sums;

/* Opens `path` (iqf_hessian_open's checks) and turns its means into sums. A per-expert entry
 * needs its hessian.expert_counts.NAME (u64[n_expert], each expert's rows; an expert with no
 * rows all zeros). Errors: IQF_E_IO, IQF_E_FORMAT, IQF_E_NONFINITE, IQF_E_NOMEM; "PATH: ...". */
iqf_status iqf_hessian_sums_load(const char *path, iqf_hessian_sums *out, char *err, size_t errlen);
/* Adds src into dst: the same model, chunk size and entries (name, width, block, experts) or
 * IQF_E_FORMAT "SRC_NAME: what differs" (dst unchanged); sums, rows, token and chunk counts add. */
iqf_status iqf_hessian_sums_merge(iqf_hessian_sums *dst, const iqf_hessian_sums *src, const char *src_name,
                                  char *err, size_t errlen);
/* Writes the means (iqf_hessian_write; F16 if every input was). */
iqf_status iqf_hessian_sums_write(const iqf_hessian_sums *s, const char *path, char *err, size_t errlen);
void iqf_hessian_sums_free(iqf_hessian_sums *s);

#endif
