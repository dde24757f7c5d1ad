/*
 * writer.c - streaming GGUF v3 writer with ggml's layout (gguf.cpp gguf_write_to_buf).
 *
 * KVs are kept encoded (type + value bytes) in memory until write_header; tensor data is streamed
 * straight to the output file, so memory stays at metadata size whatever the model size.
 * The output goes through src/util/outfile.h: a temporary file renamed at finish.
 */
#include "gguf_internal.h"
#include "util/outfile.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct wkv {
    char *key;
    uint8_t *val; /* encoded: int32 type [, int32 elem type, uint64 n], value bytes */
    size_t len;
} wkv;

typedef struct wtensor {
    char name[IQF_GGUF_MAX_NAME];
    int n_dims;
    int64_t ne[4];
    int type;
    uint64_t nbytes, offset;
} wtensor;

enum { ST_DECLARE = 0, ST_DATA = 1 };

struct iqf_gguf_writer {
    iqf_outfile of;
    char *iobuf;
    char err[512];
    iqf_status status; /* sticky */
    int state;
    wkv *kv;
    int64_t n_kv, cap_kv;
    int64_t *kv_hash;
    size_t kv_hmask;
    wtensor *t;
    int64_t n_t, cap_t;
    int64_t *t_hash;
    size_t t_hmask;
    size_t align;
    uint64_t pos;            /* bytes written so far */
    int64_t cur;             /* tensor being streamed */
    uint64_t cur_written;    /* its bytes written */
};

static iqf_status wfail(iqf_gguf_writer *w, iqf_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static iqf_status wfail(iqf_gguf_writer *w, iqf_status st, const char *fmt, ...) {
    if (w->status != IQF_OK) return w->status;
    int k = snprintf(w->err, sizeof w->err, "%s: ", w->of.path ? w->of.path : "?");
    if (k < 0 || (size_t)k >= sizeof w->err) k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err + k, sizeof w->err - (size_t)k, fmt, ap);
    va_end(ap);
    w->status = st;
    return st;
}

/* ------------------------------------------------------------------------------------------ */
/* Hash tables of indices (open addressing); rebuilt whenever they fill up or keys move. */

static uint64_t hstr(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static const char *kv_key_at(const iqf_gguf_writer *w, int64_t i) { return w->kv[i].key; }
static const char *t_name_at(const iqf_gguf_writer *w, int64_t i) { return w->t[i].name; }

static bool hash_rebuild(const iqf_gguf_writer *w, int64_t **tab, size_t *mask, int64_t n,
                         const char *(*name_of)(const iqf_gguf_writer *, int64_t)) {
    size_t cap = 16;
    while (cap < (size_t)n * 2 + 2) cap <<= 1;
    int64_t *t = malloc(cap * sizeof *t);
    if (!t) return false;
    memset(t, 0xff, cap * sizeof *t);
    for (int64_t i = 0; i < n; i++) {
        size_t h = (size_t)hstr(name_of(w, i)) & (cap - 1);
        while (t[h] >= 0) h = (h + 1) & (cap - 1);
        t[h] = i;
    }
    free(*tab);
    *tab = t;
    *mask = cap - 1;
    return true;
}

static int64_t hash_lookup(const iqf_gguf_writer *w, const int64_t *tab, size_t mask, const char *name,
                           const char *(*name_of)(const iqf_gguf_writer *, int64_t)) {
    if (!tab) return -1;
    size_t h = (size_t)hstr(name) & mask;
    while (tab[h] >= 0) {
        if (strcmp(name_of(w, tab[h]), name) == 0) return tab[h];
        h = (h + 1) & mask;
    }
    return -1;
}

/* Adds index n-1 (just appended) to the table, growing it when half full. */
static bool hash_add(const iqf_gguf_writer *w, int64_t **tab, size_t *mask, int64_t n,
                     const char *(*name_of)(const iqf_gguf_writer *, int64_t)) {
    if (!*tab || (size_t)n * 2 > *mask + 1) return hash_rebuild(w, tab, mask, n, name_of);
    size_t h = (size_t)hstr(name_of(w, n - 1)) & *mask;
    while ((*tab)[h] >= 0) h = (h + 1) & *mask;
    (*tab)[h] = n - 1;
    return true;
}

/* ------------------------------------------------------------------------------------------ */

iqf_gguf_writer *iqf_gguf_writer_open(const char *path, char *err, size_t errlen) {
    if (!path || !*path) {
        if (err && errlen) snprintf(err, errlen, "(null): no output path given");
        return NULL;
    }
    iqf_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) {
        if (err && errlen) snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (iqf_of_open(&w->of, path) != 0) {
        if (err && errlen) snprintf(err, errlen, "%s", w->of.err);
        iqf_of_abort(&w->of);
        free(w);
        return NULL;
    }
    w->iobuf = malloc(1u << 20);
    if (w->iobuf) setvbuf(w->of.f, w->iobuf, _IOFBF, 1u << 20);
    w->align = IQF_GGUF_DEFAULT_ALIGN;
    return w;
}

iqf_gguf_writer *iqf_gguf_writer_open_sizing(void) {
    iqf_gguf_writer *w = calloc(1, sizeof *w);
    if (w) w->align = IQF_GGUF_DEFAULT_ALIGN;
    return w;
}

static bool is_sizing(const iqf_gguf_writer *w) { return !w->of.path; }

const char *iqf_gguf_writer_error(const iqf_gguf_writer *w) { return w ? w->err : ""; }

iqf_status iqf_gguf_writer_set_input(iqf_gguf_writer *w, const char *input_path) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    if (input_path && !is_sizing(w) && iqf_same_file(input_path, w->of.path))
        return wfail(w, IQF_E_INVALID_ARG, "is the same file as the input %s", input_path);
    return IQF_OK;
}

