/* test_types.c - the type table, fp16/bf16 conversions and nearest_int against the oracle. */
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"
#include "util/traits.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>

#include <math.h>
#include <string.h>

typedef uint16_t (*f2h_fn)(float);

/* The file types derived from the traits table against the list recipe.c kept before they moved
 * there: llama-quantize's QUANT_OPTIONS order (aliases before the full names), name, id, default
 * type (llama_ftype_get_default_type). */
static void test_ftypes(void) {
    static const struct { const char *name; int ftype, type; } was[] = {
        { "Q1_0", IQF_FTYPE_MOSTLY_Q1_0, IQF_TYPE_Q1_0 },        { "Q2_0", IQF_FTYPE_MOSTLY_Q2_0, IQF_TYPE_Q2_0 },
        { "Q4_0", IQF_FTYPE_MOSTLY_Q4_0, IQF_TYPE_Q4_0 },        { "Q4_1", IQF_FTYPE_MOSTLY_Q4_1, IQF_TYPE_Q4_1 },
        { "MXFP4_MOE", IQF_FTYPE_MOSTLY_MXFP4_MOE, IQF_TYPE_MXFP4 }, { "NVFP4", IQF_FTYPE_MOSTLY_NVFP4, IQF_TYPE_NVFP4 },
        { "Q5_0", IQF_FTYPE_MOSTLY_Q5_0, IQF_TYPE_Q5_0 },        { "Q5_1", IQF_FTYPE_MOSTLY_Q5_1, IQF_TYPE_Q5_1 },
        { "IQ2_XXS", IQF_FTYPE_MOSTLY_IQ2_XXS, IQF_TYPE_IQ2_XXS }, { "IQ2_XS", IQF_FTYPE_MOSTLY_IQ2_XS, IQF_TYPE_IQ2_XS },
        { "IQ2_S", IQF_FTYPE_MOSTLY_IQ2_S, IQF_TYPE_IQ2_XS },     { "IQ2_M", IQF_FTYPE_MOSTLY_IQ2_M, IQF_TYPE_IQ2_S },
        { "IQ1_S", IQF_FTYPE_MOSTLY_IQ1_S, IQF_TYPE_IQ1_S },      { "IQ1_M", IQF_FTYPE_MOSTLY_IQ1_M, IQF_TYPE_IQ1_M },
        { "TQ1_0", IQF_FTYPE_MOSTLY_TQ1_0, IQF_TYPE_TQ1_0 },      { "TQ2_0", IQF_FTYPE_MOSTLY_TQ2_0, IQF_TYPE_TQ2_0 },
        { "Q2_K", IQF_FTYPE_MOSTLY_Q2_K, IQF_TYPE_Q2_K },        { "Q2_K_S", IQF_FTYPE_MOSTLY_Q2_K_S, IQF_TYPE_Q2_K },
        { "IQ3_XXS", IQF_FTYPE_MOSTLY_IQ3_XXS, IQF_TYPE_IQ3_XXS }, { "IQ3_S", IQF_FTYPE_MOSTLY_IQ3_S, IQF_TYPE_IQ3_S },
        { "IQ3_M", IQF_FTYPE_MOSTLY_IQ3_M, IQF_TYPE_IQ3_S },      { "Q3_K", IQF_FTYPE_MOSTLY_Q3_K_M, IQF_TYPE_Q3_K },
        { "IQ3_XS", IQF_FTYPE_MOSTLY_IQ3_XS, IQF_TYPE_IQ3_S },    { "Q3_K_S", IQF_FTYPE_MOSTLY_Q3_K_S, IQF_TYPE_Q3_K },
        { "Q3_K_M", IQF_FTYPE_MOSTLY_Q3_K_M, IQF_TYPE_Q3_K },    { "Q3_K_L", IQF_FTYPE_MOSTLY_Q3_K_L, IQF_TYPE_Q3_K },
        { "IQ4_NL", IQF_FTYPE_MOSTLY_IQ4_NL, IQF_TYPE_IQ4_NL },   { "IQ4_XS", IQF_FTYPE_MOSTLY_IQ4_XS, IQF_TYPE_IQ4_XS },
        { "Q4_K", IQF_FTYPE_MOSTLY_Q4_K_M, IQF_TYPE_Q4_K },      { "Q4_K_S", IQF_FTYPE_MOSTLY_Q4_K_S, IQF_TYPE_Q4_K },
        { "Q4_K_M", IQF_FTYPE_MOSTLY_Q4_K_M, IQF_TYPE_Q4_K },    { "Q5_K", IQF_FTYPE_MOSTLY_Q5_K_M, IQF_TYPE_Q5_K },
        { "Q5_K_S", IQF_FTYPE_MOSTLY_Q5_K_S, IQF_TYPE_Q5_K },    { "Q5_K_M", IQF_FTYPE_MOSTLY_Q5_K_M, IQF_TYPE_Q5_K },
        { "Q6_K", IQF_FTYPE_MOSTLY_Q6_K, IQF_TYPE_Q6_K },        { "Q8_0", IQF_FTYPE_MOSTLY_Q8_0, IQF_TYPE_Q8_0 },
        { "F16", IQF_FTYPE_MOSTLY_F16, IQF_TYPE_F16 },           { "BF16", IQF_FTYPE_MOSTLY_BF16, IQF_TYPE_BF16 },
        { "F32", IQF_FTYPE_ALL_F32, IQF_TYPE_F32 },
    };
    const int n = (int)(sizeof was / sizeof was[0]);
    for (int i = 0; i < n; i++) {
        char lower[32], num[16];
        for (size_t k = 0; k <= strlen(was[i].name); k++) lower[k] = (char)tolower((unsigned char)was[i].name[k]);
        CHECK(iqf_ftype_from_name(was[i].name) == was[i].ftype && iqf_ftype_from_name(lower) == was[i].ftype,
              "%s: id", was[i].name);
        snprintf(num, sizeof num, "%d", was[i].ftype);
        CHECK(iqf_ftype_from_name(num) == was[i].ftype, "%s: by number", num);
        CHECK(iqf_ftype_default_type(was[i].ftype) == was[i].type, "%s: default type", was[i].name);
        const char *last = NULL; /* the old rule: the last name of the id, aliases first */
        for (int k = 0; k < n; k++)
            if (was[k].ftype == was[i].ftype) last = was[k].name;
        CHECK(iqf_ftype_name(was[i].ftype) && !strcmp(iqf_ftype_name(was[i].ftype), last), "%s: name %s, was %s",
              was[i].name, iqf_ftype_name(was[i].ftype) ? iqf_ftype_name(was[i].ftype) : "NULL", last);
    }
    CHECK(iqf_ftype_from_name("Q4_K_X") == -1 && iqf_ftype_from_name("") == -1 && iqf_ftype_from_name("5") == -1 &&
              iqf_ftype_from_name("2x") == -1 && iqf_ftype_from_name(NULL) == -1,
          "unknown file types");
    CHECK(iqf_ftype_name(5) == NULL && iqf_ftype_name(-1) == NULL && iqf_ftype_default_type(99) == -1, "unknown ids");
    /* the help's listing: each of those names once, grouped by family, smaller types first */
    int seen = 0, prev = -1;
    for (int i = 0; iqf_ftype_at(i); i++) {
        const iqf_ftype_info *e = iqf_ftype_at(i);
        int k = 0;
        while (k < n && strcmp(was[k].name, e->name)) k++;
        CHECK(k < n && was[k].ftype == e->ftype, "listing %d: %s", i, e->name);
        CHECK(i < n, "listing %d: too long", i);
        const int t = iqf_ftype_default_type(e->ftype);
        if (prev >= 0 && t != prev) {
            static const int place[] = { 9, 0, 1, 2, 5, 3, 4, 6 }; /* by iqf_family: IQ K legacy FP4 low-bit float */
            const int pf = place[iqf_type_family(prev)], tf = place[iqf_type_family(t)];
            CHECK(pf < tf || (pf == tf && iqf_type_get(prev)->bpw <= iqf_type_get(t)->bpw), "listing: %s after %s",
                  e->name, iqf_type_get(prev)->name);
        }
        prev = t;
        seen++;
    }
    CHECK(seen == n, "listing: %d names, want %d", seen, n);
    CHECK(iqf_ftype_at(-1) == NULL && iqf_ftype_at(n) == NULL, "listing ends");
    /* the public views of the table */
    for (int t = -2; t < IQF_TYPE_COUNT + 2; t++) {
        const iqf_type_traits *tr = iqf_traits(t);
        CHECK(iqf_type_family(t) == (tr ? tr->family : IQF_FAMILY_NONE), "family of %d", t);
        CHECK(iqf_type_fallback(t) == (tr ? tr->fallback : IQF_NO_FALLBACK), "fallback of %d", t);
        /* a file type's names sit in its default type's row, the alias before the full name */
        for (int k = 0; tr && k < IQF_TRAITS_MAX_FTYPES && tr->ftypes[k].name; k++)
            CHECK(iqf_ftype_default_type(tr->ftypes[k].ftype) == t, "%s in row %d", tr->ftypes[k].name, t);
    }
}

