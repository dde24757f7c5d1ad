/*
 * test_refvec.c - every golden vector in tests/data/refvec (made by the oracle, ggml 0.25.1):
 * our encoder's bytes equal the oracle's (except documented corrupt-oracle blocks, where our
 * reconstruction must be better), and our decoder reproduces the oracle's floats bit for bit.
 * Runs at every SIMD level the CPU supports. Needs no oracle at run time.
 */
#include "iqforge.h"
#include "oracle.h"
#include "qgen.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

/* Types the golden vectors must cover (all 25 in the manifest). */
static const char *const required[] = {
    "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K",
    "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs", "iq1_m",
    "tq1_0", "tq2_0", "mxfp4", "nvfp4", "q1_0", "q2_0",
};

static void check_vector(const char *dist, const char *tname, const char *imat, int rows, int cols,
                         size_t bytes, int *n_checked) {
    int type = iqf_type_from_name(tname);
    char path[512];
    snprintf(path, sizeof path, "tests/data/refvec/%s/x.f32", dist);
    size_t nx = 0, ni = 0, nb = 0, nd = 0;
    float *x = read_file(src_path(path), &nx);
    snprintf(path, sizeof path, "tests/data/refvec/%s/imatrix.f32", dist);
    float *im = read_file(src_path(path), &ni);
    const char *suffix = strcmp(imat, "yes") == 0 ? "imat" : "noimat";
    snprintf(path, sizeof path, "tests/data/refvec/%s/%s.%s.bin", dist, tname, suffix);
    uint8_t *ref = read_file(src_path(path), &nb);
    snprintf(path, sizeof path, "tests/data/refvec/%s/%s.%s.dq.f32", dist, tname, suffix);
    float *dq = read_file(src_path(path), &nd);
    size_t nval = (size_t)rows * (size_t)cols;
    CHECK(x && im && ref && dq, "%s/%s.%s: fixture files missing", dist, tname, suffix);
    if (!(x && im && ref && dq)) goto out;
    CHECK(nx == nval * 4 && ni == (size_t)cols * 4 && nb == bytes && nd == nval * 4,
          "%s/%s.%s: fixture sizes", dist, tname, suffix);
    if (nb != bytes || nd != nval * 4) goto out;
    const float *imatrix = strcmp(imat, "yes") == 0 ? im : NULL;
    char label[128];
    snprintf(label, sizeof label, "refvec %s/%s.%s", dist, tname, suffix);

    /* Decoder. */
    float *y = malloc(nval * 4);
    char err[256];
    CHECK(iqf_dequantize(type, ref, y, rows, cols, 1, err, sizeof err) == IQF_OK, "%s: %s", label, err);
    size_t bad = nval;
    for (size_t i = 0; i < nval && bad == nval; i++)
        if (memcmp(&y[i], &dq[i], 4)) bad = i;
    CHECK(bad == nval, "%s: decoded value %zu differs (%g vs %g)", label, bad, bad < nval ? y[bad] : 0., bad < nval ? dq[bad] : 0.);

    /* Encoder at every SIMD level. */
    const iqf_type_info *ti = iqf_type_get(type);
    uint8_t *q = malloc(bytes);
    for (int simd = IQF_SIMD_SCALAR; simd <= TU_SIMD_TOP; simd++) {
        if (!tu_simd_runs(simd)) continue;
        iqf_quantize_params p = iqf_quantize_default_params();
        p.simd = (iqf_simd)simd;
        p.n_threads = 2;
        iqf_status st = iqf_quantize(type, x, q, rows, cols, imatrix, &p, err, sizeof err);
        CHECK(st == IQF_OK, "%s: quantize: %s", label, err);
        if (st) continue;
        size_t rb = bytes / (size_t)rows;
        int mism = 0;
        for (int r = 0; r < rows; r++) {
            for (int64_t b = 0; b < cols / ti->blck_size; b++) {
                size_t off = (size_t)r * rb + (size_t)b * ti->type_size;
                if (!memcmp(q + off, ref + off, ti->type_size)) continue;
                const float *xr = x + (size_t)r * cols;
                if (compat_oracle_corrupt(type, xr, cols, b)) {
                    float yo[256];
                    iqf_dequantize(type, q + off, yo, 1, ti->blck_size, 1, NULL, 0);
                    const float *xb = xr + b * ti->blck_size;
                    const float *yr = dq + (size_t)r * cols + b * ti->blck_size;
                    double eo = qgen_sse(xb, yo, ti->blck_size), er = qgen_sse(xb, yr, ti->blck_size);
                    CHECK(eo < er, "%s: corrupt-oracle block r%d b%lld: our error %g not below %g", label, r,
                          (long long)b, eo, er);
                    continue;
                }
                if (mism++ < 2)
                    fprintf(stderr, "%s simd=%s: row %d block %lld differs\n", label,
                            iqf_simd_name((iqf_simd)simd), r, (long long)b);
            }
        }
        CHECK(mism == 0, "%s simd=%s: %d blocks differ", label, iqf_simd_name((iqf_simd)simd), mism);
    }
    free(q);
    free(y);
    (*n_checked)++;
out:
    free(x);
    free(im);
    free(ref);
    free(dq);
}

int main(void) {
    size_t n;
    char *man = read_file(src_path("tests/data/refvec/MANIFEST.tsv"), &n);
    CHECK(man != NULL, "tests/data/refvec/MANIFEST.tsv missing");
    if (!man) return test_finish("test_refvec");
    man = realloc(man, n + 1);
    man[n] = 0;
    int checked = 0, missing_codec = 0;
    char *save = NULL;
    for (char *line = strtok_r(man, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "dist\t", 5)) continue;
        char dist[32], tname[32], imat[8], sha[80];
        int tid, rows, cols;
        size_t bytes;
        if (sscanf(line, "%31s %31s %d %7s %d %d %zu %79s", dist, tname, &tid, imat, &rows, &cols, &bytes, sha) != 8) {
            CHECK(0, "bad manifest line: %s", line);
            continue;
        }
        int type = iqf_type_from_name(tname);
        CHECK(type == tid, "manifest type id %s %d", tname, tid);
        if (!iqf_can_encode(type) || !iqf_can_decode(type)) {
            missing_codec++;
            continue;
        }
        check_vector(dist, tname, imat, rows, cols, bytes, &checked);
    }
    free(man);
    int absent = 0;
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        int t = iqf_type_from_name(required[i]);
        if (!iqf_can_encode(t)) { absent++; printf("test_refvec: no codec yet for %s\n", required[i]); }
    }
    printf("test_refvec: %d vectors checked, %d skipped for missing codecs, %d of %zu types absent\n",
           checked, missing_codec, absent, sizeof required / sizeof required[0]);
    CHECK(absent == 0 && missing_codec == 0, "%d required types have no codec", absent);
    CHECK(checked == 282, "%d of the 282 golden vectors checked", checked);
    return test_finish("test_refvec");
}
