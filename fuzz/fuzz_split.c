/*
 * fuzz_split.c - libFuzzer target for the multi-part (gguf-split) reader (src/gguf/split.c).
 * Input: u8 n (parts, 1..4 used: n % 4 + 1), then n-1 u32 lengths, then the parts' bytes back to
 * back (the last takes the rest). Part k is opened from memory as "fz-0000k-of-0000N.gguf" (N
 * from the first part's split.count when it has one), so the merge sees exactly these buffers.
 * An accepted model is walked: every tensor's bytes touched (ASan catches reads outside its own
 * part's buffer), found by name, and its part index in range.
 */
#include "gguf/gguf_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct fz {
    uint8_t *buf[4];
    size_t len[4];
    int n;
} fz;

static volatile unsigned sink;

static iqf_gguf *open_mem(void *ctx, const char *path, char *err, size_t errlen) {
    fz *f = ctx;
    int k = -1; /* "fz-0000k-of-0000N.gguf" */
    for (const char *p = path; (p = strstr(p, "fz-")) != NULL; p++) k = atoi(p + 3) - 1;
    if (k < 0 || k >= f->n) {
        snprintf(err, errlen, "%s: cannot open: No such file or directory", path);
        return NULL;
    }
    return iqf_gguf_open_memory(f->buf[k], f->len[k], path, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    fz f;
    memset(&f, 0, sizeof f);
    f.n = data[0] % 4 + 1;
    size_t pos = 1 + 4 * (size_t)(f.n - 1);
    if (pos > size) return 0;
    for (int k = 0; k < f.n; k++) {
        size_t len;
        if (k < f.n - 1) {
            uint32_t l;
            memcpy(&l, data + 1 + 4 * k, 4);
            len = l;
        } else {
            len = size - pos;
        }
        if (len > size - pos) len = size - pos;
        f.buf[k] = malloc(len ? len : 1); /* exactly len bytes: ASan sees any over-read */
        if (!f.buf[k]) goto out;
        memcpy(f.buf[k], data + pos, len);
        f.len[k] = len;
        pos += len;
    }
    char err[700] = "";
    uint16_t cnt = 1;
    char name[64];
    iqf_gguf *g0 = iqf_gguf_open_memory(f.buf[0], f.len[0], "fz-00001-of-00001.gguf", err, sizeof err);
    if (g0 && iqf_gguf_get_u16(g0, "split.count", &cnt) && cnt > 1) {
        /* reopen under the name a first part of cnt parts has */
        iqf_gguf_close(g0);
        snprintf(name, sizeof name, "fz-00001-of-%05u.gguf", cnt);
        g0 = iqf_gguf_open_memory(f.buf[0], f.len[0], name, err, sizeof err);
    }
    if (!g0) {
        if (!err[0]) abort();
        goto out;
    }
    iqf_gguf *g = iqf_gguf_split_merge_with(g0, open_mem, &f, err, sizeof err);
    if (!g) {
        if (!err[0]) abort();
        goto out;
    }
    const int np = iqf_gguf_n_parts(g);
    if (np < 1 || np > f.n) abort();
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        if (!t || t->part < 0 || t->part >= np || iqf_gguf_find_tensor(g, t->name) != i) abort();
        const uint8_t *p = t->data;
        if (t->nbytes) sink += p[0] + p[t->nbytes - 1];
    }
    for (int k = 0; k < np; k++)
        if (!iqf_gguf_part_path(g, k)) abort();
    iqf_gguf_close(g);
out:
    for (int k = 0; k < 4; k++) free(f.buf[k]);
    return 0;
}
