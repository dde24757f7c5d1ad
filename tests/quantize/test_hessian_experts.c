/*
 * test_hessian_experts.c - per-expert Hessians of 3-D expert tensors (src/model/hessian.c's expert
 * slots, the per-expert entries of src/stats/hessian_file.c, src/quantize/fb_session.c), on a
 * random-weight qwen3moe (8 experts, 2 used; genmodel).
 *  - iqf_hessian_accumulate_expert on synthetic rows against a float64 accumulation (full
 *    matrices: every off-diagonal element), tolerance 2e-6 of sum|x_i x_j|; bit-identical at 1
 *    thread (best SIMD) and 2 threads (scalar); experts given no rows stay zero; per-expert counts;
 *    iqf_hessian_attach_ex's expert blocks and opt-out.
 *  - the file: a 3-D entry written and read back per expert (means by the expert's own count, an
 *    expert without rows all zero, F32 exact); the reader's errors: a NaN and a negative diagonal
 *    in a later expert; an entry with the wrong expert count for the model refused by quantize.
 *  - end to end: capture over random tokens (imatrix collection) at 1 and 2 threads gives the same
 *    file; quantize --hessian (Q4_0) at 1 and 2 threads gives the same bytes, logs error feedback
 *    per expert on ffn_*_exps, and differs from the plain encoder's output; after an 8-token
 *    capture, the experts no row reached take the plain encoder (logged), same bytes at 1 and 2.
 */
