/*
 * test_convert.c - iqforge convert (src/convert) in the ordinary suite (no ../shared):
 *  - tests/data/hf-tiny/ckpt (a one-layer Mistral-shaped checkpoint, 48-token Llama-2-style
 *    tokenizer; make.py rebuilds it) converts to the committed expected-f16/q8_0 GGUF files byte
 *    for byte. Those files were written by iqforge at the commit where the CI-only differential
 *    test (tests/cli/convert_hfref.sh) found 16/22 of llama.cpp's converter outputs identical,
 *    including every llama/mistral outtype; here they guard against regressions.
 *  - independently of the converter: the llama q/k permutation of attn_q/attn_k recomputed from
 *    the safetensors (numpy's reshape/swapaxes as index arithmetic) and each value's f16;
 *  - sharded checkpoints (model.safetensors.index.json) give the same bytes as the single file;
 *  - hostile input: every case of issue 24 gives one "FILE: what is wrong" and writes nothing;
 *  - iqf_convert_open (the checkpoint as a GGUF tensor source) is the written file: metadata
 *    re-serialized byte for byte and every tensor's bytes, for auto, f16, q8_0 and f32.
 */
#include "testutil.h"

#include "convert/json.h"
#include "convert/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[512];

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static bool same_file(const char *a, const char *b) {
    size_t na, nb;
    void *x = read_file(a, &na), *y = read_file(b, &nb);
    bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void copy(const char *from, const char *to) {
    size_t n;
    void *d = read_file(from, &n);
    CHECK(d && write_file(to, d, n), "copy %s -> %s", from, to);
    free(d);
}

/* A safetensors file from a header text and `data` bytes. */
static void *st_make(const char *hdr, size_t data_bytes, size_t *n) {
    size_t hl = strlen(hdr);
    *n = 8 + hl + data_bytes;
    uint8_t *b = calloc(1, *n);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, hdr, hl);
    return b;
}

static void st_bad(const char *what, const char *hdr, size_t data_bytes, const char *want) {
    size_t n;
    void *b = st_make(hdr, data_bytes, &n);
    char err[512] = "";
    iqf_st *st = iqf_st_open_memory(b, n, "x.safetensors", err, sizeof err);
    CHECK(st == NULL, "%s: accepted", what);
    CHECK(strstr(err, "x.safetensors: ") == err && strstr(err, want), "%s: message '%s' (want '%s')", what, err, want);
    iqf_st_close(st);
    free(b);
}

