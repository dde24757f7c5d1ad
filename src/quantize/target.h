/*
 * target.h - internals of size-targeted quantization (target*.c), shared with the tests.
 */
#ifndef IQF_QUANTIZE_TARGET_H
#define IQF_QUANTIZE_TARGET_H

#include "iqforge.h"
#include "../model/calib.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define IQF_TARGET_MAX_CAND 24

/* The candidate types for a tensor of row length ncols: the IQ and K types (ncols % 256 == 0),
 * else IQ4_NL and the legacy 32-blocks (ncols % 32 == 0), then Q8_0, F16; minus types this build
 * cannot encode, and when the tensor has no importance matrix (has_imatrix false) minus
 * iq2_xxs/iq2_xs/iq1_s (the encoders refuse) and, unless it is token_embd/output, minus the types
 * llama-quantize refuses without one (iq3_xxs, iq2_s, iq1_m). Returns the count written. */
int iqf_target_candidates(const char *name, int64_t ncols, bool has_imatrix, int *out, int cap);

/* "^blk\.0\.attn_q\.weight$": regex special characters escaped. */
void iqf_target_pattern(const char *name, char *out, size_t cap);

/* The files of --target-size and what they share:
 *   target.c          the plan: fixed and free tensors (from plan.c), the budget, the stages
 *   target_measure.c  each free tensor's error in each candidate type
 *   target_calib.c    KLD sensitivities with the engine (iqf_calib), in-context rounds
 *   target_alloc.c    the allocation under the budget
 *   target_io.c       the plan printed, saved, loaded, and quantized (an exact type array) */
typedef struct iqf_target_cand {
    int type;
    uint64_t bytes;  /* padded */
    double err, se;  /* raw imatrix-weighted error of the tensor, its standard error */
    double sens;     /* cost per unit of err */
    double kld;      /* calibration: measured KLD when probed, else -1 */
} iqf_target_cand;

typedef struct iqf_target_item {
    const iqf_gguf_tensor *t;
    struct iqf_feedback *fb;   /* the run's Hessians (--hessian): the encoder is error feedback; or NULL */
    iqf_gguf *g;               /* t's handle, read through iqf_gguf_tensor_load (a source: one
                                  tensor at a time); NULL: t->data is mapped */
    const char *name;          /* its output name (after --prune-layers) */
    bool quantizable, fixed;
    int type;                  /* fixed type, or the chosen one */
    const float *im;           /* ne0 * ne2, or NULL */
    int n_cand;
    iqf_target_cand c[IQF_TARGET_MAX_CAND];
    double signal;             /* sum im * w^2 over the tensor (estimate) */
    double weight;             /* sensitivity */
    int chosen;                /* candidate index */
} iqf_target_item;

/* Buffers for whole tensors, or for the measured rows of one (iqf_target_measure): the weights
 * (f32), a decoded copy (deq), blocks (q), experts (ex), row errors (re). They only grow, so a
 * run reuses one allocation per buffer instead of a malloc/free per tensor (whose freed blocks
 * glibc keeps in its heap once its mmap threshold has risen: 38 MiB on a 7B checkpoint). */
typedef struct iqf_target_buf {
    float *f32, *deq;
    uint8_t *q;
    int64_t *ex;
    double *re;
    size_t fcap, qcap, ecap, rcap;
} iqf_target_buf;
void iqf_target_buf_free(iqf_target_buf *b);

/* Item it's whole tensor as floats in b->f32 (and the expert of each row in b->ex). */
iqf_status iqf_target_load_tensor(const iqf_target_item *it, iqf_target_buf *b, int n_threads, char *err,
                                  size_t errlen);
/* b->f32 encoded as `type` into q (NULL: b->q, grown as needed), decoded into b->deq; *e receives
 * the imatrix-weighted squared error of the whole tensor. */
iqf_status iqf_target_roundtrip(const iqf_target_item *it, int type, iqf_target_buf *b, uint8_t *q,
                                const iqf_quantize_params *qp, double *e, char *err, size_t errlen);
