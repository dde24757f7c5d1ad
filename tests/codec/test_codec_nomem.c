/*
 * test_codec_nomem.c - the codec tables' init under memory exhaustion. This program is linked
 * with -Wl,--wrap=malloc,--wrap=calloc (CMakeLists.txt), so every malloc/calloc made by the
 * library can be made to fail. With allocation failing, the first iqf_quantize of every type
 * whose encoder needs allocated tables (iq1_s, iq1_m: the IQ1 grid; iq2_xxs, iq2_xs, iq2_s: the
 * IQ2 grids) must return IQF_E_NOMEM with a message - before, iq1 dereferenced a NULL grid and
 * iq2 called abort(). A failed build is final (pthread_once), so later calls fail the same way
 * even with memory back; decoding needs no allocated table and keeps working. Types with static
 * tables (iq3_xxs, iq3_s, iq4, k-quants) are unaffected and still give the same bytes as with
 * memory available (compared against a run of the same encoder in this process before).
 */
#include "testutil.h"

#include "iqforge.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static volatile bool fail_alloc;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_malloc(size_t n) { return fail_alloc ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { return fail_alloc ? NULL : __real_calloc(n, m); }

int main(void) {
    enum { N = 256, ROWS = 2 };
    static float x[N * ROWS], w[N], y[N * ROWS];
    static unsigned char q[N * ROWS * 2], q_ref[N * ROWS * 2];
    for (int i = 0; i < N * ROWS; i++) x[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    for (int i = 0; i < N; i++) w[i] = 1.0f + (float)(i % 5);
    iqf_quantize_params p = iqf_quantize_default_params();
    p.n_threads = 1;
    char err[256];

    /* Static-table types: bytes with memory available, for the comparison below. */
    const int statics[] = { IQF_TYPE_IQ3_XXS, IQF_TYPE_IQ3_S, IQF_TYPE_IQ4_XS, IQF_TYPE_Q4_K };
    static unsigned char ref_static[4][N * ROWS * 2];
    for (int k = 0; k < 4; k++)
        CHECK(iqf_quantize(statics[k], x, ref_static[k], ROWS, N, w, &p, err, sizeof err) == IQF_OK, "%s", err);

    const int grid_types[] = { IQF_TYPE_IQ1_S, IQF_TYPE_IQ1_M, IQF_TYPE_IQ2_XXS, IQF_TYPE_IQ2_XS, IQF_TYPE_IQ2_S };
    fail_alloc = true;
    for (size_t k = 0; k < sizeof grid_types / sizeof grid_types[0]; k++) {
        const char *name = iqf_type_get(grid_types[k])->name;
        err[0] = 0;
        iqf_status st = iqf_quantize(grid_types[k], x, q, ROWS, N, w, &p, err, sizeof err);
        CHECK(st == IQF_E_NOMEM, "%s without memory: status %d (want IQF_E_NOMEM), '%s'", name, st, err);
        CHECK(strstr(err, "out of memory") && strstr(err, name), "%s: message '%s'", name, err);
    }
    /* Static tables do not need memory; the bytes are those made with memory available. */
    for (int k = 0; k < 4; k++) {
        iqf_status st = iqf_quantize(statics[k], x, q, ROWS, N, w, &p, err, sizeof err);
        size_t rs = iqf_row_size(statics[k], N) * ROWS;
        CHECK(st == IQF_OK && !memcmp(q, ref_static[k], rs), "%s without memory: status %d, bytes %s",
              iqf_type_get(statics[k])->name, st, st ? err : "differ");
    }
    fail_alloc = false;
    for (size_t k = 0; k < sizeof grid_types / sizeof grid_types[0]; k++) {
        const char *name = iqf_type_get(grid_types[k])->name;
        iqf_status st = iqf_quantize(grid_types[k], x, q, ROWS, N, w, &p, err, sizeof err);
        CHECK(st == IQF_E_NOMEM, "%s after a failed build: status %d (want IQF_E_NOMEM again)", name, st);
        /* Decoding uses static tables only: zero blocks decode to zeros. */
        memset(q_ref, 0, sizeof q_ref);
        for (int i = 0; i < N * ROWS; i++) y[i] = 1.0f;
        st = iqf_dequantize(grid_types[k], q_ref, y, ROWS, N, 1, err, sizeof err);
        bool zeros = true;
        for (int i = 0; i < N * ROWS; i++) zeros = zeros && y[i] == 0.0f;
        CHECK(st == IQF_OK && zeros, "%s: decoding after a failed table build: %s", name, st ? err : "values");
    }
    return test_finish("test_codec_nomem");
}
