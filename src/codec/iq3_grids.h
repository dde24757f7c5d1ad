/*
 * iq3_grids.h - IQ3 grid data (iq3_grids.c, copied from ggml) and introspection of the tables
 * that iq3.c generates from it (for tests).
 */
#ifndef IQF_IQ3_GRIDS_H
#define IQF_IQ3_GRIDS_H

#include <stdint.h>

extern const uint16_t iqf_iq3xxs_keys[256]; /* encoder keys: 3 bits per coordinate (level l) */
extern const uint16_t iqf_iq3s_keys[512];
extern const uint32_t iqf_iq3xxs_grid[256]; /* decoder bytes: 4*(2l+1), but 62 for l = 7 */
extern const uint32_t iqf_iq3s_grid[512];   /* decoder bytes: 2l+1 */
extern const uint8_t iqf_iq3_ksigns[128];   /* 7 sign bits -> 8 with even parity */

/* Statistics of the generated key map / neighbour lists of the 256 (iq3_xxs) or 512 (iq3_s)
 * grid. Builds the tables if needed. Returns 0, or -1 for another grid size. */
typedef struct iqf_iq3_table_stats {
    int n_offgrid;     /* 12-bit keys not on the grid */
    int n_neighbours;  /* total neighbour entries */
    int min_list, max_list;
    double build_ms;   /* wall time the one build took */
} iqf_iq3_table_stats;
int iqf_iq3_tables_stats(int grid_size, iqf_iq3_table_stats *st);

/* The key map entry of a 12-bit key: if on the grid, *grid_index = its index and NULL is
 * returned; otherwise *grid_index = -1 and the neighbour list is returned (list[0] = count,
 * list[1..count] = grid indices, closest first). */
const uint16_t *iqf_iq3_neighbours(int grid_size, int key, int *grid_index);

/* The whole key map and neighbour data of the 256 or 512 grid (both NULL for another size):
 * kmap[key] >= 0 is the grid index of a 12-bit key on the grid; otherwise nb - kmap[key] - 1 is
 * its list as iqf_iq3_neighbours returns it. Builds the tables if needed. */
void iqf_iq3_key_tables(int grid_size, const int32_t **kmap, const uint16_t **nb);

#endif
