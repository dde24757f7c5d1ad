/*
 * test_quantize_errors.c - `iqforge quantize` on bad input: each case must print a clear message
 * naming the problem, exit 1 and leave no output file (nor a temporary one) behind.
 * Cases: truncated GGUF, corrupt GGUF, unsupported input type, already quantized input without
 * --allow-requantize, imatrix for another model, imatrix with NaN and with negative values,
 * missing imatrix where the file type needs one, unwritable output, a full disk (/dev/full),
 * output equal to input, bad arguments, thread-count independence (IQ3_XXS, IQ2_XXS, Q4_K_M with
 * the imatrix, 1-3 threads), keys llama.cpp reads with a wrong type or range (schema,
 * also through inspect and inspect --force). Plus: --dry-run writes nothing, thread count does not
 * change the output. Runs the CLI ($IQF_CLI) on files made with the generator and GGUF writer.
 */
#include "genmodel.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static const char *cli;

static const char *P(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Runs `iqforge quantize ARGS`; returns the exit status, stderr in msg. */
static int run(const char *args, char *msg, size_t msglen) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s quantize --quiet %s >/dev/null 2>%s/stderr.txt", cli, args, dir);
    int rc = system(cmd);
    msg[0] = 0;
    FILE *f = fopen(P("stderr.txt"), "r");
    if (f) {
        size_t n = fread(msg, 1, msglen - 1, f);
        msg[n] = 0;
        fclose(f);
    }
    unlink(P("stderr.txt"));
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* No file in the temp dir whose name starts with `prefix` (the output or its temp file). */
static bool nothing_named(const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool ok = true;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) ok = false;
    closedir(d);
    return ok;
}

#define EXPECT_FAIL(args, needle)                                                                 \
    do {                                                                                          \
        char m_[2048];                                                                            \
        int rc_ = run(args, m_, sizeof m_);                                                       \
        CHECK(rc_ == 1, "%s: exit %d (want 1), stderr: %s", args, rc_, m_);                      \
        CHECK(strstr(m_, needle) != NULL, "%s: message lacks '%s': %s", args, needle, m_);       \
        CHECK(nothing_named("out"), "%s: an output file was left behind", args);                \
    } while (0)

static void copy_prefix(const char *src, const char *dst, long n) {
    size_t len;
    char *d = read_file(src, &len);
    if (!d) return;
    if (n < 0) n = (long)len;
    write_file(dst, d, (size_t)n < len ? (size_t)n : len);
    free(d);
}

/* A tiny llama GGUF whose one weight matrix has type `type` with arbitrary bytes. */
static void write_odd_model(const char *path, int type) {
    char err[256];
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, sizeof err);
    if (!w) return;
    iqf_gguf_writer_set_str(w, "general.architecture", "llama");
    iqf_gguf_writer_set_u32(w, "llama.block_count", 1);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count", 4);
    int64_t ne[2] = { 256, 4 };
    iqf_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", 2, ne, type);
    iqf_gguf_writer_write_header(w);
    size_t n = iqf_row_size(type, 256) * 4;
    unsigned char *b = calloc(1, n);
    iqf_gguf_writer_write_data(w, b, n);
    free(b);
    iqf_gguf_writer_finish(w, err, sizeof err);
}

