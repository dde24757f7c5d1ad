/*
 * test_model_fleet_imatrix.c - `iqforge imatrix` on the other architectures (qwen2, qwen3,
 * Mixtral-style llama MoE, qwen3moe, gemma3, gpt-oss, deepseek2) against llama-imatrix's files for the same models and text.
 *
 * The fixtures tests/data/fleet-imatrix/ARCH.imatrix.gguf were written by llama-imatrix (llama.cpp
 * of node-llama-cpp 3.22.1's bundle, ggml 0.25.1; tests/data/fleet-imatrix/README.md has the exact
 * commands) on the random-weight models iqf-genmodel writes with the options below, over
 * tests/data/text/tinystories-valid-excerpt.txt, -c 128, CHUNKS chunks, with an F32 KV cache and
 * flash attention off (-ctk f32 -ctv f32 -fa off: the float graph our engine computes; with
 * llama.cpp's default F16 cache and flash attention the attention output differs by ~1e-3 and
 * one token in ~800 per layer is routed to another expert). This test regenerates
 * each model (deterministic for its seed), runs our imatrix collection on the same text and
 * compares with the fixture:
 *   - the same set of entries (every blk.* matrix; no output.weight), the same number of
 *     matrices per entry (n_expert for the 3-D expert tensors, 1 otherwise);
 *   - counts (rows seen, per expert for expert tensors) identical;
 *   - per column and per expert, E[x^2] = in_sum2 / count within 1e-3 relative (the tolerance of
 *     test_model_eval's stories260K comparison with llama-imatrix), i.e. relative to that
 *     column's value, floored at 1e-6 of the entry's largest mean to ignore columns that are
 *     zero in both;
 *   - the chunk count.
 * qwen35 and qwen35moe (no genmodel layout) are llama.cpp's test-llama-archs models rebuilt by
 * iqf-archmodel from their skeletons in tests/data/archs (as test_model_archfiles does; seed 42,
 * vocabulary of 128 "test" tokens: 5-byte chunks hashed to ids, by llama.cpp and by us alike):
 * a Gated-DeltaNet layer (attn_qkv, attn_gate, ssm_alpha, ssm_beta, ssm_out) then a gated
 * full-attention layer; qwen35moe with fused gate_up experts and a shared expert with its gate;
 * gemma4 (gemma4-fixture.sh's skeleton): shared-KV layers without attn_k / attn_v entries, the
 * per-layer embeddings' blk.*.inp_gate / proj (per_layer_model_proj is not blk.*: no entry);
 * gemma4moe (gemma4-moe.skel): every layer's fused gate_up / down experts beside its dense FFN,
 * the router on its own input.
 * Every case also captures the Hessians (`imatrix --hessian`) in the same pass: every 2-D
 * weight of the imatrix that llama-quantize would quantize (all but the router ffn_gate_inp)
 * has a slot under iqf_hessian_name_for's name, whose diagonal is that entry's E[x^2]
 * (within 1e-5 relative).
 * No oracle needed: the fixtures are files; iqf-archmodel is found next to IQF_CLI.
 */
#include "iqforge.h"
#include "genmodel.h"
#include "model/hessian.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "stats/hessian_file.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { C = 128, CHUNKS = 6 };

typedef struct fleet_case {
    const char *arch, *vocab; /* vocab NULL: the model's own */
    uint64_t seed;
    const char *skel;         /* rebuilt by iqf-archmodel from tests/data/archs/SKEL.skel, or NULL: genmodel */
    long long size;           /* test-llama-archs' file size */
} fleet_case;