static void test_safetensors_hostile(void) {
    st_bad("offset outside", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "outside");
    st_bad("overlap",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
           "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
           24, "overlapping");
    st_bad("shape vs bytes", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16, "needs 12 bytes");
    st_bad("bad dtype", "{\"a\":{\"dtype\":\"Q9\",\"shape\":[4],\"data_offsets\":[0,16]}}", 16, "dtype");
    st_bad("negative dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-4],\"data_offsets\":[0,16]}}", 16, "shape[0]");
    st_bad("overflow", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,16]}}", 16,
           "overflows");
    st_bad("reversed offsets", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 16, "data_offsets");
    st_bad("duplicate name",
           "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, "twice");
    st_bad("malformed json", "{\"a\":{\"dtype\":\"F32\",", 0, "malformed JSON");
    st_bad("not an object", "[1,2]", 0, "not a JSON object");
    /* header length beyond the file */
    uint8_t b[16] = { 0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}' };
    char err[512] = "";
    iqf_st *st = iqf_st_open_memory(b, sizeof b, "x.safetensors", err, sizeof err);
    CHECK(!st && strstr(err, "beyond the end of the file"), "header length: %s", err);
    st = iqf_st_open_memory(b, 5, "x.safetensors", err, sizeof err);
    CHECK(!st && strstr(err, "too short"), "short file: %s", err);
    /* deeply nested JSON in a header and alone */
    char deep[4096];
    size_t k = 0;
    deep[k++] = '{';
    memcpy(deep + k, "\"a\":", 4);
    k += 4;
    for (int i = 0; i < 1000; i++) deep[k++] = '[';
    for (int i = 0; i < 1000; i++) deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    st_bad("deep nesting", deep, 0, "nested deeper");
    /* no tensors at all (fuzz_safetensors found a NULL + 0 here) */
    {
        size_t ne;
        uint8_t *e = st_make("{}", 0, &ne);
        st = iqf_st_open_memory(e, ne, "e.safetensors", err, sizeof err);
        CHECK(st && iqf_st_n_tensors(st) == 0, "empty header: %s", err);
        iqf_st_close(st);
        free(e);
    }
    /* a good one reads back the values */
    size_t n;
    uint8_t *g = st_make("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                         8, &n);
    size_t d0 = n - 8;
    float one = 1.5f;
    memcpy(g + d0, &one, 4);
    g[d0 + 4] = 0x80; g[d0 + 5] = 0x3f; /* bf16 1.0 */
    g[d0 + 6] = 0x00; g[d0 + 7] = 0xc0; /* bf16 -2.0 */
    st = iqf_st_open_memory(g, n, "g.safetensors", err, sizeof err);
    CHECK(st != NULL, "good file refused: %s", err);
    if (st) {
        CHECK(iqf_st_n_tensors(st) == 2 && !strcmp(iqf_st_tensor_at(st, 0)->name, "a"), "sorted by name");
        const iqf_st_tensor *t = iqf_st_find(st, "b");
        CHECK(t && iqf_st_get_f32(t, 0) == 1.0f && iqf_st_get_f32(t, 1) == -2.0f, "bf16 values");
        CHECK(iqf_st_get_f32(iqf_st_find(st, "a"), 0) == 1.5f, "f32 value");
    }
    iqf_st_close(st);
    free(g);
}

static void test_json(void) {
    char err[256];
    yyjson_doc *d = iqf_json_parse("{\"a\": [1, 2.5, \"x\"]}", 20, "t.json", err, sizeof err);
    CHECK(d != NULL, "valid JSON refused: %s", err);
    int64_t v;
    CHECK(d && iqf_json_int(yyjson_arr_get(iqf_json_get(yyjson_doc_get_root(d), "a"), 0), &v) && v == 1, "int");
    yyjson_doc_free(d);
    d = iqf_json_parse("{\"a\": 1,}", 9, "t.json", err, sizeof err);
    CHECK(!d && strstr(err, "t.json: malformed JSON"), "trailing comma: %s", err);
    d = iqf_json_parse("{\"a\": NaN}", 10, "t.json", err, sizeof err);
    CHECK(!d, "NaN accepted");
}

static void write_text(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    CHECK(write_file(p, text, strlen(text)), "write %s", p);
}

/* A copy of the fixture checkpoint in tmpdir/NAME (the safetensors optional). */
static void fixture_copy(const char *name, char *dir, size_t n, bool weights) {
    snprintf(dir, n, "%s/%s", tmpdir, name);
    mkdir(dir, 0755);
    const char *files[] = { "config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors" };
    for (int i = 0; i < (weights ? 4 : 3); i++) {
        char a[1024], b[1024];
        snprintf(a, sizeof a, "tests/data/hf-tiny/ckpt/%s", files[i]);
        snprintf(b, sizeof b, "%s/%s", dir, files[i]);
        copy(src_path(a), b);
    }
}

static void expect_fail(const char *what, const char *dir, const char *want) {
    char out[1024], err[1024] = "";
    snprintf(out, sizeof out, "%s/out.gguf", tmpdir);
    unlink(out);
    iqf_status st = iqf_convert_hf(dir, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(st != IQF_OK, "%s: converted", what);
    CHECK(strstr(err, want) != NULL, "%s: message '%s' (want '%s')", what, err, want);
    CHECK(strchr(err, '\n') == NULL, "%s: one line", what);
    CHECK(!exists(out), "%s: output written", what);
    /* no temporary left either */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q 'out.gguf'", tmpdir);
    CHECK(system(cmd) != 0, "%s: a temporary file is left", what);
}

/* Write the fixture's tensors split over two shards with an index. */
static void make_sharded(const char *dir, bool drop_second) {
    char err[512];
    iqf_st *st = iqf_st_open_file(src_path("tests/data/hf-tiny/ckpt/model.safetensors"), err, sizeof err);
    CHECK(st != NULL, "fixture: %s", err);
    if (!st) return;
    int64_t n = iqf_st_n_tensors(st), half = n / 2;
    char index[8192];
    size_t ix = (size_t)snprintf(index, sizeof index, "{\"metadata\":{},\"weight_map\":{");
    for (int part = 0; part < 2; part++) {
        char hdr[8192];
        size_t hx = (size_t)snprintf(hdr, sizeof hdr, "{");
        uint64_t off = 0;
        int64_t a = part ? half : 0, b = part ? n : half;
        for (int64_t i = a; i < b; i++) {
            const iqf_st_tensor *t = iqf_st_tensor_at(st, i);
            hx += (size_t)snprintf(hdr + hx, sizeof hdr - hx, "%s\"%s\":{\"dtype\":\"BF16\",\"shape\":[", i > a ? "," : "",
                                   t->name);
            for (int d = 0; d < t->n_dims; d++)
                hx += (size_t)snprintf(hdr + hx, sizeof hdr - hx, "%s%lld", d ? "," : "", (long long)t->shape[d]);
            hx += (size_t)snprintf(hdr + hx, sizeof hdr - hx, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                   (unsigned long long)(off + t->nbytes));
            off += t->nbytes;
            ix += (size_t)snprintf(index + ix, sizeof index - ix, "%s\"%s\":\"model-0000%d-of-00002.safetensors\"",
                                   ix > 30 ? "," : "", t->name, part + 1);
        }
        snprintf(hdr + hx, sizeof hdr - hx, "}");
        size_t fn;
        uint8_t *f = st_make(hdr, off, &fn);
        uint8_t *p = f + 8 + strlen(hdr);
        for (int64_t i = a; i < b; i++) {
            const iqf_st_tensor *t = iqf_st_tensor_at(st, i);
            memcpy(p, t->data, t->nbytes);
            p += t->nbytes;
        }
        char path[1024];
        snprintf(path, sizeof path, "%s/model-0000%d-of-00002.safetensors", dir, part + 1);
        if (!(drop_second && part == 1)) CHECK(write_file(path, f, fn), "write %s", path);
        free(f);
    }
    snprintf(index + ix, sizeof index - ix, "}}");
    write_text(dir, "model.safetensors.index.json", index);
    iqf_st_close(st);
}

static void test_fixture(void) {
    char out[1024], err[1024];
    const char *ck = src_path("tests/data/hf-tiny/ckpt");
    snprintf(out, sizeof out, "%s/tiny-f16.gguf", tmpdir);
    iqf_status s = iqf_convert_hf(ck, out, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "convert f16: %s", err);
    CHECK(same_file(out, src_path("tests/data/hf-tiny/expected-f16.gguf")), "f16 output differs from expected-f16.gguf");
    char out8[1024];
    snprintf(out8, sizeof out8, "%s/tiny-q8.gguf", tmpdir);
    s = iqf_convert_hf(ck, out8, IQF_CONVERT_Q8_0, err, sizeof err);
    CHECK(s == IQF_OK, "convert q8_0: %s", err);
    CHECK(same_file(out8, src_path("tests/data/hf-tiny/expected-q8_0.gguf")), "q8_0 output differs");

    /* the q/k permutation and the f16 values, recomputed from the safetensors */
    iqf_st *st = iqf_st_open_file(src_path("tests/data/hf-tiny/ckpt/model.safetensors"), err, sizeof err);
    iqf_gguf *g = iqf_gguf_open(out, err, sizeof err);
    CHECK(st && g, "reopen: %s", err);
    if (st && g) {
        const char *pairs[][2] = { { "model.layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight" },
                                   { "model.layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight" },
                                   { "model.layers.0.self_attn.v_proj.weight", "blk.0.attn_v.weight" } };
        const int heads[] = { 4, 2, 0 };
        for (int p = 0; p < 3; p++) {
            const iqf_st_tensor *t = iqf_st_find(st, pairs[p][0]);
            const iqf_gguf_tensor *o = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, pairs[p][1]));
            CHECK(t && o && o->type == IQF_TYPE_F16, "%s present as f16", pairs[p][1]);
            if (!t || !o) continue;
            int64_t rows = t->shape[0], cols = t->shape[1];
            const uint16_t *od = (const uint16_t *)o->data;
            int bad = 0;
            for (int64_t s_row = 0; s_row < rows; s_row++) {
                /* numpy: reshape(h, 2, half, cols).swapaxes(1, 2): source (h, j, i) lands at (h, i, j) */
                int64_t d_row = s_row;
                if (heads[p]) {
                    int64_t half = rows / heads[p] / 2;
                    int64_t h = s_row / (2 * half), j = (s_row / half) % 2, i = s_row % half;
                    d_row = h * 2 * half + i * 2 + j;
                }
                for (int64_t c = 0; c < cols; c++) {
                    float want = iqf_st_get_f32(t, (uint64_t)(s_row * cols + c));
                    if (od[d_row * cols + c] != iqf_fp32_to_fp16(want)) bad++;
                }
            }
            CHECK(bad == 0, "%s: %d values not the permuted source", pairs[p][1], bad);
        }
        uint32_t u;
        CHECK(iqf_gguf_get_u32(g, "llama.rope.dimension_count", &u) && u == 8, "rope dims");
        CHECK(iqf_gguf_check_schema(g, err, sizeof err) == IQF_OK, "schema: %s", err);
    }
    iqf_gguf_close(g);
    iqf_st_close(st);

    /* sharded: same bytes */
    char dir[1024];
    fixture_copy("sharded", dir, sizeof dir, false);
    make_sharded(dir, false);
    char outs[1024];
    snprintf(outs, sizeof outs, "%s/sharded.gguf", tmpdir);
    s = iqf_convert_hf(dir, outs, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "sharded: %s", err);
    /* general.name comes from the directory name: the single file under the same name */
    char dir1[1024], out1[1024];
    snprintf(dir1, sizeof dir1, "%s/single", tmpdir);
    mkdir(dir1, 0755);
    fixture_copy("single/sharded", dir1, sizeof dir1, true);
    snprintf(out1, sizeof out1, "%s/single.gguf", tmpdir);
    s = iqf_convert_hf(dir1, out1, IQF_CONVERT_F16, err, sizeof err);
    CHECK(s == IQF_OK, "single: %s", err);
    CHECK(same_file(outs, out1), "sharded and single-file outputs differ");
    iqf_gguf *gs = iqf_gguf_open(outs, err, sizeof err), *g1 = iqf_gguf_open(out1, err, sizeof err);
    CHECK(gs && g1, "open sharded/single");
    if (gs && g1) {
        CHECK(iqf_gguf_n_tensors(gs) == iqf_gguf_n_tensors(g1), "tensor count");
        for (int64_t i = 0; i < iqf_gguf_n_tensors(gs); i++) {
            const iqf_gguf_tensor *x = iqf_gguf_tensor_at(gs, i), *y = iqf_gguf_tensor_at(g1, i);
            CHECK(!strcmp(x->name, y->name) && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes),
                  "tensor %s differs sharded/single", x->name);
        }
    }
    iqf_gguf_close(gs);
    iqf_gguf_close(g1);
}

