/*
 * parallel.h - a minimal fork-join "parallel for" over pthreads.
 *
 * iqf_parallel_for splits [0, n) into contiguous chunks of `grain` items and hands them to
 * n_threads workers of a pool made for this loop (util/pool.h; the calling thread is one of them)
 * that take chunks in order from an atomic counter. Each item must be independent of the others, so results never depend on the
 * thread count. Returns 0, or IQF_E_NOMEM if threads could not be started (then it runs the
 * remaining work on the calling thread: the result is still complete).
 */
#ifndef IQF_PARALLEL_H
#define IQF_PARALLEL_H

#include "pool.h"

#include <stdint.h>

typedef iqf_pool_fn iqf_range_fn;

int iqf_parallel_for(int n_threads, int64_t n, int64_t grain, iqf_range_fn fn, void *arg);

#endif
