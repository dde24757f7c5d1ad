/*
 * test_convert_spm.c - SentencePiece tokenizer.model in iqforge convert (src/convert/spm.c); no
 * ../shared needed.
 *  - The test's own protobuf encoder writes ModelProtos: 280 pieces of every type (256 of them
 *    bytes), scores present and absent, trainer_spec and normalizer_spec values, a second
 *    trainer_spec to merge, and unknown fields of every wire type (groups nested) at every level.
 *    The parser's values are checked against that list.
 *  - Where python3 has sentencepiece (Debian python3-sentencepiece), tests/convert/spm_ref.py
 *    loads the same files with SentencePieceProcessor as an independent reference: its pieces,
 *    scores (as f32 bits) and the converter's type chain must equal what the test expects, and it
 *    must refuse the files that iqforge refuses for sentencepiece's own reasons (repeated piece,
 *    no/two UNKNOWN, BYTE pieces without byte_fallback, a missing byte, a bad byte piece, an empty
 *    piece) and accept one it accepts (the same text in a NORMAL and a CONTROL piece). Without
 *    it the check is skipped (said on stderr) and the reference is the converter's rules as read
 *    from convert_hf_to_gguf.py's _create_vocab_sentencepiece and gguf-py's SpecialVocab.
 *  - A checkpoint from tests/data/hf-tiny/ckpt (config.json with vocab_size 300 and a
 *    pad_token_id, the safetensors; no tokenizer.json) plus the tokenizer.model, added_tokens.json
 *    and a tokenizer_config.json with added_tokens_decoder converts; every tokenizer.* key, in
 *    order, and every token, score and type are checked against arrays this test computes from
 *    its piece list by those rules. A second one (vocab_size below the piece count, no
 *    tokenizer_config) checks the cut.
 *  - With a tokenizer.json beside tokenizer.model (Llama 2, Mistral and CodeLlama ship both):
 *    SpecialVocab's ids, add flags and normalizer keys from it; CodeLlama's second SpecialVocab
 *    at vocab_size 32016 (prefix/suffix/middle/eot) and add_bos_token false at 49152
 *    (test_convert_special states the rules, read from gguf-py's vocab.py and llama.py).
 *  - Hostile input: every prefix of the file, oversized and overflowing varints, lengths past the
 *    end of the file and of the enclosing message, bad wire types and field numbers, unclosed,
 *    mismatched and too deeply nested groups, more than IQF_SPM_MAX_PIECES pieces, out-of-enum
 *    types: one "NAME: what is wrong" each; through iqf_convert_hf and the CLI: one line, exit 1,
 *    no output file.
 * IQF_SPM_SEEDS=DIR writes the fuzz seeds (fuzz/corpus/spm) there.
 */
#include "testutil.h"

#include "convert/spm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[512];

/* ---- the test's protobuf encoder --------------------------------------------------------------- */

typedef struct pbw {
    uint8_t *b;
    size_t n, cap;
} pbw;

static void pb_put(pbw *w, const void *d, size_t n) {
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->b = realloc(w->b, w->cap);
        if (!w->b) abort();
    }
    if (n) memcpy(w->b + w->n, d, n);
    w->n += n;
}
static void pb_varint(pbw *w, uint64_t v) {
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        if (v) c |= 0x80;
        pb_put(w, &c, 1);
    } while (v);
}
static void pb_tag(pbw *w, uint32_t num, int wt) { pb_varint(w, (uint64_t)num << 3 | (unsigned)wt); }
static void pb_int(pbw *w, uint32_t num, int64_t v) { /* int32/enum/bool: negative as 10 bytes */
    pb_tag(w, num, 0);
    pb_varint(w, (uint64_t)v);
}
static void pb_bytes(pbw *w, uint32_t num, const void *d, size_t n) {
    pb_tag(w, num, 2);
    pb_varint(w, n);
    pb_put(w, d, n);
}
static void pb_str(pbw *w, uint32_t num, const char *s) { pb_bytes(w, num, s, strlen(s)); }
static void pb_fixed(pbw *w, uint32_t num, uint64_t v, int bytes) {
    pb_tag(w, num, bytes == 8 ? 1 : 5);
    for (int i = 0; i < bytes; i++) {
        uint8_t c = (uint8_t)(v >> (8 * i));
        pb_put(w, &c, 1);
    }
}
static void pb_f32(pbw *w, uint32_t num, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    pb_fixed(w, num, u, 4);
}
static void pb_msg(pbw *w, uint32_t num, pbw *m) {
    pb_bytes(w, num, m->b, m->n);
    free(m->b);
    memset(m, 0, sizeof *m);
}

/* ---- the piece list ---------------------------------------------------------------------------- */

typedef struct tp {
    char s[32];
    float score;
    bool has_score;
    int type; /* 0: field absent (NORMAL) */
} tp;

#define NP 280
static tp P[NP];

static void make_pieces(void) {
    int k = 0;
    P[k++] = (tp){ "<unk>", 0, true, IQF_SPM_UNKNOWN };
    P[k++] = (tp){ "<s>", 0, true, IQF_SPM_CONTROL };
    P[k++] = (tp){ "</s>", 0, false, IQF_SPM_CONTROL };
    for (int b = 0; b < 256; b++) {
        P[k] = (tp){ "", 0, b % 3 == 0, IQF_SPM_BYTE };
        snprintf(P[k].s, sizeof P[k].s, "<0x%02X>", b);
        k++;
    }
    static const tp rest[] = {
        { "\xe2\x96\x81t", -1.0f, true, IQF_SPM_NORMAL }, { "he", -2.5f, true, 0 },
        { "\xe2\x96\x81" "a", -3.25f, true, IQF_SPM_NORMAL }, { "<mask>", 0, true, IQF_SPM_USER_DEFINED },
        { "<unused0>", 0, true, IQF_SPM_UNUSED }, { "\xe2\x96\x81the", -4.0f, true, IQF_SPM_NORMAL },
        { "\xc3\xa9", -5.5f, true, 0 }, { "\xe6\x97\xa5\xe6\x9c\xac", -6.0f, true, 0 },
        { "\xe2\x96\x81", -7.0f, true, 0 }, { "x", 0, false, 0 },
        { "<|im_start|>", 0, true, IQF_SPM_USER_DEFINED }, { "\xe2\x96\x81\xe2\x96\x81", -8.125f, true, 0 },
        { "hello\xe2\x96\x81world", 0, true, IQF_SPM_USER_DEFINED }, { "<ctl>", 0, true, IQF_SPM_CONTROL },
        { "in", -9.0f, true, 0 }, { "on", -1e30f, true, 0 },
        { "<unused1>", 0, true, IQF_SPM_UNUSED }, { "\xe2\x96\x81in", -10.5f, true, 0 },
        { "er", -11.0f, true, 0 }, { "an", -12.0f, true, 0 },
        { "\xe2\x96\x81x", -13.0f, true, 0 },
    };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) P[k++] = rest[i];
    if (k != NP) abort();
}

