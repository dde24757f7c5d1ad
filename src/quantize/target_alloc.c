/*
 * target_alloc.c - the allocation behind `quantize --target-size`: a multiple-choice knapsack
 * (one option per tensor, minimise the summed weighted error under a byte budget).
 *
 * Two solvers, the cheaper result wins:
 *  A. Lagrangian / convex hull: every item starts at its smallest option; the segments of every
 *     item's lower convex hull of (bytes, cost) are taken in order of cost saved per byte (the
 *     path the Lagrange multiplier traces as it falls) until the next one does not fit; then the
 *     slack is filled greedily with any option that fits, then pairwise exchanges (one item
 *     down, another up) are applied while one lowers the cost and fits.
 *  B. A dynamic program over the bytes above each item's minimum: exact when that capacity is at
 *     most DP_EXACT_CELLS bytes (and the table small); otherwise on sizes rounded UP to a grid (so a solution that fits
 *     the grid fits the bytes), followed by the same fill and exchanges.
 * Everything is in a fixed order with index tie-breaks: deterministic.
 */
#include "iqforge.h"
#include "../util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DP_EXACT_CELLS (1 << 18)
#define DP_MAX_CELLS 200000
#define DP_MAX_TABLE (64u << 20) /* bytes of the back-pointer table */

typedef struct seg {
    double gain; /* cost saved per byte */
    int item, h; /* hull[h] -> hull[h+1] */
} seg;

static int cmp_seg(const void *a, const void *b) {
    const seg *x = a, *y = b;
    if (x->gain != y->gain) return x->gain > y->gain ? -1 : 1;
    if (x->item != y->item) return x->item < y->item ? -1 : 1;
    return x->h < y->h ? -1 : x->h > y->h;
}

typedef struct prob {
    int n;
    const int *k;
    const uint64_t *const *b;
    const double *const *c;
    uint64_t budget;
} prob;

static uint64_t sum_bytes(const prob *p, const int *ch) {
    uint64_t s = 0;
    for (int i = 0; i < p->n; i++) s += p->b[i][ch[i]];
    return s;
}

static double sum_cost(const prob *p, const int *ch) {
    double s = 0;
    for (int i = 0; i < p->n; i++) s += p->c[i][ch[i]];
    return s;
}

/* Greedy fill: repeatedly the single change that fits the slack with the best saving per byte
 * (a change that saves cost without needing bytes first). */
static void fill(const prob *p, int *ch) {
    uint64_t used = sum_bytes(p, ch);
    for (;;) {
        int bi = -1, bo = -1;
        double best = 0;
        bool best_free = false;
        for (int i = 0; i < p->n; i++) {
            const uint64_t cb = p->b[i][ch[i]];
            const double cc = p->c[i][ch[i]];
            for (int o = 0; o < p->k[i]; o++) {
                const double save = cc - p->c[i][o];
                if (!(save > 0)) continue;
                const uint64_t nb = p->b[i][o];
                if (nb <= cb) { /* free saving */
                    if (!best_free || save > best) best = save, bi = i, bo = o, best_free = true;
                    continue;
                }
                if (best_free || nb - cb > p->budget - used) continue;
                const double r = save / (double)(nb - cb);
                if (r > best) best = r, bi = i, bo = o;
            }
        }
        if (bi < 0) return;
        used = used - p->b[bi][ch[bi]] + p->b[bi][bo];
        ch[bi] = bo;
    }
}

/* Pairwise exchanges: the pair of changes (i to a, j to b, i != j) that fits and lowers the cost
 * most, repeatedly (bounded). Skipped when the pair space is too large. */
static void exchange(const prob *p, int *ch) {
    int64_t tot = 0;
    for (int i = 0; i < p->n; i++) tot += p->k[i];
    if (tot * tot > 40000000) return;
    for (int iter = 0; iter < 4 * p->n + 16; iter++) {
        const uint64_t used = sum_bytes(p, ch);
        const double base = sum_cost(p, ch);
        const double eps = 1e-12 * fabs(base);
        double best = -eps;
        int bi = -1, ba = -1, bj = -1, bb = -1;
        for (int i = 0; i < p->n; i++)
            for (int a = 0; a < p->k[i]; a++) {
                if (a == ch[i]) continue;
                const double dci = p->c[i][a] - p->c[i][ch[i]];
                const int64_t dbi = (int64_t)p->b[i][a] - (int64_t)p->b[i][ch[i]];
                for (int j = i + 1; j < p->n; j++)
                    for (int bo = 0; bo < p->k[j]; bo++) {
                        if (bo == ch[j]) continue;
                        const double d = dci + p->c[j][bo] - p->c[j][ch[j]];
                        if (!(d < best)) continue;
                        const int64_t db = dbi + (int64_t)p->b[j][bo] - (int64_t)p->b[j][ch[j]];
                        if (db > 0 && (uint64_t)db > p->budget - used) continue;
                        best = d, bi = i, ba = a, bj = j, bb = bo;
                    }
            }
        if (bi < 0) return;
        ch[bi] = ba;
        ch[bj] = bb;
        fill(p, ch);
    }
}

