/*
 * tokenizer_internal.h - what the tokenizer's files share (tokenizer.c: the vocabulary, its
 * builder and loader; tokenize.c: tokenizing and detokenizing; tokenizer_text.c: Unicode classes
 * and GPT-2's byte map). Not a public header.
 */
#ifndef IQF_MODEL_TOKENIZER_INTERNAL_H
#define IQF_MODEL_TOKENIZER_INTERNAL_H

#include "model/tokenizer.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { UC_OTHER = 0, UC_LETTER = 1, UC_NUMBER = 2, UC_SPACE = 3, UC_NONE = 4 };

/* The class of a code point (UC_*): whitespace first, then \p{L} / \p{N} (tokenizer_text.c). */
int iqf_tok_uc_class(uint32_t c);
/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. */
uint32_t iqf_tok_gpt2_byte_cpt(unsigned b);
/* Inverse: the byte of a code point, or -1. */
int iqf_tok_gpt2_cpt_byte(uint32_t c);

/* unicode_len_utf8: length from the lead byte's high nibble (continuation bytes count 1). */
static inline size_t utf8_len(unsigned char c) {
    static const unsigned char lk[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lk[c >> 4];
}

/* unicode_cpt_from_utf8 + the U+FFFD fallback of unicode_cpts_from_utf8 (overlong forms and
 * surrogates are accepted as llama.cpp does). */
static inline uint32_t utf8_decode(const unsigned char *s, size_t n, size_t *pos) {
    size_t i = *pos;
    unsigned char b = s[i];
    if (!(b & 0x80)) { *pos = i + 1; return b; }
    if ((b & 0x40) && !(b & 0x20)) {
        if (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            *pos = i + 2;
            return ((uint32_t)(b & 0x1F) << 6) | (s[i + 1] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x10)) {
        if (i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            *pos = i + 3;
            return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        }
    } else if ((b & 0x40) && !(b & 0x08)) {
        if (i + 3 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 &&
            (s[i + 3] & 0xC0) == 0x80) {
            *pos = i + 4;
            return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                   ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        }
    }
    *pos = i + 1;
    return 0xFFFD;
}

/* unicode_cpt_to_utf8. llama.cpp throws for code points above U+10FFFF (reachable from bytes
 * F5..F7); we write U+FFFD instead. Returns the byte count. */
static inline int utf8_encode(uint32_t c, unsigned char *o) {
    if (c <= 0x7F) { o[0] = (unsigned char)c; return 1; }
    if (c <= 0x7FF) { o[0] = (unsigned char)(0xC0 | (c >> 6)); o[1] = (unsigned char)(0x80 | (c & 0x3F)); return 2; }
    if (c > 0x10FFFF) c = 0xFFFD;
    if (c <= 0xFFFF) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

typedef struct merge_ent {
    uint64_t off;        /* into mtext: left bytes then right bytes */
    uint32_t llen, rlen;
    uint32_t hash;
    int32_t rank;
} merge_ent;

struct iqf_vocab {
    iqf_vocab_type type;
    int32_t n_tokens;
    char *text;          /* token strings */
    uint64_t *tok_off;
    uint32_t *tok_len;
    uint32_t *tok_hash;
    float *scores;
    uint32_t *attr;
    uint32_t max_tok_len;
    uint32_t max_mleft, max_mright; /* longest merge sides */
    uint32_t hmask;      /* token hash table: hmask+1 slots of ids (-1 empty) */
    int32_t *htab;

    char *mtext;
    merge_ent *merges;
    int64_t n_merges;
    uint32_t mmask;
    int32_t *mtab;       /* indexes into merges */

    char *piece;         /* token_to_piece(special=true) of every token */
    uint64_t *piece_off;
    uint32_t *piece_len;

    int32_t bos, eos, eot, eom, unk, pad, sep, linefeed;
    bool add_bos, add_eos, add_space_prefix, clean_spaces;
    bool spm_split;      /* no token has U+2581 after a non-U+2581 byte (see spm_tokenize) */
    int32_t byte_tok[256];     /* SPM byte fallback (<0xXX>, else the 1-byte string) */
    int32_t raw_byte_tok[256]; /* BPE: the 1-byte string */
    unsigned char bmap[256][2]; /* BPE: UTF-8 of gpt2_byte_cpt(b) */
    unsigned char bmap_len[256];

    int32_t *special;    /* control / user-defined / unknown ids, longest text first */
    int32_t n_special;
    int32_t *eog;
    int32_t n_eog;
};

static inline uint32_t hash_bytes(uint32_t h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
    return h;
}
#define HASH_SEED 2166136261u

/* The rank of the merge (l, r), or -1 (tokenizer.c). */
int32_t iqf_tok_merge_rank(const iqf_vocab *v, const char *l, size_t ln, const char *r, size_t rn);

#endif
