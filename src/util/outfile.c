#include "outfile.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int set_err(iqf_outfile *of, const char *what) {
    snprintf(of->err, sizeof of->err, "%s: %s", of->path ? of->path : "?", what);
    of->failed = true;
    return -1;
}

static void cleanup(iqf_outfile *of);

/* Records the error and releases everything: a failed open owns nothing (abort is a no-op). */
static int open_fail(iqf_outfile *of, const char *what) {
    set_err(of, what);
    cleanup(of);
    return -1;
}

int iqf_outfile_open(iqf_outfile *of, const char *path) {
    memset(of, 0, sizeof *of);
    of->path = strdup(path);
    if (!of->path) return open_fail(of, "out of memory");
    struct stat st;
    /* Devices (e.g. /dev/null, /dev/full) cannot be renamed onto: write them directly. */
    if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode))) {
        of->f = fopen(path, "wb");
        if (!of->f) return open_fail(of, strerror(errno));
        return 0;
    }
    size_t n = strlen(path) + 16;
    of->tmp_path = malloc(n);
    if (!of->tmp_path) return open_fail(of, "out of memory");
    snprintf(of->tmp_path, n, "%s.tmp.XXXXXX", path);
    int fd = mkstemp(of->tmp_path);
    if (fd < 0) {
        int e = errno;
        free(of->tmp_path);
        of->tmp_path = NULL;
        return open_fail(of, strerror(e));
    }
    fchmod(fd, 0644);
    of->f = fdopen(fd, "wb");
    if (!of->f) {
        int e = errno;
        close(fd);
        unlink(of->tmp_path);
        return open_fail(of, strerror(e));
    }
    return 0;
}

int iqf_outfile_write(iqf_outfile *of, const void *data, size_t n) {
    if (of->failed) return -1;
    if (n && fwrite(data, 1, n, of->f) != n) return set_err(of, strerror(errno ? errno : EIO));
    return 0;
}

long long iqf_outfile_tell(const iqf_outfile *of) { return of->f ? ftello(of->f) : -1; }

int iqf_outfile_pad(iqf_outfile *of, size_t align) {
    static const char zeros[64];
    long long pos = iqf_outfile_tell(of);
    if (pos < 0) return set_err(of, "cannot tell position");
    size_t pad = (align - (size_t)pos % align) % align;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (iqf_outfile_write(of, zeros, k)) return -1;
        pad -= k;
    }
    return 0;
}

static void cleanup(iqf_outfile *of) {
    free(of->path);
    free(of->tmp_path);
    of->path = of->tmp_path = NULL;
    of->f = NULL;
}

int iqf_outfile_commit(iqf_outfile *of) {
    int rc = 0;
    if (!of->failed && fflush(of->f) != 0) rc = set_err(of, strerror(errno));
    if (!of->failed && fsync(fileno(of->f)) != 0 && errno != EINVAL && errno != EROFS)
        rc = set_err(of, strerror(errno));
    if (fclose(of->f) != 0 && !of->failed) rc = set_err(of, strerror(errno));
    if (of->failed) rc = -1;
    if (of->tmp_path) {
        if (rc == 0 && rename(of->tmp_path, of->path) != 0) rc = set_err(of, strerror(errno));
        if (rc != 0) unlink(of->tmp_path);
    }
    cleanup(of);
    return rc;
}

void iqf_outfile_abort(iqf_outfile *of) {
    if (of->f) fclose(of->f);
    if (of->tmp_path) unlink(of->tmp_path);
    cleanup(of);
}

bool iqf_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}
