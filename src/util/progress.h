/*
 * progress.h - a one-line progress display for long jobs.
 *
 * Shown only when enabled and stderr is a terminal; redrawn at most every 100 ms:
 * "[ i/n] name  type  xx.x MB/s  ETA mm:ss". iqf_progress_done clears the line.
 */
#ifndef IQF_PROGRESS_H
#define IQF_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct iqf_progress {
    bool enabled;
    double t_start, t_last;
    int64_t total_bytes;   /* work in input bytes, for MB/s and ETA */
    int64_t done_bytes;
    int n_items;
} iqf_progress;

/* quiet: --quiet given. Enabled iff !quiet and isatty(stderr). */
void iqf_progress_init(iqf_progress *p, bool quiet, int n_items, int64_t total_bytes);
void iqf_progress_update(iqf_progress *p, int item, const char *name, const char *what,
                         int64_t done_bytes);
void iqf_progress_done(iqf_progress *p);

/* Monotonic seconds. */
double iqf_now(void);

#endif