int64_t iqf_gguf_writer_n_kv(const iqf_gguf_writer *w) { return w ? w->n_kv : 0; }

static void free_kv(wkv *kv) {
    free(kv->key);
    free(kv->val);
}

bool iqf_gguf_writer_remove(iqf_gguf_writer *w, const char *key) {
    if (!w || !key || w->status || w->state != ST_DECLARE) return false;
    int64_t i = hash_lookup(w, w->kv_hash, w->kv_hmask, key, kv_key_at);
    if (i < 0) return false;
    free_kv(&w->kv[i]);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!hash_rebuild(w, &w->kv_hash, &w->kv_hmask, w->n_kv, kv_key_at))
        wfail(w, IQF_E_NOMEM, "out of memory");
    return true;
}

int64_t iqf_gguf_writer_remove_prefix(iqf_gguf_writer *w, const char *prefix) {
    if (!w || !prefix || w->status || w->state != ST_DECLARE) return 0;
    size_t pl = strlen(prefix);
    int64_t o = 0, removed = 0;
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strncmp(w->kv[i].key, prefix, pl) == 0) {
            free_kv(&w->kv[i]);
            removed++;
        } else {
            w->kv[o++] = w->kv[i];
        }
    }
    w->n_kv = o;
    if (removed && !hash_rebuild(w, &w->kv_hash, &w->kv_hmask, w->n_kv, kv_key_at))
        wfail(w, IQF_E_NOMEM, "out of memory");
    return removed;
}

/* Appends key with an already-encoded value (takes ownership of val), replacing an old one. */
static iqf_status put_kv(iqf_gguf_writer *w, const char *key, uint8_t *val, size_t len) {
    if (w->status) { free(val); return w->status; }
    if (w->state != ST_DECLARE) {
        free(val);
        return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s' set after the header was written", key);
    }
    iqf_gguf_writer_remove(w, key);
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *n = realloc(w->kv, (size_t)cap * sizeof *n);
        if (!n) { free(val); return wfail(w, IQF_E_NOMEM, "out of memory"); }
        w->kv = n;
        w->cap_kv = cap;
    }
    char *k = strdup(key);
    if (!k) { free(val); return wfail(w, IQF_E_NOMEM, "out of memory"); }
    w->kv[w->n_kv++] = (wkv){ k, val, len };
    if (!hash_add(w, &w->kv_hash, &w->kv_hmask, w->n_kv, kv_key_at)) return wfail(w, IQF_E_NOMEM, "out of memory");
    return IQF_OK;
}

static iqf_status check_key(iqf_gguf_writer *w, const char *key) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    if (!key || !*key) return wfail(w, IQF_E_INVALID_ARG, "empty KV key");
    if (strlen(key) > IQF_GGUF_MAX_KEY) return wfail(w, IQF_E_INVALID_ARG, "KV key longer than %d bytes", IQF_GGUF_MAX_KEY);
    return IQF_OK;
}

