/*
 * forward.c - the llama forward pass over a batch of tokens with a KV cache.
 *
 * Numerics follow llama.cpp's CPU graph for LLM_ARCH_LLAMA: RMSNorm with the sum of squares in
 * double and 1/sqrtf(mean + eps), RoPE "normal" mode (adjacent pairs, theta = p * base^(-2i/d)
 * computed by repeated multiplication as ggml does), causal softmax attention in float with
 * 1/sqrt(head_dim) scaling, SiLU-gated FFN, and a final RMSNorm + output projection computed
 * only for the rows whose logits are wanted (llama.cpp also drops the other rows before the
 * last layer's FFN).
 * With an imatrix or Hessian accumulator attached, every row goes through every layer and each
 * product whose input is captured is preceded by its iqf_capture / iqf_capture_expert call
 * (capture.c; the output head's Hessian takes all rows, its imatrix sums the product's rows).
 */
#include "model.h"
#include "deltanet.h"
#include "../util/error.h"
#include "../util/arch.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>


static void *xcalloc(size_t n, size_t sz, bool *ok) {
    if (n == 0) n = 1;
    void *p = calloc(n, sz);
    if (!p) *ok = false;
    return p;
}

void iqf_context_free(iqf_context *c) {
    if (!c) return;
    iqf_pool_free(c->pool);
    free(c->kcache);
    free(c->vcache);
    free(c->x);
    free(c->xn);
    free(c->q);
    free(c->att);
    free(c->g);
    free(c->u);
    free(c->tmp);
    free(c->wtile);
    free(c->scores);
    free(c->rope_cs);
    free(c->xq);
    free(c->xd);
    free(c->xs);
    free(c->xr);
    free(c->probs);
    free(c->sel);
    free(c->selw);
    free(c->rows);
    free(c->ex_in);
    free(c->ex_out);
    free(c->moe);
    iqf_gdn_ctx_free(c->gdn);
    free(c->ds);
    free(c->ple);
    free(c->ple_g);
    free(c->ffa);
    free(c->ffb);
    free(c);
}

iqf_context_params iqf_context_default_params(void) {
    iqf_context_params p = { 512, 0, IQF_SIMD_AUTO, false };
    return p;
}

iqf_status iqf_context_new(const iqf_model *m, int n_ctx, int n_threads, iqf_context **out,
                           char *err, size_t errlen) {
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = n_threads;
    return iqf_context_new_ex(m, &p, out, err, errlen);
}

iqf_status iqf_context_new_ex(const iqf_model *m, const iqf_context_params *cp, iqf_context **out,
                              char *err, size_t errlen) {
    if (!cp) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad context arguments");
    const int n_ctx = cp->n_ctx, n_threads = cp->n_threads;
    const iqf_simd simd = cp->simd;
    if (!m || !out || n_ctx <= 0) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad context arguments");
    *out = NULL;
    const iqf_model_info *h = &m->info;
    iqf_context *c = calloc(1, sizeof *c);
    if (!c) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = n_ctx;
    c->max_batch = n_ctx < IQF_MAX_BATCH ? n_ctx : IQF_MAX_BATCH; /* longer inputs go in pieces */
    c->simd = iqf_simd_resolve(simd); /* NEON: matmul.c's 4-lane float kernels, the scalar path's bytes */
    c->kv_f16 = cp->kv_f16;
    c->pool = iqf_pool_new(n_threads);
    int nt = c->pool ? iqf_pool_size(c->pool) : 1;
    int64_t hd = h->head_dim, kvdim = hd * h->n_head_kv, qdim = hd * h->n_head;
    int64_t ff = h->n_ff > h->n_ff_exp ? h->n_ff : h->n_ff_exp;
    if (m->n_ff_shexp > ff) ff = m->n_ff_shexp;
    int64_t B = c->max_batch;
    c->max_ncols = h->n_embd;
    for (int i = 0; i < m->n_mats; i++)
        if (m->mats[i]->ncols > c->max_ncols) c->max_ncols = m->mats[i]->ncols;
    int64_t wide = h->n_embd > qdim ? h->n_embd : qdim;
    bool ok = c->pool != NULL;
    size_t cache = (size_t)h->n_layer * (size_t)n_ctx * (size_t)kvdim;
    c->kcache = xcalloc(cache, sizeof(float), &ok);
    c->vcache = xcalloc(cache, sizeof(float), &ok);
    c->x = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
    c->xn = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
    c->q = xcalloc((size_t)(B * qdim), sizeof(float), &ok);
    c->att = xcalloc((size_t)(B * qdim), sizeof(float), &ok);
    c->g = xcalloc((size_t)(B * ff), sizeof(float), &ok);
    c->u = xcalloc((size_t)(B * ff), sizeof(float), &ok);
    if (h->n_expert > 0) {
        c->probs = xcalloc((size_t)(B * h->n_expert), sizeof(float), &ok);
        c->sel = xcalloc((size_t)(B * h->n_expert_used), sizeof(int), &ok);
        c->selw = xcalloc((size_t)(B * h->n_expert_used), sizeof(float), &ok);
        c->rows = xcalloc((size_t)B, sizeof(int), &ok);
        c->ex_in = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
        c->ex_out = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
        c->moe = xcalloc((size_t)(B * h->n_expert_used) * (size_t)h->n_embd, sizeof(float), &ok);
        if (m->arch->moe_dense_ffn) {
            c->ffa = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
            c->ffb = xcalloc((size_t)(B * h->n_embd), sizeof(float), &ok);
        }
    }
    c->tmp = xcalloc((size_t)(B * wide), sizeof(float), &ok);
    c->wtile = xcalloc((size_t)nt * IQF_MM_TILE * (size_t)c->max_ncols, sizeof(float), &ok);
    c->scores = xcalloc((size_t)nt * (size_t)n_ctx, sizeof(float), &ok);
    c->rope_cs = xcalloc((size_t)(2 * B * hd), sizeof(float), &ok); /* global layers, then sliding ones */
    if (m->n_ple > 0) {
        c->ple = xcalloc((size_t)B * (size_t)h->n_layer * (size_t)m->n_ple, sizeof(float), &ok);
        const size_t w = (size_t)h->n_layer * (size_t)m->n_ple, g = (size_t)B * (size_t)m->n_ple;
        c->ple_g = xcalloc(w > g ? w : g, sizeof(float), &ok); /* also one token's per_layer_token_embd row */
    }
    bool any_int = false;
    for (int i = 0; i < m->n_mats; i++) any_int |= iqf_mm_int8_supported(m->mats[i]->type, c->simd);
    any_int |= iqf_mm_int8_supported(m->output.type, c->simd);
    if (any_int) {
        c->xq = xcalloc((size_t)(B * c->max_ncols), 1, &ok);
        c->xd = xcalloc((size_t)(B * (c->max_ncols / 256 + 1)), sizeof(float), &ok);
        c->xs = xcalloc((size_t)(B * (c->max_ncols / 32 + 1)), sizeof(int32_t), &ok);
    }
    bool any_round = false;
    for (int i = 0; i < m->n_mats; i++) any_round |= iqf_mm_act_type(m->mats[i]->type) >= 0;
    any_round |= iqf_mm_act_type(m->output.type) >= 0;
    if (any_round) c->xr = xcalloc((size_t)(B * c->max_ncols), sizeof(float), &ok);
    if (ok && (m->gdn_hp || m->arch->attn_out_gate)) ok = iqf_gdn_ctx_new(c);
    if (ok && !iqf_ds_alloc(c)) ok = false;
    if (!ok) {
        iqf_context_free(c);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for a context of %d tokens", n_ctx);
    }
    *out = c;
    return IQF_OK;
}

