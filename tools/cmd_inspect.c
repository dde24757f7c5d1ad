/*
 * cmd_inspect.c - `iqforge inspect FILE.gguf`: metadata, tensor table, type histogram, size and
 * bits per weight. The file is fully validated by iqf_gguf_open first; on any problem one line
 * "FILE: what is wrong" goes to stderr and the exit status is 1.
 */
#include "cli.h"

#include "iqforge.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge inspect [--no-kv] [--no-tensors] [--full] [--force] FILE.gguf\n\n"
            "Shows a GGUF file's metadata (key, type, value; long arrays abbreviated with their\n"
            "length), its tensors (name, shape, type, bytes, offset), a histogram of tensor types,\n"
            "the total size and the bits per weight. The whole file is validated first, and the keys\n"
            "llama.cpp reads (tokenizer.ggml.*, {arch}.* hyper-parameters, general.*, split.*) are\n"
            "checked for type and range: a wrong one is an error (exit 1).\n\n"
            "  --no-kv       skip the metadata listing\n"
            "  --no-tensors  skip the per-tensor table\n"
            "  --full        print every array element and whole strings\n"
            "  --force       print the file even if a key fails the check (marked \"!!\"; exit 1)\n");
}

/* Prints s (n bytes) quoted, escaping non-printables; at most `max` bytes unless max == 0. */
static void print_str(const char *s, size_t n, size_t max) {
    size_t lim = max && n > max ? max : n;
    putchar('"');
    for (size_t i = 0; i < lim; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c == '\t') fputs("\\t", stdout);
        else if (c < 32 || c == 127) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (lim < n) printf("...(%zu bytes)", n);
}

static void print_scalar(int t, const void *p) {
    switch (t) {
    case IQF_GGUF_U8: printf("%u", *(const uint8_t *)p); break;
    case IQF_GGUF_I8: printf("%d", *(const int8_t *)p); break;
    case IQF_GGUF_U16: printf("%u", *(const uint16_t *)p); break;
    case IQF_GGUF_I16: printf("%d", *(const int16_t *)p); break;
    case IQF_GGUF_U32: printf("%" PRIu32, *(const uint32_t *)p); break;
    case IQF_GGUF_I32: printf("%" PRId32, *(const int32_t *)p); break;
    case IQF_GGUF_U64: printf("%" PRIu64, *(const uint64_t *)p); break;
    case IQF_GGUF_I64: printf("%" PRId64, *(const int64_t *)p); break;
    case IQF_GGUF_F32: printf("%.9g", *(const float *)p); break;
    case IQF_GGUF_F64: printf("%.17g", *(const double *)p); break;
    case IQF_GGUF_BOOL: fputs(*(const uint8_t *)p ? "true" : "false", stdout); break;
    default: fputs("?", stdout); break;
    }
}

static void print_kv(const iqf_gguf *g, int64_t i, bool full) {
    int t = iqf_gguf_kv_type(g, i);
    const char *key = iqf_gguf_kv_key(g, i);
    char why[400];
    if (iqf_gguf_check_kv(g, i, why, sizeof why) != IQF_OK) printf("!! INVALID: %s\n", why);
    if (t == IQF_GGUF_ARR) {
        int et = iqf_gguf_arr_type(g, i);
        uint64_t n = iqf_gguf_arr_n(g, i);
        char tn[32];
        snprintf(tn, sizeof tn, "arr[%s]", iqf_gguf_vtype_name(et));
        printf("  %-44s %-9s = [", key, tn);
        uint64_t show = full || n <= 8 ? n : 6;
        size_t es = 0;
        switch (et) {
        case IQF_GGUF_U8: case IQF_GGUF_I8: case IQF_GGUF_BOOL: es = 1; break;
        case IQF_GGUF_U16: case IQF_GGUF_I16: es = 2; break;
        case IQF_GGUF_U32: case IQF_GGUF_I32: case IQF_GGUF_F32: es = 4; break;
        default: es = 8; break;
        }
        const char *data = iqf_gguf_arr_data(g, i, et, NULL);
        for (uint64_t j = 0; j < show; j++) {
            if (j) fputs(", ", stdout);
            if (et == IQF_GGUF_STR) {
                size_t len = 0;
                const char *s = iqf_gguf_arr_str(g, i, j, &len);
                print_str(s, len, full ? 0 : 40);
            } else {
                print_scalar(et, data + j * es);
            }
        }
        if (show < n) printf(", ... (%" PRIu64 " elements)", n);
        puts("]");
        return;
    }
    printf("  %-44s %-9s = ", key, iqf_gguf_vtype_name(t));
    if (t == IQF_GGUF_STR) print_str(iqf_gguf_kv_value(g, i), iqf_gguf_kv_str_len(g, i), full ? 0 : 200);
    else print_scalar(t, iqf_gguf_kv_value(g, i));
    putchar('\n');
}

static void human(double b, char *out, size_t n) {
    const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int k = 0;
    while (b >= 1024 && k < 4) { b /= 1024; k++; }
    if (k == 0) snprintf(out, n, "%.0f B", b);
    else snprintf(out, n, "%.2f %s", b, u[k]);
}

