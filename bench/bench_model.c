/*
 * bench_model.c - perplexity throughput of iqforge vs the oracle's libllama (ggml 0.25.1), in
 * one run, on the same model, text, context and thread count.
 *
 * Models: stories260K F32 (tests/data), and a generated Mistral-shaped model (random weights:
 * n_embd 1024, 4 layers, 8 heads of 128 with 2 KV heads (GQA 4:1), FFN 3584, rope base 1e6,
 * the 32000-token llama SPM vocabulary of tests/data/vocab/ggml-vocab-llama-spm.gguf) in F16,
 * and the same with every matrix quantized to IQ3_XXS by the oracle's ggml_quantize_chunk (no
 * imatrix; llama-quantize would refuse IQ3_XXS without one). Both are written once to --tmp DIR
 * (default /tmp) and reused. Text:
 * tests/data/text/tinystories-valid-excerpt.txt; -c 256, outputs for the scored half only (as
 * llama-perplexity asks), a fresh KV cache per chunk. The figure is tokens evaluated per second
 * of wall time over the chunks (a warm-up chunk first, not timed), and per CPU-second of the
 * process (robust on a shared, oversubscribed machine; with 1 thread it measures pure work,
 * with more it also charges libllama's spinning threads); both engines' PPL is printed as a check
 * that they computed the same thing.
 *
 *   bench_model [--threads N] [--chunks N] [--mistral-chunks N] [--tmp DIR] [--skip-mistral]
 *               [--fleet] [--fleet-only] [--fleet-archs qwen2,qwen3,mixtral,qwen3moe]
 *               [--fleet-scale S] [--fleet-layers N] [--fleet-chunks N] [--fleet-types f16,q4_k_m]
 *
 * --fleet adds the other architectures: iqf-genmodel's random-weight qwen2, qwen3,
 * Mixtral-style llama MoE and qwen3moe models (Mistral widths / S, default 4: n_embd 1024, n_ff
 * 3584, 32 heads / 8 KV heads; qwen3 head_dim 64; MoE 8 experts, 2 used, qwen3moe experts 1024
 * wide; 2 layers; the GPT-2 BPE vocabulary for qwen*, llama SPM for Mixtral) in F16, and the same
 * quantized to Q4_K_M by `iqforge quantize` with genmodel's imatrix (byte-identical to
 * llama-quantize's file: test_model_arch_quant). Written once to DIR and reused. --fleet-archs
 * also takes gemma3, gpt-oss and deepseek2 (genmodel's layouts of them, the same widths).
 *
 * --archfiles LIST (e.g. qwen35-dense,qwen35moe-moe,gemma3-dense,gpt-oss-moe,deepseek2-moe): the
 * models llama.cpp's test-llama-archs writes (n_embd 256, 2 layers, 128 "test" tokens: the text
 * in 5-byte chunks), rebuilt by iqf-archmodel (found next to this program) from their skeletons in
 * tests/data/archs, F32 and whatever --archfiles-types lists beside f32 (default f32,q4_k_m;
 * quantized by `iqforge quantize` without an imatrix), --fleet-chunks chunks.
 *
 * libllama's structs are handled without copying llama.h: default params are fetched into a
 * large buffer and only the leading fields (n_ctx, n_batch, n_ubatch; n_threads located by its
 * default value) are changed.
 */
#include "iqforge.h"
#include "genmodel.h"
#include "model/tokenizer.h"
#include "oracle.h"
#include "testutil.h"
#include "util/parallel.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads). */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------------------------ */
/* libllama through dlopen                                                                     */

typedef struct big { uint8_t b[1024]; } big; /* holds any of llama's parameter structs */
typedef struct lbatch {
    int32_t n_tokens;
    int32_t *token;
    float *embd;
    int32_t *pos;
    int32_t *n_seq_id;
    int32_t **seq_id;
    int8_t *logits;
} lbatch;

static struct {
    void *h;
    void (*backend_init)(void);
    big (*model_default_params)(void);
    big (*context_default_params)(void);
    void *(*model_load)(const char *, big);
    void *(*init_from_model)(void *, big);
    void *(*model_get_vocab)(void *);
    int32_t (*tokenize)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool);
    lbatch (*batch_init)(int32_t, int32_t, int32_t);
    void (*batch_free)(lbatch);
    int32_t (*decode)(void *, lbatch);
    float *(*get_logits_ith)(void *, int32_t);
    void *(*get_memory)(void *);
    void (*memory_clear)(void *, bool);
    void (*free_ctx)(void *);
    void (*model_free)(void *);
    void (*log_set)(void (*)(int, const char *, void *), void *);
    int32_t (*vocab_bos)(const void *);
    bool (*vocab_get_add_bos)(const void *);
} L;

