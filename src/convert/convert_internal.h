/*
 * convert_internal.h - the data rows of src/convert (archs.c) and what convert.c shares with them.
 */
#ifndef IQF_CONVERT_INTERNAL_H
#define IQF_CONVERT_INTERNAL_H

#include <stdint.h>

enum { CV_VOCAB_LLAMA = 1, CV_VOCAB_GPT2 = 2 };
enum {
    CV_F_PERMUTE_QK = 1 << 0,  /* llama's q/k row permutation (undo_permute) */
    CV_F_VOCAB_SIZE = 1 << 1,  /* ARCH.vocab_size key */
    CV_F_ROPE_DIM = 1 << 2,    /* ARCH.rope.dimension_count = head_dim or hidden/heads */
    CV_F_LLAMA3_ROPE = 1 << 3, /* rope_freqs tensor for rope_type llama3 */
    CV_F_EXPERT_FF = 1 << 4,   /* ARCH.expert_feed_forward_length = moe_intermediate_size */
    CV_F_GPTOSS = 1 << 6,      /* fused gate_up experts split, down transposed, sinks, sliding window */
    CV_F_GEMMA3 = 1 << 5,
    CV_F_DEEPSEEK2 = 1 << 7,   /* MLA (kv_b split), MQA head count 1, nextn layers skipped */      /* norms + 1, token_embd cut to the tokenizer's size, sliding window */
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
    const char *stacked;     /* stacked name prefix; + part = a cv_names hf row */
} cv_expert_row;

typedef struct cv_pre_row {
    uint64_t fingerprint;
    const char *pre;
} cv_pre_row;

extern const cv_arch cv_archs[];
extern const int cv_n_archs;
extern const cv_name_row cv_names[];
extern const int cv_n_names;
extern const cv_expert_row cv_experts[];
extern const int cv_n_experts;
extern const char *const cv_f32_suffixes[];
extern const cv_pre_row cv_pres[];
extern const int cv_n_pres;

const cv_arch *cv_find_arch(const char *hf);

#endif
