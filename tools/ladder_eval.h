/*
 * ladder_eval.h - `iqforge ladder --evaluator llama-perplexity[=PATH]`: score rungs with a stock
 * llama-perplexity instead of the built-in engine (ladder_eval.c).
 */
#ifndef IQF_LADDER_EVAL_H
#define IQF_LADDER_EVAL_H

#include "ladder.h" /* src/ladder: the one internal header tools/ may include (cli.h says why) */

#include <stdbool.h>
#include <stddef.h>

/* "llama-perplexity" (looked up on PATH) or "llama-perplexity=PATH" -> the executable's path.
 * 0, or 2 (usage error, printed). */
int ladder_eval_resolve(const char *spec, char *path, size_t n);

typedef struct ladder_eval_args {
    const char *tool;       /* the resolved executable */
    const char *model;      /* the GGUF to evaluate */
    const char *base_kld;   /* llama-perplexity's own log-probability file */
    const char *log_path;   /* where its stdout+stderr go (kept for the user) */
    int n_ctx, n_threads;
    bool kv_f16;            /* --kv-type f16 (llama.cpp's defaults) or f32 (F32 cache, no flash attention) */
} ladder_eval_args;

/* The base model: its PPL on text_path (first n_chunks chunks, all when <= 0), writing base_kld.
 * 0, or -1 with err set. */
int ladder_eval_base(const ladder_eval_args *a, const char *text_path, int n_chunks, double *ppl, double *ppl_err,
                     char *err, size_t errlen);
/* One rung: PPL, PPL ratio, KLD (mean, p99, max), same top token, n_chunks into r. 0, or -1. */
int ladder_eval_rung(const ladder_eval_args *a, ladder_rung *r, char *err, size_t errlen);

#endif
