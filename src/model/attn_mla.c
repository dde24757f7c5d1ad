/*
 * attn_mla.c - deepseek2's multi-head latent attention, as llama.cpp's models/deepseek2.cpp runs
 * it for MLA files (attn_k_b / attn_v_b): the absorbed form, one K/V head for all query heads.
 *
 * Per token: q = attn_q_b(rms_norm(attn_q_a(x)) * q_a_norm) (or attn_q(x)), per head
 * [nope | rope]; attn_kv_a_mqa(x) = [latent (kv_lora) | shared rope key (n_rot)]. The cache row
 * is [rms_norm(latent) * kv_a_norm | rope(key)] (kv_lora + n_rot floats, as libllama's K cache;
 * its V is the latent part of the same row). Each head's query is [attn_k_b_h . q_nope | rope(q_pe)],
 * scores times kq_scale = mscale^2 / sqrt(key_length_mla), softmax, the weighted sum of latents,
 * then attn_v_b_h decompresses it to value_length_mla and attn_output (times its .scale) mixes
 * the heads. RoPE is the normal (adjacent pairs) kind with YaRN (ggml's rope_yarn). With an F16
 * cache the row is rounded to f16 (flash attention's tiled path is float math on those values).
 * imatrix: attn_k_b / attn_v_b per head as llama-imatrix collects a MUL_MAT of a 3-D weight
 * (per-head sums, each head counting the batch's rows; batches of >= 16 rows); no Hessians for them.
 */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Scratch shared by the two deepseek2 blocks (never live at the same time): attention uses
 * [q latent B*q_lora | values B*H*v_mla | rope table B*n_rot | queries B*H*k_mla], the MoE block (moe_ds.c)
 * [selection scores B*n_expert | gate_up B*2*n_ff_exp | shared gate, up 2*B*n_ff_exp*n_shared]. */
bool iqf_ds_alloc(iqf_context *c) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    if (m->arch->attn != IQF_ATTN_MLA && m->arch->gating != IQF_GATING_KEYED) return true;
    const size_t B = (size_t)c->max_batch, FS = (size_t)h->n_ff_exp * (size_t)m->mla.n_shared;
    const size_t att = B * ((size_t)m->mla.q_lora + (size_t)h->n_head * ((size_t)m->mla.v_mla + (size_t)m->mla.k_mla) +
                            (size_t)h->n_rot);
    const size_t moe = B * ((size_t)h->n_expert + 2 * (size_t)h->n_ff_exp + 2 * FS);
    c->ds = calloc((att > moe ? att : moe) + 1, sizeof(float));
    return c->ds != NULL;
}

/* ggml's rope_yarn_ramp / rope_yarn / ggml_rope_cache_init (no frequency factors, sin_sign 1). */
static float yarn_ramp(float low, float high, int i0) {
    const float y = (float)(i0 / 2 - low) / fmaxf(0.001f, high - low);
    return 1 - fminf(1, fmaxf(0, y));
}

static void yarn_table(const iqf_model *m, int pos, float *cs) {
    const iqf_model_info *h = &m->info;
    const struct iqf_mla_hp *p = &m->mla;
    const float theta_scale = powf(h->rope_base, -2.0f / (float)h->n_rot), fs = h->rope_freq_scale;
    float theta = (float)pos;
    for (int i0 = 0; i0 < h->n_rot; i0 += 2) {
        const float interp = fs * theta;
        float t = interp, ms = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            const float mix = yarn_ramp(p->corr[0], p->corr[1], i0) * p->ext_factor;
            t = interp * (1 - mix) + theta * mix;
            ms *= 1.0f + 0.1f * logf(1.0f / fs);
        }
        cs[i0] = cosf(t) * ms;
        cs[i0 + 1] = sinf(t) * ms;
        theta *= theta_scale;
    }
}

/* Normal rope: adjacent pairs of the n_rot values at v. */
static void rope_pairs(float *v, int n_rot, const float *cs) {
    for (int i = 0; i < n_rot; i += 2) {
        const float x0 = v[i], x1 = v[i + 1], c = cs[i], s = cs[i + 1];
        v[i] = x0 * c - x1 * s;
        v[i + 1] = x0 * s + x1 * c;
    }
}

typedef struct mlajob {
    iqf_context *c;
    int layer, r0, pos;
} mlajob;

/* One item = (token row, head): softmax(q . K * kq_scale) over positions 0..p, times the latents. */
static void mla_range(void *arg, int64_t b, int64_t e, int tid) {
    const mlajob *j = arg;
    iqf_context *c = j->c;
    const iqf_model *m = c->m;
    const int H = m->info.n_head, KD = m->info.head_dim, KL = m->mla.kv_lora;
    const float scale = m->mla.kq_scale;
    const float *K = c->kcache + (size_t)j->layer * c->n_ctx * KD;
    float *sc = c->scores + (size_t)tid * c->n_ctx;
    for (int64_t it = b; it < e; it++) {
        const int t = j->r0 + (int)(it / H), head = (int)(it % H), p = j->pos + t;
        const float *q = c->q + ((int64_t)t * H + head) * KD;
        float mx = -INFINITY;
        for (int s = 0; s <= p; s++) {
            const float v = iqf_dot_f32(c->simd, q, K + (int64_t)s * KD, KD) * scale;
            sc[s] = v;
            if (v > mx) mx = v;
        }
        double sum = 0.0;
        for (int s = 0; s <= p; s++) {
            const float v = expf(sc[s] - mx);
            sum += (double)v;
            sc[s] = v;
        }
        const float inv = (float)(1.0 / sum);
        float *o = c->att + ((int64_t)t * H + head) * KL;
        memset(o, 0, (size_t)KL * sizeof(float));
        for (int s = 0; s <= p; s++) iqf_axpy_f32(c->simd, sc[s] * inv, K + (int64_t)s * KD, o, KL);
    }
}