void iqf_context_reset(iqf_context *c) {
    if (c) c->n_past = 0;
    if (c) iqf_gdn_ctx_reset(c);
}

int iqf_context_n_ctx(const iqf_context *c) { return c->n_ctx; }

void iqf_context_set_progress(iqf_context *c, iqf_eval_progress_fn fn, void *user) {
    if (!c) return;
    c->progress = fn;
    c->progress_user = user;
}

/* ggml_rms_norm followed by ggml_mul with the norm weight. */
static void rmsnorm(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void iqf_rmsnorm(const float *x, const float *w, float *y, int64_t n, float eps) { rmsnorm(x, w, y, n, eps); }

/* cos/sin table for one position: ggml_rope_cache_init (rope_yarn: the angle freq_scale * theta,
 * cos and sin times mscale = attn_factor; both 1 leave the bytes unchanged). With YaRN's
 * ext_factor (ext != 0) the angle mixes in the unscaled one by rope_yarn_ramp over the correction
 * dims corr, and mscale grows by 1 + 0.1 ln(1 / freq_scale). */
static void rope_table(float *cs, int pos, int n_rot, float base, float freq_scale, float mscale, const float *ff,
                       float ext, const float *corr) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    float theta = (float)pos;
    for (int i = 0; i < n_rot; i += 2) {
        const float te = ff ? theta / ff[i / 2] : theta; /* ggml: theta / freq_factors[i0/2] */
        float t = freq_scale * te, ms = mscale;
        if (ext != 0.0f) {
            const float y = ((float)(i / 2) - corr[0]) / fmaxf(0.001f, corr[1] - corr[0]);
            const float ramp_mix = (1 - fminf(1, fmaxf(0, y))) * ext;
            t = t * (1 - ramp_mix) + te * ramp_mix;
            ms *= 1.0f + 0.1f * logf(1.0f / freq_scale);
        }
        cs[i] = cosf(t) * ms;
        cs[i + 1] = sinf(t) * ms;
        theta *= theta_scale;
    }
}

/* Rotates the first n_rot dims of each of n_heads heads (hd floats each): adjacent pairs
 * (2i, 2i+1), or with neox pairs (i, i + n_rot/2) (ggml's rotate_pairs with n_offset n_rot/2). */
static void rope_apply(float *v, int n_heads, int hd, int n_rot, const float *cs, bool neox) {
    const int off = neox ? n_rot / 2 : 1, step = neox ? 1 : 2;
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (int64_t)h * hd;
        for (int i0 = 0; i0 < n_rot; i0 += 2) {
            const int i = neox ? i0 / 2 : i0;
            const float c = cs[i0], s = cs[i0 + 1];
            const float x0 = p[i], x1 = p[i + off];
            p[i] = x0 * c - x1 * s;
            p[i + off] = x0 * s + x1 * c;
        }
        (void)step;
    }
}

static void add_bias(float *y, int64_t ld, int T, const float *b, int64_t n) {
    if (!b) return;
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[(int64_t)t * ld + i] += b[i];
}

/* ggml_mul by a per-tensor .scale (1: nothing to do, x * 1 is x). */
static void scale_rows(float *y, int64_t ld, int T, float s, int64_t n) {
    if (s == 1.0f) return;
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[(int64_t)t * ld + i] *= s;
}

/* qwen3: RMSNorm of every head (hd floats) with weight w, in place. */
static void head_norm(float *v, int64_t ld, int T, int n_heads, int hd, const float *w, float eps) {
    if (!w) return;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float *p = v + (int64_t)t * ld + (int64_t)h * hd;
            rmsnorm(p, w, p, hd, eps); /* in place: each y[i] is written after the sum is taken */
        }
}

/* gemma4's V: ggml_rms_norm of every head without a weight, in place. */
static void head_rms(float *v, int64_t ld, int T, int n_heads, int hd, float eps) {
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++) {
            float *p = v + (int64_t)t * ld + (int64_t)h * hd;
            double sum = 0.0;
            for (int i = 0; i < hd; i++) sum += (double)(p[i] * p[i]);
            const float scale = 1.0f / sqrtf((float)(sum / (double)hd) + eps);
            for (int i = 0; i < hd; i++) p[i] *= scale;
        }
}

/* ggml_soft_max_f32 over one row: max, expf(x - max) summed in double, scaled by 1/sum. */
void iqf_softmax_row(float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        const float v = expf(x[i] - mx);
        sum += (double)v;
        x[i] = v;
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void iqf_top_k(const float *s, int n, int k, int *out) {
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            bool used = false;
            for (int i = 0; i < j; i++) used |= out[i] == e;
            if (!used && (best < 0 || s[e] > s[best])) best = e;
        }
        out[j] = best;
    }
}

