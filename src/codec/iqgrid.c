/*
 * iqgrid.c - kmap and neighbour lists of the 8-coordinate, 2-bit-key IQ grids (see iqgrid.h).
 *
 * ggml computes, for each of the ~43K off-grid keys, all grid distances and qsorts them (5 s for
 * the 1024 grid). Here: distances are kept in quarter units ((2a+1 - (2b+1))^2 / 4 = (a-b)^2, at
 * most 8*9 = 72, so one byte), and d(u, j) = lo[u & 255][j] + hi[u >> 8][j] where lo/hi are the
 * partial sums over coordinates 0..3 / 4..7, precomputed once per half-key. Per off-grid key that
 * is one byte-vector add over the grid, up to nwant min-reductions (finding the distinct shells)
 * and one compare pass collecting the kept points in index order; a stable pass per shell then
 * yields ggml's (distance, index) order.
 */
#include "iqgrid.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void iqf_iqgrid_decode_table(const uint16_t *keys, int size, const int8_t levels[3],
                             uint64_t *out) {
    for (int k = 0; k < size; k++) {
        uint64_t v = 0;
        for (int i = 0; i < 8; i++) {
            int l = (keys[k] >> 2 * i) & 3;
            uint8_t b = (uint8_t)(l < 3 ? levels[l] : 0);
            v |= (uint64_t)b << 8 * i;
        }
        out[k] = v;
    }
}

void iqf_iqgrid_free(iqf_iqgrid *g) {
    free(g->grid);
    free(g->kmap);
    free(g->neighbours);
    free(g->nbkeys);
    memset(g, 0, sizeof(*g));
}

/* d[j] = a[j] + b[j] for j < n (n a multiple of 16); returns min d. */
static uint8_t add_min(uint8_t *d, const uint8_t *a, const uint8_t *b, int n) {
#if defined(__SSE2__)
    __m128i mn = _mm_set1_epi8((char)0xff);
    for (int j = 0; j < n; j += 16) {
        __m128i v = _mm_add_epi8(_mm_loadu_si128((const __m128i *)(a + j)),
                                 _mm_loadu_si128((const __m128i *)(b + j)));
        _mm_storeu_si128((__m128i *)(d + j), v);
        mn = _mm_min_epu8(mn, v);
    }
    uint8_t t[16];
    _mm_storeu_si128((__m128i *)t, mn);
    uint8_t m = 255;
    for (int i = 0; i < 16; i++) m = t[i] < m ? t[i] : m;
    return m;
#else
    uint8_t m = 255;
    for (int j = 0; j < n; j++) {
        d[j] = (uint8_t)(a[j] + b[j]);
        m = d[j] < m ? d[j] : m;
    }
    return m;
#endif
}

/* Smallest d[j] > m, or 255 if none (all distances are <= 72). */
static uint8_t next_min(const uint8_t *d, int n, uint8_t m) {
    /* (d - m - 1) mod 256 maps d > m to [0, 254-m] and d <= m to [255-m, 255]. */
    uint8_t best = 255;
#if defined(__SSE2__)
    __m128i off = _mm_set1_epi8((char)(m + 1)), mn = _mm_set1_epi8((char)0xff);
    for (int j = 0; j < n; j += 16)
        mn = _mm_min_epu8(mn, _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(d + j)), off));
    uint8_t t[16];
    _mm_storeu_si128((__m128i *)t, mn);
    for (int i = 0; i < 16; i++) best = t[i] < best ? t[i] : best;
#else
    for (int j = 0; j < n; j++) {
        uint8_t w = (uint8_t)(d[j] - m - 1);
        best = w < best ? w : best;
    }
#endif
    if (best >= 255 - m) return 255;
    return (uint8_t)(best + m + 1);
}

/* Appends to idx every j with d[j] <= t, in increasing j; returns the count. */
static int collect(const uint8_t *d, int n, uint8_t t, uint16_t *idx) {
    int c = 0;
#if defined(__SSE2__)
    __m128i tv = _mm_set1_epi8((char)t);
    for (int j = 0; j < n; j += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(d + j));
        unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(v, tv), v));
        while (mask) {
            idx[c++] = (uint16_t)(j + __builtin_ctz(mask));
            mask &= mask - 1;
        }
    }
#else
    for (int j = 0; j < n; j++)
        if (d[j] <= t) idx[c++] = (uint16_t)j;
#endif
    return c;
}

/* Partial squared distance (quarter units) over 4 coordinates starting at coordinate c0:
 * tab[h * n + j] for half-key h (4 levels of 2 bits, level 3 included) and grid point j. */
static void half_table(uint8_t *tab, const uint16_t *keys, int size, int n, int c0) {
    for (int h = 0; h < 256; h++) {
        uint8_t *row = tab + (size_t)h * n;
        for (int j = 0; j < size; j++) {
            int s = 0;
            for (int i = 0; i < 4; i++) {
                int a = (h >> 2 * i) & 3, b = (keys[j] >> 2 * (c0 + i)) & 3;
                s += (a - b) * (a - b);
            }
            row[j] = (uint8_t)s;
        }
        for (int j = size; j < n; j++) row[j] = 100; /* padding: sums to 200, never a neighbour */
    }
}

