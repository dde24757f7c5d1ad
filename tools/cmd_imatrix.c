/* cmd_imatrix.c - `iqforge imatrix`: importance matrix from a text (llama-imatrix's method). */
#include "cli.h"

#include "iqforge.h"
#include "model_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge imatrix -m MODEL -f TEXT [-o OUT] [-c N_CTX] [--chunks N] [-t THREADS]\n"
            "                       [--output-format gguf|dat] [--hessian OUT2.gguf [--hessian-block N]\n"
            "                       [--hessian-experts N|off] [--hessian-f16]] [--kv-type f16|f32]\n"
            "                       [--no-ppl] [--quiet]\n\n"
            "Runs the model over chunks of N_CTX tokens (default 512) and accumulates, for every\n"
            "blk.* weight matrix, the sum of x^2 of each input column over all tokens. OUT (default\n"
            "imatrix.gguf) is written in llama-imatrix's GGUF format, or its legacy .dat format with\n"
            "--output-format dat (the default when OUT does not end in .gguf).\n\n"
            "--hessian OUT2 also accumulates, in the same pass, H = E[x x^T] of every linear layer's\n"
            "input (q/k/v share one, gate/up share one; attn_output, ffn_down, output) and writes them\n"
            "to OUT2 (a GGUF read by `iqforge quantize --hessian`). --hessian-block N keeps only the\n"
            "diagonal N x N blocks of inputs wider than N (default: full matrices if their double\n"
            "accumulators take at most 1 GiB, else 256-blocks: 0.9 GiB for a 7B model); --hessian-f16\n"
            "stores F16 instead of F32. MoE models: one H per expert of the 3-D expert tensors (gate/up\n"
            "share one input, down has its own), over the rows routed to that expert; --hessian-experts\n"
            "N keeps their diagonal blocks of at most N, off none (default: the rule above, or 32-blocks\n"
            "if that would take more than 8 GiB of accumulators, or none if those still would; a\n"
            "gpt-oss-20B shape takes 6.3 GiB at its 192-blocks).\n"
            "--kv-type f16 (default): llama.cpp's default F16 K/V cache and flash-attention roundings;\n"
            "f32: the plain float graph.\n"
            "--no-ppl (as llama-imatrix's): no logits and no running perplexity; the files are the\n"
            "same bytes, a little sooner.\n"
            "--quiet: no per-chunk values, no notes on stderr, no final perplexity, no ETA line (the\n"
            "ETA line is shown on a terminal only); errors only.\n");
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int cmd_imatrix(int argc, char **argv) {
    const char *out_path = "imatrix.gguf", *fmt = NULL;
    model_cli_opts mo;
    model_cli_opts_init(&mo, 512, 4, 1 << 20);
    const char *hess_path = NULL;
    long long hess_block = 0, hess_exp = 0;
    bool hess_f16 = false, no_ppl = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool hv = i + 1 < argc;
        int r;
        if (cli_is_help(s)) { usage(stdout); return 0; }
        if ((r = model_cli_opts_arg(&mo, "imatrix", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if (!strcmp(s, "-o") && hv) out_path = argv[++i];
        else if (!strcmp(s, "--output-format") && hv) fmt = argv[++i];
        else if (!strcmp(s, "--hessian") && hv) hess_path = argv[++i];
        else if (!strcmp(s, "--hessian-f16")) hess_f16 = true;
        else if (!strcmp(s, "--no-ppl")) no_ppl = true;
        else if (!strcmp(s, "--quiet")) quiet = true;
        else if (!strcmp(s, "--hessian-experts") && hv) {
            ++i;
            if (!strcmp(argv[i], "off")) hess_exp = -1;
            else if (!cli_parse_int(argv[i], 1, 1 << 20, &hess_exp))
                return cli_error("imatrix: bad --hessian-experts '%s' (a block size, or off)", argv[i]), 2;
        }
        else if (!strcmp(s, "--hessian-block") && hv) {
            if (!cli_parse_int(argv[++i], 0, 1 << 20, &hess_block)) return cli_error("imatrix: bad --hessian-block '%s'", argv[i]), 2;
        }
        else {
            usage(stderr);
            return cli_error("imatrix: unexpected argument '%s'", s), 2;
        }
    }
    const char *model_path = mo.model, *text_path = mo.text;
    const long long n_ctx = mo.n_ctx, n_chunks = mo.n_chunks, n_threads = mo.n_threads;
    if (!model_path || !text_path) { usage(stderr); return cli_error("imatrix: -m MODEL and -f TEXT are required"), 2; }
    bool dat;
    if (!fmt) dat = !ends_with(out_path, ".gguf");
    else if (!strcmp(fmt, "gguf")) dat = false;
    else if (!strcmp(fmt, "dat")) dat = true;
    else return cli_error("imatrix: --output-format must be gguf or dat, not '%s'", fmt), 2;

    iqf_outfile_install_signal_cleanup("iqforge imatrix");
    char err[1024];
    iqf_model *m = NULL;
    if (model_cli_load(model_path, NULL, (int)n_threads, &m)) return 1;
    int status = 0;
    int32_t *toks = NULL;
    int n_tok = 0;
    iqf_context *c = NULL;
    iqf_imatrix_data *d = NULL;
    iqf_hess_acc *hacc = NULL;
    size_t len;
    char *text = model_cli_read_text(text_path, &len);
    if (!text) { status = 1; goto out; }
    int r = model_cli_tokenize(m, text, len, true, &toks, &n_tok);
    free(text);
    if (r) { status = 1; goto out; }
    if (!quiet) fprintf(stderr, "imatrix: tokenized %s: %d tokens\n", text_path, n_tok);
    if (model_cli_context(m, &mo, (int)n_ctx, &c)) { status = 1; goto out; }
    if (hess_path && iqf_hessian_attach_ex(c, hess_block, hess_exp, &hacc, err, sizeof err)) { status = cli_error("%s", err); goto out; }
    if (!quiet) {
        iqf_context_set_progress(c, model_cli_eval_progress, (void *)"imatrix");
        fprintf(stderr, "imatrix: computing over %lld chunks, n_ctx=%lld%s\n", model_cli_chunk_count(n_tok, n_ctx, n_chunks),
                n_ctx, hacc ? ", with Hessians" : "");
    }
    const iqf_imatrix_params ip = { (int)n_ctx, (int)n_chunks, quiet ? NULL : stdout, no_ppl };
    if (iqf_imatrix_collect_ex(c, toks, (size_t)n_tok, &ip, &d, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    if (!quiet && !no_ppl) printf("Final estimate: PPL = %.4f\n", d->ppl);
    if (model_cli_write_imatrix(d, text_path, out_path, dat)) { status = 1; goto out; }
    if (!quiet)
        fprintf(stderr, "imatrix: wrote %d entries (%d chunks of %d tokens) to %s (%s)\n", d->n_entries,
                d->n_chunks, d->chunk_size, out_path, dat ? "legacy .dat" : "GGUF");
    if (hacc) {
        iqf_hessian_detach(c);
        if (iqf_hessian_acc_write(hacc, m, hess_path, d->n_chunks, d->chunk_size, text_path, hess_f16, err, sizeof err)) {
            status = cli_error("%s", err);
            goto out;
        }
        if (!quiet) {
            int64_t htok = 0;
            const int nh = iqf_hessian_acc_count(hacc, &htok);
            fprintf(stderr, "imatrix: wrote %d Hessians (%lld tokens) to %s\n", nh, (long long)htok, hess_path);
        }
    }
out:
    if (c) iqf_hessian_detach(c);
    iqf_hessian_acc_free(hacc);
    iqf_imatrix_data_free(d);
    free(toks);
    iqf_context_free(c);
    iqf_model_free(m);
    return status;
}
