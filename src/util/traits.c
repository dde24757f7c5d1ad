/*
 * traits.c - the per-type facts table (see traits.h for what each column means and where it
 * comes from), and what derives from it: the llama file type names (iqf_ftype_*), the format
 * family (iqf_type_family), the help's listing (iqf_ftype_at), --target-size's candidates. One
 * row per type id of types.c; ids ggml removed have none.
 */
#include "traits.h"

#include <assert.h>
#include <stdlib.h>
#include <strings.h>

#define FT(x) IQF_FTYPE_##x
#define T(x) IQF_TYPE_##x
/* a file type name and its id */
#define N(name, x) { name, FT(x), NULL }
/* --target-size candidate rows */
#define R256 IQF_TARGET_ROWS_256
#define ROTHER IQF_TARGET_ROWS_OTHER
#define RALL (IQF_TARGET_ROWS_256 | IQF_TARGET_ROWS_OTHER)

/* Rows of types that are not weights: no family of their own, no file type. */
#define NOT_WEIGHT(fb, act) { .family = IQF_FAMILY_OTHER, .act_type = (act), .fallback = (fb), .ftype = -1 }

/* target_rank: --target-size's candidates, the FP4 types last (so the order of the others stays
 * what it was before they came); the 32-blocks (q4_0 .. q5_1, iq4_nl) only for rows that are not a
 * multiple of 256. Not candidates (rank 0): q1_0, q2_0, tq1_0, tq2_0, the formats of models
 * trained binary/ternary, whose errors on other weights lie far past the calibration's probe
 * (quantize/target.c). Ranks step by 10: a new type slots in without renumbering. */
