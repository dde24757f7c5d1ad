/*
 * cmd_raw.c - `iqforge quantize-raw` and `iqforge dequantize-raw`: raw float32 rows <-> raw blocks.
 * Streams the input in chunks of rows, so memory stays bounded for any file size.
 */
#include "cli.h"

#include "iqforge.h"
#include "progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CHUNK_BYTES (32u << 20) /* input bytes per chunk */

static void quantize_usage(FILE *f) {
    fprintf(f,
            "usage: iqforge quantize-raw --type TYPE --cols N [--imatrix IMAT.f32] [--threads T]\n"
            "                            [--mode compat|best] [--simd auto|scalar|avx2|avx512|neon] [--quiet]\n"
            "                            IN.f32 OUT.bin\n"
            "       iqforge quantize-raw --list-types\n\n"
            "IN is little-endian float32 rows of N values; IMAT is N float32 values (one weight per\n"
            "column); OUT receives the raw blocks. TYPE is a ggml type name (iq3_xxs, q4_K, ...).\n");
}

static void dequantize_usage(FILE *f) {
    fprintf(f, "usage: iqforge dequantize-raw --type TYPE --cols N [--threads T] IN.bin OUT.f32\n\n"
               "IN holds raw blocks of TYPE, rows of N values; OUT receives float32 rows.\n");
}

typedef struct raw_args {
    const char *type_name, *imatrix, *in, *out;
    long long cols, threads;
    iqf_simd simd;
    iqf_mode mode;
    bool quiet, list;
} raw_args;

/* Parses the options shared by both commands. Returns 0 ok, 2 usage error, -1 help shown. */
static int parse(int argc, char **argv, raw_args *a, bool quantize) {
    memset(a, 0, sizeof *a);
    a->cols = -1;
    const char *pos[2];
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        bool has_val = i + 1 < argc;
        if (cli_is_help(s)) return -1;
        if (!strcmp(s, "--type") && has_val) a->type_name = argv[++i];
        else if (!strcmp(s, "--cols") && has_val) {
            if (!cli_parse_int(argv[++i], 1, (1LL << 40), &a->cols)) {
                cli_error("%s: --cols: '%s' is not a positive integer", argv[0], argv[i]);
                return 2;
            }
        } else if (!strcmp(s, "--threads") && has_val) {
            if (!cli_parse_int(argv[++i], 0, 4096, &a->threads)) {
                cli_error("%s: --threads: '%s' is not an integer in 0..4096", argv[0], argv[i]);
                return 2;
            }
        } else if (quantize && !strcmp(s, "--imatrix") && has_val) a->imatrix = argv[++i];
        else if (quantize && !strcmp(s, "--mode") && has_val) {
            int m = iqf_mode_from_name(argv[++i]);
            if (m < 0) {
                cli_error("%s: --mode: unknown mode '%s' (available: compat, best)", argv[0], argv[i]);
                return 2;
            }
            a->mode = (iqf_mode)m;
        } else if (quantize && !strcmp(s, "--simd") && has_val) {
            const char *v = argv[++i];
            if (!strcmp(v, "auto")) a->simd = IQF_SIMD_AUTO;
            else if (!strcmp(v, "scalar")) a->simd = IQF_SIMD_SCALAR;
            else if (!strcmp(v, "avx2")) a->simd = IQF_SIMD_AVX2;
            else if (!strcmp(v, "avx512")) a->simd = IQF_SIMD_AVX512;
            else if (!strcmp(v, "neon")) a->simd = IQF_SIMD_NEON;
            else { cli_error("%s: --simd: unknown level '%s'", argv[0], v); return 2; }
        } else if (!strcmp(s, "--quiet") || !strcmp(s, "-q")) a->quiet = true;
        else if (quantize && !strcmp(s, "--list-types")) a->list = true;
        else if (s[0] == '-' && s[1]) {
            cli_error("%s: unknown option '%s' (or missing value)", argv[0], s);
            return 2;
        } else if (npos < 2) pos[npos++] = s;
        else { cli_error("%s: unexpected argument '%s'", argv[0], s); return 2; }
    }
    if (a->list) return 0;
    if (!a->type_name) { cli_error("%s: --type is required", argv[0]); return 2; }
    if (a->cols < 0) { cli_error("%s: --cols is required", argv[0]); return 2; }
    if (npos != 2) { cli_error("%s: expected IN and OUT files", argv[0]); return 2; }
    a->in = pos[0];
    a->out = pos[1];
    return 0;
}

/* Opens IN and checks that its size is a whole number of rows of `row_bytes`. */
static FILE *open_input(const char *path, size_t row_bytes, const char *what, long long *nrows) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        cli_error("%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((size_t)st.st_size % row_bytes != 0) {
        cli_error("%s: size %lld bytes is not a whole number of rows (%zu bytes per row of %s)",
                  path, (long long)st.st_size, row_bytes, what);
        fclose(f);
        return NULL;
    }
    *nrows = (long long)((size_t)st.st_size / row_bytes);
    return f;
}

