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

iqf_status iqf_model_quantize(const char *in, const char *out, const iqf_model_quantize_params *params,
                              iqf_model_quantize_report *report, void *logp, char *err, size_t errlen) {
    FILE *log = logp;
    char msg[512];
    const double t0 = iqf_now();
    iqf_status st = IQF_OK;
    iqf_gguf *g = NULL;
    iqf_imatrix im;
    memset(&im, 0, sizeof im);
    bool have_im = false;
    plan_item *items = NULL;
    iqf_recipe_tensor *rt = NULL;
    iqf_recipe_choice *rc = NULL;
    iqf_recipe_override *ov = NULL;
    int n_ov = 0;
    iqf_gguf_writer *w = NULL;     /* the first output part (KVs) */
    iqf_gguf_writer **ws = NULL;   /* every output part (--keep-split); ws[0] == w */
    char **ws_path = NULL;
    int n_out = 1;
    float *f32buf = NULL;
    uint8_t *qbuf = NULL;
    size_t f32cap = 0, qcap = 0;
    iqf_model_quantize_report rep;
    memset(&rep, 0, sizeof rep);
    char (*new_names)[IQF_GGUF_MAX_NAME] = NULL; /* --prune-layers: the renumbered names */
    uint32_t pruned_block_count = 0;
    iqf_feedback *fb = NULL;

    if (!in || !params || (!out && !params->dry_run))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "missing input or output path");
    const int default_type = iqf_ftype_default_type(params->ftype);
    if (default_type < 0) return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "invalid output file type %d", params->ftype);
    if (!iqf_mode_name(params->mode))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "unknown encoder mode %d", (int)params->mode);
    const int n_threads = params->n_threads > 0 ? params->n_threads : iqf_cpu_count();
    if (!params->dry_run && !params->keep_split && iqf_same_file(in, out))
        return iqf_fail(err, errlen, IQF_E_INVALID_ARG, "input and output files are the same: '%s'", in);

    g = iqf_gguf_open(in, msg, sizeof msg);
    if (!g) return iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
    if (iqf_gguf_check_schema(g, msg, sizeof msg)) { /* keys llama.cpp reads, before anything is written */
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s", msg);
        goto done;
    }

    /* Model hyper-parameters. */
    iqf_recipe_model hp;
    memset(&hp, 0, sizeof hp);
    const char *arch;
    if (!iqf_gguf_get_str(g, "general.architecture", &arch, NULL) || !*arch || strlen(arch) >= sizeof hp.arch) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: general.architecture missing or not a string", in);
        goto done;
    }
    snprintf(hp.arch, sizeof hp.arch, "%s", arch);
    int64_t v;
    if (!get_hparam(g, arch, "block_count", &v) || v < 0 || v > 100000) {
        st = iqf_fail(err, errlen, IQF_E_FORMAT, "%s: %s.block_count missing or invalid", in, arch);
        goto done;
    }
    hp.n_layer = (int)v;
    hp.n_head = get_hparam(g, arch, "attention.head_count", &v) && v >= 0 && v < (1 << 20) ? (int)v : 0;
    hp.n_head_kv = get_hparam(g, arch, "attention.head_count_kv", &v) && v >= 0 && v < (1 << 20) ? (int)v : hp.n_head;
    hp.n_expert = get_hparam(g, arch, "expert_count", &v) && v >= 0 && v < (1 << 20) ? (int)v : 0;
    /* --override-kv (as llama's loader, the recipe sees overridden hyper-parameters), --prune-layers. */
    st = iqf_kv_overrides_check(params->kv_overrides, params->n_kv_overrides, arch, err, errlen);
    if (!st) st = iqf_prune_check(params->prune_layers, params->n_prune_layers, hp.n_layer, err, errlen);
    if (st) goto done;
    iqf_kv_overrides_hparams(params->kv_overrides, params->n_kv_overrides, &hp);

    /* Importance matrix. */
    if (params->imatrix_path) {
        st = iqf_imatrix_load(params->imatrix_path, &im, err, errlen);
        if (st) goto done;
        const int n_loaded = im.n_entries;
        iqf_imatrix_filter(&im, params->include_weights, params->n_include, params->exclude_weights,
                           params->n_exclude);
        for (int i = 0; i < im.n_entries; i++)
            for (int64_t j = 0; j < im.entries[i].n; j++) {
                float x = im.entries[i].values[j];
                if (!isfinite(x) || x < 0) {
                    st = iqf_fail(err, errlen, IQF_E_NONFINITE, "%s: entry %s has a %s value (%g) at column %" PRId64,
                              params->imatrix_path, im.entries[i].name, isfinite(x) ? "negative" : "non-finite",
                              (double)x, j);
                    goto done;
                }
            }
        have_im = im.n_entries > 0;
        if (log && !params->quiet)
            fprintf(log, "imatrix: loaded %d entries from %s computed on %d chunks; using %d\n", n_loaded,
                    params->imatrix_path, im.chunk_count, im.n_entries);
    }

    if (params->hessian_path) {
        st = iqf_feedback_open(params->hessian_path, g, params->hessian_damp, log && !params->quiet ? log : NULL, &fb, err, errlen);
        if (st) goto done;
    }

    /* Tensors in loader order. */
    int64_t nt = iqf_gguf_n_tensors(g);
    items = calloc((size_t)(nt > 0 ? nt : 1), sizeof *items);
    rt = calloc((size_t)(nt > 0 ? nt : 1), sizeof *rt);
    rc = calloc((size_t)(nt > 0 ? nt : 1), sizeof *rc);
    if (!items || !rt || !rc) {
        st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < nt; i++) items[i].t = iqf_gguf_tensor_at(g, i);
    qsort(items, (size_t)nt, sizeof *items, cmp_items);
    for (int64_t i = 0; i < nt; i++) {
        rt[i].name = items[i].t->name;
        memcpy(rt[i].ne, items[i].t->ne, sizeof rt[i].ne);
        rt[i].type = items[i].t->type;
    }
    if (params->n_prune_layers > 0) { /* drop the pruned layers' tensors, renumber the rest */
        new_names = calloc((size_t)nt, sizeof *new_names);
        if (!new_names) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        iqf_prune_state ps;
        iqf_prune_init(&ps, params->prune_layers, params->n_prune_layers);
        int64_t k = 0;
        for (int64_t i = 0; i < nt; i++)
            if (iqf_prune_remap(&ps, rt[i].name, new_names[k], sizeof new_names[k])) {
                items[k] = items[i];
                rt[k] = rt[i];
                rt[k].name = new_names[k];
                k++;
            }
        nt = k;
        pruned_block_count = (uint32_t)ps.next_id;
    }
    if (params->keep_split) { /* as llama, even for one part: by part, then file order */
        for (int64_t i = 1; i < nt; i++) { /* insertion sort keeps items and rt parallel */
            plan_item a = items[i];
            iqf_recipe_tensor b = rt[i];
            int64_t j = i;
            for (; j > 0 && (items[j - 1].t->part > a.t->part ||
                             (items[j - 1].t->part == a.t->part && items[j - 1].t->offset > a.t->offset)); j--) {
                items[j] = items[j - 1];
                rt[j] = rt[j - 1];
            }
            items[j] = a;
            rt[j] = b;
        }
    }

    /* --tensor-type patterns. */
    if (params->n_tensor_types > 0) {
        ov = calloc((size_t)params->n_tensor_types, sizeof *ov);
        if (!ov) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        for (int i = 0; i < params->n_tensor_types; i++) {
            /* llama-quantize uses std::regex (ECMAScript); POSIX extended regexps cover the usual
             * patterns. \d and \D are rewritten as [0-9] and [^0-9] (glibc knows \w \s \b). */
            char pat[1024];
            const char *src = params->tensor_type_patterns[i];
            size_t k = 0;
            for (size_t j = 0; src[j] && k + 8 < sizeof pat; j++) {
                if (src[j] == '\\' && (src[j + 1] == 'd' || src[j + 1] == 'D')) {
                    k += (size_t)snprintf(pat + k, sizeof pat - k, "%s", src[j + 1] == 'd' ? "[0-9]" : "[^0-9]");
                    j++;
                } else {
                    pat[k++] = src[j];
                    if (src[j] == '\\' && src[j + 1]) pat[k++] = src[++j];
                }
            }
            pat[k] = 0;
            int rcode = regcomp(&ov[i].re, pat, REG_EXTENDED | REG_NOSUB);
            if (rcode != 0) {
                regerror(rcode, &ov[i].re, msg, sizeof msg);
                st = iqf_fail(err, errlen, IQF_E_INVALID_ARG, "--tensor-type pattern '%s': %s",
                          params->tensor_type_patterns[i], msg);
                goto done;
            }
            ov[i].type = params->tensor_type_types[i];
            n_ov++;
        }
    }

    iqf_recipe_opts ro;
    memset(&ro, 0, sizeof ro);
    ro.ftype = params->ftype;
    ro.output_tensor_type = params->output_tensor_type;
    ro.token_embedding_type = params->token_embedding_type;
    ro.quantize_output_tensor = !params->leave_output_tensor;
    ro.pure = params->pure;
    ro.has_imatrix = have_im;
    ro.overrides = ov;
    ro.n_overrides = n_ov;
    st = iqf_recipe_plan(&hp, &ro, rt, (int)nt, rc, &rep.n_fallback, msg, sizeof msg);
    if (st) {
        st = iqf_fail(err, errlen, st, "%s: %s", in, msg);
        goto done;
    }

    /* Every check before writing anything. */
    int n_matched = 0;
    bool will_require_imatrix = false;
    /* As the reference's preliminary loop: a file type that needs an imatrix fails first. */
    for (int64_t i = 0; i < nt; i++) {
        items[i].choice = rc[i];
        if (!have_im && rc[i].allows_quantization && rc[i].requires_imatrix) {
            if (params->dry_run) {
                will_require_imatrix = true;
            } else {
                st = iqf_fail(err, errlen, IQF_E_NEED_IMATRIX,
                          "this quantization requires an importance matrix (--imatrix): tensor %s would be %s",
                          items[i].t->name, tname(rc[i].type));
                goto done;
            }
        }
    }
    for (int64_t i = 0; i < nt; i++) {
        plan_item *it = &items[i];
        const iqf_gguf_tensor *t = it->t;
        const int nt_ = it->choice.type;
        if (have_im && iqf_imatrix_find(&im, t->name)) n_matched++;
        if (nt_ == t->type) continue;
        rep.n_quantized++;
        if (!iqf_type_get(nt_)) {
            st = iqf_fail(err, errlen, IQF_E_UNKNOWN_TYPE, "tensor %s: invalid target type %d", t->name, nt_);
            goto done;
        }
        if (!is_float_type(t->type)) {
            if (iqf_type_get(t->type)->is_quantized && !params->allow_requantize) {
                st = iqf_fail(err, errlen, IQF_E_UNSUPPORTED,
                          "%s: tensor %s is already quantized (%s); requantizing is disabled "
                          "(--allow-requantize; inputs should be F32, F16 or BF16)",
                          in, t->name, tname(t->type));
                goto done;
            }
            if (!iqf_type_get(t->type)->is_quantized || !iqf_can_decode(t->type)) {
                st = iqf_fail(err, errlen, IQF_E_UNSUPPORTED,
                          "%s: tensor %s has type %s, which cannot be converted (inputs: F32, F16, BF16)", in,
                          t->name, tname(t->type));
                goto done;
            }
        }
        if (!iqf_can_encode(nt_) && !params->dry_run) {
            st = iqf_fail(err, errlen, IQF_E_UNSUPPORTED, "tensor %s: type %s cannot be encoded by this build", t->name,
                      tname(nt_));
            goto done;
        }
        if (have_im) {
            const iqf_imatrix_entry *e = iqf_imatrix_find(&im, t->name);
            if (e) {
                if (e->n == t->ne[0] * t->ne[2]) {
                    it->imatrix = e->values;
                } else if (strcmp(t->name, "token_embd.weight") && strcmp(t->name, "per_layer_token_embd.weight")) {
                    st = iqf_fail(err, errlen, IQF_E_SHAPE,
                              "imatrix size %" PRId64 " is different from tensor size %" PRId64
                              " for %s (imatrix made for another model?)",
                              e->n, t->ne[0] * t->ne[2], t->name);
                    goto done;
                }
            }
        }
        if (!it->imatrix && it->choice.requires_imatrix && !params->dry_run) {
            st = iqf_fail(err, errlen, IQF_E_NEED_IMATRIX,
                      "missing importance matrix for tensor %s in a very low-bit quantization (%s)", t->name,
                      tname(nt_));
            goto done;
        }
        if (!it->imatrix && iqf_requires_imatrix(nt_) && !params->dry_run) {
            st = iqf_fail(err, errlen, IQF_E_NEED_IMATRIX, "tensor %s: type %s cannot be made without an importance matrix",
                      t->name, tname(nt_));
            goto done;
        }
    }
    if (have_im && n_matched == 0) {
        st = iqf_fail(err, errlen, IQF_E_SHAPE, "%s: none of its %d entries names a tensor of %s (imatrix made for another model?)",
                  params->imatrix_path, im.n_entries, in);
        goto done;
    }

    /* Output metadata. */
    if (!params->dry_run) {
        n_out = params->keep_split ? iqf_gguf_n_parts(g) : 1;
        ws = calloc((size_t)n_out, sizeof *ws);
        ws_path = calloc((size_t)n_out, sizeof *ws_path);
        if (!ws || !ws_path) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
            goto done;
        }
        for (int p = 0; p < n_out; p++) {
            size_t ol = strlen(out);
            if (params->keep_split && strstr(out, ".gguf") && ol >= 5) ol -= 5; /* llama-quantize's prefix */
            ws_path[p] = malloc(ol + 32);
            if (!ws_path[p]) {
                st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory");
                goto done;
            }
            if (params->keep_split) snprintf(ws_path[p], ol + 32, "%.*s-%05d-of-%05d.gguf", (int)ol, out, p + 1, n_out);
            else snprintf(ws_path[p], ol + 32, "%s", out);
            ws[p] = iqf_gguf_writer_open(ws_path[p], err, errlen);
            if (!ws[p]) {
                st = IQF_E_IO;
                goto done;
            }
            for (int q = 0; q < iqf_gguf_n_parts(g) && !st; q++) st = iqf_gguf_writer_set_input(ws[p], iqf_gguf_part_path(g, q));
            if (st) {
                iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(ws[p]));
                goto done;
            }
        }
        w = ws[0];
        for (int64_t i = 0; i < iqf_gguf_n_kv(g) && !st; i++) st = iqf_gguf_writer_copy_kv(w, g, i);
        if (!st) st = iqf_gguf_writer_set_u32(w, "general.quantization_version", 2);
        if (!st) st = iqf_gguf_writer_set_u32(w, "general.file_type", (uint32_t)params->ftype);
        if (!st) {
            iqf_gguf_writer_remove(w, "split.no");
            iqf_gguf_writer_remove(w, "split.count");
            iqf_gguf_writer_remove(w, "split.tensors.count");
        }
        if (!st) st = iqf_kv_overrides_write(w, params->kv_overrides, params->n_kv_overrides);
        if (!st && have_im) {
            char s[128];
            snprintf(s, sizeof s, "%s", params->imatrix_path);
            st = iqf_gguf_writer_set_str(w, "quantize.imatrix.file", s);
            if (!st && im.n_datasets > 0) {
                snprintf(s, sizeof s, "%s", im.datasets[0]);
                st = iqf_gguf_writer_set_str(w, "quantize.imatrix.dataset", s);
            }
            if (!st) st = iqf_gguf_writer_set_u32(w, "quantize.imatrix.entries_count", (uint32_t)im.n_entries);
            if (!st && im.chunk_count > 0)
                st = iqf_gguf_writer_set_u32(w, "quantize.imatrix.chunks_count", (uint32_t)im.chunk_count);
        }
        if (!st && params->n_prune_layers > 0) {
            char k[96];
            snprintf(k, sizeof k, "%s.block_count", arch);
            st = iqf_gguf_writer_set_u32(w, k, pruned_block_count);
        }
        /* compat writes llama-quantize's metadata exactly; any other encoder says so. */
        if (!st && params->mode != IQF_MODE_COMPAT)
            st = iqf_gguf_writer_set_str(w, "quantize.mode", iqf_mode_name(params->mode));
        if (!st && fb) st = iqf_feedback_write_meta(fb, w);
        for (int p = 0; p < n_out && n_out > 1 && !st; p++) { /* gguf_set_val_*: appended last */
            st = iqf_gguf_writer_set_u16(ws[p], "split.no", (uint16_t)p);
            if (!st) st = iqf_gguf_writer_set_u16(ws[p], "split.count", (uint16_t)n_out);
            if (!st) st = iqf_gguf_writer_set_i32(ws[p], "split.tensors.count", (int32_t)nt);
        }
        for (int64_t i = 0; i < nt && !st; i++)
            st = iqf_gguf_writer_add_tensor(ws[n_out > 1 ? items[i].t->part : 0], rt[i].name, items[i].t->n_dims,
                                            items[i].t->ne, items[i].choice.type);
        for (int p = 0; p < n_out && !st; p++) {
            st = iqf_gguf_writer_write_header(ws[p]);
            if (st) w = ws[p];
        }
        if (st) {
            for (int p = 0; p < n_out; p++)
                if (*iqf_gguf_writer_error(ws[p])) w = ws[p];
            iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(w));
            w = ws[0];
            goto done;
        }
    }

    /* Tensor data. */
    int64_t total_in = 0;
    for (int64_t i = 0; i < nt; i++) total_in += (int64_t)items[i].t->nbytes;
    iqf_progress prog;
    iqf_progress_init(&prog, params->quiet || params->dry_run, (int)nt, total_in);
    int64_t done_in = 0;
    iqf_quantize_params qp = iqf_quantize_default_params();
    qp.n_threads = n_threads;
    qp.mode = params->mode;
    for (int64_t i = 0; i < nt; i++) {
        const plan_item *it = &items[i];
        const iqf_gguf_tensor *t = it->t;
        const int new_type = it->choice.type;
        const int64_t nrows_total = t->ne[1] * t->ne[2] * t->ne[3];
        const uint64_t new_size = (uint64_t)iqf_row_size(new_type, t->ne[0]) * (uint64_t)nrows_total;
        rep.n_elements += iqf_gguf_tensor_nelements(t);
        rep.size_in += t->nbytes;
        rep.size_out += new_type == t->type ? t->nbytes : new_size;
        iqf_progress_update(&prog, (int)i + 1, t->name, tname(new_type), done_in);
        if (params->dry_run) {
            if (log && !params->quiet) {
                char sh[96];
                shape_str(t, sh, sizeof sh);
                if (new_type != t->type)
                    fprintf(log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.2f MiB -> %8.2f MiB (%s)%s\n",
                            i + 1, nt, rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0,
                            (double)new_size / 1048576.0, tname(new_type),
                            it->choice.fallback ? " (fallback)" : "");
                else
                    fprintf(log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.3f MiB\n", i + 1,
                            nt, rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0);
            }
            continue;
        }
        iqf_gguf_writer *wi = ws[n_out > 1 ? t->part : 0];
        if (new_type == t->type) {
            st = iqf_gguf_writer_write_data(wi, t->data, t->nbytes);
            drop_pages(t->data, t->nbytes);
            if (st) {
                iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(wi));
                goto done;
            }
            done_in += (int64_t)t->nbytes;
            continue;
        }
        const int64_t ncols = t->ne[0];
        const int64_t rows_per_expert = t->ne[1];
        const size_t src_rs = iqf_row_size(t->type, ncols), dst_rs = iqf_row_size(new_type, ncols);
        int64_t slab = SLAB_FLOATS / ncols;
        if (slab < 1) slab = 1;
        if (slab > rows_per_expert) slab = rows_per_expert;
        const size_t need_f = t->type == IQF_TYPE_F32 ? 0 : (size_t)(slab * ncols);
        const size_t need_q = (size_t)slab * dst_rs;
        if (need_f > f32cap) {
            free(f32buf);
            f32buf = malloc(need_f * sizeof(float));
            f32cap = f32buf ? need_f : 0;
        }
        if (need_q > qcap) {
            free(qbuf);
            qbuf = malloc(need_q);
            qcap = qbuf ? need_q : 0;
        }
        if (f32cap < need_f || qcap < need_q) {
            st = iqf_fail(err, errlen, IQF_E_NOMEM, "out of memory (tensor %s)", t->name);
            goto done;
        }
        for (int64_t r = 0; r < nrows_total;) {
            const int64_t expert = r / rows_per_expert;
            const int64_t left_in_expert = rows_per_expert - r % rows_per_expert;
            const int64_t n = slab < left_in_expert ? slab : left_in_expert;
            const float *x;
            if (r + n < nrows_total) {
                const int64_t nn = nrows_total - (r + n) < slab ? nrows_total - (r + n) : slab;
                prefetch((const uint8_t *)t->data + (size_t)(r + n) * src_rs, (size_t)nn * src_rs);
            }
            st = rows_to_f32(t, r, n, f32buf, &x, n_threads, msg, sizeof msg);
            if (st) {
                st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
                goto done;
            }
            const float *imx = it->imatrix ? it->imatrix + expert * ncols : NULL;
            st = fb ? iqf_feedback_quantize(fb, t->name, new_type, x, qbuf, n, ncols, imx, &qp, msg, sizeof msg)
                    : iqf_quantize(new_type, x, qbuf, n, ncols, imx, &qp, msg, sizeof msg);
            if (st) {
                if (st == IQF_E_NONFINITE && !imx) st = iqf_fail(err, errlen, st, "%s: tensor %s (rows from %" PRId64 "): %s", in, t->name, r, msg);
                else st = iqf_fail(err, errlen, st, "tensor %s: %s", t->name, msg);
                goto done;
            }
            if (params->post_encode)
                params->post_encode(params->post_encode_user, t->name, new_type, qbuf, n, ncols);
            st = iqf_gguf_writer_write_data(wi, qbuf, (size_t)n * dst_rs);
            if (st) {
                iqf_fail(err, errlen, st, "%s", iqf_gguf_writer_error(wi));
                goto done;
            }
            drop_pages((const uint8_t *)t->data + (size_t)r * src_rs, (size_t)n * src_rs);
            r += n;
            done_in += (int64_t)((size_t)n * src_rs);
            iqf_progress_update(&prog, (int)i + 1, t->name, tname(new_type), done_in);
        }
    }
    iqf_progress_done(&prog);
    if (!params->dry_run) {
        /* Every part complete: commit them all; if one fails, remove those already committed. */
        for (int p = 0; p < n_out; p++) {
            st = iqf_gguf_writer_finish(ws[p], err, errlen);
            ws[p] = NULL;
            if (st) {
                for (int q = 0; q < p; q++) unlink(ws_path[q]);
                break;
            }
        }
        w = NULL;
        if (st) goto done;
    }
    rep.n_tensors = (int)nt;
    rep.seconds = iqf_now() - t0;
    if (log && !params->quiet) {
        double ne = rep.n_elements > 0 ? (double)rep.n_elements : 1.0;
        if (params->dry_run) {
            fprintf(log, "model size  = %8.2f MiB (%.2f BPW)\n", (double)rep.size_in / 1048576.0, (double)rep.size_in * 8.0 / ne);
            fprintf(log, "quant size  = %8.2f MiB (%.2f BPW)\n", (double)rep.size_out / 1048576.0, (double)rep.size_out * 8.0 / ne);
        }
        if (rep.n_fallback > 0)
            fprintf(log, "warning: %d of %d tensor(s) required fallback quantization\n", rep.n_fallback, (int)nt);
        if (params->dry_run && will_require_imatrix)
            fprintf(log, "warning: dry run completed, but this quantization will require an imatrix\n");
    }
    if (report) *report = rep;

done:
    iqf_feedback_free(fb);
    for (int p = 0; ws && p < n_out; p++) iqf_gguf_writer_abort(ws[p]);
    for (int p = 0; ws_path && p < n_out; p++) free(ws_path[p]);
    free(ws);
    free(ws_path);
    free(f32buf);
    free(qbuf);
    for (int i = 0; i < n_ov; i++) regfree(&ov[i].re);
    free(ov);
    free(items);
    free(new_names);
    free(rt);
    free(rc);
    iqf_imatrix_free(&im);
    iqf_gguf_close(g);
    return st;
}
