/*
 * traits.c - the per-type facts table (see traits.h for what each column means and where it
 * comes from). One row per type id of types.c; ids ggml removed have none.
 */
#include "traits.h"

#include <assert.h>

#define FT(x) IQF_FTYPE_##x
#define T(x) IQF_TYPE_##x

/* Rows of types that are not weights: no family of their own, no file type. */
#define NOT_WEIGHT(fb, act) { .family = IQF_FAMILY_OTHER, .act_type = (act), .fallback = (fb), .ftype = -1 }

static const iqf_type_traits traits[] = {
    /* floats */
    [T(F32)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(F32), .fallback = T(F32), .ftype = FT(ALL_F32) },
    [T(F16)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(F16), .fallback = T(F16), .ftype = FT(MOSTLY_F16) },
    [T(BF16)] = { .family = IQF_FAMILY_FLOAT, .act_type = T(BF16), .fallback = T(BF16), .ftype = FT(MOSTLY_BF16) },

    /* legacy: 32-weight blocks (llama has no fallback case for them: F16) */
    [T(Q4_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q4_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS },
    [T(Q4_1)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_1), .fallback = T(Q4_1), .ftype = FT(MOSTLY_Q4_1),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS },
    [T(Q5_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q5_0), .ftype = FT(MOSTLY_Q5_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS },
    [T(Q5_1)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_1), .fallback = T(Q5_1), .ftype = FT(MOSTLY_Q5_1),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_ALWAYS },
    [T(Q8_0)] = { .family = IQF_FAMILY_LEGACY, .act_type = T(Q8_0), .fallback = T(Q8_0), .ftype = FT(MOSTLY_Q8_0),
                  .fb = IQF_FB_SCALAR, .fb_sigma2 = IQF_FB_SIGMA2_BEST },

    /* K-quants: 256-weight super-blocks */
    [T(Q2_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q2_K),
                  .fb = IQF_FB_SCALAR, .fb_refine = true },
    /* q3_K keeps full re-encodings, the second only after a gain of 5% (feedback.c) */
    [T(Q3_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q3_K_M),
                  .fb = IQF_FB_SCALAR, .fb_tau = 0.05 },
    [T(Q4_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q5_0), .ftype = FT(MOSTLY_Q4_K_M),
                  .fb = IQF_FB_SCALAR, .fb_refine = true },
    [T(Q5_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q5_1), .ftype = FT(MOSTLY_Q5_K_M),
                  .fb = IQF_FB_SCALAR, .fb_refine = true },
    [T(Q6_K)] = { .family = IQF_FAMILY_K, .act_type = T(Q8_K), .fallback = T(Q8_0), .ftype = FT(MOSTLY_Q6_K),
                  .fb = IQF_FB_SCALAR, .fb_refine = true },

    /* IQ types (256-weight blocks fall back to iq4_nl) */
    [T(IQ2_XXS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                     .llama_imatrix = true, .ftype = FT(MOSTLY_IQ2_XXS), .fb = IQF_FB_GRID, .fb_warm_iters = 2,
                     .fb_warm_tau = 0.02 },
    [T(IQ2_XS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                    .llama_imatrix = true, .ftype = FT(MOSTLY_IQ2_XS), .fb = IQF_FB_GRID, .fb_warm_iters = 2,
                    .fb_warm_tau = 0.02 },
    [T(IQ2_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                   .ftype = FT(MOSTLY_IQ2_S), .fb = IQF_FB_GRID, .fb_warm_iters = 2, .fb_warm_tau = 0.02 },
    [T(IQ3_XXS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                     .ftype = FT(MOSTLY_IQ3_XXS), .fb = IQF_FB_GRID, .fb_warm_iters = 1, .fb_warm_tau = 0 },
    /* iq3_s keeps two full re-encodings: warm ones cost the IQ3_S file 1.5-2% KLD */
    [T(IQ3_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ3_S),
                   .fb = IQF_FB_GRID },
    [T(IQ1_S)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ggml_imatrix = true,
                   .llama_imatrix = true, .ftype = FT(MOSTLY_IQ1_S) },
    [T(IQ1_M)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .llama_imatrix = true,
                   .ftype = FT(MOSTLY_IQ1_M) },
    [T(IQ4_NL)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_0), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ4_NL),
                    .fb = IQF_FB_SCALAR },
    [T(IQ4_XS)] = { .family = IQF_FAMILY_IQ, .act_type = T(Q8_K), .fallback = T(IQ4_NL), .ftype = FT(MOSTLY_IQ4_XS),
                    .fb = IQF_FB_SCALAR },

    /* FP4: mxfp4 (32-weight blocks: F16 fallback), nvfp4 (64: llama has no fallback) */
    [T(MXFP4)] = { .family = IQF_FAMILY_FP4, .act_type = T(Q8_0), .fallback = T(MXFP4), .ftype = FT(MOSTLY_MXFP4_MOE) },
    [T(NVFP4)] = { .family = IQF_FAMILY_FP4, .act_type = T(Q8_0), .fallback = IQF_NO_FALLBACK, .ftype = FT(MOSTLY_NVFP4) },

    /* ternary / binary (q1_0: 128-weight blocks, no fallback) */
    [T(TQ1_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_TQ1_0) },
    [T(TQ2_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_K), .fallback = T(Q4_0), .ftype = FT(MOSTLY_TQ2_0) },
    [T(Q1_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_0), .fallback = IQF_NO_FALLBACK, .ftype = FT(MOSTLY_Q1_0) },
    [T(Q2_0)] = { .family = IQF_FAMILY_LOWBIT, .act_type = T(Q8_0), .fallback = T(Q4_0), .ftype = FT(MOSTLY_Q2_0) },

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
