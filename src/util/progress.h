/*
 * progress.h - progress of the library's long jobs, reported through the caller's callback
 * (iqf_quantize_progress_fn of iqforge.h). The library draws nothing itself: the terminal line is
 * the CLI's (tools/progress.c).
 */
#ifndef IQF_PROGRESS_H
#define IQF_PROGRESS_H

#include "iqforge.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct iqf_progress {
    iqf_quantize_progress_fn fn;   /* NULL: no reports */
    void *user;
    int64_t total_bytes;           /* work in input bytes */
    int n_items;
} iqf_progress;

void iqf_progress_init(iqf_progress *p, iqf_quantize_progress_fn fn, void *user, int n_items,
                       int64_t total_bytes);
/* Item `item` (1-based) named `name` is at stage `what`; done_bytes of the work are done. */
void iqf_progress_update(iqf_progress *p, int item, const char *name, const char *what,
                         int64_t done_bytes);
/* The job ended: one last call with name NULL. */
void iqf_progress_done(iqf_progress *p);

/* Monotonic seconds. */
double iqf_now(void);

#endif
