/*
 * safetensors.c - see safetensors.h. Every size and offset is checked before it is used.
 */
#include "safetensors.h"

#include "json.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "iqforge.h"

typedef struct st_part {
    char *path;
    const uint8_t *base; /* whole file */
    size_t size;
    bool mapped;
    size_t data_off;     /* 8 + N */
} st_part;

struct iqf_st {
    st_part *parts;
    int n_parts;
    iqf_st_tensor *t;
    int64_t n, cap;
};

size_t iqf_st_dtype_size(iqf_st_dtype d) { return d == IQF_ST_F32 ? 4 : 2; }

static char *xstrndup(const char *s, size_t n) {
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = 0;
    }
    return p;
}

void iqf_st_close(iqf_st *st) {
    if (!st) return;
    for (int64_t i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    for (int i = 0; i < st->n_parts; i++) {
        if (st->parts[i].mapped && st->parts[i].base) munmap((void *)st->parts[i].base, st->parts[i].size);
        free(st->parts[i].path);
    }
    free(st->parts);
    free(st);
}

static int cmp_off(const void *a, const void *b) {
    const iqf_st_tensor *x = *(const iqf_st_tensor *const *)a, *y = *(const iqf_st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return (x->nbytes > y->nbytes) - (x->nbytes < y->nbytes);
}
static int cmp_name(const void *a, const void *b) {
    return strcmp(((const iqf_st_tensor *)a)->name, ((const iqf_st_tensor *)b)->name);
}

/* One tensor entry (name ks of klen bytes, object v) of part p, whose data section is dsize
 * bytes: checked and appended to st. */
static int parse_entry(iqf_st *st, int p, const char *ks, size_t klen, yyjson_val *v, size_t dsize, char *err,
                       size_t errlen) {
    const st_part *P = &st->parts[p];
    const char *nm = P->path;
    if (klen == 0 || memchr(ks, 0, klen)) {
        snprintf(err, errlen, "%s: empty tensor name or one with a NUL byte", nm);
        return -1;
    }
    if (!yyjson_is_obj(v)) {
        snprintf(err, errlen, "%s: tensor %.*s: entry is not an object", nm, (int)(klen > 200 ? 200 : klen), ks);
        return -1;
    }
    iqf_st_tensor t;
    memset(&t, 0, sizeof t);
    t.part = p;
    const char *tn = ks;
    int tl = (int)(klen > 200 ? 200 : klen);
    const char *ds = iqf_json_str(iqf_json_get(v, "dtype"), NULL);
    if (!ds) {
        snprintf(err, errlen, "%s: tensor %.*s: no dtype string", nm, tl, tn);
        return -1;
    }
    if (!strcmp(ds, "F32")) t.dtype = IQF_ST_F32;
    else if (!strcmp(ds, "F16")) t.dtype = IQF_ST_F16;
    else if (!strcmp(ds, "BF16")) t.dtype = IQF_ST_BF16;
    else {
        snprintf(err, errlen, "%s: tensor %.*s: dtype \"%.40s\" is not supported (F32, F16, BF16)", nm, tl, tn, ds);
        return -1;
    }
    yyjson_val *sh = iqf_json_get(v, "shape");
    if (!yyjson_is_arr(sh) || yyjson_arr_size(sh) > IQF_ST_MAX_DIMS) {
        snprintf(err, errlen, "%s: tensor %.*s: shape is not an array of at most %d dimensions", nm, tl, tn,
                 IQF_ST_MAX_DIMS);
        return -1;
    }
    t.n_dims = (int)yyjson_arr_size(sh);
    uint64_t ne = 1;
    bool ovf = false;
    for (int d = 0; d < t.n_dims; d++) {
        int64_t x;
        if (!iqf_json_int(yyjson_arr_get(sh, (size_t)d), &x) || x < 0) {
            snprintf(err, errlen, "%s: tensor %.*s: shape[%d] is not a non-negative integer", nm, tl, tn, d);
            return -1;
        }
        t.shape[d] = x;
        if (x && ne > UINT64_MAX / (uint64_t)x) ovf = true;
        else ne *= (uint64_t)x;
    }
    size_t es = iqf_st_dtype_size(t.dtype);
    if (ovf || ne > UINT64_MAX / es) {
        snprintf(err, errlen, "%s: tensor %.*s: shape overflows", nm, tl, tn);
        return -1;
    }
    t.nelem = ne;
    t.nbytes = ne * es;
    yyjson_val *of = iqf_json_get(v, "data_offsets");
    int64_t a, b;
    if (!yyjson_is_arr(of) || yyjson_arr_size(of) != 2 || !iqf_json_int(yyjson_arr_get(of, 0), &a) ||
        !iqf_json_int(yyjson_arr_get(of, 1), &b) || a < 0 || b < a) {
        snprintf(err, errlen, "%s: tensor %.*s: data_offsets is not [begin, end] with 0 <= begin <= end", nm, tl, tn);
        return -1;
    }
    if ((uint64_t)b > dsize) {
        snprintf(err, errlen, "%s: tensor %.*s: data_offsets [%lld, %lld] outside the %zu-byte data section", nm, tl,
                 tn, (long long)a, (long long)b, dsize);
        return -1;
    }
    if ((uint64_t)(b - a) != t.nbytes) {
        snprintf(err, errlen, "%s: tensor %.*s: shape needs %llu bytes but data_offsets span %lld", nm, tl, tn,
                 (unsigned long long)t.nbytes, (long long)(b - a));
        return -1;
    }
    t.data = P->base + P->data_off + (size_t)a;
    if (st->n == st->cap) {
        int64_t nc = st->cap ? st->cap * 2 : 64;
        iqf_st_tensor *nt = realloc(st->t, (size_t)nc * sizeof *nt);
        if (!nt) {
            snprintf(err, errlen, "%s: out of memory", nm);
            return -1;
        }
        st->t = nt;
        st->cap = nc;
    }
    t.name = xstrndup(ks, klen);
    if (!t.name) {
        snprintf(err, errlen, "%s: out of memory", nm);
        return -1;
    }
    st->t[st->n++] = t;
    return 0;
}

/* The tensors st->t[first..] of one part (file nm): no two data ranges overlap, then sorted by
 * name with no name twice. */
static int check_part_tensors(iqf_st *st, int64_t first, const char *nm, char *err, size_t errlen) {
    int64_t cnt = st->n - first;
    iqf_st_tensor **byoff = malloc((size_t)(cnt ? cnt : 1) * sizeof *byoff);
    if (!byoff) {
        snprintf(err, errlen, "%s: out of memory", nm);
        return -1;
    }
    for (int64_t i = 0; i < cnt; i++) byoff[i] = &st->t[first + i];
    qsort(byoff, (size_t)cnt, sizeof *byoff, cmp_off);
    const uint8_t *end = NULL;
    const iqf_st_tensor *prev = NULL;
    for (int64_t i = 0; i < cnt; i++) {
        if (byoff[i]->nbytes == 0) continue;
        if (end && byoff[i]->data < end) {
            snprintf(err, errlen, "%s: tensors %.200s and %.200s have overlapping data ranges", nm, prev->name,
                     byoff[i]->name);
            free(byoff);
            return -1;
        }
        end = byoff[i]->data + byoff[i]->nbytes;
        prev = byoff[i];
    }
    free(byoff);
    if (cnt > 1) qsort(st->t + first, (size_t)cnt, sizeof *st->t, cmp_name); /* st->t is NULL when empty */
    for (int64_t i = first + 1; i < st->n; i++)
        if (!strcmp(st->t[i].name, st->t[i - 1].name)) {
            snprintf(err, errlen, "%s: tensor %.200s appears twice in the header", nm, st->t[i].name);
            return -1;
        }
    return 0;
}

/* Parse part p's header, appending its tensors (sorted by name) to st. */
static int parse_part(iqf_st *st, int p, char *err, size_t errlen) {
    st_part *P = &st->parts[p];
    const char *nm = P->path;
    if (P->size < 8) {
        snprintf(err, errlen, "%s: %zu bytes, too short for a safetensors header length", nm, P->size);
        return -1;
    }
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | P->base[i];
    if (hl > P->size - 8) {
        snprintf(err, errlen, "%s: header length %llu goes beyond the end of the file (%zu bytes)", nm,
                 (unsigned long long)hl, P->size);
        return -1;
    }
    if (hl > IQF_ST_MAX_HEADER) {
        snprintf(err, errlen, "%s: header length %llu exceeds the %llu-byte limit", nm, (unsigned long long)hl,
                 (unsigned long long)IQF_ST_MAX_HEADER);
        return -1;
    }
    if (hl < 2) {
        snprintf(err, errlen, "%s: header length %llu is too short for a JSON object", nm, (unsigned long long)hl);
        return -1;
    }
    P->data_off = 8 + (size_t)hl;
    size_t dsize = P->size - P->data_off;
    yyjson_doc *doc = iqf_json_parse((const char *)P->base + 8, (size_t)hl, nm, err, errlen);
    if (!doc) return -1;
    yyjson_val *root = yyjson_doc_get_root(doc);
    int rc = -1;
    int64_t first = st->n;
    if (!yyjson_is_obj(root)) {
        snprintf(err, errlen, "%s: header is not a JSON object", nm);
        goto out;
    }
    size_t idx, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(root, idx, max, k, v) {
        size_t klen = yyjson_get_len(k);
        const char *ks = yyjson_get_str(k);
        if (klen == 12 && memcmp(ks, "__metadata__", 12) == 0) {
            if (!yyjson_is_obj(v)) {
                snprintf(err, errlen, "%s: __metadata__ is not an object", nm);
                goto out;
            }
            continue;
        }
        if (parse_entry(st, p, ks, klen, v, dsize, err, errlen)) goto out;
    }
    rc = check_part_tensors(st, first, nm, err, errlen);
out:
    yyjson_doc_free(doc);
    return rc;
}

static iqf_st *st_new(int n_parts) {
    iqf_st *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->parts = calloc((size_t)(n_parts ? n_parts : 1), sizeof *st->parts);
    if (!st->parts) {
        free(st);
        return NULL;
    }
    st->n_parts = n_parts;
    return st;
}

static int map_part(st_part *P, const char *path, char *err, size_t errlen) {
    P->path = strdup(path);
    if (!P->path) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    P->size = (size_t)sb.st_size;
    if (P->size == 0) {
        close(fd);
        snprintf(err, errlen, "%s: empty file", path);
        return -1;
    }
    void *m = mmap(NULL, P->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap: %s", path, strerror(errno));
        return -1;
    }
    P->base = m;
    P->mapped = true;
    return 0;
}

iqf_st *iqf_st_open_memory(const void *buf, size_t size, const char *name, char *err, size_t errlen) {
    iqf_st *st = st_new(1);
    if (!st) {
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    st->parts[0].path = strdup(name);
    st->parts[0].base = buf;
    st->parts[0].size = size;
    if (!st->parts[0].path || parse_part(st, 0, err, errlen) != 0) {
        if (!st->parts[0].path) snprintf(err, errlen, "%s: out of memory", name);
        iqf_st_close(st);
        return NULL;
    }
    return st;
}

iqf_st *iqf_st_open_file(const char *path, char *err, size_t errlen) {
    iqf_st *st = st_new(1);
    if (!st) {
        snprintf(err, errlen, "%s: out of memory", path);
        return NULL;
    }
    if (map_part(&st->parts[0], path, err, errlen) != 0 || parse_part(st, 0, err, errlen) != 0) {
        iqf_st_close(st);
        return NULL;
    }
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int64_t find_sorted(const iqf_st_tensor *t, int64_t lo, int64_t hi, const char *name) {
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t[mid].name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

iqf_st *iqf_st_open_dir(const char *dir, char *err, size_t errlen) {
    char path[4096];
    char **names = NULL;
    int n_names = 0;
    iqf_st *st = NULL;
    yyjson_doc *idx = NULL;
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        idx = iqf_json_read_file(path, err, errlen);
        if (!idx) return NULL;
        yyjson_val *wm = iqf_json_get(yyjson_doc_get_root(idx), "weight_map");
        if (!yyjson_is_obj(wm)) {
            snprintf(err, errlen, "%s: no weight_map object", path);
            goto fail;
        }
        size_t i, max;
        yyjson_val *k, *v;
        names = calloc(yyjson_obj_size(wm) + 1, sizeof *names);
        if (!names) goto oom;
        yyjson_obj_foreach(wm, i, max, k, v) {
            size_t l;
            const char *s = iqf_json_str(v, &l);
            if (!s || l == 0 || memchr(s, '/', l) || memchr(s, 0, l) || !strcmp(s, "..") || !strcmp(s, ".")) {
                snprintf(err, errlen, "%s: weight_map entry %.200s is not a plain file name", path, yyjson_get_str(k));
                goto fail;
            }
            bool dup = false;
            for (int j = 0; j < n_names && !dup; j++) dup = !strcmp(names[j], s);
            if (!dup && n_names < IQF_ST_MAX_PARTS) {
                if (!(names[n_names] = strdup(s))) goto oom;
                n_names++;
            } else if (!dup) {
                snprintf(err, errlen, "%s: more than %d shards", path, IQF_ST_MAX_PARTS);
                goto fail;
            }
        }
    } else {
        DIR *d = opendir(dir);
        if (!d) {
            snprintf(err, errlen, "%s: %s", dir, strerror(errno));
            return NULL;
        }
        struct dirent *e;
        int cap = 0;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name);
            if (l < 5 + 12 || strncmp(e->d_name, "model", 5) || strcmp(e->d_name + l - 12, ".safetensors")) continue;
            if (n_names == cap) {
                cap = cap ? cap * 2 : 8;
                if (cap > IQF_ST_MAX_PARTS) {
                    closedir(d);
                    snprintf(err, errlen, "%s: more than %d safetensors files", dir, IQF_ST_MAX_PARTS);
                    goto fail;
                }
                char **nn = realloc(names, (size_t)cap * sizeof *nn);
                if (!nn) {
                    closedir(d);
                    goto oom;
                }
                names = nn;
            }
            if (!(names[n_names] = strdup(e->d_name))) {
                closedir(d);
                goto oom;
            }
            n_names++;
        }
        closedir(d);
        if (n_names == 0) {
            snprintf(err, errlen, "%s: no model*.safetensors file and no model.safetensors.index.json", dir);
            goto fail;
        }
    }
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    st = st_new(n_names);
    if (!st) goto oom;
    int64_t *starts = calloc((size_t)n_names + 1, sizeof *starts);
    if (!starts) goto oom;
    for (int p = 0; p < n_names; p++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[p]);
        starts[p] = st->n;
        if (map_part(&st->parts[p], path, err, errlen) != 0 || parse_part(st, p, err, errlen) != 0) {
            free(starts);
            goto fail;
        }
    }
    starts[n_names] = st->n;
    /* every name once over all parts */
    for (int p = 0; p < n_names; p++)
        for (int64_t i = starts[p]; i < starts[p + 1]; i++)
            for (int q = 0; q < p; q++)
                if (find_sorted(st->t, starts[q], starts[q + 1], st->t[i].name) >= 0) {
                    snprintf(err, errlen, "%s: tensor %.200s is also in %s", st->parts[p].path, st->t[i].name,
                             st->parts[q].path);
                    free(starts);
                    goto fail;
                }
    if (idx) {
        yyjson_val *wm = iqf_json_get(yyjson_doc_get_root(idx), "weight_map");
        size_t i, max;
        yyjson_val *k, *v;
        int64_t n_map = 0;
        yyjson_obj_foreach(wm, i, max, k, v) {
            const char *s = yyjson_get_str(v);
            int p = 0;
            while (p < n_names && strcmp(names[p], s)) p++;
            n_map++;
            if (p == n_names || find_sorted(st->t, starts[p], starts[p + 1], yyjson_get_str(k)) < 0) {
                snprintf(err, errlen, "%s/%s: tensor %.200s of the index is missing", dir, s, yyjson_get_str(k));
                free(starts);
                goto fail;
            }
        }
        if (n_map != st->n) {
            snprintf(err, errlen, "%s/model.safetensors.index.json: weight_map names %lld tensors, the shards hold %lld",
                     dir, (long long)n_map, (long long)st->n);
            free(starts);
            goto fail;
        }
    }
    free(starts);
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    yyjson_doc_free(idx);
    return st;
oom:
    snprintf(err, errlen, "%s: out of memory", dir);
fail:
    if (names)
        for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    yyjson_doc_free(idx);
    iqf_st_close(st);
    return NULL;
}

int64_t iqf_st_n_tensors(const iqf_st *st) { return st ? st->n : 0; }
const iqf_st_tensor *iqf_st_tensor_at(const iqf_st *st, int64_t i) {
    return (st && i >= 0 && i < st->n) ? &st->t[i] : NULL;
}
const iqf_st_tensor *iqf_st_find(const iqf_st *st, const char *name) {
    if (!st) return NULL;
    for (int64_t i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}
const char *iqf_st_part_path(const iqf_st *st, int part) {
    return (st && part >= 0 && part < st->n_parts) ? st->parts[part].path : NULL;
}

float iqf_st_get_f32(const iqf_st_tensor *t, uint64_t i) {
    const uint8_t *p = t->data + i * iqf_st_dtype_size(t->dtype);
    if (t->dtype == IQF_ST_F32) {
        uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    uint16_t h = (uint16_t)(p[0] | p[1] << 8);
    return t->dtype == IQF_ST_F16 ? iqf_fp16_to_fp32(h) : iqf_bf16_to_fp32(h);
}

void iqf_st_release(const iqf_st *st, const iqf_st_tensor *t) {
    const st_part *P = &st->parts[t->part];
    if (!P->mapped || t->nbytes == 0) return;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)t->data & ~(uintptr_t)(pg - 1);
    uintptr_t b = (uintptr_t)t->data + t->nbytes;
    madvise((void *)a, b - a, MADV_DONTNEED);
}

void iqf_st_release_prefix(const iqf_st *st, const iqf_st_tensor *t, uint64_t upto) {
    const st_part *P = &st->parts[t->part];
    if (!P->mapped || upto == 0) return;
    if (upto > t->nbytes) upto = t->nbytes;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)t->data + pg - 1) & ~(pg - 1); /* pages wholly inside the tensor */
    uintptr_t b = ((uintptr_t)t->data + upto) & ~(pg - 1);
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
}