static void quiet_log(int level, const char *text, void *ud) { (void)level; (void)text; (void)ud; }

static bool llama_open(void) {
    if (!oracle_load()) return false;
    char path[4096];
    snprintf(path, sizeof path, "%s/libggml.v0.5.0.so", oracle_lib_dir());
    void *hg = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", oracle_lib_dir());
    L.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!hg || !L.h) {
        fprintf(stderr, "bench_model: cannot load libllama: %s\n", dlerror());
        return false;
    }
    void (*load_all)(const char *) = (void (*)(const char *))dlsym(hg, "ggml_backend_load_all_from_path");
#define SYM(f, n) *(void **)&L.f = dlsym(L.h, n); if (!L.f) { fprintf(stderr, "bench_model: no %s\n", n); return false; }
    SYM(backend_init, "llama_backend_init")
    SYM(model_default_params, "llama_model_default_params")
    SYM(context_default_params, "llama_context_default_params")
    SYM(model_load, "llama_model_load_from_file")
    SYM(init_from_model, "llama_init_from_model")
    SYM(model_get_vocab, "llama_model_get_vocab")
    SYM(tokenize, "llama_tokenize")
    SYM(batch_init, "llama_batch_init")
    SYM(batch_free, "llama_batch_free")
    SYM(decode, "llama_decode")
    SYM(get_logits_ith, "llama_get_logits_ith")
    SYM(get_memory, "llama_get_memory")
    SYM(memory_clear, "llama_memory_clear")
    SYM(free_ctx, "llama_free")
    SYM(model_free, "llama_model_free")
    SYM(log_set, "llama_log_set")
    SYM(vocab_bos, "llama_vocab_bos")
    SYM(vocab_get_add_bos, "llama_vocab_get_add_bos")
#undef SYM
    if (!getenv("IQF_BENCH_VERBOSE")) L.log_set(quiet_log, NULL);
    void (*ggml_log_set)(void (*)(int, const char *, void *), void *) =
        (void (*)(void (*)(int, const char *, void *), void *))dlsym(hg, "ggml_log_set");
    if (ggml_log_set && !getenv("IQF_BENCH_VERBOSE")) ggml_log_set(quiet_log, NULL);
    if (load_all) load_all(oracle_lib_dir());
    L.backend_init();
    return true;
}

typedef struct result {
    double tps, ppl, cpu_tps;
    int chunks;
} result;

static double nll_row(const float *l, int n_vocab, int tok) {
    float mx = l[0];
    for (int v = 1; v < n_vocab; v++) mx = fmaxf(mx, l[v]);
    double s = 0;
    for (int v = 0; v < n_vocab; v++) s += expf(l[v] - mx);
    return -((double)(l[tok] - mx) - log(s));
}

