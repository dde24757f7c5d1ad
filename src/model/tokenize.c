/*
 * tokenize.c - the vocabulary's lookups (iqf_vocab_find, the merge ranks), tokenizing (SentencePiece
 * and GPT-2 BPE, see tokenizer.c's header for the algorithms) and detokenizing over a vocabulary
 * built by tokenizer.c. tokenizer.c calls into this file (the builder looks tokens up), never the
 * reverse.
 */
#include "model/tokenizer_internal.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Lookups                                                                                     */

int32_t iqf_vocab_find(const iqf_vocab *v, const char *s, size_t n) {
    if (!v || (!s && n)) return IQF_TOKEN_NULL;
    uint32_t h = hash_bytes(HASH_SEED, (const unsigned char *)s, n);
    for (uint32_t i = h & v->hmask;; i = (i + 1) & v->hmask) {
        int32_t id = v->htab[i];
        if (id < 0) return IQF_TOKEN_NULL;
        if (v->tok_hash[id] == h && v->tok_len[id] == n && memcmp(v->text + v->tok_off[id], s, n) == 0)
            return id;
    }
}

int32_t iqf_tok_merge_rank(const iqf_vocab *v, const char *l, size_t ln, const char *r, size_t rn) {
    if (!v->mtab || ln > v->max_mleft || rn > v->max_mright) return -1;
    uint32_t h = hash_bytes(hash_bytes(HASH_SEED, (const unsigned char *)l, ln) ^ 0x9E3779B9u,
                            (const unsigned char *)r, rn);
    for (uint32_t i = h & v->mmask;; i = (i + 1) & v->mmask) {
        int32_t k = v->mtab[i];
        if (k < 0) return -1;
        const merge_ent *m = &v->merges[k];
        if (m->hash == h && m->llen == ln && m->rlen == rn &&
            memcmp(v->mtext + m->off, l, ln) == 0 && memcmp(v->mtext + m->off + ln, r, rn) == 0)
            return m->rank;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Tokenizing                                                                                  */

typedef struct ibuf { int32_t *p; size_t n, cap; bool oom; } ibuf;

static void ib_push(ibuf *b, int32_t x) {
    if (b->oom) return;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        int32_t *p = realloc(b->p, cap * sizeof *p);
        if (!p) { b->oom = true; return; }
        b->p = p;
        b->cap = cap;
    }
    b->p[b->n++] = x;
}

typedef struct sym { int32_t prev, next; uint32_t off, n; } sym;

/* One heap for both tokenizers: SPM pops the highest score, BPE the lowest rank (stored as
 * -rank); ties: the lower left index first. */
typedef struct bigram { double key; int32_t left, right; uint32_t size; } bigram;

typedef struct heap { bigram *p; size_t n, cap; bool oom; } heap;

static bool bg_before(const bigram *a, const bigram *b) {
    return a->key > b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(heap *h, bigram g) {
    if (h->oom) return;
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *p = realloc(h->p, cap * sizeof *p);
        if (!p) { h->oom = true; return; }
        h->p = p;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!bg_before(&g, &h->p[up])) break;
        h->p[i] = h->p[up];
        i = up;
    }
    h->p[i] = g;
}

static bigram heap_pop(heap *h) {
    bigram top = h->p[0];
    bigram last = h->p[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && bg_before(&h->p[c + 1], &h->p[c])) c++;
        if (!bg_before(&h->p[c], &last)) break;
        h->p[i] = h->p[c];
        i = c;
    }
    if (n) h->p[i] = last;
    return top;
}

/* Per-call cache word bytes -> token ids. A word's tokens depend on its bytes only (SPM: a
 * chunk cut before a U+2581 run; BPE: a pre-tokenized word), and running text repeats words,
 * so most words are merged once per call. */
typedef struct wslot { uint32_t hash, key_off, key_len, val_off, val_len; } wslot;
typedef struct wcache {
    wslot *slots;        /* key_len == UINT32_MAX: empty */
    uint32_t mask, n;
    unsigned char *keys; size_t nkeys, capkeys;
    int32_t *vals; size_t nvals, capvals;
} wcache;
#define WC_MAX_KEY 128
#define WC_MAX_ENTRIES (1u << 16)

