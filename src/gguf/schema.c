/*
 * schema.c - the types and ranges llama.cpp (llama 0.25.1: llama-model-loader.cpp's typed
 * get_key/get_arr, llama-vocab.cpp, llama-model.cpp's load_hparams) expects of the keys it reads:
 * general.*, {arch}.* hyper-parameters, tokenizer.*, split.*. llama.cpp's typed getters require
 * the exact GGUF type ("key has wrong type"); its vocabulary loader reads tokenizer.ggml.scores and
 * token_type as raw arrays indexed by token id without checking their element type or length,
 * so a wrong one there is an out-of-bounds read in llama.cpp rather than an error.
 * Keys not listed here are not checked (llama.cpp does not read them for these architectures).
 */
#include "iqforge.h"

#include "util/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

typedef enum kind {
    K_U32, K_F32, K_STR, K_BOOL, K_U16, K_I32,
    K_U32_OR_ARR,   /* u32, or an array of i32/u32 with one value per layer */
    K_ARR_STR, K_ARR_F32, K_ARR_I32,
    K_ARR_U8_I8,    /* array of u8 or i8 */
} kind;

typedef enum range {
    R_ANY,
    R_POS,        /* integer > 0 */
    R_LAYERS,     /* 1..512 (LLAMA_MAX_LAYERS) */
    R_TOKEN,      /* a token id < the number of tokens */
    R_POSF,       /* finite float > 0 */
    R_FINITE,     /* finite float */
    R_NONEMPTY,   /* string or array with at least one element */
    R_PER_TOKEN,  /* array with as many elements as tokenizer.ggml.tokens */
    R_TOKTYPE,    /* per token, each in 0..6 (llama_token_type) */
    R_TOKMODEL,   /* a tokenizer model llama.cpp knows */
    R_ROPE_SCALING,
    R_SPLIT_COUNT, R_SPLIT_NO, R_SPLIT_TENSORS,
    R_EXPERT_USED,
    R_ROT,        /* = n_embd / n_head (llama arch) */
} range;

typedef struct rule {
    const char *key; /* for arch rules: the part after "{arch}." */
    kind k;
    range r;
} rule;

static const rule general_rules[] = {
    { "general.architecture", K_STR, R_NONEMPTY },
    { "general.alignment", K_U32, R_POS },
    { "general.file_type", K_U32, R_ANY },
    { "general.quantization_version", K_U32, R_ANY },
    { "general.name", K_STR, R_ANY },
    { "tokenizer.ggml.model", K_STR, R_TOKMODEL },
    { "tokenizer.ggml.pre", K_STR, R_ANY },
    { "tokenizer.ggml.tokens", K_ARR_STR, R_NONEMPTY },
    { "tokenizer.ggml.scores", K_ARR_F32, R_PER_TOKEN },
    { "tokenizer.ggml.token_type", K_ARR_I32, R_TOKTYPE },
    { "tokenizer.ggml.token_type_count", K_U32, R_ANY },
    { "tokenizer.ggml.merges", K_ARR_STR, R_ANY },
    { "tokenizer.ggml.precompiled_charsmap", K_ARR_U8_I8, R_ANY },
    { "tokenizer.ggml.bos_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.eos_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.eot_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.eom_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.unknown_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.seperator_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.padding_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.cls_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.mask_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.prefix_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.suffix_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.middle_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_pre_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_suf_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_mid_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_pad_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_rep_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.fim_sep_token_id", K_U32, R_TOKEN },
    { "tokenizer.ggml.add_bos_token", K_BOOL, R_ANY },
    { "tokenizer.ggml.add_eos_token", K_BOOL, R_ANY },
    { "tokenizer.ggml.add_sep_token", K_BOOL, R_ANY },
    { "tokenizer.ggml.add_space_prefix", K_BOOL, R_ANY },
    { "tokenizer.ggml.remove_extra_whitespaces", K_BOOL, R_ANY },
    { "tokenizer.chat_template", K_STR, R_ANY },
    { "split.no", K_U16, R_SPLIT_NO },
    { "split.count", K_U16, R_SPLIT_COUNT },
    { "split.tensors.count", K_I32, R_SPLIT_TENSORS },
};