static bool run_llama(const char *model_path, const char *text, size_t len, int n_ctx, int n_chunks,
                      int threads, result *r) {
    void *model = L.model_load(model_path, L.model_default_params());
    if (!model) { fprintf(stderr, "libllama could not load %s\n", model_path); return false; }
    big cp = L.context_default_params();
    uint32_t *u = (uint32_t *)cp.b;
    int ti = -1;
    for (int i = 4; i < 12; i++)
        if (u[i] == u[i + 1] && u[i] >= 1 && u[i] <= 512) { ti = i; break; } /* n_threads, n_threads_batch */
    if (u[0] != 512 || ti < 0) { fprintf(stderr, "unexpected llama_context_params layout\n"); L.model_free(model); return false; }
    u[0] = (uint32_t)n_ctx;
    u[1] = (uint32_t)n_ctx;
    u[2] = (uint32_t)n_ctx;
    u[ti] = (uint32_t)threads;
    u[ti + 1] = (uint32_t)threads;
    void *ctx = L.init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "libllama context failed\n"); L.model_free(model); return false; }
    const void *vocab = L.model_get_vocab(model);
    int32_t *toks = malloc(sizeof(int32_t) * (len + 8));
    int n = L.tokenize(vocab, text, (int32_t)len, toks, (int32_t)len + 8, true, false);
    int max_chunks = n / n_ctx;
    if (n_chunks > max_chunks) n_chunks = max_chunks;
    const iqf_model_info *dummy = NULL;
    (void)dummy;
    lbatch b = L.batch_init(n_ctx, 0, 1);
    const int first = n_ctx / 2;
    const bool add_bos = L.vocab_get_add_bos(vocab); /* as llama-perplexity: the chunk's first token */
    const int32_t bos = L.vocab_bos(vocab);
    double nll = 0;
    int count = 0;
    double t0 = 0, c0 = 0;
    int n_vocab = 0;
    {
        int32_t (*nt)(const void *) = (int32_t (*)(const void *))dlsym(L.h, "llama_vocab_n_tokens");
        n_vocab = nt(vocab);
    }
    for (int ch = -1; ch < n_chunks; ch++) { /* chunk -1: warm-up (chunk 0 again, untimed) */
        if (ch == 0) { t0 = now(); c0 = cpu_now(); }
        int c = ch < 0 ? 0 : ch;
        L.memory_clear(L.get_memory(ctx), true);
        b.n_tokens = n_ctx;
        for (int k = 0; k < n_ctx; k++) {
            b.token[k] = k == 0 && add_bos ? bos : toks[c * n_ctx + k];
            b.pos[k] = k;
            b.n_seq_id[k] = 1;
            b.seq_id[k][0] = 0;
            b.logits[k] = k >= first;
        }
        if (L.decode(ctx, b)) { fprintf(stderr, "llama_decode failed\n"); break; }
        if (ch < 0) continue;
        for (int k = first; k < n_ctx - 1; k++) {
            nll += nll_row(L.get_logits_ith(ctx, k), n_vocab, toks[c * n_ctx + k + 1]);
            count++;
        }
    }
    double dt = now() - t0, dc = cpu_now() - c0;
    r->cpu_tps = (double)n_chunks * n_ctx / dc;
    r->chunks = n_chunks;
    r->tps = (double)n_chunks * n_ctx / dt;
    r->ppl = exp(nll / count);
    L.batch_free(b);
    free(toks);
    L.free_ctx(ctx);
    L.model_free(model);
    return true;
}

static bool run_ours(const char *model_path, const char *text, size_t len, int n_ctx, int n_chunks,
                     int threads, result *r) {
    char err[1024];
    iqf_model *m = NULL;
    if (iqf_model_load(model_path, NULL, &m, err, sizeof err)) { fprintf(stderr, "%s\n", err); return false; }
    iqf_vocab *v = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    int32_t *toks = malloc(sizeof(int32_t) * (len + 8));
    int n = v ? iqf_tokenize(v, text, len, true, toks, (int32_t)len + 8) : -1;
    iqf_vocab_free(v);
    iqf_context *c = NULL;
    bool ok = n > 0 && iqf_context_new(m, n_ctx, threads, &c, err, sizeof err) == IQF_OK;
    if (ok) {
        float *warm = malloc(sizeof(float) * (size_t)iqf_model_get_info(m)->n_vocab * (size_t)(n_ctx - n_ctx / 2));
        iqf_decode(c, toks, n_ctx, 0, n_ctx / 2, warm, err, sizeof err);
        free(warm);
        iqf_ppl_params p = { n_ctx, n_chunks, NULL, NULL, NULL };
        iqf_ppl_result res;
        double c0 = cpu_now();
        ok = iqf_perplexity(c, toks, (size_t)n, &p, &res, err, sizeof err) == IQF_OK;
        r->cpu_tps = (double)res.n_chunks * n_ctx / (cpu_now() - c0);
        if (!ok) fprintf(stderr, "%s\n", err);
        r->tps = res.tokens_per_second;
        r->ppl = res.ppl;
        r->chunks = res.n_chunks;
    }
    free(toks);
    iqf_context_free(c);
    iqf_model_free(m);
    return ok;
}

/* ------------------------------------------------------------------------------------------ */
/* The Mistral-shaped model                                                                    */

enum { ME = 1024, ML = 4, MH = 8, MKV = 2, MF = 3584 };

typedef struct qjob { int type; const float *src; uint8_t *dst; int64_t ncols; size_t rb; } qjob;

static void q_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const qjob *j = arg;
    oracle_quantize(j->type, j->src + b * j->ncols, j->dst + (size_t)b * j->rb, e - b, j->ncols, NULL);
}

