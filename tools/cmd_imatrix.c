/* cmd_imatrix.c - `iqforge imatrix`: importance matrix from a text (llama-imatrix's method). */
#include "cli.h"

#include "iqforge.h"
#include "model_cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge imatrix -m MODEL -f TEXT [-o OUT] [-c N_CTX] [--chunk K] [--chunks N]\n"
            "                       [-t THREADS] [--output-format gguf|dat] [--hessian OUT2.gguf\n"
            "                       [--hessian-block N] [--hessian-experts N|off] [--hessian-f16]]\n"
            "                       [--kv-type f16|f32] [--no-ppl] [--quiet]\n"
            "       iqforge imatrix --combine IN1 IN2 ... -o OUT [--output-format gguf|dat] [-c N]\n"
            "                       [--quiet]\n\n"
            "Runs the model over chunks of N_CTX tokens (default 512) and accumulates, for every\n"
            "blk.* weight matrix, the sum of x^2 of each input column over all tokens. OUT (default\n"
            "imatrix.gguf) is written in llama-imatrix's GGUF format, or its legacy .dat format with\n"
            "--output-format dat (the default when OUT does not end in .gguf).\n"
            "--chunk K (or --from-chunk K, as llama-imatrix's) starts at chunk K of the text (skips\n"
            "K*N_CTX tokens); with --chunks N one job captures chunks K..K+N-1, so a large model's\n"
            "capture can run as an array of jobs, one per shard of chunks, over the same text.\n\n"
            "--combine IN1 IN2 ... -o OUT adds up captures of shards into OUT as if one capture had\n"
            "run over all their chunks: importance matrices (GGUF or legacy .dat) as llama-imatrix\n"
            "--in-file merges them (per weight and expert, the sums of x^2 add and the counts add;\n"
            "weights in only some files are kept; the chunk count is the largest count over the\n"
            "chunk size), or Hessian files (--hessian outputs, detected by their general.type): the\n"
            "means times their token rows (per expert: its rows) add, over the total rows. All\n"
            "inputs must be of one kind, with the same chunk size and entry shapes (Hessians: the\n"
            "same model, --hessian-block and --hessian-experts); else one line 'FILE: what is wrong',\n"
            "exit 1, and no OUT. -c N here is the chunk size assumed for legacy .dat inputs (default\n"
            "512, as llama-imatrix's), which do not record theirs.\n\n"
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

/* `iqforge imatrix --combine IN... -o OUT`: the options already parsed. */
static int run_combine(const char *const *in, int n_in, const char *out, const char *fmt, long long legacy_c,
                       bool quiet) {
    int format = 0;
    if (fmt && !strcmp(fmt, "gguf")) format = 1;
    else if (fmt && !strcmp(fmt, "dat")) format = 2;
    else if (fmt) return cli_error("imatrix: --output-format must be gguf or dat, not '%s'", fmt), 2;
    iqf_outfile_install_signal_cleanup("iqforge imatrix");
    char err[1024];
    iqf_combine_info info;
    if (iqf_stats_combine(in, n_in, out, format, (int)legacy_c, &info, err, sizeof err)) return cli_error("%s", err);
    if (!quiet) {
        if (info.kind == IQF_STATS_HESSIAN)
            fprintf(stderr, "imatrix: combined %d Hessian files: %d entries, %lld tokens (%d chunks of %d) to %s\n", n_in,
                    info.n_entries, (long long)info.tokens, info.chunk_count, info.chunk_size, out);
        else
            fprintf(stderr, "imatrix: combined %d importance matrices: %d entries (%d chunks of %d tokens) to %s (%s)\n",
                    n_in, info.n_entries, info.chunk_count, info.chunk_size, out, info.dat ? "legacy .dat" : "GGUF");
    }
    return 0;
}

