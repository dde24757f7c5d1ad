/* hessian_file.c - reader and writer of the Hessian GGUF (layout in hessian_file.h). */
#include "hessian_file.h"
#include "../util/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy_str(char *dst, size_t cap, const char *s) { snprintf(dst, cap, "%s", s ? s : ""); }

void iqf_hessian_model_id_get(const iqf_gguf *g, iqf_hessian_model_id *id) {
    memset(id, 0, sizeof *id);
    const char *s;
    if (iqf_gguf_get_str(g, "general.name", &s, NULL)) copy_str(id->name, sizeof id->name, s);
    if (iqf_gguf_get_str(g, "general.architecture", &s, NULL)) copy_str(id->arch, sizeof id->arch, s);
    char k[96];
    int64_t v;
    const char *keys[3] = { "embedding_length", "block_count", "feed_forward_length" };
    int64_t *dst[3] = { &id->n_embd, &id->n_layer, &id->n_ff };
    for (int i = 0; i < 3; i++) {
        snprintf(k, sizeof k, "%s.%s", id->arch, keys[i]);
        if (iqf_gguf_get_int(g, k, &v) && v >= 0 && v < (INT64_C(1) << 40)) *dst[i] = v;
    }
    int64_t kt = iqf_gguf_find_kv(g, "tokenizer.ggml.tokens");
    if (kt >= 0 && iqf_gguf_kv_type(g, kt) == IQF_GGUF_ARR) id->n_vocab = (int64_t)iqf_gguf_arr_n(g, kt);
}

/* The slot map (hessian_file.h): the owners in slot order, then the weights that share an owner's input. */
static const iqf_hessian_slot_row slot_map[] = {
    { "attn_k", "attn_qkv", 1 },          /* q/k/v's input */
    { "attn_output", "attn_output", 1 },
    { "ffn_gate", "ffn_gate_up", 1 },     /* gate/up's input */
    { "ffn_down", "ffn_down", 1 },
    { "attn_q_a", "attn_q_a", 1 },        /* deepseek2 */
    { "attn_q", "attn_qkv", 1 },          /* without attn_k: deepseek2 without q_lora, gemma4's shared-KV layers */
    { "attn_kv_a_mqa", "attn_kv_a_mqa", 1 },
    { "attn_q_b", "attn_q_b", 1 },
    { "ffn_gate_shexp", "ffn_gate_shexp", 1 }, /* the shared expert's gate, up and gate_inp_shexp */
    { "ffn_down_shexp", "ffn_down_shexp", 1 },
    { "attn_qkv", "attn_qkv", 1 },        /* qwen35's Gated-DeltaNet: also attn_gate's, ssm_alpha's, ssm_beta's */
    { "ssm_out", "ssm_out", 1 },
    { "inp_gate", "inp_gate", 1 },        /* gemma4's per-layer embeddings */
    { "proj", "proj", 1 },
    /* the experts' gate and up (and fused gate_up) share one per-expert entry */
    { "ffn_gate_up_exps", "ffn_gate_up_exps", 2 },
    { "ffn_gate_exps", "ffn_gate_up_exps", 2 },
    { "ffn_down_exps", "ffn_down_exps", 2 },
    { "attn_v", "attn_qkv", 0 },
    { "ffn_up", "ffn_gate_up", 0 },
    { "ffn_up_exps", "ffn_gate_up_exps", 0 },
    { "ffn_up_shexp", "ffn_gate_shexp", 0 },
    { "ffn_gate_inp_shexp", "ffn_gate_shexp", 0 },
    { "attn_gate", "attn_qkv", 0 },
    { "ssm_alpha", "attn_qkv", 0 },
    { "ssm_beta", "attn_qkv", 0 },
};

const iqf_hessian_slot_row *iqf_hessian_slot_map(int *n) {
    *n = (int)(sizeof slot_map / sizeof slot_map[0]);
    return slot_map;
}

bool iqf_hessian_name_for(const char *weight, char *out, size_t outlen) {
    size_t n = strlen(weight);
    const char *suf = ".weight";
    if (n < 7 || strcmp(weight + n - 7, suf)) return false;
    char base[128];
    if (n - 7 >= sizeof base) return false;
    memcpy(base, weight, n - 7);
    base[n - 7] = 0;
    size_t b = n - 7;
    for (size_t i = 0; i < sizeof slot_map / sizeof slot_map[0]; i++) {
        size_t f = strlen(slot_map[i].tensor);
        /* base ends in ".<tensor>" */
        if (b > f && base[b - f - 1] == '.' && !strcmp(base + b - f, slot_map[i].tensor)) {
            base[b - f] = 0;
            int r = snprintf(out, outlen, "%s%s.hessian", base, slot_map[i].slot);
            return r > 0 && (size_t)r < outlen;
        }
    }
    int r = snprintf(out, outlen, "%s.hessian", base);
    return r > 0 && (size_t)r < outlen;
}

