/*
 * test_tokenizer.c - the SPM and BPE tokenizers against llama.cpp's test-tokenizer-0 vectors
 * (tests/data/vocab/<vocab>.gguf.inp/.out, add_special=false, parse_special=false), against
 * token ids recorded from the oracle's libllama for stories260K (and live against libllama when
 * the oracle is installed), detokenization, hostile inputs and hostile vocabularies.
 */
#include "model/tokenizer.h"
#include "oracle.h"
#include "testutil.h"

#include <dirent.h>
#include <pthread.h>
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

/* The first and third lines of TinyStories validation text (shared/data/tinystories-valid-excerpt.txt,
 * CDLA-Sharing-1.0; CRLF line ends kept) and the ids the oracle's libllama gives with
 * stories260K-f32.gguf (llama_tokenize, add_special=true, parse_special=false). */
static const char stories_text[] =
    "once upon a time there was a little girl who wanted to explore the world. She asked her "
    "parents if she could have a passport. Her excited parents said yes. The little girl was "
    "so happy. She grabbed her passport and ran out the door. She walked down the street to t"
    "he passport office. When she got there, she handed the clerk her passport. The clerk sai"
    "d, \"I'm sorry, but you've been disqualified. Your passport is not valid.\" The little gir"
    "l was embarrassed. She couldn't believe it. She had been so excited to explore the world"
    ", and now she couldn't. She had to quit her dream. The little girl went home with her he"
    "ad down. Her parents hugged her and said they were sorry. But the little girl knew that "
    "she still had so much to explore and learn in the world, and one day she would be able t"
    "o get a valid passport and continue her journey.\r\nOnce there was a girl called Claire an"
    "d she was 3 years old. One day, Claire heard a weird noise coming from outside. She said"
    " to herself 'What is that noise?'. She went outside to find out what it was. The noise w"
    "as coming from a big box with lots of buttons. Inside the box was a strange machine with"
    " lots of strange tools. A voice came from the box and said \"please provide a valid order"
    "\". Claire was very surprised and said \"What?\". The voice said \"I need an order to comple"
    "te my job\". Claire thought for a bit and said \"Can I have a biscuit?\". The voice replied"
    " \"I cannot provide that order. Please provide a valid order\". Claire thought again and s"
    "aid \"Clean the floor\". The strange machine started to move and started to clean the floo"
    "r. Claire was so surprised! It was so weird seeing the machine clean the floor. When the"
    " machine finished cleaning, Claire was very happy. She said \"Thank you!\" and the strange"
    " machine said \"You're welcome\".\r";
