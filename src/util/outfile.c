#include "outfile.h"

#include "error.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The registry of live temporary files (see outfile.h for why it is global). state: 0 free,
 * 1 being filled, 2 live (the handler unlinks only live slots). */
#define SLOT_PATH 4096
static struct live_slot {
    atomic_int state;
    char path[SLOT_PATH];
} live[IQF_OUTFILE_MAX_LIVE];

static int slot_claim(void) {
    for (int i = 0; i < IQF_OUTFILE_MAX_LIVE; i++) {
        int expect = 0;
        if (atomic_compare_exchange_strong(&live[i].state, &expect, 1)) return i;
    }
    return -1;
}

static void slot_release(int i) {
    if (i >= 0 && i < IQF_OUTFILE_MAX_LIVE) atomic_store(&live[i].state, 0);
}

static char *slot_path(int i) { return live[i].path; }
static void slot_publish(int i) { atomic_store(&live[i].state, 2); }

int iqf_outfile_remove_all_live(void) {
    int n = 0;
    for (int i = 0; i < IQF_OUTFILE_MAX_LIVE; i++)
        if (atomic_load(&live[i].state) == 2 && unlink(live[i].path) == 0) n++;
    return n;
}

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

static int open_nomem(iqf_outfile *of) {
    of->nomem = true;
    return open_fail(of, "out of memory");
}

int iqf_of_open(iqf_outfile *of, const char *path) {
    memset(of, 0, sizeof *of);
    of->path = strdup(path);
    if (!of->path) return open_nomem(of);
    struct stat st;
    /* Devices (e.g. /dev/null, /dev/full) cannot be renamed onto: write them directly. */
    if (stat(path, &st) == 0 && (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode))) {
        of->f = fopen(path, "wb");
        if (!of->f) return open_fail(of, strerror(errno));
        return 0;
    }
    size_t n = strlen(path) + 16;
    of->tmp_path = malloc(n);
    if (!of->tmp_path) return open_nomem(of);
    snprintf(of->tmp_path, n, "%s.tmp.XXXXXX", path);
    if (n > SLOT_PATH) return open_fail(of, "path too long");
    const int slot = slot_claim();
    if (slot < 0) return open_fail(of, "too many output files open at once");
    of->live_slot = slot + 1;
    /* No signal between creating the file and registering it. */
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    int fd = mkstemp(of->tmp_path);
    int e = errno;
    if (fd >= 0) {
        memcpy(slot_path(slot), of->tmp_path, strlen(of->tmp_path) + 1);
        slot_publish(slot);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fd < 0) {
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

int iqf_of_write(iqf_outfile *of, const void *data, size_t n) {
    if (of->failed) return -1;
    if (n && fwrite(data, 1, n, of->f) != n) return set_err(of, strerror(errno ? errno : EIO));
    return 0;
}

long long iqf_of_tell(const iqf_outfile *of) { return of->f ? ftello(of->f) : -1; }

int iqf_of_pad(iqf_outfile *of, size_t align) {
    static const char zeros[64];
    long long pos = iqf_of_tell(of);
    if (pos < 0) return set_err(of, "cannot tell position");
    size_t pad = (align - (size_t)pos % align) % align;
    while (pad > 0) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (iqf_of_write(of, zeros, k)) return -1;
        pad -= k;
    }
    return 0;
}

static void cleanup(iqf_outfile *of) {
    slot_release(of->live_slot - 1);
    of->live_slot = 0;
    free(of->path);
    free(of->tmp_path);
    of->path = of->tmp_path = NULL;
    of->f = NULL;
}

int iqf_of_commit(iqf_outfile *of) {
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

void iqf_of_abort(iqf_outfile *of) {
    if (of->f) fclose(of->f);
    if (of->tmp_path) unlink(of->tmp_path);
    cleanup(of);
}

bool iqf_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    if (stat(a, &sa) != 0 || stat(b, &sb) != 0) return false;
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* ---- signal cleanup ---- */
static char sig_prog[64] = "iqforge";
static atomic_int sig_entered;

static size_t cstrlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

static void put(const char *s) {
    ssize_t r = write(2, s, cstrlen(s));
    (void)r;
}

static void on_signal(int sig) {
    const int first = atomic_fetch_add(&sig_entered, 1) == 0;
    const int n = iqf_outfile_remove_all_live();
    if (first) {
        const char *name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
        put(sig_prog);
        put(": interrupted by ");
        put(name);
        put(n > 0 ? "; temporary output removed, nothing written\n" : "\n");
    }
    _exit(128 + sig);
}

int iqf_outfile_install_signal_cleanup(const char *name) {
    if (name) {
        size_t k = strlen(name);
        if (k >= sizeof sig_prog) k = sizeof sig_prog - 1;
        memcpy(sig_prog, name, k);
        sig_prog[k] = 0;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        /* A signal ignored on entry (nohup, a background job without job control) stays ignored. */
        struct sigaction cur;
        if (sigaction(sigs[i], NULL, &cur) != 0) return -1;
        if (cur.sa_handler == SIG_IGN) continue;
        if (sigaction(sigs[i], &sa, NULL) != 0) return -1;
    }
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGXFSZ, &ign, NULL) != 0) return -1;
    return 0;
}

/* The public handle (iqforge.h): the same struct on the heap, messages copied out to err. */
static iqf_status of_status(const iqf_outfile *of, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s", of->err[0] ? of->err : "write failed");
    return IQF_E_IO;
}

iqf_status iqf_outfile_open(const char *path, iqf_outfile **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!path || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "iqf_outfile_open: NULL argument");
    iqf_outfile *of = malloc(sizeof *of);
    if (!of) return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory", path);
    if (iqf_of_open(of, path) != 0) {
        const iqf_status st = of->nomem ? IQF_E_NOMEM : IQF_E_IO;
        if (err && errlen) snprintf(err, errlen, "%s", of->err);
        free(of);
        return st;
    }
    *out = of;
    return IQF_OK;
}

iqf_status iqf_outfile_write(iqf_outfile *of, const void *data, size_t n, char *err, size_t errlen) {
    if (!of || (!data && n)) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "iqf_outfile_write: NULL argument");
    return iqf_of_write(of, data, n) ? of_status(of, err, errlen) : IQF_OK;
}

iqf_status iqf_outfile_commit(iqf_outfile *of, char *err, size_t errlen) {
    if (!of) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "iqf_outfile_commit: NULL handle");
    iqf_status st = iqf_of_commit(of) ? of_status(of, err, errlen) : IQF_OK;
    free(of);
    return st;
}

void iqf_outfile_abort(iqf_outfile *of) {
    if (!of) return;
    iqf_of_abort(of);
    free(of);
}
