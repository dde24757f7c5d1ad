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
    if (iqf_of_write(&o->of, buf, (size_t)k)) o->bad = true;
}

int iqf_ladder_rep_open(ladder_rep *o, const char *path, char *err, size_t errlen) {
    o->bad = false;
    if (iqf_of_open(&o->of, path)) {
        snprintf(err, errlen, "%s", o->of.err);
        return -1;
    }
    return 0;
}

int iqf_ladder_rep_close(ladder_rep *o, char *err, size_t errlen) {
    if (o->bad) {
        snprintf(err, errlen, "%s", o->of.err[0] ? o->of.err : "write failed");
        iqf_of_abort(&o->of);
        return -1;
    }
    if (iqf_of_commit(&o->of)) {
        snprintf(err, errlen, "%s", o->of.err);
        return -1;
    }
    return 0;
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
