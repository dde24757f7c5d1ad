/*
 * tokenizer.c - SentencePiece ("llama") and GPT-2 byte-level BPE ("gpt2") tokenizers built from
 * a GGUF vocabulary, reproducing llama.cpp's src/llama-vocab.cpp and src/unicode.cpp.
 *
 * Layout: token strings live in one arena, an open-addressing hash maps string -> id (for BPE
 * a second one maps (left, right) -> merge rank). Tokenizing allocates per call (the vocab is
 * read-only), so several threads may tokenize with one vocab.
 *
 * SPM (llm_tokenizer_spm): the fragment (with a leading ' ' when the space prefix applies) has
 * ' ' replaced by U+2581, is split into UTF-8 characters, and adjacent pairs whose concatenation
 * is a token go into a max-heap keyed (score desc, left index asc); the best pair is merged, its
 * neighbours re-queued, stale entries skipped. Symbols that are not tokens fall back to <0xXX>.
 * O(n log n) over the fragment.
 * BPE (llm_tokenizer_bpe): UTF-8 -> code points (invalid bytes -> U+FFFD), the GPT-2 regex split
 * written by hand (unicode_regex_split_custom_gpt2), each word byte-encoded with GPT-2's
 * bytes_to_unicode table and merged by rank with a min-heap.
 */
#include "model/tokenizer_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* The vocabulary                                                                              */

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(err, errlen, "tokenizer: ");
    if (n < 0 || (size_t)n >= errlen) n = 0;
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

iqf_vocab_arrays iqf_vocab_arrays_init(void) {
    iqf_vocab_arrays a;
    memset(&a, 0, sizeof a);
    a.bos_id = a.eos_id = a.unk_id = a.eot_id = a.eom_id = a.pad_id = a.sep_id = IQF_VOCAB_ID_UNSET;
    a.add_bos = a.add_eos = a.add_space_prefix = -1;
    return a;
}

void iqf_vocab_free(iqf_vocab *v) {
    if (!v) return;
    free(v->text); free(v->tok_off); free(v->tok_len); free(v->tok_hash); free(v->scores);
    free(v->attr); free(v->htab); free(v->mtext); free(v->merges); free(v->mtab);
    free(v->piece); free(v->piece_off); free(v->piece_len); free(v->special); free(v->eog);
    free(v);
}

static bool tok_is(const iqf_vocab *v, int32_t id, const char *s) {
    size_t n = strlen(s);
    return v->tok_len[id] == n && memcmp(v->text + v->tok_off[id], s, n) == 0;
}

static bool tok_in(const iqf_vocab *v, int32_t id, const char *const *list) {
    for (; *list; list++)
        if (tok_is(v, id, *list)) return true;
    return false;
}

/* llama.cpp's token_to_piece for the cache (special = true), appended to a growing buffer. */
typedef struct sbuf { char *p; size_t n, cap; bool oom; } sbuf;

static void sb_put(sbuf *b, const void *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* token_to_byte: strtol of text[3..5) in base 16 (what llama.cpp does; junk gives 0 or a
 * partial value). */
static unsigned char token_byte(const char *t, size_t n) {
    unsigned v = 0;
    if (n < 4) return 0;
    size_t i = 3, end = n < 5 ? n : 5;
    for (; i < end; i++) {
        int h = hexval(t[i]);
        if (h < 0) break;
        v = v * 16 + (unsigned)h;
    }
    return (unsigned char)v;
}

static void build_piece(const iqf_vocab *v, int32_t id, sbuf *b) {
    const size_t start = b->n;
    const char *t = v->text + v->tok_off[id];
    size_t n = v->tok_len[id];
    uint32_t a = v->attr[id];
    if (a & (IQF_TOKATTR_UNKNOWN | IQF_TOKATTR_CONTROL | IQF_TOKATTR_USER_DEFINED)) {
        sb_put(b, t, n);
    } else if (a & IQF_TOKATTR_NORMAL) {
        if (v->type == IQF_VOCAB_TEST) { /* the id in hex */
            char hx[16];
            sb_put(b, hx, (size_t)snprintf(hx, sizeof hx, "%x", (unsigned)id));
        } else if (v->type == IQF_VOCAB_SPM) {
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) { sb_put(b, " ", 1); i += 3; }
                else { sb_put(b, t + i, 1); i++; }
            }
        } else { /* llama_decode_text */
            for (size_t i = 0; i < n;) {
                uint32_t c = utf8_decode((const unsigned char *)t, n, &i);
                int byte = iqf_tok_gpt2_cpt_byte(c);
                if (byte >= 0) {
                    unsigned char ch = (unsigned char)byte;
                    sb_put(b, &ch, 1);
                } else {
                    unsigned char u[4];
                    int k = utf8_encode(c, u);
                    char hx[8];
                    sb_put(b, "[UNK_BYTE_0x", 12);
                    for (int j = 0; j < k; j++) {
                        snprintf(hx, sizeof hx, "%02x", u[j]);
                        sb_put(b, hx, 2);
                    }
                    /* llama.cpp appends the whole token text for every such code point, which
                     * is quadratic in the token length; we stop copying it past 64 KiB. */
                    if (b->n - start + n <= 65536) sb_put(b, t, n);
                    sb_put(b, "]", 1);
                }
            }
        }
    } else if (a & IQF_TOKATTR_BYTE) {
        unsigned char ch = token_byte(t, n);
        sb_put(b, &ch, 1);
    }
}

