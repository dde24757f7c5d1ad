/*
 * progress.h - the CLI's one-line progress display for long jobs. It is the CLI's, not the
 * library's: the library reports progress through callbacks (iqf_quantize_progress_fn,
 * iqf_eval_progress_fn) and never draws on a terminal, so this lives in tools/.
 *
 * Shown only when enabled and stderr is a terminal; redrawn at most every 100 ms:
 * "[ i/n] name  type  xx.x MB/s  ETA mm:ss". cli_progress_done clears the line.
 */
#ifndef IQF_CLI_PROGRESS_H
#define IQF_CLI_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct cli_progress {
    bool enabled;
    bool running;          /* a job is under way (cli_progress_quantize: reset at its end) */
    double t_start, t_last;
    int64_t total_bytes;   /* work in input bytes, for MB/s and ETA */
    int64_t done_bytes;
    int n_items;
} cli_progress;

/* quiet: --quiet given. Enabled iff !quiet and isatty(stderr). */
void cli_progress_init(cli_progress *p, bool quiet, int n_items, int64_t total_bytes);
void cli_progress_update(cli_progress *p, int item, const char *name, const char *what,
                         int64_t done_bytes);
void cli_progress_done(cli_progress *p);

/* An iqf_quantize_progress_fn drawing on `user`, a cli_progress set up by cli_progress_init
 * (its counts are taken from the calls; each job the library reports restarts the clock). */
void cli_progress_quantize(void *user, int item, int n_items, const char *name, const char *what,
                           int64_t done_bytes, int64_t total_bytes);

/* Monotonic seconds. */
double cli_now(void);

#endif
