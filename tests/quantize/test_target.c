/*
 * test_target.c - size-targeted quantization (src/quantize/target*.c):
 *  - iqf_target_allocate against brute force on random (size, cost) tables: never over the
 *    budget, and the optimum itself (exact DP on small capacities) at every budget;
 *    large sizes (grid DP + Lagrangian): never over, within 0.5% of the brute-force optimum;
 *  - the candidate rules (row widths, types that need an imatrix);
 *  - on a synthetic Mistral-shaped model: the plan's file size is exact (the written file has
 *    that many bytes, its data offset is the predicted metadata size), at or under the target,
 *    the file's per-tensor types equal the plan, the plan file round-trips and reproduces the
 *    same file through the ordinary --tensor-type path, user choices stay fixed, and impossible
 *    budgets / --pure / no imatrix give one-line errors without output.
 */
#include "genmodel.h"
#include "model/calib.h"
#include "quantize/target.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Brute force: least cost with bytes <= budget, or INFINITY. */
static double brute(int n, const int *k, uint64_t b[][8], double c[][8], uint64_t budget) {
    int idx[8] = { 0 };
    double best = INFINITY;
    for (;;) {
        uint64_t sb = 0;
        double sc = 0;
        for (int i = 0; i < n; i++) sb += b[i][idx[i]], sc += c[i][idx[i]];
        if (sb <= budget && sc < best) best = sc;
        int i = 0;
        while (i < n && ++idx[i] == k[i]) idx[i++] = 0;
        if (i == n) break;
    }
    return best;
}

static void test_allocate(void) {
    tu_rng r = { 12345 };
    const bool san = getenv("IQF_SANITIZED") != NULL;
    int exact = 0, cases = 0;
    for (int trial = 0; trial < (san ? 40 : 300); trial++) {
        const int n = 1 + (int)(tu_uniform(&r) * 6);
        int k[8];
        uint64_t b[8][8];
        double c[8][8];
        const bool big = trial % 3 == 2;
        uint64_t minsum = 0, maxsum = 0;
        for (int i = 0; i < n; i++) {
            k[i] = 1 + (int)(tu_uniform(&r) * 5);
            uint64_t mn = UINT64_MAX, mx = 0;
            for (int o = 0; o < k[i]; o++) {
                b[i][o] = big ? 100000 + (uint64_t)(tu_uniform(&r) * 3e6) : 1 + (uint64_t)(tu_uniform(&r) * 40);
                /* costs roughly falling with size, with noise (not convex, some dominated) */
                c[i][o] = 1000.0 / (double)b[i][o] * (0.5 + tu_uniform(&r));
                if (b[i][o] < mn) mn = b[i][o];
                if (b[i][o] > mx) mx = b[i][o];
            }
            minsum += mn, maxsum += mx;
        }
        const uint64_t *bp[8];
        const double *cp[8];
        for (int i = 0; i < n; i++) bp[i] = b[i], cp[i] = c[i];
        int choice[8];
        char err[256];
        /* below the minimum: an error */
        if (minsum > 0) {
            iqf_status st = iqf_target_allocate(n, k, bp, cp, minsum - 1, choice, NULL, NULL, err, sizeof err);
            CHECK(st == IQF_E_INVALID_ARG && !strchr(err, '\n'), "trial %d: budget below minimum: st %d", trial, st);
        }
        const int nb = big ? 25 : (int)(maxsum - minsum + 1);
        for (int q = 0; q < nb; q++) {
            const uint64_t budget = big ? minsum + (uint64_t)((double)(maxsum - minsum) * q / (nb - 1)) : minsum + (uint64_t)q;
            uint64_t tb = 0;
            double tc = 0;
            iqf_status st = iqf_target_allocate(n, k, bp, cp, budget, choice, &tb, &tc, err, sizeof err);
            CHECK(st == IQF_OK, "trial %d budget %llu: %s", trial, (unsigned long long)budget, err);
            if (st) continue;
            uint64_t sb = 0;
            double sc = 0;
            bool valid = true;
            for (int i = 0; i < n; i++) {
                valid &= choice[i] >= 0 && choice[i] < k[i];
                if (valid) sb += b[i][choice[i]], sc += c[i][choice[i]];
            }
            CHECK(valid && sb == tb && fabs(sc - tc) <= 1e-9 * fabs(sc), "trial %d: reported totals", trial);
            CHECK(sb <= budget, "trial %d: %llu bytes over the budget %llu", trial, (unsigned long long)sb,
                  (unsigned long long)budget);
            const double opt = brute(n, k, b, c, budget);
            cases++;
            if (sc <= opt * (1 + 1e-12)) exact++;
            if (big)
                CHECK(sc <= opt * 1.005 + 1e-12, "trial %d budget %llu: cost %.9g, optimum %.9g", trial,
                      (unsigned long long)budget, sc, opt);
            else
                CHECK(sc <= opt * (1 + 1e-12), "trial %d budget %llu: cost %.9g, optimum %.9g (exact DP)", trial,
                      (unsigned long long)budget, sc, opt);
        }
    }
    printf("allocation: %d of %d budgets at the brute-force optimum\n", exact, cases);
    /* argument checks */
    int k1 = 0;
    const uint64_t *nb = NULL;
    const double *nc = NULL;
    int ch;
    CHECK(iqf_target_allocate(1, &k1, &nb, &nc, 10, &ch, NULL, NULL, NULL, 0) == IQF_E_INVALID_ARG, "k = 0");
    uint64_t bb1[1] = { 5 };
    double cc1[1] = { NAN };
    const uint64_t *pb = bb1;
    const double *pc = cc1;
    int k2 = 1;
    CHECK(iqf_target_allocate(1, &k2, &pb, &pc, 10, &ch, NULL, NULL, NULL, 0) == IQF_E_INVALID_ARG, "NaN cost");
    CHECK(iqf_target_allocate(0, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL, 0) == IQF_OK, "no items");
}

