/* error.h - the one way library functions report a failure: a status plus a message. */
#ifndef IQF_ERROR_H
#define IQF_ERROR_H

#include "iqforge.h"

#include <stddef.h>

/* Formats the message into err (if err && errlen) and returns st. */
iqf_status iqf_fail(char *err, size_t errlen, iqf_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