static int64_t entry_values(const iqf_hessian_wentry *e) { return e->n * e->bs * (e->n_mat > 1 ? e->n_mat : 1); }

/* What value j of an entry is multiplied by to make a mean: 1/count, or 1/counts[expert] (0 for
 * an expert without rows, whose sums are 0). */
static double entry_scale(const iqf_hessian_wentry *e, int64_t j) {
    if (e->n_mat <= 1) return 1.0 / (double)e->count;
    const int64_t c = e->counts[j / (e->n * e->bs)];
    return c > 0 ? 1.0 / (double)c : 0.0;
}

iqf_status iqf_hessian_write(const char *path, const iqf_hessian_wentry *e, int n,
                             const iqf_hessian_meta *meta, char *err, size_t errlen) {
    if (!path || !meta || n < 0 || (n > 0 && !e)) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid arguments");
    int64_t count = n > 0 ? e[0].count : 0;
    for (int i = 0; i < n; i++) {
        if (!e[i].name || !e[i].sum || e[i].n < 1 || e[i].bs < 1 || e[i].n % e[i].bs || e[i].count != count ||
            count < 1 || strlen(e[i].name) >= IQF_GGUF_MAX_NAME || e[i].n_mat < 0 || e[i].n_mat > IQF_HESSIAN_MAX_MATS ||
            (e[i].n_mat > 1 && !e[i].counts))
            return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "Hessian entry %d is malformed (or saw no tokens)", i);
        for (int64_t k = 0; e[i].n_mat > 1 && k < e[i].n_mat; k++)
            if (e[i].counts[k] < 0) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "Hessian entry %d has a negative count", i);
    }
    const int type = meta->f16 ? IQF_TYPE_F16 : IQF_TYPE_F32;
    const size_t esz = meta->f16 ? 2 : 4;
    /* check F16 range before anything is written */
    if (meta->f16)
        for (int i = 0; i < n; i++)
            for (int64_t j = 0; j < entry_values(&e[i]); j++)
                if (fabs(e[i].sum[j] * entry_scale(&e[i], j)) > 65504.0)
                    return iqf_fail(err, errlen, IQF_E_NONFINITE, "%s: %s has a value too large for F16 (use F32)", path, e[i].name);
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, errlen);
    if (!w) return IQF_E_IO;
    iqf_status st = iqf_gguf_writer_set_str(w, "general.type", "hessian");
    if (!st) st = iqf_gguf_writer_set_str(w, "hessian.model.name", meta->model.name);
    if (!st) st = iqf_gguf_writer_set_str(w, "hessian.model.architecture", meta->model.arch);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.model.n_embd", (uint32_t)meta->model.n_embd);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.model.n_layer", (uint32_t)meta->model.n_layer);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.model.n_ff", (uint32_t)meta->model.n_ff);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.model.n_vocab", (uint32_t)meta->model.n_vocab);
    if (!st) st = iqf_gguf_writer_set_u64(w, "hessian.token_count", (uint64_t)count);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.chunk_count", (uint32_t)meta->chunk_count);
    if (!st) st = iqf_gguf_writer_set_u32(w, "hessian.chunk_size", (uint32_t)meta->chunk_size);
    if (!st && meta->dataset) st = iqf_gguf_writer_set_str(w, "hessian.dataset", meta->dataset);
    /* the rows behind each expert's mean, so that files can be combined (hessian_combine.c) */
    for (int i = 0; i < n && !st; i++) {
        if (e[i].n_mat <= 1) continue;
        char key[IQF_GGUF_MAX_NAME + 32];
        snprintf(key, sizeof key, IQF_HESSIAN_EXPERT_COUNTS_KEY "%s", e[i].name);
        st = iqf_gguf_writer_set_arr(w, key, IQF_GGUF_U64, e[i].counts, (uint64_t)e[i].n_mat);
    }
    for (int i = 0; i < n && !st; i++) {
        int64_t ne[3] = { e[i].bs, e[i].n, e[i].n_mat > 1 ? e[i].n_mat : 1 };
        st = iqf_gguf_writer_add_tensor(w, e[i].name, e[i].n_mat > 1 ? 3 : 2, ne, type);
    }
    if (!st) st = iqf_gguf_writer_write_header(w);
    uint8_t buf[4096];
    for (int i = 0; i < n && !st; i++) {
        const int64_t tot = entry_values(&e[i]);
        for (int64_t j0 = 0; j0 < tot && !st; j0 += (int64_t)(sizeof buf / esz)) {
            int64_t m = tot - j0 < (int64_t)(sizeof buf / esz) ? tot - j0 : (int64_t)(sizeof buf / esz);
            for (int64_t j = 0; j < m; j++) {
                float f = (float)(e[i].sum[j0 + j] * entry_scale(&e[i], j0 + j));
                if (meta->f16) {
                    uint16_t h = iqf_fp32_to_fp16(f);
                    memcpy(buf + 2 * j, &h, 2);
                } else {
                    memcpy(buf + 4 * j, &f, 4);
                }
            }
            st = iqf_gguf_writer_write_data(w, buf, (size_t)m * esz);
        }
    }
    if (st) {
        iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(w));
        iqf_gguf_writer_abort(w);
        return st;
    }
    return iqf_gguf_writer_finish(w, err, errlen);
}

