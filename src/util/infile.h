/* infile.h - reading a whole (text) file into memory. */
#ifndef IQF_INFILE_H
#define IQF_INFILE_H

#include <stddef.h>

enum { IQF_READ_OPEN = 1, IQF_READ_IO = 2, IQF_READ_NOMEM = 3 };

/* The file at `path`, NUL-terminated, malloc'd (*len: its bytes without the NUL). With max > 0
 * the reading stops once more than max bytes are held (the text is then cut there). NULL on
 * failure, *why saying what failed: IQF_READ_OPEN (errno as fopen left it), IQF_READ_IO,
 * IQF_READ_NOMEM. */
char *iqf_read_file(const char *path, size_t max, size_t *len, int *why);

#endif
