/*
 * llama_oracle.h - calls the oracle's llama_model_quantize (libllama from npm
 * @node-llama-cpp/linux-x64@3.22.1, llama/ggml 0.25.1) the way tools/quantize/quantize.cpp does,
 * for differential tests and the benchmark. Part of the oracle library (llama_oracle.c).
 *
 * The parameter struct is declared here exactly as in llama.h of that version. The imatrix goes
 * through params.imatrix as {name, data, size} records (a C structure in this version), with the
 * values llama-quantize would pass (already divided by the counts); the imatrix KVs go through
 * kv_overrides as quantize.cpp builds them.
 */
#ifndef IQF_LLAMA_ORACLE_H
#define IQF_LLAMA_ORACLE_H

#include "oracle.h"
#include "stats/imatrix.h"

#include <dlfcn.h> /* for the tests that look up more of libllama */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lo_imatrix_data {
    const char *name;
    const float *data;
    size_t size;
};
struct lo_kv_override {
    int tag; /* 0 int, 1 float, 2 bool, 3 str */
    char key[128];
    union {
        int64_t val_i64;
        double val_f64;
        bool val_bool;
        char val_str[128];
    };
};
struct lo_tensor_override {
    const char *pattern;
    int type;
};
typedef struct lo_quantize_params {
    int32_t nthread;
    int ftype;
    int output_tensor_type;
    int token_embedding_type;
    bool allow_requantize;
    bool quantize_output_tensor;
    bool only_copy;
    bool pure;
    bool keep_split;
    bool dry_run;
    const struct lo_imatrix_data *imatrix;
    const struct lo_kv_override *kv_overrides;
    const struct lo_tensor_override *tt_overrides;
    const int32_t *prune_layers;
    size_t max_buf_size;
} lo_quantize_params;

typedef struct lo_api {
    void *h;
    void (*backend_init)(void);
    lo_quantize_params (*default_params)(void);
    uint32_t (*quantize)(const char *, const char *, const lo_quantize_params *);
    void (*log_set)(void (*)(int, const char *, void *), void *);
} lo_api;

/* Loads libllama once. Returns NULL (with a note on stderr) if it is not there. */
lo_api *lo_load(void);

/* As the llama_model_quantize_default_params of this version (checked by lo_check_layout). */
bool lo_check_layout(lo_api *api);

typedef struct lo_opts {
    int ftype;
    int nthread;
    const iqf_imatrix *im;        /* loaded + filtered, or NULL */
    const char *imatrix_path;     /* for quantize.imatrix.file */
    int output_tensor_type;       /* -1: default */
    int token_embedding_type;     /* -1: default */
    bool leave_output, pure, allow_requantize;
    const char *const *tt_pat;    /* --tensor-type */
    const int *tt_type;
    int n_tt;
    const iqf_kv_override *kvo;   /* --override-kv, before the imatrix KVs (as quantize.cpp) */
    int n_kvo;
    const int *prune;             /* --prune-layers (sorted, unique) */
    int n_prune;
    bool keep_split;              /* --keep-split (out is then the prefix) */
} lo_opts;

/* Runs the oracle; returns its status (0 = success). */
uint32_t lo_quantize(lo_api *api, const char *in, const char *out, const lo_opts *o);

#endif
