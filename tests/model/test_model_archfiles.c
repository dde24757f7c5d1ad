/*
 * test_model_archfiles.c - the engine on the models llama.cpp's tests/test-llama-archs writes,
 * against the oracle's libllama: what a new user tries first, with every optional tensor the
 * writer puts in (per-tensor .scale multipliers on every projection, q/k/v/output/FFN biases,
 * Llama 3's rope_freqs.weight, output.bias, per-expert scales, gemma3's sliding-window pattern).
 *
 * Each model is rebuilt from its skeleton in tests/data/archs (the metadata and tensor infos of
 * `test-llama-archs -s 42 -o`) by iqf-archmodel (weights N(0, 0.1), seed 42), as
 * tests/cli/archs.sh does: 2 layers, n_embd 256, vocabulary 128 ("tok_N" tokens). Over 128
 * pseudo-random token ids:
 *   - logits with an F32 cache against libllama's F32 cache without flash attention: relative
 *     RMS difference < 1e-5 and max |difference| < 1e-3 * max |logit| (float summation order);
 *   - logits with our kv_f16 against libllama's defaults (F16 cache, flash attention auto):
 *     relative RMS < 1e-4 (F16 rounding of K/V);
 *   - greedy continuation of 16 tokens, one token per decode call: identical;
 *   - our logits of 24 tokens fed one per call (and again after a restart at position 0) against
 *     those of the one call: relative RMS < 1e-5 (K/V cache, or qwen35's conv and SSM states,
 *     carried over calls); a step back is refused exactly for the recurrent models.
 * Needs the oracle (skips without it, fails under CI=true) and iqf-archmodel next to IQF_CLI.
 * IQF_ARCH_MODELS=DIR runs on test-llama-archs' own files in DIR instead (~/.cache/iqforge/archs/
 * models-s42); an argument runs the cases whose name contains it.
 */
#include "iqforge.h"
#include "llama_infer.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct file_case {
    const char *name;
    long long size;
    double tol; /* logits' relative RMS bound (0: 1e-5) */
} file_case;

static const file_case cases[] = {
    { "llama-dense", 4764384, 0 },  { "qwen2-dense", 4753984, 0 },  { "qwen3-dense", 3966272, 0 },
    { "llama-moe", 7119552, 0 },    { "qwen3moe-moe", 7119776, 0 }, { "gemma3-dense", 4760256, 0 },
    { "qwen35-dense", 5294240, 0 }, { "qwen35moe-moe", 8840768, 0 },
    { "gpt-oss-moe", 7136736, 0 },
    { "deepseek2-moe", 4426528, 0 }, { "gemma4-dense", 5363072, 0 },
    /* three GeGLUs per layer (dense FFN, experts, per-layer embedding gate) over 6 layers: ggml's
     * f16 gelu table turns float-order ulps into f16 steps (our own one-token-per-call logits
     * are 1.1e-5 from one call's) */
    { "gemma4-moe", 8924256, 5e-5 },
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

enum { C = 128, PROMPT = 8, GEN = 16 };

static bool ours(const iqf_model *m, bool kv_f16, const int32_t *t, int n, float *out) {
    char err[512];
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = C;
    p.n_threads = 2;
    p.kv_f16 = kv_f16;
    iqf_context *c = NULL;
    if (iqf_context_new_ex(m, &p, &c, err, sizeof err)) return false;
    bool ok = iqf_decode(c, t, n, 0, 0, out, err, sizeof err) == IQF_OK;
    if (!ok) fprintf(stderr, "decode: %s\n", err);
    iqf_context_free(c);
    return ok;
}

static void diff(const float *a, const float *b, size_t n, double *rel, double *mx, double *mag) {
    double num = 0, den = 0;
    *mx = *mag = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
        *mx = fmax(*mx, fabs(d));
        *mag = fmax(*mag, fabs(b[i]));
    }
    *rel = den > 0 ? sqrt(num / den) : INFINITY;
}

/* Our logits for toks[0..n) fed one token per call, twice over (the second pass restarts at
 * position 0 without a reset), against the rows of one call's logits `full`: the relative RMS
 * difference; *rewind_refused says whether a step back (position 3 after n) was refused. */
static double stepwise(const iqf_model *m, const int32_t *toks, int n, const float *full, int V, bool *rewind_refused) {
    char err[512];
    iqf_context *c = NULL;
    float *one = malloc(sizeof(float) * (size_t)V);
    double num = 0, den = 0;
    bool ok = one && iqf_context_new(m, C, 2, &c, err, sizeof err) == IQF_OK;
    for (int pass = 0; ok && pass < 2; pass++)
        for (int i = 0; ok && i < n; i++) {
            ok = iqf_decode(c, &toks[i], 1, i, 0, one, err, sizeof err) == IQF_OK;
            for (int k = 0; ok && k < V; k++) {
                const double d = (double)one[k] - full[(size_t)i * V + k];
                num += d * d;
                den += (double)full[(size_t)i * V + k] * full[(size_t)i * V + k];
            }
        }
    *rewind_refused = ok && iqf_decode(c, toks, 1, 3, 0, one, err, sizeof err) != IQF_OK;
    iqf_context_free(c);
    free(one);
    return ok && den > 0 ? sqrt(num / den) : INFINITY;
}

