/*
 * cmd_ladder.c - `iqforge ladder`: quantize a model to every type (x every encoder mode), measure
 * each rung against the base model's own logits, report, and raise the alarm on a rung that a
 * smaller rung beats (a broken encoder, as the Mistral-7B IQ3_XXS regression that started this
 * project). The judging and the reports are tools/ladder/ladder.c; this file runs the rungs.
 *
 * DIR layout (everything written whole or not at all):
 *   base.kld, base.txt          the base model's log-probabilities and its PPL, with their key
 *   imatrix.gguf, imatrix.txt   the importance matrix captured from --calibration, with its key
 *   hessian.gguf                its Hessians, captured in the same pass when a feedback or full
 *                               series needs them and no --hessian was given
 *   rungs/NAME.MODE.txt         one finished rung (iqf_ladder_rung_save); reused when the key matches
 *   NAME.MODE.gguf              a rung's quantized file, kept with --keep-files
 *   ladder.json/.csv/.svg       the reports over every finished rung found in DIR
 *   base.llama.kld, logs/       with --evaluator llama-perplexity: its base log-probabilities and
 *                               each run's output (base.log, NAME.MODE.log)
 */
#include "cli.h"
#include "ladder_eval.h"
#include "ladder_keys.h"
#include "model_cli.h"

#include "iqforge.h"
#include "ladder.h" /* tools/ladder: the rung records, alarm and reports */
#include "progress.h"

#include <errno.h>
#include <stdarg.h>
#include <strings.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LADDER_EXIT_ALARM 3
#define MAX_RUNGS 256

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge ladder -m MODEL.gguf -f EVAL.txt [--imatrix FILE | --calibration TEXT]\n"
            "                      [--types LIST] [--mode LIST] [-c N_CTX] [--chunks N] [-t THREADS]\n"
            "                      [-o DIR] [--simulate] [--prompt P --expect S] [options]\n\n"
            "Quantizes MODEL to every type of the ladder (x every mode), measures each rung against\n"
            "the base model's logits on EVAL (size, bpw, PPL, mean KLD, KLD p99, same top token,\n"
            "times), prints a table and writes DIR/ladder.{json,csv,svg}. Exit status 3 when the\n"
            "alarm fires: a rung worse than a smaller rung of its family (beyond the measurements'\n"
            "combined error and a relative margin), far worse than a smaller rung of another\n"
            "family, above its --max-ppl-ratio, failing the smoke test, or failing to run.\n\n"
            "inputs:\n"
            "  -m MODEL          the base model (F32/F16/BF16 GGUF), or a Hugging Face checkpoint\n"
            "                    directory, converted in memory as `iqforge convert` would write it\n"
            "  -f EVAL           evaluation text\n"
            "  --imatrix FILE    importance matrix for every rung (GGUF or .dat)\n"
            "  --calibration T   capture an importance matrix from text T first (cached in DIR)\n"
            "  --types LIST      comma-separated file types (default: the IQ and K ladder + Q8_0:\n"
            "                    IQ1_S..IQ4_NL, Q2_K..Q6_K, Q8_0); with --simulate ggml tensor types\n"
            "  --mode LIST       comma-separated series (default compat): the encoder modes compat and\n"
            "                    best; feedback: best + error feedback from Hessians; full: types chosen\n"
            "                    per tensor for the compat rung's bytes (--target-size) + best + feedback\n"
            "  --hessian FILE    Hessians for feedback/full (iqforge imatrix --hessian); with --calibration\n"
            "                    they are captured with the importance matrix\n"
            "  -c N_CTX          tokens per chunk (default 512)\n"
            "  --chunks N        evaluate the first N chunks (default all)\n"
            "  -t THREADS        threads (default all CPUs; results do not depend on it)\n"
            "  --kv-type T       f16 (default): llama.cpp's default F16 cache and flash-attention roundings;\n"
            "                    f32: the plain float graph\n"
            "  --evaluator E     iqforge (default: the built-in engine) or llama-perplexity[=PATH]: score\n"
            "                    the base and every rung with a stock llama-perplexity (any build: CPU,\n"
            "                    CUDA, Metal; --kl-divergence-base once, --kl-divergence per rung), for\n"
            "                    architectures the engine lacks; its output is kept in DIR/logs/.\n"
            "                    The smoke test and --calibration still use the built-in engine\n"
            "  -o DIR            results folder (default ladder)\n"
            "  --simulate        quantize in memory (blk.* matrices, rows of 256) instead of whole\n"
            "                    files: for models whose rows do not fit the formats\n"
            "smoke test:\n"
            "  --prompt P --expect S   greedy-generate from P on every rung; fail the rung whose\n"
            "                    continuation does not contain S\n"
            "  --smoke-tokens N  tokens to generate (default 32)\n"
            "alarm limits:\n"
            "  --alarm-margin X  family rule's relative margin (default 0.10: 10%% worse)\n"
            "  --cross-factor F  cross-family rule's factor (default 2.0)\n"
            "  --z Z             statistical test: Z times the combined standard error (default 2)\n"
            "  --max-ppl-ratio [TYPE=]R   PPL(Q)/PPL(base) limit, for TYPE or every type (repeatable)\n"
            "running:\n"
            "  --only TYPE[:MODE]  run only these rungs (repeatable); the report merges all of DIR\n"
            "  --prepare         compute the base logits (and imatrix) only, for --only jobs\n"
            "  --report-only     compute nothing: judge and report what DIR holds\n"
            "  --keep-files      keep each rung's quantized GGUF in DIR\n"
            "  --quiet           no progress line\n"
            "testing:\n"
            "  --test-break TYPE damage TYPE's rung on purpose (a scale bug: its weights decode\n"
            "                    1.3x too large) to check that the alarm fires\n");
}