static const rule arch_rules[] = {
    { "context_length", K_U32, R_ANY },
    { "embedding_length", K_U32, R_POS },
    { "block_count", K_U32, R_LAYERS },
    { "feed_forward_length", K_U32_OR_ARR, R_ANY },
    { "expert_feed_forward_length", K_U32_OR_ARR, R_ANY }, /* get_key_or_arr in llama.cpp de3ff81 */
    { "leading_dense_block_count", K_U32, R_ANY },
    { "attention.head_count", K_U32_OR_ARR, R_ANY },
    { "attention.head_count_kv", K_U32_OR_ARR, R_ANY },
    { "attention.key_length", K_U32, R_ANY },
    { "attention.value_length", K_U32, R_ANY },
    { "attention.layer_norm_rms_epsilon", K_F32, R_FINITE },
    { "attention.layer_norm_epsilon", K_F32, R_FINITE },
    { "attention.causal", K_BOOL, R_ANY },
    { "attention.clamp_kqv", K_F32, R_FINITE },
    { "attention.max_alibi_bias", K_F32, R_FINITE },
    { "rope.dimension_count", K_U32, R_ROT },
    { "rope.freq_base", K_F32, R_FINITE },
    { "rope.freq_scale", K_F32, R_POSF },
    { "rope.scaling.type", K_STR, R_ROPE_SCALING },
    { "rope.scaling.factor", K_F32, R_FINITE },
    { "rope.scaling.attn_factor", K_F32, R_FINITE },
    { "rope.scaling.original_context_length", K_U32, R_ANY },
    { "rope.scaling.finetuned", K_BOOL, R_ANY },
    { "expert_count", K_U32, R_ANY },
    { "expert_used_count", K_U32_OR_ARR, R_EXPERT_USED },
    { "expert_shared_count", K_U32, R_ANY },
    { "expert_weights_scale", K_F32, R_FINITE },
    { "vocab_size", K_U32, R_POS },
    { "use_parallel_residual", K_BOOL, R_ANY },
    { "tensor_data_layout", K_STR, R_ANY },
    { "pooling_type", K_U32, R_ANY },
    { "logit_scale", K_F32, R_FINITE },
    { "attn_logit_softcapping", K_F32, R_FINITE },
    { "final_logit_softcapping", K_F32, R_FINITE },
};

static const char *kind_name(kind k) {
    switch (k) {
    case K_U32: return "u32";
    case K_F32: return "f32";
    case K_STR: return "str";
    case K_BOOL: return "bool";
    case K_U16: return "u16";
    case K_I32: return "i32";
    case K_U32_OR_ARR: return "u32 or arr[u32/i32] (one per layer)";
    case K_ARR_STR: return "arr[str]";
    case K_ARR_F32: return "arr[f32]";
    case K_ARR_I32: return "arr[i32]";
    case K_ARR_U8_I8: return "arr[u8] or arr[i8]";
    }
    return "?";
}

static void type_str(const iqf_gguf *g, int64_t i, char *buf, size_t n) {
    int t = iqf_gguf_kv_type(g, i);
    if (t == IQF_GGUF_ARR) snprintf(buf, n, "arr[%s]", iqf_gguf_vtype_name(iqf_gguf_arr_type(g, i)));
    else snprintf(buf, n, "%s", iqf_gguf_vtype_name(t));
}

