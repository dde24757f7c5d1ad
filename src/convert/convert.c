/*
 * convert.c - iqf_convert_hf: a Hugging Face checkpoint directory to the GGUF file llama.cpp's
 * convert_hf_to_gguf.py writes from it (same keys, values and order; same tensor names, order,
 * types, shapes and data).
 *
 * Stages, in the converter's order:
 *   cv_load        config.json, the architecture row, the safetensors (mapped, validated)
 *   iqf_cv_plan    the output tensors (convert_plan.c): names (archs.c rows), stacking of experts,
 *                  the llama q/k permutation, rope_freqs; shapes and types; nothing is read yet
 *   KVs            general.*, the hyper-parameters (convert_kvs.c), then the vocabulary (vocab.c)
 *   cv_write       header, then each tensor produced row by row from the mapped input
 *                  (pages dropped after each source tensor: memory stays bounded by one row
 *                  block, not by the model), committed by rename or removed on any error.
 * The shared error and hyper-parameter helpers (iqf_cv_fail, iqf_cv_hget, ...) are convert_kvs.c's:
 * convert.c calls convert_plan.c and convert_kvs.c, convert_plan.c calls convert_kvs.c, and none
 * calls back up.
 */
#include "convert_internal.h"
#include "spm.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- data ------------------------------------------------------------------------------------ */

static size_t row_bytes(int type, int64_t n) {
    switch (type) {
    case IQF_TYPE_F32: return (size_t)n * 4;
    case IQF_TYPE_F16:
    case IQF_TYPE_BF16: return (size_t)n * 2;
    default: return (size_t)(n / 32) * 34;
    }
}

static void encode_row(int type, const float *x, int64_t n, uint8_t *out) {
    if (type == IQF_TYPE_F32) {
        memcpy(out, x, (size_t)n * 4);
    } else if (type == IQF_TYPE_F16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = iqf_fp32_to_fp16(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else if (type == IQF_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = iqf_fp32_to_bf16(x[i]);
            memcpy(out + 2 * i, &h, 2);
        }
    } else { /* Q8_0 as gguf-py's quants.Q8_0 (= ggml's reference) */
        for (int64_t b = 0; b < n / 32; b++) {
            const float *v = x + b * 32;
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
            float d = amax / 127.0f;
            float id = d != 0.0f ? 1.0f / d : 0.0f;
            uint16_t dh = iqf_fp32_to_fp16(d);
            uint8_t *blk = out + b * 34;
            memcpy(blk, &dh, 2);
            for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)roundf(v[i] * id);
        }
    }
}

static int cv_write_data(cv *c, iqf_gguf_writer *w) {
    int64_t maxn = 1;
    for (int64_t i = 0; i < c->n_t; i++)
        if (c->t[i].ne[0] > maxn) maxn = c->t[i].ne[0];
    /* rows are encoded in slabs of about 4 MiB of output */
    size_t rb_max = row_bytes(IQF_TYPE_F32, maxn);
    size_t slab = ((size_t)4 << 20) / rb_max;
    if (slab < 1) slab = 1;
    float *row = malloc((size_t)maxn * sizeof *row);
    uint8_t *buf = malloc(slab * rb_max);
    if (!row || !buf) {
        free(row);
        free(buf);
        return iqf_cv_fail(c, "%s: out of memory", c->dir);
    }
    int rc = 0;
    for (int64_t i = 0; i < c->n_t && !rc; i++) {
        const ot *o = &c->t[i];
        int64_t nrows = o->ne[1] * o->ne[2] * o->ne[3];
        size_t rb = row_bytes(o->type, o->ne[0]);
        size_t fill = 0;
        for (int64_t r = 0; r < nrows; r++) {
            iqf_cv_get_row(o, r, row);
            encode_row(o->type, row, o->ne[0], buf + fill);
            fill += rb;
            if (fill + rb > slab * rb_max || r == nrows - 1) {
                if (iqf_gguf_writer_write_data(w, buf, fill) != IQF_OK) {
                    rc = iqf_cv_fail(c, "%s", iqf_gguf_writer_error(w));
                    break;
                }
                fill = 0;
                /* drop the input pages already consumed: resident memory stays at a slab */
                if (o->kind == K_PLAIN)
                    iqf_st_release_prefix(c->st, o->src, (uint64_t)(r + 1) * (uint64_t)o->ne[0] *
                                                             iqf_st_dtype_size(o->src->dtype));
                else if (o->kind == K_STACK && (r + 1) % o->ne[1] == 0)
                    iqf_st_release(c->st, o->srcs[r / o->ne[1]]);
            }
        }
        if (o->kind == K_PLAIN || o->kind == K_PERMUTE || o->kind == K_GATHER || o->kind == K_KB || o->kind == K_VB)
            iqf_st_release(c->st, o->src);
        if (o->kind == K_STACK)
            for (int x = 0; x < o->n_src; x++) iqf_st_release(c->st, o->srcs[x]);
    }
    free(row);
    free(buf);
    return rc;
}

