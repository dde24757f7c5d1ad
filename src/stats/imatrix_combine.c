/*
 * imatrix_combine.c - importance matrices as raw sums and counts, for `iqforge imatrix
 * --combine`: the loaders keep what llama-imatrix's load_imatrix / load_imatrix_legacy keep (its
 * --in-file), the merge adds as it does, and the writer is the capture's (imatrix.h).
 */
#include "imatrix.h"
#include "../util/error.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void entry_free(iqf_imatrix_raw_entry *e) {
    free(e->name);
    free(e->sum);
    free(e->counts);
    memset(e, 0, sizeof *e);
}

void iqf_imatrix_raw_free(iqf_imatrix_raw *r) {
    if (!r) return;
    for (int i = 0; i < r->n_entries; i++) entry_free(&r->entries[i]);
    free(r->entries);
    for (int i = 0; i < r->n_datasets; i++) free(r->datasets[i]);
    free(r->datasets);
    memset(r, 0, sizeof *r);
}

static int raw_cmp(const void *a, const void *b) {
    return strcmp(((const iqf_imatrix_raw_entry *)a)->name, ((const iqf_imatrix_raw_entry *)b)->name);
}

static iqf_imatrix_raw_entry *raw_find(const iqf_imatrix_raw *r, const char *name) {
    if (!r->n_entries) return NULL;
    iqf_imatrix_raw_entry key = { (char *)name, 0, 0, NULL, NULL };
    return bsearch(&key, r->entries, (size_t)r->n_entries, sizeof key, raw_cmp);
}

/* A new entry at the end of r (room for it must exist), zeroed sums and counts. */
static iqf_imatrix_raw_entry *raw_add(iqf_imatrix_raw *r, const char *name, size_t name_len, int64_t nval,
                                      int64_t n_mat) {
    iqf_imatrix_raw_entry *e = &r->entries[r->n_entries];
    e->name = malloc(name_len + 1);
    e->sum = calloc((size_t)nval, sizeof *e->sum);
    e->counts = calloc((size_t)n_mat, sizeof *e->counts);
    if (!e->name || !e->sum || !e->counts) {
        entry_free(e);
        return NULL;
    }
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    e->nval = nval;
    e->n_mat = n_mat;
    r->n_entries++;
    return e;
}

static bool add_dataset(iqf_imatrix_raw *r, const char *s, size_t len) {
    char **d = realloc(r->datasets, (size_t)(r->n_datasets + 1) * sizeof *d);
    if (!d) return false;
    r->datasets = d;
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, s, len);
    c[len] = 0;
    r->datasets[r->n_datasets++] = c;
    return true;
}

/* Entries sorted; a name met twice (a legacy file can repeat one) is added up, as llama-imatrix's
 * load_imatrix_legacy does (m_stats[name] += ...). */
static iqf_status raw_sort(iqf_imatrix_raw *r, char *msg, size_t msglen) {
    if (r->n_entries > 1) qsort(r->entries, (size_t)r->n_entries, sizeof *r->entries, raw_cmp);
    int k = 0;
    for (int i = 0; i < r->n_entries; i++) {
        iqf_imatrix_raw_entry *e = &r->entries[i];
        if (k > 0 && !strcmp(r->entries[k - 1].name, e->name)) {
            iqf_imatrix_raw_entry *p = &r->entries[k - 1];
            if (p->nval != e->nval || p->n_mat != e->n_mat) {
                snprintf(msg, msglen, "%s appears twice with different sizes", e->name);
                return IQF_E_FORMAT;
            }
            for (int64_t j = 0; j < e->nval; j++) p->sum[j] += e->sum[j];
            for (int64_t j = 0; j < e->n_mat; j++) p->counts[j] += e->counts[j];
            entry_free(e);
            continue;
        }
        r->entries[k++] = *e;
    }
    r->n_entries = k;
    return IQF_OK;
}

