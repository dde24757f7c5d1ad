/*
 * pipeline.c - iqf_model_quantize: a GGUF model in, a quantized GGUF model out, as llama 0.25.1's
 * llama_model_quantize (src/llama-quant.cpp) plus llama-quantize's imatrix handling
 * (tools/quantize/quantize.cpp) do it:
 *   - tensors in the loader's order (layer number, then name), types from recipe.c;
 *   - KVs: the input's in order, then general.quantization_version = 2 and general.file_type
 *     (u32, moved to the end), split.* removed, then quantize.imatrix.{file,dataset,
 *     entries_count,chunks_count} when an imatrix is used (u32 counts, strings cut at 127 bytes);
 *   - every check that can fail runs before the first byte is written, and the output goes through
 *     the streaming GGUF writer (temp file + rename), so a failed run leaves no file.
 * Memory: the input is mapped; each tensor is converted to f32 and quantized in slabs of rows
 * (SLAB_FLOATS), and the pages of the input already consumed are dropped (MADV_DONTNEED), so the
 * peak RSS is a few slabs, not the model.
 */
#include "iqforge.h"
#include "../util/error.h"

#include "feedback.h"
#include "imatrix.h"
#include "override.h"
#include "recipe.h"

#include "../util/outfile.h"
#include "../util/progress.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLAB_FLOATS (4 << 20) /* 16 MiB of f32 per slab */


iqf_model_quantize_params iqf_model_quantize_default_params(void) {
    iqf_model_quantize_params p;
    memset(&p, 0, sizeof p);
    p.ftype = IQF_FTYPE_MOSTLY_Q8_0;
    p.output_tensor_type = -1;
    p.token_embedding_type = -1;
    p.hessian_damp = 0.01f;
    return p;
}

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
}

/* {arch}.KEY as an integer: scalar of any integer type, or element 0 of an integer array. */
static bool get_hparam(const iqf_gguf *g, const char *arch, const char *key, int64_t *out) {
    char k[256];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    if (iqf_gguf_get_int(g, k, out)) return true;
    int64_t i = iqf_gguf_find_kv(g, k);
    if (i >= 0 && iqf_gguf_kv_type(g, i) == IQF_GGUF_ARR && iqf_gguf_arr_n(g, i) > 0)
        return iqf_gguf_arr_int(g, i, 0, out);
    return false;
}

/* The layer counts llama's loader derives (llama_model::load_hparams and load_arch_hparams):
 * nextn_predict_layers; nanbeige runs its block_count - nextn physical layers num_loops times;
 * granite-switch adds a router layer. The recipe's counters run over that n_layer_all. */
static void recipe_layers(const iqf_gguf *g, iqf_recipe_model *hp) {
    int64_t v;
    hp->n_layer_nextn = get_hparam(g, hp->arch, "nextn_predict_layers", &v) && v >= 0 && v <= hp->n_layer ? (int)v : 0;
    const int phys = hp->n_layer - hp->n_layer_nextn;
    if (!strcmp(hp->arch, "nanbeige") && get_hparam(g, hp->arch, "num_loops", &v) && v > 1 && v * phys <= 512) {
        hp->n_layer = (int)(v * phys);
    } else if (!strcmp(hp->arch, "graniteswitch")) {
        hp->n_layer = phys + 1;
        hp->n_layer_nextn = 1;
    }
}

typedef struct plan_item {
    const iqf_gguf_tensor *t;
    iqf_recipe_choice choice;
    const float *imatrix; /* ne0 * ne2 values, or NULL */
} plan_item;

static int cmp_items(const void *a, const void *b) {
    return iqf_recipe_name_cmp(((const plan_item *)a)->t->name, ((const plan_item *)b)->t->name);
}

static void shape_str(const iqf_gguf_tensor *t, char *buf, size_t n) {
    snprintf(buf, n, "%5" PRId64 ", %5" PRId64 ", %5" PRId64 ", %5" PRId64, t->ne[0], t->ne[1], t->ne[2],
             t->ne[3]);
}

