/*
 * fb_factor.c - the error feedback's factor of H (feedback.h's iqf_fb_factor): per diagonal
 * block a Cholesky and a triangular inverse in double, in a fixed operation order.
 */
#include "feedback.h"
#include "../util/error.h"
#include "../util/parallel.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* sum_k x[k] y[k], k < n, in four interleaved partial sums (a fixed order: the same result on
 * every machine and thread count). */
static double dot(const double *x, const double *y, int64_t n) {
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 4 <= n; k += 4) {
        s0 += x[k] * y[k];
        s1 += x[k + 1] * y[k + 1];
        s2 += x[k + 2] * y[k + 2];
        s3 += x[k + 3] * y[k + 3];
    }
    for (; k < n; k++) s0 += x[k] * y[k];
    return (s0 + s1) + (s2 + s3);
}

/* In-place lower Cholesky of the n x n matrix a (row-major; only the lower part is read). False
 * if a pivot is not positive. */
static bool cholesky(double *a, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        double *aj = a + j * n;
        const double d = aj[j] - dot(aj, aj, j);
        if (!(d > 0) || !isfinite(d)) return false;
        const double r = sqrt(d);
        aj[j] = r;
        for (int64_t i = j + 1; i < n; i++) {
            double *ai = a + i * n;
            ai[j] = (ai[j] - dot(ai, aj, j)) / r;
        }
    }
    return true;
}

/* U upper with U^T U = A^-1 for one bs x bs block. With J the reversal of the index order and
 * J A J = L L^T (Cholesky), A^-1 = J L^-T L^-1 J, so U = J L^-1 J (upper, positive diagonal:
 * the unique such factor). a: the dampened block in row-major order (destroyed); t: scratch. */
static bool block_factor(double *a, double *t, int64_t bs, float *U) {
    /* t = J a J (lower part), then its Cholesky factor in place */
    for (int64_t i = 0; i < bs; i++)
        for (int64_t j = 0; j <= i; j++) t[i * bs + j] = a[(bs - 1 - i) * bs + (bs - 1 - j)];
    if (!cholesky(t, bs)) return false;
    /* a = (L^-1)^T, stored transposed so that every inner loop runs over contiguous memory:
     * a[c][i] = (L^-1)[i][c] = -sum_{k=c}^{i-1} L[i][k] (L^-1)[k][c] / L[i][i] */
    for (int64_t c = 0; c < bs; c++) {
        double *ac = a + c * bs;
        ac[c] = 1.0 / t[c * bs + c];
        for (int64_t i = c + 1; i < bs; i++) {
            const double *li = t + i * bs;
            ac[i] = -dot(li + c, ac + c, i - c) / li[i];
        }
    }
    /* U[i][j] = (L^-1)[bs-1-i][bs-1-j] = a[bs-1-j][bs-1-i] for j >= i */
    for (int64_t i = 0; i < bs; i++)
        for (int64_t j = 0; j < bs; j++) U[i * bs + j] = j >= i ? (float)a[(bs - 1 - j) * bs + (bs - 1 - i)] : 0.f;
    for (int64_t i = 0; i < bs; i++)
        if (!(U[i * bs + i] > 0) || !isfinite(U[i * bs + i])) return false;
    return true;
}

void iqf_fb_factor_free(iqf_fb_factor *f) {
    if (!f) return;
    free(f->U);
    free(f->diag);
    memset(f, 0, sizeof *f);
}

/* The blocks of one factor, shared out over threads (every block is independent). */
typedef struct factor_job {
    const float *H;
    int64_t bs;
    double mean, lambda;
    float *U;
    double **a, **t;    /* per thread: bs x bs scratch */
    int64_t *bad;       /* per block: 1 not finite, 2 not positive definite */
    int *dead;          /* per block: columns with H_ii == 0 */
} factor_job;