/* The item's whole tensor encoded as `type` into q (row size x rows bytes) slab by slab (about
 * 4M weights of b at a time, so memory stays bounded at any tensor size), *e receiving its
 * imatrix-weighted squared error: the bytes and the error of iqf_target_load_tensor +
 * iqf_target_roundtrip; feedback: through the run's error feedback (it->fb) where it has one,
 * the bytes the file will hold. */
iqf_status iqf_target_encode(const iqf_target_item *it, int type, bool feedback, uint8_t *q, const iqf_quantize_params *qp,
                             iqf_target_buf *b, double *e, char *err, size_t errlen);
/* Measures every candidate of the free item it (with the run's mode, never through error
 * feedback: feedback moves error off the imatrix diagonal onto what H says the layer's output
 * ignores, so its diagonal-weighted error ranks the types wrongly; planning with it gave kjv-3m
 * KLD 0.0570 / 0.0257 at the IQ2_XS / IQ3_XXS sizes against 0.0370 / 0.0115 planned without
 * it and written with it) (rows sampled as tp says): c[].bytes, err, se
 * and it->signal; b: the workspace (grown as needed, the caller frees it). */
iqf_status iqf_target_measure(iqf_target_item *it, const iqf_target_params *tp, const iqf_quantize_params *qp,
                              uint64_t align, iqf_target_buf *b, char *err, size_t errlen);

/* KLD calibration (target_calib.c): loads the engine on the input, measures each free tensor
 * alone at its probe types and sets every candidate's sens; *out keeps the engine for
 * iqf_target_calib_context. */
iqf_status iqf_target_calibrate(const char *in, iqf_target_item *items, int nt, const iqf_target_params *tp,
                                const iqf_quantize_params *qp, FILE *log, iqf_calib **out, char *err, size_t errlen);
/* One in-context round: every free tensor at its chosen type at once, the joint KLD in *joint,
 * each tensor's curve rescaled to its marginal KLD. */
iqf_status iqf_target_calib_context(iqf_calib *cb, iqf_target_item *items, int nt, const iqf_quantize_params *qp,
                                    FILE *log, double *joint, char *err, size_t errlen);

/* The encoded blocks of the check against the recipe, kept in an unlinked temporary file so
 * that the file is written from them instead of encoding every tensor again: variant 0 the
 * plan's, 1 the recipe's; iqf_target_spill_get is an iqf_model_quantize_params.pre_encoded
 * (the chosen variant's blocks of a tensor of that type). */
typedef struct iqf_target_spill iqf_target_spill;
iqf_target_spill *iqf_target_spill_open(const char *dir, const iqf_target_item *items, int nt, char *err, size_t errlen);
void iqf_target_spill_free(iqf_target_spill *sp);
void iqf_target_spill_choose(iqf_target_spill *sp, int variant);
iqf_status iqf_target_spill_put(iqf_target_spill *sp, int variant, int i, int type, const void *q, size_t bytes, char *err,
                                size_t errlen);
bool iqf_target_spill_get(void *user, const char *tensor, int type, int64_t row0, int64_t nrows, int64_t ncols, void *dst);
/* Item i's blocks of variant `from`, when they are of `type`, read into dst (bytes) and kept
 * for variant `to` too: the recipe's pass encodes only the tensors whose type differs. */
bool iqf_target_spill_share(iqf_target_spill *sp, int from, int to, int i, int type, void *dst, size_t bytes);

/* The joint KLD on the calibration text of the model with every item i whose types[i] >= 0 at
 * that type (the others as in the input), quantized one layer at a time (bounded memory), with
 * the run's whole encoder (error feedback included); the blocks go to spill's `variant` when
 * spill is not NULL. */
iqf_status iqf_target_joint_kld(iqf_calib *cb, iqf_target_item *items, int nt, const int *types, const iqf_quantize_params *qp,
                                iqf_target_spill *spill, int variant, double *kld, char *err, size_t errlen);

#endif
