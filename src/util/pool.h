/*
 * pool.h - iqforge's one thread pool: persistent workers for loops of independent items.
 *
 * The inference engine keeps a pool for the life of a context: a forward pass dispatches many
 * small parallel loops (one per matrix product and attention step), and starting threads for
 * each would cost more than the work on small models. The pool keeps n_threads-1 workers asleep
 * on a condition variable between loops; the calling thread is worker 0. Items of a loop must
 * be independent. iqf_parallel_for (parallel.h) is the one-shot form over the same pool.
 */
#ifndef IQF_UTIL_POOL_H
#define IQF_UTIL_POOL_H

#include <stdint.h>

typedef struct iqf_pool iqf_pool;
typedef void (*iqf_pool_fn)(void *arg, int64_t begin, int64_t end, int thread_id);

/* NULL on failure. n_threads <= 0: one per online CPU. */
iqf_pool *iqf_pool_new(int n_threads);
void iqf_pool_free(iqf_pool *p);
int iqf_pool_size(const iqf_pool *p);
/* Runs fn over [0, n) in chunks of `grain` items, returns when all are done. */
void iqf_pool_run(iqf_pool *p, int64_t n, int64_t grain, iqf_pool_fn fn, void *arg);

#endif