static iqf_status parse_gguf_raw(const void *data, size_t size, iqf_imatrix_raw *r, char *msg, size_t msglen) {
    iqf_gguf *g = iqf_gguf_open_memory(data, size, "imatrix", msg, msglen);
    if (!g) return IQF_E_FORMAT;
    iqf_status st = IQF_OK;
    const char *type;
    if (iqf_gguf_get_str(g, "general.type", &type, NULL) && strcmp(type, "imatrix")) {
        snprintf(msg, msglen, "not an importance matrix (general.type is \"%s\")", type);
        st = IQF_E_FORMAT;
        goto done;
    }
    const int64_t kd = iqf_gguf_find_kv(g, "imatrix.datasets");
    if (kd >= 0 && iqf_gguf_kv_type(g, kd) == IQF_GGUF_ARR && iqf_gguf_arr_type(g, kd) == IQF_GGUF_STR)
        for (uint64_t i = 0; i < iqf_gguf_arr_n(g, kd); i++) {
            size_t len = 0;
            const char *s = iqf_gguf_arr_str(g, kd, i, &len);
            if (!add_dataset(r, s ? s : "", s ? len : 0)) {
                snprintf(msg, msglen, "out of memory");
                st = IQF_E_NOMEM;
                goto done;
            }
        }
    uint32_t v;
    const char *keys[2] = { "imatrix.chunk_count", "imatrix.chunk_size" };
    int *dst[2] = { &r->chunk_count, &r->chunk_size };
    for (int k = 0; k < 2; k++) {
        if (iqf_gguf_find_kv(g, keys[k]) < 0) continue;
        if (!iqf_gguf_get_u32(g, keys[k], &v) || v > INT32_MAX) {
            snprintf(msg, msglen, "%s is not a u32 below 2^31", keys[k]);
            st = IQF_E_FORMAT;
            goto done;
        }
        *dst[k] = (int)v;
    }
    const int64_t nt = iqf_gguf_n_tensors(g);
    r->entries = calloc((size_t)nt + 1, sizeof *r->entries);
    if (!r->entries) {
        snprintf(msg, msglen, "out of memory");
        st = IQF_E_NOMEM;
        goto done;
    }
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        const size_t ln = strlen(t->name);
        const bool is_counts = ln > 7 && !strcmp(t->name + ln - 7, ".counts");
        const bool is_sums = ln > 8 && !strcmp(t->name + ln - 8, ".in_sum2");
        if (!is_counts && !is_sums) continue; /* NAME.in_sum (newer llama-imatrix) and others */
        const size_t bl = ln - (is_counts ? 7 : 8);
        char other[IQF_GGUF_MAX_NAME + 16];
        snprintf(other, sizeof other, "%.*s%s", (int)bl, t->name, is_counts ? ".in_sum2" : ".counts");
        const int64_t oi = iqf_gguf_find_tensor(g, other);
        if (oi < 0) {
            snprintf(msg, msglen, "mismatched sums and counts for %.*s", (int)bl, t->name);
            st = IQF_E_FORMAT;
            goto done;
        }
        if (is_counts) continue; /* met from its sums */
        const iqf_gguf_tensor *c = iqf_gguf_tensor_at(g, oi);
        const int64_t nval = iqf_gguf_tensor_nelements(t), ncounts = iqf_gguf_tensor_nelements(c);
        if (t->type != IQF_TYPE_F32 || c->type != IQF_TYPE_F32 || nval < 1 || ncounts < 1 || nval % ncounts) {
            snprintf(msg, msglen, "%.*s: sums and counts must be F32, the sums a multiple of the counts", (int)bl,
                     t->name);
            st = IQF_E_FORMAT;
            goto done;
        }
        iqf_imatrix_raw_entry *e = raw_add(r, t->name, bl, nval, ncounts);
        if (!e) {
            snprintf(msg, msglen, "out of memory");
            st = IQF_E_NOMEM;
            goto done;
        }
        for (int64_t j = 0; j < nval; j++) {
            float s;
            memcpy(&s, (const char *)t->data + 4 * j, 4);
            if (!isfinite(s)) {
                snprintf(msg, msglen, "%s: value %lld is not finite", t->name, (long long)j);
                st = IQF_E_FORMAT;
                goto done;
            }
            e->sum[j] = s;
        }
        for (int64_t j = 0; j < ncounts; j++) {
            float cf;
            memcpy(&cf, (const char *)c->data + 4 * j, 4);
            if (!isfinite(cf) || cf < -0.5f || cf > 9.0e18f) {
                snprintf(msg, msglen, "%s: count %lld is not a finite count", c->name, (long long)j);
                st = IQF_E_FORMAT;
                goto done;
            }
            e->counts[j] = lroundf(cf); /* llama-imatrix: std::lround */
        }
    }
    if (r->n_entries == 0) {
        snprintf(msg, msglen, "not an importance matrix (no NAME.in_sum2 and NAME.counts tensors)");
        st = IQF_E_FORMAT;
        goto done;
    }
    st = raw_sort(r, msg, msglen);
done:
    iqf_gguf_close(g);
    return st;
}

static bool rd_i32(const uint8_t *p, size_t n, size_t *off, int32_t *v) {
    if (n - *off < 4) return false;
    memcpy(v, p + *off, 4);
    *off += 4;
    return true;
}