static const int32_t stories_ids[931] = {
    1, 353, 331, 407, 261, 378, 383, 286, 261, 376, 298, 315, 421, 263, 415, 414, 391, 266,
    267, 344, 444, 427, 421, 414, 276, 265, 263, 304, 341, 426, 338, 261, 419, 355, 311, 282,
    412, 276, 361, 419, 410, 417, 431, 358, 280, 389, 300, 360, 261, 282, 412, 419, 419, 427,
    304, 413, 426, 320, 285, 344, 444, 429, 275, 266, 282, 412, 276, 361, 419, 336, 348, 406,
    426, 291, 376, 298, 315, 421, 286, 384, 393, 426, 338, 298, 420, 412, 430, 430, 266, 311,
    282, 412, 419, 419, 427, 304, 413, 269, 352, 303, 410, 408, 265, 400, 304, 426, 338, 273,
    421, 355, 279, 327, 416, 265, 349, 276, 316, 267, 265, 282, 412, 419, 419, 427, 304, 413,
    373, 431, 417, 331, 426, 410, 448, 260, 416, 358, 298, 309, 383, 432, 358, 300, 264, 266,
    265, 280, 421, 285, 433, 311, 282, 412, 419, 419, 427, 304, 413, 426, 291, 280, 421, 285,
    433, 336, 432, 313, 442, 439, 423, 262, 304, 420, 422, 432, 398, 364, 439, 360, 329, 302,
    279, 293, 456, 425, 412, 421, 417, 431, 417, 266, 426, 410, 452, 277, 420, 282, 412, 419,
    419, 427, 304, 413, 410, 293, 297, 309, 410, 435, 412, 421, 292, 426, 436, 291, 376, 298,
    315, 421, 286, 344, 423, 430, 295, 420, 412, 419, 419, 266, 426, 338, 280, 389, 416, 439,
    413, 329, 421, 417, 411, 360, 312, 426, 338, 381, 329, 302, 384, 344, 444, 429, 275, 266,
    267, 344, 444, 427, 421, 414, 276, 265, 263, 304, 341, 432, 269, 297, 327, 358, 280, 389,
    416, 439, 413, 426, 338, 381, 267, 410, 456, 425, 275, 311, 279, 276, 314, 426, 291, 376,
    298, 315, 421, 263, 377, 270, 287, 411, 335, 311, 281, 380, 279, 327, 416, 426, 320, 285,
    282, 412, 276, 361, 419, 270, 425, 428, 428, 266, 311, 269, 336, 366, 382, 276, 262, 304,
    420, 422, 426, 368, 323, 265, 376, 298, 315, 421, 409, 416, 411, 424, 351, 358, 349, 290,
    421, 381, 384, 284, 425, 402, 267, 344, 444, 427, 421, 414, 276, 269, 278, 411, 295, 416,
    322, 265, 263, 304, 341, 432, 269, 353, 411, 328, 358, 263, 389, 329, 261, 430, 305, 267,
    298, 316, 261, 410, 435, 412, 421, 292, 282, 412, 419, 419, 427, 304, 413, 269, 280, 289,
    413, 271, 425, 411, 311, 410, 449, 277, 420, 416, 411, 422, 426, 16, 13, 441, 416, 331,
    383, 286, 261, 298, 315, 421, 280, 388, 266, 410, 457, 421, 412, 417, 276, 269, 358, 286,
    410, 472, 348, 411, 295, 419, 334, 341, 426, 385, 328, 432, 410, 457, 421, 412, 417, 276,
    281, 295, 418, 261, 382, 315, 418, 297, 414, 293, 411, 280, 287, 299, 272, 420, 287, 410,
    408, 419, 292, 411, 426, 338, 336, 267, 311, 372, 421, 431, 410, 439, 448, 415, 294, 410,
    293, 351, 297, 414, 293, 411, 450, 439, 426, 338, 263, 377, 410, 408, 419, 292, 411, 267,
    272, 417, 264, 410, 408, 263, 415, 294, 312, 286, 426, 291, 297, 414, 293, 411, 286, 280,
    287, 299, 272, 420, 287, 261, 370, 268, 414, 444, 335, 278, 309, 419, 373, 398, 413, 289,
    419, 426, 359, 416, 419, 292, 411, 265, 268, 414, 444, 286, 261, 349, 420, 303, 428, 411,
    284, 412, 402, 271, 411, 335, 278, 309, 419, 373, 349, 420, 303, 428, 411, 267, 414, 421,
    419, 426, 410, 447, 410, 435, 414, 417, 331, 280, 314, 411, 272, 420, 287, 265, 268, 414,
    444, 269, 336, 313, 427, 305, 412, 372, 282, 420, 414, 435, 292, 411, 261, 410, 435, 412,
    421, 292, 410, 304, 418, 285, 436, 426, 410, 457, 421, 412, 417, 276, 286, 399, 262, 425,
    420, 427, 420, 293, 266, 269, 336, 313, 448, 415, 294, 450, 436, 426, 291, 410, 435, 414,
    417, 331, 336, 313, 442, 404, 266, 261, 416, 410, 304, 418, 285, 267, 280, 287, 427, 305,
    413, 411, 284, 422, 410, 449, 414, 430, 436, 426, 410, 457, 421, 412, 417, 276, 308, 277,
    428, 415, 413, 387, 261, 268, 275, 269, 336, 313, 457, 303, 359, 300, 360, 261, 268, 293,
    429, 425, 275, 450, 436, 426, 291, 410, 435, 414, 417, 331, 410, 276, 427, 421, 417, 266,
    313, 442, 280, 303, 416, 309, 282, 420, 414, 435, 292, 411, 351, 410, 304, 418, 285, 426,
    410, 460, 305, 412, 372, 282, 420, 414, 435, 292, 411, 261, 410, 435, 412, 421, 292, 410,
    304, 418, 285, 436, 426, 410, 457, 421, 412, 417, 276, 308, 277, 428, 415, 413, 261, 428,
    412, 271, 269, 336, 313, 457, 305, 303, 265, 272, 421, 414, 304, 436, 426, 291, 349, 420,
    303, 428, 411, 284, 412, 402, 271, 411, 349, 295, 413, 266, 267, 284, 414, 360, 269, 349,
    295, 413, 266, 267, 280, 305, 303, 265, 272, 421, 414, 304, 426, 410, 457, 421, 412, 417,
    276, 286, 384, 262, 425, 420, 427, 420, 293, 266, 443, 359, 413, 286, 384, 382, 315, 418,
    262, 411, 411, 299, 265, 284, 412, 402, 271, 411, 280, 305, 303, 265, 272, 421, 414, 304,
    426, 410, 448, 260, 416, 265, 284, 412, 402, 271, 411, 272, 271, 293, 260, 418, 280, 305,
    303, 299, 432, 410, 457, 421, 412, 417, 276, 286, 399, 393, 426, 338, 336, 313, 434, 415,
    303, 433, 364, 443, 436, 269, 265, 349, 420, 303, 428, 411, 284, 412, 402, 271, 411, 336,
    313, 452, 277, 439, 276, 382, 421, 429, 287, 411, 436, 426, 16,
};

static int32_t *tok_alloc(const iqf_vocab *v, const char *t, size_t n, bool add, bool parse, int32_t *count) {
    int32_t need = iqf_tokenize_ex(v, t, n, add, parse, NULL, 0);
    *count = need;
    if (need == IQF_TOKENIZE_ERROR) return NULL;
    int32_t cap = need < 0 ? -need : need;
    int32_t *o = malloc(sizeof(int32_t) * ((size_t)cap + 1));
    *count = iqf_tokenize_ex(v, t, n, add, parse, o, cap);
    return o;
}

