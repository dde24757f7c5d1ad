/*
 * iq3.c - IQ3_XXS (3.0625 bpw) and IQ3_S (3.4375 bpw): decoders and the compat encoders
 * (bit-exact with ggml 0.25.1's quantize_row_iq3_xxs_impl / quantize_row_iq3_s_impl, see
 * docs/FORMATS.md sections 0-5), except where ggml writes a corrupt IQ3_S block
 * (docs/compat/iq3.md).
 *
 * Structure
 *  - Tables (key map, neighbour lists) are generated from the grid keys in iq3_grids.c on first
 *    use (pthread_once).
 *  - The encoder is one block routine per type around shared pieces (iq3_variant holds the
 *    differences and the implementation chosen for the SIMD level). Per 32-weight sub-block it
 *    prepares weights, |x| and signs, then calls a "search" that picks the scale and the 8 grid
 *    points. search_ref is the plain scalar reference (ggml's loop); the AVX2/AVX-512 searches
 *    evaluate several candidate scales at once, one per lane, with exactly the reference's float
 *    operations per lane, so the bytes are identical at every level (tests check all of them).
 *  - Only IQF_MODE_COMPAT exists; a better mode would replace the search or re-choose the grid
 *    points at the final decoded scale inside the same block routines.
 */
#include "codec.h"
#include "iq3_grids.h"
#include "iq_refine.h"
#include "util/fma.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdbool.h>
#include <time.h>

/* IQ3_X86: the x86 kernels (IQF_ARCH_X86), unless -DIQF_IQ3_PORTABLE builds only the portable
 * code (to check that it stands alone). */
#if defined(IQF_ARCH_X86) && !defined(IQF_IQ3_PORTABLE)
#define IQ3_X86 1
#endif

/* ---------------------------------------------------------------------------------------------
 * Block layouts
 * ------------------------------------------------------------------------------------------- */


/* ---------------------------------------------------------------------------------------------
 * Tables generated from the grid keys
 * ------------------------------------------------------------------------------------------- */
#define IQ3_NB_CAP_256 22825 /* 3840 off-grid keys + 18985 neighbours */
#define IQ3_NB_CAP_512 28317 /* 3584 off-grid keys + 24733 neighbours */

typedef struct iq3_tab {
    int ngrid, nwant;
    const uint16_t *keys;
    int32_t kmap[4096];     /* >= 0: grid index; < 0: -(start+1) into nb (nb[start] = count) */
    uint32_t gq[512];       /* the grid as 4 int8 odd levels 2l+1 (ggml's "the_grid") */
    float gqf[512][4];      /* the same as floats */
    uint16_t *nb;
    uint16_t *nbk;          /* parallel to nb: the neighbours' keys (nbk[start] = count too) */
    uint8_t (*nbo)[4];      /* parallel to nb: per coordinate i, 8*i + level (SIMD tables) */
    int nb_cap;
    iqf_iq3_table_stats st;
} iq3_tab;

static uint16_t nb_256[IQ3_NB_CAP_256], nbk_256[IQ3_NB_CAP_256];
static uint16_t nb_512[IQ3_NB_CAP_512], nbk_512[IQ3_NB_CAP_512];
static uint8_t nbo_256[IQ3_NB_CAP_256][4], nbo_512[IQ3_NB_CAP_512][4];
static iq3_tab tab_256 = { 256, 2, iqf_iq3xxs_keys, { 0 }, { 0 }, { { 0 } }, nb_256, nbk_256, nbo_256, IQ3_NB_CAP_256, { 0 } };
static iq3_tab tab_512 = { 512, 3, iqf_iq3s_keys, { 0 }, { 0 }, { { 0 } }, nb_512, nbk_512, nbo_512, IQ3_NB_CAP_512, { 0 } };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Squared lattice distance of the search below; offsets up to this length are pre-sorted. */
#define IQ3_RMAX 40

/* Appends to list the grid points at squared level distance e from key p (e = the nwant
 * smallest distinct distances), ordered by (e, grid index): brute force over the grid. Used
 * only where the lattice walk gives up (no key of the real grids needs it). */
static int neighbours_brute(const iq3_tab *t, const int p[4], uint16_t *list) {
    uint8_t e[512];
    uint64_t present[4] = { 0, 0, 0, 0 };
    for (int j = 0; j < t->ngrid; j++) {
        int s = 0;
        for (int c = 0; c < 4; c++) {
            const int dd = ((t->keys[j] >> 3 * c) & 7) - p[c];
            s += dd * dd;
        }
        e[j] = (uint8_t)s;
        present[s >> 6] |= 1ull << (s & 63);
    }
    int cnt = 0, have = 0;
    for (int w = 0; w < 4 && have < t->nwant; w++) {
        for (uint64_t m = present[w]; m && have < t->nwant; m &= m - 1, have++) {
            const int v = 64 * w + __builtin_ctzll(m);
            for (int j = 0; j < t->ngrid; j++)
                if (e[j] == v) list[cnt++] = (uint16_t)j;
        }
    }
    return cnt;
}