static void put_piece(pbw *w, const tp *p, bool extra) {
    pbw m = { 0 };
    if (extra) pb_int(&m, 200, 12345); /* an extension field */
    pb_str(&m, 1, p->s);
    if (p->has_score) pb_f32(&m, 2, p->score);
    if (p->type) pb_int(&m, 3, p->type);
    pb_msg(w, 1, &m);
}

/* The full ModelProto of the piece list. */
static pbw full_proto(void) {
    pbw w = { 0 }, m = { 0 };
    pb_int(&w, 99, 7); /* unknown varint before the pieces */
    for (int i = 0; i < NP; i++) put_piece(&w, &P[i], i == 260);
    pb_str(&m, 1, "input.txt");
    pb_int(&m, 3, 2); /* BPE */
    pb_int(&m, 4, NP);
    pb_f32(&m, 10, 0.9995f);
    pb_int(&m, 35, 1);
    pb_int(&m, 40, 0);
    pb_int(&m, 41, 1);
    pb_int(&m, 42, 2);
    pb_int(&m, 43, -1);
    pb_str(&m, 45, "<unk>");
    pb_msg(&w, 2, &m);
    pb_str(&m, 1, "identity");
    pb_bytes(&m, 2, "", 0);
    pb_int(&m, 3, 0);
    pb_int(&m, 4, 0);
    pb_int(&m, 77, 1);
    pb_msg(&w, 3, &m);
    pb_fixed(&w, 100, 0x0102030405060708ull, 8);
    pb_fixed(&w, 101, 0xdeadbeefu, 4);
    pb_tag(&w, 102, 3); /* group { 1: varint, group 103 { 2: fixed32 }, 4: bytes } */
    pb_int(&w, 1, 5);
    pb_tag(&w, 103, 3);
    pb_fixed(&w, 2, 9, 4);
    pb_tag(&w, 103, 4);
    pb_str(&w, 4, "skip me");
    pb_tag(&w, 102, 4);
    pb_int(&m, 42, 5); /* a second trainer_spec: merged */
    pb_msg(&w, 2, &m);
    return w;
}

/* A small valid proto (unk, two pieces); `mut` alters it for the sentencepiece-rule cases. */
enum { M_OK, M_DUP, M_DUP_OTHER_CLASS, M_NO_UNK, M_TWO_UNK, M_BYTE_NO_FALLBACK, M_MISSING_BYTE, M_BAD_BYTE,
       M_EMPTY, M_NOT_UTF8, M_BAD_TYPE, M_BAD_MODEL_TYPE };
static pbw small_proto(int mut) {
    pbw w = { 0 }, m = { 0 };
    tp unk = { "<unk>", 0, true, mut == M_NO_UNK ? IQF_SPM_CONTROL : IQF_SPM_UNKNOWN };
    put_piece(&w, &unk, false);
    tp a = { "ab", -1, true, 0 }, b = { "cd", -2, true, 0 };
    if (mut == M_DUP) strcpy(b.s, "ab");
    if (mut == M_DUP_OTHER_CLASS) { strcpy(b.s, "ab"); b.type = IQF_SPM_CONTROL; }
    if (mut == M_TWO_UNK) { strcpy(b.s, "<unk2>"); b.type = IQF_SPM_UNKNOWN; }
    if (mut == M_EMPTY) b.s[0] = 0;
    if (mut == M_NOT_UTF8) strcpy(b.s, "\xc3(");
    if (mut == M_BAD_TYPE) b.type = 7;
    put_piece(&w, &a, false);
    put_piece(&w, &b, false);
    bool bytes = mut == M_BYTE_NO_FALLBACK || mut == M_MISSING_BYTE || mut == M_BAD_BYTE;
    if (bytes)
        for (int i = 0; i < 256; i++) {
            if (mut == M_MISSING_BYTE && i == 0x41) continue;
            tp p = { "", 0, true, IQF_SPM_BYTE };
            snprintf(p.s, sizeof p.s, mut == M_BAD_BYTE && i == 0xab ? "<0x%02x>" : "<0x%02X>", i);
            put_piece(&w, &p, false);
        }
    pb_int(&m, 3, mut == M_BAD_MODEL_TYPE ? 9 : 2);
    if (bytes && mut != M_BYTE_NO_FALLBACK) pb_int(&m, 35, 1);
    pb_msg(&w, 2, &m);
    return w;
}

/* ---- sentencepiece as a reference ---------------------------------------------------------------- */

static const char *spm_python(void) {
    static int state = -1;
    static const char *py = NULL;
    if (state < 0) {
        state = 0;
        const char *cands[] = { "/usr/bin/python3", "python3" };
        for (int i = 0; i < 2 && !state; i++) {
            char cmd[256];
            snprintf(cmd, sizeof cmd, "%s -c 'import sentencepiece' >/dev/null 2>&1", cands[i]);
            if (system(cmd) == 0) {
                state = 1;
                py = cands[i];
            }
        }
        if (!state) fprintf(stderr, "test_convert_spm: python3 has no sentencepiece: the sentencepiece cross-check is skipped\n");
    }
    return py;
}

