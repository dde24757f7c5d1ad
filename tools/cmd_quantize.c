/* cmd_quantize.c - `iqforge quantize`: llama-quantize's command line over iqf_model_quantize. */
#include "cli.h"

#include "iqforge.h"
#include "progress.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends word to the help line in line (wrapped at 100 columns, continuation lines indented). */
static void wrap_word(FILE *f, char *line, size_t cap, const char *word) {
    size_t n = strlen(line);
    if (n + 1 + strlen(word) > 100) {
        fprintf(f, "%s\n", line);
        n = (size_t)snprintf(line, cap, " ");
    }
    snprintf(line + n, cap - n, " %s", word);
}

/* The file types, from the library's table (iqf_ftype_at): names, notes, aliases, and the types
 * with no fallback (iqf_ftype_default_type's block size must divide every quantized row). */
static void usage_types(FILE *f) {
    char line[256] = "TYPE (file types):", word[224], aliases[160] = "", nofb[256] = "", rows[256] = "";
    for (int i = 0; iqf_ftype_at(i); i++) {
        const iqf_ftype_info *e = iqf_ftype_at(i);
        if (strcmp(iqf_ftype_name(e->ftype), e->name) != 0) {
            size_t n = strlen(aliases);
            snprintf(aliases + n, sizeof aliases - n, "%s%s", n ? ", " : "", e->name);
            continue;
        }
        snprintf(word, sizeof word, e->note ? "%s (%s)" : "%s", e->name, e->note);
        wrap_word(f, line, sizeof line, word);
        const iqf_type_info *ti = iqf_type_get(iqf_ftype_default_type(e->ftype));
        if (ti && ti->is_quantized && iqf_type_fallback(ti->type) < 0) {
            size_t n = strlen(nofb), m = strlen(rows);
            snprintf(nofb + n, sizeof nofb - n, "%s%s", n ? " and " : "", e->name);
            snprintf(rows + m, sizeof rows - m, "%s%" PRId64 " (%s)", m ? " or " : "", ti->blck_size, e->name);
        }
    }
    snprintf(word, sizeof word, "(aliases %s; or the numeric llama ftype id).", aliases);
    wrap_word(f, line, sizeof line, word);
    fprintf(f, "%s\n", line);
    if (!*nofb) return;
    char text[768];
    snprintf(text, sizeof text, "%s %s no fallback: every quantized row must be a multiple of %s weights.", nofb,
             strchr(nofb, ' ') ? "have" : "has", rows);
    snprintf(line, sizeof line, " ");
    for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) wrap_word(f, line, sizeof line, w);
    fprintf(f, "%s\n", line);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge quantize [options] IN.gguf|HF_DIR [OUT.gguf] TYPE [NTHREADS]\n\n"
            "Quantizes a GGUF model (F32, F16 or BF16 weights) as llama-quantize does: same per-tensor\n"
            "types, same bytes, same metadata. IN may also be a Hugging Face checkpoint directory: it is\n"
            "converted in memory tensor by tensor as `iqforge convert` (default outtype) would write it,\n"
            "and quantized in the same pass: the same file as convert then quantize, with no file between.\n\n"
            "options (as llama-quantize's):\n"
            "  --imatrix FILE               importance matrix (GGUF imatrix or legacy .dat)\n"
            "  --include-weights NAME       use the imatrix only for tensors whose name contains NAME (repeatable)\n"
            "  --exclude-weights NAME       do not use the imatrix for tensors whose name contains NAME (repeatable)\n"
            "  --output-tensor-type TYPE    type of output.weight (a ggml type name: q8_0, q6_K, f16 ...)\n"
            "  --token-embedding-type TYPE  type of token_embd.weight\n"
            "  --leave-output-tensor        leave output.weight as it is\n"
            "  --pure                       no k-quant mixture: every quantized tensor gets the default type\n"
            "  --tensor-type PATTERN=TYPE   tensors whose name matches PATTERN (extended regex) get TYPE (repeatable)\n"
            "  --tensor-type-file FILE      PATTERN=TYPE entries separated by spaces or newlines\n"
            "  --allow-requantize           allow already quantized input tensors\n"
            "  --override-kv KEY=TYPE:VALUE set a metadata key in the output (TYPE int, float, bool, str; repeatable)\n"
            "  --prune-layers LIST          drop these layers (comma-separated ids) and renumber the rest\n"
            "  --keep-split                 a split input (gguf-split parts) gives as many parts: OUT-00001-of-0000N.gguf ...\n"
            "  --dry-run                    print the plan per tensor and the resulting size; write nothing\n"
            "  --quiet                      no progress line and no summary\n"
            "  --mode compat|best           the encoder: compat (default) writes llama-quantize's bytes;\n"
            "                               best searches harder in the same formats (recorded as quantize.mode)\n"
            "  --hessian FILE               GPTQ-style error feedback with the Hessians of FILE\n"
            "                               (`iqforge imatrix --hessian`); the inner encoder is --mode's\n"
            "  --hessian-damp F             dampening: F * mean(diag H) added to the diagonal (default 0.01)\n\n"
            "size-targeted quantization (TYPE is then optional: it only sets general.file_type):\n"
            "  --target-size SIZE           choose each tensor's type for the least predicted error with the WHOLE\n"
            "                               file at most SIZE bytes (suffix K, M, G: 1024, 1024^2, 1024^3)\n"
            "  --target-bpw B               the same with SIZE = B * (weights of all tensors) / 8\n"
            "  --calibrate TEXT             weigh each tensor's error by its KLD sensitivity measured on TEXT, and\n"
            "                               check the plan against the nearest recipe below SIZE there (the default:\n"
            "                               the same on text sampled from the model, at every model size)\n"
            "  --no-calibrate               weigh by relative error (error / signal energy) only: weaker, no check\n"
            "  --calibrate-self             calibrate on text sampled from the model (the default)\n"
            "  --calib-chunks N, --calib-ctx N   chunks and tokens per chunk of the calibration (4, 128)\n"
            "  --calib-type T[,T...]        the probe types of the calibration (q3_K; q4_0 for rows not multiples of 256)\n"
            "  --calib-rounds N             in-context rounds after the first allocation (default 0)\n"
            "  --calib-all                  probe every candidate type (slow: one KLD run per tensor and type)\n"
            "  --calib-depths N             layers whose gain is measured through the model (8; -1: every layer)\n"
            "  --calib-halves               a gain per half layer (attention, feed-forward): twice the depth probes\n"
            "  --calib-delta-chunks N       chunks over which each tensor's change of its layer's output is measured (2)\n"
            "  --calib-per-tensor           calibrate each tensor alone through the whole model (the reference; slow)\n"
            "  --sample F                   fraction of rows measured in tensors of > 2^20 weights (1/32, >= 128 rows)\n"
            "  --plan-out FILE              save the plan as a --tensor-type-file\n"
            "  (--dry-run prints the plan: tensor, type, bytes, predicted error, and the file size)\n\n");
    usage_types(f);
    fprintf(f, "Without OUT, the output is ggml-model-TYPE.gguf next to the input. A split model (gguf-split\n"
               "parts NAME-00001-of-0000N.gguf ...) is read from its first part.\n");
}

