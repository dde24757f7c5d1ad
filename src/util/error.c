#include "error.h"

#include <stdarg.h>
#include <stdio.h>

iqf_status iqf_fail(char *err, size_t errlen, iqf_status st, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return st;
}