/*
 * For every 12-bit key not on the grid: the grid points whose squared distance (in level units)
 * is among the nwant smallest distinct distances, ordered by (distance, grid index). This is
 * the order ggml's qsort with iq3_compare_func produces, so the lists are identical. Instead of
 * measuring the distance to every grid point, walk the lattice offsets around the key in order
 * of increasing squared length r and stop after the nwant-th length that hits the grid.
 */
static void build_tab(iq3_tab *t) {
    double t0 = now_ms();
    const int n = t->ngrid;
    for (int i = 0; i < 4096; i++) t->kmap[i] = -1;
    for (int k = 0; k < n; k++) {
        uint32_t packed = 0;
        for (int c = 0; c < 4; c++) {
            int l = (t->keys[k] >> 3 * c) & 7;
            packed |= (uint32_t)(2 * l + 1) << 8 * c;
            t->gqf[k][c] = (float)(2 * l + 1);
        }
        t->gq[k] = packed;
        t->kmap[t->keys[k]] = k;
    }
    /* All offsets with 1 <= |d|^2 <= IQ3_RMAX, bucketed by length. */
    int rstart[IQ3_RMAX + 2] = { 0 };
    for (int i = 0; i < 13 * 13 * 13 * 13; i++) {
        const int a = i % 13 - 6, b = i / 13 % 13 - 6, c = i / 169 % 13 - 6, d = i / 2197 - 6;
        const int r = a * a + b * b + c * c + d * d;
        if (r >= 1 && r <= IQ3_RMAX) rstart[r + 1]++;
    }
    for (int r = 1; r <= IQ3_RMAX; r++) rstart[r + 1] += rstart[r];
    int8_t (*offs)[4] = malloc((size_t)rstart[IQ3_RMAX + 1] * sizeof *offs);
    if (offs) {
        int fill[IQ3_RMAX + 1];
        memcpy(fill, rstart, sizeof fill);
        for (int i = 0; i < 13 * 13 * 13 * 13; i++) {
            const int a = i % 13 - 6, b = i / 13 % 13 - 6, c = i / 169 % 13 - 6, d = i / 2197 - 6;
            const int r = a * a + b * b + c * c + d * d;
            if (r < 1 || r > IQ3_RMAX) continue;
            int8_t *o = offs[fill[r]++];
            o[0] = (int8_t)a; o[1] = (int8_t)b; o[2] = (int8_t)c; o[3] = (int8_t)d;
        }
    }
    int pos = 0, nmin = 1 << 30, nmax = 0, noff = 0;
    for (int i = 0; i < 4096; i++) {
        if (t->kmap[i] >= 0) continue;
        const int p[4] = { i & 7, (i >> 3) & 7, (i >> 6) & 7, (i >> 9) & 7 };
        uint16_t list[512];
        int cnt = 0, have = 0;
        for (int r = 1; offs && r <= IQ3_RMAX && have < t->nwant; r++) {
            const int start = cnt;
            for (int o = rstart[r]; o < rstart[r + 1]; o++) {
                const int l0 = p[0] + offs[o][0], l1 = p[1] + offs[o][1];
                const int l2 = p[2] + offs[o][2], l3 = p[3] + offs[o][3];
                if ((unsigned)l0 > 7 || (unsigned)l1 > 7 || (unsigned)l2 > 7 || (unsigned)l3 > 7) continue;
                const int g = t->kmap[l0 | l1 << 3 | l2 << 6 | l3 << 9];
                if (g >= 0) list[cnt++] = (uint16_t)g;
            }
            if (cnt == start) continue;
            have++;
            for (int x = start + 1; x < cnt; x++) { /* this distance's points by grid index */
                const uint16_t v = list[x];
                int y = x;
                for (; y > start && list[y - 1] > v; y--) list[y] = list[y - 1];
                list[y] = v;
            }
        }
        if (have < t->nwant) cnt = neighbours_brute(t, p, list);
        if (pos + 1 + cnt > t->nb_cap) cnt = t->nb_cap - pos - 1; /* cannot happen: fixed data */
        t->kmap[i] = -(pos + 1);
        t->nbk[pos] = (uint16_t)cnt;
        t->nb[pos++] = (uint16_t)cnt;
        memcpy(t->nb + pos, list, (size_t)cnt * sizeof(uint16_t));
        for (int j = 0; j < cnt; j++) {
            const int key = t->keys[list[j]];
            t->nbk[pos + j] = (uint16_t)key;
            for (int c = 0; c < 4; c++) t->nbo[pos + j][c] = (uint8_t)(8 * c + ((key >> 3 * c) & 7));
        }
        pos += cnt;
        noff++;
        if (cnt < nmin) nmin = cnt;
        if (cnt > nmax) nmax = cnt;
    }
    free(offs);
    t->st.n_offgrid = noff;
    t->st.n_neighbours = pos - noff;
    t->st.min_list = nmin;
    t->st.max_list = nmax;
    t->st.build_ms = now_ms() - t0;
}

