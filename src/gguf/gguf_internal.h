/* gguf_internal.h - helpers shared by the GGUF reader and writer (src/gguf). */
#ifndef IQF_GGUF_INTERNAL_H
#define IQF_GGUF_INTERNAL_H

#include "iqforge.h"

#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "iqforge's GGUF code assumes a little-endian host"
#endif

#define IQF_GGUF_MAX_STRING (1ull << 30)  /* ggml's GGUF_MAX_STRING_LENGTH */
#define IQF_GGUF_MAX_ARRAY (1ull << 30)   /* ggml's GGUF_MAX_ARRAY_ELEMENTS */

/* Size of one element of a scalar vtype, 0 for STR, ARR and unknown ids. */
static inline size_t iqf_gguf_vtype_size(int t) {
    switch (t) {
    case IQF_GGUF_U8: case IQF_GGUF_I8: case IQF_GGUF_BOOL: return 1;
    case IQF_GGUF_U16: case IQF_GGUF_I16: return 2;
    case IQF_GGUF_U32: case IQF_GGUF_I32: case IQF_GGUF_F32: return 4;
    case IQF_GGUF_U64: case IQF_GGUF_I64: case IQF_GGUF_F64: return 8;
    default: return 0;
    }
}

/* Byte size of a tensor with these dims and type; false if the shape is invalid or overflows
 * (message in err: "tensor 'NAME' ..."). ne must have n_dims valid entries. */
bool iqf_gguf_tensor_size(const char *name, int n_dims, const int64_t *ne, int type,
                          int64_t *nelem, uint64_t *nbytes, char *err, size_t errlen);

/* split.c: if g (opened by iqf_gguf_open_part) is the first part of a gguf-split model, opens
 * and validates the other parts and returns g with every part's tensors; a lone file is
 * returned as it is. On failure g is closed and NULL returned (message in err). */
iqf_gguf *iqf_gguf_split_merge(iqf_gguf *g, char *err, size_t errlen);
/* The same with another way to open the parts (the fuzz target opens them from memory). */
typedef iqf_gguf *(*iqf_gguf_opener)(void *ctx, const char *path, char *err, size_t errlen);
iqf_gguf *iqf_gguf_split_merge_with(iqf_gguf *g, iqf_gguf_opener opener, void *ctx, char *err, size_t errlen);
bool iqf_gguf_set_parts(iqf_gguf *g, iqf_gguf **parts, int n_parts, iqf_gguf_tensor *tensors, int64_t n,
                        char *msg, size_t msglen);

#endif
