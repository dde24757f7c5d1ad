/*
 * fuzz_spm.c - libFuzzer target for the SentencePiece tokenizer.model reader (src/convert/spm.c):
 * the input is a whole ModelProto. An accepted one is walked and checked against what the
 * reader promises: at most IQF_SPM_MAX_PIECES pieces, each non-empty, inside the buffer, of a
 * type 1..6, exactly one UNKNOWN piece, byte pieces only with byte_fallback, a model_type 1..4.
 * A refused one must say "fz.model: ..." on one line.
 */
#include "convert/spm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile unsigned sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512];
    iqf_spm *m = iqf_spm_parse(data, size, "fz.model", err, sizeof err);
    if (m) {
        if (m->n_pieces < 1 || m->n_pieces > IQF_SPM_MAX_PIECES || m->model_type < 1 || m->model_type > 4) abort();
        int unk = 0;
        for (int64_t i = 0; i < m->n_pieces; i++) {
            const iqf_spm_piece *p = &m->pieces[i];
            if (!p->len || (const uint8_t *)p->s < m->buf || (const uint8_t *)p->s + p->len > m->buf + m->size) abort();
            if (p->type < IQF_SPM_NORMAL || p->type > IQF_SPM_BYTE) abort();
            if (p->type == IQF_SPM_BYTE && !m->byte_fallback) abort();
            unk += p->type == IQF_SPM_UNKNOWN;
            for (size_t k = 0; k < p->len; k++) sink += (unsigned char)p->s[k];
            sink += p->score == p->score;
        }
        if (unk != 1) abort();
        if (m->norm_name)
            for (size_t k = 0; k < m->norm_name_len; k++) sink += (unsigned char)m->norm_name[k];
        iqf_spm_free(m);
    } else if (strncmp(err, "fz.model: ", 10) != 0 || strchr(err, '\n'))
        abort();
    return 0;
}
