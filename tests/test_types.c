/* test_types.c - the type table, fp16/bf16 conversions and nearest_int against the oracle. */
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"
#include "util/traits.h"

#include <dlfcn.h>
#include <stdio.h>

#include <math.h>
#include <string.h>

typedef uint16_t (*f2h_fn)(float);

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