/* The default ladder: every IQ and K file type plus Q8_0, smallest first. */
static const char *const default_ftypes[] = {
    "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M",
    "IQ4_XS", "IQ4_NL", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M",
    "Q6_K", "Q8_0",
};
static const char *const default_sim_types[] = {
    "iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq4_xs", "iq4_nl",
    "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "q8_0",
};

typedef struct opts {
    const char *model, *eval, *imatrix, *calibration, *types, *modes, *dir, *prompt, *expect;
    const char *test_break;
    const char *evaluator;   /* NULL: the built-in engine */
    const char *hessian;     /* --hessian */
    bool need_hessian;       /* a feedback or full series is asked for */
    char eval_tool[4096];    /* the external evaluator's executable */
    long long n_ctx, n_chunks, n_threads, smoke_tokens;
    bool simulate, prepare, report_only, keep, quiet;
    const char *only[MAX_RUNGS];
    int n_only;
    ladder_limits lim;
    model_cli_opts mo;   /* the shared options (-m -f -c --chunks -t --kv-type) */
} opts;

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                              */

static int make_dir(const char *path) {
    if (mkdir(path, 0777) == 0 || errno == EEXIST) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
        errno = ENOTDIR;
    }
    return cli_error("%s: cannot create folder: %s", path, strerror(errno));
}

/* A rung's failure message (truncated to fit). */
__attribute__((format(printf, 2, 3))) static void set_error(ladder_rung *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof r->error, fmt, ap);
    va_end(ap);
    r->failed = true;
}

/* DIR/rest into buf; false if it does not fit. */
__attribute__((format(printf, 3, 4))) static bool path_fmt(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return k >= 0 && (size_t)k < n;
}

static void fmt_time(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 359999) s = 0;
    snprintf(buf, n, "%02d:%02d", (int)(s / 60), (int)s % 60);
}

/* ------------------------------------------------------------------------------------------ */
/* The test-only fault: a plausible encoder bug, a scale 30% too large (the decoded weights of
 * every block come out 1.3x what they should). Decodes the blocks, scales, re-encodes them with
 * the compat encoder and uniform importance. Only the rung named by --test-break is touched. */

typedef struct fault {
    const char *rung;      /* the rung to break */
    const char *current;   /* the rung being quantized */
} fault;

static void break_blocks(void *user, const char *tensor, int type, void *blocks, int64_t nrows, int64_t ncols) {
    (void)tensor;
    const fault *f = user;
    if (!f->rung || !f->current || strcasecmp(f->rung, f->current)) return;
    float *x = malloc(sizeof(float) * (size_t)(nrows * ncols));
    float *w = malloc(sizeof(float) * (size_t)ncols);
    if (!x || !w) { free(x); free(w); return; }
    for (int64_t c = 0; c < ncols; c++) w[c] = 1.0f;
    char err[256];
    if (!iqf_dequantize(type, blocks, x, nrows, ncols, 1, err, sizeof err)) {
        for (int64_t i = 0; i < nrows * ncols; i++) x[i] *= 1.3f;
        iqf_quantize_params qp = iqf_quantize_default_params();
        qp.n_threads = 1;
        (void)iqf_quantize(type, x, blocks, nrows, ncols, w, &qp, err, sizeof err);
    }
    free(x);
    free(w);
}

/* ------------------------------------------------------------------------------------------ */
/* Measuring                                                                                  */

/* The progress line: "[rung i/n] TYPE (mode): stage  elapsed  ETA", on a terminal only. */
typedef struct ladder_prog {
    bool show;
    int i, n;
    double eta;      /* seconds for the remaining rungs, -1 unknown */
} ladder_prog;

static void stage(const ladder_prog *p, const ladder_rung *r, const char *what) {
    if (!p->show) return;
    char eta[16];
    fmt_time(p->eta, eta, sizeof eta);
    fprintf(stderr, "\r\033[K[rung %d/%d] %s (%s): %s  ETA %s", p->i, p->n, r->name, iqf_ladder_mode_str(r->mode), what,
            p->eta >= 0 ? eta : "--:--");
    fflush(stderr);
}

typedef struct bench {
    const opts *o;
    const char *base_kld;
    const char *imatrix;     /* the one used: --imatrix or DIR/imatrix.gguf, or NULL */
    const char *hessian;     /* for the feedback and full series: --hessian or DIR/hessian.gguf */
    const ladder_rung *rungs; /* all of them (the full series sizes itself on its compat twin) */
    int n_rungs;
    uint64_t n_weights;      /* of the base model */
    iqf_gguf *g;             /* the base model's GGUF (for simulated sizes), or a checkpoint's source */
    bool hf;                 /* -m names a Hugging Face checkpoint: g is its tensor source
                                (iqf_convert_open), every quantization reads from it */
    iqf_vocab *vocab;        /* for the smoke test */
    ladder_prog prog;
} bench;