/* --target-size's candidate lists (iqf_traits_target_candidates, from target_rank/target_rows):
 * the IQ/K types, q8_0, f16, FP4 for rows of 256; the 32-blocks otherwise; never q1_0, q2_0,
 * tq1_0, tq2_0. */
static void test_target_candidates(void) {
    static const int k256[] = {
        IQF_TYPE_IQ1_S, IQF_TYPE_IQ1_M, IQF_TYPE_IQ2_XXS, IQF_TYPE_IQ2_XS, IQF_TYPE_IQ2_S, IQF_TYPE_Q2_K,
        IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S, IQF_TYPE_Q3_K, IQF_TYPE_IQ4_XS, IQF_TYPE_Q4_K, IQF_TYPE_Q5_K,
        IQF_TYPE_Q6_K, IQF_TYPE_Q8_0, IQF_TYPE_F16, IQF_TYPE_MXFP4, IQF_TYPE_NVFP4,
    };
    static const int k32[] = {
        IQF_TYPE_IQ4_NL, IQF_TYPE_Q4_0, IQF_TYPE_Q4_1, IQF_TYPE_Q5_0, IQF_TYPE_Q5_1, IQF_TYPE_Q8_0, IQF_TYPE_F16,
        IQF_TYPE_MXFP4, IQF_TYPE_NVFP4,
    };
    static const int64_t cols[] = { 256, 4096, 11008, 32, 96, 128 * 5, 2880, 100 };
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        const bool is256 = cols[c] % 256 == 0;
        const int *want = is256 ? k256 : k32;
        const int nw = is256 ? (int)(sizeof k256 / sizeof k256[0]) : (int)(sizeof k32 / sizeof k32[0]);
        int got[IQF_TYPE_COUNT + 1];
        const int n = iqf_traits_target_candidates(cols[c], got, IQF_TYPE_COUNT + 1);
        CHECK(n == nw, "%lld columns: %d candidates, want %d", (long long)cols[c], n, nw);
        for (int i = 0; i < n && i < nw; i++)
            CHECK(got[i] == want[i], "%lld columns: candidate %d is %s, want %s", (long long)cols[c], i,
                  iqf_type_get(got[i])->name, iqf_type_get(want[i])->name);
        /* a short buffer gets the first ones */
        int few[3];
        CHECK(iqf_traits_target_candidates(cols[c], few, 3) == 3 && few[0] == want[0] && few[2] == want[2],
              "%lld columns: the first 3", (long long)cols[c]);
    }
    int ranks[1000] = { 0 };
    for (int t = 0; t < IQF_TYPE_COUNT; t++) {
        const iqf_type_traits *tr = iqf_traits(t);
        if (!tr || !tr->target_rank) continue;
        CHECK(tr->target_rank > 0 && tr->target_rank < 1000 && !ranks[tr->target_rank]++, "%s: rank %d taken twice",
              iqf_type_get(t)->name, tr->target_rank);
        CHECK(tr->target_rows != 0, "%s: ranked for no rows", iqf_type_get(t)->name);
    }
}