/* Runs spm_ref.py on the file; returns its output (malloc'd) or NULL when unavailable. */
static char *spm_ref(const char *path) {
    const char *py = spm_python();
    if (!py) return NULL;
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s %s", py, src_path("tests/convert/spm_ref.py"), path);
    FILE *f = popen(cmd, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap);
    size_t got;
    while (out && (got = fread(out + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) out = realloc(out, cap *= 2);
    }
    pclose(f);
    if (out) out[n] = 0;
    return out;
}

static void write_bytes(const char *path, const pbw *w) { CHECK(write_file(path, w->b, w->n), "write %s", path); }

/* The converter's type for a piece: NORMAL and USER_DEFINED give NORMAL. */
static int conv_type(int t) { return t == 0 || t == IQF_SPM_USER_DEFINED ? 1 : t; }

static void test_reference(const pbw *full) {
    char path[700];
    snprintf(path, sizeof path, "%s/full.model", tmpdir);
    write_bytes(path, full);
    char *out = spm_ref(path);
    if (!out) return;
    int lines = 0, bad = 0;
    char *save = NULL;
    for (char *ln = strtok_r(out, "\n", &save); ln; ln = strtok_r(NULL, "\n", &save), lines++) {
        int id, type;
        char hex[200], sc[16];
        if (sscanf(ln, "%d %199s %15s %d", &id, hex, sc, &type) != 4 || id != lines || id >= NP) {
            CHECK(0, "sentencepiece line '%s'", ln);
            bad++;
            break;
        }
        char want[200] = "", wsc[16];
        for (size_t j = 0; j < strlen(P[id].s); j++) sprintf(want + 2 * j, "%02x", (unsigned char)P[id].s[j]);
        float s = P[id].has_score ? P[id].score : 0.0f;
        uint32_t u;
        memcpy(&u, &s, 4);
        snprintf(wsc, sizeof wsc, "%02x%02x%02x%02x", u & 0xff, (u >> 8) & 0xff, (u >> 16) & 0xff, u >> 24);
        if (strcmp(hex, want) || strcmp(sc, wsc) || type != conv_type(P[id].type)) {
            if (bad++ < 5) fprintf(stderr, "sentencepiece id %d: %s %s %d, test expects %s %s %d\n", id, hex, sc, type,
                                   want, wsc, conv_type(P[id].type));
        }
    }
    CHECK(lines == NP && bad == 0, "sentencepiece reads %d pieces, %d differ from the test's expectations", lines, bad);
    free(out);
}

/* ---- the parser ---------------------------------------------------------------------------------- */

static void test_parse(const pbw *full) {
    char err[512];
    iqf_spm *m = iqf_spm_parse(full->b, full->n, "t.model", err, sizeof err);
    CHECK(m != NULL, "full proto refused: %s", err);
    if (m) {
        CHECK(m->n_pieces == NP, "%lld pieces", (long long)m->n_pieces);
        int bad = 0;
        for (int i = 0; i < NP && i < m->n_pieces; i++) {
            const iqf_spm_piece *p = &m->pieces[i];
            float s = P[i].has_score ? P[i].score : 0.0f;
            int t = P[i].type ? P[i].type : IQF_SPM_NORMAL;
            if (p->len != strlen(P[i].s) || memcmp(p->s, P[i].s, p->len) || memcmp(&p->score, &s, 4) || p->type != t)
                bad++;
        }
        CHECK(bad == 0, "%d pieces differ", bad);
        CHECK(m->model_type == 2 && m->vocab_size == NP && m->byte_fallback, "trainer_spec: %d %d %d", m->model_type,
              m->vocab_size, m->byte_fallback);
        CHECK(m->unk_id == 0 && m->bos_id == 1 && m->eos_id == 5 && m->pad_id == -1,
              "trainer_spec ids %d %d %d %d (eos 5 from the second, merged trainer_spec)", m->unk_id, m->bos_id,
              m->eos_id, m->pad_id);
        CHECK(m->norm_name && m->norm_name_len == 8 && !memcmp(m->norm_name, "identity", 8), "normalizer name");
        CHECK(!m->add_dummy_prefix && !m->remove_extra_whitespaces && m->escape_whitespaces, "normalizer flags");
    }
    iqf_spm_free(m);
    /* defaults of sentencepiece_model.proto */
    pbw w = { 0 };
    tp unk = { "<unk>", 0, false, IQF_SPM_UNKNOWN };
    put_piece(&w, &unk, false);
    m = iqf_spm_parse(w.b, w.n, "d.model", err, sizeof err);
    CHECK(m && m->n_pieces == 1 && m->model_type == 1 && m->vocab_size == 8000 && !m->byte_fallback &&
              m->unk_id == 0 && m->bos_id == 1 && m->eos_id == 2 && m->pad_id == -1 && !m->norm_name &&
              m->add_dummy_prefix && m->remove_extra_whitespaces && m->escape_whitespaces,
          "defaults: %s", m ? "wrong values" : err);
    iqf_spm_free(m);
    free(w.b);
}

/* sentencepiece's own refusals, iqforge's message and (when available) sentencepiece's verdict */
static void test_rules(void) {
    static const struct { int mut; const char *want; bool spm_refuses; } cases[] = {
        { M_OK, NULL, false },
        { M_DUP, "pieces 1 and 2 are the same text", true },
        { M_DUP_OTHER_CLASS, NULL, false },
        { M_NO_UNK, "no piece of type UNKNOWN", true },
        { M_TWO_UNK, "pieces 0 and 2 are both of type UNKNOWN", true },
        { M_BYTE_NO_FALLBACK, "piece 3 is of type BYTE but trainer_spec.byte_fallback is false", true },
        { M_MISSING_BYTE, "byte piece <0x41> is missing", true },
        { M_BAD_BYTE, "is of type BYTE but not <0xXX>", true },
        { M_EMPTY, "piece 2 is empty", true },
        { M_NOT_UTF8, "piece 2 is not valid UTF-8", false /* not compared */ },
        { M_BAD_TYPE, "piece 2 has type 7, not one of 1..6", false /* not compared */ },
        { M_BAD_MODEL_TYPE, "trainer_spec.model_type 9 is not one of 1..4", false /* not compared */ },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pbw w = small_proto(cases[i].mut);
        char err[512] = "";
        iqf_spm *m = iqf_spm_parse(w.b, w.n, "r.model", err, sizeof err);
        if (!cases[i].want)
            CHECK(m != NULL, "case %zu refused: %s", i, err);
        else
            CHECK(!m && strstr(err, "r.model: ") == err && strstr(err, cases[i].want), "case %zu: '%s' (want '%s')", i,
                  err, cases[i].want);
        iqf_spm_free(m);
        if (cases[i].want && !cases[i].spm_refuses) {
            free(w.b);
            continue;
        }
        char path[700];
        snprintf(path, sizeof path, "%s/rule%zu.model", tmpdir, i);
        write_bytes(path, &w);
        char *out = spm_ref(path);
        if (out) {
            bool refused = !strncmp(out, "error", 5);
            CHECK(refused == cases[i].spm_refuses, "case %zu: sentencepiece %s it (%.120s)", i,
                  refused ? "refuses" : "accepts", out);
        }
        free(out);
        free(w.b);
    }
}

static void bad_bytes(const char *what, const uint8_t *b, size_t n, const char *want) {
    char err[512] = "";
    iqf_spm *m = iqf_spm_parse(b, n, "h.model", err, sizeof err);
    CHECK(!m && strstr(err, "h.model: ") == err && strstr(err, want) && !strchr(err, '\n'),
          "%s: '%s' (want '%s')", what, err, want);
    iqf_spm_free(m);
}

static void test_hostile(const pbw *full) {
    /* every prefix: a clean refusal or a valid (smaller) model, never a crash (ASan build) */
    int refused = 0, bad = 0;
    for (size_t n = 0; n < full->n; n++) {
        char err[512] = "";
        iqf_spm *m = iqf_spm_parse(full->b, n, "p.model", err, sizeof err);
        if (!m) {
            refused++;
            if (strstr(err, "p.model: ") != err || strchr(err, '\n')) bad++;
        }
        iqf_spm_free(m);
    }
    CHECK(bad == 0 && refused > 0, "prefixes: %d refused, %d with a bad message", refused, bad);
    const uint8_t v11[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    bad_bytes("11-byte varint", v11, sizeof v11, "byte 1: varint longer than 10 bytes");
    const uint8_t vov[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02 };
    bad_bytes("varint overflow", vov, sizeof vov, "varint overflows 64 bits");
    const uint8_t vtr[] = { 0x08, 0xff, 0xff };
    bad_bytes("truncated varint", vtr, sizeof vtr, "varint runs past the end");
    const uint8_t tagbig[] = { 0xf8, 0xff, 0xff, 0xff, 0xff, 0x01 };
    bad_bytes("field number past 2^29", tagbig, sizeof tagbig, "is out of range");
    const uint8_t len_end[] = { 0x0a, 0x05, 'a', 'b' };
    bad_bytes("length past the end", len_end, sizeof len_end, "field 1 has length 5, past the end of its message (2 bytes left)");
    const uint8_t len_huge[] = { 0x22, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f };
    bad_bytes("huge length", len_huge, sizeof len_huge, "past the end of its message");
    const uint8_t nested[] = { 0x0a, 0x04, 0x0a, 0x0a, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j' };
    bad_bytes("nested length past its message", nested, sizeof nested, "byte 2: field 1 has length 10, past the end of its message (2 bytes left)");
    const uint8_t f0[] = { 0x00, 0x01 };
    bad_bytes("field 0", f0, sizeof f0, "field number 0 is out of range");
    const uint8_t wt6[] = { 0x0e, 0x01 };
    bad_bytes("wire type 6", wt6, sizeof wt6, "field 1 has wire type 6");
    const uint8_t endg[] = { 0x0c };
    bad_bytes("end group alone", endg, sizeof endg, "end of group 1 without its start");
    const uint8_t openg[] = { 0x4b, 0x08, 0x01 };
    bad_bytes("unclosed group", openg, sizeof openg, "group of field 9 is not closed");
    const uint8_t mism[] = { 0x4b, 0x54 };
    bad_bytes("mismatched group", mism, sizeof mism, "end of group 10 closes the group of field 9");
    uint8_t deep[2 * (IQF_SPM_MAX_GROUP_DEPTH + 1)];
    for (int i = 0; i <= IQF_SPM_MAX_GROUP_DEPTH; i++) deep[i] = 0x4b;
    for (int i = 0; i <= IQF_SPM_MAX_GROUP_DEPTH; i++) deep[IQF_SPM_MAX_GROUP_DEPTH + 1 + i] = 0x4c;
    bad_bytes("deep groups", deep, sizeof deep, "groups nested deeper than 32 levels");
    const uint8_t ok_groups[] = { 0x4b, 0x4b, 0x4c, 0x4c, 0x0a, 0x09, 0x0a, 0x05, '<', 'u', 'n', 'k', '>', 0x18, 0x02 };
    char err[512] = "";
    iqf_spm *m = iqf_spm_parse(ok_groups, sizeof ok_groups, "g.model", err, sizeof err);
    CHECK(m && m->n_pieces == 1 && m->pieces[0].type == IQF_SPM_UNKNOWN, "nested groups skipped: %s", err);
    iqf_spm_free(m);
    const uint8_t wrongwt[] = { 0x08, 0x01 };
    bad_bytes("pieces as a varint", wrongwt, sizeof wrongwt, "pieces (field 1) has wire type 0, not 2");
    const uint8_t score_wt[] = { 0x0a, 0x03, 0x10, 0x00, 0x00 };
    bad_bytes("score as a varint", score_wt, sizeof score_wt, "score (field 2) has wire type 0, not 5");
    const uint8_t fix_tr[] = { 0x0a, 0x03, 0x15, 0x00, 0x00 };
    bad_bytes("truncated fixed32", fix_tr, sizeof fix_tr, "fixed32 field 2 runs past the end of its message");
    const uint8_t negtype[] = { 0x0a, 0x0b, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    bad_bytes("negative type", negtype, sizeof negtype, "piece 0 has type -1");
    bad_bytes("empty file", (const uint8_t *)"", 0, "no piece of type UNKNOWN");
    /* more pieces than IQF_SPM_MAX_PIECES: empty piece messages, two bytes each */
    size_t n = 2 * ((size_t)IQF_SPM_MAX_PIECES + 1);
    uint8_t *many = malloc(n);
    if (many) {
        for (size_t i = 0; i < n; i += 2) {
            many[i] = 0x0a;
            many[i + 1] = 0x00;
        }
        bad_bytes("piece count", many, n, "more than 4194304 pieces");
        free(many);
    }
}

/* ---- conversion ---------------------------------------------------------------------------------- */

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK(write_file(p, text, strlen(text)), "write %s", p);
}

/* tmpdir/NAME: the fixture's safetensors, its config.json with vocab_size VS (and extra keys). */
static void make_ckpt_arch(const char *name, char *dir, size_t n, const char *vs, const pbw *model, const char *arch);
static void make_ckpt(const char *name, char *dir, size_t n, const char *vs, const pbw *model) {
    make_ckpt_arch(name, dir, n, vs, model, NULL);
}

/* arch: architectures[0] instead of the fixture's MistralForCausalLM (NULL: keep it) */
static void make_ckpt_arch(const char *name, char *dir, size_t n, const char *vs, const pbw *model, const char *arch) {
    snprintf(dir, n, "%s/%s", tmpdir, name);
    mkdir(dir, 0755);
    size_t cn, sn;
    char *cfg = read_file(src_path("tests/data/hf-tiny/ckpt/config.json"), &cn);
    void *st = read_file(src_path("tests/data/hf-tiny/ckpt/model.safetensors"), &sn);
    CHECK(cfg && st, "fixture unreadable");
    if (!cfg || !st) return;
    char *at = strstr(cfg, "\"vocab_size\": 48");
    CHECK(at != NULL, "fixture config has no vocab_size 48");
    if (at) {
        char out[4096];
        snprintf(out, sizeof out, "%.*s\"vocab_size\": %s%s", (int)(at - cfg), cfg, vs, at + strlen("\"vocab_size\": 48"));
        char *m = arch ? strstr(out, "MistralForCausalLM") : NULL;
        if (m) {
            char o2[4096];
            snprintf(o2, sizeof o2, "%.*s%s%s", (int)(m - out), out, arch, m + strlen("MistralForCausalLM"));
            memcpy(out, o2, sizeof out);
        }
        write_text(dir, "config.json", out);
    }
    char p[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(write_file(p, st, sn), "write %s", p);
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    if (model) write_bytes(p, model);
    free(cfg);
    free(st);
}

#define NV 300
typedef struct exp_vocab {
    char tok[NV][40];
    float score[NV];
    int type[NV];
    int n;
} exp_vocab;

static void exp_set(exp_vocab *e, int id, const char *s, float score, int type) {
    if (id >= e->n) return;
    size_t l = strlen(s);
    if (l >= sizeof e->tok[id]) abort();
    memcpy(e->tok[id], s, l + 1);
    e->score[id] = score;
    e->type[id] = type;
}

/* _create_vocab_sentencepiece's table of n tokens from the piece list alone. */
static void exp_base(exp_vocab *e, int n) {
    e->n = n;
    for (int i = 0; i < n; i++) {
        char b[40];
        snprintf(b, sizeof b, "[PAD%d]", i);
        exp_set(e, i, b, -10000.0f, 5);
    }
    for (int i = 0; i < NP && i < n; i++) exp_set(e, i, P[i].s, P[i].has_score ? P[i].score : 0.0f, conv_type(P[i].type));
}

static void check_vocab(const iqf_gguf *g, const exp_vocab *e, const char *what) {
    int64_t kt = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    uint64_t ns = 0, nt = 0;
    const float *sc = iqf_gguf_get_arr(g, "tokenizer.ggml.scores", IQF_GGUF_F32, &ns);
    const int32_t *ty = iqf_gguf_get_arr(g, "tokenizer.ggml.token_type", IQF_GGUF_I32, &nt);
    CHECK(kt >= 0 && iqf_gguf_arr_n(g, kt) == (uint64_t)e->n && sc && ns == (uint64_t)e->n && ty &&
              nt == (uint64_t)e->n,
          "%s: array sizes", what);
    if (kt < 0 || !sc || !ty || ns != (uint64_t)e->n || nt != (uint64_t)e->n) return;
    int bad = 0;
    for (int i = 0; i < e->n; i++) {
        size_t l;
        const char *s = iqf_gguf_arr_str(g, kt, (uint64_t)i, &l);
        if (!s || l != strlen(e->tok[i]) || memcmp(s, e->tok[i], l) || memcmp(&sc[i], &e->score[i], 4) ||
            ty[i] != e->type[i]) {
            if (bad++ < 5)
                fprintf(stderr, "%s: token %d: '%.*s' %g %d, expected '%s' %g %d\n", what, i, s ? (int)l : 0, s ? s : "",
                        (double)sc[i], ty[i], e->tok[i], (double)e->score[i], e->type[i]);
        }
    }
    CHECK(bad == 0, "%s: %d of %d tokens differ", what, bad, e->n);
}

/* The tokenizer.* keys of the file, in order, against `want` (NULL-terminated). */
static void check_keys(const iqf_gguf *g, const char *const *want, const char *what) {
    int k = 0;
    bool ok = true;
    for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++) {
        const char *key = iqf_gguf_kv_key(g, i);
        if (strncmp(key, "tokenizer.", 10)) continue;
        if (!want[k] || strcmp(want[k], key)) {
            fprintf(stderr, "%s: key %d is %s, expected %s\n", what, k, key, want[k] ? want[k] : "(none)");
            ok = false;
            break;
        }
        k++;
    }
    CHECK(ok && !want[k], "%s: tokenizer keys (%d of them match)", what, k);
}

static const char *TC =
    "{\"add_bos_token\": true, \"add_eos_token\": false, \"add_prefix_space\": false,"
    " \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"unk_token\": \"<unk>\", \"pad_token\": null,"
    " \"chat_template\": \"{{ messages }}\","
    " \"added_tokens_decoder\": {"
    "  \"0\": {\"content\": \"<unk>\", \"special\": true},"
    "  \"1\": {\"content\": \"<s>\", \"special\": true},"
    "  \"290\": {\"content\": \"<extra_b>\", \"special\": false},"
    "  \"291\": {\"content\": \"\\u2581user\\u2581tok\", \"special\": false},"
    "  \"292\": {\"content\": \"<|eot|>\", \"special\": false},"
    "  \"293\": {\"content\": \"[SPEC]\", \"special\": \"yes\"},"
    "  \"294\": {\"content\": \"<pad>\", \"special\": 0},"
    "  \"295\": {\"content\": \"plain\", \"special\": 0},"
    "  \"299\": {\"content\": \"<last>\", \"special\": true},"
    "  \"310\": {\"content\": \"<beyond>\", \"special\": true},"
    "  \"262\": {\"content\": \"<mask>\", \"special\": false},"
    "  \"269\": {\"content\": \"\\u2581<|im_start|>\", \"special\": false}}}";
static const char *ADDED =
    "{\"<extra_a>\": 285, \"\\u2581sp\\u2581ace\": 281, \"<over>\": 260, \"<too_far>\": 300, \"<extra_b>\": 290}";

static void test_convert_full(const pbw *full) {
    char dir[1024], out[1100], err[1024];
    make_ckpt("spm", dir, sizeof dir, "300, \"pad_token_id\": 294", full);
    write_text(dir, "tokenizer_config.json", TC);
    write_text(dir, "added_tokens.json", ADDED);
    snprintf(out, sizeof out, "%s/spm.gguf", tmpdir);
    iqf_status s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "convert: %s", err);
    iqf_gguf *g = s == IQF_OK ? iqf_gguf_open(out, err, sizeof err) : NULL;
    CHECK(g != NULL, "open: %s", err);
    if (!g) return;
    static exp_vocab e;
    exp_base(&e, NV);
    /* added_tokens.json, in file order: USER_DEFINED, -1000, texts as they are */
    exp_set(&e, 285, "<extra_a>", -1000.0f, 4);
    exp_set(&e, 281, "\xe2\x96\x81sp\xe2\x96\x81" "ace", -1000.0f, 4);
    exp_set(&e, 260, "<over>", -1000.0f, 4);
    exp_set(&e, 290, "<extra_b>", -1000.0f, 4);
    /* added_tokens_decoder: special or looking special -> CONTROL, else U+2581 -> ' ', USER_DEFINED */
    exp_set(&e, 0, "<unk>", -1000.0f, 3);
    exp_set(&e, 1, "<s>", -1000.0f, 3);
    exp_set(&e, 290, "<extra_b>", -1000.0f, 4);
    exp_set(&e, 291, " user tok", -1000.0f, 4);
    exp_set(&e, 292, "<|eot|>", -1000.0f, 3);
    exp_set(&e, 293, "[SPEC]", -1000.0f, 3);
    exp_set(&e, 294, "<pad>", -1000.0f, 3);
    exp_set(&e, 295, "plain", -1000.0f, 4);
    exp_set(&e, 299, "<last>", -1000.0f, 3);
    exp_set(&e, 262, "<mask>", -1000.0f, 3);
    exp_set(&e, 269, " <|im_start|>", -1000.0f, 4);
    check_vocab(g, &e, "full");
    static const char *const keys[] = { "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.model", "tokenizer.ggml.pre",
                                        "tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                        "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
                                        "tokenizer.ggml.add_eos_token", "tokenizer.chat_template", NULL };
    check_keys(g, keys, "full");
    const char *sv;
    size_t sl;
    bool b1 = true, b2 = false, b3 = true;
    uint32_t bos = 0, eos = 0, pad = 0;
    CHECK(iqf_gguf_get_str(g, "tokenizer.ggml.model", &sv, &sl) && sl == 5 && !memcmp(sv, "llama", 5), "model");
    CHECK(iqf_gguf_get_str(g, "tokenizer.ggml.pre", &sv, &sl) && sl == 7 && !memcmp(sv, "default", 7), "pre");
    CHECK(iqf_gguf_get_str(g, "tokenizer.chat_template", &sv, &sl) && sl == 14 && !memcmp(sv, "{{ messages }}", 14),
          "chat template");
    CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b1) && !b1, "add_space_prefix false");
    CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b2) && b2, "add_bos_token true");
    CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &b3) && !b3, "add_eos_token false");
    CHECK(iqf_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &bos) && bos == 1 &&
              iqf_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &eos) && eos == 2 &&
              iqf_gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &pad) && pad == 294,
          "special ids %u %u %u (config.json's)", bos, eos, pad);
    CHECK(iqf_gguf_check_schema(g, err, sizeof err) == IQF_OK, "schema: %s", err);
    iqf_gguf_close(g);

    /* vocab_size below the piece count, no tokenizer_config.json, no added_tokens.json */
    make_ckpt("spm-cut", dir, sizeof dir, "270", full);
    snprintf(out, sizeof out, "%s/spm-cut.gguf", tmpdir);
    s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "convert cut: %s", err);
    g = s == IQF_OK ? iqf_gguf_open(out, err, sizeof err) : NULL;
    if (!g) return;
    exp_base(&e, 270);
    check_vocab(g, &e, "cut");
    static const char *const keys2[] = { "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                         "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                         "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", NULL };
    check_keys(g, keys2, "cut");
    iqf_gguf_close(g);
}

