#include "qgen.h"

#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *dist_names[QGEN_N] = { "gauss", "heavy", "outlier", "zeroblocks", "tiny",
                                          "huge",  "mixed", "sparse",  "ints",       "const" };
static const char *imat_names[QGEN_IMAT_N] = { "noimat", "imat", "imat-zeros" };

const char *qgen_dist_name(qgen_dist d) { return d < QGEN_N ? dist_names[d] : "?"; }
const char *qgen_imat_name(qgen_imat m) { return m < QGEN_IMAT_N ? imat_names[m] : "?"; }

void qgen_fill(float *x, int64_t rows, int64_t cols, qgen_dist d, uint64_t seed) {
    tu_rng v = { (seed << 8) | 0 }, a = { (seed << 8) | 1 };
    for (int64_t r = 0; r < rows; r++) {
        float *row = x + r * cols;
        double rs = d == QGEN_MIXED ? exp(2.0 * tu_normal(&a)) : 1.0;
        for (int64_t j = 0; j < cols; j++) {
            double z = tu_normal(&v), val = z;
            switch (d) {
            case QGEN_HEAVY: {
                double z1 = tu_normal(&v), z2 = tu_normal(&v), z3 = tu_normal(&v);
                val = z / sqrt((z1 * z1 + z2 * z2 + z3 * z3) / 3.0) / sqrt(3.0);
                break;
            }
            case QGEN_OUTLIER: if (tu_uniform(&a) < 0.005) val *= 20; break;
            case QGEN_TINY: val *= 1e-6; break;
            case QGEN_HUGE: val *= 3000; break;
            case QGEN_MIXED: val *= rs; break;
            case QGEN_SPARSE: if (tu_uniform(&a) < 0.95) val = 0; break;
            case QGEN_INTS: val = (double)((int)(tu_next(&a) % 9) - 4); break;
            case QGEN_CONST: val = (r % 3 == 2) ? -0.75 : 0.75; break;
            default: break;
            }
            row[j] = (float)val;
        }
        if (d == QGEN_ZEROBLOCKS) {
            for (int64_t b = 0; b + 32 <= cols; b += 32)
                if (tu_uniform(&a) < 0.125) memset(row + b, 0, 32 * sizeof(float));
            if (cols >= 256) {
                int64_t sb = (int64_t)(tu_uniform(&a) * (double)(cols / 256));
                memset(row + sb * 256, 0, 256 * sizeof(float));
            }
        }
    }
}

bool qgen_imatrix(float *w, int64_t cols, qgen_imat m, uint64_t seed) {
    if (m == QGEN_IMAT_NONE) return false;
    tu_rng r = { (seed << 8) | 2 }, z = { (seed << 8) | 3 };
    for (int64_t j = 0; j < cols; j++) w[j] = (float)exp(tu_normal(&r));
    if (m == QGEN_IMAT_ZEROS) {
        for (int64_t j = 0; j < cols; j++)
            if (tu_uniform(&z) < 1.0 / 16) w[j] = 0;
        for (int64_t j = 64; j < 96 && j < cols; j++) w[j] = 0;
        w[0] = 0;
    }
    return true;
}

double qgen_sse(const float *x, const float *y, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
    return s;
}

int qgen_diff(int type, const float *x, int64_t rows, int64_t cols, const float *imatrix,
              const char *label) {
    int failed_before = tu_failed;
    const iqf_type_info *ti = iqf_type_get(type);
    size_t rb = iqf_row_size(type, cols);
    size_t bytes = rb * (size_t)rows;
    uint8_t *ref = malloc(bytes), *ours = malloc(bytes);
    float *dq_ref = malloc(sizeof(float) * (size_t)(rows * cols));
    float *dq_ours = malloc(sizeof(float) * (size_t)(rows * cols));
    if (!ref || !ours || !dq_ref || !dq_ours) { CHECK(0, "out of memory"); goto out; }

    size_t ob = oracle_quantize(type, x, ref, rows, cols, imatrix);
    CHECK(ob == bytes, "%s: oracle wrote %zu bytes, expected %zu", label, ob, bytes);
    oracle_dequantize(type, ref, dq_ref, rows * cols);

    /* Our decoder on the oracle's bytes: bitwise equal. */
    char err[256];
    iqf_status st = iqf_dequantize(type, ref, dq_ours, rows, cols, 1, err, sizeof err);
    CHECK(st == IQF_OK, "%s: dequantize: %s", label, err);
    if (st == IQF_OK) {
        int64_t bad = -1;
        for (int64_t i = 0; i < rows * cols && bad < 0; i++)
            if (memcmp(&dq_ours[i], &dq_ref[i], 4) != 0) bad = i;
        CHECK(bad < 0, "%s: %s dequantize differs at value %lld: %g vs oracle %g", label, ti->name,
              (long long)bad, bad >= 0 ? dq_ours[bad] : 0.0, bad >= 0 ? dq_ref[bad] : 0.0);
    }

    iqf_simd top = TU_SIMD_TOP;
    for (int simd = IQF_SIMD_SCALAR; simd <= (int)top; simd++) {
        if (!tu_simd_runs(simd)) continue;
        for (int threads = 1; threads <= 3; threads += 2) {
            iqf_quantize_params p = iqf_quantize_default_params();
            p.simd = (iqf_simd)simd;
            p.n_threads = threads;
            memset(ours, 0xAA, bytes);
            st = iqf_quantize(type, x, ours, rows, cols, imatrix, &p, err, sizeof err);
            CHECK(st == IQF_OK, "%s: quantize: %s", label, err);
            if (st) continue;
            int64_t nb = cols / ti->blck_size;
            int reported = 0, mism = 0;
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t b = 0; b < nb; b++) {
                    size_t off = (size_t)r * rb + (size_t)b * ti->type_size;
                    if (memcmp(ours + off, ref + off, ti->type_size) == 0) continue;
                    const float *xr = x + r * cols;
                    if (compat_oracle_corrupt(type, xr, cols, b)) {
                        /* Our block must reconstruct better than the oracle's. */
                        float yo[256], yr[256];
                        iqf_dequantize(type, ours + off, yo, 1, ti->blck_size, 1, NULL, 0);
                        oracle_dequantize(type, ref + off, yr, ti->blck_size);
                        const float *xb = xr + b * ti->blck_size;
                        double eo = qgen_sse(xb, yo, ti->blck_size), er = qgen_sse(xb, yr, ti->blck_size);
                        CHECK(eo < er, "%s: corrupt-oracle block r%lld b%lld: our error %g not below oracle %g",
                              label, (long long)r, (long long)b, eo, er);
                        continue;
                    }
                    mism++;
                    if (reported++ < 3) {
                        size_t k = 0;
                        while (ours[off + k] == ref[off + k]) k++;
                        fprintf(stderr, "%s: %s simd=%s threads=%d: row %lld block %lld differs at byte %zu (ours %02x, oracle %02x)\n",
                                label, ti->name, iqf_simd_name((iqf_simd)simd), threads, (long long)r,
                                (long long)b, k, ours[off + k], ref[off + k]);
                    }
                }
            }
            CHECK(mism == 0, "%s: %s simd=%s threads=%d: %d of %lld blocks differ from the oracle", label,
                  ti->name, iqf_simd_name((iqf_simd)simd), threads, mism, (long long)(rows * nb));
        }
    }
out:
    free(ref);
    free(ours);
    free(dq_ref);
    free(dq_ours);
    return tu_failed - failed_before;
}
