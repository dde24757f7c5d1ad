/*
 * json.c - the vendored yyjson compiled into the library (warnings silenced for it alone),
 * and the few helpers iqforge convert needs.
 */
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Weverything"
#elif defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wsign-compare"
#endif
#include "../../third_party/yyjson/yyjson.c"
#if defined(__clang__)
#pragma clang diagnostic pop
#elif defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

yyjson_doc *iqf_json_parse(const char *data, size_t len, const char *name, char *err, size_t errlen) {
    if (len > IQF_JSON_MAX_BYTES) {
        snprintf(err, errlen, "%s: JSON of %zu bytes is too large", name, len);
        return NULL;
    }
    yyjson_read_err e;
    memset(&e, 0, sizeof e);
    yyjson_doc *d = yyjson_read_opts((char *)data, len, YYJSON_READ_NOFLAG, NULL, &e);
    if (!d) {
        if (e.code == YYJSON_READ_ERROR_DEPTH)
            snprintf(err, errlen, "%s: JSON nested deeper than %d levels", name, IQF_JSON_MAX_DEPTH);
        else
            snprintf(err, errlen, "%s: malformed JSON at byte %zu: %s", name, e.pos, e.msg ? e.msg : "error");
    }
    return d;
}

void *iqf_cv_read_whole(const char *path, uint64_t max, const char *what, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        fclose(f);
        return NULL;
    }
    if ((uint64_t)st.st_size > max) {
        snprintf(err, errlen, "%s: %s of %lld bytes is too large", path, what, (long long)st.st_size);
        fclose(f);
        return NULL;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        snprintf(err, errlen, "%s: out of memory", path);
        fclose(f);
        return NULL;
    }
    size_t got = n ? fread(buf, 1, n, f) : 0;
    int rerr = ferror(f);
    fclose(f);
    if (got != n || rerr) {
        snprintf(err, errlen, "%s: read error", path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

yyjson_doc *iqf_json_read_file(const char *path, char *err, size_t errlen) {
    size_t n = 0;
    char *buf = iqf_cv_read_whole(path, IQF_JSON_MAX_BYTES, "JSON", &n, err, errlen);
    if (!buf) return NULL;
    yyjson_doc *d = iqf_json_parse(buf, n, path, err, errlen);
    free(buf);
    return d;
}

yyjson_val *iqf_json_get(yyjson_val *obj, const char *key) {
    if (!obj || !yyjson_is_obj(obj)) return NULL;
    return yyjson_obj_get(obj, key);
}

bool iqf_json_is_null_or_absent(yyjson_val *v) { return !v || yyjson_is_null(v); }

bool iqf_json_int(yyjson_val *v, int64_t *out) {
    if (!v) return false;
    if (yyjson_is_uint(v)) {
        uint64_t u = yyjson_get_uint(v);
        if (u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    }
    if (yyjson_is_sint(v)) {
        *out = yyjson_get_sint(v);
        return true;
    }
    return false;
}

bool iqf_json_num(yyjson_val *v, double *out) {
    if (!v || !yyjson_is_num(v)) return false;
    *out = yyjson_get_num(v);
    return true;
}

const char *iqf_json_str(yyjson_val *v, size_t *len) {
    if (!v || !yyjson_is_str(v)) return NULL;
    if (len) *len = yyjson_get_len(v);
    return yyjson_get_str(v);
}