static void drop_pages(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || !p || !n) return;
    uintptr_t a = (uintptr_t)p, e = a + n;
    uintptr_t lo = (a + (uintptr_t)ps - 1) & ~((uintptr_t)ps - 1), hi = e & ~((uintptr_t)ps - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Asks the kernel to read ahead the input pages of the next slab while this one is quantized. */
static void prefetch(const void *p, size_t n) {
    long ps = sysconf(_SC_PAGESIZE);
    if (ps <= 0 || !p || !n) return;
    uintptr_t a = (uintptr_t)p & ~((uintptr_t)ps - 1);
    madvise((void *)a, n + ((uintptr_t)p - a), MADV_WILLNEED);
}

static bool is_float_type(int t) { return t == IQF_TYPE_F32 || t == IQF_TYPE_F16 || t == IQF_TYPE_BF16; }

/* Converts nrows rows of the input tensor (rows [r0, r0+nrows)) to f32 in dst (or returns a
 * pointer into the mapping for F32 input). */
static iqf_status rows_to_f32(const iqf_gguf_tensor *t, int64_t r0, int64_t nrows, float *buf,
                              const float **out, int n_threads, char *err, size_t errlen) {
    const size_t rs = iqf_row_size(t->type, t->ne[0]);
    const uint8_t *src = (const uint8_t *)t->data + (size_t)r0 * rs;
    if (t->type == IQF_TYPE_F32) {
        *out = (const float *)src;
        return IQF_OK;
    }
    iqf_status st = iqf_dequantize(t->type, src, buf, nrows, t->ne[0], n_threads, err, errlen);
    *out = buf;
    return st;
}

/* Everything one run of iqf_model_quantize holds. The stages below fill it in the order the data
 * flows (open and validate -> load the statistics -> order the tensors -> plan the types -> write
 * the header -> encode slab by slab -> commit), each returning IQF_OK or a status with err set;
 * job_free releases whatever the stages reached. Invariant: nothing is written to the output
 * before plan_types has accepted every tensor, and nothing is visible under the output's name
 * before commit_output. */
typedef struct quant_job {
    const char *in, *out;
    const iqf_model_quantize_params *p;
    FILE *log;              /* NULL when quiet or no log was given */
    int n_threads;
    char *err;
    size_t errlen;
    /* open_input */
    iqf_gguf *g;
    const char *arch;
    iqf_recipe_model hp;
    /* load_statistics */
    iqf_imatrix im;
    bool have_im;
    iqf_feedback *fb;
    /* order_tensors: items, rt and rc are parallel arrays of nt entries in output order */
    plan_item *items;
    iqf_recipe_tensor *rt;
    iqf_recipe_choice *rc;
    int64_t nt;
    char (*new_names)[IQF_GGUF_MAX_NAME]; /* --prune-layers: the renumbered names */
    uint32_t pruned_block_count;
    /* plan_types */
    iqf_recipe_override *ov;
    int n_ov;
    bool will_require_imatrix; /* dry run only */
    /* write_header: every output part (--keep-split), ws[0] holds the KVs */
    iqf_gguf_writer **ws;
    char **ws_path;
    int n_out;
    /* encode_tensors */
    float *f32buf;
    uint8_t *qbuf;
    size_t f32cap, qcap;
    iqf_model_quantize_report rep;
} quant_job;

/* Stage 1: open the input and read what the recipe needs (architecture, layer and head counts),
 * with --override-kv applied and --prune-layers checked. */
static iqf_status open_input(quant_job *j) {
    char msg[512];
    const iqf_model_quantize_params *p = j->p;
    j->g = iqf_gguf_open(j->in, msg, sizeof msg);
    if (!j->g) return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s", msg);
    if (iqf_gguf_check_schema(j->g, msg, sizeof msg)) /* keys llama.cpp reads, before anything is written */
        return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s", msg);
    iqf_recipe_model *hp = &j->hp;
    const char *arch;
    if (!iqf_gguf_get_str(j->g, "general.architecture", &arch, NULL) || !*arch || strlen(arch) >= sizeof hp->arch)
        return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s: general.architecture missing or not a string", j->in);
    j->arch = arch;
    snprintf(hp->arch, sizeof hp->arch, "%s", arch);
    int64_t v;
    if (!get_hparam(j->g, arch, "block_count", &v) || v < 0 || v > 100000)
        return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s: %s.block_count missing or invalid", j->in, arch);
    hp->n_layer = (int)v;
    hp->n_head = get_hparam(j->g, arch, "attention.head_count", &v) && v >= 0 && v < (1 << 20) ? (int)v : 0;
    hp->n_head_kv = get_hparam(j->g, arch, "attention.head_count_kv", &v) && v >= 0 && v < (1 << 20) ? (int)v : hp->n_head;
    hp->n_expert = get_hparam(j->g, arch, "expert_count", &v) && v >= 0 && v < (1 << 20) ? (int)v : 0;
    /* --override-kv (as llama's loader, the recipe sees overridden hyper-parameters), --prune-layers. */
    iqf_status st = iqf_kv_overrides_check(p->kv_overrides, p->n_kv_overrides, arch, j->err, j->errlen);
    if (!st) st = iqf_prune_check(p->prune_layers, p->n_prune_layers, hp->n_layer, j->err, j->errlen);
    if (!st) iqf_kv_overrides_hparams(p->kv_overrides, p->n_kv_overrides, hp);
    if (!st) recipe_layers(j->g, hp);
    return st;
}

/* Stage 2: the importance matrix (checked finite and non-negative) and the Hessian file. */
static iqf_status load_statistics(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    iqf_status st;
    if (p->imatrix_path) {
        if ((st = iqf_imatrix_load(p->imatrix_path, &j->im, j->err, j->errlen))) return st;
        const int n_loaded = j->im.n_entries;
        iqf_imatrix_filter(&j->im, p->include_weights, p->n_include, p->exclude_weights, p->n_exclude);
        for (int i = 0; i < j->im.n_entries; i++)
            for (int64_t c = 0; c < j->im.entries[i].n; c++) {
                const float x = j->im.entries[i].values[c];
                if (!isfinite(x) || x < 0)
                    return iqf_fail(j->err, j->errlen, IQF_E_NONFINITE, "%s: entry %s has a %s value (%g) at column %" PRId64,
                                    p->imatrix_path, j->im.entries[i].name, isfinite(x) ? "negative" : "non-finite",
                                    (double)x, c);
            }
        j->have_im = j->im.n_entries > 0;
        if (j->log)
            fprintf(j->log, "imatrix: loaded %d entries from %s computed on %d chunks; using %d\n", n_loaded,
                    p->imatrix_path, j->im.chunk_count, j->im.n_entries);
    }
    if (p->hessian_path)
        return iqf_feedback_open(p->hessian_path, j->g, p->hessian_damp, j->log, &j->fb, j->err, j->errlen);
    return IQF_OK;
}

/* Stage 3: the tensors in the order llama's loader writes them (layer number, then name), minus
 * pruned layers (renumbered), or by part and file offset with --keep-split. */
static iqf_status order_tensors(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    int64_t nt = iqf_gguf_n_tensors(j->g);
    const size_t cap = (size_t)(nt > 0 ? nt : 1);
    j->items = calloc(cap, sizeof *j->items);
    j->rt = calloc(cap, sizeof *j->rt);
    j->rc = calloc(cap, sizeof *j->rc);
    if (!j->items || !j->rt || !j->rc) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
    plan_item *items = j->items;
    iqf_recipe_tensor *rt = j->rt;
    for (int64_t i = 0; i < nt; i++) items[i].t = iqf_gguf_tensor_at(j->g, i);
    qsort(items, (size_t)nt, sizeof *items, cmp_items);
    for (int64_t i = 0; i < nt; i++) {
        rt[i].name = items[i].t->name;
        memcpy(rt[i].ne, items[i].t->ne, sizeof rt[i].ne);
        rt[i].type = items[i].t->type;
    }
    if (p->n_prune_layers > 0) { /* drop the pruned layers' tensors, renumber the rest */
        j->new_names = calloc(cap, sizeof *j->new_names);
        if (!j->new_names) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
        iqf_prune_state ps;
        iqf_prune_init(&ps, p->prune_layers, p->n_prune_layers);
        int64_t k = 0;
        for (int64_t i = 0; i < nt; i++)
            if (iqf_prune_remap(&ps, rt[i].name, j->new_names[k], sizeof j->new_names[k])) {
                items[k] = items[i];
                rt[k] = rt[i];
                rt[k].name = j->new_names[k];
                k++;
            }
        nt = k;
        j->pruned_block_count = (uint32_t)ps.next_id;
    }
    if (p->keep_split) { /* as llama, even for one part: by part, then file order */
        for (int64_t i = 1; i < nt; i++) { /* insertion sort keeps items and rt parallel */
            plan_item a = items[i];
            iqf_recipe_tensor b = rt[i];
            int64_t k = i;
            for (; k > 0 && (items[k - 1].t->part > a.t->part ||
                             (items[k - 1].t->part == a.t->part && items[k - 1].t->offset > a.t->offset)); k--) {
                items[k] = items[k - 1];
                rt[k] = rt[k - 1];
            }
            items[k] = a;
            rt[k] = b;
        }
    }
    j->nt = nt;
    return IQF_OK;
}

/* Stage 4: each tensor's type (recipe.c, with --tensor-type patterns), then every check that can
 * fail on the inputs: a missing or mismatched importance matrix, an input type that cannot be
 * converted, a target type this build cannot encode. */
static iqf_status plan_types(quant_job *j) {
    char msg[512];
    const iqf_model_quantize_params *p = j->p;
    iqf_status st;
    if (p->n_tensor_types > 0) {
        j->ov = calloc((size_t)p->n_tensor_types, sizeof *j->ov);
        if (!j->ov) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
        st = iqf_recipe_overrides_compile(p->tensor_type_patterns, p->tensor_type_types, p->n_tensor_types, j->ov,
                                          &j->n_ov, j->err, j->errlen);
        if (st) return st;
    }
    iqf_recipe_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ftype = p->ftype;
    ro.output_tensor_type = p->output_tensor_type;
    ro.token_embedding_type = p->token_embedding_type;
    ro.quantize_output_tensor = !p->leave_output_tensor;
    ro.pure = p->pure;
    ro.has_imatrix = j->have_im;
    ro.overrides = j->ov;
    ro.n_overrides = j->n_ov;
    st = iqf_recipe_plan(&j->hp, &ro, j->rt, (int)j->nt, j->rc, &j->rep.n_fallback, msg, sizeof msg);
    if (st) return iqf_fail(j->err, j->errlen, st, "%s: %s", j->in, msg);

    /* As the reference's preliminary loop: a file type that needs an imatrix fails first. */
    for (int64_t i = 0; i < j->nt; i++) {
        j->items[i].choice = j->rc[i];
        if (!j->have_im && j->rc[i].allows_quantization && j->rc[i].requires_imatrix) {
            if (!p->dry_run)
                return iqf_fail(j->err, j->errlen, IQF_E_NEED_IMATRIX,
                                "this quantization requires an importance matrix (--imatrix): tensor %s would be %s",
                                j->items[i].t->name, tname(j->rc[i].type));
            j->will_require_imatrix = true;
        }
    }
    int n_matched = 0;
    for (int64_t i = 0; i < j->nt; i++) {
        plan_item *it = &j->items[i];
        const iqf_gguf_tensor *t = it->t;
        const int nt_ = it->choice.type;
        if (j->have_im && iqf_imatrix_find(&j->im, t->name)) n_matched++;
        if (nt_ == t->type) continue;
        j->rep.n_quantized++;
        if (!iqf_type_get(nt_))
            return iqf_fail(j->err, j->errlen, IQF_E_UNKNOWN_TYPE, "tensor %s: invalid target type %d", t->name, nt_);
        if (!is_float_type(t->type)) {
            if (iqf_type_get(t->type)->is_quantized && !p->allow_requantize)
                return iqf_fail(j->err, j->errlen, IQF_E_UNSUPPORTED,
                                "%s: tensor %s is already quantized (%s); requantizing is disabled "
                                "(--allow-requantize; inputs should be F32, F16 or BF16)",
                                j->in, t->name, tname(t->type));
            if (!iqf_type_get(t->type)->is_quantized || !iqf_can_decode(t->type))
                return iqf_fail(j->err, j->errlen, IQF_E_UNSUPPORTED,
                                "%s: tensor %s has type %s, which cannot be converted (inputs: F32, F16, BF16)", j->in,
                                t->name, tname(t->type));
        }
        if (!iqf_can_encode(nt_) && !p->dry_run)
            return iqf_fail(j->err, j->errlen, IQF_E_UNSUPPORTED, "tensor %s: type %s cannot be encoded by this build",
                            t->name, tname(nt_));
        const iqf_imatrix_entry *e = j->have_im ? iqf_imatrix_find(&j->im, t->name) : NULL;
        if (e) {
            if (e->n == t->ne[0] * t->ne[2])
                it->imatrix = e->values;
            else if (strcmp(t->name, "token_embd.weight") && strcmp(t->name, "per_layer_token_embd.weight"))
                return iqf_fail(j->err, j->errlen, IQF_E_SHAPE,
                                "imatrix size %" PRId64 " is different from tensor size %" PRId64
                                " for %s (imatrix made for another model?)",
                                e->n, t->ne[0] * t->ne[2], t->name);
        }
        if (!it->imatrix && it->choice.requires_imatrix && !p->dry_run)
            return iqf_fail(j->err, j->errlen, IQF_E_NEED_IMATRIX,
                            "missing importance matrix for tensor %s in a very low-bit quantization (%s)", t->name,
                            tname(nt_));
        if (!it->imatrix && iqf_requires_imatrix(nt_) && !p->dry_run)
            return iqf_fail(j->err, j->errlen, IQF_E_NEED_IMATRIX,
                            "tensor %s: type %s cannot be made without an importance matrix", t->name, tname(nt_));
    }
    if (j->have_im && n_matched == 0)
        return iqf_fail(j->err, j->errlen, IQF_E_SHAPE,
                        "%s: none of its %d entries names a tensor of %s (imatrix made for another model?)",
                        p->imatrix_path, j->im.n_entries, j->in);
    return IQF_OK;
}

/* The KVs of the first output part: the input's in order, then llama-quantize's additions and
 * removals, then ours (encoder mode, error feedback). */
static iqf_status write_kvs(quant_job *j, iqf_gguf_writer *w) {
    const iqf_model_quantize_params *p = j->p;
    iqf_status st = IQF_OK;
    for (int64_t i = 0; i < iqf_gguf_n_kv(j->g) && !st; i++) st = iqf_gguf_writer_copy_kv(w, j->g, i);
    if (!st) st = iqf_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st) st = iqf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)p->ftype);
    if (!st) {
        iqf_gguf_writer_remove(w, "split.no");
        iqf_gguf_writer_remove(w, "split.count");
        iqf_gguf_writer_remove(w, "split.tensors.count");
    }
    if (!st) st = iqf_kv_overrides_write(w, p->kv_overrides, p->n_kv_overrides);
    if (!st && j->have_im) {
        char s[128];
        snprintf(s, sizeof s, "%s", p->imatrix_path);
        st = iqf_gguf_writer_set_str(w, "quantize.imatrix.file", s);
        if (!st && j->im.n_datasets > 0) {
            snprintf(s, sizeof s, "%s", j->im.datasets[0]);
            st = iqf_gguf_writer_set_str(w, "quantize.imatrix.dataset", s);
        }
        if (!st) st = iqf_gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)j->im.n_entries);
        if (!st && j->im.chunk_count > 0)
            st = iqf_gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", (uint32_t)j->im.chunk_count);
    }
    if (!st && p->n_prune_layers > 0) {
        char k[96];
        snprintf(k, sizeof k, "%s.block_count", j->arch);
        st = iqf_gguf_writer_set_u32(w, k, j->pruned_block_count);
    }
    /* compat writes llama-quantize's metadata exactly; any other encoder says so. */
    if (!st && p->mode != IQF_MODE_COMPAT) st = iqf_gguf_writer_set_str(w, "quantize.mode", iqf_mode_name(p->mode));
    if (!st && j->fb) st = iqf_feedback_write_meta(j->fb, w);
    return st;
}