/* ---- the whole ------------------------------------------------------------------------------ */

static void cv_free(cv *c) {
    for (int64_t i = 0; i < c->n_t; i++) {
        free(c->t[i].srcs);
        free(c->t[i].vals);
    }
    free(c->t);
    free(c->xb);
    free(c->xb_n);
    iqf_st_close(c->st);
    yyjson_doc_free(c->cfg_doc);
}

static bool has_spm(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tokenizer.model", dir);
    struct stat sb;
    return stat(p, &sb) == 0;
}

static int cv_load(cv *c, int outtype) {
    snprintf(c->cfg_path, sizeof c->cfg_path, "%s/config.json", c->dir);
    c->cfg_doc = iqf_json_read_file(c->cfg_path, c->err, c->errlen);
    if (!c->cfg_doc) return -1;
    c->hp = yyjson_doc_get_root(c->cfg_doc);
    if (!yyjson_is_obj(c->hp)) return iqf_cv_fail(c, "%s: not a JSON object", c->cfg_path);
    if (iqf_json_get(c->hp, "text_config"))
        return iqf_cv_fail(c, "%s: configurations with a text_config are not supported yet", c->cfg_path);
    yyjson_val *archs = iqf_cv_hget(c, "architectures");
    const char *a = yyjson_is_arr(archs) ? iqf_json_str(yyjson_arr_get_first(archs), NULL) : NULL;
    if (!a) return iqf_cv_fail(c, "%s: no architectures list", c->cfg_path);
    c->arch = iqf_cv_find_arch(a);
    if (!c->arch) return iqf_cv_fail(c, "%s: architecture %.100s is not supported", c->cfg_path, a);
    yyjson_val *rp = iqf_cv_hget(c, "rope_parameters");
    if (!rp) rp = iqf_cv_hget(c, "rope_scaling");
    c->rope = yyjson_is_obj(rp) ? rp : NULL;
    static const char *const k_blocks[] = { "n_layers", "num_hidden_layers", "n_layer", "num_layers", NULL };
    if (iqf_cv_hint(c, "num_hidden_layers", iqf_cv_hfind(c, k_blocks, NULL), &c->block_count, 0, CV_MAX_BLOCKS)) return -1;
    c->n_vocab_real = -1;
    if ((c->arch->flags & CV_F_GEMMA3) && c->arch->vocab == CV_VOCAB_GEMMA && has_spm(c->dir)) {
        /* len(tokens) of _create_vocab_sentencepiece */
        if ((c->n_vocab_real = iqf_cv_spm_n_tokens(c->dir, c->hp, c->err, c->errlen)) < 0) return -1;
    } else if (c->arch->flags & CV_F_GEMMA3) {
        char tp[4096];
        snprintf(tp, sizeof tp, "%s/tokenizer.json", c->dir);
        yyjson_doc *td = iqf_json_read_file(tp, c->err, c->errlen);
        if (!td) return -1;
        yyjson_val *tr = yyjson_doc_get_root(td);
        yyjson_val *voc = iqf_json_get(iqf_json_get(tr, "model"), "vocab"), *add = iqf_json_get(tr, "added_tokens");
        if (yyjson_is_obj(voc) && yyjson_is_arr(add))
            c->n_vocab_real = (int64_t)(yyjson_obj_size(voc) + yyjson_arr_size(add));
        yyjson_doc_free(td);
        if (c->n_vocab_real < 0) return iqf_cv_fail(c, "%s: no model.vocab object or added_tokens list", tp);
    }
    c->st = iqf_st_open_dir(c->dir, c->err, c->errlen);
    if (!c->st) return -1;
    if (iqf_st_n_tensors(c->st) == 0) return iqf_cv_fail(c, "%s: the checkpoint has no tensors", c->dir);
    switch (outtype) {
    case IQF_CONVERT_F32: c->ftype = IQF_FTYPE_ALL_F32; break;
    case IQF_CONVERT_F16: c->ftype = IQF_FTYPE_MOSTLY_F16; break;
    case IQF_CONVERT_BF16: c->ftype = IQF_FTYPE_MOSTLY_BF16; break;
    case IQF_CONVERT_Q8_0: c->ftype = IQF_FTYPE_MOSTLY_Q8_0; break;
    default: /* auto: the first tensor's float type (F16 stays F16, anything else BF16) */
        c->ftype = iqf_st_tensor_at(c->st, 0)->dtype == IQF_ST_F16 ? IQF_FTYPE_MOSTLY_F16 : IQF_FTYPE_MOSTLY_BF16;
    }
    return 0;
}

