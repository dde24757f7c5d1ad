/* override.c - --override-kv and --prune-layers (see override.h). */
#include "override.h"

#include "util/error.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

iqf_status iqf_kv_override_parse(const char *arg, iqf_kv_override *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    if (!arg) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv: missing KEY=TYPE:VALUE");
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || eq - arg >= (ptrdiff_t)sizeof o->key)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': malformed (want KEY=TYPE:VALUE, KEY 1 to 127 bytes)", arg);
    memcpy(o->key, arg, (size_t)(eq - arg));
    const char *v = eq + 1;
    if (!strncmp(v, "int:", 4)) {
        v += 4;
        char *end;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno || x > (long long)UINT32_MAX || x < -(long long)UINT32_MAX)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': int value must be a whole number with |value| <= 4294967295", arg);
        o->tag = IQF_KV_OVERRIDE_INT;
        o->val_i64 = x;
    } else if (!strncmp(v, "float:", 6)) {
        v += 6;
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || !isfinite(x) || !isfinite((float)x))
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': float value must be a finite number", arg);
        o->tag = IQF_KV_OVERRIDE_FLOAT;
        o->val_f64 = x;
    } else if (!strncmp(v, "bool:", 5)) {
        v += 5;
        if (strcmp(v, "true") && strcmp(v, "false"))
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': bool value must be true or false", arg);
        o->tag = IQF_KV_OVERRIDE_BOOL;
        o->val_bool = !strcmp(v, "true");
    } else if (!strncmp(v, "str:", 4)) {
        v += 4;
        if (strlen(v) > 127)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': str value cannot exceed 127 bytes", arg);
        o->tag = IQF_KV_OVERRIDE_STR;
        memcpy(o->val_str, v, strlen(v) + 1);
    } else {
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv '%s': invalid type (want int, float, bool or str)", arg);
    }
    return IQF_OK;
}

static int written_vtype(const iqf_kv_override *o) {
    switch (o->tag) {
    case IQF_KV_OVERRIDE_INT: return IQF_GGUF_U32;
    case IQF_KV_OVERRIDE_FLOAT: return IQF_GGUF_F32;
    case IQF_KV_OVERRIDE_BOOL: return IQF_GGUF_BOOL;
    case IQF_KV_OVERRIDE_STR: return IQF_GGUF_STR;
    }
    return -1;
}

/* The scalar type llama.cpp reads for key, -1 if it is not a scalar key of the schema. Done by
 * checking a one-KV GGUF in memory with the schema checker, so there is one table of rules. */
static bool schema_accepts(const iqf_kv_override *o, const char *arch, char *why, size_t whylen) {
    /* A small GGUF in memory: general.architecture (unless that is the key) + the override. */
    uint8_t buf[1024];
    size_t n = 0;
#define PUT(p, len) do { memcpy(buf + n, (p), (len)); n += (len); } while (0)
    const uint32_t ver = 3;
    const uint64_t nt = 0;
    const bool arch_kv = strcmp(o->key, "general.architecture") != 0 && arch && *arch && strlen(arch) < 200;
    const uint64_t nkv = arch_kv ? 2 : 1;
    PUT("GGUF", 4);
    PUT(&ver, 4);
    PUT(&nt, 8);
    PUT(&nkv, 8);
    if (arch_kv) {
        const char *k = "general.architecture";
        uint64_t kl = strlen(k), al = strlen(arch);
        uint32_t t = IQF_GGUF_STR;
        PUT(&kl, 8); PUT(k, kl); PUT(&t, 4); PUT(&al, 8); PUT(arch, al);
    }
    uint64_t kl = strlen(o->key);
    uint32_t t = (uint32_t)written_vtype(o);
    PUT(&kl, 8); PUT(o->key, kl); PUT(&t, 4);
    switch (o->tag) {
    case IQF_KV_OVERRIDE_INT: { uint32_t v = (uint32_t)llabs(o->val_i64); PUT(&v, 4); break; }
    case IQF_KV_OVERRIDE_FLOAT: { float v = (float)o->val_f64; PUT(&v, 4); break; }
    case IQF_KV_OVERRIDE_BOOL: { uint8_t v = o->val_bool; PUT(&v, 1); break; }
    case IQF_KV_OVERRIDE_STR: { uint64_t l = strlen(o->val_str); PUT(&l, 8); PUT(o->val_str, l); break; }
    }
#undef PUT
    char e[256];
    iqf_gguf *g = iqf_gguf_open_memory(buf, n, "--override-kv", e, sizeof e);
    if (!g) {
        snprintf(why, whylen, "%s", e);
        return false;
    }
    /* Only the key's own type: its range may depend on other keys of the real file. */
    int64_t i = iqf_gguf_find_kv(g, o->key);
    bool ok = true;
    if (i >= 0 && iqf_gguf_check_kv(g, i, e, sizeof e) != IQF_OK && strstr(e, " has type ")) {
        snprintf(why, whylen, "%s", e);
        ok = false;
    }
    iqf_gguf_close(g);
    return ok;
}

