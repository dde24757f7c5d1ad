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

/* A handle (reader.c; the source side in source.c). */
typedef struct gkv {
    const char *key;
    int type;           /* vtype; IQF_GGUF_ARR for arrays */
    int arr_type;       /* element type of an array, else -1 */
    uint64_t n;         /* array length (1 for scalars) */
    void *val;          /* arena: scalar / packed elements / text / string offsets (n+1) */
    char *strbase;      /* string arrays: text base (element j = strbase + off[j]) */
    size_t len;         /* scalar string length */
} gkv;

struct iqf_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    int64_t n_kv, n_tensors;
    gkv *kv;
    iqf_gguf_tensor *tensors;
    char *arena;        /* KV values, keys and tensor names */
    int64_t *kv_hash, *t_hash;
    size_t kv_hmask, t_hmask;
    uint64_t seed;      /* per-handle hash seed: crafted colliding names cannot be precomputed */
    /* A gguf-split model opened by its first part (split.c): parts[1..n_parts-1] are the other
     * parts (parts[0] is NULL: this handle), and `tensors` is every part's tensors. */
    struct iqf_gguf **parts;
    int n_parts;
    iqf_gguf_tensor *own_tensors; /* this file's own tensor array, when tensors is the merged one */
    int64_t own_n_tensors;
    /* iqf_gguf_open_source: base is an owned copy of the metadata (hdr_size bytes), size the
     * size of the file it describes; tensor bytes come from src into buf (one tensor at a time) */
    size_t hdr_size;
    iqf_gguf_source src;
    void *buf;
    int64_t buf_tensor; /* the tensor in buf, -1: none */
    size_t buf_cap;     /* iqf_gguf_tensor_load_rows: buf's size when it holds rows (buf_tensor -1) */
    void *mem;          /* iqf_gguf_materialize: every tensor's bytes (anonymous mapping), or NULL */
    size_t mem_size;
};

#endif