/* Every KV (general.*, the hyper-parameters, the vocabulary) and every tensor info, on a file or
 * a sizing writer; 0, or -1 with err set. */
static int cv_declare(cv *c, iqf_gguf_writer *w) {
    char name[512], label[96];
    iqf_cv_model_name(c->dir, name, sizeof name);
    iqf_cv_size_label(c, label, sizeof label);
    if (iqf_gguf_writer_set_str(w, "general.architecture", c->arch->gguf) != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.type", "model") != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.name", name) != IQF_OK ||
        iqf_gguf_writer_set_str(w, "general.size_label", label) != IQF_OK)
        return iqf_cv_fail(c, "%s", iqf_gguf_writer_error(w));
    if (iqf_cv_hparams(c, w)) return -1;
    if (iqf_gguf_writer_set_u32(w, "general.quantization_version", 2) != IQF_OK)
        return iqf_cv_fail(c, "%s", iqf_gguf_writer_error(w));
    if (iqf_cv_vocab(c->dir, c->cfg_path, c->hp, c->arch->vocab, w, c->err, c->errlen)) return -1;
    for (int64_t i = 0; i < c->n_t; i++)
        if (iqf_gguf_writer_add_tensor(w, c->t[i].name, c->t[i].n_dims, c->t[i].ne, c->t[i].type) != IQF_OK)
            return iqf_cv_fail(c, "%s", iqf_gguf_writer_error(w));
    return 0;
}

static bool convert_args_ok(const char *dir, iqf_convert_outtype outtype, char **err, size_t *errlen,
                            char *dummy, size_t dummylen) {
    if (!*err || !*errlen) {
        *err = dummy;
        *errlen = dummylen;
    }
    (*err)[0] = 0;
    if (!dir || (int)outtype < 0 || (int)outtype > IQF_CONVERT_Q8_0) {
        snprintf(*err, *errlen, "iqf_convert: invalid argument");
        return false;
    }
    return true;
}

