/*
 * vocab.c - the tokenizer keys of iqforge convert, as the converter writes them:
 *   CV_VOCAB_LLAMA  LlamaModel.set_vocab: a tokenizer.json BPE with byte fallback (Llama 2,
 *                   Mistral) -> gguf-py's LlamaHfVocab ("llama", scores -1000, byte/control
 *                   types); any other tokenizer.json -> the GPT-2 path below
 *   CV_VOCAB_GPT2   _set_vocab_gpt2: tokens and types (get_vocab_base), tokenizer.ggml.pre by
 *                   identification (archs.c iqf_cv_pres), merges
 *   all             gguf-py's SpecialVocab: special token ids (tokenizer_config.json then
 *                   config.json), add_*_token (tokenizer.json's post-processor, then
 *                   tokenizer_config.json), the chat template, the normalizer flags.
 * A SentencePiece tokenizer.model: spm.c (then SpecialVocab here) for CV_VOCAB_LLAMA, _SPM and
 * _GEMMA, ignored by CV_VOCAB_GPT2 (convert_internal.h says which model class does what).
 */
#include "iqforge.h"

#include "convert_internal.h"
#include "json.h"
#include "spm.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TT_NORMAL 1
#define TT_UNUSED 5
#define TT_CONTROL 3
#define TT_USER 4
#define TT_BYTE 6
#define MAX_VOCAB (1 << 24)

typedef struct vb {
    const char *dir;
    char tj_path[4096], tc_path[4096];
    yyjson_doc *tj, *tc;     /* tokenizer.json, tokenizer_config.json (may be NULL) */
    yyjson_val *hp;          /* config.json */
    char *err;
    size_t errlen;
    iqf_gguf_writer *w;
    bool llama; /* LlamaModel.set_vocab (CV_VOCAB_LLAMA): CodeLlama and granite vocab_size cases */
    /* id -> token */
    const char **tok;
    size_t *len;
    int32_t *type;
    float *score;
    char **owned; /* replaced strings */
    int64_t n;
} vb;