iqf_weight iqf_expert_view(const iqf_weight *w, int e) {
    iqf_weight v = *w;
    v.data = w->data + (size_t)e * (size_t)w->nrows * w->row_bytes;
    v.n_mat = 1;
    v.id = -1;
    return v;
}

/* The rows routed to expert e, in token then slot order: their slots (token t, slot j: t*K + j) into
 * c->rows, their inputs (rows of xn, ld E) into c->ex_in; returns how many. */
int iqf_moe_gather(iqf_context *c, const float *xn, int nr, int K, int E, int e) {
    int n = 0;
    for (int t = 0; t < nr; t++)
        for (int j = 0; j < K; j++)
            if (c->sel[(int64_t)t * K + j] == e) {
                c->rows[n] = t * K + j;
                memcpy(c->ex_in + (int64_t)n * E, xn + (int64_t)t * E, sizeof(float) * (size_t)E);
                n++;
            }
    return n;
}

/* An expert's n output rows (c->ex_out), times their routing weights, into their slots of c->moe. */
void iqf_moe_scatter(iqf_context *c, int n, int E) {
    for (int r = 0; r < n; r++) {
        const float wt = c->selw[c->rows[r]];
        float *dst = c->moe + (int64_t)c->rows[r] * E;
        const float *src = c->ex_out + (int64_t)r * E;
        for (int i = 0; i < E; i++) dst[i] = src[i] * wt;
    }
}

/* out[t] = the sum of token t's K weighted expert outputs, in slot order (ggml's ggml_add chain). */
void iqf_moe_sum(const iqf_context *c, int nr, int K, int E, float *out) {
    for (int t = 0; t < nr; t++) {
        float *o = out + (int64_t)t * E;
        const float *m0 = c->moe + (int64_t)t * K * E;
        memcpy(o, m0, sizeof(float) * (size_t)E);
        for (int j = 1; j < K; j++)
            for (int i = 0; i < E; i++) o[i] += m0[(int64_t)j * E + i];
    }
}

/* build_moe_ffn's weight post-processing: divided by their sum (clamped at 2^-14) when norm,
 * then times expert_weights_scale unless that is 0 or 1. */
void iqf_moe_weights(float *w, int K, bool norm, float scale) {
    if (norm) {
        double sum = 0.0;
        for (int j = 0; j < K; j++) sum += (double)w[j];
        float fs = (float)sum;
        if (fs < 6.103515625e-5f) fs = 6.103515625e-5f;
        for (int j = 0; j < K; j++) w[j] = w[j] / fs;
    }
    if (scale != 0.0f && scale != 1.0f)
        for (int j = 0; j < K; j++) w[j] *= scale;
}

/* llama.cpp's build_moe_ffn (SiLU-gated experts, softmax gating): router logits, softmax over
 * all experts, the top n_expert_used, their probabilities renormalised (expert_weights_norm,
 * sum clamped at 2^-14), each expert's FFN on the rows routed to it, outputs times weights
 * summed in slot order. Rows xn (nr of them), result into out (ld E). */
static void glu(iqf_ffn_kind kind, float *g, const float *u, int64_t n);

/* rin: the router's input (gemma4: its own), NULL: xn. */
static void moe_ffn(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out, const float *rin) {
    const iqf_model_info *h = &c->m->info;
    const int E = h->n_embd, NE = h->n_expert, K = h->n_expert_used, F = h->n_ff_exp;
    iqf_capture(c, &ly->gate_inp, rin ? rin : xn, E, nr);
    iqf_matmul(c, &ly->gate_inp, rin ? rin : xn, E, nr, c->probs, NE);
    for (int t = 0; t < nr; t++) {
        float *p = c->probs + (int64_t)t * NE;
        iqf_softmax_row(p, NE);
        int *sel = c->sel + (int64_t)t * K;
        float *w = c->selw + (int64_t)t * K;
        iqf_top_k(p, NE, K, sel);
        for (int j = 0; j < K; j++) w[j] = p[sel[j]];
        iqf_moe_weights(w, K, h->expert_weights_norm, c->m->moe_w_scale);
    }
    for (int e = 0; e < NE; e++) {
        const int n = iqf_moe_gather(c, xn, nr, K, E, e);
        if (!n) continue;
        iqf_weight wg, wu;
        const iqf_weight wd = iqf_expert_view(&ly->down_exps, e);
        if (ly->gate_up_exps.data) { /* one [gate | up] tensor: its two halves */
            wg = wu = iqf_expert_view(&ly->gate_up_exps, e);
            wg.nrows = wu.nrows = F;
            wu.data += (size_t)F * wu.row_bytes;
            iqf_capture_expert(c, &ly->gate_up_exps, e, c->ex_in, E, n);
        } else {
            wg = iqf_expert_view(&ly->gate_exps, e);
            wu = iqf_expert_view(&ly->up_exps, e);
            iqf_capture_expert(c, &ly->gate_exps, e, c->ex_in, E, n);
            iqf_capture_expert(c, &ly->up_exps, e, c->ex_in, E, n);
        }
        iqf_matmul(c, &wg, c->ex_in, E, n, c->g, F);
        iqf_matmul(c, &wu, c->ex_in, E, n, c->u, F);
        if (ly->sgate_exps) scale_rows(c->g, F, n, ly->sgate_exps[e], F); /* build_lora_mm_id: per-expert scales */
        if (ly->sup_exps) scale_rows(c->u, F, n, ly->sup_exps[e], F);
        glu(c->m->arch->ffn, c->g, c->u, (int64_t)n * F); /* SwiGLU; gemma4's GeGLU */
        iqf_capture_expert(c, &ly->down_exps, e, c->g, F, n);
        iqf_matmul(c, &wd, c->g, F, n, c->ex_out, E);
        if (ly->sdown_exps) scale_rows(c->ex_out, E, n, ly->sdown_exps[e], E);
        iqf_moe_scatter(c, n, E);
    }
    iqf_moe_sum(c, nr, K, E, out);
}