iqf_status iqf_convert_hf(const char *dir, const char *out_path, iqf_convert_outtype outtype, char *err,
                          size_t errlen) {
    char dummy[8];
    if (!convert_args_ok(dir, outtype, &err, &errlen, dummy, sizeof dummy) || !out_path) {
        snprintf(err, errlen, "iqf_convert_hf: invalid argument");
        return IQF_E_INVALID_ARG;
    }
    cv c;
    memset(&c, 0, sizeof c);
    c.dir = dir;
    c.err = err;
    c.errlen = errlen;
    iqf_gguf_writer *w = NULL;
    iqf_status st = IQF_E_FORMAT;
    if (cv_load(&c, (int)outtype) || iqf_cv_plan(&c)) goto fail;
    w = iqf_gguf_writer_open(out_path, err, errlen);
    if (!w) {
        st = IQF_E_IO;
        goto fail;
    }
    for (int p = 0; iqf_st_part_path(c.st, p); p++)
        if (iqf_gguf_writer_set_input(w, iqf_st_part_path(c.st, p)) != IQF_OK) {
            snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
            st = IQF_E_INVALID_ARG;
            goto fail;
        }
    if (cv_declare(&c, w)) goto fail;
    if (iqf_gguf_writer_write_header(w) != IQF_OK) {
        snprintf(err, errlen, "%s", iqf_gguf_writer_error(w));
        goto fail;
    }
    if (cv_write_data(&c, w)) goto fail;
    st = iqf_gguf_writer_finish(w, err, errlen);
    w = NULL;
    cv_free(&c);
    return st;
fail:
    iqf_gguf_writer_abort(w);
    cv_free(&c);
    if (st == IQF_OK) st = IQF_E_FORMAT;
    return st;
}

/* ---- the checkpoint as a GGUF source (iqf_convert_open) -------------------------------------- */

typedef struct cv_source {
    cv c;
    char *dir;
    char err[1024]; /* c.err while the source is open */
    int64_t open_t; /* the tensor last read and not to its last row (its input pages may stay mapped), or -1 */
} cv_source;

/* Every input page of output tensor o dropped (all its sources). */
static void cv_release_tensor(cv *c, const ot *o) {
    if (o->kind == K_STACK) {
        for (int e = 0; e < o->n_src; e++)
            if (o->srcs[e]) iqf_st_release(c->st, o->srcs[e]);
    } else if (o->src) {
        iqf_st_release(c->st, o->src);
    }
}

/* Rows row0 .. row0 + n - 1 of tensor i as iqf_convert_hf writes them, into dst; the input
 * pages consumed are dropped as they go (a plain or permuted tensor's prefix, a stacked expert
 * when its last row is out, any other source when the tensor's last row is out), and all of a
 * tensor's when rows of another tensor are asked for before its last row was out (a measurement
 * reads sampled rows: the pages after the last one, mapped by read-ahead, would stay). */
static iqf_status cv_src_read_rows(void *user, int64_t i, int64_t row0, int64_t n, void *dst, char *err, size_t errlen) {
    cv_source *s = user;
    cv *c = &s->c;
    if (i < 0 || i >= c->n_t) {
        snprintf(err, errlen, "%s: no tensor %lld", c->dir, (long long)i);
        return IQF_E_INVALID_ARG;
    }
    const ot *o = &c->t[i];
    const int64_t nrows = o->ne[1] * o->ne[2] * o->ne[3];
    if (row0 < 0 || n < 1 || row0 > nrows - n) {
        snprintf(err, errlen, "%s: rows %lld+%lld outside tensor %s", c->dir, (long long)row0, (long long)n, o->name);
        return IQF_E_INVALID_ARG;
    }
    if (s->open_t >= 0 && s->open_t != i) cv_release_tensor(c, &c->t[s->open_t]);
    s->open_t = -1;
    float *row = malloc((size_t)o->ne[0] * sizeof *row);
    if (!row) {
        snprintf(err, errlen, "%s: out of memory (tensor %s)", c->dir, o->name);
        return IQF_E_NOMEM;
    }
    const size_t rb = row_bytes(o->type, o->ne[0]);
    uint8_t *out = dst;
    for (int64_t r = row0; r < row0 + n; r++) {
        iqf_cv_get_row(o, r, row);
        encode_row(o->type, row, o->ne[0], out + (size_t)(r - row0) * rb);
        if (o->kind == K_STACK && (r + 1) % o->ne[1] == 0) iqf_st_release(c->st, o->srcs[r / o->ne[1]]);
    }
    free(row);
    const int64_t end = row0 + n;
    if (end < nrows) s->open_t = i;
    if (end == nrows && (o->kind == K_PLAIN || o->kind == K_PERMUTE || o->kind == K_GATHER || o->kind == K_KB || o->kind == K_VB))
        iqf_st_release(c->st, o->src);
    else if (o->kind == K_PLAIN || (o->kind == K_PERMUTE && o->perm_heads > 0)) {
        const int64_t blk = o->kind == K_PLAIN ? 1 : o->ne[1] / o->perm_heads; /* rows a head permutes among */
        const int64_t done = blk > 0 ? end / blk * blk : 0;
        iqf_st_release_prefix(c->st, o->src, (uint64_t)done * (uint64_t)o->ne[0] * iqf_st_dtype_size(o->src->dtype));
    }
    return IQF_OK;
}