#include "iqforge.h"
#include "genmodel.h"
#include "model/hessian.h"
#include "model/model.h"
#include "stats/hessian_file.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void synthetic(const iqf_model *m) {
    char err[512];
    iqf_context *c1 = NULL, *c2 = NULL;
    CHECK(iqf_context_new(m, 64, 1, &c1, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_context_new(m, 64, 2, &c2, err, sizeof err) == IQF_OK, "%s", err);
    if (!c1 || !c2) return;
    c2->simd = IQF_SIMD_SCALAR;
    iqf_hess_acc *a1 = NULL, *a2 = NULL;
    CHECK(iqf_hessian_attach(c1, -1, &a1, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_attach(c2, -1, &a2, err, sizeof err) == IQF_OK, "%s", err);
    if (!a1 || !a2) return;
    const iqf_layer *ly = &m->layers[1];
    const iqf_weight *ws[2] = { &ly->gate_exps, &ly->down_exps };
    const int T1 = 13, T2 = 29, NE = ws[0]->n_mat;
    CHECK(NE == 8, "%d experts", NE);
    for (int wi = 0; wi < 2; wi++) {
        const iqf_weight *w = ws[wi];
        const int64_t n = w->ncols, ld = n + 3;
        tu_rng rng = { 11 + (uint64_t)wi };
        float *x = malloc(sizeof(float) * (size_t)((T1 + T2) * ld));
        for (int64_t i = 0; i < (T1 + T2) * ld; i++) x[i] = (float)(tu_normal(&rng) * (1 + (i % ld) % 3));
        /* expert 2: both batches; expert 5: the second only; the others nothing */
        iqf_context *cs[2] = { c1, c2 };
        for (int k = 0; k < 2; k++) {
            iqf_hessian_accumulate_expert(cs[k], w, 2, x, ld, T1);
            iqf_hessian_accumulate_expert(cs[k], w, 2, x + T1 * ld, ld, T2);
            iqf_hessian_accumulate_expert(cs[k], w, 5, x + T1 * ld, ld, T2);
            /* up_exps shares gate_exps's slot: it adds nothing */
            iqf_hessian_accumulate_expert(cs[k], &ly->up_exps, 3, x, ld, T1);
        }
        iqf_hessian_acc_write(a1, m, "/dev/null", 0, 0, NULL, false, err, sizeof err); /* mirrors */
        iqf_hessian_acc_write(a2, m, "/dev/null", 0, 0, NULL, false, err, sizeof err);
        char hn[96];
        CHECK(iqf_hessian_name_for(w->name, hn, sizeof hn), "%s", w->name);
        iqf_hess_slot *s1 = iqf_hessian_slot(a1, hn), *s2 = iqf_hessian_slot(a2, hn);
        CHECK(s1 && s2, "no slot %s", hn);
        if (!s1 || !s2) continue;
        CHECK(s1->n_mat == NE && s1->bs == n && s1->n == n, "%s: %lld experts, %lld x %lld", hn, (long long)s1->n_mat,
              (long long)s1->n, (long long)s1->bs);
        CHECK(!memcmp(s1->sum, s2->sum, sizeof(double) * (size_t)(NE * n * n)), "%s: 1 thread vs 2 (scalar) differ", hn);
        for (int e = 0; e < NE; e++) {
            const int64_t want = e == 2 ? T1 + T2 : e == 5 ? T2 : 0;
            CHECK(s1->ecount[e] == want, "%s expert %d: count %lld, want %lld", hn, e, (long long)s1->ecount[e], (long long)want);
            const double *S = s1->sum + e * n * n;
            double worst = 0;
            for (int64_t r = 0; r < n; r++)
                for (int64_t j = 0; j < n; j++) {
                    double ref = 0, mag = 0;
                    const int t0 = e == 5 ? T1 : 0, t1 = want ? T1 + T2 : 0;
                    for (int t = t0; t < t1; t++) {
                        const double p = (double)x[t * ld + r] * (double)x[t * ld + j];
                        ref += p;
                        mag += fabs(p);
                    }
                    const double d = mag > 0 ? fabs(S[r * n + j] - ref) / mag : fabs(S[r * n + j]);
                    worst = fmax(worst, d);
                }
            CHECK(worst < 2e-6, "%s expert %d: worst relative error %g", hn, e, worst);
            if (e == 2) printf("synthetic %s expert 2: %lld x %lld, worst relative error vs float64 %.3g\n", hn, (long long)n,
                               (long long)n, worst);
        }
        free(x);
    }
    iqf_hessian_detach(c1);
    iqf_hessian_detach(c2);
    iqf_hessian_acc_free(a1);
    iqf_hessian_acc_free(a2);
    /* iqf_hessian_attach_ex: expert blocks of 32, or no expert slots; the other slots unchanged */
    for (int eb = -1; eb <= 32; eb += 33) {
        iqf_hess_acc *a = NULL;
        CHECK(iqf_hessian_attach_ex(c1, -1, eb, &a, err, sizeof err) == IQF_OK, "%s", err);
        if (!a) continue;
        int n_exp = 0, n_plain = 0, bad = 0;
        for (int i = 0; i < a->n_slots; i++) {
            const iqf_hess_slot *q = &a->slots[i];
            if (q->n_mat > 1) n_exp++, bad += q->bs != 32;
            else n_plain++, bad += q->bs != q->n;
        }
        CHECK(n_exp == (eb < 0 ? 0 : 2 * m->info.n_layer) && n_plain == 2 * m->info.n_layer + 1 && !bad,
              "expert_block %d: %d expert slots, %d others, %d with the wrong block", eb, n_exp, n_plain, bad);
        iqf_hessian_detach(c1);
        iqf_hessian_acc_free(a);
    }
    iqf_context_free(c1);
    iqf_context_free(c2);
}

static void file_round_trip(const iqf_model *m, const char *model_path) {
    char err[512], path[96];
    snprintf(path, sizeof path, "/tmp/iqf_test_hexp_rt_%d.gguf", (int)getpid());
    const int64_t n = 64, bs = 32, NM = 3;
    double *sum = malloc(sizeof(double) * (size_t)(NM * n * bs));
    tu_rng rng = { 5 };
    for (int64_t e = 0; e < NM; e++)
        for (int64_t r = 0; r < n; r++)
            for (int64_t j = 0; j < bs; j++)
                sum[(e * n + r) * bs + j] = e == 1 ? 0 : (j == r % bs ? 10 + tu_uniform(&rng) : tu_normal(&rng));
    const int64_t counts[3] = { 4, 0, 7 };
    iqf_hessian_wentry ent = { "blk.0.ffn_down_exps.hessian", n, bs, sum, 9, NM, counts };
    iqf_hessian_wentry plain = { "blk.0.attn_output.hessian", n, bs, sum, 9, 0, NULL };
    iqf_hessian_wentry both[2] = { plain, ent };
    iqf_hessian_meta meta;
    memset(&meta, 0, sizeof meta);
    iqf_hessian_model_id_get(iqf_model_gguf(m), &meta.model);
    CHECK(iqf_hessian_write(path, both, 2, &meta, err, sizeof err) == IQF_OK, "%s", err);
    iqf_hessian_file hf;
    CHECK(iqf_hessian_open(path, &hf, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_n_mat(&hf, "blk.0.ffn_down_exps.hessian") == NM && iqf_hessian_n_mat(&hf, "blk.0.attn_output.hessian") == 1,
          "n_mat");
    float *H = malloc(sizeof(float) * (size_t)(n * bs));
    int bad = 0;
    for (int64_t e = 0; e < NM; e++) {
        CHECK(iqf_hessian_read_mat(&hf, "blk.0.ffn_down_exps.hessian", e, H), "read expert %lld", (long long)e);
        for (int64_t k = 0; k < n * bs; k++)
            bad += H[k] != (counts[e] ? (float)(sum[e * n * bs + k] / (double)counts[e]) : 0.0f);
    }
    CHECK(!iqf_hessian_read_mat(&hf, "blk.0.ffn_down_exps.hessian", NM, H), "expert out of range read");
    CHECK(iqf_hessian_read(&hf, "blk.0.attn_output.hessian", H), "plain read");
    for (int64_t k = 0; k < n * bs; k++) bad += H[k] != (float)(sum[k] / 9.0);
    CHECK(!bad, "%d values differ after the round trip", bad);
    iqf_hessian_close(&hf);

    /* hostile: a NaN, then a negative diagonal, in the last expert */
    sum[(2 * n + 5) * bs + 3] = NAN;
    CHECK(iqf_hessian_write(path, &ent, 1, &meta, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_open(path, &hf, err, sizeof err) == IQF_E_NONFINITE && strstr(err, "non-finite"), "NaN: %s", err);
    sum[(2 * n + 5) * bs + 3] = 0;
    sum[(2 * n + 33) * bs + 1] = -1;
    CHECK(iqf_hessian_write(path, &ent, 1, &meta, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(iqf_hessian_open(path, &hf, err, sizeof err) == IQF_E_NONFINITE && strstr(err, "negative diagonal"), "negative: %s", err);
    /* the writer refuses counts missing or negative */
    iqf_hessian_wentry nocounts = ent;
    nocounts.counts = NULL;
    CHECK(iqf_hessian_write(path, &nocounts, 1, &meta, err, sizeof err) == IQF_E_INVALID_ARG, "no counts");

    /* an entry of the model's width with the wrong number of experts: quantize refuses it */
    const iqf_weight *wd = &m->layers[0].down_exps;
    const int64_t wn = wd->ncols;
    double *s2 = calloc((size_t)(4 * wn * wn), sizeof(double));
    for (int64_t e = 0; e < 4; e++)
        for (int64_t r = 0; r < wn; r++) s2[(e * wn + r) * wn + r] = 1;
    const int64_t c4[4] = { 1, 1, 1, 1 };
    iqf_hessian_wentry four = { "blk.0.ffn_down_exps.hessian", wn, wn, s2, 9, 4, c4 };
    CHECK(iqf_hessian_write(path, &four, 1, &meta, err, sizeof err) == IQF_OK, "%s", err);
    char out[96];
    snprintf(out, sizeof out, "/tmp/iqf_test_hexp_bad_%d.gguf", (int)getpid());
    iqf_model_quantize_params qp = iqf_model_quantize_default_params();
    qp.ftype = IQF_FTYPE_MOSTLY_Q4_0;
    qp.quiet = true;
    qp.hessian_path = path;
    CHECK(iqf_model_quantize(model_path, out, &qp, NULL, NULL, err, sizeof err) == IQF_E_SHAPE && strstr(err, "experts"),
          "wrong expert count: %s", err);
    remove(out);
    free(s2);
    free(H);
    free(sum);
    remove(path);
}

static bool same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = read_file(a, &na), *y = read_file(b, &nb);
    const bool same = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return same;
}

static void end_to_end(const iqf_model *m, const char *model_path) {
    char err[512], hp[2][96], out[3][96];
    const int C = 32, CHUNKS = 3;
    int32_t toks[96];
    tu_rng rng = { 3 };
    for (int i = 0; i < C * CHUNKS; i++) toks[i] = (int32_t)(tu_next(&rng) % (uint64_t)m->info.n_vocab);
    for (int k = 0; k < 2; k++) {
        snprintf(hp[k], sizeof hp[k], "/tmp/iqf_test_hexp_h%d_%d.gguf", k, (int)getpid());
        iqf_context *c = NULL;
        iqf_hess_acc *a = NULL;
        iqf_imatrix_data *d = NULL;
        CHECK(iqf_context_new(m, C, k + 1, &c, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(c && iqf_hessian_attach(c, 0, &a, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(a && iqf_imatrix_collect(c, toks, (size_t)(C * CHUNKS), C, CHUNKS, NULL, &d, err, sizeof err) == IQF_OK, "%s", err);
        CHECK(a && iqf_hessian_acc_write(a, m, hp[k], CHUNKS, C, NULL, false, err, sizeof err) == IQF_OK, "%s", err);
        iqf_imatrix_data_free(d);
        iqf_hessian_acc_free(a);
        iqf_context_free(c);
    }
    CHECK(same_file(hp[0], hp[1]), "Hessian files differ between 1 thread and 2");
    iqf_hessian_file hf;
    CHECK(iqf_hessian_open(hp[0], &hf, err, sizeof err) == IQF_OK, "%s", err);
    for (int l = 0; l < m->info.n_layer; l++) {
        char a[64], b[64];
        snprintf(a, sizeof a, "blk.%d.ffn_gate_up_exps.hessian", l);
        snprintf(b, sizeof b, "blk.%d.ffn_down_exps.hessian", l);
        CHECK(iqf_hessian_n_mat(&hf, a) == m->info.n_expert && iqf_hessian_n_mat(&hf, b) == m->info.n_expert,
              "layer %d: %lld / %lld experts", l, (long long)iqf_hessian_n_mat(&hf, a), (long long)iqf_hessian_n_mat(&hf, b));
    }
    iqf_hessian_close(&hf);
    /* the public reader: per expert by weight name */
    iqf_hessian_file *pf = NULL;
    CHECK(iqf_hessian_file_load(hp[0], &pf, err, sizeof err) == IQF_OK, "%s", err);
    int64_t pn = 0, pbs = 0;
    CHECK(pf && iqf_hessian_file_n_experts(pf, "blk.1.ffn_up_exps.weight") == m->info.n_expert &&
              iqf_hessian_file_n_experts(pf, "blk.1.attn_k.weight") == 1 &&
              iqf_hessian_file_find(pf, "blk.1.ffn_up_exps.weight", &pn, &pbs),
          "public reader: expert counts");
    if (pf && pn > 0 && pbs > 0) {
        float *H = malloc(sizeof(float) * (size_t)(pn * pbs));
        CHECK(iqf_hessian_file_read_expert(pf, "blk.1.ffn_up_exps.weight", m->info.n_expert - 1, H) &&
                  !iqf_hessian_file_read_expert(pf, "blk.1.ffn_up_exps.weight", m->info.n_expert, H),
              "public reader: read_expert");
        free(H);
    }
    iqf_hessian_file_free(pf);
    char logp[96];
    snprintf(logp, sizeof logp, "/tmp/iqf_test_hexp_log_%d.txt", (int)getpid());
    for (int k = 0; k < 3; k++) {
        snprintf(out[k], sizeof out[k], "/tmp/iqf_test_hexp_q%d_%d.gguf", k, (int)getpid());
        iqf_model_quantize_params qp = iqf_model_quantize_default_params();
        qp.ftype = IQF_FTYPE_MOSTLY_Q4_0;
        qp.n_threads = k == 1 ? 2 : 1;
        qp.hessian_path = k < 2 ? hp[0] : NULL;
        FILE *log = k == 0 ? fopen(logp, "w") : NULL;
        CHECK(iqf_model_quantize(model_path, out[k], &qp, NULL, log, err, sizeof err) == IQF_OK, "quantize %d: %s", k, err);
        if (log) fclose(log);
    }
    CHECK(same_file(out[0], out[1]), "quantize --hessian: 1 thread and 2 differ");
    CHECK(!same_file(out[0], out[2]), "quantize --hessian made the plain encoder's bytes");
    size_t nl = 0;
    char *lg = read_file(logp, &nl);
    CHECK(lg && strstr(lg, "blk.0.ffn_gate_exps.weight: error feedback with blk.0.ffn_gate_up_exps.hessian") &&
              strstr(lg, "blk.1.ffn_down_exps.weight: error feedback with blk.1.ffn_down_exps.hessian") && strstr(lg, "per expert"),
          "log lacks per-expert feedback:\n%s", lg ? lg : "");
    free(lg);
    for (int k = 0; k < 3; k++) remove(out[k]);
    remove(hp[0]);
    remove(hp[1]);
    remove(logp);
}

/* A capture over one chunk of 8 tokens leaves experts without rows: quantize --hessian encodes those experts'
 * slabs with the plain encoder, says so, and the rest with feedback (the same bytes at 1 and 2
 * threads). */
static void unrouted(const iqf_model *m, const char *model_path) {
    char err[512], hp[96], out[2][96], logp[96];
    snprintf(hp, sizeof hp, "/tmp/iqf_test_hexp_u_%d.gguf", (int)getpid());
    snprintf(logp, sizeof logp, "/tmp/iqf_test_hexp_ulog_%d.txt", (int)getpid());
    int32_t toks[16] = { 5, 17, 99, 3, 250, 8, 41, 77, 12, 200, 64, 9, 31, 150, 7, 88 };
    iqf_context *c = NULL;
    iqf_hess_acc *a = NULL;
    iqf_imatrix_data *d = NULL;
    CHECK(iqf_context_new(m, 8, 1, &c, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(c && iqf_hessian_attach(c, 0, &a, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(a && iqf_imatrix_collect(c, toks, 16, 8, 1, NULL, &d, err, sizeof err) == IQF_OK, "%s", err);
    int zero = 0;
    for (int i = 0; a && i < a->n_slots; i++)
        for (int64_t e = 0; a->slots[i].n_mat > 1 && e < a->slots[i].n_mat; e++) zero += a->slots[i].ecount[e] == 0;
    CHECK(a && iqf_hessian_acc_write(a, m, hp, 1, 8, NULL, false, err, sizeof err) == IQF_OK, "%s", err);
    iqf_imatrix_data_free(d);
    iqf_hessian_acc_free(a);
    iqf_context_free(c);
    CHECK(zero > 0, "every expert saw rows");
    for (int k = 0; k < 2; k++) {
        snprintf(out[k], sizeof out[k], "/tmp/iqf_test_hexp_uq%d_%d.gguf", k, (int)getpid());
        iqf_model_quantize_params qp = iqf_model_quantize_default_params();
        qp.ftype = IQF_FTYPE_MOSTLY_Q4_0;
        qp.n_threads = k + 1;
        qp.hessian_path = hp;
        FILE *log = k == 0 ? fopen(logp, "w") : NULL;
        CHECK(iqf_model_quantize(model_path, out[k], &qp, NULL, log, err, sizeof err) == IQF_OK, "quantize %d: %s", k, err);
        if (log) fclose(log);
    }
    CHECK(same_file(out[0], out[1]), "unrouted experts: 1 thread and 2 differ");
    size_t nl = 0;
    char *lg = read_file(logp, &nl);
    CHECK(lg && strstr(lg, "saw no calibration rows; plain encoder for that expert of blk.") && strstr(lg, "per expert"),
          "log (%d experts without rows):\n%s", zero, lg ? lg : "");
    printf("unrouted: %d expert matrices without rows in a one-chunk capture (n_ctx 8)\n", zero);
    free(lg);
    remove(out[0]);
    remove(out[1]);
    remove(hp);
    remove(logp);
}

int main(void) {
    char err[512], model_path[96];
    snprintf(model_path, sizeof model_path, "/tmp/iqf_test_hexp_m_%d.gguf", (int)getpid());
    iqf_genmodel_opts o = iqf_genmodel_default_opts();
    o.arch = "qwen3moe";
    o.scale = 32;
    o.n_layer = 2;
    o.type = IQF_TYPE_F32;
    o.seed = 9;
    o.n_expert = 8;
    o.n_expert_used = 2;
    CHECK(iqf_genmodel_write(&o, model_path, NULL, NULL, err, sizeof err) == IQF_OK, "genmodel: %s", err);
    iqf_model *m = NULL;
    CHECK(iqf_model_load(model_path, NULL, &m, err, sizeof err) == IQF_OK, "%s", err);
    char hn[96];
    CHECK(iqf_hessian_name_for("blk.3.ffn_gate_exps.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_gate_up_exps.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("blk.3.ffn_up_exps.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_gate_up_exps.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("blk.3.ffn_gate_up_exps.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_gate_up_exps.hessian"), "%s", hn);
    CHECK(iqf_hessian_name_for("blk.3.ffn_down_exps.weight", hn, sizeof hn) && !strcmp(hn, "blk.3.ffn_down_exps.hessian"), "%s", hn);
    if (m) {
        synthetic(m);
        file_round_trip(m, model_path);
        end_to_end(m, model_path);
        unrouted(m, model_path);
        iqf_model_free(m);
    }
    remove(model_path);
    return test_finish("test_hessian_experts");
}
