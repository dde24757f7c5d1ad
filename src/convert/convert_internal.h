/*
 * convert_internal.h - what the files of src/convert share: the data rows (archs.c), the run's
 * state (cv) and its output tensors (ot), and the stages:
 *   convert.c       the driver: load, then header and data through a GGUF writer
 *   convert_plan.c  iqf_cv_plan (output tensor names, shapes, types, transforms) and
 *                   iqf_cv_get_row (one row of an output tensor from the mapped input)
 *   convert_kvs.c   general.* and the hyper-parameter KVs (iqf_cv_hparams); the helpers below
 * Calls go down that list (convert.c -> convert_plan.c -> convert_kvs.c), never back up.
 *   vocab.c         the tokenizer KVs (iqf_cv_vocab)
 */
#ifndef IQF_CONVERT_INTERNAL_H
#define IQF_CONVERT_INTERNAL_H

#include "iqforge.h"
#include "json.h"
#include "safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The converter's set_vocab per model class, where a checkpoint has a SentencePiece
 * tokenizer.model: LLAMA reads it (LlamaModel: add_prefix_space first), SPM reads it else BPE
 * (Qwen2Model), GEMMA reads it then add_space_prefix false (Gemma3Model), GPT2 ignores it
 * (TextModel's default, gpt-oss, Qwen2Moe/Qwen3Moe, DeepseekV2). */
enum { CV_VOCAB_LLAMA = 1, CV_VOCAB_GPT2 = 2, CV_VOCAB_SPM = 3, CV_VOCAB_GEMMA = 4 };
enum {
    CV_F_PERMUTE_QK = 1 << 0,  /* llama's q/k row permutation (undo_permute) */
    CV_F_VOCAB_SIZE = 1 << 1,  /* ARCH.vocab_size key */
    CV_F_ROPE_DIM = 1 << 2,    /* ARCH.rope.dimension_count = head_dim or hidden/heads */
    CV_F_LLAMA3_ROPE = 1 << 3, /* rope_freqs tensor for rope_type llama3 */
    CV_F_EXPERT_FF = 1 << 4,   /* ARCH.expert_feed_forward_length = moe_intermediate_size */
    CV_F_GPTOSS = 1 << 6,      /* fused gate_up experts split, down transposed, sinks, sliding window */
    CV_F_GEMMA3 = 1 << 5,      /* norms + 1, token_embd cut to the tokenizer's size, sliding window */
    CV_F_DEEPSEEK2 = 1 << 7,   /* MLA (kv_b split), MQA head count 1, nextn layers skipped */
};

typedef struct cv_arch {
    const char *hf;   /* config.json architectures[0] */
    const char *gguf; /* general.architecture */
    int vocab;        /* CV_VOCAB_*: the converter's set_vocab path */
    unsigned flags;
} cv_arch;

typedef struct cv_name_row {
    const char *arch; /* NULL: all */
    const char *hf;
    const char *gguf;
} cv_name_row;

typedef struct cv_expert_row {
    const char *prefix;      /* up to and including the expert number's dot */
    const char *parts[3];    /* in the order the stacked tensors are emitted */
    const char *stacked;     /* stacked name prefix; + part = a iqf_cv_names hf row */
} cv_expert_row;

typedef struct cv_pre_row {
    uint64_t fingerprint;
    const char *pre;
} cv_pre_row;

extern const cv_arch iqf_cv_archs[];
extern const int iqf_cv_n_archs;
extern const cv_name_row iqf_cv_names[];
extern const int iqf_cv_n_names;
extern const cv_expert_row iqf_cv_experts[];
extern const int iqf_cv_n_experts;
extern const char *const iqf_cv_f32_suffixes[];
extern const cv_pre_row iqf_cv_pres[];
extern const int iqf_cv_n_pres;

const cv_arch *iqf_cv_find_arch(const char *hf);

#define CV_MAX_EXPERTS 1024
#define CV_MAX_BLOCKS 4096

typedef enum { K_PLAIN, K_PERMUTE, K_STACK, K_VALUES, K_GATHER, K_KB, K_VB } ot_kind;

typedef struct ot {
    char name[IQF_GGUF_MAX_NAME];
    int n_dims;
    int64_t ne[4]; /* ggml order */
    int type;
    ot_kind kind;
    const iqf_st_tensor *src;
    const iqf_st_tensor **srcs; /* K_STACK: one per expert */
    int n_src;
    int64_t perm_heads;
    float *vals; /* K_VALUES */
    float shift; /* added to every value (gemma's norm offset) */
    /* K_GATHER over a 2-D [E, N] or 3-D [E, A, B] source: out(e, r, c) = transpose ?
     * src(e, c, r*stride+off) : src(e, r, c) (3-D); out(e, k) = src(e, k*stride+off) (2-D) */
    bool transpose;
    int64_t stride, off;
    int64_t nope, vdim; /* K_KB / K_VB: MLA's kv_b split (per head: nope rows of k, then v rows) */
} ot;

typedef struct cv {
    const char *dir;
    char cfg_path[4096];
    yyjson_doc *cfg_doc;
    yyjson_val *hp; /* config root */
    yyjson_val *rope; /* rope_parameters or rope_scaling (object) or NULL */
    const cv_arch *arch;
    iqf_st *st;
    int ftype; /* llama file type after auto */
    ot *t;
    int64_t n_t, cap_t;
    int64_t block_count;
    char *err;
    size_t errlen;
    /* expert buckets: per block, the source tensors seen */
    const iqf_st_tensor **xb;
    int64_t *xb_n;
    int64_t n_experts;
    int64_t n_vocab_real; /* gemma3: len(model.vocab) + len(added_tokens), -1 unknown */
} cv;

/* Helpers (convert_kvs.c). iqf_cv_fail formats into c->err and returns -1. */
int iqf_cv_fail(cv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
yyjson_val *iqf_cv_hget(cv *c, const char *key);
/* find_hparam: the first key present (even when null). */
yyjson_val *iqf_cv_hfind(cv *c, const char *const *keys, bool *present);
int iqf_cv_hint(cv *c, const char *key, yyjson_val *v, int64_t *out, int64_t lo, int64_t hi);
bool iqf_cv_ends_with(const char *s, const char *suf);

/* convert_plan.c: fills c->t (nothing read yet); 0 or -1 with c->err set. */
int iqf_cv_plan(cv *c);
/* Row r (o->ne[0] floats) of output tensor o, read from the mapped input. */
void iqf_cv_get_row(const ot *o, int64_t r, float *dst);

/* convert_kvs.c */
void iqf_cv_model_name(const char *dir, char *out, size_t n);
void iqf_cv_size_label(cv *c, char *out, size_t n);
int iqf_cv_hparams(cv *c, iqf_gguf_writer *w);

/* vocab.c */
int iqf_cv_vocab(const char *dir, const char *cfg_path, yyjson_val *hp, int kind, iqf_gguf_writer *w, char *err,
                 size_t errlen);

#endif