static iqf_weight head_view(const iqf_weight *w, int h) {
    iqf_weight v = *w;
    v.data = w->data + (size_t)h * (size_t)w->nrows * w->row_bytes;
    v.n_mat = 1;
    v.id = -1;
    return v;
}

/* The cache rows of tokens 0..T-1 at pos: latent, its norm, the rope key; F16 rounding. */
static void mla_kv(iqf_context *c, const iqf_layer *ly, float *kdst, int T, const float *cs) {
    const iqf_model *m = c->m;
    const int E = m->info.n_embd, KD = m->info.head_dim, KL = m->mla.kv_lora, R = m->info.n_rot;
    iqf_capture(c, &ly->wkv_a, c->xn, E, T);
    iqf_matmul(c, &ly->wkv_a, c->xn, E, T, kdst, KD);
    for (int t = 0; t < T; t++) {
        float *k = kdst + (int64_t)t * KD;
        iqf_rmsnorm(k, ly->kv_a_norm, k, KL, m->info.rms_eps);
        rope_pairs(k + KL, R, cs + (int64_t)t * R);
    }
    if (c->kv_f16)
        for (int64_t i = 0; i < (int64_t)T * KD; i++) kdst[i] = iqf_fp16_to_fp32(iqf_fp32_to_fp16(kdst[i]));
}

void iqf_mla_attention(iqf_context *c, int l, int T, int pos, int r0, float *out) {
    const iqf_model *m = c->m;
    const iqf_model_info *h = &m->info;
    const struct iqf_mla_hp *p = &m->mla;
    const iqf_layer *ly = &m->layers[l];
    const int E = h->n_embd, H = h->n_head, KD = h->head_dim, KL = p->kv_lora, R = h->n_rot;
    const int KM = p->k_mla, nope = KM - R, VM = p->v_mla, QL = p->q_lora, nr = T - r0;
    const int64_t B = c->max_batch;
    float *qa = c->ds, *vo = qa + B * QL, *cs = vo + B * H * VM, *qf = cs + B * R;
    for (int t = 0; t < T; t++) yarn_table(m, pos + t, cs + (int64_t)t * R);
    mla_kv(c, ly, c->kcache + ((size_t)l * c->n_ctx + (size_t)pos) * KD, T, cs);
    const float *xn = c->xn + (int64_t)r0 * E;
    if (QL > 0) {
        iqf_capture(c, &ly->wq_a, xn, E, nr);
        iqf_matmul(c, &ly->wq_a, xn, E, nr, qa, QL);
        for (int t = 0; t < nr; t++) iqf_rmsnorm(qa + (int64_t)t * QL, ly->q_a_norm, qa + (int64_t)t * QL, QL, h->rms_eps);
        iqf_capture(c, &ly->wq_b, qa, QL, nr);
        iqf_matmul(c, &ly->wq_b, qa, QL, nr, qf, (int64_t)H * KM);
    } else {
        iqf_capture(c, &ly->wq, xn, E, nr);
        iqf_matmul(c, &ly->wq, xn, E, nr, qf, (int64_t)H * KM);
    }
    float *q = c->q + (int64_t)r0 * H * KD;
    for (int hd = 0; hd < H; hd++) { /* [attn_k_b_h . q_nope | rope(q_pe)] */
        const iqf_weight kb = head_view(&ly->wk_b, hd);
        iqf_capture_mat(c, &ly->wk_b, hd, qf + (int64_t)hd * KM, (int64_t)H * KM, nr);
        iqf_matmul(c, &kb, qf + (int64_t)hd * KM, (int64_t)H * KM, nr, q + (int64_t)hd * KD, (int64_t)H * KD);
        for (int t = 0; t < nr; t++) {
            float *qp = q + ((int64_t)t * H + hd) * KD + KL;
            memcpy(qp, qf + ((int64_t)t * H + hd) * KM + nope, sizeof(float) * (size_t)R);
            rope_pairs(qp, R, cs + (int64_t)(r0 + t) * R);
        }
    }
    mlajob j = { c, l, r0, pos };
    const int64_t items = (int64_t)nr * H;
    const int nt = iqf_pool_size(c->pool);
    iqf_pool_run(c->pool, items, items / (nt * 8) > 0 ? items / (nt * 8) : 1, mla_range, &j);
    const float *lat = c->att + (int64_t)r0 * H * KL;
    for (int hd = 0; hd < H; hd++) { /* attn_v_b_h: latent -> value_length_mla */
        const iqf_weight vb = head_view(&ly->wv_b, hd);
        iqf_capture_mat(c, &ly->wv_b, hd, lat + (int64_t)hd * KL, (int64_t)H * KL, nr);
        iqf_matmul(c, &vb, lat + (int64_t)hd * KL, (int64_t)H * KL, nr, vo + (int64_t)hd * VM, (int64_t)H * VM);
    }
    iqf_capture(c, &ly->wo, vo, (int64_t)H * VM, nr);
    iqf_matmul(c, &ly->wo, vo, (int64_t)H * VM, nr, out, E);
    if (ly->so != 1.0f)
        for (int64_t i = 0; i < (int64_t)nr * E; i++) out[i] *= ly->so;
}
