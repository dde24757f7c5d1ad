/*
 * types.c - the table of every GGUF tensor type (ids, names and block geometry as ggml 0.25.1).
 */
#include "iqforge.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define T(id, nm, blk, sz, q) [id] = { id, nm, blk, sz, 8.0 * (sz) / (blk), q }

static const iqf_type_info type_table[IQF_TYPE_COUNT] = {
    T(IQF_TYPE_F32, "f32", 1, 4, false),
    T(IQF_TYPE_F16, "f16", 1, 2, false),
    T(IQF_TYPE_Q4_0, "q4_0", 32, 18, true),
    T(IQF_TYPE_Q4_1, "q4_1", 32, 20, true),
    T(IQF_TYPE_Q5_0, "q5_0", 32, 22, true),
    T(IQF_TYPE_Q5_1, "q5_1", 32, 24, true),
    T(IQF_TYPE_Q8_0, "q8_0", 32, 34, true),
    T(IQF_TYPE_Q8_1, "q8_1", 32, 36, true),
    T(IQF_TYPE_Q2_K, "q2_K", 256, 84, true),
    T(IQF_TYPE_Q3_K, "q3_K", 256, 110, true),
    T(IQF_TYPE_Q4_K, "q4_K", 256, 144, true),
    T(IQF_TYPE_Q5_K, "q5_K", 256, 176, true),
    T(IQF_TYPE_Q6_K, "q6_K", 256, 210, true),
    T(IQF_TYPE_Q8_K, "q8_K", 256, 292, true),
    T(IQF_TYPE_IQ2_XXS, "iq2_xxs", 256, 66, true),
    T(IQF_TYPE_IQ2_XS, "iq2_xs", 256, 74, true),
    T(IQF_TYPE_IQ3_XXS, "iq3_xxs", 256, 98, true),
    T(IQF_TYPE_IQ1_S, "iq1_s", 256, 50, true),
    T(IQF_TYPE_IQ4_NL, "iq4_nl", 32, 18, true),
    T(IQF_TYPE_IQ3_S, "iq3_s", 256, 110, true),
    T(IQF_TYPE_IQ2_S, "iq2_s", 256, 82, true),
    T(IQF_TYPE_IQ4_XS, "iq4_xs", 256, 136, true),
    T(IQF_TYPE_I8, "i8", 1, 1, false),
    T(IQF_TYPE_I16, "i16", 1, 2, false),
    T(IQF_TYPE_I32, "i32", 1, 4, false),
    T(IQF_TYPE_I64, "i64", 1, 8, false),
    T(IQF_TYPE_F64, "f64", 1, 8, false),
    T(IQF_TYPE_IQ1_M, "iq1_m", 256, 56, true),
    T(IQF_TYPE_BF16, "bf16", 1, 2, false),
    T(IQF_TYPE_TQ1_0, "tq1_0", 256, 54, true),
    T(IQF_TYPE_TQ2_0, "tq2_0", 256, 66, true),
    T(IQF_TYPE_MXFP4, "mxfp4", 32, 17, true),
    T(IQF_TYPE_NVFP4, "nvfp4", 64, 36, true),
    T(IQF_TYPE_Q1_0, "q1_0", 128, 18, true),
    T(IQF_TYPE_Q2_0, "q2_0", 64, 18, true),
};

const iqf_type_info *iqf_type_get(int type) {
    if (type < 0 || type >= IQF_TYPE_COUNT) return NULL;
    const iqf_type_info *t = &type_table[type];
    return t->name ? t : NULL; /* removed ids have no entry */
}

int iqf_type_from_name(const char *name) {
    if (!name) return -1;
    for (int i = 0; i < IQF_TYPE_COUNT; i++) {
        const iqf_type_info *t = &type_table[i];
        if (t->name && strcasecmp(t->name, name) == 0) return i;
    }
    return -1;
}

size_t iqf_row_size(int type, int64_t ncols) {
    const iqf_type_info *t = iqf_type_get(type);
    if (!t || ncols < 0 || ncols % t->blck_size != 0) return 0;
    return (size_t)(ncols / t->blck_size) * t->type_size;
}