/* mtype: F16, or a type the oracle quantizes every matrix to (token_embd and output too). */
static bool write_mistral(const char *path, int mtype, int threads) {
    char err[512];
    iqf_gguf *voc = iqf_gguf_open(src_path("tests/data/vocab/ggml-vocab-llama-spm.gguf"), err, sizeof err);
    if (!voc) { fprintf(stderr, "%s\n", err); return false; }
    int64_t tk = iqf_gguf_find_kv(voc, "tokenizer.ggml.tokens");
    const int64_t V = tk >= 0 ? (int64_t)iqf_gguf_arr_n(voc, tk) : 0;
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, sizeof err);
    if (!w || V <= 0) { fprintf(stderr, "%s\n", err); iqf_gguf_close(voc); return false; }
    iqf_gguf_writer_set_str(w, "general.architecture", "llama");
    iqf_gguf_writer_set_str(w, "general.name", "mistral-shaped-bench");
    iqf_gguf_writer_set_u32(w, "llama.context_length", 4096);
    iqf_gguf_writer_set_u32(w, "llama.embedding_length", ME);
    iqf_gguf_writer_set_u32(w, "llama.block_count", ML);
    iqf_gguf_writer_set_u32(w, "llama.feed_forward_length", MF);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count", MH);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count_kv", MKV);
    iqf_gguf_writer_set_u32(w, "llama.rope.dimension_count", ME / MH);
    iqf_gguf_writer_set_f32(w, "llama.rope.freq_base", 1000000.0f);
    iqf_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    iqf_gguf_writer_set_u32(w, "general.file_type", mtype == IQF_TYPE_F16 ? 1 : mtype == IQF_TYPE_IQ3_XXS ? 23 : 0);
    for (int64_t i = 0; i < iqf_gguf_n_kv(voc); i++)
        if (!strncmp(iqf_gguf_kv_key(voc, i), "tokenizer.", 10)) iqf_gguf_writer_copy_kv(w, voc, i);
    iqf_gguf_close(voc);
    typedef struct { char name[64]; int64_t ne0, ne1; int type; } tinfo;
    tinfo ts[3 + 9 * ML];
    int nt = 0;
#define T(nm, a, b, ty0) do { int ty = ty0 == IQF_TYPE_F16 ? mtype : ty0; snprintf(ts[nt].name, 64, "%s", nm); ts[nt].ne0 = a; ts[nt].ne1 = b; ts[nt].type = ty; nt++; } while (0)
    T("token_embd.weight", ME, V, IQF_TYPE_F16);
    for (int l = 0; l < ML; l++) {
        char n[64];
        const int hd = ME / MH;
#define B(s, a, b, ty) snprintf(n, sizeof n, "blk.%d.%s.weight", l, s); T(n, a, b, ty)
        B("attn_norm", ME, 1, IQF_TYPE_F32);
        B("attn_q", ME, ME, IQF_TYPE_F16);
        B("attn_k", ME, hd * MKV, IQF_TYPE_F16);
        B("attn_v", ME, hd * MKV, IQF_TYPE_F16);
        B("attn_output", ME, ME, IQF_TYPE_F16);
        B("ffn_norm", ME, 1, IQF_TYPE_F32);
        B("ffn_gate", ME, MF, IQF_TYPE_F16);
        B("ffn_up", ME, MF, IQF_TYPE_F16);
        B("ffn_down", MF, ME, IQF_TYPE_F16);
#undef B
    }
    T("output_norm.weight", ME, 1, IQF_TYPE_F32);
    T("output.weight", ME, V, IQF_TYPE_F16);
