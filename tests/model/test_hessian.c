/*
 * test_hessian.c - Hessian capture (src/model/hessian.c) and the Hessian file
 * (src/stats/hessian_file.c), on the bundled stories260K.
 *  - iqf_hessian_accumulate on synthetic batches against a float64 accumulation in this file
 *    (full and block-diagonal slots, rows not a multiple of 16), tolerance 2e-6 of sum|x_i x_j|;
 *    bit-identical at 1 and 2 threads and on the scalar, AVX2 and AVX-512 paths; symmetric.
 *  - end to end (imatrix collection with a Hessian attached): blk.0's q/k/v input is
 *    RMSNorm(embedding) * attn_norm, recomputed here in float64 from the weights: every element of
 *    the captured mean within 1e-5 of sqrt(H_ii H_jj); the diagonal equals the imatrix's mean x^2;
 *    token counts; the file written and read back (F32 exact, F16 = fp16 of the F32 value).
 *  - the reader's errors: truncated file, NaN value, wrong general.type, negative diagonal.
 */
#include "iqforge.h"
#include "model/hessian.h"
#include "model/model.h"
#include "stats/hessian_file.h"
#include "stats/imatrix.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "tests/data/stories260K/stories260K-f32.gguf"

/* float64 reference of the block-diagonal sum of x x^T over several batches */
static void synthetic(const iqf_model *m) {
    char err[512];
    const int T1 = 37, T2 = 80;
    iqf_context *c1 = NULL, *c2 = NULL;
    CHECK(iqf_context_new(m, 128, 1, &c1, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_context_new(m, 128, 2, &c2, err, sizeof err) == IQF_OK, "%s", err);
    /* c1: the best SIMD level (AVX-512 where present), c2: AVX2 at most, cs below: scalar */
    if (c2 && c2->simd > IQF_SIMD_AVX2) c2->simd = IQF_SIMD_AVX2;
    if (!c1 || !c2) return;
    const iqf_weight *wdown = &m->layers[0].wdown; /* 172 wide: not a multiple of 16 */
    const iqf_weight *wk = &m->layers[0].wk;       /* 64 wide */
    const int64_t nd = wdown->ncols, nk = wk->ncols;
    /* block sizes: full for both on c1/c2 first; then 32-blocks on a third accumulator */
    for (int variant = 0; variant < 2; variant++) {
        const int64_t maxb = variant ? 32 : 0;
        iqf_hess_acc *a1 = NULL, *a2 = NULL, *a3 = NULL;
        CHECK(iqf_hessian_attach(c1, maxb, &a1, err, sizeof err) == IQF_OK || maxb, "%s", err);
        if (variant && !a1) {
            /* 172 is not a multiple of 32: attach refuses */
            CHECK(strstr(err, "does not divide"), "message: %s", err);
            CHECK(iqf_hessian_attach(c1, 4, &a1, err, sizeof err) == IQF_OK, "%s", err);
            CHECK(iqf_hessian_attach(c2, 4, &a2, err, sizeof err) == IQF_OK, "%s", err);
        } else {
            CHECK(iqf_hessian_attach(c2, maxb, &a2, err, sizeof err) == IQF_OK, "%s", err);
        }
        if (!a1 || !a2) return;
        iqf_context *cs = NULL;
        CHECK(iqf_context_new(m, 128, 2, &cs, err, sizeof err) == IQF_OK, "%s", err);
        if (!cs) return;
        cs->simd = IQF_SIMD_SCALAR;
        CHECK(iqf_hessian_attach(cs, variant ? 4 : 0, &a3, err, sizeof err) == IQF_OK, "%s", err);
        tu_rng rng = { 7 + (uint64_t)variant };
        const int ld = 200;
        float *x = malloc(sizeof(float) * (size_t)(T1 + T2) * ld);
        for (int i = 0; i < (T1 + T2) * ld; i++) x[i] = (float)(tu_normal(&rng) * (1 + (i % ld) % 5));
        const iqf_weight *ws[2] = { wdown, wk };
        const int64_t ns[2] = { nd, nk };
        for (int wi = 0; wi < 2; wi++) {
            iqf_hessian_accumulate(c1, ws[wi], x, ld, T1);
            iqf_hessian_accumulate(c1, ws[wi], x + (size_t)T1 * ld, ld, T2);
            iqf_hessian_accumulate(c2, ws[wi], x, ld, T1);
            iqf_hessian_accumulate(c2, ws[wi], x + (size_t)T1 * ld, ld, T2);
            iqf_hessian_accumulate(cs, ws[wi], x, ld, T1);
            iqf_hessian_accumulate(cs, ws[wi], x + (size_t)T1 * ld, ld, T2);
        }
        /* a weight that owns no slot (attn_q: q/k/v share attn_k's) adds nothing */
        iqf_hessian_accumulate(c1, &m->layers[0].wq, x, ld, T1);
        for (int wi = 0; wi < 2; wi++) {
            char hn[96];
            iqf_hessian_name_for(ws[wi]->name, hn, sizeof hn);
            iqf_hess_slot *s1 = iqf_hessian_slot(a1, hn), *s2 = iqf_hessian_slot(a2, hn), *s3 = iqf_hessian_slot(a3, hn);
            CHECK(s1 && s2 && s3, "slot %s", hn);
            if (!s1 || !s2 || !s3) continue;
            const int64_t n = ns[wi], bs = s1->bs;
            CHECK(s1->count == T1 + T2, "count %lld", (long long)s1->count);
            CHECK(bs == (variant ? (n > 4 ? 4 : n) : n), "block %lld for %lld", (long long)bs, (long long)n);
            /* the upper triangles are what accumulate fills; mirror through the writer's path */
            iqf_hessian_acc_write(a1, m, "/dev/null", 0, 0, NULL, false, err, sizeof err);
            iqf_hessian_acc_write(a2, m, "/dev/null", 0, 0, NULL, false, err, sizeof err);
            iqf_hessian_acc_write(a3, m, "/dev/null", 0, 0, NULL, false, err, sizeof err);
            CHECK(!memcmp(s1->sum, s2->sum, sizeof(double) * (size_t)(n * bs)), "%s: 1 vs 2 threads (best SIMD vs AVX2) differ", hn);
            CHECK(!memcmp(s1->sum, s3->sum, sizeof(double) * (size_t)(n * bs)), "%s: best SIMD vs scalar differ", hn);
            double worst = 0;
            for (int64_t r = 0; r < n; r++)
                for (int64_t j = 0; j < bs; j++) {
                    const int64_t col = (r / bs) * bs + j;
                    double ref = 0, mag = 0;
                    for (int t = 0; t < T1 + T2; t++) {
                        double p = (double)x[(size_t)t * ld + r] * (double)x[(size_t)t * ld + col];
                        ref += p;
                        mag += fabs(p);
                    }
                    double e = fabs(s1->sum[r * bs + j] - ref) / mag;
                    if (e > worst) worst = e;
                    const double sym = s1->sum[((r / bs) * bs + j) * bs + r % bs];
                    if (sym != s1->sum[r * bs + j]) worst = 1;
                }
            printf("synthetic %s block %lld: worst relative error %.3g\n", hn, (long long)bs, worst);
            CHECK(worst < 2e-6, "%s: worst relative error %g", hn, worst);
        }
        free(x);
        iqf_hessian_detach(c1);
        iqf_hessian_detach(c2);
        iqf_hessian_acc_free(a1);
        iqf_hessian_acc_free(a2);
        iqf_hessian_acc_free(a3);
        iqf_context_free(cs);
    }
    iqf_context_free(c1);
    iqf_context_free(c2);
}

typedef struct prog_log {
    int calls, last_done, bad;
    double last_s;
} prog_log;

static void prog_cb(void *user, int done, int total, double seconds) {
    prog_log *l = user;
    l->calls++;
    l->bad += done != l->last_done + 1 || total != 3 || !(seconds >= l->last_s);
    l->last_done = done;
    l->last_s = seconds;
}

/* --no-ppl (iqf_imatrix_collect_ex): the same importance sums and Hessians, bit for bit, as the
 * run with logits (a, d); ppl 0; the progress callback once per chunk, in order. */
static void no_ppl_same(const iqf_model *m, const int32_t *toks, int n_ctx, int n_chunks, const iqf_hess_acc *a,
                        const iqf_imatrix_data *d) {
    char err[512];
    iqf_context *c = NULL;
    CHECK(iqf_context_new(m, n_ctx, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
    if (!c) return;
    iqf_hess_acc *a2 = NULL;
    CHECK(iqf_hessian_attach(c, 0, &a2, err, sizeof err) == IQF_OK, "%s", err);
    prog_log pl = { 0, 0, 0, 0 };
    iqf_context_set_progress(c, prog_cb, &pl);
    const iqf_imatrix_params ip = { n_ctx, n_chunks, stdout, true };
    iqf_imatrix_data *d2 = NULL;
    CHECK(iqf_imatrix_collect_ex(c, toks, (size_t)(n_ctx * n_chunks), &ip, &d2, err, sizeof err) == IQF_OK, "%s", err);
    iqf_hessian_detach(c);
    CHECK(pl.calls == n_chunks && !pl.bad, "progress: %d calls, %d out of order", pl.calls, pl.bad);
    if (a2 && d2) {
        CHECK(d2->ppl == 0 && d->ppl > 0, "no-ppl: ppl %g (with logits %g)", d2->ppl, d->ppl);
        CHECK(d2->n_entries == d->n_entries, "no-ppl: %d entries, %d with logits", d2->n_entries, d->n_entries);
        for (int i = 0; i < d->n_entries && i < d2->n_entries; i++)
            CHECK(!strcmp(d->names[i], d2->names[i]) && d->counts[i] == d2->counts[i] &&
                      !memcmp(d->sum2[i], d2->sum2[i], sizeof(float) * (size_t)d->ncols[i]),
                  "no-ppl: importance of %s differs", d->names[i]);
        CHECK(a2->n_slots == a->n_slots, "no-ppl: %d Hessians, %d with logits", a2->n_slots, a->n_slots);
        for (int i = 0; i < a->n_slots && i < a2->n_slots; i++)
            CHECK(a->slots[i].count == a2->slots[i].count &&
                      !memcmp(a->slots[i].sum, a2->slots[i].sum, sizeof(double) * (size_t)(a->slots[i].n * a->slots[i].bs)),
                  "no-ppl: Hessian %s differs", a->slots[i].name);
    }
    /* NULL params */
    iqf_imatrix_data *d3 = NULL;
    CHECK(iqf_imatrix_collect_ex(c, toks, (size_t)(n_ctx * n_chunks), NULL, &d3, err, sizeof err) == IQF_E_INVALID_ARG && !d3,
          "NULL params");
    iqf_imatrix_data_free(d2);
    iqf_hessian_acc_free(a2);
    iqf_context_free(c);
}

static void end_to_end(const iqf_model *m) {
    char err[512];
    const iqf_model_info *h = iqf_model_get_info(m);
    const int n_ctx = 64, n_chunks = 3;
    iqf_context *c = NULL;
    CHECK(iqf_context_new(m, n_ctx, 2, &c, err, sizeof err) == IQF_OK, "%s", err);
    if (!c) return;
    tu_rng rng = { 42 };
    int32_t toks[64 * 3];
    for (int i = 0; i < n_ctx * n_chunks; i++) toks[i] = (int32_t)(tu_next(&rng) % (uint64_t)h->n_vocab);
    iqf_hess_acc *a = NULL;
    CHECK(iqf_hessian_attach(c, 0, &a, err, sizeof err) == IQF_OK, "%s", err);
    iqf_imatrix_data *d = NULL;
    CHECK(iqf_imatrix_collect(c, toks, (size_t)(n_ctx * n_chunks), n_ctx, n_chunks, NULL, &d, err, sizeof err) == IQF_OK,
          "%s", err);
    iqf_hessian_detach(c);
    if (!a || !d) return;
    no_ppl_same(m, toks, n_ctx, n_chunks, a, d);
    CHECK(a->n_slots == 4 * h->n_layer + 1, "slots %d", a->n_slots);
    for (int i = 0; i < a->n_slots; i++)
        CHECK(a->slots[i].count == n_ctx * n_chunks, "%s count %lld", a->slots[i].name, (long long)a->slots[i].count);
    char path[64], p16[64];
    snprintf(path, sizeof path, "/tmp/iqf_test_hess_%d.gguf", (int)getpid());
    snprintf(p16, sizeof p16, "/tmp/iqf_test_hess16_%d.gguf", (int)getpid());
    CHECK(iqf_hessian_acc_write(a, m, path, n_chunks, n_ctx, "random", false, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_acc_write(a, m, p16, n_chunks, n_ctx, "random", true, err, sizeof err) == IQF_OK, "%s", err);
    iqf_hess_slot *s = iqf_hessian_slot(a, "blk.0.attn_qkv.hessian");
    CHECK(s && s->n == 64 && s->bs == 64, "blk.0.attn_qkv slot");
    const int E = h->n_embd;
    double *ref = calloc((size_t)E * E, sizeof(double));
    float *row = malloc(sizeof(float) * (size_t)E);
    double *y = malloc(sizeof(double) * (size_t)E);
    for (int ch = 0; ch < n_chunks; ch++)
        for (int t = 0; t < n_ctx; t++) {
            int tok = t == 0 && h->add_bos ? h->bos_id : toks[ch * n_ctx + t];
            iqf_weight_row(&m->tok_embd, tok, row);
            double ss = 0;
            for (int k = 0; k < E; k++) ss += (double)row[k] * row[k];
            double sc = 1.0 / sqrt(ss / E + h->rms_eps);
            for (int k = 0; k < E; k++) y[k] = row[k] * sc * m->layers[0].attn_norm[k];
            for (int i = 0; i < E; i++)
                for (int j = 0; j < E; j++) ref[i * E + j] += y[i] * y[j];
        }
    if (s) {
        double worst = 0;
        for (int i = 0; i < E; i++)
            for (int j = 0; j < E; j++) {
                double e = fabs(s->sum[i * E + j] - ref[i * E + j]) / sqrt(ref[i * E + i] * ref[j * E + j]);
                if (e > worst) worst = e;
            }
        printf("end to end blk.0.attn_qkv: worst error %.3g of sqrt(Hii Hjj)\n", worst);
        CHECK(worst < 1e-5, "captured H differs from the float64 recomputation by %g", worst);
    }
    /* the diagonal is the imatrix */
    for (int i = 0; i < d->n_entries; i++) {
        char hn[96];
        iqf_hessian_name_for(d->names[i], hn, sizeof hn);
        iqf_hess_slot *q = iqf_hessian_slot(a, hn);
        CHECK(q && q->n == d->ncols[i], "%s", hn);
        if (!q) continue;
        double worst = 0;
        for (int64_t j = 0; j < q->n; j++) {
            double hd = q->sum[j * q->bs + j % q->bs] / (double)q->count;
            double im = (double)d->sum2[i][j] / (double)d->counts[i];
            worst = fmax(worst, fabs(hd - im) / fmax(im, 1e-30));
        }
        CHECK(worst < 1e-5, "%s: diag(H) vs imatrix %g", d->names[i], worst);
    }
    /* read back */
    iqf_hessian_file hf, h16;
    CHECK(iqf_hessian_open(path, &hf, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_open(p16, &h16, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(hf.token_count == (uint64_t)(n_ctx * n_chunks) && hf.chunk_count == n_chunks && hf.chunk_size == n_ctx, "meta");
    CHECK(hf.model.n_embd == E && hf.model.n_layer == h->n_layer && !strcmp(hf.model.arch, "llama"), "model id");
    for (int i = 0; i < a->n_slots; i++) {
        const iqf_hess_slot *q = &a->slots[i];
        int64_t n, bs;
        CHECK(iqf_hessian_find(&hf, q->name, &n, &bs) && n == q->n && bs == q->bs, "%s in file", q->name);
        float *v = malloc(sizeof(float) * (size_t)(q->n * q->bs)), *v16 = malloc(sizeof(float) * (size_t)(q->n * q->bs));
        iqf_hessian_read(&hf, q->name, v);
        iqf_hessian_read(&h16, q->name, v16);
        int bad = 0, bad16 = 0;
        for (int64_t j = 0; j < q->n * q->bs; j++) {
            float want = (float)(q->sum[j] / (double)q->count);
            bad += v[j] != want;
            bad16 += v16[j] != iqf_fp16_to_fp32(iqf_fp32_to_fp16(want));
        }
        CHECK(!bad && !bad16, "%s: %d F32 / %d F16 values differ", q->name, bad, bad16);
        free(v);
        free(v16);
    }
    iqf_hessian_close(&h16);
    /* errors: truncated, NaN, negative diagonal, wrong type */
    size_t sz = 0;
    uint8_t *bytes = read_file(path, &sz);
    char bad[64];
    snprintf(bad, sizeof bad, "/tmp/iqf_test_hessbad_%d.gguf", (int)getpid());
    if (bytes && sz > 64) {
        iqf_hessian_file x;
        write_file(bad, bytes, sz - 100);
        CHECK(iqf_hessian_open(bad, &x, err, sizeof err) == IQF_E_FORMAT && strstr(err, bad), "truncated: %s", err);
        const iqf_gguf *g = hf.g;
        const iqf_gguf_tensor *t0 = iqf_gguf_tensor_at(g, 0);
        size_t off = iqf_gguf_data_offset(g) + t0->offset;
        uint8_t *cp = malloc(sz);
        memcpy(cp, bytes, sz);
        float nan = NAN;
        memcpy(cp + off + 4 * 5, &nan, 4);
        write_file(bad, cp, sz);
        CHECK(iqf_hessian_open(bad, &x, err, sizeof err) == IQF_E_NONFINITE && strstr(err, "non-finite"), "NaN: %s", err);
        memcpy(cp, bytes, sz);
        float neg = -1;
        memcpy(cp + off, &neg, 4);
        write_file(bad, cp, sz);
        CHECK(iqf_hessian_open(bad, &x, err, sizeof err) == IQF_E_NONFINITE && strstr(err, "negative"), "negative: %s", err);
        free(cp);
        char im[64];
        snprintf(im, sizeof im, "/tmp/iqf_test_hessim_%d.gguf", (int)getpid());
        iqf_imatrix_stats st = { "blk.0.attn_q.weight", 64, 1, d->sum2[0], &d->counts[0] };
        iqf_imatrix_meta mt = { 1, 64, NULL };
        CHECK(iqf_imatrix_write_gguf(im, &st, 1, &mt, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(iqf_hessian_open(im, &x, err, sizeof err) == IQF_E_FORMAT && strstr(err, "not a Hessian"), "imatrix as Hessian: %s", err);
        remove(im);
    }
    free(bytes);
    remove(bad);
    iqf_hessian_close(&hf);
    remove(path);
    remove(p16);
    free(ref);
    free(row);
    free(y);
    iqf_imatrix_data_free(d);
    iqf_hessian_acc_free(a);
    iqf_context_free(c);
}

int main(void) {
    char err[512];
    iqf_model *m = NULL;
    CHECK(iqf_model_load(src_path(MODEL), NULL, &m, err, sizeof err) == IQF_OK, "load: %s", err);
    if (!m) return test_finish("test_hessian");
    char hn[96];
    CHECK(iqf_hessian_name_for("blk.3.attn_v.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.attn_qkv.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("blk.3.ffn_up.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_gate_up.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("blk.3.ffn_down.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_down.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("output.weight", hn, sizeof hn) && !strcmp(hn, "output.hessian"), "%s", hn);
    CHECK(!iqf_hessian_name_for("output_norm", hn, sizeof hn), "no .weight");
    synthetic(m);
    end_to_end(m);
    iqf_model_free(m);
    return test_finish("test_hessian");
}