static bool has(const int *t, int n, int type) {
    for (int i = 0; i < n; i++)
        if (t[i] == type) return true;
    return false;
}

static void test_candidates(void) {
    int t[IQF_TARGET_MAX_CAND];
    int n = iqf_target_candidates("blk.0.attn_q.weight", 4096, true, t, IQF_TARGET_MAX_CAND);
    CHECK(has(t, n, IQF_TYPE_IQ1_S) && has(t, n, IQF_TYPE_IQ2_XXS) && has(t, n, IQF_TYPE_IQ3_XXS) &&
              has(t, n, IQF_TYPE_Q4_K) && has(t, n, IQF_TYPE_Q6_K) && has(t, n, IQF_TYPE_Q8_0) && has(t, n, IQF_TYPE_F16),
          "256-multiple rows with an imatrix: IQ, K, q8_0, f16 (%d)", n);
    n = iqf_target_candidates("blk.0.attn_q.weight", 4096, false, t, IQF_TARGET_MAX_CAND);
    CHECK(!has(t, n, IQF_TYPE_IQ1_S) && !has(t, n, IQF_TYPE_IQ2_XXS) && !has(t, n, IQF_TYPE_IQ2_XS) &&
              !has(t, n, IQF_TYPE_IQ3_XXS) && !has(t, n, IQF_TYPE_IQ2_S) && !has(t, n, IQF_TYPE_IQ1_M) &&
              has(t, n, IQF_TYPE_IQ3_S) && has(t, n, IQF_TYPE_Q2_K),
          "no imatrix: no iq1/iq2_xxs/iq2_xs (encoder) nor iq3_xxs/iq2_s/iq1_m (llama-quantize)");
    n = iqf_target_candidates("token_embd.weight", 4096, false, t, IQF_TARGET_MAX_CAND);
    CHECK(!has(t, n, IQF_TYPE_IQ2_XXS) && has(t, n, IQF_TYPE_IQ3_XXS) && has(t, n, IQF_TYPE_IQ2_S),
          "token_embd without imatrix may be iq3_xxs/iq2_s, not iq2_xxs");
    n = iqf_target_candidates("blk.0.ffn_down.weight", 896, true, t, IQF_TARGET_MAX_CAND);
    CHECK(!has(t, n, IQF_TYPE_Q4_K) && !has(t, n, IQF_TYPE_IQ3_XXS) && has(t, n, IQF_TYPE_IQ4_NL) &&
              has(t, n, IQF_TYPE_Q4_0) && has(t, n, IQF_TYPE_Q8_0) && has(t, n, IQF_TYPE_F16),
          "rows of 896: IQ4_NL and the legacy 32-blocks");
    /* the FP4 types, once this build encodes them, where their blocks fit; never the
     * binary/ternary formats (q1_0, q2_0, tq1_0, tq2_0: the formats of models trained so) */
    static const int newer[] = { IQF_TYPE_Q1_0, IQF_TYPE_Q2_0, IQF_TYPE_TQ1_0, IQF_TYPE_TQ2_0, IQF_TYPE_MXFP4, IQF_TYPE_NVFP4 };
    n = iqf_target_candidates("blk.0.attn_q.weight", 4096, false, t, IQF_TARGET_MAX_CAND);
    for (int k = 0; k < 6; k++)
        CHECK(has(t, n, newer[k]) == (k >= 4 && iqf_can_encode(newer[k])), "rows of 4096: %s", iqf_type_get(newer[k])->name);
    n = iqf_target_candidates("blk.0.attn_q.weight", 896, false, t, IQF_TARGET_MAX_CAND);
    for (int k = 0; k < 6; k++)
        CHECK(has(t, n, newer[k]) == (k >= 4 && iqf_can_encode(newer[k]) && 896 % iqf_type_get(newer[k])->blck_size == 0),
              "rows of 896: %s", iqf_type_get(newer[k])->name);
    n = iqf_target_candidates("x.weight", 100, true, t, IQF_TARGET_MAX_CAND);
    CHECK(n == 1 && t[0] == IQF_TYPE_F16, "rows of 100: f16 only");
    char pat[128];
    iqf_target_pattern("blk.0.attn_q.weight", pat, sizeof pat);
    CHECK(!strcmp(pat, "^blk\\.0\\.attn_q\\.weight$"), "pattern %s", pat);
}

