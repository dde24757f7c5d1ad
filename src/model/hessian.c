/* hessian.c - Hessian capture during the forward pass (see hessian.h). */
#include "hessian.h"
#include "../util/arch.h"
#include "../util/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* A zeroed accumulator of n doubles, its pages written before the capture reads them. calloc's
 * fresh pages would each fault twice in the accumulation's read-modify-write (the shared zero
 * page on the read, then a copy-on-write whose TLB shootdown interrupts the other threads):
 * 25 s of sys time in a 330 s capture of a Mistral-7B shape (1.7 GiB of accumulators,
 * docs/PERFORMANCE.md). Blocks of 2 MiB and more are 2 MiB-aligned and asked for as
 * transparent huge pages, where the system has them. free() releases it. */
static double *acc_alloc(size_t n) {
    const size_t bytes = n * sizeof(double), huge = (size_t)2 << 20;
    void *p = NULL;
#ifdef MADV_HUGEPAGE
    if (bytes >= huge) {
        const size_t rounded = (bytes + huge - 1) / huge * huge;
        if (posix_memalign(&p, huge, rounded)) p = NULL;
        else (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: without it, small pages */
    }
#endif
    if (!p) p = malloc(bytes ? bytes : 1);
    if (p) memset(p, 0, bytes);
    return p;
}

void iqf_hessian_acc_free(iqf_hess_acc *a) {
    if (!a) return;
    for (int i = 0; i < a->n_slots; i++) {
        free(a->slots[i].sum);
        free(a->slots[i].ecount);
    }
    free(a->slots);
    free(a);
}

/* The most slots of one layer (the slot map's owner rows are fewer). */
#define HESS_MAX_LAYER_SLOTS 32

/* Layer l's weight blk.l.<t>.weight, or NULL. */
static const iqf_weight *layer_weight(const iqf_model *m, int l, const char *t) {
    char name[IQF_GGUF_MAX_NAME];
    snprintf(name, sizeof name, "blk.%d.%s.weight", l, t);
    for (int i = 0; i < m->n_mats; i++)
        if (!strcmp(m->mats[i]->name, name)) return m->mats[i];
    return NULL;
}

/* The slot owners of layer l from the slot map (stats/hessian_file.h), in its order: kind 1 the
 * plain slots, kind 2 the per-expert ones (3-D weights with at least 2 experts); each slot goes to
 * the first of its owners the layer has. */
static int layer_owners_of(const iqf_model *m, int l, int kind, const iqf_weight **ws) {
    int nr;
    const iqf_hessian_slot_row *map = iqf_hessian_slot_map(&nr);
    const char *taken[HESS_MAX_LAYER_SLOTS];
    int n = 0;
    for (int i = 0; i < nr && n < HESS_MAX_LAYER_SLOTS; i++) {
        if (map[i].owner != kind) continue;
        bool dup = false;
        for (int j = 0; j < n; j++) dup |= !strcmp(taken[j], map[i].slot);
        const iqf_weight *w = dup ? NULL : layer_weight(m, l, map[i].tensor);
        if (!w || (kind == 2 && w->n_mat <= 1)) continue;
        taken[n] = map[i].slot;
        ws[n++] = w;
    }
    return n;
}
static int layer_owners(const iqf_model *m, int l, const iqf_weight **ws) { return layer_owners_of(m, l, 1, ws); }
static int layer_expert_owners(const iqf_model *m, int l, const iqf_weight **ws) { return layer_owners_of(m, l, 2, ws); }

/* The block for an input n wide with blocks of at most b: n if n <= b, else the largest multiple
 * of 32 that is <= b and divides n, else n. */
static int64_t block_upto(int64_t n, int64_t b) {
    if (n <= b) return n;
    for (int64_t k = b / 32 * 32; k >= 32; k -= 32)
        if (n % k == 0) return k;
    return n;
}

iqf_status iqf_hessian_attach(iqf_context *c, int64_t max_block, iqf_hess_acc **out, char *err,
                              size_t errlen) {
    return iqf_hessian_attach_ex(c, max_block, 0, out, err, errlen);
}

iqf_status iqf_hessian_attach_ex(iqf_context *c, int64_t max_block, int64_t expert_block, iqf_hess_acc **out,
                                 char *err, size_t errlen) {
    if (!c || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    *out = NULL;
    const iqf_model *m = c->m;
    iqf_hess_acc *a = calloc(1, sizeof *a);
    if (!a) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    a->slots = calloc((size_t)m->info.n_layer * 2 * HESS_MAX_LAYER_SLOTS + 1, sizeof *a->slots);
    if (!a->slots) {
        free(a);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    }
    const iqf_weight *owners[2 * HESS_MAX_LAYER_SLOTS];
    /* automatic choice: full matrices if all of them fit in IQF_HESSIAN_AUTO_FULL_BYTES of
     * double accumulators, else blocks of IQF_HESSIAN_AUTO_BLOCK */
    bool auto_full = true;
    if (max_block == 0) {
        double bytes = 0;
        for (int l = 0; l < m->info.n_layer; l++) {
            const iqf_weight *ws[HESS_MAX_LAYER_SLOTS];
            const int nw = layer_owners(m, l, ws);
            for (int k = 0; k < nw; k++) bytes += (double)ws[k]->ncols * (double)ws[k]->ncols * sizeof(double);
            const int ne = layer_expert_owners(m, l, ws);
            for (int k = 0; k < ne; k++)
                bytes += (double)ws[k]->n_mat * (double)ws[k]->ncols * (double)ws[k]->ncols * sizeof(double);
        }
        bytes += (double)m->output.ncols * (double)m->output.ncols * sizeof(double);
        auto_full = bytes <= (double)IQF_HESSIAN_AUTO_FULL_BYTES;
    }
    /* the expert slots' block: expert_block > 0 as given; 0: the others' rule, then 32-blocks if
     * their accumulators would pass IQF_HESSIAN_EXPERT_BYTES, then none; < 0: none */
    int64_t ebs_cap = 0; /* 0: the others' rule; > 0: blocks of at most this; -1: no expert slots */
    if (expert_block > 0) ebs_cap = expert_block;
    else if (expert_block < 0) ebs_cap = -1;
    else
        for (int pass = 0; pass < 3; pass++) {
            if (pass == 2) {
                ebs_cap = -1;
                break;
            }
            double bytes = 0;
            for (int l = 0; l < m->info.n_layer; l++) {
                const iqf_weight *ws[HESS_MAX_LAYER_SLOTS];
                const int ne = layer_expert_owners(m, l, ws);
                for (int k = 0; k < ne; k++) {
                    const int64_t n = ws[k]->ncols;
                    const int64_t bs = pass ? block_upto(n, 32)
                                            : max_block > 0 ? (n > max_block ? max_block : n)
                                            : max_block < 0 || auto_full ? n : iqf_hessian_auto_block(n);
                    bytes += (double)ws[k]->n_mat * (double)n * (double)bs * sizeof(double);
                }
            }
            if (bytes <= (double)IQF_HESSIAN_EXPERT_BYTES) {
                ebs_cap = pass ? 32 : 0;
                break;
            }
        }
    for (int l = 0; l <= m->info.n_layer; l++) {
        int no = 0, no_plain = 0;
        if (l < m->info.n_layer) {
            no = no_plain = layer_owners(m, l, owners);
            if (ebs_cap >= 0) no += layer_expert_owners(m, l, owners + no);
        } else {
            owners[no++] = &m->output;
            no_plain = no;
        }
        for (int k = 0; k < no; k++) {
            iqf_hess_slot *s = &a->slots[a->n_slots];
            s->owner = owners[k];
            s->n_mat = k < no_plain ? 1 : owners[k]->n_mat;
            s->n = owners[k]->ncols;
            if (k >= no_plain && ebs_cap > 0) s->bs = block_upto(s->n, ebs_cap);
            else if (max_block > 0) s->bs = s->n > max_block ? max_block : s->n;
            else if (max_block < 0 || auto_full) s->bs = s->n;
            else s->bs = iqf_hessian_auto_block(s->n);
            if (s->n % s->bs) {
                const long long bs = s->bs, n = s->n;
                iqf_hessian_acc_free(a);
                return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "Hessian block %lld does not divide the width %lld of %s",
                                bs, n, owners[k]->name);
            }
            if (!iqf_hessian_name_for(owners[k]->name, s->name, sizeof s->name)) {
                iqf_hessian_acc_free(a);
                return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "weight name %s too long", owners[k]->name);
            }
            if (s->bs > a->max_bs) a->max_bs = s->bs;
            s->sum = acc_alloc((size_t)(s->n_mat * s->n * s->bs));
            if (s->n_mat > 1) s->ecount = calloc((size_t)s->n_mat, sizeof *s->ecount);
            a->n_slots++;
            if (!s->sum || (s->n_mat > 1 && !s->ecount)) {
                const long long bs = s->bs, n = s->n;
                iqf_hessian_acc_free(a);
                return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for the Hessian of %s (%lld x %lld doubles)",
                                owners[k]->name, n, bs);
            }
        }
    }
    c->hess = a;
    *out = a;
    return IQF_OK;
}

