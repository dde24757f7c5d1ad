/*
 * ladder_keys.c - the ladder's cache keys (ladder_keys.h): FNV-1a over the inputs' bytes.
 */
#include "ladder_keys.h"

#include "cli.h"
#include "iqforge.h"
#include "ladder.h" /* tools/ladder: iqf_ladder_fnv1a */

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool ladder_hash_file(const char *path, uint64_t *h, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    unsigned char buf[1 << 16];
    size_t n;
    uint64_t tot = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        *h = iqf_ladder_fnv1a(*h, buf, n);
        tot += n;
    }
    bool ok = !ferror(f);
    fclose(f);
    if (size) *size = tot;
    return ok;
}

/* One file by its first and last 8 MiB, then its size. */
static bool hash_ends(const char *path, uint64_t *h, uint64_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    struct stat st;
    if (fstat(fileno(f), &st)) { fclose(f); return false; }
    if (S_ISDIR(st.st_mode)) { fclose(f); errno = EISDIR; return false; }
    const uint64_t sz = (uint64_t)st.st_size, span = 8u << 20;
    static unsigned char buf[1 << 16];
    bool ok = true;
    for (int part = 0; part < 2 && ok; part++) {
        uint64_t off = part == 0 ? 0 : (sz > span ? sz - span : 0);
        if (fseeko(f, (off_t)off, SEEK_SET)) { ok = false; break; }
        uint64_t left = sz - off < span ? sz - off : span;
        while (left > 0) {
            size_t n = fread(buf, 1, left < sizeof buf ? (size_t)left : sizeof buf, f);
            if (!n) { ok = false; if (!ferror(f)) errno = EIO; break; }
            *h = iqf_ladder_fnv1a(*h, buf, n);
            left -= n;
        }
    }
    fclose(f);
    *h = iqf_ladder_fnv1a(*h, &sz, sizeof sz);
    *size = sz;
    return ok;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A checkpoint directory: its regular files in name order (dot files and folders aside). */
static bool hash_dir(const char *path, uint64_t *h, uint64_t *size) {
    DIR *d = opendir(path);
    if (!d) return false;
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    char fp[8192];
    for (struct dirent *e; ok && (e = readdir(d)) != NULL;) {
        struct stat st;
        if (e->d_name[0] == '.') continue;
        if (snprintf(fp, sizeof fp, "%s/%s", path, e->d_name) >= (int)sizeof fp) { ok = false; errno = ENAMETOOLONG; break; }
        if (stat(fp, &st) || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 32;
            char **nn = realloc(names, nc * sizeof *names);
            if (!nn) { ok = false; errno = ENOMEM; break; }
            names = nn, cap = nc;
        }
        if (!(names[n] = strdup(e->d_name))) { ok = false; errno = ENOMEM; break; }
        n++;
    }
    closedir(d);
    if (ok && n) qsort(names, n, sizeof *names, cmp_names);
    *h = ladder_hash_str(*h, "hf-checkpoint");
    uint64_t tot = 0;
    for (size_t i = 0; ok && i < n; i++) {
        uint64_t sz = 0;
        snprintf(fp, sizeof fp, "%s/%s", path, names[i]);
        *h = ladder_hash_str(*h, names[i]);
        ok = hash_ends(fp, h, &sz);
        tot += sz;
    }
    *h = ladder_hash_str(*h, IQF_VERSION);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    *size = tot;
    return ok;
}

bool ladder_hash_model(const char *path, uint64_t *h, uint64_t *size) {
    return cli_is_dir(path) ? hash_dir(path, h, size) : hash_ends(path, h, size);
}

uint64_t ladder_hash_str(uint64_t h, const char *s) {
    return iqf_ladder_fnv1a(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

bool ladder_key_file_matches(const char *path, const char *key, double *v1, double *v2) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[256], want[128];
    snprintf(want, sizeof want, "key %s\n", key);
    bool ok = fgets(line, sizeof line, f) && !strcmp(line, want);
    if (ok && v1) {
        char *end;
        ok = fgets(line, sizeof line, f) && !strncmp(line, "ppl ", 4);
        if (ok) { *v1 = strtod(line + 4, &end); ok = end != line + 4 && isfinite(*v1); }
        ok = ok && fgets(line, sizeof line, f) && !strncmp(line, "ppl_err ", 8);
        if (ok) { *v2 = strtod(line + 8, &end); ok = end != line + 8 && isfinite(*v2); }
    }
    fclose(f);
    return ok;
}

int ladder_write_key_file(const char *path, const char *key, const double *v1, const double *v2) {
    iqf_outfile *of;
    char err[512];
    if (iqf_outfile_open(path, &of, err, sizeof err)) return cli_error("%s", err);
    char buf[256];
    int n = v1 ? snprintf(buf, sizeof buf, "key %s\nppl %a\nppl_err %a\n", key, *v1, *v2)
               : snprintf(buf, sizeof buf, "key %s\n", key);
    if (iqf_outfile_write(of, buf, (size_t)n, err, sizeof err)) {
        iqf_outfile_abort(of);
        return cli_error("%s", err);
    }
    if (iqf_outfile_commit(of, err, sizeof err)) return cli_error("%s", err);
    return 0;
}
