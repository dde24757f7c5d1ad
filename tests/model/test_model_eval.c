/*
 * test_model_eval.c - perplexity, KL-divergence and imatrix collection on stories260K.
 *  - PPL on tests/data/text/tinystories-valid-excerpt.txt, -c 256, all chunks: llama-perplexity
 *    gives 6.2132 +/- 0.15668 (shared/REFERENCE.md); we must be within 0.05% (error bar 1%).
 *  - KL-divergence of the model against its own saved log-probabilities: 0, same top 100%.
 *  - imatrix statistics: the three attention projections of a layer see the same input, counts
 *    are chunks*n_ctx, and blk.0's input (RMSNorm of the embeddings) recomputed here matches.
 *  - CI-only (reads ../shared/data/groups_merged.txt): the whole imatrix against llama-imatrix's
 *    tests/data/stories260K/imatrix-groups_merged-c256.gguf (E[x^2] within 0.1%).
 */
#include "iqforge.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "stats/imatrix.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "tests/data/stories260K/stories260K-f32.gguf"

static int32_t *tokenize_file(const iqf_model *m, const char *path, int *n) {
    size_t len;
    char *text = read_file(path, &len);
    if (!text) return NULL;
    char err[256];
    iqf_vocab *v = iqf_vocab_load(iqf_model_gguf(m), err, sizeof err);
    int32_t *t = malloc(sizeof(int32_t) * (len + 4));
    *n = v && t ? iqf_tokenize(v, text, len, true, t, (int32_t)len + 4) : -1;
    iqf_vocab_free(v);
    free(text);
    return t;
}