/* qwen35moe's shared expert (build_ffn, then times sigmoid(ffn_gate_inp_shexp . x)) added to out. */
static void shared_expert(iqf_context *c, const iqf_layer *ly, const float *xn, int nr, float *out) {
    const int E = c->m->info.n_embd, F = c->m->n_ff_shexp;
    float *sh = c->ex_out, *sg = c->probs; /* free once moe_ffn is done */
    iqf_capture(c, &ly->gate_shexp, xn, E, nr);
    iqf_matmul(c, &ly->gate_shexp, xn, E, nr, c->g, F);
    iqf_capture(c, &ly->up_shexp, xn, E, nr);
    iqf_matmul(c, &ly->up_shexp, xn, E, nr, c->u, F);
    scale_rows(c->g, F, nr, ly->sgate_shexp, F);
    scale_rows(c->u, F, nr, ly->sup_shexp, F);
    for (int64_t i = 0; i < (int64_t)nr * F; i++) c->g[i] = (c->g[i] / (1.0f + expf(-c->g[i]))) * c->u[i];
    iqf_capture(c, &ly->down_shexp, c->g, F, nr);
    iqf_matmul(c, &ly->down_shexp, c->g, F, nr, sh, E);
    scale_rows(sh, E, nr, ly->sdown_shexp, E);
    iqf_capture(c, &ly->gate_inp_shexp, xn, E, nr);
    iqf_matmul(c, &ly->gate_inp_shexp, xn, E, nr, sg, 1);
    for (int t = 0; t < nr; t++) {
        const float gt = 1.0f / (1.0f + expf(-sg[t]));
        for (int i = 0; i < E; i++) out[(int64_t)t * E + i] += sh[(int64_t)t * E + i] * gt;
    }
}

typedef struct attjob {
    iqf_context *c;
    int layer, r0, T, pos;
} attjob;

/* llama.cpp's CPU flash attention over an F16 cache (ggml_compute_forward_flash_attn_ext_f16)
 * takes its tiled path when the batch has >= 64 query rows and head_dim is a multiple of the f32
 * vector width (16 with AVX-512, 8 with AVX2, any without SIMD): f32 math on the f16-rounded K/V,
 * which the plain code in att_range does up to summation order. Otherwise it takes its one-row
 * path, which rounds differently: Q rounded to f16, each score a double sum of f32 products of
 * f16 values, and the softmax-weighted sum of V accumulated in f16 under an online softmax.
 * ggml_fa_one_row says whether that path applies and its scalar form is exact here (head_dim
 * below ggml's f16 unroll, 32 with AVX2, 64 with AVX-512: only its leftover loops run). */
#define FA_ONE_ROW_MAX_HD 64 /* att_row_ggml_f16's buffers; wider heads (scalar builds) keep the plain path */
static bool ggml_fa_one_row(const iqf_context *c, int hd, int T) {
    if (!c->kv_f16) return false;
    const int epr = c->simd == IQF_SIMD_AVX512 ? 16 : c->simd == IQF_SIMD_AVX2 ? 8 : 1;
    const int f16_step = c->simd == IQF_SIMD_AVX512 ? 64 : c->simd == IQF_SIMD_AVX2 ? 32 : 1 << 30;
    const bool tiled = T >= 64 && hd % epr == 0;
    return !tiled && hd < f16_step && hd <= FA_ONE_ROW_MAX_HD;
}

static float f16r(float x) { return iqf_fp16_to_fp32(iqf_fp32_to_fp16(x)); }

/* One query row of ggml's one-row path over positions 0..p (hd <= 64): out[0..hd). */
static void att_row_ggml_f16(const float *q, const float *K, const float *V, int64_t kvdim, int hd, int s0, int p,
                             float scale, const float *sink, float *out) {
    float qh[FA_ONE_ROW_MAX_HD], vkq[FA_ONE_ROW_MAX_HD];
    for (int d = 0; d < hd; d++) {
        qh[d] = f16r(q[d]);
        vkq[d] = 0.0f;
    }
    float S = 0.0f, M = -INFINITY;
    for (int s = s0; s <= p; s++) { /* positions before s0 are masked: ggml skips them */
        const float *k = K + (int64_t)s * kvdim, *v = V + (int64_t)s * kvdim;
        double acc = 0.0;
        for (int d = 0; d < hd; d++) acc += (double)(k[d] * qh[d]);
        const float sv = (float)acc * scale;
        float ms = 1.0f, vs = 1.0f;
        if (sv > M) {
            const float Mold = M;
            M = sv;
            ms = expf(Mold - M);
            for (int d = 0; d < hd; d++) vkq[d] = f16r(vkq[d] * ms);
        } else {
            vs = expf(sv - M);
        }
        for (int d = 0; d < hd; d++) vkq[d] = f16r(fmaf(v[d], vs, vkq[d]));
        S = S * ms + vs;
    }
    if (sink) { /* gpt-oss: the sink joins the softmax after the f16 accumulator is read back */
        float ms = 1.0f, vs = 1.0f;
        if (*sink > M) {
            ms = expf(M - *sink);
            for (int d = 0; d < hd; d++) vkq[d] *= ms;
        } else {
            vs = expf(*sink - M);
        }
        S = S * ms + vs;
    }
    const float inv = S == 0.0f ? 0.0f : 1.0f / S;
    for (int d = 0; d < hd; d++) out[d] = vkq[d] * inv;
}

/* ggml_vec_gelu_f32 with GGML_GELU_FP16 (its CPU default): 0 below -10, the identity from 10,
 * else the tanh-approximated gelu of x rounded to f16, itself rounded to f16 (ggml_table_gelu_f16). */
static float gelu_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float f = f16r(x);
    return f16r(0.5f * f * (1.0f + tanhf(0.79788456080286535587989211986876f * f * (1.0f + 0.044715f * f * f))));
}

/* g = act(g) * u over n values: SwiGLU, or GeGLU as ggml_vec_geglu_f32 computes it: gelu_f16(g) * u. */

