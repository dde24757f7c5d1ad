/*
 * genmodel.c - synthetic Mistral-shaped model + imatrix (see genmodel.h).
 *
 * Weight statistics, loosely after real checkpoints: w[i][j] = sigma * r_i * c_j * z, where
 * z is standard normal with 1% of values scaled by 4 (heavy tails), r_i = exp(0.15 N) a per-row
 * scale, c_j = exp(0.25 N) a per-input-channel scale shared by the matrices that read the same
 * activations (so the imatrix correlates with the weights, as in trained models). Norm weights
 * are 1 + 0.05 N. The imatrix value of channel j is exp(N) * (1 + 30 * [j is one of 1% outlier
 * channels]) / c_j^2 scaled per input kind, as E[x^2] of activations.
 */
#include "genmodel.h"

#include "stats/imatrix.h"
#include "util/parallel.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rng {
    uint64_t s;
    bool have;
    double spare;
} rng;

static uint64_t next(rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uni(rng *r) { return ((double)(next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double normal(rng *r) {
    if (r->have) {
        r->have = false;
        return r->spare;
    }
    double u1 = uni(r), u2 = uni(r);
    double m = sqrt(-2.0 * log(u1));
    r->spare = m * sin(6.283185307179586 * u2);
    r->have = true;
    return m * cos(6.283185307179586 * u2);
}

static rng seeded(uint64_t seed, uint64_t a, uint64_t b) {
    rng r = { seed * 0x9e3779b97f4a7c15ull ^ (a + 1) * 0xbf58476d1ce4e5b9ull ^ (b + 7) * 0x94d049bb133111ebull, false, 0 };
    next(&r);
    return r;
}

iqf_genmodel_opts iqf_genmodel_default_opts(void) {
    iqf_genmodel_opts o = { 1, 2, IQF_TYPE_F16, 1, false, NULL, 8, 2, NULL, NULL, 0.0f, 0.0f, false };
    return o;
}

static iqf_status fail(char *err, size_t errlen, iqf_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}

/* Input kinds: which activations a matrix reads. */
enum { IN_EMBD = 0, IN_ATTN = 1, IN_ATTN_OUT = 2, IN_FFN = 3, IN_FFN_DOWN = 4, IN_OUTPUT = 5,
       IN_GATE_INP = 6, KIND_BIAS = 7 };

typedef struct gtensor {
    char name[64];
    int n_dims;
    int64_t ne[3];     /* ne[2]: experts (1 for a matrix) */
    int kind;     /* IN_*; -1 for a norm vector */
    int layer;
    double sigma;
} gtensor;

static void put_row(const iqf_genmodel_opts *o, const float *x, int64_t n, void *dst) {
    if (o->type == IQF_TYPE_F32) {
        memcpy(dst, x, (size_t)n * 4);
    } else if (o->type == IQF_TYPE_F16) {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = iqf_fp32_to_fp16(x[i]);
    } else {
        uint16_t *d = dst;
        for (int64_t i = 0; i < n; i++) d[i] = iqf_fp32_to_bf16(x[i]);
    }
}

/* Per-input-channel scales c_j for (layer, kind). */
static void channel_scales(uint64_t seed, int layer, int kind, int64_t n, float *c) {
    rng r = seeded(seed, 1000 + (uint64_t)layer, (uint64_t)kind);
    for (int64_t j = 0; j < n; j++) c[j] = (float)exp(0.25 * normal(&r));
}

#define CHUNK_ROWS 256

typedef struct fill_job {
    const iqf_genmodel_opts *o;
    const struct gtensor *t;
    const float *cs;
    uint8_t *out;
    size_t rs;
    int64_t r0, nrows;
    uint64_t tensor_index;
} fill_job;


/* Rows [r0+b, r0+e) of a weight matrix; each row has its own generator, so the values do not
 * depend on the thread count. */
static void fill_rows(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const fill_job *j = arg;
    const int64_t ncols = j->t->ne[0];
    float *row = malloc((size_t)ncols * sizeof(float));
    if (!row) abort();
    for (int64_t r = b; r < e; r++) {
        rng g = seeded(j->o->seed, 1 + j->tensor_index, 1000003 + (uint64_t)(j->r0 + r));
        const double rsc = j->t->sigma * exp(0.15 * normal(&g));
        for (int64_t c = 0; c < ncols; c++) {
            double z = normal(&g);
            if ((next(&g) & 127) == 0) z *= 4.0;
            row[c] = (float)(rsc * j->cs[c] * z);
        }
        put_row(j->o, row, ncols, j->out + (size_t)r * j->rs);
    }
    free(row);
}

/* deepseek2's layer l (after attn_norm; llama.cpp's loader names and shapes). */
static int add_ds2_layer(gtensor *ts, int nt, int l, int64_t E, int64_t F, int64_t FE, int64_t H, int NE, int64_t ql,
                         int64_t kvl, int64_t rope, int64_t nope, int64_t vm) {
    char b[64];
#define T3(sfx, nd, a, b_, c_, k, sg)                                                  \
    do {                                                                             \
        gtensor *t_ = &ts[nt++];                                                     \
        snprintf(t_->name, sizeof t_->name, "blk.%d.%s", l, sfx);                    \
        t_->n_dims = nd;                                                             \
        t_->ne[0] = a;                                                               \
        t_->ne[1] = b_;                                                              \
        t_->ne[2] = c_;                                                              \
        t_->kind = k;                                                                \
        t_->layer = l;                                                               \
        t_->sigma = sg;                                                              \
    } while (0)
    (void)b;
    T3("attn_q_a_norm.weight", 1, ql, 1, 1, -1, 0);
    T3("attn_kv_a_norm.weight", 1, kvl, 1, 1, -1, 0);
    T3("attn_q_a.weight", 2, E, ql, 1, IN_ATTN, 1.0 / sqrt((double)E));
    T3("attn_q_b.weight", 2, ql, H * (nope + rope), 1, IN_ATTN, 1.2 / sqrt((double)ql));
    T3("attn_kv_a_mqa.weight", 2, E, kvl + rope, 1, IN_ATTN, 1.0 / sqrt((double)E));
    T3("attn_k_b.weight", 3, nope, kvl, H, IN_ATTN, 1.0 / sqrt((double)nope));
    T3("attn_v_b.weight", 3, kvl, vm, H, IN_ATTN, 1.0 / sqrt((double)kvl));
    T3("attn_output.weight", 2, H * vm, E, 1, IN_ATTN_OUT, 0.7 / sqrt((double)(H * vm)));
    T3("ffn_norm.weight", 1, E, 1, 1, -1, 0);
    if (l == 0) {
        T3("ffn_gate.weight", 2, E, F, 1, IN_FFN, 0.8 / sqrt((double)E));
        T3("ffn_up.weight", 2, E, F, 1, IN_FFN, 0.8 / sqrt((double)E));
        T3("ffn_down.weight", 2, F, E, 1, IN_FFN_DOWN, 0.8 / sqrt((double)F));
        return nt;
    }
    T3("ffn_gate_inp.weight", 2, E, NE, 1, IN_GATE_INP, 2.0 / sqrt((double)E));
    T3("exp_probs_b.bias", 1, NE, 1, 1, KIND_BIAS, 0.05);
    T3("ffn_gate_exps.weight", 3, E, FE, NE, IN_FFN, 0.8 / sqrt((double)E));
    T3("ffn_up_exps.weight", 3, E, FE, NE, IN_FFN, 0.8 / sqrt((double)E));
    T3("ffn_down_exps.weight", 3, FE, E, NE, IN_FFN_DOWN, 0.8 / sqrt((double)FE));
    T3("ffn_gate_shexp.weight", 2, E, FE, 1, IN_FFN, 0.8 / sqrt((double)E));
    T3("ffn_up_shexp.weight", 2, E, FE, 1, IN_FFN, 0.8 / sqrt((double)E));
    T3("ffn_down_shexp.weight", 2, FE, E, 1, IN_FFN_DOWN, 0.8 / sqrt((double)FE));
#undef T3
    return nt;
}

/* deepseek2's keys as convert_hf_to_gguf writes a DeepSeek-V3 MLA model: one KV head of
 * kv_lora + rope (values kv_lora), the decompressed widths in *_mla, sigmoid gating with
 * normalised weights times 2.5, 4 expert groups of which 2 are kept, YaRN x4 with mscale_all_dim 1. */
static iqf_status ds2_keys(iqf_gguf_writer *w, const char *ga, int64_t FE, int64_t hd, int64_t ql, int64_t kvl, int64_t rope,
                           int64_t nope, int64_t vm, int NE) {
    char key[128];
    (void)hd;
#define K(sfx) (snprintf(key, sizeof key, "%s.%s", ga, sfx), key)
    iqf_status st = iqf_gguf_writer_set_u32(w, K("rope.dimension_count"), (uint32_t)rope);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.head_count_kv"), 1);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.key_length"), (uint32_t)(kvl + rope));
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.value_length"), (uint32_t)kvl);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.key_length_mla"), (uint32_t)(nope + rope));
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.value_length_mla"), (uint32_t)vm);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.q_lora_rank"), (uint32_t)ql);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("attention.kv_lora_rank"), (uint32_t)kvl);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("leading_dense_block_count"), 1);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("expert_feed_forward_length"), (uint32_t)FE);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("expert_shared_count"), 1);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("expert_group_count"), NE % 4 == 0 && NE >= 8 ? 4 : 1);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("expert_group_used_count"), NE % 4 == 0 && NE >= 8 ? 2 : 1);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("expert_gating_func"), 2);
    if (!st) st = iqf_gguf_writer_set_bool(w, K("expert_weights_norm"), true);
    if (!st) st = iqf_gguf_writer_set_f32(w, K("expert_weights_scale"), 2.5f);
    if (!st) st = iqf_gguf_writer_set_str(w, K("rope.scaling.type"), "yarn");
    if (!st) st = iqf_gguf_writer_set_f32(w, K("rope.scaling.factor"), 4.0f);
    if (!st) st = iqf_gguf_writer_set_u32(w, K("rope.scaling.original_context_length"), 4096);
    if (!st) st = iqf_gguf_writer_set_f32(w, K("rope.scaling.yarn_log_multiplier"), 0.1f);