static bool kind_ok(const iqf_gguf *g, int64_t i, kind k) {
    const int t = iqf_gguf_kv_type(g, i), at = iqf_gguf_arr_type(g, i);
    switch (k) {
    case K_U32: return t == IQF_GGUF_U32;
    case K_F32: return t == IQF_GGUF_F32;
    case K_STR: return t == IQF_GGUF_STR;
    case K_BOOL: return t == IQF_GGUF_BOOL;
    case K_U16: return t == IQF_GGUF_U16;
    case K_I32: return t == IQF_GGUF_I32;
    case K_U32_OR_ARR: return t == IQF_GGUF_U32 || (t == IQF_GGUF_ARR && (at == IQF_GGUF_U32 || at == IQF_GGUF_I32));
    case K_ARR_STR: return t == IQF_GGUF_ARR && at == IQF_GGUF_STR;
    case K_ARR_F32: return t == IQF_GGUF_ARR && at == IQF_GGUF_F32;
    case K_ARR_I32: return t == IQF_GGUF_ARR && at == IQF_GGUF_I32;
    case K_ARR_U8_I8: return t == IQF_GGUF_ARR && (at == IQF_GGUF_U8 || at == IQF_GGUF_I8);
    }
    return false;
}

/* The value of a u32 key if present with that type. */
static bool u32_of(const iqf_gguf *g, const char *key, uint32_t *v) { return iqf_gguf_get_u32(g, key, v); }

static bool arch_u32(const iqf_gguf *g, const char *arch, const char *suffix, uint32_t *v) {
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, suffix);
    return u32_of(g, k, v);
}

/* Number of tokens (tokenizer.ggml.tokens as arr[str]), or -1. */
static int64_t n_tokens(const iqf_gguf *g) {
    int64_t i = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (i < 0 || iqf_gguf_kv_type(g, i) != IQF_GGUF_ARR || iqf_gguf_arr_type(g, i) != IQF_GGUF_STR) return -1;
    return (int64_t)iqf_gguf_arr_n(g, i);
}

