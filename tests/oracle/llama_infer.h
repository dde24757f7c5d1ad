/*
 * llama_infer.h - runs the oracle's libllama (npm @node-llama-cpp/linux-x64@3.22.1, llama/ggml
 * 0.25.1) for differential tests of the inference engine: load a GGUF model, decode token
 * batches, read logits. Part of the oracle library (llama_infer.c).
 *
 * llama.h is not copied: the parameter structs are fetched from llama_*_default_params into a
 * large buffer and only fields located and checked by their default values are changed. In this
 * version llama_context_params is, in 4-byte words: 0 n_ctx (512), 1 n_batch (2048), 2 n_ubatch
 * (512), 3 n_seq_max (1), 4-6 (0, 0, 1), 7-8 n_threads, n_threads_batch (equal), 9 (0), 10-13
 * enums rope scaling, pooling, attention type, flash_attn_type (all -1: auto), 14-21 rope and
 * YaRN floats, 22-25 two pointers (cb_eval), 26-27 type_k, type_v (1: F16).
 */
#ifndef IQF_LLAMA_INFER_H
#define IQF_LLAMA_INFER_H

#include "oracle.h"

#include <dlfcn.h> /* for the tests that look up more of libllama */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct li_big { uint8_t b[1024]; } li_big; /* holds any of llama's parameter structs */
typedef struct li_batch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} li_batch;

typedef struct li_api {
    void *h;
    void (*backend_init)(void);
    li_big (*model_default_params)(void);
    li_big (*context_default_params)(void);
    void *(*model_load)(const char *, li_big);
    void *(*init_from_model)(void *, li_big);
    void *(*model_get_vocab)(void *);
    int32_t (*vocab_n_tokens)(const void *);
    li_batch (*batch_init)(int32_t, int32_t, int32_t);
    void (*batch_free)(li_batch);
    int32_t (*decode)(void *, li_batch);
    float *(*get_logits_ith)(void *, int32_t);
    void *(*get_memory)(void *);
    void (*memory_clear)(void *, bool);
    void (*free_ctx)(void *);
    void (*model_free)(void *);
    void (*log_set)(void (*)(int, const char *, void *), void *);
} li_api;

/* Loads libllama (and ggml's CPU backends) once; NULL with a note on stderr if unavailable. */
li_api *li_load(void);

typedef struct li_run {
    li_api *L;
    void *model, *ctx;
    int n_vocab, n_ctx;
    li_batch b;
} li_run;

/* Loads `path` and makes a context of n_ctx positions (n_batch = n_ubatch = n_ctx) with `threads`
 * threads. f32_kv: K/V cache in F32 and flash attention off (the plain float graph); otherwise
 * llama-perplexity's defaults (F16 cache, flash attention auto). */
bool li_open(li_run *r, const char *path, int n_ctx, int threads, bool f32_kv);

void li_close(li_run *r);

void li_clear(li_run *r);

/* Decodes n tokens at positions pos..pos+n-1; logits wanted for rows >= first_out, copied to
 * out (n - first_out rows of n_vocab) if out is not NULL. */
bool li_decode(li_run *r, const int32_t *tok, int n, int pos, int first_out, float *out);

#endif