static iqf_status set_scalar(iqf_gguf_writer *w, const char *key, int type, const void *v) {
    iqf_status st = check_key(w, key);
    if (st) return st;
    size_t es = iqf_gguf_vtype_size(type);
    uint8_t *b = malloc(4 + es);
    if (!b) return wfail(w, IQF_E_NOMEM, "out of memory");
    int32_t t = type;
    memcpy(b, &t, 4);
    memcpy(b + 4, v, es);
    if (type == IQF_GGUF_BOOL) b[4] = b[4] != 0; /* ggml stores bools as 0/1 */
    return put_kv(w, key, b, 4 + es);
}

#define SETTER(NAME, CT, VT)                                                           \
    iqf_status iqf_gguf_writer_set_##NAME(iqf_gguf_writer *w, const char *key, CT v) { \
        return set_scalar(w, key, VT, &v);                                             \
    }
SETTER(u8, uint8_t, IQF_GGUF_U8)
SETTER(i8, int8_t, IQF_GGUF_I8)
SETTER(u16, uint16_t, IQF_GGUF_U16)
SETTER(i16, int16_t, IQF_GGUF_I16)
SETTER(u32, uint32_t, IQF_GGUF_U32)
SETTER(i32, int32_t, IQF_GGUF_I32)
SETTER(u64, uint64_t, IQF_GGUF_U64)
SETTER(i64, int64_t, IQF_GGUF_I64)
SETTER(f32, float, IQF_GGUF_F32)
SETTER(f64, double, IQF_GGUF_F64)
#undef SETTER

iqf_status iqf_gguf_writer_set_bool(iqf_gguf_writer *w, const char *key, bool v) {
    uint8_t b = v ? 1 : 0;
    return set_scalar(w, key, IQF_GGUF_BOOL, &b);
}

iqf_status iqf_gguf_writer_set_strn(iqf_gguf_writer *w, const char *key, const char *v, size_t len) {
    iqf_status st = check_key(w, key);
    if (st) return st;
    if (!v && len) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': NULL string", key);
    if (len > IQF_GGUF_MAX_STRING) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': string longer than 1 GiB", key);
    uint8_t *b = malloc(12 + len);
    if (!b) return wfail(w, IQF_E_NOMEM, "out of memory");
    int32_t t = IQF_GGUF_STR;
    uint64_t n = len;
    memcpy(b, &t, 4);
    memcpy(b + 4, &n, 8);
    if (len) memcpy(b + 12, v, len);
    return put_kv(w, key, b, 12 + len);
}

iqf_status iqf_gguf_writer_set_str(iqf_gguf_writer *w, const char *key, const char *v) {
    return iqf_gguf_writer_set_strn(w, key, v ? v : "", v ? strlen(v) : 0);
}

iqf_status iqf_gguf_writer_set_arr(iqf_gguf_writer *w, const char *key, int elem_type, const void *data, uint64_t n) {
    iqf_status st = check_key(w, key);
    if (st) return st;
    size_t es = iqf_gguf_vtype_size(elem_type);
    if (es == 0) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': element type %d is not a number or bool type", key, elem_type);
    if (n > IQF_GGUF_MAX_ARRAY) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': array of more than 2^30 elements", key);
    if (!data && n) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': NULL array", key);
    size_t nb = (size_t)n * es;
    uint8_t *b = malloc(16 + nb);
    if (!b) return wfail(w, IQF_E_NOMEM, "out of memory");
    int32_t t = IQF_GGUF_ARR, et = elem_type;
    memcpy(b, &t, 4);
    memcpy(b + 4, &et, 4);
    memcpy(b + 8, &n, 8);
    if (nb) memcpy(b + 16, data, nb);
    if (elem_type == IQF_GGUF_BOOL)
        for (size_t j = 0; j < nb; j++) b[16 + j] = b[16 + j] != 0;
    return put_kv(w, key, b, 16 + nb);
}

/* String array from a callback (shared by set_arr_str and copy_kv). */
typedef const char *(*str_at_fn)(const void *ctx, uint64_t j, size_t *len);

