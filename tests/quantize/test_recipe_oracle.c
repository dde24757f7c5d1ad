/*
 * test_recipe_oracle.c - the per-tensor type choice (src/quantize/recipe.c) against llama's own
 * code: the oracle's libllama (llama/ggml 0.25.1, npm @node-llama-cpp/linux-x64@3.22.1) exports
 * the helpers of llama-ext.h that tests/test-quant-type-selection.cpp of that source uses:
 * llama_quant_model_from_metadata (a mock model from hyper-parameters), llama_quant_init,
 * llama_quant_tensor_allows_quantization and llama_quant_compute_types (llama_tensor_get_type over a
 * list of tensors, no imatrix). For synthetic models of several families of rules (dense llama
 * with and without an output tensor, falcon, qwen3moe-like MoE, deepseek2-like MLA, bailingmoe3,
 * row lengths that force each fallback) and every file type llama_ftype_get_default_type knows
 * (so not NVFP4: llama 0.25.1 refuses file type 39), iqforge must choose the same type for every
 * tensor, and quantize the same tensors.
 *
 * Not compared here (llama throws a C++ exception, which cannot cross into C): a shape with no
 * fallback (Q1_0 / NVFP4 rows not a multiple of their block), which iqforge refuses (checked), and
 * an MoE tensor without a layer number.
 */
#include "quantize/recipe.h"
#include "llama_oracle.h"
#include "oracle.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ggml's C API (libggml-base), as ggml.h of that version */
struct lo_ggml_init_params {
    size_t mem_size;
    void *mem_buffer;
    bool no_alloc;
};
/* llama-ext.h */
struct lo_quant_model_desc {
    const char *architecture;
    uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_expert, n_embd_head_k, n_embd_head_v;
};

typedef struct ext_api {
    void *(*ggml_init)(struct lo_ggml_init_params);
    void (*ggml_free)(void *);
    void *(*new_tensor_4d)(void *, int, int64_t, int64_t, int64_t, int64_t);
    void *(*set_name)(void *, const char *);
    size_t (*tensor_overhead)(void);
    void *(*model_from_metadata)(const struct lo_quant_model_desc *);
    void (*model_free)(void *);
    void *(*quant_init)(const void *, const lo_quantize_params *);
    void (*quant_free)(void *);
    bool (*allows)(const void *, const void *);
    void (*compute_types)(void *, int, void **, int *, size_t);
} ext_api;

static bool ext_load(ext_api *e) {
    lo_api *api = lo_load();
    if (!api) return false;
    *(void **)&e->ggml_init = oracle_sym("ggml_init");
    *(void **)&e->ggml_free = oracle_sym("ggml_free");
    *(void **)&e->new_tensor_4d = oracle_sym("ggml_new_tensor_4d");
    *(void **)&e->set_name = oracle_sym("ggml_set_name");
    *(void **)&e->tensor_overhead = oracle_sym("ggml_tensor_overhead");
    *(void **)&e->model_from_metadata = dlsym(api->h, "_Z31llama_quant_model_from_metadataPK22llama_quant_model_desc");
    *(void **)&e->model_free = dlsym(api->h, "llama_model_free");
    *(void **)&e->quant_init = dlsym(api->h, "_Z16llama_quant_initPK11llama_modelPK27llama_model_quantize_params");
    *(void **)&e->quant_free = dlsym(api->h, "_Z16llama_quant_freeP19quantize_state_impl");
    *(void **)&e->allows = dlsym(api->h, "_Z38llama_quant_tensor_allows_quantizationPK19quantize_state_implPK11ggml_tensor");
    *(void **)&e->compute_types =
        dlsym(api->h, "_Z25llama_quant_compute_typesP19quantize_state_impl11llama_ftypePP11ggml_tensorP9ggml_typem");
    return e->ggml_init && e->ggml_free && e->new_tensor_4d && e->set_name && e->tensor_overhead &&
           e->model_from_metadata && e->model_free && e->quant_init && e->quant_free && e->allows && e->compute_types;
}

#define MAXT 256

typedef struct model {
    const char *arch;
    int n_layer, n_head, n_head_kv, n_expert;
    int64_t n_embd, n_ff;
    int n;
    char names[MAXT][64];
    int64_t ne[MAXT][4];
} model;

