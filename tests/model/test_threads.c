/*
 * test_threads.c - the engine's results do not depend on the thread count: on stories260K
 * (tests/data), the logits of a 96-token sequence (all positions output) with contexts of 1, 2,
 * 3 and 5 threads are bitwise identical, and so are perplexity over 3 chunks of 64 tokens
 * (ppl, its error and the per-chunk figures through the KL-divergence base file, byte for byte)
 * and the importance-matrix sums. Also with simulated quantization (iq3_xxs, quantized with the
 * model's thread count and decoded in memory at load).
 */
#include "testutil.h"

#include "iqforge.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { NTOK = 96, NV_MAX = 100000 };

static float *logits_with(iqf_model *m, int threads, const int32_t *toks, int n_vocab) {
    char err[256];
    iqf_context *c = NULL;
    if (iqf_context_new(m, 128, threads, &c, err, sizeof err)) {
        CHECK(0, "context (%d threads): %s", threads, err);
        return NULL;
    }
    float *l = malloc(sizeof(float) * NTOK * (size_t)n_vocab);
    if (l && iqf_decode(c, toks, NTOK, 0, 0, l, err, sizeof err)) {
        CHECK(0, "decode (%d threads): %s", threads, err);
        free(l);
        l = NULL;
    }
    iqf_context_free(c);
    return l;
}

static void one_model(const char *path, int simulate, const char *label) {
    char err[512];
    iqf_model_params mp = iqf_model_default_params();
    mp.simulate_type = simulate;
    mp.n_threads = 2;
    iqf_model *m = NULL;
    if (iqf_model_load(path, &mp, &m, err, sizeof err)) {
        CHECK(0, "%s: load: %s", label, err);
        return;
    }
    const int nv = iqf_model_get_info(m)->n_vocab;
    int32_t toks[64 * 3 + NTOK];
    tu_rng r = { 7 };
    for (size_t i = 0; i < sizeof toks / sizeof toks[0]; i++) toks[i] = (int32_t)(tu_next(&r) % (uint64_t)nv);
    const int threads[] = { 1, 2, 3, 5 };
    float *ref = logits_with(m, 1, toks, nv);
    double amax = 0;
    for (int i = 0; ref && i < NTOK * nv; i++) amax = fmax(amax, fabs(ref[i]));
    CHECK(ref && amax > 0.1 && isfinite(amax), "%s: logits are not trivial (max |logit| %g)", label, amax);
    for (size_t k = 1; k < sizeof threads / sizeof threads[0]; k++) {
        float *l = logits_with(m, threads[k], toks, nv);
        CHECK(ref && l && !memcmp(ref, l, sizeof(float) * NTOK * (size_t)nv), "%s: logits with %d threads differ from 1 thread",
              label, threads[k]);
        free(l);
    }
    free(ref);

    /* Perplexity and the KL-divergence base file. */
    double ppl[4] = { 0 }, err_[4] = { 0 };
    void *kb[4] = { NULL };
    size_t kn[4] = { 0 };
    for (size_t k = 0; k < 4; k++) {
        iqf_context *c = NULL;
        if (iqf_context_new(m, 64, threads[k], &c, err, sizeof err)) {
            CHECK(0, "%s: context: %s", label, err);
            continue;
        }
        char kpath[64];
        snprintf(kpath, sizeof kpath, "/tmp/iqf_tthreads_%d_%d.kld", (int)getpid(), threads[k]);
        iqf_ppl_params pp = { 64, 3, kpath, NULL, NULL };
        iqf_ppl_result res;
        if (iqf_perplexity(c, toks, 64 * 3, &pp, &res, err, sizeof err) == IQF_OK) {
            ppl[k] = res.ppl;
            err_[k] = res.ppl_err;
            kb[k] = read_file(kpath, &kn[k]);
        } else {
            CHECK(0, "%s: perplexity (%d threads): %s", label, threads[k], err);
        }
        unlink(kpath);
        iqf_context_free(c);
    }
    CHECK(ppl[0] > 1 && isfinite(ppl[0]), "%s: perplexity %g", label, ppl[0]);
    for (size_t k = 1; k < 4; k++) {
        CHECK(ppl[k] == ppl[0] && err_[k] == err_[0], "%s: perplexity with %d threads %.17g +/- %.17g, 1 thread %.17g +/- %.17g",
              label, threads[k], ppl[k], err_[k], ppl[0], err_[0]);
        CHECK(kb[0] && kb[k] && kn[k] == kn[0] && !memcmp(kb[0], kb[k], kn[0]), "%s: KLD base file with %d threads differs",
              label, threads[k]);
    }
    for (size_t k = 0; k < 4; k++) free(kb[k]);

    /* Importance matrix sums. */
    iqf_imatrix_data *d[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
        iqf_context *c = NULL;
        if (iqf_context_new(m, 64, k ? 3 : 1, &c, err, sizeof err) == IQF_OK) {
            if (iqf_imatrix_collect(c, toks, 64 * 3, 64, 3, NULL, &d[k], err, sizeof err))
                CHECK(0, "%s: imatrix: %s", label, err);
            iqf_context_free(c);
        }
    }
    if (d[0] && d[1]) {
        bool same = d[0]->n_entries == d[1]->n_entries && d[0]->n_entries > 0;
        for (int i = 0; same && i < d[0]->n_entries; i++)
            same = d[0]->ncols[i] == d[1]->ncols[i] && d[0]->counts[i] == d[1]->counts[i] &&
                   !memcmp(d[0]->sum2[i], d[1]->sum2[i], sizeof(float) * (size_t)d[0]->ncols[i]);
        CHECK(same, "%s: imatrix sums with 3 threads differ from 1 thread", label);
    } else {
        CHECK(0, "%s: imatrix not collected", label);
    }
    iqf_imatrix_data_free(d[0]);
    iqf_imatrix_data_free(d[1]);
    iqf_model_free(m);
}

int main(void) {
    const char *model = src_path("tests/data/stories260K/stories260K-f32.gguf");
    char path[1024];
    snprintf(path, sizeof path, "%s", model);
    one_model(path, -1, "f32");
    one_model(path, IQF_TYPE_IQ3_XXS, "simulated iq3_xxs");
    return test_finish("test_threads");
}