static pthread_once_t once_256 = PTHREAD_ONCE_INIT, once_512 = PTHREAD_ONCE_INIT;
static void build_256(void) { build_tab(&tab_256); }
static void build_512(void) { build_tab(&tab_512); }
static void init_iq3_xxs(void) { pthread_once(&once_256, build_256); }
static void init_iq3_s(void) { pthread_once(&once_512, build_512); }

int iqf_iq3_tables_stats(int grid_size, iqf_iq3_table_stats *st) {
    if (grid_size == 256) {
        init_iq3_xxs();
        *st = tab_256.st;
    } else if (grid_size == 512) {
        init_iq3_s();
        *st = tab_512.st;
    } else {
        return -1;
    }
    return 0;
}

void iqf_iq3_key_tables(int grid_size, const int32_t **kmap, const uint16_t **nb) {
    iqf_iq3_table_stats st;
    if (iqf_iq3_tables_stats(grid_size, &st)) {
        *kmap = NULL;
        *nb = NULL;
        return;
    }
    const iq3_tab *t = grid_size == 256 ? &tab_256 : &tab_512;
    *kmap = t->kmap;
    *nb = t->nb;
}

const uint16_t *iqf_iq3_neighbours(int grid_size, int key, int *grid_index) {
    iqf_iq3_table_stats st;
    if (iqf_iq3_tables_stats(grid_size, &st) || key < 0 || key >= 4096) return NULL;
    const iq3_tab *t = grid_size == 256 ? &tab_256 : &tab_512;
    *grid_index = t->kmap[key] >= 0 ? t->kmap[key] : -1;
    return t->kmap[key] >= 0 ? NULL : t->nb - t->kmap[key] - 1;
}

/* ---------------------------------------------------------------------------------------------
 * Decoders
 * ------------------------------------------------------------------------------------------- */
static void dequantize_row_iq3_xxs(const void *vx, float *y, int64_t n) {
    const block_iq3_xxs *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        const uint8_t *qs = x[i].qs;
        const uint8_t *sas = x[i].qs + QK_K / 4;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            uint32_t aux;
            memcpy(&aux, sas + 4 * ib, 4);
            const float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
            for (int l = 0; l < 4; l++) {
                const uint8_t signs = iqf_iq3_ksigns[(aux >> 7 * l) & 127];
                const uint32_t g1 = iqf_iq3xxs_grid[qs[2 * l]], g2 = iqf_iq3xxs_grid[qs[2 * l + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * (float)((g1 >> 8 * j) & 255) * ((signs >> j) & 1 ? -1.f : 1.f);
                    y[j + 4] = db * (float)((g2 >> 8 * j) & 255) * ((signs >> (j + 4)) & 1 ? -1.f : 1.f);
                }
                y += 8;
            }
            qs += 8;
        }
    }
}

static void dequantize_row_iq3_s(const void *vx, float *y, int64_t n) {
    const block_iq3_s *x = vx;
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float d = IQF_FP16_TO_FP32(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const int s = (x[i].scales[ib / 2] >> 4 * (ib & 1)) & 15;
            const float db = d * (float)(1 + 2 * s);
            const uint8_t *qs = x[i].qs + 8 * ib;
            const uint8_t *signs = x[i].signs + 4 * ib;
            for (int k = 0; k < 8; k++) {
                const uint32_t g = iqf_iq3s_grid[qs[k] | (((x[i].qh[ib] >> k) & 1) << 8)];
                const uint8_t sg = signs[k / 2];
                for (int j = 0; j < 4; j++) {
                    const int bit = 4 * (k & 1) + j;
                    y[4 * k + j] = db * (float)((g >> 8 * j) & 255) * ((sg >> bit) & 1 ? -1.f : 1.f);
                }
            }
            y += 32;
        }
    }
}

/* ---------------------------------------------------------------------------------------------
 * Encoder: shared pieces
 * ------------------------------------------------------------------------------------------- */