typedef struct scratch {
    sym *s; size_t ns, cap;
    heap h;
    unsigned char *buf; size_t nbuf, capbuf;
    uint32_t *cpt; size_t capcpt;
    wcache wc;
    bool oom;
} scratch;

static bool grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* The cached ids of a word, or NULL (then *h is the hash to pass to wc_put). */
static const int32_t *wc_get(const wcache *c, const unsigned char *k, size_t n, uint32_t *h, uint32_t *nv) {
    *h = hash_bytes(HASH_SEED, k, n);
    if (!c->slots) return NULL;
    for (uint32_t i = *h & c->mask;; i = (i + 1) & c->mask) {
        const wslot *e = &c->slots[i];
        if (e->key_len == UINT32_MAX) return NULL;
        if (e->hash == *h && e->key_len == n && memcmp(c->keys + e->key_off, k, n) == 0) {
            *nv = e->val_len;
            return c->vals + e->val_off;
        }
    }
}

static void wc_put(wcache *c, const unsigned char *k, size_t n, uint32_t h, const int32_t *ids, size_t nids) {
    if (n > WC_MAX_KEY || c->n >= WC_MAX_ENTRIES || nids > n) return;
    if (!c->slots || (c->n + 1) * 2 > c->mask + 1) {
        uint32_t nm = c->slots ? c->mask * 2 + 1 : 1023;
        wslot *ns = malloc(sizeof(wslot) * ((size_t)nm + 1));
        if (!ns) return;
        for (uint32_t i = 0; i <= nm; i++) ns[i].key_len = UINT32_MAX;
        for (uint32_t i = 0; c->slots && i <= c->mask; i++) {
            if (c->slots[i].key_len == UINT32_MAX) continue;
            uint32_t j = c->slots[i].hash & nm;
            while (ns[j].key_len != UINT32_MAX) j = (j + 1) & nm;
            ns[j] = c->slots[i];
        }
        free(c->slots);
        c->slots = ns;
        c->mask = nm;
    }
    if (!grow((void **)&c->keys, &c->capkeys, c->nkeys + n + 1, 1)) return;
    if (!grow((void **)&c->vals, &c->capvals, c->nvals + nids + 1, sizeof(int32_t))) return;
    uint32_t j = h & c->mask;
    while (c->slots[j].key_len != UINT32_MAX) j = (j + 1) & c->mask;
    c->slots[j] = (wslot){ h, (uint32_t)c->nkeys, (uint32_t)n, (uint32_t)c->nvals, (uint32_t)nids };
    memcpy(c->keys + c->nkeys, k, n);
    c->nkeys += n;
    if (nids) memcpy(c->vals + c->nvals, ids, nids * sizeof(int32_t));
    c->nvals += nids;
    c->n++;
}

static bool split_symbols(scratch *w, const unsigned char *t, size_t n) {
    w->ns = 0;
    if (!grow((void **)&w->s, &w->cap, n + 1, sizeof(sym))) return false;
    size_t off = 0;
    int32_t idx = 0;
    while (off < n) {
        size_t l = utf8_len(t[off]);
        if (l > n - off) l = n - off;
        sym *s = &w->s[w->ns++];
        s->off = (uint32_t)off;
        s->n = (uint32_t)l;
        off += l;
        s->prev = idx - 1;
        s->next = off == n ? -1 : idx + 1;
        idx++;
    }
    return true;
}

/* llm_tokenizer_spm_session::try_add_bigram */
static void spm_add(const iqf_vocab *v, scratch *w, const unsigned char *t, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = w->s[l].n + w->s[r].n;
    if (size > v->max_tok_len) return;
    int32_t id = iqf_vocab_find(v, (const char *)t + w->s[l].off, size);
    if (id < 0) return;
    heap_push(&w->h, (bigram){ v->scores[id], l, r, size });
}

static bool is_ws_sym(const unsigned char *t, const sym *s) {
    return s->n == 3 && t[s->off] == 0xE2 && t[s->off + 1] == 0x96 && t[s->off + 2] == 0x81;
}

