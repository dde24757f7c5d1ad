#include "parallel.h"

#include "iqforge.h"

/* The one-shot form of the pool (pool.c): workers for this loop only. */
int iqf_parallel_for(int n_threads, int64_t n, int64_t grain, iqf_range_fn fn, void *arg) {
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    if (n_threads <= 0) n_threads = iqf_cpu_count();
    int64_t chunks = (n + grain - 1) / grain;
    if (n_threads > chunks) n_threads = (int)chunks;
    if (n_threads <= 1) {
        fn(arg, 0, n, 0);
        return 0;
    }
    iqf_pool *p = iqf_pool_new(n_threads);
    if (!p) {
        fn(arg, 0, n, 0);
        return IQF_E_NOMEM;
    }
    const int got = iqf_pool_size(p);
    iqf_pool_run(p, n, grain, fn, arg);
    iqf_pool_free(p);
    return got < n_threads ? IQF_E_NOMEM : 0;
}
