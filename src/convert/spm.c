/*
 * spm.c - SentencePiece tokenizer.model (protobuf ModelProto of sentencepiece_model.proto) read as
 * hostile input, and the vocabulary convert_hf_to_gguf.py's _set_vocab_sentencepiece makes of it.
 *
 * The fields read (field numbers of sentencepiece_model.proto):
 *   ModelProto      1 pieces (repeated SentencePiece), 2 trainer_spec, 3 normalizer_spec
 *   SentencePiece   1 piece (string), 2 score (float), 3 type (enum, NORMAL by default)
 *   TrainerSpec     3 model_type, 4 vocab_size, 35 byte_fallback, 40..43 unk/bos/eos/pad_id
 *   NormalizerSpec  1 name, 3 add_dummy_prefix, 4 remove_extra_whitespaces, 5 escape_whitespaces
 * Everything else is skipped by its wire type. A known field with the wrong wire type is an error
 * (protobuf would keep it as an unknown field; no writer of tokenizer.model does that). A field
 * given twice takes its last value and an embedded message given twice is merged, as protobuf
 * does. Messages nest two levels at most here; unknown groups are skipped with an explicit stack
 * of IQF_SPM_MAX_GROUP_DEPTH, no recursion.
 */
#include "spm.h"
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- protobuf wire format ------------------------------------------------------------------ */

typedef struct pbr {
    const uint8_t *base; /* the file's first byte: offsets in messages are from there */
    const uint8_t *p, *end;
    const char *name;
    char *err;
    size_t errlen;
} pbr;

typedef struct pbf {
    uint32_t num;
    int wt;
    uint64_t v;          /* varint, fixed64, fixed32 */
    const uint8_t *data; /* length-delimited */
    size_t len;
    const uint8_t *at;   /* the tag */
} pbf;