static iqf_status set_arr_str_cb(iqf_gguf_writer *w, const char *key, str_at_fn at, const void *ctx, uint64_t n) {
    iqf_status st = check_key(w, key);
    if (st) return st;
    if (n > IQF_GGUF_MAX_ARRAY) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': array of more than 2^30 elements", key);
    size_t total = 16;
    for (uint64_t j = 0; j < n; j++) {
        size_t len = 0;
        const char *s = at(ctx, j, &len);
        if (!s && len) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': NULL string at %" PRIu64, key, j);
        if (len > IQF_GGUF_MAX_STRING) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': string longer than 1 GiB", key);
        total += 8 + len;
    }
    uint8_t *b = malloc(total);
    if (!b) return wfail(w, IQF_E_NOMEM, "out of memory");
    int32_t t = IQF_GGUF_ARR, et = IQF_GGUF_STR;
    memcpy(b, &t, 4);
    memcpy(b + 4, &et, 4);
    memcpy(b + 8, &n, 8);
    size_t o = 16;
    for (uint64_t j = 0; j < n; j++) {
        size_t len = 0;
        const char *s = at(ctx, j, &len);
        uint64_t l = len;
        memcpy(b + o, &l, 8);
        if (len) memcpy(b + o + 8, s, len);
        o += 8 + len;
    }
    return put_kv(w, key, b, total);
}

typedef struct { const char *const *v; const size_t *lens; } strvec;
static const char *strvec_at(const void *ctx, uint64_t j, size_t *len) {
    const strvec *sv = ctx;
    const char *s = sv->v[j];
    *len = sv->lens ? sv->lens[j] : (s ? strlen(s) : 0);
    return s;
}

iqf_status iqf_gguf_writer_set_arr_str(iqf_gguf_writer *w, const char *key, const char *const *v,
                                       const size_t *lens, uint64_t n) {
    if (w && !w->status && !v && n) return wfail(w, IQF_E_INVALID_ARG, "KV '%.100s': NULL array", key ? key : "");
    strvec sv = { v, lens };
    return set_arr_str_cb(w, key, strvec_at, &sv, n);
}

typedef struct { const iqf_gguf *g; int64_t i; } rdarr;
static const char *rdarr_at(const void *ctx, uint64_t j, size_t *len) {
    const rdarr *r = ctx;
    return iqf_gguf_arr_str(r->g, r->i, j, len);
}

iqf_status iqf_gguf_writer_copy_kv(iqf_gguf_writer *w, const iqf_gguf *g, int64_t i) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    const char *key = iqf_gguf_kv_key(g, i);
    if (!key) return wfail(w, IQF_E_INVALID_ARG, "copy_kv: no KV %" PRId64 " in the source", i);
    int type = iqf_gguf_kv_type(g, i);
    const void *v = iqf_gguf_kv_value(g, i);
    if (type == IQF_GGUF_STR) return iqf_gguf_writer_set_strn(w, key, v, iqf_gguf_kv_str_len(g, i));
    if (type != IQF_GGUF_ARR) return set_scalar(w, key, type, v);
    int et = iqf_gguf_arr_type(g, i);
    uint64_t n = iqf_gguf_arr_n(g, i);
    if (et == IQF_GGUF_STR) {
        rdarr r = { g, i };
        return set_arr_str_cb(w, key, rdarr_at, &r, n);
    }
    return iqf_gguf_writer_set_arr(w, key, et, v, n);
}

/* ------------------------------------------------------------------------------------------ */