static int run(raw_args *a, bool quantize) {
    int type = iqf_type_from_name(a->type_name);
    const iqf_type_info *ti = iqf_type_get(type);
    if (!ti) return cli_error("unknown type '%s' (see iqforge quantize-raw --list-types)", a->type_name);
    if (quantize ? !iqf_can_encode(type) : !iqf_can_decode(type))
        return cli_error("type %s cannot be %s by this build", ti->name, quantize ? "encoded" : "decoded");
    if (a->cols % ti->blck_size != 0)
        return cli_error("--cols %lld is not a multiple of %lld (the %s block size)", a->cols,
                         (long long)ti->blck_size, ti->name);
    if (iqf_same_file(a->in, a->out)) return cli_error("%s: output is the same file as the input", a->out);

    size_t f32_row = (size_t)a->cols * sizeof(float);
    size_t q_row = iqf_row_size(type, a->cols);
    size_t in_row = quantize ? f32_row : q_row, out_row = quantize ? q_row : f32_row;

    float *imatrix = NULL;
    if (a->imatrix) {
        long long n;
        FILE *fi = open_input(a->imatrix, f32_row, "--cols float32 values", &n);
        if (!fi) return 1;
        if (n != 1) {
            fclose(fi);
            return cli_error("%s: importance matrix must be exactly %lld float32 values", a->imatrix, a->cols);
        }
        imatrix = malloc(f32_row);
        if (!imatrix || fread(imatrix, 1, f32_row, fi) != f32_row) {
            fclose(fi);
            free(imatrix);
            return cli_error("%s: read failed", a->imatrix);
        }
        fclose(fi);
    } else if (quantize && iqf_requires_imatrix(type)) {
        return cli_error("type %s needs an importance matrix (--imatrix)", ti->name);
    }

    long long nrows;
    FILE *fin = open_input(a->in, in_row, quantize ? "--cols float32 values" : ti->name, &nrows);
    if (!fin) { free(imatrix); return 1; }

    long long rows_per_chunk = (long long)(CHUNK_BYTES / (in_row > out_row ? in_row : out_row));
    if (rows_per_chunk < 1) rows_per_chunk = 1;
    void *ibuf = malloc((size_t)rows_per_chunk * in_row);
    void *obuf = malloc((size_t)rows_per_chunk * out_row);
    iqf_outfile *of = NULL;
    char err[256];
    int rc = 0;
    if (!ibuf || !obuf) { rc = cli_error("out of memory"); goto done_noout; }
    iqf_outfile_install_signal_cleanup(quantize ? "iqforge quantize-raw" : "iqforge dequantize-raw");
    if (iqf_outfile_open(a->out, &of, err, sizeof err)) { rc = cli_error("%s", err); goto done_noout; }

    iqf_quantize_params qp = iqf_quantize_default_params();
    qp.n_threads = (int)a->threads;
    qp.simd = a->simd;
    qp.mode = a->mode;
    cli_progress prog;
    cli_progress_init(&prog, a->quiet, 1, nrows * (long long)in_row);
    for (long long r = 0; r < nrows; r += rows_per_chunk) {
        long long n = nrows - r < rows_per_chunk ? nrows - r : rows_per_chunk;
        if (fread(ibuf, 1, (size_t)n * in_row, fin) != (size_t)n * in_row) {
            rc = cli_error("%s: read failed", a->in);
            break;
        }
        iqf_status st = quantize
            ? iqf_quantize(type, ibuf, obuf, n, a->cols, imatrix, &qp, err, sizeof err)
            : iqf_dequantize(type, ibuf, obuf, n, a->cols, (int)a->threads, err, sizeof err);
        if (st) {
            /* Row numbers in messages are relative to the chunk; make them absolute. */
            long long rr, cc;
            if (st == IQF_E_NONFINITE && sscanf(err, "row %lld, column %lld", &rr, &cc) == 2) {
                const char *tail = strstr(err, ": ");
                rc = cli_error("%s: row %lld, column %lld%s", a->in, r + rr, cc, tail ? tail : "");
            } else {
                rc = cli_error("%s: %s", a->in, err);
            }
            break;
        }
        if (iqf_outfile_write(of, obuf, (size_t)n * out_row, err, sizeof err)) {
            rc = cli_error("%s", err);
            break;
        }
        cli_progress_update(&prog, 1, a->in, ti->name, (r + n) * (long long)in_row);
    }
    cli_progress_done(&prog);
    if (rc) iqf_outfile_abort(of);
    else if (iqf_outfile_commit(of, err, sizeof err)) rc = cli_error("%s", err);
done_noout:
    fclose(fin);
    free(ibuf);
    free(obuf);
    free(imatrix);
    return rc;
}

int cmd_quantize_raw(int argc, char **argv) {
    raw_args a;
    int p = parse(argc, argv, &a, true);
    if (p < 0) { quantize_usage(stdout); return 0; }
    if (p) { quantize_usage(stderr); return p; }
    if (a.list) {
        for (int t = 0; t < IQF_TYPE_COUNT; t++) {
            const iqf_type_info *ti = iqf_type_get(t);
            if (ti && ti->is_quantized && iqf_can_encode(t)) printf("%s\n", ti->name);
        }
        return 0;
    }
    return run(&a, true);
}

int cmd_dequantize_raw(int argc, char **argv) {
    raw_args a;
    int p = parse(argc, argv, &a, false);
    if (p < 0) { dequantize_usage(stdout); return 0; }
    if (p) { dequantize_usage(stderr); return p; }
    return run(&a, false);
}
