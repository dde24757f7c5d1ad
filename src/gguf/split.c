/*
 * split.c - gguf-split models (llama.cpp's gguf-split / llama_split_path): PREFIX-%05d-of-%05d.gguf,
 * numbered from 1, each part a complete GGUF file with split.no (u16, 0-based), split.count (u16)
 * and split.tensors.count (i32, the model's total). Opened by the first part; every part is
 * validated on its own by the reader (offsets within its own file) and all together here.
 */
#include "gguf_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static iqf_gguf *fail(iqf_gguf *g, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#include <stdarg.h>
static iqf_gguf *fail(iqf_gguf *g, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    iqf_gguf_close(g);
    return NULL;
}

/* split.no / split.count as u16 (the reader accepts any type; the schema wants u16). */
static bool split_keys(const iqf_gguf *g, uint16_t *no, uint16_t *count, bool *has_count, char *why, size_t n) {
    *has_count = iqf_gguf_find_kv(g, "split.count") >= 0;
    if (!*has_count) return true;
    if (!iqf_gguf_get_u16(g, "split.count", count)) return snprintf(why, n, "split.count is not a u16"), false;
    if (!iqf_gguf_get_u16(g, "split.no", no)) return snprintf(why, n, "split.no missing or not a u16"), false;
    return true;
}

static iqf_gguf *open_file(void *ctx, const char *path, char *err, size_t errlen) {
    (void)ctx;
    return iqf_gguf_open_part(path, err, errlen);
}

/* The public open (iqf_gguf_open) is here, not in the reader: split.c sits on reader.c, never the
 * reverse. */
iqf_gguf *iqf_gguf_open(const char *path, char *err, size_t errlen) {
    iqf_gguf *g = iqf_gguf_open_part(path, err, errlen);
    return g ? iqf_gguf_split_merge(g, err, errlen) : NULL;
}

iqf_gguf *iqf_gguf_split_merge(iqf_gguf *g, char *err, size_t errlen) {
    return iqf_gguf_split_merge_with(g, open_file, NULL, err, errlen);
}

iqf_gguf *iqf_gguf_split_merge_with(iqf_gguf *g, iqf_gguf_opener opener, void *ctx, char *err, size_t errlen) {
    char why[700];
    uint16_t no = 0, count = 1;
    bool has;
    const char *path = iqf_gguf_path(g);
    if (!split_keys(g, &no, &count, &has, why, sizeof why)) return fail(g, err, errlen, "%s: %s", path, why);
    if (has && no >= count)
        return fail(g, err, errlen, "%s: key split.no: %u is not below split.count %u", path, no, count);
    if (!has || count <= 1) return g;
    /* The name: PREFIX-%05d-of-%05d.gguf with this part's number. */
    char tail[64];
    snprintf(tail, sizeof tail, "-%05d-of-%05d.gguf", no + 1, count);
    const size_t pl = strlen(path), tl = strlen(tail);
    if (pl <= tl || strcmp(path + pl - tl, tail))
        return fail(g, err, errlen, "%s: part %u of a %u-part split model, but the name does not end in %s", path,
                    no + 1, count, tail);
    if (no != 0)
        return fail(g, err, errlen, "%s: part %u of a %u-part split model: give the first part, %.*s-00001-of-%05d.gguf",
                    path, no + 1, count, (int)(pl - tl), path, count);
    int32_t total = -1;
    if (iqf_gguf_find_kv(g, "split.tensors.count") >= 0 && !iqf_gguf_get_i32(g, "split.tensors.count", &total))
        return fail(g, err, errlen, "%s: split.tensors.count is not an i32", path);
    iqf_gguf **parts = calloc(count, sizeof *parts);
    if (!parts) return fail(g, err, errlen, "%s: out of memory", path);
    int64_t sum = iqf_gguf_n_tensors(g);
    size_t plen = pl - tl + tl + 1;
    char *pp = malloc(plen);
    if (!pp) {
        free(parts);
        return fail(g, err, errlen, "%s: out of memory", path);
    }
    for (int i = 1; i < count; i++) {
        snprintf(pp, plen, "%.*s-%05d-of-%05d.gguf", (int)(pl - tl), path, i + 1, count);
        char e[600];
        parts[i] = opener(ctx, pp, e, sizeof e);
        const char *bad = NULL;
        uint16_t pno = 0, pcount = 0;
        bool phas;
        int32_t ptotal = -1;
        if (!parts[i]) {
            snprintf(why, sizeof why, "%s", e);
            bad = why;
        } else if (!split_keys(parts[i], &pno, &pcount, &phas, e, sizeof e)) {
            snprintf(why, sizeof why, "%s: %s", pp, e);
            bad = why;
        } else if (!phas || pcount != count) {
            snprintf(why, sizeof why, "%s: split.count is %u, the first part says %u", pp, phas ? pcount : 0, count);
            bad = why;
        } else if (pno != i) {
            snprintf(why, sizeof why, "%s: split.no is %u, its name says %d", pp, pno, i);
            bad = why;
        } else if ((iqf_gguf_find_kv(parts[i], "split.tensors.count") >= 0) != (total >= 0) ||
                   (total >= 0 && (!iqf_gguf_get_i32(parts[i], "split.tensors.count", &ptotal) || ptotal != total))) {
            snprintf(why, sizeof why, "%s: split.tensors.count differs from the first part's (%" PRId32 ")", pp, total);
            bad = why;
        }
        if (bad) {
            for (int k = 1; k <= i; k++) iqf_gguf_close(parts[k]);
            free(parts);
            free(pp);
            return fail(g, err, errlen, "%s", bad);
        }
        sum += iqf_gguf_n_tensors(parts[i]);
    }
    free(pp);
    if (total >= 0 && sum != total) {
        for (int k = 1; k < count; k++) iqf_gguf_close(parts[k]);
        free(parts);
        return fail(g, err, errlen, "%s: split.tensors.count is %" PRId32 " but the %u parts hold %" PRId64 " tensors", path,
                    total, count, sum);
    }
    iqf_gguf_tensor *all = calloc((size_t)(sum > 0 ? sum : 1), sizeof *all);
    if (!all) {
        for (int k = 1; k < count; k++) iqf_gguf_close(parts[k]);
        free(parts);
        return fail(g, err, errlen, "%s: out of memory", path);
    }
    int64_t k = 0;
    for (int i = 0; i < count; i++) {
        const iqf_gguf *p = i == 0 ? g : parts[i];
        for (int64_t j = 0; j < iqf_gguf_n_tensors(p); j++) {
            all[k] = *iqf_gguf_tensor_at(p, j);
            all[k].part = i;
            k++;
        }
    }
    if (!iqf_gguf_set_parts(g, parts, count, all, sum, why, sizeof why))
        return fail(g, err, errlen, "%s: %s", path, why); /* g owns parts and all now */
    return g;
}