/* Merges symbols [a, b) (linked among themselves) and appends their tokens. */
static void spm_chunk(const iqf_vocab *v, scratch *w, const unsigned char *t, int32_t a, int32_t b, ibuf *out) {
    for (int32_t i = a; i < b; i++) {
        w->s[i].prev = i == a ? -1 : i - 1;
        w->s[i].next = i + 1 == b ? -1 : i + 1;
    }
    w->h.n = 0;
    for (int32_t i = a + 1; i < b; i++) spm_add(v, w, t, i - 1, i);
    while (w->h.n > 0 && !w->h.oom) {
        bigram g = heap_pop(&w->h);
        sym *ls = &w->s[g.left], *rs = &w->s[g.right];
        if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != g.size) continue;
        ls->n += rs->n;
        rs->n = 0;
        ls->next = rs->next;
        if (rs->next >= 0) w->s[rs->next].prev = g.left;
        spm_add(v, w, t, ls->prev, g.left);
        spm_add(v, w, t, g.left, ls->next);
    }
    if (w->h.oom) { w->oom = true; return; }
    for (int32_t i = a; i != -1; i = w->s[i].next) {
        const sym *s = &w->s[i];
        int32_t id = iqf_vocab_find(v, (const char *)t + s->off, s->n);
        if (id >= 0) { ib_push(out, id); continue; }
        /* not a token: byte fallback (llama.cpp aborts if a byte has no token; we emit unk
         * or drop the byte) */
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t bt = v->byte_tok[t[s->off + j]];
            if (bt < 0) bt = v->unk;
            if (bt >= 0) ib_push(out, bt);
        }
    }
}

/* llm_tokenizer_spm_session::tokenize. llama.cpp merges the whole fragment in one heap. When no
 * token of the vocab has U+2581 right after something that is not U+2581 (v->spm_split: true
 * for SentencePiece vocabs, checked at load), no merge can cross the start of a U+2581 run, so
 * the text is cut there into words that are merged independently: the same merges happen in
 * the same relative order (the heap order restricted to one word is unchanged), with small
 * heaps instead of one of the size of the text. */
static void spm_tokenize(const iqf_vocab *v, scratch *w, const unsigned char *t, size_t n, ibuf *out) {
    if (n == 0) return;
    if (!split_symbols(w, t, n)) { w->oom = true; return; }
    int32_t ns = (int32_t)w->ns, a = 0;
    for (int32_t i = 1; i <= ns && !w->oom; i++) {
        if (i < ns) {
            if (!v->spm_split || !is_ws_sym(t, &w->s[i])) continue;
            uint32_t off = w->s[i].off;
            if (off >= 3 && t[off - 3] == 0xE2 && t[off - 2] == 0x96 && t[off - 1] == 0x81) continue;
        }
        /* the chunk's bytes: s[a].off .. start of s[i] (or the end) */
        size_t k0 = w->s[a].off, k1 = i < ns ? w->s[i].off : n;
        uint32_t h, nv;
        const int32_t *hit = wc_get(&w->wc, t + k0, k1 - k0, &h, &nv);
        if (hit) {
            for (uint32_t j = 0; j < nv; j++) ib_push(out, hit[j]);
        } else {
            size_t before = out->n;
            spm_chunk(v, w, t, a, i, out);
            if (!out->oom && !w->oom) wc_put(&w->wc, t + k0, k1 - k0, h, out->n > before ? out->p + before : NULL, out->n - before);
        }
        a = i;
    }
}

/* unicode_regex_split_custom_gpt2 over cpt[0..n): calls emit(word start, word end). */
static int gpt2_cls(const uint32_t *c, size_t n, size_t pos) {
    return pos < n ? iqf_tok_uc_class(c[pos]) : UC_NONE;
}

static void bpe_word(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out);

