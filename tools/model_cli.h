/* model_cli.h - pieces shared by the inference commands (perplexity, imatrix, generate). */
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

void model_cli_sim_init(model_cli_sim *s);
/* If argv[*i] is --simulate/--imatrix/--mode, consumes it (and its value): returns 1; on a missing
 * value prints an error and returns -1; otherwise 0. */
int model_cli_sim_arg(model_cli_sim *s, int argc, char **argv, int *i);
/* Loads the model (with simulated quantization if asked); prints errors; returns 0 or 1. */
int model_cli_load(const char *path, const model_cli_sim *s, int n_threads, iqf_model **out);
/* Tokenizes text with the model's vocabulary (BOS first if add_bos). malloc'd *out. 0 or 1. */
int model_cli_tokenize(const iqf_model *m, const char *text, size_t len, bool add_bos,
                       int32_t **out, int *n);
/* Reads a whole file (NUL-terminated); NULL + message on failure. */
char *model_cli_read_text(const char *path, size_t *len);

#endif
