/*
 * llama_output.c - reads what a stock llama-perplexity prints (any build: CPU, CUDA, Metal) into
 * a ladder rung, for `iqforge ladder --evaluator llama-perplexity`. The text is another program's
 * output and is parsed as hostile: every number must be finite and every line the ladder needs
 * must be there, or the parse fails with the name of the missing line.
 *
 * The lines (llama.cpp tools/perplexity/perplexity.cpp, the version bundled with ggml 0.25.1;
 * its log lines may carry a timestamp prefix):
 *   perplexity:   "Final estimate: PPL = %.4lf +/- %.5lf"
 *   kl_divergence: "kl_divergence: computing over %d chunks, ..."
 *                 "Mean PPL(Q)                   : %10.6lf ± %10.6lf"
 *                 "Mean PPL(Q)/PPL(base)         : %10.6lf ± %10.6lf"
 *                 "Mean    KLD: %10.6lf ± %10.6lf"
 *                 "Maximum KLD: %10.6f"
 *                 "99.0%   KLD: %10.6f"
 *                 "Same top p: %6.3lf ± %5.3lf %"
 */
#include "ladder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The text after the last occurrence of `label`, or NULL. A label may follow a log prefix
 * (llama.cpp's "0.09.685.166 I " timestamps). */
static const char *after_label(const char *text, const char *label) {
    const char *hit = NULL;
    for (const char *s = strstr(text, label); s; s = strstr(s + 1, label)) hit = s + strlen(label);
    return hit;
}

/* Reads one finite number at *p (after blanks and an optional ':' or '='), advancing *p. */
static bool read_num(const char **p, double *v) {
    const char *s = *p;
    while (*s == ' ' || *s == '\t' || *s == ':' || *s == '=') s++;
    char *end;
    double x = strtod(s, &end);
    if (end == s || !isfinite(x)) return false;
    *v = x;
    *p = end;
    return true;
}

/* "v ± e" (UTF-8 plus-minus) or "v +/- e". */
static bool read_pm(const char **p, double *v, double *e) {
    if (!read_num(p, v)) return false;
    const char *s = *p;
    while (*s == ' ') s++;
    if (!strncmp(s, "\xc2\xb1", 2)) s += 2;
    else if (!strncmp(s, "+/-", 3)) s += 3;
    else return false;
    *p = s;
    return read_num(p, e);
}

int iqf_ladder_parse_llama_base(const char *text, double *ppl, double *ppl_err, char *err, size_t errlen) {
    const char *p = after_label(text, "Final estimate: PPL");
    if (!p || !read_pm(&p, ppl, ppl_err)) {
        snprintf(err, errlen, "no 'Final estimate: PPL = X +/- Y' line in llama-perplexity's output");
        return -1;
    }
    return 0;
}

int iqf_ladder_parse_llama_kld(const char *text, ladder_rung *r, char *err, size_t errlen) {
    static const char *const labels[] = { "Mean PPL(Q)                   :", "Mean PPL(Q)/PPL(base)         :",
                                          "Mean    KLD:", "Maximum KLD:", "99.0%   KLD:", "Same top p:" };
    double v[6] = { 0 }, e[6] = { 0 };
    for (int i = 0; i < 6; i++) {
        const char *p = after_label(text, labels[i]);
        bool pm = i != 3 && i != 4;
        if (!p || !(pm ? read_pm(&p, &v[i], &e[i]) : read_num(&p, &v[i]))) {
            snprintf(err, errlen, "no '%s' line with %s in llama-perplexity's output", labels[i],
                     pm ? "a value and its error" : "a value");
            return -1;
        }
    }
    double chunks;
    const char *p = after_label(text, "kl_divergence: computing over");
    if (!p || !read_num(&p, &chunks) || chunks < 1 || chunks > 1e9) {
        snprintf(err, errlen, "no 'kl_divergence: computing over N chunks' line in llama-perplexity's output");
        return -1;
    }
    r->n_chunks = (int)chunks;
    r->ppl = v[0], r->ppl_err = e[0];
    r->ppl_ratio = v[1], r->ppl_ratio_err = e[1];
    r->kld = v[2], r->kld_err = e[2];
    r->kld_max = v[3];
    r->kld_p99 = v[4];
    r->same_top = v[5] / 100, r->same_top_err = e[5] / 100;
    return 0;
}