static const iqf_type_traits traits[] = {
    /* floats */
    [T(F32)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(F32), .fallback = T(F32), .ftype = FT(ALL_F32),
                 .ftypes = { N("F32", ALL_F32) } },
    [T(F16)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(F16), .fallback = T(F16), .ftype = FT(MOSTLY_F16),
                 .ftypes = { N("F16", MOSTLY_F16) }, .target_rank = 200, .target_rows = RALL },
    [T(BF16)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(BF16), .fallback = T(BF16), .ftype = FT(MOSTLY_BF16),
                  .ftypes = { N("BF16", MOSTLY_BF16) } },

    /* legacy: 32-weight blocks (llama has no fallback case for them: F16) */
    [T(Q4_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q4_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS,
                  .ftypes = { N("Q4_0", MOSTLY_Q4_0) }, .target_rank = 150, .target_rows = ROTHER },
    [T(Q4_1)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_1), .fallback = T(Q4_1), .ftype = FT(MOSTLY_Q4_1),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS,
                  .ftypes = { N("Q4_1", MOSTLY_Q4_1) }, .target_rank = 160, .target_rows = ROTHER },
    [T(Q5_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q5_0), .ftype = FT(MOSTLY_Q5_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS,
                  .ftypes = { N("Q5_0", MOSTLY_Q5_0) }, .target_rank = 170, .target_rows = ROTHER },
    [T(Q5_1)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_1), .fallback = T(Q5_1), .ftype = FT(MOSTLY_Q5_1),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS,
                  .ftypes = { N("Q5_1", MOSTLY_Q5_1) }, .target_rank = 180, .target_rows = ROTHER },
    [T(Q8_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q8_0), .ftype = FT(MOSTLY_Q8_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_BEST,
                  .ftypes = { N("Q8_0", MOSTLY_Q8_0) }, .target_rank = 190, .target_rows = RALL },

    /* K-quants: 256-weight super-blocks */
    [T(Q2_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q2_K),
                  .fb = IQF_FB_SCALAR, .fb_refine = true,
                  .ftypes = { N("Q2_K", MOSTLY_Q2_K), N("Q2_K_S", MOSTLY_Q2_K_S) }, .target_rank = 60, .target_rows = R256 },
    /* q3_K keeps full re-encodings, the second only after a gain of 5% (feedback.c) */
    [T(Q3_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q3_K_M),
                  .fb = IQF_FB_SCALAR, .fb_tau = 0.05,
                  .ftypes = { N("Q3_K", MOSTLY_Q3_K_M), N("Q3_K_S", MOSTLY_Q3_K_S), N("Q3_K_M", MOSTLY_Q3_K_M),
                              N("Q3_K_L", MOSTLY_Q3_K_L) },
                  .target_rank = 90, .target_rows = R256 },
    [T(Q4_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q5_0), .ftype = FT(MOSTLY_Q4_K_M),
                  .fb = IQF_FB_SCALAR, .fb_refine = true,
                  .ftypes = { N("Q4_K", MOSTLY_Q4_K_M), N("Q4_K_S", MOSTLY_Q4_K_S), N("Q4_K_M", MOSTLY_Q4_K_M) }, .target_rank = 110, .target_rows = R256 },
    [T(Q5_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q5_1), .ftype = FT(MOSTLY_Q5_K_M),
                  .fb = IQF_FB_SCALAR, .fb_refine = true,
                  .ftypes = { N("Q5_K", MOSTLY_Q5_K_M), N("Q5_K_S", MOSTLY_Q5_K_S), N("Q5_K_M", MOSTLY_Q5_K_M) }, .target_rank = 120, .target_rows = R256 },
    [T(Q6_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q8_0), .ftype = FT(MOSTLY_Q6_K),
                  .fb = IQF_FB_SCALAR, .fb_refine = true,
                  .ftypes = { N("Q6_K", MOSTLY_Q6_K) }, .target_rank = 130, .target_rows = R256 },

    /* IQ types (256-weight blocks fall back to iq4_nl) */
    [T(IQ2_XXS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                     .llama_imatrix = true, .ftype = FT(MOSTLY_IQ2_XXS), .fb = IQF_FB_GRID, .fb_warm_iters = 2,
                     .fb_warm_tau = 0.02,
                     .ftypes = { N("IQ2_XXS", MOSTLY_IQ2_XXS) }, .target_rank = 30, .target_rows = R256 },
    [T(IQ2_XS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                    .llama_imatrix = true, .ftype = FT(MOSTLY_IQ2_XS), .fb = IQF_FB_GRID, .fb_warm_iters = 2,
                    .fb_warm_tau = 0.02,
                    .ftypes = { N("IQ2_XS", MOSTLY_IQ2_XS), N("IQ2_S", MOSTLY_IQ2_S) }, .target_rank = 40, .target_rows = R256 },
    [T(IQ2_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                   .ftype = FT(MOSTLY_IQ2_S), .fb = IQF_FB_GRID, .fb_warm_iters = 2, .fb_warm_tau = 0.02,
                   .ftypes = { N("IQ2_M", MOSTLY_IQ2_M) }, .target_rank = 50, .target_rows = R256 },
    [T(IQ3_XXS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                     .ftype = FT(MOSTLY_IQ3_XXS), .fb = IQF_FB_GRID, .fb_warm_iters = 1, .fb_warm_tau = 0,
                     .ftypes = { N("IQ3_XXS", MOSTLY_IQ3_XXS) }, .target_rank = 70, .target_rows = R256 },
    /* iq3_s keeps two full re-encodings: warm ones cost the IQ3_S file 1.5-2% KLD */
    [T(IQ3_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ3_S),
                   .fb = IQF_FB_GRID,
                   .ftypes = { N("IQ3_XS", MOSTLY_IQ3_XS), N("IQ3_S", MOSTLY_IQ3_S), N("IQ3_M", MOSTLY_IQ3_M) }, .target_rank = 80, .target_rows = R256 },
    [T(IQ1_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                   .llama_imatrix = true, .ftype = FT(MOSTLY_IQ1_S),
                   .ftypes = { N("IQ1_S", MOSTLY_IQ1_S) }, .target_rank = 10, .target_rows = R256 },
    [T(IQ1_M)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                   .ftype = FT(MOSTLY_IQ1_M),
                   .ftypes = { N("IQ1_M", MOSTLY_IQ1_M) }, .target_rank = 20, .target_rows = R256 },
    [T(IQ4_NL)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_0), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ4_NL),
                    .fb = IQF_FB_SCALAR,
                    .ftypes = { N("IQ4_NL", MOSTLY_IQ4_NL) }, .target_rank = 140, .target_rows = ROTHER },
    [T(IQ4_XS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ4_XS),
                    .fb = IQF_FB_SCALAR,
                    .ftypes = { N("IQ4_XS", MOSTLY_IQ4_XS) }, .target_rank = 100, .target_rows = R256 },

    /* FP4: mxfp4 (32-weight blocks: F16 fallback), nvfp4 (64: llama has no fallback) */
    [T(MXFP4)] = { .family = IQF_FAMILY_FP4, .act_type = T(Q8_0), .fallback = T(MXFP4), .ftype = FT(MOSTLY_MXFP4_MOE),
                   .ftypes = { { "MXFP4_MOE", FT(MOSTLY_MXFP4_MOE), "experts mxfp4, the rest q8_0" } }, .target_rank = 250, .target_rows = RALL },
    /* NVFP4: not in llama-quantize's list, and llama 0.25.1's llama_ftype_get_default_type has no
     * case for it (llama_model_quantize refuses file type 39): iqforge's NVFP4 file is the general
     * rules with nvfp4 as the default type. */
    [T(NVFP4)] = { .family = IQF_FAMILY_FP4, .act_type = T(Q8_0), .fallback = IQF_NO_FALLBACK, .ftype = FT(MOSTLY_NVFP4),
                   .ftypes = { N("NVFP4", MOSTLY_NVFP4) }, .target_rank = 260, .target_rows = RALL },

    /* ternary / binary (q1_0: 128-weight blocks, no fallback) */
    [T(TQ1_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_TQ1_0),
                   .ftypes = { N("TQ1_0", MOSTLY_TQ1_0) } },
    [T(TQ2_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_TQ2_0),
                   .ftypes = { N("TQ2_0", MOSTLY_TQ2_0) } },
    [T(Q1_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_0), .fallback = IQF_NO_FALLBACK, .ftype = FT(MOSTLY_Q1_0),
                  .ftypes = { N("Q1_0", MOSTLY_Q1_0) } },
    [T(Q2_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_0), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q2_0),
                  .ftypes = { N("Q2_0", MOSTLY_Q2_0) } },

    /* not weights: activation blocks, integers, f64 (ggml's CPU traits set no vec_dot_type: F32) */
    [T(Q8_1)] = NOT_WEIGHT(T(Q8_1), T(Q8_1)),
    [T(Q8_K)] = NOT_WEIGHT(IQF_NO_FALLBACK, T(F32)),
    [T(I8)] = NOT_WEIGHT(T(I8), T(F32)),
    [T(I16)] = NOT_WEIGHT(T(I16), T(F32)),
    [T(I32)] = NOT_WEIGHT(T(I32), T(F32)),
    [T(I64)] = NOT_WEIGHT(T(I64), T(F32)),
    [T(F64)] = NOT_WEIGHT(T(F64), T(F32)),
};

static_assert(sizeof traits / sizeof traits[0] == IQF_TYPE_COUNT,
              "the traits table needs a row for every type id up to IQF_TYPE_COUNT - 1");

const iqf_type_traits *iqf_traits(int type) {
    if (type < 0 || type >= IQF_TYPE_COUNT) return NULL;
    const iqf_type_traits *t = &traits[type];
    return t->family != IQF_FAMILY_NONE ? t : NULL;
}

iqf_family iqf_type_family(int type) {
    const iqf_type_traits *t = iqf_traits(type);
    return t ? t->family : IQF_FAMILY_NONE;
}

int iqf_type_fallback(int type) {
    const iqf_type_traits *t = iqf_traits(type);
    return t ? t->fallback : IQF_NO_FALLBACK;
}

/* ------------------------------------------------------------------------------------------
 * File types: every name sits in the row of its default type
 * ---------------------------------------------------------------------------------------- */
#define FOR_EACH_FTYPE(e)                                                                       \
    for (int t_ = 0; t_ < IQF_TYPE_COUNT; t_++)                                                 \
        for (const iqf_ftype_info *e = traits[t_].ftypes; e < traits[t_].ftypes + IQF_TRAITS_MAX_FTYPES && e->name; e++)

int iqf_ftype_from_name(const char *name) {
    if (!name || !*name) return -1;
    FOR_EACH_FTYPE(e) if (!strcasecmp(e->name, name)) return e->ftype;
    char *end;
    long v = strtol(name, &end, 10);
    if (*end || end == name) return -1;
    FOR_EACH_FTYPE(e) if (e->ftype == v) return e->ftype;
    return -1;
}

const char *iqf_ftype_name(int ftype) {
    /* The full name over the alias ("Q4_K_M", not "Q4_K"): the last one, aliases come first. */
    const char *found = NULL;
    FOR_EACH_FTYPE(e) if (e->ftype == ftype) found = e->name;
    return found;
}

int iqf_ftype_default_type(int ftype) {
    FOR_EACH_FTYPE(e) if (e->ftype == ftype) return t_;
    return -1;
}

/* Sort key of the help's listing: the family's place, then bits per weight, then id. */
static bool listed_before(int a, int b) {
    static const int place[] = { [IQF_FAMILY_IQ] = 0, [IQF_FAMILY_K] = 1, [IQF_FAMILY_LEGACY] = 2,
                                 [IQF_FAMILY_FP4] = 3, [IQF_FAMILY_LOWBIT] = 4, [IQF_FAMILY_FLOAT] = 5,
                                 [IQF_FAMILY_OTHER] = 6 };
    const int pa = place[traits[a].family], pb = place[traits[b].family];
    if (pa != pb) return pa < pb;
    const double ba = iqf_type_get(a)->bpw, bb = iqf_type_get(b)->bpw;
    if (ba != bb) return ba < bb;
    return a < b;
}

/* The first cap of the n types in buf (sorted), into out. */
static int copy_out(const int *buf, int n, int *out, int cap) {
    if (n > cap) n = cap > 0 ? cap : 0;
    for (int i = 0; i < n; i++) out[i] = buf[i];
    return n;
}

int iqf_traits_listing(int *out, int cap) {
    int buf[IQF_TYPE_COUNT], n = 0;
    for (int t = 0; t < IQF_TYPE_COUNT; t++) {
        if (!iqf_traits(t) || !traits[t].ftypes[0].name) continue;
        int i = n++;
        for (; i > 0 && listed_before(t, buf[i - 1]); i--) buf[i] = buf[i - 1];
        buf[i] = t;
    }
    return copy_out(buf, n, out, cap);
}

const iqf_ftype_info *iqf_ftype_at(int i) {
    int list[IQF_TYPE_COUNT];
    const int n = iqf_traits_listing(list, IQF_TYPE_COUNT);
    for (int k = 0; k < n && i >= 0; k++)
        for (const iqf_ftype_info *e = traits[list[k]].ftypes;
             e < traits[list[k]].ftypes + IQF_TRAITS_MAX_FTYPES && e->name; e++)
            if (i-- == 0) return e;
    return NULL;
}

/* ------------------------------------------------------------------------------------------
 * --target-size
 * ---------------------------------------------------------------------------------------- */
int iqf_traits_target_candidates(int64_t ncols, int *out, int cap) {
    const unsigned rows = ncols % 256 == 0 ? IQF_TARGET_ROWS_256 : IQF_TARGET_ROWS_OTHER;
    int buf[IQF_TYPE_COUNT], n = 0;
    for (int t = 0; t < IQF_TYPE_COUNT; t++) {
        const iqf_type_traits *tr = iqf_traits(t);
        if (!tr || tr->target_rank <= 0 || !(tr->target_rows & rows)) continue;
        int i = n++;
        for (; i > 0 && traits[buf[i - 1]].target_rank > tr->target_rank; i--) buf[i] = buf[i - 1];
        buf[i] = t;
    }
    return copy_out(buf, n, out, cap);
}