static bool same_ids(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    return na == nb && (na <= 0 || memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0);
}

/* stories260K's 512-token SentencePiece vocab against ids recorded from the oracle. */
static void test_stories(void) {
    iqf_vocab *v = load_vocab("tests/data/stories260K/stories260K-f32.gguf");
    if (!v) return;
    CHECK(iqf_vocab_n_tokens(v) == 512, "n_tokens %d", iqf_vocab_n_tokens(v));
    CHECK(iqf_vocab_bos(v) == 1 && iqf_vocab_eos(v) == 2 && iqf_vocab_unk(v) == 0, "special ids");
    CHECK(iqf_vocab_add_bos(v) && !iqf_vocab_add_eos(v), "add_bos/add_eos");
    CHECK(iqf_vocab_get_type(v) == IQF_VOCAB_SPM, "type");
    CHECK(iqf_vocab_newline(v) == 13, "newline %d", iqf_vocab_newline(v));
    CHECK(iqf_vocab_is_eog(v, 2) && !iqf_vocab_is_eog(v, 1), "eog");
    int32_t n;
    int32_t *t = tok_alloc(v, stories_text, strlen(stories_text), true, false, &n);
    const int32_t nw = (int32_t)(sizeof stories_ids / sizeof stories_ids[0]);
    CHECK(t && same_ids(t, n, stories_ids, nw), "stories260K: %d tokens, want %d", n, nw);
    /* detokenize: the leading space of the space prefix goes away */
    if (t && n > 1) {
        size_t len = strlen(stories_text);
        char *buf = malloc(len + 16);
        int32_t m = iqf_detokenize(v, t + 1, n - 1, buf, (int32_t)len + 16, false, false);
        CHECK(m == (int32_t)len && memcmp(buf, stories_text, len) == 0, "stories260K detokenize: %d bytes", m);
        m = iqf_detokenize(v, t, n, buf, 10, true, false);
        CHECK(m == -(int32_t)len - 1, "detokenize into a short buffer: %d", m); /* keeps " once" */
        free(buf);
    }
    free(t);
    iqf_vocab_free(v);
}

/* Specific inputs with ids recorded from the oracle's libllama (add_special=true). */
typedef struct rec_case { const char *text; size_t len; bool parse; int32_t n; int32_t ids[12]; } rec_case;

static void check_cases(const char *vocab, const rec_case *c, int nc) {
    char rel[256];
    snprintf(rel, sizeof rel, "tests/data/vocab/%s", vocab);
    iqf_vocab *v = load_vocab(rel);
    if (!v) return;
    for (int i = 0; i < nc; i++) {
        int32_t out[64];
        int32_t n = iqf_tokenize_ex(v, c[i].text, c[i].len, true, c[i].parse, out, 64);
        CHECK(same_ids(out, n, c[i].ids, c[i].n), "%s case %d (parse_special=%d): %d tokens, want %d",
              vocab, i, c[i].parse, n, c[i].n);
        if (!same_ids(out, n, c[i].ids, c[i].n)) { print_ids("got ", out, n > 0 ? n : 0); print_ids("want", c[i].ids, c[i].n); }
    }
    iqf_vocab_free(v);
}

static void test_recorded_cases(void) {
    static const rec_case spm[] = {
        { "\xff\xfe abc \xc3", 8, false, 10, { 1, 29871, 258, 257, 229, 153, 132, 10736, 29871, 198 } },
        { "a\xe2\x96 b\x80\x80", 7, false, 10, { 1, 263, 229, 153, 229, 153, 132, 29890, 131, 131 } },
        { "\xed\xa0\x80\xc0\x80 x", 8, false, 9, { 1, 29871, 240, 163, 131, 195, 131, 921, 3 } },
        { "<s> hi</s>", 10, false, 8, { 1, 529, 29879, 29958, 7251, 829, 29879, 29958 } },
        { "<s> hi</s>", 10, true, 5, { 1, 1, 29871, 7251, 2 } },
        { "\t\n \xc2\xa0\xe3\x80\x80 9\xc2\xbc", 12, false, 9, { 1, 29871, 12, 13, 20246, 30358, 29871, 29929, 30515 } },
        { "a\0b", 3, false, 4, { 1, 263, 3, 29890 } },
        { "", 0, false, 1, { 1 } },
    };
    static const rec_case bpe[] = {
        { "\xff\xfe abc \xc3", 8, false, 4, { 6353, 450, 66, 20543 } },
        { "a\xe2\x96 b\x80\x80", 7, false, 4, { 64, 6353, 275, 6353 } },
        { "\xed\xa0\x80\xc0\x80 x", 8, false, 6, { 169, 254, 222, 188, 2124, 188 } },
        { "<s> hi</s>", 10, true, 7, { 27, 82, 29, 23105, 3556, 82, 29 } },
        { "\t\n \xc2\xa0\xe3\x80\x80 9\xc2\xbc", 12, false, 8, { 197, 198, 5624, 5099, 222, 860, 126, 120 } },
        { "a\0b", 3, false, 3, { 64, 188, 65 } },
        { "", 0, false, 0, { 0 } },
    };
    check_cases("ggml-vocab-llama-spm.gguf", spm, (int)(sizeof spm / sizeof spm[0]));
    check_cases("ggml-vocab-gpt-2.gguf", bpe, (int)(sizeof bpe / sizeof bpe[0]));
}

