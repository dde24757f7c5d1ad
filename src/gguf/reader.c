/*
 * reader.c - GGUF v2/v3 reader: maps the file and validates all of it up front.
 *
 * Parsing runs in two passes over the header. The first pass checks everything and only counts
 * the bytes the KV values and names will need; the second allocates exactly that (so no
 * allocation is ever driven by an unchecked count) and fills it in. Keys and tensor names go
 * into hash tables (no quadratic duplicate search on hostile files).
 */
#include "gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* struct iqf_gguf and gkv: gguf_internal.h (shared with source.c) */


/* ------------------------------------------------------------------------------------------ */

const char *iqf_gguf_vtype_name(int t) {
    static const char *const names[] = { "u8", "i8", "u16", "i16", "u32", "i32", "f32",
                                         "bool", "str", "arr", "u64", "i64", "f64" };
    return t >= 0 && t < IQF_GGUF_VTYPE_COUNT ? names[t] : "?";
}

static uint64_t hash_str(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    h ^= h >> 31; /* mix the high bits into the low bits the table mask keeps */
    h *= 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

bool iqf_gguf_tensor_size(const char *name, int n_dims, const int64_t *ne, int type,
                          int64_t *nelem, uint64_t *nbytes, char *err, size_t errlen) {
    if (n_dims < 1 || n_dims > 4) {
        snprintf(err, errlen, "tensor '%s' has %d dimensions (must be 1..4)", name, n_dims);
        return false;
    }
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0) {
            snprintf(err, errlen, "tensor '%s' dimension %d is %" PRId64 " (must be > 0)", name, d, ne[d]);
            return false;
        }
        if (__builtin_mul_overflow(n, ne[d], &n)) {
            snprintf(err, errlen, "tensor '%s': element count overflows 64 bits", name);
            return false;
        }
    }
    const iqf_type_info *ti = iqf_type_get(type);
    if (!ti) {
        snprintf(err, errlen, "tensor '%s' has unknown type id %d", name, type);
        return false;
    }
    if (ne[0] % ti->blck_size != 0) {
        snprintf(err, errlen, "tensor '%s' of type %s has rows of %" PRId64 " values, not a multiple of the block size %" PRId64,
                 name, ti->name, ne[0], ti->blck_size);
        return false;
    }
    uint64_t b;
    if (__builtin_mul_overflow((uint64_t)(n / ti->blck_size), (uint64_t)ti->type_size, &b) ||
        b > (uint64_t)INT64_MAX || b > (uint64_t)SIZE_MAX) {
        snprintf(err, errlen, "tensor '%s': byte size overflows", name);
        return false;
    }
    *nelem = n;
    *nbytes = b;
    return true;
}

/* ------------------------------------------------------------------------------------------ */

typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
    char *msg;          /* error text (without the path) */
    size_t msglen;
    bool failed;
} cursor;

static bool failf(cursor *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool failf(cursor *c, const char *fmt, ...) {
    if (c->failed) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, c->msglen, fmt, ap);
    va_end(ap);
    c->failed = true;
    return false;
}

static size_t remain(const cursor *c) { return c->size - c->pos; }

static bool rd(cursor *c, void *dst, size_t n, const char *what) {
    if (n > remain(c))
        return failf(c, "truncated: %s needs %zu bytes at offset %zu but the file has %zu", what, n, c->pos, c->size);
    memcpy(dst, c->p + c->pos, n);
    c->pos += n;
    return true;
}

/* Reads a GGUF string header; returns a pointer to its bytes (not NUL-terminated). */
static const char *rd_str(cursor *c, uint64_t *len, const char *what) {
    uint64_t n = 0;
    if (!rd(c, &n, 8, what)) return NULL;
    if (n > IQF_GGUF_MAX_STRING) {
        failf(c, "%s at offset %zu has length %" PRIu64 " (limit %llu)", what, c->pos - 8, n, IQF_GGUF_MAX_STRING);
        return NULL;
    }
    if (n > remain(c)) {
        failf(c, "truncated: %s at offset %zu has length %" PRIu64 " but only %zu bytes remain", what, c->pos - 8, n, remain(c));
        return NULL;
    }
    const char *s = (const char *)c->p + c->pos;
    c->pos += (size_t)n;
    *len = n;
    return s;
}

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* A printable rendering of a (possibly binary) key or name for messages. */
static void safe_name(char *dst, size_t cap, const char *s, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 32 && ch < 127 && ch != '\'') dst[o++] = (char)ch;
        else o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
    }
    dst[o < cap ? o : cap - 1] = 0;
}

