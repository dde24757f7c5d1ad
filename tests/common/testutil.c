#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

int tu_passed, tu_failed;

int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tu_passed, tu_failed);
    return (tu_failed == 0 && tu_passed > 0) ? 0 : 1;
}

const char *src_path(const char *rel) {
    static char bufs[8][4096];
    static int slot;
    char *b = bufs[slot++ & 7];
    const char *root = getenv("IQF_SOURCE_DIR");
    snprintf(b, 4096, "%s/%s", root && *root ? root : ".", rel);
    return b;
}

const char *shared_dir(void) {
    static char b[4096];
    const char *env = getenv("IQF_SHARED_DIR");
    if (env && *env) snprintf(b, sizeof b, "%s", env);
    else snprintf(b, sizeof b, "%s", src_path("../shared"));
    struct stat st;
    return stat(b, &st) == 0 && S_ISDIR(st.st_mode) ? b : NULL;
}

void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* One byte more, always NUL: text files can be searched with strstr. */
    char *buf = malloc(sz > 0 ? (size_t)sz + 1 : 1);
    if (buf && sz > 0 && fread(buf, 1, (size_t)sz, f) != (size_t)sz) { free(buf); buf = NULL; }
    if (buf) buf[sz > 0 ? sz : 0] = 0;
    fclose(f);
    if (buf && n) *n = (size_t)sz;
    return buf;
}

bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

uint64_t tu_next(tu_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r) { return ((double)(tu_next(r) >> 11) + 0.5) * 0x1.0p-53; }

double tu_normal(tu_rng *r) {
    double u1 = tu_uniform(r), u2 = tu_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* CI is on for any value but "", "0", "false" and "no" (CI=true, CI=1, CI=yes ...). */
bool tu_ci(void) {
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") && strcasecmp(ci, "false") && strcasecmp(ci, "no");
}

iqf_status tu_context_simd(const iqf_model *m, int n_ctx, int threads, iqf_simd simd, iqf_context **c,
                           char *err, size_t errlen) {
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = threads;
    p.simd = simd;
    return iqf_context_new_ex(m, &p, c, err, errlen);
}