/* Round trips and detokenization details. */
static void test_detokenize(void) {
    iqf_vocab *v = load_vocab("tests/data/vocab/ggml-vocab-llama-spm.gguf");
    if (v) {
        size_t n;
        const char *p = iqf_token_piece(v, 15043, false, &n); /* "▁Hello" */
        CHECK(p && n == 6 && memcmp(p, " Hello", 6) == 0, "piece 15043");
        p = iqf_token_piece(v, 13, false, &n); /* <0x0A> */
        CHECK(p && n == 1 && p[0] == '\n', "byte piece");
        p = iqf_token_piece(v, 1, false, &n);
        CHECK(p && n == 0, "control piece without special");
        p = iqf_token_piece(v, 1, true, &n);
        CHECK(p && n == 3 && memcmp(p, "<s>", 3) == 0, "control piece with special");
        CHECK(iqf_token_piece(v, -1, true, &n) == NULL && n == 0, "bad id");
        CHECK(iqf_token_piece(v, 32000, true, &n) == NULL, "bad id");
        char buf[64];
        CHECK(iqf_token_to_piece(v, 15043, buf, 64, 1, false) == 5 && memcmp(buf, "Hello", 5) == 0, "lstrip");
        CHECK(iqf_token_to_piece(v, 15043, buf, 3, 0, false) == -6, "short buffer");
        int32_t bad[2] = { 5, 99999 };
        CHECK(iqf_detokenize(v, bad, 2, buf, 64, false, false) == IQF_TOKENIZE_ERROR, "bad id in detokenize");
        /* SPM round trip of text with stray bytes: byte fallback keeps invalid UTF-8 exactly
         * (continuation bytes only: a stray lead byte would swallow the U+2581 of a space) */
        tu_rng r = { 42 };
        int iters = getenv("IQF_SANITIZED") ? 100 : 1000, bad_rt = 0;
        for (int it = 0; it < iters; it++) {
            char text[64];
            size_t len = 1 + tu_next(&r) % 40;
            for (size_t i = 0; i < len; i++) {
                uint64_t x = tu_next(&r);
                text[i] = (char)((x & 3) == 0 ? ' ' : (x & 3) == 1 ? 'a' + (x >> 8) % 26 : 0x80 + (x >> 8) % 64);
            }
            if (text[0] == ' ') text[0] = 'x';
            int32_t nt;
            int32_t *t = tok_alloc(v, text, len, false, false, &nt);
            char back[256];
            int32_t m = t ? iqf_detokenize(v, t, nt, back, 256, false, false) : -1;
            if (m != (int32_t)len || memcmp(back, text, len) != 0) bad_rt++;
            free(t);
        }
        CHECK(bad_rt == 0, "SPM byte round trip failed %d/%d times", bad_rt, iters);
        iqf_vocab_free(v);
    }
    v = load_vocab("tests/data/vocab/ggml-vocab-gpt-2.gguf");
    if (v) {
        size_t n;
        int32_t id = iqf_vocab_find(v, "\xc4\xa0" "Hello", 7); /* "ĠHello" */
        CHECK(id == 18435, "find ĠHello: %d", id);
        const char *p = iqf_token_piece(v, id, false, &n);
        CHECK(p && n == 6 && memcmp(p, " Hello", 6) == 0, "BPE piece");
        CHECK(iqf_vocab_bos(v) == 50256 && iqf_vocab_eos(v) == 50256 && !iqf_vocab_add_bos(v), "gpt-2 specials");
        CHECK(iqf_vocab_is_eog(v, 50256), "gpt-2 eog");
        CHECK(iqf_vocab_newline(v) == 198, "gpt-2 newline %d", iqf_vocab_newline(v));
        /* clean_spaces: " ," and " 's" lose their space, as llama_detokenize does */
        const char *s = "Hello , world 's end . ' ok";
        int32_t nt;
        int32_t *t = tok_alloc(v, s, strlen(s), false, false, &nt);
        char back[128];
        int32_t m = t ? iqf_detokenize(v, t, nt, back, 128, false, false) : -1;
        CHECK(m == 22 && memcmp(back, "Hello, world's end.'ok", 22) == 0, "clean spaces: %d '%.*s'", m, m > 0 ? m : 0, back);
        free(t);
        /* byte-level BPE round trip of valid UTF-8 (clean-up aside) */
        const char *u = "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\xa6\x99\n\tx";
        t = tok_alloc(v, u, strlen(u), false, false, &nt);
        m = t ? iqf_detokenize(v, t, nt, back, 128, false, false) : -1;
        CHECK(m == (int32_t)strlen(u) && memcmp(back, u, strlen(u)) == 0, "BPE UTF-8 round trip");
        free(t);
        iqf_vocab_free(v);
    }
}