static void add(model *m, const char *name, int64_t a, int64_t b, int64_t c) {
    if (m->n >= MAXT) abort();
    snprintf(m->names[m->n], 64, "%s", name);
    m->ne[m->n][0] = a, m->ne[m->n][1] = b, m->ne[m->n][2] = c, m->ne[m->n][3] = 1;
    m->n++;
}

static void addl(model *m, int l, const char *suffix, int64_t a, int64_t b, int64_t c) {
    char nm[64];
    snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix);
    add(m, nm, a, b, c);
}

static void init(model *m, const char *arch, int n_layer, int64_t n_embd, int n_head, int n_head_kv, int n_expert,
                 int64_t n_ff) {
    memset(m, 0, sizeof *m);
    m->arch = arch, m->n_layer = n_layer, m->n_embd = n_embd, m->n_head = n_head, m->n_head_kv = n_head_kv;
    m->n_expert = n_expert, m->n_ff = n_ff;
}

/* Dense llama-like (attn q/k/v/o, gate/up/down); d: head dim */
static void dense(model *m, const char *arch, int n_layer, int64_t n_embd, int64_t n_ff, bool output) {
    init(m, arch, n_layer, n_embd, 8, 2, 0, n_ff);
    const int64_t kv = n_embd / 4;
    add(m, "token_embd.weight", n_embd, 512, 1);
    add(m, "output_norm.weight", n_embd, 1, 1);
    if (output) add(m, "output.weight", n_embd, 512, 1);
    for (int l = 0; l < n_layer; l++) {
        addl(m, l, "attn_norm.weight", n_embd, 1, 1);
        addl(m, l, "attn_q.weight", n_embd, n_embd, 1);
        addl(m, l, "attn_k.weight", n_embd, kv, 1);
        addl(m, l, "attn_v.weight", n_embd, kv, 1);
        addl(m, l, "attn_output.weight", n_embd, n_embd, 1);
        addl(m, l, "ffn_norm.weight", n_embd, 1, 1);
        addl(m, l, "ffn_gate.weight", n_embd, n_ff, 1);
        addl(m, l, "ffn_up.weight", n_embd, n_ff, 1);
        addl(m, l, "ffn_down.weight", n_ff, n_embd, 1);
    }
}

static void falcon(model *m) {
    init(m, "falcon", 4, 256, 8, 1, 0, 1024);
    add(m, "token_embd.weight", 256, 512, 1);
    add(m, "output.weight", 256, 512, 1);
    for (int l = 0; l < 4; l++) {
        addl(m, l, "attn_qkv.weight", 256, 256 + 2 * 32, 1);
        addl(m, l, "attn_output.weight", 256, 256, 1);
        addl(m, l, "ffn_up.weight", 256, 1024, 1);
        addl(m, l, "ffn_down.weight", 1024, 256, 1);
    }
}

/* qwen3moe-like: 8 experts (n_expert == 8 rules), router, 3-D experts */
static void moe(model *m, const char *arch, int n_expert, int64_t n_embd) {
    init(m, arch, 3, n_embd, 8, 2, n_expert, 384);
    add(m, "token_embd.weight", n_embd, 512, 1);
    add(m, "output.weight", n_embd, 512, 1);
    for (int l = 0; l < 3; l++) {
        addl(m, l, "attn_q.weight", n_embd, n_embd, 1);
        addl(m, l, "attn_k.weight", n_embd, n_embd / 4, 1);
        addl(m, l, "attn_v.weight", n_embd, n_embd / 4, 1);
        addl(m, l, "attn_output.weight", n_embd, n_embd, 1);
        addl(m, l, "ffn_gate_inp.weight", n_embd, n_expert, 1);
        addl(m, l, "ffn_gate_exps.weight", n_embd, 384, n_expert);
        addl(m, l, "ffn_up_exps.weight", n_embd, 384, n_expert);
        addl(m, l, "ffn_down_exps.weight", 384, n_embd, n_expert);
    }
}