/* tokenizer.json beside tokenizer.model: SpecialVocab reads its added tokens, post_processor and
 * normalizer. TJ's TemplateProcessing starts with <s> (add_bos_token), its normalizer is a
 * Sequence of BertNormalizer(lowercase null, strip_accents false) and Lowercase. */
static const char *TJ =
    "{\"added_tokens\": [{\"id\": 1, \"content\": \"<s>\"}, {\"id\": 2, \"content\": \"</s>\"},"
    " {\"id\": 290, \"content\": \"<extra_b>\"}, {\"id\": 292, \"content\": \"<|eot|>\"}],"
    " \"normalizer\": {\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"BertNormalizer\", \"lowercase\": null,"
    " \"strip_accents\": false}, {\"type\": \"Lowercase\"}]},"
    " \"post_processor\": {\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}},"
    " {\"Sequence\": {\"id\": \"A\"}}], \"pair\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, {\"Sequence\": {\"id\": \"A\"}},"
    " {\"Sequence\": {\"id\": \"B\"}}]}}";
static const char *TC2 =
    "{\"add_bos_token\": true, \"add_eos_token\": false, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\","
    " \"middle_token\": \"<extra_b>\", \"eot_token\": {\"content\": \"<|eot|>\"}, \"chat_template\": \"T\"}";

