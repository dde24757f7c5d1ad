/*
 * pipeline.c - iqf_model_quantize: a GGUF model in, a quantized GGUF model out, as llama 0.25.1's
 * llama_model_quantize (src/llama-quant.cpp) does it. The plan (plan.c) opens the input and its
 * statistics, orders and names the tensors, chooses their types and makes every check that can
 * refuse the run; this file encodes and writes that plan:
 *   - the header (KVs from iqf_plan_write_kvs, tensor infos), then each tensor's data in output
 *     order, copied or encoded slab by slab (with error feedback when a Hessian is loaded);
 *   - nothing is written before the plan is complete, and the output goes through the streaming
 *     GGUF writer (temp file + rename), so a failed run leaves no file.
 * Memory: the input is mapped; each tensor is converted to f32 and quantized in slabs of rows
 * (SLAB_FLOATS), and the pages of the input already consumed are dropped (MADV_DONTNEED), so the
 * peak RSS is a few slabs, not the model.
 */
#include "iqforge.h"
#include "../util/error.h"

#include "plan.h"

#include "../util/outfile.h"
#include "../util/progress.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* Converts nrows rows of the input tensor (rows [r0, r0+nrows)) to f32 in dst (or returns a
 * pointer into the mapping for F32 input). */
static iqf_status rows_to_f32(const iqf_gguf_tensor *t, const uint8_t *data, int64_t r0, int64_t nrows, float *buf,
                              const float **out, int n_threads, char *err, size_t errlen) {
    const size_t rs = iqf_row_size(t->type, t->ne[0]);
    const uint8_t *src = data + (size_t)r0 * rs;
    if (t->type == IQF_TYPE_F32) {
        *out = (const float *)src;
        return IQF_OK;
    }
    iqf_status st = iqf_dequantize(t->type, src, buf, nrows, t->ne[0], n_threads, err, errlen);
    *out = buf;
    return st;
}

/* Everything one run of iqf_model_quantize holds. The stages fill it in the order the data flows
 * (the plan: open and validate -> load the statistics -> order the tensors -> choose the types;
 * then write the header -> encode slab by slab -> commit), each returning IQF_OK or a status with
 * err set; job_free releases whatever the stages reached. Invariant: nothing is written to the
 * output before iqf_plan_types has accepted every tensor, and nothing is visible under the
 * output's name before commit_output. */
typedef struct quant_job {
    const char *in, *out;
    const iqf_model_quantize_params *p;
    FILE *log;              /* NULL when quiet or no log was given */
    int n_threads;
    char *err;
    size_t errlen;
    /* stages 1-4: the plan (plan.c); its items are the output tensors in order */
    iqf_plan pl;
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

/* Stage 5: open every output part (temp files), write the KVs and the tensor infos. */
static iqf_status write_header(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    iqf_status st = IQF_OK;
    assert(j->pl.complete && !p->dry_run); /* the invariant: nothing written before the plan is */
    j->n_out = p->keep_split ? iqf_gguf_n_parts(j->pl.g) : 1;
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
        for (int k = 0; k < iqf_gguf_n_parts(j->pl.g) && !st; k++)
            st = iqf_gguf_writer_set_input(j->ws[q], iqf_gguf_part_path(j->pl.g, k));
        if (st) return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(j->ws[q]));
    }
    st = iqf_plan_write_kvs(&j->pl, j->ws[0]);
    for (int q = 0; q < n_out && n_out > 1 && !st; q++) { /* gguf_set_val_*: appended last */
        st = iqf_gguf_writer_set_u16(j->ws[q], "split.no", (uint16_t)q);
        if (!st) st = iqf_gguf_writer_set_u16(j->ws[q], "split.count", (uint16_t)n_out);
        if (!st) st = iqf_gguf_writer_set_i32(j->ws[q], "split.tensors.count", (int32_t)j->pl.nt);
    }
    for (int64_t i = 0; i < j->pl.nt && !st; i++)
        st = iqf_gguf_writer_add_tensor(j->ws[n_out > 1 ? j->pl.items[i].t->part : 0], j->pl.rt[i].name,
                                        j->pl.items[i].t->n_dims, j->pl.items[i].t->ne, j->pl.items[i].choice.type);
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
    const iqf_plan_item *it = &j->pl.items[i];
    const iqf_gguf_tensor *t = it->t;
    char sh[96];
    shape_str(t, sh, sizeof sh);
    if (it->choice.type != t->type)
        fprintf(j->log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.2f MiB -> %8.2f MiB (%s)%s\n",
                i + 1, j->pl.nt, j->pl.rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0,
                (double)new_size / 1048576.0, tname(it->choice.type), it->choice.fallback ? " (fallback)" : "");
    else
        fprintf(j->log, "[%4" PRId64 "/%4" PRId64 "] %-36s - [%s], type = %6s, size = %8.3f MiB\n", i + 1, j->pl.nt,
                j->pl.rt[i].name, sh, tname(t->type), (double)t->nbytes / 1048576.0);
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
    const iqf_plan_item *it = &j->pl.items[i];
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
    /* mapped; or produced now, slab by slab (a source's rows: one slab held, not the tensor) */
    const bool by_rows = iqf_gguf_is_source(j->pl.g);
    const uint8_t *data = by_rows ? NULL : iqf_gguf_tensor_load(j->pl.g, t, msg, sizeof msg);
    if (!by_rows && !data) return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s", msg);