#define MAX_LIST 4096

typedef struct tt_list {
    char *pat[MAX_LIST];
    int type[MAX_LIST];
    int n;
} tt_list;

static bool parse_ggml_type(const char *s, int *out) {
    int t = iqf_type_from_name(s);
    if (t < 0) {
        cli_error("quantize: invalid ggml type '%s'", s);
        return false;
    }
    *out = t;
    return true;
}

static bool add_tensor_type(tt_list *l, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) {
        cli_error("quantize: malformed --tensor-type '%s' (want PATTERN=TYPE)", arg);
        return false;
    }
    if (l->n >= MAX_LIST) {
        cli_error("quantize: too many --tensor-type entries");
        return false;
    }
    int t;
    if (!parse_ggml_type(eq + 1, &t)) return false;
    size_t n = (size_t)(eq - arg);
    char *p = malloc(n + 1);
    if (!p) return false;
    for (size_t i = 0; i < n; i++) p[i] = (char)tolower((unsigned char)arg[i]); /* as llama-quantize */
    p[n] = 0;
    l->pat[l->n] = p;
    l->type[l->n] = t;
    l->n++;
    return true;
}

static bool add_tensor_type_file(tt_list *l, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_error("quantize: cannot open --tensor-type-file '%s'", path);
        return false;
    }
    char word[1024];
    bool ok = true;
    while (ok && fscanf(f, "%1023s", word) == 1) ok = add_tensor_type(l, word);
    fclose(f);
    return ok;
}