static int pfail(const pbr *r, const uint8_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int pfail(const pbr *r, const uint8_t *at, const char *fmt, ...) {
    int k = snprintf(r->err, r->errlen, "%s: byte %zu: ", r->name, (size_t)(at - r->base));
    if (k >= 0 && (size_t)k < r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err + k, r->errlen - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int rd_varint(pbr *r, uint64_t *out) {
    const uint8_t *start = r->p;
    uint64_t v = 0;
    for (int i = 0; i < 10; i++) {
        if (r->p >= r->end) return pfail(r, start, "varint runs past the end of its message");
        uint8_t b = *r->p++;
        if (i == 9 && (b & 0x80)) return pfail(r, start, "varint longer than 10 bytes");
        if (i == 9 && b > 1) return pfail(r, start, "varint overflows 64 bits");
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1; /* not reached */
}

static int rd_tag(pbr *r, pbf *f) {
    f->at = r->p;
    uint64_t tag;
    if (rd_varint(r, &tag)) return -1;
    if (tag >> 32 || (tag >> 3) == 0 || (tag >> 3) > 536870911u)
        return pfail(r, f->at, "field number %llu is out of range", (unsigned long long)(tag >> 3));
    f->num = (uint32_t)(tag >> 3);
    f->wt = (int)(tag & 7);
    return 0;
}

/* The value of a field of wire type 0, 1, 2 or 5. */
static int rd_value(pbr *r, pbf *f) {
    size_t left;
    switch (f->wt) {
    case 0: return rd_varint(r, &f->v);
    case 1:
    case 5: {
        size_t n = f->wt == 1 ? 8 : 4;
        if ((size_t)(r->end - r->p) < n)
            return pfail(r, f->at, "fixed%zu field %u runs past the end of its message", 8 * n, f->num);
        f->v = 0;
        for (size_t i = 0; i < n; i++) f->v |= (uint64_t)r->p[i] << (8 * i);
        r->p += n;
        return 0;
    }
    case 2:
        if (rd_varint(r, &f->v)) return -1;
        left = (size_t)(r->end - r->p);
        if (f->v > left)
            return pfail(r, f->at, "field %u has length %llu, past the end of its message (%zu bytes left)", f->num,
                         (unsigned long long)f->v, left);
        f->data = r->p;
        f->len = (size_t)f->v;
        r->p += f->len;
        return 0;
    default: return pfail(r, f->at, "field %u has wire type %d", f->num, f->wt);
    }
}

/* Skip a group opened by field `num` (wire type 3), nested groups by an explicit stack. */
static int skip_group(pbr *r, const pbf *open) {
    uint32_t stack[IQF_SPM_MAX_GROUP_DEPTH];
    int depth = 0;
    stack[depth++] = open->num;
    while (depth) {
        if (r->p >= r->end) return pfail(r, open->at, "group of field %u is not closed", open->num);
        pbf f;
        if (rd_tag(r, &f)) return -1;
        if (f.wt == 3) {
            if (depth == IQF_SPM_MAX_GROUP_DEPTH)
                return pfail(r, f.at, "groups nested deeper than %d levels", IQF_SPM_MAX_GROUP_DEPTH);
            stack[depth++] = f.num;
        } else if (f.wt == 4) {
            if (stack[depth - 1] != f.num)
                return pfail(r, f.at, "end of group %u closes the group of field %u", f.num, stack[depth - 1]);
            depth--;
        } else if (rd_value(r, &f))
            return -1;
    }
    return 0;
}

/* The next field of the message, groups skipped (f->wt 3 then means "skipped"). 0, or -1 with err. */
static int rd_field(pbr *r, pbf *f) {
    if (rd_tag(r, f)) return -1;
    if (f->wt == 3) return skip_group(r, f);
    if (f->wt == 4) return pfail(r, f->at, "end of group %u without its start", f->num);
    return rd_value(r, f);
}

static pbr sub(const pbr *r, const pbf *f) {
    pbr s = *r;
    s.p = f->data;
    s.end = f->data + f->len;
    return s;
}

static int want(const pbr *r, const pbf *f, int wt, const char *what) {
    if (f->wt == wt) return 0;
    return pfail(r, f->at, "%s (field %u) has wire type %d, not %d", what, f->num, f->wt, wt);
}

/* ---- ModelProto ------------------------------------------------------------------------------ */

static int parse_piece(const pbr *outer, const pbf *msg, iqf_spm_piece *pc, int64_t id) {
    pbr r = sub(outer, msg);
    pc->s = (const char *)msg->data;
    pc->len = 0;
    pc->score = 0.0f;
    pc->type = IQF_SPM_NORMAL;
    while (r.p < r.end) {
        pbf f;
        if (rd_field(&r, &f)) return -1;
        if (f.num == 1) {
            if (want(&r, &f, 2, "piece")) return -1;
            pc->s = (const char *)f.data;
            pc->len = f.len;
        } else if (f.num == 2) {
            if (want(&r, &f, 5, "score")) return -1;
            uint32_t u = (uint32_t)f.v;
            memcpy(&pc->score, &u, sizeof u);
        } else if (f.num == 3) {
            if (want(&r, &f, 0, "type")) return -1;
            int32_t t = (int32_t)(uint32_t)f.v;
            if (t < IQF_SPM_NORMAL || t > IQF_SPM_BYTE)
                return pfail(&r, f.at, "piece %lld has type %d, not one of 1..6", (long long)id, t);
            pc->type = t;
        }
    }
    return 0;
}

static int parse_trainer(const pbr *outer, const pbf *msg, iqf_spm *m) {
    pbr r = sub(outer, msg);
    while (r.p < r.end) {
        pbf f;
        if (rd_field(&r, &f)) return -1;
        int32_t *id = f.num == 40 ? &m->unk_id : f.num == 41 ? &m->bos_id : f.num == 42 ? &m->eos_id
                    : f.num == 43 ? &m->pad_id : f.num == 4 ? &m->vocab_size : NULL;
        if (id) {
            if (want(&r, &f, 0, "trainer_spec id")) return -1;
            *id = (int32_t)(uint32_t)f.v;
        } else if (f.num == 3) {
            if (want(&r, &f, 0, "trainer_spec.model_type")) return -1;
            int32_t t = (int32_t)(uint32_t)f.v;
            if (t < 1 || t > 4) return pfail(&r, f.at, "trainer_spec.model_type %d is not one of 1..4", t);
            m->model_type = t;
        } else if (f.num == 35) {
            if (want(&r, &f, 0, "trainer_spec.byte_fallback")) return -1;
            m->byte_fallback = f.v != 0;
        }
    }
    return 0;
}

static int parse_normalizer(const pbr *outer, const pbf *msg, iqf_spm *m) {
    pbr r = sub(outer, msg);
    while (r.p < r.end) {
        pbf f;
        if (rd_field(&r, &f)) return -1;
        bool *flag = f.num == 3 ? &m->add_dummy_prefix : f.num == 4 ? &m->remove_extra_whitespaces
                   : f.num == 5 ? &m->escape_whitespaces : NULL;
        if (flag) {
            if (want(&r, &f, 0, "normalizer_spec flag")) return -1;
            *flag = f.v != 0;
        } else if (f.num == 1) {
            if (want(&r, &f, 2, "normalizer_spec.name")) return -1;
            m->norm_name = (const char *)f.data;
            m->norm_name_len = f.len;
        }
    }
    return 0;
}

static int sfail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sfail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static bool utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp, min;
        if (c < 0x80) { i++; continue; }
        if ((c & 0xe0) == 0xc0) { k = 1; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { k = 2; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { k = 3; cp = c & 0x07; min = 0x10000; }
        else return false;
        if (n - i - 1 < k) return false;
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += k + 1;
    }
    return true;
}

static int hexval(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1; }

typedef struct pkey {
    const char *s;
    size_t len;
    int cls; /* sentencepiece keeps NORMAL/USER_DEFINED/UNUSED pieces and the others in two maps */
    int64_t id;
} pkey;

static int cmp_pkey(const void *a, const void *b) {
    const pkey *x = a, *y = b;
    if (x->cls != y->cls) return x->cls - y->cls;
    size_t m = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, m);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* What sentencepiece's ModelInterface::InitializePieces refuses, and pieces that are not UTF-8. */
static int check_pieces(const iqf_spm *m, const char *name, char *err, size_t errlen) {
    int64_t unk = -1;
    bool bytes[256] = { false };
    for (int64_t i = 0; i < m->n_pieces; i++) {
        const iqf_spm_piece *pc = &m->pieces[i];
        if (!pc->len) return sfail(err, errlen, "%s: piece %lld is empty", name, (long long)i);
        if (!utf8_ok((const unsigned char *)pc->s, pc->len))
            return sfail(err, errlen, "%s: piece %lld is not valid UTF-8", name, (long long)i);
        if (pc->type == IQF_SPM_UNKNOWN) {
            if (unk >= 0)
                return sfail(err, errlen, "%s: pieces %lld and %lld are both of type UNKNOWN", name,
                                (long long)unk, (long long)i);
            unk = i;
        }
        if (pc->type == IQF_SPM_BYTE) {
            if (!m->byte_fallback)
                return sfail(err, errlen, "%s: piece %lld is of type BYTE but trainer_spec.byte_fallback is false",
                                name, (long long)i);
            int hi = pc->len == 6 ? hexval(pc->s[3]) : -1, lo = pc->len == 6 ? hexval(pc->s[4]) : -1;
            if (hi < 0 || lo < 0 || memcmp(pc->s, "<0x", 3) || pc->s[5] != '>')
                return sfail(err, errlen, "%s: piece %lld is of type BYTE but not <0xXX>", name, (long long)i);
            bytes[hi * 16 + lo] = true;
        }
    }
    if (unk < 0) return sfail(err, errlen, "%s: no piece of type UNKNOWN", name);
    if (m->byte_fallback)
        for (int b = 0; b < 256; b++)
            if (!bytes[b])
                return sfail(err, errlen, "%s: trainer_spec.byte_fallback is true but byte piece <0x%02X> is missing",
                                name, b);
    /* repeated pieces */
    if (m->n_pieces < 2) return 0;
    pkey *k = malloc((size_t)m->n_pieces * sizeof *k);
    if (!k) return sfail(err, errlen, "%s: out of memory", name);
    for (int64_t i = 0; i < m->n_pieces; i++) {
        int t = m->pieces[i].type;
        k[i] = (pkey){ m->pieces[i].s, m->pieces[i].len,
                       t == IQF_SPM_NORMAL || t == IQF_SPM_USER_DEFINED || t == IQF_SPM_UNUSED, i };
    }
    qsort(k, (size_t)m->n_pieces, sizeof *k, cmp_pkey);
    int rc = 0;
    for (int64_t i = 1; i < m->n_pieces && !rc; i++)
        if (k[i].cls == k[i - 1].cls && k[i].len == k[i - 1].len && !memcmp(k[i].s, k[i - 1].s, k[i].len))
            rc = sfail(err, errlen, "%s: pieces %lld and %lld are the same text", name, (long long)k[i - 1].id,
                          (long long)k[i].id);
    free(k);
    return rc;
}

void iqf_spm_free(iqf_spm *m) {
    if (!m) return;
    free(m->pieces);
    free(m->buf);
    free(m);
}

iqf_spm *iqf_spm_parse(const uint8_t *data, size_t len, const char *name, char *err, size_t errlen) {
    if (errlen) err[0] = 0;
    if (len > IQF_SPM_MAX_BYTES) {
        snprintf(err, errlen, "%s: %zu bytes is too large for a tokenizer.model", name, len);
        return NULL;
    }
    iqf_spm *m = calloc(1, sizeof *m);
    if (!m || !(m->buf = malloc(len ? len : 1))) {
        free(m);
        snprintf(err, errlen, "%s: out of memory", name);
        return NULL;
    }
    if (len) memcpy(m->buf, data, len);
    m->size = len;
    /* sentencepiece_model.proto defaults */
    m->model_type = 1;
    m->vocab_size = 8000;
    m->unk_id = 0;
    m->bos_id = 1;
    m->eos_id = 2;
    m->pad_id = -1;
    m->add_dummy_prefix = m->remove_extra_whitespaces = m->escape_whitespaces = true;
    pbr r = { m->buf, m->buf, m->buf + len, name, err, errlen };
    int64_t cap = 0;
    while (r.p < r.end) {
        pbf f;
        if (rd_field(&r, &f)) goto fail;
        if (f.num == 1) {
            if (want(&r, &f, 2, "pieces")) goto fail;
            if (m->n_pieces == IQF_SPM_MAX_PIECES) {
                pfail(&r, f.at, "more than %d pieces", IQF_SPM_MAX_PIECES);
                goto fail;
            }
            if (m->n_pieces == cap) {
                cap = cap ? 2 * cap : 1024;
                if (cap > IQF_SPM_MAX_PIECES) cap = IQF_SPM_MAX_PIECES;
                iqf_spm_piece *np = realloc(m->pieces, (size_t)cap * sizeof *np);
                if (!np) {
                    snprintf(err, errlen, "%s: out of memory", name);
                    goto fail;
                }
                m->pieces = np;
            }
            if (parse_piece(&r, &f, &m->pieces[m->n_pieces], m->n_pieces)) goto fail;
            m->n_pieces++;
        } else if (f.num == 2) {
            if (want(&r, &f, 2, "trainer_spec") || parse_trainer(&r, &f, m)) goto fail;
        } else if (f.num == 3) {
            if (want(&r, &f, 2, "normalizer_spec") || parse_normalizer(&r, &f, m)) goto fail;
        }
    }
    if (check_pieces(m, name, err, errlen)) goto fail;
    return m;
fail:
    iqf_spm_free(m);
    return NULL;
}

iqf_spm *iqf_spm_read_file(const char *path, char *err, size_t errlen) {
    size_t n = 0;
    uint8_t *buf = iqf_cv_read_whole(path, IQF_SPM_MAX_BYTES, "tokenizer.model", &n, err, errlen);
    if (!buf) return NULL;
    iqf_spm *m = iqf_spm_parse(buf, n, path, err, errlen);
    free(buf);
    return m;
}

/* ---- _set_vocab_sentencepiece ---------------------------------------------------------------- */

typedef struct spt {
    const char **tok;
    size_t *len;
    float *score;
    int32_t *type;
    char **owned; /* strings made here (user-defined tokens with U+2581 replaced) */
    char *pads;   /* the [PADi] texts */
    int64_t n;
} spt;


static void spt_free(spt *t) {
    if (t->owned)
        for (int64_t i = 0; i < t->n; i++) free(t->owned[i]);
    free(t->owned);
    free(t->tok);
    free(t->len);
    free(t->score);
    free(t->type);
    free(t->pads);
}

static void spt_set(spt *t, int64_t id, const char *s, size_t len, float score, int32_t type) {
    free(t->owned[id]);
    t->owned[id] = NULL;
    t->tok[id] = s;
    t->len[id] = len;
    t->score[id] = score;
    t->type[id] = type;
}

/* Python truthiness of a JSON value (token_data.get("special")). */
static bool truthy(yyjson_val *v) {
    if (!v || yyjson_is_null(v)) return false;
    if (yyjson_is_bool(v)) return yyjson_get_bool(v);
    if (yyjson_is_uint(v)) return yyjson_get_uint(v) != 0;
    if (yyjson_is_sint(v)) return yyjson_get_sint(v) != 0;
    if (yyjson_is_real(v)) return yyjson_get_real(v) != 0;
    if (yyjson_is_str(v)) return yyjson_get_len(v) != 0;
    if (yyjson_is_arr(v)) return yyjson_arr_size(v) != 0;
    if (yyjson_is_obj(v)) return yyjson_obj_size(v) != 0;
    return false;
}

/* The pieces, then [PADi] up to n (the table starts as n pads, as the converter's does). */
static int64_t spm_base(spt *t, const iqf_spm *m, int64_t n, char *err, size_t errlen, const char *path) {
    t->n = n;
    t->tok = calloc((size_t)n, sizeof *t->tok);
    t->len = calloc((size_t)n, sizeof *t->len);
    t->score = calloc((size_t)n, sizeof *t->score);
    t->type = calloc((size_t)n, sizeof *t->type);
    t->owned = calloc((size_t)n, sizeof *t->owned);
    t->pads = malloc((size_t)n * 16);
    if (!t->tok || !t->len || !t->score || !t->type || !t->owned || !t->pads)
        return sfail(err, errlen, "%s: out of memory", path);
    char *p = t->pads;
    for (int64_t i = 0; i < n; i++) {
        int l = snprintf(p, 16, "[PAD%lld]", (long long)i);
        spt_set(t, i, p, (size_t)l, -10000.0f, IQF_SPM_UNUSED);
        p += l + 1;
    }
    for (int64_t i = 0; i < m->n_pieces && i < n; i++) {
        const iqf_spm_piece *pc = &m->pieces[i];
        /* IsUnknown, IsControl, IsUnused, IsByte in that order; NORMAL and USER_DEFINED give NORMAL */
        int32_t ty = pc->type == IQF_SPM_USER_DEFINED ? IQF_SPM_NORMAL : pc->type;
        spt_set(t, i, pc->s, pc->len, pc->score, ty);
    }
    return 0;
}

static int cmp_key(const void *a, const void *b) {
    yyjson_val *x = *(yyjson_val *const *)a, *y = *(yyjson_val *const *)b;
    size_t lx = yyjson_get_len(x), ly = yyjson_get_len(y), m = lx < ly ? lx : ly;
    int c = memcmp(yyjson_get_str(x), yyjson_get_str(y), m);
    return c ? c : (lx > ly) - (lx < ly);
}

/* added_tokens.json: {"text": id, ...}, each a USER_DEFINED token of score -1000. */
static int64_t spm_added_json(spt *t, yyjson_val *root, const char *path, char *err, size_t errlen) {
    if (!yyjson_is_obj(root)) return sfail(err, errlen, "%s: not a JSON object", path);
    size_t nk = yyjson_obj_size(root), i, max;
    yyjson_val *k, *v;
    if (nk > 1) { /* a text given twice: Python's dict keeps one of them; refused here */
        yyjson_val **keys = malloc(nk * sizeof *keys);
        if (!keys) return sfail(err, errlen, "%s: out of memory", path);
        yyjson_obj_foreach(root, i, max, k, v) keys[i] = k;
        qsort(keys, nk, sizeof *keys, cmp_key);
        bool dup = false;
        for (size_t j = 1; j < nk && !dup; j++) dup = !cmp_key(&keys[j - 1], &keys[j]);
        free(keys);
        if (dup) return sfail(err, errlen, "%s: a token text appears twice", path);
    }
    yyjson_obj_foreach(root, i, max, k, v) {
        int64_t id;
        if (!iqf_json_int(v, &id) || id < 0)
            return sfail(err, errlen, "%s: the id of entry %zu is not a non-negative integer", path, i);
        if (id >= t->n) continue; /* "ignore token: id is out of range" */
        spt_set(t, id, yyjson_get_str(k), yyjson_get_len(k), -1000.0f, IQF_SPM_USER_DEFINED);
    }
    return 0;
}

/* tokenizer_config.json's added_tokens_decoder: {"id": {"content": ..., "special": ...}, ...}. */
static int64_t spm_added_decoder(spt *t, yyjson_val *dec, bool (*looks_special)(const char *, size_t),
                                 const char *path, char *err, size_t errlen) {
    if (!yyjson_is_obj(dec)) return sfail(err, errlen, "%s: added_tokens_decoder is not an object", path);
    size_t i, max;
    yyjson_val *k, *v;
    yyjson_obj_foreach(dec, i, max, k, v) {
        const char *ks = yyjson_get_str(k);
        size_t kl = yyjson_get_len(k);
        bool digits = kl > 0;
        int64_t id = 0;
        for (size_t j = 0; j < kl && digits; j++) {
            digits = ks[j] >= '0' && ks[j] <= '9';
            if (id < ((int64_t)1 << 40)) id = id * 10 + (ks[j] - '0');
        }
        if (!digits)
            return sfail(err, errlen, "%s: added_tokens_decoder entry %zu: the key is not a token id", path, i);
        size_t cl;
        const char *c = iqf_json_str(iqf_json_get(v, "content"), &cl);
        if (!c) return sfail(err, errlen, "%s: added_tokens_decoder entry %zu has no content string", path, i);
        if (id >= t->n) continue;
        if (truthy(iqf_json_get(v, "special")) || looks_special(c, cl)) {
            spt_set(t, id, c, cl, -1000.0f, IQF_SPM_CONTROL);
            continue;
        }
        /* pre-normalize user-defined spaces: U+2581 -> ' ' */
        char *o = malloc(cl + 1);
        if (!o) return sfail(err, errlen, "%s: out of memory", path);
        size_t n = 0;
        for (size_t j = 0; j < cl;) {
            if (j + 3 <= cl && !memcmp(c + j, "\xe2\x96\x81", 3)) { o[n++] = ' '; j += 3; }
            else o[n++] = c[j++];
        }
        o[n] = 0;
        spt_set(t, id, o, n, -1000.0f, IQF_SPM_USER_DEFINED);
        t->owned[id] = o;
    }
    return 0;
}

/* find_hparam(["vocab_size_per_layer_input", "vocab_size"], optional=True) or tokenizer.vocab_size() */
static int64_t spm_count(const char *dir, yyjson_val *hp, const iqf_spm *m, char *err, size_t errlen) {
    int64_t n = m->n_pieces;
    const char *vsk = "vocab_size_per_layer_input";
    yyjson_val *vs = iqf_json_get(hp, vsk);
    if (!vs) vs = iqf_json_get(hp, vsk = "vocab_size");
    if (vs && !yyjson_is_null(vs)) {
        int64_t x;
        if (!iqf_json_int(vs, &x) || x < 0 || x > IQF_SPM_MAX_VOCAB)
            return sfail(err, errlen, "%s/config.json: bad %s", dir, vsk);
        if (x) n = x;
    }
    return n;
}

int64_t iqf_cv_spm_n_tokens(const char *dir, yyjson_val *hp, char *err, size_t errlen) {
    char mp[4096];
    snprintf(mp, sizeof mp, "%s/tokenizer.model", dir);
    iqf_spm *m = iqf_spm_read_file(mp, err, errlen);
    if (!m) return -1;
    int64_t n = spm_count(dir, hp, m, err, errlen);
    iqf_spm_free(m);
    return n;
}

int64_t iqf_cv_spm_vocab(const char *dir, yyjson_val *hp, yyjson_val *tc, bool llama_prefix, iqf_gguf_writer *w,
                         bool (*looks_special)(const char *s, size_t len), char *err, size_t errlen) {
    char mp[4096], tcp[4096], ap[4096];
    snprintf(mp, sizeof mp, "%s/tokenizer.model", dir);
    snprintf(tcp, sizeof tcp, "%s/tokenizer_config.json", dir);
    snprintf(ap, sizeof ap, "%s/added_tokens.json", dir);
    if (tc && !yyjson_is_obj(tc)) return sfail(err, errlen, "%s: not a JSON object", tcp);
    /* LlamaModel.set_vocab writes this first */
    yyjson_val *aps = llama_prefix ? iqf_json_get(tc, "add_prefix_space") : NULL;
    if (aps && !yyjson_is_null(aps)) {
        if (!yyjson_is_bool(aps)) return sfail(err, errlen, "%s: add_prefix_space is not a boolean", tcp);
        if (iqf_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", yyjson_get_bool(aps)) != IQF_OK)
            return sfail(err, errlen, "%s", iqf_gguf_writer_error(w));
    }
    iqf_spm *m = iqf_spm_read_file(mp, err, errlen);
    if (!m) return -1;
    int64_t n = spm_count(dir, hp, m, err, errlen), rc = -1;
    if (n < 0) {
        iqf_spm_free(m);
        return -1;
    }
    spt t;
    memset(&t, 0, sizeof t);
    yyjson_doc *added = NULL;
    struct stat sb;
    if (spm_base(&t, m, n, err, errlen, mp)) goto out;
    if (stat(ap, &sb) == 0 && S_ISREG(sb.st_mode)) {
        if (!(added = iqf_json_read_file(ap, err, errlen))) goto out;
        if (spm_added_json(&t, yyjson_doc_get_root(added), ap, err, errlen)) goto out;
    }
    yyjson_val *dec = iqf_json_get(tc, "added_tokens_decoder");
    if (dec && spm_added_decoder(&t, dec, looks_special, tcp, err, errlen)) goto out;
    if (iqf_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") != IQF_OK ||
        iqf_gguf_writer_set_str(w, "tokenizer.ggml.pre", "default") != IQF_OK ||
        iqf_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", t.tok, t.len, (uint64_t)n) != IQF_OK ||
        iqf_gguf_writer_set_arr(w, "tokenizer.ggml.scores", IQF_GGUF_F32, t.score, (uint64_t)n) != IQF_OK ||
        iqf_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", IQF_GGUF_I32, t.type, (uint64_t)n) != IQF_OK) {
        sfail(err, errlen, "%s", iqf_gguf_writer_error(w));
        goto out;
    }
    rc = n;
out:
    yyjson_doc_free(added);
    spt_free(&t);
    iqf_spm_free(m);
    return rc;
}
