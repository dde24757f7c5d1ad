/*
 * iqforge.h - the one public header of iqforge.
 *
 * iqforge turns LLM weights (float32/float16/bfloat16) into llama.cpp's GGUF quantization
 * formats without depending on llama.cpp. Type ids equal ggml's, so blocks written here are
 * read by stock llama.cpp and vice versa.
 *
 * Example (tests/api/example.sh extracts the lines between BEGIN and END, compiles them against
 * this header alone, links the shared library and runs them): quantize a model with an importance
 * matrix, then measure the perplexity of the result on a text.
 *
 * BEGIN EXAMPLE
 *  #include "iqforge.h"
 *  #include <stdio.h>
 *  #include <stdlib.h>
 *
 *  // in: an F32/F16/BF16 GGUF model; imatrix: llama-imatrix's file; text: len bytes.
 *  int quantize_and_measure(const char *in, const char *imatrix, const char *out,
 *                           const char *text, size_t len, iqf_ftype ftype) {
 *      char err[512] = "bad input";
 *      iqf_model_quantize_params qp = iqf_model_quantize_default_params();
 *      qp.ftype = ftype;
 *      qp.imatrix_path = imatrix;
 *      qp.quiet = true;
 *      if (iqf_model_quantize(in, out, &qp, NULL, NULL, err, sizeof err)) goto fail;
 *      iqf_model *m = NULL;
 *      iqf_model_params mp = iqf_model_default_params();
 *      if (iqf_model_load(out, &mp, &m, err, sizeof err)) goto fail;
 *      iqf_vocab *v = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
 *      int32_t need = v ? iqf_tokenize(v, text, len, true, NULL, 0) : IQF_TOKENIZE_ERROR;
 *      int32_t n = need < 0 && need != IQF_TOKENIZE_ERROR ? -need : 0; // tokens needed
 *      int32_t *tok = n > 0 ? malloc(sizeof *tok * (size_t)n) : NULL;
 *      iqf_context *c = NULL;
 *      iqf_ppl_result r;
 *      iqf_ppl_params pp = { .n_ctx = 128, .n_chunks = -1 };
 *      iqf_status st = !tok ? IQF_E_INVALID_ARG
 *                    : iqf_tokenize(v, text, len, true, tok, n) != n ? IQF_E_INVALID_ARG
 *                    : iqf_context_new(m, pp.n_ctx, 0, &c, err, sizeof err);
 *      if (!st) st = iqf_perplexity(c, tok, (size_t)n, &pp, &r, err, sizeof err);
 *      if (!st) printf("%s: PPL %.4f +/- %.4f\n", out, r.ppl, r.ppl_err);
 *      iqf_context_free(c);
 *      free(tok);
 *      iqf_vocab_free(v);
 *      iqf_model_free(m);
 *      if (!st) return 0;
 *  fail:
 *      fprintf(stderr, "%s\n", err);
 *      return 1;
 *  }
 * END EXAMPLE
 *
 * Conventions
 *  - Functions that can fail return an iqf_status (0 = IQF_OK) and, when `err` is not NULL,
 *    write a one-line, NUL-terminated message of at most `errlen` bytes describing what is wrong.
 *  - Logging, one convention: functions that report as they go take a `FILE *log` (NULL:
 *    silent) and write whole lines to it; the library prints nothing anywhere else (no stderr,
 *    no terminal line). Progress, which is not logging, is a callback: iqf_context_set_progress
 *    for evaluations, iqf_model_quantize_params.progress for quantization.
 *  - No function keeps hidden global state besides lazily built, immutable lookup tables
 *    (built once, thread-safely).
 *  - Rows are little-endian, row-major; a quantized row is ncols/blck_size blocks.
 *  - Every function of the API is marked IQF_API; the shared library exports nothing else.
 */
#ifndef IQFORGE_H
#define IQFORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE, for the inference section's log streams */

