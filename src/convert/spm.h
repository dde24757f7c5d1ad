/*
 * spm.h - SentencePiece tokenizer.model files (a protobuf ModelProto) for iqforge convert.
 *
 * The reader treats the file as hostile: varints of at most 10 bytes, every length checked
 * against the bytes left in its message, unknown fields skipped by their wire type (groups to a
 * bounded depth, iteratively), the piece count bounded; what sentencepiece's processor refuses on
 * loading is refused too (an empty or repeated piece, no or two UNKNOWN pieces, a BYTE piece that
 * is not <0xXX> or without trainer_spec.byte_fallback, byte_fallback without all 256 bytes, a type
 * or model_type outside the enum) and so is a piece that is not UTF-8. Not read: the normalizer's
 * precompiled_charsmap (skipped as bytes, never decoded), self_test_data, denormalizer_spec.
 */
#ifndef IQF_CONVERT_SPM_H
#define IQF_CONVERT_SPM_H

#include "iqforge.h"
#include "json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IQF_SPM_MAX_BYTES ((size_t)256 << 20) /* 256 MiB: real ones are a few MiB */
#define IQF_SPM_MAX_PIECES (1 << 22) /* 4M: the largest real vocabularies have 262144 */
#define IQF_SPM_MAX_VOCAB (1 << 24) /* config.json vocab_size, as vocab.c */
#define IQF_SPM_MAX_GROUP_DEPTH 32 /* nesting of (deprecated) groups in skipped fields */

/* ModelProto.SentencePiece.Type */
enum { IQF_SPM_NORMAL = 1, IQF_SPM_UNKNOWN = 2, IQF_SPM_CONTROL = 3, IQF_SPM_USER_DEFINED = 4, IQF_SPM_UNUSED = 5,
       IQF_SPM_BYTE = 6 };

typedef struct iqf_spm_piece {
    const char *s; /* inside iqf_spm.buf, not NUL-terminated */
    size_t len;
    float score; /* 0 when absent */
    int type;    /* IQF_SPM_*, NORMAL when absent */
} iqf_spm_piece;

typedef struct iqf_spm {
    iqf_spm_piece *pieces;
    int64_t n_pieces;
    /* trainer_spec (defaults of sentencepiece_model.proto when absent) */
    int model_type; /* 1 UNIGRAM, 2 BPE, 3 WORD, 4 CHAR */
    int32_t vocab_size;
    bool byte_fallback;
    int32_t unk_id, bos_id, eos_id, pad_id;
    /* normalizer_spec */
    const char *norm_name; /* NULL when absent; not NUL-terminated */
    size_t norm_name_len;
    bool add_dummy_prefix, remove_extra_whitespaces, escape_whitespaces;
    uint8_t *buf; /* the file's bytes (owned) */
    size_t size;
} iqf_spm;

/* Parse `len` bytes (copied); NULL with "NAME: what is wrong" in err. */
iqf_spm *iqf_spm_parse(const uint8_t *data, size_t len, const char *name, char *err, size_t errlen);
/* Read and parse a file; NULL with "PATH: ..." (a missing file included). */
iqf_spm *iqf_spm_read_file(const char *path, char *err, size_t errlen);
void iqf_spm_free(iqf_spm *m);

/* _set_vocab_sentencepiece over DIR/tokenizer.model (convert_hf_to_gguf): with llama_prefix
 * (LlamaModel.set_vocab) first tokenizer.ggml.add_space_prefix when tokenizer_config.json (tc,
 * NULL if none) has add_prefix_space; then model "llama", pre "default", tokens, scores,
 * token_type of config.json's vocab_size (hp) tokens: the pieces, added_tokens.json,
 * tokenizer_config's added_tokens_decoder, [PADi] for the rest. Returns that token count
 * (gguf-py's SpecialVocab follows, in vocab.c) or -1 with "FILE: what is wrong" in err.
 * looks_special: the converter's does_token_look_special. */
int64_t iqf_cv_spm_vocab(const char *dir, yyjson_val *hp, yyjson_val *tc, bool llama_prefix, iqf_gguf_writer *w,
                         bool (*looks_special)(const char *s, size_t len), char *err, size_t errlen);
/* The token count iqf_cv_spm_vocab would write (len(tokens) of _create_vocab_sentencepiece:
 * vocab_size_per_layer_input or vocab_size of config.json, else the piece count); -1 with err. */
int64_t iqf_cv_spm_n_tokens(const char *dir, yyjson_val *hp, char *err, size_t errlen);

#endif