/* deepseek2-like / bailingmoe3 MLA: 3-D attn_k_b / attn_v_b beside 3-D experts, shared experts */
static void mla(model *m, const char *arch) {
    init(m, arch, 3, 256, 4, 4, 4, 512);
    add(m, "token_embd.weight", 256, 512, 1);
    add(m, "output.weight", 256, 512, 1);
    for (int l = 0; l < 3; l++) {
        addl(m, l, "attn_q_a.weight", 256, 128, 1);
        addl(m, l, "attn_q_b.weight", 128, 4 * 192, 1);
        addl(m, l, "attn_kv_a_mqa.weight", 256, 128 + 64, 1);
        addl(m, l, "attn_k_b.weight", 128, 128, 4);
        addl(m, l, "attn_v_b.weight", 128, 128, 4);
        addl(m, l, "attn_output.weight", 512, 256, 1);
        if (l == 0) {
            addl(m, l, "ffn_gate.weight", 256, 512, 1);
            addl(m, l, "ffn_up.weight", 256, 512, 1);
            addl(m, l, "ffn_down.weight", 512, 256, 1);
        } else {
            addl(m, l, "ffn_gate_inp.weight", 256, 4, 1);
            addl(m, l, "ffn_gate_exps.weight", 256, 256, 4);
            addl(m, l, "ffn_up_exps.weight", 256, 256, 4);
            addl(m, l, "ffn_down_exps.weight", 256, 256, 4);
            addl(m, l, "ffn_gate_shexp.weight", 256, 256, 1);
            addl(m, l, "ffn_up_shexp.weight", 256, 256, 1);
            addl(m, l, "ffn_down_shexp.weight", 256, 256, 1);
        }
    }
}

static int cmp_t(const void *a, const void *b) {
    return iqf_recipe_name_cmp(((const iqf_recipe_tensor *)a)->name, ((const iqf_recipe_tensor *)b)->name);
}

static const char *tn(int t) {
    const iqf_type_info *ti = iqf_type_get(t);
    return ti ? ti->name : "?";
}

/* The block any quantized type of the file type may need: rows that are not a multiple of it
 * make llama throw for Q1_0 (128). */
static bool throws_in_llama(const model *m, int ftype) {
    if (ftype != IQF_FTYPE_MOSTLY_Q1_0) return false;
    for (int i = 0; i < m->n; i++)
        if (m->ne[i][1] > 1 && m->ne[i][0] % 128) return true;
    return false;
}

static int n_compared;