int iqf_iqgrid_build(iqf_iqgrid *g, const uint16_t *keys, int size, int nwant) {
    memset(g, 0, sizeof(*g));
    if (size <= 0 || size > 65535 || nwant < 1) return -1;
    const int n = (size + 15) & ~15; /* padded row length */
    g->size = size;
    g->nwant = nwant;
    g->keys = keys;
    g->grid = malloc((size_t)size * sizeof(uint64_t));
    g->kmap = malloc(IQF_IQGRID_KMAP_SIZE * sizeof(int32_t));
    uint8_t *lo = malloc((size_t)256 * n), *hi = malloc((size_t)256 * n);
    uint8_t *d = malloc((size_t)n);
    uint16_t *idx = malloc((size_t)n * sizeof(uint16_t));
    size_t cap = (size_t)IQF_IQGRID_KMAP_SIZE * 8, used = 0;
    uint16_t *nb = malloc(cap * sizeof(uint16_t));
    int ok = g->grid && g->kmap && lo && hi && d && idx && nb;
    if (ok) {
        for (int k = 0; k < size; k++) {
            uint64_t v = 0;
            for (int i = 0; i < 8; i++)
                v |= (uint64_t)(uint8_t)(2 * ((keys[k] >> 2 * i) & 3) + 1) << 8 * i;
            g->grid[k] = v;
        }
        for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) g->kmap[u] = -1;
        for (int k = 0; k < size; k++) g->kmap[keys[k]] = k; /* keys are < 43691 */
        half_table(lo, keys, size, n, 0);
        half_table(hi, keys, size, n, 4);
        for (int u = 0; u < IQF_IQGRID_KMAP_SIZE && ok; u++) {
            if (g->kmap[u] >= 0) continue;
            g->n_offgrid++;
            uint8_t shell[8];
            int ns = 0;
            shell[ns++] = add_min(d, lo + (size_t)(u & 255) * n, hi + (size_t)(u >> 8) * n, n);
            while (ns < nwant && ns < 8) {
                uint8_t m = next_min(d, n, shell[ns - 1]);
                if (m == 255 || m >= 200) break;
                shell[ns++] = m;
            }
            int c = collect(d, n, shell[ns - 1], idx);
            if (used + 1 + (size_t)c > cap) {
                cap = cap * 2 + (size_t)c;
                uint16_t *t = realloc(nb, cap * sizeof(uint16_t));
                if (!t) { ok = 0; break; }
                nb = t;
            }
            g->kmap[u] = -(int32_t)(used + 1);
            nb[used++] = (uint16_t)c;
            for (int s = 0; s < ns; s++)
                for (int i = 0; i < c; i++)
                    if (d[idx[i]] == shell[s]) nb[used++] = idx[i];
            g->n_neighbours += c;
        }
    }
    free(lo);
    free(hi);
    free(d);
    free(idx);
    if (!ok) {
        free(nb);
        iqf_iqgrid_free(g);
        return -1;
    }
    uint16_t *t = realloc(nb, (used + IQF_IQGRID_PAD) * sizeof(uint16_t));
    if (!t) {
        free(nb);
        iqf_iqgrid_free(g);
        return -1;
    }
    memset(t + used, 0, IQF_IQGRID_PAD * sizeof(uint16_t));
    g->neighbours = t;
    g->nbkeys = malloc((used + IQF_IQGRID_PAD) * sizeof(uint16_t));
    if (!g->nbkeys) {
        iqf_iqgrid_free(g);
        return -1;
    }
    memcpy(g->nbkeys, t, (used + IQF_IQGRID_PAD) * sizeof(uint16_t));
    for (int u = 0; u < IQF_IQGRID_KMAP_SIZE; u++) {
        if (g->kmap[u] >= 0) continue;
        const uint16_t *l = iqf_iqgrid_neighbours(g, u);
        uint16_t *kl = g->nbkeys + (l - t);
        for (int j = 1; j <= l[0]; j++) kl[j] = keys[l[j]];
    }
    return 0;
}

static iqf_iqgrid tables[IQF_IQGRID_N];
static int table_ok[IQF_IQGRID_N];

#define IQGRID_ONCE(ID, KEYS, NWANT)                                                              \
    static void build_##ID(void) {                                                                \
        table_ok[ID] = iqf_iqgrid_build(&tables[ID], KEYS, (int)(sizeof(KEYS) / sizeof(KEYS[0])), \
                                        NWANT) == 0;                                              \
    }
IQGRID_ONCE(IQF_IQGRID_IQ2XXS, iqf_iq2xxs_keys, 2)
IQGRID_ONCE(IQF_IQGRID_IQ2XS, iqf_iq2xs_keys, 2)
IQGRID_ONCE(IQF_IQGRID_IQ2S, iqf_iq2s_keys, 1)
IQGRID_ONCE(IQF_IQGRID_IQ1S, iqf_iq1s_keys, 3)

const iqf_iqgrid *iqf_iqgrid_get(iqf_iqgrid_id id) {
    static pthread_once_t once[IQF_IQGRID_N] = { PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT,
                                                 PTHREAD_ONCE_INIT, PTHREAD_ONCE_INIT };
    static void (*const build[IQF_IQGRID_N])(void) = {
        build_IQF_IQGRID_IQ2XXS, build_IQF_IQGRID_IQ2XS, build_IQF_IQGRID_IQ2S,
        build_IQF_IQGRID_IQ1S,
    };
    if ((unsigned)id >= IQF_IQGRID_N) return NULL;
    pthread_once(&once[id], build[id]);
    return table_ok[id] ? &tables[id] : NULL;
}