#undef T
    for (int i = 0; i < nt; i++) {
        int64_t ne[2] = { ts[i].ne0, ts[i].ne1 };
        iqf_gguf_writer_add_tensor(w, ts[i].name, ts[i].ne1 > 1 ? 2 : 1, ne, ts[i].type);
    }
    iqf_gguf_writer_write_header(w);
    tu_rng rng = { 1234 };
    size_t cap = 1 << 20;
    uint16_t *buf = malloc(cap * 2);
    for (int i = 0; i < nt; i++) {
        int64_t n = ts[i].ne0 * ts[i].ne1;
        if (ts[i].type == IQF_TYPE_F32) {
            float *f = malloc(sizeof(float) * (size_t)n);
            for (int64_t j = 0; j < n; j++) f[j] = 1.0f + 0.1f * (float)tu_normal(&rng);
            iqf_gguf_writer_write_data(w, f, sizeof(float) * (size_t)n);
            free(f);
            continue;
        }
        if (ts[i].type == IQF_TYPE_F16) {
            for (int64_t j = 0; j < n;) {
                size_t k = 0;
                for (; k < cap && j < n; k++, j++) buf[k] = iqf_fp32_to_fp16(0.02f * (float)tu_normal(&rng));
                iqf_gguf_writer_write_data(w, buf, k * 2);
            }
            continue;
        }
        float *f = malloc(sizeof(float) * (size_t)n);
        size_t rb = iqf_row_size(ts[i].type, ts[i].ne0);
        uint8_t *q = malloc(rb * (size_t)ts[i].ne1);
        for (int64_t j = 0; j < n; j++) f[j] = 0.02f * (float)tu_normal(&rng);
        qjob qj = { ts[i].type, f, q, ts[i].ne0, rb };
        q_range(&qj, 0, 1, 0); /* first call builds ggml's tables (not thread-safe) */
        iqf_parallel_for(threads, ts[i].ne1, 16, q_range, &qj);
        iqf_gguf_writer_write_data(w, q, rb * (size_t)ts[i].ne1);
        free(f);
        free(q);
    }
    free(buf);
    if (iqf_gguf_writer_finish(w, err, sizeof err)) { fprintf(stderr, "%s\n", err); return false; }
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The fleet: genmodel's qwen2, qwen3, Mixtral and qwen3moe models                             */

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* F16 model (and imatrix) of `arch`, then the Q4_K_M file if qtype names one; paths returned. */
static bool fleet_model(const char *tmp, const char *arch, int scale, int layers, int ftype, int threads,
                        char *path, size_t plen) {
    char f16[4096], img[4096], err[1024];
    snprintf(f16, sizeof f16, "%s/iqf_bench_fleet_%s_s%d_l%d_f16.gguf", tmp, arch, scale, layers);
    snprintf(img, sizeof img, "%s/iqf_bench_fleet_%s_s%d_l%d.imatrix.gguf", tmp, arch, scale, layers);
    if (!exists(f16) || !exists(img)) {
        iqf_genmodel_opts o = iqf_genmodel_default_opts();
        o.arch = arch;
        o.scale = scale;
        o.n_layer = layers;
        o.type = IQF_TYPE_F16;
        o.n_expert = 8;
        o.n_expert_used = 2;
        o.vocab = src_path(strcmp(arch, "mixtral") ? "tests/data/vocab/ggml-vocab-gpt-2.gguf"
                                                   : "tests/data/vocab/ggml-vocab-llama-spm.gguf");
        if (iqf_genmodel_write(&o, f16, img, NULL, err, sizeof err) != IQF_OK) {
            fprintf(stderr, "bench_model: genmodel %s: %s\n", arch, err);
            return false;
        }
    }
    if (ftype < 0) {
        snprintf(path, plen, "%s", f16);
        return true;
    }
    snprintf(path, plen, "%s/iqf_bench_fleet_%s_s%d_l%d_ftype%d.gguf", tmp, arch, scale, layers, ftype);
    if (exists(path)) return true;
    iqf_model_quantize_params p = iqf_model_quantize_default_params();
    p.ftype = ftype;
    p.n_threads = threads;
    p.imatrix_path = img;
    p.quiet = true;
    if (iqf_model_quantize(f16, path, &p, NULL, NULL, err, sizeof err) != IQF_OK) {
        fprintf(stderr, "bench_model: quantize %s: %s\n", arch, err);
        return false;
    }
    return true;
}

/* test-llama-archs' models (tests/data/archs skeletons, their files' sizes) */
static const struct { const char *name; long long size; } archfiles[] = {
    { "llama-dense", 4764384 },  { "qwen2-dense", 4753984 },  { "qwen3-dense", 3966272 },
    { "llama-moe", 7119552 },    { "qwen3moe-moe", 7119776 }, { "gemma3-dense", 4760256 },
    { "qwen35-dense", 5294240 }, { "qwen35moe-moe", 8840768 }, { "gpt-oss-moe", 7136736 },
    { "deepseek2-moe", 4426528 },
};

