/*
 * report.h - internal to tools/ladder: the formatted, atomic output that every report file goes
 * through (ladder.c: JSON, CSV, the cache record; svg.c: the plot), and the small facts both read.
 */
#ifndef IQF_LADDER_REPORT_H
#define IQF_LADDER_REPORT_H

#include "iqforge.h"
#include "ladder.h"

#include <stdbool.h>
#include <stddef.h>

/* A report being written: whole or not at all (iqforge.h's iqf_outfile_*). After a failed write
 * every further iqf_ladder_put is a no-op and iqf_ladder_rep_close reports the first error. */
typedef struct ladder_rep {
    iqf_outfile *of;
    bool bad;
    char err[512]; /* the first write error */
} ladder_rep;

int iqf_ladder_rep_open(ladder_rep *o, const char *path, char *err, size_t errlen);
__attribute__((format(printf, 2, 3))) void iqf_ladder_put(ladder_rep *o, const char *fmt, ...);
/* Commits the file (0), or removes it and returns -1 with err set. */
int iqf_ladder_rep_close(ladder_rep *o, char *err, size_t errlen);

/* A rung with numbers to report: done and not failed. */
static inline bool ladder_usable(const ladder_rung *r) { return r->done && !r->failed; }

#endif
