/*
 * calib.h - calibration (calib.c): a model's next-token distributions on a text, and how far they
 * move when some of its weight matrices are viewed as other data (a quantized copy).
 * --target-size's KLD sensitivities are measured with it (src/quantize/target_calib.c).
 *
 * Internal: the engine's interface to the layer above it (quantize), not part of iqforge.h, so
 * libiqforge.so does not export it. Only src/quantize (and tests) include it.
 */
#ifndef IQF_MODEL_CALIB_H
#define IQF_MODEL_CALIB_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct iqf_calib iqf_calib;

typedef struct iqf_calib_params {
    const char *text;   /* text file; NULL: text sampled from the model (temperature 1 from BOS,
                           fixed seed) */
    int n_ctx;          /* tokens per chunk (<= 0: 128; capped at the model's context, >= 8) */
    int n_chunks;       /* chunks (<= 0: 4; fewer if the text is shorter) */
    int n_threads;      /* <= 0: one per CPU */
    iqf_gguf *input;    /* the model as an open handle instead of the path, which then only names
                           it (iqf_model_load_gguf; the caller keeps it open until iqf_calib_free;
                           a source handle is materialized): NULL: load the path */
    bool layers;        /* keep the layer cache (every chunk's input of every layer, (n_layer + 1)
                           x n_chunks x n_ctx x n_embd floats) for iqf_calib_kld_from,
                           iqf_calib_delta and iqf_calib_kld_stream; n_ctx is then at most 512 */
    int delta_chunks;   /* iqf_calib_delta over the first this many chunks (<= 0: all) */
} iqf_calib_params;

/* Loads the model, tokenizes (or samples) the text, and stores the model's log-probabilities on
 * the second half of each chunk. Errors: those of iqf_model_load, IQF_E_IO / IQF_E_FORMAT for
 * the text, IQF_E_INVALID_ARG (fewer tokens than one chunk), IQF_E_NOMEM. */
iqf_status iqf_calib_open(const char *model, const iqf_calib_params *p, iqf_calib **out, char *err,
                          size_t errlen);
void iqf_calib_free(iqf_calib *c); /* NULL is fine; views are dropped */
/* The mean KL(stored || now) over the scored positions, with the weights as viewed now. */
iqf_status iqf_calib_kld(iqf_calib *c, double *kld, char *err, size_t errlen);
/* The id of the engine's weight matrix `name` (token_embd, output, the layers' attention and
 * feed-forward matrices) if it has ncols x nrows, else -1 (a tensor the engine does not use). */
int iqf_calib_weight(const iqf_calib *c, const char *name, int64_t ncols, int64_t nrows);
/* Views weight `id` as its nrows rows of `type` at `data` (the caller keeps data alive while it
 * is viewed); data NULL: the model's own again. A tied output follows token_embd. */
void iqf_calib_view(iqf_calib *c, int id, int type, const void *data);
/* With the layer cache (iqf_calib_params.layers): */
int iqf_calib_n_layers(const iqf_calib *c);
/* The layer weight `id` belongs to: 0..n_layer-1, -1 before the layers (token_embd), n_layer for
 * output. */
int iqf_calib_weight_layer(const iqf_calib *c, int id);
/* iqf_calib_kld when only weights of layers >= layer (or output: layer n_layer) are viewed:
 * runs those layers from the cached inputs (the same value, (n_layer - layer) / n_layer of
 * the work). layer < 0 or no cache: iqf_calib_kld. */
iqf_status iqf_calib_kld_from(iqf_calib *c, int layer, double *kld, char *err, size_t errlen);
/* Layer `layer` alone from its cached input, with the weights as viewed now: the mean over all
 * positions of the squared distance of its output (the next layer's input) from the cached
 * one (over the first delta_chunks chunks). */
iqf_status iqf_calib_delta(iqf_calib *c, int layer, double *delta, char *err, size_t errlen);
/* The joint KLD of a model whose views are set one layer at a time, so that only one layer's
 * viewed data need exist at once: fn(user, l, true) sets the views of layer l (-1: token_embd
 * and what comes before the layers, n_layer: output), the layer runs over every chunk,
 * fn(user, l, false) may drop them. Errors: fn's, IQF_E_NOMEM. */
typedef iqf_status (*iqf_calib_layer_fn)(void *user, int layer, bool on, char *err, size_t errlen);
iqf_status iqf_calib_kld_stream(iqf_calib *c, iqf_calib_layer_fn fn, void *user, double *kld, char *err,
                                size_t errlen);

#endif
