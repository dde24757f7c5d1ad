/* test_types.c - the type table, fp16/bf16 conversions and nearest_int against the oracle. */
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

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

    oracle_require();
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