/* Hash insert: returns the index already there with the same name, or -1 after inserting. */
static int64_t hash_insert(int64_t *tab, size_t mask, const char *name, int64_t idx,
                           const char *(*name_of)(const iqf_gguf *, int64_t), const iqf_gguf *g) {
    size_t h = (size_t)hash_str(name, g->seed) & mask;
    while (tab[h] >= 0) {
        if (strcmp(name_of(g, tab[h]), name) == 0) return tab[h];
        h = (h + 1) & mask;
    }
    tab[h] = idx;
    return -1;
}

static int64_t hash_find(const int64_t *tab, size_t mask, const char *name,
                         const char *(*name_of)(const iqf_gguf *, int64_t), const iqf_gguf *g) {
    if (!tab || !name) return -1;
    size_t h = (size_t)hash_str(name, g->seed) & mask;
    while (tab[h] >= 0) {
        if (strcmp(name_of(g, tab[h]), name) == 0) return tab[h];
        h = (h + 1) & mask;
    }
    return -1;
}

static const char *kv_name_of(const iqf_gguf *g, int64_t i) { return g->kv[i].key; }
static const char *t_name_of(const iqf_gguf *g, int64_t i) { return g->tensors[i].name; }

static int64_t *hash_alloc(int64_t n, size_t *mask) {
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    int64_t *t = malloc(cap * sizeof *t);
    if (t) memset(t, 0xff, cap * sizeof *t);
    *mask = cap - 1;
    return t;
}

/*
 * One pass over the KV section. fill == false: validate and add the arena bytes needed to
 * *arena_need. fill == true: copy into g->arena at *arena_used and fill g->kv.
 */
static bool parse_kvs(cursor *c, iqf_gguf *g, int64_t n_kv, bool fill, size_t *arena) {
    char nm[160];
    for (int64_t i = 0; i < n_kv; i++) {
        uint64_t klen;
        const char *key = rd_str(c, &klen, "key");
        if (!key) return false;
        safe_name(nm, sizeof nm, key, klen < 100 ? (size_t)klen : 100);
        if (klen == 0) return failf(c, "key %" PRId64 " is empty", i);
        if (klen > IQF_GGUF_MAX_KEY)
            return failf(c, "key %" PRId64 " is %" PRIu64 " bytes long (limit %d)", i, klen, IQF_GGUF_MAX_KEY);
        if (memchr(key, 0, (size_t)klen)) return failf(c, "key %" PRId64 " ('%s') contains a NUL byte", i, nm);
        int32_t type = -1, arr_type = -1;
        uint64_t n = 1;
        if (!rd(c, &type, 4, "KV type")) return false;
        if (type == IQF_GGUF_ARR) {
            if (!rd(c, &arr_type, 4, "array element type") || !rd(c, &n, 8, "array length")) return false;
            if (arr_type == IQF_GGUF_ARR) return failf(c, "key '%s' is an array of arrays (not allowed)", nm);
            if (arr_type < 0 || arr_type >= IQF_GGUF_VTYPE_COUNT)
                return failf(c, "key '%s' is an array of unknown type id %d", nm, arr_type);
            if (n > IQF_GGUF_MAX_ARRAY)
                return failf(c, "key '%s': array of %" PRIu64 " elements (limit %llu)", nm, n, IQF_GGUF_MAX_ARRAY);
        } else if (type < 0 || type >= IQF_GGUF_VTYPE_COUNT) {
            return failf(c, "key '%s' has unknown type id %d", nm, type);
        }
        int et = type == IQF_GGUF_ARR ? arr_type : type;
        size_t kpos = *arena;
        *arena += align8((size_t)klen + 1);
        if (fill) {
            memcpy(g->arena + kpos, key, (size_t)klen);
            g->arena[kpos + klen] = 0;
            gkv *kv = &g->kv[i];
            kv->key = g->arena + kpos;
            kv->type = type;
            kv->arr_type = arr_type;
            kv->n = n;
            kv->val = g->arena + *arena;
        }
        if (et == IQF_GGUF_STR) {
            if (type != IQF_GGUF_ARR) {
                uint64_t len;
                const char *s = rd_str(c, &len, "string value");
                if (!s) return false;
                if (fill) {
                    memcpy(g->arena + *arena, s, (size_t)len);
                    g->arena[*arena + len] = 0;
                    g->kv[i].len = (size_t)len;
                }
                *arena += align8((size_t)len + 1);
            } else {
                if (n > remain(c) / 8)
                    return failf(c, "truncated: key '%s' is an array of %" PRIu64 " strings but only %zu bytes remain", nm, n, remain(c));
                size_t offs = *arena;
                *arena += ((size_t)n + 1) * 8;
                size_t text = *arena;
                uint64_t *off = fill ? (uint64_t *)(void *)(g->arena + offs) : NULL;
                if (fill) g->kv[i].strbase = g->arena + text;
                for (uint64_t j = 0; j < n; j++) {
                    uint64_t len;
                    const char *s = rd_str(c, &len, "string array element");
                    if (!s) return false;
                    if (fill) {
                        off[j] = *arena - text;
                        memcpy(g->arena + *arena, s, (size_t)len);
                        g->arena[*arena + len] = 0;
                    }
                    *arena += (size_t)len + 1;
                }
                if (fill) off[n] = *arena - text;
                *arena = align8(*arena);
            }
        } else {
            size_t es = iqf_gguf_vtype_size(et);
            if (n > remain(c) / es)
                return failf(c, "truncated: value of key '%s' needs %" PRIu64 " x %zu bytes at offset %zu, only %zu remain",
                             nm, n, es, c->pos, remain(c));
            size_t nb = (size_t)n * es;
            if (fill) memcpy(g->arena + *arena, c->p + c->pos, nb);
            c->pos += nb;
            *arena += align8(nb);
        }
    }
    return true;
}

