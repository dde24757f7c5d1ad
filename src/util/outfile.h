/*
 * outfile.h - output files that appear whole or not at all.
 *
 * iqf_outfile_open creates a temporary file next to `path` (same folder, so rename is atomic);
 * iqf_outfile_commit flushes, closes and renames it to `path`; iqf_outfile_abort removes it.
 * A failed open owns nothing (calling abort afterwards is a harmless no-op).
 * Every write error (including ENOSPC on /dev/full-like targets) is reported and sticky: after
 * one failure, commit fails and removes the temporary file.
 */
#ifndef IQF_OUTFILE_H
#define IQF_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct iqf_outfile {
    FILE *f;
    char *path;      /* final name */
    char *tmp_path;  /* temporary name; NULL when writing to a device such as /dev/full */
    bool failed;
    char err[256];
} iqf_outfile;

/* Returns 0, or -1 with a message "PATH: reason" in of->err. */
int iqf_outfile_open(iqf_outfile *of, const char *path);
/* Writes n bytes; returns 0 or -1 (message in of->err). */
int iqf_outfile_write(iqf_outfile *of, const void *data, size_t n);
/* Zero bytes up to the next multiple of `align` of the current size. */
int iqf_outfile_pad(iqf_outfile *of, size_t align);
long long iqf_outfile_tell(const iqf_outfile *of);
/* Returns 0 (file now at its final name) or -1 (temporary removed, message in of->err). */
int iqf_outfile_commit(iqf_outfile *of);
void iqf_outfile_abort(iqf_outfile *of);

/* True if the two paths name the same existing file (same device and inode). */
bool iqf_same_file(const char *a, const char *b);

#endif
