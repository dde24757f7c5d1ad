/*
 * fuzz_imatrix_dat.c - libFuzzer target for the legacy .dat importance matrix reader
 * (iqf_imatrix_parse_dat). Build and run with scripts/fuzz.sh. The input is parsed from a buffer of
 * exactly its size (ASan catches any read past it); an accepted matrix has every entry looked up
 * and touched, and goes through the include/exclude filters.
 */
#include "stats/imatrix.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static volatile double sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    iqf_imatrix im;
    char err[256];
    if (iqf_imatrix_parse_dat(buf, size, &im, err, sizeof err) == IQF_OK) {
        if (im.n_entries < 1) abort();
        for (int i = 0; i < im.n_entries; i++) {
            const iqf_imatrix_entry *e = &im.entries[i];
            if (e->n < 1 || iqf_imatrix_find(&im, e->name) != e) abort();
            sink += e->values[0] + e->values[e->n - 1];
            if (i > 0 && strcmp(im.entries[i - 1].name, e->name) >= 0) abort();
        }
        for (int i = 0; i < im.n_datasets; i++) sink += (double)strlen(im.datasets[i]);
        const char *exc[] = { "ffn" }, *inc[] = { "attn", "" };
        iqf_imatrix_filter(&im, NULL, 0, exc, 1);
        iqf_imatrix_filter(&im, inc, 2, NULL, 0);
        iqf_imatrix_free(&im);
    } else if (!err[0]) {
        abort(); /* an error always has a message */
    }
    free(buf);
    return 0;
}