static void glu(iqf_ffn_kind kind, float *g, const float *u, int64_t n) {
    if (kind == IQF_FFN_SWIGLU) {
        for (int64_t i = 0; i < n; i++) {
            const float x = g[i];
            g[i] = (x / (1.0f + expf(-x))) * u[i];
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) g[i] = gelu_f16(g[i]) * u[i];
}

/* Adds o (nr rows of E, ld E) to x (ld E), after gemma3's RMS norm of o when w is set. */
static void residual(float *x, float *o, int nr, int64_t E, const float *w, float eps) {
    for (int t = 0; t < nr; t++) {
        float *xr = x + (int64_t)t * E, *orow = o + (int64_t)t * E;
        if (w) rmsnorm(orow, w, orow, E, eps);
        for (int64_t i = 0; i < E; i++) xr[i] += orow[i];
    }
}

/* One item = (token row, head). */
static void att_range(void *arg, int64_t b, int64_t e, int tid) {
    const attjob *j = arg;
    iqf_context *c = j->c;
    const iqf_model_info *h = &c->m->info;
    const iqf_layer *ly = &c->m->layers[j->layer];
    const int H = h->n_head, hd = ly->hd, kvdim = hd * ly->n_kv;
    const int group = h->n_head / ly->n_kv;
    /* gemma3 scales Q before attention (ggml_scale) and the product by 1 */
    const float scale = c->m->arch->q_prescale ? 1.0f : c->m->attn_scale;
    const int n_swa = ly->swa ? c->m->n_swa : 0;
    const size_t base = (size_t)ly->kv_src * c->n_ctx * (size_t)(h->head_dim * h->n_head_kv); /* gemma4: a shared layer's source */
    const float *K = c->kcache + base;
    const float *V = c->vcache + base;
    float *sc = c->scores + (size_t)tid * c->n_ctx;
    const bool one_row = ggml_fa_one_row(c, hd, j->T);
    const float *sinks = c->m->layers[j->layer].attn_sinks; /* one extra logit per head, or NULL */
    for (int64_t it = b; it < e; it++) {
        const int t = j->r0 + (int)(it / H), head = (int)(it % H), g = head / group;
        const int p = j->pos + t; /* attends to s0..p: a sliding layer masks p - s >= n_swa */
        const int s0 = n_swa && p - n_swa + 1 > 0 ? p - n_swa + 1 : 0;
        const float *q = c->q + (int64_t)t * H * hd + (int64_t)head * hd;
        if (one_row) {
            att_row_ggml_f16(q, K + (int64_t)g * hd, V + (int64_t)g * hd, kvdim, hd, s0, p, scale,
                             sinks ? sinks + head : NULL, c->att + (int64_t)t * H * hd + (int64_t)head * hd);
            continue;
        }
        float mx = -INFINITY;
        for (int s = s0; s <= p; s++) {
            float v = iqf_dot_f32(c->simd, q, K + (int64_t)s * kvdim + (int64_t)g * hd, hd) * scale;
            sc[s] = v;
            if (v > mx) mx = v;
        }
        if (sinks && sinks[head] > mx) mx = sinks[head]; /* ggml_soft_max_f32 with sinks */
        double sum = 0.0;
        for (int s = s0; s <= p; s++) {
            float v = expf(sc[s] - mx);
            sum += (double)v;
            sc[s] = v;
        }
        if (sinks) sum += (double)expf(sinks[head] - mx);
        const float inv = (float)(1.0 / sum);
        float *o = c->att + (int64_t)t * H * hd + (int64_t)head * hd;
        memset(o, 0, (size_t)hd * sizeof(float));
        for (int s = s0; s <= p; s++)
            iqf_axpy_f32(c->simd, sc[s] * inv, V + (int64_t)s * kvdim + (int64_t)g * hd, o, hd);
    }
}

/* Layer l's attention over the batch: K/V of all T rows into the cache, Q and the output of
 * rows r0..T-1, the output projection into c->tmp. */
static void attention(iqf_context *c, int l, int T, int pos, int r0) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const iqf_layer *ly = &m->layers[l];
    /* per-layer head size and rotated dims (gemma4's sliding layers have their own); the cache
     * keeps every layer's slot as wide as the widest (key_length) heads */
    const int E = h->n_embd, H = h->n_head, hd = ly->hd, qdim = H * hd, kvdim = hd * ly->n_kv;
    const int nr = T - r0, hdmax = h->head_dim;
    const float eps = h->rms_eps;
    const bool neox = m->arch->rope != IQF_ROPE_NORMAL;
    const bool own_kv = ly->kv_src == l; /* else gemma4's shared layer: Q only, on layer kv_src's K/V */
    float *cs_swa = c->rope_cs + (int64_t)c->max_batch * hdmax; /* sliding layers' table */
    float *kdst = c->kcache + (size_t)l * c->n_ctx * (size_t)(hdmax * h->n_head_kv) + (size_t)pos * kvdim;
    float *vdst = c->vcache + (size_t)l * c->n_ctx * (size_t)(hdmax * h->n_head_kv) + (size_t)pos * kvdim;

    if (m->arch->attn_out_gate) /* per head [q | gate], scaled and biased */
        iqf_gated_q(c, ly, c->xn + (int64_t)r0 * E, nr, c->q + (int64_t)r0 * qdim);
    else {
        iqf_capture(c, &ly->wq, c->xn + (int64_t)r0 * E, E, nr);
        iqf_matmul(c, &ly->wq, c->xn + (int64_t)r0 * E, E, nr, c->q + (int64_t)r0 * qdim, qdim);
    }
    if (own_kv) {
        iqf_capture(c, &ly->wk, c->xn, E, T);
        iqf_matmul(c, &ly->wk, c->xn, E, T, kdst, kvdim);
        if (ly->wv.data) {
            iqf_capture(c, &ly->wv, c->xn, E, T);
            iqf_matmul(c, &ly->wv, c->xn, E, T, vdst, kvdim);
        }
    }
    if (!m->arch->attn_out_gate) scale_rows(c->q + (int64_t)r0 * qdim, qdim, nr, ly->sq, qdim); /* build_qkv: the scale, then the bias */
    if (!m->arch->attn_out_gate) add_bias(c->q + (int64_t)r0 * qdim, qdim, nr, ly->bq, qdim);
    head_norm(c->q + (int64_t)r0 * qdim, qdim, nr, H, hd, ly->q_norm, eps);
    const float *cs0 = ly->swa && m->n_swa ? cs_swa : c->rope_cs;
    for (int t = r0; t < T; t++) rope_apply(c->q + (int64_t)t * qdim, H, hd, ly->n_rot, cs0 + (int64_t)t * hdmax, neox);
    if (own_kv) {
        scale_rows(kdst, kvdim, T, ly->sk, kvdim);
        add_bias(kdst, kvdim, T, ly->bk, kvdim);
        if (ly->wv.data) {
            scale_rows(vdst, kvdim, T, ly->sv, kvdim);
            add_bias(vdst, kvdim, T, ly->bv, kvdim);
        } else {
            memcpy(vdst, kdst, sizeof(float) * (size_t)T * (size_t)kvdim); /* gemma4 without attn_v: V = K's projection */
        }
        head_norm(kdst, kvdim, T, ly->n_kv, hd, ly->k_norm, eps);
        if (m->arch->v_norm) head_rms(vdst, kvdim, T, ly->n_kv, hd, eps);
        for (int t = 0; t < T; t++) rope_apply(kdst + (int64_t)t * kvdim, ly->n_kv, hd, ly->n_rot, cs0 + (int64_t)t * hdmax, neox);
    }
    if (m->arch->q_prescale) scale_rows(c->q + (int64_t)r0 * qdim, qdim, nr, m->attn_scale, qdim);
    if (c->kv_f16 && own_kv) /* llama.cpp's default F16 cache: what attention reads back is rounded */
        for (int64_t i = 0; i < (int64_t)T * kvdim; i++) {
            kdst[i] = iqf_fp16_to_fp32(iqf_fp32_to_fp16(kdst[i]));
            vdst[i] = iqf_fp16_to_fp32(iqf_fp32_to_fp16(vdst[i]));
        }
    attjob aj = { c, l, r0, T, pos };
    int64_t items = (int64_t)nr * H;
    int nt = iqf_pool_size(c->pool);
    int64_t grain = items / (nt * 8) > 0 ? items / (nt * 8) : 1;
    iqf_pool_run(c->pool, items, grain, att_range, &aj);

    if (m->arch->attn_out_gate) iqf_attn_gate_apply(c, c->att + (int64_t)r0 * qdim, nr);
    iqf_capture(c, &ly->wo, c->att + (int64_t)r0 * qdim, qdim, nr);
    iqf_matmul(c, &ly->wo, c->att + (int64_t)r0 * qdim, qdim, nr, c->tmp, E);
    scale_rows(c->tmp, E, nr, ly->so, E);
    add_bias(c->tmp, E, nr, ly->bo, E);
}

