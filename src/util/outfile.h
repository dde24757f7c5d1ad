/*
 * outfile.h - output files that appear whole or not at all.
 *
 * The library's writers embed the struct (iqf_of_*: caller-allocated, no malloc of the handle);
 * the public iqf_outfile_* of iqforge.h wrap the same code around a heap handle.
 * iqf_of_open creates a temporary file next to `path` (same folder, so rename is atomic);
 * iqf_of_commit flushes, closes and renames it to `path`; iqf_of_abort removes it.
 * A failed open owns nothing (calling abort afterwards is a harmless no-op).
 * Every write error (including ENOSPC on /dev/full-like targets) is reported and sticky: after
 * one failure, commit fails and removes the temporary file.
 */
#ifndef IQF_OUTFILE_H
#define IQF_OUTFILE_H

#include "iqforge.h" /* the public side: iqf_outfile_*, iqf_same_file */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct iqf_outfile {
    FILE *f;
    char *path;      /* final name */
    char *tmp_path;  /* temporary name; NULL when writing to a device such as /dev/full */
    bool failed;
    bool nomem;      /* the failure was an allocation (open only) */
    int live_slot;   /* 1 + registry slot of tmp_path (see below); 0 if none */
    char err[256];
};

/* Returns 0, or -1 with a message "PATH: reason" in of->err. */
int iqf_of_open(iqf_outfile *of, const char *path);
/* Writes n bytes; returns 0 or -1 (message in of->err). */
int iqf_of_write(iqf_outfile *of, const void *data, size_t n);
/* Zero bytes up to the next multiple of `align` of the current size. */
int iqf_of_pad(iqf_outfile *of, size_t align);
long long iqf_of_tell(const iqf_outfile *of);
/* Returns 0 (file now at its final name) or -1 (temporary removed, message in of->err). */
int iqf_of_commit(iqf_outfile *of);
void iqf_of_abort(iqf_outfile *of);

/*
 * Interrupted runs. Every temporary file made by iqf_of_open (or iqf_outfile_open) is entered, until commit/abort,
 * in a process-wide registry of IQF_OUTFILE_MAX_LIVE fixed-size slots. This registry is the one
 * piece of process-global mutable state in iqforge: a signal handler cannot be given a context
 * pointer, so the only way for it to find the temporary files it must remove is a global it can
 * read without locks or allocation (slots are static buffers guarded by atomic flags).
 *
 * iqf_outfile_install_signal_cleanup(name) installs handlers for SIGINT, SIGTERM and SIGHUP that
 * unlink every live temporary file (async-signal-safe: atomics, unlink, write, _exit only), print
 * one line "NAME: interrupted by SIGINT; temporary output removed, nothing written" to stderr and
 * _exit(128 + signal number). All signals are blocked while the handler runs in a thread, and a
 * second signal arriving in another thread removes the files too and exits at once, so a second
 * Ctrl-C never leaves a file behind. SIGXFSZ is ignored, so a write over `ulimit -f` fails with
 * EFBIG and is reported by the ordinary error path (one line, temporary file removed).
 * A signal that is ignored when this is called (nohup, `cmd &` without job control) stays ignored.
 * Meant for programs (the CLI); a library user keeps its own signal handling. Idempotent.
 * Returns 0, or -1 if sigaction failed.
 */
#define IQF_OUTFILE_MAX_LIVE 256 /* --keep-split holds one per part until all are complete */
/* iqf_outfile_install_signal_cleanup(name) is public (iqforge.h). */
/* Removes every registered temporary file now (async-signal-safe); returns how many. */
int iqf_outfile_remove_all_live(void);


#endif