static float elem(const iqf_gguf_tensor *t, int64_t j) {
    if (t->type == IQF_TYPE_F16) {
        uint16_t h;
        memcpy(&h, (const uint8_t *)t->data + 2 * j, 2);
        return iqf_fp16_to_fp32(h);
    }
    float f;
    memcpy(&f, (const uint8_t *)t->data + 4 * j, 4);
    return f;
}

iqf_status iqf_hessian_open(const char *path, iqf_hessian_file *hf, char *err, size_t errlen) {
    memset(hf, 0, sizeof *hf);
    if (!path) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "NULL path");
    char msg[512];
    iqf_gguf *g = iqf_gguf_open(path, msg, sizeof msg);
    if (!g) return iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    iqf_status st = IQF_OK;
    const char *s;
    if (!iqf_gguf_get_str(g, "general.type", &s, NULL) || strcmp(s, "hessian")) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: not a Hessian file (general.type is not \"hessian\")", path);
        goto fail;
    }
    const char *name, *arch;
    uint32_t ne, nl, nf, nv, cc = 0, cs = 0;
    uint64_t tc;
    if (!iqf_gguf_get_str(g, "hessian.model.name", &name, NULL) ||
        !iqf_gguf_get_str(g, "hessian.model.architecture", &arch, NULL) ||
        !iqf_gguf_get_u32(g, "hessian.model.n_embd", &ne) || !iqf_gguf_get_u32(g, "hessian.model.n_layer", &nl) ||
        !iqf_gguf_get_u32(g, "hessian.model.n_ff", &nf) || !iqf_gguf_get_u32(g, "hessian.model.n_vocab", &nv)) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: hessian.model.* keys missing or of the wrong type", path);
        goto fail;
    }
    if (!iqf_gguf_get_u64(g, "hessian.token_count", &tc) || tc == 0) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: hessian.token_count missing, not a u64, or 0", path);
        goto fail;
    }
    iqf_gguf_get_u32(g, "hessian.chunk_count", &cc);
    iqf_gguf_get_u32(g, "hessian.chunk_size", &cs);
    copy_str(hf->model.name, sizeof hf->model.name, name);
    copy_str(hf->model.arch, sizeof hf->model.arch, arch);
    hf->model.n_embd = ne;
    hf->model.n_layer = nl;
    hf->model.n_ff = nf;
    hf->model.n_vocab = nv;
    hf->token_count = tc;
    hf->chunk_count = (int)(cc > INT32_MAX ? INT32_MAX : cc);
    hf->chunk_size = (int)(cs > INT32_MAX ? INT32_MAX : cs);
    const int64_t nt = iqf_gguf_n_tensors(g);
    if (nt < 1) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: no Hessian tensors", path);
        goto fail;
    }
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        size_t ln = strlen(t->name);
        if (ln < 9 || strcmp(t->name + ln - 8, ".hessian")) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: tensor '%s' is not named *.hessian", path, t->name);
            goto fail;
        }
        if (t->type != IQF_TYPE_F32 && t->type != IQF_TYPE_F16) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: tensor %s must be F32 or F16", path, t->name);
            goto fail;
        }
        const int64_t bs = t->ne[0], n = t->ne[1], nm = t->ne[2];
        if (t->ne[3] != 1 || bs < 1 || n % bs != 0 || nm < 1 || nm > IQF_HESSIAN_MAX_MATS) {
            st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: tensor %s has shape [%" PRId64 ", %" PRId64 ", %" PRId64
                          "]: want [block, width] or [block, width, experts] with width a multiple of block", path,
                          t->name, bs, n, t->ne[2] * t->ne[3]);
            goto fail;
        }
        for (int64_t r = 0; r < n * nm; r++)
            for (int64_t j = 0; j < bs; j++) {
                float v = elem(t, r * bs + j);
                if (!isfinite(v) || (j == r % bs && v < 0)) {
                    st = iqf_fail(err, errlen, IQF_E_NONFINITE, "%s: tensor %s has a %s value (%g) at row %" PRId64 ", column %" PRId64,
                                  path, t->name, isfinite(v) ? "negative diagonal" : "non-finite", (double)v, r, j);
                    goto fail;
                }
            }
    }
    hf->path = strdup(path);
    if (!hf->path) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto fail;
    }
    hf->g = g;
    return IQF_OK;