struct iq3_sub;
typedef struct iq3_variant {
    const iq3_tab *t;
    int nis;            /* candidate scales is = -nis..nis: 15 (iq3_xxs), 9 (iq3_s) */
    bool init_on_grid;  /* initial on-grid flags before the search (true xxs, false s) */
    bool refine_all;    /* the refinement re-chooses all groups (s) or only off-grid ones (xxs) */
    /* The implementation (scalar reference or SIMD), all with identical results. */
    int (*neighbour)(const iq3_tab *t, int u, const float *xval, const float *waux, float scale);
    void (*prepare)(const float *xb, const float *qw, float sigma2, bool parity,
                    struct iq3_sub *sb, uint8_t signs[4]);
    float (*search)(const struct iq3_variant *v, const struct iq3_sub *sb, int8_t L[32]);
} iq3_variant;

/* One 32-weight sub-block, prepared: |x| (with the parity flip), LS weights, sqrt(weights). */
struct iq3_sub {
    float xval[32];
    float w[32];
    float waux[32];
    float max;
    int is_lo, ncand; /* candidate scales is = is_lo .. is_lo + ncand - 1 (all: -nis, 2 nis + 1) */
};
typedef struct iq3_sub iq3_sub;


/* ggml's iq3_find_best_neighbour: the first neighbour with the smallest weighted distance. */
static int best_neighbour(const iq3_tab *t, int u, const float *xval, const float *waux,
                          float scale) {
    const uint16_t *nb = t->nb - t->kmap[u] - 1;
    const int cnt = nb[0];
    float best_d2 = FLT_MAX;
    int gi = -1;
    for (int j = 1; j <= cnt; j++) {
        const float *pg = t->gqf[nb[j]];
        float d2 = 0;
        for (int i = 0; i < 4; i++) {
            float diff = IQF_FMS_ARM(scale, pg[i], xval[i]);
            d2 = IQF_FMA_ARM(waux[i] * diff, diff, d2);
        }
        if (d2 < best_d2) {
            best_d2 = d2;
            gi = nb[j];
        }
    }
    /* ggml aborts when nothing beats FLT_MAX (only with overflowing inputs); take the first. */
    return gi >= 0 ? gi : nb[1];
}

static inline int clamp07(int l) { return l < 0 ? 0 : l > 7 ? 7 : l; }

static inline void levels_of(const iq3_tab *t, int gi, int8_t *L) {
    const uint32_t g = t->gq[gi];
    for (int i = 0; i < 4; i++) L[i] = (int8_t)((((g >> 8 * i) & 255) - 1) / 2);
}

/* sumqx = sum w*x*q and sumq2 = sum w*q*q over the sub-block at levels L (q = 2l+1), in order. */
static void level_sums(const iq3_sub *sb, const int8_t L[32], float *sumqx, float *sumq2) {
    float a = 0, b = 0;
    for (int i = 0; i < 32; i++) {
        float w = sb->w[i];
        float q = (float)(2 * L[i] + 1);
        a += w * sb->xval[i] * q; /* unfused on arm64 too: vectorized (fma.h) */
        b += w * q * q;
    }
    *sumqx = a;
    *sumq2 = b;
}

/* The refinement after the search (shared by every search implementation): at the accepted
 * scale, re-choose the off-grid groups (xxs) or all groups (s), then refit the scale. */
