/*
 * test_codec_iq2.c - IQ2_XXS / IQ2_XS / IQ2_S: the shared grid tables (src/codec/iqgrid.c) against
 * a straightforward re-implementation of ggml's iq2xs_init_impl, then the encoders and decoders
 * against the oracle (randomized differential tests and edge cases).
 *
 * IQF_IQGRID_FULL=1: compare every off-grid key of every grid with the slow reference algorithm
 * (about 20 s) instead of a sample.
 */
#include "codec/iqgrid.h"
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the reference algorithm, written plainly: all distances, qsort by (d2, index), shells */
static int cmp_pair(const void *a, const void *b) {
    const int *l = a, *r = b;
    if (l[0] != r[0]) return l[0] < r[0] ? -1 : 1;
    return l[1] < r[1] ? -1 : l[1] > r[1];
}

/* Writes the list of off-grid key u into out (out[0] = n); returns n. */
static int ref_list(const uint16_t *keys, int size, int nwant, int u, int *pairs, uint16_t *out) {
    int pos[8];
    for (int k = 0; k < 8; k++) pos[k] = 2 * ((u >> 2 * k) & 3) + 1;
    for (int j = 0; j < size; j++) {
        int d2 = 0;
        for (int k = 0; k < 8; k++) {
            int q = 2 * ((keys[j] >> 2 * k) & 3) + 1;
            d2 += (q - pos[k]) * (q - pos[k]);
        }
        pairs[2 * j] = d2;
        pairs[2 * j + 1] = j;
    }
    qsort(pairs, (size_t)size, 2 * sizeof(int), cmp_pair);
    int n = 0, nhave = 1, d2 = pairs[0];
    for (int j = 0; j < size; j++) {
        if (pairs[2 * j] > d2) {
            if (nhave == nwant) break;
            d2 = pairs[2 * j];
            ++nhave;
        }
        out[1 + n++] = (uint16_t)pairs[2 * j + 1];
    }
    out[0] = (uint16_t)n;
    return n;
}

typedef struct grid_case {
    iqf_iqgrid_id id;
    const char *name;
    const uint16_t *keys;
    int size, nwant;
    int32_t n_offgrid, n_neighbours; /* from the full reference run */
} grid_case;

static void test_grids(bool full, bool sanitized) {
    static const grid_case cases[] = {
        { IQF_IQGRID_IQ2XXS, "iq2xxs", iqf_iq2xxs_keys, 256, 2, 43436, 373964 },
        { IQF_IQGRID_IQ2XS, "iq2xs", iqf_iq2xs_keys, 512, 2, 43180, 508542 },
        { IQF_IQGRID_IQ2S, "iq2s", iqf_iq2s_keys, 1024, 1, 42668, 166432 },
        { IQF_IQGRID_IQ1S, "iq1s", iqf_iq1s_keys, 2048, 3, 41644, 1333695 },
    };
    int *pairs = malloc(2 * 2048 * sizeof(int));
    uint16_t *list = malloc(2049 * sizeof(uint16_t));
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const grid_case *gc = &cases[c];
        double t0 = now_s();
        const iqf_iqgrid *g = iqf_iqgrid_get(gc->id);
        double t1 = now_s();
        CHECK(g != NULL, "%s built", gc->name);
        if (!g) continue;
        printf("%s: tables built in %.1f ms: %d off-grid keys, %d neighbours\n", gc->name,
               1e3 * (t1 - t0), g->n_offgrid, g->n_neighbours);
        CHECK(iqf_iqgrid_get(gc->id) == g, "same table on the second call");
        CHECK(g->size == gc->size && g->nwant == gc->nwant && g->keys == gc->keys, "%s", gc->name);
        CHECK(g->n_offgrid == gc->n_offgrid, "%s off-grid %d", gc->name, g->n_offgrid);
        if (gc->n_neighbours)
            CHECK(g->n_neighbours == gc->n_neighbours, "%s neighbours %d", gc->name, g->n_neighbours);
        /* grid and kmap of the grid points */
        int bad = 0;
        for (int k = 0; k < g->size; k++) {
            if (g->kmap[g->keys[k]] != k) bad++;
            for (int i = 0; i < 8; i++) {
                int8_t b = (int8_t)(g->grid[k] >> 8 * i);
                if (b != 2 * ((g->keys[k] >> 2 * i) & 3) + 1) bad++;
            }
        }
        CHECK(bad == 0, "%s grid/kmap: %d bad", gc->name, bad);
        /* Every off-grid key: the offsets follow from the list lengths in increasing key order,
         * exactly as ggml lays them out; lists compared with the reference on a sample. */
        int step = full ? 1 : (g->size <= 256 ? 3 : g->size <= 512 ? 11 : g->size <= 1024 ? 29 : 67);
        if (sanitized && !full) step *= 7;
        int64_t expect_off = 0, total = 0, nbad = 0, ncmp = 0;
        double t2 = now_s();
        for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) {
            if (g->kmap[u] >= 0) continue;
            if (-(int64_t)g->kmap[u] - 1 != expect_off) nbad++;
            const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
            expect_off += 1 + nb[0];
            total += nb[0];
            if (u % step) continue;
            ncmp++;
            int n = ref_list(gc->keys, gc->size, gc->nwant, u, pairs, list);
            if (n != nb[0] || memcmp(list, nb, (size_t)(n + 1) * sizeof(uint16_t)) != 0) {
                if (nbad < 5) fprintf(stderr, "%s key %d: list differs (n %d vs %d)\n", gc->name, u,
                                      nb[0], n);
                nbad++;
            }
        }
        printf("%s: %lld lists compared with the reference algorithm (%.2f s)\n", gc->name,
               (long long)ncmp, now_s() - t2);
        CHECK(nbad == 0, "%s: %lld bad lists/offsets", gc->name, (long long)nbad);
        CHECK(total == g->n_neighbours, "%s total", gc->name);
    }
    free(pairs);
    free(list);
}

int main(void) {
    const char *san = getenv("IQF_SANITIZED");
    bool sanitized = san && *san == '1';
    const char *fe = getenv("IQF_IQGRID_FULL");
    bool full = fe && *fe == '1';
    test_grids(full, sanitized);
    return test_finish("test_codec_iq2");
}
