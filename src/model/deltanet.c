/*
 * deltanet.c - qwen35's Gated-DeltaNet layers (deltanet.h), as llama.cpp's models/qwen35.cpp
 * build_layer_attn_linear computes them on the CPU backend:
 *   qkv = attn_qkv x (times its scale), z = attn_gate x, beta = sigmoid(ssm_beta x),
 *   g = softplus(ssm_alpha x + ssm_dt.bias) * ssm_a;
 *   a causal depthwise convolution of qkv over time (ggml_ssm_conv: d_conv taps, a float sum in
 *   tap order) whose first d_conv - 1 inputs are the layer's conv state (the previous tokens'
 *   qkv), then silu; q and k L2-normalised per head (ggml_rms_norm with eps / S, times 1/sqrt(S));
 *   the gated delta rule per value head h (key head h % H_k, ggml_gated_delta_net with K = 1):
 *     M = exp(g) M;  d_j = (v_j - M_j . k) beta;  M_j += d_j k;  o_j = (M_j . q) / sqrt(S)
 *   where M_j is row j of the stored (transposed) state; then RMSNorm(o) * ssm_norm * silu(z)
 *   per head and ssm_out. The states carry over decode calls of one sequence.
 */
#include "deltanet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct iqf_gdn_ctx {
    int n_layer;
    float **conv_st;           /* [n_layer] (recurrent layers): [channels][d_conv - 1], else NULL */
    float **ssm_st;            /* [n_layer]: [H_v][S][S], M[j][i] = S[i][j] as ggml stores it */
    float *qkv;                /* [B][channels]: projections, then the convolution's output */
    float *win;                /* [channels][d_conv - 1 + B]: conv state followed by the batch */
    float *z, *o;              /* [B][d_inner] */
    float *gb;                 /* [B][2 * H_v]: g, then beta */
    float *qg, *gate;          /* gated attention: [B][2 * qdim], [B][qdim] */
};

void iqf_gdn_layer_free(iqf_gdn_layer *g) {
    if (!g) return;
    free(g->conv);
    free(g->dt);
    free(g->a);
    free(g->norm);
    free(g);
}

static int channels(const iqf_gdn_hparams *hp) { return 2 * hp->H_k * hp->S + hp->d_inner; }

void iqf_gdn_ctx_free(struct iqf_gdn_ctx *g) {
    if (!g) return;
    free(g->qkv);
    free(g->win);
    free(g->z);
    free(g->o);
    free(g->gb);
    free(g->qg);
    free(g->gate);
    for (int l = 0; g->conv_st && l < g->n_layer; l++) free(g->conv_st[l]); /* ssm_st[l] lies in the same block */
    free(g->conv_st);
    free(g->ssm_st);
    free(g);
}

bool iqf_gdn_ctx_new(iqf_context *c) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const iqf_gdn_hparams *hp = m->gdn_hp;
    struct iqf_gdn_ctx *g = calloc(1, sizeof *g);
    if (!g) return false;
    c->gdn = g;
    g->n_layer = h->n_layer;
    const size_t B = (size_t)c->max_batch, qdim = (size_t)h->n_head * (size_t)h->head_dim;
    g->qg = malloc(B * 2 * qdim * sizeof(float));
    g->gate = malloc(B * qdim * sizeof(float));
    g->conv_st = calloc((size_t)h->n_layer, sizeof(float *));
    g->ssm_st = calloc((size_t)h->n_layer, sizeof(float *));
    bool ok = g->qg && g->gate && g->conv_st && g->ssm_st;
    if (!ok || !hp) return ok;
    const size_t C = (size_t)channels(hp), K1 = (size_t)hp->d_conv - 1;
    g->qkv = malloc(B * C * sizeof(float));
    g->win = malloc(C * (K1 + B) * sizeof(float));
    g->z = malloc(B * (size_t)hp->d_inner * sizeof(float));
    g->o = malloc(B * (size_t)hp->d_inner * sizeof(float));
    g->gb = malloc(B * 2 * (size_t)hp->H_v * sizeof(float));
    ok = g->qkv && g->win && g->z && g->o && g->gb;
    /* one block per recurrent layer: its conv state, then its SSM state */
    const size_t per = C * K1 + (size_t)hp->H_v * (size_t)hp->S * (size_t)hp->S;
    for (int l = 0; ok && l < h->n_layer; l++) {
        if (!m->layers[l].gdn) continue;
        g->conv_st[l] = calloc(per, sizeof(float));
        g->ssm_st[l] = g->conv_st[l] ? g->conv_st[l] + C * K1 : NULL;
        ok = g->conv_st[l] != NULL;
    }
    return ok;
}