#undef K
    return st;
}

iqf_status iqf_genmodel_write(const iqf_genmodel_opts *o, const char *model_path, const char *imatrix_gguf,
                              const char *imatrix_dat, char *err, size_t errlen) {
    if (!o || !model_path || o->scale < 1 || o->n_layer < 1 || o->n_layer > 512 ||
        (o->type != IQF_TYPE_F16 && o->type != IQF_TYPE_BF16 && o->type != IQF_TYPE_F32))
        return fail(err, errlen, IQF_E_INVALID_ARG, "genmodel: bad options");
    const char *arch = o->arch ? o->arch : "llama";
    const bool qwen2 = !strcmp(arch, "qwen2"), qwen3 = !strcmp(arch, "qwen3"), q3moe = !strcmp(arch, "qwen3moe"),
               mixtral = !strcmp(arch, "mixtral"), oss = !strcmp(arch, "gpt-oss"),
               ds2 = !strcmp(arch, "deepseek2"), moe = q3moe || mixtral || oss || ds2,
               gemma3 = !strcmp(arch, "gemma3");
    if (strcmp(arch, "llama") && !qwen2 && !qwen3 && !moe && !gemma3)
        return fail(err, errlen, IQF_E_INVALID_ARG, "genmodel: unknown architecture '%s'", arch);
    const char *garch = mixtral ? "llama" : arch; /* general.architecture */
    const int n_expert = moe ? o->n_expert : 0, n_used = moe ? o->n_expert_used : 0;
    if (moe && (n_expert < 1 || n_used < 1 || n_used > n_expert))
        return fail(err, errlen, IQF_E_INVALID_ARG, "genmodel: bad expert counts %d / %d", n_expert, n_used);
    iqf_gguf *voc = NULL;
    int64_t n_vocab = 32000 / o->scale;
    if (o->vocab) {
        voc = iqf_gguf_open(o->vocab, err, errlen);
        if (!voc) return IQF_E_FORMAT;
        int64_t tk = iqf_gguf_find_kv(voc, "tokenizer.ggml.tokens");
        if (tk < 0 || iqf_gguf_arr_n(voc, tk) < 1) {
            iqf_gguf_close(voc);
            return fail(err, errlen, IQF_E_FORMAT, "%s: no tokenizer.ggml.tokens", o->vocab);
        }
        n_vocab = (int64_t)iqf_gguf_arr_n(voc, tk);
    }
    const int64_t n_embd = 4096 / o->scale, n_ff = 14336 / o->scale;
    const int64_t n_head = 32, n_head_kv = 8;
    const int64_t head_dim = (qwen3 || q3moe || gemma3 || oss) ? 2 * n_embd / n_head : n_embd / n_head;
    const int64_t n_q = head_dim * n_head, n_kv = head_dim * n_head_kv;
    /* qwen3moe / gpt-oss / deepseek2 experts: 2/7 of n_ff (4096 at full width, a multiple of 256 at scales 1, 2, 4, 8, 16) */
    const int64_t n_ff_exp = q3moe || oss || ds2 ? 2 * n_ff / 7 : n_ff, n_ff_layer = moe ? n_ff_exp : n_ff;
    /* deepseek2 MLA (DeepSeek-V3's 7168-wide shapes / 28 at scale 1, then / scale): per head a
     * rope part of 2 * head_dim and a nope part of 4 * head_dim, values 4 * head_dim wide; latents
     * q 3/8 and kv 1/4 of n_embd; layer 0 dense, then experts with a shared one */
    const int64_t mla_rope = 2 * head_dim, mla_nope = 4 * head_dim, mla_v = 4 * head_dim;
    const int64_t q_lora = 3 * n_embd / 8, kv_lora = n_embd / 4;
    if (n_embd < 32 || head_dim < 2) {
        iqf_gguf_close(voc);
        return fail(err, errlen, IQF_E_INVALID_ARG, "genmodel: scale %d too large", o->scale);
    }

    const int nt_max = 3 + 22 * o->n_layer;
    gtensor *ts = calloc((size_t)nt_max, sizeof *ts);
    if (!ts) {
        iqf_gguf_close(voc);
        return fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    int nt = 0;
#define ADD3(nm, nd, a, b, c_, k, l, sg)                                \
    do {                                                                \
        gtensor *t_ = &ts[nt++];                                        \
        snprintf(t_->name, sizeof t_->name, "%s", nm);                  \
        t_->n_dims = nd;                                                \
        t_->ne[0] = a;                                                  \
        t_->ne[1] = b;                                                  \
        t_->ne[2] = c_;                                                 \
        t_->kind = k;                                                   \
        t_->layer = l;                                                  \
        t_->sigma = sg;                                                 \
    } while (0)
#define ADD(nm, nd, a, b, k, l, sg) ADD3(nm, nd, a, b, 1, k, l, sg)
    /* File order as convert_hf_to_gguf writes llama models (not the loader's order). */
    ADD("token_embd.weight", 2, n_embd, n_vocab, IN_EMBD, -1, 0.02);
    const double s_in = 1.0 / sqrt((double)n_embd), s_ff = 1.0 / sqrt((double)n_ff_layer);
    for (int l = 0; l < o->n_layer; l++) {
        char b[64];
        snprintf(b, sizeof b, "blk.%d.attn_norm.weight", l);
        ADD(b, 1, n_embd, 1, -1, l, 0);
        if (ds2) {
            nt = add_ds2_layer(ts, nt, l, n_embd, n_ff, n_ff_exp, n_head, n_expert, q_lora, kv_lora, mla_rope, mla_nope, mla_v);
            continue;
        }
        if (moe) {
            snprintf(b, sizeof b, "blk.%d.ffn_gate_inp.weight", l);
            ADD(b, 2, n_embd, n_expert, IN_GATE_INP, l, 2.0 * s_in);
            snprintf(b, sizeof b, "blk.%d.ffn_down_exps.weight", l);
            ADD3(b, 3, n_ff_exp, n_embd, n_expert, IN_FFN_DOWN, l, 0.8 * s_ff);
            snprintf(b, sizeof b, "blk.%d.ffn_gate_exps.weight", l);
            ADD3(b, 3, n_embd, n_ff_exp, n_expert, IN_FFN, l, 0.8 * s_in);
            snprintf(b, sizeof b, "blk.%d.ffn_up_exps.weight", l);
            ADD3(b, 3, n_embd, n_ff_exp, n_expert, IN_FFN, l, 0.8 * s_in);
            if (oss) { /* the router's and the experts' biases (one row per expert) */
                snprintf(b, sizeof b, "blk.%d.ffn_gate_inp.bias", l);
                ADD(b, 1, n_expert, 1, KIND_BIAS, l, 0.5);
                snprintf(b, sizeof b, "blk.%d.ffn_gate_exps.bias", l);
                ADD(b, 2, n_ff_exp, n_expert, KIND_BIAS, l, 0.3);
                snprintf(b, sizeof b, "blk.%d.ffn_up_exps.bias", l);
                ADD(b, 2, n_ff_exp, n_expert, KIND_BIAS, l, 0.3);
                snprintf(b, sizeof b, "blk.%d.ffn_down_exps.bias", l);
                ADD(b, 2, n_embd, n_expert, KIND_BIAS, l, 0.05);
            }
        } else {
            snprintf(b, sizeof b, "blk.%d.ffn_down.weight", l);
            ADD(b, 2, n_ff, n_embd, IN_FFN_DOWN, l, 0.8 * s_ff);
            snprintf(b, sizeof b, "blk.%d.ffn_gate.weight", l);
            ADD(b, 2, n_embd, n_ff, IN_FFN, l, 0.8 * s_in);
            snprintf(b, sizeof b, "blk.%d.ffn_up.weight", l);
            ADD(b, 2, n_embd, n_ff, IN_FFN, l, 0.8 * s_in);
        }
        snprintf(b, sizeof b, oss ? "blk.%d.post_attention_norm.weight" : "blk.%d.ffn_norm.weight", l); /* gpt-oss: the FFN norm */
        ADD(b, 1, n_embd, 1, -1, l, 0);
        snprintf(b, sizeof b, "blk.%d.attn_k.weight", l);
        ADD(b, 2, n_embd, n_kv, IN_ATTN, l, 1.2 * s_in);
        snprintf(b, sizeof b, "blk.%d.attn_output.weight", l);
        ADD(b, 2, n_q, n_embd, IN_ATTN_OUT, l, 0.7 / sqrt((double)n_q));
        snprintf(b, sizeof b, "blk.%d.attn_q.weight", l);
        ADD(b, 2, n_embd, n_q, IN_ATTN, l, 1.2 * s_in);
        snprintf(b, sizeof b, "blk.%d.attn_v.weight", l);
        ADD(b, 2, n_embd, n_kv, IN_ATTN, l, 0.6 * s_in);
        if (oss) {
            snprintf(b, sizeof b, "blk.%d.attn_output.bias", l);
            ADD(b, 1, n_embd, 1, KIND_BIAS, l, 0.05);
            snprintf(b, sizeof b, "blk.%d.attn_sinks.weight", l); /* one logit per head */
            ADD(b, 1, n_head, 1, KIND_BIAS, l, 1.5);
        }
        if (qwen2 || oss) {
            snprintf(b, sizeof b, "blk.%d.attn_q.bias", l);
            ADD(b, 1, n_q, 1, KIND_BIAS, l, 0.3);
            snprintf(b, sizeof b, "blk.%d.attn_k.bias", l);
            ADD(b, 1, n_kv, 1, KIND_BIAS, l, 0.3);
            snprintf(b, sizeof b, "blk.%d.attn_v.bias", l);
            ADD(b, 1, n_kv, 1, KIND_BIAS, l, 0.1);
        }
        if (gemma3) { /* the norms hold 1 + w, as the converter writes them */
            snprintf(b, sizeof b, "blk.%d.post_attention_norm.weight", l);
            ADD(b, 1, n_embd, 1, -1, l, 0);
            snprintf(b, sizeof b, "blk.%d.post_ffw_norm.weight", l);
            ADD(b, 1, n_embd, 1, -1, l, 0);
        }
        if (qwen3 || q3moe || gemma3) {
            snprintf(b, sizeof b, "blk.%d.attn_q_norm.weight", l);
            ADD(b, 1, head_dim, 1, -1, l, 0);
            snprintf(b, sizeof b, "blk.%d.attn_k_norm.weight", l);
            ADD(b, 1, head_dim, 1, -1, l, 0);
        }
    }
    ADD("output_norm.weight", 1, n_embd, 1, -1, -1, 0);
    if (!o->tied) ADD("output.weight", 2, n_embd, n_vocab, IN_OUTPUT, -1, 0.8 * s_in);
#undef ADD
#undef ADD3

    iqf_status st = IQF_OK;
    const int64_t wmax = n_ff > n_vocab ? n_ff : n_vocab;
    float *row = malloc((size_t)wmax * sizeof(float) * 2);
    float *cs = malloc((size_t)(n_ff > n_q ? n_ff : n_q) * sizeof(float) * 2);
    void *out = malloc((size_t)wmax * 4);
    uint8_t *chunk = malloc((size_t)CHUNK_ROWS * (size_t)wmax * 4);
    iqf_gguf_writer *w = NULL;
    if (!row || !cs || !out || !chunk) {
        st = fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    w = iqf_gguf_writer_open(model_path, err, errlen);
    if (!w) {
        st = IQF_E_IO;
        goto done;
    }
    char nm[128], key[128];
    snprintf(nm, sizeof nm, "%s-shaped synthetic (scale 1/%d, %d layers)", moe || gemma3 ? arch : qwen2 || qwen3 ? arch : "Mistral",
             o->scale, o->n_layer);
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", garch, suffix), key)
    st = iqf_gguf_writer_set_str(w, "general.architecture", garch);
    if (!st) st = iqf_gguf_writer_set_str(w, "general.name", nm);
    if (!st) st = iqf_gguf_writer_set_u32(w, KEY("context_length"), 32768);
    if (!st) st = iqf_gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)n_embd);
    if (!st) st = iqf_gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)o->n_layer);
    if (!st) st = iqf_gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)n_ff);
    if (!st && !ds2) st = iqf_gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)head_dim);
    if (!st) st = iqf_gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)n_head);
    if (!st && !ds2) st = iqf_gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)n_head_kv);
    const bool q3heads = qwen3 || q3moe || gemma3 || oss;
    if (!st && q3heads) st = iqf_gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)head_dim);
    if (!st && q3heads) st = iqf_gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)head_dim);
    if (!st) st = iqf_gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), qwen2 || q3heads ? 1e-6f : 1e-5f);
    /* gpt-oss: a window of 32 on the even layers (libllama's default period 2), YaRN as the
     * released models (factor 32 over an original context of 4096) */
    if (!st && oss) st = iqf_gguf_writer_set_u32(w, KEY("attention.sliding_window"), 32);
    if (!st && oss) st = iqf_gguf_writer_set_str(w, KEY("rope.scaling.type"), "yarn");
    if (!st && oss) st = iqf_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), 32.0f);
    if (!st && oss) st = iqf_gguf_writer_set_u32(w, KEY("rope.scaling.original_context_length"), 4096);
    /* gemma3: a window of 32 with every 2nd layer global (layer 0 slides, layer 1 does not), the
     * sliding layers' rope base 10000 */
    if (!st && gemma3) st = iqf_gguf_writer_set_u32(w, KEY("attention.sliding_window"), 32);
    if (!st && gemma3) st = iqf_gguf_writer_set_u32(w, KEY("attention.sliding_window_pattern"), 2);
    if (!st && gemma3) st = iqf_gguf_writer_set_f32(w, KEY("rope.freq_base_swa"), 10000.0f);
    if (!st) st = iqf_gguf_writer_set_f32(w, KEY("rope.freq_base"), 1000000.0f);
    if (!st && ds2) st = ds2_keys(w, garch, n_ff_exp, head_dim, q_lora, kv_lora, mla_rope, mla_nope, mla_v, n_expert);
    if (!st && moe) st = iqf_gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)n_expert);
    if (!st && moe) st = iqf_gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)n_used);
    if (!st && (q3moe || oss)) st = iqf_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)n_ff_exp);
    if (!st && !voc) st = iqf_gguf_writer_set_u32(w, KEY("vocab_size"), (uint32_t)n_vocab);
    if (!st && o->dense_exp_ff_zero && !moe) st = iqf_gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), 0);
    if (!st && o->rope_scaling) st = iqf_gguf_writer_set_str(w, KEY("rope.scaling.type"), o->rope_scaling);
    if (!st && o->rope_scaling_factor != 0.0f)
        st = iqf_gguf_writer_set_f32(w, KEY("rope.scaling.factor"), o->rope_scaling_factor);
    if (!st && o->rope_attn_factor != 0.0f)
        st = iqf_gguf_writer_set_f32(w, KEY("rope.scaling.attn_factor"), o->rope_attn_factor);
