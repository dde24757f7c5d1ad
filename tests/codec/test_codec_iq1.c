/*
 * test_codec_iq1.c - IQ1_S and IQ1_M against the oracle (ggml 0.25.1): randomized differential
 * tests over every distribution x imatrix variant (bytes at every SIMD level, 1 and 3 threads;
 * our decoder on the oracle's bytes bitwise), plus targeted edge cases (tests/common/codec_suite.c),
 * after a consistency check of the IQ1 grid tables. IQ1_S requires an
 * imatrix (as in ggml); IQ1_M is also tested without one.
 */
#include "codec/codec.h"
#include "codec/iqgrid.h"
#include "codec_suite.h"
#include "iqforge.h"
#include "testutil.h"

#include <time.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* The IQ1 grid tables (built by iqgrid.c for ggml's iq2xs_init_impl(IQ1_S)): 2048 points, every
 * other 2-bit key of the 43692 has a non-empty neighbour list of grid indices. Build time is
 * printed (docs/perf/iq1iq4.md), not asserted. */
static void check_tables(void) {
    double t0 = now_ms();
    const iqf_iqgrid *g = iqf_iqgrid_get(IQF_IQGRID_IQ1S);
    double t1 = now_ms();
    const iqf_codec *c = iqf_codec_get(IQF_TYPE_IQ1_S);
    if (c && c->init) c->init();
    double t2 = now_ms();
    printf("test_codec_iq1: iq1s grid tables %.1f ms, codec init (neighbour keys) %.1f ms\n", t1 - t0, t2 - t1);
    CHECK(g != NULL, "iqgrid IQ1S");
    if (!g) return;
    CHECK(g->size == 2048 && g->nwant == 3, "grid size %d nwant %d", g->size, g->nwant);
    CHECK(g->n_offgrid == IQF_IQGRID_KMAP_SIZE - 2048, "off-grid keys %d", (int)g->n_offgrid);
    int bad = 0;
    for (int k = 0; k < 2048; k++)
        if (g->kmap[iqf_iq1s_keys[k]] != k) bad++;
    long total = 0;
    for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) {
        if (g->kmap[u] >= 0) continue;
        const uint16_t *nb = iqf_iqgrid_neighbours(g, u);
        if (nb[0] < 1) bad++;
        for (int j = 1; j <= nb[0]; j++)
            if (nb[j] >= 2048) bad++;
        total += nb[0];
    }
    CHECK(bad == 0, "%d inconsistent kmap/neighbour entries", bad);
    CHECK(total == g->n_neighbours, "neighbour total %ld vs %d", total, (int)g->n_neighbours);
}

int main(void) {
    static const int types[] = { IQF_TYPE_IQ1_S, IQF_TYPE_IQ1_M };
    check_tables();
    return codec_suite_run_iq("test_codec_iq1", types, 2);
}
