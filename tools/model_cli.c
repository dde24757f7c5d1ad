/* model_cli.c - see model_cli.h. */
#include "model_cli.h"

#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void model_cli_sim_init(model_cli_sim *s) { memset(s, 0, sizeof *s); }

int model_cli_sim_arg(model_cli_sim *s, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char **dst = !strcmp(a, "--simulate") ? &s->type_name : !strcmp(a, "--imatrix") ? &s->imatrix_path : NULL;
    if (!dst) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s: %s needs a value", argv[0], a);
        return -1;
    }
    *dst = argv[++*i];
    return 1;
}

int model_cli_load(const char *path, const model_cli_sim *s, int n_threads, iqf_model **out) {
    char err[1024];
    iqf_model_params p = iqf_model_default_params();
    p.n_threads = n_threads;
    if (s && s->type_name) {
        p.simulate_type = iqf_type_from_name(s->type_name);
        if (p.simulate_type < 0) return cli_error("unknown type '%s' for --simulate", s->type_name);
    }
    if (s && s->imatrix_path) {
        if (!s->type_name) return cli_error("--imatrix is only used with --simulate");
        return cli_error("--imatrix: reading importance matrices is not available in this build yet");
    }
    if (iqf_model_load(path, &p, out, err, sizeof err)) return cli_error("%s", err);
    return 0;
}

int model_cli_tokenize(const iqf_model *m, const char *text, size_t len, bool add_bos, int32_t **out,
                       int *n) {
    const iqf_model_info *h = iqf_model_get_info(m);
    *out = NULL;
    *n = 0;
    (void)text;
    if (len > 0) return cli_error("tokenizing text needs the tokenizer, which is not in this build yet");
    int32_t *t = malloc(sizeof(int32_t));
    if (!t) return cli_error("out of memory");
    if (add_bos && h->bos_id >= 0) t[(*n)++] = h->bos_id;
    *out = t;
    return 0;
}

char *model_cli_read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) { free(buf); buf = NULL; break; }
        buf = nb;
        cap *= 2;
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        cli_error("%s: read error", path);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
