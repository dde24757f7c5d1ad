/*
 * iqforge.h - the one public header of iqforge.
 *
 * iqforge turns LLM weights (float32/float16/bfloat16) into llama.cpp's GGUF quantization
 * formats without depending on llama.cpp. Type ids equal ggml's, so blocks written here are
 * read by stock llama.cpp and vice versa.
 *
 * Conventions
 *  - Functions that can fail return an iqf_status (0 = IQF_OK) and, when `err` is not NULL,
 *    write a one-line, NUL-terminated message of at most `errlen` bytes describing what is wrong.
 *  - No function keeps hidden global state besides lazily built, immutable lookup tables
 *    (built once, thread-safely).
 *  - Rows are little-endian, row-major; a quantized row is ncols/blck_size blocks.
 */
#ifndef IQFORGE_H
#define IQFORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IQF_VERSION "0.1.0"

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
const iqf_type_info *iqf_type_get(int type);

/* The type id for ggml's name (case-insensitive: "Q4_K", "q4_k" and "q4_K" all work), or -1. */
int iqf_type_from_name(const char *name);

/* Bytes of one row of `ncols` values, or 0 if the type is unknown or ncols is not a
 * multiple of its block size. */
size_t iqf_row_size(int type, int64_t ncols);

/* True if this build can encode (quantize_row) / decode (dequantize_row) the type. */
bool iqf_can_encode(int type);
bool iqf_can_decode(int type);

/* True if the type's reference encoder refuses to run without an importance matrix
 * (iq2_xxs, iq2_xs, iq1_s). */
bool iqf_requires_imatrix(int type);

/* ---------------------------------------------------------------------------------------------
 * Scalar conversions. fp16 and bf16 encoding round to nearest, ties to even, as ggml does.
 * ------------------------------------------------------------------------------------------- */
uint16_t iqf_fp32_to_fp16(float f);
float iqf_fp16_to_fp32(uint16_t h);
uint16_t iqf_fp32_to_bf16(float f);
float iqf_bf16_to_fp32(uint16_t h);

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
} iqf_mode;

/* Which instruction set the hot loops may use. Every level gives identical bytes. */
typedef enum iqf_simd {
    IQF_SIMD_AUTO = 0,     /* the best the CPU supports */
    IQF_SIMD_SCALAR = 1,   /* portable C */
    IQF_SIMD_AVX2 = 2,
    IQF_SIMD_AVX512 = 3,
} iqf_simd;

/* The best level this CPU supports (never returns IQF_SIMD_AUTO). */
iqf_simd iqf_simd_detect(void);
const char *iqf_simd_name(iqf_simd s);

typedef struct iqf_quantize_params {
    iqf_mode mode;    /* IQF_MODE_COMPAT */
    int n_threads;    /* <= 0: one per online CPU. Output never depends on it. */
    iqf_simd simd;    /* IQF_SIMD_AUTO; a level the CPU lacks falls back to the best it has */
} iqf_quantize_params;

iqf_quantize_params iqf_quantize_default_params(void);

/*
 * Quantize `nrows` rows of `ncols` float32 values from `src` into `dst`
 * (nrows * iqf_row_size(type, ncols) bytes).
 * `imatrix`: NULL, or `ncols` non-negative finite weights (one per column, used for every row).
 * Errors: IQF_E_UNKNOWN_TYPE, IQF_E_UNSUPPORTED (type has no encoder), IQF_E_SHAPE (ncols not a
 * multiple of the block size), IQF_E_NONFINITE (NaN/Inf in src: the message names row and column;
 * NaN/Inf/negative in imatrix), IQF_E_NEED_IMATRIX, IQF_E_INVALID_ARG, IQF_E_NOMEM.
 * On error nothing useful is in dst.
 */
iqf_status iqf_quantize(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                        const float *imatrix, const iqf_quantize_params *params,
                        char *err, size_t errlen);

/*
 * Decode `nrows` rows of `ncols` values of `type` from `src` to float32 `dst`.
 * Errors: IQF_E_UNKNOWN_TYPE, IQF_E_UNSUPPORTED, IQF_E_SHAPE, IQF_E_INVALID_ARG.
 */
iqf_status iqf_dequantize(int type, const void *src, float *dst, int64_t nrows, int64_t ncols,
                          int n_threads, char *err, size_t errlen);

/* Number of online CPUs (>= 1). */
int iqf_cpu_count(void);

/* ---------------------------------------------------------------------------------------------
 * GGUF container (src/gguf)
 * ------------------------------------------------------------------------------------------- */
/* (GGUF API goes here) */

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
} iqf_ftype;

/* The file type for a llama-quantize type name ("IQ3_XXS", "q4_k_m", aliases "Q4_K" = Q4_K_M,
 * "Q3_K", "Q5_K"; case-insensitive) or a decimal ftype id; -1 if unknown. */
int iqf_ftype_from_name(const char *name);
/* llama-quantize's name of a file type ("IQ3_XXS"), or NULL. */
const char *iqf_ftype_name(int ftype);
/* The tensor type a file type defaults to (llama_ftype_get_default_type), or -1. */
int iqf_ftype_default_type(int ftype);

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
    bool quiet;                  /* no per-tensor log, no progress line */
    const char *imatrix_path;    /* --imatrix (GGUF or legacy .dat), or NULL */
    const char *const *include_weights; /* --include-weights (substrings), n_include of them */
    int n_include;
    const char *const *exclude_weights; /* --exclude-weights */
    int n_exclude;
    const char *const *tensor_type_patterns; /* --tensor-type PATTERN=TYPE: the patterns ... */
    const int *tensor_type_types;            /* ... and their types */
    int n_tensor_types;
} iqf_model_quantize_params;

iqf_model_quantize_params iqf_model_quantize_default_params(void);

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
iqf_status iqf_model_quantize(const char *in, const char *out,
                              const iqf_model_quantize_params *params,
                              iqf_model_quantize_report *report, void *log /* FILE * */,
                              char *err, size_t errlen);

/* ---------------------------------------------------------------------------------------------
 * Inference: model, tokenizer, evaluation (src/model)
 * ------------------------------------------------------------------------------------------- */
/* (model API goes here) */

#ifdef __cplusplus
}
#endif
#endif /* IQFORGE_H */