static float refine(const iq3_variant *v, const iq3_sub *sb, float scale, const bool on[8],
                    int8_t L[32]) {
    const iq3_tab *t = v->t;
    int n_off = 0;
    for (int k = 0; k < 8; k++) n_off += !on[k];
    if (!(n_off > 0 && scale > 0)) return scale;
    const float id = 1 / scale;
    for (int k = 0; k < 8; k++) {
        if (!v->refine_all && on[k]) continue;
        int u = 0;
        for (int i = 0; i < 4; i++)
            u |= clamp07(iqf_nearest_int(0.5f * IQF_FMS_ARM(id, sb->xval[4 * k + i], 1))) << 3 * i;
        int gi = t->kmap[u];
        if (gi < 0) gi = v->neighbour(t, u, sb->xval + 4 * k, sb->waux + 4 * k, scale);
        levels_of(t, gi, L + 4 * k);
    }
    float sumqx, sumq2;
    level_sums(sb, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
    return scale;
}

/* The reference search: ggml's loop over candidate scales, written plainly. */
static float search_ref(const iq3_variant *v, const iq3_sub *sb, int8_t L[32]) {
    const iq3_tab *t = v->t;
    int8_t Laux[32];
    bool on[8], on_aux[8];
    float best = 0, scale = sb->max / 15;
    memset(L, 0, 32);
    for (int k = 0; k < 8; k++) on[k] = v->init_on_grid;
    for (int is = sb->is_lo; is < sb->is_lo + sb->ncand; is++) {
        const float id = IQF_FMA_ARM((float)is, 0.2f, 15) / sb->max;
        const float this_scale = 1 / id;
        for (int k = 0; k < 8; k++) {
            int u = 0;
            for (int i = 0; i < 4; i++) {
                int l = clamp07(iqf_nearest_int(0.5f * IQF_FMS_ARM(id, sb->xval[4 * k + i], 1)));
                Laux[4 * k + i] = (int8_t)l;
                u |= l << 3 * i;
            }
            on_aux[k] = true;
            if (t->kmap[u] < 0) {
                on_aux[k] = false;
                int gi = best_neighbour(t, u, sb->xval + 4 * k, sb->waux + 4 * k, this_scale);
                levels_of(t, gi, Laux + 4 * k);
            }
        }
        float sumqx, sumq2;
        level_sums(sb, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
            memcpy(on, on_aux, sizeof on);
        }
    }
    return refine(v, sb, scale, on, L);
}

/* ---------------------------------------------------------------------------------------------
 * SIMD searches. Every candidate scale is one lane; per lane the float operations are exactly
 * search_ref's, in the same order. The neighbour search runs once per distinct off-grid key in a
 * vector, for all lanes at once (neighbouring candidate scales mostly round a group to the same
 * key), masked to the lanes that have that key. The sequential acceptance over the candidates
 * and the refinement are the scalar code (finish_search).
 * ------------------------------------------------------------------------------------------- */
/* The parity fix's victim in a group of 8: the first index of the smallest w*x*x. */
static int least_important(const float *x, const float *w) {
    int imin = 0;
    float min = w[0] * x[0] * x[0];
    for (int i = 1; i < 8; i++) {
        float ax = w[i] * x[i] * x[i];
        if (ax < min) {
            min = ax;
            imin = i;
        }
    }
    return imin;
}

/* the vector searches (iq3_lanes.h) and their helpers: every target (the NEON level is the plain
 * width), the x86 widths on x86 */
typedef struct iq3_cands {
    float sumqx[32], sumq2[32];
    int32_t gkey[8][32]; /* key of the grid point chosen for group k by candidate c */
    uint32_t off[8];     /* bit c: group k of candidate c was off the grid */
} iq3_cands;

/* Candidate scales: lane c < ncand is is = c - nis; padding lanes repeat the last candidate (so
 * they add no distinct keys) and are ignored by finish_search. */
static int candidate_scales(const iq3_sub *sb, int width, float *ids, float *scl) {
    const int ncand = sb->ncand;
    const int nlanes = (ncand + width - 1) / width * width;
    for (int c = 0; c < nlanes; c++) {
        const int is = (c < ncand ? c : ncand - 1) + sb->is_lo;
        ids[c] = IQF_FMA_ARM((float)is, 0.2f, 15) / sb->max; /* search_ref's id */
        scl[c] = 1 / ids[c];
    }
    return nlanes;
}

static float finish_search(const iq3_variant *v, const iq3_sub *sb, const iq3_cands *cd,
                           int8_t L[32]) {
    const int ncand = sb->ncand;
    float best = 0, scale = sb->max / 15;
    int win = -1;
    for (int c = 0; c < ncand; c++) {
        const float sumqx = cd->sumqx[c], sumq2 = cd->sumq2[c];
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            win = c;
        }
    }
    bool on[8];
    if (win < 0) {
        memset(L, 0, 32);
        for (int k = 0; k < 8; k++) on[k] = v->init_on_grid;
    } else {
        for (int k = 0; k < 8; k++) {
            for (int i = 0; i < 4; i++) L[4 * k + i] = (int8_t)((cd->gkey[k][win] >> 3 * i) & 7);
            on[k] = !((cd->off[k] >> win) & 1);
        }
    }
    return refine(v, sb, scale, on, L);
}

static const float iq3_qlev[16] = { 1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15 }; /* 2l+1 */

/* The parity fix of prepare_sub (scalar) for the SIMD prepare. */
static void parity_fix(const float *xb, iq3_sub *sb, uint8_t signs[4]) {
    for (int k = 0; k < 4; k++) {
        uint8_t s = signs[k];
        if (!(__builtin_popcount(s) & 1)) continue;
        const int imin = least_important(xb + 8 * k, sb->w + 8 * k);
        sb->xval[8 * k + imin] = -sb->xval[8 * k + imin];
        signs[k] = (uint8_t)(s ^ (1 << imin));
    }
}

/* best_neighbour's scan over the neighbour list, given the 32 terms A[8*i + l] =
 * waux_i*(scale*q_l - x_i)^2 (coordinate i, level l): per neighbour 3 adds in its order; strict <
 * keeps the first minimum. */