iqf_status iqf_kv_overrides_check(const iqf_kv_override *o, int n, const char *arch, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        char why[400];
        if (!o[i].key[0] || memchr(o[i].key, 0, sizeof o[i].key) == NULL)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv %d: empty or unterminated key", i + 1);
        if (written_vtype(&o[i]) < 0) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv %s: unknown type", o[i].key);
        if (!schema_accepts(&o[i], arch, why, sizeof why))
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--override-kv %s: %s", o[i].key, why);
    }
    return IQF_OK;
}

iqf_status iqf_kv_overrides_write(iqf_gguf_writer *w, const iqf_kv_override *o, int n) {
    iqf_status st = IQF_OK;
    for (int i = 0; i < n && !st; i++) {
        switch (o[i].tag) {
        case IQF_KV_OVERRIDE_FLOAT: st = iqf_gguf_writer_set_f32(w, o[i].key, (float)o[i].val_f64); break;
        case IQF_KV_OVERRIDE_INT: st = iqf_gguf_writer_set_u32(w, o[i].key, (uint32_t)llabs(o[i].val_i64)); break;
        case IQF_KV_OVERRIDE_BOOL: st = iqf_gguf_writer_set_bool(w, o[i].key, o[i].val_bool); break;
        case IQF_KV_OVERRIDE_STR: st = iqf_gguf_writer_set_str(w, o[i].key, o[i].val_str); break;
        }
    }
    return st;
}

void iqf_kv_overrides_hparams(const iqf_kv_override *o, int n, iqf_recipe_model *hp) {
    static const char *const keys[] = { "block_count", "attention.head_count", "attention.head_count_kv", "expert_count" };
    int *dst[] = { &hp->n_layer, &hp->n_head, &hp->n_head_kv, &hp->n_expert };
    const size_t al = strlen(hp->arch);
    for (int i = 0; i < n; i++) {
        if (o[i].tag != IQF_KV_OVERRIDE_INT || strncmp(o[i].key, hp->arch, al) || o[i].key[al] != '.') continue;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            if (!strcmp(o[i].key + al + 1, keys[k])) {
                /* the loader assigns the int64 to the u32 field */
                uint32_t v = (uint32_t)o[i].val_i64;
                *dst[k] = v > (1u << 20) ? (1 << 20) : (int)v;
            }
    }
}

void iqf_prune_init(iqf_prune_state *s, const int *layers, int n) {
    s->layers = layers;
    s->n = n;
    s->cur_blk = -1;
    s->cur_new = -1;
    s->next_id = 0;
}

iqf_status iqf_prune_check(const int *layers, int n, int n_layer, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (layers[i] < 0 || layers[i] >= n_layer)
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--prune-layers: layer %d does not exist (the model has %d)", layers[i], n_layer);
        if (i > 0 && layers[i] <= layers[i - 1])
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--prune-layers: the list must be sorted and unique");
    }
    if (n >= n_layer && n > 0) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--prune-layers: cannot prune every layer");
    return IQF_OK;
}

/* The first "blk.<digits>." in name (std::regex_search of blk\.(\d+)\.): start of the digits
 * and their count, or false. */
static bool find_blk(const char *name, size_t *pos, size_t *len, int64_t *blk) {
    for (const char *p = strstr(name, "blk."); p; p = strstr(p + 1, "blk.")) {
        const char *d = p + 4;
        size_t k = 0;
        while (isdigit((unsigned char)d[k])) k++;
        if (k == 0 || d[k] != '.' || k > 9) continue;
        *pos = (size_t)(d - name);
        *len = k;
        *blk = strtoll(d, NULL, 10);
        return true;
    }
    return false;
}

bool iqf_prune_remap(iqf_prune_state *s, const char *name, char *out, size_t cap) {
    size_t pos, len;
    int64_t blk;
    if (s->n == 0 || !find_blk(name, &pos, &len, &blk)) {
        snprintf(out, cap, "%s", name);
        return true;
    }
    if (blk != s->cur_blk) { /* tensors come in ascending layer order: the first of layer blk */
        s->cur_blk = blk;
        bool pruned = false;
        for (int i = 0; i < s->n; i++) pruned |= s->layers[i] == blk;
        if (pruned) {
            s->cur_new = -1;
        } else if (blk < s->layers[0]) {
            s->cur_new = blk;
            s->next_id = (int)blk + 1;
        } else {
            s->cur_new = s->next_id++;
        }
    }
    if (s->cur_new < 0) return false;
    snprintf(out, cap, "%.*s%" PRId64 "%s", (int)pos, name, s->cur_new, name + pos + len);
    return true;
}