static int vfail(vb *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int vfail(vb *v, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->err, v->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

#define VW(x) do { if ((x) != IQF_OK) return vfail(v, "%s", iqf_gguf_writer_error(v->w)); } while (0)

static bool file_exists(const char *dir, const char *name) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* ---- SpecialVocab -------------------------------------------------------------------------- */

enum { SP_BOS, SP_EOS, SP_UNK, SP_SEP, SP_PAD, SP_CLS, SP_MASK, SP_EOT, SP_EOM, SP_PRE, SP_SUF, SP_MID, SP_N };
static const char *const sp_names[SP_N] = { "bos", "eos", "unk", "sep", "pad", "cls", "mask", "eot", "eom",
                                            "prefix", "suffix", "middle" };
static const char *const sp_keys[SP_N] = {
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id", NULL /* no handler for cls */,
    "tokenizer.ggml.mask_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
    "tokenizer.ggml.prefix_token_id", "tokenizer.ggml.suffix_token_id", "tokenizer.ggml.middle_token_id",
};

typedef struct spv {
    int types[SP_N];
    int n_types;
    int id_order[SP_N]; /* insertion order of special ids */
    int64_t id[SP_N];
    int n_ids;
    int add_order[SP_N];
    bool add[SP_N];
    bool has_add[SP_N];
    int n_add;
    /* tokenizer_config string values of X_token we may override (NULL: absent/not a string) */
    const char *tc_tok[SP_N];
    bool tc_present;
    int lower, strip; /* tokenizer.json normalizer flags: -1 unset, else 0/1 */
} spv;

static void sp_set_add(spv *s, int t, bool val) {
    if (!s->has_add[t]) s->add_order[s->n_add++] = t;
    s->has_add[t] = true;
    s->add[t] = val;
}

static void sp_set_id(spv *s, int t, int64_t id, int64_t n_vocab) {
    if (id < 0) return;
    if (n_vocab >= 0 && id >= n_vocab) return;
    for (int i = 0; i < s->n_ids; i++)
        if (s->id_order[i] == t) return;
    s->id_order[s->n_ids++] = t;
    s->id[t] = id;
}

static bool streq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

static const char *special_tok_id(yyjson_val *entry) {
    return iqf_json_str(iqf_json_get(iqf_json_get(entry, "SpecialToken"), "id"), NULL);
}
static const char *seq_id(yyjson_val *entry) {
    return iqf_json_str(iqf_json_get(iqf_json_get(entry, "Sequence"), "id"), NULL);
}

static void sp_template(spv *s, yyjson_val *proc) {
    yyjson_val *single = iqf_json_get(proc, "single"), *pair = iqf_json_get(proc, "pair");
    size_t ns = yyjson_is_arr(single) ? yyjson_arr_size(single) : 0;
    const char *first = NULL, *last = NULL;
    const char **bos = &s->tc_tok[SP_BOS], **cls = &s->tc_tok[SP_CLS], **eos = &s->tc_tok[SP_EOS];
    if (ns > 1) {
        if ((first = special_tok_id(yyjson_arr_get(single, 0))) && *first) {
            if (!s->tc_present) *bos = first;
            else if (!streq(first, *bos) && !streq(first, *cls)) {
                if (!*bos) *bos = first;
                if (!*cls) *cls = first;
            }
            sp_set_add(s, SP_BOS, streq(first, *bos) || streq(first, *cls));
        } else
            first = NULL;
        if ((last = special_tok_id(yyjson_arr_get(single, ns - 1))) && *last) {
            if (!s->tc_present) *eos = last;
            else if (!streq(last, *eos)) {
                int extra = -1;
                bool has_eot = false, has_eom = false;
                for (int i = 0; i < s->n_types; i++) {
                    if (s->types[i] == SP_EOT) has_eot = true;
                    if (s->types[i] == SP_EOM) has_eom = true;
                }
                if (!has_eot) extra = SP_EOT;
                else if (!has_eom) extra = SP_EOM;
                if (extra >= 0) {
                    s->types[s->n_types++] = extra;
                    s->tc_tok[extra] = *eos;
                }
                *eos = last;
            }
            sp_set_add(s, SP_EOS, streq(last, *eos));
        } else
            last = NULL;
    }
    size_t np = yyjson_is_arr(pair) ? yyjson_arr_size(pair) : 0;
    if (np) {
        size_t a = (first && streq(special_tok_id(yyjson_arr_get(pair, 0)), first)) ? 1 : 0;
        size_t b = (last && streq(special_tok_id(yyjson_arr_get(pair, np - 1)), last)) ? np - 1 : np;
        if (a < b) {
            const char *ta = seq_id(yyjson_arr_get(pair, a)), *tb = seq_id(yyjson_arr_get(pair, b - 1));
            if (streq(ta, "A") && streq(tb, "B") && b - a > 2) {
                size_t m0 = a + 1, m1 = b - 1; /* middle [m0, m1) */
                bool add_sep = false;
                const char *sep = s->tc_tok[SP_SEP];
                const char *e = special_tok_id(yyjson_arr_get(pair, m0));
                if (e && *e && (streq(e, sep) || streq(e, *eos)) && !last) add_sep = true;
                if (m1 - m0 == 2) {
                    const char *e2 = special_tok_id(yyjson_arr_get(pair, m0 + 1));
                    if (e2 && *e2 && (streq(e2, sep) || streq(e2, *eos))) add_sep = true;
                }
                sp_set_add(s, SP_SEP, add_sep);
                if (add_sep && !sep && s->tc_present) s->tc_tok[SP_SEP] = *eos;
            }
        }
    }
}

/* tokenizer.ggml.merges from tokenizer.json's model.merges (strings, or pairs joined by a space
 * with a space inside a part written as U+0120). */
static int sv_merges(vb *v, yyjson_val *tj) {
    yyjson_val *m = iqf_json_get(iqf_json_get(tj, "model"), "merges");
    size_t nm = yyjson_is_arr(m) ? yyjson_arr_size(m) : 0;
    if (nm) {
        char **ms = calloc(nm, sizeof *ms);
        size_t *ml = calloc(nm, sizeof *ml);
        if (!ms || !ml) {
            free(ms);
            free(ml);
            return vfail(v, "%s: out of memory", v->tj_path);
        }
        bool str_form = yyjson_is_str(yyjson_arr_get_first(m));
        int rc = 0;
        size_t i, max;
        yyjson_val *e;
        yyjson_arr_foreach(m, i, max, e) {
            if (str_form) {
                if (!yyjson_is_str(e)) { rc = vfail(v, "%s: merge %zu is not a string", v->tj_path, i); break; }
                ms[i] = (char *)yyjson_get_str(e);
                ml[i] = yyjson_get_len(e);
                continue;
            }
            if (!yyjson_is_arr(e) || yyjson_arr_size(e) != 2 || !yyjson_is_str(yyjson_arr_get(e, 0)) ||
                !yyjson_is_str(yyjson_arr_get(e, 1))) {
                rc = vfail(v, "%s: merge %zu is not a pair of strings", v->tj_path, i);
                break;
            }
            /* "a b", a space inside a part written as U+0120 */
            size_t la = yyjson_get_len(yyjson_arr_get(e, 0)), lb = yyjson_get_len(yyjson_arr_get(e, 1));
            char *o = malloc(2 * (la + lb) + 2);
            if (!o) { rc = vfail(v, "%s: out of memory", v->tj_path); break; }
            size_t k = 0;
            for (int part = 0; part < 2; part++) {
                const char *src = yyjson_get_str(yyjson_arr_get(e, (size_t)part));
                size_t l = part ? lb : la;
                for (size_t j = 0; j < l; j++) {
                    if (src[j] == ' ') { o[k++] = (char)0xC4; o[k++] = (char)0xA0; }
                    else o[k++] = src[j];
                }
                if (!part) o[k++] = ' ';
            }
            o[k] = 0;
            ms[i] = o;
            ml[i] = k;
        }
        if (!rc && iqf_gguf_writer_set_arr_str(v->w, "tokenizer.ggml.merges", (const char *const *)ms, ml, nm) != IQF_OK)
            rc = vfail(v, "%s", iqf_gguf_writer_error(v->w));
        if (!str_form)
            for (size_t j = 0; j < nm; j++) free(ms[j]);
        free(ms);
        free(ml);
        if (rc) return rc;
    }
    return 0;
}

/* tokenizer.chat_template: tokenizer_config's, else chat_template.jinja / chat_template.json. */
static int sv_chat_template(vb *v, yyjson_val *tc) {
    yyjson_val *ct = iqf_json_get(tc, "chat_template");
    yyjson_doc *alt = NULL;
    char *jinja = NULL;
    if (!ct) {
        char p[4096];
        snprintf(p, sizeof p, "%s/chat_template.jinja", v->dir);
        FILE *f = fopen(p, "rb");
        if (f) {
            if (file_exists(v->dir, "additional_chat_templates")) {
                fclose(f);
                return vfail(v, "%s/additional_chat_templates: several chat templates are not supported yet", v->dir);
            }
            size_t cap = 1 << 16, n = 0;
            jinja = malloc(cap);
            while (jinja) {
                size_t got = fread(jinja + n, 1, cap - n, f);
                n += got;
                if (n < cap) break;
                if (cap >= ((size_t)64 << 20)) { free(jinja); jinja = NULL; break; }
                char *nj = realloc(jinja, cap *= 2);
                if (!nj) { free(jinja); jinja = NULL; }
                jinja = nj;
            }
            fclose(f);
            if (!jinja) return vfail(v, "%s: unreadable or too large", p);
            iqf_status st = iqf_gguf_writer_set_strn(v->w, "tokenizer.chat_template", jinja, n);
            free(jinja);
            VW(st);
            return 0;
        }
        snprintf(p, sizeof p, "%s/chat_template.json", v->dir);
        if (file_exists(v->dir, "chat_template.json")) {
            alt = iqf_json_read_file(p, v->err, v->errlen);
            if (!alt) return -1;
            ct = iqf_json_get(yyjson_doc_get_root(alt), "chat_template");
        }
    }
    int rc = 0;
    if (yyjson_is_str(ct)) {
        if (iqf_gguf_writer_set_strn(v->w, "tokenizer.chat_template", yyjson_get_str(ct), yyjson_get_len(ct)) != IQF_OK)
            rc = vfail(v, "%s", iqf_gguf_writer_error(v->w));
    } else if (yyjson_is_arr(ct))
        rc = vfail(v, "%s: a list of chat templates is not supported yet", v->tc_path);
    yyjson_doc_free(alt);
    if (rc) return rc;
    return 0;
}

/* gguf-py's SpecialVocab._parse_normalizer: Lowercase, StripAccents, BertNormalizer's
 * lowercase / strip_accents (a JSON null leaves the flag unset), Sequence recursively. */
static int sv_normalizer(vb *v, spv *s, yyjson_val *n, int depth) {
    if (!yyjson_is_obj(n)) return 0;
    if (depth > 64) return vfail(v, "%s: normalizer nested too deeply", v->tj_path);
    const char *ty = iqf_json_str(iqf_json_get(n, "type"), NULL);
    if (streq(ty, "Lowercase")) s->lower = 1;
    else if (streq(ty, "StripAccents")) s->strip = 1;
    else if (streq(ty, "BertNormalizer")) {
        const char *names[2] = { "lowercase", "strip_accents" };
        int *flags[2] = { &s->lower, &s->strip };
        for (int i = 0; i < 2; i++) {
            yyjson_val *f = iqf_json_get(n, names[i]);
            if (!f) continue;
            if (yyjson_is_null(f)) *flags[i] = -1;
            else if (yyjson_is_bool(f)) *flags[i] = yyjson_get_bool(f);
            else return vfail(v, "%s: normalizer %s is not a boolean", v->tj_path, names[i]);
        }
    } else if (streq(ty, "Sequence")) {
        size_t i, max;
        yyjson_val *e;
        yyjson_arr_foreach(iqf_json_get(n, "normalizers"), i, max, e) {
            if (sv_normalizer(v, s, e, depth + 1)) return -1;
        }
    }
    return 0;
}

/* SpecialVocab(dir, load_merges, special_token_types, n_vocab)._load: the special ids and
 * add_*_token flags of `types` from tokenizer.json (post_processor, added_tokens, normalizer),
 * tokenizer_config.json and config.json; merges written when load_merges (they come first in
 * add_to_gguf). n_vocab < 0: no range check (the converter passes None). */
static int sv_compute(vb *v, spv *s, const int *types, int n_types, bool load_merges, int64_t n_vocab) {
    memset(s, 0, sizeof *s);
    s->lower = s->strip = -1;
    for (int i = 0; i < n_types; i++) s->types[s->n_types++] = types[i];
    yyjson_val *tj = v->tj ? yyjson_doc_get_root(v->tj) : NULL;
    yyjson_val *tc = v->tc ? yyjson_doc_get_root(v->tc) : NULL;
    s->tc_present = tc && yyjson_is_obj(tc) && yyjson_obj_size(tc) > 0;
    yyjson_val *added = tj ? iqf_json_get(tj, "added_tokens") : NULL;
    if (load_merges && tj && sv_merges(v, tj)) return -1;
    if (tj && sv_normalizer(v, s, iqf_json_get(tj, "normalizer"), 0)) return -1;
    if (tc && !yyjson_is_obj(tc)) return vfail(v, "%s: not a JSON object", v->tc_path);
    for (int t = 0; t < SP_N; t++) {
        char k[32];
        snprintf(k, sizeof k, "%s_token", sp_names[t]);
        s->tc_tok[t] = iqf_json_str(iqf_json_get(tc, k), NULL);
        if (!s->tc_tok[t]) s->tc_tok[t] = iqf_json_str(iqf_json_get(iqf_json_get(tc, k), "content"), NULL);
        if (s->tc_tok[t] && !*s->tc_tok[t]) s->tc_tok[t] = NULL; /* falsy in Python */
    }
    if (tj) {
        if (!s->tc_tok[SP_BOS] && s->tc_tok[SP_CLS] && s->tc_present) s->tc_tok[SP_BOS] = s->tc_tok[SP_CLS];
        if (!s->tc_tok[SP_EOS] && s->tc_tok[SP_SEP] && s->tc_present) s->tc_tok[SP_EOS] = s->tc_tok[SP_SEP];
        yyjson_val *pp = iqf_json_get(tj, "post_processor");
        if (yyjson_is_obj(pp)) {
            yyjson_val *procs = iqf_json_get(pp, "processors");
            size_t np = yyjson_is_arr(procs) ? yyjson_arr_size(procs) : 1;
            for (size_t i = 0; i < np; i++) {
                yyjson_val *p = yyjson_is_arr(procs) ? yyjson_arr_get(procs, i) : pp;
                const char *ty = iqf_json_str(iqf_json_get(p, "type"), NULL);
                if (streq(ty, "RobertaProcessing")) {
                    sp_set_add(s, SP_BOS, true);
                    sp_set_add(s, SP_EOS, true);
                    sp_set_add(s, SP_SEP, true);
                    if (!s->tc_tok[SP_CLS] && s->tc_present) s->tc_tok[SP_CLS] = s->tc_tok[SP_BOS];
                    if (!s->tc_tok[SP_SEP] && s->tc_present) s->tc_tok[SP_SEP] = s->tc_tok[SP_EOS];
                } else if (streq(ty, "TemplateProcessing"))
                    sp_template(s, p);
            }
        }
    }
    if (s->tc_present) {
        for (int ti = 0; ti < s->n_types; ti++) {
            int t = s->types[ti];
            char k[32];
            snprintf(k, sizeof k, "add_%s_token", sp_names[t]);
            yyjson_val *a = iqf_json_get(tc, k);
            if (yyjson_is_bool(a)) sp_set_add(s, t, yyjson_get_bool(a));
            const char *content = s->tc_tok[t];
            if (!content) continue;
            size_t i, max;
            yyjson_val *e;
            yyjson_arr_foreach(added, i, max, e) {
                if (streq(iqf_json_str(iqf_json_get(e, "content"), NULL), content)) {
                    int64_t id;
                    if (iqf_json_int(iqf_json_get(e, "id"), &id)) sp_set_id(s, t, id, n_vocab);
                    break;
                }
            }
        }
    }
    for (int ti = 0; ti < s->n_types; ti++) {
        int t = s->types[ti];
        char k[32];
        snprintf(k, sizeof k, "%s_token_id", sp_names[t]);
        int64_t id;
        if (iqf_json_int(iqf_json_get(v->hp, k), &id)) sp_set_id(s, t, id, n_vocab);
    }
    for (int i = 0; i < s->n_ids; i++)
        if (s->id[s->id_order[i]] > UINT32_MAX)
            return vfail(v, "%s: special token id %lld out of range", v->tc_path, (long long)s->id[s->id_order[i]]);
    return 0;
}

static const char *sp_add_key(int t) {
    return t == SP_BOS ? "tokenizer.ggml.add_bos_token" : t == SP_EOS ? "tokenizer.ggml.add_eos_token"
         : t == SP_SEP ? "tokenizer.ggml.add_sep_token" : NULL;
}

static bool sp_has_id(const spv *s, int t) {
    for (int i = 0; i < s->n_ids; i++)
        if (s->id_order[i] == t) return true;
    return false;
}

/* SpecialVocab.add_to_gguf for `s` (merges already written by sv_compute): ids, add flags,
 * chat template, normalizer flags. LlamaModel.set_vocab then, for CodeLlama (config vocab_size
 * 32016), makes a second SpecialVocab of prefix/suffix/middle/eot with ids 32007-32010 where the
 * files name none, and for vocab_size 49152 sets add_bos_token false. gguf-py's writer
 * overwrites a key in place while ours appends, so those later values are folded into the first
 * pass's keys here and only keys new to the file are written after it. */
static int special_vocab(vb *v, bool load_merges, int64_t n_vocab) {
    static const int std_types[] = { SP_BOS, SP_EOS, SP_UNK, SP_SEP, SP_PAD, SP_CLS, SP_MASK };
    static const int code_types[] = { SP_PRE, SP_SUF, SP_MID, SP_EOT };
    spv s, c;
    if (sv_compute(v, &s, std_types, 7, load_merges, n_vocab)) return -1;
    int64_t vs = 32000;
    yyjson_val *vsv = iqf_json_get(v->hp, "vocab_size");
    if (vsv && !iqf_json_int(vsv, &vs)) vs = -1;
    const bool code = v->llama && vs == 32016, granite = v->llama && vs == 49152;
    if (code) {
        if (sv_compute(v, &c, code_types, 4, false, -1)) return -1;
        for (int i = 0; i < 4; i++) sp_set_id(&c, code_types[i], 32007 + i, -1);
        for (int i = 0; i < c.n_ids; i++) /* a key the first pass wrote takes the later value in place */
            if (sp_has_id(&s, c.id_order[i])) s.id[c.id_order[i]] = c.id[c.id_order[i]];
        for (int i = 0; i < c.n_add; i++)
            if (s.has_add[c.add_order[i]]) s.add[c.add_order[i]] = c.add[c.add_order[i]];
    }
    if (granite && s.has_add[SP_BOS]) s.add[SP_BOS] = false;
    for (int i = 0; i < s.n_ids; i++) {
        int t = s.id_order[i];
        if (sp_keys[t]) VW(iqf_gguf_writer_set_u32(v->w, sp_keys[t], (uint32_t)s.id[t]));
    }
    for (int i = 0; i < s.n_add; i++) {
        const char *key = sp_add_key(s.add_order[i]);
        if (key) VW(iqf_gguf_writer_set_bool(v->w, key, s.add[s.add_order[i]]));
    }
    if (s.tc_present && sv_chat_template(v, yyjson_doc_get_root(v->tc))) return -1;
    if (s.lower >= 0) VW(iqf_gguf_writer_set_bool(v->w, "tokenizer.ggml.normalizer.lowercase", s.lower));
    if (s.strip >= 0) VW(iqf_gguf_writer_set_bool(v->w, "tokenizer.ggml.normalizer.strip_accents", s.strip));
    if (code) {
        for (int i = 0; i < c.n_ids; i++) {
            int t = c.id_order[i];
            if (!sp_has_id(&s, t) && sp_keys[t]) VW(iqf_gguf_writer_set_u32(v->w, sp_keys[t], (uint32_t)c.id[t]));
        }
        for (int i = 0; i < c.n_add; i++) {
            const char *key = sp_add_key(c.add_order[i]);
            if (key && !s.has_add[c.add_order[i]]) VW(iqf_gguf_writer_set_bool(v->w, key, c.add[c.add_order[i]]));
        }
    }
    if (granite && !s.has_add[SP_BOS]) VW(iqf_gguf_writer_set_bool(v->w, "tokenizer.ggml.add_bos_token", false));
    return 0;
}

/* ---- token tables -------------------------------------------------------------------------- */

static int alloc_tables(vb *v, int64_t n) {
    v->n = n;
    v->tok = calloc((size_t)n, sizeof *v->tok);
    v->len = calloc((size_t)n, sizeof *v->len);
    v->type = calloc((size_t)n, sizeof *v->type);
    v->score = calloc((size_t)n, sizeof *v->score);
    v->owned = calloc((size_t)n, sizeof *v->owned);
    if (!v->tok || !v->len || !v->type || !v->score || !v->owned) return vfail(v, "%s: out of memory", v->tj_path);
    return 0;
}

/* id -> token of the base vocabulary and the added tokens (added ones last, as
 * tokenizer.get_vocab() lists them); returns max id + 1 or -1. */
static int64_t fill_ids(vb *v, yyjson_val *vocab, yyjson_val *added, int64_t n, bool with_added) {
    int64_t maxid = -1;
    size_t i, max;
    yyjson_val *k, *val;
    yyjson_obj_foreach(vocab, i, max, k, val) {
        int64_t id;
        if (!iqf_json_int(val, &id) || id < 0 || id >= MAX_VOCAB)
            return vfail(v, "%s: vocabulary id of token %zu is not an integer in [0, %d)", v->tj_path, i, MAX_VOCAB);
        if (id > maxid) maxid = id;
        if (id < n) {
            v->tok[id] = yyjson_get_str(k);
            v->len[id] = yyjson_get_len(k);
        }
    }
    if (with_added) {
        yyjson_arr_foreach(added, i, max, val) {
            int64_t id;
            size_t l;
            const char *s = iqf_json_str(iqf_json_get(val, "content"), &l);
            if (!s || !iqf_json_int(iqf_json_get(val, "id"), &id) || id < 0 || id >= MAX_VOCAB)
                return vfail(v, "%s: added token %zu has no content or a bad id", v->tj_path, i);
            if (id > maxid) maxid = id;
            if (id < n) {
                v->tok[id] = s;
                v->len[id] = l;
            }
        }
    }
    return maxid + 1;
}

static yyjson_val *find_added_by_content(yyjson_val *added, const char *s, size_t l) {
    size_t i, max;
    yyjson_val *e;
    yyjson_arr_foreach(added, i, max, e) {
        size_t el;
        const char *c = iqf_json_str(iqf_json_get(e, "content"), &el);
        if (c && el == l && !memcmp(c, s, l)) return e;
    }
    return NULL;
}

/* The added tokens sorted by content, for lookups in the vocabulary loop. */
typedef struct added_ix {
    const char *s;
    size_t l;
    yyjson_val *e;
} added_ix;

static int cmp_added(const void *a, const void *b) {
    const added_ix *x = a, *y = b;
    size_t m = x->l < y->l ? x->l : y->l;
    int c = memcmp(x->s, y->s, m);
    return c ? c : (x->l > y->l) - (x->l < y->l);
}

static added_ix *added_index(yyjson_val *added, size_t *n) {
    size_t cnt = yyjson_is_arr(added) ? yyjson_arr_size(added) : 0, k = 0;
    added_ix *ix = malloc((cnt ? cnt : 1) * sizeof *ix);
    if (!ix) return NULL;
    size_t i, max;
    yyjson_val *e;
    yyjson_arr_foreach(added, i, max, e) {
        size_t l;
        const char *c = iqf_json_str(iqf_json_get(e, "content"), &l);
        if (c) ix[k++] = (added_ix){ c, l, e };
    }
    qsort(ix, k, sizeof *ix, cmp_added);
    *n = k;
    return ix;
}

static yyjson_val *added_lookup(const added_ix *ix, size_t n, const char *s, size_t l) {
    added_ix key = { s, l, NULL };
    const added_ix *hit = bsearch(&key, ix, n, sizeof *ix, cmp_added);
    if (!hit) return NULL;
    while (hit > ix && !cmp_added(hit - 1, &key)) hit--;
    return hit->e;
}

static bool starts(const char *s, size_t l, const char *p) { size_t n = strlen(p); return l >= n && !memcmp(s, p, n); }
static bool ends(const char *s, size_t l, const char *p) { size_t n = strlen(p); return l >= n && !memcmp(s + l - n, p, n); }

static bool looks_special(const char *s, size_t l) {
    static const char *const fixed[] = { "<pad>", "<mask>", "<2mass>", "[@BOS@]" };
    for (int i = 0; i < 4; i++)
        if (l == strlen(fixed[i]) && !memcmp(s, fixed[i], l)) return true;
    if (starts(s, l, "<|") && ends(s, l, "|>") && l >= 4) return true;
    if (starts(s, l, "<\xef\xbd\x9c") && ends(s, l, "\xef\xbd\x9c>") && l >= 8) return true;
    if (starts(s, l, "<unused") && ends(s, l, ">")) return true;
    return false;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t fnv_val(uint64_t h, yyjson_val *val) {
    size_t l = 0;
    char *s = val ? yyjson_val_write(val, YYJSON_WRITE_NOFLAG, &l) : NULL;
    if (s) {
        h = fnv(h, s, l);
        free(s);
    } else
        h = fnv(h, "null", 4);
    return fnv(h, "\n", 1);
}

/* The identification fingerprint (see archs.c iqf_cv_pres). */
static uint64_t vocab_fingerprint(vb *v, yyjson_val *tj) {
    yyjson_val *model = iqf_json_get(tj, "model");
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv_val(h, iqf_json_get(tj, "normalizer"));
    h = fnv_val(h, iqf_json_get(tj, "pre_tokenizer"));
    h = fnv_val(h, iqf_json_get(model, "type"));
    h = fnv_val(h, iqf_json_get(model, "ignore_merges"));
    h = fnv_val(h, iqf_json_get(model, "byte_fallback"));
    for (int64_t i = 0; i < v->n; i++) {
        if (v->tok[i]) h = fnv(h, v->tok[i], v->len[i]);
        h = fnv(h, "", 1);
    }
    return fnv_val(h, iqf_json_get(model, "merges"));
}

static int vocab_gpt2(vb *v) {
    yyjson_val *tj = yyjson_doc_get_root(v->tj);
    yyjson_val *model = iqf_json_get(tj, "model");
    yyjson_val *vocab = iqf_json_get(model, "vocab");
    yyjson_val *added = iqf_json_get(tj, "added_tokens");
    if (!yyjson_is_obj(vocab)) return vfail(v, "%s: model.vocab is not an object", v->tj_path);
    if (added && !yyjson_is_arr(added)) return vfail(v, "%s: added_tokens is not a list", v->tj_path);
    int64_t n;
    yyjson_val *vs = iqf_json_get(v->hp, "vocab_size");
    /* first pass: the size of tokenizer.vocab */
    if (alloc_tables(v, 0)) return -1;
    int64_t need = fill_ids(v, vocab, added, 0, true);
    if (need < 0) return -1;
    if (vs && !yyjson_is_null(vs)) {
        if (!iqf_json_int(vs, &n) || n < 1 || n > MAX_VOCAB) return vfail(v, "%s/config.json: bad vocab_size", v->dir);
    } else
        n = need; /* len(tokenizer.vocab) for a dense vocabulary */
    if (need > n)
        return vfail(v, "%s: token id %lld is not below vocab_size %lld", v->tj_path, (long long)(need - 1), (long long)n);
    free(v->tok); free(v->len); free(v->type); free(v->score); free(v->owned);
    if (alloc_tables(v, n)) return -1;
    if (fill_ids(v, vocab, added, n, true) < 0) return -1;
    /* the pre-tokenizer name */
    uint64_t fp = vocab_fingerprint(v, tj);
    const char *pre = NULL;
    for (int i = 0; i < iqf_cv_n_pres; i++)
        if (iqf_cv_pres[i].fingerprint == fp) pre = iqf_cv_pres[i].pre;
    if (getenv("IQF_CONVERT_SHOW_FINGERPRINT")) fprintf(stderr, "%s: fingerprint 0x%016llxull\n", v->tj_path, (unsigned long long)fp);
    if (!pre)
        return vfail(v, "%s: BPE pre-tokenizer not recognized (fingerprint %016llx): this tokenizer is not supported",
                     v->tj_path, (unsigned long long)fp);
    size_t n_ix = 0;
    added_ix *ix = added_index(added, &n_ix);
    if (!ix) return vfail(v, "%s: out of memory", v->tj_path);
    int rc = 0;
    for (int64_t i = 0; i < n && !rc; i++) {
        if (!v->tok[i]) {
            char buf[32];
            int l = snprintf(buf, sizeof buf, "[PAD%lld]", (long long)i);
            v->owned[i] = strdup(buf);
            if (!v->owned[i]) {
                rc = vfail(v, "%s: out of memory", v->tj_path);
                break;
            }
            v->tok[i] = v->owned[i];
            v->len[i] = (size_t)l;
            v->type[i] = TT_UNUSED;
            continue;
        }
        /* get_vocab_base: `token in added_vocab` (by content), then added_tokens_decoder[i] */
        yyjson_val *a = added_lookup(ix, n_ix, v->tok[i], v->len[i]);
        if (a) {
            int64_t aid;
            if (!(iqf_json_int(iqf_json_get(a, "id"), &aid) && aid == i)) {
                size_t j, jm;
                yyjson_val *e2;
                yyjson_val *byid = NULL;
                yyjson_arr_foreach(added, j, jm, e2) {
                    if (iqf_json_int(iqf_json_get(e2, "id"), &aid) && aid == i) {
                        byid = e2;
                        break;
                    }
                }
                if (!byid) {
                    rc = vfail(v, "%s: token %lld has an added token's text but is not an added token", v->tj_path,
                               (long long)i);
                    break;
                }
                a = byid;
            }
        }
        if (!a) {
            v->type[i] = TT_NORMAL;
            continue;
        }
        if (yyjson_is_true(iqf_json_get(a, "special")) || looks_special(v->tok[i], v->len[i])) {
            v->type[i] = TT_CONTROL;
            continue;
        }
        v->type[i] = TT_USER;
        /* pre-normalize user-defined spaces: U+2581 -> ' ' */
        const char *s = v->tok[i];
        size_t l = v->len[i];
        if (memmem(s, l, "\xe2\x96\x81", 3)) {
            char *o = malloc(l + 1);
            if (!o) {
                rc = vfail(v, "%s: out of memory", v->tj_path);
                break;
            }
            size_t k = 0;
            for (size_t j = 0; j < l;) {
                if (j + 3 <= l && !memcmp(s + j, "\xe2\x96\x81", 3)) { o[k++] = ' '; j += 3; }
                else o[k++] = s[j++];
            }
            o[k] = 0;
            v->owned[i] = o;
            v->tok[i] = o;
            v->len[i] = k;
        }
    }
    free(ix);
    if (rc) return rc;
    VW(iqf_gguf_writer_set_str(v->w, "tokenizer.ggml.model", "gpt2"));
    VW(iqf_gguf_writer_set_str(v->w, "tokenizer.ggml.pre", pre));
    VW(iqf_gguf_writer_set_arr_str(v->w, "tokenizer.ggml.tokens", v->tok, v->len, (uint64_t)n));
    VW(iqf_gguf_writer_set_arr(v->w, "tokenizer.ggml.token_type", IQF_GGUF_I32, v->type, (uint64_t)n));
    return special_vocab(v, true, -1);
}

static bool is_byte_token(const char *s, size_t l) {
    return l == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && isxdigit((unsigned char)s[3]) &&
           isxdigit((unsigned char)s[4]) && s[5] == '>';
}

static int64_t vocab_id_of(yyjson_val *vocab, yyjson_val *added, const char *s) {
    int64_t id;
    yyjson_val *a = find_added_by_content(added, s, strlen(s));
    if (a && iqf_json_int(iqf_json_get(a, "id"), &id)) return id;
    if (iqf_json_int(yyjson_obj_get(vocab, s), &id)) return id;
    return -1;
}

/* gguf-py LlamaHfVocab over tokenizer.json. */
static int vocab_llama_hf(vb *v) {
    yyjson_val *tj = yyjson_doc_get_root(v->tj);
    yyjson_val *tc = v->tc ? yyjson_doc_get_root(v->tc) : NULL;
    yyjson_val *vocab = iqf_json_get(iqf_json_get(tj, "model"), "vocab");
    yyjson_val *added = iqf_json_get(tj, "added_tokens");
    if (!yyjson_is_obj(vocab)) return vfail(v, "%s: model.vocab is not an object", v->tj_path);
    if (added && !yyjson_is_arr(added)) return vfail(v, "%s: added_tokens is not a list", v->tj_path);
    int64_t base = (int64_t)yyjson_obj_size(vocab);
    if (base < 1 || base > MAX_VOCAB) return vfail(v, "%s: vocabulary of %lld tokens", v->tj_path, (long long)base);
    /* added tokens beyond the base vocabulary, by id */
    int64_t n_extra = 0, max_extra = -1;
    size_t i, max;
    yyjson_val *e;
    yyjson_arr_foreach(added, i, max, e) {
        int64_t id;
        if (!iqf_json_str(iqf_json_get(e, "content"), NULL) || !iqf_json_int(iqf_json_get(e, "id"), &id) || id < 0 ||
            id >= MAX_VOCAB)
            return vfail(v, "%s: added token %zu has no content or a bad id", v->tj_path, i);
        if (id >= base) {
            n_extra++;
            if (id > max_extra) max_extra = id;
        }
    }
    int64_t n = base + n_extra;
    if (alloc_tables(v, n)) return -1;
    if (fill_ids(v, vocab, added, base, false) < 0) return -1;
    for (int64_t k = 0; k < base; k++)
        if (!v->tok[k]) return vfail(v, "%s: vocabulary has no token with id %lld", v->tj_path, (long long)k);
    /* the special ids: bos, eos, unk, pad, additional_special_tokens of tokenizer_config */
    int64_t sp[512];
    int nsp = 0;
    static const char *const names[] = { "bos_token", "eos_token", "unk_token", "pad_token" };
    for (int k = 0; k < 4; k++) {
        yyjson_val *x = iqf_json_get(tc, names[k]);
        const char *s = iqf_json_str(x, NULL);
        if (!s) s = iqf_json_str(iqf_json_get(x, "content"), NULL);
        if (s && nsp < 512) {
            int64_t id = vocab_id_of(vocab, added, s);
            if (id >= 0) sp[nsp++] = id;
        }
    }
    yyjson_val *ast = iqf_json_get(tc, "additional_special_tokens");
    yyjson_arr_foreach(ast, i, max, e) {
        const char *s = iqf_json_str(e, NULL);
        if (!s) s = iqf_json_str(iqf_json_get(e, "content"), NULL);
        if (s && nsp < 512) {
            int64_t id = vocab_id_of(vocab, added, s);
            if (id >= 0) sp[nsp++] = id;
        }
    }
    for (int64_t k = 0; k < base; k++) {
        bool special = false;
        for (int j = 0; j < nsp; j++) special |= sp[j] == k;
        v->score[k] = -1000.0f;
        v->type[k] = is_byte_token(v->tok[k], v->len[k]) ? TT_BYTE : special ? TT_CONTROL : TT_NORMAL;
    }
    /* added tokens >= base, sorted by id */
    int64_t o = base, last = -1;
    for (int64_t k = 0; k < n_extra; k++) {
        int64_t best = -1;
        yyjson_val *be = NULL;
        yyjson_arr_foreach(added, i, max, e) {
            int64_t id;
            iqf_json_int(iqf_json_get(e, "id"), &id);
            if (id >= base && id > last && (best < 0 || id < best)) {
                best = id;
                be = e;
            }
        }
        if (!be) break;
        last = best;
        size_t l;
        const char *s = iqf_json_str(iqf_json_get(be, "content"), &l);
        bool special = false;
        for (int j = 0; j < nsp; j++) special |= sp[j] == best;
        v->tok[o] = s;
        v->len[o] = l;
        v->score[o] = -1000.0f;
        v->type[o] = special ? TT_CONTROL : TT_USER;
        o++;
    }
    if (o != n) return vfail(v, "%s: added tokens share ids", v->tj_path);
    VW(iqf_gguf_writer_set_str(v->w, "tokenizer.ggml.model", "llama"));
    VW(iqf_gguf_writer_set_str(v->w, "tokenizer.ggml.pre", "default"));
    VW(iqf_gguf_writer_set_arr_str(v->w, "tokenizer.ggml.tokens", v->tok, v->len, (uint64_t)n));
    VW(iqf_gguf_writer_set_arr(v->w, "tokenizer.ggml.scores", IQF_GGUF_F32, v->score, (uint64_t)n));
    VW(iqf_gguf_writer_set_arr(v->w, "tokenizer.ggml.token_type", IQF_GGUF_I32, v->type, (uint64_t)n));
    return special_vocab(v, false, n);
}

static void vb_free(vb *v) {
    if (v->owned)
        for (int64_t i = 0; i < v->n; i++) free(v->owned[i]);
    free(v->owned);
    free(v->tok);
    free(v->len);
    free(v->type);
    free(v->score);
    yyjson_doc_free(v->tj);
    yyjson_doc_free(v->tc);
}

int iqf_cv_vocab(const char *dir, const char *cfg_path, yyjson_val *hp, int kind, iqf_gguf_writer *w, char *err,
                 size_t errlen);
int iqf_cv_vocab(const char *dir, const char *cfg_path, yyjson_val *hp, int kind, iqf_gguf_writer *w, char *err,
                 size_t errlen) {
    (void)cfg_path;
    vb v;
    memset(&v, 0, sizeof v);
    v.dir = dir;
    v.hp = hp;
    v.err = err;
    v.errlen = errlen;
    v.w = w;
    v.llama = kind == CV_VOCAB_LLAMA;
    int rc = -1;
    snprintf(v.tj_path, sizeof v.tj_path, "%s/tokenizer.json", dir);
    snprintf(v.tc_path, sizeof v.tc_path, "%s/tokenizer_config.json", dir);
    if (file_exists(dir, "tokenizer_config.json") && !(v.tc = iqf_json_read_file(v.tc_path, err, errlen))) goto out;
    if (kind != CV_VOCAB_GPT2 && file_exists(dir, "tokenizer.model")) { /* _set_vocab_sentencepiece (spm.c) */
        /* its SpecialVocab reads tokenizer.json too where there is one (post_processor, added
         * tokens, normalizer), as Llama 2, Mistral and CodeLlama checkpoints ship both */
        if (file_exists(dir, "tokenizer.json") && !(v.tj = iqf_json_read_file(v.tj_path, err, errlen))) goto out;
        int64_t n = iqf_cv_spm_vocab(dir, hp, v.tc ? yyjson_doc_get_root(v.tc) : NULL, kind == CV_VOCAB_LLAMA, w,
                                     looks_special, err, errlen);
        rc = n < 0 ? -1 : special_vocab(&v, false, n);
        if (!rc && kind == CV_VOCAB_GEMMA && iqf_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", false))
            rc = vfail(&v, "%s", iqf_gguf_writer_error(w));
        goto out;
    }
    if (!(v.tj = iqf_json_read_file(v.tj_path, err, errlen))) goto out;
    yyjson_val *tj = yyjson_doc_get_root(v.tj);
    if (!yyjson_is_obj(tj) || !yyjson_is_obj(iqf_json_get(tj, "model"))) {
        vfail(&v, "%s: no model object", v.tj_path);
        goto out;
    }
    yyjson_val *model = iqf_json_get(tj, "model");
    const char *mt = iqf_json_str(iqf_json_get(model, "type"), NULL);
    if (!streq(mt, "BPE")) {
        vfail(&v, "%s: tokenizer model type %.40s is not supported (BPE only)", v.tj_path, mt ? mt : "(none)");
        goto out;
    }
    if (kind == CV_VOCAB_LLAMA) {
        yyjson_val *tc = v.tc ? yyjson_doc_get_root(v.tc) : NULL;
        yyjson_val *aps = iqf_json_get(tc, "add_prefix_space");
        if (aps && !yyjson_is_null(aps)) {
            if (!yyjson_is_bool(aps)) {
                vfail(&v, "%s: add_prefix_space is not a boolean", v.tc_path);
                goto out;
            }
            if (iqf_gguf_writer_set_bool(w, "tokenizer.ggml.add_space_prefix", yyjson_get_bool(aps)) != IQF_OK) {
                vfail(&v, "%s", iqf_gguf_writer_error(w));
                goto out;
            }
        }
        yyjson_val *bf = iqf_json_get(model, "byte_fallback");
        bool byte_fallback = yyjson_is_true(bf);
        bool llama3 = yyjson_is_true(iqf_json_get(model, "ignore_merges")) && !(bf ? byte_fallback : true);
        const char *dec = iqf_json_str(iqf_json_get(iqf_json_get(tj, "decoder"), "type"), NULL);
        if (!llama3 && byte_fallback && streq(dec, "Sequence")) {
            rc = vocab_llama_hf(&v);
            goto out;
        }
    }
    rc = vocab_gpt2(&v);
out:
    vb_free(&v);
    return rc;
}
