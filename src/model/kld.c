/* kld.c - validated reading of llama-perplexity's --kl-divergence-base files (see kld.h). */
#include "kld.h"

#include "util/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

iqf_status iqf_kld_parse_header(const void *hdr, size_t n, uint64_t file_size, const char *name,
                                iqf_kld_header *h, char *err, size_t errlen) {
    const uint8_t *b = hdr;
    memset(h, 0, sizeof *h);
    if (!name) name = "?";
    if (!hdr || n < IQF_KLD_HEADER || file_size < IQF_KLD_HEADER)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: truncated (%" PRIu64 " bytes, a header needs %d)", name,
                        file_size < n ? file_size : (uint64_t)n, IQF_KLD_HEADER);
    if (memcmp(b, "_logits_", 8))
        return iqf_fail(err, errlen, IQF_E_FORMAT,
                        "%s: not a log-probability file (llama-perplexity --kl-divergence-base)", name);
    const uint32_t ctx = rd32(b + 8);
    const int32_t vocab = (int32_t)rd32(b + 12), chunk = (int32_t)rd32(b + 16);
    if (ctx < 4 || ctx > IQF_KLD_MAX_CTX)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: n_ctx %" PRIu32 " out of range [4, %d]", name, ctx, IQF_KLD_MAX_CTX);
    if (vocab < 1 || vocab > IQF_KLD_MAX_VOCAB)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: n_vocab %" PRId32 " out of range [1, %d]", name, vocab, IQF_KLD_MAX_VOCAB);
    if (chunk < 1 || chunk > IQF_KLD_MAX_CHUNKS)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %" PRId32 " chunks out of range [1, %d]", name, chunk, IQF_KLD_MAX_CHUNKS);
    h->n_ctx = (int)ctx;
    h->n_vocab = vocab;
    h->n_chunk = chunk;
    h->n_score = h->n_ctx - 1 - h->n_ctx / 2;
    h->nv = 2 * ((vocab + 1) / 2) + 4;
    /* Bounded above: 2^20 * 2^25 * 2 = 2^46 bytes per chunk, times 2^24 chunks = 2^70: check. */
    h->chunk_bytes = (uint64_t)h->n_score * (uint64_t)h->nv * 2u;
    const uint64_t tok_bytes = (uint64_t)ctx * (uint64_t)chunk * 4u;
    if (h->chunk_bytes > (UINT64_MAX - IQF_KLD_HEADER - tok_bytes) / (uint64_t)chunk)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: header sizes overflow (n_ctx %d, n_vocab %d, %d chunks)", name,
                        h->n_ctx, h->n_vocab, h->n_chunk);
    h->file_size = IQF_KLD_HEADER + tok_bytes + h->chunk_bytes * (uint64_t)chunk;
    if (file_size < h->file_size)
        return iqf_fail(err, errlen, IQF_E_FORMAT,
                        "%s: truncated: %" PRIu64 " bytes, its header (n_ctx %d, n_vocab %d, %d chunks) needs %" PRIu64,
                        name, file_size, h->n_ctx, h->n_vocab, h->n_chunk, h->file_size);
    if (file_size > h->file_size)
        return iqf_fail(err, errlen, IQF_E_FORMAT,
                        "%s: %" PRIu64 " bytes more than its header (n_ctx %d, n_vocab %d, %d chunks) describes", name,
                        file_size - h->file_size, h->n_ctx, h->n_vocab, h->n_chunk);
    return IQF_OK;
}

iqf_status iqf_kld_open(const char *path, FILE **out, iqf_kld_header *h, char *err, size_t errlen) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return iqf_fail(err, errlen, IQF_E_IO, "%s: cannot open", path);
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_IO, "%s: not a regular file", path);
    }
    uint8_t hdr[IQF_KLD_HEADER];
    size_t n = fread(hdr, 1, sizeof hdr, f);
    iqf_status s = iqf_kld_parse_header(hdr, n, (uint64_t)st.st_size, path, h, err, errlen);
    if (s) {
        fclose(f);
        return s;
    }
    *out = f;
    return IQF_OK;
}