static void test_hostile_dirs(void) {
    char dir[1024];
    /* a missing shard */
    fixture_copy("missing-shard", dir, sizeof dir, false);
    make_sharded(dir, true);
    expect_fail("missing shard", dir, "model-00002-of-00002.safetensors: No such file");
    /* a shard without a tensor the index names */
    fixture_copy("bad-index", dir, sizeof dir, true);
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x.weight\":\"model.safetensors\"}}");
    expect_fail("index names a missing tensor", dir, "tensor x.weight of the index is missing");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"x.weight\":\"../model.safetensors\"}}");
    expect_fail("index path escape", dir, "not a plain file name");
    /* unsupported architecture */
    fixture_copy("arch", dir, sizeof dir, true);
    write_text(dir, "config.json", "{\"architectures\":[\"GPT2LMHeadModel\"],\"num_hidden_layers\":1}");
    expect_fail("architecture", dir, "config.json: architecture GPT2LMHeadModel is not supported");
    /* malformed and deeply nested config */
    write_text(dir, "config.json", "{\"architectures\":[\"MistralForCausalLM\"");
    expect_fail("malformed config", dir, "config.json: malformed JSON");
    char deep[1200];
    for (int i = 0; i < 600; i++) deep[i] = '[';
    for (int i = 0; i < 590; i++) deep[600 + i] = ']';
    deep[1190] = 0;
    write_text(dir, "config.json", deep);
    expect_fail("deep config", dir, "config.json: JSON nested deeper");
    /* tokenizers */
    fixture_copy("tok", dir, sizeof dir, true);
    write_text(dir, "tokenizer.model", "not a sentencepiece model");
    expect_fail("sentencepiece", dir, "tokenizer.model: byte 0: field 13 has wire type 6"); /* test_convert_spm.c */
    fixture_copy("tok2", dir, sizeof dir, true);
    write_text(dir, "tokenizer.json", "{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}");
    expect_fail("unigram", dir, "tokenizer.json: tokenizer model type Unigram is not supported");
    write_text(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":[]}");
    expect_fail("unknown pre-tokenizer", dir, "BPE pre-tokenizer not recognized");
    /* truncated safetensors */
    fixture_copy("trunc", dir, sizeof dir, false);
    {
        size_t n;
        void *d = read_file(src_path("tests/data/hf-tiny/ckpt/model.safetensors"), &n);
        char p[1100];
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        CHECK(d && write_file(p, d, n - 100), "truncate");
        free(d);
    }
    expect_fail("truncated", dir, "outside the");
    /* no weights at all */
    fixture_copy("none", dir, sizeof dir, false);
    expect_fail("no weights", dir, "no model*.safetensors file");
    /* writing over an input */
    fixture_copy("overwrite", dir, sizeof dir, true);
    char in[1100], err[512];
    snprintf(in, sizeof in, "%s/model.safetensors", dir);
    CHECK(iqf_convert_hf(dir, in, IQF_CONVERT_F16, err, sizeof err) != IQF_OK, "wrote over its input");
    CHECK(exists(in), "input removed");
}