/* Solver A. */
static iqf_status lagrangian(const prob *p, int *ch) {
    int64_t nseg = 0;
    for (int i = 0; i < p->n; i++) nseg += p->k[i];
    int *ord = malloc(sizeof(int) * 256);
    int *hull = malloc(sizeof(int) * (size_t)(nseg > 0 ? nseg : 1));
    int *hoff = malloc(sizeof(int) * (size_t)(p->n + 1));
    seg *sg = malloc(sizeof(seg) * (size_t)(nseg > 0 ? nseg : 1));
    if (!ord || !hull || !hoff || !sg) {
        free(ord), free(hull), free(hoff), free(sg);
        return IQF_E_NOMEM;
    }
    int64_t ns = 0, nh = 0;
    for (int i = 0; i < p->n; i++) {
        const int k = p->k[i];
        /* options by bytes, then cost, then index (insertion sort: k <= 255) */
        for (int o = 0; o < k; o++) {
            int q = o;
            while (q > 0) {
                int a = ord[q - 1];
                bool after = p->b[i][a] > p->b[i][o] || (p->b[i][a] == p->b[i][o] && (p->c[i][a] > p->c[i][o]));
                if (!after) break;
                ord[q] = a;
                q--;
            }
            ord[q] = o;
        }
        /* lower convex hull over the non-dominated options (cost strictly falling) */
        hoff[i] = (int)nh;
        int64_t h0 = nh;
        for (int q = 0; q < k; q++) {
            const int o = ord[q];
            if (nh > h0 && !(p->c[i][o] < p->c[i][hull[nh - 1]])) continue; /* dominated */
            if (nh > h0 && p->b[i][o] == p->b[i][hull[nh - 1]]) continue;
            while (nh - h0 >= 2) {
                const int a = hull[nh - 2], m = hull[nh - 1];
                /* m is above the chord a-o: drop it */
                const double s1 = (p->c[i][a] - p->c[i][m]) / (double)(p->b[i][m] - p->b[i][a]);
                const double s2 = (p->c[i][m] - p->c[i][o]) / (double)(p->b[i][o] - p->b[i][m]);
                if (s2 >= s1) nh--;
                else break;
            }
            hull[nh++] = o;
        }
        ch[i] = hull[h0];
        for (int64_t h = h0; h + 1 < nh; h++) {
            sg[ns].gain = (p->c[i][hull[h]] - p->c[i][hull[h + 1]]) / (double)(p->b[i][hull[h + 1]] - p->b[i][hull[h]]);
            sg[ns].item = i;
            sg[ns].h = (int)(h - h0);
            ns++;
        }
    }
    hoff[p->n] = (int)nh;
    qsort(sg, (size_t)ns, sizeof *sg, cmp_seg);
    uint64_t used = sum_bytes(p, ch);
    for (int64_t s = 0; s < ns; s++) {
        const int i = sg[s].item, h = sg[s].h;
        const int from = hull[hoff[i] + h], to = hull[hoff[i] + h + 1];
        if (ch[i] != from) continue; /* an earlier segment of this item was refused */
        const uint64_t d = p->b[i][to] - p->b[i][from];
        if (d > p->budget - used) break; /* the Lagrangian point */
        ch[i] = to;
        used += d;
    }
    free(ord), free(hull), free(hoff), free(sg);
    fill(p, ch);
    exchange(p, ch);
    return IQF_OK;
}