static iqf_status parse_dat_raw(const uint8_t *p, size_t n, int chunk_size, iqf_imatrix_raw *r, char *msg,
                                size_t msglen) {
    size_t off = 0;
    int32_t n_entries;
    if (!rd_i32(p, n, &off, &n_entries) || n_entries < 1 || (uint64_t)n_entries > (n - 4) / 16) {
        snprintf(msg, msglen, "not an importance matrix (neither GGUF nor a legacy .dat with entries)");
        return IQF_E_FORMAT;
    }
    r->entries = calloc((size_t)n_entries, sizeof *r->entries);
    if (!r->entries) {
        snprintf(msg, msglen, "out of memory");
        return IQF_E_NOMEM;
    }
    r->is_legacy = true;
    r->chunk_size = chunk_size;
    for (int i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!rd_i32(p, n, &off, &len) || len < 0 || (size_t)len > n - off) {
            snprintf(msg, msglen, "entry %d: bad or truncated name", i + 1);
            return IQF_E_FORMAT;
        }
        const char *name = (const char *)p + off;
        off += (size_t)len;
        if (!rd_i32(p, n, &off, &ncall) || !rd_i32(p, n, &off, &nval) || nval < 1 || ncall < 0 ||
            (uint64_t)nval * 4 > n - off) {
            snprintf(msg, msglen, "entry %d (%.*s): bad or truncated values", i + 1, len, name);
            return IQF_E_FORMAT;
        }
        iqf_imatrix_raw_entry *e = raw_add(r, name, strnlen(name, (size_t)len), nval, 1);
        if (!e) {
            snprintf(msg, msglen, "out of memory");
            return IQF_E_NOMEM;
        }
        for (int32_t j = 0; j < nval; j++) {
            float s;
            memcpy(&s, p + off + 4 * (size_t)j, 4);
            if (!isfinite(s)) {
                snprintf(msg, msglen, "entry %d (%s): value %d is not finite", i + 1, e->name, j);
                return IQF_E_FORMAT;
            }
            e->sum[j] = (double)s * chunk_size; /* llama-imatrix: tmp[i] * chunk_size */
        }
        off += (size_t)nval * 4;
        e->counts[0] = (int64_t)ncall * chunk_size;
    }
    int32_t n_calls = 0, len = 0;
    if (rd_i32(p, n, &off, &n_calls)) r->chunk_count = n_calls > 0 ? n_calls : 0;
    if (rd_i32(p, n, &off, &len) && len > 0 && (size_t)len <= n - off &&
        !add_dataset(r, (const char *)p + off, strnlen((const char *)p + off, (size_t)len))) {
        snprintf(msg, msglen, "out of memory");
        return IQF_E_NOMEM;
    }
    return raw_sort(r, msg, msglen);
}

iqf_status iqf_imatrix_raw_load(const char *path, int legacy_chunk_size, iqf_imatrix_raw *out, char *err,
                                size_t errlen) {
    if (!out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    memset(out, 0, sizeof *out);
    if (!path || legacy_chunk_size < 1) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    FILE *f = fopen(path, "rb");
    if (!f) return iqf_fail(err, errlen, IQF_E_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_IO, "%s: not a regular file", path);
    }
    const size_t n = (size_t)sb.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory (%zu bytes)", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return iqf_fail(err, errlen, IQF_E_IO, "%s: read failed", path);
    }
    fclose(f);
    char msg[512];
    iqf_status st = n >= 4 && !memcmp(buf, "GGUF", 4) ? parse_gguf_raw(buf, n, out, msg, sizeof msg)
                                                       : parse_dat_raw(buf, n, legacy_chunk_size, out, msg, sizeof msg);
    free(buf);
    if (st) {
        iqf_imatrix_raw_free(out);
        return iqf_fail(err, errlen, st, "%s: %s", path, msg);
    }
    return IQF_OK;
}