static inline int nb_scan(const iq3_tab *t, int u, const float *A) {
    const uint16_t *nbk = t->nbk - t->kmap[u] - 1;
    const int cnt = nbk[0];
    float best = FLT_MAX;
    int bk = nbk[1]; /* kept if nothing beats FLT_MAX */
    for (int j = 1; j <= cnt; j++) {
        const int key = nbk[j];
        float d2 = A[key & 7] + A[8 + ((key >> 3) & 7)];
        d2 += A[16 + ((key >> 6) & 7)];
        d2 += A[24 + (key >> 9)];
        const bool lt = d2 < best; /* branch-free: the outcome is unpredictable */
        bk = lt ? key : bk;
        best = lt ? d2 : best;
    }
    return t->kmap[bk];
}

/* The kernels (iq3_lanes.h), once per instruction set. */
/* the NEON level: the plain width at 8 lanes (lanes_neon.h) */
#define VL_KERNELS "iq3_lanes.h"
#include "lanes_neon.h"

#ifdef IQ3_X86
#define VL_W 8
#define VL_TGT __attribute__((target("avx2,fma")))
#define VL_SFX(name) name##_avx2
#include "vec_lanes.h"
#include "iq3_lanes.h"
#undef VL_W
#undef VL_TGT
#undef VL_SFX

#define VL_W 16
#define VL_TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))
#define VL_SFX(name) name##_avx512
#define IQ3_CANDS_TAIL cands_avx2
#include "vec_lanes.h"
#include "iq3_lanes.h"
#undef IQ3_CANDS_TAIL
#undef VL_W
#undef VL_TGT
#undef VL_SFX
#endif

/* Weights, |x| and sign bits of sub-block xb (32 values). parity: ggml's IQ3_XXS even-parity fix
 * (flip the least important weight of a group of 8 with an odd number of negatives). */
static void prepare_sub(const float *xb, const float *qw, float sigma2, bool parity, iq3_sub *sb,
                        uint8_t signs[4]) {
    if (qw) {
        for (int i = 0; i < 32; i++) sb->w[i] = qw[i] * sqrtf(IQF_FMA_ARM(xb[i], xb[i], sigma2));
    } else {
        for (int i = 0; i < 32; i++) sb->w[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < 32; i++) sb->waux[i] = sqrtf(sb->w[i]);
    for (int k = 0; k < 4; k++) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; i++) {
            const float xv = xb[8 * k + i];
            if (xv >= 0) {
                sb->xval[8 * k + i] = xv;
            } else {
                sb->xval[8 * k + i] = -xv;
                nflip++;
                s |= (uint8_t)(1 << i);
            }
        }
        if (parity && (nflip & 1)) {
            const int imin = least_important(xb + 8 * k, sb->w + 8 * k);
            sb->xval[8 * k + imin] = -sb->xval[8 * k + imin];
            s ^= (uint8_t)(1 << imin);
        }
        signs[k] = s;
    }
    float max = sb->xval[0];
    for (int i = 1; i < 32; i++) max = max > sb->xval[i] ? max : sb->xval[i];
    sb->max = max;
}


static inline int scale_nibble(float id, float scale) {
    int l = iqf_nearest_int(0.5f * IQF_FMS_ARM(id, scale, 1));
    return l < 0 ? 0 : l > 15 ? 15 : l;
}

/* 2*sum(x^2)/QK_K over the super-block; only the importance weights use it (a 256-add
 * dependency chain, skipped without them). */
static float block_sigma2(const float *xbl, const float *qwbl) {
    float sumx2 = 0;
    if (qwbl)
        for (int i = 0; i < QK_K; i++) sumx2 += xbl[i] * xbl[i]; /* unfused on arm64 too (fma.h) */
    return 2 * sumx2 / QK_K;
}

/* The candidate window of a sub-block whose current scale is s (in the search's units:
 * x ~ s * (2l + 1), so is ~ 5 (max / s - 15)); all candidates for s <= 0 (iqf_iq_cand_window). */
static void cand_window(iq3_sub *sb, int nis, int nw, float s) {
    iqf_iq_cand_window(nis, s > 0 ? nw : 0, 5 * (sb->max / s - 15), &sb->is_lo, &sb->ncand);
}

