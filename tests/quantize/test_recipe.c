/*
 * test_recipe.c - llama-quantize's per-tensor type choice (src/quantize/recipe.c) against the
 * behaviour observed with llama-quantize (FORMATS.md section 10: tiny llama models with 16 layers,
 * n_gqa 4) and the rules of llama 0.25.1's llama-quant.cpp: fallbacks, overrides, ordering.
 * The byte-level differential against the oracle is in test_quantize_oracle.c.
 */
#include "quantize/recipe.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 200

typedef struct model {
    iqf_recipe_tensor t[MAXT];
    char names[MAXT][64];
    int n;
} model;

static void add(model *m, const char *name, int64_t ne0, int64_t ne1, int type) {
    snprintf(m->names[m->n], 64, "%s", name);
    iqf_recipe_tensor *t = &m->t[m->n];
    t->name = m->names[m->n];
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->ne[2] = t->ne[3] = 1;
    t->type = type;
    m->n++;
}

static int cmp_t(const void *a, const void *b) {
    return iqf_recipe_name_cmp(((const iqf_recipe_tensor *)a)->name, ((const iqf_recipe_tensor *)b)->name);
}

/* A llama model: n_embd 256, n_ff 512, vocab 512, given layers; sorted in loader order. */
static void llama(model *m, int n_layer, int64_t n_embd, int64_t n_kv, bool with_output) {
    m->n = 0;
    add(m, "token_embd.weight", n_embd, 512, IQF_TYPE_F16);
    add(m, "output_norm.weight", n_embd, 1, IQF_TYPE_F32);
    if (with_output) add(m, "output.weight", n_embd, 512, IQF_TYPE_F16);
    for (int l = 0; l < n_layer; l++) {
        char b[64];
#define T(suffix, a, c, ty)                                 \
    snprintf(b, sizeof b, "blk.%d." suffix, l);             \
    add(m, b, a, c, ty)
        T("attn_norm.weight", n_embd, 1, IQF_TYPE_F32);
        T("attn_q.weight", n_embd, n_embd, IQF_TYPE_F16);
        T("attn_k.weight", n_embd, n_kv, IQF_TYPE_F16);
        T("attn_v.weight", n_embd, n_kv, IQF_TYPE_F16);
        T("attn_output.weight", n_embd, n_embd, IQF_TYPE_F16);
        T("ffn_norm.weight", n_embd, 1, IQF_TYPE_F32);
        T("ffn_gate.weight", n_embd, 512, IQF_TYPE_F16);
        T("ffn_up.weight", n_embd, 512, IQF_TYPE_F16);
        T("ffn_down.weight", 512, n_embd, IQF_TYPE_F16);
#undef T
    }
    qsort(m->t, (size_t)m->n, sizeof m->t[0], cmp_t);
}

static iqf_recipe_opts opts_for(int ftype, bool imatrix) {
    iqf_recipe_opts o;
    memset(&o, 0, sizeof o);
    o.ftype = ftype;
    o.output_tensor_type = -1;
    o.token_embedding_type = -1;
    o.quantize_output_tensor = true;
    o.has_imatrix = imatrix;
    return o;
}

static int type_of(const model *m, const iqf_recipe_choice *c, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return c[i].type;
    return -99;
}

static const char *tn(int t) {
    const iqf_type_info *ti = iqf_type_get(t);
    return ti ? ti->name : "?";
}

#define EXPECT_TYPE(m, c, name, want)                                                          \
    do {                                                                                       \
        int got_ = type_of(m, c, name);                                                        \
        CHECK(got_ == (want), "%s: got %s, want %s", name, tn(got_), tn(want));               \
    } while (0)

static void plan(const model *m, const iqf_recipe_model *hp, const iqf_recipe_opts *o, iqf_recipe_choice *c) {
    char err[256] = "";
    int nf = 0;
    iqf_status st = iqf_recipe_plan(hp, o, m->t, m->n, c, &nf, err, sizeof err);
    CHECK(st == IQF_OK, "plan failed: %s", err);
}