static iqf_gguf *convert_special(const char *name, const char *vs, const pbw *full) {
    char dir[1024], out[1100], err[1024];
    make_ckpt(name, dir, sizeof dir, vs, full);
    write_text(dir, "tokenizer.json", TJ);
    write_text(dir, "tokenizer_config.json", TC2);
    snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, name);
    iqf_status s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "convert %s: %s", name, err);
    iqf_gguf *g = s == IQF_OK ? iqf_gguf_open(out, err, sizeof err) : NULL;
    CHECK(g != NULL || s != IQF_OK, "open %s: %s", name, err);
    return g;
}

static void check_u32(const iqf_gguf *g, const char *key, uint32_t want, const char *what) {
    uint32_t v = 0;
    CHECK(iqf_gguf_get_u32(g, key, &v) && v == want, "%s: %s = %u, expected %u", what, key, v, want);
}

/* The rules read from gguf-py's SpecialVocab and LlamaModel.set_vocab (conversion/llama.py):
 *  - a plain Llama: tokenizer.json's flags and ids as above, normalizer keys after the template
 *    (lowercase true: the Lowercase after BertNormalizer's null; strip_accents false);
 *  - CodeLlama (vocab_size 32016): a second SpecialVocab of prefix/suffix/middle/eot whose ids
 *    come from the files first (middle_token -> 290, eot_token -> 292) and then 32007/32008 for
 *    the rest, written in that order after everything the first wrote;
 *  - vocab_size 49152 (SmolLM and other small models): add_bos_token false, in its place. */