/* Solver B. Returns IQF_OK with ch filled, or IQF_E_NOMEM (then the caller keeps solver A). */
static iqf_status dp(const prob *p, int *ch) {
    uint64_t base = 0;
    uint64_t *mn = malloc(sizeof(uint64_t) * (size_t)(p->n ? p->n : 1));
    if (!mn) return IQF_E_NOMEM;
    for (int i = 0; i < p->n; i++) {
        mn[i] = p->b[i][0];
        for (int o = 1; o < p->k[i]; o++)
            if (p->b[i][o] < mn[i]) mn[i] = p->b[i][o];
        base += mn[i];
    }
    const uint64_t cap = p->budget - base;
    uint64_t g = 1;
    int64_t cells;
    const uint64_t nn = p->n > 0 ? (uint64_t)p->n : 1;
    if (cap <= DP_EXACT_CELLS && nn * (cap + 1) <= DP_MAX_TABLE) {
        cells = (int64_t)cap;
    } else {
        uint64_t maxc = DP_MAX_TABLE / nn;
        if (maxc > DP_MAX_CELLS) maxc = DP_MAX_CELLS;
        if (maxc < 16) maxc = 16;
        g = (cap + maxc - 1) / maxc;
        if (g < 1) g = 1;
        cells = (int64_t)(cap / g);
    }
    double *f = malloc(sizeof(double) * (size_t)(cells + 1));
    double *f2 = malloc(sizeof(double) * (size_t)(cells + 1));
    uint8_t *bp = malloc((size_t)p->n * (size_t)(cells + 1));
    if (!f || !f2 || !bp) {
        free(mn), free(f), free(f2), free(bp);
        return IQF_E_NOMEM;
    }
    /* f[x]: least cost of items 0..i-1 using at most x extra cells */
    for (int64_t x = 0; x <= cells; x++) f[x] = 0;
    for (int i = 0; i < p->n; i++) {
        uint8_t *row = bp + (size_t)i * (size_t)(cells + 1);
        for (int64_t x = 0; x <= cells; x++) f2[x] = INFINITY;
        for (int o = 0; o < p->k[i]; o++) {
            const uint64_t w = (p->b[i][o] - mn[i] + g - 1) / g;
            if (w > (uint64_t)cells) continue;
            const double c = p->c[i][o];
            for (int64_t x = (int64_t)w; x <= cells; x++) {
                const double v = f[x - (int64_t)w] + c;
                if (v < f2[x]) f2[x] = v, row[x] = (uint8_t)o;
            }
        }
        double *t = f;
        f = f2;
        f2 = t;
    }
    iqf_status st = IQF_OK;
    if (!isfinite(f[cells])) st = IQF_E_INVALID_ARG;
    else {
        int64_t x = cells;
        for (int i = p->n - 1; i >= 0; i--) {
            const int o = bp[(size_t)i * (size_t)(cells + 1) + (size_t)x];
            ch[i] = o;
            x -= (int64_t)((p->b[i][o] - mn[i] + g - 1) / g);
        }
    }
    free(mn), free(f), free(f2), free(bp);
    if (st) return st;
    fill(p, ch);
    exchange(p, ch);
    return IQF_OK;
}

iqf_status iqf_target_allocate(int n, const int *k, const uint64_t *const *bytes, const double *const *cost,
                               uint64_t budget, int *choice, uint64_t *total_bytes, double *total_cost, char *err,
                               size_t errlen) {
    if (n < 0 || (n > 0 && (!k || !bytes || !cost || !choice)))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "allocation: bad arguments");
    uint64_t minsum = 0;
    for (int i = 0; i < n; i++) {
        if (k[i] < 1 || k[i] > 255 || !bytes[i] || !cost[i])
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "allocation: item %d has %d options", i, k[i]);
        uint64_t m = UINT64_MAX;
        for (int o = 0; o < k[i]; o++) {
            if (!isfinite(cost[i][o]))
                return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "allocation: item %d option %d has a non-finite cost", i, o);
            if (bytes[i][o] < m) m = bytes[i][o];
        }
        if (__builtin_add_overflow(minsum, m, &minsum))
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "allocation: sizes overflow");
    }
    if (minsum > budget)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "allocation: the smallest options need %llu bytes, over the budget of %llu",
                        (unsigned long long)minsum, (unsigned long long)budget);
    prob p = { n, k, bytes, cost, budget };
    int *a = malloc(sizeof(int) * (size_t)(n ? n : 1));
    int *b = malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (!a || !b) {
        free(a), free(b);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    iqf_status st = lagrangian(&p, a);
    if (st) {
        free(a), free(b);
        return iqf_fail(err, errlen, st, "out of memory");
    }
    const int *best = a;
    if (dp(&p, b) == IQF_OK && sum_bytes(&p, b) <= budget && sum_cost(&p, b) < sum_cost(&p, a)) best = b;
    if (n > 0) memcpy(choice, best, sizeof(int) * (size_t)n);
    if (total_bytes) *total_bytes = sum_bytes(&p, best);
    if (total_cost) *total_cost = sum_cost(&p, best);
    free(a), free(b);
    return IQF_OK;
}
