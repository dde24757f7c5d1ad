/*
 * test_codec_iq2.c - IQ2_XXS / IQ2_XS / IQ2_S: the shared grid tables (src/codec/iqgrid.c) against
 * a straightforward re-implementation of ggml's iq2xs_init_impl, then the encoders and decoders
 * against the oracle (randomized differential tests and edge cases).
 *
 * IQF_IQGRID_FULL=1: compare every off-grid key of every grid with the slow reference algorithm
 * (about 20 s) instead of a sample.
 */
#include "codec/iqgrid.h"
#include "codec_suite.h"
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <math.h>
#include <pthread.h>
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
        /* nbkeys mirrors the lists with keys; the padding after the last list is zero */
        int64_t used = expect_off, kbad = 0;
        for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) {
            if (g->kmap[u] >= 0) continue;
            const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
            const uint16_t *nk = g->nbkeys + (nb - g->neighbours);
            if (nk[0] != nb[0]) kbad++;
            for (int j = 1; j <= nb[0]; j++) kbad += nk[j] != g->keys[nb[j]];
        }
        for (int j = 0; j < IQF_IQGRID_PAD; j++)
            kbad += g->neighbours[used + j] != 0 || g->nbkeys[used + j] != 0;
        CHECK(kbad == 0, "%s: nbkeys: %lld bad", gc->name, (long long)kbad);
        CHECK(total == g->n_neighbours, "%s total", gc->name);
    }
    free(pairs);
    free(list);

    /* the generic builder on its own (a copy, freed again) equals the shared table */
    iqf_iqgrid own;
    CHECK(iqf_iqgrid_build(&own, iqf_iq2xxs_keys, 256, 2) == 0, "build");
    const iqf_iqgrid *sh = iqf_iqgrid_get(IQF_IQGRID_IQ2XXS);
    CHECK(own.n_neighbours == sh->n_neighbours &&
          memcmp(own.kmap, sh->kmap, IQF_IQGRID_KMAP_SIZE * sizeof(int32_t)) == 0 &&
          memcmp(own.neighbours, sh->neighbours,
                 (size_t)(own.n_neighbours + own.n_offgrid) * sizeof(uint16_t)) == 0,
          "own build equals the shared table");
    iqf_iqgrid_free(&own);
    CHECK(iqf_iqgrid_build(&own, iqf_iq2xxs_keys, 256, 0) == -1, "nwant 0 refused");
    CHECK(iqf_iqgrid_get((iqf_iqgrid_id)IQF_IQGRID_N) == NULL, "bad id");

    /* decode tables: entries 0, 99 and last of ggml-common.h's iq2xxs/iq2xs/iq2s/iq1s grids */
    static const int8_t lev2[3] = { 8, 25, 43 }, lev1[3] = { -1, 0, 1 };
    static const struct { const uint16_t *keys; int size; const int8_t *lev; uint64_t v[3]; } dt[] = {
        { iqf_iq2xxs_keys, 256, lev2, { 0x0808080808080808ull, 0x08192b0808080819ull, 0x2b2b2b1908081908ull } },
        { iqf_iq2xs_keys, 512, lev2, { 0x0808080808080808ull, 0x0808192b08080819ull, 0x2b2b2b2b2b2b2b2bull } },
        { iqf_iq2s_keys, 1024, lev2, { 0x0808080808080808ull, 0x0808190819191908ull, 0x2b2b2b2b2b2b2b2bull } },
        { iqf_iq1s_keys, 2048, lev1, { 0xffffffffffffffffull, 0xffff0000000000ffull, 0x0101010101010101ull } },
    };
    uint64_t *tab = malloc(2048 * sizeof(uint64_t));
    for (int t = 0; t < 4; t++) {
        iqf_iqgrid_decode_table(dt[t].keys, dt[t].size, dt[t].lev, tab);
        CHECK(tab[0] == dt[t].v[0] && tab[99] == dt[t].v[1] && tab[dt[t].size - 1] == dt[t].v[2],
              "decode table %d: %016llx %016llx %016llx", t, (unsigned long long)tab[0],
              (unsigned long long)tab[99], (unsigned long long)tab[dt[t].size - 1]);
    }
    free(tab);
}