int main(void) {
    /* Unknown ids never crash. */
    for (int t = -5; t < 300; t++) {
        const iqf_type_info *ti = iqf_type_get(t);
        if (t < 0 || t >= IQF_TYPE_COUNT) CHECK(ti == NULL, "id %d", t);
        if (ti) CHECK(ti->type == t, "id %d", t);
    }
    CHECK(iqf_type_get(4) == NULL && iqf_type_get(31) == NULL, "removed ids");
    CHECK(iqf_type_from_name("iq3_xxs") == 18, "name");
    CHECK(iqf_type_from_name("Q4_K") == 12, "case-insensitive");
    CHECK(iqf_type_from_name("nope") == -1, "unknown name");
    CHECK(iqf_row_size(IQF_TYPE_IQ3_XXS, 4096) == 16 * 98, "row size");
    CHECK(iqf_row_size(IQF_TYPE_IQ3_XXS, 100) == 0, "row size of a partial block");
    CHECK(fabs(iqf_type_get(IQF_TYPE_IQ3_XXS)->bpw - 3.0625) < 1e-12, "bpw");

    /* nearest_int rounds half to even. */
    CHECK(iqf_nearest_int(0.5f) == 0 && iqf_nearest_int(1.5f) == 2 && iqf_nearest_int(-0.5f) == 0 &&
          iqf_nearest_int(2.5f) == 2 && iqf_nearest_int(-1.5f) == -2 && iqf_nearest_int(3.49f) == 3,
          "nearest_int");

    /* fp16: every half decodes and re-encodes to itself (NaNs stay NaN). */
    for (uint32_t h = 0; h < 65536; h++) {
        float f = iqf_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) { CHECK(isnan(iqf_fp16_to_fp32(iqf_fp32_to_fp16(f))), "nan %x", h); continue; }
        if (iqf_fp32_to_fp16(f) != h) CHECK(0, "fp16 round trip %04x", h);
    }
    CHECK(iqf_fp32_to_fp16(65520.f) == 0x7c00, "overflow to inf");
    CHECK(iqf_bf16_to_fp32(iqf_fp32_to_bf16(1.0f)) == 1.0f, "bf16");
    CHECK(iqf_fp32_to_bf16(1.00390625f) == 0x3f80, "bf16 tie to even");  /* 1 + 2^-8 */
    CHECK(iqf_fp32_to_bf16(1.01171875f) == 0x3f82, "bf16 tie to even, odd");

    /* The traits table: a row for every known type id, none for the others. */
    int n_weight = 0;
    for (int t = -2; t < IQF_TYPE_COUNT + 2; t++) {
        const iqf_type_info *ti = iqf_type_get(t);
        const iqf_type_traits *tr = iqf_traits(t);
        CHECK((ti != NULL) == (tr != NULL), "type id %d: a row in types.c but none in traits.c (or the reverse)", t);
        if (!ti || !tr) continue;
        CHECK(tr->family > IQF_FAMILY_NONE && tr->family <= IQF_FAMILY_OTHER, "%s: family", ti->name);
        const bool weight = tr->family != IQF_FAMILY_OTHER;
        if (weight && ti->is_quantized) n_weight++;
        CHECK(weight == (tr->ftype >= 0), "%s: a weight type has a file type", ti->name);
        if (weight) CHECK(iqf_ftype_name(tr->ftype) != NULL, "%s: file type %d is one quantize knows", ti->name, tr->ftype);
        /* the fallback (llama-quant.cpp tensor_type_fallback): a 32-block, the type itself when it is
         * one (-> F16), or none */
        if (tr->fallback == IQF_NO_FALLBACK) {
            CHECK(ti->blck_size > 32, "%s: a 32-block type falls back to F16", ti->name);
        } else {
            const iqf_type_info *fb = iqf_type_get(tr->fallback);
            CHECK(fb != NULL, "%s: fallback", ti->name);
            if (fb) CHECK(tr->fallback == t ? ti->blck_size <= 32 : fb->blck_size == 32 && ti->blck_size > 32,
                          "%s: fallback %s", ti->name, fb->name);
        }
        CHECK(!tr->ggml_imatrix || tr->llama_imatrix, "%s: what ggml requires llama requires", ti->name);
        CHECK(tr->fb == IQF_FB_NONE || (weight && ti->is_quantized), "%s: feedback", ti->name);
    }
    CHECK(n_weight == 25, "%d quantized weight types (ggml 0.25.1 has 25)", n_weight);
    CHECK(iqf_traits(IQF_TYPE_MXFP4)->family == IQF_FAMILY_FP4 && iqf_traits(IQF_TYPE_NVFP4)->family == IQF_FAMILY_FP4 &&
              iqf_traits(IQF_TYPE_Q1_0)->family == IQF_FAMILY_LOWBIT && iqf_traits(IQF_TYPE_TQ2_0)->family == IQF_FAMILY_LOWBIT,
          "new families");
    /* llama-quant.cpp tensor_type_fallback's cases, and its refusals for the 64- and 128-blocks */
    CHECK(iqf_traits(IQF_TYPE_Q2_0)->fallback == IQF_TYPE_Q4_0 && iqf_traits(IQF_TYPE_TQ1_0)->fallback == IQF_TYPE_Q4_0 &&
              iqf_traits(IQF_TYPE_IQ3_S)->fallback == IQF_TYPE_IQ4_NL && iqf_traits(IQF_TYPE_Q6_K)->fallback == IQF_TYPE_Q8_0 &&
              iqf_traits(IQF_TYPE_Q1_0)->fallback == IQF_NO_FALLBACK && iqf_traits(IQF_TYPE_NVFP4)->fallback == IQF_NO_FALLBACK &&
              iqf_traits(IQF_TYPE_MXFP4)->fallback == IQF_TYPE_MXFP4,
          "fallbacks");

    test_ftypes();
    test_target_candidates();

    oracle_require();
    /* ggml's facts against the oracle: the imatrix requirement (libggml-base) and the CPU
     * backend's vec_dot_type (libggml-cpu: ggml_get_type_traits_cpu, a table lookup) */
    struct cpu_traits { void *from_float, *vec_dot; int vec_dot_type; int64_t nrows; };
    char path[4096];
    /* the platform's baseline CPU backend of the oracle's build */