int main(void) {
    static model m;
    static iqf_recipe_choice c[MAXT];
    iqf_recipe_model hp = { "llama", 16, 8, 2, 0, 0 }; /* n_gqa 4 */
    char name[64];

    /* Names, order. */
    CHECK(iqf_ftype_from_name("iq3_xxs") == IQF_FTYPE_MOSTLY_IQ3_XXS, "iq3_xxs");
    CHECK(iqf_ftype_from_name("Q4_K") == IQF_FTYPE_MOSTLY_Q4_K_M, "Q4_K alias");
    CHECK(iqf_ftype_from_name("15") == IQF_FTYPE_MOSTLY_Q4_K_M, "numeric");
    CHECK(iqf_ftype_from_name("Q4_K_X") == -1, "bad name");
    CHECK(iqf_ftype_from_name("4") == -1, "removed id");
    CHECK(!strcmp(iqf_ftype_name(IQF_FTYPE_MOSTLY_Q4_K_M), "Q4_K_M"), "name of 15");
    CHECK(!strcmp(iqf_ftype_name(IQF_FTYPE_MOSTLY_Q3_K_M), "Q3_K_M"), "name of 12");
    CHECK(iqf_ftype_default_type(IQF_FTYPE_MOSTLY_IQ2_S) == IQF_TYPE_IQ2_XS, "IQ2_S -> iq2_xs");
    CHECK(iqf_ftype_default_type(IQF_FTYPE_MOSTLY_IQ3_M) == IQF_TYPE_IQ3_S, "IQ3_M -> iq3_s");
    /* the file types of llama.h's ids 36..41 */
    CHECK(iqf_ftype_from_name("mxfp4_moe") == 38 && iqf_ftype_from_name("TQ1_0") == 36 && iqf_ftype_from_name("TQ2_0") == 37 &&
              iqf_ftype_from_name("NVFP4") == 39 && iqf_ftype_from_name("Q1_0") == 40 && iqf_ftype_from_name("41") == 41,
          "new file type ids");
    CHECK(iqf_ftype_default_type(IQF_FTYPE_MOSTLY_MXFP4_MOE) == IQF_TYPE_MXFP4 &&
              iqf_ftype_default_type(IQF_FTYPE_MOSTLY_Q2_0) == IQF_TYPE_Q2_0 &&
              iqf_ftype_default_type(IQF_FTYPE_MOSTLY_TQ1_0) == IQF_TYPE_TQ1_0 && !strcmp(iqf_ftype_name(39), "NVFP4"),
          "new file types' default types");
    CHECK(iqf_recipe_name_cmp("output.weight", "blk.0.attn_q.weight") < 0, "non-blk first");
    CHECK(iqf_recipe_name_cmp("blk.2.ffn_up.weight", "blk.10.attn_q.weight") < 0, "numeric layer order");
    CHECK(iqf_recipe_name_cmp("blk.1.attn_q.weight", "blk.1.attn_k.weight") > 0, "then by name");
    int64_t ne[4] = { 64, 1, 1, 1 };
    CHECK(iqf_recipe_n_dims(ne) == 1, "n_dims 1");
    ne[2] = 3;
    CHECK(iqf_recipe_n_dims(ne) == 3, "n_dims 3");

    /* IQ3_XXS with imatrix (FORMATS.md section 10 table). */
    llama(&m, 16, 256, 64, true);
    iqf_recipe_opts o = opts_for(IQF_FTYPE_MOSTLY_IQ3_XXS, true);
    plan(&m, &hp, &o, c);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_Q5_K);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "output_norm.weight", IQF_TYPE_F32);
    for (int l = 0; l < 16; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_IQ2_S);
        snprintf(name, sizeof name, "blk.%d.attn_k.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_IQ2_S);
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_IQ3_S);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_IQ3_XXS);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
        EXPECT_TYPE(&m, c, name, IQF_TYPE_IQ3_XXS);
    }
    for (int i = 0; i < m.n; i++)
        if (strstr(m.t[i].name, "attn_q")) CHECK(c[i].requires_imatrix, "%s requires imatrix", m.t[i].name);
    CHECK(!c[0].requires_imatrix, "token_embd never requires an imatrix");

    /* IQ3_XXS without imatrix: attn_v (n_gqa 1) iq3_s, ffn_down q4_K for i < n/8 else q3_K. */
    iqf_recipe_model hp1 = { "llama", 16, 8, 8, 0, 0 };
    llama(&m, 16, 256, 256, true);
    o = opts_for(IQF_FTYPE_MOSTLY_IQ3_XXS, false);
    plan(&m, &hp1, &o, c);
    EXPECT_TYPE(&m, c, "blk.3.attn_v.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "blk.1.ffn_down.weight", IQF_TYPE_Q4_K);
    EXPECT_TYPE(&m, c, "blk.2.ffn_down.weight", IQF_TYPE_Q3_K);
    o.has_imatrix = true;
    plan(&m, &hp1, &o, c);
    EXPECT_TYPE(&m, c, "blk.3.attn_v.weight", IQF_TYPE_IQ3_XXS);

    /* IQ2_S: ffn_down 0-1 iq3_s, 2-15 iq2_xs; token_embd iq3_s; attn_output iq3_s. */
    llama(&m, 16, 256, 64, true);
    o = opts_for(IQF_FTYPE_MOSTLY_IQ2_S, true);
    plan(&m, &hp, &o, c);
    EXPECT_TYPE(&m, c, "blk.0.ffn_down.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "blk.1.ffn_down.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "blk.2.ffn_down.weight", IQF_TYPE_IQ2_XS);
    EXPECT_TYPE(&m, c, "blk.15.ffn_down.weight", IQF_TYPE_IQ2_XS);
    EXPECT_TYPE(&m, c, "blk.5.attn_q.weight", IQF_TYPE_IQ2_XS);
    EXPECT_TYPE(&m, c, "blk.5.attn_v.weight", IQF_TYPE_Q4_K);
    EXPECT_TYPE(&m, c, "blk.5.attn_output.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_IQ3_S);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_Q5_K);

    /* Q4_K_M: attn_v and ffn_down q6_K on layers 0,1,4,7,10,13,14,15. */
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    plan(&m, &hp, &o, c);
    const int more[] = { 1, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 1 };
    for (int l = 0; l < 16; l++) {
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", l);
        EXPECT_TYPE(&m, c, name, more[l] ? IQF_TYPE_Q6_K : IQF_TYPE_Q4_K);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        EXPECT_TYPE(&m, c, name, more[l] ? IQF_TYPE_Q6_K : IQF_TYPE_Q4_K);
    }
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_Q6_K);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_Q4_K);

    /* Tied embeddings: token_embd takes the output rule. */
    llama(&m, 4, 256, 64, false);
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    iqf_recipe_model hp4 = { "llama", 4, 8, 2, 0, 0 };
    plan(&m, &hp4, &o, c);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_Q6_K);

    /* Fallbacks: n_embd 96 (multiple of 32, not 256) and 80 (not a multiple of 32). */
    llama(&m, 2, 96, 96, true);
    iqf_recipe_model hp2 = { "llama", 2, 4, 4, 0, 0 };
    o = opts_for(IQF_FTYPE_MOSTLY_IQ3_XXS, true);
    int nf = 0;
    char err[256];
    CHECK(iqf_recipe_plan(&hp2, &o, m.t, m.n, c, &nf, err, sizeof err) == IQF_OK, "plan");
    EXPECT_TYPE(&m, c, "blk.0.attn_q.weight", IQF_TYPE_IQ4_NL);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_Q8_0);
    EXPECT_TYPE(&m, c, "blk.0.ffn_down.weight", IQF_TYPE_IQ3_XXS); /* ne0 = 512 */
    CHECK(nf == 2 * 6 + 1, "fallback count %d", nf); /* q,k,v,o,gate,up per layer + token_embd */
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    plan(&m, &hp2, &o, c);
    EXPECT_TYPE(&m, c, "blk.0.attn_q.weight", IQF_TYPE_Q5_0);
    EXPECT_TYPE(&m, c, "blk.1.attn_v.weight", IQF_TYPE_Q8_0); /* q6_K -> q8_0 */
    llama(&m, 2, 80, 80, true);
    plan(&m, &hp2, &o, c);
    EXPECT_TYPE(&m, c, "blk.0.attn_q.weight", IQF_TYPE_F16);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_F16);

    /* Overrides. */
    llama(&m, 2, 256, 64, true);
    iqf_recipe_override ov[2];
    CHECK(regcomp(&ov[0].re, "attn_q", REG_EXTENDED | REG_NOSUB) == 0, "regcomp");
    ov[0].type = IQF_TYPE_Q8_0;
    CHECK(regcomp(&ov[1].re, "blk\\.1\\.ffn_(up|gate)", REG_EXTENDED | REG_NOSUB) == 0, "regcomp");
    ov[1].type = IQF_TYPE_Q5_K;
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    o.overrides = ov;
    o.n_overrides = 2;
    o.output_tensor_type = IQF_TYPE_Q8_0;
    o.token_embedding_type = IQF_TYPE_F16;
    iqf_recipe_model hpo = { "llama", 2, 8, 2, 0, 0 };
    plan(&m, &hpo, &o, c);
    EXPECT_TYPE(&m, c, "blk.0.attn_q.weight", IQF_TYPE_Q8_0);
    EXPECT_TYPE(&m, c, "blk.1.ffn_up.weight", IQF_TYPE_Q5_K);
    EXPECT_TYPE(&m, c, "blk.0.ffn_up.weight", IQF_TYPE_Q4_K);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_Q8_0);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_F16);
    regfree(&ov[0].re);
    regfree(&ov[1].re);

    /* --pure and --leave-output-tensor. */
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    o.pure = true;
    o.quantize_output_tensor = false;
    plan(&m, &hpo, &o, c);
    EXPECT_TYPE(&m, c, "output.weight", IQF_TYPE_F16);
    EXPECT_TYPE(&m, c, "token_embd.weight", IQF_TYPE_Q4_K);
    EXPECT_TYPE(&m, c, "blk.0.attn_v.weight", IQF_TYPE_Q4_K);
    EXPECT_TYPE(&m, c, "blk.0.ffn_down.weight", IQF_TYPE_Q4_K);

    /* Q2_K_S: Q2_K tensors require an imatrix. */
    o = opts_for(IQF_FTYPE_MOSTLY_Q2_K_S, false);
    plan(&m, &hpo, &o, c);
    for (int i = 0; i < m.n; i++)
        if (!strcmp(m.t[i].name, "blk.1.ffn_up.weight"))
            CHECK(c[i].type == IQF_TYPE_Q2_K && c[i].requires_imatrix, "q2_K_S ffn_up");

    /* MoE with 8 experts: layer from the name; a name without a layer is an error. */
    iqf_recipe_model hpm = { "llama", 2, 8, 2, 8, 0 };
    m.n = 0;
    add(&m, "blk.0.ffn_down_exps.weight", 512, 256, IQF_TYPE_F16);
    m.t[0].ne[2] = 8;
    add(&m, "blk.0.attn_v.weight", 256, 64, IQF_TYPE_F16);
    add(&m, "blk.0.attn_k.weight", 256, 64, IQF_TYPE_F16);
    o = opts_for(IQF_FTYPE_MOSTLY_Q4_K_M, false);
    plan(&m, &hpm, &o, c);
    EXPECT_TYPE(&m, c, "blk.0.attn_v.weight", IQF_TYPE_Q8_0);
    EXPECT_TYPE(&m, c, "blk.0.attn_k.weight", IQF_TYPE_Q8_0);
    EXPECT_TYPE(&m, c, "blk.0.ffn_down_exps.weight", IQF_TYPE_Q4_K);
    m.n = 0;
    add(&m, "ffn_down.weight", 512, 256, IQF_TYPE_F16);
    CHECK(iqf_recipe_plan(&hpm, &o, m.t, m.n, c, &nf, err, sizeof err) != IQF_OK && strstr(err, "layer"),
          "MoE ffn_down without a layer must fail");

    /* The 70B rule (llama's LLM_TYPE_70B) on n_layer() = block_count - nextn_predict_layers:
     * Q2_K's attn_v at n_gqa 4 is Q4_K, raised to Q5_K on a 70B llama (80 layers, GQA). */
    llama(&m, 2, 256, 64, true);
    o = opts_for(IQF_FTYPE_MOSTLY_Q2_K, false);
    static const struct { int n_layer, nextn, n_head_kv; const char *arch; int want; } r70[] = {
        { 80, 0, 2, "llama", IQF_TYPE_Q5_K }, { 81, 1, 2, "llama", IQF_TYPE_Q5_K }, { 80, 1, 2, "llama", IQF_TYPE_Q4_K },
        { 80, 0, 8, "llama", IQF_TYPE_Q3_K /* 65B: no GQA, n_gqa 1 */ }, { 80, 0, 2, "qwen2", IQF_TYPE_Q5_K },
        { 68, 0, 2, "jais2", IQF_TYPE_Q5_K }, { 80, 0, 2, "qwen3", IQF_TYPE_Q4_K },
    };
    for (size_t k = 0; k < sizeof r70 / sizeof r70[0]; k++) {
        iqf_recipe_model h70 = { "", r70[k].n_layer, 8, r70[k].n_head_kv, 0, r70[k].nextn };
        snprintf(h70.arch, sizeof h70.arch, "%s", r70[k].arch);
        plan(&m, &h70, &o, c);
        CHECK(type_of(&m, c, "blk.1.attn_v.weight") == r70[k].want, "70B rule: %s %d layers (nextn %d), n_head_kv %d: attn_v %s, want %s",
              r70[k].arch, r70[k].n_layer, r70[k].nextn, r70[k].n_head_kv, tn(type_of(&m, c, "blk.1.attn_v.weight")), tn(r70[k].want));
    }

    return test_finish("test_recipe");
}