/* One pass over the tensor infos (same fill convention; names go to the arena). */
static bool parse_tensors(cursor *c, iqf_gguf *g, int64_t n_tensors, bool fill, size_t *arena) {
    char nm[160], msg[400];
    for (int64_t i = 0; i < n_tensors; i++) {
        uint64_t len;
        const char *name = rd_str(c, &len, "tensor name");
        if (!name) return false;
        safe_name(nm, sizeof nm, name, len < 100 ? (size_t)len : 100);
        if (len == 0) return failf(c, "tensor %" PRId64 " has an empty name", i);
        if (len >= IQF_GGUF_MAX_NAME)
            return failf(c, "tensor %" PRId64 " name is %" PRIu64 " bytes long (must be < %d)", i, len, IQF_GGUF_MAX_NAME);
        if (memchr(name, 0, (size_t)len)) return failf(c, "tensor %" PRId64 " name ('%s') contains a NUL byte", i, nm);
        uint32_t n_dims = 0;
        if (!rd(c, &n_dims, 4, "tensor n_dims")) return false;
        if (n_dims < 1 || n_dims > 4) return failf(c, "tensor '%s' has %" PRIu32 " dimensions (must be 1..4)", nm, n_dims);
        int64_t ne[4] = { 1, 1, 1, 1 };
        if (!rd(c, ne, 8 * (size_t)n_dims, "tensor dimensions")) return false;
        int32_t type = -1;
        uint64_t offset = 0;
        if (!rd(c, &type, 4, "tensor type") || !rd(c, &offset, 8, "tensor offset")) return false;
        int64_t nelem;
        uint64_t nbytes;
        if (!iqf_gguf_tensor_size(nm, (int)n_dims, ne, type, &nelem, &nbytes, msg, sizeof msg))
            return failf(c, "%s", msg);
        size_t npos = *arena;
        *arena += align8((size_t)len + 1);
        if (fill) {
            memcpy(g->arena + npos, name, (size_t)len);
            g->arena[npos + len] = 0;
            iqf_gguf_tensor *t = &g->tensors[i];
            t->name = g->arena + npos;
            t->n_dims = (int)n_dims;
            memcpy(t->ne, ne, sizeof ne);
            t->type = type;
            t->offset = offset;
            t->nbytes = (size_t)nbytes;
        }
    }
    return true;
}

static iqf_gguf *fail_open(iqf_gguf *g, const char *name, const char *msg, char *err, size_t errlen) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", name ? name : "?", msg);
    iqf_gguf_close(g);
    return NULL;
}

