/*
 * tokenizer.h - text <-> token ids from a GGUF vocabulary, as llama.cpp does it (internal API).
 *
 * Supported tokenizer.ggml.model values:
 *   "llama"  SentencePiece (llm_tokenizer_spm): U+2581 whitespace escaping, optional space prefix,
 *            score-ordered bigram merges, <0xXX> byte fallback.
 *   "gpt2"   byte-level BPE with tokenizer.ggml.merges and the GPT-2 pre-tokenizer
 *            ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+),
 *            for the tokenizer.ggml.pre values llama.cpp maps to that regex ("gpt-2", "phi-2",
 *            "mpt", "olmo", ...).
 *
 * Results equal llama.cpp's llama_tokenize / llama_token_to_piece / llama_detokenize (the
 * oracle's libllama; tests/model/test_tokenizer.c checks the test-tokenizer-0 vectors, recorded ids and,
 * when the oracle is installed, random texts live). A vocab is immutable after loading: every
 * function below may be called from several threads at once.
 *
 * Where llama.cpp aborts or throws, we do something defined instead (only reachable with broken
 * vocabularies or bytes F5..F7 in the text):
 *  - SPM byte fallback when a byte has neither a <0xXX> nor a one-byte token: <unk>, else dropped;
 *  - code points above U+10FFFF (from F5..F7 lead bytes) in BPE text: encoded as U+FFFD;
 *  - a normal BPE token with characters outside GPT-2's byte map renders "[UNK_BYTE_0x..<text>]"
 *    as llama.cpp does, but stops repeating the token text once the piece passes 64 KiB.
 * Not implemented: other tokenizer.ggml.model values (bert, t5, rwkv, ...) and BPE pre-tokenizers
 * other than the GPT-2 regex (llama3, qwen2, ...): iqf_vocab_load reports them as unsupported.
 */
#ifndef IQF_MODEL_TOKENIZER_H
#define IQF_MODEL_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iqforge.h"

typedef struct iqf_vocab iqf_vocab;

#define IQF_TOKEN_NULL (-1)

/* Result of iqf_tokenize when it cannot run (bad argument, out of memory, > INT32_MAX tokens). */
#define IQF_TOKENIZE_ERROR INT32_MIN

typedef enum iqf_vocab_type {
    IQF_VOCAB_SPM = 1, /* "llama" */
    IQF_VOCAB_BPE = 2, /* "gpt2" */
    IQF_VOCAB_TEST = 3, /* "test": llama.cpp's test-llama-archs models (5-byte chunks hashed to ids) */
} iqf_vocab_type;

/* tokenizer.ggml.token_type values (llama_token_type). */
enum {
    IQF_TOKTYPE_UNDEFINED = 0,
    IQF_TOKTYPE_NORMAL = 1,
    IQF_TOKTYPE_UNKNOWN = 2,
    IQF_TOKTYPE_CONTROL = 3,
    IQF_TOKTYPE_USER_DEFINED = 4,
    IQF_TOKTYPE_UNUSED = 5,
    IQF_TOKTYPE_BYTE = 6,
};

/* Token attributes (llama_token_attr bits). */
enum {
    IQF_TOKATTR_UNKNOWN = 1 << 0,
    IQF_TOKATTR_UNUSED = 1 << 1,
    IQF_TOKATTR_NORMAL = 1 << 2,
    IQF_TOKATTR_CONTROL = 1 << 3,
    IQF_TOKATTR_USER_DEFINED = 1 << 4,
    IQF_TOKATTR_BYTE = 1 << 5,
    IQF_TOKATTR_LSTRIP = 1 << 7,
    IQF_TOKATTR_RSTRIP = 1 << 8,
};

/*
 * The tokenizer.ggml.* metadata as plain arrays (what the GGUF reader hands over). Pointers are
 * only read during iqf_vocab_from_arrays; everything is copied.
 * Strings: `tokens[i]` has `token_lens[i]` bytes (token_lens NULL: NUL-terminated strings);
 * the same for merges/merge_lens.
 * Special ids: IQF_VOCAB_ID_UNSET keeps llama.cpp's default for the model type (SPM: bos 1,
 * eos 2, unk 0; BPE: bos = eos = 11); ids outside the vocabulary are ignored as llama.cpp does.
 * Flags: -1 = not present in the file (use llama.cpp's default), 0 = false, 1 = true.
 */
#define IQF_VOCAB_ID_UNSET INT64_MIN
typedef struct iqf_vocab_arrays {
    const char *model;       /* tokenizer.ggml.model: "llama" or "gpt2" (required) */
    const char *pre;         /* tokenizer.ggml.pre or NULL */
    const char *name;        /* general.name or NULL (llama.cpp special-cases phi-3 names) */
    int64_t n_tokens;
    const char *const *tokens;
    const uint64_t *token_lens;
    const float *scores;     /* NULL or n_scores values; n_scores must equal n_tokens */
    int64_t n_scores;
    const int32_t *token_types; /* NULL or n_token_types values (= n_tokens) */
    int64_t n_token_types;
    int64_t n_merges;        /* BPE: required (> 0 not required, but the key must exist) */
    const char *const *merges;
    const uint64_t *merge_lens;
    int64_t bos_id, eos_id, unk_id, eot_id, eom_id, pad_id, sep_id;
    int add_bos, add_eos, add_space_prefix;
} iqf_vocab_arrays;

