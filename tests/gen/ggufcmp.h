/*
 * ggufcmp.h - compares two GGUF files the way the quantize acceptance asks: KVs (order, key,
 * type, value), tensors (order, name, shape, type, bytes), then the whole files byte for byte.
 * Header-only; prints at most a few differences to stderr. Returns the number of differences
 * (0 = identical), or -1 if a file cannot be read.
 */
#ifndef IQF_GGUFCMP_H
#define IQF_GGUFCMP_H

#include "iqforge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline size_t gc_scalar_size(int t) {
    switch (t) {
    case IQF_GGUF_U8:
    case IQF_GGUF_I8:
    case IQF_GGUF_BOOL: return 1;
    case IQF_GGUF_U16:
    case IQF_GGUF_I16: return 2;
    case IQF_GGUF_U32:
    case IQF_GGUF_I32:
    case IQF_GGUF_F32: return 4;
    case IQF_GGUF_U64:
    case IQF_GGUF_I64:
    case IQF_GGUF_F64: return 8;
    default: return 0;
    }
}

static inline bool gc_kv_equal(const iqf_gguf *a, int64_t i, const iqf_gguf *b, int64_t j) {
    int ta = iqf_gguf_kv_type(a, i), tb = iqf_gguf_kv_type(b, j);
    if (ta != tb || strcmp(iqf_gguf_kv_key(a, i), iqf_gguf_kv_key(b, j))) return false;
    if (ta == IQF_GGUF_STR)
        return iqf_gguf_kv_str_len(a, i) == iqf_gguf_kv_str_len(b, j) &&
               !memcmp(iqf_gguf_kv_value(a, i), iqf_gguf_kv_value(b, j), iqf_gguf_kv_str_len(a, i));
    if (ta == IQF_GGUF_ARR) {
        int ea = iqf_gguf_arr_type(a, i);
        uint64_t n = iqf_gguf_arr_n(a, i);
        if (ea != iqf_gguf_arr_type(b, j) || n != iqf_gguf_arr_n(b, j)) return false;
        if (ea == IQF_GGUF_STR) {
            for (uint64_t k = 0; k < n; k++) {
                size_t la, lb;
                const char *sa = iqf_gguf_arr_str(a, i, k, &la), *sb = iqf_gguf_arr_str(b, j, k, &lb);
                if (!sa || !sb || la != lb || memcmp(sa, sb, la)) return false;
            }
            return true;
        }
        return !memcmp(iqf_gguf_kv_value(a, i), iqf_gguf_kv_value(b, j), n * gc_scalar_size(ea));
    }
    return !memcmp(iqf_gguf_kv_value(a, i), iqf_gguf_kv_value(b, j), gc_scalar_size(ta));
}

/* `ref` is the oracle's file, `got` ours. */
static inline int gguf_compare(const char *ref, const char *got, const char *label) {
    char err[512];
    iqf_gguf *a = iqf_gguf_open_part(ref, err, sizeof err);
    if (!a) {
        fprintf(stderr, "%s: %s\n", label, err);
        return -1;
    }
    iqf_gguf *b = iqf_gguf_open_part(got, err, sizeof err);
    if (!b) {
        fprintf(stderr, "%s: %s\n", label, err);
        iqf_gguf_close(a);
        return -1;
    }
    int diffs = 0;
#define GC_DIFF(...)                                        \
    do {                                                    \
        if (diffs++ < 8) {                                  \
            fprintf(stderr, "%s: ", label);                 \
            fprintf(stderr, __VA_ARGS__);                   \
            fputc('\n', stderr);                            \
        }                                                   \
    } while (0)
    int64_t na = iqf_gguf_n_kv(a), nb = iqf_gguf_n_kv(b);
    if (na != nb) GC_DIFF("KV count %lld (oracle) vs %lld", (long long)na, (long long)nb);
    for (int64_t i = 0; i < na && i < nb; i++)
        if (!gc_kv_equal(a, i, b, i))
            GC_DIFF("KV %lld: oracle '%s' (%s) vs '%s' (%s)", (long long)i, iqf_gguf_kv_key(a, i),
                    iqf_gguf_vtype_name(iqf_gguf_kv_type(a, i)), iqf_gguf_kv_key(b, i),
                    iqf_gguf_vtype_name(iqf_gguf_kv_type(b, i)));
    na = iqf_gguf_n_tensors(a);
    nb = iqf_gguf_n_tensors(b);
    if (na != nb) GC_DIFF("tensor count %lld (oracle) vs %lld", (long long)na, (long long)nb);
    for (int64_t i = 0; i < na && i < nb; i++) {
        const iqf_gguf_tensor *x = iqf_gguf_tensor_at(a, i), *y = iqf_gguf_tensor_at(b, i);
        const iqf_type_info *tx = iqf_type_get(x->type), *ty = iqf_type_get(y->type);
        if (strcmp(x->name, y->name)) {
            GC_DIFF("tensor %lld: oracle %s vs %s", (long long)i, x->name, y->name);
            continue;
        }
        if (x->type != y->type || x->n_dims != y->n_dims || memcmp(x->ne, y->ne, sizeof x->ne)) {
            GC_DIFF("tensor %s: oracle type %s dims %d vs type %s dims %d", x->name, tx ? tx->name : "?", x->n_dims,
                    ty ? ty->name : "?", y->n_dims);
            continue;
        }
        if (x->nbytes != y->nbytes || memcmp(x->data, y->data, x->nbytes)) {
            size_t k = 0;
            while (k < x->nbytes && k < y->nbytes && ((const uint8_t *)x->data)[k] == ((const uint8_t *)y->data)[k]) k++;
            GC_DIFF("tensor %s (%s): bytes differ from offset %zu of %zu", x->name, tx ? tx->name : "?", k, x->nbytes);
        }
    }
    if (!diffs && (iqf_gguf_file_size(a) != iqf_gguf_file_size(b) || iqf_gguf_data_offset(a) != iqf_gguf_data_offset(b)))
        GC_DIFF("file sizes %llu vs %llu", (unsigned long long)iqf_gguf_file_size(a),
                (unsigned long long)iqf_gguf_file_size(b));
#undef GC_DIFF
    iqf_gguf_close(a);
    iqf_gguf_close(b);
    if (!diffs) {
        /* Everything parsed equal: the files must be equal byte for byte too. */
        FILE *fa = fopen(ref, "rb"), *fb = fopen(got, "rb");
        if (!fa || !fb) {
            if (fa) fclose(fa);
            if (fb) fclose(fb);
            return -1;
        }
        static char ba[1 << 16], bb[1 << 16];
        size_t ra, rb;
        long long off = 0;
        do {
            ra = fread(ba, 1, sizeof ba, fa);
            rb = fread(bb, 1, sizeof bb, fb);
            if (ra != rb || memcmp(ba, bb, ra)) {
                fprintf(stderr, "%s: files differ near byte %lld\n", label, off);
                diffs++;
                break;
            }
            off += (long long)ra;
        } while (ra > 0);
        fclose(fa);
        fclose(fb);
    }
    return diffs;
}

#endif