static void check_against_reference(const iqf_imatrix_data *d, const char *ref_path) {
    iqf_imatrix ref;
    char err[512];
    CHECK(iqf_imatrix_load(ref_path, &ref, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(ref.n_entries == d->n_entries, "entries %d vs %d", ref.n_entries, d->n_entries);
    double worst = 0;
    for (int i = 0; i < d->n_entries; i++) {
        const iqf_imatrix_entry *e = iqf_imatrix_find(&ref, d->names[i]);
        CHECK(e && e->n == d->ncols[i], "entry %s", d->names[i]);
        if (!e || e->n != d->ncols[i]) continue;
        for (int64_t j = 0; j < e->n; j++) {
            double ours = d->sum2[i][j] / (double)d->counts[i];
            double rel = fabs(ours - e->values[j]) / fmax(1e-12, fabs(e->values[j]));
            if (rel > worst) worst = rel;
        }
    }
    printf("imatrix vs llama-imatrix: worst relative difference %.3g\n", worst);
    CHECK(worst < 1e-3, "imatrix differs from llama-imatrix's by %g", worst);
    iqf_imatrix_free(&ref);
}

int main(void) {
    char err[1024];
    iqf_model *m = NULL;
    CHECK(iqf_model_load(src_path(MODEL), NULL, &m, err, sizeof err) == IQF_OK, "load: %s", err);
    if (!m) return test_finish("test_model_eval");
    const iqf_model_info *h = iqf_model_get_info(m);
    int n_tok = 0;
    int32_t *toks = tokenize_file(m, src_path("tests/data/text/tinystories-valid-excerpt.txt"), &n_tok);
    CHECK(toks && n_tok > 15000, "tokenize: %d", n_tok);
    iqf_context *c = NULL;
    CHECK(iqf_context_new(m, 256, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
    if (!toks || !c) return test_finish("test_model_eval");

    /* Perplexity */
    iqf_ppl_params pp = { 256, -1, NULL, NULL, NULL };
    iqf_ppl_result r;
    CHECK(iqf_perplexity(c, toks, (size_t)n_tok, &pp, &r, err, sizeof err) == IQF_OK, "%s", err);
    printf("PPL = %.4f +/- %.5f over %d chunks\n", r.ppl, r.ppl_err, r.n_chunks);
    CHECK(r.n_chunks == 60 && r.n_scored == 60 * 127, "chunks %d scored %lld", r.n_chunks, (long long)r.n_scored);
    CHECK(fabs(r.ppl / 6.2132 - 1) < 5e-4, "PPL %.5f vs 6.2132", r.ppl);
    CHECK(fabs(r.ppl_err / 0.15668 - 1) < 1e-2, "PPL error %.5f vs 0.15668", r.ppl_err);
    /* fewer chunks; too few tokens */
    iqf_ppl_params p3 = { 256, 3, NULL, NULL, NULL };
    CHECK(iqf_perplexity(c, toks, (size_t)n_tok, &p3, &r, err, sizeof err) == IQF_OK && r.n_chunks == 3, "3 chunks");
    CHECK(fabs(r.ppl - 5.4086) < 2e-3, "PPL after 3 chunks %.4f (llama-perplexity prints [3]5.4086)", r.ppl);
    CHECK(iqf_perplexity(c, toks, 511, &pp, &r, err, sizeof err) == IQF_E_INVALID_ARG && strstr(err, "at least 512"), "%s", err);

    /* KL-divergence against itself */
    char base[64];
    snprintf(base, sizeof base, "/tmp/iqf_test_kld_%d.bin", (int)getpid());
    iqf_ppl_params pb = { 256, 4, base, NULL, NULL };
    CHECK(iqf_perplexity(c, toks, (size_t)n_tok, &pb, &r, err, sizeof err) == IQF_OK, "%s", err);
    double ppl4 = r.ppl;
    size_t fsz = 0;
    free(read_file(base, &fsz));
    CHECK(fsz == 20 + 4 * 256 * 4 + (size_t)4 * 127 * (512 + 4) * 2, "base file size %zu", fsz);
    iqf_ppl_params pk = { 256, -1, NULL, base, NULL };
    CHECK(iqf_perplexity(c, NULL, 0, &pk, &r, err, sizeof err) == IQF_OK, "%s", err);
    printf("self KLD %.3g same top %.4f PPL %.4f base %.4f\n", r.kld_mean, r.same_top, r.ppl, r.ppl_base);
    CHECK(r.n_chunks == 4 && fabs(r.kld_mean) < 1e-4 && r.kld_max < 1e-3, "KLD %g max %g", r.kld_mean, r.kld_max);
    CHECK(r.same_top == 1.0, "same top %f", r.same_top);
    CHECK(fabs(r.ppl - ppl4) < 1e-9 * ppl4 + 1e-4, "PPL(Q) %f vs %f", r.ppl, ppl4);
    FILE *f = fopen(base, "r+b");
    if (f) { fputc('X', f); fclose(f); }
    CHECK(iqf_perplexity(c, NULL, 0, &pk, &r, err, sizeof err) == IQF_E_FORMAT, "bad magic");
    remove(base);

    /* imatrix statistics */
    iqf_imatrix_data *d = NULL;
    CHECK(iqf_imatrix_collect(c, toks, (size_t)n_tok, 256, 2, NULL, &d, err, sizeof err) == IQF_OK, "%s", err);
    if (d) {
        CHECK(d->n_entries == 35 && d->n_chunks == 2 && d->chunk_size == 256, "entries %d", d->n_entries);
        int iq = -1, ik = -1, iv = -1;
        for (int i = 0; i < d->n_entries; i++) {
            CHECK(d->counts[i] == 512, "count %s %lld", d->names[i], (long long)d->counts[i]);
            if (!strcmp(d->names[i], "blk.0.attn_q.weight")) iq = i;
            if (!strcmp(d->names[i], "blk.0.attn_k.weight")) ik = i;
            if (!strcmp(d->names[i], "blk.0.attn_v.weight")) iv = i;
            if (i) CHECK(strcmp(d->names[i - 1], d->names[i]) < 0, "sorted");
        }
        CHECK(iq >= 0 && ik >= 0 && iv >= 0, "attention entries");
        if (iq >= 0 && ik >= 0 && iv >= 0) {
            CHECK(!memcmp(d->sum2[iq], d->sum2[ik], 64 * sizeof(float)) && !memcmp(d->sum2[iq], d->sum2[iv], 64 * sizeof(float)),
                  "q/k/v inputs differ");
            /* blk.0's input: RMSNorm(embedding) * attn_norm, BOS first in each chunk. */
            double expect[64] = { 0 };
            float row[64];
            for (int ch = 0; ch < 2; ch++)
                for (int t = 0; t < 256; t++) {
                    int tok = t == 0 ? h->bos_id : toks[ch * 256 + t];
                    iqf_weight_row(&m->tok_embd, tok, row);
                    double ss = 0;
                    for (int k = 0; k < 64; k++) ss += (double)(row[k] * row[k]);
                    float sc = 1.0f / sqrtf((float)(ss / 64) + h->rms_eps);
                    for (int k = 0; k < 64; k++) {
                        float y = row[k] * sc * m->layers[0].attn_norm[k];
                        expect[k] += (double)y * y;
                    }
                }
            double worst = 0;
            for (int k = 0; k < 64; k++) worst = fmax(worst, fabs(d->sum2[iq][k] - expect[k]) / expect[k]);
            CHECK(worst < 1e-5, "blk.0 input statistics differ by %g", worst);
        }
        iqf_imatrix_data_free(d);
    }

    /* CI-only: the whole of groups_merged.txt against llama-imatrix's file. */
    const char *sh = shared_dir();
    if (sh && !getenv("IQF_SANITIZED")) {
        char gm[4096];
        snprintf(gm, sizeof gm, "%s/data/groups_merged.txt", sh);
        int ng = 0;
        int32_t *gt = tokenize_file(m, gm, &ng);
        if (gt && ng > 0) {
            d = NULL;
            CHECK(iqf_imatrix_collect(c, gt, (size_t)ng, 256, -1, NULL, &d, err, sizeof err) == IQF_OK, "%s", err);
            if (d) {
                printf("groups_merged: %d chunks, PPL %.4f (llama-imatrix: 163.2211)\n", d->n_chunks, d->ppl);
                CHECK(fabs(d->ppl / 163.2211 - 1) < 5e-4, "imatrix PPL %.4f", d->ppl);
                check_against_reference(d, src_path("tests/data/stories260K/imatrix-groups_merged-c256.gguf"));
                iqf_imatrix_data_free(d);
            }
        } else {
            CHECK(!tu_ci(), "groups_merged.txt unreadable under CI");
        }
        free(gt);
    } else if (tu_ci()) {
        CHECK(sh != NULL, "CI needs ../shared for the imatrix comparison");
    }
    free(toks);
    iqf_context_free(c);
    iqf_model_free(m);
    return test_finish("test_model_eval");
}