iqf_status iqf_kld_read_tokens(FILE *f, const iqf_kld_header *h, const char *name, int32_t **toks, char *err,
                               size_t errlen) {
    *toks = NULL;
    const size_t n = (size_t)h->n_ctx * (size_t)h->n_chunk;
    int32_t *t = malloc(n * sizeof *t);
    if (!t) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (%zu tokens of %s)", n, name);
    if (fread(t, sizeof *t, n, f) != n) {
        free(t);
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: truncated (tokens)", name);
    }
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= h->n_vocab) {
            iqf_status s = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: token %zu is %" PRId32 ", outside the vocabulary [0, %d)",
                                    name, i, t[i], h->n_vocab);
            free(t);
            return s;
        }
    *toks = t;
    return IQF_OK;
}

void iqf_log_softmax(const float *l, int nv, float *out) {
    float mx = l[0];
    for (int v = 1; v < nv; v++) mx = fmaxf(mx, l[v]);
    double s = 0;
    for (int v = 0; v < nv; v++) s += exp((double)(l[v] - mx));
    const double ls = log(s);
    for (int v = 0; v < nv; v++) out[v] = (float)((double)(l[v] - mx) - ls);
}

double iqf_nll_row(const float *l, int nvoc, int tok) {
    float mx = l[0];
    for (int v = 1; v < nvoc; v++) mx = fmaxf(mx, l[v]);
    double sum = 0.0;
    for (int v = 0; v < nvoc; v++) sum += expf(l[v] - mx);
    return -((double)(l[tok] - mx) - log(sum));
}

double iqf_kld_pack_row(const float *l, int nvoc, int tok, uint16_t *out) {
    float mx = l[0], mn = l[0];
    for (int v = 1; v < nvoc; v++) {
        mx = fmaxf(mx, l[v]);
        mn = fminf(mn, l[v]);
    }
    mn = fmaxf(mn, mx - 16);
    double sum = 0.0;
    for (int v = 0; v < nvoc; v++) sum += expf(l[v] - mx);
    const float lse = (float)log(sum);
    const float min_log_prob = mn - mx - lse;
    const float scale = (mx - mn) / 65535.f;
    memcpy(out, &scale, 4);
    memcpy(out + 2, &min_log_prob, 4);
    out += 4;
    if (scale) {
        const float inv = 1 / scale;
        for (int v = 0; v < nvoc; v++) out[v] = l[v] > mn ? (uint16_t)iqf_nearest_int(inv * (l[v] - mn)) : 0;
    } else {
        memset(out, 0, (size_t)nvoc * sizeof(uint16_t));
    }
    return (double)(mx + lse - l[tok]);
}

void iqf_kld_score_row(const float *l, int nvoc, int tok, const uint16_t *base, iqf_kld_row *r) {
    float mx = l[0];
    int imax = 0;
    for (int v = 1; v < nvoc; v++)
        if (l[v] > mx) {
            mx = l[v];
            imax = v;
        }
    double sum = 0.0;
    for (int v = 0; v < nvoc; v++) sum += expf(l[v] - mx);
    const float lse = (float)log(sum);
    float scale, min_log_prob;
    memcpy(&scale, base, 4);
    memcpy(&min_log_prob, base + 2, 4);
    base += 4;
    r->nll = mx + lse - l[tok];
    r->nll_base = -(scale * base[tok] + min_log_prob);
    mx += lse;
    double kl = 0;
    int imax_base = -1;
    float pmax = 0;
    for (int v = 0; v < nvoc; v++) {
        const float plb = scale * base[v] + min_log_prob;
        if (v == 0 || plb > pmax) {
            pmax = plb;
            imax_base = v;
        }
        if (plb > -16.f) kl += expf(plb) * (plb - l[v] + mx);
    }
    r->kld = kl;
    r->same_top = imax == imax_base;
}

iqf_status iqf_kld_file_info(const char *path, int *n_ctx, int *n_vocab, int *n_chunks, char *err,
                             size_t errlen) {
    if (!path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing path");
    FILE *f = NULL;
    iqf_kld_header h;
    iqf_status s = iqf_kld_open(path, &f, &h, err, errlen);
    if (s) return s;
    fclose(f);
    if (n_ctx) *n_ctx = h.n_ctx;
    if (n_vocab) *n_vocab = h.n_vocab;
    if (n_chunks) *n_chunks = h.n_chunk;
    return IQF_OK;
}