/* Stage 5: open every output part (temp files), write the KVs and the tensor infos. */
static iqf_status write_header(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    iqf_status st = IQF_OK;
    j->n_out = p->keep_split ? iqf_gguf_n_parts(j->g) : 1;
    const int n_out = j->n_out;
    j->ws = calloc((size_t)n_out, sizeof *j->ws);
    j->ws_path = calloc((size_t)n_out, sizeof *j->ws_path);
    if (!j->ws || !j->ws_path) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
    for (int q = 0; q < n_out; q++) {
        size_t ol = strlen(j->out);
        if (p->keep_split && strstr(j->out, ".gguf") && ol >= 5) ol -= 5; /* llama-quantize's prefix */
        j->ws_path[q] = malloc(ol + 32);
        if (!j->ws_path[q]) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
        if (p->keep_split) snprintf(j->ws_path[q], ol + 32, "%.*s-%05d-of-%05d.gguf", (int)ol, j->out, q + 1, n_out);
        else snprintf(j->ws_path[q], ol + 32, "%s", j->out);
        j->ws[q] = iqf_gguf_writer_open(j->ws_path[q], j->err, j->errlen);
        if (!j->ws[q]) return IQF_E_IO;
        for (int k = 0; k < iqf_gguf_n_parts(j->g) && !st; k++)
            st = iqf_gguf_writer_set_input(j->ws[q], iqf_gguf_part_path(j->g, k));
        if (st) return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(j->ws[q]));
    }
    st = write_kvs(j, j->ws[0]);
    for (int q = 0; q < n_out && n_out > 1 && !st; q++) { /* gguf_set_val_*: appended last */
        st = iqf_gguf_writer_set_u16(j->ws[q], "split.no", (uint16_t)q);
        if (!st) st = iqf_gguf_writer_set_u16(j->ws[q], "split.count", (uint16_t)n_out);
        if (!st) st = iqf_gguf_writer_set_i32(j->ws[q], "split.tensors.count", (int32_t)j->nt);
    }
    for (int64_t i = 0; i < j->nt && !st; i++)
        st = iqf_gguf_writer_add_tensor(j->ws[n_out > 1 ? j->items[i].t->part : 0], j->rt[i].name,
                                        j->items[i].t->n_dims, j->items[i].t->ne, j->items[i].choice.type);
    for (int q = 0; q < n_out && !st; q++) st = iqf_gguf_writer_write_header(j->ws[q]);
    if (st) {
        iqf_gguf_writer *w = j->ws[0];
        for (int q = 0; q < n_out; q++)
            if (*iqf_gguf_writer_error(j->ws[q])) w = j->ws[q];
        return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(w));
    }
    return IQF_OK;
}

