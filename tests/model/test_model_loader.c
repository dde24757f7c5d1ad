/*
 * test_model_loader.c - the engine's loader accepts what libllama accepts (issue 25): keys that
 * llama.cpp's own model saver writes (test-llama-archs -o) and that libllama reads without
 * trouble.
 *   - expert_feed_forward_length = 0 on a dense model (libllama reads it only where there are
 *     experts);
 *   - rope.scaling.type "linear" with a factor: positions times 1/factor, cos/sin times
 *     rope.scaling.attn_factor, as llama_context sets freq_scale and attn_factor; "none" ignores
 *     the factor; "yarn" as llama_context sets it up (ext_factor 1, beta 32/1, the original
 *     context, attn_factor get_mscale(factor) / (1 + 0.1 ln factor) times the key's); a type the
 *     engine does not implement (longrope) is still refused, by name.
 * Each qwen3 model (genmodel, F32, 2 layers, n_embd 256, GPT-2 vocabulary) is compared with the
 * oracle's libllama on a 128-token chunk of TinyStories with the tolerance of test_model_arch
 * (F32 KV cache: relative RMS < 1e-5, max |difference| < 1e-3), and the scaled model's logits
 * must differ from the unscaled one's (the scaling is applied, not ignored).
 *   - the experts' width of qwen3moe and qwen35moe (test-llama-archs' models rebuilt by
 *     iqf-archmodel from tests/data/archs, found next to IQF_CLI) as libllama reads it
 *     (get_key_or_arr, optional: feed_forward_length / expert_used_count when absent or 0), and
 *     feed_forward_length / expert_feed_forward_length as arrays of one value per layer: each
 *     variant must load and give the unmodified file's logits, which must be libllama's; an
 *     array whose layers differ is refused (the engine has one width).
 * Loader checks run without the oracle; the comparisons need it (skip locally, fail under CI=true).
 * Under the sanitizers the "none" case is left out.
 */
#include "iqforge.h"
#include "genmodel.h"
#include "llama_infer.h"
#include "model/tokenizer.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C = 128 };

typedef struct lcase {
    const char *label, *scaling;
    float factor, attn_factor;
    float want_freq_scale, want_attn;
} lcase;