/* First use from many threads at once: every thread gets the same, complete table. */
static void *grab(void *arg) {
    const iqf_iqgrid **out = arg;
    *out = iqf_iqgrid_get(IQF_IQGRID_IQ1S);
    return NULL;
}

static void test_concurrent_init(void) {
    enum { NT = 6 };
    pthread_t th[NT];
    const iqf_iqgrid *got[NT] = { 0 };
    for (int i = 0; i < NT; i++) pthread_create(&th[i], NULL, grab, &got[i]);
    for (int i = 0; i < NT; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NT; i++)
        CHECK(got[i] != NULL && got[i] == got[0] && got[i]->n_neighbours == 1333695,
              "thread %d got table %p", i, (const void *)got[i]);
}

static const int types[3] = { IQF_TYPE_IQ2_XXS, IQF_TYPE_IQ2_XS, IQF_TYPE_IQ2_S };

/* Every distribution x imatrix variant x seed, several row lengths, against the oracle. */
static void test_random(bool sanitized) {
    const int64_t colsv[3] = { 256, 768, 2048 };
    const int nseeds = sanitized ? 1 : 3;
    float *x = malloc(sizeof(float) * 8 * 2048), *w = malloc(sizeof(float) * 2048);
    for (int t = 0; t < 3; t++) {
        for (int d = 0; d < QGEN_N; d++) {
            for (int m = 0; m < QGEN_IMAT_N; m++) {
                if (m == QGEN_IMAT_NONE && iqf_requires_imatrix(types[t])) continue;
                for (int s = 0; s < nseeds; s++) {
                    uint64_t seed = 1000 * (uint64_t)t + 100 * (uint64_t)d + 10 * (uint64_t)m + (uint64_t)s;
                    int64_t cols = colsv[(d + m + s) % 3], rows = cols == 2048 ? 4 : 8;
                    if (sanitized) rows = 2;
                    qgen_fill(x, rows, cols, (qgen_dist)d, seed);
                    bool have = qgen_imatrix(w, cols, (qgen_imat)m, seed ^ 0x5eed);
                    char label[160];
                    snprintf(label, sizeof label, "%s %s imat=%s seed=%llu %lldx%lld",
                             iqf_type_get(types[t])->name, qgen_dist_name((qgen_dist)d),
                             qgen_imat_name((qgen_imat)m), (unsigned long long)seed,
                             (long long)rows, (long long)cols);
                    qgen_diff(types[t], x, rows, cols, have ? w : NULL, label);
                }
            }
        }
    }
    free(x);
    free(w);
}

