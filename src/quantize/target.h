/*
 * target.h - internals of size-targeted quantization (target.c), shared with the tests.
 */
#ifndef IQF_QUANTIZE_TARGET_H
#define IQF_QUANTIZE_TARGET_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

#define IQF_TARGET_MAX_CAND 24

/* The candidate types for a tensor of row length ncols: the IQ and K types (ncols % 256 == 0),
 * else IQ4_NL and the legacy 32-blocks (ncols % 32 == 0), then Q8_0, F16; minus types this build
 * cannot encode, and when the tensor has no importance matrix (has_imatrix false) minus
 * iq2_xxs/iq2_xs/iq1_s (the encoders refuse) and, unless it is token_embd/output, minus the types
 * llama-quantize refuses without one (iq3_xxs, iq2_s, iq1_m). Returns the count written. */
int iqf_target_candidates(const char *name, int64_t ncols, bool has_imatrix, int *out, int cap);

/* Bytes of the output file's metadata (header, KVs, tensor infos, padding) as iqf_model_quantize
 * writes it for the input `g`: its KVs minus split.*, plus quantization_version, file_type, the
 * imatrix keys (imatrix_file, dataset (NULL: none), entries, chunks > 0), quantize.mode when mode
 * is not compat, the quantize.feedback.* keys when hessian_file is not NULL (error feedback).
 * *align receives the data alignment. */
uint64_t iqf_target_meta_size(const iqf_gguf *g, const char *imatrix_file, const char *dataset,
                              bool have_imatrix, int chunk_count, int mode, const char *hessian_file,
                              uint64_t *align);

/* "^blk\.0\.attn_q\.weight$": regex special characters escaped. */
void iqf_target_pattern(const char *name, char *out, size_t cap);

#endif
