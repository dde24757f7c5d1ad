/*
 * stat_cmp.c - iqf-statcmp: compares two importance matrices or two Hessian files value by value
 * (tests/cli/imatrix_combine.sh: a combination of shard captures against the whole-text capture).
 *
 *   iqf-statcmp A B [TOL]
 *
 * Importance matrices (read raw, as `imatrix --combine` reads them): the same weights, counts
 * and chunk count/size; sums within TOL relative (default 1e-6). Prints the entries, the values
 * bitwise equal and the largest relative difference.
 * Hessian files: the same model, token count, entries, shapes and per-expert row counts; every
 * value within TOL * sqrt(H_ii * H_jj) of the other (the scale of element ij of a positive
 * semidefinite H; a diagonal value: TOL relative). Prints the values bitwise equal, the largest
 * scaled and the largest relative difference of the diagonals.
 * Exit 0 if equal within TOL, 1 if not, 2 on a usage or read error.
 */
#include "iqforge.h"
#include "stats/hessian_file.h"
#include "stats/imatrix.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_imatrix(const char *pa, const char *pb, double tol) {
    char err[512];
    iqf_imatrix_raw a, b;
    if (iqf_imatrix_raw_load(pa, 512, &a, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
    if (iqf_imatrix_raw_load(pb, 512, &b, err, sizeof err)) {
        iqf_imatrix_raw_free(&a);
        return fprintf(stderr, "%s\n", err), 2;
    }
    int bad = 0;
    long long n_val = 0, n_same = 0;
    double max_rel = 0;
    if (a.n_entries != b.n_entries) {
        printf("entries differ: %d vs %d\n", a.n_entries, b.n_entries);
        bad = 1;
    }
    if (a.chunk_count != b.chunk_count || a.chunk_size != b.chunk_size) {
        printf("chunks differ: %d of %d vs %d of %d\n", a.chunk_count, a.chunk_size, b.chunk_count, b.chunk_size);
        bad = 1;
    }
    for (int i = 0; i < a.n_entries && i < b.n_entries; i++) {
        const iqf_imatrix_raw_entry *x = &a.entries[i], *y = &b.entries[i];
        if (strcmp(x->name, y->name) || x->nval != y->nval || x->n_mat != y->n_mat) {
            printf("entry %d differs: %s [%lld, %lld] vs %s [%lld, %lld]\n", i, x->name, (long long)x->nval,
                   (long long)x->n_mat, y->name, (long long)y->nval, (long long)y->n_mat);
            bad = 1;
            continue;
        }
        for (int64_t j = 0; j < x->n_mat; j++)
            if (x->counts[j] != y->counts[j]) {
                printf("%s: count %lld differs: %lld vs %lld\n", x->name, (long long)j, (long long)x->counts[j],
                       (long long)y->counts[j]);
                bad = 1;
            }
        for (int64_t j = 0; j < x->nval; j++) {
            const float u = (float)x->sum[j], v = (float)y->sum[j];
            n_val++;
            if (!memcmp(&u, &v, sizeof u)) {
                n_same++;
                continue;
            }
            const double rel = fabs((double)u - (double)v) / fmax(fabs((double)u), fabs((double)v));
            if (rel > max_rel) max_rel = rel;
        }
    }
    if (max_rel > tol) bad = 1;
    printf("imatrix: %d entries, %lld values, %lld bitwise equal, max rel diff %.3g (tol %.3g), counts %s\n",
           a.n_entries, n_val, n_same, max_rel, tol, bad ? "or shapes differ" : "equal");
    iqf_imatrix_raw_free(&a);
    iqf_imatrix_raw_free(&b);
    return bad;
}

static int cmp_hessian(const char *pa, const char *pb, double tol) {
    char err[512];
    iqf_hessian_sums a, b;
    if (iqf_hessian_sums_load(pa, &a, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
    if (iqf_hessian_sums_load(pb, &b, err, sizeof err)) {
        iqf_hessian_sums_free(&a);
        return fprintf(stderr, "%s\n", err), 2;
    }
    int bad = 0;
    if (a.token_count != b.token_count || a.chunk_count != b.chunk_count || a.chunk_size != b.chunk_size ||
        a.n_entries != b.n_entries || strcmp(a.model.name, b.model.name)) {
        printf("header differs: %lld tokens, %d chunks of %d, %d entries vs %lld, %d of %d, %d\n",
               (long long)a.token_count, a.chunk_count, a.chunk_size, a.n_entries, (long long)b.token_count,
               b.chunk_count, b.chunk_size, b.n_entries);
        bad = 1;
    }
    long long n_val = 0, n_same = 0;
    double max_scaled = 0, max_diag = 0;
    for (int i = 0; i < a.n_entries && i < b.n_entries; i++) {
        const iqf_hessian_sentry *x = &a.entries[i], *y = &b.entries[i];
        if (strcmp(x->name, y->name) || x->n != y->n || x->bs != y->bs || x->n_mat != y->n_mat) {
            printf("entry %d differs: %s vs %s (or its shape)\n", i, x->name, y->name);
            bad = 1;
            continue;
        }
        const int64_t n = x->n, bs = x->bs, m = n * bs;
        for (int64_t e = 0; e < x->n_mat; e++) {
            const double ca = x->n_mat > 1 ? (double)x->counts[e] : (double)a.token_count;
            const double cb = y->n_mat > 1 ? (double)y->counts[e] : (double)b.token_count;
            if (ca != cb) {
                printf("%s: expert %lld rows differ: %.0f vs %.0f\n", x->name, (long long)e, ca, cb);
                bad = 1;
                continue;
            }
            if (ca == 0) continue;
            /* the stored means, as float again */
            const double *sa = x->sum + e * m, *sb = y->sum + e * m;
            for (int64_t r = 0; r < n; r++)
                for (int64_t j = 0; j < bs; j++) {
                    const float u = (float)(sa[r * bs + j] / ca), v = (float)(sb[r * bs + j] / cb);
                    n_val++;
                    if (!memcmp(&u, &v, sizeof u)) {
                        n_same++;
                        continue;
                    }
                    const int64_t c = r - r % bs + j; /* the column in H */
                    const double hii = fabs(sb[r * bs + r % bs] / cb), hjj = fabs(sb[c * bs + j] / cb);
                    const double scale = sqrt(hii * hjj), d = fabs((double)u - (double)v);
                    const double s = scale > 0 ? d / scale : (d > 0 ? INFINITY : 0);
                    if (s > max_scaled) max_scaled = s;
                    if (c == r && d / fmax(fabs((double)u), fabs((double)v)) > max_diag)
                        max_diag = d / fmax(fabs((double)u), fabs((double)v));
                }
        }
    }
    if (max_scaled > tol) bad = 1;
    printf("hessian: %d entries, %lld values, %lld bitwise equal, max |diff|/sqrt(Hii*Hjj) %.3g, max rel diff of "
           "the diagonal %.3g (tol %.3g), rows %s\n", a.n_entries, n_val, n_same, max_scaled, max_diag, tol,
           bad ? "or shapes differ" : "equal");
    iqf_hessian_sums_free(&a);
    iqf_hessian_sums_free(&b);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: iqf-statcmp A B [TOL]\n");
        return 2;
    }
    const double tol = argc == 4 ? atof(argv[3]) : 1e-6;
    char err[512];
    const int ka = iqf_stats_file_kind(argv[1], err, sizeof err);
    if (!ka) return fprintf(stderr, "%s\n", err), 2;
    const int kb = iqf_stats_file_kind(argv[2], err, sizeof err);
    if (!kb) return fprintf(stderr, "%s\n", err), 2;
    if (ka != kb) return fprintf(stderr, "%s and %s are of different kinds\n", argv[1], argv[2]), 1;
    return ka == IQF_STATS_HESSIAN ? cmp_hessian(argv[1], argv[2], tol) : cmp_imatrix(argv[1], argv[2], tol);
}
