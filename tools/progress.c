/* progress.c - the CLI's progress line; see progress.h. */
#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_progress_init(cli_progress *p, bool quiet, int n_items, int64_t total_bytes) {
    p->enabled = !quiet && isatty(2);
    p->running = false;
    p->t_start = cli_now();
    p->t_last = 0;
    p->total_bytes = total_bytes;
    p->done_bytes = 0;
    p->n_items = n_items;
}

void cli_progress_update(cli_progress *p, int item, const char *name, const char *what,
                         int64_t done_bytes) {
    p->done_bytes = done_bytes;
    if (!p->enabled) return;
    double t = cli_now();
    if (t - p->t_last < 0.1 && item != p->n_items) return;
    p->t_last = t;
    double el = t - p->t_start;
    double mbs = el > 0 ? (double)done_bytes / el / 1e6 : 0;
    double eta = (done_bytes > 0 && p->total_bytes > done_bytes)
                     ? el * (double)(p->total_bytes - done_bytes) / (double)done_bytes : 0;
    int w = snprintf(NULL, 0, "%d", p->n_items);
    fprintf(stderr, "\r\033[K[%*d/%d] %-32.32s %-8s %7.1f MB/s  ETA %02d:%02d", w, item,
            p->n_items, name ? name : "", what ? what : "", mbs, (int)eta / 60, (int)eta % 60);
    fflush(stderr);
}

void cli_progress_done(cli_progress *p) {
    if (p->enabled) fprintf(stderr, "\r\033[K");
}

void cli_progress_quantize(void *user, int item, int n_items, const char *name, const char *what,
                           int64_t done_bytes, int64_t total_bytes) {
    cli_progress *p = user;
    if (!name) { /* the job ended */
        if (p->running) cli_progress_done(p);
        p->running = false;
        return;
    }
    if (!p->running) {
        p->running = true;
        p->t_start = cli_now();
        p->t_last = 0;
    }
    p->n_items = n_items;
    p->total_bytes = total_bytes;
    cli_progress_update(p, item, name, what, done_bytes);
}