static uint64_t fsize(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void test_model(void) {
    char dir[] = "/tmp/iqf_ttarget_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char model[256], im[256], out[256], out2[256], planf[256], err[1024];
    snprintf(model, sizeof model, "%s/m.gguf", dir);
    snprintf(im, sizeof im, "%s/im.gguf", dir);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    snprintf(out2, sizeof out2, "%s/out2.gguf", dir);
    snprintf(planf, sizeof planf, "%s/plan.txt", dir);
    iqf_genmodel_opts o = iqf_genmodel_default_opts();
    o.scale = 16;
    o.n_layer = 2;
    CHECK(iqf_genmodel_write(&o, model, im, NULL, err, sizeof err) == IQF_OK, "genmodel: %s", err);

    iqf_model_quantize_params qp = iqf_model_quantize_default_params();
    qp.imatrix_path = im;
    qp.quiet = true;
    qp.n_threads = 2;
    qp.ftype = 0;
    iqf_target_params tp = iqf_target_default_params();

    /* the extremes first: a target far below and far above */
    iqf_target_plan *plan = NULL;
    tp.target_size = 1000;
    iqf_status st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && strstr(err, "below the smallest") && !strchr(err, '\n') && !plan,
          "tiny target: %d %s", st, err);
    tp.target_size = 1ull << 40;
    st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && strstr(err, "above the largest") && !strchr(err, '\n') && !plan,
          "huge target: %d %s", st, err);

    /* a mid-range target: around 3.5 bpw of the weights */
    tp.target_size = 0;
    tp.target_bpw = 3.5;
    st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_OK && plan, "plan at 3.5 bpw: %s", err);
    if (!plan) return;
    CHECK(plan->budget == (uint64_t)floor(3.5 * (double)plan->n_weights / 8), "bpw budget %llu",
          (unsigned long long)plan->budget);
    CHECK(plan->file_size <= plan->budget, "plan over budget: %llu > %llu", (unsigned long long)plan->file_size,
          (unsigned long long)plan->budget);
    CHECK(plan->budget - plan->file_size < plan->budget / 100, "plan leaves %llu of %llu bytes unused",
          (unsigned long long)(plan->budget - plan->file_size), (unsigned long long)plan->budget);
    CHECK(plan->min_size < plan->budget && plan->budget < plan->max_size, "min/max");
    int ntypes = 0;
    bool seen[IQF_TYPE_COUNT] = { false };
    for (int i = 0; i < plan->n; i++)
        if (!plan->e[i].fixed && !seen[plan->e[i].type]) seen[plan->e[i].type] = true, ntypes++;
    CHECK(ntypes >= 2, "the plan mixes types (%d)", ntypes);

    /* write it: the exact size, the types of the plan */
    iqf_model_quantize_report rep;
    st = iqf_target_quantize(model, out, &qp, plan, &rep, NULL, err, sizeof err);
    CHECK(st == IQF_OK, "target quantize: %s", err);
    CHECK(fsize(out) == plan->file_size, "file %llu bytes, plan %llu", (unsigned long long)fsize(out),
          (unsigned long long)plan->file_size);
    iqf_gguf *g = iqf_gguf_open(out, err, sizeof err);
    CHECK(g != NULL, "open output: %s", err);
    if (g) {
        CHECK(iqf_gguf_data_offset(g) == plan->meta_size, "data offset %zu, predicted %llu", iqf_gguf_data_offset(g),
              (unsigned long long)plan->meta_size);
        int bad = 0;
        for (int i = 0; i < plan->n; i++) {
            int64_t ti = iqf_gguf_find_tensor(g, plan->e[i].name);
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, ti);
            if (!t || t->type != plan->e[i].type) bad++;
        }
        CHECK(bad == 0 && iqf_gguf_n_tensors(g) == plan->n, "%d tensors differ from the plan", bad);
        uint32_t ft = 0;
        CHECK(iqf_gguf_get_u32(g, "general.file_type", &ft) && (int)ft == plan->ftype, "file type %u vs %d", ft,
              plan->ftype);
        iqf_gguf_close(g);
    }

    /* the plan file round-trips and gives the same file through plain --tensor-type patterns */
    CHECK(iqf_target_plan_save(plan, planf, err, sizeof err) == IQF_OK, "save: %s", err);
    char(*names)[IQF_GGUF_MAX_NAME] = NULL;
    int *types = NULL, n = 0;
    CHECK(iqf_target_plan_load(planf, &names, &types, &n, err, sizeof err) == IQF_OK, "load: %s", err);
    int nq = 0, mism = 0;
    for (int i = 0; i < plan->n; i++) {
        if (!plan->e[i].quantizable) continue;
        if (nq >= n || strcmp(names[nq], plan->e[i].name) || types[nq] != plan->e[i].type) mism++;
        nq++;
    }
    CHECK(n == nq && mism == 0, "round trip: %d entries, %d quantizable, %d mismatches", n, nq, mism);
    {
        const char **pats = calloc((size_t)n + 1, sizeof *pats);
        char(*pb)[3 * IQF_GGUF_MAX_NAME] = calloc((size_t)n + 1, sizeof *pb);
        for (int i = 0; i < n; i++) {
            iqf_target_pattern(names[i], pb[i], sizeof pb[i]);
            pats[i] = pb[i];
        }
        iqf_model_quantize_params q2 = qp;
        q2.ftype = plan->ftype;
        q2.tensor_type_patterns = pats;
        q2.tensor_type_types = types;
        q2.n_tensor_types = n;
        st = iqf_model_quantize(model, out2, &q2, &rep, NULL, err, sizeof err);
        CHECK(st == IQF_OK, "quantize with the plan file: %s", err);
        size_t n1 = 0, n2 = 0;
        void *a = read_file(out, &n1), *b = read_file(out2, &n2);
        CHECK(a && b && n1 == n2 && !memcmp(a, b, n1), "the plan file reproduces the file");
        free(a), free(b), free(pats), free(pb);
    }
    free(names), free(types);
    /* a malformed plan file */
    write_file(planf, "blk.0.attn_q.weight=q4_K\n", 25);
    CHECK(iqf_target_plan_load(planf, &names, &types, &n, err, sizeof err) == IQF_E_FORMAT && !strchr(err, '\n'),
          "malformed plan: %s", err);
    write_file(planf, "^blk\\.0\\.attn_q\\.weight$=q9_Z\n", 29);
    CHECK(iqf_target_plan_load(planf, &names, &types, &n, err, sizeof err) == IQF_E_FORMAT, "unknown type: %s", err);
    iqf_target_plan_free(plan);
    plan = NULL;

    /* user choices stay fixed; a smaller target also holds */
    const char *upat[1] = { "attn_v" };
    int utype[1] = { IQF_TYPE_Q8_0 };
    iqf_model_quantize_params q3 = qp;
    q3.tensor_type_patterns = upat;
    q3.tensor_type_types = utype;
    q3.n_tensor_types = 1;
    q3.token_embedding_type = IQF_TYPE_Q4_0;
    tp.target_bpw = 3.2;
    st = iqf_target_plan_make(model, &q3, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_OK && plan, "plan with user choices: %s", err);
    if (plan) {
        int okv = 0, nv = 0, oke = 0;
        for (int i = 0; i < plan->n; i++) {
            if (strstr(plan->e[i].name, "attn_v")) nv++, okv += plan->e[i].fixed && plan->e[i].type == IQF_TYPE_Q8_0;
            if (!strcmp(plan->e[i].name, "token_embd.weight")) oke = plan->e[i].fixed && plan->e[i].type == IQF_TYPE_Q4_0;
        }
        CHECK(nv == 2 && okv == 2 && oke, "user types kept: attn_v %d/%d, token_embd %d", okv, nv, oke);
        st = iqf_target_quantize(model, out, &q3, plan, &rep, NULL, err, sizeof err);
        CHECK(st == IQF_OK && fsize(out) == plan->file_size && plan->file_size <= plan->budget, "user-choice file: %s", err);
        iqf_target_plan_free(plan);
        plan = NULL;
    }

    /* refused combinations */
    unlink(out);
    iqf_model_quantize_params q4 = qp;
    q4.pure = true;
    st = iqf_target_plan_make(model, &q4, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && strstr(err, "--pure") && !plan, "--pure: %s", err);
    q4 = qp;
    q4.imatrix_path = NULL;
    st = iqf_target_plan_make(model, &q4, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && strstr(err, "imatrix") && !plan, "no imatrix: %s", err);
    iqf_target_params tp2 = tp;
    tp2.target_size = 123456;
    st = iqf_target_plan_make(model, &qp, &tp2, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && !plan, "both targets: %s", err);
    CHECK(access(out, F_OK) != 0, "no output after errors");

    unlink(model), unlink(im), unlink(out), unlink(out2), unlink(planf);
    rmdir(dir);
}

