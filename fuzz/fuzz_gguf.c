/*
 * fuzz_gguf.c - libFuzzer target for the GGUF reader (and the writer's copy path).
 * Build and run with scripts/fuzz.sh. The input is parsed with iqf_gguf_open_memory from a
 * buffer of exactly its size (ASan catches any read past it); an accepted file has every
 * accessor exercised, every tensor's first/last byte touched, and is copied through the writer
 * to /dev/null when its tensor data is small.
 */
#include "iqforge.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile uint64_t sink;

static void exercise(const iqf_gguf *g) {
    for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++) {
        const char *k = iqf_gguf_kv_key(g, i);
        sink += strlen(k) + (uint64_t)iqf_gguf_find_kv(g, k);
        int t = iqf_gguf_kv_type(g, i);
        if (t == IQF_GGUF_ARR) {
            int et = iqf_gguf_arr_type(g, i);
            uint64_t n = iqf_gguf_arr_n(g, i), m = 0;
            if (et == IQF_GGUF_STR) {
                for (uint64_t j = 0; j < n && j < 64; j++) {
                    size_t len = 0;
                    const char *s = iqf_gguf_arr_str(g, i, j, &len);
                    if (!s || s[len] != 0) abort();
                    sink += len;
                }
                if (n && !iqf_gguf_arr_str(g, i, n - 1, NULL)) abort();
            } else {
                const uint8_t *p = iqf_gguf_arr_data(g, i, et, &m);
                if (m != n || (n && !p)) abort();
                if (n) sink += p[0];
                int64_t iv;
                double fv;
                if (n) sink += (uint64_t)iqf_gguf_arr_int(g, i, n - 1, &iv) + (uint64_t)iqf_gguf_arr_float(g, i, n - 1, &fv);
            }
        } else if (t == IQF_GGUF_STR) {
            const char *s;
            size_t len;
            if (!iqf_gguf_get_str(g, k, &s, &len) || s[len] != 0) abort();
        } else {
            int64_t iv;
            double fv;
            sink += (uint64_t)iqf_gguf_get_int(g, k, &iv) + (uint64_t)iqf_gguf_get_float(g, k, &fv);
            sink += *(const uint8_t *)iqf_gguf_kv_value(g, i);
        }
    }
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        if (iqf_gguf_find_tensor(g, t->name) != i || !t->nbytes) abort();
        const uint8_t *d = t->data;
        sink += d[0] + d[t->nbytes - 1];
    }
}

static void copy_through_writer(const iqf_gguf *g) {
    uint64_t total = 0;
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) total += iqf_gguf_tensor_at(g, i)->nbytes;
    if (total > (1u << 20)) return;
    char err[256];
    iqf_gguf_writer *w = iqf_gguf_writer_open("/dev/null", err, sizeof err);
    if (!w) return;
    for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++)
        if (iqf_gguf_writer_copy_kv(w, g, i) != IQF_OK) abort();
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        if (iqf_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type) != IQF_OK) abort();
    }
    /* general.alignment was validated by the reader, so the header must be accepted. */
    if (iqf_gguf_writer_write_header(w) != IQF_OK) abort();
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        if (iqf_gguf_writer_write_data(w, t->data, t->nbytes) != IQF_OK) abort();
    }
    if (iqf_gguf_writer_finish(w, err, sizeof err) != IQF_OK) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    if (size) memcpy(copy, data, size);
    iqf_gguf *g = iqf_gguf_open_memory(copy, size, "fuzz", err, sizeof err);
    if (g) {
        exercise(g);
        copy_through_writer(g);
        iqf_gguf_close(g);
    } else if (strncmp(err, "fuzz: ", 6) != 0 || strlen(err) < 8) {
        abort(); /* every rejection carries "NAME: what is wrong" */
    }
    free(copy);
    return 0;
}
