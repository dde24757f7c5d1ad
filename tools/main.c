/* main.c - the iqforge command-line entry point: dispatches to the subcommands (cmd_*.c). */
#include "cli.h"

#include "iqforge.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    { "quantize", cmd_quantize, "quantize a GGUF model (llama-quantize compatible)" },
    { "convert", cmd_convert, "convert a Hugging Face checkpoint to GGUF (as convert_hf_to_gguf.py)" },
    { "inspect", cmd_inspect, "show a GGUF file's metadata and tensors" },
    { "quantize-raw", cmd_quantize_raw, "quantize raw float32 rows to raw blocks" },
    { "dequantize-raw", cmd_dequantize_raw, "decode raw blocks to float32 rows" },
    { "perplexity", cmd_perplexity, "perplexity and KL-divergence of a model on a text" },
    { "imatrix", cmd_imatrix, "compute an importance matrix from a text" },
    { "generate", cmd_generate, "greedy text generation" },
    { "ladder", cmd_ladder, "quantize to every type, measure each rung, raise the alarm on a broken one" },
};

bool cli_is_dir(const char *path) {
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("iqforge: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out) {
    if (!s || !*s) return false;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_is_help(const char *arg) { return !strcmp(arg, "-h") || !strcmp(arg, "--help"); }

static void usage(FILE *f) {
    fprintf(f, "iqforge %s - quantize LLM weights to llama.cpp's GGUF formats\n\n"
               "usage: iqforge COMMAND [options]   (iqforge COMMAND --help for details)\n\ncommands:\n",
            IQF_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].summary);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("iqforge %s\n", IQF_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    cli_error("unknown command '%s' (try iqforge --help)", argv[1]);
    return 2;
}
