/*
 * iqgrid.h - shared tables for the 8-coordinate, 2-bit-key IQ grids: IQ2_XXS (256 points),
 * IQ2_XS (512), IQ2_S (1024) and IQ1_S / IQ1_M (2048). Equivalent of ggml's iq2xs_init_impl.
 *
 * A grid point is given by a 16-bit key: coordinate i (0..7) has level l_i = (key >> 2i) & 3,
 * l in 0..2 for grid points. The encoders work with "odd levels" q = 2l+1 (1, 3, 5).
 *
 * API
 *   const iqf_iqgrid *g = iqf_iqgrid_get(IQF_IQGRID_IQ2XS);
 *       Built on first use, once per grid (pthread_once; thread-safe; ~ms, never freed, so it is
 *       reachable at exit and not a leak). Returns NULL only if malloc failed.
 *   g->grid[k]      uint64 = 8 int8 odd levels 2l+1 of point k (ggml's kgrid_q2xs layout: byte i
 *                   is coordinate i)
 *   g->kmap[u]      for every u in [0, IQF_IQGRID_KMAP_SIZE): >= 0: u is the key of grid point
 *                   kmap[u]; < 0: u is off the grid and iqf_iqgrid_neighbours(g, u) is its list
 *   iqf_iqgrid_neighbours(g, u)  -> const uint16_t *nb: nb[0] = n, nb[1..n] = grid indices
 *                   (exactly ggml's kneighbors_q2xs - kmap[u] - 1)
 *   g->nbkeys       parallel to g->neighbours: the KEY of each listed point (count entries are
 *                   copied), so a SIMD search can decode levels without a second gather
 *   Both g->neighbours and g->nbkeys have IQF_IQGRID_PAD zero entries after the last list, so
 *   a vector load of up to 32 uint16 starting inside any list stays inside the allocation.
 *   g->keys         the key data (g->size entries), also exported below as iqf_iq*_keys
 *   iqf_iqgrid_decode_table(keys, size, levels, out) builds a dequantization grid: out[k] byte i
 *                   = levels[l_i] (IQ2: {8, 25, 43}; IQ1_S: {-1, 0, +1} as int8) - this is
 *                   bit-identical to ggml-common.h's iq2xxs_grid/iq2xs_grid/iq2s_grid/iq1s_grid.
 *
 * The tables are IDENTICAL to ggml's (kmap values including the neighbour offsets, list order):
 * for every u in 0..43691 that is not a grid key, with pos_i = 2*((u >> 2i) & 3) + 1 (so keys
 * with a level-3 coordinate get lists too), the squared Euclidean distance to every grid point
 * in odd-level units; points sorted by (distance, grid index); kept: every point whose distance
 * is among the first `nwant` distinct distances (IQ2_XXS 2, IQ2_XS 2, IQ2_S 1, IQ1_S/M 3). Lists
 * are stored in increasing u, each as [n, idx...], and kmap[u] = -(offset of n + 1).
 * iqf_iqgrid_build() is the generic builder (any key set, any nwant) that iqf_iqgrid_get uses;
 * it computes the same result as ggml's qsort-per-point algorithm in a few milliseconds by
 * summing precomputed per-half distance tables.
 */
#ifndef IQF_IQGRID_H
#define IQF_IQGRID_H

#include <stdint.h>

#define IQF_IQGRID_KMAP_SIZE 43692 /* 2*(4^8-1)/3 + 2, as ggml */
#define IQF_IQGRID_PAD 32          /* zero uint16 entries after the neighbour data */

typedef enum iqf_iqgrid_id {
    IQF_IQGRID_IQ2XXS, /* 256 points, nwant 2 */
    IQF_IQGRID_IQ2XS,  /* 512 points, nwant 2 */
    IQF_IQGRID_IQ2S,   /* 1024 points, nwant 1 */
    IQF_IQGRID_IQ1S,   /* 2048 points, nwant 3 (IQ1_S and IQ1_M) */
    IQF_IQGRID_N
} iqf_iqgrid_id;

typedef struct iqf_iqgrid {
    int size;               /* number of grid points */
    int nwant;              /* distinct distance shells kept per off-grid key */
    const uint16_t *keys;   /* size keys */
    uint64_t *grid;         /* size entries: 8 int8 odd levels */
    int32_t *kmap;          /* IQF_IQGRID_KMAP_SIZE entries */
    uint16_t *neighbours;   /* n_offgrid + n_neighbours entries (+ IQF_IQGRID_PAD zeros) */
    uint16_t *nbkeys;       /* same layout: keys[neighbours[k]] (+ IQF_IQGRID_PAD zeros) */
    int32_t n_offgrid;      /* keys u < KMAP_SIZE that are not grid points */
    int32_t n_neighbours;   /* sum of all list lengths (without the count entries) */
} iqf_iqgrid;

/* The shared, lazily built table for a grid (NULL only on allocation failure). */
const iqf_iqgrid *iqf_iqgrid_get(iqf_iqgrid_id id);

/* Neighbour list of an off-grid key u (g->kmap[u] < 0): [n, idx_1 .. idx_n]. */
static inline const uint16_t *iqf_iqgrid_neighbours(const iqf_iqgrid *g, int u) {
    return g->neighbours - g->kmap[u] - 1;
}

/* Generic builder: fills *g (allocating grid, kmap, neighbours). Returns 0, or -1 if out of
 * memory (then *g holds nothing to free). keys must stay valid while g is used. */
int iqf_iqgrid_build(iqf_iqgrid *g, const uint16_t *keys, int size, int nwant);
void iqf_iqgrid_free(iqf_iqgrid *g);

/* Dequantization grid from keys: byte i of out[k] = (uint8_t)levels[(keys[k] >> 2i) & 3]. */
void iqf_iqgrid_decode_table(const uint16_t *keys, int size, const int8_t levels[3],
                             uint64_t *out);

/* Key data (iq2_grids.c; MIT, the ggml authors). */
extern const uint16_t iqf_iq2xxs_keys[256];
extern const uint16_t iqf_iq2xs_keys[512];
extern const uint16_t iqf_iq2s_keys[1024];
extern const uint16_t iqf_iq1s_keys[2048];

#endif