/* --dry-run: one line per tensor as llama-quantize prints it. */
static void print_plan_line(const quant_job *j, int64_t i, uint64_t new_size) {
    const plan_item *it = &j->items[i];
    const iqf_gguf_tensor *t = it->t;
    char sh[96];
    shape_str(t, sh, sizeof sh);
    if (it->choice.type != t->type)
        fprintf(j->log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.2f MiB -> %8.2f MiB (%s)%s\n",
                i + 1, j->nt, j->rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0,
                (double)new_size / 1048576.0, tname(it->choice.type), it->choice.fallback ? " (fallback)" : "");
    else
        fprintf(j->log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.3f MiB\n", i + 1, j->nt,
                j->rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0);
}

/* Grows the slab buffers to hold need_f floats and need_q bytes. */
static iqf_status slab_buffers(quant_job *j, size_t need_f, size_t need_q, const char *name) {
    if (need_f > j->f32cap) {
        free(j->f32buf);
        j->f32buf = malloc(need_f * sizeof(float));
        j->f32cap = j->f32buf ? need_f : 0;
    }
    if (need_q > j->qcap) {
        free(j->qbuf);
        j->qbuf = malloc(need_q);
        j->qcap = j->qbuf ? need_q : 0;
    }
    if (j->f32cap < need_f || j->qcap < need_q)
        return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory (tensor %s)", name);
    return IQF_OK;
}