/* The KLD calibration on stories260K (rows of 64: legacy types) with the TinyStories sample. */
static void test_calibrated(void) {
    char err[1024], out[64];
    snprintf(out, sizeof out, "/tmp/iqf_ttarget_cal_%d.gguf", (int)getpid());
    const char *model = src_path("tests/data/stories260K/stories260K-f32.gguf");
    const char *im = src_path("tests/data/stories260K/imatrix-groups_merged-c256.gguf");
    const char *text = src_path("tests/data/text/tinystories-sample.txt");
    iqf_model_quantize_params qp = iqf_model_quantize_default_params();
    qp.imatrix_path = im;
    qp.quiet = true;
    qp.n_threads = 2;
    iqf_target_params tp = iqf_target_default_params();
    tp.target_size = 277376; /* llama-quantize's Q4_0 file of this model */
    tp.sens = IQF_TARGET_SENS_KLD;
    tp.calib_text = text;
    tp.calib_chunks = 4;
    tp.calib_ctx = 64;
    iqf_target_plan *plan = NULL;
    iqf_status st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_OK && plan, "calibrated plan: %s", err);
    if (!plan) return;
    int nfree = 0, pos = 0;
    for (int i = 0; i < plan->n; i++)
        if (!plan->e[i].fixed) nfree++, pos += plan->e[i].weight > 0 && isfinite(plan->e[i].error);
    CHECK(nfree > 0 && pos == nfree, "every chosen tensor has a positive KLD sensitivity (%d of %d)", pos, nfree);
    CHECK(plan->total_error > 0 && plan->total_error < 1, "predicted KLD %g", plan->total_error);
    iqf_model_quantize_report rep;
    st = iqf_target_quantize(model, out, &qp, plan, &rep, NULL, err, sizeof err);
    CHECK(st == IQF_OK && fsize(out) == plan->file_size && plan->file_size <= 277376, "calibrated file: %s", err);
    /* the engine loads it and its weights have the plan's types */
    iqf_model_params mp = iqf_model_default_params();
    iqf_model *m = NULL;
    CHECK(iqf_model_load(out, &mp, &m, err, sizeof err) == IQF_OK, "load the written file: %s", err);
    if (m) {
        const iqf_gguf *g = iqf_model_gguf(m);
        int bad = 0;
        for (int i = 0; i < plan->n; i++) {
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, plan->e[i].name));
            bad += !t || t->type != plan->e[i].type;
        }
        CHECK(bad == 0, "%d tensors of the loaded model differ from the plan", bad);
        iqf_model_free(m);
    }
    /* a calibration text that is too short */
    iqf_target_plan_free(plan);
    plan = NULL;
    char shortf[64];
    snprintf(shortf, sizeof shortf, "/tmp/iqf_ttarget_short_%d.txt", (int)getpid());
    write_file(shortf, "Once upon a time.", 17);
    tp.calib_text = shortf;
    st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_INVALID_ARG && strstr(err, "fewer than one chunk") && !plan, "short text: %d %s", st, err);
    tp.calib_text = "/nonexistent/text.txt";
    st = iqf_target_plan_make(model, &qp, &tp, &plan, NULL, err, sizeof err);
    CHECK(st == IQF_E_IO && !plan && !strchr(err, '\n'), "missing text: %s", err);
    unlink(out);
    unlink(shortf);
}