static int closes;
static void count_close(void *user) {
    (void)user;
    closes++;
}
static iqf_status never_read(void *user, int64_t i, void *dst, char *err, size_t errlen) {
    (void)user, (void)i, (void)dst;
    snprintf(err, errlen, "not called");
    return IQF_E_INVALID_ARG;
}

/* iqf_convert_open: the checkpoint as a GGUF source is the file iqf_convert_hf writes (its
 * metadata re-serialized byte for byte, every tensor's bytes), loaded one tensor at a time. */
static void test_open_source(void) {
    char out[1024], err[1024];
    const char *ck = src_path("tests/data/hf-tiny/ckpt");
    const iqf_convert_outtype ots[] = { IQF_CONVERT_AUTO, IQF_CONVERT_F16, IQF_CONVERT_Q8_0, IQF_CONVERT_F32 };
    for (int k = 0; k < 4; k++) {
        snprintf(out, sizeof out, "%s/src-%d.gguf", tmpdir, k);
        CHECK(iqf_convert_hf(ck, out, ots[k], err, sizeof err) == IQF_OK, "convert %d: %s", k, err);
        iqf_gguf *f = iqf_gguf_open(out, err, sizeof err);
        iqf_gguf *g = iqf_convert_open(ck, ots[k], err, sizeof err);
        CHECK(f && g, "open %d: %s", k, err);
        if (!f || !g) {
            iqf_gguf_close(f);
            iqf_gguf_close(g);
            continue;
        }
        CHECK(iqf_gguf_is_source(g) && !iqf_gguf_is_source(f), "is_source");
        CHECK(iqf_gguf_file_size(g) == iqf_gguf_file_size(f) && iqf_gguf_data_offset(g) == iqf_gguf_data_offset(f),
              "%d: sizes %llu/%llu", k, (unsigned long long)iqf_gguf_file_size(g), (unsigned long long)iqf_gguf_file_size(f));
        /* the metadata, written again from the source handle, is the file's first data_offset bytes */
        iqf_gguf_writer *w = iqf_gguf_writer_open_sizing();
        for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++) iqf_gguf_writer_copy_kv(w, g, i);
        for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            CHECK(t->data == NULL, "a source tensor has data");
            iqf_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type);
        }
        size_t hn = 0;
        void *h = iqf_gguf_writer_header_bytes(w, &hn);
        CHECK(h && hn == iqf_gguf_data_offset(f), "%d: header %zu bytes, file's %zu", k, hn, iqf_gguf_data_offset(f));
        const iqf_gguf_tensor *t0 = iqf_gguf_tensor_at(f, 0);
        if (h && hn == iqf_gguf_data_offset(f))
            CHECK(!memcmp(h, (const uint8_t *)t0->data - hn, hn), "%d: metadata bytes differ", k);
        free(h);
        h = iqf_gguf_writer_header_bytes(w, &hn); /* the writer stays usable: the same again */
        CHECK(h && hn == iqf_gguf_data_offset(f), "header twice");
        free(h);
        iqf_gguf_writer_abort(w);
        int bad = 0;
        for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
            const iqf_gguf_tensor *a = iqf_gguf_tensor_at(f, i), *b = iqf_gguf_tensor_at(g, i);
            CHECK(iqf_gguf_tensor_load(f, a, err, sizeof err) == a->data, "a mapped file loads its mapping");
            const void *d = iqf_gguf_tensor_load(g, b, err, sizeof err);
            if (!d || b->nbytes != a->nbytes || memcmp(d, a->data, a->nbytes)) bad++;
            CHECK(iqf_gguf_tensor_load(g, b, err, sizeof err) == d, "a second load reuses the buffer");
            if (i % 2) iqf_gguf_tensor_unload(g, b); /* and every other one is left to the next load */
        }
        CHECK(bad == 0, "%d: %d tensors differ from the file's", k, bad);
        /* rows asked for as --target-size's measurement does (every third row, one at a time) and
         * interleaved with another tensor's first row, so each tensor is left before its last row
         * (its input pages dropped then) and read again: the file's bytes every time */
        iqf_gguf_tensor_unload(g, iqf_gguf_tensor_at(g, iqf_gguf_n_tensors(g) - 1));
        int bad_rows = 0, n_rows_read = 0;
        const int64_t nt = iqf_gguf_n_tensors(g);
        for (int pass = 0; pass < 3; pass++)
            for (int64_t i = 0; i < nt; i++) {
                const int64_t j = (i + 1 + pass) % nt;
                const iqf_gguf_tensor *a = iqf_gguf_tensor_at(f, i), *b = iqf_gguf_tensor_at(g, i);
                const iqf_gguf_tensor *a2 = iqf_gguf_tensor_at(f, j), *b2 = iqf_gguf_tensor_at(g, j);
                const int64_t nr = a->ne[1] * a->ne[2] * a->ne[3], nr2 = a2->ne[1] * a2->ne[2] * a2->ne[3];
                const size_t rs = a->nbytes / (size_t)nr, rs2 = a2->nbytes / (size_t)nr2;
                for (int64_t r = pass; r < nr; r += 3) {
                    const uint8_t *d = iqf_gguf_tensor_load_rows(g, b, r, 1, err, sizeof err);
                    if (!d || memcmp(d, (const uint8_t *)a->data + (size_t)r * rs, rs)) bad_rows++;
                    d = iqf_gguf_tensor_load_rows(g, b2, nr2 - 1 - r % nr2, 1, err, sizeof err);
                    if (!d || memcmp(d, (const uint8_t *)a2->data + (size_t)(nr2 - 1 - r % nr2) * rs2, rs2)) bad_rows++;
                    n_rows_read += 2;
                }
                iqf_gguf_tensor_unload(g, b);
            }
        CHECK(n_rows_read > 0 && bad_rows == 0, "%d: %d of %d rows read across tensors differ", k, bad_rows, n_rows_read);
        iqf_gguf_close(f);
        iqf_gguf_close(g);
    }
    /* a bad directory: one line, NULL */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/empty-src", tmpdir);
    mkdir(dir, 0755);
    CHECK(iqf_convert_open(dir, IQF_CONVERT_AUTO, err, sizeof err) == NULL && strstr(err, "/config.json: ") &&
              !strchr(err, '\n'), "empty directory: '%s'", err);
    CHECK(iqf_convert_open(ck, (iqf_convert_outtype)9, err, sizeof err) == NULL, "bad outtype accepted");
    /* iqf_gguf_open_source refuses bad metadata and still closes its source */
    iqf_gguf_source src = { NULL, never_read, count_close, NULL };
    closes = 0;
    CHECK(!iqf_gguf_open_source("GGUF", 4, 4, "m", &src, err, sizeof err) && closes == 1, "truncated metadata: %s", err);
    CHECK(!iqf_gguf_open_source(NULL, 0, 0, "m", &src, err, sizeof err) && closes == 2, "NULL metadata");
    CHECK(strstr(err, "m: ") == err, "message names the source: %s", err);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/iqf_test_convert_%d", (int)getpid());
    mkdir(tmpdir, 0755);
    test_json();
    test_safetensors_hostile();
    test_fixture();
    test_open_source();
    test_hostile_dirs();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    return test_finish("test_convert");
}
