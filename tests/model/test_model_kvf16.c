/*
 * test_model_kvf16.c - the engine's F16 cache (`--kv-type f16`) against stock llama.cpp's own
 * defaults (the oracle's libllama: F16 K/V cache, flash attention auto, which the CPU backend
 * turns on). ggml's CPU flash attention has two roundings (forward.c, ggml_fa_one_row): a tiled
 * path (f32 math on the f16 cache) for batches of >= 64 rows whose head size is a multiple of the
 * f32 vector width, and a one-row path otherwise (Q rounded to f16, V summed in f16). The engine
 * follows the same choice for the CPU it runs on.
 *
 * Cases: kjv-3m (head size 32) in a batch of 256 (tiled) and of 32 (one-row), and stories260K
 * (head size 8: the one-row path on AVX-512, the tiled one on AVX2), F32 weights, logits of one
 * chunk. Measured on AVX-512 (relative RMS to libllama's logits, our F16 cache / our F32 cache):
 * kjv batch 256 1.3e-6 / 5.6e-5, kjv batch 32 1.8e-5 / 1.0e-4, stories 1.9e-4 / 4.1e-4 (part of
 * ggml's one-row rounding for head size 8 is not reproduced yet: with its F16 Q and V
 * accumulation switched off the gap is 3.4e-4..3.8e-4, so both are in and something else is
 * missing). Asserted: kjv within 1e-5 (tiled) and 5e-5 (one-row) and 4x closer than the F32
 * cache; stories 1.5x closer.
 * Needs the oracle (skips locally without it, fails under CI=true).
 */
#include "iqforge.h"
#include "llama_infer.h"
#include "model/tokenizer.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { C = 256 };

/* Our logits of chunk[0..C) decoded in batches of `batch`, cache F16 or F32. */
static bool ours(const iqf_model *m, bool kv_f16, int batch, const int32_t *chunk, int V, float *out) {
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = C;
    p.n_threads = 2;
    p.kv_f16 = kv_f16;
    iqf_context *c = NULL;
    char err[256];
    if (iqf_context_new_ex(m, &p, &c, err, sizeof err)) return false;
    bool ok = true;
    for (int s = 0; ok && s < C; s += batch)
        ok = iqf_decode(c, chunk + s, batch, s, 0, out + (size_t)s * V, err, sizeof err) == IQF_OK;
    iqf_context_free(c);
    return ok;
}

static bool llama(const char *path, int batch, const int32_t *chunk, int V, float *out) {
    li_run r;
    if (!li_open(&r, path, C, 2, false)) return false;
    bool ok = r.n_vocab == V;
    for (int s = 0; ok && s < C; s += batch) ok = li_decode(&r, chunk + s, batch, s, 0, out + (size_t)s * V);
    li_close(&r);
    return ok;
}

static double rel_rms(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

static void one_case(const char *name, const char *model, const char *text_path, int batch, double max_rel,
                     double min_gain) {
    char err[512];
    iqf_model *m = NULL;
    CHECK(iqf_model_load(src_path(model), NULL, &m, err, sizeof err) == IQF_OK, "%s: %s", name, err);
    if (!m) return;
    const int V = iqf_model_get_info(m)->n_vocab;
    iqf_vocab *voc = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    size_t len = 0;
    char *text = read_file(src_path(text_path), &len);
    CHECK(voc && text, "%s: vocab / text", name);
    int32_t *toks = malloc(sizeof(int32_t) * (len + 8));
    const int n = voc && text ? iqf_tokenize(voc, text, len, true, toks, (int32_t)len + 8) : 0;
    CHECK(n >= C, "%s: %d tokens", name, n);
    float *a = malloc(sizeof(float) * C * (size_t)V), *b = malloc(sizeof(float) * C * (size_t)V),
          *l = malloc(sizeof(float) * C * (size_t)V);
    if (n >= C) {
        toks[0] = iqf_vocab_bos(voc);
        const bool ok = ours(m, true, batch, toks, V, a) && ours(m, false, batch, toks, V, b) &&
                        llama(src_path(model), batch, toks, V, l);
        CHECK(ok, "%s: decode", name);
        if (ok) {
            const double r16 = rel_rms(a, l, (size_t)C * V), r32 = rel_rms(b, l, (size_t)C * V);
            printf("%-22s batch %3d: rel. RMS to libllama (F16 cache, flash attention) %.2e with our F16 cache, "
                   "%.2e with F32\n", name, batch, r16, r32);
            CHECK(r16 < max_rel, "%s batch %d: F16 cache %.3g from libllama's logits", name, batch, r16);
            CHECK(r16 * min_gain < r32, "%s batch %d: F16 cache (%.3g) not %.1fx closer than F32 (%.3g)", name, batch,
                  r16, min_gain, r32);
        }
    }
    free(a);
    free(b);
    free(l);
    free(toks);
    free(text);
    iqf_vocab_free(voc);
    iqf_model_free(m);
}

int main(void) {
    if (!li_load()) {
        if (tu_ci()) {
            CHECK(0, "oracle libllama not available under CI=true");
            return test_finish("test_model_kvf16");
        }
        printf("oracle libllama not available: skip\n");
        return 77;
    }
    const char *kjv = "tests/data/kjv-3m/kjv-3m-f32.gguf", *kjv_text = "tests/data/kjv-3m/heldout-70k.txt";
    one_case("kjv-3m", kjv, kjv_text, C, 1e-5, 4);
    one_case("kjv-3m", kjv, kjv_text, 32, 5e-5, 4);
    one_case("stories260K", "tests/data/stories260K/stories260K-f32.gguf",
             "tests/data/text/tinystories-valid-excerpt.txt", C, 1, 1.5);
    return test_finish("test_model_kvf16");
}