/* Targeted edge cases, each one row of 512 (2 super-blocks) or a few rows. */
static void test_edges(void) {
    enum { C = 512 };
    float x[4 * C], w[C], wl[C];
    tu_rng r = { 7 };
    for (int j = 0; j < C; j++) wl[j] = (float)exp(tu_normal(&r));
    for (int t = 0; t < 3; t++) {
        int type = types[t];
        const char *tn = iqf_type_get(type)->name;
        char label[128];
        const float *imats[2] = { wl, NULL };
        for (int im = 0; im < 2; im++) {
            const float *qw = imats[im];
            if (!qw && iqf_requires_imatrix(type)) continue;
            /* all zeros */
            memset(x, 0, sizeof(x));
            snprintf(label, sizeof label, "%s all-zero imat=%d", tn, !im);
            qgen_diff(type, x, 4, C, qw, label);
            /* one non-zero value per row, at different positions */
            for (int row = 0; row < 4; row++) x[row * C + 37 * row + 5] = row & 1 ? -1.5f : 0.25f;
            snprintf(label, sizeof label, "%s single value imat=%d", tn, !im);
            qgen_diff(type, x, 4, C, qw, label);
            /* one non-zero value per 8-group (parity flips everywhere) */
            memset(x, 0, sizeof(x));
            for (int i = 0; i < 4 * C; i += 8) x[i + (i / 8) % 8] = (i / 8) % 3 ? -1.0f : 2.0f;
            snprintf(label, sizeof label, "%s one per group imat=%d", tn, !im);
            qgen_diff(type, x, 4, C, qw, label);
            /* huge, tiny and sub-fp16 magnitudes, one per row */
            const double mags[4] = { 1e11, 1e-4, 3e-7, 1e-12 };
            for (int row = 0; row < 4; row++)
                for (int j = 0; j < C; j++) x[row * C + j] = (float)(mags[row] * tu_normal(&r));
            snprintf(label, sizeof label, "%s magnitudes imat=%d", tn, !im);
            qgen_diff(type, x, 4, C, qw, label);
            /* mixed scale within a super-block: one sub-block 1e4 times larger */
            for (int row = 0; row < 4; row++)
                for (int j = 0; j < C; j++)
                    x[row * C + j] = (float)(tu_normal(&r) * ((j / 32) % 8 == row ? 1e4 : 1.0));
            snprintf(label, sizeof label, "%s one loud sub-block imat=%d", tn, !im);
            qgen_diff(type, x, 4, C, qw, label);
        }
        /* imatrix zero exactly where the values are non-zero, and values zero elsewhere */
        for (int j = 0; j < C; j++) {
            bool on = (j / 3) % 2 == 0;
            w[j] = on ? 0.f : (float)exp(tu_normal(&r));
            for (int row = 0; row < 4; row++) x[row * C + j] = on ? (float)tu_normal(&r) : 0.f;
        }
        snprintf(label, sizeof label, "%s imatrix zero where x non-zero", tn);
        qgen_diff(type, x, 4, C, w, label);
        /* imatrix zero on whole sub-blocks, and everywhere */
        for (int j = 0; j < C; j++) w[j] = (j / 16) % 3 == 0 ? 0.f : wl[j];
        qgen_fill(x, 4, C, QGEN_GAUSS, 99);
        snprintf(label, sizeof label, "%s imatrix zero on sub-blocks", tn);
        qgen_diff(type, x, 4, C, w, label);
        memset(w, 0, sizeof(w));
        snprintf(label, sizeof label, "%s imatrix all zero", tn);
        qgen_diff(type, x, 4, C, w, label);
        /* signed zeros: -0.0 importance weights and -0.0 / +0.0 values mixed with normal ones */
        for (int j = 0; j < C; j++) w[j] = j % 5 == 0 ? -0.0f : wl[j];
        for (int i = 0; i < 4 * C; i++) {
            int m = (int)(tu_next(&r) % 4);
            x[i] = m == 0 ? -0.0f : m == 1 ? 0.0f : (float)tu_normal(&r);
        }
        snprintf(label, sizeof label, "%s signed zeros", tn);
        qgen_diff(type, x, 4, C, w, label);
        /* exact ties: values on a lattice */
        for (int i = 0; i < 4 * C; i++) x[i] = (float)((int)(tu_next(&r) % 11) - 5) * 0.5f;
        for (int j = 0; j < C; j++) w[j] = (float)(1 + (j % 4));
        snprintf(label, sizeof label, "%s lattice values", tn);
        qgen_diff(type, x, 4, C, w, label);
    }
}

/* Decoder-only checks that do not need the oracle: zero blocks decode to zeros. */
static void test_decode_zero(void) {
    for (int t = 0; t < 3; t++) {
        uint8_t blk[128] = { 0 };
        float y[256];
        char err[128];
        CHECK(iqf_dequantize(types[t], blk, y, 1, 256, 1, err, sizeof err) == IQF_OK, "%s", err);
        int nz = 0;
        for (int i = 0; i < 256; i++) nz += y[i] != 0;
        CHECK(nz == 0, "%s: zero block decodes to %d non-zeros", iqf_type_get(types[t])->name, nz);
    }
}

int main(void) {
    const char *san = getenv("IQF_SANITIZED");
    bool sanitized = san && *san == '1';
    const char *fe = getenv("IQF_IQGRID_FULL");
    bool full = fe && *fe == '1';
    test_concurrent_init();
    test_grids(full, sanitized);
    test_decode_zero();
    oracle_require();
    double t0 = now_s();
    test_edges();
    printf("edge cases: %.1f s\n", now_s() - t0);
    t0 = now_s();
    test_random(sanitized);
    printf("random differential: %.1f s\n", now_s() - t0);
    static const int best_flat_types[] = { IQF_TYPE_IQ2_S }; /* IQ2_XXS/IQ2_XS need an imatrix */
    codec_suite_best_flat(best_flat_types, 1);
    return test_finish("test_codec_iq2");
}