/* One tensor that changes type: slabs of whole rows, never across an expert (each expert has its
 * own imatrix row), converted to f32, encoded (with error feedback when a Hessian is loaded),
 * written, and their input pages dropped. */
static iqf_status encode_tensor(quant_job *j, int64_t i, const iqf_quantize_params *qp, iqf_progress *prog,
                                int64_t *done_in) {
    char msg[512];
    const plan_item *it = &j->items[i];
    const iqf_gguf_tensor *t = it->t;
    const int new_type = it->choice.type;
    iqf_gguf_writer *wi = j->ws[j->n_out > 1 ? t->part : 0];
    const int64_t nrows_total = t->ne[1] * t->ne[2] * t->ne[3];
    const int64_t ncols = t->ne[0];
    const int64_t rows_per_expert = t->ne[1];
    const size_t src_rs = iqf_row_size(t->type, ncols), dst_rs = iqf_row_size(new_type, ncols);
    int64_t slab = SLAB_FLOATS / ncols;
    if (slab < 1) slab = 1;
    if (slab > rows_per_expert) slab = rows_per_expert;
    iqf_status st = slab_buffers(j, t->type == IQF_TYPE_F32 ? 0 : (size_t)(slab * ncols), (size_t)slab * dst_rs, t->name);
    if (st) return st;
    for (int64_t r = 0; r < nrows_total;) {
        const int64_t expert = r / rows_per_expert;
        const int64_t left_in_expert = rows_per_expert - r % rows_per_expert;
        const int64_t n = slab < left_in_expert ? slab : left_in_expert;
        const float *x;
        if (r + n < nrows_total) {
            const int64_t nn = nrows_total - (r + n) < slab ? nrows_total - (r + n) : slab;
            prefetch((const uint8_t *)t->data + (size_t)(r + n) * src_rs, (size_t)nn * src_rs);
        }
        st = rows_to_f32(t, r, n, j->f32buf, &x, j->n_threads, msg, sizeof msg);
        if (st) return iqf_fail(j->err, j->errlen, st, "tensor %s: %s", t->name, msg);
        const float *imx = it->imatrix ? it->imatrix + expert * ncols : NULL;
        st = j->fb ? iqf_feedback_quantize(j->fb, t->name, new_type, x, j->qbuf, n, ncols, imx, qp, msg, sizeof msg)
                   : iqf_quantize(new_type, x, j->qbuf, n, ncols, imx, qp, msg, sizeof msg);
        if (st) {
            if (st == IQF_E_NONFINITE && !imx)
                return iqf_fail(j->err, j->errlen, st, "%s: tensor %s (rows from %" PRId64 "): %s", j->in, t->name, r, msg);
            return iqf_fail(j->err, j->errlen, st, "tensor %s: %s", t->name, msg);
        }
        if (j->p->post_encode) j->p->post_encode(j->p->post_encode_user, t->name, new_type, j->qbuf, n, ncols);
        st = iqf_gguf_writer_write_data(wi, j->qbuf, (size_t)n * dst_rs);
        if (st) return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(wi));
        drop_pages((const uint8_t *)t->data + (size_t)r * src_rs, (size_t)n * src_rs);
        r += n;
        *done_in += (int64_t)((size_t)n * src_rs);
        iqf_progress_update(prog, (int)i + 1, t->name, tname(new_type), *done_in);
    }
    return IQF_OK;
}