iqf_status iqf_gguf_writer_add_tensor(iqf_gguf_writer *w, const char *name, int n_dims, const int64_t *ne, int type) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    if (w->state != ST_DECLARE) return wfail(w, IQF_E_INVALID_ARG, "tensor '%.64s' added after the header was written", name ? name : "");
    if (!name || !*name) return wfail(w, IQF_E_INVALID_ARG, "empty tensor name");
    if (strlen(name) >= IQF_GGUF_MAX_NAME)
        return wfail(w, IQF_E_INVALID_ARG, "tensor name '%.80s...' is not shorter than %d bytes", name, IQF_GGUF_MAX_NAME);
    if (!ne) return wfail(w, IQF_E_INVALID_ARG, "tensor '%s': NULL shape", name);
    if (!iqf_type_get(type)) return wfail(w, IQF_E_UNKNOWN_TYPE, "tensor '%s': unknown type id %d", name, type);
    int64_t nelem;
    uint64_t nbytes;
    char msg[300];
    if (!iqf_gguf_tensor_size(name, n_dims, ne, type, &nelem, &nbytes, msg, sizeof msg))
        return wfail(w, IQF_E_SHAPE, "%s", msg);
    if (hash_lookup(w, w->t_hash, w->t_hmask, name, t_name_at) >= 0)
        return wfail(w, IQF_E_INVALID_ARG, "duplicate tensor name '%s'", name);
    if (w->n_t == w->cap_t) {
        int64_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *n = realloc(w->t, (size_t)cap * sizeof *n);
        if (!n) return wfail(w, IQF_E_NOMEM, "out of memory");
        w->t = n;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    for (int d = 0; d < 4; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    /* As ggml_n_dims: trailing dimensions of 1 are not written. */
    t->n_dims = 1;
    for (int d = 1; d < 4; d++)
        if (t->ne[d] != 1) t->n_dims = d + 1;
    t->type = type;
    t->nbytes = nbytes;
    w->n_t++;
    if (!hash_add(w, &w->t_hash, &w->t_hmask, w->n_t, t_name_at)) return wfail(w, IQF_E_NOMEM, "out of memory");
    return IQF_OK;
}

static iqf_status out(iqf_gguf_writer *w, const void *p, size_t n) {
    if (w->status) return w->status;
    if (iqf_of_write(&w->of, p, n) != 0) {
        snprintf(w->err, sizeof w->err, "%s", w->of.err); /* already "PATH: reason" */
        return w->status = IQF_E_IO;
    }
    w->pos += n;
    return IQF_OK;
}

static iqf_status pad(iqf_gguf_writer *w) {
    static const uint8_t zeros[256];
    size_t k = (size_t)((w->align - w->pos % w->align) % w->align);
    while (k) {
        size_t c = k < sizeof zeros ? k : sizeof zeros;
        iqf_status st = out(w, zeros, c);
        if (st) return st;
        k -= c;
    }
    return IQF_OK;
}

static iqf_status out_str(iqf_gguf_writer *w, const char *s) {
    uint64_t n = strlen(s);
    out(w, &n, 8);
    return out(w, s, (size_t)n);
}

/* The alignment general.alignment asks for (the default without it); 0: the key is invalid
 * (message in msg). */
static size_t declared_align(const iqf_gguf_writer *w, char *msg, size_t msglen) {
    int64_t ai = hash_lookup(w, w->kv_hash, w->kv_hmask, "general.alignment", kv_key_at);
    if (ai < 0) return IQF_GGUF_DEFAULT_ALIGN;
    const wkv *kv = &w->kv[ai];
    int32_t t;
    memcpy(&t, kv->val, 4);
    if (t != IQF_GGUF_U32) {
        snprintf(msg, msglen, "general.alignment must be a u32");
        return 0;
    }
    uint32_t a;
    memcpy(&a, kv->val + 4, 4);
    if (a == 0 || (a & (a - 1)) || a > IQF_GGUF_MAX_ALIGN) {
        snprintf(msg, msglen, "general.alignment %" PRIu32 " is not a power of two in 1..%u", a, IQF_GGUF_MAX_ALIGN);
        return 0;
    }
    return a;
}

uint64_t iqf_gguf_writer_size(const iqf_gguf_writer *w, uint64_t *meta, uint64_t *align) {
    char msg[128];
    if (meta) *meta = 0;
    if (align) *align = 0;
    if (!w || w->status) return 0;
    const uint64_t a = declared_align(w, msg, sizeof msg);
    if (!a) return 0;
    uint64_t s = 4 + 4 + 8 + 8; /* magic, version, tensor count, KV count */
    for (int64_t i = 0; i < w->n_kv; i++) s += 8 + strlen(w->kv[i].key) + w->kv[i].len;
    for (int64_t i = 0; i < w->n_t; i++) s += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].n_dims + 4 + 8;
    s = (s + a - 1) / a * a;
    if (meta) *meta = s;
    if (align) *align = a;
    for (int64_t i = 0; i < w->n_t; i++) s += (w->t[i].nbytes + a - 1) / a * a;
    return s;
}