/* A tiny llama GGUF with a tokenizer, valid except for schema case `c` (see schema_cases). */
static void write_schema_model(const char *path, int c) {
    char err[256];
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, sizeof err);
    if (!w) return;
    const char *toks[4] = { "<unk>", "<s>", "</s>", "a" };
    const float scores[4] = { 0, 0, 0, -1 };
    const int32_t types[4] = { 2, 3, 3, c == 11 ? 9 : 1 };
    const int32_t itoks[4] = { 0, 1, 2, 3 };
    const uint32_t ff[2] = { 512, 512 };
    iqf_gguf_writer_set_str(w, "general.architecture", "llama");
    if (c == 6) iqf_gguf_writer_set_str(w, "llama.block_count", "1");
    else iqf_gguf_writer_set_u32(w, "llama.block_count", 1);
    iqf_gguf_writer_set_u32(w, "llama.embedding_length", 256);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count", 4);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count_kv", c == 8 ? 3 : 2);
    iqf_gguf_writer_set_u32(w, "llama.rope.dimension_count", 64);
    if (c == 7) iqf_gguf_writer_set_u32(w, "llama.attention.layer_norm_rms_epsilon", 1);
    else iqf_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (c == 12) iqf_gguf_writer_set_arr(w, "llama.feed_forward_length", IQF_GGUF_U32, ff, 2);
    else iqf_gguf_writer_set_arr(w, "llama.feed_forward_length", IQF_GGUF_U32, ff, 1);
    iqf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (c == 1) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.tokens", IQF_GGUF_I32, itoks, 4);
    else iqf_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, 4);
    if (c == 2) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", IQF_GGUF_I32, itoks, 4);
    else iqf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", IQF_GGUF_F32, scores, c == 4 ? 3 : 4);
    if (c == 3) iqf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", IQF_GGUF_U8, "\2\3\3\1", 4);
    else iqf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", IQF_GGUF_I32, types, 4);
    iqf_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", c == 5 ? 99 : 1);
    if (c == 10) iqf_gguf_writer_set_u8(w, "tokenizer.ggml.add_bos_token", 1);
    else iqf_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (c == 9) {
        iqf_gguf_writer_set_u16(w, "split.no", 2);
        iqf_gguf_writer_set_u16(w, "split.count", 2);
    }
    int64_t ne[2] = { 256, 4 };
    iqf_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", 2, ne, IQF_TYPE_F32);
    iqf_gguf_writer_write_header(w);
    float b[256 * 4];
    for (int i = 0; i < 256 * 4; i++) b[i] = (float)(i % 7) - 3.0f;
    iqf_gguf_writer_write_data(w, b, sizeof b);
    iqf_gguf_writer_finish(w, err, sizeof err);
}

/* What each schema case must say (case 0 is valid). */
static const char *const schema_cases[] = {
    NULL,
    "key tokenizer.ggml.tokens has type arr[i32], llama.cpp reads arr[str]",
    "key tokenizer.ggml.scores has type arr[i32], llama.cpp reads arr[f32]",
    "key tokenizer.ggml.token_type has type arr[u8], llama.cpp reads arr[i32]",
    "key tokenizer.ggml.scores: 3 elements, tokenizer.ggml.tokens has 4",
    "key tokenizer.ggml.bos_token_id: token id 99 is not below the vocabulary size 4",
    "key llama.block_count has type str, llama.cpp reads u32",
    "key llama.attention.layer_norm_rms_epsilon has type u32, llama.cpp reads f32",
    "key llama.attention.head_count_kv: 3 does not divide llama.attention.head_count (4)",
    "key split.no: 2 is not below split.count 2",
    "key tokenizer.ggml.add_bos_token has type u8, llama.cpp reads bool",
    "key tokenizer.ggml.token_type: element 3 is 9 (token types are 0 to 6)",
    "key llama.feed_forward_length: 2 elements, llama.block_count is 1",
};

static void write_dat(const char *path, const char *name, int n, float v) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    int32_t one = 1, len = (int32_t)strlen(name), ncall = 1, nv = n;
    fwrite(&one, 4, 1, f);
    fwrite(&len, 4, 1, f);
    fwrite(name, 1, (size_t)len, f);
    fwrite(&ncall, 4, 1, f);
    fwrite(&nv, 4, 1, f);
    for (int i = 0; i < n; i++) {
        float x = i == n / 2 ? v : 1.0f;
        fwrite(&x, 4, 1, f);
    }
    fclose(f);
}