static void gpt2_split(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out) {
    size_t pos = 0, prev = 0;
#define EMIT(end)                                                    \
    do {                                                             \
        size_t e_ = (end);                                           \
        if (e_ > prev) bpe_word(v, w, c + prev, e_ - prev, out);     \
        prev = e_;                                                   \
    } while (0)
    while (pos < n) {
        uint32_t cp = c[pos];
        int f = gpt2_cls(c, n, pos);
        if (cp == '\'' && pos + 1 < n) {
            uint32_t nx = c[pos + 1];
            if (nx == 's' || nx == 't' || nx == 'm' || nx == 'd') { EMIT(pos + 2); pos += 2; continue; }
            if (pos + 2 < n) {
                uint32_t nn = c[pos + 2];
                if ((nx == 'r' && nn == 'e') || (nx == 'v' && nn == 'e') || (nx == 'l' && nn == 'l')) {
                    EMIT(pos + 3);
                    pos += 3;
                    continue;
                }
            }
        }
        int f2 = cp == ' ' ? gpt2_cls(c, n, pos + 1) : f;
        if (f2 == UC_LETTER || f2 == UC_NUMBER || f2 == UC_OTHER) {
            pos += (cp == ' ');
            while (gpt2_cls(c, n, pos) == f2) pos++;
            EMIT(pos);
            continue;
        }
        size_t nws = 0;
        while (gpt2_cls(c, n, pos + nws) == UC_SPACE) nws++;
        if (nws > 1 && pos + nws < n) { pos += nws - 1; EMIT(pos); continue; }
        if (nws > 0) { pos += nws; EMIT(pos); continue; }
        pos++;
        EMIT(pos);
    }
#undef EMIT
}

/* llm_tokenizer_bpe_session::tokenize for one pre-tokenized word */
static void bpe_word(const iqf_vocab *v, scratch *w, const uint32_t *c, size_t n, ibuf *out) {
    if (w->oom) return;
    /* code points -> UTF-8 -> GPT-2 byte encoding */
    if (!grow((void **)&w->buf, &w->capbuf, n * 8 + 1, 1)) { w->oom = true; return; }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char u[4];
        int k = utf8_encode(c[i], u);
        for (int j = 0; j < k; j++) {
            memcpy(w->buf + m, v->bmap[u[j]], v->bmap_len[u[j]]);
            m += v->bmap_len[u[j]];
        }
    }
    const unsigned char *t = w->buf;
    uint32_t h, nv;
    const int32_t *hit = wc_get(&w->wc, t, m, &h, &nv);
    if (hit) {
        for (uint32_t j = 0; j < nv; j++) ib_push(out, hit[j]);
        return;
    }
    const size_t before = out->n;
    if (!split_symbols(w, t, m)) { w->oom = true; return; }
    w->h.n = 0;
    for (size_t i = 1; i < w->ns; i++) {
        const sym *l = &w->s[i - 1], *r = &w->s[i];
        int32_t rank = iqf_tok_merge_rank(v, (const char *)t + l->off, l->n, (const char *)t + r->off, r->n);
        if (rank >= 0) heap_push(&w->h, (bigram){ -(double)rank, (int32_t)i - 1, (int32_t)i, l->n + r->n });
    }
    while (w->h.n > 0 && !w->h.oom) {
        bigram g = heap_pop(&w->h);
        sym *ls = &w->s[g.left], *rs = &w->s[g.right];
        if (ls->n == 0 || rs->n == 0 || ls->n + rs->n != g.size) continue;
        ls->n += rs->n;
        rs->n = 0;
        ls->next = rs->next;
        if (rs->next >= 0) w->s[rs->next].prev = g.left;
        int32_t pairs[2][2] = { { ls->prev, g.left }, { g.left, ls->next } };
        for (int k = 0; k < 2; k++) {
            int32_t a = pairs[k][0], b = pairs[k][1];
            if (a < 0 || b < 0) continue;
            const sym *l = &w->s[a], *r = &w->s[b];
            int32_t rank = iqf_tok_merge_rank(v, (const char *)t + l->off, l->n, (const char *)t + r->off, r->n);
            if (rank >= 0) heap_push(&w->h, (bigram){ -(double)rank, a, b, l->n + r->n });
        }
    }
    if (w->h.oom) { w->oom = true; return; }
    for (size_t i = 0; i < w->ns; i++) {
        const sym *s = &w->s[i];
        if (s->n == 0) continue;
        int32_t id = iqf_vocab_find(v, (const char *)t + s->off, s->n);
        if (id >= 0) { ib_push(out, id); continue; }
        for (uint32_t j = 0; j < s->n; j++) {
            int32_t b = v->raw_byte_tok[t[s->off + j]];
            if (b >= 0) ib_push(out, b);
        }
    }
    if (!out->oom) wc_put(&w->wc, t, m, h, out->n > before ? out->p + before : NULL, out->n - before);
}