void iqf_gdn_ctx_reset(iqf_context *c) {
    struct iqf_gdn_ctx *g = c->gdn;
    const iqf_gdn_hparams *hp = c->m->gdn_hp;
    if (!g || !hp) return;
    const size_t per = (size_t)channels(hp) * (size_t)(hp->d_conv - 1) + (size_t)hp->H_v * (size_t)hp->S * (size_t)hp->S;
    for (int l = 0; l < c->m->info.n_layer; l++)
        if (g->conv_st[l]) memset(g->conv_st[l], 0, per * sizeof(float));
}

/* ggml_rms_norm (sum of squares in double, 1/sqrtf(mean + eps)), times w when given. */
static void rms(const float *x, const float *w, float *y, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

static void scale_rows(float *y, int64_t ld, int T, float s, int64_t n) {
    if (s == 1.0f) return;
    for (int t = 0; t < T; t++)
        for (int64_t i = 0; i < n; i++) y[(int64_t)t * ld + i] *= s;
}

/* The short convolution over the window [state | batch] (ggml_ssm_conv), silu, the new state
 * (the window's last d_conv - 1 inputs), q and k L2-normalised in place in g->qkv. */
static void conv_step(iqf_context *c, const iqf_gdn_layer *ly, float *state, int T) {
    const iqf_gdn_hparams *hp = c->m->gdn_hp;
    struct iqf_gdn_ctx *g = c->gdn;
    const int C = channels(hp), K = hp->d_conv, W = K - 1 + T, S = hp->S;
    for (int ch = 0; ch < C; ch++) {
        float *w = g->win + (int64_t)ch * W;
        memcpy(w, state + (int64_t)ch * (K - 1), sizeof(float) * (size_t)(K - 1));
        for (int t = 0; t < T; t++) w[K - 1 + t] = g->qkv[(int64_t)t * C + ch];
        const float *kw = ly->conv + (int64_t)ch * K;
        for (int t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int i = 0; i < K; i++) sum += w[t + i] * kw[i];
            g->qkv[(int64_t)t * C + ch] = silu(sum);
        }
        memcpy(state + (int64_t)ch * (K - 1), w + T, sizeof(float) * (size_t)(K - 1));
    }
    /* build_gdn_l2_norm: ggml_rms_norm with eps / S, then ggml_scale by 1/sqrt(S) */
    const float eps = c->m->info.rms_eps / (float)S, inv = 1.0f / sqrtf((float)S);
    for (int t = 0; t < T; t++)
        for (int hh = 0; hh < 2 * hp->H_k; hh++) {
            float *p = g->qkv + (int64_t)t * C + (int64_t)hh * S;
            rms(p, NULL, p, S, eps);
            for (int i = 0; i < S; i++) p[i] *= inv;
        }
}

typedef struct dnjob {
    iqf_context *c;
    float *state;
    int T;
} dnjob;

/* The gated delta rule for value heads b..e-1 over the batch (ggml_gated_delta_net, K = 1). */
static void delta_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const dnjob *j = arg;
    iqf_context *c = j->c;
    const iqf_gdn_hparams *hp = c->m->gdn_hp;
    struct iqf_gdn_ctx *g = c->gdn;
    const int S = hp->S, C = channels(hp), HV = hp->H_v, HK = hp->H_k;
    const float scale = 1.0f / sqrtf((float)S);
    float delta[512];
    for (int64_t h = b; h < e; h++) {
        float *M = j->state + h * (int64_t)S * S;
        const int kh = (int)(h % HK);
        for (int t = 0; t < j->T; t++) {
            const float *row = g->qkv + (int64_t)t * C;
            const float *q = row + (int64_t)kh * S, *k = row + (int64_t)(HK + kh) * S;
            const float *v = row + (int64_t)2 * HK * S + h * S;
            const float gv = g->gb[(int64_t)t * 2 * HV + h], beta = g->gb[(int64_t)t * 2 * HV + HV + h];
            const float decay = expf(gv);
            for (int64_t i = 0; i < (int64_t)S * S; i++) M[i] *= decay;
            for (int r = 0; r < S; r++) delta[r] = (v[r] - iqf_dot_f32(c->simd, M + (int64_t)r * S, k, S)) * beta;
            for (int r = 0; r < S; r++) iqf_axpy_f32(c->simd, delta[r], k, M + (int64_t)r * S, S);
            float *o = g->o + (int64_t)t * hp->d_inner + h * S;
            for (int r = 0; r < S; r++) o[r] = iqf_dot_f32(c->simd, M + (int64_t)r * S, q, S) * scale;
        }
    }
}