static iqf_status check_range(const iqf_gguf *g, int64_t i, const char *key, const char *arch, range r, char *err,
                              size_t errlen) {
    const void *v = iqf_gguf_kv_value(g, i);
    switch (r) {
    case R_ANY: return IQF_OK;
    case R_POS:
        if (*(const uint32_t *)v == 0) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: 0 (must be > 0)", key);
        return IQF_OK;
    case R_LAYERS: {
        uint32_t n = *(const uint32_t *)v;
        if (n < 1 || n > 512) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu32 " layers (llama.cpp: 1 to 512)", key, n);
        return IQF_OK;
    }
    case R_TOKEN: {
        int64_t nt = n_tokens(g);
        uint32_t id = *(const uint32_t *)v;
        if (nt >= 0 && (int64_t)id >= nt)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: token id %" PRIu32 " is not below the vocabulary size %" PRId64, key, id, nt);
        return IQF_OK;
    }
    case R_POSF: case R_FINITE: {
        float f = *(const float *)v;
        if (!isfinite(f) || (r == R_POSF && !(f > 0)))
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %g (must be %s)", key, (double)f, r == R_POSF ? "finite and > 0" : "finite");
        return IQF_OK;
    }
    case R_NONEMPTY:
        if ((iqf_gguf_kv_type(g, i) == IQF_GGUF_STR && iqf_gguf_kv_str_len(g, i) == 0) ||
            (iqf_gguf_kv_type(g, i) == IQF_GGUF_ARR && iqf_gguf_arr_n(g, i) == 0))
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: empty", key);
        return IQF_OK;
    case R_PER_TOKEN: case R_TOKTYPE: {
        int64_t nt = n_tokens(g);
        if (nt < 0) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: present without tokenizer.ggml.tokens", key);
        uint64_t n = iqf_gguf_arr_n(g, i);
        if (n != (uint64_t)nt)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu64 " elements, tokenizer.ggml.tokens has %" PRId64, key, n, nt);
        if (r == R_TOKTYPE) {
            const int32_t *tt = iqf_gguf_arr_data(g, i, IQF_GGUF_I32, &n);
            for (uint64_t j = 0; j < n; j++)
                if (tt[j] < 0 || tt[j] > 6)
                    return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: element %" PRIu64 " is %" PRId32 " (token types are 0 to 6)", key, j, tt[j]);
        } else {
            const float *s = iqf_gguf_arr_data(g, i, IQF_GGUF_F32, &n);
            for (uint64_t j = 0; j < n; j++)
                if (isnan(s[j])) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: element %" PRIu64 " is NaN", key, j);
        }
        return IQF_OK;
    }
    case R_TOKMODEL: {
        static const char *known[] = { "no_vocab", "none", "llama", "bert", "gpt2", "hybriddna", "whitespace",
                                        "t5", "rwkv", "test", "plamo2", "gemma4" };
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!strcmp((const char *)v, known[k])) return IQF_OK;
        return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: unknown tokenizer model \"%.64s\"", key, (const char *)v);
    }
    case R_ROPE_SCALING: {
        static const char *known[] = { "none", "linear", "yarn", "longrope" };
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (!strcmp((const char *)v, known[k])) return IQF_OK;
        return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: unknown rope scaling type \"%.64s\"", key, (const char *)v);
    }
    case R_SPLIT_COUNT:
        if (*(const uint16_t *)v == 0) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: 0 (must be >= 1)", key);
        return IQF_OK;
    case R_SPLIT_NO: {
        uint16_t cnt, no = *(const uint16_t *)v;
        if (iqf_gguf_get_u16(g, "split.count", &cnt) && no >= cnt)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %u is not below split.count %u", key, no, cnt);
        if (iqf_gguf_find_kv(g, "split.count") < 0)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: present without split.count", key);
        return IQF_OK;
    }
    case R_SPLIT_TENSORS: {
        int32_t n = *(const int32_t *)v;
        if (n < 0 || (int64_t)n < iqf_gguf_n_tensors(g))
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRId32 " (this part alone has %" PRId64 " tensors)", key, n,
                            iqf_gguf_n_tensors(g));
        return IQF_OK;
    }
    case R_EXPERT_USED: { /* llama.cpp: the largest per-layer count <= expert_count (0 when absent) */
        int64_t used = 0;
        if (iqf_gguf_kv_type(g, i) == IQF_GGUF_ARR) {
            for (uint64_t j = 0; j < iqf_gguf_arr_n(g, i); j++) {
                int64_t x;
                if (iqf_gguf_arr_int(g, i, j, &x) && x > used) used = x;
            }
        } else {
            used = *(const uint32_t *)v;
        }
        uint32_t n = 0;
        arch_u32(g, arch, "expert_count", &n);
        if (used > (int64_t)n)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRId64 " is more than %s.expert_count (%" PRIu32 ")", key, used, arch, n);
        return IQF_OK;
    }
    case R_ROT: {
        uint32_t rot = *(const uint32_t *)v, embd, head, kl;
        if (strcmp(arch, "llama")) return IQF_OK;
        if (arch_u32(g, arch, "attention.key_length", &kl)) {
            if (rot != kl) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu32 ", llama.cpp wants %s.attention.key_length (%" PRIu32 ")", key, rot, arch, kl);
        } else if (arch_u32(g, arch, "embedding_length", &embd) && arch_u32(g, arch, "attention.head_count", &head) && head > 0) {
            if (rot != embd / head)
                return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu32 ", llama.cpp wants embedding_length / head_count = %" PRIu32, key, rot, embd / head);
        }
        return IQF_OK;
    }
    }
    return IQF_OK;
}

