/*
 * json.h - Hugging Face JSON files read with the vendored yyjson (third_party/yyjson, MIT).
 *
 * The parser is strict RFC 8259 (no comments, trailing commas, NaN), with a nesting limit of
 * IQF_JSON_MAX_DEPTH containers (deeper input is refused as an error, not parsed by recursion).
 */
#ifndef IQF_CONVERT_JSON_H
#define IQF_CONVERT_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define YYJSON_READER_DEPTH_LIMIT 256
#define YYJSON_DISABLE_NON_STANDARD 1
/* yyjson's functions stay internal to libiqforge (its default marks them exported). */
#ifndef yyjson_api
#define yyjson_api __attribute__((visibility("hidden")))
#endif
#include "../../third_party/yyjson/yyjson.h"

#define IQF_JSON_MAX_DEPTH 256
#define IQF_JSON_MAX_BYTES ((size_t)1 << 30) /* 1 GiB: no HF JSON file is near it */

/* Parse `len` bytes; NULL with "NAME: what is wrong" in err. Free with yyjson_doc_free. */
yyjson_doc *iqf_json_parse(const char *data, size_t len, const char *name, char *err, size_t errlen);
/* Read and parse a file; NULL with "PATH: ..." (missing file included). */
yyjson_doc *iqf_json_read_file(const char *path, char *err, size_t errlen);
/* The whole regular file at path, malloc'd (*len bytes); NULL with "PATH: what is wrong" in err
 * when it cannot be opened or read, is not a regular file, or is larger than max ("WHAT of N
 * bytes is too large"). */
void *iqf_cv_read_whole(const char *path, uint64_t max, const char *what, size_t *len, char *err, size_t errlen);

/* Small helpers over yyjson values (NULL-safe). */
yyjson_val *iqf_json_get(yyjson_val *obj, const char *key);            /* NULL if absent or obj not object */
bool iqf_json_is_null_or_absent(yyjson_val *v);
/* Integer value (uint, sint; a real with an exact integer value is not accepted). */
bool iqf_json_int(yyjson_val *v, int64_t *out);
/* Number value as double (int or real). */
bool iqf_json_num(yyjson_val *v, double *out);
const char *iqf_json_str(yyjson_val *v, size_t *len); /* NULL if not a string */

#endif