static const lcase cases[] = {
    { "plain (exp_ff 0)", NULL, 0.0f, 0.0f, 1.0f, 1.0f },
    { "linear x4, attn 0.8", "linear", 4.0f, 0.8f, 0.25f, 0.8f },
    { "none x4 (factor ignored)", "none", 4.0f, 0.0f, 1.0f, 1.0f },
    { "yarn x4, attn 0.8", "yarn", 4.0f, 0.8f, 0.25f, -1.0f }, /* want_attn < 0: YaRN's, computed */
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static bool ours_logits(const iqf_model *m, const int32_t *t, int n, float *out) {
    char err[512];
    iqf_context *c = NULL;
    if (iqf_context_new(m, C, 2, &c, err, sizeof err)) return false;
    bool ok = iqf_decode(c, t, n, 0, 0, out, err, sizeof err) == IQF_OK;
    iqf_context_free(c);
    return ok;
}

static bool write_model(const char *path, const char *scaling, float factor, float attn, char *err, size_t errlen) {
    iqf_genmodel_opts o = iqf_genmodel_default_opts();
    o.arch = "qwen3";
    o.scale = 16;
    o.n_layer = 2;
    o.type = IQF_TYPE_F32;
    o.tied = true;
    o.seed = 7;
    o.vocab = src_path("tests/data/vocab/ggml-vocab-gpt-2.gguf");
    o.rope_scaling = scaling;
    o.rope_scaling_factor = factor;
    o.rope_attn_factor = attn;
    o.dense_exp_ff_zero = true;
    return iqf_genmodel_write(&o, path, NULL, NULL, err, errlen) == IQF_OK;
}

/* dst = src with key `drop` removed (NULL: none) and key `set` (NULL: none) set to u32 v, or to a
 * u32 array of n values a (n > 0). */
static bool rewrite(const char *src, const char *dst, const char *drop, const char *set, uint32_t v,
                    const uint32_t *a, int n) {
    char err[512];
    iqf_gguf *g = iqf_gguf_open(src, err, sizeof err);
    iqf_gguf_writer *w = g ? iqf_gguf_writer_open(dst, err, sizeof err) : NULL;
    bool ok = w != NULL;
    for (int64_t i = 0; ok && i < iqf_gguf_n_kv(g); i++) {
        const char *k = iqf_gguf_kv_key(g, i);
        if ((drop && !strcmp(k, drop)) || (set && !strcmp(k, set))) continue;
        ok = iqf_gguf_writer_copy_kv(w, g, i) == IQF_OK;
    }
    if (ok && set)
        ok = (n > 0 ? iqf_gguf_writer_set_arr(w, set, IQF_GGUF_U32, a, (uint64_t)n) : iqf_gguf_writer_set_u32(w, set, v)) == IQF_OK;
    for (int64_t i = 0; ok && i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        ok = iqf_gguf_writer_add_tensor(w, t->name, t->n_dims, t->ne, t->type) == IQF_OK;
    }
    ok = ok && iqf_gguf_writer_write_header(w) == IQF_OK;
    for (int64_t i = 0; ok && i < iqf_gguf_n_tensors(g); i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        ok = iqf_gguf_writer_write_data(w, t->data, t->nbytes) == IQF_OK;
    }
    if (ok) ok = iqf_gguf_writer_finish(w, err, sizeof err) == IQF_OK;
    else iqf_gguf_writer_abort(w);
    if (!ok) fprintf(stderr, "rewrite %s: %s\n", src, err);
    iqf_gguf_close(g);
    return ok;
}

/* The experts' width keys of qwen3moe and qwen35moe in the forms libllama accepts. */
static void expert_width_keys(bool have) {
    char archmodel[4200], skel[4200], cmd[9000], base[128], var[128], tmp[128], err[1024];
    tu_tool_path(archmodel, sizeof archmodel, "iqf-archmodel");
    static const struct { const char *arch, *skel; long long size; } models[] = {
        { "qwen3moe", "qwen3moe-moe", 7119776 }, { "qwen35moe", "qwen35moe-moe", 8840768 },
    };
    for (int mi = 0; mi < 2; mi++) {
        const char *A = models[mi].arch;
        snprintf(skel, sizeof skel, "%s", src_path("tests/data/archs/x.skel"));
        char *sl = strrchr(skel, '/');
        snprintf(sl + 1, sizeof skel - (size_t)(sl + 1 - skel), "%s.skel", models[mi].skel);
        snprintf(base, sizeof base, "/tmp/iqf_test_loader_%d_%s.gguf", (int)getpid(), A);
        snprintf(var, sizeof var, "/tmp/iqf_test_loader_%d_%s_v.gguf", (int)getpid(), A);
        snprintf(tmp, sizeof tmp, "/tmp/iqf_test_loader_%d_%s_t.gguf", (int)getpid(), A);
        snprintf(cmd, sizeof cmd, "'%s' '%s' %lld '%s' 42", archmodel, skel, models[mi].size, base);
        if (system(cmd) != 0) {
            CHECK(0, "%s: iqf-archmodel", A);
            continue;
        }
        enum { T = 64 };
        iqf_model *m = NULL;
        CHECK(iqf_model_load(base, NULL, &m, err, sizeof err) == IQF_OK, "%s: %s", A, err);
        if (!m) continue;
        const int V = iqf_model_get_info(m)->n_vocab, F = iqf_model_get_info(m)->n_ff_exp;
        CHECK(F == 384 && iqf_model_get_info(m)->n_expert_used == 2, "%s: experts %d wide", A, F);
        int32_t toks[T];
        for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 37 + 11) % V);
        float *ref = malloc(sizeof(float) * T * (size_t)V), *a = malloc(sizeof(float) * T * (size_t)V),
              *b = malloc(sizeof(float) * T * (size_t)V);
        CHECK(ref && a && b && ours_logits(m, toks, T, ref), "%s: decode", A);
        iqf_model_free(m);
        char k_ff[96], k_exp[96];
        snprintf(k_ff, sizeof k_ff, "%s.feed_forward_length", A);
        snprintf(k_exp, sizeof k_exp, "%s.expert_feed_forward_length", A);
        const uint32_t same[2] = { 384, 384 }, differ[2] = { 384, 192 };
        /* label, drop, set, value, array; then a second edit: feed_forward_length = 2 * F */
        const struct { const char *label, *drop, *set; uint32_t v; const uint32_t *arr; bool ff2, accept; } vs[] = {
            { "expert_feed_forward_length absent, feed_forward_length / expert_used_count", k_exp, NULL, 0, NULL, true, true },
            { "expert_feed_forward_length 0", NULL, k_exp, 0, NULL, true, true },
            { "expert_feed_forward_length [384, 384]", NULL, k_exp, 0, same, false, true },
            { "feed_forward_length [384, 384]", NULL, k_ff, 0, same, false, true },
            { "expert_feed_forward_length [384, 192]", NULL, k_exp, 0, differ, false, false },
        };
        for (size_t vi = 0; vi < sizeof vs / sizeof vs[0]; vi++) {
            const uint32_t ff2 = 2 * 384;
            bool ok = vs[vi].ff2 ? rewrite(base, tmp, NULL, k_ff, ff2, NULL, 0) &&
                                       rewrite(tmp, var, vs[vi].drop, vs[vi].set, vs[vi].v, vs[vi].arr, vs[vi].arr ? 2 : 0)
                                 : rewrite(base, var, vs[vi].drop, vs[vi].set, vs[vi].v, vs[vi].arr, vs[vi].arr ? 2 : 0);
            CHECK(ok, "%s %s: rewrite", A, vs[vi].label);
            m = NULL;
            const iqf_status st = ok ? iqf_model_load(var, NULL, &m, err, sizeof err) : IQF_E_IO;
            if (!vs[vi].accept) {
                CHECK(st != IQF_OK && strstr(err, "expert_feed_forward_length"), "%s %s: want a refusal naming the key, got '%s'", A,
                      vs[vi].label, st ? err : "(loaded)");
                printf("%-9s %-72s refused: %s\n", A, vs[vi].label, st ? err : "");
                iqf_model_free(m);
                continue;
            }
            CHECK(st == IQF_OK, "%s %s: %s", A, vs[vi].label, err);
            if (!m) continue;
            CHECK(iqf_model_get_info(m)->n_ff_exp == F, "%s %s: experts %d wide", A, vs[vi].label, iqf_model_get_info(m)->n_ff_exp);
            const bool dec = ours_logits(m, toks, T, a);
            CHECK(dec && !memcmp(a, ref, sizeof(float) * T * (size_t)V), "%s %s: logits differ from the unmodified file's", A,
                  vs[vi].label);
            double rel = -1;
            li_run r;
            if (have && dec && li_open(&r, var, T, 2, true)) {
                if (li_decode(&r, toks, T, 0, 0, b)) {
                    double num = 0, den = 0;
                    for (size_t i = 0; i < (size_t)T * V; i++) {
                        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
                        den += (double)b[i] * b[i];
                    }
                    rel = den > 0 ? sqrt(num / den) : 1;
                }
                li_close(&r);
                CHECK(rel >= 0 && rel < 1e-5, "%s %s: logits vs libllama rel %g", A, vs[vi].label, rel);
            } else {
                CHECK(!have, "%s %s: libllama does not load it", A, vs[vi].label);
            }
            /* quantize's schema check takes it too */
            char qout[160];
            snprintf(qout, sizeof qout, "%s.q8.gguf", var);
            iqf_model_quantize_params qp = iqf_model_quantize_default_params();
            qp.ftype = iqf_ftype_from_name("Q8_0");
            qp.quiet = true;
            CHECK(iqf_model_quantize(var, qout, &qp, NULL, NULL, err, sizeof err) == IQF_OK, "%s %s: quantize: %s", A,
                  vs[vi].label, err);
            remove(qout);
            printf("%-9s %-72s loads, logits = the unmodified file's; vs libllama rel RMS %.2g; quantizes\n", A, vs[vi].label, rel);
            iqf_model_free(m);
        }
        free(ref);
        free(a);
        free(b);
        remove(base);
        remove(var);
        remove(tmp);
    }
}