/* Stage 6: the tensor data in output order (or, with --dry-run, the plan's listing). */
static iqf_status encode_tensors(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    int64_t total_in = 0, done_in = 0;
    for (int64_t i = 0; i < j->nt; i++) total_in += (int64_t)j->items[i].t->nbytes;
    iqf_progress prog;
    iqf_progress_init(&prog, p->quiet || p->dry_run, (int)j->nt, total_in);
    iqf_quantize_params qp = iqf_quantize_default_params();
    qp.n_threads = j->n_threads;
    qp.mode = p->mode;
    iqf_status st = IQF_OK;
    for (int64_t i = 0; i < j->nt && !st; i++) {
        const iqf_gguf_tensor *t = j->items[i].t;
        const int new_type = j->items[i].choice.type;
        const uint64_t new_size = (uint64_t)iqf_row_size(new_type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
        j->rep.n_elements += iqf_gguf_tensor_nelements(t);
        j->rep.size_in += t->nbytes;
        j->rep.size_out += new_type == t->type ? t->nbytes : new_size;
        iqf_progress_update(&prog, (int)i + 1, t->name, tname(new_type), done_in);
        if (p->dry_run) {
            if (j->log) print_plan_line(j, i, new_size);
        } else if (new_type == t->type) { /* copied as it is */
            iqf_gguf_writer *wi = j->ws[j->n_out > 1 ? t->part : 0];
            st = iqf_gguf_writer_write_data(wi, t->data, t->nbytes);
            drop_pages(t->data, t->nbytes);
            if (st) iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(wi));
            done_in += (int64_t)t->nbytes;
        } else {
            st = encode_tensor(j, i, &qp, &prog, &done_in);
        }
    }
    iqf_progress_done(&prog);
    return st;
}