static bool archfile_model(const char *tmp, const char *bindir, const char *name, int ftype, int threads,
                           char *path, size_t plen) {
    char f32[4096], cmd[16384], err[1024];
    long long size = 0;
    for (size_t i = 0; i < sizeof archfiles / sizeof archfiles[0]; i++)
        if (!strcmp(archfiles[i].name, name)) size = archfiles[i].size;
    if (!size) {
        fprintf(stderr, "bench_model: no skeleton %s\n", name);
        return false;
    }
    snprintf(f32, sizeof f32, "%s/iqf_bench_archfile_%s.gguf", tmp, name);
    if (!exists(f32)) {
        snprintf(cmd, sizeof cmd, "'%s/iqf-archmodel' '%s/%s.skel' %lld '%s' 42", bindir, src_path("tests/data/archs"), name,
                 size, f32);
        if (system(cmd) != 0) {
            fprintf(stderr, "bench_model: %s failed\n", cmd);
            return false;
        }
    }
    if (ftype < 0) {
        snprintf(path, plen, "%s", f32);
        return true;
    }
    snprintf(path, plen, "%s/iqf_bench_archfile_%s_ftype%d.gguf", tmp, name, ftype);
    if (exists(path)) return true;
    iqf_model_quantize_params p = iqf_model_quantize_default_params();
    p.ftype = ftype;
    p.n_threads = threads;
    p.quiet = true;
    if (iqf_model_quantize(f32, path, &p, NULL, NULL, err, sizeof err) != IQF_OK) {
        fprintf(stderr, "bench_model: quantize %s: %s\n", name, err);
        return false;
    }
    return true;
}

