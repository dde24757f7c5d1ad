/* model_cli.c - see model_cli.h. */
#include "model_cli.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void model_cli_opts_init(model_cli_opts *o, long long n_ctx, long long c_lo, long long c_hi) {
    memset(o, 0, sizeof *o);
    o->n_ctx = n_ctx;
    o->n_chunks = -1;
    o->c_lo = c_lo;
    o->c_hi = c_hi;
    o->has_text = o->has_chunks = true;
    o->kv_f16 = true; /* llama.cpp tools' defaults: F16 cache, CPU flash attention */
}

int model_cli_context(const iqf_model *m, const model_cli_opts *o, int n_ctx, iqf_context **out) {
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = (int)o->n_threads;
    p.kv_f16 = o->kv_f16;
    char err[1024];
    if (iqf_context_new_ex(m, &p, out, err, sizeof err)) return cli_error("%s", err);
    return 0;
}

int model_cli_opts_arg(model_cli_opts *o, const char *cmd, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const bool m = !strcmp(a, "-m"), f = o->has_text && !strcmp(a, "-f"), c = !strcmp(a, "-c"),
               ch = o->has_chunks && !strcmp(a, "--chunks"), t = !strcmp(a, "-t"), kv = !strcmp(a, "--kv-type");
    if (!m && !f && !c && !ch && !t && !kv) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s: %s needs a value", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (kv) {
        if (strcmp(v, "f16") && strcmp(v, "f32")) {
            cli_error("%s: --kv-type must be f16 or f32, not '%s'", cmd, v);
            return -1;
        }
        o->kv_f16 = !strcmp(v, "f16");
    } else if (m) o->model = v;
    else if (f) o->text = v;
    else {
        long long *dst = c ? &o->n_ctx : ch ? &o->n_chunks : &o->n_threads;
        long long lo = c ? o->c_lo : ch ? -1 : 0, hi = c ? o->c_hi : ch ? (1LL << 30) : 4096;
        if (!cli_parse_int(v, lo, hi, dst) || (ch && *dst == 0)) {
            cli_error("%s: bad %s '%s'", cmd, a, v);
            return -1;
        }
    }
    return 1;
}

int model_cli_write_imatrix(const iqf_imatrix_data *d, const char *dataset, const char *path, bool dat) {
    char err[1024];
    return iqf_imatrix_data_save(d, path, dat, dataset, err, sizeof err) ? cli_error("%s", err) : 0;
}

void model_cli_sim_init(model_cli_sim *s) { memset(s, 0, sizeof *s); }

int model_cli_sim_arg(model_cli_sim *s, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **dst = !strcmp(a, "--simulate") ? &s->type_name
                     : !strcmp(a, "--imatrix")  ? &s->imatrix_path
                     : !strcmp(a, "--mode")     ? &s->mode_name
                                                : NULL;
    if (!dst) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s: %s needs a value", argv[0], a);
        return -1;
    }
    *dst = argv[++*i];
    return 1;
}

static const float *im_lookup(void *user, const char *name, int64_t n) {
    int64_t en = 0;
    const float *v = iqf_imatrix_file_find(user, name, &en);
    if (!v) {
        fprintf(stderr, "iqforge: note: no importance data for %s\n", name);
        return NULL;
    }
    if (en != n) {
        fprintf(stderr, "iqforge: warning: importance data for %s has %lld values, expected %lld; not used\n",
                name, (long long)en, (long long)n);
        return NULL;
    }
    return v;
}

int model_cli_load(const char *path, const model_cli_sim *s, int n_threads, iqf_model **out) {
    char err[1024];
    iqf_model_params p = iqf_model_default_params();
    p.n_threads = n_threads;
    if (s && s->type_name) {
        p.simulate_type = iqf_type_from_name(s->type_name);
        if (p.simulate_type < 0) return cli_error("unknown type '%s' for --simulate", s->type_name);
    }
    if (s && s->mode_name) {
        if (!s->type_name) return cli_error("--mode is only used with --simulate");
        int mode = iqf_mode_from_name(s->mode_name);
        if (mode < 0) return cli_error("--mode: unknown mode '%s' (available: compat, best)", s->mode_name);
        p.simulate_mode = (iqf_mode)mode;
    }
    iqf_imatrix_file *im = NULL;
    if (s && s->imatrix_path) {
        if (!s->type_name) return cli_error("--imatrix is only used with --simulate");
        if (iqf_imatrix_file_load(s->imatrix_path, &im, err, sizeof err)) return cli_error("%s", err);
        p.imatrix = im_lookup;
        p.imatrix_user = im;
    }
    iqf_status st;
    if (cli_is_dir(path)) { /* a Hugging Face checkpoint, converted in memory as `convert` would write it */
        iqf_gguf *g = iqf_convert_open(path, IQF_CONVERT_AUTO, err, sizeof err);
        st = g ? iqf_model_load_gguf(g, true, &p, out, err, sizeof err) : IQF_E_FORMAT;
    } else
        st = iqf_model_load(path, &p, out, err, sizeof err);
    iqf_imatrix_file_free(im);
    if (st) return cli_error("%s", err);
    return 0;
}

int model_cli_tokenize(const iqf_model *m, const char *text, size_t len, bool add_bos, int32_t **out,
                       int *n) {
    char err[512];
    *out = NULL;
    *n = 0;
    if (len > (size_t)INT32_MAX / 2) return cli_error("text too long to tokenize");
    iqf_vocab *v = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    if (!v) return cli_error("%s: %s", iqf_gguf_path(iqf_model_gguf(m)), err);
    int32_t cap = (int32_t)len + 4;
    int32_t *t = malloc(sizeof(int32_t) * (size_t)cap);
    int32_t r = t ? iqf_tokenize(v, text, len, add_bos, t, cap) : IQF_TOKENIZE_ERROR;
    if (r < 0 && r != IQF_TOKENIZE_ERROR) {
        cap = -r;
        free(t);
        t = malloc(sizeof(int32_t) * (size_t)cap);
        r = t ? iqf_tokenize(v, text, len, add_bos, t, cap) : IQF_TOKENIZE_ERROR;
    }
    iqf_vocab_free(v);
    if (r < 0) {
        free(t);
        return cli_error("tokenization failed");
    }
    *out = t;
    *n = r;
    return 0;
}

long long model_cli_chunk_count(long long n_tok, long long n_ctx, long long n_chunks) {
    const long long avail = n_tok / n_ctx;
    return n_chunks >= 0 && n_chunks < avail ? n_chunks : avail;
}

void model_cli_eval_progress(void *user, int done, int total, double seconds) {
    if (done != 1 || !isatty(2)) return;
    int t = (int)(seconds * total);
    fprintf(stderr, "%s: %.2f seconds per pass - ETA ", (const char *)user, seconds);
    if (t >= 3600) fprintf(stderr, "%d hours ", t / 3600), t %= 3600;
    fprintf(stderr, "%.2f minutes\n", t / 60.0);
}

/* A whole-file read is a few lines of stdio: the CLI's own, not library API (the library reads
 * its inputs through its parsers, which map or stream them). */
char *model_cli_read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        cli_error(buf ? "%s: read error" : "%s: out of memory", path);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
