/*
 * test_model_pool.c - the inference engine's persistent worker pool (src/model/pool.c): many
 * short loops of varying size and grain back to back (the pattern of a forward pass), every item
 * processed exactly once per loop, no hang. A race here once let a late worker claim a phantom
 * chunk of a finished loop, which over-counted the next loop and left the caller waiting forever.
 */
#include "util/pool.h"
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    _Atomic int *hits;
    _Atomic long long *sum;
} job;

static void work(void *arg, int64_t b, int64_t e, int tid) {
    (void)tid;
    job *j = arg;
    for (int64_t i = b; i < e; i++) {
        atomic_fetch_add(&j->hits[i], 1);
        atomic_fetch_add(j->sum, i);
    }
}

int main(void) {
    const bool quick = getenv("IQF_SANITIZED") != NULL;
    const int loops = quick ? 20000 : 200000;
    for (int nt = 2; nt <= 4; nt += 2) {
        iqf_pool *p = iqf_pool_new(nt);
        CHECK(p && iqf_pool_size(p) == nt, "pool of %d", nt);
        if (!p) continue;
        _Atomic int hits[256];
        _Atomic long long sum;
        job j = { hits, &sum };
        tu_rng r = { (uint64_t)nt };
        int bad = 0;
        for (int it = 0; it < loops && bad < 5; it++) {
            int64_t n = 1 + (int64_t)(tu_next(&r) % 200), grain = 1 + (int64_t)(tu_next(&r) % 20);
            for (int i = 0; i < n; i++) atomic_store(&hits[i], 0);
            atomic_store(&sum, 0);
            iqf_pool_run(p, n, grain, work, &j);
            long long want = (long long)n * (n - 1) / 2;
            if (atomic_load(&sum) != want) bad++;
            for (int i = 0; i < n; i++)
                if (atomic_load(&hits[i]) != 1) { bad++; break; }
        }
        CHECK(bad == 0, "%d loops with items missed or repeated (%d threads)", bad, nt);
        iqf_pool_free(p);
    }
    return test_finish("test_model_pool");
}
