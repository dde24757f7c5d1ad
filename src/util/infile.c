/* infile.c - reading a whole file into memory (infile.h). */
#include "infile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

char *iqf_read_file(const char *path, size_t max, size_t *len, int *why) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = IQF_READ_OPEN;
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        if (max && cap > max) break;
        char *nb = realloc(buf, cap * 2 + 1);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        *why = buf ? IQF_READ_IO : IQF_READ_NOMEM;
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}
