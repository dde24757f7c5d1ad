#include "progress.h"

#include <time.h>

double iqf_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void iqf_progress_init(iqf_progress *p, iqf_quantize_progress_fn fn, void *user, int n_items,
                       int64_t total_bytes) {
    p->fn = fn;
    p->user = user;
    p->total_bytes = total_bytes;
    p->n_items = n_items;
}

void iqf_progress_update(iqf_progress *p, int item, const char *name, const char *what,
                         int64_t done_bytes) {
    if (p->fn) p->fn(p->user, item, p->n_items, name, what, done_bytes, p->total_bytes);
}

void iqf_progress_done(iqf_progress *p) {
    if (p->fn) p->fn(p->user, p->n_items, p->n_items, NULL, NULL, p->total_bytes, p->total_bytes);
}
