/*
 * source.c - tensor bytes of a handle opened with iqf_gguf_open_source (reader.c): loaded whole
 * or by rows into the handle's buffer, or all at once into memory (iqf_gguf_materialize).
 */
#include "gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

const void *iqf_gguf_tensor_load(iqf_gguf *g, const iqf_gguf_tensor *t, char *err, size_t errlen) {
    if (!g || !t) {
        if (err && errlen) snprintf(err, errlen, "iqf_gguf_tensor_load: invalid argument");
        return NULL;
    }
    if (!g->src.read || g->mem) return t->data;
    const int64_t i = t - g->tensors;
    if (i < 0 || i >= g->n_tensors) {
        if (err && errlen) snprintf(err, errlen, "%s: tensor not of this model", g->path);
        return NULL;
    }
    if (g->buf_tensor == i) return g->buf;
    free(g->buf);
    g->buf_tensor = -1;
    g->buf_cap = 0;
    g->buf = malloc(t->nbytes ? t->nbytes : 1);
    if (!g->buf) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory (tensor %s, %zu bytes)", g->path, t->name, t->nbytes);
        return NULL;
    }
    char msg[512] = "";
    if (g->src.read(g->src.user, i, g->buf, msg, sizeof msg) != IQF_OK) {
        if (err && errlen) snprintf(err, errlen, "%s", msg[0] ? msg : "tensor source failed");
        free(g->buf);
        g->buf = NULL;
        return NULL;
    }
    g->buf_tensor = i;
    return g->buf;
}

void iqf_gguf_tensor_unload(iqf_gguf *g, const iqf_gguf_tensor *t) {
    if (!g || !t || !g->src.read || g->mem || (g->buf_tensor != t - g->tensors && !g->buf_cap)) return;
    free(g->buf);
    g->buf = NULL;
    g->buf_tensor = -1;
    g->buf_cap = 0;
}

const void *iqf_gguf_tensor_load_rows(iqf_gguf *g, const iqf_gguf_tensor *t, int64_t row0, int64_t nrows, char *err,
                                      size_t errlen) {
    const int64_t total = t ? t->ne[1] * t->ne[2] * t->ne[3] : 0;
    if (!g || !t || row0 < 0 || nrows < 1 || row0 > total - nrows) {
        if (err && errlen) snprintf(err, errlen, "iqf_gguf_tensor_load_rows: invalid argument");
        return NULL;
    }
    const size_t rs = t->nbytes / (size_t)total; /* whole rows: nbytes is nrows * row size */
    const int64_t i = t - g->tensors;
    if (!g->src.read || g->mem || !g->src.read_rows || g->buf_tensor == i) {
        const uint8_t *d = iqf_gguf_tensor_load(g, t, err, errlen);
        return d ? d + (size_t)row0 * rs : NULL;
    }
    if (i < 0 || i >= g->n_tensors) {
        if (err && errlen) snprintf(err, errlen, "%s: tensor not of this model", g->path);
        return NULL;
    }
    const size_t need = (size_t)nrows * rs;
    if (g->buf_tensor >= 0 || g->buf_cap < need) {
        free(g->buf);
        g->buf_tensor = -1;
        g->buf_cap = 0;
        g->buf = malloc(need ? need : 1);
        if (!g->buf) {
            if (err && errlen) snprintf(err, errlen, "%s: out of memory (rows of tensor %s, %zu bytes)", g->path, t->name, need);
            return NULL;
        }
        g->buf_cap = need ? need : 1;
    }
    char msg[512] = "";
    if (g->src.read_rows(g->src.user, i, row0, nrows, g->buf, msg, sizeof msg) != IQF_OK) {
        if (err && errlen) snprintf(err, errlen, "%s", msg[0] ? msg : "tensor source failed");
        return NULL;
    }
    return g->buf;
}

iqf_status iqf_gguf_materialize(iqf_gguf *g, char *err, size_t errlen) {
    if (!g) {
        if (err && errlen) snprintf(err, errlen, "iqf_gguf_materialize: invalid argument");
        return IQF_E_INVALID_ARG;
    }
    if (!g->src.read || g->mem) return IQF_OK;
    const size_t n = g->size > g->data_offset ? g->size - g->data_offset : 1;
    void *mem = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory (%zu bytes for the tensors)", g->path, n);
        return IQF_E_NOMEM;
    }
    free(g->buf);
    g->buf = NULL;
    g->buf_tensor = -1;
    g->buf_cap = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        char msg[512] = "";
        const iqf_status st = g->src.read(g->src.user, i, (uint8_t *)mem + g->tensors[i].offset, msg, sizeof msg);
        if (st != IQF_OK) {
            if (err && errlen) snprintf(err, errlen, "%s", msg[0] ? msg : "tensor source failed");
            munmap(mem, n);
            return st;
        }
    }
    for (int64_t i = 0; i < g->n_tensors; i++) g->tensors[i].data = (const uint8_t *)mem + g->tensors[i].offset;
    g->mem = mem;
    g->mem_size = n;
    return IQF_OK;
}