int64_t iqf_hessian_auto_block(int64_t n) {
    if (n <= IQF_HESSIAN_AUTO_BLOCK) return n;
    for (int64_t b = IQF_HESSIAN_AUTO_BLOCK; b >= 32; b -= 32)
        if (n % b == 0) return b;
    return n;
}

iqf_hess_slot *iqf_hessian_slot(iqf_hess_acc *a, const char *name) {
    for (int i = 0; a && i < a->n_slots; i++)
        if (!strcmp(a->slots[i].name, name)) return &a->slots[i];
    return NULL;
}

void iqf_hessian_detach(iqf_context *c) {
    if (c) c->hess = NULL;
}

typedef struct hjob {
    iqf_simd simd;
    iqf_hess_slot *s;
    double *sum; /* s->sum, or the expert's matrix */
    const float *x;
    int64_t ldx;
    int T;
} hjob;

/* The float sums of one batch for rows r..r+nr-1 (nr <= 4, one diagonal block starting at column
 * c0) and columns c0+j0 .. c0+bs-1, added to the double totals. Every element is
 * acc = fma(x[t][row], x[t][col], acc) over t in order on both paths (fmaf is exactly rounded,
 * as vfmadd), so the AVX2 path gives the scalar path's bits. */
static void acc_scalar(const float *X, int64_t ldx, int T, int64_t r, int nr, int64_t c0, int64_t j0,
                       int64_t bs, double *sum) {
    for (int i = 0; i < nr; i++)
        for (int64_t j = j0; j < bs; j++) {
            float acc = 0;
            for (int t = 0; t < T; t++) {
                const float *xt = X + (int64_t)t * ldx;
                acc = fmaf(xt[r + i], xt[c0 + j], acc);
            }
            sum[i * bs + j] += (double)acc;
        }
}