static void bpe_tokenize(const iqf_vocab *v, scratch *w, const unsigned char *t, size_t n, ibuf *out) {
    if (!grow((void **)&w->cpt, &w->capcpt, n + 1, sizeof(uint32_t))) { w->oom = true; return; }
    size_t nc = 0;
    for (size_t i = 0; i < n;) w->cpt[nc++] = utf8_decode(t, n, &i);
    /* bpe_word reuses w->buf / w->s, not w->cpt */
    gpt2_split(v, w, w->cpt, nc, out);
}

/* tokenizer_st_partition: fragments of raw text and special tokens. */
typedef struct frag { int32_t token; size_t off, len; } frag; /* token < 0: raw text */

#define GRAM_WORDS (1u << 14) /* 2^20 bits */
static uint32_t gram_hash(const unsigned char *p) {
    uint32_t x = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
    return (x * 0x9E3779B1u) >> 12;
}

static bool is_space_c(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static frag *partition(const iqf_vocab *v, const char *text, size_t len, bool parse_special, size_t *nfrag) {
    size_t cap = 16, n = 0;
    frag *f = malloc(cap * sizeof *f);
    if (!f) return NULL;
    if (len > 0) f[n++] = (frag){ -1, 0, len };
    frag *g = NULL;
    size_t gcap = 0;
    /* Many special tokens over a long text (e.g. parse_special with thousands of control
     * tokens): a bitmap of the text's 3-byte grams rejects most tokens without a scan. */
    uint64_t *grams = NULL;
    int32_t considered = 0;
    for (int32_t si = 0; si < v->n_special; si++)
        if (parse_special || !(v->attr[v->special[si]] & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_UNKNOWN))) considered++;
    if (len >= 3 && (uint64_t)considered * len > (1u << 22)) {
        grams = calloc(GRAM_WORDS, sizeof(uint64_t));
        if (grams)
            for (size_t i = 0; i + 3 <= len; i++) {
                uint32_t h = gram_hash((const unsigned char *)text + i);
                grams[h >> 6] |= 1ull << (h & 63);
            }
    }
    for (int32_t si = 0; si < v->n_special; si++) {
        int32_t id = v->special[si];
        uint32_t a = v->attr[id];
        if (!parse_special && (a & (IQF_TOKATTR_CONTROL | IQF_TOKATTR_UNKNOWN))) continue;
        const char *st = v->text + v->tok_off[id];
        size_t sl = v->tok_len[id];
        if (grams && sl >= 3) {
            bool maybe = true;
            for (size_t i = 0; i + 3 <= sl && i < 16 && maybe; i++) {
                uint32_t h = gram_hash((const unsigned char *)st + i);
                maybe = (grams[h >> 6] >> (h & 63)) & 1;
            }
            if (!maybe) continue;
        }
        /* quick reject: any raw fragment containing the text? */
        bool any = false;
        for (size_t k = 0; k < n && !any; k++)
            if (f[k].token < 0 && memmem(text + f[k].off, f[k].len, st, sl)) any = true;
        if (!any) continue;
        size_t gn = 0;
        for (size_t k = 0; k < n; k++) {
            if (!grow((void **)&g, &gcap, gn + 3, sizeof *g)) { free(f); free(g); free(grams); return NULL; }
            if (f[k].token >= 0) { g[gn++] = f[k]; continue; }
            size_t off = f[k].off, l = f[k].len;
            for (;;) {
                const char *m = l ? memmem(text + off, l, st, sl) : NULL;
                if (!m) { if (l > 0) g[gn++] = (frag){ -1, off, l }; break; }
                size_t mp = (size_t)(m - text);
                if (!grow((void **)&g, &gcap, gn + 3, sizeof *g)) { free(f); free(g); free(grams); return NULL; }
                if (mp > off) {
                    size_t ll = mp - off;
                    if (a & IQF_TOKATTR_LSTRIP)
                        while (ll > 0 && is_space_c((unsigned char)text[off + ll - 1])) ll--;
                    if (ll > 0) g[gn++] = (frag){ -1, off, ll };
                }
                g[gn++] = (frag){ id, 0, 0 };
                if (mp + sl < off + l) {
                    size_t ro = mp + sl, rl = off + l - ro;
                    if (a & IQF_TOKATTR_RSTRIP)
                        while (rl > 0 && is_space_c((unsigned char)text[ro])) { ro++; rl--; }
                    off = ro;
                    l = rl;
                } else {
                    break;
                }
            }
        }
        frag *tmp = f; f = g; g = tmp;
        size_t tc = cap; cap = gcap; gcap = tc;
        n = gn;
    }
    free(g);
    free(grams);
    *nfrag = n;
    return f;
}

