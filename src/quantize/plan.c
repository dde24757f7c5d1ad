/*
 * plan.c - the plan of one quantization run (plan.h): the input and its statistics opened and
 * checked, the tensors ordered, pruned and renamed, their types chosen (recipe.c, or an exact
 * array from --target-size), the output's KVs and its exact size. As llama 0.25.1's
 * llama_model_quantize (src/llama-quant.cpp) and llama-quantize's imatrix handling
 * (tools/quantize/quantize.cpp):
 *   - tensors in the loader's order (layer number, then name), types from recipe.c;
 *   - KVs: the input's in order, then general.quantization_version = 2 and general.file_type
 *     (u32, moved to the end), split.* removed, --override-kv, then quantize.imatrix.{file,
 *     dataset,entries_count,chunks_count} when an imatrix is used (u32 counts, strings cut at 127
 *     bytes), {arch}.block_count after --prune-layers, then ours (quantize.mode, quantize.feedback.*).
 * Every check that can refuse a run is here, so that the pipeline has nothing left to refuse
 * once it starts writing.
 */
#include "plan.h"
#include "override.h"
#include "../util/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *tname(int type) {
    const iqf_type_info *t = iqf_type_get(type);
    return t ? t->name : "?";
}

static bool is_float_type(int t) { return t == IQF_TYPE_F32 || t == IQF_TYPE_F16 || t == IQF_TYPE_BF16; }