int cmd_inspect(int argc, char **argv) {
    bool no_kv = false, no_tensors = false, full = false, force = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (cli_is_help(s)) { usage(stdout); return 0; }
        if (!strcmp(s, "--no-kv")) no_kv = true;
        else if (!strcmp(s, "--no-tensors")) no_tensors = true;
        else if (!strcmp(s, "--full")) full = true;
        else if (!strcmp(s, "--force")) force = true;
        else if (s[0] == '-' && s[1]) { cli_error("inspect: unknown option '%s'", s); usage(stderr); return 2; }
        else if (!path) path = s;
        else { cli_error("inspect: unexpected argument '%s'", s); return 2; }
    }
    if (!path) { usage(stderr); return 2; }

    char err[600];
    iqf_gguf *g = iqf_gguf_open(path, err, sizeof err);
    char schema_err[600] = "";
    bool split_bad = false;
    if (!g && force) { /* a split model that does not hold together: show this one file */
        char e2[600];
        g = iqf_gguf_open_part(path, e2, sizeof e2);
        if (g) {
            split_bad = true;
            snprintf(schema_err, sizeof schema_err, "%s", err);
        }
    }
    if (!g) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const bool schema_bad = split_bad || iqf_gguf_check_schema(g, schema_err, sizeof schema_err) != IQF_OK;
    if (schema_bad && !force) {
        fprintf(stderr, "%s (--force shows the file anyway)\n", schema_err);
        iqf_gguf_close(g);
        return 1;
    }
    char hs[32];
    human((double)iqf_gguf_file_size(g), hs, sizeof hs);
    printf("%s: GGUF v%" PRIu32 ", %" PRIu64 " bytes (%s), %" PRId64 " KVs, %" PRId64 " tensors, alignment %zu, data at offset %zu\n",
           path, iqf_gguf_version(g), iqf_gguf_file_size(g), hs, iqf_gguf_n_kv(g), iqf_gguf_n_tensors(g),
           iqf_gguf_alignment(g), iqf_gguf_data_offset(g));
    if (iqf_gguf_n_parts(g) > 1) { /* a gguf-split model, read from its first part */
        uint64_t total = 0;
        for (int k = 0; k < iqf_gguf_n_parts(g); k++) total += iqf_gguf_part_size(g, k);
        human((double)total, hs, sizeof hs);
        printf("split model: %d parts, %" PRIu64 " bytes (%s) in all, %" PRId64 " tensors in all; metadata from part 1\n",
               iqf_gguf_n_parts(g), total, hs, iqf_gguf_n_tensors(g));
        for (int k = 0; k < iqf_gguf_n_parts(g); k++)
            printf("  part %d: %s (%" PRIu64 " bytes)\n", k + 1, iqf_gguf_part_path(g, k), iqf_gguf_part_size(g, k));
    }

    if (!no_kv) {
        printf("\nmetadata:\n");
        for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++) print_kv(g, i, full);
    }

    int64_t nt = iqf_gguf_n_tensors(g);
    if (!no_tensors && nt > 0) {
        const bool sp = iqf_gguf_n_parts(g) > 1;
        printf("\ntensors:\n  %5s  %-40s %-24s %-8s %12s %12s%s\n", "#", "name", "shape", "type", "bytes", "offset", sp ? "  part" : "");
        for (int64_t i = 0; i < nt; i++) {
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            char shape[96];
            int o = 0;
            for (int d = 0; d < t->n_dims; d++)
                o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%" PRId64, d ? " x " : "", t->ne[d]);
            printf("  %5" PRId64 "  %-40s %-24s %-8s %12zu %12" PRIu64, i, t->name, shape,
                   iqf_type_get(t->type)->name, t->nbytes, t->offset);
            if (sp) printf("  %5d", t->part + 1);
            putchar('\n');
        }
    }

    /* Histogram by type. */
    int64_t cnt[IQF_TYPE_COUNT] = { 0 };
    double wts[IQF_TYPE_COUNT] = { 0 }, byt[IQF_TYPE_COUNT] = { 0 };
    double tot_w = 0, tot_b = 0;
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        double w = (double)iqf_gguf_tensor_nelements(t);
        cnt[t->type]++;
        wts[t->type] += w;
        byt[t->type] += (double)t->nbytes;
        tot_w += w;
        tot_b += (double)t->nbytes;
    }
    if (nt > 0) {
        printf("\ntypes:\n  %-8s %8s %16s %16s %8s %7s\n", "type", "tensors", "weights", "bytes", "bpw", "share");
        for (int ty = 0; ty < IQF_TYPE_COUNT; ty++) {
            if (!cnt[ty]) continue;
            printf("  %-8s %8" PRId64 " %16.0f %16.0f %8.4f %6.2f%%\n", iqf_type_get(ty)->name, cnt[ty], wts[ty],
                   byt[ty], 8.0 * byt[ty] / wts[ty], 100.0 * byt[ty] / tot_b);
        }
    }
    human(tot_b, hs, sizeof hs);
    printf("\ntotal: %" PRId64 " tensors, %.0f weights, %.0f bytes of tensor data (%s), %.4f bits per weight\n",
           nt, tot_w, tot_b, hs, tot_w > 0 ? 8.0 * tot_b / tot_w : 0.0);
    /* A quantized file says which encoder wrote it; no quantize.mode key means compat. */
    if (iqf_gguf_find_kv(g, "general.quantization_version") >= 0) {
        const char *mode = NULL;
        iqf_gguf_get_str(g, "quantize.mode", &mode, NULL);
        printf("encoder mode: %s\n", mode ? mode : "compat");
    }
    int64_t ftype;
    if (iqf_gguf_get_int(g, "general.file_type", &ftype)) {
        const char *fn = ftype >= 0 && ftype <= INT32_MAX ? iqf_ftype_name((int)ftype) : NULL;
        printf("file type: %s (%" PRId64 ")\n", fn ? fn : "unknown", ftype);
    }
    iqf_gguf_close(g);
    if (schema_bad) {
        printf("\n!! this file fails llama.cpp's schema: %s\n", schema_err);
        fprintf(stderr, "%s\n", schema_err);
        return 1;
    }
    return 0;
}