iqf_status iqf_gguf_writer_write_header(iqf_gguf_writer *w) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    if (is_sizing(w)) return wfail(w, IQF_E_INVALID_ARG, "a sizing writer writes no header");
    if (w->state != ST_DECLARE) return wfail(w, IQF_E_INVALID_ARG, "header written twice");
    char amsg[128];
    w->align = declared_align(w, amsg, sizeof amsg);
    if (!w->align) return wfail(w, IQF_E_INVALID_ARG, "%s", amsg);
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        uint64_t padded = w->t[i].nbytes + (w->align - w->t[i].nbytes % w->align) % w->align;
        if (__builtin_add_overflow(off, padded, &off)) return wfail(w, IQF_E_SHAPE, "total tensor size overflows");
    }
    uint32_t version = 3;
    out(w, "GGUF", 4);
    out(w, &version, 4);
    out(w, &w->n_t, 8);
    out(w, &w->n_kv, 8);
    for (int64_t i = 0; i < w->n_kv; i++) {
        out_str(w, w->kv[i].key);
        out(w, w->kv[i].val, w->kv[i].len);
    }
    for (int64_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        uint32_t nd = (uint32_t)t->n_dims;
        int32_t ty = t->type;
        out_str(w, t->name);
        out(w, &nd, 4);
        out(w, t->ne, 8 * (size_t)nd);
        out(w, &ty, 4);
        out(w, &t->offset, 8);
    }
    /* ggml pads the header to the alignment (gguf_write_to_buf pads even with no tensors). */
    pad(w);
    w->state = ST_DATA;
    w->cur = 0;
    w->cur_written = 0;
    return w->status;
}

iqf_status iqf_gguf_writer_write_data(iqf_gguf_writer *w, const void *data, size_t n) {
    if (!w) return IQF_E_INVALID_ARG;
    if (w->status) return w->status;
    if (w->state != ST_DATA) return wfail(w, IQF_E_INVALID_ARG, "tensor data written before the header");
    if (n && !data) return wfail(w, IQF_E_INVALID_ARG, "NULL data");
    const uint8_t *p = data;
    while (n > 0) {
        if (w->cur >= w->n_t)
            return wfail(w, IQF_E_INVALID_ARG, "%zu bytes of tensor data beyond the declared tensors", n);
        const wtensor *t = &w->t[w->cur];
        uint64_t need = t->nbytes - w->cur_written;
        size_t k = n < need ? n : (size_t)need;
        iqf_status st = out(w, p, k);
        if (st) return st;
        p += k;
        n -= k;
        w->cur_written += k;
        if (w->cur_written == t->nbytes) {
            if ((st = pad(w))) return st;
            w->cur++;
            w->cur_written = 0;
        }
    }
    return IQF_OK;
}

uint64_t iqf_gguf_writer_data_remaining(const iqf_gguf_writer *w) {
    if (!w) return 0;
    uint64_t r = 0;
    int64_t from = w->state == ST_DATA ? w->cur : 0;
    for (int64_t i = from; i < w->n_t; i++) r += w->t[i].nbytes;
    if (w->state == ST_DATA && from < w->n_t) r -= w->cur_written;
    return r;
}

static void free_writer(iqf_gguf_writer *w) {
    for (int64_t i = 0; i < w->n_kv; i++) free_kv(&w->kv[i]);
    free(w->kv);
    free(w->kv_hash);
    free(w->t);
    free(w->t_hash);
    free(w->iobuf);
    free(w);
}

iqf_status iqf_gguf_writer_finish(iqf_gguf_writer *w, char *err, size_t errlen) {
    if (!w) {
        if (err && errlen) snprintf(err, errlen, "(null): no writer");
        return IQF_E_INVALID_ARG;
    }
    if (!w->status && w->state != ST_DATA) wfail(w, IQF_E_INVALID_ARG, "finished before the header was written");
    if (!w->status && w->cur < w->n_t)
        wfail(w, IQF_E_INVALID_ARG, "incomplete: %" PRIu64 " bytes of tensor data missing (tensor '%s' and after)",
              iqf_gguf_writer_data_remaining(w), w->t[w->cur].name);
    iqf_status st = w->status;
    if (st) {
        iqf_of_abort(&w->of);
    } else if (iqf_of_commit(&w->of) != 0) {
        st = IQF_E_IO;
        snprintf(w->err, sizeof w->err, "%s", w->of.err);
    }
    if (st && err && errlen) snprintf(err, errlen, "%s", w->err);
    free_writer(w);
    return st;
}

void iqf_gguf_writer_abort(iqf_gguf_writer *w) {
    if (!w) return;
    iqf_of_abort(&w->of);
    free_writer(w);
}