/* One body for both vector widths (W floats per vector: 8 AVX2, 16 AVX-512): 4 rows x 2W
 * columns per pass, the same fma chain per element as acc_scalar; what is left of the block goes
 * to TAIL (the next narrower path). */
#define HESS_ACC_BODY(W, VEC, SETZERO, LOADU, SET1, FMADD, STOREU, TAIL)                              \
    int64_t j = j0;                                                                                   \
    if (nr == 4) {                                                                                    \
        for (; j + 2 * (W) <= bs; j += 2 * (W)) {                                                     \
            VEC a[4][2];                                                                              \
            for (int i = 0; i < 4; i++) a[i][0] = a[i][1] = SETZERO();                                \
            for (int t = 0; t < T; t++) {                                                             \
                const float *xt = X + (int64_t)t * ldx;                                               \
                const VEC v0 = LOADU(xt + c0 + j), v1 = LOADU(xt + c0 + j + (W));                     \
                for (int i = 0; i < 4; i++) {                                                         \
                    const VEC bc = SET1(xt[r + i]);                                                   \
                    a[i][0] = FMADD(bc, v0, a[i][0]);                                                 \
                    a[i][1] = FMADD(bc, v1, a[i][1]);                                                 \
                }                                                                                     \
            }                                                                                         \
            float o[8 * (W)];                                                                         \
            for (int i = 0; i < 4; i++) {                                                             \
                STOREU(o + 2 * (W) * i, a[i][0]);                                                     \
                STOREU(o + 2 * (W) * i + (W), a[i][1]);                                               \
            }                                                                                         \
            for (int i = 0; i < 4; i++)                                                               \
                for (int k = 0; k < 2 * (W); k++) sum[i * bs + j + k] += (double)o[i * 2 * (W) + k];   \
        }                                                                                             \
    }                                                                                                 \
    if (j < bs) TAIL(X, ldx, T, r, nr, c0, j, bs, sum);

#ifdef IQF_ARCH_X86
__attribute__((target("avx2,fma"))) static void acc_avx2(const float *X, int64_t ldx, int T, int64_t r,
                                                      int nr, int64_t c0, int64_t j0, int64_t bs,
                                                      double *sum) {
    HESS_ACC_BODY(8, __m256, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_set1_ps, _mm256_fmadd_ps,
                  _mm256_storeu_ps, acc_scalar)
}

__attribute__((target("avx512f,avx2,fma"))) static void acc_avx512(const float *X, int64_t ldx, int T, int64_t r,
                                                                int nr, int64_t c0, int64_t j0, int64_t bs,
                                                                double *sum) {
    HESS_ACC_BODY(16, __m512, _mm512_setzero_ps, _mm512_loadu_ps, _mm512_set1_ps, _mm512_fmadd_ps,
                  _mm512_storeu_ps, acc_avx2)
}
#endif

