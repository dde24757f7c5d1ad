/*
 * pool.c - persistent worker pool (see pool.h).
 *
 * The work counter packs the loop's generation (high 24 bits) with the next item (low 40 bits);
 * a chunk is claimed with a compare-and-swap that fails once the generation has moved on. The
 * caller waits for the items to be DONE, not for every worker to check in: on an oversubscribed
 * machine a worker that wakes late simply finds nothing left and goes back to sleep, instead of
 * holding up every matrix product.
 */
#include "pool.h"

#include "iqforge.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#define GEN_SHIFT 40
#define ITEM_MASK ((UINT64_C(1) << GEN_SHIFT) - 1)

struct iqf_pool {
    int n_threads;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake, done_cv;
    uint64_t generation; /* under mu; also the high bits of `next` */
    bool quit;
    /* the current loop (written by the caller before the generation is published) */
    iqf_pool_fn fn;
    void *arg;
    _Atomic int64_t n, grain; /* read by late workers while the caller sets up a new loop */
    _Atomic uint64_t next;  /* generation << 40 | next item */
    _Atomic int64_t done;   /* items finished in this generation */
};

typedef struct warg {
    iqf_pool *p;
    int id;
} warg;

/* Runs chunks of generation `gen` until none are left; returns when the counter moved on. */
static void run_chunks(iqf_pool *p, uint64_t gen, int id) {
    const uint64_t tag = (gen & 0xFFFFFF) << GEN_SHIFT;
    for (;;) {
        uint64_t v = atomic_load(&p->next);
        if ((v & ~ITEM_MASK) != tag) return;
        const int64_t n = atomic_load(&p->n);
        const int64_t grain = atomic_load(&p->grain);
        int64_t b = (int64_t)(v & ITEM_MASK);
        if (b >= n) return;
        int64_t e = b + grain < n ? b + grain : n;
        if (!atomic_compare_exchange_weak(&p->next, &v, tag | (uint64_t)e)) continue;
        p->fn(p->arg, b, e, id);
        if (atomic_fetch_add(&p->done, e - b) + (e - b) == n) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
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
        run_chunks(p, seen, id);
        pthread_mutex_lock(&p->mu);
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
    pthread_cond_init(&p->done_cv, NULL);
    atomic_init(&p->next, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->n, 0);
    atomic_init(&p->grain, 1);
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
    pthread_cond_destroy(&p->done_cv);
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
    /* Every chunk of the previous loop is done, so no worker is inside fn. A late worker may
     * still be between reading the counter and its compare-and-swap: first move the counter to
     * the new generation (exhausted), so that such a swap fails, and only then change n and
     * grain (a worker that read the old counter value and then the new n could otherwise claim
     * a phantom chunk of the old generation); then open the new loop. */
    p->generation++;
    const uint64_t gen = p->generation, tag = (gen & 0xFFFFFF) << GEN_SHIFT;
    atomic_store(&p->next, tag | ITEM_MASK);
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->n, n);
    atomic_store(&p->grain, grain);
    atomic_store(&p->done, 0);
    atomic_store(&p->next, tag);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, gen, 0);
    if (atomic_load(&p->done) < n) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->done) < n) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
