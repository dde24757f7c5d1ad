#include "parallel.h"

#include "iqforge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct job {
    iqf_range_fn fn;
    void *arg;
    int64_t n, grain;
    atomic_int_fast64_t next;
} job;

typedef struct worker {
    job *j;
    int id;
} worker;

static void run(job *j, int id) {
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next, j->grain);
        if (b >= j->n) break;
        int64_t e = b + j->grain < j->n ? b + j->grain : j->n;
        j->fn(j->arg, b, e, id);
    }
}

static void *worker_main(void *p) {
    worker *w = p;
    run(w->j, w->id);
    return NULL;
}

int iqf_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

int iqf_parallel_for(int n_threads, int64_t n, int64_t grain, iqf_range_fn fn, void *arg) {
    if (n <= 0) return 0;
    if (grain < 1) grain = 1;
    if (n_threads <= 0) n_threads = iqf_cpu_count();
    int64_t chunks = (n + grain - 1) / grain;
    if (n_threads > chunks) n_threads = (int)chunks;

    job j = { fn, arg, n, grain, 0 };
    if (n_threads <= 1) {
        run(&j, 0);
        return 0;
    }
    pthread_t *tid = malloc(sizeof(pthread_t) * (size_t)n_threads);
    worker *w = malloc(sizeof(worker) * (size_t)n_threads);
    int started = 0, rc = 0;
    if (tid && w) {
        for (int t = 1; t < n_threads; t++) {
            w[t].j = &j;
            w[t].id = t;
            if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) { rc = IQF_E_NOMEM; break; }
            started = t;
        }
    }
    run(&j, 0);
    for (int t = 1; t <= started; t++) pthread_join(tid[t], NULL);
    free(tid);
    free(w);
    return rc;
}