void iqf_gdn_forward(iqf_context *c, int l, int T, int r0, float *out) {
    const iqf_model *m = c->m;
    const iqf_gdn_hparams *hp = m->gdn_hp;
    const iqf_gdn_layer *ly = m->layers[l].gdn;
    struct iqf_gdn_ctx *g = c->gdn;
    const int E = m->info.n_embd, C = channels(hp), DI = hp->d_inner, HV = hp->H_v, S = hp->S;
    iqf_capture(c, &ly->qkv, c->xn, E, T);
    iqf_matmul(c, &ly->qkv, c->xn, E, T, g->qkv, C);
    scale_rows(g->qkv, C, T, ly->s_qkv, C);
    iqf_capture(c, &ly->z, c->xn, E, T);
    iqf_matmul(c, &ly->z, c->xn, E, T, g->z, DI);
    scale_rows(g->z, DI, T, ly->s_z, DI);
    /* g into the first H_v columns of gb, beta into the next H_v */
    iqf_capture(c, &ly->alpha, c->xn, E, T);
    iqf_matmul(c, &ly->alpha, c->xn, E, T, g->gb, 2 * HV);
    iqf_capture(c, &ly->beta, c->xn, E, T);
    iqf_matmul(c, &ly->beta, c->xn, E, T, g->gb + HV, 2 * HV);
    for (int t = 0; t < T; t++) {
        float *al = g->gb + (int64_t)t * 2 * HV, *be = al + HV;
        for (int h = 0; h < HV; h++) {
            const float x = al[h] * ly->s_alpha + ly->dt[h]; /* ggml_mul by the scale (1: exact) */
            const float sp = x > 20.0f ? x : logf(1.0f + expf(x));
            al[h] = sp * ly->a[h];
            be[h] = 1.0f / (1.0f + expf(-(be[h] * ly->s_beta)));
        }
    }
    conv_step(c, ly, g->conv_st[l], T);
    dnjob j = { c, g->ssm_st[l], T };
    iqf_pool_run(c->pool, HV, 1, delta_range, &j);
    /* build_norm_gated: RMSNorm(o) * ssm_norm, times silu(z), per head */
    for (int t = 0; t < T; t++)
        for (int h = 0; h < HV; h++) {
            float *o = g->o + (int64_t)t * DI + (int64_t)h * S;
            const float *z = g->z + (int64_t)t * DI + (int64_t)h * S;
            rms(o, ly->norm, o, S, m->info.rms_eps);
            for (int i = 0; i < S; i++) o[i] *= silu(z[i]);
        }
    iqf_capture(c, &ly->out, g->o + (int64_t)r0 * DI, DI, T - r0);
    iqf_matmul(c, &ly->out, g->o + (int64_t)r0 * DI, DI, T - r0, out, E);
    scale_rows(out, E, T - r0, ly->s_out, E);
}

void iqf_gated_q(iqf_context *c, const iqf_layer *ly, const float *x, int nr, float *q) {
    const iqf_model_info *h = &c->m->info;
    const int hd = h->head_dim, H = h->n_head, qdim = H * hd;
    struct iqf_gdn_ctx *g = c->gdn;
    iqf_capture(c, &ly->wq, x, h->n_embd, nr);
    iqf_matmul(c, &ly->wq, x, h->n_embd, nr, g->qg, 2 * qdim);
    for (int t = 0; t < nr; t++) {
        float *r = g->qg + (int64_t)t * 2 * qdim;
        for (int i = 0; i < 2 * qdim; i++) { /* build_qkv: the scale, then the bias */
            if (ly->sq != 1.0f) r[i] *= ly->sq;
            if (ly->bq) r[i] += ly->bq[i];
        }
        for (int hh = 0; hh < H; hh++) {
            memcpy(q + (int64_t)t * qdim + (int64_t)hh * hd, r + (int64_t)hh * 2 * hd, sizeof(float) * (size_t)hd);
            memcpy(g->gate + (int64_t)t * qdim + (int64_t)hh * hd, r + (int64_t)hh * 2 * hd + hd, sizeof(float) * (size_t)hd);
        }
    }
}

void iqf_attn_gate_apply(iqf_context *c, float *att, int nr) {
    const int64_t n = (int64_t)nr * c->m->info.n_head * c->m->info.head_dim;
    for (int64_t i = 0; i < n; i++) att[i] *= 1.0f / (1.0f + expf(-c->gdn->gate[i]));
}

void iqf_imrope_fix(float *cs, int n_rot, const int sections[4], float mscale) {
    const int sect_dims = sections[0] + sections[1] + sections[2] + sections[3];
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        const int sector = (i0 / 2) % sect_dims; /* ggml_mrope_cache_init, is_imrope */
        const bool thw = (sector % 3 == 1 && sector < 3 * sections[1]) || (sector % 3 == 2 && sector < 3 * sections[2]) ||
                         (sector % 3 == 0 && sector < 3 * sections[0]);
        if (!thw) { /* position 0: angle 0 */
            cs[i0] = mscale;
            cs[i0 + 1] = 0.0f;
        }
    }
}