#undef KEY
    if (!st)
        st = iqf_gguf_writer_set_u32(w, "general.file_type",
                                     o->type == IQF_TYPE_F32 ? 0 : o->type == IQF_TYPE_F16 ? 1 : 32);
    if (voc)
        for (int64_t i = 0; i < iqf_gguf_n_kv(voc) && !st; i++)
            if (!strncmp(iqf_gguf_kv_key(voc, i), "tokenizer.", 10)) st = iqf_gguf_writer_copy_kv(w, voc, i);
    for (int i = 0; i < nt && !st; i++) {
        int64_t ne[3] = { ts[i].ne[0], ts[i].ne[1], ts[i].ne[2] };
        /* Norms, biases and the router are F32 as convert writes them. */
        const bool f32 = ts[i].kind < 0 || ts[i].kind == KIND_BIAS || ts[i].kind == IN_GATE_INP;
        st = iqf_gguf_writer_add_tensor(w, ts[i].name, ts[i].n_dims, ne, f32 ? IQF_TYPE_F32 : o->type);
    }
    if (!st) st = iqf_gguf_writer_write_header(w);
    for (int i = 0; i < nt && !st; i++) {
        const gtensor *t = &ts[i];
        rng r = seeded(o->seed, 1 + (uint64_t)i, 99);
        if (t->kind < 0 || t->kind == KIND_BIAS) {
            for (int64_t k = 0; k < t->ne[1] && !st; k++) { /* one row, or gpt-oss's per-expert biases */
                for (int64_t j = 0; j < t->ne[0]; j++)
                    row[j] = (float)(t->kind < 0 ? 1.0 + 0.05 * normal(&r) : t->sigma * normal(&r));
                st = iqf_gguf_writer_write_data(w, row, (size_t)t->ne[0] * 4);
            }
            continue;
        }
        const int64_t ncols = t->ne[0], nrows = t->ne[1] * t->ne[2];
        if (t->kind == IN_EMBD)
            for (int64_t j = 0; j < ncols; j++) cs[j] = 1.0f;
        else
            channel_scales(o->seed, t->layer, t->kind == IN_GATE_INP ? IN_FFN : t->kind, ncols, cs);
        const iqf_genmodel_opts *oo = o;
        iqf_genmodel_opts of = *o;
        if (t->kind == IN_GATE_INP) { /* the router is F32 */
            of.type = IQF_TYPE_F32;
            oo = &of;
        }
        const size_t rs = iqf_row_size(oo->type, ncols);
        for (int64_t r0 = 0; r0 < nrows && !st; r0 += CHUNK_ROWS) {
            fill_job job = { oo, t, cs, chunk, rs, r0, nrows - r0 < CHUNK_ROWS ? nrows - r0 : CHUNK_ROWS, (uint64_t)i };
            iqf_parallel_for(iqf_cpu_count(), job.nrows, 8, fill_rows, &job);
            st = iqf_gguf_writer_write_data(w, chunk, rs * (size_t)job.nrows);
        }
    }
    if (st) {
        fail(err, errlen, st, "%s", iqf_gguf_writer_error(w));
        iqf_gguf_writer_abort(w);
        w = NULL;
        goto done;
    }
    st = iqf_gguf_writer_finish(w, err, errlen);
    w = NULL;
    if (st) goto done;

    if (imatrix_gguf || imatrix_dat) {
        /* One entry per blk.* matrix; matrices reading the same input share the values. */
        int ne_ = 0;
        iqf_imatrix_stats *stats = calloc((size_t)nt, sizeof *stats);
        float **sums = calloc((size_t)nt, sizeof *sums);
        static const int64_t counts[1] = { 100 * 512 };
        if (!stats || !sums) {
            free(stats);
            free(sums);
            st = fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        /* 3-D tensors: experts, or deepseek2's per-head attn_k_b / attn_v_b */
        const int n_cnt = n_expert > n_head ? n_expert : (int)n_head;
        int64_t *ecounts = malloc(sizeof(int64_t) * (size_t)n_cnt);
        if (!ecounts) {
            free(stats);
            free(sums);
            st = fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        for (int e = 0; e < n_cnt; e++) ecounts[e] = (int64_t)(100 * 512) * n_used / (n_expert ? n_expert : 1) + 37 * e;
        for (int i = 0; i < nt && !st; i++) {
            const gtensor *t = &ts[i];
            if (t->layer < 0 || t->kind < 0 || t->kind == KIND_BIAS) continue;
            const int64_t n = t->ne[0], nm = t->ne[2];
            float *s = malloc((size_t)(n * nm) * sizeof(float));
            if (!s) {
                st = fail(err, errlen, IQF_E_NOMEM, "out of memory");
                break;
            }
            const int kind = t->kind == IN_GATE_INP ? IN_FFN : t->kind;
            channel_scales(o->seed, t->layer, kind, n, cs);
            for (int64_t e = 0; e < nm; e++) {
                rng r = seeded(o->seed, 5000 + (uint64_t)t->layer + 7919 * (uint64_t)e, (uint64_t)kind);
                const double base = kind == IN_FFN_DOWN ? 0.05 : kind == IN_ATTN_OUT ? 0.3 : 1.0;
                const double cnt = nm > 1 ? (double)ecounts[e] : (double)counts[0];
                for (int64_t j = 0; j < n; j++) {
                    double v = base * exp(normal(&r));
                    if ((next(&r) % 100) == 0) v *= 30.0;
                    v /= (double)cs[j] * cs[j];
                    s[e * n + j] = (float)(v * cnt);
                }
            }
            sums[ne_] = s;
            stats[ne_].name = t->name;
            stats[ne_].ne0 = n;
            stats[ne_].n_mat = (int)nm;
            stats[ne_].sum_x2 = s;
            stats[ne_].counts = nm > 1 ? ecounts : counts;
            ne_++;
        }
        iqf_imatrix_meta meta = { 100, 512, "synthetic" };
        if (!st && imatrix_gguf) st = iqf_imatrix_write_gguf(imatrix_gguf, stats, ne_, &meta, err, errlen);
        if (!st && imatrix_dat) st = iqf_imatrix_write_dat(imatrix_dat, stats, ne_, &meta, err, errlen);
        for (int i = 0; i < ne_; i++) free(sums[i]);
        free(sums);
        free(stats);
        free(ecounts);
    }
done:
    iqf_gguf_close(voc);
    if (w) iqf_gguf_writer_abort(w);
    free(row);
    free(cs);
    free(out);
    free(chunk);
    free(ts);
    return st;
}