static void test_convert_special(const pbw *full) {
    iqf_gguf *g = convert_special("spm-tj", "300", full);
    static const char *const base[] = { "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                        "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                        "tokenizer.chat_template", "tokenizer.ggml.normalizer.lowercase",
                                        "tokenizer.ggml.normalizer.strip_accents", NULL, NULL, NULL, NULL, NULL };
    bool b = false;
    if (g) {
        check_keys(g, base, "tokenizer.json");
        check_u32(g, "tokenizer.ggml.bos_token_id", 1, "tokenizer.json");
        CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &b) && b, "lowercase true");
        CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &b) && !b, "strip_accents false");
        CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) && b, "add_bos_token true");
        iqf_gguf_close(g);
    }
    if ((g = convert_special("spm-codellama", "32016", full))) {
        const char *keys[17];
        memcpy(keys, base, sizeof keys);
        keys[12] = "tokenizer.ggml.middle_token_id";
        keys[13] = "tokenizer.ggml.eot_token_id";
        keys[14] = "tokenizer.ggml.prefix_token_id";
        keys[15] = "tokenizer.ggml.suffix_token_id";
        check_keys(g, keys, "codellama");
        check_u32(g, "tokenizer.ggml.middle_token_id", 290, "codellama");
        check_u32(g, "tokenizer.ggml.eot_token_id", 292, "codellama");
        check_u32(g, "tokenizer.ggml.prefix_token_id", 32007, "codellama");
        check_u32(g, "tokenizer.ggml.suffix_token_id", 32008, "codellama");
        int64_t kt = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
        CHECK(kt >= 0 && iqf_gguf_arr_n(g, kt) == 32016, "codellama: 32016 tokens");
        iqf_gguf_close(g);
    }
    if ((g = convert_special("spm-49152", "49152", full))) {
        check_keys(g, base, "49152");
        CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b) && !b, "49152: add_bos_token false");
        iqf_gguf_close(g);
    }
}

