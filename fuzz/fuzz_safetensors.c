/*
 * fuzz_safetensors.c - libFuzzer target for the safetensors header reader (src/convert/
 * safetensors.c): the input is a whole .safetensors file, opened from memory. An accepted file is
 * walked: every tensor's elements read (ASan catches a range outside the buffer), found by name,
 * its byte count checked against its shape.
 */
#include "convert/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile float sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    char err[512];
    iqf_st *st = iqf_st_open_memory(buf, size, "fz.safetensors", err, sizeof err);
    if (st) {
        for (int64_t i = 0; i < iqf_st_n_tensors(st); i++) {
            const iqf_st_tensor *t = iqf_st_tensor_at(st, i);
            if (t->nbytes != t->nelem * iqf_st_dtype_size(t->dtype)) abort();
            if (iqf_st_find(st, t->name) != t) abort();
            for (uint64_t e = 0; e < t->nelem; e++) sink += iqf_st_get_f32(t, e);
        }
    } else if (!err[0])
        abort();
    iqf_st_close(st);
    free(buf);
    return 0;
}