fail:
    iqf_gguf_close(g);
    memset(hf, 0, sizeof *hf);
    return st;
}

void iqf_hessian_close(iqf_hessian_file *hf) {
    if (!hf) return;
    iqf_gguf_close(hf->g);
    free(hf->path);
    memset(hf, 0, sizeof *hf);
}

bool iqf_hessian_find(const iqf_hessian_file *hf, const char *hname, int64_t *n, int64_t *bs) {
    if (!hf || !hf->g) return false;
    int64_t i = iqf_gguf_find_tensor(hf->g, hname);
    if (i < 0) return false;
    const iqf_gguf_tensor *t = iqf_gguf_tensor_at(hf->g, i);
    if (n) *n = t->ne[1];
    if (bs) *bs = t->ne[0];
    return true;
}

int64_t iqf_hessian_n_mat(const iqf_hessian_file *hf, const char *hname) {
    if (!hf || !hf->g) return 0;
    int64_t i = iqf_gguf_find_tensor(hf->g, hname);
    return i < 0 ? 0 : iqf_gguf_tensor_at(hf->g, i)->ne[2];
}

bool iqf_hessian_read_mat(const iqf_hessian_file *hf, const char *hname, int64_t mat, float *out) {
    if (!hf || !hf->g) return false;
    int64_t i = iqf_gguf_find_tensor(hf->g, hname);
    if (i < 0) return false;
    const iqf_gguf_tensor *t = iqf_gguf_tensor_at(hf->g, i);
    if (mat < 0 || mat >= t->ne[2]) return false;
    const int64_t m = t->ne[0] * t->ne[1], o = mat * m;
    if (t->type == IQF_TYPE_F32) memcpy(out, (const float *)t->data + o, (size_t)m * sizeof(float));
    else
        for (int64_t j = 0; j < m; j++) out[j] = elem(t, o + j);
    return true;
}

bool iqf_hessian_read(const iqf_hessian_file *hf, const char *hname, float *out) {
    return iqf_hessian_read_mat(hf, hname, 0, out);
}

/* The public reader (iqforge.h): the same file handle on the heap, entries found by weight name. */
iqf_status iqf_hessian_file_load(const char *path, iqf_hessian_file **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!path || !out) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "iqf_hessian_file_load: NULL argument");
    iqf_hessian_file *hf = calloc(1, sizeof *hf);
    if (!hf) return iqf_fail(err, errlen, IQF_E_NOMEM, "%s: out of memory", path);
    iqf_status st = iqf_hessian_open(path, hf, err, errlen);
    if (st) {
        free(hf);
        return st;
    }
    *out = hf;
    return IQF_OK;
}

void iqf_hessian_file_free(iqf_hessian_file *hf) {
    if (!hf) return;
    iqf_hessian_close(hf);
    free(hf);
}

bool iqf_hessian_file_find(const iqf_hessian_file *hf, const char *weight, int64_t *n, int64_t *bs) {
    char h[IQF_GGUF_MAX_NAME + 16];
    return hf && weight && iqf_hessian_name_for(weight, h, sizeof h) && iqf_hessian_find(hf, h, n, bs);
}

bool iqf_hessian_file_read(const iqf_hessian_file *hf, const char *weight, float *out) {
    char h[IQF_GGUF_MAX_NAME + 16];
    return hf && weight && out && iqf_hessian_name_for(weight, h, sizeof h) && iqf_hessian_read(hf, h, out);
}

int64_t iqf_hessian_file_n_experts(const iqf_hessian_file *hf, const char *weight) {
    char h[IQF_GGUF_MAX_NAME + 16];
    return hf && weight && iqf_hessian_name_for(weight, h, sizeof h) ? iqf_hessian_n_mat(hf, h) : 0;
}

bool iqf_hessian_file_read_expert(const iqf_hessian_file *hf, const char *weight, int64_t e, float *out) {
    char h[IQF_GGUF_MAX_NAME + 16];
    return hf && weight && out && iqf_hessian_name_for(weight, h, sizeof h) && iqf_hessian_read_mat(hf, h, e, out);
}
