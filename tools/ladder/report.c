/* report.c - the ladder's atomic, formatted report output; see report.h. */
#include "report.h"

#include "iqforge.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>

void iqf_ladder_put(ladder_rep *o, const char *fmt, ...) {
    if (o->bad) return;
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0) { o->bad = true; return; }
    if ((size_t)k >= sizeof buf) k = (int)sizeof buf - 1;
    if (iqf_outfile_write(o->of, buf, (size_t)k, o->err, sizeof o->err) != IQF_OK) o->bad = true;
}

int iqf_ladder_rep_open(ladder_rep *o, const char *path, char *err, size_t errlen) {
    o->bad = false;
    o->err[0] = 0;
    o->of = NULL;
    return iqf_outfile_open(path, &o->of, err, errlen) == IQF_OK ? 0 : -1;
}

int iqf_ladder_rep_close(ladder_rep *o, char *err, size_t errlen) {
    if (o->bad) {
        snprintf(err, errlen, "%s", o->err[0] ? o->err : "write failed");
        iqf_outfile_abort(o->of);
        o->of = NULL;
        return -1;
    }
    iqf_status st = iqf_outfile_commit(o->of, err, errlen);
    o->of = NULL;
    return st == IQF_OK ? 0 : -1;
}

const char *iqf_ladder_mode_str(int m) {
    if (m == LADDER_MODE_FEEDBACK) return "feedback";
    if (m == LADDER_MODE_FULL) return "full";
    const char *s = iqf_mode_name(m);
    return s ? s : "?";
}

int iqf_ladder_mode_from_name(const char *name) {
    for (int m = 0; m < LADDER_N_MODES; m++)
        if (!strcasecmp(name, iqf_ladder_mode_str(m))) return m;
    return -1;
}
