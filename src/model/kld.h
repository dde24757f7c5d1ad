/*
 * kld.h - reading llama-perplexity's --kl-divergence-base files (".kld").
 *
 * Layout (little-endian): "_logits_", u32 n_ctx, i32 n_vocab, i32 n_chunk, n_chunk * n_ctx i32
 * tokens, then per chunk n_score * nv u16 quantized log-probabilities, where
 * n_score = n_ctx - 1 - n_ctx/2 and nv = 2*((n_vocab+1)/2) + 4.
 * The header is checked against the file's length before anything is sized from it.
 */
#ifndef IQF_KLD_H
#define IQF_KLD_H

#include "iqforge.h"

#include <stdint.h>
#include <stdio.h>

#define IQF_KLD_HEADER 20
#define IQF_KLD_MAX_CTX (1 << 20)
#define IQF_KLD_MAX_CHUNKS (1 << 24)
#define IQF_KLD_MAX_VOCAB (1 << 24)

typedef struct iqf_kld_header {
    int n_ctx, n_vocab, n_chunk;
    int n_score, nv;          /* scored positions per chunk, u16 values per position */
    uint64_t chunk_bytes;     /* n_score * nv * 2 */
    uint64_t file_size;       /* what the header implies (= the file's) */
} iqf_kld_header;

/* Validates the IQF_KLD_HEADER bytes of a file of `file_size` bytes: magic, 4 <= n_ctx <=
 * IQF_KLD_MAX_CTX, 1 <= n_chunk <= IQF_KLD_MAX_CHUNKS, 1 <= n_vocab <= IQF_KLD_MAX_VOCAB, and the
 * size they imply equal to file_size ("truncated" / "N bytes more than its header describes").
 * Errors: IQF_E_FORMAT, message "NAME: what is wrong". */
iqf_status iqf_kld_parse_header(const void *hdr, size_t n, uint64_t file_size, const char *name,
                                iqf_kld_header *h, char *err, size_t errlen);

/* Opens `path`, reads and validates its header against its length (fstat). On success *f is
 * positioned at the tokens. Errors: IQF_E_IO (cannot open / stat), IQF_E_FORMAT. */
iqf_status iqf_kld_open(const char *path, FILE **f, iqf_kld_header *h, char *err, size_t errlen);

/* Reads the n_chunk * n_ctx tokens that follow the header into *toks (malloc'd) and checks each
 * is in [0, n_vocab). Errors: IQF_E_NOMEM, IQF_E_FORMAT. */
iqf_status iqf_kld_read_tokens(FILE *f, const iqf_kld_header *h, const char *name, int32_t **toks,
                               char *err, size_t errlen);

/* One scored position of a base file: 2 floats (scale, min log-prob) as 4 u16, then nv - 4 u16
 * log-probabilities, as llama-perplexity's process_logits writes them (logits below max - 16
 * clipped to the minimum). iqf_kld_pack_row packs a row of n_vocab logits into out (nv values)
 * and returns -log p(tok). */
double iqf_kld_pack_row(const float *logits, int n_vocab, int tok, uint16_t *out);

/* A model's row scored against a packed base row (llama-perplexity's --kl-divergence). */
typedef struct iqf_kld_row {
    double kld;           /* KL(base || model) */
    float nll, nll_base;  /* -log p(tok) under the model and the base */
    int same_top;         /* argmax equal */
} iqf_kld_row;
void iqf_kld_score_row(const float *logits, int n_vocab, int tok, const uint16_t *base, iqf_kld_row *r);

/* The log-probabilities of one row of nv logits (out[v] = l[v] - max - log sum exp(l - max),
 * summed in double): the calibration's distributions (calib.c). */
void iqf_log_softmax(const float *l, int nv, float *out);

/* -log p(tok) of one row of logits (llama-perplexity's log_softmax). */
double iqf_nll_row(const float *logits, int n_vocab, int tok);

#endif