int main(void) {
    size_t len = 0;
    char *text = read_file(src_path("tests/data/text/tinystories-valid-excerpt.txt"), &len);
    CHECK(text != NULL, "text");
    if (!text) return test_finish("test_model_loader");
    const bool have = li_load() != NULL;
    if (!have && tu_ci()) CHECK(0, "oracle libllama not available under CI=true");
    char path[128], err[1024];
    snprintf(path, sizeof path, "/tmp/iqf_test_loader_%d.gguf", (int)getpid());

    /* A scaling type the engine does not implement is refused by name. */
    CHECK(write_model(path, "longrope", 4.0f, 0.0f, err, sizeof err), "genmodel: %s", err);
    iqf_model *m = NULL;
    CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_E_FORMAT && strstr(err, "unsupported RoPE scaling 'longrope'"),
          "longrope: want a refusal, got '%s'", m ? "(loaded)" : err);
    iqf_model_free(m);

    /* gemma4 with experts (26B-A4B) needs expert_feed_forward_length: refused in one line naming it. */
    iqf_gguf_writer *gw = iqf_gguf_writer_open(path, err, sizeof err);
    CHECK(gw && !iqf_gguf_writer_set_str(gw, "general.architecture", "gemma4") &&
              !iqf_gguf_writer_set_u32(gw, "gemma4.embedding_length", 64) && !iqf_gguf_writer_set_u32(gw, "gemma4.block_count", 2) &&
              !iqf_gguf_writer_set_u32(gw, "gemma4.expert_count", 4) && !iqf_gguf_writer_set_u32(gw, "gemma4.expert_used_count", 2) &&
              !iqf_gguf_writer_set_u32(gw, "gemma4.attention.head_count", 2) && !iqf_gguf_writer_write_header(gw) &&
              !iqf_gguf_writer_finish(gw, err, sizeof err),
          "gemma4 header: %s", err);
    m = NULL;
    const iqf_status gst = iqf_model_load(path, NULL, &m, err, sizeof err);
    CHECK(gst == IQF_E_FORMAT && strstr(err, "missing key gemma4.expert_feed_forward_length") && !strchr(err, '\n'),
          "gemma4 MoE: want a one-line refusal, got %d '%s'", (int)gst, m ? "(loaded)" : err);
    iqf_model_free(m);

    float *ref = NULL; /* the first case's logits (no scaling) */
    /* under the sanitizers (slow): the unscaled and the linear case only */
    const int n_cases = getenv("IQF_SANITIZED") ? 2 : N_CASES;
    for (int k = 0; k < n_cases; k++) {
        const lcase *lc = &cases[k];
        CHECK(write_model(path, lc->scaling, lc->factor, lc->attn_factor, err, sizeof err), "genmodel: %s", err);
        m = NULL;
        CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_OK, "%s: load: %s", lc->label, err);
        if (!m) continue;
        const iqf_model_info *h = iqf_model_get_info(m);
        /* llama_context: get_mscale(4, 1) * 1 / (1 + 0.1 ln 4), times rope.scaling.attn_factor */
        const float want_attn = lc->want_attn >= 0 ? lc->want_attn
                                                   : (0.1f * logf(4.0f) + 1.0f) * (1.0f / (1.0f + 0.1f * logf(4.0f))) * lc->attn_factor;
        CHECK(h->n_expert == 0 && h->rope_freq_scale == lc->want_freq_scale && h->rope_attn_factor == want_attn,
              "%s: freq_scale %g attn_factor %g", lc->label, (double)h->rope_freq_scale, (double)h->rope_attn_factor);
        const int V = h->n_vocab;
        iqf_vocab *voc = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
        int32_t toks[2048];
        int n = voc ? iqf_tokenize(voc, text, len < 4000 ? len : 4000, false, toks, 2048) : 0;
        iqf_vocab_free(voc);
        CHECK(n >= C, "%s: %d tokens", lc->label, n);
        float *a = malloc(sizeof(float) * C * (size_t)V), *b = malloc(sizeof(float) * C * (size_t)V);
        if (n >= C && a && b && ours_logits(m, toks, C, a)) {
            if (!ref) {
                ref = malloc(sizeof(float) * C * (size_t)V);
                if (ref) memcpy(ref, a, sizeof(float) * C * (size_t)V);
            } else if (lc->want_freq_scale != 1.0f) {
                CHECK(memcmp(ref, a, sizeof(float) * C * (size_t)V) != 0, "%s: scaling changed nothing", lc->label);
            } else {
                CHECK(!memcmp(ref, a, sizeof(float) * C * (size_t)V), "%s: differs from the unscaled model", lc->label);
            }
            li_run r;
            if (have && li_open(&r, path, C, 2, true)) {
                li_clear(&r);
                bool ok = li_decode(&r, toks, C, 0, 0, b);
                CHECK(ok, "%s: llama_decode", lc->label);
                double num = 0, den = 0, mx = 0;
                for (size_t i = 0; ok && i < (size_t)C * V; i++) {
                    const double d = (double)a[i] - b[i];
                    num += d * d;
                    den += (double)b[i] * b[i];
                    mx = fmax(mx, fabs(d));
                }
                const double rel = den > 0 ? sqrt(num / den) : 1;
                printf("qwen3 %-26s freq_scale %.4g attn_factor %.3g: logits vs libllama rel RMS %.2g, max |d| %.2g\n",
                       lc->label, (double)h->rope_freq_scale, (double)h->rope_attn_factor, rel, mx);
                CHECK(ok && rel < 1e-5 && mx < 1e-3, "%s: logits differ from libllama's (rel %g, max %g)", lc->label, rel, mx);
                li_close(&r);
            } else {
                CHECK(!have, "%s: libllama does not load the model", lc->label);
            }
        } else {
            CHECK(0, "%s: decode", lc->label);
        }
        free(a);
        free(b);
        iqf_model_free(m);
    }
    free(ref);
    remove(path);
    free(text);
    expert_width_keys(have);
    int rc = test_finish("test_model_loader");
    if (!have && !tu_ci() && rc == 0) return 77;
    return rc;
}