static int cmp_items(const void *a, const void *b) {
    return iqf_recipe_name_cmp(((const iqf_plan_item *)a)->t->name, ((const iqf_plan_item *)b)->t->name);
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

/* Stage 1 (iqf_plan_open): open the input and read what the recipe needs (architecture, layer and head counts),
 * with --override-kv applied and --prune-layers checked. */
static iqf_status open_input(iqf_plan *j) {
    char msg[512];
    const iqf_model_quantize_params *p = j->p;
    j->g = p->input ? p->input : iqf_gguf_open(j->in, msg, sizeof msg);
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

/* Stage 2 (iqf_plan_open): the importance matrix (checked finite and non-negative) and the Hessian file. */
static iqf_status load_statistics(iqf_plan *j) {
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

/* Stage 3 (iqf_plan_open): the tensors in the order llama's loader writes them (layer number, then name), minus
 * pruned layers (renumbered), or by part and file offset with --keep-split. */
static iqf_status order_tensors(iqf_plan *j) {
    const iqf_model_quantize_params *p = j->p;
    int64_t nt = iqf_gguf_n_tensors(j->g);
    const size_t cap = (size_t)(nt > 0 ? nt : 1);
    j->items = calloc(cap, sizeof *j->items);
    j->rt = calloc(cap, sizeof *j->rt);
    j->rc = calloc(cap, sizeof *j->rc);
    if (!j->items || !j->rt || !j->rc) return iqf_fail(j->err, j->errlen, IQF_E_NOMEM, "out of memory");
    iqf_plan_item *items = j->items;
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
            iqf_plan_item a = items[i];
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

/* Stage 4: each tensor's type (recipe.c, with --tensor-type patterns). */
static iqf_status recipe_types(iqf_plan *j) {
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
    ro.ftype = j->ftype;
    ro.output_tensor_type = p->output_tensor_type;
    ro.token_embedding_type = p->token_embedding_type;
    ro.quantize_output_tensor = !p->leave_output_tensor;
    ro.pure = p->pure;
    ro.has_imatrix = j->have_im;
    ro.overrides = j->ov;
    ro.n_overrides = j->n_ov;
    st = iqf_recipe_plan(&j->hp, &ro, j->rt, (int)j->nt, j->rc, &j->n_fallback, msg, sizeof msg);
    if (st) return iqf_fail(j->err, j->errlen, st, "%s: %s", j->in, msg);
    return IQF_OK;
}

/* Every check that can fail on the inputs once the types are known: a missing or mismatched
 * importance matrix, an input type that cannot be converted, a target type this build cannot
 * encode. */
static iqf_status check_types(iqf_plan *j) {
    const iqf_model_quantize_params *p = j->p;

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
        iqf_plan_item *it = &j->items[i];
        const iqf_gguf_tensor *t = it->t;
        const int nt_ = it->choice.type;
        /* the imatrix of every tensor (--target-size measures with it), checked where it is used */
        const iqf_imatrix_entry *e = j->have_im ? iqf_imatrix_find(&j->im, t->name) : NULL;
        if (e) n_matched++;
        it->imatrix = e && e->n == t->ne[0] * t->ne[2] ? e->values : NULL;
        if (nt_ == t->type) continue;
        j->n_quantized++;
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
        /* an encoder is not enough: activation blocks (q8_1, ...) have no weight kernels in ggml */
        if (iqf_type_family(nt_) == IQF_FAMILY_OTHER && !p->dry_run)
            return iqf_fail(j->err, j->errlen, IQF_E_UNSUPPORTED, "tensor %s: type %s is not a weight type", t->name,
                            tname(nt_));
        if (e && !it->imatrix && strcmp(t->name, "token_embd.weight") && strcmp(t->name, "per_layer_token_embd.weight"))
            return iqf_fail(j->err, j->errlen, IQF_E_SHAPE,
                            "imatrix size %" PRId64 " is different from tensor size %" PRId64
                            " for %s (imatrix made for another model?)",
                            e->n, t->ne[0] * t->ne[2], t->name);
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
iqf_status iqf_plan_write_kvs(const iqf_plan *j, iqf_gguf_writer *w) {
    const iqf_model_quantize_params *p = j->p;
    iqf_status st = IQF_OK;
    for (int64_t i = 0; i < iqf_gguf_n_kv(j->g) && !st; i++) st = iqf_gguf_writer_copy_kv(w, j->g, i);
    if (!st) st = iqf_gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (!st) st = iqf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)j->ftype);
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


/* The exact types of --target-size: types[i] >= 0 replaces quantizable item i's type. */
static iqf_status exact_types(iqf_plan *j, const int *types, const char (*names)[IQF_GGUF_MAX_NAME], int64_t n) {
    if (n != j->nt)
        return iqf_fail(j->err, j->errlen, IQF_E_INVALID_ARG, "%s: the plan has %" PRId64 " tensors, the model %" PRId64
                        " (a plan made for another model or other options?)", j->in, n, j->nt);
    for (int64_t i = 0; i < n; i++) {
        if (names && strcmp(names[i], j->rt[i].name))
            return iqf_fail(j->err, j->errlen, IQF_E_INVALID_ARG, "%s: tensor %" PRId64 " of the plan is %s, of the model %s",
                            j->in, i + 1, names[i], j->rt[i].name);
        iqf_recipe_choice *c = &j->rc[i];
        if (types[i] < 0 || !c->allows_quantization) continue;
        const iqf_type_info *ti = iqf_type_get(types[i]);
        if (!ti || j->rt[i].ne[0] % ti->blck_size != 0)
            return iqf_fail(j->err, j->errlen, IQF_E_INVALID_ARG, "tensor %s: type %s does not fit rows of %" PRId64,
                            j->rt[i].name, tname(types[i]), j->rt[i].ne[0]);
        c->type = types[i];
        c->fallback = false;
        c->requires_imatrix = iqf_recipe_requires_imatrix(j->rt[i].name, c->type, j->ftype);
    }
    return IQF_OK;
}

iqf_status iqf_plan_open(iqf_plan *pl, const char *in, const iqf_model_quantize_params *p, FILE *log, char *err,
                         size_t errlen) {
    memset(pl, 0, sizeof *pl);
    pl->in = in;
    pl->p = p;
    pl->log = log;
    pl->err = err;
    pl->errlen = errlen;
    iqf_status st = open_input(pl);
    if (!st) st = load_statistics(pl);
    if (!st) st = order_tensors(pl);
    return st;
}

iqf_status iqf_plan_types(iqf_plan *pl, int ftype, const int *types, const char (*names)[IQF_GGUF_MAX_NAME],
                          int64_t n_types) {
    pl->ftype = ftype;
    pl->complete = false;
    pl->n_fallback = pl->n_quantized = 0;
    pl->will_require_imatrix = false;
    iqf_recipe_overrides_free(pl->ov, pl->n_ov);
    free(pl->ov);
    pl->ov = NULL;
    pl->n_ov = 0;
    iqf_status st = recipe_types(pl);
    if (!st && types) st = exact_types(pl, types, names, n_types);
    if (!st) st = check_types(pl);
    pl->complete = !st;
    return st;
}

uint64_t iqf_plan_item_bytes(const iqf_plan *pl, int64_t i) {
    const iqf_gguf_tensor *t = pl->items[i].t;
    const int type = pl->items[i].choice.type;
    if (type == t->type) return t->nbytes;
    return (uint64_t)iqf_row_size(type, t->ne[0]) * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
}

uint64_t iqf_plan_size(const iqf_plan *pl, uint64_t *meta, uint64_t *align) {
    iqf_gguf_writer *w = iqf_gguf_writer_open_sizing();
    if (!w) {
        iqf_fail(pl->err, pl->errlen, IQF_E_NOMEM, "out of memory");
        return 0;
    }
    iqf_status st = iqf_plan_write_kvs(pl, w);
    for (int64_t i = 0; i < pl->nt && !st; i++)
        st = iqf_gguf_writer_add_tensor(w, pl->rt[i].name, pl->items[i].t->n_dims, pl->items[i].t->ne,
                                        pl->items[i].choice.type);
    const uint64_t size = st ? 0 : iqf_gguf_writer_size(w, meta, align);
    if (!size) iqf_fail(pl->err, pl->errlen, st ? st : IQF_E_INVALID_ARG, "%s", iqf_gguf_writer_error(w));
    iqf_gguf_writer_abort(w);
    return size;
}

void iqf_plan_free(iqf_plan *pl) {
    iqf_feedback_free(pl->fb);
    iqf_recipe_overrides_free(pl->ov, pl->n_ov);
    free(pl->ov);
    free(pl->items);
    free(pl->new_names);
    free(pl->rt);
    free(pl->rc);
    iqf_imatrix_free(&pl->im);
    if (!pl->p || pl->g != pl->p->input) iqf_gguf_close(pl->g); /* a given input stays the caller's */
    memset(pl, 0, sizeof *pl);
}
