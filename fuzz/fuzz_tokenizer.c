/*
 * fuzz_tokenizer.c - libFuzzer target for the tokenizer (src/model/tokenizer.c), hostile vocab
 * and hostile text at once. Build and run with scripts/fuzz.sh.
 *
 * Input: byte 0 = flags (bit 0: gpt2 instead of llama, bit 1 add_special, bit 2 parse_special,
 * bit 3 token types, bit 4 scores), then "\n\n"-separated sections: tokens ('\n'-separated),
 * merges ('\n'-separated), text (the rest). A GGUF file as input is also tried with
 * iqf_vocab_load (if at most 256 KiB) and its vocab tokenizes a fixed sentence plus the input.
 * Checks: no crash/UB/leak, ids in range, detokenize never writes past its buffer, the
 * "needed size" answer equals the real count.
 */
#include "iqforge.h"
#include "model/tokenizer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void run(const iqf_vocab *v, const char *text, size_t n, bool add, bool parse) {
    int32_t need = iqf_tokenize_ex(v, text, n, add, parse, NULL, 0);
    if (need == IQF_TOKENIZE_ERROR) return;
    int32_t cnt = need < 0 ? -need : need;
    int32_t *ids = malloc(sizeof(int32_t) * ((size_t)cnt + 1));
    if (!ids) return;
    int32_t got = iqf_tokenize_ex(v, text, n, add, parse, ids, cnt);
    if (got != cnt) abort();
    for (int32_t i = 0; i < got; i++)
        if (ids[i] < 0 || ids[i] >= iqf_vocab_n_tokens(v)) abort();
    int32_t tl = iqf_detokenize(v, ids, got, NULL, 0, add, parse);
    if (tl < 0 && tl != IQF_TOKENIZE_ERROR) {
        char *t = malloc((size_t)-tl);
        if (t && iqf_detokenize(v, ids, got, t, -tl, add, parse) < 0) abort();
        free(t);
    }
    for (int32_t i = 0; i < got && i < 64; i++) {
        char buf[8];
        (void)iqf_token_to_piece(v, ids[i], buf, sizeof buf, 1, parse);
    }
    free(ids);
}

static size_t split(const char *p, size_t n, const char *sep, size_t sl, const char **parts, size_t *lens, size_t maxp) {
    size_t np = 0, s = 0;
    for (size_t i = 0; i + sl <= n && np + 1 < maxp;) {
        if (memcmp(p + i, sep, sl) == 0) { parts[np] = p + s; lens[np++] = i - s; i += sl; s = i; }
        else i++;
    }
    parts[np] = p + s;
    lens[np++] = n - s;
    return np;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size >= 4 && memcmp(data, "GGUF", 4) == 0) {
        if (size > (256u << 10)) return 0; /* the big vocab seeds are slow under ASan: small ones only */
        iqf_gguf *g = iqf_gguf_open_memory(data, size, "fuzz", NULL, 0);
        if (g) {
            iqf_vocab *v = iqf_vocab_load(g, NULL, 0);
            if (v) {
                static const char s[] = " Hello world, it's 3.14 <s> \xe2\x96\x81 \xff\n\n";
                run(v, s, sizeof s - 1, true, false);
                run(v, (const char *)data, size < 4096 ? size : 4096, false, true);
                iqf_vocab_free(v);
            }
            iqf_gguf_close(g);
        }
        return 0;
    }
    if (size < 1) return 0;
    unsigned flags = data[0];
    const char *p = (const char *)data + 1;
    size_t n = size - 1;
    const char *sec[3];
    size_t secl[3];
    size_t ns = split(p, n, "\n\n", 2, sec, secl, 3);
    if (ns < 3) return 0;
    static const char *toks[4096];
    static size_t tl[4096];
    static const char *mer[4096];
    static size_t ml[4096];
    static float sc[4096];
    static int32_t ty[4096];
    size_t nt = split(sec[0], secl[0], "\n", 1, toks, tl, 4096);
    size_t nm = split(sec[1], secl[1], "\n", 1, mer, ml, 4096);
    for (size_t i = 0; i < nt; i++) {
        sc[i] = (float)(int)(i * 7919 % 1000) - 500.0f;
        ty[i] = tl[i] ? (unsigned char)toks[i][0] % 8 : 1;
    }
    iqf_vocab_arrays a = iqf_vocab_arrays_init();
    a.model = (flags & 1) ? "gpt2" : "llama";
    a.pre = "gpt-2";
    a.name = (flags & 32) ? "phi3" : NULL;
    a.n_tokens = (int64_t)nt;
    static uint64_t tl64[4096], ml64[4096];
    for (size_t i = 0; i < nt; i++) tl64[i] = tl[i];
    for (size_t i = 0; i < nm; i++) ml64[i] = ml[i];
    a.tokens = toks;
    a.token_lens = tl64;
    if (flags & 16) { a.scores = sc; a.n_scores = (int64_t)nt; }
    if (flags & 8) { a.token_types = ty; a.n_token_types = (int64_t)nt; }
    a.merges = mer;
    a.merge_lens = ml64;
    a.n_merges = (int64_t)nm;
    a.bos_id = (flags >> 6) & 1 ? 1 : IQF_VOCAB_ID_UNSET;
    iqf_vocab *v = iqf_vocab_from_arrays(&a, NULL, 0);
    if (!v) return 0;
    run(v, sec[2], secl[2], flags & 2, flags & 4);
    iqf_vocab_free(v);
    return 0;
}