/* gemma4's per-layer inputs (get_per_layer_inputs, project_per_layer_inputs) into c->ple
 * [T][n_layer][n_ple]: per_layer_token_embd's row times sqrt(n_ple), plus the RMS-normed
 * (per_layer_proj_norm, per layer) projection per_layer_model_proj . x / sqrt(n_embd) of the
 * scaled embeddings x, the sum times 1/sqrt(2). */
static void per_layer_inputs(iqf_context *c, const int32_t *tokens, int T) {
    const iqf_model *m = c->m;
    const int E = m->info.n_embd, P = m->n_ple;
    const int64_t W = (int64_t)P * m->info.n_layer;
    const float eps = m->info.rms_eps, s_tok = sqrtf((float)P), s_proj = 1.0f / sqrtf((float)E), s_in = 1.0f / sqrtf(2.0f);
    iqf_capture(c, &m->ple_model_proj, c->x, E, T);
    iqf_matmul(c, &m->ple_model_proj, c->x, E, T, c->ple, W);
    for (int t = 0; t < T; t++) {
        float *pr = c->ple + (int64_t)t * W, *tok = c->ple_g;
        iqf_weight_row(&m->ple_tok, tokens[t], tok);
        for (int64_t i = 0; i < W; i++) pr[i] *= s_proj;
        for (int64_t i = 0; i < W; i += P) rmsnorm(pr + i, m->ple_proj_norm, pr + i, P, eps);
        for (int64_t i = 0; i < W; i++) pr[i] = (pr[i] + tok[i] * s_tok) * s_in;
    }
}

/* gemma4's per-layer embedding of layer l, rows r0..r0+nr-1 of c->x: x += RMSnorm_post(proj .
 * (gelu(inp_gate . x) * the layer's per-layer input)). */
static void per_layer_embd(iqf_context *c, int l, int r0, int nr) {
    const iqf_model *m = c->m;
    const iqf_layer *ly = &m->layers[l];
    const int E = m->info.n_embd, P = m->n_ple;
    const int64_t W = (int64_t)P * m->info.n_layer;
    float *xs = c->x + (int64_t)r0 * E;
    iqf_capture(c, &ly->ple_gate, xs, E, nr);
    iqf_matmul(c, &ly->ple_gate, xs, E, nr, c->ple_g, P);
    for (int t = 0; t < nr; t++) {
        float *g = c->ple_g + (int64_t)t * P;
        const float *in = c->ple + (int64_t)(r0 + t) * W + (int64_t)l * P;
        for (int i = 0; i < P; i++) g[i] = gelu_f16(g[i]) * in[i];
    }
    iqf_capture(c, &ly->ple_proj, c->ple_g, P, nr);
    iqf_matmul(c, &ly->ple_proj, c->ple_g, P, nr, c->tmp, E);
    residual(xs, c->tmp, nr, E, ly->ple_post_norm, m->info.rms_eps);
}

/* gemma4's expert layer after its dense FFN (in c->tmp): that output RMS-normed by
 * post_ffw_norm_1, plus the experts' on rms_norm(x) * pre_ffw_norm_2, routed from
 * rms_norm(x) / sqrt(n_embd) * ffn_gate_inp.scale, RMS-normed by post_ffw_norm_2; into c->tmp. */