static void row(const char *name, const char *model, const char *text, size_t len, int n_ctx,
                int chunks, int threads) {
    result a = { 0 }, b = { 0 };
    bool oa = run_ours(model, text, len, n_ctx, chunks, threads, &a);
    bool ob = run_llama(model, text, len, n_ctx, chunks, threads, &b);
    if (!oa || !ob) { printf("| %s | failed | | | | |\n", name); return; }
    printf("| %s | %d | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.4f / %.4f |\n", name, a.chunks,
           threads, a.tps, b.tps, a.tps / b.tps, a.cpu_tps, b.cpu_tps, a.cpu_tps / b.cpu_tps, a.ppl, b.ppl);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int threads = 2, chunks = 60, mchunks = 4;
    const char *tmp = "/tmp";
    bool skip_mistral = false, fleet = false, fleet_only = false;
    const char *fleet_archs = "qwen2,qwen3,mixtral,qwen3moe", *fleet_types = "f16,q4_k_m";
    int fscale = 4, flayers = 2, fchunks = 4;
    const char *archfile_list = NULL, *archfile_types = "f32,q4_k_m";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chunks") && i + 1 < argc) chunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--mistral-chunks") && i + 1 < argc) mchunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tmp") && i + 1 < argc) tmp = argv[++i];
        else if (!strcmp(argv[i], "--skip-mistral")) skip_mistral = true;
        else if (!strcmp(argv[i], "--fleet")) fleet = true;
        else if (!strcmp(argv[i], "--fleet-only")) fleet = fleet_only = true;
        else if (!strcmp(argv[i], "--fleet-archs") && i + 1 < argc) fleet_archs = argv[++i];
        else if (!strcmp(argv[i], "--fleet-types") && i + 1 < argc) fleet_types = argv[++i];
        else if (!strcmp(argv[i], "--fleet-scale") && i + 1 < argc) fscale = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fleet-layers") && i + 1 < argc) flayers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--fleet-chunks") && i + 1 < argc) fchunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--archfiles") && i + 1 < argc) archfile_list = argv[++i];
        else if (!strcmp(argv[i], "--archfiles-types") && i + 1 < argc) archfile_types = argv[++i];
        else {
            fprintf(stderr, "usage: bench_model [--threads N] [--chunks N] [--mistral-chunks N] [--tmp DIR] [--skip-mistral]\n"
                            "                   [--fleet] [--fleet-only] [--fleet-archs LIST] [--fleet-types f16,q4_k_m]\n"
                            "                   [--fleet-scale S] [--fleet-layers N] [--fleet-chunks N]\n"
                            "                   [--archfiles qwen35-dense,...] [--archfiles-types f32,q4_k_m]\n");
            return 2;
        }
    }
    if (!llama_open()) {
        fprintf(stderr, "bench_model: oracle (libllama) not available\n");
        return 77;
    }
    size_t len;
    char *text = read_file(src_path("tests/data/text/tinystories-valid-excerpt.txt"), &len);
    if (!text) { fprintf(stderr, "bench_model: text missing (set IQF_SOURCE_DIR)\n"); return 1; }
    printf("perplexity throughput, -c 256, tokens/s (wall), iqforge vs libllama (ggml 0.25.1), simd %s\n\n",
           iqf_simd_name(iqf_simd_detect()));
    printf("| model | chunks | threads | iqforge tok/s | libllama tok/s | ratio | iqforge tok/CPU-s | libllama tok/CPU-s | ratio | PPL iqforge / libllama |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    if (!fleet_only)
        row("stories260K F32", src_path("tests/data/stories260K/stories260K-f32.gguf"), text, len, 256, chunks, threads);
    if (!skip_mistral && !fleet_only) {
        /* The generated models are kept in DIR (made once: IQ3_XXS takes the oracle a minute). */
        char f16[4096], iq3[4096];
        snprintf(f16, sizeof f16, "%s/iqf_bench_mistral_f16.gguf", tmp);
        snprintf(iq3, sizeof iq3, "%s/iqf_bench_mistral_iq3_xxs.gguf", tmp);
        FILE *e = fopen(f16, "rb");
        if (e) fclose(e);
        if (e || write_mistral(f16, IQF_TYPE_F16, threads))
            row("mistral-shaped F16 (122M params)", f16, text, len, 256, mchunks, threads);
        e = fopen(iq3, "rb");
        if (e) fclose(e);
        if (!iqf_can_decode(IQF_TYPE_IQ3_XXS))
            printf("| mistral-shaped IQ3_XXS | this build cannot decode iq3_xxs | | | | | |\n");
        else if (e || write_mistral(iq3, IQF_TYPE_IQ3_XXS, threads))
            row("mistral-shaped IQ3_XXS (every matrix)", iq3, text, len, 256, mchunks, threads);
    }
    if (fleet) {
        char archs[256], types[256];
        snprintf(archs, sizeof archs, "%s", fleet_archs);
        for (char *sa = NULL, *a = strtok_r(archs, ",", &sa); a; a = strtok_r(NULL, ",", &sa)) {
            snprintf(types, sizeof types, "%s", fleet_types);
            for (char *st = NULL, *t = strtok_r(types, ",", &st); t; t = strtok_r(NULL, ",", &st)) {
                const int ft = strcmp(t, "f16") && strcmp(t, "F16") ? iqf_ftype_from_name(t) : -1;
                if (ft < 0 && strcmp(t, "f16") && strcmp(t, "F16")) {
                    fprintf(stderr, "bench_model: unknown file type %s\n", t);
                    continue;
                }
                char path[4096], name[128];
                if (!fleet_model(tmp, a, fscale, flayers, ft, threads, path, sizeof path)) continue;
                snprintf(name, sizeof name, "%s 1/%d %dL %s", a, fscale, flayers, t);
                row(name, path, text, len, 256, fchunks, threads);
            }
        }
    }
    if (archfile_list) {
        char bindir[4096], names[512], types[256];
        snprintf(bindir, sizeof bindir, "%s", argv[0]);
        char *sl = strrchr(bindir, '/');
        if (sl) *sl = 0;
        else snprintf(bindir, sizeof bindir, ".");
        snprintf(names, sizeof names, "%s", archfile_list);
        for (char *sa = NULL, *a = strtok_r(names, ",", &sa); a; a = strtok_r(NULL, ",", &sa)) {
            snprintf(types, sizeof types, "%s", archfile_types);
            for (char *st = NULL, *t = strtok_r(types, ",", &st); t; t = strtok_r(NULL, ",", &st)) {
                const bool plain = !strcmp(t, "f32") || !strcmp(t, "F32");
                const int ft = plain ? -1 : iqf_ftype_from_name(t);
                if (!plain && ft < 0) {
                    fprintf(stderr, "bench_model: unknown file type %s\n", t);
                    continue;
                }
                char path[4096], name[128];
                if (!archfile_model(tmp, bindir, a, ft, threads, path, sizeof path)) continue;
                snprintf(name, sizeof name, "%s (test-llama-archs) %s", a, t);
                row(name, path, text, len, 256, fchunks, threads);
            }
        }
    }
    free(text);
    return 0;
}