#if defined(__aarch64__)
    snprintf(path, sizeof path, "%s/libggml-cpu-armv8.0_1.so", oracle_lib_dir());
#else
    snprintf(path, sizeof path, "%s/libggml-cpu-x64.so", oracle_lib_dir());
#endif
    void *cpu = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    CHECK(cpu != NULL, "dlopen %s: %s", path, dlerror());
    const struct cpu_traits *(*get_cpu)(int) = NULL;
    if (cpu) *(void **)&get_cpu = dlsym(cpu, "ggml_get_type_traits_cpu");
    CHECK(get_cpu != NULL, "ggml_get_type_traits_cpu");
    for (int t = 0; t < IQF_TYPE_COUNT; t++) {
        const iqf_type_traits *tr = iqf_traits(t);
        if (!tr) continue;
        CHECK(tr->ggml_imatrix == oracle_requires_imatrix(t), "%s: imatrix requirement", oracle_type_name(t));
        if (get_cpu)
            CHECK(tr->act_type == get_cpu(t)->vec_dot_type, "%s: activation type %d, ggml's vec_dot_type %d",
                  oracle_type_name(t), tr->act_type, get_cpu(t)->vec_dot_type);
    }
    for (int t = 0; t < IQF_TYPE_COUNT; t++) {
        const iqf_type_info *ti = iqf_type_get(t);
        int64_t ob = oracle_blck_size(t);
        if (ob == 0) { CHECK(ti == NULL, "id %d removed in ggml", t); continue; }
        CHECK(ti != NULL, "id %d", t);
        if (!ti) continue;
        CHECK(strcmp(ti->name, oracle_type_name(t)) == 0, "name %d %s %s", t, ti->name, oracle_type_name(t));
        CHECK(ti->blck_size == ob && ti->type_size == oracle_type_size(t), "geometry %s", ti->name);
    }
    /* fp16 encoding of many floats against ggml_fp32_to_fp16 (the software RNE path). */
    f2h_fn o_f2h = (f2h_fn)oracle_sym("ggml_fp32_to_fp16");
    CHECK(o_f2h != NULL, "ggml_fp32_to_fp16");
    if (o_f2h) {
        tu_rng r = { 42 };
        int bad = 0;
        for (int i = 0; i < 2000000; i++) {
            uint32_t u = (uint32_t)tu_next(&r);
            float f;
            memcpy(&f, &u, 4);
            if (i & 1) f = (float)(tu_normal(&r) * pow(2.0, (double)(i % 40) - 20));
            if (o_f2h(f) != iqf_fp32_to_fp16(f) && !isnan(f)) bad++;
        }
        CHECK(bad == 0, "%d fp16 mismatches", bad);
    }
    return test_finish("test_types");
}