/* Per-layer arrays and the heads' divisibility. */
static iqf_status check_layers(const iqf_gguf *g, int64_t i, const char *key, const char *arch, const char *suffix,
                               char *err, size_t errlen) {
    uint32_t nl;
    const bool have_nl = arch_u32(g, arch, "block_count", &nl);
    if (iqf_gguf_kv_type(g, i) == IQF_GGUF_ARR) {
        uint64_t n = iqf_gguf_arr_n(g, i);
        if (have_nl && n != nl)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu64 " elements, %s.block_count is %" PRIu32, key, n, arch, nl);
        if (n > 512) return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu64 " elements (llama.cpp: at most 512)", key, n);
        for (uint64_t j = 0; j < n; j++) {
            int64_t x;
            if (!iqf_gguf_arr_int(g, i, j, &x) || x < 0 || x > UINT32_MAX)
                return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: element %" PRIu64 " out of range", key, j);
        }
        return IQF_OK;
    }
    uint32_t v = *(const uint32_t *)iqf_gguf_kv_value(g, i), embd, head;
    if (!strcmp(suffix, "attention.head_count") && v > 0 && arch_u32(g, arch, "embedding_length", &embd) &&
        embd % v != 0 && !arch_u32(g, arch, "attention.key_length", &head))
        return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu32 " does not divide %s.embedding_length (%" PRIu32 ")", key, v, arch, embd);
    /* head_count 0 (attention-free architectures such as mamba write 0 for both) is not checked. */
    if (!strcmp(suffix, "attention.head_count_kv") && arch_u32(g, arch, "attention.head_count", &head) && head > 0) {
        if (v == 0 || v > head || head % v != 0)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s: %" PRIu32 " does not divide %s.attention.head_count (%" PRIu32 ")", key, v, arch, head);
    }
    return IQF_OK;
}

iqf_status iqf_gguf_check_kv(const iqf_gguf *g, int64_t i, char *err, size_t errlen) {
    const char *key = iqf_gguf_kv_key(g, i);
    if (!key) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "no key %" PRId64, i);
    const rule *r = NULL;
    for (size_t k = 0; k < sizeof general_rules / sizeof general_rules[0] && !r; k++)
        if (!strcmp(key, general_rules[k].key)) r = &general_rules[k];
    const char *arch = NULL;
    const char *suffix = NULL;
    if (!r && iqf_gguf_get_str(g, "general.architecture", &arch, NULL) && *arch) {
        size_t al = strlen(arch);
        if (!strncmp(key, arch, al) && key[al] == '.') {
            suffix = key + al + 1;
            for (size_t k = 0; k < sizeof arch_rules / sizeof arch_rules[0] && !r; k++)
                if (!strcmp(suffix, arch_rules[k].key)) r = &arch_rules[k];
        }
    }
    if (!r) return IQF_OK;
    if (!kind_ok(g, i, r->k)) {
        char ts[32];
        type_str(g, i, ts, sizeof ts);
        return iqf_fail(err, errlen, IQF_E_FORMAT, "key %s has type %s, llama.cpp reads %s", key, ts, kind_name(r->k));
    }
    iqf_status s = check_range(g, i, key, arch ? arch : "", r->r, err, errlen);
    if (s) return s;
    if (r->k == K_U32_OR_ARR) return check_layers(g, i, key, arch, suffix, err, errlen);
    return IQF_OK;
}

iqf_status iqf_gguf_check_schema(const iqf_gguf *g, char *err, size_t errlen) {
    if (!g) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL file");
    char msg[400];
    for (int64_t i = 0; i < iqf_gguf_n_kv(g); i++)
        if (iqf_gguf_check_kv(g, i, msg, sizeof msg))
            return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s", iqf_gguf_path(g), msg);
    /* Keys that need each other. */
    const bool has_tok = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens") >= 0;
    const char *model;
    if (iqf_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL) && strcmp(model, "no_vocab") && strcmp(model, "none") &&
        !has_tok)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: key tokenizer.ggml.tokens missing (tokenizer.ggml.model is \"%.64s\")",
                        iqf_gguf_path(g), model);
    if (iqf_gguf_find_kv(g, "split.count") >= 0 && iqf_gguf_find_kv(g, "split.no") < 0)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: key split.no missing (split.count is present)", iqf_gguf_path(g));
    return IQF_OK;
}
