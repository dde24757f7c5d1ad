/* cmd_perplexity.c - `iqforge perplexity`: perplexity and KL-divergence (llama-perplexity's method). */
#include "cli.h"

#include "iqforge.h"
#include "model_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge perplexity -m MODEL -f TEXT [-c N_CTX] [--chunks N] [-t THREADS]\n"
            "                          [--kld-base OUT.kld | --kld BASE.kld]\n"
            "                          [--simulate TYPE [--imatrix FILE] [--mode compat|best]] [--kv-type f16|f32]\n"
            "                          [--quiet]\n\n"
            "Perplexity over chunks of N_CTX tokens (default 512), scoring the second half of each\n"
            "chunk, exactly as llama-perplexity. --kld-base saves the model's log-probabilities\n"
            "(llama-perplexity's --kl-divergence-base format); --kld compares against such a file\n"
            "(the text is then taken from the file and -f is not needed). --simulate quantizes and\n"
            "dequantizes every blk.* weight matrix in memory (rows of 256, imatrix tiled).\n"
            "--kv-type f16 (default) evaluates as llama.cpp's tools do by default (F16 K/V cache,\n"
            "the roundings of ggml's CPU flash attention); f32 is the plain float graph.\n"
            "--quiet: only the results (no per-chunk values, no notes on stderr, no ETA line; the\n"
            "ETA line is shown on a terminal only).\n");
}

int cmd_perplexity(int argc, char **argv) {
    const char *kld_base = NULL, *kld = NULL;
    bool quiet = false;
    model_cli_opts mo;
    model_cli_opts_init(&mo, 512, 4, 1 << 20);
    model_cli_sim sim;
    model_cli_sim_init(&sim);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool hv = i + 1 < argc;
        int r;
        if (cli_is_help(s)) { usage(stdout); return 0; }
        if ((r = model_cli_sim_arg(&sim, argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if ((r = model_cli_opts_arg(&mo, "perplexity", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if (!strcmp(s, "--quiet")) quiet = true;
        else if (!strcmp(s, "--kld-base") && hv) kld_base = argv[++i];
        else if (!strcmp(s, "--kld") && hv) kld = argv[++i];
        else {
            usage(stderr);
            return cli_error("perplexity: unexpected argument '%s'", s), 2;
        }
    }
    const char *model_path = mo.model, *text_path = mo.text;
    long long n_ctx = mo.n_ctx, n_chunks = mo.n_chunks, n_threads = mo.n_threads;
    if (!model_path) { usage(stderr); return cli_error("perplexity: -m MODEL is required"), 2; }
    if (!text_path && !kld) { usage(stderr); return cli_error("perplexity: -f TEXT is required"), 2; }
    if (kld && kld_base) return cli_error("perplexity: --kld and --kld-base exclude each other"), 2;

    if (kld_base) iqf_outfile_install_signal_cleanup("iqforge perplexity");
    char err[1024];
    iqf_model *m = NULL;
    if (model_cli_load(model_path, &sim, (int)n_threads, &m)) return 1;
    int32_t *toks = NULL;
    int n_tok = 0;
    int status = 0;
    iqf_context *c = NULL;
    if (!kld) {
        size_t len;
        char *text = model_cli_read_text(text_path, &len);
        if (!text) { iqf_model_free(m); return 1; }
        int r = model_cli_tokenize(m, text, len, true, &toks, &n_tok);
        free(text);
        if (r) { iqf_model_free(m); return 1; }
        if (!quiet) fprintf(stderr, "perplexity: tokenized %s: %d tokens\n", text_path, n_tok);
    } else {
        /* The context must hold the file's n_ctx: read it from the header, which is checked
         * against the file's length (and the model's vocabulary) before the context is sized. */
        int kh_ctx = 0, kh_vocab = 0;
        if (iqf_kld_file_info(kld, &kh_ctx, &kh_vocab, NULL, err, sizeof err)) {
            iqf_model_free(m);
            return cli_error("%s", err);
        }
        if (kh_vocab != iqf_model_get_info(m)->n_vocab) {
            cli_error("%s: made with a vocabulary of %d tokens, the model has %d", kld, kh_vocab,
                      iqf_model_get_info(m)->n_vocab);
            iqf_model_free(m);
            return 1;
        }
        n_ctx = kh_ctx;
    }
    if (model_cli_context(m, &mo, (int)n_ctx, &c)) {
        status = 1;
        goto out;
    }
    iqf_ppl_params pp = { (int)n_ctx, (int)n_chunks, kld_base, kld, quiet ? NULL : stdout };
    iqf_ppl_result res;
    if (!quiet) iqf_context_set_progress(c, model_cli_eval_progress, (void *)"perplexity");
    if (!kld && !quiet)
        fprintf(stderr, "perplexity: calculating perplexity over %lld chunks, n_ctx=%lld, batch_size=%lld, n_seq=1\n",
                model_cli_chunk_count(n_tok, n_ctx, n_chunks), n_ctx, n_ctx);
    if (iqf_perplexity(c, toks, (size_t)n_tok, &pp, &res, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    if (!kld) {
        printf("Final estimate: PPL = %.4f +/- %.5f\n", res.ppl, res.ppl_err);
    } else {
        printf("%s====== Perplexity statistics ======\n", quiet ? "" : "\n");
        printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", res.ppl, res.ppl_err);
        printf("Mean PPL(base)                : %10.6f ± %10.6f\n", res.ppl_base, res.ppl_base_err);
        printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", res.ln_ppl_ratio, res.ln_ppl_ratio_err);
        printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", res.ppl_ratio, res.ppl_ratio_err);
        printf("\n====== KL divergence statistics ======\n");
        printf("Mean    KLD: %10.6f ± %10.6f\n", res.kld_mean, res.kld_err);
        printf("Maximum KLD: %10.6f\n", res.kld_max);
        printf("99.9%%   KLD: %10.6f\n", res.kld_p999);
        printf("99.0%%   KLD: %10.6f\n", res.kld_p99);
        printf("Median  KLD: %10.6f\n", res.kld_median);
        printf("\n====== Token probability statistics ======\n");
        printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100.0 * res.dp_rms, 100.0 * res.dp_rms_err);
        printf("Same top p: %6.3f ± %5.3f %%\n", 100.0 * res.same_top, 100.0 * res.same_top_err);
    }
    if (!quiet)
        fprintf(stderr, "perplexity: %d chunks of %lld tokens in %.3f s: %.1f tokens/s\n", res.n_chunks, n_ctx,
                res.seconds, res.tokens_per_second);
out:
    free(toks);
    iqf_context_free(c);
    iqf_model_free(m);
    return status;
}
