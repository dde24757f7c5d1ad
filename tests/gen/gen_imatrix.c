/*
 * gen_imatrix.c - iqf-genimatrix: a synthetic importance matrix for any model, for the
 * architecture matrix (scripts/arch-matrix.sh) where libllama cannot run the model.
 *
 *   iqf-genimatrix MODEL.gguf OUT.imatrix.gguf [SEED]
 *
 * One entry per weight matrix llama-quantize may quantize (name ending in "weight", 2 or 3
 * dimensions), with the names and counts llama-imatrix would give it: ne0 columns, one section
 * and one token count per expert for 3-D tensors. Values are positive pseudo-random sums
 * (heavy-tailed: 0.02 + 4 u^3, times the count; plain arithmetic, the same bits on every
 * machine), deterministic in SEED, written as llama-imatrix's GGUF.
 */
#include "iqforge.h"
#include "stats/imatrix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uni(uint64_t *s) {
    *s = mix(*s);
    return ((double)(*s >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: iqf-genimatrix MODEL.gguf OUT.imatrix.gguf [SEED]\n");
        return 2;
    }
    const uint64_t seed = argc == 4 ? strtoull(argv[3], NULL, 10) : 1;
    char err[512];
    iqf_gguf *g = iqf_gguf_open(argv[1], err, sizeof err);
    if (!g) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    const int64_t nt = iqf_gguf_n_tensors(g);
    iqf_imatrix_stats *st = calloc((size_t)(nt > 0 ? nt : 1), sizeof *st);
    int n = 0, rc = 0;
    if (!st) {
        fprintf(stderr, "out of memory\n");
        iqf_gguf_close(g);
        return 1;
    }
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        const size_t len = strlen(t->name);
        int nd = 1;
        for (int d = 3; d >= 1; d--)
            if (t->ne[d] > 1) {
                nd = d + 1;
                break;
            }
        if (nd < 2 || nd > 3 || len < 6 || strcmp(t->name + len - 6, "weight") != 0) continue;
        const int64_t ne0 = t->ne[0], nm = nd == 3 ? t->ne[2] : 1;
        if (ne0 <= 0 || nm <= 0 || ne0 > (1 << 24) || nm > 4096) continue;
        float *sums = malloc(sizeof(float) * (size_t)(ne0 * nm));
        int64_t *counts = malloc(sizeof(int64_t) * (size_t)nm);
        if (!sums || !counts) {
            free(sums);
            free(counts);
            fprintf(stderr, "out of memory\n");
            rc = 1;
            break;
        }
        uint64_t s = mix(seed ^ mix((uint64_t)i * 7919u));
        for (int64_t e = 0; e < nm; e++) {
            counts[e] = 64 + (int64_t)(uni(&s) * 64);
            for (int64_t c = 0; c < ne0; c++) {
                const double u = uni(&s);
                sums[e * ne0 + c] = (float)((0.02 + 4.0 * u * u * u) * (double)counts[e]);
            }
        }
        st[n].name = t->name;
        st[n].ne0 = ne0;
        st[n].n_mat = nm;
        st[n].sum_x2 = sums;
        st[n].counts = counts;
        n++;
    }
    if (!rc) {
        iqf_imatrix_meta meta = { 1, 512, "synthetic" };
        if (iqf_imatrix_write_gguf(argv[2], st, n, &meta, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            rc = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        free((void *)st[i].sum_x2);
        free((void *)st[i].counts);
    }
    free(st);
    iqf_gguf_close(g);
    return rc;
}
