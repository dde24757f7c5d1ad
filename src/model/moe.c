/*
 * moe.c - gpt-oss's mixture of experts, and YaRN's correction dims.
 *
 * iqf_moe_ffn_oai is llama.cpp's build_moe_ffn as models/openai-moe.cpp calls it: router logits
 * plus ffn_gate_inp.bias, LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT (the top n_expert_used of
 * the logits, then a softmax over those only), no renormalisation, no weight scale; each selected
 * expert's up and gate products plus their per-expert biases (ggml_add_id), ggml_swiglu_oai
 * (alpha 1.702, limit 7), the down product plus its bias, times the expert's weight; the slots
 * summed in order. Per-expert .scale tensors are not applied: that graph passes none.
 */
#include "model.h"

#include <math.h>
#include <string.h>

#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

void iqf_yarn_corr_dims(int n_dims, int n_ctx_orig, float base, float beta_fast, float beta_slow, float dims[2]) {
    const float pi = 3.14159265358979323846f;
    /* ggml_rope_yarn_corr_dim: n_dims * logf(n_ctx_orig / (n_rot * 2 * pi)) / (2 * logf(base)) */
    const float lo = (float)n_dims * logf((float)n_ctx_orig / (beta_fast * 2 * pi)) / (2 * logf(base));
    const float hi = (float)n_dims * logf((float)n_ctx_orig / (beta_slow * 2 * pi)) / (2 * logf(base));
    const float start = floorf(lo), end = ceilf(hi);
    dims[0] = start > 0 ? start : 0;
    dims[1] = (float)(n_dims - 1) < end ? (float)(n_dims - 1) : end;
}

/* ggml_swiglu_oai_f32: x = min(g, limit), y = clamp(u, -limit, limit), x / (1 + expf(alpha * -x)) * (y + 1). */
static void swiglu_oai(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < OAI_LIMIT ? g[i] : OAI_LIMIT;
        const float y = u[i] < -OAI_LIMIT ? -OAI_LIMIT : u[i] > OAI_LIMIT ? OAI_LIMIT : u[i];
        const float glu = x / (1.f + expf(OAI_ALPHA * (-x)));
        g[i] = glu * (y + 1.f);
    }
}

static void add_row_bias(float *y, int64_t ld, int n, const float *b, int64_t width) {
    if (!b) return;
    for (int r = 0; r < n; r++)
        for (int64_t i = 0; i < width; i++) y[(int64_t)r * ld + i] += b[i];
}

/* Top k of the router logits p (descending, ties to the lower index), softmax over the k. */
static void route(const float *p, int NE, int K, int *sel, float *w) {
    iqf_top_k(p, NE, K, sel);
    for (int j = 0; j < K; j++) w[j] = p[sel[j]];
    iqf_softmax_row(w, K); /* ggml_soft_max over the k weights */
}

void iqf_moe_ffn_oai(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out) {
    const iqf_model_info *h = &c->m->info;
    const int E = h->n_embd, NE = h->n_expert, K = h->n_expert_used, F = h->n_ff_exp;
    iqf_capture(c, &ly->gate_inp, xn, E, nr);
    iqf_matmul(c, &ly->gate_inp, xn, E, nr, c->probs, NE);
    add_row_bias(c->probs, NE, nr, ly->bgate_inp, NE);
    for (int t = 0; t < nr; t++)
        route(c->probs + (int64_t)t * NE, NE, K, c->sel + (int64_t)t * K, c->selw + (int64_t)t * K);
    for (int e = 0; e < NE; e++) {
        const int n = iqf_moe_gather(c, xn, nr, K, E, e);
        if (!n) continue;
        const iqf_weight wg = iqf_expert_view(&ly->gate_exps, e), wu = iqf_expert_view(&ly->up_exps, e),
                         wd = iqf_expert_view(&ly->down_exps, e);
        iqf_capture_expert(c, &ly->up_exps, e, c->ex_in, E, n);
        iqf_capture_expert(c, &ly->gate_exps, e, c->ex_in, E, n);
        iqf_matmul(c, &wu, c->ex_in, E, n, c->u, F);
        add_row_bias(c->u, F, n, ly->bup_exps ? ly->bup_exps + (int64_t)e * F : NULL, F);
        iqf_matmul(c, &wg, c->ex_in, E, n, c->g, F);
        add_row_bias(c->g, F, n, ly->bgate_exps ? ly->bgate_exps + (int64_t)e * F : NULL, F);
        swiglu_oai(c->g, c->u, (int64_t)n * F);
        iqf_capture_expert(c, &ly->down_exps, e, c->g, F, n);
        iqf_matmul(c, &wd, c->g, F, n, c->ex_out, E);
        add_row_bias(c->ex_out, E, n, ly->bdown_exps ? ly->bdown_exps + (int64_t)e * E : NULL, E);
        iqf_moe_scatter(c, n, E);
    }
    iqf_moe_sum(c, nr, K, E, out);
}
