/*
 * cli.h - shared pieces of the iqforge command-line tool.
 * Each subcommand is `int cmd_NAME(int argc, char **argv)` (argv[0] is the subcommand name) and
 * returns the process exit status: 0 success, 1 error (message already on stderr), 2 usage.
 *
 * The commands use the library through include/iqforge.h only (CMakeLists.txt gives tools/ no
 * include path into src/ but src/ladder), with one exception that stays internal on purpose (the
 * CLI links the static library, which keeps it):
 *  - cmd_ladder.c and ladder_eval.c: src/ladder/ladder.h (the ladder's rung records, alarm and
 *    report writers are the CLI's own top layer; their structs are report rows that change with
 *    the reports, not an ABI to freeze). Moving src/ladder into tools/ is the next step.
 * The atomic output file is public (iqf_outfile_*); the progress line (progress.c) and the
 * whole-file text read (model_cli.c) are the CLI's own.
 * Everything an embedding program needs for the same jobs is public: quantization, the
 * tokenizer, evaluation, importance matrices and Hessians (save/load), the signal cleanup.
 */
#ifndef IQF_CLI_H
#define IQF_CLI_H

#include <stdbool.h>
#include <stdint.h>

int cmd_quantize_raw(int argc, char **argv);
int cmd_dequantize_raw(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_imatrix(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_ladder(int argc, char **argv);

/* Prints "iqforge: " + message + newline to stderr; returns 1. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a whole decimal integer in [lo, hi]; false if malformed or out of range. */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
/* True if argv[i] is "-h" or "--help". */
bool cli_is_help(const char *arg);

#endif
