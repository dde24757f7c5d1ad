/* cmd_generate.c - `iqforge generate`: greedy text generation. */
#include "cli.h"

#include "iqforge.h"
#include "model_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f, "usage: iqforge generate -m MODEL [-p PROMPT] [-n N] [-t THREADS] [-c N_CTX]\n"
               "                        [--simulate TYPE [--imatrix FILE] [--mode compat|best]] [--kv-type f16|f32]\n\n"
               "Greedy decoding (argmax at every step) of N tokens (default 128) after BOS and the\n"
               "prompt; the text goes to stdout.\n"
               "--kv-type f16 (default): llama.cpp's default F16 K/V cache and flash-attention roundings;\n"
               "f32: the plain float graph.\n");
}

/* Writes a token's text (llama_token_to_piece, special tokens not rendered); the leading space
 * SentencePiece puts on the first word is dropped, as llama.cpp's detokenizer does. Returns the
 * new at_start. */
static bool emit(const iqf_vocab *v, int32_t id, bool at_start, char *buf, int cap) {
    int32_t n = iqf_token_to_piece(v, id, buf, cap, at_start ? 1 : 0, false);
    if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
    return at_start && n <= 0;
}

int cmd_generate(int argc, char **argv) {
    const char *prompt = NULL;
    long long n_gen = 128;
    model_cli_opts mo;
    model_cli_opts_init(&mo, 0, 1, 1 << 24);
    mo.has_text = mo.has_chunks = false;
    model_cli_sim sim;
    model_cli_sim_init(&sim);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool hv = i + 1 < argc;
        int r;
        if (cli_is_help(s)) { usage(stdout); return 0; }
        if ((r = model_cli_sim_arg(&sim, argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if ((r = model_cli_opts_arg(&mo, "generate", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if (!strcmp(s, "-p") && hv) prompt = argv[++i];
        else if (!strcmp(s, "-n") && hv) {
            if (!cli_parse_int(argv[++i], 0, 1 << 24, &n_gen)) return cli_error("generate: bad -n '%s'", argv[i]), 2;
        } else {
            usage(stderr);
            return cli_error("generate: unexpected argument '%s'", s), 2;
        }
    }
    const char *model_path = mo.model;
    const long long n_threads = mo.n_threads, n_ctx = mo.n_ctx;
    if (!model_path) { usage(stderr); return cli_error("generate: -m MODEL is required"), 2; }

    char err[1024];
    iqf_model *m = NULL;
    if (model_cli_load(model_path, &sim, (int)n_threads, &m)) return 1;
    const iqf_model_info *h = iqf_model_get_info(m);

    int32_t *toks = NULL;
    int n_prompt = 0;
    if (model_cli_tokenize(m, prompt ? prompt : "", prompt ? strlen(prompt) : 0, h->add_bos, &toks, &n_prompt)) {
        iqf_model_free(m);
        return 1;
    }
    if (n_prompt == 0) {
        /* Nothing to start from: BOS (as llama.cpp does for an empty prompt). */
        free(toks);
        toks = malloc(sizeof(int32_t));
        toks[0] = h->bos_id >= 0 ? h->bos_id : 0;
        n_prompt = 1;
    }
    int ctx_size = n_ctx > 0 ? (int)n_ctx : n_prompt + (int)n_gen;
    if (ctx_size < n_prompt + (int)n_gen) {
        free(toks); iqf_model_free(m);
        return cli_error("generate: the context (%d) cannot hold %d prompt + %lld new tokens", ctx_size, n_prompt, n_gen);
    }
    iqf_context *c = NULL;
    if (model_cli_context(m, &mo, ctx_size, &c)) {
        free(toks); iqf_model_free(m);
        return 1;
    }
    float *logits = malloc(sizeof(float) * (size_t)h->n_vocab);
    int status = 0;
    iqf_vocab *vocab = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    if (!vocab || !logits) {
        status = cli_error("%s: %s", model_path, vocab ? "out of memory" : err);
        goto out;
    }
    /* Print the prompt pieces (as llama.cpp echoes the prompt), then the generated ones. */
    bool at_start = true;
    char piece[256];
    for (int i = 0; i < n_prompt; i++) at_start = emit(vocab, toks[i], at_start, piece, sizeof piece);
    if (iqf_decode(c, toks, n_prompt, 0, n_prompt - 1, logits, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    for (int step = 0; step < n_gen; step++) {
        int best = 0;
        for (int v = 1; v < h->n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        if (iqf_vocab_is_eog(vocab, best)) break;
        at_start = emit(vocab, best, at_start, piece, sizeof piece);
        if (step + 1 == n_gen) break;
        int32_t t = best;
        if (iqf_decode(c, &t, 1, n_prompt + step, 0, logits, err, sizeof err)) {
            status = cli_error("%s", err);
            break;
        }
    }
    fflush(stdout);
out:
    iqf_vocab_free(vocab);
    free(logits);
    free(toks);
    iqf_context_free(c);
    iqf_model_free(m);
    return status;
}