static void dense_and_experts(iqf_context *c, const iqf_layer *ly, const float *xs, int nr) {
    const int E = c->m->info.n_embd;
    const float eps = c->m->info.rms_eps, s = 1.0f / sqrtf((float)E);
    float *a = c->ffa, *b = c->ffb;
    for (int t = 0; t < nr; t++) rmsnorm(c->tmp + (int64_t)t * E, ly->post_ffn_norm1, a + (int64_t)t * E, E, eps);
    for (int t = 0; t < nr; t++) { /* the router's input: ggml_rms_norm, ggml_scale, ggml_mul */
        const float *x = xs + (int64_t)t * E;
        float *r = c->tmp + (int64_t)t * E;
        double sum = 0.0;
        for (int i = 0; i < E; i++) sum += (double)(x[i] * x[i]);
        const float sc = 1.0f / sqrtf((float)(sum / (double)E) + eps);
        for (int i = 0; i < E; i++) r[i] = ((x[i] * sc) * s) * ly->gate_inp_s[i];
        rmsnorm(x, ly->pre_ffn_norm2, b + (int64_t)t * E, E, eps);
    }
    /* c->tmp (router input) is read before moe_ffn writes its result: the logits come first */
    moe_ffn(c, ly, b, nr, b, c->tmp);
    for (int t = 0; t < nr; t++) {
        float *o = b + (int64_t)t * E, *d = c->tmp + (int64_t)t * E;
        rmsnorm(o, ly->post_ffn_norm2, o, E, eps);
        for (int i = 0; i < E; i++) d[i] = a[(int64_t)t * E + i] + o[i];
    }
}

/* The rope tables of positions pos..pos+T-1 and, with embed, the token embeddings into c->x
 * (scaled where the row says) and gemma4's per-layer inputs. */
static void embed_rows(iqf_context *c, const int32_t *tokens, int T, int pos, bool embed) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const int E = h->n_embd, hd = h->head_dim;
    float *cs_swa = c->rope_cs + (int64_t)c->max_batch * hd; /* sliding layers' table */
    for (int t = 0; t < T; t++) {
        if (embed) iqf_weight_row(&m->tok_embd, tokens[t], c->x + (int64_t)t * E);
        rope_table(c->rope_cs + (int64_t)t * hd, pos + t, h->n_rot, h->rope_base, h->rope_freq_scale, h->rope_attn_factor,
                   m->rope_freqs, m->yarn_ext, m->yarn_corr);
        if (m->arch->rope == IQF_ROPE_IMROPE)
            iqf_imrope_fix(c->rope_cs + (int64_t)t * hd, h->n_rot, m->gdn_hp->sections, h->rope_attn_factor);
        if (m->n_swa) /* get_rope_freq_base/scale: the sliding layers' own base, scale (and rotated dims) */
            rope_table(cs_swa + (int64_t)t * hd, pos + t, m->n_rot_swa, m->rope_base_swa, m->rope_scale_swa, h->rope_attn_factor,
                       m->arch->rope_freqs_global ? NULL : m->rope_freqs, m->yarn_ext, m->yarn_corr_swa);
    }
    if (!embed) return;
    if (m->arch->embd_scale) scale_rows(c->x, E, T, sqrtf((float)E), E); /* ggml_scale by sqrtf(n_embd) */
    if (m->n_ple) per_layer_inputs(c, tokens, T);
}

/* Layer l over the T rows of c->x (positions pos..): K/V of every row, the rest from row r0. */
static void layer_step(iqf_context *c, int l, int T, int pos, int r0) {
    const iqf_model *m = c->m;
    const int E = m->info.n_embd;
    const float eps = m->info.rms_eps;
    const iqf_layer *ly = &m->layers[l];
    const int nr = T - r0;
    for (int t = 0; t < T; t++) rmsnorm(c->x + (int64_t)t * E, ly->attn_norm, c->xn + (int64_t)t * E, E, eps);
    if (m->arch->attn == IQF_ATTN_MLA)
        iqf_mla_attention(c, l, T, pos, r0, c->tmp);
    else if (ly->gdn) /* a Gated-DeltaNet layer (deltanet.c) instead of attention */
        iqf_gdn_forward(c, l, T, r0, c->tmp);
    else
        attention(c, l, T, pos, r0);
    residual(c->x + (int64_t)r0 * E, c->tmp, nr, E, ly->post_attn_norm, eps);
    float *xs = c->x + (int64_t)r0 * E, *xns = c->xn + (int64_t)r0 * E;
    for (int t = 0; t < nr; t++) rmsnorm(xs + (int64_t)t * E, ly->ffn_norm, xns + (int64_t)t * E, E, eps);
    if (ly->gate_inp.data && m->arch->gating == IQF_GATING_SOFTMAX_WEIGHT) {
        iqf_moe_ffn_oai(c, ly, xns, nr, c->tmp);
    } else if (ly->gate_inp.data && m->arch->gating == IQF_GATING_KEYED) {
        iqf_moe_ds(c, ly, xns, nr, c->tmp);
    } else if (ly->gate_inp.data && !ly->gate_inp_s) {
        moe_ffn(c, ly, xns, nr, c->tmp, NULL);
        if (ly->gate_shexp.data) shared_expert(c, ly, xns, nr, c->tmp);
    }
    if (!ly->gate_inp.data || ly->gate_inp_s) {
        /* build_ffn: each product, its bias, then its scale */
        const int F = ly->n_ff;
        iqf_capture(c, &ly->wgate, xns, E, nr);
        iqf_matmul(c, &ly->wgate, xns, E, nr, c->g, F);
        iqf_capture(c, &ly->wup, xns, E, nr);
        iqf_matmul(c, &ly->wup, xns, E, nr, c->u, F);
        add_bias(c->g, F, nr, ly->bgate, F);
        scale_rows(c->g, F, nr, ly->sgate, F);
        add_bias(c->u, F, nr, ly->bup, F);
        scale_rows(c->u, F, nr, ly->sup, F);
        glu(m->arch->ffn, c->g, c->u, (int64_t)nr * F);
        iqf_capture(c, &ly->wdown, c->g, F, nr);
        iqf_matmul(c, &ly->wdown, c->g, F, nr, c->tmp, E);
        add_bias(c->tmp, E, nr, ly->bdown, E);
        scale_rows(c->tmp, E, nr, ly->sdown, E);
    }
    if (ly->gate_inp_s) dense_and_experts(c, ly, xs, nr);
    residual(xs, c->tmp, nr, E, ly->post_ffn_norm, eps);
    if (ly->ple_proj.data) per_layer_embd(c, l, r0, nr);
    if (ly->out_scale != 1.0f) scale_rows(xs, E, nr, ly->out_scale, E); /* gemma4's layer_output_scale */
}