/* tokenizer.model by model class (convert_hf_to_gguf's set_vocab):
 *  - Qwen2/Qwen3 (Qwen2Model): _set_vocab_sentencepiece when there is one, no add_space_prefix
 *    (LlamaModel's add_prefix_space is not read);
 *  - Gemma3: _set_vocab_sentencepiece then add_space_prefix false (last), token_embd cut to the
 *    token count (vocab_size 40 here: the first 40 pieces, 40 rows of the fixture's 48);
 *  - Qwen3Moe, gpt-oss, DeepSeek: _set_vocab_gpt2, the tokenizer.model is ignored (the fixture's
 *    tokenizer.json is then read and refused as an unknown pre-tokenizer). */
static void test_convert_classes(const pbw *full) {
    char dir[1024], out[1100], err[1024];
    static const char *const keys[] = { "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                        "tokenizer.ggml.scores", "tokenizer.ggml.token_type",
                                        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                        "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                        "tokenizer.chat_template", "tokenizer.ggml.add_space_prefix", NULL };
    static const char *const archs[] = { "Qwen2ForCausalLM", "Qwen3ForCausalLM" };
    static exp_vocab e;
    for (int a = 0; a < 2; a++) {
        make_ckpt_arch(archs[a], dir, sizeof dir, "300", full, archs[a]);
        write_text(dir, "tokenizer_config.json", "{\"add_prefix_space\": true, \"add_bos_token\": true,"
                                                 " \"add_eos_token\": false, \"chat_template\": \"T\"}");
        snprintf(out, sizeof out, "%s/%s.gguf", tmpdir, archs[a]);
        iqf_status s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
        CHECK(s == IQF_OK, "convert %s: %s", archs[a], err);
        iqf_gguf *g = s == IQF_OK ? iqf_gguf_open(out, err, sizeof err) : NULL;
        if (!g) continue;
        const char *k2[11];
        memcpy(k2, keys, sizeof k2);
        k2[10] = NULL; /* no add_space_prefix */
        check_keys(g, k2, archs[a]);
        exp_base(&e, NV);
        check_vocab(g, &e, archs[a]);
        iqf_gguf_close(g);
    }
    make_ckpt_arch("gemma3", dir, sizeof dir, "40, \"sliding_window\": 16", full, "Gemma3ForCausalLM");
    write_text(dir, "tokenizer_config.json", "{\"add_prefix_space\": true, \"add_bos_token\": true,"
                                             " \"add_eos_token\": false, \"chat_template\": \"T\"}");
    snprintf(out, sizeof out, "%s/gemma3.gguf", tmpdir);
    iqf_status s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "convert gemma3: %s", err);
    iqf_gguf *g = s == IQF_OK ? iqf_gguf_open(out, err, sizeof err) : NULL;
    if (g) {
        check_keys(g, keys, "gemma3");
        bool b = true;
        CHECK(iqf_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &b) && !b, "gemma3: add_space_prefix false");
        exp_base(&e, 40);
        check_vocab(g, &e, "gemma3");
        const iqf_gguf_tensor *te = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, "token_embd.weight"));
        CHECK(te && te->ne[1] == 40 && te->ne[0] == 32, "gemma3: token_embd cut to 40 rows");
        iqf_gguf_close(g);
    }
    make_ckpt_arch("qwen3moe", dir, sizeof dir, "300", full, "Qwen3MoeForCausalLM");
    char src[1100];
    size_t n;
    char *tj = read_file(src_path("tests/data/hf-tiny/ckpt/tokenizer.json"), &n);
    CHECK(tj != NULL, "fixture tokenizer.json");
    if (tj) {
        snprintf(src, sizeof src, "%s/tokenizer.json", dir);
        CHECK(write_file(src, tj, n), "write %s", src);
        free(tj);
    }
    snprintf(out, sizeof out, "%s/qwen3moe.gguf", tmpdir);
    s = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s != IQF_OK && strstr(err, "tokenizer.json: BPE pre-tokenizer not recognized") && !exists(out),
          "qwen3moe ignores tokenizer.model: %s", err);
}

