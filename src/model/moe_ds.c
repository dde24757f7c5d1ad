/*
 * moe_ds.c - deepseek2's FFN on its expert layers: llama.cpp's build_moe_ffn with the gating the
 * file's keys choose, plus the shared experts (models/deepseek2.cpp).
 *
 * Router logits -> probabilities (sigmoid for expert_gating_func 2, DeepSeek V3; else softmax);
 * selection scores = probabilities + exp_probs_b (the score-correction bias, selection only);
 * with expert groups, the groups whose two best scores sum highest are kept (the others masked);
 * the top n_expert_used scores pick the experts, weighted by their unbiased probabilities,
 * renormalised if expert_weights_norm (sum clamped at 2^-14), times expert_weights_scale (when
 * neither 0 nor 1). Each expert's SwiGLU FFN (split or fused gate_up), outputs times weights
 * summed in slot order, plus the shared experts' SwiGLU FFN. No per-tensor scales (the graph
 * passes none).
 */
#include "model.h"

#include <math.h>
#include <string.h>

/* Keeps the n_group_used groups whose two best scores sum highest; the rest -INFINITY. */
static void mask_groups(float *sp, int NE, int G, int used) {
    const int per = NE / G;
    float gs[256] = { 0 };
    int keep[256], top[2];
    if (G > 256) return;
    for (int g = 0; g < G; g++) {
        const int k2 = per < 2 ? per : 2;
        iqf_top_k(sp + (int64_t)g * per, per, k2, top);
        gs[g] = sp[g * per + top[0]];
        if (k2 > 1) gs[g] += sp[g * per + top[1]];
    }
    iqf_top_k(gs, G, used, keep);
    for (int g = 0; g < G; g++) {
        bool kept = false;
        for (int i = 0; i < used; i++) kept |= keep[i] == g;
        if (!kept)
            for (int e = 0; e < per; e++) sp[g * per + e] = -INFINITY;
    }
}

/* Router: c->sel and c->selw for nr rows. */
static void route(iqf_context *c, const iqf_layer *ly, const float *xn, int nr) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const struct iqf_mla_hp *p = &m->mla;
    const int E = h->n_embd, NE = h->n_expert, K = h->n_expert_used;
    float *sel_s = c->ds;
    iqf_capture(c, &ly->gate_inp, xn, E, nr);
    iqf_matmul(c, &ly->gate_inp, xn, E, nr, c->probs, NE);
    for (int t = 0; t < nr; t++) {
        float *pr = c->probs + (int64_t)t * NE, *sp = sel_s + (int64_t)t * NE;
        if (p->sigmoid)
            for (int e = 0; e < NE; e++) pr[e] = 1.0f / (1.0f + expf(-pr[e]));
        else
            iqf_softmax_row(pr, NE);
        for (int e = 0; e < NE; e++) sp[e] = ly->exp_probs_b ? pr[e] + ly->exp_probs_b[e] : pr[e];
        if (p->n_groups > 1) mask_groups(sp, NE, p->n_groups, p->n_group_used);
        int *sel = c->sel + (int64_t)t * K;
        float *w = c->selw + (int64_t)t * K;
        iqf_top_k(sp, NE, K, sel);
        for (int j = 0; j < K; j++) w[j] = pr[sel[j]];
        iqf_moe_weights(w, K, h->expert_weights_norm, p->w_scale);
    }
}

static void swiglu(float *g, int64_t ldg, const float *u, int64_t ldu, int n, int F) {
    for (int t = 0; t < n; t++)
        for (int i = 0; i < F; i++) {
            const float x = g[(int64_t)t * ldg + i];
            g[(int64_t)t * ldg + i] = (x / (1.0f + expf(-x))) * u[(int64_t)t * ldu + i];
        }
}

/* Expert e on its n gathered rows (c->ex_in): weighted outputs into c->moe's slots. */
static void run_expert(iqf_context *c, const iqf_layer *ly, int e, int n) {
    const iqf_model_info *h = &c->m->info;
    const int E = h->n_embd, F = h->n_ff_exp;
    float *gu = c->ds + (int64_t)c->max_batch * h->n_expert;
    const float *g = c->g, *u = c->u;
    int64_t ld = F;
    if (ly->gate_up_exps.data) { /* one product, gate rows then up rows */
        const iqf_weight w = iqf_expert_view(&ly->gate_up_exps, e);
        iqf_capture_expert(c, &ly->gate_up_exps, e, c->ex_in, E, n);
        iqf_matmul(c, &w, c->ex_in, E, n, gu, 2 * F);
        g = gu;
        u = gu + F;
        ld = 2 * F;
    } else {
        const iqf_weight wg = iqf_expert_view(&ly->gate_exps, e), wu = iqf_expert_view(&ly->up_exps, e);
        iqf_capture_expert(c, &ly->gate_exps, e, c->ex_in, E, n);
        iqf_capture_expert(c, &ly->up_exps, e, c->ex_in, E, n);
        iqf_matmul(c, &wg, c->ex_in, E, n, c->g, F);
        iqf_matmul(c, &wu, c->ex_in, E, n, c->u, F);
    }
    swiglu((float *)g, ld, u, ld, n, F);
    if (g != c->g)
        for (int t = 0; t < n; t++) memcpy(c->g + (int64_t)t * F, g + (int64_t)t * ld, sizeof(float) * (size_t)F);
    const iqf_weight wd = iqf_expert_view(&ly->down_exps, e);
    iqf_capture_expert(c, &ly->down_exps, e, c->g, F, n);
    iqf_matmul(c, &wd, c->g, F, n, c->ex_out, E);
    for (int r = 0; r < n; r++) {
        const float wt = c->selw[c->rows[r]];
        float *dst = c->moe + (int64_t)c->rows[r] * E;
        const float *src = c->ex_out + (int64_t)r * E;
        for (int i = 0; i < E; i++) dst[i] = src[i] * wt;
    }
}

void iqf_moe_ds(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const int E = h->n_embd, NE = h->n_expert, K = h->n_expert_used;
    route(c, ly, xn, nr);
    for (int e = 0; e < NE; e++) {
        const int n = iqf_moe_gather(c, xn, nr, K, E, e);
        if (n) run_expert(c, ly, e, n);
    }
    iqf_moe_sum(c, nr, K, E, out);
    if (!ly->gate_shexp.data) return;
    /* shared experts: build_ffn(up, gate, down, SILU, PAR), added to the routed output */
    const int FS = (int)ly->gate_shexp.nrows;
    float *sg = c->ds + (int64_t)c->max_batch * (NE + 2 * h->n_ff_exp), *su = sg + (int64_t)c->max_batch * FS;
    iqf_capture(c, &ly->up_shexp, xn, E, nr);
    iqf_matmul(c, &ly->up_shexp, xn, E, nr, su, FS);
    iqf_capture(c, &ly->gate_shexp, xn, E, nr);
    iqf_matmul(c, &ly->gate_shexp, xn, E, nr, sg, FS);
    swiglu(sg, FS, su, FS, nr, FS);
    iqf_capture(c, &ly->down_shexp, sg, FS, nr);
    iqf_matmul(c, &ly->down_shexp, sg, FS, nr, c->ex_out, E);
    for (int64_t i = 0; i < (int64_t)nr * E; i++) out[i] += c->ex_out[i];
}