/* Empty text, NULL, tiny output buffers, long runs, very long words. */
static void test_hostile_text(void) {
    const char *names[2] = { "tests/data/vocab/ggml-vocab-llama-spm.gguf", "tests/data/vocab/ggml-vocab-gpt-2.gguf" };
    for (int k = 0; k < 2; k++) {
        iqf_vocab *v = load_vocab(names[k]);
        if (!v) continue;
        int32_t out[4];
        CHECK(iqf_tokenize(v, NULL, 0, false, out, 4) == 0, "NULL empty");
        CHECK(iqf_tokenize(v, NULL, 5, false, out, 4) == IQF_TOKENIZE_ERROR, "NULL with length");
        CHECK(iqf_tokenize(v, "x", 1, false, out, -1) == IQF_TOKENIZE_ERROR, "negative max_out");
        CHECK(iqf_tokenize(v, "x", 1, false, NULL, 4) == IQF_TOKENIZE_ERROR, "NULL out");
        int32_t need = iqf_tokenize(v, "Hello world, how are you", 24, false, out, 2);
        CHECK(need < -2, "too small: %d", need);
        CHECK(iqf_tokenize(v, "Hello world, how are you", 24, false, NULL, 0) == need, "count only");
        /* 200k spaces, 200k 'a', 100k invalid bytes, 50k newlines+spaces */
        size_t big = getenv("IQF_SANITIZED") ? 20000 : 200000;
        char *t = malloc(big);
        for (int pat = 0; pat < 4; pat++) {
            for (size_t i = 0; i < big; i++)
                t[i] = pat == 0 ? ' ' : pat == 1 ? 'a' : pat == 2 ? (char)(0x80 + i % 64) : (i % 3 ? ' ' : '\n');
            int32_t n;
            int32_t *o = tok_alloc(v, t, big, true, false, &n);
            bool ok = o && n > 0;
            for (int32_t i = 0; ok && i < n; i++) ok = o[i] >= 0 && o[i] < iqf_vocab_n_tokens(v);
            CHECK(ok, "%s pattern %d: %d tokens", names[k], pat, n);
            if (ok && k == 0) { /* SPM round trips every byte */
                char *back = malloc(big + 16);
                int32_t m = iqf_detokenize(v, o, n, back, (int32_t)big + 16, true, false);
                /* with BOS removed, llama_detokenize keeps the prefix space */
                CHECK(m == (int32_t)big + 1 && back[0] == ' ' && memcmp(back + 1, t, big) == 0,
                      "SPM pattern %d round trip: %d", pat, m);
                free(back);
            }
            free(o);
        }
        free(t);
        iqf_vocab_free(v);
    }
}

