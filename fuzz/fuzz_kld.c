/*
 * fuzz_kld.c - libFuzzer target for the .kld (llama-perplexity --kl-divergence-base) reader
 * (src/model/kld.c). The input is the whole file: the header is validated against its length,
 * then, through a memory stream of exactly that size, the tokens are read and checked against
 * the header's vocabulary and every chunk of log-probabilities is read, as iqf_perplexity does.
 * Acceptance implies the exact size identity; any violation aborts.
 */
#include "model/kld.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[256] = "";
    iqf_kld_header h;
    if (iqf_kld_parse_header(data, size, size, "fuzz.kld", &h, err, sizeof err) != IQF_OK) {
        if (!err[0]) abort();
        return 0;
    }
    if (h.file_size != size || h.n_ctx < 4 || h.n_chunk < 1 || h.n_vocab < 1 || h.n_score < 1 ||
        h.nv < h.n_vocab + 4)
        abort();
    if (size == 0) return 0;
    void *copy = malloc(size);
    if (!copy) return 0;
    memcpy(copy, data, size);
    FILE *f = fmemopen(copy, size, "rb");
    if (!f) {
        free(copy);
        return 0;
    }
    if (fseek(f, IQF_KLD_HEADER, SEEK_SET) == 0) {
        int32_t *toks = NULL;
        if (iqf_kld_read_tokens(f, &h, "fuzz.kld", &toks, err, sizeof err) == IQF_OK) {
            const size_t n = (size_t)h.n_ctx * (size_t)h.n_chunk;
            for (size_t i = 0; i < n; i++) {
                if (toks[i] < 0 || toks[i] >= h.n_vocab) abort();
                sink += (unsigned)toks[i];
            }
            uint16_t *lp = malloc(h.chunk_bytes ? h.chunk_bytes : 1);
            if (lp) {
                for (int c = 0; c < h.n_chunk; c++)
                    if (fread(lp, 1, h.chunk_bytes, f) != h.chunk_bytes) abort(); /* the size was checked */
                if (fgetc(f) != EOF) abort();
                free(lp);
            }
            free(toks);
        } else if (!err[0]) {
            abort();
        }
    }
    fclose(f);
    free(copy);
    return 0;
}