static iqf_gguf *parse(iqf_gguf *g, char *err, size_t errlen) {
    char msg[512];
    cursor c = { g->base, g->hdr_size ? g->hdr_size : g->size, 0, msg, sizeof msg, false };
    char magic[4];
    if (g->size == 0) return fail_open(g, g->path, "empty file", err, errlen);
    if (!rd(&c, magic, 4, "magic")) return fail_open(g, g->path, "too short for a GGUF file", err, errlen);
    if (memcmp(magic, "GGUF", 4) != 0) return fail_open(g, g->path, "not a GGUF file (bad magic)", err, errlen);
    uint32_t version = 0;
    if (!rd(&c, &version, 4, "version")) return fail_open(g, g->path, msg, err, errlen);
    if (version != 0 && (version & 0xffff) == 0) {
        snprintf(msg, sizeof msg, "GGUF version 0x%08" PRIx32 " looks byte-swapped (big-endian files are not supported)", version);
        return fail_open(g, g->path, msg, err, errlen);
    }
    if (version == 1) return fail_open(g, g->path, "GGUF version 1 is not supported (only 2 and 3)", err, errlen);
    if (version < 2 || version > 3) {
        snprintf(msg, sizeof msg, "unsupported GGUF version %" PRIu32 " (only 2 and 3)", version);
        return fail_open(g, g->path, msg, err, errlen);
    }
    g->version = version;
    int64_t n_tensors = 0, n_kv = 0;
    if (!rd(&c, &n_tensors, 8, "tensor count") || !rd(&c, &n_kv, 8, "KV count"))
        return fail_open(g, g->path, msg, err, errlen);
    /* Each KV needs >= 14 bytes (key length, 1-byte key, type, 1-byte value), each tensor info
     * >= 33 (name length, 1-byte name, n_dims, one dim, type, offset). */
    if (n_kv < 0 || (uint64_t)n_kv > remain(&c) / 14) {
        snprintf(msg, sizeof msg, "KV count %" PRId64 " is impossible for a file of %zu bytes", n_kv, g->size);
        return fail_open(g, g->path, msg, err, errlen);
    }
    if (n_tensors < 0 || (uint64_t)n_tensors > remain(&c) / 33) {
        snprintf(msg, sizeof msg, "tensor count %" PRId64 " is impossible for a file of %zu bytes", n_tensors, g->size);
        return fail_open(g, g->path, msg, err, errlen);
    }
    size_t hdr = c.pos;
    size_t need = 0;
    if (!parse_kvs(&c, g, n_kv, false, &need)) return fail_open(g, g->path, msg, err, errlen);
    if (!parse_tensors(&c, g, n_tensors, false, &need)) return fail_open(g, g->path, msg, err, errlen);

    /* Second pass: allocate what the first pass measured and fill it. */
    g->n_kv = n_kv;
    g->n_tensors = n_tensors;
    g->arena = malloc(need ? need : 1);
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1, sizeof *g->tensors);
    g->kv_hash = hash_alloc(n_kv, &g->kv_hmask);
    g->t_hash = hash_alloc(n_tensors, &g->t_hmask);
    if (!g->arena || !g->kv || !g->tensors || !g->kv_hash || !g->t_hash)
        return fail_open(g, g->path, "out of memory", err, errlen);
    c.pos = hdr;
    size_t used = 0;
    if (!parse_kvs(&c, g, n_kv, true, &used) || !parse_tensors(&c, g, n_tensors, true, &used) || used != need)
        return fail_open(g, g->path, c.failed ? msg : "internal error: passes disagree", err, errlen);

    for (int64_t i = 0; i < n_kv; i++) {
        int64_t j = hash_insert(g->kv_hash, g->kv_hmask, g->kv[i].key, i, kv_name_of, g);
        if (j >= 0) {
            snprintf(msg, sizeof msg, "duplicate key '%.200s' (KVs %" PRId64 " and %" PRId64 ")", g->kv[i].key, j, i);
            return fail_open(g, g->path, msg, err, errlen);
        }
    }
    for (int64_t i = 0; i < n_tensors; i++) {
        int64_t j = hash_insert(g->t_hash, g->t_hmask, g->tensors[i].name, i, t_name_of, g);
        if (j >= 0) {
            snprintf(msg, sizeof msg, "duplicate tensor name '%s' (tensors %" PRId64 " and %" PRId64 ")", g->tensors[i].name, j, i);
            return fail_open(g, g->path, msg, err, errlen);
        }
    }

    g->alignment = IQF_GGUF_DEFAULT_ALIGN;
    int64_t ai = iqf_gguf_find_kv(g, "general.alignment");
    if (ai >= 0) {
        if (g->kv[ai].type != IQF_GGUF_U32) {
            snprintf(msg, sizeof msg, "general.alignment has type %s (must be u32)", iqf_gguf_vtype_name(g->kv[ai].type));
            return fail_open(g, g->path, msg, err, errlen);
        }
        uint32_t a;
        memcpy(&a, g->kv[ai].val, 4);
        if (a == 0 || (a & (a - 1)) != 0 || a > IQF_GGUF_MAX_ALIGN) {
            snprintf(msg, sizeof msg, "general.alignment %" PRIu32 " is not a power of two in 1..%u", a, IQF_GGUF_MAX_ALIGN);
            return fail_open(g, g->path, msg, err, errlen);
        }
        g->alignment = a;
    }

    /* ggml aligns the data section only when there are tensors. */
    size_t A = g->alignment;
    size_t doff = c.pos;
    if (n_tensors > 0) {
        doff = c.pos + (A - c.pos % A) % A;
        if (doff > g->size) {
            snprintf(msg, sizeof msg, "truncated: the data section would start at offset %zu, past the end of the file (%zu bytes)", doff, g->size);
            return fail_open(g, g->path, msg, err, errlen);
        }
    }
    g->data_offset = doff;
    uint64_t expect = 0;
    for (int64_t i = 0; i < n_tensors; i++) {
        iqf_gguf_tensor *t = &g->tensors[i];
        if (t->offset != expect) {
            snprintf(msg, sizeof msg, "tensor '%s' has data offset %" PRIu64 ", expected %" PRIu64 " (layout: previous offset + padded size)",
                     t->name, t->offset, expect);
            return fail_open(g, g->path, msg, err, errlen);
        }
        uint64_t avail = g->size - doff;
        if (t->offset > avail || t->nbytes > avail - t->offset) {
            snprintf(msg, sizeof msg, "truncated: tensor '%s' data (%zu bytes at file offset %" PRIu64 ") runs past the end of the file (%zu bytes)",
                     t->name, t->nbytes, (uint64_t)doff + t->offset, g->size);
            return fail_open(g, g->path, msg, err, errlen);
        }
        t->data = g->src.read ? NULL : g->base + doff + t->offset; /* a source: iqf_gguf_tensor_load */
        uint64_t padded = t->nbytes + (A - t->nbytes % A) % A; /* nbytes <= file size: no overflow */
        expect += padded;
    }
    return g;
}