/* The output norm and the logits of rows first_out.. of c->x (T rows). */
static void head(iqf_context *c, int T, int first_out, float *logits) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const int E = h->n_embd;
    const int n_out = T - first_out;
    /* A Hessian capture takes output.weight's input from every row, also those whose logits
     * are not wanted (the rows are independent: the same floats as the logits' rows). */
    const int o0 = c->hess ? 0 : first_out;
    if (o0 < T && (c->hess || (n_out > 0 && logits))) {
        float *xs = c->x + (int64_t)o0 * E, *xns = c->xn + (int64_t)o0 * E;
        for (int t = 0; t < T - o0; t++) rmsnorm(xs + (int64_t)t * E, m->output_norm, xns + (int64_t)t * E, E, h->rms_eps);
    }
    /* output.weight's Hessian over all T rows, its imatrix sums over the product's rows (none
     * without logits, as llama-imatrix sees only the product) */
    iqf_capture_from(c, &m->output, c->xn, E, T, n_out > 0 && logits ? first_out : T);
    if (n_out > 0 && logits) {
        iqf_matmul(c, &m->output, c->xn + (int64_t)first_out * E, E, n_out, logits, h->n_vocab);
        add_bias(logits, h->n_vocab, n_out, m->output_b, h->n_vocab);
        if (m->softcap > 0) /* ggml_scale by 1/cap, ggml_tanh, ggml_scale by cap */
            for (int64_t i = 0; i < (int64_t)n_out * h->n_vocab; i++)
                logits[i] = tanhf(logits[i] * (1.0f / m->softcap)) * m->softcap;
    }
}

/* One piece of at most max_batch tokens (arguments checked by iqf_decode). In the last layer
 * only the rows whose logits are wanted go on after K/V, unless a capture (imatrix, Hessian)
 * needs every row's input of every matrix. */
static void decode_batch(iqf_context *c, const int32_t *tokens, int T, int pos, int first_out, float *logits) {
    const int L = c->m->info.n_layer;
    const bool capture = c->imat || c->hess;
    embed_rows(c, tokens, T, pos, true);
    for (int l = 0; l < L; l++) layer_step(c, l, T, pos, (l == L - 1 && !capture) ? (first_out < T ? first_out : T - 1) : 0);
    c->n_past = pos + T;
    head(c, T, first_out, logits);
}

iqf_status iqf_decode_layers(iqf_context *c, const int32_t *tokens, int T, const float *x_embd, int l0, int l1, float *x,
                             int first_out, float *logits, char *err, size_t errlen) {
    const iqf_model *m = c ? c->m : NULL;
    if (!m || !tokens || !x || T < 1 || T > c->max_batch || l0 < 0 || l1 < l0 || l1 > m->info.n_layer ||
        (m->n_ple && l0 < l1 && !x_embd))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad layer-range decode arguments");
    for (int l = l0; l < l1; l++)
        if (m->layers[l].kv_src < l0)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "layer %d reads layer %d's K/V, before layer %d", l, m->layers[l].kv_src, l0);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= m->info.n_vocab)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "token id %d out of range [0, %d)", tokens[t], m->info.n_vocab);
    const int E = m->info.n_embd, L = m->info.n_layer;
    const size_t xb = sizeof(float) * (size_t)T * (size_t)E;
    if (first_out < 0 || first_out > T) first_out = T;
    if (m->gdn_hp) iqf_gdn_ctx_reset(c);
    embed_rows(c, tokens, T, 0, false);
    if (m->n_ple && l0 < l1) { /* the per-layer inputs come from the embeddings */
        memcpy(c->x, x_embd, xb);
        per_layer_inputs(c, tokens, T);
    }
    memcpy(c->x, x, xb);
    const bool out = l1 == L && logits && first_out < T;
    for (int l = l0; l < l1; l++) layer_step(c, l, T, 0, (out && l == L - 1 && !c->imat && !c->hess) ? first_out : 0);
    c->n_past = T;
    if (out) head(c, T, first_out, logits);
    memcpy(x, c->x, xb);
    return IQF_OK;
}

void iqf_decode_embed(iqf_context *c, const int32_t *tokens, int T, float *x) {
    embed_rows(c, tokens, T, 0, true);
    memcpy(x, c->x, sizeof(float) * (size_t)T * (size_t)c->m->info.n_embd);
}

iqf_status iqf_decode(iqf_context *c, const int32_t *tokens, int T, int pos, int first_out,
                      float *logits, char *err, size_t errlen) {
    if (!c || (!tokens && T > 0) || T < 0 || pos < 0)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad decode arguments");
    const iqf_model_info *h = &c->m->info;
    if (T == 0) return IQF_OK;
    if (pos > c->n_past) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "position %d skips past the cache (%d)", pos, c->n_past);
    if (c->m->gdn_hp && pos != c->n_past) { /* recurrent states cannot go back: restart at 0 */
        if (pos) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "position %d: a recurrent model continues at %d or restarts at 0", pos, c->n_past);
        iqf_gdn_ctx_reset(c);
    }
    if ((int64_t)pos + T > c->n_ctx)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "positions %d..%d exceed the context of %d", pos, pos + T - 1, c->n_ctx);
    if (first_out < 0 || first_out > T) first_out = T;
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= h->n_vocab)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "token id %d out of range [0, %d)", tokens[t], h->n_vocab);
    for (int s = 0; s < T; s += c->max_batch) {
        const int n = T - s < c->max_batch ? T - s : c->max_batch;
        /* rows of this piece whose logits are wanted: from max(first_out - s, 0), or none */
        int fo = first_out - s;
        if (fo < 0) fo = 0;
        if (fo > n) fo = n;
        float *lo = logits && fo < n ? logits + (size_t)(s + fo - first_out) * (size_t)h->n_vocab : NULL;
        decode_batch(c, tokens + s, n, pos + s, lo ? fo : n, lo);
    }
    return IQF_OK;
}