static int32_t tokenize_impl(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, int32_t max_out) {
    if (!v || (!text && len) || max_out < 0 || (!out && max_out > 0)) return IQF_TOKENIZE_ERROR;
    if (len > (size_t)INT32_MAX / 4) return IQF_TOKENIZE_ERROR;
    size_t nf = 0;
    frag *f = partition(v, text, len, parse_special, &nf);
    if (!f) return IQF_TOKENIZE_ERROR;
    ibuf o = { 0 };
    scratch w;
    memset(&w, 0, sizeof w);
    if (v->type == IQF_VOCAB_SPM) {
        bool prev_special = true;
        if (add_special && v->add_bos && v->bos >= 0) ib_push(&o, v->bos);
        unsigned char *esc = NULL;
        size_t esccap = 0;
        for (size_t k = 0; k < nf && !w.oom; k++) {
            if (f[k].token >= 0) { ib_push(&o, f[k].token); prev_special = true; continue; }
            if (!grow((void **)&esc, &esccap, 3 * (f[k].len + 1), 1)) { w.oom = true; break; }
            size_t m = 0;
            const char *p = text + f[k].off;
            if (v->add_space_prefix && prev_special) { memcpy(esc, "\xe2\x96\x81", 3); m = 3; }
            for (size_t i = 0; i < f[k].len; i++) {
                if (p[i] == ' ') { memcpy(esc + m, "\xe2\x96\x81", 3); m += 3; }
                else esc[m++] = (unsigned char)p[i];
            }
            spm_tokenize(v, &w, esc, m, &o);
            prev_special = false;
        }
        free(esc);
        if (add_special && v->add_eos && v->eos >= 0) ib_push(&o, v->eos);
    } else if (v->type == IQF_VOCAB_TEST) {
        /* llama.cpp's LLAMA_VOCAB_TYPE_TEST: each raw fragment in chunks of 5 bytes, a chunk's
         * id its bytes hashed (h = 31 h + byte, 64-bit) modulo the vocabulary size */
        for (size_t k = 0; k < nf; k++) {
            if (f[k].token >= 0) { ib_push(&o, f[k].token); continue; }
            const unsigned char *p = (const unsigned char *)text + f[k].off;
            for (size_t i = 0; i < f[k].len; i += 5) {
                uint64_t h = 0;
                for (size_t j = i; j < i + 5 && j < f[k].len; j++) h = h * 31 + p[j];
                ib_push(&o, (int32_t)(h % (uint64_t)v->n_tokens));
            }
        }
    } else {
        if (add_special && v->add_bos && v->bos >= 0) ib_push(&o, v->bos);
        for (size_t k = 0; k < nf && !w.oom; k++) {
            if (f[k].token >= 0) { ib_push(&o, f[k].token); continue; }
            bpe_tokenize(v, &w, (const unsigned char *)text + f[k].off, f[k].len, &o);
        }
        if (add_special && v->add_eos && v->eos >= 0) ib_push(&o, v->eos);
    }
    free(f);
    free(w.s); free(w.h.p); free(w.buf); free(w.cpt);
    free(w.wc.slots); free(w.wc.keys); free(w.wc.vals);
    int32_t ret;
    if (w.oom || o.oom || o.n > (size_t)INT32_MAX) {
        ret = IQF_TOKENIZE_ERROR;
    } else if (o.n > (size_t)max_out) {
        ret = -(int32_t)o.n;
    } else {
        if (o.n) memcpy(out, o.p, o.n * sizeof *out);
        ret = (int32_t)o.n;
    }
    free(o.p);
    return ret;
}