int main(void) {
    cli = getenv("IQF_CLI");
    if (!cli) {
        fprintf(stderr, "skip: IQF_CLI not set (run through ctest)\n");
        return 77;
    }
    snprintf(dir, sizeof dir, "/tmp/iqf_tqe_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char err[512], args[2048], m[2048];
    iqf_genmodel_opts o = iqf_genmodel_default_opts();
    o.scale = 16; /* n_embd 256, n_ff 896, vocab 2000 */
    o.n_layer = 1;
    char model[512], im[512];
    snprintf(model, sizeof model, "%s", P("m.gguf"));
    snprintf(im, sizeof im, "%s", P("m.imatrix.gguf"));
    CHECK(iqf_genmodel_write(&o, model, im, NULL, err, sizeof err) == IQF_OK, "genmodel: %s", err);
    o.scale = 32; /* another model: n_embd 128 */
    char other[512], other_im[512];
    snprintf(other, sizeof other, "%s", P("other.gguf"));
    snprintf(other_im, sizeof other_im, "%s", P("other.imatrix.gguf"));
    CHECK(iqf_genmodel_write(&o, other, other_im, NULL, err, sizeof err) == IQF_OK, "genmodel: %s", err);

    /* Baseline: F16 -> BF16 works (only float codecs needed). */
    snprintf(args, sizeof args, "%s %s BF16 1", model, P("ok1.gguf"));
    CHECK(run(args, m, sizeof m) == 0, "baseline: %s", m);
    unlink(P("ok1.gguf"));
    /* Thread-count independence where threads matter: the rows of every tensor are split into
     * tasks of 256 rows (ncols 256) spread over the workers, with the imatrix and the SIMD
     * searches of IQ3_XXS / IQ2_XXS / Q4_K_M; 1, 2 and 3 threads give the same bytes. */
    static const char *const tsens[] = { "IQ3_XXS", "IQ2_XXS", "Q4_K_M" };
    for (size_t k = 0; k < sizeof tsens / sizeof tsens[0]; k++) {
        char *b[3] = { NULL, NULL, NULL };
        size_t nb[3] = { 0, 0, 0 };
        for (int th = 1; th <= 3; th++) {
            snprintf(args, sizeof args, "--imatrix %s %s %s %s %d", im, model, P("okt.gguf"), tsens[k], th);
            CHECK(run(args, m, sizeof m) == 0, "%s %d threads: %s", tsens[k], th, m);
            b[th - 1] = read_file(P("okt.gguf"), &nb[th - 1]);
            unlink(P("okt.gguf"));
        }
        for (int th = 2; th <= 3; th++)
            CHECK(b[0] && b[th - 1] && nb[0] == nb[th - 1] && nb[0] > 100000 && !memcmp(b[0], b[th - 1], nb[0]),
                  "%s: output with %d threads differs from 1 thread", tsens[k], th);
        for (int th = 0; th < 3; th++) free(b[th]);
    }

    /* Truncated and corrupt GGUF. */
    copy_prefix(model, P("trunc.gguf"), 3000);
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("trunc.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "trunc.gguf");
    copy_prefix(model, P("corrupt.gguf"), -1);
    {
        FILE *f = fopen(P("corrupt.gguf"), "r+b");
        if (f) {
            fwrite("GGUX", 1, 4, f);
            fclose(f);
        }
    }
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("corrupt.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "corrupt.gguf");
    write_file(P("empty.gguf"), "", 0);
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("empty.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "empty.gguf");
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("missing.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "missing.gguf");

    /* Unsupported input type; quantized input without --allow-requantize. */
    write_odd_model(P("i32.gguf"), IQF_TYPE_I32);
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("i32.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "i32");
    write_odd_model(P("q8.gguf"), IQF_TYPE_Q8_0);
    snprintf(args, sizeof args, "%s %s Q4_K_M", P("q8.gguf"), P("out.gguf"));
    EXPECT_FAIL(args, "--allow-requantize");

    /* imatrix for another model (sizes differ); NaN and negative values; unreadable. */
    snprintf(args, sizeof args, "--imatrix %s %s %s BF16", other_im, model, P("out.gguf"));
    EXPECT_FAIL(args, "imatrix size");
    write_dat(P("nan.dat"), "blk.0.ffn_up.weight", 256, 0.0f / 0.0f);
    snprintf(args, sizeof args, "--imatrix %s %s %s BF16", P("nan.dat"), model, P("out.gguf"));
    EXPECT_FAIL(args, "non-finite");
    write_dat(P("neg.dat"), "blk.0.ffn_up.weight", 256, -2.0f);
    snprintf(args, sizeof args, "--imatrix %s %s %s BF16", P("neg.dat"), model, P("out.gguf"));
    EXPECT_FAIL(args, "negative");
    write_dat(P("foreign.dat"), "encoder.layer.0.weight", 256, 1.0f);
    snprintf(args, sizeof args, "--imatrix %s %s %s BF16", P("foreign.dat"), model, P("out.gguf"));
    EXPECT_FAIL(args, "another model");
    write_file(P("junk.dat"), "\x01\x00\x00\x00\xff", 5);
    snprintf(args, sizeof args, "--imatrix %s %s %s BF16", P("junk.dat"), model, P("out.gguf"));
    EXPECT_FAIL(args, "junk.dat");

    /* Missing imatrix where the file type needs one. */
    static const char *const need[] = { "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ1_S", "IQ1_M", "IQ3_XXS", "Q2_K_S" };
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        snprintf(args, sizeof args, "%s %s %s", model, P("out.gguf"), need[i]);
        EXPECT_FAIL(args, "importance matrix");
    }

    /* Unwritable output, full disk, output equal to input. */
    snprintf(args, sizeof args, "%s /nonexistent-dir/out.gguf BF16", model);
    EXPECT_FAIL(args, "/nonexistent-dir/out.gguf");
    if (access("/dev/full", W_OK) == 0) {
        snprintf(args, sizeof args, "%s /dev/full BF16", model);
        EXPECT_FAIL(args, "/dev/full");
    }
    snprintf(args, sizeof args, "%s %s BF16", model, model);
    EXPECT_FAIL(args, "same");
    {
        size_t n0 = 0;
        char *b = read_file(model, &n0);
        CHECK(b && n0 > 100000, "input intact after output==input");
        free(b);
    }

    /* Schema: keys llama.cpp reads with the wrong type or range fail in quantize (before any
     * output exists) and in inspect (exit 1; --force prints the file with the key marked). */
    for (int c = 0; c < (int)(sizeof schema_cases / sizeof schema_cases[0]); c++) {
        char name[64];
        snprintf(name, sizeof name, "schema%d.gguf", c);
        write_schema_model(P(name), c);
        snprintf(args, sizeof args, "%s %s BF16", P(name), P("out.gguf"));
        if (!schema_cases[c]) {
            CHECK(run(args, m, sizeof m) == 0, "valid schema model: %s", m);
            unlink(P("out.gguf"));
        } else {
            EXPECT_FAIL(args, schema_cases[c]);
        }
        char cmd[4096];
        snprintf(cmd, sizeof cmd, "%s inspect %s >%s 2>%s", cli, P(name), P("ins.txt"), P("ins.err"));
        int irc = system(cmd);
        size_t ln = 0, en = 0;
        char *ie = read_file(P("ins.err"), &en);
        CHECK(WIFEXITED(irc) && WEXITSTATUS(irc) == (schema_cases[c] ? 1 : 0), "inspect %s: exit %d", name, irc);
        if (schema_cases[c]) {
            CHECK(ie && strstr(ie, schema_cases[c]) && strstr(ie, name) && strchr(ie, '\n') == ie + en - 1,
                  "inspect %s: want one line naming the key: %s", name, ie ? ie : "");
            snprintf(cmd, sizeof cmd, "%s inspect --force %s >%s 2>%s", cli, P(name), P("ins.txt"), P("ins.err"));
            irc = system(cmd);
            char *io = read_file(P("ins.txt"), &ln);
            CHECK(WIFEXITED(irc) && WEXITSTATUS(irc) == 1, "inspect --force %s: exit %d", name, irc);
            CHECK(io && strstr(io, "!! INVALID: ") && strstr(io, schema_cases[c]) && strstr(io, "blk.0.ffn_up.weight"),
                  "inspect --force %s: marked listing: %s", name, io ? io : "");
            free(io);
        }
        free(ie);
        unlink(P("ins.txt"));
        unlink(P("ins.err"));
    }

    /* Bad arguments: usage errors exit 2. */
    snprintf(args, sizeof args, "%s %s NOT_A_TYPE", model, P("out.gguf"));
    CHECK(run(args, m, sizeof m) == 2, "bad type: %s", m);
    snprintf(args, sizeof args, "--tensor-type attn_q=q9_9 %s %s Q4_K_M", model, P("out.gguf"));
    CHECK(run(args, m, sizeof m) == 2, "bad tensor type: %s", m);
    snprintf(args, sizeof args, "--bogus %s %s Q4_K_M", model, P("out.gguf"));
    CHECK(run(args, m, sizeof m) == 2, "bad option: %s", m);
    CHECK(nothing_named("out"), "no output after usage errors");

    /* --dry-run writes nothing and prints the plan. */
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s quantize --dry-run %s %s IQ3_XXS > %s 2>&1", cli, model, P("out.gguf"),
             P("plan.txt"));
    int rc = system(cmd);
    size_t pn = 0;
    char *plan = read_file(P("plan.txt"), &pn);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "dry run exit");
    CHECK(plan && strstr(plan, "blk.0.attn_q.weight") && strstr(plan, "iq2_s") && strstr(plan, "will require an imatrix"),
          "dry-run plan: %s", plan ? plan : "(none)");
    CHECK(nothing_named("out"), "dry run wrote a file");
    free(plan);

    /* Clean up. */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') unlink(P(e->d_name));
    if (d) closedir(d);
    rmdir(dir);
    return test_finish("test_quantize_errors");
}