static iqf_gguf *new_handle(const char *name) {
    iqf_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    g->seed = ((uint64_t)(uintptr_t)g * 0x9e3779b97f4a7c15ull) ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
    g->path = strdup(name ? name : "?");
    if (!g->path) {
        free(g);
        return NULL;
    }
    return g;
}

iqf_gguf *iqf_gguf_open_memory(const void *data, size_t size, const char *name, char *err, size_t errlen) {
    iqf_gguf *g = new_handle(name);
    if (!g) return fail_open(NULL, name, "out of memory", err, errlen);
    if (!data && size) return fail_open(g, g->path, "NULL buffer", err, errlen);
    g->base = data;
    g->size = size;
    return parse(g, err, errlen);
}

/* Installs the merged tensor list of a split model (split.c): takes ownership of parts and
 * tensors (on failure too); false with "tensor 'X' ..." in msg if a name repeats. */
bool iqf_gguf_set_parts(iqf_gguf *g, iqf_gguf **parts, int n_parts, iqf_gguf_tensor *tensors, int64_t n,
                        char *msg, size_t msglen) {
    g->parts = parts;
    g->n_parts = n_parts;
    g->own_tensors = g->tensors;
    g->own_n_tensors = g->n_tensors;
    g->tensors = tensors;
    g->n_tensors = n;
    free(g->t_hash);
    g->t_hash = hash_alloc(n, &g->t_hmask);
    if (!g->t_hash) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t j = hash_insert(g->t_hash, g->t_hmask, tensors[i].name, i, t_name_of, g);
        if (j >= 0) {
            snprintf(msg, msglen, "tensor '%s' is in part %d and in part %d", tensors[i].name, tensors[j].part + 1,
                     tensors[i].part + 1);
            return false;
        }
    }
    return true;
}