static void hess_range(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    const hjob *j = arg;
    const iqf_hess_slot *s = j->s;
    /* items are groups of 4 rows; only columns from the row's 16-aligned diagonal on (the
     * upper triangle and a little more) are summed, the rest is mirrored at the end */
    for (int64_t g = b; g < e; g++) {
        int64_t r = 4 * g;
        while (r < 4 * g + 4 && r < s->n) {
            const int64_t blk = r / s->bs, end = (blk + 1) * s->bs;
            int nr = 1;
            while (nr < 4 && r + nr < 4 * g + 4 && r + nr < end) nr++;
            const int64_t i0 = r - blk * s->bs;
#ifdef IQF_ARCH_X86
            if (j->simd == IQF_SIMD_AVX512)
                acc_avx512(j->x, j->ldx, j->T, r, nr, blk * s->bs, i0 & ~(int64_t)15, s->bs, j->sum + r * s->bs);
            else if (IQF_SIMD_IS_X86(j->simd))
                acc_avx2(j->x, j->ldx, j->T, r, nr, blk * s->bs, i0 & ~(int64_t)15, s->bs, j->sum + r * s->bs);
            else
#endif
                acc_scalar(j->x, j->ldx, j->T, r, nr, blk * s->bs, i0 & ~(int64_t)15, s->bs, j->sum + r * s->bs);
            r += nr;
        }
    }
}

/* Fills the lower triangle of every diagonal block (of every matrix) from the upper one. */
static void mirror(iqf_hess_slot *s) {
    for (int64_t e = 0; e < s->n_mat; e++) {
        double *sum = s->sum + e * s->n * s->bs;
        for (int64_t r = 0; r < s->n; r++) {
            const int64_t i = r % s->bs, k0 = r - i;
            for (int64_t j = 0; j < i; j++) sum[r * s->bs + j] = sum[(k0 + j) * s->bs + i];
        }
    }
}

void iqf_hessian_accumulate(iqf_context *c, const iqf_weight *w, const float *x, int64_t ldx, int T) {
    iqf_hess_acc *a = c->hess;
    if (!a || T <= 0) return;
    for (int i = 0; i < a->n_slots; i++) {
        iqf_hess_slot *s = &a->slots[i];
        if (s->owner != w || s->n_mat > 1) continue;
        hjob j = { c->simd, s, s->sum, x, ldx, T };
        iqf_pool_run(c->pool, (s->n + 3) / 4, 1, hess_range, &j);
        s->count += T;
        return;
    }
}

void iqf_hessian_accumulate_expert(iqf_context *c, const iqf_weight *w, int e, const float *x, int64_t ldx, int n) {
    iqf_hess_acc *a = c->hess;
    if (!a || n <= 0) return;
    for (int i = 0; i < a->n_slots; i++) {
        iqf_hess_slot *s = &a->slots[i];
        if (s->owner != w || s->n_mat <= 1 || e < 0 || e >= s->n_mat) continue;
        hjob j = { c->simd, s, s->sum + (int64_t)e * s->n * s->bs, x, ldx, n };
        iqf_pool_run(c->pool, (s->n + 3) / 4, 1, hess_range, &j);
        s->ecount[e] += n;
        return;
    }
}

iqf_status iqf_hessian_acc_write(iqf_hess_acc *a, const iqf_model *m, const char *path,
                                 int chunk_count, int chunk_size, const char *dataset, bool f16,
                                 char *err, size_t errlen) {
    if (!a || !m || !path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    for (int i = 0; i < a->n_slots; i++) mirror(&a->slots[i]);
    int64_t tokens = 0; /* the token rows every plain slot saw (expert slots: per-expert counts) */
    for (int i = 0; i < a->n_slots; i++)
        if (a->slots[i].n_mat <= 1 && a->slots[i].count > tokens) tokens = a->slots[i].count;
    iqf_hessian_wentry *e = calloc((size_t)a->n_slots + 1, sizeof *e);
    if (!e) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < a->n_slots; i++)
        e[i] = (iqf_hessian_wentry){ a->slots[i].name, a->slots[i].n, a->slots[i].bs, a->slots[i].sum, tokens,
                                     a->slots[i].n_mat, a->slots[i].ecount };
    iqf_hessian_meta meta;
    memset(&meta, 0, sizeof meta);
    iqf_hessian_model_id_get(iqf_model_gguf(m), &meta.model);
    meta.chunk_count = chunk_count;
    meta.chunk_size = chunk_size;
    meta.dataset = dataset;
    meta.f16 = f16;
    iqf_status st = iqf_hessian_write(path, e, a->n_slots, &meta, err, errlen);
    free(e);
    return st;
}

int iqf_hessian_acc_count(const iqf_hess_acc *a, int64_t *tokens) {
    if (tokens) *tokens = a && a->n_slots ? (int64_t)a->slots[0].count : 0;
    return a ? a->n_slots : 0;
}