/* qsort without a context argument: sort (len, id) pairs instead. */
typedef struct spec_key { uint32_t len; int32_t id; } spec_key;
static int cmp_spec_key(const void *pa, const void *pb) {
    const spec_key *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static uint32_t pow2_at_least(uint64_t n) {
    uint64_t c = 16;
    while (c < n) c <<= 1;
    return (uint32_t)c;
}

static void lower_ascii(char *s) {
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

/* The tokenizer.ggml.pre values llama.cpp tokenizes with the GPT-2 regex. */
static const char *const gpt2_pres[] = {
    "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0",
    "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4", "mpt",
    "olmo", "jais", "trillion", "granite-docling", NULL,
};


/* The vocabulary builder's stages, in order; each returns VB_OK, VB_OOM, or VB_ERR with err set. */
typedef enum { VB_OK = 0, VB_OOM, VB_ERR } vb_status;

/* Stage 1: the arrays are complete and consistent; the model's type and space cleaning. */
static vb_status vb_check_arrays(const iqf_vocab_arrays *a, iqf_vocab_type *type, bool *clean_spaces, char *err, size_t errlen) {
    if (!a || !a->model) { set_err(err, errlen, "no tokenizer.ggml.model"); return VB_ERR; }
    *clean_spaces = false;
    if (strcmp(a->model, "llama") == 0) {
        *type = IQF_VOCAB_SPM;
    } else if (strcmp(a->model, "gpt2") == 0) {
        *type = IQF_VOCAB_BPE;
        const char *pre = a->pre ? a->pre : "";
        bool ok = false;
        for (const char *const *p = gpt2_pres; *p; p++)
            if (strcmp(pre, *p) == 0) ok = true;
        if (!ok) {
            set_err(err, errlen, "unsupported tokenizer.ggml.pre '%s' (supported: the GPT-2 regex family, e.g. 'gpt-2')",
                    a->pre ? a->pre : "(missing)");
            return VB_ERR;
        }
        *clean_spaces = !(strcmp(pre, "trillion") == 0 || strcmp(pre, "granite-docling") == 0);
    } else if (strcmp(a->model, "test") == 0) {
        *type = IQF_VOCAB_TEST;
    } else {
        set_err(err, errlen, "unsupported tokenizer.ggml.model '%s' (supported: llama, gpt2, test)", a->model);
        return VB_ERR;
    }
    if (a->n_tokens <= 0 || a->n_tokens > INT32_MAX / 2 || !a->tokens) {
        set_err(err, errlen, "tokenizer.ggml.tokens: %lld tokens", (long long)a->n_tokens);
        return VB_ERR;
    }
    if (a->scores && a->n_scores != a->n_tokens) {
        set_err(err, errlen, "tokenizer.ggml.scores has %lld values for %lld tokens",
                (long long)a->n_scores, (long long)a->n_tokens);
        return VB_ERR;
    }
    if (a->token_types && a->n_token_types != a->n_tokens) {
        set_err(err, errlen, "tokenizer.ggml.token_type has %lld values for %lld tokens",
                (long long)a->n_token_types, (long long)a->n_tokens);
        return VB_ERR;
    }
    if (*type == IQF_VOCAB_BPE && (!a->merges || a->n_merges < 0)) {
        if (!(a->n_merges == 0 && !a->merges)) {
            set_err(err, errlen, "tokenizer.ggml.merges: bad array");
            return VB_ERR;
        }
    }
    if (*type == IQF_VOCAB_BPE && a->n_merges > INT32_MAX / 2) {
        set_err(err, errlen, "tokenizer.ggml.merges: %lld merges", (long long)a->n_merges);
        return VB_ERR;
    }

    return VB_OK;
}

/* Stage 2: token strings, the string -> id table, scores and attributes. */
static vb_status vb_load_tokens(iqf_vocab *v, const iqf_vocab_arrays *a, char *err, size_t errlen) {
    const int32_t n = v->n_tokens;
    /* token strings (empty ones become "[EMPTY_<i>]" as in llama.cpp) */
    {
        sbuf b = { 0 };
        for (int32_t i = 0; i < n; i++) {
            const char *s = a->tokens[i];
            uint64_t l = a->token_lens ? a->token_lens[i] : (s ? strlen(s) : 0);
            if (!s && l) { free(b.p); set_err(err, errlen, "token %d: NULL string", i); return VB_ERR; }
            if (l > UINT32_MAX / 2) { free(b.p); set_err(err, errlen, "token %d: %llu bytes", i, (unsigned long long)l); return VB_ERR; }
            char tmp[32];
            if (l == 0) {
                snprintf(tmp, sizeof tmp, "[EMPTY_%d]", i);
                s = tmp;
                l = strlen(tmp);
            }
            v->tok_off[i] = b.n;
            v->tok_len[i] = (uint32_t)l;
            if ((uint32_t)l > v->max_tok_len) v->max_tok_len = (uint32_t)l;
            sb_put(&b, s, (size_t)l);
            v->tok_hash[i] = hash_bytes(HASH_SEED, (const unsigned char *)s, (size_t)l);
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->text = b.p ? b.p : malloc(1);
        if (!v->text) return VB_OOM;
    }
    /* string -> id; a repeated string maps to its last id (token_to_id[word] = i) */
    v->hmask = pow2_at_least((uint64_t)n * 2) - 1;
    v->htab = malloc(sizeof(int32_t) * ((size_t)v->hmask + 1));
    if (!v->htab) return VB_OOM;
    memset(v->htab, 0xFF, sizeof(int32_t) * ((size_t)v->hmask + 1));
    for (int32_t i = 0; i < n; i++) {
        uint32_t h = v->tok_hash[i];
        for (uint32_t k = h & v->hmask;; k = (k + 1) & v->hmask) {
            int32_t id = v->htab[k];
            if (id < 0) { v->htab[k] = i; break; }
            if (v->tok_hash[id] == h && v->tok_len[id] == v->tok_len[i] &&
                memcmp(v->text + v->tok_off[id], v->text + v->tok_off[i], v->tok_len[i]) == 0) {
                v->htab[k] = i;
                break;
            }
        }
    }
    for (int32_t i = 0; i < n; i++) {
        v->scores[i] = a->scores ? a->scores[i] : 0.0f;
        uint32_t at = IQF_TOKATTR_NORMAL;
        if (a->token_types) {
            switch (a->token_types[i]) {
            case IQF_TOKTYPE_UNKNOWN: at = IQF_TOKATTR_UNKNOWN; break;
            case IQF_TOKTYPE_UNUSED: at = IQF_TOKATTR_UNUSED; break;
            case IQF_TOKTYPE_NORMAL: at = IQF_TOKATTR_NORMAL; break;
            case IQF_TOKTYPE_CONTROL: at = IQF_TOKATTR_CONTROL; break;
            case IQF_TOKTYPE_USER_DEFINED: at = IQF_TOKATTR_USER_DEFINED; break;
            case IQF_TOKTYPE_BYTE: at = IQF_TOKATTR_BYTE; break;
            default: at = 0; break;
            }
        }
        v->attr[i] = at;
    }

    return VB_OK;
}

/* Stage 3 (BPE): the merge table. */
static vb_status vb_load_merges(iqf_vocab *v, const iqf_vocab_arrays *a, char *err, size_t errlen) {
    /* merges: "left right" split at the first ' ' from index 1; a repeated pair keeps its first
     * rank (bpe_ranks.emplace); no space: the pair ("", "") */
    if (v->type == IQF_VOCAB_BPE && a->n_merges > 0) {
        int64_t nm = a->n_merges;
        v->n_merges = nm;
        v->merges = malloc(sizeof(merge_ent) * (size_t)nm);
        v->mmask = pow2_at_least((uint64_t)nm * 2) - 1;
        v->mtab = malloc(sizeof(int32_t) * ((size_t)v->mmask + 1));
        if (!v->merges || !v->mtab) return VB_OOM;
        memset(v->mtab, 0xFF, sizeof(int32_t) * ((size_t)v->mmask + 1));
        sbuf b = { 0 };
        for (int64_t i = 0; i < nm; i++) {
            const char *s = a->merges[i];
            uint64_t l = a->merge_lens ? a->merge_lens[i] : (s ? strlen(s) : 0);
            if ((!s && l) || l > UINT32_MAX / 2) {
                free(b.p);
                set_err(err, errlen, "merge %lld: bad string", (long long)i);
                return VB_ERR;
            }
            size_t sp = (size_t)l;
            for (size_t j = 1; j < (size_t)l; j++)
                if (s[j] == ' ') { sp = j; break; }
            merge_ent *m = &v->merges[i];
            m->off = b.n;
            m->rank = (int32_t)i;
            if (sp < (size_t)l) {
                m->llen = (uint32_t)sp;
                m->rlen = (uint32_t)(l - sp - 1);
                if (m->llen > v->max_mleft) v->max_mleft = m->llen;
                if (m->rlen > v->max_mright) v->max_mright = m->rlen;
                sb_put(&b, s, sp);
                sb_put(&b, s + sp + 1, m->rlen);
            } else {
                m->llen = m->rlen = 0;
            }
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->mtext = b.p ? b.p : malloc(1);
        if (!v->mtext) return VB_OOM;
        for (int64_t i = 0; i < nm; i++) {
            merge_ent *m = &v->merges[i];
            const unsigned char *p = (const unsigned char *)v->mtext + m->off;
            m->hash = hash_bytes(hash_bytes(HASH_SEED, p, m->llen) ^ 0x9E3779B9u, p + m->llen, m->rlen);
            for (uint32_t k = m->hash & v->mmask;; k = (k + 1) & v->mmask) {
                int32_t o = v->mtab[k];
                if (o < 0) { v->mtab[k] = (int32_t)i; break; }
                const merge_ent *q = &v->merges[o];
                if (q->hash == m->hash && q->llen == m->llen && q->rlen == m->rlen &&
                    memcmp(v->mtext + q->off, p, (size_t)m->llen + m->rlen) == 0)
                    break; /* keep the first */
            }
        }
    }

    return VB_OK;
}

/* Stage 4: special ids and add-BOS/EOS flags: the type's defaults, then the file's values. */
static void vb_special_ids(iqf_vocab *v, const iqf_vocab_arrays *a) {
    const int32_t n = v->n_tokens;
    /* flags and special ids (llama_vocab::impl::load) */
    if (v->type == IQF_VOCAB_SPM) {
        v->bos = 1; v->eos = 2; v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (v->type == IQF_VOCAB_TEST) { /* no special tokens, nothing added */
        v->bos = v->eos = v->unk = IQF_TOKEN_NULL;
        v->add_space_prefix = false;
        v->add_bos = false;
    } else {
        v->bos = 11; v->eos = 11; v->unk = IQF_TOKEN_NULL;
        v->add_space_prefix = false;
        v->add_bos = false;
    }
    v->eot = v->eom = v->pad = v->sep = IQF_TOKEN_NULL;
    v->add_eos = false;
    if (a->add_space_prefix >= 0) v->add_space_prefix = a->add_space_prefix != 0;
    {
        int32_t *ids[] = { &v->bos, &v->eos, &v->eot, &v->eom, &v->unk, &v->sep, &v->pad };
        const int64_t given[] = { a->bos_id, a->eos_id, a->eot_id, a->eom_id, a->unk_id, a->sep_id, a->pad_id };
        for (int k = 0; k < 7; k++) {
            if (*ids[k] >= n) *ids[k] = IQF_TOKEN_NULL;
            if (given[k] != IQF_VOCAB_ID_UNSET && given[k] >= 0 && given[k] < n) *ids[k] = (int32_t)given[k];
        }
    }
    if (a->add_bos >= 0) v->add_bos = a->add_bos != 0;
    if (a->add_eos >= 0) v->add_eos = a->add_eos != 0;

}

/* Stage 5: special tokens found by their text (EOT, EOM, FIM, end of generation), as llama.cpp does. */
static vb_status vb_detect_special(iqf_vocab *v) {
    const int32_t n = v->n_tokens;
    /* auto-detected special tokens (by text), as llama.cpp does */
    {
        static const char *const eot_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>",
            "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]",
            "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>", NULL };
        static const char *const eom_names[] = { "<|eom_id|>", NULL };
        static const char *const fim_pre[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
        static const char *const fim_suf[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
        static const char *const fim_mid[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
            "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL };
        static const char *const fim_pad[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
        static const char *const fim_rep[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
        static const char *const fim_sep[] = { "<|file_sep|>", NULL };
        static const char *const eog_names[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>",
            "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>",
            "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>",
            "<turn|>", "<|tool_response>", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
            "[e~[", NULL };
        static const char *const *const lists[8] = { eot_names, eom_names, fim_pre, fim_suf, fim_mid,
                                                      fim_pad, fim_rep, fim_sep };
        int32_t found[8];
        found[0] = v->eot;
        found[1] = v->eom;
        for (int k = 2; k < 8; k++) found[k] = IQF_TOKEN_NULL;
        for (int k = 0; k < 8; k++) {
            if (found[k] != IQF_TOKEN_NULL) continue;
            for (int32_t i = 0; i < n; i++) {
                if (tok_in(v, i, lists[k]) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i) {
                    found[k] = i;
                    v->attr[i] |= IQF_TOKATTR_CONTROL;
                    break;
                }
            }
        }
        v->eot = found[0];
        v->eom = found[1];
        /* control tokens whose text says "unused" */
        for (int32_t i = 0; i < n; i++) {
            if (!(v->attr[i] & IQF_TOKATTR_CONTROL)) continue;
            const char *t = v->text + v->tok_off[i];
            size_t l = v->tok_len[i];
            for (size_t j = 0; j + 6 <= l; j++)
                if (memcmp(t + j, "unused", 6) == 0) { v->attr[i] |= IQF_TOKATTR_UNUSED; break; }
        }
        /* end-of-generation set */
        v->eog = malloc(sizeof(int32_t) * ((size_t)n + 8));
        if (!v->eog) return VB_OOM;
        int32_t ne = 0;
        for (int k = 5; k < 8; k++) if (found[k] != IQF_TOKEN_NULL) v->eog[ne++] = found[k];
        for (int32_t i = 0; i < n; i++) {
            if (tok_in(v, i, eog_names) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i) {
                v->eog[ne++] = i;
                v->attr[i] |= IQF_TOKATTR_CONTROL;
            }
        }
        /* gpt-oss: always rendered */
        static const char *const oss[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL };
        for (int32_t i = 0; i < n; i++)
            if (tok_in(v, i, oss) && iqf_vocab_find(v, v->text + v->tok_off[i], v->tok_len[i]) == i)
                v->attr[i] = IQF_TOKATTR_USER_DEFINED;
        if (v->eos != IQF_TOKEN_NULL) v->eog[ne++] = v->eos;
        if (v->eot != IQF_TOKEN_NULL) v->eog[ne++] = v->eot;
        if (v->eom != IQF_TOKEN_NULL) v->eog[ne++] = v->eom;
        v->n_eog = ne;
    }

    return VB_OK;
}

/* Stage 6: the special-token cache (longest first) and the token -> piece cache. */
static vb_status vb_caches(iqf_vocab *v) {
    const int32_t n = v->n_tokens;
    /* special tokens cache: control / user-defined / unknown, longest first */
    {
        spec_key *keys = malloc(sizeof(spec_key) * (size_t)n);
        if (!keys) return VB_OOM;
        int32_t ns = 0;
        for (int32_t i = 0; i < n; i++)
            if (v->attr[i] & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_USER_DEFINED | IQF_TOKATTR_UNKNOWN))
                keys[ns++] = (spec_key){ v->tok_len[i], i };
        qsort(keys, (size_t)ns, sizeof *keys, cmp_spec_key);
        v->special = malloc(sizeof(int32_t) * ((size_t)ns + 1));
        if (!v->special) { free(keys); return VB_OOM; }
        for (int32_t i = 0; i < ns; i++) v->special[i] = keys[i].id;
        v->n_special = ns;
        free(keys);
    }

    /* token -> piece cache (special = true) */
    {
        sbuf b = { 0 };
        v->piece_off = malloc(sizeof(uint64_t) * (size_t)n);
        v->piece_len = malloc(sizeof(uint32_t) * (size_t)n);
        if (!v->piece_off || !v->piece_len) return VB_OOM;
        for (int32_t i = 0; i < n; i++) {
            size_t before = b.n;
            v->piece_off[i] = before;
            build_piece(v, i, &b);
            v->piece_len[i] = (uint32_t)(b.n - before);
        }
        if (b.oom) { free(b.p); return VB_OOM; }
        v->piece = b.p ? b.p : malloc(1);
        if (!v->piece) return VB_OOM;
    }

    return VB_OK;
}

/* Stage 7: per-model quirks, byte tables, SPM splitting and the newline token. */
static void vb_finish(iqf_vocab *v, const iqf_vocab_arrays *a) {
    /* per-model attributes: phi-3 strips spaces right of its special tokens */
    if (a->name) {
        char lname[256];
        snprintf(lname, sizeof lname, "%s", a->name);
        lower_ascii(lname);
        if (strstr(lname, "phi-3") || strstr(lname, "phi3")) {
            for (int32_t i = 0; i < v->n_special; i++) v->attr[v->special[i]] |= IQF_TOKATTR_RSTRIP;
            int32_t id = iqf_vocab_find(v, "</s>", 4);
            if (id >= 0) v->attr[id] |= IQF_TOKATTR_RSTRIP;
            static const char *const keep[] = { "<unk>", "<s>", "<|endoftext|>" };
            for (int k = 0; k < 3; k++) {
                id = iqf_vocab_find(v, keep[k], strlen(keep[k]));
                if (id >= 0) v->attr[id] &= ~(uint32_t)IQF_TOKATTR_RSTRIP;
            }
        }
    }

    /* byte tables */
    for (int c = 0; c < 256; c++) {
        static const char hex[] = "0123456789ABCDEF";
        char buf[6] = { '<', '0', 'x', hex[c >> 4], hex[c & 15], '>' };
        char one = (char)c;
        int32_t raw = iqf_vocab_find(v, &one, 1);
        int32_t id = iqf_vocab_find(v, buf, 6);
        v->byte_tok[c] = id >= 0 ? id : raw;
        v->raw_byte_tok[c] = raw;
        unsigned char u[4];
        v->bmap_len[c] = (unsigned char)utf8_encode(iqf_tok_gpt2_byte_cpt((unsigned)c), u);
        memcpy(v->bmap[c], u, v->bmap_len[c]);
    }

    /* may SPM cut the text before U+2581 runs? */
    v->spm_split = true;
    for (int32_t i = 0; i < v->n_tokens && v->spm_split; i++) {
        const unsigned char *t = (const unsigned char *)v->text + v->tok_off[i];
        uint32_t l = v->tok_len[i];
        for (uint32_t p = 1; p + 3 <= l; p++) {
            if (t[p] == 0xE2 && t[p + 1] == 0x96 && t[p + 2] == 0x81 &&
                !(p >= 3 && t[p - 3] == 0xE2 && t[p - 2] == 0x96 && t[p - 1] == 0x81)) {
                v->spm_split = false;
                break;
            }
        }
    }

    /* newline token */
    if (v->type == IQF_VOCAB_SPM) {
        v->linefeed = v->byte_tok['\n'] >= 0 ? v->byte_tok['\n'] : v->pad;
    } else {
        int32_t t[8];
        int32_t k = iqf_tokenize(v, "\n", 1, false, t, 8);
        v->linefeed = k > 0 ? t[0] : v->pad;
    }

}

iqf_vocab *iqf_vocab_from_arrays(const iqf_vocab_arrays *a, char *err, size_t errlen) {
    iqf_vocab_type type;
    bool clean_spaces;
    if (vb_check_arrays(a, &type, &clean_spaces, err, errlen)) return NULL;
    iqf_vocab *v = calloc(1, sizeof *v);
    if (!v) goto oom;
    const int32_t n = (int32_t)a->n_tokens;
    v->type = type;
    v->n_tokens = n;
    v->clean_spaces = clean_spaces;
    v->tok_off = malloc(sizeof(uint64_t) * (size_t)n);
    v->tok_len = malloc(sizeof(uint32_t) * (size_t)n);
    v->tok_hash = malloc(sizeof(uint32_t) * (size_t)n);
    v->scores = malloc(sizeof(float) * (size_t)n);
    v->attr = malloc(sizeof(uint32_t) * (size_t)n);
    if (!v->tok_off || !v->tok_len || !v->tok_hash || !v->scores || !v->attr) goto oom;

    vb_status st = vb_load_tokens(v, a, err, errlen);
    if (!st) st = vb_load_merges(v, a, err, errlen);
    if (!st) {
        vb_special_ids(v, a);
        st = vb_detect_special(v);
    }
    if (!st) st = vb_caches(v);
    if (st == VB_ERR) {
        iqf_vocab_free(v);
        return NULL;
    }
    if (st) goto oom;
    vb_finish(v, a);
    return v;

oom:
    iqf_vocab_free(v);
    set_err(err, errlen, "out of memory");
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                   */

iqf_vocab_type iqf_vocab_get_type(const iqf_vocab *v) { return v ? v->type : (iqf_vocab_type)0; }
int32_t iqf_vocab_n_tokens(const iqf_vocab *v) { return v ? v->n_tokens : 0; }
int32_t iqf_vocab_bos(const iqf_vocab *v) { return v ? v->bos : IQF_TOKEN_NULL; }
int32_t iqf_vocab_eos(const iqf_vocab *v) { return v ? v->eos : IQF_TOKEN_NULL; }
int32_t iqf_vocab_eot(const iqf_vocab *v) { return v ? v->eot : IQF_TOKEN_NULL; }
int32_t iqf_vocab_unk(const iqf_vocab *v) { return v ? v->unk : IQF_TOKEN_NULL; }
int32_t iqf_vocab_pad(const iqf_vocab *v) { return v ? v->pad : IQF_TOKEN_NULL; }
int32_t iqf_vocab_newline(const iqf_vocab *v) { return v ? v->linefeed : IQF_TOKEN_NULL; }
bool iqf_vocab_add_bos(const iqf_vocab *v) { return v && v->add_bos && v->bos != IQF_TOKEN_NULL; }
bool iqf_vocab_add_eos(const iqf_vocab *v) { return v && v->add_eos && v->eos != IQF_TOKEN_NULL; }

bool iqf_vocab_is_eog(const iqf_vocab *v, int32_t id) {
    if (!v || id < 0) return false;
    for (int32_t i = 0; i < v->n_eog; i++)
        if (v->eog[i] == id) return true;
    return false;
}

uint32_t iqf_vocab_token_attr(const iqf_vocab *v, int32_t id) {
    return (v && id >= 0 && id < v->n_tokens) ? v->attr[id] : 0;
}

float iqf_vocab_token_score(const iqf_vocab *v, int32_t id) {
    return (v && id >= 0 && id < v->n_tokens) ? v->scores[id] : 0.0f;
}

const char *iqf_vocab_token_text(const iqf_vocab *v, int32_t id, size_t *len) {
    if (!v || id < 0 || id >= v->n_tokens) { if (len) *len = 0; return NULL; }
    if (len) *len = v->tok_len[id];
    return v->text + v->tok_off[id];
}

/* ------------------------------------------------------------------------------------------ */
/* Loading from GGUF                                                                           */

static bool is_int_vtype(int t) {
    return t == IQF_GGUF_U8 || t == IQF_GGUF_I8 || t == IQF_GGUF_U16 || t == IQF_GGUF_I16 ||
           t == IQF_GGUF_U32 || t == IQF_GGUF_I32 || t == IQF_GGUF_U64 || t == IQF_GGUF_I64;
}

iqf_vocab *iqf_vocab_load(const iqf_gguf *g, char *err, size_t errlen) {
    char msg[400] = "";
    iqf_vocab *v = NULL;
    iqf_vocab_arrays a = iqf_vocab_arrays_init();
    const char **toks = NULL, **merges = NULL;
    uint64_t *tlens = NULL, *mlens = NULL;
    const char *path = g ? iqf_gguf_path(g) : "(null)";
    if (!g) { snprintf(msg, sizeof msg, "no file"); goto fail; }

    int64_t k = iqf_gguf_find_kv(g, "tokenizer.ggml.model");
    if (k < 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.model (no vocabulary in this file)"); goto fail; }
    if (iqf_gguf_kv_type(g, k) != IQF_GGUF_STR) {
        snprintf(msg, sizeof msg, "tokenizer.ggml.model is %s, not str", iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
        goto fail;
    }
    a.model = iqf_gguf_kv_value(g, k);
    static const char *const str_keys[2] = { "tokenizer.ggml.pre", "general.name" };
    for (int s = 0; s < 2; s++) {
        k = iqf_gguf_find_kv(g, str_keys[s]);
        if (k < 0) continue;
        if (iqf_gguf_kv_type(g, k) != IQF_GGUF_STR) {
            snprintf(msg, sizeof msg, "%s is %s, not str", str_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        if (s == 0) a.pre = iqf_gguf_kv_value(g, k);
        else a.name = iqf_gguf_kv_value(g, k);
    }

    /* tokens */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (k < 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.tokens"); goto fail; }
    if (iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR || iqf_gguf_arr_type(g, k) != IQF_GGUF_STR) {
        snprintf(msg, sizeof msg, "tokenizer.ggml.tokens is not an array of strings");
        goto fail;
    }
    uint64_t n = iqf_gguf_arr_n(g, k);
    if (n == 0 || n > INT32_MAX / 2) { snprintf(msg, sizeof msg, "tokenizer.ggml.tokens has %llu entries", (unsigned long long)n); goto fail; }
    toks = malloc(sizeof(char *) * n);
    tlens = malloc(sizeof(uint64_t) * n);
    if (!toks || !tlens) { snprintf(msg, sizeof msg, "out of memory"); goto fail; }
    for (uint64_t j = 0; j < n; j++) {
        size_t l = 0;
        toks[j] = iqf_gguf_arr_str(g, k, j, &l);
        tlens[j] = l;
        if (!toks[j]) { snprintf(msg, sizeof msg, "tokenizer.ggml.tokens[%llu] unreadable", (unsigned long long)j); goto fail; }
    }
    a.n_tokens = (int64_t)n;
    a.tokens = toks;
    a.token_lens = tlens;

    /* scores, token types */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.scores");
    if (k >= 0) {
        uint64_t ns = 0;
        a.scores = iqf_gguf_arr_data(g, k, IQF_GGUF_F32, &ns);
        if (!a.scores) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.scores is %s%s%s, not an array of f32",
                     iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)), iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? " of " : "",
                     iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? iqf_gguf_vtype_name(iqf_gguf_arr_type(g, k)) : "");
            goto fail;
        }
        a.n_scores = (int64_t)ns;
    }
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (k >= 0) {
        uint64_t nt = 0;
        a.token_types = iqf_gguf_arr_data(g, k, IQF_GGUF_I32, &nt);
        if (!a.token_types) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.token_type is %s%s%s, not an array of i32",
                     iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)), iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? " of " : "",
                     iqf_gguf_kv_type(g, k) == IQF_GGUF_ARR ? iqf_gguf_vtype_name(iqf_gguf_arr_type(g, k)) : "");
            goto fail;
        }
        a.n_token_types = (int64_t)nt;
    }

    /* merges */
    k = iqf_gguf_find_kv(g, "tokenizer.ggml.merges");
    if (k < 0 && strcmp(a.model, "gpt2") == 0) { snprintf(msg, sizeof msg, "no tokenizer.ggml.merges (required for gpt2)"); goto fail; }
    if (k >= 0 && strcmp(a.model, "gpt2") == 0) {
        if (iqf_gguf_kv_type(g, k) != IQF_GGUF_ARR || iqf_gguf_arr_type(g, k) != IQF_GGUF_STR) {
            snprintf(msg, sizeof msg, "tokenizer.ggml.merges is not an array of strings");
            goto fail;
        }
        uint64_t nm = iqf_gguf_arr_n(g, k);
        if (nm > INT32_MAX / 2) { snprintf(msg, sizeof msg, "tokenizer.ggml.merges has %llu entries", (unsigned long long)nm); goto fail; }
        merges = malloc(sizeof(char *) * (nm + 1));
        mlens = malloc(sizeof(uint64_t) * (nm + 1));
        if (!merges || !mlens) { snprintf(msg, sizeof msg, "out of memory"); goto fail; }
        for (uint64_t j = 0; j < nm; j++) {
            size_t l = 0;
            merges[j] = iqf_gguf_arr_str(g, k, j, &l);
            mlens[j] = l;
            if (!merges[j]) { snprintf(msg, sizeof msg, "tokenizer.ggml.merges[%llu] unreadable", (unsigned long long)j); goto fail; }
        }
        a.n_merges = (int64_t)nm;
        a.merges = merges;
        a.merge_lens = mlens;
    }

    /* special ids and flags */
    static const char *const id_keys[7] = { "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.seperator_token_id" };
    int64_t *id_dst[7] = { &a.bos_id, &a.eos_id, &a.unk_id, &a.eot_id, &a.eom_id, &a.pad_id, &a.sep_id };
    for (int s = 0; s < 7; s++) {
        k = iqf_gguf_find_kv(g, id_keys[s]);
        if (k < 0) continue;
        int64_t val;
        if (!is_int_vtype(iqf_gguf_kv_type(g, k)) || !iqf_gguf_get_int(g, id_keys[s], &val)) {
            snprintf(msg, sizeof msg, "%s is %s, not an integer", id_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        *id_dst[s] = val < 0 ? INT64_MAX : val; /* out of range: ignored, as llama.cpp does */
    }
    static const char *const flag_keys[3] = { "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                               "tokenizer.ggml.add_space_prefix" };
    int *flag_dst[3] = { &a.add_bos, &a.add_eos, &a.add_space_prefix };
    for (int s = 0; s < 3; s++) {
        k = iqf_gguf_find_kv(g, flag_keys[s]);
        if (k < 0) continue;
        bool b;
        if (!iqf_gguf_get_bool(g, flag_keys[s], &b)) {
            snprintf(msg, sizeof msg, "%s is %s, not bool", flag_keys[s], iqf_gguf_vtype_name(iqf_gguf_kv_type(g, k)));
            goto fail;
        }
        *flag_dst[s] = b ? 1 : 0;
    }

    v = iqf_vocab_from_arrays(&a, msg, sizeof msg);
    free(toks); free(tlens); free(merges); free(mlens);
    if (!v && err && errlen) snprintf(err, errlen, "%s: %s", path, msg);
    return v;

fail:
    free(toks); free(tlens); free(merges); free(mlens);
    if (err && errlen) snprintf(err, errlen, "%s: tokenizer: %s", path, msg);
    return NULL;
}
