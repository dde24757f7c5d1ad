/* model_cli.h - pieces shared by the model commands (perplexity, imatrix, generate, ladder). */
#ifndef IQF_MODEL_CLI_H
#define IQF_MODEL_CLI_H

#include "iqforge.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct model_cli_sim {
    const char *type_name;    /* --simulate TYPE */
    const char *imatrix_path; /* --imatrix FILE */
    const char *mode_name;    /* --mode compat|best (the simulation's encoder) */
} model_cli_sim;

/* The options every model command shares (perplexity, imatrix, generate, ladder), parsed once:
 * -m MODEL, -f TEXT, -c N_CTX (in [c_lo, c_hi]), --chunks N (-1 or >= 1), -t THREADS (0..4096),
 * --kv-type f16|f32: the K/V cache's precision. f32 by default: with it the stories260K chunks
 * match llama-perplexity's to every printed digit; f16 (llama.cpp's default cache type) brings
 * whole-file kjv-3m KLDs closer to llama-perplexity's on some rungs (docs/QUALITY.md).
 * A command that takes no -f or --chunks sets has_text / has_chunks false. */
typedef struct model_cli_opts {
    const char *model, *text;
    long long n_ctx, n_chunks, n_threads;
    long long c_lo, c_hi;
    bool has_text, has_chunks;
    bool kv_f16;       /* --kv-type f16 | f32 (default) */
} model_cli_opts;

void model_cli_opts_init(model_cli_opts *o, long long n_ctx, long long c_lo, long long c_hi);
/* If argv[*i] is one of the shared options, consumes it and its value: returns 1; on a missing or
 * bad value prints "CMD: bad OPT 'VALUE'" and returns -1 (a usage error); otherwise 0. */
int model_cli_opts_arg(model_cli_opts *o, const char *cmd, int argc, char **argv, int *i);

/* A context for the command's model with its -t and --kv-type; prints the error, returns 0 or 1. */
int model_cli_context(const iqf_model *m, const model_cli_opts *o, int n_ctx, iqf_context **out);

void model_cli_sim_init(model_cli_sim *s);
/* If argv[*i] is --simulate/--imatrix/--mode, consumes it (and its value): returns 1; on a missing
 * value prints an error and returns -1; otherwise 0. */
int model_cli_sim_arg(model_cli_sim *s, int argc, char **argv, int *i);
/* Loads the model (with simulated quantization if asked); prints errors; returns 0 or 1. */
int model_cli_load(const char *path, const model_cli_sim *s, int n_threads, iqf_model **out);
/* Tokenizes text with the model's vocabulary (BOS first if add_bos). malloc'd *out. 0 or 1. */
int model_cli_tokenize(const iqf_model *m, const char *text, size_t len, bool add_bos,
                       int32_t **out, int *n);
/* Writes collected importance data as llama-imatrix does (GGUF, or the legacy .dat when dat);
 * dataset: the text's name recorded in the file. 0, or 1 with the message printed. */
int model_cli_write_imatrix(const iqf_imatrix_data *d, const char *dataset, const char *path, bool dat);
/* The chunks of n_ctx tokens a run evaluates: n_chunks (-1: all), at most what n_tok tokens hold
 * (as iqf_perplexity and iqf_imatrix_collect count them). */
long long model_cli_chunk_count(long long n_tok, long long n_ctx, long long n_chunks);
/* An iqf_eval_progress_fn for the chunked evaluations (perplexity, imatrix): after the first
 * chunk, on a terminal only, llama-perplexity's line "CMD: 12.34 seconds per pass - ETA 5.67
 * minutes" on stderr (the ETA is the whole run's, as llama.cpp prints it). user: the command
 * name (a const char *). Install it only without --quiet. */
void model_cli_eval_progress(void *user, int done, int total, double seconds);
/* Reads a whole file (NUL-terminated); NULL + message on failure. */
char *model_cli_read_text(const char *path, size_t *len);

#endif