#ifdef __cplusplus
extern "C" {
#endif

#define IQF_VERSION "0.1.0"

/* The shared library is built with -fvisibility=hidden: IQF_API marks what it exports. */
#if defined(__GNUC__) || defined(__clang__)
#define IQF_API __attribute__((visibility("default")))
#else
#define IQF_API
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes
 * ------------------------------------------------------------------------------------------- */
typedef enum iqf_status {
    IQF_OK = 0,
    IQF_E_INVALID_ARG = 1,   /* a NULL pointer, negative count, unknown option */
    IQF_E_UNKNOWN_TYPE = 2,  /* a type id or name that is not a GGUF tensor type */
    IQF_E_UNSUPPORTED = 3,   /* a known type this build cannot encode/decode */
    IQF_E_SHAPE = 4,         /* row length not a multiple of the block size, size mismatch */
    IQF_E_NONFINITE = 5,     /* NaN or Inf in the input or the importance matrix */
    IQF_E_NEED_IMATRIX = 6,  /* the type's encoder needs an importance matrix */
    IQF_E_NOMEM = 7,         /* allocation failed */
    IQF_E_IO = 8,            /* read/write/open failed */
    IQF_E_FORMAT = 9,        /* a file is malformed */
} iqf_status;

/* ---------------------------------------------------------------------------------------------
 * Tensor types. Ids are ggml's (ggml 0.25.1); gaps are ids ggml removed.
 * ------------------------------------------------------------------------------------------- */
typedef enum iqf_type {
    IQF_TYPE_F32 = 0,
    IQF_TYPE_F16 = 1,
    IQF_TYPE_Q4_0 = 2,
    IQF_TYPE_Q4_1 = 3,
    IQF_TYPE_Q5_0 = 6,
    IQF_TYPE_Q5_1 = 7,
    IQF_TYPE_Q8_0 = 8,
    IQF_TYPE_Q8_1 = 9,
    IQF_TYPE_Q2_K = 10,
    IQF_TYPE_Q3_K = 11,
    IQF_TYPE_Q4_K = 12,
    IQF_TYPE_Q5_K = 13,
    IQF_TYPE_Q6_K = 14,
    IQF_TYPE_Q8_K = 15,
    IQF_TYPE_IQ2_XXS = 16,
    IQF_TYPE_IQ2_XS = 17,
    IQF_TYPE_IQ3_XXS = 18,
    IQF_TYPE_IQ1_S = 19,
    IQF_TYPE_IQ4_NL = 20,
    IQF_TYPE_IQ3_S = 21,
    IQF_TYPE_IQ2_S = 22,
    IQF_TYPE_IQ4_XS = 23,
    IQF_TYPE_I8 = 24,
    IQF_TYPE_I16 = 25,
    IQF_TYPE_I32 = 26,
    IQF_TYPE_I64 = 27,
    IQF_TYPE_F64 = 28,
    IQF_TYPE_IQ1_M = 29,
    IQF_TYPE_BF16 = 30,
    IQF_TYPE_TQ1_0 = 34,
    IQF_TYPE_TQ2_0 = 35,
    IQF_TYPE_MXFP4 = 39,
    IQF_TYPE_NVFP4 = 40,
    IQF_TYPE_Q1_0 = 41,
    IQF_TYPE_Q2_0 = 42,
    IQF_TYPE_COUNT = 43,
} iqf_type;

typedef struct iqf_type_info {
    int type;              /* the ggml id */
    const char *name;      /* ggml's lowercase name: "iq3_xxs", "q4_K" (capital K as in ggml) */
    int64_t blck_size;     /* weights per block */
    size_t type_size;      /* bytes per block */
    double bpw;            /* bits per weight = 8*type_size/blck_size */
    bool is_quantized;
} iqf_type_info;

/* The type's description, or NULL if `type` is not a valid GGUF tensor type id (out of range
 * or a removed id). Never crashes on any int. */
IQF_API const iqf_type_info *iqf_type_get(int type);

/* The type id for ggml's name (case-insensitive: "Q4_K", "q4_k" and "q4_K" all work), or -1. */
IQF_API int iqf_type_from_name(const char *name);

/* Bytes of one row of `ncols` values, or 0 if the type is unknown or ncols is not a
 * multiple of its block size. */
IQF_API size_t iqf_row_size(int type, int64_t ncols);

/* Format families (the ladder's alarm compares like with like). */
typedef enum iqf_family {
    IQF_FAMILY_NONE = 0,  /* not a type id */
    IQF_FAMILY_IQ,        /* grid / non-linear IQ types */
    IQF_FAMILY_K,         /* K-quants q2_K..q6_K */
    IQF_FAMILY_LEGACY,    /* q4_0..q8_0 */
    IQF_FAMILY_FLOAT,     /* f32, f16, bf16 */
    IQF_FAMILY_FP4,       /* mxfp4, nvfp4 */
    IQF_FAMILY_LOWBIT,    /* ternary and binary: tq1_0, tq2_0, q1_0, q2_0 */
    IQF_FAMILY_OTHER,     /* not a weight type: q8_1, q8_K (activations), integers, f64 */
} iqf_family;

/* The type's format family; IQF_FAMILY_NONE for an id iqf_type_get does not know. */
IQF_API iqf_family iqf_type_family(int type);
/* The type llama-quantize uses for a tensor whose rows are not a multiple of the type's block
 * (then F16 if that one does not fit either; the type itself: straight to F16); -1 where it has
 * none and refuses (q1_0, nvfp4), or for an unknown id. */
IQF_API int iqf_type_fallback(int type);

/* True if this build can encode (quantize_row) / decode (dequantize_row) the type. */
IQF_API bool iqf_can_encode(int type);
IQF_API bool iqf_can_decode(int type);

/* True if the type's reference encoder refuses to run without an importance matrix
 * (iq2_xxs, iq2_xs, iq1_s). */
IQF_API bool iqf_requires_imatrix(int type);

/* ---------------------------------------------------------------------------------------------
 * Scalar conversions. fp16 and bf16 encoding round to nearest, ties to even, as ggml does.
 * ------------------------------------------------------------------------------------------- */
IQF_API uint16_t iqf_fp32_to_fp16(float f);
IQF_API float iqf_fp16_to_fp32(uint16_t h);
IQF_API uint16_t iqf_fp32_to_bf16(float f);
IQF_API float iqf_bf16_to_fp32(uint16_t h);

/* ggml's nearest_int: round half to even in float32; valid for |f| <= 2^22. */
static inline int iqf_nearest_int(float fval) {
    float val = fval + 12582912.f;
    union { float f; int32_t i; } u = { val };
    return (u.i & 0x007fffff) - 0x00400000;
}

/* ---------------------------------------------------------------------------------------------
 * Quantization
 * ------------------------------------------------------------------------------------------- */

/* Which encoder to run. COMPAT reproduces ggml 0.25.1's bytes exactly (except where ggml writes
 * a corrupt block; see docs/COMPAT.md). Later modes search harder within the same block format. */
typedef enum iqf_mode {
    IQF_MODE_COMPAT = 0,
    /* The same block formats, searched harder: lower error where a better encoder is known
     * (docs/QUALITY.md lists what each type gains). Blocks are valid for every stock decoder.
     * IQ3_XXS, IQ3_S and IQ2_S without an importance matrix run ggml's search under a uniform
     * importance (ggml weighs those rows by x^2); with one, and for IQ2_XXS, IQ2_XS, IQ1_S and
     * IQ1_M, they encode exactly as COMPAT. Deterministic: the same
     * bytes at every thread count and SIMD level. */
    IQF_MODE_BEST = 1,
    IQF_MODE_COUNT = 2,
} iqf_mode;

/* "compat", "best"; NULL for an unknown mode. */
IQF_API const char *iqf_mode_name(int mode);
/* The mode for a name (case-insensitive), or -1. */
IQF_API int iqf_mode_from_name(const char *name);

/* Which instruction set the hot loops may use. Every level gives identical bytes. */
typedef enum iqf_simd {
    IQF_SIMD_AUTO = 0,     /* the best the CPU supports */
    IQF_SIMD_SCALAR = 1,   /* portable C */
    IQF_SIMD_AVX2 = 2,
    IQF_SIMD_AVX512 = 3,
    IQF_SIMD_NEON = 4,     /* 4/8-lane GCC/clang vector-extension kernels: NEON on arm64 (always
                              there), SSE on x86-64 where it is a test level only (AUTO never
                              picks it there); the model engine's float products at this level
                              give its scalar path's logits bit for bit */
} iqf_simd;

/* The best level this CPU supports (never returns IQF_SIMD_AUTO): AVX-512 or AVX2 on x86-64,
 * NEON on arm64 (built with GCC or clang), else scalar. */
IQF_API iqf_simd iqf_simd_detect(void);
IQF_API const char *iqf_simd_name(iqf_simd s);

typedef struct iqf_quantize_params {
    iqf_mode mode;    /* IQF_MODE_COMPAT (default) or IQF_MODE_BEST; anything else: IQF_E_INVALID_ARG */
    int n_threads;    /* <= 0: one per online CPU. Output never depends on it. */
    iqf_simd simd;    /* IQF_SIMD_AUTO; a level the CPU lacks falls back to the best it has */
} iqf_quantize_params;

IQF_API iqf_quantize_params iqf_quantize_default_params(void);

/*
 * Quantize `nrows` rows of `ncols` float32 values from `src` into `dst`
 * (nrows * iqf_row_size(type, ncols) bytes).
 * `imatrix`: NULL, or `ncols` non-negative finite weights (one per column, used for every row).
 * Errors: IQF_E_UNKNOWN_TYPE, IQF_E_UNSUPPORTED (type has no encoder), IQF_E_SHAPE (ncols not a
 * multiple of the block size), IQF_E_NONFINITE (NaN/Inf in src: the message names row and column;
 * NaN/Inf/negative in imatrix), IQF_E_NEED_IMATRIX, IQF_E_INVALID_ARG, IQF_E_NOMEM.
 * On error nothing useful is in dst.
 */
IQF_API iqf_status iqf_quantize(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                        const float *imatrix, const iqf_quantize_params *params,
                        char *err, size_t errlen);

/*
 * GPTQ-style error feedback (src/quantize/feedback.h): like iqf_quantize, but the rows are encoded
 * left to right in units of the format's block (256 for K/IQ, 32 for legacy types), each unit from
 * the row's already-updated weights with the ordinary encoder of params->mode, and its rounding
 * error is pushed onto the later columns through the Cholesky factor of (H + damp*mean(diag H)*I)^-1.
 * `hessian`: H = E[x x^T] of the layer input, block-diagonal with blocks of `hblock` (ncols * hblock
 * floats; row k*hblock+i holds row i of block k; hblock <= 0 or == ncols: the full ncols x ncols
 * matrix). `imatrix`: the inner encoder's importance (NULL: diag(H)). With a diagonal H the bytes
 * are iqf_quantize's with that importance. Output independent of the thread count.
 * Errors: as iqf_quantize; IQF_E_INVALID_ARG (hblock does not divide ncols, damp < 0);
 * IQF_E_NONFINITE (H not finite, or not positive definite after dampening: "singular").
 */
IQF_API iqf_status iqf_quantize_feedback(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                                 const float *hessian, int64_t hblock, float damp, const float *imatrix,
                                 const iqf_quantize_params *params, char *err, size_t errlen);

/*
 * Decode `nrows` rows of `ncols` values of `type` from `src` to float32 `dst`.
 * Errors: IQF_E_UNKNOWN_TYPE, IQF_E_UNSUPPORTED, IQF_E_SHAPE, IQF_E_INVALID_ARG.
 */
IQF_API iqf_status iqf_dequantize(int type, const void *src, float *dst, int64_t nrows, int64_t ncols,
                          int n_threads, char *err, size_t errlen);

/* Number of online CPUs (>= 1). */
IQF_API int iqf_cpu_count(void);

/* ---------------------------------------------------------------------------------------------
 * GGUF container (src/gguf)
 * ------------------------------------------------------------------------------------------- */
/*
 * Reading. iqf_gguf_open maps a GGUF v2/v3 file read-only and validates ALL of it before it
 * returns: header, every KV, every tensor info, the data layout and that every tensor's bytes lie
 * inside the file. Afterwards no accessor can fail on file contents; they only fail on wrong
 * arguments (out-of-range index, wrong type) and then return NULL/false/-1 without crashing.
 * Memory used is metadata-sized (KV values are copied into an aligned arena, tensor infos into an
 * array); nothing is allocated in proportion to a count before that count has been checked
 * against the bytes left in the file.
 *
 * Errors (message "PATH: what is wrong", return NULL):
 *  - cannot open / stat / map; not a regular file; empty file
 *  - bad magic (not "GGUF"); version 0, 1 (GGUF v1 unsupported), > 3, or a byte-swapped
 *    (big-endian) version
 *  - truncation anywhere in the header, KVs or tensor infos ("truncated at byte N while reading X")
 *  - n_kv / n_tensors negative, or larger than the bytes left in the file could hold
 *  - a string or array whose length runs past the end of the file; a string longer than 1 GiB
 *    or an array of more than 2^30 elements (ggml's limits)
 *  - a key that is empty, longer than IQF_GGUF_MAX_KEY (65535) bytes, or contains a NUL byte;
 *    a duplicate key
 *  - an unknown KV type id (not 0..12), an array of arrays, an array with an unknown element type
 *  - general.alignment present but not a u32, zero, not a power of two, or > IQF_GGUF_MAX_ALIGN
 *    (64 MiB)
 *  - a tensor name that is empty, >= IQF_GGUF_MAX_NAME (64) bytes, or contains a NUL byte;
 *    a duplicate tensor name
 *  - n_dims 0 or > 4; a dimension <= 0 (ggml tolerates 0; we reject empty tensors);
 *    an element count or byte size that overflows int64
 *  - an unknown tensor type id (iqf_type_get() == NULL); ne[0] not a multiple of the block size
 *  - a tensor offset that differs from the layout ggml writes and checks
 *    (offset_0 = 0, offset_i = offset_{i-1} + PAD(nbytes_{i-1}, alignment)), which also rules out
 *    overlaps; tensor data running past the end of the file
 *
 * Strings returned by the accessors are NUL-terminated and live as long as the handle; string
 * values may also contain NUL bytes, so their length is returned separately.
 */
typedef struct iqf_gguf iqf_gguf;

/* KV value types; ids are GGUF's. */
typedef enum iqf_gguf_vtype {
    IQF_GGUF_U8 = 0,
    IQF_GGUF_I8 = 1,
    IQF_GGUF_U16 = 2,
    IQF_GGUF_I16 = 3,
    IQF_GGUF_U32 = 4,
    IQF_GGUF_I32 = 5,
    IQF_GGUF_F32 = 6,
    IQF_GGUF_BOOL = 7,   /* one byte; the reader and getters treat any non-zero as true */
    IQF_GGUF_STR = 8,
    IQF_GGUF_ARR = 9,
    IQF_GGUF_U64 = 10,
    IQF_GGUF_I64 = 11,
    IQF_GGUF_F64 = 12,
    IQF_GGUF_VTYPE_COUNT = 13,
} iqf_gguf_vtype;

#define IQF_GGUF_MAX_NAME 64               /* tensor names are shorter than this (GGML_MAX_NAME) */
#define IQF_GGUF_MAX_KEY 65535             /* longest key accepted */
#define IQF_GGUF_MAX_ALIGN (64u << 20)     /* largest general.alignment accepted */
#define IQF_GGUF_DEFAULT_ALIGN 32

/* "u8", "i8", ..., "str", "arr", "u64", "i64", "f64"; "?" for anything else. */
IQF_API const char *iqf_gguf_vtype_name(int vtype);

/* iqf_gguf_open also reads gguf-split models (llama.cpp's gguf-split: files
 * PREFIX-00001-of-0000N.gguf ... with split.no / split.count / split.tensors.count): given the
 * first part it opens and validates every part (each as above, and together: same split.count,
 * split.no 0..N-1 in file-name order, the same split.tensors.count equal to the total number of
 * tensors, tensor names unique across parts) and the handle shows the first part's KVs and the
 * tensors of all parts (each tensor's data in its own part's mapping; iqf_gguf_tensor.part says
 * which). Given another part, or a first part whose name does not follow the pattern, it fails
 * naming the file to open instead. A file with split.count 1 (or none) is just that file. */
IQF_API iqf_gguf *iqf_gguf_open(const char *path, char *err, size_t errlen);
/* Exactly one file, even a part of a split model (its own KVs and tensors). */
IQF_API iqf_gguf *iqf_gguf_open_part(const char *path, char *err, size_t errlen);
/* Parts of the model (1 for a lone file), their paths and sizes (i in 0..n_parts-1). */
IQF_API int iqf_gguf_n_parts(const iqf_gguf *g);
IQF_API const char *iqf_gguf_part_path(const iqf_gguf *g, int i);
IQF_API uint64_t iqf_gguf_part_size(const iqf_gguf *g, int i);
/* Same checks on a buffer the caller keeps alive (and unchanged) until iqf_gguf_close;
 * `name` is used in messages. Tensor data pointers point into `data`. */
IQF_API iqf_gguf *iqf_gguf_open_memory(const void *data, size_t size, const char *name, char *err, size_t errlen);
IQF_API void iqf_gguf_close(iqf_gguf *g); /* NULL is fine */

IQF_API const char *iqf_gguf_path(const iqf_gguf *g);   /* the path or name given at open */
IQF_API uint32_t iqf_gguf_version(const iqf_gguf *g);   /* 2 or 3 */
IQF_API size_t iqf_gguf_alignment(const iqf_gguf *g);
IQF_API size_t iqf_gguf_data_offset(const iqf_gguf *g); /* file offset of the data section */
IQF_API uint64_t iqf_gguf_file_size(const iqf_gguf *g);

/* KVs, in file order. Index arguments out of range give NULL / -1 / false. */
IQF_API int64_t iqf_gguf_n_kv(const iqf_gguf *g);
IQF_API int64_t iqf_gguf_find_kv(const iqf_gguf *g, const char *key); /* index or -1 */
IQF_API const char *iqf_gguf_kv_key(const iqf_gguf *g, int64_t i);
IQF_API int iqf_gguf_kv_type(const iqf_gguf *g, int64_t i);      /* iqf_gguf_vtype, -1 if i is bad */
/* Pointer to the value in host layout, suitably aligned: for a scalar the one value (bool: one
 * uint8_t as stored, non-zero = true; string: the NUL-terminated text); for an array of
 * numbers/bools its n packed elements; NULL for an array of strings (use iqf_gguf_arr_str). */
IQF_API const void *iqf_gguf_kv_value(const iqf_gguf *g, int64_t i);
/* Byte length of a string value (scalar STR), else 0. */
IQF_API size_t iqf_gguf_kv_str_len(const iqf_gguf *g, int64_t i);

/* Arrays. arr_type: element type, or -1 if kv i is not an array. arr_n: element count or 0. */
IQF_API int iqf_gguf_arr_type(const iqf_gguf *g, int64_t i);
IQF_API uint64_t iqf_gguf_arr_n(const iqf_gguf *g, int64_t i);
/* The checked accessor: the packed, aligned elements if kv i is an array whose element type is
 * exactly `elem_type` (a numeric or bool type), else NULL. *n = element count (0 on failure). */
IQF_API const void *iqf_gguf_arr_data(const iqf_gguf *g, int64_t i, int elem_type, uint64_t *n);
/* Element j of an array of strings (NUL-terminated; *len its length, may be NULL), or NULL. */
IQF_API const char *iqf_gguf_arr_str(const iqf_gguf *g, int64_t i, uint64_t j, size_t *len);
/* Element j of an array of exactly this type; false on a type mismatch or bad index. */
IQF_API bool iqf_gguf_arr_f32(const iqf_gguf *g, int64_t i, uint64_t j, float *out);
IQF_API bool iqf_gguf_arr_i32(const iqf_gguf *g, int64_t i, uint64_t j, int32_t *out);
IQF_API bool iqf_gguf_arr_u32(const iqf_gguf *g, int64_t i, uint64_t j, uint32_t *out);
/* Element j of an array of any integer type (u64 values above INT64_MAX fail), or of floats. */
IQF_API bool iqf_gguf_arr_int(const iqf_gguf *g, int64_t i, uint64_t j, int64_t *out);
IQF_API bool iqf_gguf_arr_float(const iqf_gguf *g, int64_t i, uint64_t j, double *out); /* f32 or f64 */

/* Typed getters by key: false (and *out untouched) if the key is absent or its type is not
 * exactly the one asked for. Use find_kv + kv_type to tell the two apart. */
IQF_API bool iqf_gguf_get_u8(const iqf_gguf *g, const char *key, uint8_t *out);
IQF_API bool iqf_gguf_get_i8(const iqf_gguf *g, const char *key, int8_t *out);
IQF_API bool iqf_gguf_get_u16(const iqf_gguf *g, const char *key, uint16_t *out);
IQF_API bool iqf_gguf_get_i16(const iqf_gguf *g, const char *key, int16_t *out);
IQF_API bool iqf_gguf_get_u32(const iqf_gguf *g, const char *key, uint32_t *out);
IQF_API bool iqf_gguf_get_i32(const iqf_gguf *g, const char *key, int32_t *out);
IQF_API bool iqf_gguf_get_u64(const iqf_gguf *g, const char *key, uint64_t *out);
IQF_API bool iqf_gguf_get_i64(const iqf_gguf *g, const char *key, int64_t *out);
IQF_API bool iqf_gguf_get_f32(const iqf_gguf *g, const char *key, float *out);
IQF_API bool iqf_gguf_get_f64(const iqf_gguf *g, const char *key, double *out);
IQF_API bool iqf_gguf_get_bool(const iqf_gguf *g, const char *key, bool *out);
/* String value (NUL-terminated) and its length (len may be NULL). */
IQF_API bool iqf_gguf_get_str(const iqf_gguf *g, const char *key, const char **out, size_t *len);
/* Lenient: any scalar integer type (u8..i64; u64 above INT64_MAX fails). Not bool. */
IQF_API bool iqf_gguf_get_int(const iqf_gguf *g, const char *key, int64_t *out);
/* Lenient: f32 or f64. */
IQF_API bool iqf_gguf_get_float(const iqf_gguf *g, const char *key, double *out);
/* Array by key with an exact element type (numeric/bool): elements or NULL; *n the count. */
IQF_API const void *iqf_gguf_get_arr(const iqf_gguf *g, const char *key, int elem_type, uint64_t *n);

/* Tensors, in file order. */
typedef struct iqf_gguf_tensor {
    const char *name;    /* NUL-terminated, < IQF_GGUF_MAX_NAME bytes */
    int n_dims;          /* 1..4 */
    int64_t ne[4];       /* elements per dimension, ne[0] the row length; unused dims are 1 */
    int type;            /* iqf_type id (iqf_type_get(type) != NULL) */
    uint64_t offset;     /* relative to the data section */
    size_t nbytes;       /* exact size (no padding) */
    const void *data;    /* mapped bytes (read-only), alignment-aligned relative to file start */
    int part;            /* index of the split part holding it (0 for a lone file) */
} iqf_gguf_tensor;

IQF_API int64_t iqf_gguf_n_tensors(const iqf_gguf *g);
IQF_API const iqf_gguf_tensor *iqf_gguf_tensor_at(const iqf_gguf *g, int64_t i); /* NULL if i bad */
IQF_API int64_t iqf_gguf_find_tensor(const iqf_gguf *g, const char *name);       /* index or -1 */
IQF_API int64_t iqf_gguf_tensor_nelements(const iqf_gguf_tensor *t);

/* A model whose tensor bytes are produced on demand rather than mapped (iqf_convert_open: a Hugging
 * Face checkpoint converted in memory). iqf_gguf_open_source reads the metadata of a GGUF file
 * (meta_size bytes: header, KVs, tensor infos, padding, e.g. from iqf_gguf_writer_header_bytes;
 * copied) describing a file of file_size bytes, with every check of iqf_gguf_open but the data's
 * presence; the tensors' `data` is NULL and iqf_gguf_tensor_load produces their bytes. src->close
 * (may be NULL) releases src->user when the handle is closed, or at once if the open fails.
 * Code that reads tensor data of any handle goes through iqf_gguf_tensor_load/unload: for a
 * mapped file, load returns t->data and unload does nothing. For a source, load calls src->read
 * into a buffer of t->nbytes owned by the handle (one tensor at a time: loading another tensor
 * or unloading this one frees it) and returns NULL with "FILE: what is wrong" in err on failure. */
typedef struct iqf_gguf_source {
    void *user;
    /* Writes the nbytes bytes of tensor `index` (its declared type and shape) to dst. */
    iqf_status (*read)(void *user, int64_t index, void *dst, char *err, size_t errlen);
    void (*close)(void *user);
    /* Optional (NULL: whole tensors through read): rows row0 .. row0 + nrows - 1 of tensor
     * `index` (rows over ne[1] * ne[2] * ne[3]), their bytes to dst. */
    iqf_status (*read_rows)(void *user, int64_t index, int64_t row0, int64_t nrows, void *dst, char *err, size_t errlen);
} iqf_gguf_source;
IQF_API iqf_gguf *iqf_gguf_open_source(const void *meta, size_t meta_size, uint64_t file_size, const char *name,
                                       const iqf_gguf_source *src, char *err, size_t errlen);
IQF_API bool iqf_gguf_is_source(const iqf_gguf *g);
IQF_API const void *iqf_gguf_tensor_load(iqf_gguf *g, const iqf_gguf_tensor *t, char *err, size_t errlen);
IQF_API void iqf_gguf_tensor_unload(iqf_gguf *g, const iqf_gguf_tensor *t);
/* Rows row0 .. row0 + nrows - 1 of t (rows over ne[1] * ne[2] * ne[3]): for a mapped file or a
 * materialized source a pointer into the tensor; for a source with read_rows those rows alone,
 * produced into the handle's buffer (valid until the next load or unload), so that a consumer
 * reading a tensor slab by slab holds one slab, not the tensor; for a source without it the whole
 * tensor is loaded (iqf_gguf_tensor_load) and the pointer is into it. NULL with "FILE: what" in
 * err on failure or rows out of range. Release with iqf_gguf_tensor_unload. */
IQF_API const void *iqf_gguf_tensor_load_rows(iqf_gguf *g, const iqf_gguf_tensor *t, int64_t row0, int64_t nrows,
                                              char *err, size_t errlen);
/* Every tensor of a source produced at once into memory the handle owns: afterwards each
 * tensor's `data` points at its bytes (laid out as in the file's data section) and load/unload
 * behave as for a mapped file. For a consumer that reads any tensor at any time (the inference
 * engine); costs the data section's size in memory. Does nothing on a mapped file. Errors:
 * IQF_E_NOMEM, or the status of the source's failure with its "FILE: what" in err; the handle
 * is unchanged then. */
IQF_API iqf_status iqf_gguf_materialize(iqf_gguf *g, char *err, size_t errlen);

/*
 * Schema. The keys llama.cpp reads for the models it loads (general.architecture, alignment,
 * file_type, name; every {arch}.* hyper-parameter of llama_model::load_hparams such as
 * context_length, embedding_length, block_count, feed_forward_length, attention.head_count(_kv),
 * rope.*, layer_norm_rms_epsilon, expert_*, vocab_size; tokenizer.ggml.* and tokenizer.chat_template;
 * split.no/count/tensors.count) must have llama.cpp's exact GGUF type (u32 hyper-parameters,
 * f32 epsilons, arr[str] tokens and merges, arr[f32] scores and arr[i32] token_type with one
 * element per token, u32 token ids, u16 split.no/split.count, i32 split.tensors.count) and a sane
 * range (token ids below the vocabulary size, token types 0..6, block_count 1..512, per-layer
 * arrays of block_count elements, head_count dividing embedding_length, head_count_kv dividing
 * head_count, for llama rope.dimension_count = embedding_length / head_count, positive finite
 * epsilons and rope bases, expert_used_count <= expert_count, split.no < split.count).
 * Other keys are not checked.
 * iqf_gguf_check_kv: IQF_OK, or IQF_E_FORMAT with "key K has type T, llama.cpp reads U" / "key K:
 * what is wrong" (no path); IQF_E_INVALID_ARG for a bad index.
 * iqf_gguf_check_schema: every KV plus keys that need each other (tokens for a tokenizer model,
 * split.no with split.count); the first problem as "PATH: key K ...", IQF_E_FORMAT.
 */
IQF_API iqf_status iqf_gguf_check_kv(const iqf_gguf *g, int64_t i, char *err, size_t errlen);
IQF_API iqf_status iqf_gguf_check_schema(const iqf_gguf *g, char *err, size_t errlen);

/*
 * Writing (streaming, bounded memory). Order of calls:
 *   w = iqf_gguf_writer_open(path)            temp file next to path (src/util/outfile.h)
 *   iqf_gguf_writer_set_input(w, in)          optional, per input: refuse writing over an input
 *   set_* / copy_kv / remove ...              KVs, any order
 *   iqf_gguf_writer_add_tensor(...)           every tensor info, in the order data will follow
 *   iqf_gguf_writer_write_header(w)           header + KVs + infos + padding
 *   iqf_gguf_writer_write_data(w, p, n) ...   tensor bytes in order, any chunking; the writer
 *                                             pads to the alignment between tensors itself
 *   iqf_gguf_writer_finish(w)                 checks completeness, fsync + rename; frees w
 * or iqf_gguf_writer_abort(w) at any point    removes the temp file; frees w
 * The output layout is ggml's (gguf.cpp): v3, KVs in order, infos in order,
 * offset_i = offset_{i-1} + PAD(nbytes_{i-1}, align), zero padding after every tensor, where align
 * is general.alignment (must then be a u32 power of two <= IQF_GGUF_MAX_ALIGN) or 32.
 * (ggml itself ignores general.alignment set on a context it did not read and lays out at 32;
 * files without that key, i.e. nearly all, are byte-identical to gguf_write_to_file's.)
 * Every call after a failure fails again with the same message (errors are sticky); only
 * finish/abort free the writer. A file that does not end up complete never appears at `path`.
 * Errors: IQF_E_INVALID_ARG (NULL/empty key or name, unknown vtype, same file as an input, call
 * out of order, more/less data than the tensors need), IQF_E_UNKNOWN_TYPE, IQF_E_SHAPE (bad dims,
 * ne[0] not a multiple of the block size, overflow), IQF_E_IO (any write/fsync/rename failure,
 * e.g. ENOSPC on /dev/full), IQF_E_NOMEM.
 */
typedef struct iqf_gguf_writer iqf_gguf_writer;

IQF_API iqf_gguf_writer *iqf_gguf_writer_open(const char *path, char *err, size_t errlen);
IQF_API iqf_status iqf_gguf_writer_set_input(iqf_gguf_writer *w, const char *input_path);
/* The last error message of the writer ("" if none). Valid until finish/abort. */
IQF_API const char *iqf_gguf_writer_error(const iqf_gguf_writer *w);

/* Set a KV. As ggml's gguf_set_*: an existing key is removed first and the new value is
 * appended at the end (so setting general.file_type after copying all KVs moves it last). */
IQF_API iqf_status iqf_gguf_writer_set_u8(iqf_gguf_writer *w, const char *key, uint8_t v);
IQF_API iqf_status iqf_gguf_writer_set_i8(iqf_gguf_writer *w, const char *key, int8_t v);
IQF_API iqf_status iqf_gguf_writer_set_u16(iqf_gguf_writer *w, const char *key, uint16_t v);
IQF_API iqf_status iqf_gguf_writer_set_i16(iqf_gguf_writer *w, const char *key, int16_t v);
IQF_API iqf_status iqf_gguf_writer_set_u32(iqf_gguf_writer *w, const char *key, uint32_t v);
IQF_API iqf_status iqf_gguf_writer_set_i32(iqf_gguf_writer *w, const char *key, int32_t v);
IQF_API iqf_status iqf_gguf_writer_set_u64(iqf_gguf_writer *w, const char *key, uint64_t v);
IQF_API iqf_status iqf_gguf_writer_set_i64(iqf_gguf_writer *w, const char *key, int64_t v);
IQF_API iqf_status iqf_gguf_writer_set_f32(iqf_gguf_writer *w, const char *key, float v);
IQF_API iqf_status iqf_gguf_writer_set_f64(iqf_gguf_writer *w, const char *key, double v);
IQF_API iqf_status iqf_gguf_writer_set_bool(iqf_gguf_writer *w, const char *key, bool v);
IQF_API iqf_status iqf_gguf_writer_set_str(iqf_gguf_writer *w, const char *key, const char *v); /* strlen */
IQF_API iqf_status iqf_gguf_writer_set_strn(iqf_gguf_writer *w, const char *key, const char *v, size_t len);
/* Array of n numeric/bool elements of `elem_type`, packed in host layout (bool: 1 byte each). */
IQF_API iqf_status iqf_gguf_writer_set_arr(iqf_gguf_writer *w, const char *key, int elem_type,
                                   const void *data, uint64_t n);
/* Array of n strings; lens may be NULL (then strlen of each). */
IQF_API iqf_status iqf_gguf_writer_set_arr_str(iqf_gguf_writer *w, const char *key, const char *const *v,
                                       const size_t *lens, uint64_t n);
/* Copy kv i of a reader verbatim (same key, type and value). */
IQF_API iqf_status iqf_gguf_writer_copy_kv(iqf_gguf_writer *w, const iqf_gguf *g, int64_t i);
/* Remove a key; true if it was there. */
IQF_API bool iqf_gguf_writer_remove(iqf_gguf_writer *w, const char *key);
/* Remove every key starting with `prefix` (e.g. "split."); returns how many. */
IQF_API int64_t iqf_gguf_writer_remove_prefix(iqf_gguf_writer *w, const char *prefix);
IQF_API int64_t iqf_gguf_writer_n_kv(const iqf_gguf_writer *w);

/* Declare a tensor (before write_header). ne[0] is the row length; ne[0..n_dims-1] > 0.
 * As ggml, trailing dimensions of 1 are dropped from the written n_dims (64x1 is written 1-D);
 * bool KVs are written as 0/1. */
IQF_API iqf_status iqf_gguf_writer_add_tensor(iqf_gguf_writer *w, const char *name, int n_dims,
                                      const int64_t *ne, int type);
IQF_API iqf_status iqf_gguf_writer_write_header(iqf_gguf_writer *w);
/* Next n bytes of tensor data (may span tensors; must not exceed what remains). */
IQF_API iqf_status iqf_gguf_writer_write_data(iqf_gguf_writer *w, const void *data, size_t n);
/* Bytes of the declared tensors still to be written (padding excluded). */
IQF_API uint64_t iqf_gguf_writer_data_remaining(const iqf_gguf_writer *w);
/* Commit. On failure the temp file is removed and the message is written to err. Frees w. */
IQF_API iqf_status iqf_gguf_writer_finish(iqf_gguf_writer *w, char *err, size_t errlen);
IQF_API void iqf_gguf_writer_abort(iqf_gguf_writer *w); /* NULL is fine */
/* A writer with no file: KVs and tensors are declared as on any writer, and
 * iqf_gguf_writer_size says how many bytes the file would have; write_header and write_data
 * fail on it (IQF_E_INVALID_ARG). Release it with iqf_gguf_writer_abort. NULL: out of memory. */
IQF_API iqf_gguf_writer *iqf_gguf_writer_open_sizing(void);
/* The size of the file as declared so far (header + KVs + tensor infos padded to the alignment,
 * then every tensor's data padded): the whole file returned, the metadata part in *meta (may be
 * NULL), the alignment in *align (may be NULL). 0 after an error or on an invalid alignment. */
IQF_API uint64_t iqf_gguf_writer_size(const iqf_gguf_writer *w, uint64_t *meta, uint64_t *align);
/* The metadata part of the file as declared so far (header, KVs, tensor infos, padding: the
 * *meta bytes of iqf_gguf_writer_size, exactly what write_header would write), in a malloc'd
 * buffer of *size bytes the caller frees; before write_header, on any writer (a sizing one
 * too), which stays usable. NULL after an error (iqf_gguf_writer_error says which). */
IQF_API void *iqf_gguf_writer_header_bytes(iqf_gguf_writer *w, size_t *size);

/* ---------------------------------------------------------------------------------------------
 * Model quantization: recipes and importance matrices (src/quantize)
 * ------------------------------------------------------------------------------------------- */
/* llama's file types (`general.file_type`, llama_ftype ids of llama 0.25.1). */
typedef enum iqf_ftype {
    IQF_FTYPE_ALL_F32 = 0,
    IQF_FTYPE_MOSTLY_F16 = 1,
    IQF_FTYPE_MOSTLY_Q4_0 = 2,
    IQF_FTYPE_MOSTLY_Q4_1 = 3,
    IQF_FTYPE_MOSTLY_Q8_0 = 7,
    IQF_FTYPE_MOSTLY_Q5_0 = 8,
    IQF_FTYPE_MOSTLY_Q5_1 = 9,
    IQF_FTYPE_MOSTLY_Q2_K = 10,
    IQF_FTYPE_MOSTLY_Q3_K_S = 11,
    IQF_FTYPE_MOSTLY_Q3_K_M = 12,
    IQF_FTYPE_MOSTLY_Q3_K_L = 13,
    IQF_FTYPE_MOSTLY_Q4_K_S = 14,
    IQF_FTYPE_MOSTLY_Q4_K_M = 15,
    IQF_FTYPE_MOSTLY_Q5_K_S = 16,
    IQF_FTYPE_MOSTLY_Q5_K_M = 17,
    IQF_FTYPE_MOSTLY_Q6_K = 18,
    IQF_FTYPE_MOSTLY_IQ2_XXS = 19,
    IQF_FTYPE_MOSTLY_IQ2_XS = 20,
    IQF_FTYPE_MOSTLY_Q2_K_S = 21,
    IQF_FTYPE_MOSTLY_IQ3_XS = 22,
    IQF_FTYPE_MOSTLY_IQ3_XXS = 23,
    IQF_FTYPE_MOSTLY_IQ1_S = 24,
    IQF_FTYPE_MOSTLY_IQ4_NL = 25,
    IQF_FTYPE_MOSTLY_IQ3_S = 26,
    IQF_FTYPE_MOSTLY_IQ3_M = 27,
    IQF_FTYPE_MOSTLY_IQ2_S = 28,
    IQF_FTYPE_MOSTLY_IQ2_M = 29,
    IQF_FTYPE_MOSTLY_IQ4_XS = 30,
    IQF_FTYPE_MOSTLY_IQ1_M = 31,
    IQF_FTYPE_MOSTLY_BF16 = 32,
    IQF_FTYPE_MOSTLY_TQ1_0 = 36,
    IQF_FTYPE_MOSTLY_TQ2_0 = 37,
    IQF_FTYPE_MOSTLY_MXFP4_MOE = 38,
    IQF_FTYPE_MOSTLY_NVFP4 = 39,
    IQF_FTYPE_MOSTLY_Q1_0 = 40,
    IQF_FTYPE_MOSTLY_Q2_0 = 41,
} iqf_ftype;

/* The file type for a llama-quantize type name ("IQ3_XXS", "q4_k_m", aliases "Q4_K" = Q4_K_M,
 * "Q3_K", "Q5_K"; case-insensitive) or a decimal ftype id; -1 if unknown. */
IQF_API int iqf_ftype_from_name(const char *name);
/* llama-quantize's name of a file type ("IQ3_XXS"), or NULL. */
IQF_API const char *iqf_ftype_name(int ftype);
/* The tensor type a file type defaults to (llama_ftype_get_default_type), or -1. */
IQF_API int iqf_ftype_default_type(int ftype);

/* A file type name quantize accepts. */
typedef struct iqf_ftype_info {
    const char *name;    /* "Q4_K_M"; an alias ("Q4_K") when iqf_ftype_name(ftype) is another */
    int ftype;           /* IQF_FTYPE_* */
    const char *note;    /* what the help says of it, or NULL */
} iqf_ftype_info;
/* The i-th file type name (from 0), in the help's order: by family (IQ, K, legacy, FP4, low-bit,
 * float), then by the default type's bits per weight; NULL past the last. */
IQF_API const iqf_ftype_info *iqf_ftype_at(int i);

/* --override-kv KEY=TYPE:VALUE, as llama's llama_model_kv_override. Written to the output after
 * the input's KVs (int as u32 of |value|, float as f32, bool, str), and int overrides of the
 * {arch}.block_count / attention.head_count(_kv) / expert_count hyper-parameters are what the type
 * recipe sees (llama's loader applies them). */
typedef enum iqf_kv_override_tag {
    IQF_KV_OVERRIDE_INT = 0,
    IQF_KV_OVERRIDE_FLOAT = 1,
    IQF_KV_OVERRIDE_BOOL = 2,
    IQF_KV_OVERRIDE_STR = 3,
} iqf_kv_override_tag;

typedef struct iqf_kv_override {
    char key[128];
    iqf_kv_override_tag tag;
    int64_t val_i64;
    double val_f64;
    bool val_bool;
    char val_str[128];
} iqf_kv_override;

/* Parses "KEY=TYPE:VALUE" (TYPE int, float, bool, str) as llama's string_parse_kv_override,
 * but strictly: KEY 1..127 bytes; int a whole decimal number with |value| <= 4294967295 (written
 * as u32 of its absolute value, as llama-quantize does); float a finite number; bool "true" or
 * "false"; str at most 127 bytes. Errors: IQF_E_INVALID_ARG with a message naming the problem. */
IQF_API iqf_status iqf_kv_override_parse(const char *arg, iqf_kv_override *out, char *err, size_t errlen);

/* Progress of a model quantization (iqf_model_quantize, iqf_target_quantize; iqf_target_plan_make
 * while it measures the tensors): called on the calling thread before each tensor and after each
 * slab of rows, with the tensor's 1-based index `item` of n_items, its name, the stage (`what`:
 * the target type's name, or "measure"), and the input bytes done of total_bytes; then once more
 * at the end with name NULL. Not called for a dry run. It must not call back into the job. The
 * library prints no progress itself (the CLI's line is drawn by this callback). */
typedef void (*iqf_quantize_progress_fn)(void *user, int item, int n_items, const char *name,
                                         const char *what, int64_t done_bytes, int64_t total_bytes);

/* Options of `iqforge quantize`, as llama-quantize's. */
typedef struct iqf_model_quantize_params {
    int ftype;                   /* IQF_FTYPE_* */
    int n_threads;               /* <= 0: one per CPU. The output never depends on it. */
    int output_tensor_type;      /* --output-tensor-type; -1: recipe */
    int token_embedding_type;    /* --token-embedding-type; -1: recipe */
    bool allow_requantize;       /* --allow-requantize */
    bool leave_output_tensor;    /* --leave-output-tensor */
    bool pure;                   /* --pure */
    bool dry_run;                /* --dry-run: print the plan, write nothing */
    bool quiet;                  /* no per-tensor log lines */
    const char *imatrix_path;    /* --imatrix (GGUF or legacy .dat), or NULL */
    const char *const *include_weights; /* --include-weights (substrings), n_include of them */
    int n_include;
    const char *const *exclude_weights; /* --exclude-weights */
    int n_exclude;
    const char *const *tensor_type_patterns; /* --tensor-type PATTERN=TYPE: the patterns ... */
    const int *tensor_type_types;            /* ... and their types */
    int n_tensor_types;
    const iqf_kv_override *kv_overrides;     /* --override-kv, applied in order */
    int n_kv_overrides;
    /* --prune-layers: blk.N tensors of these layers are dropped and the later layers renumbered
     * (llama's remap_layer), {arch}.block_count set to the layers kept. Sorted, unique, >= 0. */
    const int *prune_layers;
    int n_prune_layers;
    /* --keep-split: a split input gives as many output parts, `out` being the prefix (a ".gguf"
     * in it drops the last 5 characters, as llama-quantize), written as PREFIX-%05d-of-%05d.gguf
     * with the tensors of each input part in file order, the KVs in the first part and split.no,
     * split.count, split.tensors.count in each. All parts appear together or none. */
    bool keep_split;
    iqf_mode mode;               /* --mode: the encoder (COMPAT default: llama-quantize's bytes).
                                    A mode other than COMPAT is recorded as quantize.mode. */
    /* Called after every slab of a tensor is encoded, with its blocks (n rows of ncols
     * weights of `type`), before they are written: for instrumentation and for tests that
     * need a deliberately damaged file (the ladder's alarm test). NULL: none. It may modify
     * the blocks; it must not fail. */
    void (*post_encode)(void *user, const char *tensor, int type, void *blocks, int64_t nrows,
                        int64_t ncols);
    void *post_encode_user;
    /* Asked before each slab of a tensor is encoded (rows row0 .. row0 + nrows - 1 of `type`):
     * true when it wrote those rows' blocks to dst itself (blocks encoded earlier with the same
     * encoder and options: --target-size's check against the recipe keeps them), so the slab
     * is neither read nor encoded. NULL: none. */
    bool (*pre_encoded)(void *user, const char *tensor, int type, int64_t row0, int64_t nrows, int64_t ncols,
                        void *dst);
    void *pre_encoded_user;
    /* --hessian: a Hessian file (`iqforge imatrix --hessian`) for GPTQ-style error feedback
     * (iqf_quantize_feedback) on every tensor it has an entry for; the others use the plain
     * encoder (the log says which). Recorded as quantize.feedback.{file,token_count,damp}.
     * NULL: none. Errors (before any output): the file's own (IQF_E_IO, IQF_E_FORMAT,
     * IQF_E_NONFINITE), IQF_E_SHAPE (made for another model, or an entry of the wrong width). */
    const char *hessian_path;
    float hessian_damp;          /* --hessian-damp: fraction of mean(diag H) added (default 0.01) */
    /* Progress (NULL, the default: none), independent of `quiet`; see iqf_quantize_progress_fn. */
    iqf_quantize_progress_fn progress;
    void *progress_user;
    /* The input already open (NULL, the default: `in` is opened with iqf_gguf_open), e.g. a
     * Hugging Face checkpoint from iqf_convert_open, read tensor by tensor through
     * iqf_gguf_tensor_load; `in` then only names it in messages. The caller keeps it and closes
     * it after the call. --target-size measures its tensors row by row through it, as a file. */
    iqf_gguf *input;
} iqf_model_quantize_params;

IQF_API iqf_model_quantize_params iqf_model_quantize_default_params(void);

typedef struct iqf_model_quantize_report {
    int n_tensors;
    int n_quantized;
    int n_fallback;
    int64_t n_elements;
    uint64_t size_in;    /* tensor data bytes */
    uint64_t size_out;
    double seconds;
} iqf_model_quantize_report;

/*
 * Quantizes the GGUF model `in` to `out` as llama-quantize does (same per-tensor types, same
 * bytes, same metadata). The output appears whole or not at all. Log lines go to `log` (NULL:
 * none). Errors: IQF_E_IO, IQF_E_FORMAT (corrupt GGUF or imatrix), IQF_E_UNSUPPORTED (input
 * type, or a target type this build cannot encode), IQF_E_NEED_IMATRIX, IQF_E_NONFINITE,
 * IQF_E_SHAPE (imatrix made for another model), IQF_E_INVALID_ARG.
 */
IQF_API iqf_status iqf_model_quantize(const char *in, const char *out,
                              const iqf_model_quantize_params *params,
                              iqf_model_quantize_report *report, FILE *log,
                              char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Inference: model, tokenizer, evaluation (src/model)
 * ------------------------------------------------------------------------------------------- */
/*
 * Loading. iqf_model_load maps a GGUF file with the GGUF reader and checks that it is a llama-
 * architecture model (general.architecture "llama"; mistral checkpoints converted by llama.cpp
 * use it too, and Mixtral-style MoE with expert_count > 0) or a "qwen2", "qwen3", "qwen3moe",
 * "gemma3" or "gpt-oss" model (src/model/arch.c), whose tensors are all present with the shapes the hyperparameters imply. Weights
 * stay in the file's types; matrix products decode them tile by tile.
 * Errors: IQF_E_IO (open/map), IQF_E_FORMAT (not GGUF, missing or inconsistent key or tensor,
 * "unsupported architecture"), IQF_E_UNSUPPORTED (a weight type this build cannot decode),
 * IQF_E_NOMEM; with a one-line message "PATH: what is wrong".
 */
typedef struct iqf_model iqf_model;
typedef struct iqf_context iqf_context;

typedef struct iqf_model_info {
    char arch[32];
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, n_rot, n_ctx_train;
    float rope_base;   /* llama.rope.freq_base, default 10000 */
    float rms_eps;     /* llama.attention.layer_norm_rms_epsilon, default 1e-5 */
    int bos_id, eos_id;        /* -1 if absent */
    bool add_bos;              /* tokenizer.ggml.add_bos_token (default true for "llama" vocab) */
    bool tied_output;          /* output.weight absent: token_embd is used */
    int64_t n_params;
    /* Architectures beyond llama (general.architecture llama, qwen2, qwen3, qwen3moe). */
    int head_dim;              /* attention.key_length (default n_embd / n_head) */
    bool rope_neox;            /* NEOX rope (qwen*): pairs (i, i + n_rot/2) instead of (2i, 2i+1) */
    int n_expert, n_expert_used; /* mixture of experts: expert_count, expert_used_count; 0 if dense */
    int n_ff_exp;              /* an expert's FFN width (qwen3moe expert_feed_forward_length; Mixtral n_ff) */
    bool expert_weights_norm;  /* renormalise the top-k router weights (Mixtral, qwen3moe) */
    /* RoPE scaling as libllama applies it: positions times rope_freq_scale
     * (1 / rope.scaling.factor for scaling type "linear", "yarn" or absent, 1 for "none" or
     * factor 0), cos/sin times rope_attn_factor (rope.scaling.attn_factor, default 1; for "yarn"
     * times llama_context's YaRN attn_factor, 1 + 0.1 ln factor over itself). */
    float rope_freq_scale, rope_attn_factor;
} iqf_model_info;

/* Importance-matrix lookup for simulated quantization: the mean-x^2 row for weight `name`
 * (n = its row length floats), or NULL if there is none. */
typedef const float *(*iqf_imatrix_lookup_fn)(void *user, const char *name, int64_t n);

typedef struct iqf_model_params {
    /* Simulated quantization: -1 = off. Otherwise every blk.*.{attn_q,attn_k,attn_v,attn_output,
     * ffn_gate,ffn_up,ffn_down}.weight is read as float32, cut into rows of 256 in row-major
     * order, quantized with iqf_quantize to this type and decoded back (float32 kept in memory).
     * The importance row of a 256-chunk at flat index f is im[(f + j) mod ncols]. */
    int simulate_type;
    iqf_mode simulate_mode;         /* the encoder used by the simulation (default COMPAT) */
    iqf_imatrix_lookup_fn imatrix;  /* NULL: no imatrix */
    void *imatrix_user;
    int n_threads;                  /* for the simulation; <= 0: all CPUs */
} iqf_model_params;

IQF_API iqf_model_params iqf_model_default_params(void);
IQF_API iqf_status iqf_model_load(const char *path, const iqf_model_params *params, iqf_model **out,
                          char *err, size_t errlen);
/* The same from an open GGUF handle, e.g. a Hugging Face checkpoint converted in memory
 * (iqf_convert_open): a source handle has every tensor produced into memory first
 * (iqf_gguf_materialize), so the model costs the converted file's size in memory. take: the model
 * owns g (closed by iqf_model_free, or at once when the load fails); else the caller keeps g open
 * while the model lives and closes it afterwards. Messages name iqf_gguf_path(g). */
IQF_API iqf_status iqf_model_load_gguf(iqf_gguf *g, bool take, const iqf_model_params *params, iqf_model **out,
                                       char *err, size_t errlen);
IQF_API void iqf_model_free(iqf_model *m); /* NULL is fine */
IQF_API const iqf_model_info *iqf_model_get_info(const iqf_model *m);
/* The GGUF the model was loaded from (for the tokenizer); lives as long as the model. */
IQF_API const iqf_gguf *iqf_model_gguf(const iqf_model *m);

/* A context: KV cache for n_ctx positions, scratch buffers and a pool of n_threads threads
 * (<= 0: all CPUs). One context is used by one thread at a time.
 * Numerics: activations, KV cache and softmax are float32. Matrix products decode tiles of 16
 * weight rows to float32 and multiply them with AVX2/FMA (or portable C); IQ3_XXS weights on AVX2
 * CPUs take ggml's integer route instead (activations quantized to Q8_K, int8 dot products,
 * AVX-512 VNNI when present), so their results track llama.cpp's. Every product with quantized
 * (or F16/BF16) weights first rounds its activation rows to the weight type's ggml vec_dot_type
 * (Q8_0, Q8_1, Q8_K, F16, BF16), as ggml's CPU backend does.
 * Errors: IQF_E_INVALID_ARG (NULL model or out, n_ctx <= 0), IQF_E_NOMEM. */
IQF_API iqf_status iqf_context_new(const iqf_model *m, int n_ctx, int n_threads, iqf_context **out,
                           char *err, size_t errlen);
/* A context with every setting chosen (iqf_context_new = iqf_context_default_params() with its
 * n_ctx and n_threads). */
typedef struct iqf_context_params {
    int n_ctx;
    int n_threads;   /* <= 0: all CPUs */
    iqf_simd simd;   /* IQF_SIMD_AUTO; IQF_SIMD_SCALAR: the portable C path everywhere (float tiles
                        for every type); a level the CPU lacks falls back to the best it has */
    bool kv_f16;     /* llama.cpp's defaults (F16 K/V cache, CPU flash attention): the cache
                        entries rounded to F16, and attention rounded as ggml's flash attention
                        does on this CPU (its tiled path: f32 math; its one-row path for batches
                        under 64 rows or heads not a multiple of the f32 vector width: Q and the
                        V accumulator in F16). Logits agree with libllama's defaults to ~1e-6
                        (tests/model/test_model_kvf16.c) */
} iqf_context_params;

IQF_API iqf_context_params iqf_context_default_params(void); /* n_ctx 512, all CPUs, AUTO, F32 cache */
IQF_API iqf_status iqf_context_new_ex(const iqf_model *m, const iqf_context_params *p, iqf_context **out,
                              char *err, size_t errlen);
IQF_API void iqf_context_free(iqf_context *c);
IQF_API void iqf_context_reset(iqf_context *c); /* empties the KV cache */
IQF_API int iqf_context_n_ctx(const iqf_context *c);

/* Progress of the long evaluations on a context (iqf_perplexity, iqf_imatrix_collect[_ex]): fn
 * is called after each chunk with the chunks done, the chunks in all and the seconds since the
 * first chunk began, on the calling thread. fn NULL (the default): no calls. Never fails. */
typedef void (*iqf_eval_progress_fn)(void *user, int done, int total, double seconds);
IQF_API void iqf_context_set_progress(iqf_context *c, iqf_eval_progress_fn fn, void *user);

/* Evaluates tokens[0..n) at positions pos..pos+n-1 (pos <= positions already cached; later
 * cached positions are overwritten). Writes the logits of rows first_out..n-1 to `logits`
 * ((n - first_out) * n_vocab floats, row-major) unless logits is NULL. */
IQF_API iqf_status iqf_decode(iqf_context *c, const int32_t *tokens, int n, int pos, int first_out,
                      float *logits, char *err, size_t errlen);

/*
 * Perplexity as llama-perplexity computes it: the tokens are cut into n_chunks chunks of n_ctx
 * tokens (at most n_tokens / n_ctx; at least 2*n_ctx tokens needed), the first token of each
 * chunk replaced by BOS when the vocabulary adds BOS, each chunk evaluated with an empty KV
 * cache, and the next-token log-probabilities of positions n_ctx/2 .. n_ctx-2 scored.
 * KL-divergence: kld_base_out writes the base model's log-probabilities (llama-perplexity's
 * --kl-divergence-base format: "_logits_", n_ctx, n_vocab, n_chunk, the tokens, then per chunk
 * uint16-quantized log-probs of the scored positions); kld_in reads such a file and compares.
 */
typedef struct iqf_ppl_params {
    int n_ctx;                 /* tokens per chunk; the context must hold them */
    int n_chunks;              /* -1: all */
    const char *kld_base_out;  /* NULL or a file to write */
    const char *kld_in;        /* NULL or a file to compare against (then tokens may be NULL:
                                  the file's tokens are used) */
    FILE *log;                 /* NULL or where the "[1]6.1234,[2]..." progress goes */
} iqf_ppl_params;

typedef struct iqf_ppl_result {
    int n_chunks;
    int64_t n_scored;
    double ppl, ppl_err;       /* "Final estimate: PPL = ppl +/- ppl_err" */
    double seconds;            /* evaluation time (forward passes and scoring) */
    double tokens_per_second;  /* n_chunks * n_ctx / seconds */
    /* KL-divergence (kld_in set) */
    double ppl_base, ppl_base_err;
    double ln_ppl_ratio, ln_ppl_ratio_err, ppl_ratio, ppl_ratio_err;
    double kld_mean, kld_err, kld_median, kld_max, kld_p99, kld_p999;
    double same_top, same_top_err;     /* fractions */
    double dp_rms, dp_rms_err;         /* RMS of the probability difference, fraction */
} iqf_ppl_result;

IQF_API iqf_status iqf_perplexity(iqf_context *c, const int32_t *tokens, size_t n_tokens,
                          const iqf_ppl_params *p, iqf_ppl_result *res, char *err, size_t errlen);

/*
 * Importance-matrix collection (llama-imatrix's method): chunks of n_ctx tokens as for
 * perplexity (BOS first, fresh KV cache, all positions output), and for every blk.* matrix
 * product the sum of x^2 per input column over every token row, with the token count.
 */
typedef struct iqf_imatrix_data {
    int n_entries;
    char (*names)[96];         /* weight names, e.g. "blk.0.attn_q.weight" (sorted by name) */
    int64_t *ncols;            /* row length of each */
    float **sum2;              /* raw sums of x^2 (ncols floats each) */
    int64_t *counts;           /* token rows accumulated */
    int n_chunks;              /* chunks processed */
    int chunk_size;            /* n_ctx */
    double ppl;                /* perplexity of the second halves, as llama-imatrix prints */
    /* Expert tensors (MoE): n_mat[i] = n_expert and sum2[i] holds n_mat[i] sections of ncols
     * sums, mat_counts[i] the n_mat[i] per-expert row counts (as llama-imatrix writes them);
     * n_mat[i] = 1 and mat_counts[i] = &counts[i] for a plain matrix. */
    int *n_mat;
    int64_t **mat_counts;
} iqf_imatrix_data;

IQF_API iqf_status iqf_imatrix_collect(iqf_context *c, const int32_t *tokens, size_t n_tokens, int n_ctx,
                               int n_chunks, FILE *log, iqf_imatrix_data **out, char *err,
                               size_t errlen);

/* The same with its options in a struct. no_ppl (llama-imatrix's --no-ppl): no logits and no
 * running perplexity (d->ppl is then 0; log gets no per-chunk lines). The importance data and a
 * Hessian capture (hessian.h: output.weight's input is the final norm of every row, computed
 * with or without logits) are the same bits either way. Errors as iqf_imatrix_collect:
 * IQF_E_INVALID_ARG (NULL c/out/p, n_ctx outside [4, the context's], fewer than 2*n_ctx
 * tokens), IQF_E_NOMEM, and the errors of iqf_decode. */
typedef struct iqf_imatrix_params {
    int n_ctx;                 /* tokens per chunk; the context must hold them */
    int n_chunks;              /* -1: all */
    FILE *log;                 /* NULL or where the "[1]6.1234,[2]..." running perplexity goes */
    bool no_ppl;
} iqf_imatrix_params;
IQF_API iqf_status iqf_imatrix_collect_ex(iqf_context *c, const int32_t *tokens, size_t n_tokens,
                                  const iqf_imatrix_params *p, iqf_imatrix_data **out, char *err,
                                  size_t errlen);
IQF_API void iqf_imatrix_data_free(iqf_imatrix_data *d);

/* Saves an importance matrix collected by iqf_imatrix_collect[_ex] as llama-imatrix does: its
 * GGUF format (dat = false: general.type "imatrix", NAME.in_sum2 and NAME.counts per weight) or
 * the legacy .dat (dat = true). Both are read by llama-quantize and by iqf_model_quantize
 * (params.imatrix_path). dataset: the calibration text's name recorded in the file, or NULL.
 * Written whole or not at all. Errors: IQF_E_IO, IQF_E_INVALID_ARG, IQF_E_NOMEM. */
IQF_API iqf_status iqf_imatrix_data_save(const iqf_imatrix_data *d, const char *path, bool dat,
                                         const char *dataset, char *err, size_t errlen);

/* An importance-matrix file (llama-imatrix's GGUF or legacy .dat), read and validated whole
 * (input is treated as hostile: "PATH: what is wrong"). Errors: IQF_E_IO, IQF_E_FORMAT,
 * IQF_E_NOMEM. */
typedef struct iqf_imatrix_file iqf_imatrix_file;
IQF_API iqf_status iqf_imatrix_file_load(const char *path, iqf_imatrix_file **out, char *err,
                                         size_t errlen);
IQF_API void iqf_imatrix_file_free(iqf_imatrix_file *f); /* NULL is fine */
/* The values of weight `name` as llama-quantize hands them to the quantizer (ncols per matrix,
 * one matrix per expert), and their count in *n; NULL (and *n = 0) if the file has no entry. */
IQF_API const float *iqf_imatrix_file_find(const iqf_imatrix_file *f, const char *name, int64_t *n);

/* ---------------------------------------------------------------------------------------------
 * Hessian capture for error feedback (`iqforge imatrix --hessian`, src/model/hessian.c).
 * While attached to a context, every iqf_decode (and so iqf_perplexity, iqf_imatrix_collect[_ex])
 * adds X^T X of the inputs of every linear layer (q/k/v share one, gate/up share one; the 3-D
 * expert tensors' per expert).
 * ------------------------------------------------------------------------------------------- */
typedef struct iqf_hess_acc iqf_hess_acc;
/* Creates the accumulator and attaches it to c. max_block > 0: keep only the max_block x
 * max_block diagonal blocks of inputs wider than that (max_block must divide them); 0: automatic
 * (full matrices while their double accumulators fit in 1 GiB, else 256-blocks); < 0: full.
 * Errors: IQF_E_INVALID_ARG (max_block does not divide a width), IQF_E_NOMEM. */
IQF_API iqf_status iqf_hessian_attach(iqf_context *c, int64_t max_block, iqf_hess_acc **out,
                                      char *err, size_t errlen);
/* The same with the per-expert Hessians of 3-D expert tensors (MoE: one matrix per expert, over
 * the rows routed to it) set apart: expert_block > 0 keeps their diagonal blocks of at most that
 * (a multiple of 32 dividing the width); < 0: none; 0 (iqf_hessian_attach): as the other inputs,
 * or 32-blocks where that would take more than 8 GiB of accumulators, or none where those still
 * would (a gpt-oss-20B shape: 6.3 GiB at 192-blocks). */
IQF_API iqf_status iqf_hessian_attach_ex(iqf_context *c, int64_t max_block, int64_t expert_block,
                                         iqf_hess_acc **out, char *err, size_t errlen);
/* Detaches the accumulator from c (it stays valid). */
IQF_API void iqf_hessian_detach(iqf_context *c);
/* Writes the means H = E[x x^T] as the Hessian file iqf_model_quantize reads
 * (params.hessian_path), F32 or F16; call once, after the last batch. chunk_count, chunk_size
 * and dataset are recorded in the file. Written whole or not at all. Errors: IQF_E_IO,
 * IQF_E_INVALID_ARG, IQF_E_NOMEM. */
IQF_API iqf_status iqf_hessian_acc_write(iqf_hess_acc *a, const iqf_model *m, const char *path,
                                         int chunk_count, int chunk_size, const char *dataset,
                                         bool f16, char *err, size_t errlen);
IQF_API void iqf_hessian_acc_free(iqf_hess_acc *a); /* NULL is fine */
/* The number of Hessians accumulated, and in *tokens (may be NULL) the input rows seen. */
IQF_API int iqf_hessian_acc_count(const iqf_hess_acc *a, int64_t *tokens);

/* Reading a Hessian file back (for iqf_quantize_feedback, or to inspect one). Opened and
 * validated whole (hostile input: every key, shape and value is checked; values finite, diagonal
 * >= 0). Errors: IQF_E_IO, IQF_E_FORMAT, IQF_E_NONFINITE, IQF_E_NOMEM, IQF_E_INVALID_ARG; message
 * "PATH: what is wrong". */
typedef struct iqf_hessian_file iqf_hessian_file;
IQF_API iqf_status iqf_hessian_file_load(const char *path, iqf_hessian_file **out, char *err,
                                         size_t errlen);
IQF_API void iqf_hessian_file_free(iqf_hessian_file *f); /* NULL is fine */
/* The Hessian of the input of weight `weight` ("blk.0.attn_k.weight": q/k/v share one, gate/up
 * share one): true with its width *n and diagonal block size *bs (bs == n: the full matrix; else
 * n/bs blocks of bs x bs), false if the file has none. */
IQF_API bool iqf_hessian_file_find(const iqf_hessian_file *f, const char *weight, int64_t *n, int64_t *bs);
/* Copies its n * bs values (row i of block k is row k*bs + i; means E[x x^T]) to out as
 * float32, in the layout iqf_quantize_feedback takes (hblock = bs). False if absent. For a 3-D
 * expert weight ("blk.0.ffn_down_exps.weight") these are expert 0's; see iqf_hessian_file_read_expert. */
IQF_API bool iqf_hessian_file_read(const iqf_hessian_file *f, const char *weight, float *out);
/* A 3-D expert weight's per-expert Hessians: how many matrices the weight's entry holds (its
 * n_expert for a per-expert entry, 1 for a plain one, 0 if absent), and expert e's n * bs values
 * (the mean over the rows routed to e; all zero if none were) as iqf_hessian_file_read. */
IQF_API int64_t iqf_hessian_file_n_experts(const iqf_hessian_file *f, const char *weight);
IQF_API bool iqf_hessian_file_read_expert(const iqf_hessian_file *f, const char *weight, int64_t e, float *out);

/* ---------------------------------------------------------------------------------------------
 * Combining the captures of shards of a text (`iqforge imatrix --combine`, src/stats/
 * imatrix_combine.c, hessian_combine.c), so that a large model's capture can run as an array of
 * independent jobs (each over its own chunks: `iqforge imatrix --chunk K --chunks N`).
 * Importance matrices (llama-imatrix's GGUF or legacy .dat) combine as llama-imatrix --in-file
 * does: per weight the sums of x^2 add and the counts add (per expert for 3-D expert tensors),
 * a weight in only some files is kept, the datasets are listed in order and the chunk count is
 * the largest count over the chunk size. Hessian files: the means times their rows add up, per
 * expert too, and are divided by the total rows. All inputs must be of one kind; value counts,
 * expert counts and chunk sizes must agree (Hessians: the model and every entry's shape too).
 * ------------------------------------------------------------------------------------------- */
typedef enum iqf_stats_kind { IQF_STATS_IMATRIX = 1, IQF_STATS_HESSIAN = 2 } iqf_stats_kind;
typedef struct iqf_combine_info {
    int kind;                   /* iqf_stats_kind of the inputs */
    int n_entries;              /* entries written */
    int chunk_count, chunk_size;
    int64_t tokens;             /* Hessian: hessian.token_count; imatrix: the largest count */
    bool dat;                   /* written as the legacy .dat */
} iqf_combine_info;
/* The kind of a file (a GGUF whose general.type is "hessian": IQF_STATS_HESSIAN; any other
 * readable file: IQF_STATS_IMATRIX, which its loader checks), or 0 with "PATH: ..." in err if it
 * cannot be opened. */
IQF_API int iqf_stats_file_kind(const char *path, char *err, size_t errlen);
/* Combines n >= 1 files into out (written whole or not at all: nothing is left on an error).
 * format 0: as the capture (an importance matrix goes to the legacy .dat unless out ends in
 * .gguf; a Hessian file is GGUF), 1: GGUF, 2: legacy .dat (importance matrices only).
 * legacy_chunk_size: the chunk size assumed for legacy .dat inputs, which do not store it (0:
 * 512, llama-imatrix's default -c). info may be NULL. Errors: IQF_E_INVALID_ARG, IQF_E_IO,
 * IQF_E_FORMAT (a bad or mismatched input: "PATH: what is wrong"), IQF_E_NONFINITE, IQF_E_NOMEM. */
IQF_API iqf_status iqf_stats_combine(const char *const *paths, int n, const char *out, int format,
                                     int legacy_chunk_size, iqf_combine_info *info, char *err,
                                     size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer (src/model/tokenizer.c): llama.cpp's SentencePiece ("llama") and GPT-2 byte-level
 * BPE ("gpt2") tokenizers, built from a GGUF's tokenizer.ggml.* keys (iqf_model_gguf for a
 * loaded model). Token ids are int32; IQF_TOKEN_NULL means "none".
 * ------------------------------------------------------------------------------------------- */
typedef struct iqf_vocab iqf_vocab;
#define IQF_TOKEN_NULL (-1)
/* Result of iqf_tokenize when it cannot run (bad argument, out of memory, > INT32_MAX tokens). */
#define IQF_TOKENIZE_ERROR INT32_MIN

/* NULL on error, with "PATH: tokenizer: what is wrong" in err (strict about the keys' types and
 * lengths; other tokenizer models and BPE pre-tokenizers are reported as unsupported). */
IQF_API iqf_vocab *iqf_vocab_load(const iqf_gguf *g, char *err, size_t errlen);
IQF_API void iqf_vocab_free(iqf_vocab *v); /* NULL is fine */
IQF_API int32_t iqf_vocab_n_tokens(const iqf_vocab *v);
IQF_API int32_t iqf_vocab_bos(const iqf_vocab *v); /* IQF_TOKEN_NULL if none */
IQF_API int32_t iqf_vocab_eos(const iqf_vocab *v);
IQF_API bool iqf_vocab_add_bos(const iqf_vocab *v); /* does add_special put a BOS in front? */
/* End of generation: eos, eot, eom and the texts llama.cpp lists (<|endoftext|>, <|im_end|>...). */
IQF_API bool iqf_vocab_is_eog(const iqf_vocab *v, int32_t id);
/* llama_tokenize: `len` bytes of `text` (any bytes). add_special: BOS/EOS as the vocabulary adds
 * them (llama-perplexity uses true). Control tokens in the text are not recognised. Returns the
 * number of tokens written to out; if more than max_out are needed, writes nothing and returns
 * -(needed); IQF_TOKENIZE_ERROR on bad arguments or out of memory. */
IQF_API int32_t iqf_tokenize(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                             int32_t *out, int32_t max_out);
/* The same with parse_special (true: control tokens such as "<s>" in the text become their ids). */
IQF_API int32_t iqf_tokenize_ex(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                                bool parse_special, int32_t *out, int32_t max_out);
/* llama_token_to_piece: a token's text, after skipping up to `lstrip` leading spaces; control
 * tokens only with `special`. Returns its length (no NUL added), or -(needed) if it does not fit
 * (nothing written). */
IQF_API int32_t iqf_token_to_piece(const iqf_vocab *v, int32_t id, char *buf, int32_t buflen,
                                   int32_t lstrip, bool special);
/* llama_detokenize: the text of a token sequence (no NUL added). remove_special drops a leading
 * BOS / trailing EOS the vocab adds; unparse_special renders control tokens. Returns the length,
 * or -(needed) if it does not fit in text_max; IQF_TOKENIZE_ERROR for ids out of range. */
IQF_API int32_t iqf_detokenize(const iqf_vocab *v, const int32_t *tokens, int32_t n_tokens,
                               char *text, int32_t text_max, bool remove_special,
                               bool unparse_special);

/* ---------------------------------------------------------------------------------------------
 * KL-divergence base files (llama-perplexity's --kl-divergence-base format, iqf_eval_params)
 * ------------------------------------------------------------------------------------------- */
/* Reads and validates the header of a base file against its length: its context size, vocabulary
 * size and chunk count (any of the pointers may be NULL). Errors: IQF_E_IO, IQF_E_FORMAT. */
IQF_API iqf_status iqf_kld_file_info(const char *path, int *n_ctx, int *n_vocab, int *n_chunks,
                                     char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Output files that appear whole or not at all (src/util/outfile.c). Every file the library
 * writes goes through this; it is public so that a program's own outputs (reports, raw tensors)
 * get the same guarantee. The data goes to a temporary "PATH.tmp.XXXXXX" in the same folder,
 * which commit flushes, fsyncs and renames onto PATH (atomic on POSIX); abort, a failed commit
 * and the signal cleanup below remove it. A device (/dev/null, /dev/full, a FIFO) is written
 * directly. Messages are "PATH: reason" (strerror). Errors are sticky: after one failed write
 * every later write fails with the same message and commit removes the temporary file.
 * A handle is used by one thread at a time.
 * ------------------------------------------------------------------------------------------- */
typedef struct iqf_outfile iqf_outfile;
/* Creates the temporary file. Errors: IQF_E_INVALID_ARG (NULL path or out), IQF_E_IO (the folder
 * is missing or not writable, more than 256 files open at once, path too long), IQF_E_NOMEM;
 * *out is then NULL. */
IQF_API iqf_status iqf_outfile_open(const char *path, iqf_outfile **out, char *err, size_t errlen);
/* Appends n bytes. Errors: IQF_E_INVALID_ARG (NULL of, or NULL data with n > 0), IQF_E_IO (the
 * write failed, e.g. ENOSPC, or an earlier one did). */
IQF_API iqf_status iqf_outfile_write(iqf_outfile *of, const void *data, size_t n, char *err, size_t errlen);
/* Completes the file (PATH now holds exactly the bytes written) and frees the handle, also on
 * failure. Errors: IQF_E_IO (a write, flush, fsync or the rename failed: PATH is untouched and
 * the temporary file removed), IQF_E_INVALID_ARG (NULL of). */
IQF_API iqf_status iqf_outfile_commit(iqf_outfile *of, char *err, size_t errlen);
/* Removes the temporary file and frees the handle; PATH is untouched. NULL is fine. */
IQF_API void iqf_outfile_abort(iqf_outfile *of);
/* True if the two paths name the same existing file (same device and inode): writing one while
 * reading the other would destroy the input. False if either does not exist. */
IQF_API bool iqf_same_file(const char *a, const char *b);

/* Interrupted runs. For a program (not a library user, which keeps its own signal handling):
 * installs SIGINT, SIGTERM and SIGHUP handlers that remove every live temporary output (the
 * library's and iqf_outfile_open's), print one line "NAME: interrupted by SIGINT; temporary
 * output removed, nothing written" to stderr and _exit(128 + signal); SIGXFSZ is ignored (a
 * write over `ulimit -f` is an ordinary IQF_E_IO). Idempotent. Returns 0, or -1 if sigaction
 * failed. */
IQF_API int iqf_outfile_install_signal_cleanup(const char *name);

/* ---------------------------------------------------------------------------------------------
 * Size-targeted quantization: `quantize --target-size S | --target-bpw B` (src/quantize/target*.c)
 *
 * For every quantizable tensor and every candidate type (the IQ and K types its row width allows,
 * IQ4_NL and the legacy 32-blocks for other widths, Q8_0, F16; minus the types that need an
 * importance matrix where the tensor has none) the error of actually encoding it is measured:
 *   err(t, T) = sum over rows r, columns j of  im[j] * (w[r][j] - deq(enc_T(w))[r][j])^2
 * (im = the imatrix row of the tensor, all ones for tensors the imatrix has no entry for), on all
 * rows or on an evenly spaced sample of rows whose mean is scaled to the tensor (the standard
 * error of that estimate is kept). Errors are weighed by a per-tensor sensitivity (see
 * iqf_target_sens) and one type per tensor is chosen minimising the summed weighted error with
 * the WHOLE output file (header, KVs, tensor infos, alignment padding, unquantized tensors) at or
 * under the target: iqf_target_allocate.
 * ------------------------------------------------------------------------------------------- */
typedef enum iqf_target_sens {
    /* Each tensor's error divided by its signal energy
     * sum_r sum_j im[j] w[r][j]^2, i.e. the relative (noise-to-signal) error of the tensor's
     * output; every tensor weighs the same per unit of relative error. */
    IQF_TARGET_SENS_RELATIVE = 0,
    /* The raw imatrix-weighted error (no weighting). */
    IQF_TARGET_SENS_NONE = 1,
    /* Calibrated with the engine on the calibration text: the mean KL-divergence of the model's
     * next-token distributions against the unquantized model's per unit of err at the probe
     * type, by the layer method (each tensor's change of its layer's output times the layer's
     * KLD gain; calib_per_tensor: each tensor alone through the whole model). The weighted
     * total then predicts the file's KLD (to first order, errors adding up); the plan is then
     * checked against the nearest recipe under the target by joint KLD (iqf_target_plan). */
    IQF_TARGET_SENS_KLD = 2,
    /* The default: IQF_TARGET_SENS_KLD (text sampled from the model when calib_text is NULL) at
     * every model size; IQF_TARGET_SENS_RELATIVE only when the engine cannot run the model
     * (the log says so). */
    IQF_TARGET_SENS_AUTO = 3,
} iqf_target_sens;

typedef struct iqf_target_params {
    uint64_t target_size;     /* bytes of the whole file; or 0 and ... */
    double target_bpw;        /* ... whole-file bits per weight: target_size = floor(B * n_weights / 8),
                                 n_weights = elements of all tensors */
    iqf_target_sens sens;     /* default IQF_TARGET_SENS_AUTO */
    const char *calib_text;   /* text file for IQF_TARGET_SENS_KLD; NULL: text sampled from the
                                 model (temperature 1 from BOS, fixed seed) */
    int calib_ctx;            /* tokens per chunk (<= 0: 128, capped at the model's context) */
    int calib_chunks;         /* chunks of the text used (<= 0: 4) */
    int calib_type;           /* probe type (-1: q3_K, q4_0 for rows that are not multiples of 256) */
    const int *calib_types;   /* or several probe types (n_calib_types of them; those a tensor can
                                 take are measured): the sensitivity KLD/err of a candidate is
                                 interpolated linearly in log(err) between the probes (the nearest
                                 probe's outside them) */
    int n_calib_types;
    bool calib_all;           /* probe every candidate type: costs are measured KLDs */
    int calib_rounds;         /* in-context rounds after the first allocation (default 0; < 0: 3): all chosen
                                 types applied at once, each tensor's marginal KLD measured, its
                                 curve rescaled to it, reallocated; the plan of least joint KLD on
                                 the calibration text is kept */
    bool calib_per_tensor;    /* calibrate each tensor alone through the whole model (one forward
                                 pass per tensor and probe type: small models only); default: the
                                 layer method (src/quantize/target_calib.c) */
    int calib_depths;         /* layer method: layers whose gain is measured through the rest of
                                 the model, spread evenly (0: 8; < 0: every layer) */
    bool calib_halves;        /* layer method: a gain for each half of a layer (attention side,
                                 feed-forward side), twice the depth probes; kjv-3m KLD 0.3-3% lower */
    const char *spill_dir;    /* where the check against the recipe keeps the blocks it encoded (an
                                 unlinked temporary file) for iqf_target_quantize to write instead
                                 of encoding them again; NULL: not kept */
    int calib_delta_chunks;   /* layer method: chunks of the calibration text over which each
                                 tensor's change of its layer's output is measured (0: 2) */
    double sample;            /* fraction of rows measured in tensors of more than 2^20 weights
                                 and more than sample_min rows (<= 0: 1/32; >= 1: all rows) */
    int sample_min;           /* at least this many rows (<= 0: 128) */
} iqf_target_params;

IQF_API iqf_target_params iqf_target_default_params(void);

typedef struct iqf_target_entry {
    char name[IQF_GGUF_MAX_NAME];
    int type;                 /* chosen (or fixed) type */
    uint64_t bytes;           /* its data bytes, padded to the file's alignment */
    double error;             /* predicted weighted error of the chosen type (0 when fixed) */
    double error_se;          /* standard error of that prediction from row sampling (0: all rows) */
    double weight;            /* the sensitivity the error was multiplied by */
    bool quantizable;         /* false: copied as it is */
    bool fixed;               /* not chosen by the allocator (not quantizable, or a user choice) */
} iqf_target_entry;

typedef struct iqf_target_plan {
    int n;                    /* every output tensor (after --prune-layers), in the output order,
                                 named as in the output */
    iqf_target_entry *e;
    uint64_t budget;          /* the target, bytes */
    uint64_t file_size;       /* the output file's size with this plan, exact */
    uint64_t min_size, max_size; /* the smallest / largest file the candidates allow */
    uint64_t meta_size;       /* header + KVs + tensor infos + padding */
    int64_t n_weights;
    double total_error;       /* sum of the entries' errors */
    int ftype;                /* general.file_type written: the llama file type of the type that
                                 holds most of the chosen bytes (q8_0 for f16), or the user's */
    double seconds_measure, seconds_calib, seconds_alloc;
    /* The check against the recipe (calibrated runs; -1 where not measured): the joint KLD of the
     * plan and of the llama file type whose recipe file is the largest under the budget, on the
     * calibration text; recipe_chosen: the recipe was better, and the plan is its types. */
    double joint_kld, recipe_kld;
    int recipe_ftype;
    bool recipe_chosen;
    /* the blocks the check encoded (the winner's), reused by iqf_target_quantize; NULL: none */
    struct iqf_target_spill *spill;
} iqf_target_plan;

/*
 * Measures and allocates. `qp` gives the quantize options respected as fixed choices
 * (output_tensor_type, token_embedding_type, --tensor-type patterns, leave_output_tensor), the
 * imatrix (required), include/exclude weights, mode, n_threads and ftype (the file type to
 * record; <= 0 or IQF_FTYPE_ALL_F32: chosen from the plan). Log lines go to `log` (NULL: none).
 * Errors: IQF_E_INVALID_ARG (no imatrix, qp->pure, no target or both, a target below
 * min_size or above max_size: "target size N bytes is below the smallest file the candidate
 * types allow (M bytes)"), the errors of iqf_model_quantize for the input and the imatrix,
 * IQF_E_IO / IQF_E_FORMAT for the calibration text or model, IQF_E_NOMEM.
 */
IQF_API iqf_status iqf_target_plan_make(const char *in, const iqf_model_quantize_params *qp,
                                const iqf_target_params *tp, iqf_target_plan **out, FILE *log,
                                char *err, size_t errlen);
IQF_API void iqf_target_plan_free(iqf_target_plan *p); /* NULL is fine */
/* The plan as a table: tensor, type, bytes, predicted error; then the totals. */
IQF_API void iqf_target_plan_print(const iqf_target_plan *p, FILE *f);
/* Writes the plan as a --tensor-type-file: one "^ESCAPED_NAME$=type" per quantizable tensor.
 * Errors: IQF_E_IO. The file appears whole or not at all. */
IQF_API iqf_status iqf_target_plan_save(const iqf_target_plan *p, const char *path, char *err, size_t errlen);
/* Reads such a file back: names (unescaped) and types, malloc'd arrays of *n entries.
 * Errors: IQF_E_IO, IQF_E_FORMAT (a word that is not "^NAME$=TYPE" with a known type). */
IQF_API iqf_status iqf_target_plan_load(const char *path, char (**names)[IQF_GGUF_MAX_NAME], int **types,
                                int *n, char *err, size_t errlen);
/* Quantizes `in` to `out` with the plan (its chosen types an exact per-tensor array; the fixed
 * tensors keep qp's choices), then checks the written file's size equals plan->file_size and is
 * within the budget (else the file is removed and IQF_E_FORMAT returned). Errors: those of
 * iqf_model_quantize. */
IQF_API iqf_status iqf_target_quantize(const char *in, const char *out, const iqf_model_quantize_params *qp,
                               const iqf_target_plan *plan, iqf_model_quantize_report *report,
                               FILE *log, char *err, size_t errlen);

/*
 * The allocation: n items, item i has k[i] options of bytes[i][o] bytes and cost[i][o]; picks one
 * option per item (choice[i]) minimising the summed cost with the summed bytes <= budget. Method:
 * each item's lower convex hull of (bytes, cost), the Lagrangian path along all hull segments in
 * order of cost saved per byte until the next does not fit, a greedy fill of the remaining
 * slack with any option that fits (best saving per byte first), then pairwise exchanges; and
 * independently a dynamic program over the bytes above each item's minimum (exact when
 * budget - sum of minima <= 2^18 bytes, otherwise on sizes rounded up to a grid, so never
 * over), followed by the same fill; the cheaper result is returned (*total_bytes, *total_cost).
 * Deterministic. Errors: IQF_E_INVALID_ARG (bad arguments, k[i] < 1 or > 255, non-finite cost,
 * or the smallest options already exceed the budget).
 */
IQF_API iqf_status iqf_target_allocate(int n, const int *k, const uint64_t *const *bytes,
                               const double *const *cost, uint64_t budget, int *choice,
                               uint64_t *total_bytes, double *total_cost, char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Hugging Face checkpoints to GGUF (src/convert)
 * ------------------------------------------------------------------------------------------- */
/*
 * iqf_convert_hf writes the GGUF file llama.cpp's convert_hf_to_gguf.py writes from the
 * checkpoint directory `dir` (config.json, model*.safetensors or a sharded
 * model.safetensors.index.json, tokenizer.json, tokenizer_config.json): the same keys, values and
 * order, the same tensor names, order, types, shapes and data. Architectures: LlamaForCausalLM
 * (Llama 3 rope_freqs), MistralForCausalLM, MixtralForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM, GptOssForCausalLM (BF16/F16/F32
 * weights, not MXFP4 blocks), DeepseekV2/V3ForCausalLM (MLA; the nextn layers are dropped, as the
 * converter does). The input is mapped and the output written tensor by
 * tensor (bounded memory); the output appears whole or not at all. Errors: "FILE: what is wrong"
 * in err; IQF_E_FORMAT (malformed or unsupported input), IQF_E_IO, IQF_E_INVALID_ARG, IQF_E_NOMEM.
 */
typedef enum iqf_convert_outtype {
    IQF_CONVERT_AUTO = 0, /* the first tensor's: F16 if it is F16, else BF16 (as --outtype auto) */
    IQF_CONVERT_F32 = 1,
    IQF_CONVERT_F16 = 2,
    IQF_CONVERT_BF16 = 3,
    IQF_CONVERT_Q8_0 = 4,
} iqf_convert_outtype;
IQF_API iqf_status iqf_convert_hf(const char *dir, const char *out_path, iqf_convert_outtype outtype, char *err,
                          size_t errlen);
/* The same conversion without a file: the checkpoint as an open GGUF handle whose KVs and tensor
 * infos are those of iqf_convert_hf's output (built in memory) and whose tensor bytes are
 * converted from the mapped safetensors when iqf_gguf_tensor_load asks for them, one tensor at a
 * time (see iqf_gguf_open_source). With iqf_model_quantize_params.input it quantizes a checkpoint
 * in one pass, byte-identical to converting, then quantizing the file. NULL with "FILE: what is
 * wrong" in err on the same errors as iqf_convert_hf. Close it with iqf_gguf_close. */
IQF_API iqf_gguf *iqf_convert_open(const char *dir, iqf_convert_outtype outtype, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* IQFORGE_H */