static void quantize_block_iq3_xxs(const iq3_variant *v, const float *xbl,
                                   const float *qwbl, const block_iq3_xxs *warm, int nw, block_iq3_xxs *y) {
    const iq3_tab *t = v->t;
    uint8_t q3[3 * QK_K / 8];
    uint32_t sas[QK_K / 32];
    float scales[QK_K / 32];
    memset(q3, 0, sizeof q3);
    memset(sas, 0, sizeof sas);
    const float sigma2 = block_sigma2(xbl, qwbl);
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        iq3_sub sb;
        uint8_t signs[4];
        v->prepare(xbl + 32 * ib, qwbl ? qwbl + 32 * ib : NULL, sigma2, true, &sb, signs);
        float s_cur = 0;
        if (warm) {
            uint32_t a;
            memcpy(&a, warm->qs + QK_K / 4 + 4 * ib, 4);
            s_cur = IQF_FP16_TO_FP32(warm->d) * (float)(2 * (a >> 28) + 1);
        }
        cand_window(&sb, v->nis, nw, s_cur);
        if (sb.max < 1e-8f) { /* GROUP_MAX_EPS_IQ3_XXS: grid index 0, signs +, scale 0 */
            scales[ib] = 0;
            continue;
        }
        int8_t L[32];
        /* one candidate (a warm re-encoding's window): the scalar loop, the same result as the
         * vectorised search without its lanes of padding */
        float scale = sb.ncand == 1 ? search_ref(v, &sb, L) : v->search(v, &sb, L);
        if (scale < 0) { /* ggml: "should never happen"; flips the scale and the signs */
            scale = -scale;
            for (int k = 0; k < 4; k++) signs[k] = (uint8_t)(~signs[k] & 127);
        }
        for (int k = 0; k < 8; k++) {
            int u = L[4 * k] | L[4 * k + 1] << 3 | L[4 * k + 2] << 6 | L[4 * k + 3] << 9;
            q3[8 * ib + k] = (uint8_t)t->kmap[u]; /* always on the grid by construction */
        }
        sas[ib] = (uint32_t)(signs[0] & 127) | (uint32_t)(signs[1] & 127) << 7 |
                  (uint32_t)(signs[2] & 127) << 14 | (uint32_t)(signs[3] & 127) << 21;
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale) {
        memset(y, 0, sizeof *y);
        return;
    }
    const float d = max_scale / 31;
    y->d = IQF_FP32_TO_FP16(d * 1.0125f);
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ib++) sas[ib] |= (uint32_t)scale_nibble(id, scales[ib]) << 28;
    memcpy(y->qs, q3, sizeof q3);
    for (int ib = 0; ib < QK_K / 32; ib++) {
        uint8_t *p = y->qs + QK_K / 4 + 4 * ib;
        p[0] = (uint8_t)sas[ib];
        p[1] = (uint8_t)(sas[ib] >> 8);
        p[2] = (uint8_t)(sas[ib] >> 16);
        p[3] = (uint8_t)(sas[ib] >> 24);
    }
}

/* True if every value of the 32-weight sub-block is zero (ggml's `!max` on |x|). */
static bool sub_is_zero(const float *xb) {
    for (int i = 0; i < 32; i++)
        if (xb[i] != 0.0f) return false;
    return true;
}

/*
 * IQ3_S. Differs from ggml in one case only: ggml skips an all-zero sub-block with `continue`
 * before advancing its qs/signs write pointers, so the following sub-blocks land one slot early
 * (a corrupt block). Here every sub-block is written to its own slot; the all-zero one keeps
 * ggml's bytes for it (index 0, signs +, scale nibble 0).
 */
static void quantize_block_iq3_s(const iq3_variant *v, const float *xbl,
                                 const float *qwbl, const block_iq3_s *warm, int nw, block_iq3_s *y) {
    const iq3_tab *t = v->t;
    float scales[QK_K / 32];
    memset(y, 0, sizeof *y);
    const float sigma2 = block_sigma2(xbl, qwbl);
    float max_scale = 0;
    for (int ib = 0; ib < QK_K / 32; ib++) {
        iq3_sub sb;
        uint8_t signs[4];
        v->prepare(xbl + 32 * ib, qwbl ? qwbl + 32 * ib : NULL, sigma2, false, &sb, signs);
        cand_window(&sb, v->nis, nw,
                    warm ? IQF_FP16_TO_FP32(warm->d) * (float)(2 * ((warm->scales[ib / 2] >> 4 * (ib & 1)) & 15) + 1) : 0);
        if (!sb.max) {
            scales[ib] = 0;
            continue;
        }
        int8_t L[32];
        /* one candidate (a warm re-encoding's window): the scalar loop, the same result as the
         * vectorised search without its lanes of padding */
        float scale = sb.ncand == 1 ? search_ref(v, &sb, L) : v->search(v, &sb, L);
        if (scale < 0) {
            scale = -scale;
            for (int k = 0; k < 4; k++) signs[k] = (uint8_t)~signs[k];
        }
        for (int k = 0; k < 8; k++) {
            int u = L[4 * k] | L[4 * k + 1] << 3 | L[4 * k + 2] << 6 | L[4 * k + 3] << 9;
            int gi = t->kmap[u];
            y->qs[8 * ib + k] = (uint8_t)(gi & 255);
            y->qh[ib] |= (uint8_t)((gi >> 8) << k);
        }
        memcpy(y->signs + 4 * ib, signs, 4);
        scales[ib] = scale;
        max_scale = max_scale > scale ? max_scale : scale;
    }
    if (!max_scale) return;
    const float d = max_scale / 31;
    y->d = IQF_FP32_TO_FP16(d * 1.033f);
    if (y->d == 0) {
        /* The scale underflows fp16: the block decodes to zeros whatever the layout, so ggml's
         * (shifted) layout is not corrupt here; reproduce it byte for byte. */
        int slot = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            if (sub_is_zero(xbl + 32 * ib)) continue;
            if (slot != ib) {
                memcpy(y->qs + 8 * slot, y->qs + 8 * ib, 8);
                memcpy(y->signs + 4 * slot, y->signs + 4 * ib, 4);
            }
            slot++;
        }
        memset(y->qs + 8 * slot, 0, (size_t)(8 * (QK_K / 32 - slot)));
        memset(y->signs + 4 * slot, 0, (size_t)(4 * (QK_K / 32 - slot)));
    }
    const float id = 1 / d;
    for (int ib = 0; ib < QK_K / 32; ib += 2)
        y->scales[ib / 2] = (uint8_t)(scale_nibble(id, scales[ib]) | scale_nibble(id, scales[ib + 1]) << 4);
}