/* llama-quantize's parse_layer_prune, strictly: comma-separated ids >= 0, sorted and made unique. */
static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }
static bool parse_prune(const char *s, int *out, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        long long v;
        char tok[32];
        size_t k = strcspn(p, ",");
        if (k == 0 || k >= sizeof tok || *n >= MAX_LIST) break;
        memcpy(tok, p, k);
        tok[k] = 0;
        if (!cli_parse_int(tok, 0, 1 << 20, &v)) break;
        out[(*n)++] = (int)v;
        p += k;
        if (*p == ',' && !*++p) {
            *n = 0; /* a trailing comma */
            break;
        }
    }
    if (*p || *n == 0) {
        cli_error("quantize: invalid --prune-layers '%s' (want comma-separated layer ids >= 0)", s);
        return false;
    }
    qsort(out, (size_t)*n, sizeof *out, cmp_int);
    int u = 0;
    for (int i = 0; i < *n; i++)
        if (u == 0 || out[u - 1] != out[i]) out[u++] = out[i];
    *n = u;
    return true;
}

/* "1214496", "1.5M", "800K", "2G" (binary multiples) */
static bool parse_size(const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v > 0)) return false;
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1048576.0, end++;
    else if (*end == 'G' || *end == 'g') mul = 1073741824.0, end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v * mul >= 1.8e19) return false;
    *out = (uint64_t)floor(v * mul);
    return *out > 0;
}

/* --target-size / --target-bpw: measure, allocate, then print (--dry-run), save and quantize. */
static int target_run(const char *in, const char *out, iqf_model_quantize_params *p, const iqf_target_params *tp,
                      const char *plan_out) {
    char err[1024] = "";
    iqf_target_plan *plan = NULL;
    FILE *log = p->quiet ? NULL : stdout;
    /* the check's encoded blocks are kept beside the output (an unlinked temporary file) and
     * written instead of encoding the tensors again */
    char dir[4096] = ".";
    const char *slash = out ? strrchr(out, '/') : NULL;
    if (slash && (size_t)(slash - out) < sizeof dir) snprintf(dir, sizeof dir, "%.*s", slash == out ? 1 : (int)(slash - out), out);
    iqf_target_params tq = *tp;
    if (!tq.spill_dir) tq.spill_dir = dir;
    iqf_status st = iqf_target_plan_make(in, p, &tq, &plan, log, err, sizeof err);
    if (st) return cli_error("quantize: %s", err);
    if (p->dry_run || !p->quiet) iqf_target_plan_print(plan, stdout);
    if (plan_out && iqf_target_plan_save(plan, plan_out, err, sizeof err)) {
        iqf_target_plan_free(plan);
        return cli_error("quantize: %s", err);
    }
    int rc = 0;
    if (!p->dry_run) {
        iqf_model_quantize_report rep;
        const bool q = p->quiet;
        p->quiet = true; /* the plan above is the per-tensor log */
        st = iqf_target_quantize(in, out, p, plan, &rep, stdout, err, sizeof err);
        p->quiet = q;
        if (st) rc = cli_error("quantize: %s", err);
        else if (!q)
            printf("quantized %s -> %s: %" PRIu64 " bytes (%.4f bpw; target %" PRIu64 "), file type %s, in %.2f s "
                   "(measure %.2f s, calibrate %.2f s, allocate %.2f s, quantize %.2f s)\n",
                   in, out, plan->file_size, (double)plan->file_size * 8.0 / (double)plan->n_weights, plan->budget,
                   iqf_ftype_name(plan->ftype), plan->seconds_measure + plan->seconds_calib + plan->seconds_alloc + rep.seconds,
                   plan->seconds_measure, plan->seconds_calib, plan->seconds_alloc, rep.seconds);
    }
    iqf_target_plan_free(plan);
    return rc;
}