iqf_status iqf_imatrix_raw_merge(iqf_imatrix_raw *dst, const iqf_imatrix_raw *src, const char *src_name,
                                 char *err, size_t errlen) {
    if (!dst || !src) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    if (!src_name) src_name = "input";
    /* check everything first, so that dst stays as it was on an error */
    int n_new = 0;
    for (int i = 0; i < src->n_entries; i++) {
        const iqf_imatrix_raw_entry *s = &src->entries[i];
        const iqf_imatrix_raw_entry *d = raw_find(dst, s->name);
        if (!d) {
            n_new++;
            continue;
        }
        if (d->nval != s->nval)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s has %lld values, the files before it %lld", src_name,
                            s->name, (long long)s->nval, (long long)d->nval);
        if (d->n_mat != s->n_mat && d->n_mat != 1 && s->n_mat != 1)
            return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s has %lld counts (experts), the files before it %lld",
                            src_name, s->name, (long long)s->n_mat, (long long)d->n_mat);
    }
    if (dst->chunk_size > 0 && src->chunk_size > 0 && dst->chunk_size != src->chunk_size)
        return iqf_fail(err, errlen, IQF_E_FORMAT, "%s: chunk size %d, the files before it %d (shards of one capture share -c)",
                        src_name, src->chunk_size, dst->chunk_size);
    /* every mismatch is found above, so dst is unchanged by one; running out of memory below can
     * leave it part-merged (the caller drops it then) */
    iqf_imatrix_raw_entry *ne = realloc(dst->entries, (size_t)(dst->n_entries + n_new + 1) * sizeof *ne);
    if (!ne) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    dst->entries = ne;
    char **nd = realloc(dst->datasets, (size_t)(dst->n_datasets + src->n_datasets + 1) * sizeof *nd);
    if (!nd) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    dst->datasets = nd;
    const int n_old = dst->n_entries;
    for (int i = 0; i < src->n_entries; i++) {
        const iqf_imatrix_raw_entry *s = &src->entries[i];
        iqf_imatrix_raw_entry *d = NULL;
        for (int lo = 0, hi = n_old - 1; lo <= hi && !d;) { /* the sorted old part */
            const int mid = (lo + hi) / 2, c = strcmp(dst->entries[mid].name, s->name);
            if (!c) d = &dst->entries[mid];
            else if (c < 0) lo = mid + 1;
            else hi = mid - 1;
        }
        if (!d) {
            d = raw_add(dst, s->name, strlen(s->name), s->nval, s->n_mat);
            if (!d) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        } else if (d->n_mat == 1 && s->n_mat > 1) { /* broadcast the single count (llama-imatrix) */
            int64_t *c = malloc((size_t)s->n_mat * sizeof *c);
            if (!c) return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            for (int64_t j = 0; j < s->n_mat; j++) c[j] = d->counts[0];
            free(d->counts);
            d->counts = c;
            d->n_mat = s->n_mat;
        }
        for (int64_t j = 0; j < s->nval; j++) d->sum[j] += s->sum[j];
        for (int64_t j = 0; j < d->n_mat; j++) d->counts[j] += s->counts[s->n_mat == 1 ? 0 : j];
    }
    for (int i = 0; i < src->n_datasets; i++)
        if (!add_dataset(dst, src->datasets[i], strlen(src->datasets[i])))
            return iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    char msg[256];
    iqf_status st = raw_sort(dst, msg, sizeof msg); /* names are unique: only sorts */
    if (st) return iqf_fail(err, errlen, st, "%s: %s", src_name, msg);
    if (dst->chunk_size <= 0) dst->chunk_size = src->chunk_size;
    dst->is_legacy = dst->is_legacy && src->is_legacy;
    /* llama-imatrix: the chunk count is the largest count over the chunk size */
    int64_t max_count = 0;
    for (int i = 0; i < dst->n_entries; i++)
        for (int64_t j = 0; j < dst->entries[i].n_mat; j++)
            if (dst->entries[i].counts[j] > max_count) max_count = dst->entries[i].counts[j];
    if (dst->chunk_size > 0) {
        const int64_t cc = max_count / dst->chunk_size;
        dst->chunk_count = cc > INT32_MAX ? INT32_MAX : (int)cc;
    } else {
        dst->chunk_count += src->chunk_count;
    }
    return IQF_OK;
}

iqf_status iqf_imatrix_raw_write(const iqf_imatrix_raw *r, const char *path, bool dat, char *err, size_t errlen) {
    if (!r || !path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL argument");
    iqf_imatrix_stats *stats = calloc((size_t)r->n_entries + 1, sizeof *stats);
    float **sums = calloc((size_t)r->n_entries + 1, sizeof *sums);
    iqf_status st = stats && sums ? IQF_OK : iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
    for (int i = 0; i < r->n_entries && !st; i++) {
        const iqf_imatrix_raw_entry *e = &r->entries[i];
        sums[i] = malloc((size_t)e->nval * sizeof **sums);
        if (!sums[i]) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            break;
        }
        for (int64_t j = 0; j < e->nval; j++) sums[i][j] = (float)e->sum[j];
        stats[i] = (iqf_imatrix_stats){ e->name, e->nval / e->n_mat, e->n_mat, sums[i], e->counts };
    }
    if (!st) {
        const iqf_imatrix_meta meta = { r->chunk_count, r->chunk_size,
                                        r->n_datasets ? r->datasets[r->n_datasets - 1] : NULL };
        st = dat ? iqf_imatrix_write_dat(path, stats, r->n_entries, &meta, err, errlen)
                 : iqf_imatrix_write_gguf_ds(path, stats, r->n_entries, &meta, (const char *const *)r->datasets,
                                             r->n_datasets, err, errlen);
    }
    for (int i = 0; sums && i < r->n_entries; i++) free(sums[i]);
    free(sums);
    free(stats);
    return st;
}