static void compare(const ext_api *e, const lo_quantize_params *lp, const model *m) {
    /* the quantizable tensors, as llama decides, in the loader's order */
    struct lo_quant_model_desc d = { m->arch, (uint32_t)m->n_embd, (uint32_t)m->n_ff, (uint32_t)m->n_layer,
                                     (uint32_t)m->n_head, (uint32_t)m->n_head_kv, (uint32_t)m->n_expert,
                                     (uint32_t)(m->n_embd / m->n_head), (uint32_t)(m->n_embd / m->n_head) };
    void *lm = e->model_from_metadata(&d);
    CHECK(lm != NULL, "%s: mock model", m->arch);
    if (!lm) return;
    void *qs = e->quant_init(lm, lp);
    struct lo_ggml_init_params ip = { (size_t)m->n * e->tensor_overhead() + 1024, NULL, true };
    void *ctx = e->ggml_init(ip);
    static iqf_recipe_tensor rt[MAXT];
    static void *gt[MAXT];
    static iqf_recipe_choice rc[MAXT];
    int nt = 0;
    for (int i = 0; i < m->n; i++) {
        rt[i].name = m->names[i];
        memcpy(rt[i].ne, m->ne[i], sizeof rt[i].ne);
        rt[i].type = IQF_TYPE_F32;
    }
    qsort(rt, (size_t)m->n, sizeof rt[0], cmp_t); /* weight_name_comparer */
    iqf_recipe_opts o;
    memset(&o, 0, sizeof o);
    o.ftype = IQF_FTYPE_MOSTLY_Q8_0;
    o.output_tensor_type = o.token_embedding_type = -1;
    o.quantize_output_tensor = true;
    /* allows_quantization: iqforge's (from a plan's choice) against llama's */
    iqf_recipe_model hp;
    memset(&hp, 0, sizeof hp);
    snprintf(hp.arch, sizeof hp.arch, "%s", m->arch);
    hp.n_layer = m->n_layer, hp.n_head = m->n_head, hp.n_head_kv = m->n_head_kv, hp.n_expert = m->n_expert;
    char err[256] = "";
    CHECK(iqf_recipe_plan(&hp, &o, rt, m->n, rc, NULL, err, sizeof err) == IQF_OK, "%s: plan: %s", m->arch, err);
    static iqf_recipe_tensor qt[MAXT];
    for (int i = 0; i < m->n; i++) {
        void *t = e->new_tensor_4d(ctx, IQF_TYPE_F32, rt[i].ne[0], rt[i].ne[1], rt[i].ne[2], rt[i].ne[3]);
        e->set_name(t, rt[i].name);
        const bool la = e->allows(qs, t);
        CHECK(la == rc[i].allows_quantization, "%s %s: llama %s it", m->arch, rt[i].name, la ? "quantizes" : "keeps");
        if (la) gt[nt] = t, qt[nt++] = rt[i];
    }
    static int lt[MAXT];
    static const int ftypes[] = {
        IQF_FTYPE_MOSTLY_Q4_0, IQF_FTYPE_MOSTLY_Q4_1, IQF_FTYPE_MOSTLY_Q5_0, IQF_FTYPE_MOSTLY_Q5_1,
        IQF_FTYPE_MOSTLY_Q8_0, IQF_FTYPE_MOSTLY_Q2_K, IQF_FTYPE_MOSTLY_Q2_K_S, IQF_FTYPE_MOSTLY_Q3_K_S,
        IQF_FTYPE_MOSTLY_Q3_K_M, IQF_FTYPE_MOSTLY_Q3_K_L, IQF_FTYPE_MOSTLY_Q4_K_S, IQF_FTYPE_MOSTLY_Q4_K_M,
        IQF_FTYPE_MOSTLY_Q5_K_S, IQF_FTYPE_MOSTLY_Q5_K_M, IQF_FTYPE_MOSTLY_Q6_K, IQF_FTYPE_MOSTLY_IQ2_XXS,
        IQF_FTYPE_MOSTLY_IQ2_XS, IQF_FTYPE_MOSTLY_IQ2_S, IQF_FTYPE_MOSTLY_IQ2_M, IQF_FTYPE_MOSTLY_IQ3_XS,
        IQF_FTYPE_MOSTLY_IQ3_XXS, IQF_FTYPE_MOSTLY_IQ3_S, IQF_FTYPE_MOSTLY_IQ3_M, IQF_FTYPE_MOSTLY_IQ1_S,
        IQF_FTYPE_MOSTLY_IQ1_M, IQF_FTYPE_MOSTLY_IQ4_NL, IQF_FTYPE_MOSTLY_IQ4_XS, IQF_FTYPE_MOSTLY_F16,
        IQF_FTYPE_MOSTLY_BF16, IQF_FTYPE_ALL_F32, IQF_FTYPE_MOSTLY_TQ1_0, IQF_FTYPE_MOSTLY_TQ2_0,
        IQF_FTYPE_MOSTLY_MXFP4_MOE, IQF_FTYPE_MOSTLY_Q1_0, IQF_FTYPE_MOSTLY_Q2_0,
    };
    for (size_t f = 0; f < sizeof ftypes / sizeof ftypes[0]; f++) {
        const int ft = ftypes[f];
        if (throws_in_llama(m, ft)) continue;
        for (int i = 0; i < nt; i++) lt[i] = -1;
        e->compute_types(qs, ft, gt, lt, (size_t)nt);
        o.ftype = ft;
        err[0] = 0;
        const iqf_status st = iqf_recipe_plan(&hp, &o, qt, nt, rc, NULL, err, sizeof err);
        CHECK(st == IQF_OK, "%s %s: plan: %s", m->arch, iqf_ftype_name(ft), err);
        if (st) continue;
        int bad = 0;
        for (int i = 0; i < nt; i++)
            if (rc[i].type != lt[i] && bad++ < 4)
                CHECK(0, "%s %s %s: iqforge %s, llama %s", m->arch, iqf_ftype_name(ft), qt[i].name, tn(rc[i].type),
                      tn(lt[i]));
        CHECK(bad == 0, "%s %s: %d tensors differ", m->arch, iqf_ftype_name(ft), bad);
        n_compared++;
    }
    e->ggml_free(ctx);
    e->quant_free(qs);
    e->model_free(lm);
}

