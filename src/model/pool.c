/* pool.c - persistent worker pool (see pool.h). */
#include "pool.h"

#include "iqforge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

struct iqf_pool {
    int n_threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    uint64_t generation; /* bumped for each loop (under mu) */
    int busy;            /* workers still inside the current loop (under mu) */
    bool quit;
    /* the current loop */
    iqf_pool_fn fn;
    void *arg;
    int64_t n, grain;
    atomic_int_fast64_t next;
};

typedef struct warg {
    iqf_pool *p;
    int id;
} warg;

static void run_chunks(iqf_pool *p, int id) {
    for (;;) {
        int64_t b = atomic_fetch_add(&p->next, p->grain);
        if (b >= p->n) break;
        int64_t e = b + p->grain < p->n ? b + p->grain : p->n;
        p->fn(p->arg, b, e, id);
    }
}

static void *worker_main(void *vp) {
    warg *w = vp;
    iqf_pool *p = w->p;
    int id = w->id;
    free(w);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_chunks(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

iqf_pool *iqf_pool_new(int n_threads) {
    if (n_threads <= 0) n_threads = iqf_cpu_count();
    iqf_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->tids = calloc((size_t)n_threads, sizeof(pthread_t));
    if (!p->tids) { free(p); return NULL; }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    p->n_threads = 1;
    for (int t = 1; t < n_threads; t++) {
        warg *w = malloc(sizeof *w);
        if (!w) break;
        w->p = p;
        w->id = t;
        if (pthread_create(&p->tids[t], NULL, worker_main, w) != 0) { free(w); break; }
        p->n_threads = t + 1;
    }
    return p;
}

void iqf_pool_free(iqf_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->tids[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->tids);
    free(p);
}

int iqf_pool_size(const iqf_pool *p) { return p->n_threads; }

void iqf_pool_run(iqf_pool *p, int64_t n, int64_t grain, iqf_pool_fn fn, void *arg) {
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    if (p->n_threads == 1 || n <= grain) {
        fn(arg, 0, n, 0);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->next, 0);
    p->busy = p->n_threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