/* A iqf_vocab_arrays with every id IQF_VOCAB_ID_UNSET and every flag -1. */
iqf_vocab_arrays iqf_vocab_arrays_init(void);

/* Builds a vocabulary. NULL on error, with a message in err ("tokenizer: what is wrong"). */
iqf_vocab *iqf_vocab_from_arrays(const iqf_vocab_arrays *a, char *err, size_t errlen);

/*
 * Builds the vocabulary of a GGUF file from its tokenizer.ggml.* keys (and general.name).
 * Strict: tokenizer.ggml.model must be a string, tokens an array of strings, scores (optional) an
 * array of float32 and token_type (optional) an array of int32, both exactly as long as tokens;
 * merges (required for "gpt2") an array of strings; *_token_id keys integers; add_* keys bools.
 * NULL on error with "PATH: tokenizer: what is wrong" in err.
 */
iqf_vocab *iqf_vocab_load(const iqf_gguf *g, char *err, size_t errlen);
void iqf_vocab_free(iqf_vocab *v);

iqf_vocab_type iqf_vocab_get_type(const iqf_vocab *v);
int32_t iqf_vocab_n_tokens(const iqf_vocab *v);
int32_t iqf_vocab_bos(const iqf_vocab *v);   /* IQF_TOKEN_NULL if none */
int32_t iqf_vocab_eos(const iqf_vocab *v);
int32_t iqf_vocab_eot(const iqf_vocab *v);
int32_t iqf_vocab_unk(const iqf_vocab *v);
int32_t iqf_vocab_pad(const iqf_vocab *v);
int32_t iqf_vocab_newline(const iqf_vocab *v); /* the token of "\n" (llama.cpp linefeed_id) */
bool iqf_vocab_add_bos(const iqf_vocab *v);  /* does add_special put a BOS in front? */
bool iqf_vocab_add_eos(const iqf_vocab *v);
/* End of generation: eos, eot, eom and the texts llama.cpp lists (<|endoftext|>, <|im_end|>...). */
bool iqf_vocab_is_eog(const iqf_vocab *v, int32_t id);
/* IQF_TOKATTR_* bits of a token (0 for an id out of range). */
uint32_t iqf_vocab_token_attr(const iqf_vocab *v, int32_t id);
float iqf_vocab_token_score(const iqf_vocab *v, int32_t id);
/* The raw vocabulary string (not NUL-terminated; *len bytes), NULL for an id out of range. */
const char *iqf_vocab_token_text(const iqf_vocab *v, int32_t id, size_t *len);
/* The id of an exact vocabulary string, or IQF_TOKEN_NULL. */
int32_t iqf_vocab_find(const iqf_vocab *v, const char *text, size_t len);

/*
 * Tokenize `len` bytes of `text` (any bytes; invalid UTF-8 is handled as llama.cpp does).
 * add_special: llama_tokenize's add_special (BOS if the vocab adds BOS, EOS if it adds EOS);
 * llama-perplexity and the test-tokenizer-0 vectors use add_special=true / false respectively.
 * Control and unknown tokens written in the text are not recognised (parse_special=false);
 * user-defined tokens are (as llama.cpp does).
 * Returns the number of tokens written to out; if more than max_out are needed, writes nothing
 * and returns -(needed); IQF_TOKENIZE_ERROR on bad arguments or out of memory.
 */
int32_t iqf_tokenize(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                     int32_t *out, int32_t max_out);
/* Same with parse_special (true: control tokens such as "<s>" in the text become their ids). */
int32_t iqf_tokenize_ex(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, int32_t max_out);

/*
 * The bytes a token stands for (llama_token_piece): SPM U+2581 -> ' ', <0xXX> -> the byte,
 * BPE byte-level decoding. Control/unknown tokens give "" unless `special`.
 * Returns a pointer into the vocab (not NUL-terminated) and its length in *len; for an id out
 * of range returns NULL and *len = 0.
 */
const char *iqf_token_piece(const iqf_vocab *v, int32_t id, bool special, size_t *len);

/* llama_token_to_piece: copies the piece to buf after skipping up to `lstrip` leading spaces.
 * Returns its length, or -(needed) if it does not fit (nothing written). */
int32_t iqf_token_to_piece(const iqf_vocab *v, int32_t id, char *buf, int32_t buflen,
                           int32_t lstrip, bool special);

/*
 * llama_detokenize: the text of a token sequence (no NUL added). remove_special drops a leading
 * BOS / trailing EOS the vocab adds; unparse_special renders control tokens. The leading space
 * that SPM's space prefix added is removed; BPE vocabs apply llama.cpp's clean-up of spaces
 * before punctuation. Returns the length, or -(needed) if it does not fit in text_max.
 * Ids out of range: IQF_TOKENIZE_ERROR.
 */
int32_t iqf_detokenize(const iqf_vocab *v, const int32_t *tokens, int32_t n_tokens, char *text,
                       int32_t text_max, bool remove_special, bool unparse_special);

#endif