/* Must match tests/data/fleet-imatrix/README.md. */
static const fleet_case cases[] = {
    { "qwen2", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 21, NULL, 0 },
    { "qwen3", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 22, NULL, 0 },
    { "mixtral", "tests/data/vocab/ggml-vocab-llama-spm.gguf", 23, NULL, 0 },
    { "qwen3moe", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 24, NULL, 0 },
    { "gemma3", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 25, NULL, 0 },
    { "gpt-oss", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 26, NULL, 0 },
    { "deepseek2", "tests/data/vocab/ggml-vocab-gpt-2.gguf", 26, NULL, 0 },
    { "qwen35", NULL, 42, "qwen35-dense", 5294240 },
    { "qwen35moe", NULL, 42, "qwen35moe-moe", 8840768 },
    { "gemma4", NULL, 42, "gemma4-dense", 5363072 },
    { "gemma4moe", NULL, 42, "gemma4-moe", 8924256 },
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

/* The fixture's tensors NAME.in_sum2 [ncols, n_mat] and NAME.counts [1, n_mat] (F32). */
static bool ref_entry(const iqf_gguf *g, const char *name, const float **sum2, const float **counts,
                      int64_t *ncols, int64_t *n_mat) {
    char a[160], b[160];
    snprintf(a, sizeof a, "%s.in_sum2", name);
    snprintf(b, sizeof b, "%s.counts", name);
    const iqf_gguf_tensor *ts = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, a));
    const iqf_gguf_tensor *tc = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, b));
    if (!ts || !tc || ts->type != IQF_TYPE_F32 || tc->type != IQF_TYPE_F32 || ts->ne[1] != tc->ne[1] ||
        tc->ne[0] != 1)
        return false;
    *sum2 = ts->data;
    *counts = tc->data;
    *ncols = ts->ne[0];
    *n_mat = ts->ne[1];
    return true;
}

static int32_t *tokens(const char *vocab_path, const char *text, size_t len, int *n);

/* Every 2-D imatrix entry llama-quantize would quantize, and every 3-D expert entry, has a Hessian
 * slot (by iqf_hessian_name_for) whose diagonal is its E[x^2] (per expert, over the rows routed to
 * it, with llama-imatrix's per-expert counts); returns the number of entries checked. */
static int check_hessian(const fleet_case *fc, const iqf_imatrix_data *d, iqf_hess_acc *a) {
    int checked = 0, expert_mats = 0;
    double worst = 0;
    for (int i = 0; i < d->n_entries; i++) {
        if (strstr(d->names[i], "ffn_gate_inp.weight")) continue; /* router */
        const bool exps = d->n_mat[i] > 1 && strstr(d->names[i], "_exps.weight");
        if (d->n_mat[i] > 1 && !exps) continue; /* deepseek2's per-head attn_k_b / attn_v_b */
        char hn[160];
        const iqf_hess_slot *q = NULL;
        if (iqf_hessian_name_for(d->names[i], hn, sizeof hn))
            for (int k = 0; k < a->n_slots && !q; k++)
                if (!strcmp(a->slots[k].name, hn)) q = &a->slots[k];
        CHECK(q && q->n == d->ncols[i], "%s: no Hessian slot for %s", fc->arch, d->names[i]);
        if (exps) {
            /* per expert: llama-imatrix's per-expert count and E[x^2] */
            if (!q || q->n != d->ncols[i]) continue;
            CHECK(q->n_mat == d->n_mat[i], "%s: %s: %lld Hessian experts, %d imatrix", fc->arch, d->names[i],
                  (long long)q->n_mat, d->n_mat[i]);
            if (q->n_mat != d->n_mat[i]) continue;
            for (int e = 0; e < d->n_mat[i]; e++) {
                CHECK(q->ecount[e] == d->mat_counts[i][e], "%s: %s expert %d: %lld Hessian rows, %lld imatrix rows",
                      fc->arch, d->names[i], e, (long long)q->ecount[e], (long long)d->mat_counts[i][e]);
                if (!q->ecount[e] || q->ecount[e] != d->mat_counts[i][e]) continue;
                const double *hs = q->sum + (int64_t)e * q->n * q->bs;
                for (int64_t j = 0; j < q->n; j++) {
                    const double hd = hs[j * q->bs + j % q->bs] / (double)q->ecount[e];
                    const double im = d->sum2[i][(int64_t)e * q->n + j] / (double)d->mat_counts[i][e];
                    worst = fmax(worst, fabs(hd - im) / fmax(im, 1e-30));
                }
                expert_mats++;
            }
            checked++;
            continue;
        }
        if (!q || q->n != d->ncols[i] || !d->mat_counts[i][0]) continue;
        CHECK(q->count == d->mat_counts[i][0], "%s: %s: %lld Hessian rows, %lld imatrix rows", fc->arch, d->names[i],
              (long long)q->count, (long long)d->mat_counts[i][0]);
        for (int64_t j = 0; j < q->n; j++) {
            const double hd = q->sum[j * q->bs + j % q->bs] / (double)q->count;
            const double im = d->sum2[i][j] / (double)d->mat_counts[i][0];
            worst = fmax(worst, fabs(hd - im) / fmax(im, 1e-30));
        }
        checked++;
    }
    CHECK(worst < 1e-5, "%s: diag(H) differs from the imatrix by %g", fc->arch, worst);
    printf("%-9s Hessian: %d slots, %d imatrix entries covered (%d expert matrices), worst diag(H) vs E[x^2] %.2g\n",
           fc->arch, a->n_slots, checked, expert_mats, worst);
    return checked;
}