/* Greedy continuation of the prompt (the smoke test). */
static int smoke(const bench *b, iqf_model *m, ladder_rung *r) {
    const iqf_model_info *h = iqf_model_get_info(m);
    int32_t *toks = NULL;
    int n = 0;
    if (model_cli_tokenize(m, b->o->prompt, strlen(b->o->prompt), h->add_bos, &toks, &n)) return 1;
    const int ng = (int)b->o->smoke_tokens;
    iqf_context *c = NULL;
    float *logits = malloc(sizeof(float) * (size_t)h->n_vocab);
    char err[512], piece[128];
    int status = 0;
    if (!logits || model_cli_context(m, &b->o->mo, n + ng + 1, &c)) {
        status = logits ? 1 : cli_error("smoke test: out of memory");
        goto out;
    }
    if (n == 0 || iqf_decode(c, toks, n, 0, n - 1, logits, err, sizeof err)) {
        status = cli_error("smoke test: %s", n ? err : "empty prompt");
        goto out;
    }
    size_t used = 0;
    r->smoke_text[0] = 0;
    bool at_start = false;
    for (int step = 0; step < ng; step++) {
        int best = 0;
        for (int v = 1; v < h->n_vocab; v++)
            if (logits[v] > logits[best]) best = v;
        if (iqf_vocab_is_eog(b->vocab, best)) break;
        int32_t k = iqf_token_to_piece(b->vocab, best, piece, (int32_t)sizeof piece, at_start ? 1 : 0, false);
        for (int32_t i = 0; i < k && used + 1 < sizeof r->smoke_text; i++) r->smoke_text[used++] = piece[i];
        r->smoke_text[used] = 0;
        int32_t t = best;
        if (step + 1 < ng && iqf_decode(c, &t, 1, n + step, 0, logits, err, sizeof err)) {
            status = cli_error("smoke test: %s", err);
            goto out;
        }
    }
    r->smoke_run = true;
    r->smoke_ok = strstr(r->smoke_text, b->o->expect) != NULL;
    /* Kept on one line for the table and the cache record (after the check). */
    for (char *p = r->smoke_text; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
out:
    iqf_context_free(c);
    free(logits);
    free(toks);
    return status;
}

/* The tensor bytes a simulated rung stands for: blk.* matrices in `type`, the rest as stored. */
static uint64_t simulated_bytes(const iqf_gguf *g, int type) {
    static const char *const mats[] = { "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                                        "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight" };
    uint64_t tot = 0;
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        bool sim = false;
        if (!strncmp(t->name, "blk.", 4)) {
            const char *dot = strchr(t->name + 4, '.');
            for (size_t k = 0; dot && k < sizeof mats / sizeof mats[0]; k++)
                if (!strcmp(dot + 1, mats[k])) sim = true;
        }
        int64_t nel = iqf_gguf_tensor_nelements(t);
        tot += sim ? (uint64_t)(nel / 256) * iqf_row_size(type, 256) : (uint64_t)t->nbytes;
    }
    return tot;
}

/* The bytes of the compat file of r's type: its compat rung's, measured or cached, else a compat
 * quantization made for the purpose (and removed). 0 on failure (err set). */
static uint64_t compat_bytes(const bench *b, const ladder_rung *r, const char *tmp, char *err, size_t errlen) {
    for (int i = 0; i < b->n_rungs; i++) {
        const ladder_rung *c = &b->rungs[i];
        if (c->mode == IQF_MODE_COMPAT && c->done && !c->failed && !strcmp(c->name, r->name)) return c->file_bytes;
    }
    iqf_model_quantize_params p = iqf_model_quantize_default_params();
    p.ftype = r->ftype;
    p.n_threads = (int)b->o->n_threads;
    p.quiet = true;
    p.imatrix_path = b->imatrix;
    p.input = b->hf ? b->g : NULL;
    struct stat st;
    uint64_t bytes = 0;
    if (!iqf_model_quantize(b->o->model, tmp, &p, NULL, NULL, err, errlen) && stat(tmp, &st) == 0) bytes = (uint64_t)st.st_size;
    unlink(tmp);
    return bytes;
}

/* Quantizes one rung: compat, best and feedback through the pipeline; full through a
 * --target-size plan for its compat twin's bytes. 0, or -1 with err set. */
static int quantize_rung(const bench *b, const ladder_rung *r, const iqf_model_quantize_params *p, const char *out,
                         char *err, size_t errlen) {
    iqf_model_quantize_report rep;
    if (r->mode != LADDER_MODE_FULL) return iqf_model_quantize(b->o->model, out, p, &rep, NULL, err, errlen) ? -1 : 0;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.compat-size", out);
    iqf_target_params tp = iqf_target_default_params();
    tp.target_size = compat_bytes(b, r, tmp, err, errlen);
    if (!tp.target_size) return -1;
    iqf_target_plan *plan = NULL;
    int rc = iqf_target_plan_make(b->o->model, p, &tp, &plan, NULL, err, errlen) ||
             iqf_target_quantize(b->o->model, out, p, plan, &rep, NULL, err, errlen) ? -1 : 0;
    iqf_target_plan_free(plan);
    return rc;
}

/* The external evaluator's arguments for one run (tools/ladder_eval.h); log_path is set. */
static ladder_eval_args eval_args(const opts *o, const char *model, const char *base_kld, const char *log_path) {
    ladder_eval_args a = { o->eval_tool, model, base_kld, log_path, (int)o->n_ctx, (int)o->n_threads, o->mo.kv_f16 };
    return a;
}

/* A quantized rung scored by the external evaluator, then smoke-tested by the built-in engine
 * when --prompt asks for it. Failures set r->failed; returns 0. */
static int measure_external(const bench *b, ladder_rung *r, const char *gguf_out) {
    const opts *o = b->o;
    char err[1024], log_path[4096];
    path_fmt(log_path, sizeof log_path, "%s/logs/%s.%s.log", o->dir, r->name, iqf_ladder_mode_str(r->mode));
    const ladder_eval_args a = eval_args(o, gguf_out, b->base_kld, log_path);
    r->bpw = b->n_weights ? 8.0 * (double)r->file_bytes / (double)b->n_weights : 0;
    stage(&b->prog, r, "evaluating (llama-perplexity)");
    double t1 = cli_now();
    if (ladder_eval_rung(&a, r, err, sizeof err)) {
        set_error(r, "evaluation: %s", err);
        return 0;
    }
    r->eval_s = cli_now() - t1;
    if (!o->prompt) return 0;
    iqf_model *m = NULL;
    stage(&b->prog, r, "smoke test");
    if (model_cli_load(gguf_out, NULL, (int)o->n_threads, &m)) set_error(r, "smoke test: cannot load %s in the built-in engine (see above)", gguf_out);
    else if (smoke(b, m, r)) set_error(r, "smoke test could not run (see above)");
    iqf_model_free(m);
    return 0;
}

/* Measures one rung; on a measurement failure sets r->failed and returns 0 (the ladder goes
 * on); returns 1 only for errors that end the command (none so far). */
static int measure(const bench *b, ladder_rung *r, const char *gguf_out, fault *flt) {
    const opts *o = b->o;
    char err[1024];
    iqf_model *m = NULL;
    double t0 = cli_now();
    r->failed = false;
    stage(&b->prog, r, o->simulate ? "simulating" : "quantizing");
    if (!o->simulate) {
        iqf_model_quantize_params p = iqf_model_quantize_default_params();
        p.ftype = r->ftype;
        p.n_threads = (int)o->n_threads;
        p.quiet = true;
        p.imatrix_path = b->imatrix;
        p.input = b->hf ? b->g : NULL; /* a checkpoint: converted as it is read, as quantize HF_DIR */
        p.mode = r->mode < IQF_MODE_COUNT ? (iqf_mode)r->mode : IQF_MODE_BEST;
        p.hessian_path = r->mode >= IQF_MODE_COUNT ? b->hessian : NULL;
        flt->current = r->name;
        p.post_encode = o->test_break ? break_blocks : NULL;
        p.post_encode_user = flt;
        if (quantize_rung(b, r, &p, gguf_out, err, sizeof err)) {
            set_error(r, "quantize: %s", err);
            return 0;
        }
        r->quantize_s = cli_now() - t0;
        struct stat st;
        r->file_bytes = stat(gguf_out, &st) == 0 ? (uint64_t)st.st_size : 0;
        if (o->evaluator) return measure_external(b, r, gguf_out);
        if (model_cli_load(gguf_out, NULL, (int)o->n_threads, &m)) {
            set_error(r, "cannot load the quantized file %s (see above)", gguf_out);
            return 0;
        }
    } else {
        model_cli_sim sim = { r->name, b->imatrix, iqf_ladder_mode_str(r->mode) };
        if (model_cli_load(o->model, &sim, (int)o->n_threads, &m)) {
            set_error(r, "simulated quantization failed (see above)");
            return 0;
        }
        r->quantize_s = cli_now() - t0;
        r->file_bytes = simulated_bytes(b->g, r->ttype);
    }
    r->bpw = b->n_weights ? 8.0 * (double)r->file_bytes / (double)b->n_weights : 0;
    iqf_context *c = NULL;
    if (model_cli_context(m, &o->mo, (int)o->n_ctx, &c)) {
        set_error(r, "could not make a context (see above)");
        iqf_model_free(m);
        return 0;
    }
    iqf_ppl_params pp = { (int)o->n_ctx, (int)o->n_chunks, NULL, b->base_kld, NULL };
    iqf_ppl_result res;
    stage(&b->prog, r, "evaluating");
    double t1 = cli_now();
    if (iqf_perplexity(c, NULL, 0, &pp, &res, err, sizeof err)) {
        set_error(r, "evaluation: %s", err);
    } else {
        r->eval_s = cli_now() - t1;
        r->n_chunks = res.n_chunks;
        r->ppl = res.ppl, r->ppl_err = res.ppl_err;
        r->ppl_ratio = res.ppl_ratio, r->ppl_ratio_err = res.ppl_ratio_err;
        r->kld = res.kld_mean, r->kld_err = res.kld_err, r->kld_p99 = res.kld_p99, r->kld_max = res.kld_max;
        r->same_top = res.same_top, r->same_top_err = res.same_top_err;
    }
    iqf_context_free(c);
    if (!r->failed && o->prompt) stage(&b->prog, r, "smoke test");
    if (!r->failed && o->prompt && smoke(b, m, r)) {
        set_error(r, "smoke test could not run (see above)");
    }
    iqf_model_free(m);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Base logits and importance matrix                                                         */

/* Loads the base model, tokenizes a text with it (BOS first) and makes a context of n_ctx:
 * the start of both the base measurement and the imatrix capture. 0, or 1 with the message
 * printed (everything freed). */
static int load_with_text(const opts *o, const char *text_path, iqf_model **m, int32_t **toks, int *n_tok,
                          iqf_context **c) {
    *m = NULL, *toks = NULL, *n_tok = 0, *c = NULL;
    if (model_cli_load(o->model, NULL, (int)o->n_threads, m)) return 1;
    size_t len;
    char *text = model_cli_read_text(text_path, &len);
    int status = 0;
    if (!text || model_cli_tokenize(*m, text, len, true, toks, n_tok)) status = 1;
    else if (model_cli_context(*m, &o->mo, (int)o->n_ctx, c)) status = 1;
    free(text);
    if (status) {
        free(*toks);
        iqf_model_free(*m);
        *m = NULL, *toks = NULL;
    }
    return status;
}

static int prepare_base(const opts *o, const char *key, const char *kld_path, const char *txt_path,
                        double *ppl, double *ppl_err) {
    if (access(kld_path, R_OK) == 0 && ladder_key_file_matches(txt_path, key, ppl, ppl_err)) return 0;
    if (o->evaluator) {
        char err[1024], log_path[4096];
        path_fmt(log_path, sizeof log_path, "%s/logs/base.log", o->dir);
        const ladder_eval_args a = eval_args(o, o->model, kld_path, log_path);
        if (!o->quiet && isatty(2)) fprintf(stderr, "ladder: base logits of %s on %s with %s ...\n", o->model, o->eval, o->eval_tool);
        if (ladder_eval_base(&a, o->eval, (int)o->n_chunks, ppl, ppl_err, err, sizeof err)) return cli_error("%s", err);
        return ladder_write_key_file(txt_path, key, ppl, ppl_err);
    }
    iqf_model *m;
    iqf_context *c;
    int32_t *toks;
    int n_tok, status = 0;
    char err[1024];
    if (load_with_text(o, o->eval, &m, &toks, &n_tok, &c)) return 1;
    if (!o->quiet && isatty(2)) fprintf(stderr, "ladder: base logits of %s on %s ...\n", o->model, o->eval);
    iqf_ppl_params pp = { (int)o->n_ctx, (int)o->n_chunks, kld_path, NULL, NULL };
    iqf_ppl_result res;
    if (iqf_perplexity(c, toks, (size_t)n_tok, &pp, &res, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    *ppl = res.ppl;
    *ppl_err = res.ppl_err;
    status = ladder_write_key_file(txt_path, key, ppl, ppl_err);
out:
    iqf_context_free(c);
    free(toks);
    iqf_model_free(m);
    return status;
}

/* The importance matrix from --calibration, and in the same pass the Hessians when hess_path is
 * set (a feedback or full series without --hessian). */
static int prepare_imatrix(const opts *o, const char *key, const char *path, const char *hess_path, const char *txt_path) {
    if (access(path, R_OK) == 0 && (!hess_path || access(hess_path, R_OK) == 0) &&
        ladder_key_file_matches(txt_path, key, NULL, NULL))
        return 0;
    iqf_model *m;
    iqf_context *c;
    int32_t *toks;
    int n_tok, status = 0;
    iqf_imatrix_data *d = NULL;
    iqf_hess_acc *hacc = NULL;
    char err[1024];
    if (load_with_text(o, o->calibration, &m, &toks, &n_tok, &c)) return 1;
    if (hess_path && iqf_hessian_attach(c, 0, &hacc, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    /* no running perplexity: nobody reads it, and the importance data is the same without */
    const iqf_imatrix_params ip = { (int)o->n_ctx, -1, NULL, true };
    if (iqf_imatrix_collect_ex(c, toks, (size_t)n_tok, &ip, &d, err, sizeof err)) {
        status = cli_error("%s", err);
        goto out;
    }
    status = model_cli_write_imatrix(d, o->calibration, path, false);
    if (!status && hacc) {
        iqf_hessian_detach(c);
        if (iqf_hessian_acc_write(hacc, m, hess_path, d->n_chunks, d->chunk_size, o->calibration, false, err, sizeof err))
            status = cli_error("%s", err);
    }
    if (!status) status = ladder_write_key_file(txt_path, key, NULL, NULL);
out:
    if (c) iqf_hessian_detach(c);
    iqf_hessian_acc_free(hacc);
    iqf_imatrix_data_free(d);
    iqf_context_free(c);
    free(toks);
    iqf_model_free(m);
    return status;
}

/* ------------------------------------------------------------------------------------------ */
/* Options                                                                                    */

static int parse_double(const char *opt, const char *s, double lo, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < lo)
        return cli_error("ladder: %s: '%s' is not a number >= %g", opt, s, lo), 2;
    *out = v;
    return 0;
}

static int parse_ppl_limit(opts *o, const char *s) {
    const char *eq = strchr(s, '=');
    double v;
    if (!eq) return parse_double("--max-ppl-ratio", s, 1.0, &o->lim.max_ppl_ratio);
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)(eq - s), s);
    int ft = iqf_ftype_from_name(name);
    if (ft < 0) return cli_error("ladder: --max-ppl-ratio: unknown file type '%s'", name), 2;
    if (parse_double("--max-ppl-ratio", eq + 1, 1.0, &v)) return 2;
    if (o->lim.n_ppl_limits >= 64) return cli_error("ladder: too many --max-ppl-ratio limits"), 2;
    o->lim.ppl_limit_ftype[o->lim.n_ppl_limits] = ft;
    o->lim.ppl_limit[o->lim.n_ppl_limits++] = v;
    return 0;
}

static int parse_args(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->smoke_tokens = 32;
    o->dir = "ladder";
    o->lim = iqf_ladder_default_limits();
    model_cli_opts *mop = &o->mo;
    model_cli_opts_init(mop, 512, 4, 1 << 20);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const bool hv = i + 1 < argc;
        int r;
        if (cli_is_help(s)) { usage(stdout); return -1; }
        if ((r = model_cli_opts_arg(mop, "ladder", argc, argv, &i)) != 0) { if (r < 0) return 2; continue; }
        if (!strcmp(s, "--imatrix") && hv) o->imatrix = argv[++i];
        else if (!strcmp(s, "--calibration") && hv) o->calibration = argv[++i];
        else if (!strcmp(s, "--types") && hv) o->types = argv[++i];
        else if (!strcmp(s, "--mode") && hv) o->modes = argv[++i];
        else if (!strcmp(s, "-o") && hv) o->dir = argv[++i];
        else if (!strcmp(s, "--prompt") && hv) o->prompt = argv[++i];
        else if (!strcmp(s, "--expect") && hv) o->expect = argv[++i];
        else if (!strcmp(s, "--test-break") && hv) o->test_break = argv[++i];
        else if (!strcmp(s, "--evaluator") && hv) o->evaluator = argv[++i];
        else if (!strcmp(s, "--hessian") && hv) o->hessian = argv[++i];
        else if (!strcmp(s, "--simulate")) o->simulate = true;
        else if (!strcmp(s, "--prepare")) o->prepare = true;
        else if (!strcmp(s, "--report-only")) o->report_only = true;
        else if (!strcmp(s, "--keep-files")) o->keep = true;
        else if (!strcmp(s, "--quiet")) o->quiet = true;
        else if (!strcmp(s, "--smoke-tokens") && hv) {
            if (!cli_parse_int(argv[++i], 1, 4096, &o->smoke_tokens)) return cli_error("ladder: bad --smoke-tokens '%s'", argv[i]), 2;
        } else if (!strcmp(s, "--alarm-margin") && hv) {
            if (parse_double(s, argv[++i], 0, &o->lim.margin)) return 2;
        } else if (!strcmp(s, "--cross-factor") && hv) {
            if (parse_double(s, argv[++i], 1.0, &o->lim.cross_factor)) return 2;
        } else if (!strcmp(s, "--z") && hv) {
            if (parse_double(s, argv[++i], 0, &o->lim.z)) return 2;
        } else if (!strcmp(s, "--max-ppl-ratio") && hv) {
            if (parse_ppl_limit(o, argv[++i])) return 2;
        } else if (!strcmp(s, "--only") && hv) {
            if (o->n_only >= MAX_RUNGS) return cli_error("ladder: too many --only"), 2;
            o->only[o->n_only++] = argv[++i];
        } else {
            usage(stderr);
            return cli_error("ladder: unknown option or missing value: %s", s), 2;
        }
    }
    o->model = mop->model;
    o->eval = mop->text;
    o->n_ctx = mop->n_ctx;
    o->n_chunks = mop->n_chunks;
    o->n_threads = mop->n_threads;
    if (!o->model) return cli_error("ladder: -m MODEL is required (see --help)"), 2;
    if (strlen(o->dir) > 3000) return cli_error("ladder: -o: folder name too long"), 2;
    if (!o->eval) return cli_error("ladder: -f EVAL is required (see --help)"), 2;
    if (o->imatrix && o->calibration) return cli_error("ladder: --imatrix and --calibration exclude each other"), 2;
    if (!o->prompt != !o->expect) return cli_error("ladder: --prompt and --expect go together"), 2;
    if (o->prepare && o->report_only) return cli_error("ladder: --prepare and --report-only exclude each other"), 2;
    if (o->simulate && o->test_break) return cli_error("ladder: --test-break needs whole files (not --simulate)"), 2;
    if (o->evaluator && !strcmp(o->evaluator, "iqforge")) o->evaluator = NULL;
    if (o->evaluator) {
        if (cli_is_dir(o->model))
            return cli_error("ladder: --evaluator %s reads GGUF files: convert the checkpoint %s first (iqforge convert)",
                             o->evaluator, o->model), 2;
        if (o->simulate) return cli_error("ladder: --evaluator %s needs whole files (not --simulate)", o->evaluator), 2;
        int r = ladder_eval_resolve(o->evaluator, o->eval_tool, sizeof o->eval_tool);
        if (r) return r;
    }
    return 0;
}

/* Builds the rung list: types x modes. */
static int build_rungs(const opts *o, ladder_rung *r, int *n) {
    int modes[LADDER_N_MODES], nm = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", o->modes ? o->modes : "compat");
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        int m = iqf_ladder_mode_from_name(t);
        if (m < 0) return cli_error("ladder: --mode: unknown mode '%s' (available: compat, best, feedback, full)", t), 2;
        if (m >= IQF_MODE_COUNT && o->simulate)
            return cli_error("ladder: --mode %s needs whole files (not --simulate)", t), 2;
        bool dup = false;
        for (int k = 0; k < nm; k++) dup |= modes[k] == m;
        if (!dup) modes[nm++] = m;
    }
    if (!nm) return cli_error("ladder: --mode: empty list"), 2;
    const char *names[MAX_RUNGS];
    int nt = 0;
    char tbuf[4096];
    if (o->types) {
        snprintf(tbuf, sizeof tbuf, "%s", o->types);
        for (char *sv = NULL, *t = strtok_r(tbuf, ",", &sv); t && nt < MAX_RUNGS; t = strtok_r(NULL, ",", &sv))
            names[nt++] = t;
    } else if (o->simulate) {
        for (size_t k = 0; k < sizeof default_sim_types / sizeof *default_sim_types; k++) names[nt++] = default_sim_types[k];
    } else {
        for (size_t k = 0; k < sizeof default_ftypes / sizeof *default_ftypes; k++) names[nt++] = default_ftypes[k];
    }
    if (!nt) return cli_error("ladder: --types: empty list"), 2;
    *n = 0;
    for (int k = 0; k < nm; k++) {
        for (int t = 0; t < nt; t++) {
            if (*n >= MAX_RUNGS) return cli_error("ladder: more than %d rungs", MAX_RUNGS), 2;
            ladder_rung *x = &r[(*n)++];
            memset(x, 0, sizeof *x);
            x->mode = modes[k];
            if (o->simulate) {
                int ty = iqf_type_from_name(names[t]);
                if (ty < 0) {
                    int ft = iqf_ftype_from_name(names[t]);
                    ty = ft >= 0 ? iqf_ftype_default_type(ft) : -1;
                }
                const iqf_type_info *ti = iqf_type_get(ty);
                if (!ti || !ti->is_quantized || !iqf_can_encode(ty))
                    return cli_error("ladder: --types: '%s' is not a quantized tensor type this build encodes", names[t]), 2;
                x->ftype = -1;
                x->ttype = ty;
                x->family = iqf_ladder_family_of_type(ty);
                snprintf(x->name, sizeof x->name, "%s", ti->name);
            } else {
                int ft = iqf_ftype_from_name(names[t]);
                if (ft < 0) return cli_error("ladder: --types: unknown file type '%s'", names[t]), 2;
                x->ftype = ft;
                x->ttype = -1;
                x->family = iqf_ladder_family_of_ftype(ft);
                snprintf(x->name, sizeof x->name, "%s", iqf_ftype_name(ft));
            }
            for (int p = 0; p < *n - 1; p++)
                if (!strcmp(r[p].name, x->name) && r[p].mode == x->mode) { (*n)--; break; }
        }
    }
    return 0;
}

/* Is rung r selected by --only (TYPE or TYPE:MODE)? */
static bool selected(const opts *o, const ladder_rung *r) {
    if (!o->n_only) return true;
    for (int i = 0; i < o->n_only; i++) {
        const char *s = o->only[i], *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        if (strlen(r->name) != len || strncasecmp(r->name, s, len)) continue;
        if (!colon || !strcasecmp(colon + 1, iqf_ladder_mode_str(r->mode))) return true;
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */

int cmd_ladder(int argc, char **argv) {
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    static ladder_rung rungs[MAX_RUNGS];
    int n = 0;
    if ((rc = build_rungs(&o, rungs, &n))) return rc;
    for (int k = 0; k < n; k++) o.need_hessian |= rungs[k].mode >= IQF_MODE_COUNT;
    if (o.need_hessian && !o.hessian && !o.calibration)
        return cli_error("ladder: the feedback and full series need --hessian FILE or --calibration TEXT"), 2;
    for (int i = 0; i < o.n_only; i++) {
        bool any = false;
        for (int k = 0; k < n; k++) {
            const opts one = { .n_only = 1, .only = { o.only[i] } };
            any |= selected(&one, &rungs[k]);
        }
        if (!any) return cli_error("ladder: --only %s names no rung of this ladder", o.only[i]), 2;
    }
    if (o.test_break) {
        bool any = false;
        for (int k = 0; k < n; k++) any |= !strcasecmp(rungs[k].name, o.test_break);
        if (!any) return cli_error("ladder: --test-break %s names no rung of this ladder", o.test_break), 2;
    }

    char path[4096], kld_path[4096], txt_path[4096], im_path[4096], hess_path[4096];
    if (!o.report_only) iqf_outfile_install_signal_cleanup("iqforge ladder");
    if (make_dir(o.dir)) return 1;
    path_fmt(path, sizeof path, "%s/rungs", o.dir);
    if (make_dir(path)) return 1;
    path_fmt(path, sizeof path, "%s/logs", o.dir);
    if (o.evaluator && make_dir(path)) return 1;

    /* The inputs' keys. */
    uint64_t hm = LADDER_FNV_INIT, model_bytes = 0, he = LADDER_FNV_INIT;
    if (!ladder_hash_model(o.model, &hm, &model_bytes)) return cli_error("%s: cannot read: %s", o.model, strerror(errno));
    if (!ladder_hash_file(o.eval, &he, NULL)) return cli_error("%s: cannot read: %s", o.eval, strerror(errno));
    uint64_t hb = iqf_ladder_fnv1a(hm, &he, sizeof he);
    int64_t geo[3] = { o.n_ctx, o.n_chunks, o.mo.kv_f16 };
    hb = iqf_ladder_fnv1a(hb, geo, sizeof geo);
    if (o.evaluator) { /* the evaluator is an input: its name and its executable's bytes */
        hb = ladder_hash_str(hb, "llama-perplexity");
        if (!ladder_hash_file(o.eval_tool, &hb, NULL)) return cli_error("%s: cannot read: %s", o.eval_tool, strerror(errno));
    }
    char base_key[32];
    snprintf(base_key, sizeof base_key, "%016llx", (unsigned long long)hb);

    bench b = { &o, kld_path, o.imatrix, o.hessian, rungs, n, 0, NULL, false, NULL, { false, 0, 0, -1 } };
    if (o.calibration) {
        uint64_t hc = hm;
        if (!ladder_hash_file(o.calibration, &hc, NULL)) return cli_error("%s: cannot read: %s", o.calibration, strerror(errno));
        hc = iqf_ladder_fnv1a(hc, &o.n_ctx, sizeof o.n_ctx);
        char ikey[32];
        snprintf(ikey, sizeof ikey, "%016llx", (unsigned long long)hc);
        path_fmt(im_path, sizeof im_path, "%s/imatrix.gguf", o.dir);
        if (o.need_hessian && !o.hessian) {
            path_fmt(hess_path, sizeof hess_path, "%s/hessian.gguf", o.dir);
            b.hessian = hess_path;
        }
        path_fmt(txt_path, sizeof txt_path, "%s/imatrix.txt", o.dir);
        if (!o.report_only) {
            if (!o.quiet && isatty(2)) fprintf(stderr, "ladder: importance matrix from %s ...\n", o.calibration);
            if (prepare_imatrix(&o, ikey, im_path, b.hessian, txt_path)) return 1;
        }
        b.imatrix = im_path;
    }
    uint64_t hr = hb;
    if (b.imatrix) {
        if (!ladder_hash_file(b.imatrix, &hr, NULL) && !o.report_only)
            return cli_error("%s: cannot read: %s", b.imatrix, strerror(errno));
    }
    if (b.hessian && !ladder_hash_file(b.hessian, &hr, NULL) && !o.report_only)
        return cli_error("%s: cannot read: %s", b.hessian, strerror(errno));
    hr = ladder_hash_str(hr, o.prompt);
    hr = ladder_hash_str(hr, o.expect);
    hr = iqf_ladder_fnv1a(hr, &o.smoke_tokens, sizeof o.smoke_tokens);
    hr = ladder_hash_str(hr, o.simulate ? "simulate" : "files");
    hr = ladder_hash_str(hr, o.test_break);
    hr = ladder_hash_str(hr, IQF_VERSION);
    char rung_key[32];
    snprintf(rung_key, sizeof rung_key, "%016llx", (unsigned long long)hr);

    path_fmt(kld_path, sizeof kld_path, o.evaluator ? "%s/base.llama.kld" : "%s/base.kld", o.dir);
    path_fmt(txt_path, sizeof txt_path, "%s/base.txt", o.dir);
    double base_ppl = NAN, base_ppl_err = NAN;
    if (o.report_only) {
        if (!ladder_key_file_matches(txt_path, base_key, &base_ppl, &base_ppl_err)) base_ppl = base_ppl_err = NAN;
    } else if (prepare_base(&o, base_key, kld_path, txt_path, &base_ppl, &base_ppl_err)) {
        return 1;
    }
    if (o.prepare) {
        printf("ladder: prepared %s (base PPL %.4f +/- %.5f)\n", o.dir, base_ppl, base_ppl_err);
        return 0;
    }

    char err[1024];
    b.hf = cli_is_dir(o.model);
    b.g = b.hf ? iqf_convert_open(o.model, IQF_CONVERT_AUTO, err, sizeof err) : iqf_gguf_open(o.model, err, sizeof err);
    if (!b.g) return cli_error("%s", err);
    if (b.hf) model_bytes = iqf_gguf_file_size(b.g); /* reported as the converted file's size */
    for (int64_t i = 0; i < iqf_gguf_n_tensors(b.g); i++)
        b.n_weights += (uint64_t)iqf_gguf_tensor_nelements(iqf_gguf_tensor_at(b.g, i));
    if (o.prompt) {
        b.vocab = iqf_vocab_load(b.g, err, sizeof err);
        if (!b.vocab) { iqf_gguf_close(b.g); return cli_error("%s: %s", o.model, err); }
    }

    /* Run what is missing. */
    int todo = 0;
    for (int i = 0; i < n; i++) {
        ladder_rung *r = &rungs[i];
        path_fmt(path, sizeof path, "%s/rungs/%s.%s.txt", o.dir, r->name, iqf_ladder_mode_str(r->mode));
        if (!iqf_ladder_rung_load(path, rung_key, r)) todo += !o.report_only && selected(&o, r);
    }
    const bool show = !o.quiet && isatty(2);
    b.prog.show = show;
    fault flt = { o.test_break, NULL };
    double t_start = cli_now();
    int done_now = 0;
    rc = 0;
    for (int i = 0; i < n && !o.report_only; i++) {
        ladder_rung *r = &rungs[i];
        if (r->done || !selected(&o, r)) continue;
        b.prog.i = done_now + 1;
        b.prog.n = todo;
        b.prog.eta = done_now ? (cli_now() - t_start) / done_now * (todo - done_now) : -1;
        char gguf_out[4096];
        path_fmt(gguf_out, sizeof gguf_out, "%s/%s.%s.gguf", o.dir, r->name, iqf_ladder_mode_str(r->mode));
        measure(&b, r, gguf_out, &flt);
        if (!o.simulate && !o.keep) unlink(gguf_out);
        r->done = true;
        done_now++;
        if (!r->failed) {
            path_fmt(path, sizeof path, "%s/rungs/%s.%s.txt", o.dir, r->name, iqf_ladder_mode_str(r->mode));
            if (iqf_ladder_rung_save(path, rung_key, r, err, sizeof err)) {
                rc = cli_error("%s", err);
                break;
            }
        }
    }
    if (show) fprintf(stderr, "\r\033[K");
    iqf_vocab_free(b.vocab);
    iqf_gguf_close(b.g);
    if (rc) return rc;

    /* Judge and report. */
    static ladder_finding fd[1024];
    int n_alarms = 0;
    int nf = iqf_ladder_judge(rungs, n, &o.lim, fd, 1024, &n_alarms);
    printf("iqforge ladder: %s on %s, -c %lld%s, base PPL %.4f +/- %.5f%s\n\n", o.model, o.eval, o.n_ctx,
           o.n_chunks > 0 ? "" : ", all chunks", base_ppl, base_ppl_err, o.simulate ? ", simulated" : "");
    iqf_ladder_print_table(stdout, rungs, n, fd, nf);
    ladder_inputs in = { o.model, o.eval, b.imatrix, o.calibration, model_bytes, b.n_weights,
                         (int)o.n_ctx, (int)o.n_chunks, (int)o.n_threads, o.simulate, o.prompt, o.expect,
                         base_ppl, base_ppl_err, rung_key };
    char jp[4096], cp[4096], sp[4096];
    path_fmt(jp, sizeof jp, "%s/ladder.json", o.dir);
    path_fmt(cp, sizeof cp, "%s/ladder.csv", o.dir);
    path_fmt(sp, sizeof sp, "%s/ladder.svg", o.dir);
    if (iqf_ladder_write_json(jp, &in, rungs, n, fd, nf, n_alarms, err, sizeof err) ||
        iqf_ladder_write_csv(cp, rungs, n, err, sizeof err) || iqf_ladder_write_svg(sp, &in, rungs, n, err, sizeof err))
        return cli_error("%s", err);
    printf("\nwrote %s, %s, %s\n", jp, cp, sp);
    if (n_alarms) {
        printf("ALARM: %d finding%s; exit status %d\n", n_alarms, n_alarms == 1 ? "" : "s", LADDER_EXIT_ALARM);
        return LADDER_EXIT_ALARM;
    }
    return 0;
}
