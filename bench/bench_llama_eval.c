/*
 * bench_llama_eval.c - llama-perplexity's figures computed by the oracle's libllama (ggml 0.25.1)
 * on this machine, for judging how closely any evaluator can agree with ../shared/REFERENCE.md.
 *
 *   bench_llama_eval [--f32-kv] [-c N_CTX] [-t THREADS] BASE.gguf TEXT FILE.gguf...
 *
 * The method is llama-perplexity's (tools/perplexity/perplexity.cpp): the text tokenized with
 * BOS, cut into chunks of N_CTX tokens whose first token becomes BOS, one decode per chunk, the
 * second half scored (positions N_CTX/2 .. N_CTX-2 predict the next token). The base model's
 * log-probabilities are kept in llama-perplexity's uint16 form (scale, min log-prob, then one
 * uint16 per token, logits below max - 16 clipped), and each FILE's KL-divergence, PPL and
 * same-top rate are computed against them exactly as `--kl-divergence` does (src/model/kld.c,
 * the rows our own evaluator scores with).
 * Default: llama-perplexity's context settings (F16 KV cache, flash attention auto); --f32-kv:
 * F32 cache, flash attention off. Prints one line per FILE: name, PPL, mean KLD, same top %.
 * Needs the oracle (scripts/install-oracle.sh).
 */
#include "iqforge.h"
#include "llama_infer.h"
#include "model/kld.h"
#include "model/tokenizer.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct base_rows {
    int n_rows, nv; /* nv = n_vocab + 4 uint16 (scale and min log-prob as two floats) */
    uint16_t *lp;
} base_rows;

/* One model over every chunk: rows of logits handed to fn(row, target, user). */
static bool run_model(const char *path, const int32_t *toks, int n_chunks, int C, int bos, int threads, bool f32_kv,
                      void (*fn)(const float *, int, int, void *), void *user) {
    li_run r;
    if (!li_open(&r, path, C, threads, f32_kv)) return false;
    float *rows = malloc(sizeof(float) * (size_t)C * (size_t)r.n_vocab);
    int32_t *chunk = malloc(sizeof(int32_t) * (size_t)C);
    bool ok = rows && chunk;
    const int first = C / 2;
    int row = 0;
    for (int k = 0; ok && k < n_chunks; k++) {
        memcpy(chunk, toks + (size_t)k * C, sizeof(int32_t) * (size_t)C);
        chunk[0] = bos;
        li_clear(&r);
        ok = li_decode(&r, chunk, C, 0, first, rows);
        for (int p = first; ok && p < C - 1; p++, row++)
            fn(rows + (size_t)(p - first) * (size_t)r.n_vocab, toks[(size_t)k * C + p + 1], row, user);
    }
    free(rows);
    free(chunk);
    li_close(&r);
    return ok;
}

static void keep_base(const float *l, int tok, int row, void *user) {
    base_rows *b = user;
    iqf_kld_pack_row(l, b->nv - 4, tok, b->lp + (size_t)row * (size_t)b->nv);
}

typedef struct score {
    const base_rows *b;
    double nll, kld;
    long same, n;
} score;

static void score_row(const float *l, int tok, int row, void *user) {
    score *s = user;
    iqf_kld_row k;
    iqf_kld_score_row(l, s->b->nv - 4, tok, s->b->lp + (size_t)row * (size_t)s->b->nv, &k);
    s->nll += k.nll;
    s->kld += k.kld;
    s->same += k.same_top;
    s->n++;
}

int main(int argc, char **argv) {
    int C = 256, threads = 2, a = 1;
    bool f32_kv = false;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--f32-kv")) f32_kv = true;
        else if (!strcmp(argv[a], "-c") && a + 1 < argc) C = atoi(argv[++a]);
        else if (!strcmp(argv[a], "-t") && a + 1 < argc) threads = atoi(argv[++a]);
        else break;
    }
    if (argc - a < 3 || C < 8) {
        fprintf(stderr, "usage: bench_llama_eval [--f32-kv] [-c N_CTX] [-t THREADS] BASE.gguf TEXT FILE.gguf...\n");
        return 2;
    }
    if (!li_load()) {
        fprintf(stderr, "bench_llama_eval: the oracle's libllama is not installed (scripts/install-oracle.sh)\n");
        return 1;
    }
    const char *base_path = argv[a], *text_path = argv[a + 1];
    char err[512];
    iqf_gguf *g = iqf_gguf_open(base_path, err, sizeof err);
    iqf_vocab *voc = g ? iqf_vocab_load(g, err, sizeof err) : NULL;
    size_t len = 0;
    char *text = read_file(text_path, &len);
    if (!g || !voc || !text) {
        fprintf(stderr, "bench_llama_eval: %s\n", !text ? "cannot read the text" : err);
        return 1;
    }
    int32_t *toks = malloc(sizeof(int32_t) * (len + 8));
    const int n = iqf_tokenize(voc, text, len, true, toks, (int32_t)len + 8);
    const int n_chunks = n / C;
    base_rows b = { n_chunks * (C / 2 - 1), iqf_vocab_n_tokens(voc) + 4, NULL };
    b.lp = malloc(sizeof(uint16_t) * (size_t)b.n_rows * (size_t)b.nv);
    if (!b.lp || n_chunks < 1 || !run_model(base_path, toks, n_chunks, C, iqf_vocab_bos(voc), threads, f32_kv, keep_base, &b)) {
        fprintf(stderr, "bench_llama_eval: base model failed\n");
        return 1;
    }
    printf("# libllama, %d chunks of %d, %s\n# file\tPPL\tmean KLD\tsame top %%\n", n_chunks, C,
           f32_kv ? "F32 KV, no flash attention" : "llama-perplexity defaults (F16 KV, flash attention auto)");
    int rc = 0;
    for (int i = a + 2; i < argc; i++) {
        score s = { &b, 0, 0, 0, 0 };
        if (!run_model(argv[i], toks, n_chunks, C, iqf_vocab_bos(voc), threads, f32_kv, score_row, &s) || s.n != b.n_rows) {
            fprintf(stderr, "%s: libllama failed\n", argv[i]);
            rc = 1;
            continue;
        }
        printf("%s\t%.4f\t%.6f\t%.3f\n", argv[i], exp(s.nll / (double)s.n), s.kld / (double)s.n,
               100.0 * (double)s.same / (double)s.n);
        fflush(stdout);
    }
    free(b.lp);
    free(toks);
    free(text);
    iqf_vocab_free(voc);
    iqf_gguf_close(g);
    return rc;
}