static void run_case(const fleet_case *fc, const char *text, size_t len, const char *archmodel) {
    char model[128], fixture[256], err[1024], cmd[8800];
    snprintf(model, sizeof model, "/tmp/iqf_test_fleetim_%d_%s.gguf", (int)getpid(), fc->arch);
    snprintf(fixture, sizeof fixture, "tests/data/fleet-imatrix/%s.imatrix.gguf", fc->arch);
    if (fc->skel) {
        char skel[4200];
        snprintf(skel, sizeof skel, "%s", src_path("tests/data/archs/x.skel"));
        char *slash = strrchr(skel, '/');
        snprintf(slash + 1, sizeof skel - (size_t)(slash + 1 - skel), "%s.skel", fc->skel);
        snprintf(cmd, sizeof cmd, "'%s' '%s' %lld '%s' %llu", archmodel, skel, fc->size, model,
                 (unsigned long long)fc->seed);
        if (system(cmd) != 0) {
            CHECK(0, "%s: iqf-archmodel", fc->arch);
            return;
        }
    } else {
        iqf_genmodel_opts o = iqf_genmodel_default_opts();
        o.arch = fc->arch;
        o.scale = 16;
        o.n_layer = 2;
        o.type = IQF_TYPE_F32;
        o.seed = fc->seed;
        o.n_expert = 8;
        o.n_expert_used = 2;
        o.vocab = src_path(fc->vocab);
        if (iqf_genmodel_write(&o, model, NULL, NULL, err, sizeof err) != IQF_OK) {
            CHECK(0, "%s: genmodel: %s", fc->arch, err);
            return;
        }
    }
    int n_tok = 0;
    int32_t *toks = tokens(fc->vocab ? src_path(fc->vocab) : model, text, len, &n_tok);
    CHECK(n_tok >= C * CHUNKS, "%s: %d tokens", fc->arch, n_tok);
    iqf_model *m = NULL;
    iqf_context *c = NULL;
    iqf_imatrix_data *d = NULL;
    iqf_hess_acc *ha = NULL;
    iqf_gguf *g = iqf_gguf_open(src_path(fixture), err, sizeof err);
    CHECK(g != NULL, "%s", err);
    bool ok = g && n_tok >= C * CHUNKS && iqf_model_load(model, NULL, &m, err, sizeof err) == IQF_OK;
    if (ok) {
        iqf_context_params p = iqf_context_default_params();
        p.n_ctx = C;
        p.n_threads = 2;
        p.kv_f16 = false; /* the fixtures were made with -ctk f32 -ctv f32 -fa off */
        ok = iqf_context_new_ex(m, &p, &c, err, sizeof err) == IQF_OK &&
             iqf_hessian_attach(c, -1, &ha, err, sizeof err) == IQF_OK &&
             iqf_imatrix_collect(c, toks, (size_t)n_tok, C, CHUNKS, NULL, &d, err, sizeof err) == IQF_OK;
    }
    CHECK(ok, "%s: %s", fc->arch, err);
    free(toks);
    remove(model);
    if (!ok) {
        iqf_hessian_acc_free(ha);
        iqf_context_free(c);
        iqf_model_free(m);
        iqf_gguf_close(g);
        return;
    }
    const int n_hess = check_hessian(fc, d, ha);
    int64_t n_ref = 0;
    for (int64_t i = 0; i < iqf_gguf_n_tensors(g); i++) {
        const char *nm = iqf_gguf_tensor_at(g, i)->name;
        size_t L = strlen(nm);
        n_ref += L > 8 && !strcmp(nm + L - 8, ".in_sum2");
    }
    CHECK(n_ref == d->n_entries, "%s: %lld entries in the fixture, %d collected", fc->arch, (long long)n_ref,
          d->n_entries);
    int64_t chunks = -1;
    CHECK(iqf_gguf_get_int(g, "imatrix.chunk_count", &chunks) && chunks == d->n_chunks,
          "%s: chunk count %lld vs %d", fc->arch, (long long)chunks, d->n_chunks);
    double worst = 0;
    int n_expert_entries = 0, count_mismatch = 0;
    char worst_at[128] = "";
    for (int i = 0; i < d->n_entries; i++) {
        const float *rs, *rc;
        int64_t ncols, n_mat;
        if (!ref_entry(g, d->names[i], &rs, &rc, &ncols, &n_mat)) {
            CHECK(0, "%s: %s missing from the fixture", fc->arch, d->names[i]);
            continue;
        }
        /* a dense 3-D weight (deepseek2's per-head attn_k_b / attn_v_b): llama-imatrix keeps its
         * per-matrix sums flattened under one count; ours are per matrix with equal counts */
        bool flat = n_mat == 1 && d->n_mat[i] > 1 && ncols == d->ncols[i] * d->n_mat[i];
        for (int e = 1; flat && e < d->n_mat[i]; e++) flat = d->mat_counts[i][e] == d->mat_counts[i][0];
        CHECK(flat || (ncols == d->ncols[i] && n_mat == d->n_mat[i]), "%s: %s is %lld x %lld in the fixture, %lld x %d here",
              fc->arch, d->names[i], (long long)ncols, (long long)n_mat, (long long)d->ncols[i], d->n_mat[i]);
        if (!flat && (ncols != d->ncols[i] || n_mat != d->n_mat[i])) continue;
        n_expert_entries += n_mat > 1;
        for (int64_t e = 0; e < n_mat; e++) {
            const int64_t cnt = d->mat_counts[i][e];
            if ((double)cnt != (double)rc[e]) {
                if (count_mismatch++ < 5)
                    CHECK(0, "%s: %s expert %lld: count %lld, llama-imatrix %.0f", fc->arch, d->names[i], (long long)e,
                          (long long)cnt, (double)rc[e]);
                continue;
            }
            if (cnt == 0) continue;
            double mx = 0;
            for (int64_t k = 0; k < ncols; k++) mx = fmax(mx, rs[e * ncols + k] / (double)cnt);
            for (int64_t k = 0; k < ncols; k++) {
                const double ref = rs[e * ncols + k] / (double)cnt;
                const double ours = d->sum2[i][e * ncols + k] / (double)cnt;
                const double rel = fabs(ours - ref) / fmax(fabs(ref), 1e-6 * mx + 1e-30);
                if (rel > worst) {
                    worst = rel;
                    snprintf(worst_at, sizeof worst_at, "%s[%lld][%lld]", d->names[i], (long long)e, (long long)k);
                }
            }
        }
    }
    CHECK(count_mismatch == 0, "%s: %d count mismatches", fc->arch, count_mismatch);
    printf("%-8s %d entries (%d per-expert), %d chunks, PPL %.4f: %d count mismatches, worst relative E[x^2] difference %.3g (%s)\n",
           fc->arch, d->n_entries, n_expert_entries, d->n_chunks, d->ppl, count_mismatch, worst, worst_at);
    CHECK(worst < 1e-3, "%s: imatrix differs from llama-imatrix's by %g at %s", fc->arch, worst, worst_at);
    if (!strcmp(fc->arch, "deepseek2")) /* layer 0 is dense */
        CHECK(n_expert_entries == 3, "%s: %d expert entries", fc->arch, n_expert_entries);
    if (!strcmp(fc->arch, "qwen35moe")) /* fused gate_up and down, 2 layers */
        CHECK(n_expert_entries == 2 * 2, "%s: %d expert entries", fc->arch, n_expert_entries);
    else if (!strcmp(fc->arch, "gemma4moe")) /* fused gate_up and down, 6 layers */
        CHECK(n_expert_entries == 2 * 6, "%s: %d expert entries", fc->arch, n_expert_entries);
    else if (strstr(fc->arch, "moe") || !strcmp(fc->arch, "mixtral") || !strcmp(fc->arch, "gpt-oss"))
        CHECK(n_expert_entries == 3 * 2, "%s: %d expert entries", fc->arch, n_expert_entries);
    /* qwen35: attn_qkv, attn_gate, ssm_alpha, ssm_beta, ssm_out, then q, k, v, output; FFN gate,
     * up, down in both layers (qwen35moe: the shared expert's gate, up, down and its gate, and the
     * experts' gate, up, down per expert) */
    if (!strcmp(fc->arch, "qwen35")) CHECK(n_hess == 15, "%s: %d entries with a Hessian", fc->arch, n_hess);
    if (!strcmp(fc->arch, "qwen35moe")) CHECK(n_hess == 21, "%s: %d entries with a Hessian", fc->arch, n_hess);
    iqf_hessian_acc_free(ha);
    iqf_imatrix_data_free(d);
    iqf_context_free(c);
    iqf_model_free(m);
    iqf_gguf_close(g);
}