/* Vocabularies with wrong shapes or types. */
static void test_hostile_vocab(void) {
    static const char *const toks[4] = { "<unk>", "<s>", "</s>", "a" };
    static const float sc[4] = { 0, 0, 0, -1 };
    static const int32_t ty[5] = { 2, 3, 3, 1, 1 };
    char err[256];
    iqf_vocab_arrays a = iqf_vocab_arrays_init();
    a.model = "llama";
    a.tokens = toks;
    a.n_tokens = 4;
    a.scores = sc;
    a.n_scores = 3;
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err) && strstr(err, "scores"), "short scores: %s", err);
    a.n_scores = 5;
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err) && strstr(err, "scores"), "long scores: %s", err);
    a.n_scores = 4;
    a.token_types = ty;
    a.n_token_types = 2;
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err) && strstr(err, "token_type"), "short types: %s", err);
    a.n_token_types = 4;
    a.model = "bert";
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err) && strstr(err, "bert"), "unknown model: %s", err);
    a.model = "gpt2";
    a.pre = "qwen2";
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err) && strstr(err, "qwen2"), "unsupported pre: %s", err);
    a.model = "llama";
    a.pre = NULL;
    a.n_tokens = 0;
    CHECK(!iqf_vocab_from_arrays(&a, err, sizeof err), "no tokens");
    a.n_tokens = 4;
    a.bos_id = 77; /* out of range: keeps the default, as llama.cpp */
    a.eos_id = 3;
    iqf_vocab *v = iqf_vocab_from_arrays(&a, err, sizeof err);
    CHECK(v != NULL, "tiny vocab: %s", err);
    if (v) {
        CHECK(iqf_vocab_bos(v) == 1 && iqf_vocab_eos(v) == 3, "ids %d %d", iqf_vocab_bos(v), iqf_vocab_eos(v));
        /* no byte tokens: unknown characters become <unk> instead of aborting */
        int32_t out[16];
        int32_t n = iqf_tokenize(v, "a\xc3\xa9", 3, false, out, 16);
        static const int32_t want[6] = { 0, 0, 0, 3, 0, 0 }; /* ▁ (3 bytes), a, é (2 bytes) */
        CHECK(same_ids(out, n, want, 6), "fallback to unk: %d", n);
        iqf_vocab_free(v);
    }
    /* empty and duplicate strings: "[EMPTY_i]", the last duplicate wins */
    static const char *const dup[4] = { "x", "", "x", "y" };
    a = iqf_vocab_arrays_init();
    a.model = "llama";
    a.tokens = dup;
    a.n_tokens = 4;
    v = iqf_vocab_from_arrays(&a, err, sizeof err);
    CHECK(v != NULL, "dup vocab: %s", err);
    if (v) {
        size_t l;
        const char *s = iqf_vocab_token_text(v, 1, &l);
        CHECK(s && l == 9 && memcmp(s, "[EMPTY_1]", 9) == 0, "empty token");
        CHECK(iqf_vocab_find(v, "x", 1) == 2, "duplicate");
        iqf_vocab_free(v);
    }

    /* through GGUF: wrong types and lengths */
    const char *tmp = "/tmp/iqf_test_tokenizer.gguf";
    for (int c = 0; c < 7; c++) {
        iqf_gguf_writer *w = iqf_gguf_writer_open(tmp, err, sizeof err);
        CHECK(w != NULL, "writer: %s", err);
        if (!w) return;
        iqf_gguf_writer_set_str(w, "tokenizer.ggml.model", c == 5 ? "gpt2" : "llama");
        if (c == 5) iqf_gguf_writer_set_str(w, "tokenizer.ggml.pre", "gpt-2");
        if (c == 0) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", IQF_GGUF_I32, ty, 4);
        else iqf_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4);
        if (c == 1) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", IQF_GGUF_I32, ty, 4);
        else iqf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", IQF_GGUF_F32, sc, c == 2 ? 3 : 4);
        if (c == 3) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", IQF_GGUF_U32, ty, 4);
        else iqf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", IQF_GGUF_I32, ty, c == 4 ? 5 : 4);
        if (c == 6) iqf_gguf_writer_set_f32(w, "tokenizer.ggml.bos_token_id", 1.0f);
        CHECK(iqf_gguf_writer_write_header(w) == IQF_OK && iqf_gguf_writer_finish(w, err, sizeof err) == IQF_OK,
              "write: %s", err);
        iqf_gguf *g = iqf_gguf_open(tmp, err, sizeof err);
        CHECK(g != NULL, "open: %s", err);
        err[0] = 0;
        v = g ? iqf_vocab_load(g, err, sizeof err) : NULL;
        static const char *const want[7] = { "tokens", "scores", "scores", "token_type", "token_type", "merges", "bos_token_id" };
        CHECK(v == NULL && strstr(err, want[c]) && strstr(err, tmp), "case %d: expected an error about %s, got '%s'", c, want[c], err);
        iqf_vocab_free(v);
        iqf_gguf_close(g);
    }
    remove(tmp);
}

/* ------------------------------------------------------------------------------------------ */
/* Live differential test against the oracle's libllama (when installed; required under CI). */

typedef struct { _Alignas(16) unsigned char b[256]; } llama_params_buf; /* larger than the real struct */

