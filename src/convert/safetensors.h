/*
 * safetensors.h - hostile-input-safe reader of Hugging Face safetensors checkpoints.
 *
 * A file is: u64 little-endian header length N, N bytes of JSON (an object: tensor name ->
 * {"dtype", "shape", "data_offsets": [begin, end]} plus an optional "__metadata__"), then the
 * data section. Every tensor is checked before use: dtype known, shape non-negative with at most
 * IQF_ST_MAX_DIMS dimensions and no overflow, end - begin == elements * element size, the range
 * inside the data section, no two tensors' ranges overlapping, no name twice. The files are
 * mapped read-only; iqf_st_release drops a tensor's pages after use, so a pass over every tensor
 * keeps resident memory bounded by the largest tensor, not the model.
 *
 * A checkpoint directory is read as llama.cpp's converter does: with model.safetensors.index.json,
 * the shards named by its weight_map (sorted by name) and every name of the map must be found in
 * its shard and no other; without it, every model*.safetensors file (sorted). Tensors are listed
 * part by part, each part's sorted by name (byte order), as the converter iterates them.
 */
#ifndef IQF_CONVERT_SAFETENSORS_H
#define IQF_CONVERT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IQF_ST_MAX_DIMS 8
#define IQF_ST_MAX_HEADER ((uint64_t)100 << 20) /* as the safetensors crate's limit */
#define IQF_ST_MAX_PARTS 4096

typedef enum iqf_st_dtype { IQF_ST_F32, IQF_ST_F16, IQF_ST_BF16 } iqf_st_dtype;

typedef struct iqf_st_tensor {
    char *name;
    iqf_st_dtype dtype;
    int n_dims;
    int64_t shape[IQF_ST_MAX_DIMS]; /* row-major, shape[n_dims-1] fastest (HF order) */
    uint64_t nelem;
    uint64_t nbytes;
    int part;                       /* index into the parts */
    const uint8_t *data;            /* inside the part's mapping */
} iqf_st_tensor;

typedef struct iqf_st iqf_st;

/* One safetensors file (a path), or a buffer the caller keeps alive (name for messages). */
iqf_st *iqf_st_open_file(const char *path, char *err, size_t errlen);
iqf_st *iqf_st_open_memory(const void *buf, size_t size, const char *name, char *err, size_t errlen);
/* A checkpoint directory (see above). */
iqf_st *iqf_st_open_dir(const char *dir, char *err, size_t errlen);
void iqf_st_close(iqf_st *st);

int64_t iqf_st_n_tensors(const iqf_st *st);
const iqf_st_tensor *iqf_st_tensor_at(const iqf_st *st, int64_t i);
const iqf_st_tensor *iqf_st_find(const iqf_st *st, const char *name); /* NULL if absent */
const char *iqf_st_part_path(const iqf_st *st, int part);
/* Value of element i as float (F32, F16, BF16 widened exactly). */
float iqf_st_get_f32(const iqf_st_tensor *t, uint64_t i);
/* Drop the mapped pages of a tensor (madvise), keeping the mapping valid. */
void iqf_st_release(const iqf_st *st, const iqf_st_tensor *t);
/* The same for bytes [0, upto) of a tensor's data (whole pages only). */
void iqf_st_release_prefix(const iqf_st *st, const iqf_st_tensor *t, uint64_t upto);
size_t iqf_st_dtype_size(iqf_st_dtype d);

#endif