/* The text tokenized with one of the vocabularies (all genmodel qwen cases share GPT-2's), or
 * with the model file's own. */
static int32_t *tokens(const char *vocab_path, const char *text, size_t len, int *n) {
    char err[512];
    iqf_gguf *g = iqf_gguf_open(vocab_path, err, sizeof err);
    iqf_vocab *v = g ? iqf_vocab_load(g, err, sizeof err) : NULL;
    int32_t *t = malloc(sizeof(int32_t) * (len + 4));
    *n = v && t ? iqf_tokenize(v, text, len, true, t, (int32_t)len + 4) : -1;
    CHECK(*n > 0, "%s: %s", vocab_path, err);
    iqf_vocab_free(v);
    iqf_gguf_close(g);
    return t;
}

int main(int argc, char **argv) {
    char archmodel[4200];
    tu_tool_path(archmodel, sizeof archmodel, "iqf-archmodel");
    size_t len;
    char *text = read_file(src_path("tests/data/text/tinystories-valid-excerpt.txt"), &len);
    CHECK(text != NULL, "text missing");
    if (!text) return test_finish("test_model_fleet_imatrix");
    for (int i = 0; i < N_CASES; i++) /* an argument: the cases of that architecture only */
        if (argc < 2 || !strcmp(cases[i].arch, argv[1])) run_case(&cases[i], text, len, archmodel);
    free(text);
    return test_finish("test_model_fleet_imatrix");
}