int iqf_gguf_n_parts(const iqf_gguf *g) { return g ? (g->n_parts > 0 ? g->n_parts : 1) : 0; }
const char *iqf_gguf_part_path(const iqf_gguf *g, int i) {
    if (!g || i < 0 || i >= iqf_gguf_n_parts(g)) return NULL;
    return i == 0 ? g->path : g->parts[i]->path;
}
uint64_t iqf_gguf_part_size(const iqf_gguf *g, int i) {
    if (!g || i < 0 || i >= iqf_gguf_n_parts(g)) return 0;
    return i == 0 ? g->size : g->parts[i]->size;
}

iqf_gguf *iqf_gguf_open_part(const char *path, char *err, size_t errlen) {
    char msg[300];
    if (!path) return fail_open(NULL, "(null)", "no path given", err, errlen);
    iqf_gguf *g = new_handle(path);
    if (!g) return fail_open(NULL, path, "out of memory", err, errlen);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(msg, sizeof msg, "cannot open: %s", strerror(errno));
        return fail_open(g, path, msg, err, errlen);
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(msg, sizeof msg, "cannot stat: %s", strerror(errno));
        close(fd);
        return fail_open(g, path, msg, err, errlen);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail_open(g, path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file", err, errlen);
    }
    if (st.st_size == 0) {
        close(fd);
        return fail_open(g, path, "empty file", err, errlen);
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return fail_open(g, path, "file too large to map", err, errlen);
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(msg, sizeof msg, "cannot map: %s", strerror(e));
        return fail_open(g, path, msg, err, errlen);
    }
    g->base = m;
    g->size = (size_t)st.st_size;
    g->mapped = true;
    g = parse(g, err, errlen);
    if (g) {
        /* Everything parse read is copied out (arena, tensor infos); reading the header faulted in
         * page-cache folios that can reach far past it (large folios: up to 2 MiB per file, which
         * a split model pays per part). Unmap them until the tensor data is really read. */
        size_t span = g->data_offset + (2u << 20);
        if (span > g->size) span = g->size;
        madvise((void *)g->base, span & ~(size_t)4095, MADV_DONTNEED);
    }
    return g;
}

void iqf_gguf_close(iqf_gguf *g) {
    if (!g) return;
    for (int i = 1; i < g->n_parts; i++) iqf_gguf_close(g->parts[i]);
    free(g->parts);
    if (g->own_tensors) free(g->own_tensors);
    if (g->mapped && g->base) munmap((void *)g->base, g->size);
    if (g->hdr_size) free((void *)g->base);
    free(g->buf);
    if (g->mem) munmap(g->mem, g->mem_size);
    if (g->src.close) g->src.close(g->src.user);
    free(g->path);
    free(g->kv);
    free(g->tensors);
    free(g->arena);
    free(g->kv_hash);
    free(g->t_hash);
    free(g);
}

/* ------------------------------------------------------------------------------------------ */

const char *iqf_gguf_path(const iqf_gguf *g) { return g ? g->path : NULL; }
uint32_t iqf_gguf_version(const iqf_gguf *g) { return g ? g->version : 0; }
size_t iqf_gguf_alignment(const iqf_gguf *g) { return g ? g->alignment : 0; }
size_t iqf_gguf_data_offset(const iqf_gguf *g) { return g ? g->data_offset : 0; }
uint64_t iqf_gguf_file_size(const iqf_gguf *g) { return g ? g->size : 0; }
int64_t iqf_gguf_n_kv(const iqf_gguf *g) { return g ? g->n_kv : 0; }
int64_t iqf_gguf_n_tensors(const iqf_gguf *g) { return g ? g->n_tensors : 0; }