int main(void) {
    oracle_require();
    ext_api e;
    if (!ext_load(&e)) {
        CHECK(0, "libllama's llama_quant_* helpers (llama-ext.h) are not in the oracle");
        return test_finish("test_recipe_oracle");
    }
    lo_api *api = lo_load();
    CHECK(lo_check_layout(api), "llama_model_quantize_params layout");
    const lo_quantize_params lp = api->default_params();

    static model m;
    dense(&m, "llama", 16, 256, 512, true); /* n_gqa 4, use_more_bits layers */
    compare(&e, &lp, &m);
    dense(&m, "qwen2", 4, 256, 768, false); /* tied embeddings */
    compare(&e, &lp, &m);
    dense(&m, "llama", 2, 96, 384, true); /* 32- but not 64/128/256-multiples: fallbacks */
    compare(&e, &lp, &m);
    dense(&m, "llama", 2, 80, 160, true); /* not a multiple of 32: F16 */
    compare(&e, &lp, &m);
    dense(&m, "llama", 2, 640, 1280, true); /* 128- but not 256-multiple */
    compare(&e, &lp, &m);
    falcon(&m);
    compare(&e, &lp, &m);
    moe(&m, "qwen3moe", 8, 256);
    compare(&e, &lp, &m);
    moe(&m, "gpt-oss", 4, 2880 / 10); /* 288: a 32-multiple only */
    compare(&e, &lp, &m);
    mla(&m, "deepseek2");
    compare(&e, &lp, &m);
    mla(&m, "bailingmoe3");
    compare(&e, &lp, &m);
    CHECK(n_compared > 300, "%d plans compared", n_compared);

    /* MXFP4_MOE's bailingmoe3 exception, explicitly: attn_k_b stays q8_0 there, mxfp4 elsewhere */
    {
        static iqf_recipe_tensor t[2];
        static iqf_recipe_choice c[2];
        t[0].name = "blk.0.attn_k_b.weight", t[1].name = "blk.0.ffn_up_exps.weight";
        for (int i = 0; i < 2; i++) t[i].ne[0] = 128, t[i].ne[1] = 128, t[i].ne[2] = 4, t[i].ne[3] = 1;
        iqf_recipe_model hp = { "bailingmoe3", 1, 4, 4, 4, 0 };
        iqf_recipe_opts o;
        memset(&o, 0, sizeof o);
        o.ftype = IQF_FTYPE_MOSTLY_MXFP4_MOE;
        o.output_tensor_type = o.token_embedding_type = -1;
        o.quantize_output_tensor = true;
        CHECK(iqf_recipe_plan(&hp, &o, t, 2, c, NULL, NULL, 0) == IQF_OK, "plan");
        CHECK(c[0].type == IQF_TYPE_Q8_0 && c[1].type == IQF_TYPE_MXFP4, "bailingmoe3: %s %s", tn(c[0].type), tn(c[1].type));
        snprintf(hp.arch, sizeof hp.arch, "deepseek2");
        CHECK(iqf_recipe_plan(&hp, &o, t, 2, c, NULL, NULL, 0) == IQF_OK, "plan");
        CHECK(c[0].type == IQF_TYPE_MXFP4 && c[1].type == IQF_TYPE_MXFP4, "deepseek2: %s %s", tn(c[0].type), tn(c[1].type));
    }

    /* No fallback: Q1_0 rows must be a multiple of 128, NVFP4 rows of 64 (llama throws "no tensor
     * type fallback is defined"); the message names the tensor and the row length. */
    {
        static iqf_recipe_tensor t[1];
        static iqf_recipe_choice c[1];
        t[0].name = "blk.0.attn_q.weight";
        t[0].ne[0] = 96, t[0].ne[1] = 96, t[0].ne[2] = t[0].ne[3] = 1;
        iqf_recipe_model hp = { "llama", 1, 4, 4, 0, 0 };
        iqf_recipe_opts o;
        memset(&o, 0, sizeof o);
        o.output_tensor_type = o.token_embedding_type = -1;
        o.quantize_output_tensor = true;
        const int fts[] = { IQF_FTYPE_MOSTLY_Q1_0, IQF_FTYPE_MOSTLY_NVFP4 };
        for (int k = 0; k < 2; k++) {
            char err[256] = "";
            o.ftype = fts[k];
            CHECK(iqf_recipe_plan(&hp, &o, t, 1, c, NULL, err, sizeof err) == IQF_E_UNSUPPORTED &&
                      strstr(err, "blk.0.attn_q.weight") && strstr(err, "96") && strstr(err, "no fallback"),
                  "%s refused: %s", iqf_ftype_name(fts[k]), err);
        }
        t[0].ne[0] = 128; /* a whole block: fine (nvfp4 64 | 128) */
        for (int k = 0; k < 2; k++) {
            o.ftype = fts[k];
            CHECK(iqf_recipe_plan(&hp, &o, t, 1, c, NULL, NULL, 0) == IQF_OK &&
                      c[0].type == iqf_ftype_default_type(fts[k]),
                  "%s at 128", iqf_ftype_name(fts[k]));
        }
    }
    return test_finish("test_recipe_oracle");
}