/* The engine's layer cache (iqf_calib_params.layers) against the whole forward pass: with no
 * view every layer-range run gives KLD 0 and output change 0 exactly; with one tensor viewed
 * quantized, iqf_calib_kld_from(its layer) and the layer-streamed iqf_calib_kld_stream give the
 * whole forward pass's KLD (iqf_calib_kld) to the last bit, and from an earlier layer too. */
typedef struct stream_one {
    iqf_calib *cb;
    int id, layer, type;
    const void *data;
    int calls;
} stream_one;

static iqf_status stream_one_fn(void *user, int layer, bool on, char *err, size_t errlen) {
    (void)err, (void)errlen;
    stream_one *s = user;
    s->calls++;
    if (layer == s->layer) iqf_calib_view(s->cb, s->id, on ? s->type : 0, on ? s->data : NULL);
    return IQF_OK;
}

static void test_calib_layers(void) {
    char err[1024];
    const char *model = src_path("tests/data/kjv-3m/kjv-3m-f32.gguf");
    iqf_calib_params cp = { src_path("tests/data/kjv-3m/calibration.txt"), 64, 3, 2, NULL, true, 0 };
    iqf_calib *cb = NULL;
    iqf_status st = iqf_calib_open(model, &cp, &cb, err, sizeof err);
    CHECK(st == IQF_OK && cb, "calib with the layer cache: %s", err);
    if (!cb) return;
    const int L = iqf_calib_n_layers(cb);
    CHECK(L == 4, "kjv-3m has 4 layers (%d)", L);
    int zero = 0;
    for (int l = 0; l <= L; l++) {
        double k = -1, d = -1;
        st = iqf_calib_kld_from(cb, l, &k, err, sizeof err);
        if (l < L && !st) st = iqf_calib_delta(cb, l, &d, err, sizeof err);
        zero += !st && k == 0 && (l == L || d == 0);
    }
    CHECK(zero == L + 1, "no view: KLD 0 and change 0 from every layer (%d of %d)", zero, L + 1);
    const int id = iqf_calib_weight(cb, "blk.2.ffn_up.weight", 256, 768);
    CHECK(id >= 0 && iqf_calib_weight_layer(cb, id) == 2, "blk.2.ffn_up is layer 2's (%d)", id);
    CHECK(iqf_calib_weight_layer(cb, iqf_calib_weight(cb, "token_embd.weight", 256, 1024)) == -1 &&
              iqf_calib_weight_layer(cb, iqf_calib_weight(cb, "output.weight", 256, 1024)) == L,
          "token_embd before the layers, output after them");
    CHECK(iqf_calib_weight(cb, "blk.2.ffn_up.weight", 256, 767) < 0, "a shape that differs is not the engine's");
    /* blk.2.ffn_up quantized to q4_K (the model's own floats, read from the file) */
    iqf_gguf *g = iqf_gguf_open(model, err, sizeof err);
    CHECK(g != NULL, "open: %s", err);
    const iqf_gguf_tensor *t = g ? iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, "blk.2.ffn_up.weight")) : NULL;
    uint8_t *q = t ? malloc(iqf_row_size(IQF_TYPE_Q4_K, 256) * 768) : NULL;
    iqf_quantize_params qz = iqf_quantize_default_params();
    if (q && iqf_quantize(IQF_TYPE_Q4_K, (const float *)t->data, q, 768, 256, NULL, &qz, err, sizeof err) == IQF_OK) {
        double full = -1, from2 = -2, from0 = -3, streamed = -4, d2 = -1;
        iqf_calib_view(cb, id, IQF_TYPE_Q4_K, q);
        st = iqf_calib_kld(cb, &full, err, sizeof err);
        if (!st) st = iqf_calib_kld_from(cb, 2, &from2, err, sizeof err);
        if (!st) st = iqf_calib_kld_from(cb, 0, &from0, err, sizeof err);
        if (!st) st = iqf_calib_delta(cb, 2, &d2, err, sizeof err);
        iqf_calib_view(cb, id, 0, NULL);
        stream_one so = { cb, id, 2, IQF_TYPE_Q4_K, q, 0 };
        if (!st) st = iqf_calib_kld_stream(cb, stream_one_fn, &so, &streamed, err, sizeof err);
        CHECK(st == IQF_OK && full > 0 && full == from2 && full == from0 && full == streamed,
              "KLD of blk.2.ffn_up at q4_K: whole %.17g, from layer 2 %.17g, from 0 %.17g, streamed %.17g", full, from2, from0,
              streamed);
        CHECK(so.calls == 2 * (L + 2), "the stream sets and drops each layer's views once (%d calls)", so.calls);
        CHECK(d2 > 0 && isfinite(d2), "layer 2's output change %g", d2);
        double k = -1;
        CHECK(iqf_calib_kld_from(cb, 2, &k, err, sizeof err) == IQF_OK && k == 0, "view dropped: KLD %g", k);
    } else {
        CHECK(0, "quantize blk.2.ffn_up: %s", err);
    }
    free(q);
    iqf_gguf_close(g);
    iqf_calib_free(cb);
}