static void quiet_log(int level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

/* The oracle's library directory, found as tests/oracle/oracle.c does. (oracle_load() is not
 * used: it only loads libggml-base, and its ggml_init context would show up as a leak under
 * ASan.) */
static const char *oracle_dir(char *buf, size_t n) {
    const char *lib = getenv("IQF_ORACLE_LIB");
    if (lib && *lib) {
        snprintf(buf, n, "%s", lib);
        char *slash = strrchr(buf, '/');
        if (slash) *slash = 0;
        return buf;
    }
    const char *dir = getenv("IQF_ORACLE_DIR"), *home = getenv("HOME");
    if (dir && *dir) snprintf(buf, n, "%s/node_modules/@node-llama-cpp/" ORACLE_PLATFORM "/bins/" ORACLE_PLATFORM, dir);
    else
        snprintf(buf, n, "%s/.cache/iqforge/oracle/node_modules/@node-llama-cpp/" ORACLE_PLATFORM "/bins/" ORACLE_PLATFORM,
                 home ? home : "/root");
    return buf;
}

static void test_oracle_live(void) {
    char dirbuf[4096], path[4600] = "";
    const char *dir = oracle_dir(dirbuf, sizeof dirbuf);
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "libllama", 8) && strstr(e->d_name, ".so") && !strstr(e->d_name, "common"))
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        closedir(d);
    }
    if (!path[0]) {
        if (tu_ci()) { CHECK(0, "oracle (libllama) required under CI=true, not found in %s", dir); return; }
        printf("oracle not installed (%s): live differential test skipped\n", dir);
        return;
    }
    void *h = path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    CHECK(h != NULL, "cannot load %s: %s", path, dlerror());
    if (!h) return;
    void (*log_set)(void (*)(int, const char *, void *), void *) = (void (*)(void (*)(int, const char *, void *), void *))dlsym(h, "llama_log_set");
    void (*backend_init)(void) = (void (*)(void))dlsym(h, "llama_backend_init");
    llama_params_buf (*defp)(void) = (llama_params_buf(*)(void))dlsym(h, "llama_model_default_params");
    void *(*load)(const char *, llama_params_buf) = (void *(*)(const char *, llama_params_buf))dlsym(h, "llama_model_load_from_file");
    void (*mfree)(void *) = (void (*)(void *))dlsym(h, "llama_model_free");
    const void *(*get_vocab)(const void *) = (const void *(*)(const void *))dlsym(h, "llama_model_get_vocab");
    int32_t (*ltok)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool) =
        (int32_t(*)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool))dlsym(h, "llama_tokenize");
    int32_t (*ldetok)(const void *, const int32_t *, int32_t, char *, int32_t, bool, bool) =
        (int32_t(*)(const void *, const int32_t *, int32_t, char *, int32_t, bool, bool))dlsym(h, "llama_detokenize");
    CHECK(log_set && backend_init && defp && load && mfree && get_vocab && ltok && ldetok, "libllama symbols");
    if (!(log_set && backend_init && defp && load && mfree && get_vocab && ltok && ldetok)) return;
    log_set(quiet_log, NULL);
    backend_init();
    llama_params_buf mp = defp();
    /* llama_model_params of this libllama: ... kv_overrides at 64, then the bools vocab_only (72),
     * check_tensors, use_extra_bufts (default true), no_host, no_alloc, load_mtp */
    static const unsigned char expect[6] = { 0, 0, 1, 0, 0, 0 };
    CHECK(memcmp(mp.b + 72, expect, 6) == 0, "unexpected llama_model_params layout");
    if (memcmp(mp.b + 72, expect, 6) != 0) return;
    mp.b[72] = 1;

    static const char *const files[4] = { "tests/data/vocab/ggml-vocab-llama-spm.gguf", "tests/data/vocab/ggml-vocab-phi-3.gguf",
                                          "tests/data/vocab/ggml-vocab-gpt-2.gguf", "tests/data/stories260K/stories260K-f32.gguf" };
    static const char *const atoms[] = { " ", "  ", "\n", "\t", "a", "Hello", "'s", "'ll", "'", "\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac",
        "\xf0\x9f\xa6\x99", "\xe2\x96\x81", "<s>", "</s>", "<|endoftext|>", "<|end|>", "<|user|>", "1", "23", "\xc2\xbc",
        "\xc2\xa0", "\xe3\x80\x80", "\xff", "\x80", "\xe2\x96", "\xed\xa0\x80", "\xc0\x80", "<0x0A>", "!?", "...",
        "\r\n", "\xce\xa9", "x", "ab", "\xe1\x9a\x80", "\xf0\x9f", "\xc2\x85", " the", "don't", "3.14" };
    const int natoms = (int)(sizeof atoms / sizeof atoms[0]);
    const int iters = getenv("IQF_SANITIZED") ? 300 : 3000;
    int32_t *a = malloc(sizeof(int32_t) * 4096), *b = malloc(sizeof(int32_t) * 4096);
    char *ta = malloc(1 << 16), *tb = malloc(1 << 16);
    for (int f = 0; f < 4; f++) {
        void *model = load(src_path(files[f]), mp);
        CHECK(model != NULL, "libllama cannot load %s", files[f]);
        iqf_vocab *v = load_vocab(files[f]);
        if (!model || !v) { if (model) mfree(model); iqf_vocab_free(v); continue; }
        const void *lv = get_vocab(model);
        tu_rng r = { 1234 + (uint64_t)f };
        int bad = 0, bad_detok = 0;
        for (int it = 0; it < iters; it++) {
            char text[1024];
            size_t m = 0;
            int k = 1 + (int)(tu_next(&r) % 16);
            for (int j = 0; j < k; j++) {
                uint64_t pick = tu_next(&r) % 10;
                if (pick < 2) { /* a random code point: below U+0800, below U+10000, or any */
                    uint64_t x = tu_next(&r);
                    uint32_t cp = (uint32_t)((x >> 8) % ((x & 3) == 0 ? 0x800u : (x & 3) == 1 ? 0x10000u : 0x110000u));
                    unsigned char u[4];
                    int len;
                    if (cp < 0x80) { u[0] = (unsigned char)cp; len = 1; }
                    else if (cp < 0x800) { u[0] = (unsigned char)(0xC0 | (cp >> 6)); u[1] = (unsigned char)(0x80 | (cp & 0x3F)); len = 2; }
                    else if (cp < 0x10000) { u[0] = (unsigned char)(0xE0 | (cp >> 12)); u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[2] = (unsigned char)(0x80 | (cp & 0x3F)); len = 3; }
                    else { u[0] = (unsigned char)(0xF0 | (cp >> 18)); u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F)); u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); u[3] = (unsigned char)(0x80 | (cp & 0x3F)); len = 4; }
                    memcpy(text + m, u, (size_t)len);
                    m += (size_t)len;
                    continue;
                }
                if (pick < 4) {
                    unsigned c = (unsigned)(tu_next(&r) & 0xFF);
                    if (c >= 0xF5 && c <= 0xF7) c = 0xF4; /* libllama throws on code points > U+10FFFF */
                    text[m++] = (char)c;
                    continue;
                }
                const char *s = atoms[tu_next(&r) % (uint64_t)natoms];
                memcpy(text + m, s, strlen(s));
                m += strlen(s);
            }
            bool add = tu_next(&r) & 1, parse = tu_next(&r) & 1;
            int32_t na = iqf_tokenize_ex(v, text, m, add, parse, a, 4096);
            int32_t nb = ltok(lv, text, (int32_t)m, b, 4096, add, parse);
            if (!same_ids(a, na, b, nb)) {
                if (bad++ < 3) { fprintf(stderr, "%s: mismatch on '%.*s'\n", files[f], (int)m, text); print_ids("ours ", a, na > 0 ? na : 0); print_ids("llama", b, nb > 0 ? nb : 0); }
                continue;
            }
            bool rs = tu_next(&r) & 1, up = tu_next(&r) & 1;
            int32_t da = iqf_detokenize(v, a, na, ta, 1 << 16, rs, up);
            int32_t db = ldetok(lv, b, nb, tb, 1 << 16, rs, up);
            if (da != db || (da > 0 && memcmp(ta, tb, (size_t)da) != 0)) bad_detok++;
        }
        /* the stories text and the test vectors' texts with add_special=true */
        int32_t na = iqf_tokenize(v, stories_text, strlen(stories_text), true, a, 4096);
        int32_t nb = ltok(lv, stories_text, (int32_t)strlen(stories_text), b, 4096, true, false);
        CHECK(same_ids(a, na, b, nb), "%s: stories text differs from libllama", files[f]);
        CHECK(bad == 0, "%s: %d/%d random texts tokenize differently from libllama", files[f], bad, iters);
        CHECK(bad_detok == 0, "%s: %d/%d detokenizations differ from libllama", files[f], bad_detok, iters);
        printf("%s: %d random texts identical to libllama\n", files[f], iters - bad);
        iqf_vocab_free(v);
        mfree(model);
    }
    free(a); free(b); free(ta); free(tb);
}