static const gkv *kv_at(const iqf_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

int64_t iqf_gguf_find_kv(const iqf_gguf *g, const char *key) {
    return g ? hash_find(g->kv_hash, g->kv_hmask, key, kv_name_of, g) : -1;
}
const char *iqf_gguf_kv_key(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}
int iqf_gguf_kv_type(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    return kv ? kv->type : -1;
}
const void *iqf_gguf_kv_value(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    if (!kv || (kv->type == IQF_GGUF_ARR && kv->arr_type == IQF_GGUF_STR)) return NULL;
    return kv->val;
}
size_t iqf_gguf_kv_str_len(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    return kv && kv->type == IQF_GGUF_STR ? kv->len : 0;
}
int iqf_gguf_arr_type(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    return kv && kv->type == IQF_GGUF_ARR ? kv->arr_type : -1;
}
uint64_t iqf_gguf_arr_n(const iqf_gguf *g, int64_t i) {
    const gkv *kv = kv_at(g, i);
    return kv && kv->type == IQF_GGUF_ARR ? kv->n : 0;
}
const void *iqf_gguf_arr_data(const iqf_gguf *g, int64_t i, int elem_type, uint64_t *n) {
    const gkv *kv = kv_at(g, i);
    if (n) *n = 0;
    if (!kv || kv->type != IQF_GGUF_ARR || kv->arr_type != elem_type || elem_type == IQF_GGUF_STR) return NULL;
    if (n) *n = kv->n;
    return kv->val;
}
const char *iqf_gguf_arr_str(const iqf_gguf *g, int64_t i, uint64_t j, size_t *len) {
    const gkv *kv = kv_at(g, i);
    if (!kv || kv->type != IQF_GGUF_ARR || kv->arr_type != IQF_GGUF_STR || j >= kv->n) return NULL;
    const uint64_t *off = kv->val;
    if (len) *len = (size_t)(off[j + 1] - off[j] - 1);
    return kv->strbase + off[j];
}

/* Element pointer of an array of exactly type t. */
static const void *elem(const iqf_gguf *g, int64_t i, uint64_t j, int t) {
    const gkv *kv = kv_at(g, i);
    if (!kv || kv->type != IQF_GGUF_ARR || kv->arr_type != t || j >= kv->n) return NULL;
    return (const char *)kv->val + j * iqf_gguf_vtype_size(t);
}
bool iqf_gguf_arr_f32(const iqf_gguf *g, int64_t i, uint64_t j, float *out) {
    const void *p = elem(g, i, j, IQF_GGUF_F32);
    if (p) memcpy(out, p, 4);
    return p != NULL;
}
bool iqf_gguf_arr_i32(const iqf_gguf *g, int64_t i, uint64_t j, int32_t *out) {
    const void *p = elem(g, i, j, IQF_GGUF_I32);
    if (p) memcpy(out, p, 4);
    return p != NULL;
}
bool iqf_gguf_arr_u32(const iqf_gguf *g, int64_t i, uint64_t j, uint32_t *out) {
    const void *p = elem(g, i, j, IQF_GGUF_U32);
    if (p) memcpy(out, p, 4);
    return p != NULL;
}

/* Any integer type at p -> int64 (false for u64 > INT64_MAX or non-integer types). */
static bool to_int(int t, const void *p, int64_t *out) {
    switch (t) {
    case IQF_GGUF_U8: *out = *(const uint8_t *)p; return true;
    case IQF_GGUF_I8: *out = *(const int8_t *)p; return true;
    case IQF_GGUF_U16: *out = *(const uint16_t *)p; return true;
    case IQF_GGUF_I16: *out = *(const int16_t *)p; return true;
    case IQF_GGUF_U32: *out = *(const uint32_t *)p; return true;
    case IQF_GGUF_I32: *out = *(const int32_t *)p; return true;
    case IQF_GGUF_I64: *out = *(const int64_t *)p; return true;
    case IQF_GGUF_U64: {
        uint64_t v = *(const uint64_t *)p;
        if (v > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v;
        return true;
    }
    default: return false;
    }
}
static bool to_float(int t, const void *p, double *out) {
    if (t == IQF_GGUF_F32) { *out = *(const float *)p; return true; }
    if (t == IQF_GGUF_F64) { *out = *(const double *)p; return true; }
    return false;
}

bool iqf_gguf_arr_int(const iqf_gguf *g, int64_t i, uint64_t j, int64_t *out) {
    int t = iqf_gguf_arr_type(g, i);
    const void *p = elem(g, i, j, t);
    int64_t v;
    if (!p || !to_int(t, p, &v)) return false;
    *out = v;
    return true;
}
bool iqf_gguf_arr_float(const iqf_gguf *g, int64_t i, uint64_t j, double *out) {
    int t = iqf_gguf_arr_type(g, i);
    const void *p = elem(g, i, j, t);
    double v;
    if (!p || !to_float(t, p, &v)) return false;
    *out = v;
    return true;
}

static const gkv *scalar(const iqf_gguf *g, const char *key, int t) {
    const gkv *kv = kv_at(g, iqf_gguf_find_kv(g, key));
    return kv && kv->type == t ? kv : NULL;
}
#define GETTER(NAME, CT, VT)                                                  \
    bool iqf_gguf_get_##NAME(const iqf_gguf *g, const char *key, CT *out) {  \
        const gkv *kv = scalar(g, key, VT);                                   \
        if (!kv) return false;                                                \
        memcpy(out, kv->val, sizeof(CT));                                     \
        return true;                                                          \
    }
GETTER(u8, uint8_t, IQF_GGUF_U8)
GETTER(i8, int8_t, IQF_GGUF_I8)
GETTER(u16, uint16_t, IQF_GGUF_U16)
GETTER(i16, int16_t, IQF_GGUF_I16)
GETTER(u32, uint32_t, IQF_GGUF_U32)
GETTER(i32, int32_t, IQF_GGUF_I32)
GETTER(u64, uint64_t, IQF_GGUF_U64)
GETTER(i64, int64_t, IQF_GGUF_I64)
GETTER(f32, float, IQF_GGUF_F32)
GETTER(f64, double, IQF_GGUF_F64)
#undef GETTER

bool iqf_gguf_get_bool(const iqf_gguf *g, const char *key, bool *out) {
    const gkv *kv = scalar(g, key, IQF_GGUF_BOOL);
    if (!kv) return false;
    *out = *(const uint8_t *)kv->val != 0;
    return true;
}
bool iqf_gguf_get_str(const iqf_gguf *g, const char *key, const char **out, size_t *len) {
    const gkv *kv = scalar(g, key, IQF_GGUF_STR);
    if (!kv) return false;
    *out = kv->val;
    if (len) *len = kv->len;
    return true;
}
bool iqf_gguf_get_int(const iqf_gguf *g, const char *key, int64_t *out) {
    const gkv *kv = kv_at(g, iqf_gguf_find_kv(g, key));
    int64_t v;
    if (!kv || !to_int(kv->type, kv->val, &v)) return false;
    *out = v;
    return true;
}
bool iqf_gguf_get_float(const iqf_gguf *g, const char *key, double *out) {
    const gkv *kv = kv_at(g, iqf_gguf_find_kv(g, key));
    double v;
    if (!kv || !to_float(kv->type, kv->val, &v)) return false;
    *out = v;
    return true;
}
const void *iqf_gguf_get_arr(const iqf_gguf *g, const char *key, int elem_type, uint64_t *n) {
    return iqf_gguf_arr_data(g, iqf_gguf_find_kv(g, key), elem_type, n);
}

const iqf_gguf_tensor *iqf_gguf_tensor_at(const iqf_gguf *g, int64_t i) {
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}
int64_t iqf_gguf_find_tensor(const iqf_gguf *g, const char *name) {
    return g ? hash_find(g->t_hash, g->t_hmask, name, t_name_of, g) : -1;
}
int64_t iqf_gguf_tensor_nelements(const iqf_gguf_tensor *t) {
    return t ? t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] : 0;
}

/* ---- tensors produced on demand ----------------------------------------------------------- */

iqf_gguf *iqf_gguf_open_source(const void *meta, size_t meta_size, uint64_t file_size, const char *name,
                               const iqf_gguf_source *src, char *err, size_t errlen) {
    iqf_gguf *g = new_handle(name);
    if (!g) {
        if (src && src->close) src->close(src->user);
        return fail_open(NULL, name, "out of memory", err, errlen);
    }
    if (src) g->src = *src; /* closed with g from here on */
    g->buf_tensor = -1;
    if (!src || !src->read || !meta || !meta_size || file_size < meta_size || file_size > (uint64_t)SIZE_MAX)
        return fail_open(g, g->path, "invalid source", err, errlen);
    void *copy = malloc(meta_size);
    if (!copy) return fail_open(g, g->path, "out of memory", err, errlen);
    memcpy(copy, meta, meta_size);
    g->base = copy;
    g->hdr_size = meta_size;
    g->size = (size_t)file_size;
    return parse(g, err, errlen);
}

bool iqf_gguf_is_source(const iqf_gguf *g) { return g && g->src.read; }