static int argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void run_case(const file_case *fc, const char *archmodel) {
    char skel[4200], path[128], cmd[8600], err[1024];
    snprintf(skel, sizeof skel, "%s", src_path("tests/data/archs/x.skel"));
    char *slash = strrchr(skel, '/');
    snprintf(slash + 1, sizeof skel - (size_t)(slash + 1 - skel), "%s.skel", fc->name);
    snprintf(path, sizeof path, "/tmp/iqf_test_archfiles_%d_%s.gguf", (int)getpid(), fc->name);
    const char *dir = getenv("IQF_ARCH_MODELS"); /* test-llama-archs' own files, if given */
    if (dir) {
        snprintf(path, sizeof path, "%.80s/%s.gguf", dir, fc->name);
    } else {
        snprintf(cmd, sizeof cmd, "'%s' '%s' %lld '%s' 42", archmodel, skel, fc->size, path);
        CHECK(system(cmd) == 0, "%s: iqf-archmodel", fc->name);
    }
    iqf_model *m = NULL;
    CHECK(iqf_model_load(path, NULL, &m, err, sizeof err) == IQF_OK, "%s: load: %s", fc->name, err);
    li_run r;
    if (!m || !li_open(&r, path, C, 2, true)) {
        CHECK(m == NULL, "%s: libllama does not load it", fc->name);
        iqf_model_free(m);
        if (!dir) remove(path);
        return;
    }
    const int V = iqf_model_get_info(m)->n_vocab;
    CHECK(r.n_vocab == V, "%s: vocabulary %d vs %d", fc->name, r.n_vocab, V);
    int32_t toks[C];
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < C; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((s >> 33) % (uint64_t)V);
    }
    float *a = malloc(sizeof(float) * C * (size_t)V), *b = malloc(sizeof(float) * C * (size_t)V);
    double rel = INFINITY, mx = 0, mag = 0, rel16 = INFINITY, mx16, mag16;
    bool ok = a && b && ours(m, false, toks, C, a) && li_decode(&r, toks, C, 0, 0, b);
    if (ok) diff(a, b, (size_t)C * V, &rel, &mx, &mag);
    /* a recurrent model (qwen35*: conv and SSM states) cannot step back; the others rewind their cache */
    const bool recurrent = !strncmp(iqf_model_get_info(m)->arch, "qwen35", 6);
    bool refused = false;
    const double srel = ok ? stepwise(m, toks, PROMPT + GEN, a, V, &refused) : INFINITY;
    const double tol = fc->tol > 0 ? fc->tol : 1e-5;
    CHECK(srel < tol, "%s: logits one token per call differ from one call's (rel %g)", fc->name, srel);
    CHECK(refused == recurrent, "%s: a step back %s", fc->name, refused ? "was refused" : "was accepted");
    /* greedy, one token per call */
    int same = 0;
    iqf_context *c = NULL;
    int32_t go[PROMPT + GEN], gl[PROMPT + GEN];
    memcpy(go, toks, sizeof(int32_t) * PROMPT);
    memcpy(gl, toks, sizeof(int32_t) * PROMPT);
    li_clear(&r);
    bool gok = ok && iqf_context_new(m, C, 2, &c, err, sizeof err) == IQF_OK &&
               iqf_decode(c, go, PROMPT, 0, PROMPT - 1, a, err, sizeof err) == IQF_OK &&
               li_decode(&r, gl, PROMPT, 0, PROMPT - 1, b);
    for (int i = PROMPT; gok && i < PROMPT + GEN; i++) {
        go[i] = argmax(a, V);
        gl[i] = argmax(b, V);
        same += go[i] == gl[i];
        gok = iqf_decode(c, &go[i], 1, i, 0, a, err, sizeof err) == IQF_OK && li_decode(&r, &gl[i], 1, i, 0, b);
    }
    iqf_context_free(c);
    li_close(&r);
    /* llama.cpp's defaults: F16 cache, flash attention */
    bool ok16 = ok && li_open(&r, path, C, 2, false) && ours(m, true, toks, C, a) && li_decode(&r, toks, C, 0, 0, b);
    if (ok16) diff(a, b, (size_t)C * V, &rel16, &mx16, &mag16);
    li_close(&r);
    printf("%-13s logits rel RMS %.2g, max |d| %.2g (max |logit| %.2f); F16 cache + FA: rel RMS %.2g; greedy %d/%d identical; one token per call: rel %.2g\n",
           fc->name, rel, mx, mag, rel16, same, GEN, srel);
    CHECK(ok && rel < tol && mx < 1e-3 * mag && mag > 0.1, "%s: logits differ from libllama's (rel %g, max %g)", fc->name,
          rel, mx);
    CHECK(ok16 && rel16 < 1e-4, "%s: F16-cache logits differ from libllama's (rel %g)", fc->name, rel16);
    CHECK(gok && same == GEN && !memcmp(go, gl, sizeof go), "%s: greedy differs (%d/%d)", fc->name, same, GEN);
    free(a);
    free(b);
    iqf_model_free(m);
    if (!dir) remove(path);
}

int main(int argc, char **argv) {
    char archmodel[4200];
    tu_tool_path(archmodel, sizeof archmodel, "iqf-archmodel");
    const bool have = li_load() != NULL;
    if (!have) {
        if (tu_ci()) {
            CHECK(0, "oracle libllama not available under CI=true");
            return test_finish("test_model_archfiles");
        }
        printf("oracle libllama not available: skip\n");
        return 77;
    }
    for (int i = 0; i < N_CASES; i++)
        if (argc < 2 || strstr(cases[i].name, argv[1])) run_case(&cases[i], archmodel);
    return test_finish("test_model_archfiles");
}