#ifndef NDEBUG
    const uint64_t remaining0 = iqf_gguf_writer_data_remaining(wi);
#endif
    for (int64_t r = 0; r < nrows_total;) {
        const int64_t expert = r / rows_per_expert;
        const int64_t left_in_expert = rows_per_expert - r % rows_per_expert;
        const int64_t n = slab < left_in_expert ? slab : left_in_expert;
        const float *x;
        if (j->p->pre_encoded && j->p->pre_encoded(j->p->pre_encoded_user, t->name, new_type, r, n, ncols, j->qbuf)) {
            if (j->p->post_encode) j->p->post_encode(j->p->post_encode_user, t->name, new_type, j->qbuf, n, ncols);
            st = iqf_gguf_writer_write_data(wi, j->qbuf, (size_t)n * dst_rs);
            if (st) return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(wi));
            r += n;
            *done_in += (int64_t)((size_t)n * src_rs);
            iqf_progress_update(prog, (int)i + 1, t->name, tname(new_type), *done_in);
            continue;
        }
        if (by_rows && !(data = iqf_gguf_tensor_load_rows(j->pl.g, t, r, n, msg, sizeof msg)))
            return iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s", msg);
        if (!by_rows && r + n < nrows_total) {
            const int64_t nn = nrows_total - (r + n) < slab ? nrows_total - (r + n) : slab;
            prefetch(data + (size_t)(r + n) * src_rs, (size_t)nn * src_rs);
        }
        st = rows_to_f32(t, data, by_rows ? 0 : r, n, j->f32buf, &x, j->n_threads, msg, sizeof msg);
        if (st) return iqf_fail(j->err, j->errlen, st, "tensor %s: %s", t->name, msg);
        const float *imx = it->imatrix ? it->imatrix + expert * ncols : NULL;
        st = j->pl.fb ? iqf_feedback_quantize(j->pl.fb, t->name, expert, new_type, x, j->qbuf, n, ncols, imx, qp, msg, sizeof msg)
                   : iqf_quantize(new_type, x, j->qbuf, n, ncols, imx, qp, msg, sizeof msg);
        if (st) {
            if (st == IQF_E_NONFINITE && !imx)
                return iqf_fail(j->err, j->errlen, st, "%s: tensor %s (rows from %" PRId64 "): %s", j->in, t->name, r, msg);
            return iqf_fail(j->err, j->errlen, st, "tensor %s: %s", t->name, msg);
        }
        if (j->p->post_encode) j->p->post_encode(j->p->post_encode_user, t->name, new_type, j->qbuf, n, ncols);
        st = iqf_gguf_writer_write_data(wi, j->qbuf, (size_t)n * dst_rs);
        if (st) return iqf_fail(j->err, j->errlen, st, "%s", iqf_gguf_writer_error(wi));
        if (!by_rows) drop_pages(data + (size_t)r * src_rs, (size_t)n * src_rs);
        r += n;
        *done_in += (int64_t)((size_t)n * src_rs);
        iqf_progress_update(prog, (int)i + 1, t->name, tname(new_type), *done_in);
    }
    iqf_gguf_tensor_unload(j->pl.g, t);
    /* the plan's byte count for this tensor is what went to the file */
    assert(remaining0 - iqf_gguf_writer_data_remaining(wi) == iqf_plan_item_bytes(&j->pl, i));
    return IQF_OK;
}