/* Stage 7: every part complete, rename them all into place; if one fails, remove those already
 * committed, so a failed run leaves no output. */
static iqf_status commit_output(quant_job *j) {
    for (int q = 0; q < j->n_out; q++) {
        iqf_status st = iqf_gguf_writer_finish(j->ws[q], j->err, j->errlen);
        j->ws[q] = NULL;
        if (st) {
            for (int k = 0; k < q; k++) unlink(j->ws_path[k]);
            return st;
        }
    }
    return IQF_OK;
}

static void print_summary(const quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    const iqf_model_quantize_report *rep = &j->rep;
    const double ne = rep->n_elements > 0 ? (double)rep->n_elements : 1.0;
    if (p->dry_run) {
        fprintf(j->log, "model size  = %8.2f MiB (%.2f BPW)\n", (double)rep->size_in / 1048576.0, (double)rep->size_in * 8.0 / ne);
        fprintf(j->log, "quant size  = %8.2f MiB (%.2f BPW)\n", (double)rep->size_out / 1048576.0, (double)rep->size_out * 8.0 / ne);
    }
    if (rep->n_fallback > 0)
        fprintf(j->log, "warning: %d of %d tensor(s) required fallback quantization\n", rep->n_fallback, (int)j->nt);
    if (p->dry_run && j->will_require_imatrix)
        fprintf(j->log, "warning: dry run completed, but this quantization will require an imatrix\n");
}

