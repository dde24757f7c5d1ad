/*
 * test_model_sim.c - simulated quantization (iqf_model_params.simulate_type) against the ladder
 * in shared/REFERENCE.md, measured with llama.cpp on stories260K: every blk.* matrix quantized
 * in 256-wide flattened rows with the tiled imatrix and decoded back, then perplexity on
 * tests/data/text/tinystories-valid-excerpt.txt (-c 256, all chunks) and KL-divergence against
 * the float32 model. Tolerances: PPL 0.05%, mean KLD 1%, same-top rate 0.25 percentage points.
 * Under IQF_SANITIZED=1 one row runs on 8 chunks, checked loosely (the references need all 60).
 */
#include "iqforge.h"
#include "model/tokenizer.h"
#include "stats/imatrix.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "tests/data/stories260K/stories260K-f32.gguf"

typedef struct rung {
    const char *type;
    bool imatrix;
    double ppl, kld, same_top;
} rung;

static const rung ladder[] = {
    { "iq3_xxs", true, 12.0264, 0.760379, 53.898 },
    { "q4_K", true, 6.6136, 0.088723, 82.402 },
    { "iq2_xxs", true, 133.1203, 3.208787, 14.803 },
    { "iq2_xs", true, 51.9476, 2.262133, 22.585 },
    { "iq2_s", true, 25.2247, 1.547028, 34.895 },
    { "iq3_s", true, 8.7889, 0.428688, 64.646 },
    { "q3_K", true, 9.3175, 0.420321, 65.682 },
    { "q5_K", true, 6.3671, 0.022317, 91.220 },
    { "q6_K", true, 6.2597, 0.005017, 96.286 },
    { "q8_0", true, 6.2131, 0.000488, 98.871 },
    { "iq3_xxs", false, 16.9738, 1.153366, 41.063 },
    { "iq3_s", false, 11.4846, 0.692287, 57.598 },
    { "q4_K", false, 6.7495, 0.085305, 83.609 },
};

static const float *lookup(void *user, const char *name, int64_t n) {
    const iqf_imatrix_entry *e = iqf_imatrix_find(user, name);
    return e && e->n == n ? e->values : NULL;
}

int main(void) {
    char err[1024];
    iqf_model *m = NULL;
    CHECK(iqf_model_load(src_path(MODEL), NULL, &m, err, sizeof err) == IQF_OK, "%s", err);
    iqf_imatrix im;
    CHECK(iqf_imatrix_load(src_path("tests/data/stories260K/imatrix-groups_merged-c256.gguf"), &im, err, sizeof err) == IQF_OK, "%s", err);
    if (!m) return test_finish("test_model_sim");
    size_t len;
    char *text = read_file(src_path("tests/data/text/tinystories-valid-excerpt.txt"), &len);
    iqf_vocab *v = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    int32_t *toks = malloc(sizeof(int32_t) * (len + 4));
    int n = text && v ? iqf_tokenize(v, text, len, true, toks, (int32_t)len + 4) : -1;
    iqf_vocab_free(v);
    free(text);
    CHECK(n > 15000, "tokens %d", n);

    /* Base log-probabilities of the float32 model. */
    char base[64];
    snprintf(base, sizeof base, "/tmp/iqf_test_sim_%d.kld", (int)getpid());
    iqf_context *c = NULL;
    CHECK(iqf_context_new(m, 256, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
    bool quick = getenv("IQF_SANITIZED") != NULL;
    iqf_ppl_params pb = { 256, quick ? 8 : -1, base, NULL, NULL };
    iqf_ppl_result r;
    CHECK(iqf_perplexity(c, toks, (size_t)n, &pb, &r, err, sizeof err) == IQF_OK, "%s", err);
    iqf_context_free(c);
    iqf_model_free(m);

    int n_rungs = quick ? 1 : (int)(sizeof ladder / sizeof ladder[0]);
    for (int i = 0; i < n_rungs; i++) {
        const rung *g = &ladder[i];
        int type = iqf_type_from_name(g->type);
        if (!iqf_can_encode(type)) {
            CHECK(0, "%s cannot be encoded by this build", g->type);
            continue;
        }
        iqf_model_params mp = iqf_model_default_params();
        mp.simulate_type = type;
        mp.n_threads = 2;
        if (g->imatrix) {
            mp.imatrix = lookup;
            mp.imatrix_user = &im;
        }
        m = NULL;
        c = NULL;
        CHECK(iqf_model_load(src_path(MODEL), &mp, &m, err, sizeof err) == IQF_OK, "%s: %s", g->type, err);
        if (!m) continue;
        CHECK(iqf_context_new(m, 256, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
        iqf_ppl_params pk = { 256, -1, NULL, base, NULL };
        if (c && iqf_perplexity(c, NULL, 0, &pk, &r, err, sizeof err) == IQF_OK) {
            printf("| %-8s | %-3s | PPL %9.4f (ref %9.4f) | KLD %.6f (ref %.6f) | same top %.3f%% (ref %.3f%%) |\n",
                   g->type, g->imatrix ? "yes" : "no", r.ppl, g->ppl, r.kld_mean, g->kld, 100 * r.same_top, g->same_top);
            if (quick) {
                CHECK(r.n_chunks == 8 && r.ppl > 6 && r.ppl < 2 * g->ppl && r.kld_mean > 0.5 * g->kld &&
                      r.kld_mean < 2 * g->kld, "%s: PPL %.4f KLD %.4f", g->type, r.ppl, r.kld_mean);
            } else {
                CHECK(fabs(r.ppl / g->ppl - 1) < 5e-4, "%s PPL %.4f vs %.4f", g->type, r.ppl, g->ppl);
                CHECK(fabs(r.kld_mean / g->kld - 1) < 1e-2, "%s KLD %.6f vs %.6f", g->type, r.kld_mean, g->kld);
                CHECK(fabs(100 * r.same_top - g->same_top) < 0.25, "%s same top %.3f vs %.3f", g->type,
                      100 * r.same_top, g->same_top);
            }
        } else {
            CHECK(0, "%s: %s", g->type, err);
        }
        iqf_context_free(c);
        iqf_model_free(m);
    }
    /* A model whose matrices are not whole 256-element rows cannot be simulated: stories260K's
     * are; shape errors are covered by iqf_quantize. Unknown/undecodable types are refused. */
    iqf_model_params bad = iqf_model_default_params();
    bad.simulate_type = IQF_TYPE_I32;
    m = NULL;
    CHECK(iqf_model_load(src_path(MODEL), &bad, &m, err, sizeof err) == IQF_E_UNSUPPORTED && !m, "i32: %s", err);
    /* An encoder error surfaces with the tensor's name: iq2_xxs needs an importance matrix. */
    iqf_model_params ni = iqf_model_default_params();
    ni.simulate_type = IQF_TYPE_IQ2_XXS;
    m = NULL;
    CHECK(iqf_model_load(src_path(MODEL), &ni, &m, err, sizeof err) == IQF_E_NEED_IMATRIX && !m &&
          strstr(err, "iq2_xxs") && strstr(err, ".weight"), "no imatrix: %s", err);
    remove(base);
    free(toks);
    iqf_imatrix_free(&im);
    return test_finish("test_model_sim");
}