int32_t iqf_tokenize(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                     int32_t *out, int32_t max_out) {
    return tokenize_impl(v, text, len, add_special, false, out, max_out);
}

int32_t iqf_tokenize_ex(const iqf_vocab *v, const char *text, size_t len, bool add_special,
                        bool parse_special, int32_t *out, int32_t max_out) {
    return tokenize_impl(v, text, len, add_special, parse_special, out, max_out);
}

/* ------------------------------------------------------------------------------------------ */
/* Detokenizing                                                                                */

const char *iqf_token_piece(const iqf_vocab *v, int32_t id, bool special, size_t *len) {
    if (!v || id < 0 || id >= v->n_tokens) { if (len) *len = 0; return NULL; }
    if (!special && (v->attr[id] & (IQF_TOKATTR_UNKNOWN | IQF_TOKATTR_CONTROL))) {
        if (len) *len = 0;
        return v->piece + v->piece_off[id];
    }
    if (len) *len = v->piece_len[id];
    return v->piece + v->piece_off[id];
}

int32_t iqf_token_to_piece(const iqf_vocab *v, int32_t id, char *buf, int32_t buflen,
                           int32_t lstrip, bool special) {
    size_t n;
    const char *p = iqf_token_piece(v, id, special, &n);
    if (!p) return 0;
    for (int32_t i = 0; i < lstrip && n && *p == ' '; i++) { p++; n--; }
    if (buflen < 0 || (size_t)buflen < n) return -(int32_t)n;
    if (n) memcpy(buf, p, n);
    return (int32_t)n;
}

int32_t iqf_detokenize(const iqf_vocab *v, const int32_t *tokens, int32_t n_tokens, char *text,
                       int32_t text_max, bool remove_special, bool unparse_special) {
    if (!v || n_tokens < 0 || (!tokens && n_tokens) || text_max < 0 || (!text && text_max))
        return IQF_TOKENIZE_ERROR;
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens) return IQF_TOKENIZE_ERROR;
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->bos) {
        remove_space = false;
        n_tokens--;
        tokens++;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->eos) n_tokens--;
    int64_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        size_t n;
        const char *p = iqf_token_piece(v, tokens[i], unparse_special, &n);
        if (remove_space && n && *p == ' ') { p++; n--; }
        remove_space = false;
        if (n && total + (int64_t)n <= text_max) memcpy(text + total, p, n);
        total += (int64_t)n;
        if (total > INT32_MAX) return IQF_TOKENIZE_ERROR;
    }
    if (total > text_max) return -(int32_t)total;
    if (v->clean_spaces && total > 0) {
        char *t = text;
        /* " ?", " !", " .", " ," lose the space */
        int32_t t1 = (int32_t)total, k = 1;
        for (int32_t i = 1; i < t1; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) k--;
            t[k++] = x;
        }
        /* " ' " -> "'" */
        int32_t t2 = k;
        k = 1;
        for (int32_t i = 1; i < t2; i++) {
            char x = t[i];
            if (x == '\'' && i + 1 < t2 && t[i - 1] == ' ' && t[i + 1] == ' ') {
                k--;
                t[++i] = '\0';
            }
            t[k++] = x;
        }
        /* " 's", " 'm", " 're", " 've" lose the space */
        int32_t t3 = k;
        k = 1;
        for (int32_t i = 1; i < t3; i++) {
            char x = t[i];
            if (t[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
                char x1 = t[i + 1];
                if (x1 == 's' || x1 == 'm') k--;
                else if (i + 2 < t3) {
                    char x2 = t[i + 2];
                    if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) k--;
                }
            }
            t[k++] = x;
        }
        total = k;
    }
    return (int32_t)total;
}