/* ---------------------------------------------------------------------------------------------
 * Entry points
 * ------------------------------------------------------------------------------------------- */
/* The implementation for the context's SIMD level (all give identical bytes). */
static void pick_impl(iqf_simd simd, iq3_variant *v) {
    v->neighbour = best_neighbour;
    v->prepare = prepare_sub;
    v->search = search_ref;
#ifdef IQ3_X86
    if (simd == IQF_SIMD_AVX512) pick_avx512(v);
    else if (simd == IQF_SIMD_AVX2) pick_avx2(v);
#endif
    if (simd == IQF_SIMD_NEON) pick_neon(v);
}

static void quantize_row_iq3_xxs(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                                 const float *qw) {
    iq3_variant v = { &tab_256, 15, true, false, NULL, NULL, NULL };
    pick_impl(ctx->simd, &v);
    block_iq3_xxs *y = vy;
    float unit[QK_K];
    const float *flat = iqf_best_flat_importance(ctx, qw, unit, QK_K);
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++)
        quantize_block_iq3_xxs(&v, x + QK_K * ibl, qw ? qw + QK_K * ibl : flat, NULL, 0, y + ibl);
}

static void quantize_row_iq3_s(const iqf_qctx *ctx, const float *x, void *vy, int64_t n,
                               const float *qw) {
    iq3_variant v = { &tab_512, 9, false, true, NULL, NULL, NULL };
    pick_impl(ctx->simd, &v);
    block_iq3_s *y = vy;
    float unit[QK_K];
    const float *flat = iqf_best_flat_importance(ctx, qw, unit, QK_K);
    for (int64_t ibl = 0; ibl < n / QK_K; ibl++)
        quantize_block_iq3_s(&v, x + QK_K * ibl, qw ? qw + QK_K * ibl : flat, NULL, 0, y + ibl);
}

bool iqf_iq3_refine(iqf_simd simd, int type, const float *x, const float *qw, void *blk, int nw) {
    if (type != IQF_TYPE_IQ3_XXS && type != IQF_TYPE_IQ3_S) return false;
    iq3_variant v = { type == IQF_TYPE_IQ3_XXS ? &tab_256 : &tab_512, type == IQF_TYPE_IQ3_XXS ? 15 : 9,
                      type == IQF_TYPE_IQ3_XXS, type != IQF_TYPE_IQ3_XXS, NULL, NULL, NULL };
    if (type == IQF_TYPE_IQ3_XXS) init_iq3_xxs(); else init_iq3_s();
    pick_impl(simd, &v);
    if (type == IQF_TYPE_IQ3_XXS) {
        block_iq3_xxs cur;
        memcpy(&cur, blk, sizeof cur);
        quantize_block_iq3_xxs(&v, x, qw, &cur, nw, blk);
    } else {
        block_iq3_s cur;
        memcpy(&cur, blk, sizeof cur);
        quantize_block_iq3_s(&v, x, qw, &cur, nw, blk);
    }
    return true;
}

const iqf_codec iqf_codecs_iq3[] = {
    { IQF_TYPE_IQ3_XXS, init_iq3_xxs, quantize_row_iq3_xxs, dequantize_row_iq3_xxs },
    { IQF_TYPE_IQ3_S, init_iq3_s, quantize_row_iq3_s, dequantize_row_iq3_s },
    { -1, NULL, NULL, NULL },
};