static void factor_range(void *arg, int64_t b, int64_t e, int tid) {
    const factor_job *j = arg;
    const int64_t bs = j->bs;
    double *a = j->a[tid], *t = j->t[tid];
    for (int64_t k = b; k < e; k++) {
        const float *hb = j->H + k * bs * bs;
        bool fin = true;
        for (int64_t i = 0; i < bs; i++)
            for (int64_t c = 0; c < bs; c++) {
                const double v = 0.5 * ((double)hb[i * bs + c] + (double)hb[c * bs + i]);
                if (!isfinite(v)) fin = false;
                a[i * bs + c] = v;
            }
        if (!fin) {
            j->bad[k] = 1;
            continue;
        }
        for (int64_t i = 0; i < bs; i++) {
            if (a[i * bs + i] == 0) { /* a dead input: nothing constrains it (GPTQ sets it to 1) */
                a[i * bs + i] = j->mean;
                j->dead[k]++;
            }
            a[i * bs + i] += j->lambda;
        }
        if (!block_factor(a, t, bs, j->U + k * bs * bs)) j->bad[k] = 2;
    }
}

iqf_status iqf_fb_factor_make(const float *H, int64_t n, int64_t bs, double damp, int n_threads, iqf_fb_factor *f,
                              char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (!H || n < 1 || bs < 1 || n % bs || !(damp >= 0) || !isfinite(damp))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "bad Hessian factor arguments (n %" PRId64 ", block %" PRId64 ", damp %g)",
                        n, bs, damp);
    const int64_t nb = n / bs;
    int nt = n_threads > 0 ? n_threads : iqf_cpu_count();
    if (nt > nb) nt = (int)nb;
    f->n = n;
    f->bs = bs;
    f->U = malloc((size_t)(n * bs) * sizeof(float));
    f->diag = malloc((size_t)n * sizeof(float));
    factor_job j = { H, bs, 0, 0, f->U, calloc((size_t)nt, sizeof(double *)), calloc((size_t)nt, sizeof(double *)),
                     calloc((size_t)nb, sizeof(int64_t)), calloc((size_t)nb, sizeof(int)) };
    iqf_status st = IQF_OK;
    bool ok = f->U && f->diag && j.a && j.t && j.bad && j.dead;
    for (int i = 0; ok && i < nt; i++) {
        j.a[i] = malloc((size_t)(bs * bs) * sizeof(double));
        j.t[i] = malloc((size_t)(bs * bs) * sizeof(double));
        ok = j.a[i] && j.t[i];
    }
    if (!ok) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory for a Hessian factor of %" PRId64 " x %" PRId64, n, bs);
        goto done;
    }
    double mean = 0;
    for (int64_t r = 0; r < n; r++) {
        const float d = H[r * bs + r % bs];
        if (!isfinite(d) || d < 0) {
            st = iqf_fail(err, errlen, IQF_E_NONFINITE, "Hessian diagonal %" PRId64 " is %g", r, (double)d);
            goto done;
        }
        f->diag[r] = d;
        mean += d;
    }
    mean /= (double)n;
    if (!(mean > 0)) {
        st = iqf_fail(err, errlen, IQF_E_NONFINITE, "the Hessian is zero (singular)");
        goto done;
    }
    j.mean = mean;
    j.lambda = damp * mean;
    if (iqf_parallel_for(nt, nb, 1, factor_range, &j)) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "could not start worker threads");
        goto done;
    }
    for (int64_t k = 0; k < nb; k++) {
        f->n_dead += j.dead[k];
        if (j.bad[k] == 1) {
            st = iqf_fail(err, errlen, IQF_E_NONFINITE, "Hessian block %" PRId64 " has a value that is not finite", k);
            goto done;
        }
        if (j.bad[k] == 2) {
            st = iqf_fail(err, errlen, IQF_E_NONFINITE,
                          "the Hessian is singular (not positive definite after dampening %g, block %" PRId64 ")", damp, k);
            goto done;
        }
    }
done:
    for (int i = 0; i < nt && j.a && j.t; i++) {
        free(j.a[i]);
        free(j.t[i]);
    }
    free(j.a);
    free(j.t);
    free(j.bad);
    free(j.dead);
    if (st) iqf_fb_factor_free(f);
    return st;
}