int cmd_quantize(int argc, char **argv) {
    iqf_gguf *hf = NULL; /* a checkpoint directory as input (iqf_convert_open) */
    iqf_model_quantize_params p = iqf_model_quantize_default_params();
    static iqf_kv_override kvo[MAX_LIST];
    static int prune[MAX_LIST];
    iqf_target_params tp = iqf_target_default_params();
    const char *plan_out = NULL;
    int calib_types[32], n_calib = 0;
    bool calib_self = false;
    const char *inc[MAX_LIST], *exc[MAX_LIST];
    tt_list tt;
    memset(&tt, 0, sizeof tt);
    int rc = 2;
    int i = 1;
    for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
        const char *a = argv[i];
        const bool has_val = i + 1 < argc;
        if (cli_is_help(a)) {
            usage(stdout);
            rc = 0;
            goto out;
        } else if (!strcmp(a, "--leave-output-tensor")) {
            p.leave_output_tensor = true;
        } else if (!strcmp(a, "--pure")) {
            p.pure = true;
        } else if (!strcmp(a, "--allow-requantize")) {
            p.allow_requantize = true;
        } else if (!strcmp(a, "--keep-split")) {
            p.keep_split = true;
        } else if (!strcmp(a, "--dry-run")) {
            p.dry_run = true;
        } else if (!strcmp(a, "--quiet")) {
            p.quiet = true;
        } else if (!strcmp(a, "--output-tensor-type") && has_val) {
            if (!parse_ggml_type(argv[++i], &p.output_tensor_type)) goto out;
        } else if (!strcmp(a, "--token-embedding-type") && has_val) {
            if (!parse_ggml_type(argv[++i], &p.token_embedding_type)) goto out;
        } else if (!strcmp(a, "--tensor-type") && has_val) {
            if (!add_tensor_type(&tt, argv[++i])) goto out;
        } else if (!strcmp(a, "--tensor-type-file") && has_val) {
            if (!add_tensor_type_file(&tt, argv[++i])) goto out;
        } else if (!strcmp(a, "--mode") && has_val) {
            int m = iqf_mode_from_name(argv[++i]);
            if (m < 0) {
                cli_error("quantize: --mode: unknown mode '%s' (available: compat, best)", argv[i]);
                goto out;
            }
            p.mode = (iqf_mode)m;
        } else if (!strcmp(a, "--hessian") && has_val) {
            p.hessian_path = argv[++i];
        } else if (!strcmp(a, "--hessian-damp") && has_val) {
            char *end;
            double d = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(d >= 0) || d > 100) {
                cli_error("quantize: --hessian-damp: '%s' is not a number in [0, 100]", argv[i]);
                goto out;
            }
            p.hessian_damp = (float)d;
        } else if (!strcmp(a, "--target-size") && has_val) {
            if (!parse_size(argv[++i], &tp.target_size)) {
                cli_error("quantize: invalid --target-size '%s'", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--target-bpw") && has_val) {
            char *end;
            tp.target_bpw = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(tp.target_bpw > 0) || tp.target_bpw > 64) {
                cli_error("quantize: invalid --target-bpw '%s'", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--calibrate") && has_val) {
            tp.calib_text = argv[++i];
            tp.sens = IQF_TARGET_SENS_KLD;
        } else if (!strcmp(a, "--calibrate-self")) {
            tp.calib_text = NULL;
            tp.sens = IQF_TARGET_SENS_KLD;
            calib_self = true;
        } else if (!strcmp(a, "--no-calibrate")) {
            tp.calib_text = NULL;
            tp.sens = IQF_TARGET_SENS_RELATIVE;
        } else if ((!strcmp(a, "--calib-chunks") || !strcmp(a, "--calib-ctx")) && has_val) {
            long long v;
            if (!cli_parse_int(argv[++i], 1, 1 << 20, &v)) {
                cli_error("quantize: invalid %s '%s'", a, argv[i]);
                goto out;
            }
            if (!strcmp(a, "--calib-chunks")) tp.calib_chunks = (int)v;
            else tp.calib_ctx = (int)v;
        } else if (!strcmp(a, "--calib-type") && has_val) {
            /* one type or a comma-separated list */
            char *list = argv[++i];
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                if (n_calib >= 32) break;
                if (!parse_ggml_type(tok, &calib_types[n_calib])) goto out;
                n_calib++;
            }
            tp.calib_types = calib_types;
            tp.n_calib_types = n_calib;
        } else if (!strcmp(a, "--calib-halves")) {
            tp.calib_halves = true;
        } else if (!strcmp(a, "--calib-per-tensor")) {
            tp.calib_per_tensor = true;
        } else if (!strcmp(a, "--calib-delta-chunks") && has_val) {
            char *end = NULL;
            const long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < 1 || v > 100000) {
                cli_error("quantize: invalid --calib-delta-chunks '%s'", argv[i]);
                goto out;
            }
            tp.calib_delta_chunks = (int)v;
        } else if (!strcmp(a, "--calib-depths") && has_val) {
            char *end = NULL;
            const long v = strtol(argv[++i], &end, 10);
            if (!end || *end || v < -1 || v > 100000) {
                cli_error("quantize: invalid --calib-depths '%s'", argv[i]);
                goto out;
            }
            tp.calib_depths = (int)v;
        } else if (!strcmp(a, "--calib-rounds") && has_val) {
            long long v;
            if (!cli_parse_int(argv[++i], 0, 100, &v)) {
                cli_error("quantize: invalid --calib-rounds '%s'", argv[i]);
                goto out;
            }
            tp.calib_rounds = (int)v;
        } else if (!strcmp(a, "--calib-all")) {
            tp.calib_all = true;
        } else if (!strcmp(a, "--sample") && has_val) {
            char *end;
            tp.sample = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(tp.sample > 0) || tp.sample > 1) {
                cli_error("quantize: invalid --sample '%s' (a fraction in (0, 1])", argv[i]);
                goto out;
            }
        } else if (!strcmp(a, "--plan-out") && has_val) {
            plan_out = argv[++i];
        } else if (!strcmp(a, "--imatrix") && has_val) {
            p.imatrix_path = argv[++i];
        } else if (!strcmp(a, "--include-weights") && has_val && p.n_include < MAX_LIST) {
            inc[p.n_include++] = argv[++i];
        } else if (!strcmp(a, "--exclude-weights") && has_val && p.n_exclude < MAX_LIST) {
            exc[p.n_exclude++] = argv[++i];
        } else if (!strcmp(a, "--override-kv") && has_val && p.n_kv_overrides < MAX_LIST) {
            char e[512];
            if (iqf_kv_override_parse(argv[++i], &kvo[p.n_kv_overrides], e, sizeof e)) {
                cli_error("quantize: %s", e);
                goto out;
            }
            p.n_kv_overrides++;
            p.kv_overrides = kvo;
        } else if (!strcmp(a, "--prune-layers") && has_val) {
            if (!parse_prune(argv[++i], prune, &p.n_prune_layers)) goto out;
            p.prune_layers = prune;
        } else {
            cli_error("quantize: unknown option or missing value: %s", a);
            usage(stderr);
            goto out;
        }
    }
    if (p.n_include && p.n_exclude) {
        cli_error("quantize: --include-weights and --exclude-weights cannot be used together");
        goto out;
    }
    const bool target = tp.target_size > 0 || tp.target_bpw > 0;
    if (tp.target_size > 0 && tp.target_bpw > 0) {
        cli_error("quantize: --target-size and --target-bpw cannot be used together");
        goto out;
    }
    if (!target && (plan_out || tp.calib_text || calib_self || tp.sample > 0)) {
        cli_error("quantize: --plan-out, --calibrate and --sample need --target-size or --target-bpw");
        goto out;
    }
    if (target && p.pure) {
        cli_error("quantize: --pure cannot be combined with --target-size/--target-bpw");
        goto out;
    }
    if (target && !p.imatrix_path) {
        cli_error("quantize: --target-size/--target-bpw need an importance matrix (--imatrix)");
        goto out;
    }
    if (argc - i < (target ? 1 : 2)) {
        usage(stderr);
        goto out;
    }
    const char *in = argv[i++];
    const char *out = NULL;
    char outbuf[4096];
    int ftype = i < argc ? iqf_ftype_from_name(argv[i]) : -1;
    if (target && (i >= argc || (ftype < 0 && (i + 1 >= argc || iqf_ftype_from_name(argv[i + 1]) < 0)))) {
        /* IN [OUT] [NTHREADS] without TYPE: the plan names the file type */
        if (i < argc && !cli_parse_int(argv[i], 1, 4096, &(long long){ 0 })) out = argv[i++];
        else {
            const char *slash = strrchr(in, '/');
            int dirlen = slash ? (int)(slash - in + 1) : 0;
            snprintf(outbuf, sizeof outbuf, "%.*sggml-model-target.gguf", dirlen, in);
            out = outbuf;
        }
        ftype = 0;
    } else if (ftype >= 0) {
        /* IN TYPE [NTHREADS]: the output goes next to the input. */
        const char *slash = strrchr(in, '/');
        int dirlen = slash ? (int)(slash - in + 1) : 0;
        /* As llama-quantize: no extension with --keep-split (the parts get theirs). */
        snprintf(outbuf, sizeof outbuf, "%.*sggml-model-%s%s", dirlen, in, iqf_ftype_name(ftype), p.keep_split ? "" : ".gguf");
        out = outbuf;
        i++;
    } else {
        out = argv[i++];
        if (i >= argc) {
            cli_error("quantize: missing TYPE");
            goto out;
        }
        ftype = iqf_ftype_from_name(argv[i]);
        if (ftype < 0) {
            cli_error("quantize: invalid file type '%s' (see iqforge quantize --help)", argv[i]);
            goto out;
        }
        i++;
    }
    if (i < argc) {
        long long nt;
        if (!cli_parse_int(argv[i], 1, 4096, &nt)) {
            cli_error("quantize: invalid thread count '%s'", argv[i]);
            goto out;
        }
        p.n_threads = (int)nt;
        i++;
    }
    if (i < argc) {
        cli_error("quantize: unexpected argument '%s'", argv[i]);
        goto out;
    }
    p.ftype = ftype;
    p.include_weights = inc;
    p.exclude_weights = exc;
    p.tensor_type_patterns = (const char *const *)tt.pat;
    p.tensor_type_types = tt.type;
    p.n_tensor_types = tt.n;

    if (!p.dry_run) iqf_outfile_install_signal_cleanup("iqforge quantize");
    /* The progress line on a terminal (the library reports, tools/progress.c draws). */
    static cli_progress prog;
    cli_progress_init(&prog, p.quiet, 0, 0);
    if (prog.enabled) {
        p.progress = cli_progress_quantize;
        p.progress_user = &prog;
    }
    iqf_model_quantize_report rep;
    char err[1024] = "";
    if (cli_is_dir(in)) { /* a Hugging Face checkpoint: converted as it is read */
        hf = iqf_convert_open(in, IQF_CONVERT_AUTO, err, sizeof err);
        if (!hf) {
            rc = cli_error("quantize: %s", err);
            goto out;
        }
        p.input = hf;
    }
    if (target) {
        rc = target_run(in, out, &p, &tp, plan_out);
        goto out;
    }
    iqf_status st = iqf_model_quantize(in, p.dry_run ? NULL : out, &p, &rep, stdout, err, sizeof err);
    if (st != IQF_OK) {
        rc = cli_error("quantize: %s", err);
        goto out;
    }
    if (!p.quiet) {
        double ne = rep.n_elements > 0 ? (double)rep.n_elements : 1.0;
        if (p.dry_run)
            printf("dry run: %s as %s would be %.2f MiB (%.2f bpw), from %.2f MiB (%.2f bpw)\n", in,
                   iqf_ftype_name(ftype), (double)rep.size_out / 1048576.0, (double)rep.size_out * 8.0 / ne,
                   (double)rep.size_in / 1048576.0, (double)rep.size_in * 8.0 / ne);
        else
            printf("quantized %s -> %s as %s: %d tensors (%d converted), %.2f MiB (%.2f bpw) -> %.2f MiB "
                   "(%.2f bpw) in %.2f s\n",
                   in, out, iqf_ftype_name(ftype), rep.n_tensors, rep.n_quantized, (double)rep.size_in / 1048576.0,
                   (double)rep.size_in * 8.0 / ne, (double)rep.size_out / 1048576.0,
                   (double)rep.size_out * 8.0 / ne, rep.seconds);
    }
    rc = 0;
out:
    for (int k = 0; k < tt.n; k++) free(tt.pat[k]);
    iqf_gguf_close(hf);
    return rc;
}