/* Stage 6: the tensor data in output order (or, with --dry-run, the plan's listing). */
static iqf_status encode_tensors(quant_job *j) {
    const iqf_model_quantize_params *p = j->p;
    int64_t total_in = 0, done_in = 0;
    for (int64_t i = 0; i < j->pl.nt; i++) total_in += (int64_t)j->pl.items[i].t->nbytes;
    iqf_progress prog;
    iqf_progress_init(&prog, p->dry_run ? NULL : p->progress, p->progress_user, (int)j->pl.nt, total_in);
    iqf_quantize_params qp = iqf_quantize_default_params();
    qp.n_threads = j->n_threads;
    qp.mode = p->mode;
    iqf_status st = IQF_OK;
    assert(j->pl.complete);
    for (int64_t i = 0; i < j->pl.nt && !st; i++) {
        const iqf_gguf_tensor *t = j->pl.items[i].t;
        const int new_type = j->pl.items[i].choice.type;
        const uint64_t new_size = iqf_plan_item_bytes(&j->pl, i);
        j->rep.n_elements += iqf_gguf_tensor_nelements(t);
        j->rep.size_in += t->nbytes;
        j->rep.size_out += new_size;
        iqf_progress_update(&prog, (int)i + 1, t->name, tname(new_type), done_in);
        if (p->dry_run) {
            if (j->log) print_plan_line(j, i, new_size);
        } else if (new_type == t->type) { /* copied as it is */
            iqf_gguf_writer *wi = j->ws[j->n_out > 1 ? t->part : 0];
            char msg[512];
            const void *data = iqf_gguf_tensor_load(j->pl.g, t, msg, sizeof msg);
            if (!data) {
                st = iqf_fail(j->err, j->errlen, IQF_E_FORMAT, "%s", msg);
                break;
            }
            st = iqf_gguf_writer_write_data(wi, data, t->nbytes);
            drop_pages(data, t->nbytes);
            iqf_gguf_tensor_unload(j->pl.g, t);
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
        fprintf(j->log, "warning: %d of %d tensor(s) required fallback quantization\n", rep->n_fallback, (int)j->pl.nt);
    if (p->dry_run && j->pl.will_require_imatrix)
        fprintf(j->log, "warning: dry run completed, but this quantization will require an imatrix\n");
}

static void job_free(quant_job *j) {
    for (int q = 0; j->ws && q < j->n_out; q++) iqf_gguf_writer_abort(j->ws[q]); /* removes the temp files */
    for (int q = 0; j->ws_path && q < j->n_out; q++) free(j->ws_path[q]);
    free(j->ws);
    free(j->ws_path);
    free(j->f32buf);
    free(j->qbuf);
    iqf_plan_free(&j->pl);
}

iqf_status iqf_model_quantize(const char *in, const char *out, const iqf_model_quantize_params *params,
                              iqf_model_quantize_report *report, FILE *logp, char *err, size_t errlen) {
    return iqf_model_quantize_typed(in, out, params, NULL, NULL, 0, report, logp, err, errlen);
}

iqf_status iqf_model_quantize_typed(const char *in, const char *out, const iqf_model_quantize_params *params,
                                    const int *types, const char (*names)[IQF_GGUF_MAX_NAME], int64_t n_types,
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

    iqf_status st = iqf_plan_open(&j.pl, in, params, j.log, err, errlen);
    if (!st) st = iqf_plan_types(&j.pl, params->ftype, types, names, n_types);
    if (!st) {
        j.rep.n_fallback = j.pl.n_fallback;
        j.rep.n_quantized = j.pl.n_quantized;
    }
    if (!st && !params->dry_run) st = write_header(&j);
    if (!st) st = encode_tensors(&j);
    if (!st && !params->dry_run) st = commit_output(&j);
    if (!st) {
        j.rep.n_tensors = (int)j.pl.nt;
        j.rep.seconds = iqf_now() - t0;
        if (j.log) print_summary(&j);
        if (report) *report = j.rep;
    }
    job_free(&j);
    return st;
}
