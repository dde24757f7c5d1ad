/*
 * test_model.c - the inference engine on stories260K (tests/data/stories260K): loading, greedy
 * generation byte for byte against llama.cpp's output, batch vs incremental decoding, the scalar
 * path against the SIMD one, and load errors (non-llama architecture, missing tensor).
 */
#include "iqforge.h"
#include "model/tokenizer.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "tests/data/stories260K/stories260K-f32.gguf"

static char *greedy(const iqf_model *m, int n_gen, int n_threads) {
    const iqf_model_info *h = iqf_model_get_info(m);
    iqf_context *c = NULL;
    char err[512];
    if (iqf_context_new(m, n_gen + 1, n_threads, &c, err, sizeof err)) return NULL;
    float *logits = malloc(sizeof(float) * (size_t)h->n_vocab);
    char *out = calloc(1, (size_t)n_gen * 64 + 1);
    size_t len = 0;
    iqf_vocab *vocab = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    if (!vocab) {
        free(logits);
        free(out);
        iqf_context_free(c);
        return NULL;
    }
    int32_t tok = h->bos_id;
    for (int step = 0; step < n_gen; step++) {
        if (iqf_decode(c, &tok, 1, step, 0, logits, err, sizeof err)) break;
        int best = 0;
        for (int v = 1; v < h->n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        char piece[64];
        /* as llama.cpp's detokenizer: special tokens not rendered, the first word's space dropped */
        int32_t n = iqf_token_to_piece(vocab, best, piece, (int32_t)sizeof piece, len == 0 ? 1 : 0, false);
        if (n > 0) {
            memcpy(out + len, piece, (size_t)n);
            len += (size_t)n;
        }
        tok = best;
    }
    iqf_vocab_free(vocab);
    free(logits);
    iqf_context_free(c);
    return out;
}

/* Copies the model file with `from` replaced by `to` (same length) at its first occurrence
 * (fl bytes). */
static bool patched_copy_n(const char *dst, const char *from, const char *to, size_t fl) {
    size_t n;
    char *buf = read_file(src_path(MODEL), &n);
    if (!buf) return false;
    bool done = false;
    for (size_t i = 0; i + fl <= n && !done; i++)
        if (!memcmp(buf + i, from, fl)) {
            memcpy(buf + i, to, fl);
            done = true;
        }
    bool ok = done && write_file(dst, buf, n);
    free(buf);
    return ok;
}

static bool patched_copy(const char *dst, const char *from, const char *to) {
    return patched_copy_n(dst, from, to, strlen(from));
}

int main(void) {
    char err[1024];
    iqf_model *m = NULL;
    iqf_status st = iqf_model_load(src_path(MODEL), NULL, &m, err, sizeof err);
    CHECK(st == IQF_OK, "load: %s", err);
    if (st) return test_finish("test_model");
    const iqf_model_info *h = iqf_model_get_info(m);
    CHECK(h->n_embd == 64 && h->n_layer == 5 && h->n_head == 8 && h->n_head_kv == 4 &&
          h->n_ff == 172 && h->n_vocab == 512 && h->bos_id == 1 && h->add_bos && !h->tied_output && h->n_rot == 8,
          "hparams %d %d %d %d %d %d", h->n_embd, h->n_layer, h->n_head, h->n_head_kv, h->n_ff, h->n_vocab);

    /* Greedy generation, 200 steps from BOS, vs llama.cpp. */
    size_t exp_len;
    char *expected = read_file(src_path("tests/data/stories260K/expected-greedy-200.txt"), &exp_len);
    CHECK(expected != NULL, "expected-greedy-200.txt");
    for (int nt = 1; nt <= 2 && expected; nt++) {
        char *got = greedy(m, 200, nt);
        CHECK(got && strlen(got) == exp_len && !memcmp(got, expected, exp_len),
              "greedy output differs (%d threads):\n%s", nt, got ? got : "(null)");
        free(got);
    }
    free(expected);

    /* One batch of 48 tokens vs the same tokens one at a time; scalar kernels vs SIMD. */
    {
        enum { N = 48 };
        int32_t toks[N];
        tu_rng r = { 7 };
        toks[0] = h->bos_id;
        for (int i = 1; i < N; i++) toks[i] = (int32_t)(tu_next(&r) % (uint64_t)h->n_vocab);
        float *a = malloc(sizeof(float) * N * (size_t)h->n_vocab);
        float *b = malloc(sizeof(float) * N * (size_t)h->n_vocab);
        float *s = malloc(sizeof(float) * N * (size_t)h->n_vocab);
        iqf_context *c = NULL, *cs = NULL;
        CHECK(iqf_context_new(m, N, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(iqf_decode(c, toks, N, 0, 0, a, err, sizeof err) == IQF_OK, "%s", err);
        iqf_context_reset(c);
        for (int i = 0; i < N; i++)
            CHECK(iqf_decode(c, toks + i, 1, i, 0, b + (size_t)i * h->n_vocab, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(tu_context_simd(m, N, 1, IQF_SIMD_SCALAR, &cs, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(iqf_decode(cs, toks, N, 0, N / 2, s + (size_t)(N / 2) * h->n_vocab, err, sizeof err) == IQF_OK, "%s", err);
        double md = 0, ms = 0;
        for (size_t i = 0; i < (size_t)N * h->n_vocab; i++) md = fmax(md, fabs(a[i] - b[i]));
        for (size_t i = (size_t)(N / 2) * h->n_vocab; i < (size_t)N * h->n_vocab; i++) ms = fmax(ms, fabs(a[i] - s[i]));
        CHECK(md < 1e-4, "batch vs incremental logits differ by %g", md);
        CHECK(ms < 1e-4, "scalar vs SIMD logits differ by %g", ms);
        /* The NEON level (SSE here, NEON on arm64) adds the scalar path's partial sums as lanes:
         * the same logits bit for bit, with 2 threads against the scalar run's 1. */
        iqf_context *cn = NULL;
        CHECK(tu_context_simd(m, N, 2, IQF_SIMD_NEON, &cn, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(cn && iqf_decode(cn, toks, N, 0, N / 2, b + (size_t)(N / 2) * h->n_vocab, err, sizeof err) == IQF_OK,
              "%s", err);
        CHECK(!memcmp(b + (size_t)(N / 2) * h->n_vocab, s + (size_t)(N / 2) * h->n_vocab,
                      sizeof(float) * (size_t)(N / 2) * h->n_vocab),
              "NEON-level logits differ from the scalar path's");
        iqf_context_free(cn);
        /* Errors: positions beyond the context, a token out of range. */
        CHECK(iqf_decode(c, toks, 2, N - 1, 0, NULL, err, sizeof err) == IQF_E_INVALID_ARG, "overflow");
        int32_t bad = h->n_vocab;
        CHECK(iqf_decode(c, &bad, 1, 0, 0, NULL, err, sizeof err) == IQF_E_INVALID_ARG && strstr(err, "token id"), "bad token: %s", err);
        iqf_context_free(c);
        iqf_context_free(cs);
        free(a); free(b); free(s);
    }
    /* A call longer than the 512-token step is split: same logits as 100-token calls. */
    {
        enum { N = 600, V = 512 };
        int32_t *toks = malloc(sizeof(int32_t) * N);
        tu_rng r = { 11 };
        for (int i = 0; i < N; i++) toks[i] = (int32_t)(tu_next(&r) % V);
        float *a = malloc(sizeof(float) * 100 * V), *b = malloc(sizeof(float) * 100 * V);
        iqf_context *c = NULL;
        CHECK(iqf_context_new(m, N, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(iqf_decode(c, toks, N, 0, N - 100, a, err, sizeof err) == IQF_OK, "%s", err);
        iqf_context_reset(c);
        for (int s = 0; s < N; s += 100)
            CHECK(iqf_decode(c, toks + s, 100, s, 0, b, err, sizeof err) == IQF_OK, "%s", err);
        double md = 0;
        for (int i = 0; i < 100 * V; i++) md = fmax(md, fabs(a[i] - b[i]));
        CHECK(md < 1e-4, "split decode differs by %g", md);
        iqf_context_free(c);
        free(toks); free(a); free(b);
    }
    iqf_model_free(m);

    /* Load errors. */
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/tmp/iqf_test_model_%d.gguf", (int)getpid());
    CHECK(patched_copy(tmp, "llama", "bloom"), "patch");  /* general.architecture's value */
    m = NULL;
    st = iqf_model_load(tmp, NULL, &m, err, sizeof err);
    CHECK(st == IQF_E_FORMAT && strstr(err, "unsupported architecture 'bloom'"), "arch: %d %s", st, err);
    iqf_model_free(m);
    CHECK(patched_copy(tmp, "blk.3.ffn_up.weight", "blk.3.ffn_xx.weight"), "patch");
    m = NULL;
    st = iqf_model_load(tmp, NULL, &m, err, sizeof err);
    CHECK(st == IQF_E_FORMAT && strstr(err, "missing tensor blk.3.ffn_up.weight"), "tensor: %d %s", st, err);
    iqf_model_free(m);
    /* Tied embeddings: without output.weight the output projection is token_embd. */
    /* the tensor name with its 8-byte length prefix (13), so blk.N.attn_output.weight is not hit */
    CHECK(patched_copy_n(tmp, "\x0d\0\0\0\0\0\0\0output.weight", "\x0d\0\0\0\0\0\0\0outpux.weight", 21), "patch");
    m = NULL;
    st = iqf_model_load(tmp, NULL, &m, err, sizeof err);
    CHECK(st == IQF_OK && m && iqf_model_get_info(m)->tied_output, "tied: %d %s", st, err);
    if (m) {
        iqf_context *c = NULL;
        float *l = malloc(sizeof(float) * 512);
        int32_t bos = 1;
        CHECK(iqf_context_new(m, 4, 1, &c, err, sizeof err) == IQF_OK &&
              iqf_decode(c, &bos, 1, 0, 0, l, err, sizeof err) == IQF_OK && isfinite(l[0]) && isfinite(l[511]),
              "tied decode: %s", err);
        free(l);
        iqf_context_free(c);
        iqf_model_free(m);
    }
    remove(tmp);
    st = iqf_model_load("/nonexistent/x.gguf", NULL, &m, err, sizeof err);
    CHECK(st != IQF_OK && m == NULL, "missing file");
    return test_finish("test_model");
}
