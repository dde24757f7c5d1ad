/*
 * gguf_split.h - writes a GGUF model as gguf-split parts, as llama.cpp's gguf-split --split
 * does: PREFIX-%05d-of-%05d.gguf; the first part has every KV of the input, and every part ends
 * its KVs with split.no (u16), split.count (u16) and split.tensors.count (i32); the tensors are
 * cut in file order into parts of ceil(n / n_parts). Header-only, for tests and iqf-genmodel.
 */
#ifndef IQF_TEST_GGUF_SPLIT_H
#define IQF_TEST_GGUF_SPLIT_H

#include "iqforge.h"

#include <stdio.h>
#include <string.h>

static inline iqf_status gsplit_write(const char *in, const char *prefix, int n_parts, char *err, size_t errlen) {
    iqf_gguf *g = iqf_gguf_open_part(in, err, errlen);
    if (!g) return IQF_E_FORMAT;
    const int64_t nt = iqf_gguf_n_tensors(g);
    const int64_t per = (nt + n_parts - 1) / n_parts;
    iqf_status st = IQF_OK;
    for (int p = 0; p < n_parts && !st; p++) {
        char path[1100];
        snprintf(path, sizeof path, "%.1000s-%05d-of-%05d.gguf", prefix, (p + 1) % 100000, n_parts % 100000);
        iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, errlen);
        if (!w) {
            st = IQF_E_IO;
            break;
        }
        if (p == 0)
            for (int64_t i = 0; i < iqf_gguf_n_kv(g) && !st; i++) st = iqf_gguf_writer_copy_kv(w, g, i);
        if (!st) st = iqf_gguf_writer_set_u16(w, "split.no", (uint16_t)p);
        if (!st) st = iqf_gguf_writer_set_u16(w, "split.count", (uint16_t)n_parts);
        if (!st) st = iqf_gguf_writer_set_i32(w, "split.tensors.count", (int32_t)nt);
        const int64_t b = p * per, e = b + per < nt ? b + per : nt;
        for (int64_t i = b; i < e && !st; i++) {
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            st = iqf_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type);
        }
        if (!st) st = iqf_gguf_writer_write_header(w);
        for (int64_t i = b; i < e && !st; i++) {
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            st = iqf_gguf_writer_write_data(w, t->data, t->nbytes);
        }
        if (st) {
            snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
            iqf_gguf_writer_abort(w);
        } else {
            st = iqf_gguf_writer_finish(w, err, errlen);
        }
    }
    iqf_gguf_close(g);
    return st;
}

#endif