int cmd_imatrix(int argc, char **argv) {
    const char *out_path = "imatrix.gguf", *fmt = NULL;
    bool combine = false, out_given = false, capture_opt = false;
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    if (!inputs) return cli_error("imatrix: out of memory");
    int n_in = 0;
    long long chunk0 = 0;
    model_cli_opts mo;
    model_cli_opts_init(&mo, 512, 4, 1 << 20);
    const char *hess_path = NULL;
    long long hess_block = 0, hess_exp = 0;
    bool hess_f16 = false, no_ppl = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool hv = i + 1 < argc;
        int r;
        if (cli_is_help(s)) { usage(stdout); free(inputs); return 0; }
        const bool is_c = !strcmp(s, "-c");
        if ((r = model_cli_opts_arg(&mo, "imatrix", argc, argv, &i)) != 0) {
            if (r < 0) { free(inputs); return 2; }
            capture_opt |= !is_c; /* -c is also the legacy chunk size of --combine */
            continue;
        }
        if (!strcmp(s, "-o") && hv) { out_path = argv[++i]; out_given = true; }
        else if (!strcmp(s, "--combine")) combine = true;
        else if (s[0] != '-' && s[0]) inputs[n_in++] = s; /* --combine's inputs */
        else if (!strcmp(s, "--output-format") && hv) fmt = argv[++i];
        else if (!strcmp(s, "--quiet")) quiet = true;
        else {
            capture_opt = true;
            if (!strcmp(s, "--hessian") && hv) hess_path = argv[++i];
            else if (!strcmp(s, "--hessian-f16")) hess_f16 = true;
            else if (!strcmp(s, "--no-ppl")) no_ppl = true;
            else if ((!strcmp(s, "--chunk") || !strcmp(s, "--from-chunk")) && hv) {
                if (!cli_parse_int(argv[++i], 0, 1LL << 30, &chunk0)) {
                    free(inputs);
                    return cli_error("imatrix: bad %s '%s'", s, argv[i]), 2;
                }
            }
            else if (!strcmp(s, "--hessian-experts") && hv) {
                ++i;
                if (!strcmp(argv[i], "off")) hess_exp = -1;
                else if (!cli_parse_int(argv[i], 1, 1 << 20, &hess_exp)) {
                    free(inputs);
                    return cli_error("imatrix: bad --hessian-experts '%s' (a block size, or off)", argv[i]), 2;
                }
            }
            else if (!strcmp(s, "--hessian-block") && hv) {
                if (!cli_parse_int(argv[++i], 0, 1 << 20, &hess_block)) {
                    free(inputs);
                    return cli_error("imatrix: bad --hessian-block '%s'", argv[i]), 2;
                }
            }
            else {
                usage(stderr);
                free(inputs);
                return cli_error("imatrix: unexpected argument '%s'", s), 2;
            }
        }
    }
    if (combine || n_in) {
        int rc;
        if (!combine) {
            usage(stderr);
            rc = (cli_error("imatrix: unexpected argument '%s'", inputs[0]), 2);
        } else if (capture_opt) {
            rc = (cli_error("imatrix: --combine only reads files: it takes no -m, -f, --chunk(s), -t, --hessian* or "
                            "--no-ppl"), 2);
        } else if (!n_in || !out_given) {
            usage(stderr);
            rc = (cli_error("imatrix: --combine needs its input files and -o OUT"), 2);
        } else {
            rc = run_combine(inputs, n_in, out_path, fmt, mo.n_ctx, quiet);
        }
        free(inputs);
        return rc;
    }
    free(inputs);
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
    if (chunk0 > 0) {
        /* llama-imatrix's --chunk: the first K chunks are left out (the rest needs 2 chunks) */
        if (chunk0 > (n_tok - 2 * n_ctx) / n_ctx) {
            status = cli_error("imatrix: --chunk %lld leaves fewer than the 2 chunks of %lld tokens a capture needs "
                               "(the text gives %d tokens)", chunk0, n_ctx, n_tok);
            goto out;
        }
        memmove(toks, toks + chunk0 * n_ctx, (size_t)(n_tok - chunk0 * n_ctx) * sizeof *toks);
        n_tok -= (int)(chunk0 * n_ctx);
        if (!quiet) fprintf(stderr, "imatrix: from chunk %lld (%lld tokens left out)\n", chunk0, chunk0 * n_ctx);
    }
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