/* Tensor i's bytes as iqf_convert_hf writes them, into dst. */
static iqf_status cv_src_read(void *user, int64_t i, void *dst, char *err, size_t errlen) {
    cv_source *s = user;
    if (i < 0 || i >= s->c.n_t) {
        snprintf(err, errlen, "%s: no tensor %lld", s->c.dir, (long long)i);
        return IQF_E_INVALID_ARG;
    }
    const ot *o = &s->c.t[i];
    return cv_src_read_rows(user, i, 0, o->ne[1] * o->ne[2] * o->ne[3], dst, err, errlen);
}

static void cv_src_close(void *user) {
    cv_source *s = user;
    cv_free(&s->c);
    free(s->dir);
    free(s);
}

iqf_gguf *iqf_convert_open(const char *dir, iqf_convert_outtype outtype, char *err, size_t errlen) {
    char dummy[8];
    if (!convert_args_ok(dir, outtype, &err, &errlen, dummy, sizeof dummy)) return NULL;
    cv_source *s = calloc(1, sizeof *s);
    char *d = s ? strdup(dir) : NULL;
    if (!d) {
        free(s);
        snprintf(err, errlen, "%s: out of memory", dir);
        return NULL;
    }
    s->dir = d;
    s->open_t = -1;
    cv *c = &s->c;
    c->dir = s->dir;
    c->err = err;
    c->errlen = errlen;
    iqf_gguf_writer *w = NULL;
    void *hdr = NULL;
    size_t hdr_size = 0;
    uint64_t file_size = 0;
    if (cv_load(c, (int)outtype) || iqf_cv_plan(c)) goto fail;
    w = iqf_gguf_writer_open_sizing();
    if (!w) {
        snprintf(err, errlen, "%s: out of memory", dir);
        goto fail;
    }
    if (cv_declare(c, w)) goto fail;
    file_size = iqf_gguf_writer_size(w, NULL, NULL);
    hdr = file_size ? iqf_gguf_writer_header_bytes(w, &hdr_size) : NULL;
    if (!hdr) {
        snprintf(err, errlen, "%s: %s", dir, iqf_gguf_writer_error(w));
        goto fail;
    }
    iqf_gguf_writer_abort(w);
    /* later messages (tensor reads) go to the source's own buffer, then to the caller's */
    c->err = s->err;
    c->errlen = sizeof s->err;
    iqf_gguf_source src = { s, cv_src_read, cv_src_close, cv_src_read_rows };
    iqf_gguf *g = iqf_gguf_open_source(hdr, hdr_size, file_size, dir, &src, err, errlen); /* closes s on failure */
    free(hdr);
    return g;
fail:
    iqf_gguf_writer_abort(w);
    cv_src_close(s);
    return NULL;
}
