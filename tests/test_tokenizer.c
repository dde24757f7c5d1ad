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

static iqf_vocab *load_vocab(const char *rel) {
    char err[512] = "";
    iqf_vocab *v = NULL;
    iqf_gguf *g = iqf_gguf_open(src_path(rel), err, sizeof err);
    if (g) v = iqf_vocab_load(g, err, sizeof err);
    iqf_gguf_close(g);
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