static void job_free(quant_job *j) {
    iqf_feedback_free(j->fb);
    for (int q = 0; j->ws && q < j->n_out; q++) iqf_gguf_writer_abort(j->ws[q]); /* removes the temp files */
    for (int q = 0; j->ws_path && q < j->n_out; q++) free(j->ws_path[q]);
    free(j->ws);
    free(j->ws_path);
    free(j->f32buf);
    free(j->qbuf);
    iqf_recipe_overrides_free(j->ov, j->n_ov);
    free(j->ov);
    free(j->items);
    free(j->new_names);
    free(j->rt);
    free(j->rc);
    iqf_imatrix_free(&j->im);
    iqf_gguf_close(j->g);
}

iqf_status iqf_model_quantize(const char *in, const char *out, const iqf_model_quantize_params *params,
                              iqf_model_quantize_report *report, void *logp, char *err, size_t errlen) {
    const double t0 = iqf_now();
    if (!in || !params || (!out && !params->dry_run))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing input or output path");
    if (iqf_ftype_default_type(params->ftype) < 0)
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid output file type %d", params->ftype);
    if (!iqf_mode_name(params->mode))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "unknown encoder mode %d", (int)params->mode);
    if (!params->dry_run && !params->keep_split && iqf_same_file(in, out))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "input and output files are the same: '%s'", in);

    quant_job j;
    memset(&j, 0, sizeof j);
    j.in = in;
    j.out = out;
    j.p = params;
    j.log = params->quiet ? NULL : (FILE *)logp;
    j.n_threads = params->n_threads > 0 ? params->n_threads : iqf_cpu_count();
    j.err = err;
    j.errlen = errlen;
    j.n_out = 1;

    iqf_status st = open_input(&j);
    if (!st) st = load_statistics(&j);
    if (!st) st = order_tensors(&j);
    if (!st) st = plan_types(&j);
    if (!st && !params->dry_run) st = write_header(&j);
    if (!st) st = encode_tensors(&j);
    if (!st && !params->dry_run) st = commit_output(&j);
    if (!st) {
        j.rep.n_tensors = (int)j.nt;
        j.rep.seconds = iqf_now() - t0;
        if (j.log) print_summary(&j);
        if (report) *report = j.rep;
    }
    job_free(&j);
    return st;
}