/* The layer method's sensitivities against the per-tensor reference (each tensor alone through
 * the whole model) on kjv-3m: Spearman rank correlation over the 30 tensors at the probe type,
 * and the plan's check against the recipe. */
static double spearman(const double *a, const double *b, int n) {
    double ra[64], rb[64];
    for (int i = 0; i < n; i++) {
        ra[i] = rb[i] = 0;
        for (int j = 0; j < n; j++) ra[i] += a[j] < a[i], rb[i] += b[j] < b[i];
    }
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) ma += ra[i] / n, mb += rb[i] / n;
    for (int i = 0; i < n; i++) sab += (ra[i] - ma) * (rb[i] - mb), saa += (ra[i] - ma) * (ra[i] - ma), sbb += (rb[i] - mb) * (rb[i] - mb);
    return sab / sqrt(saa * sbb);
}

static void test_layer_method(void) {
    char err[1024];
    const char *model = src_path("tests/data/kjv-3m/kjv-3m-f32.gguf");
    iqf_model_quantize_params qp = iqf_model_quantize_default_params();
    qp.imatrix_path = src_path("tests/data/kjv-3m/imatrix.gguf");
    qp.quiet = true;
    qp.n_threads = 2;
    qp.dry_run = true;
    iqf_target_params tp = iqf_target_default_params();
    tp.target_size = 1518656; /* the IQ3_XXS recipe's file */
    tp.calib_text = src_path("tests/data/kjv-3m/calibration.txt");
    tp.calib_chunks = 4;
    /* under the sanitizers (a Debug build, 20-50x slower): fewer, shorter chunks */
    const bool san = getenv("IQF_SANITIZED") && atoi(getenv("IQF_SANITIZED"));
    if (san) tp.calib_chunks = 2, tp.calib_ctx = 64;
    iqf_target_plan *p[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
        tp.calib_per_tensor = k == 1;
        iqf_status st = iqf_target_plan_make(model, &qp, &tp, &p[k], NULL, err, sizeof err);
        CHECK(st == IQF_OK && p[k], "plan (%s): %s", k ? "per tensor" : "layers", err);
    }
    if (p[0] && p[1]) {
        /* the weight of a chosen type differs between the plans; compare the sensitivities at
         * the same types: error / weight ratio is the raw error, so use weight * that error */
        double a[64], b[64];
        int n = 0;
        for (int i = 0; i < p[0]->n && n < 64; i++)
            if (!p[0]->e[i].fixed && !strcmp(p[0]->e[i].name, p[1]->e[i].name) && p[0]->e[i].type == p[1]->e[i].type)
                a[n] = p[0]->e[i].weight, b[n] = p[1]->e[i].weight, n++;
        const double rho = spearman(a, b, n);
        printf("layer method vs per tensor: %d tensors of the same type, Spearman %.3f\n", n, rho);
        CHECK(n >= (san ? 8 : 15) && rho >= (san ? 0.8 : 0.9), "sensitivities rank like the per-tensor reference's (%d, rho %.3f)",
              n, rho);
        for (int k = 0; k < 2; k++)
            CHECK(p[k]->recipe_ftype == IQF_FTYPE_MOSTLY_IQ3_XXS && p[k]->joint_kld > 0 &&
                      (p[k]->recipe_chosen ? p[k]->recipe_kld <= p[k]->joint_kld : p[k]->joint_kld <= p[k]->recipe_kld),
                  "checked against IQ3_XXS's recipe: plan %.6f, recipe %s %.6f", p[k]->joint_kld,
                  iqf_ftype_name(p[k]->recipe_ftype), p[k]->recipe_kld);
    }
    iqf_target_plan_free(p[0]);
    iqf_target_plan_free(p[1]);
}

int main(void) {
    test_allocate();
    test_candidates();
    test_model();
    test_calibrated();
    test_calib_layers();
    test_layer_method();
    return test_finish("test_target");
}
