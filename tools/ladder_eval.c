/*
 * ladder_eval.c - the ladder's external evaluator: a stock llama-perplexity (any build: CPU, CUDA,
 * Metal) run as a child process, once with --kl-divergence-base for the base model and once per
 * rung with --kl-divergence, its output kept in DIR/logs/ and parsed by src/ladder/llama_output.c.
 * This is how a ladder scores an architecture the built-in engine lacks, or a model too large
 * for this machine's CPU.
 */
#include "ladder_eval.h"

#include "cli.h"
#include "ladder.h" /* src/ladder: the one internal header tools/ may include (cli.h says why) */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LLAMA_PPL "llama-perplexity"

/* An executable regular file? */
static bool is_exe(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

int ladder_eval_resolve(const char *spec, char *path, size_t n) {
    size_t k = strlen(LLAMA_PPL);
    if (strncmp(spec, LLAMA_PPL, k) || (spec[k] && spec[k] != '='))
        return cli_error("ladder: --evaluator: unknown evaluator '%s' (available: iqforge, %s[=PATH])", spec, LLAMA_PPL), 2;
    const char *want = spec[k] == '=' ? spec + k + 1 : LLAMA_PPL;
    if (!*want) return cli_error("ladder: --evaluator %s=: empty path", LLAMA_PPL), 2;
    if (strchr(want, '/')) {
        if (!is_exe(want)) return cli_error("%s: not an executable file", want), 2;
        snprintf(path, n, "%s", want);
        return 0;
    }
    const char *env = getenv("PATH");
    char dirs[8192];
    snprintf(dirs, sizeof dirs, "%s", env ? env : "/usr/local/bin:/usr/bin:/bin");
    for (char *sv = NULL, *d = strtok_r(dirs, ":", &sv); d; d = strtok_r(NULL, ":", &sv)) {
        char cand[4096];
        if (snprintf(cand, sizeof cand, "%s/%s", *d ? d : ".", want) >= (int)sizeof cand) continue;
        if (is_exe(cand)) {
            snprintf(path, n, "%s", cand);
            return 0;
        }
    }
    return cli_error("ladder: --evaluator: '%s' not found on PATH (give it as %s=PATH)", want, LLAMA_PPL), 2;
}

/* Runs argv with stdout and stderr into log_path; returns the log's text (malloc'd) or NULL
 * with err set (a failed start, a non-zero exit or a signal). */
static char *run_logged(char *const argv[], const char *log_path, char *err, size_t errlen) {
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", log_path, strerror(errno));
        return NULL;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start %s: %s", argv[0], strerror(errno));
        close(fd);
        return NULL;
    }
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0) dup2(in, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(argv[0], argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(err, errlen, "waiting for %s: %s", argv[0], strerror(errno));
            return NULL;
        }
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        if (WIFEXITED(status))
            snprintf(err, errlen, "%s exited with status %d (its output: %s)", argv[0], WEXITSTATUS(status), log_path);
        else
            snprintf(err, errlen, "%s was killed by signal %d (its output: %s)", argv[0], WTERMSIG(status), log_path);
        return NULL;
    }
    FILE *f = fopen(log_path, "rb");
    char *text = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        if (sz >= 0 && sz < (1L << 30) && fseek(f, 0, SEEK_SET) == 0 && (text = malloc((size_t)sz + 1))) {
            size_t got = fread(text, 1, (size_t)sz, f);
            text[got] = 0;
        }
    }
    if (f) fclose(f);
    if (!text) snprintf(err, errlen, "%s: cannot read back %s's output", log_path, argv[0]);
    return text;
}

/* The common arguments: threads, context, and the K/V cache the built-in engine's --kv-type
 * names (f16: llama.cpp's defaults; f32: an F32 cache without flash attention). */
static int common_args(const ladder_eval_args *a, char **v, int n, char (*num)[24]) {
    snprintf(num[0], sizeof num[0], "%d", a->n_ctx);
    snprintf(num[1], sizeof num[1], "%d", a->n_threads);
    v[n++] = "-c", v[n++] = num[0];
    v[n++] = "-t", v[n++] = num[1];
    if (!a->kv_f16) v[n++] = "-ctk", v[n++] = "f32", v[n++] = "-ctv", v[n++] = "f32", v[n++] = "-fa", v[n++] = "off";
    return n;
}

/* Runs the evaluator and parses its output with parse(text, out). llama.cpp's tools log through a
 * worker thread that the process does not wait for at exit (common/log.cpp: "this design may
 * cause logs to be lost if not flushed before the program exits"), so on a loaded machine a run
 * that succeeded can lose its closing statistics: such a run is repeated, up to 3 tries. */
typedef int (*parse_fn)(const char *text, void *out, char *err, size_t errlen);

static int run_parsed(char *const argv[], const char *log_path, parse_fn parse, void *out, char *err, size_t errlen) {
    int rc = -1;
    for (int attempt = 0; attempt < 3 && rc; attempt++) {
        char *text = run_logged(argv, log_path, err, errlen);
        if (!text) return -1;
        rc = parse(text, out, err, errlen);
        free(text);
    }
    return rc;
}

typedef struct base_out { double *ppl, *ppl_err; } base_out;

static int parse_base(const char *text, void *out, char *err, size_t errlen) {
    base_out *b = out;
    return iqf_ladder_parse_llama_base(text, b->ppl, b->ppl_err, err, errlen);
}

static int parse_rung(const char *text, void *out, char *err, size_t errlen) {
    return iqf_ladder_parse_llama_kld(text, out, err, errlen);
}

int ladder_eval_base(const ladder_eval_args *a, const char *text_path, int n_chunks, double *ppl, double *ppl_err,
                     char *err, size_t errlen) {
    char *v[32], num[3][24];
    int n = 0;
    v[n++] = (char *)a->tool;
    v[n++] = "-m", v[n++] = (char *)a->model;
    v[n++] = "-f", v[n++] = (char *)text_path;
    n = common_args(a, v, n, num);
    if (n_chunks > 0) {
        snprintf(num[2], sizeof num[2], "%d", n_chunks);
        v[n++] = "--chunks", v[n++] = num[2];
    }
    v[n++] = "--kl-divergence-base", v[n++] = (char *)a->base_kld;
    v[n] = NULL;
    base_out o = { ppl, ppl_err };
    return run_parsed(v, a->log_path, parse_base, &o, err, errlen);
}

int ladder_eval_rung(const ladder_eval_args *a, ladder_rung *r, char *err, size_t errlen) {
    char *v[32], num[3][24];
    int n = 0;
    v[n++] = (char *)a->tool;
    v[n++] = "-m", v[n++] = (char *)a->model;
    n = common_args(a, v, n, num);
    v[n++] = "--kl-divergence-base", v[n++] = (char *)a->base_kld;
    v[n++] = "--kl-divergence";
    v[n] = NULL;
    return run_parsed(v, a->log_path, parse_rung, r, err, errlen);
}