static void expect_fail(const char *what, const char *dir, const char *want) {
    char out[1100], err[1024] = "";
    snprintf(out, sizeof out, "%s/out.gguf", tmpdir);
    unlink(out);
    iqf_status st = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(st != IQF_OK, "%s: converted", what);
    CHECK(strstr(err, dir) == err && strstr(err, want) != NULL, "%s: message '%s' (want '%s')", what, err, want);
    CHECK(strchr(err, '\n') == NULL, "%s: one line", what);
    CHECK(!exists(out), "%s: output written", what);
}

static void test_convert_hostile(const pbw *full) {
    char dir[1024];
    make_ckpt("h-garbage", dir, sizeof dir, "300", NULL);
    write_text(dir, "tokenizer.model", "\x0a\x05<unk");
    expect_fail("truncated model", dir, "tokenizer.model: byte 0: field 1 has length 5, past the end");
    pbw half = *full;
    half.n = full->n / 2;
    make_ckpt("h-half", dir, sizeof dir, "300", &half);
    expect_fail("half a model", dir, "tokenizer.model: byte ");
    make_ckpt("h-added", dir, sizeof dir, "300", full);
    write_text(dir, "added_tokens.json", "{\"a\": 5, \"b\": -1}");
    expect_fail("negative added id", dir, "added_tokens.json: the id of entry 1 is not a non-negative integer");
    write_text(dir, "added_tokens.json", "{\"a\": 5, \"b\": 6, \"a\": 7}");
    expect_fail("repeated added text", dir, "added_tokens.json: a token text appears twice");
    write_text(dir, "added_tokens.json", "[\"a\"]");
    expect_fail("added list", dir, "added_tokens.json: not a JSON object");
    char ap[1100];
    snprintf(ap, sizeof ap, "%s/added_tokens.json", dir);
    unlink(ap);
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"-3\": {\"content\": \"x\"}}}");
    expect_fail("decoder key", dir, "tokenizer_config.json: added_tokens_decoder entry 0: the key is not a token id");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": {\"3\": {\"special\": true}}}");
    expect_fail("decoder content", dir, "added_tokens_decoder entry 0 has no content string");
    write_text(dir, "tokenizer_config.json", "{\"added_tokens_decoder\": []}");
    expect_fail("decoder list", dir, "added_tokens_decoder is not an object");
    write_text(dir, "tokenizer_config.json", "{\"add_prefix_space\": \"yes\"}");
    expect_fail("add_prefix_space", dir, "tokenizer_config.json: add_prefix_space is not a boolean");
    make_ckpt("h-vs", dir, sizeof dir, "300, \"vocab_size_per_layer_input\": -2", full);
    expect_fail("vocab_size", dir, "config.json: bad vocab_size_per_layer_input");
    /* the CLI: exit 1, one line on stderr, nothing on stdout, no output file */
    const char *cli = getenv("IQF_CLI");
    if (cli && *cli) {
        make_ckpt("h-cli", dir, sizeof dir, "300", NULL);
        write_text(dir, "tokenizer.model", "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
        char cmd[4096], o[1100], e[1100];
        snprintf(o, sizeof o, "%s/cli.out", tmpdir);
        snprintf(e, sizeof e, "%s/cli.err", tmpdir);
        snprintf(cmd, sizeof cmd, "%s convert %s %s/cli.gguf >%s 2>%s", cli, dir, tmpdir, o, e);
        int rc = system(cmd);
        size_t no = 1, ne = 0;
        char *so = read_file(o, &no), *se = read_file(e, &ne);
        char g[1100];
        snprintf(g, sizeof g, "%s/cli.gguf", tmpdir);
        CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 1, "CLI exit status %d", rc);
        CHECK(so && no == 0, "CLI wrote to stdout");
        CHECK(se && ne > 0 && strchr(se, '\n') == se + ne - 1 && strstr(se, "tokenizer.model: byte 1: varint longer"),
              "CLI stderr: %s", se ? se : "(none)");
        CHECK(!exists(g), "CLI left an output file");
        free(so);
        free(se);
    }
}

static void write_seeds(const char *dir, const pbw *full) {
    char p[1024];
    mkdir(dir, 0755);
    snprintf(p, sizeof p, "%s/full.model", dir);
    write_bytes(p, full);
    pbw s = small_proto(M_OK);
    snprintf(p, sizeof p, "%s/small.model", dir);
    write_bytes(p, &s);
    free(s.b);
    s = small_proto(M_MISSING_BYTE);
    snprintf(p, sizeof p, "%s/bytes-missing.model", dir);
    write_bytes(p, &s);
    free(s.b);
    const size_t cuts[] = { 3, 700, full->n - 40, full->n - 3 };
    for (int i = 0; i < 4; i++) {
        pbw t = *full;
        t.n = cuts[i];
        snprintf(p, sizeof p, "%s/cut%zu.model", dir, cuts[i]);
        write_bytes(p, &t);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/iqf_test_convert_spm_%d", (int)getpid());
    mkdir(tmpdir, 0755);
    make_pieces();
    pbw full = full_proto();
    if (getenv("IQF_SPM_SEEDS")) write_seeds(getenv("IQF_SPM_SEEDS"), &full);
    test_parse(&full);
    test_reference(&full);
    test_rules();
    test_hostile(&full);
    test_convert_full(&full);
    test_convert_special(&full);
    test_convert_classes(&full);
    test_convert_hostile(&full);
    free(full.b);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish("test_convert_spm");
}