/* One vocab, several threads tokenizing at once: same ids as alone (the vocab is read-only). */
typedef struct thr_arg { const iqf_vocab *v; int bad; } thr_arg;

static void *thr_main(void *p) {
    thr_arg *a = p;
    int32_t out[2048];
    const int reps = getenv("IQF_SANITIZED") ? 5 : 50;
    for (int r = 0; r < reps; r++) {
        int32_t n = iqf_tokenize(a->v, stories_text, strlen(stories_text), true, out, 2048);
        if (!same_ids(out, n, stories_ids, (int32_t)(sizeof stories_ids / sizeof stories_ids[0]))) a->bad++;
    }
    return NULL;
}

static void test_threads(void) {
    iqf_vocab *v = load_vocab("tests/data/stories260K/stories260K-f32.gguf");
    if (!v) return;
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){ v, 0 };
        CHECK(pthread_create(&th[i], NULL, thr_main, &args[i]) == 0, "pthread_create");
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) { pthread_join(th[i], NULL); bad += args[i].bad; }
    CHECK(bad == 0, "%d concurrent tokenizations differ", bad);
    iqf_vocab_free(v);
}

/* llama.cpp's "test" vocabulary (test-llama-archs models): 5-byte chunks, h = 31 h + byte in 64
 * bits, id h mod n_vocab; no BOS; a token's piece is its id in hex. Expected ids computed
 * independently (Python); the fleet imatrix test checks them against llama-imatrix's counts. */
static void test_test_vocab(void) {
    static char names[128][8];
    const char *toks[128];
    for (int i = 0; i < 128; i++) {
        snprintf(names[i], sizeof names[i], "tok_%d", i);
        toks[i] = names[i];
    }
    char err[256];
    iqf_vocab_arrays a = iqf_vocab_arrays_init();
    a.model = "test";
    a.tokens = toks;
    a.n_tokens = 128;
    iqf_vocab *v = iqf_vocab_from_arrays(&a, err, sizeof err);
    CHECK(v != NULL, "test vocab: %s", err);
    if (!v) return;
    int32_t out[16];
    const char *text = "Once upon a time, there was";
    int32_t n = iqf_tokenize(v, text, strlen(text), true, out, 16);
    static const int32_t want[6] = { 31, 38, 89, 77, 47, 50 };
    CHECK(same_ids(out, n, want, 6), "test vocab ids (%d)", n);
    char buf[32];
    n = iqf_detokenize(v, want, 6, buf, sizeof buf, false, false);
    CHECK(n == 12 && !memcmp(buf, "1f26594d2f32", 12), "test vocab pieces");
    CHECK(!iqf_vocab_add_bos(v), "test vocab adds no BOS");
    iqf_vocab_free(v);
}

int main(void) {
    test_test_vocab();
    test_vectors("ggml-vocab-llama-spm.gguf");
    test_vectors("ggml-vocab-phi-3.gguf");
    test_vectors("ggml-vocab-gpt-2.gguf");
    test_stories();
    test_threads();
    test_recorded_cases();
    test_detokenize();
    test_hostile_text();
    test_hostile_vocab();
    test_oracle_live();
    return test_finish("test_tokenizer");
}
