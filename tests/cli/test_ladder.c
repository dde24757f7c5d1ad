/*
 * test_ladder.c - the ladder's alarm, reports and cache record on known ladders:
 *  - the whole-file kjv-3m ladder of llama.cpp (REFERENCE.md: llama-quantize + llama-perplexity)
 *    and the stories260K simulated ladder are healthy: no alarm, and the inversions that are
 *    known there (Q2_K above IQ2_S, Q4_K_M above Q4_K_S) appear as notes;
 *  - the seed case (an IQ3_XXS worse than IQ2_XS) and each other rule fire, naming the rung;
 *  - the cache record round-trips exactly and rejects other keys, other rungs, truncated and
 *    altered files; the JSON/CSV/SVG files are written whole and carry every rung.
 * The end-to-end ladder (quantize + evaluate, the injected fault, resume) is tests/cli/ladder.sh.
 */
#include "testutil.h"

#include "iqforge.h"
#include "ladder.h"
#include "util/traits.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct ref_row {
    const char *name;
    uint64_t bytes;
    double ppl, kld, kld_err, same_top;
} ref_row;

/* ../shared/REFERENCE.md, "kjv-3m: whole-file ladder" (llama.cpp / ggml 0.25.1). */
static const ref_row kjv[] = {
    { "IQ1_S", 948256, 27.4989, 0.242950, 0.001253, 67.151 },
    { "IQ1_M", 1012768, 26.5370, 0.214036, 0.001146, 69.221 },
    { "IQ2_XXS", 1120288, 24.7191, 0.139800, 0.000794, 74.748 },
    { "IQ2_XS", 1214496, 24.1347, 0.110070, 0.000674, 76.943 },
    { "IQ2_S", 1291296, 23.3128, 0.071062, 0.000391, 81.141 },
    { "IQ2_M", 1377312, 22.7440, 0.048801, 0.000274, 84.290 },
    { "IQ3_XXS", 1518624, 22.4393, 0.034380, 0.000196, 86.661 },
    { "IQ3_XS", 1639456, 22.2672, 0.027269, 0.000157, 87.933 },
    { "IQ3_S", 1713184, 22.1476, 0.021195, 0.000127, 89.379 },
    { "IQ3_M", 1765408, 22.1261, 0.019402, 0.000109, 89.814 },
    { "IQ4_NL", 2165792, 21.7867, 0.006089, 0.000035, 94.122 },
    { "IQ4_XS", 2059296, 21.7935, 0.006471, 0.000037, 93.898 },
    { "Q2_K", 1486880, 23.1985, 0.073675, 0.000486, 81.298 },
    { "Q3_K_S", 1713184, 22.1968, 0.023012, 0.000135, 89.085 },
    { "Q3_K_M", 1878048, 22.0017, 0.015760, 0.000096, 90.857 },
    { "Q3_K_L", 2017312, 21.9614, 0.014463, 0.000088, 91.250 },
    { "Q4_K_S", 2182176, 21.7906, 0.004995, 0.000028, 94.807 },
    { "Q4_K_M", 2284064, 21.7976, 0.005090, 0.000030, 94.818 },
    { "Q5_K_S", 2591776, 21.7138, 0.001609, 0.000008, 96.805 },
    { "Q5_K_M", 2652704, 21.7149, 0.001538, 0.000008, 96.847 },
    { "Q6_K", 3044384, 21.6926, 0.000687, 0.000003, 97.872 },
    { "Q8_0", 3933216, 21.6792, 0.000118, 0.000001, 99.102 },
    { "Q4_0", 2165792, 21.7938, 0.007106, 0.000041, 93.644 },
    { "Q4_1", 2378784, 21.7897, 0.005426, 0.000032, 94.684 },
    { "Q5_0", 2591776, 21.7209, 0.001921, 0.000011, 96.558 },
    { "Q5_1", 2804768, 21.7060, 0.001423, 0.000008, 97.068 },
};
#define KJV_WEIGHTS 3672320.0
#define KJV_BASE_PPL 21.6773

static ladder_rung make(const char *name, int mode, uint64_t bytes, double ppl, double kld, double err) {
    ladder_rung r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "%s", name);
    r.ftype = iqf_ftype_from_name(name);
    r.ttype = -1;
    r.mode = mode;
    r.family = iqf_ladder_family_of_ftype(r.ftype);
    r.done = true;
    r.file_bytes = bytes;
    r.bpw = 8.0 * (double)bytes / KJV_WEIGHTS;
    r.ppl = ppl;
    r.ppl_err = ppl * 0.01;
    r.ppl_ratio = ppl / KJV_BASE_PPL;
    r.ppl_ratio_err = 0.0005;
    r.kld = kld;
    r.kld_err = err;
    r.kld_p99 = kld * 6;
    r.kld_max = kld * 40;
    r.same_top = 0.9;
    r.same_top_err = 0.001;
    return r;
}

static int load_kjv(ladder_rung *r, int mode) {
    int n = 0;
    for (size_t i = 0; i < sizeof kjv / sizeof kjv[0]; i++)
        r[n++] = make(kjv[i].name, mode, kjv[i].bytes, kjv[i].ppl, kjv[i].kld, kjv[i].kld_err);
    return n;
}

static int find(const ladder_rung *r, int n, const char *name, int mode) {
    for (int i = 0; i < n; i++)
        if (!strcmp(r[i].name, name) && r[i].mode == mode) return i;
    return -1;
}

static bool has_finding(const ladder_finding *f, int nf, ladder_finding_kind k, const ladder_rung *r,
                        const char *a, const char *b) {
    for (int i = 0; i < nf; i++)
        if (f[i].kind == k && !strcmp(r[f[i].a].name, a) && (!b || (f[i].b >= 0 && !strcmp(r[f[i].b].name, b))))
            return true;
    return false;
}

static void test_families(void) {
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_IQ3_XXS) == LADDER_FAMILY_IQ, "IQ3_XXS is IQ");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_IQ2_M) == LADDER_FAMILY_IQ, "IQ2_M is IQ");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_Q4_K_M) == LADDER_FAMILY_K, "Q4_K_M is K");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_Q2_K_S) == LADDER_FAMILY_K, "Q2_K_S is K");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_Q8_0) == LADDER_FAMILY_LEGACY, "Q8_0 is legacy");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_Q5_1) == LADDER_FAMILY_LEGACY, "Q5_1 is legacy");
    CHECK(iqf_ladder_family_of_type(IQF_TYPE_Q3_K) == LADDER_FAMILY_K, "q3_K is K");
    CHECK(iqf_ladder_family_of_type(IQF_TYPE_IQ4_NL) == LADDER_FAMILY_IQ, "iq4_nl is IQ");
    CHECK(iqf_ladder_family_of_type(IQF_TYPE_Q4_0) == LADDER_FAMILY_LEGACY, "q4_0 is legacy");
    CHECK(iqf_ladder_family_of_type(IQF_TYPE_MXFP4) == LADDER_FAMILY_FP4 && iqf_ladder_family_of_type(IQF_TYPE_NVFP4) == LADDER_FAMILY_FP4,
          "mxfp4 and nvfp4 are FP4");
    CHECK(iqf_ladder_family_of_type(IQF_TYPE_TQ1_0) == LADDER_FAMILY_LOWBIT && iqf_ladder_family_of_type(IQF_TYPE_Q1_0) == LADDER_FAMILY_LOWBIT,
          "tq1_0 and q1_0 are low-bit");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_MXFP4_MOE) == LADDER_FAMILY_FP4, "MXFP4_MOE is FP4");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_TQ2_0) == LADDER_FAMILY_LOWBIT &&
              iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_Q2_0) == LADDER_FAMILY_LOWBIT,
          "TQ2_0 and Q2_0 are low-bit");
    CHECK(iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_IQ3_XS) == LADDER_FAMILY_IQ &&
              iqf_ladder_family_of_ftype(IQF_FTYPE_MOSTLY_F16) == LADDER_FAMILY_FLOAT && iqf_ladder_family_of_type(IQF_TYPE_Q8_K) == LADDER_FAMILY_OTHER,
          "IQ3_XS is IQ, F16 float, q8_K not a weight");
    CHECK(!strcmp(iqf_ladder_family_name(LADDER_FAMILY_FP4), "FP4") && !strcmp(iqf_ladder_family_name(LADDER_FAMILY_LOWBIT), "low-bit"),
          "family names");
}

/* llama.cpp's own kjv-3m ladder is healthy: no alarm; its known inversions are notes. */
/* tools/ladder maps type ids through iqf_type_family (it sees only iqforge.h) to its own enum; it
 * must agree with the library's traits table on every id. */
static void test_families_match_traits(void) {
    int bad = 0;
    for (int t = -2; t < IQF_TYPE_COUNT + 2; t++) {
        const iqf_type_traits *tr = iqf_traits(t);
        ladder_family want = LADDER_FAMILY_OTHER;
        switch (tr ? tr->family : IQF_FAMILY_NONE) {
        case IQF_FAMILY_IQ: want = LADDER_FAMILY_IQ; break;
        case IQF_FAMILY_K: want = LADDER_FAMILY_K; break;
        case IQF_FAMILY_LEGACY: want = LADDER_FAMILY_LEGACY; break;
        case IQF_FAMILY_FLOAT: want = LADDER_FAMILY_FLOAT; break;
        case IQF_FAMILY_FP4: want = LADDER_FAMILY_FP4; break;
        case IQF_FAMILY_LOWBIT: want = LADDER_FAMILY_LOWBIT; break;
        case IQF_FAMILY_NONE: case IQF_FAMILY_OTHER: break;
        }
        if (iqf_ladder_family_of_type(t) != want) {
            bad++;
            CHECK(0, "type %d: ladder family %d, traits say %d", t, (int)iqf_ladder_family_of_type(t), (int)want);
        }
    }
    CHECK(bad == 0, "ladder families agree with the traits table on every type id (%d disagree)", bad);
}

static void test_healthy_kjv(void) {
    ladder_rung r[64];
    int n = load_kjv(r, IQF_MODE_COMPAT);
    ladder_limits lim = iqf_ladder_default_limits();
    ladder_finding f[256];
    int na = -1;
    int nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 0, "healthy kjv-3m ladder: %d alarms", na);
    for (int i = 0; i < n; i++) CHECK(!r[i].alarm, "%s alarmed on a healthy ladder", r[i].name);
    CHECK(has_finding(f, nf, LADDER_NOTE_INVERSION, r, "Q2_K", "IQ2_S"), "Q2_K above IQ2_S is a note");
    CHECK(has_finding(f, nf, LADDER_NOTE_INVERSION, r, "Q4_K_M", "Q4_K_S"), "Q4_K_M above Q4_K_S is a note");
    /* Both modes side by side: still quiet; a best mode worse than compat is a note. */
    n += load_kjv(r + n, IQF_MODE_BEST);
    int q = find(r, n, "Q4_0", IQF_MODE_BEST);
    r[q].kld = 0.0075;
    nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 0, "two healthy modes: %d alarms", na);
    CHECK(has_finding(f, nf, LADDER_NOTE_MODE, r, "Q4_0", "Q4_0"), "best worse than compat on Q4_0 is a note");
}

/* The stories260K simulated ladder (REFERENCE.md, with imatrix): healthy. */
static void test_healthy_stories(void) {
    static const struct { const char *t; double bpw, kld; } s[] = {
        { "iq2_xxs", 2.0625, 3.208787 }, { "iq2_xs", 2.3125, 2.262133 }, { "iq2_s", 2.5625, 1.547028 },
        { "iq3_xxs", 3.0625, 0.760379 }, { "iq3_s", 3.4375, 0.428688 }, { "q3_K", 3.4375, 0.420321 },
        { "q4_K", 4.5, 0.088723 }, { "q5_K", 5.5, 0.022317 }, { "q6_K", 6.5625, 0.005017 },
        { "q8_0", 8.5, 0.000488 },
    };
    ladder_rung r[16];
    int n = 0;
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        ladder_rung x = make("Q8_0", IQF_MODE_COMPAT, (uint64_t)(s[i].bpw * 1000), 6.3, s[i].kld, s[i].kld * 0.01);
        snprintf(x.name, sizeof x.name, "%s", s[i].t);
        x.ftype = -1;
        x.ttype = iqf_type_from_name(s[i].t);
        x.family = iqf_ladder_family_of_type(x.ttype);
        r[n++] = x;
    }
    ladder_limits lim = iqf_ladder_default_limits();
    ladder_finding f[64];
    int na = -1;
    iqf_ladder_judge(r, n, &lim, f, 64, &na);
    CHECK(na == 0, "healthy stories260K ladder: %d alarms", na);
}

/* The seed case: Mistral-7B's IQ3_XXS came out worse than its IQ2_XS. */
static void test_seed_case(void) {
    ladder_rung r[64];
    int n = load_kjv(r, IQF_MODE_COMPAT);
    int i3 = find(r, n, "IQ3_XXS", IQF_MODE_COMPAT);
    r[i3].kld = 0.30, r[i3].kld_err = 0.002, r[i3].ppl = 35.0;
    ladder_limits lim = iqf_ladder_default_limits();
    ladder_finding f[256];
    int na = 0;
    int nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na >= 1, "broken IQ3_XXS: %d alarms", na);
    CHECK(r[i3].alarm, "IQ3_XXS marked");
    CHECK(has_finding(f, nf, LADDER_ALARM_FAMILY, r, "IQ3_XXS", "IQ2_M"),
          "the alarm names IQ3_XXS and the smaller IQ rung it is worst against (IQ2_M, 6.1x)");
    CHECK(has_finding(f, nf, LADDER_ALARM_CROSS, r, "IQ3_XXS", "Q2_K"), "and Q2_K across families (4.1x)");
    CHECK(f[0].kind != LADDER_NOTE_INVERSION, "alarms come before notes");
    CHECK(strstr(f[0].text, "IQ3_XXS") && strstr(f[0].text, "0.300000"), "the message gives the numbers: %s", f[0].text);
    for (int k = 0; k < n; k++)
        if (k != i3) CHECK(!r[k].alarm, "%s alarmed next to the broken rung", r[k].name);
    /* Just inside the margin (9% worse than IQ3_XS's smaller neighbour... here: IQ3_XS made 5%
     * worse than IQ3_XXS): a note, not an alarm. */
    n = load_kjv(r, IQF_MODE_COMPAT);
    int ixs = find(r, n, "IQ3_XS", IQF_MODE_COMPAT);
    r[ixs].kld = 0.034380 * 1.05;
    nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 0 && has_finding(f, nf, LADDER_NOTE_INVERSION, r, "IQ3_XS", "IQ3_XXS"), "5%% inversion is a note");
    /* The same with a zero margin: the statistical test alone decides: alarm, and so does
     * llama.cpp's own Q4_K_M / Q4_K_S inversion (1.8%, 2.2 combined sigma): why the margin exists. */
    lim.margin = 0;
    iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 2 && r[ixs].alarm && r[find(r, n, "Q4_K_M", IQF_MODE_COMPAT)].alarm,
          "margin 0: the 5%% and the 1.8%% inversions beyond 2 sigma alarm (%d)", na);
    /* 20% worse but within the combined error (a noisy measurement): no alarm. */
    lim = iqf_ladder_default_limits();
    r[ixs].kld = 0.034380 * 1.2;
    r[ixs].kld_err = 0.01;
    iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 0, "an inversion within the combined error is no alarm (%d)", na);
}

static void test_other_rules(void) {
    ladder_rung r[64];
    int n = load_kjv(r, IQF_MODE_COMPAT);
    ladder_limits lim = iqf_ladder_default_limits();
    ladder_finding f[256];
    int na;
    /* Cross family: Q3_K_M 3x IQ3_XXS's KLD. */
    int q3 = find(r, n, "Q3_K_M", IQF_MODE_COMPAT);
    r[q3].kld = 3 * 0.034380;
    int nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(r[q3].alarm && has_finding(f, nf, LADDER_ALARM_CROSS, r, "Q3_K_M", NULL), "cross-family alarm");
    CHECK(has_finding(f, nf, LADDER_ALARM_FAMILY, r, "Q3_K_M", "Q3_K_S"), "and the family alarm (Q3_K_S)");
    /* PPL ratio limit for one type, then for all. */
    n = load_kjv(r, IQF_MODE_COMPAT);
    lim.n_ppl_limits = 1;
    lim.ppl_limit_ftype[0] = IQF_FTYPE_MOSTLY_Q4_K_M;
    lim.ppl_limit[0] = 1.001;
    nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 1 && has_finding(f, nf, LADDER_ALARM_PPL, r, "Q4_K_M", NULL), "per-type PPL limit (%d)", na);
    lim.n_ppl_limits = 0;
    lim.max_ppl_ratio = 1.10;
    nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    int want = 0;
    for (int i = 0; i < n; i++) want += r[i].ppl / KJV_BASE_PPL > 1.10;
    CHECK(na == want && want == 4, "global PPL limit: %d alarms, want %d", na, want);
    /* Smoke and failure. */
    lim = iqf_ladder_default_limits();
    n = load_kjv(r, IQF_MODE_COMPAT);
    int i4 = find(r, n, "IQ4_XS", IQF_MODE_COMPAT);
    r[i4].smoke_run = true;
    r[i4].smoke_ok = false;
    snprintf(r[i4].smoke_text, sizeof r[i4].smoke_text, "gibberish");
    int i6 = find(r, n, "Q6_K", IQF_MODE_COMPAT);
    r[i6].failed = true;
    snprintf(r[i6].error, sizeof r[i6].error, "quantize: disk full");
    nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    CHECK(na == 2, "smoke + failure: %d alarms", na);
    CHECK(has_finding(f, nf, LADDER_ALARM_SMOKE, r, "IQ4_XS", NULL), "smoke alarm");
    CHECK(has_finding(f, nf, LADDER_ALARM_FAILED, r, "Q6_K", NULL), "failure alarm");
    /* Only max findings are written; the alarm count is complete. */
    nf = iqf_ladder_judge(r, n, &lim, f, 1, &na);
    CHECK(nf == 1 && na == 2, "truncated findings: %d written, %d alarms", nf, na);
}

static void test_cache_record(void) {
    char dir[] = "/tmp/iqf-ladder-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256];
    snprintf(path, sizeof path, "%s/r.txt", dir);
    ladder_rung a = make("IQ3_XXS", IQF_MODE_BEST, 1518624, 22.4393, 0.034380123456789, 0.000196);
    a.quantize_s = 0.4321;
    a.eval_s = 3.21;
    a.n_chunks = 471;
    a.smoke_run = true;
    a.smoke_ok = true;
    snprintf(a.smoke_text, sizeof a.smoke_text, " God, and he\thath");
    char err[256];
    CHECK(iqf_ladder_rung_save(path, "00112233aabbccdd", &a, err, sizeof err) == 0, "save: %s", err);
    ladder_rung b;
    memset(&b, 0, sizeof b);
    snprintf(b.name, sizeof b.name, "IQ3_XXS");
    b.mode = IQF_MODE_BEST;
    CHECK(iqf_ladder_rung_load(path, "00112233aabbccdd", &b), "load");
    CHECK(b.done && b.cached && b.kld == a.kld && b.kld_err == a.kld_err && b.ppl == a.ppl &&
              b.bpw == a.bpw && b.file_bytes == a.file_bytes && b.n_chunks == 471 && b.smoke_ok &&
              b.quantize_s == a.quantize_s,
          "exact round trip");
    CHECK(!strcmp(b.smoke_text, " God, and he hath"), "continuation kept on one line: '%s'", b.smoke_text);
    ladder_rung c = b;
    CHECK(!iqf_ladder_rung_load(path, "00112233aabbccde", &c), "another key is not this rung");
    snprintf(c.name, sizeof c.name, "IQ2_XS");
    CHECK(!iqf_ladder_rung_load(path, "00112233aabbccdd", &c), "another rung's name");
    c = b;
    c.mode = IQF_MODE_COMPAT;
    CHECK(!iqf_ladder_rung_load(path, "00112233aabbccdd", &c), "another mode");
    /* Every truncation and a few alterations are rejected. */
    size_t len;
    char *txt = read_file(path, &len);
    CHECK(txt != NULL, "read back");
    int accepted = 0;
    for (size_t cut = 0; txt && cut < len; cut++) {
        write_file(path, txt, cut);
        c = b;
        accepted += iqf_ladder_rung_load(path, "00112233aabbccdd", &c);
    }
    CHECK(accepted == 0, "%d truncated records accepted", accepted);
    const char *bad[] = { "kld nan\n", "kld 1e999\n", "file_bytes -3\n", "n_chunks 0\n", "bogus 1\n", "smoke 2 0\n" };
    for (size_t k = 0; txt && k < sizeof bad / sizeof bad[0]; k++) {
        /* Insert the bad line before "end". */
        char *end = strstr(txt, "end\n");
        size_t head = (size_t)(end - txt);
        char buf[4096];
        int m = snprintf(buf, sizeof buf, "%.*s%send\n", (int)head, txt, bad[k]);
        write_file(path, buf, (size_t)m);
        c = b;
        CHECK(!iqf_ladder_rung_load(path, "00112233aabbccdd", &c), "altered record accepted: %s", bad[k]);
    }
    free(txt);
    unlink(path);
    rmdir(dir);
}

/* The plot as a person reads it: every tick value is round (at most two significant digits:
 * 1, 2, 5 x 10^k or a whole multiple of the step), and no two type labels overprint each other
 * (boxes at the width the placer assumes, 5.4 px per character at 9 px). */
static void check_svg_ticks_and_labels(const char *s) {
    int ticks = 0, bad_ticks = 0;
    for (const char *p = s; p && (p = strstr(p, "class=\"ytick\"")); p++) {
        const char *t = strchr(p, '>');
        if (!t) break;
        double v = strtod(t + 1, NULL);
        ticks++;
        double m = v / pow(10, floor(log10(fabs(v))) - 1); /* two leading digits */
        if (v != 0 && fabs(m - floor(m + 0.5)) > 1e-6) bad_ticks++, fprintf(stderr, "tick %.*s\n", 12, t + 1);
    }
    CHECK(ticks >= 8 && bad_ticks == 0, "svg: %d of %d y ticks are not round numbers", bad_ticks, ticks);
    double bx[512][4];
    int nb = 0, clashes = 0;
    for (const char *p = s; p && (p = strstr(p, "class=\"label\"")) && nb < 512; p++) {
        double x = 0, y = 0;
        const char *q = strstr(p, "x=\""), *r = strstr(p, "y=\""), *t = strchr(p, '>');
        if (!q || !r || !t) break;
        x = strtod(q + 3, NULL), y = strtod(r + 3, NULL);
        bool end = strstr(p, "text-anchor=\"end\"") && strstr(p, "text-anchor=\"end\"") < t;
        double w = 5.4 * (double)(strchr(t, '<') - t - 1) + 2;
        double b[4] = { end ? x - w : x, y - 8, end ? x : x + w, y + 2 };
        for (int k = 0; k < nb; k++)
            if (fmin(b[2], bx[k][2]) - fmax(b[0], bx[k][0]) > 0.5 && fmin(b[3], bx[k][3]) - fmax(b[1], bx[k][1]) > 0.5)
                clashes++;
        memcpy(bx[nb++], b, sizeof b);
    }
    CHECK(nb >= 20 && clashes == 0, "svg: %d labels, %d overlapping pairs", nb, clashes);
}

static void test_reports(void) {
    ladder_rung r[64];
    int n = load_kjv(r, IQF_MODE_COMPAT);
    n += load_kjv(r + n, IQF_MODE_BEST);
    int i3 = find(r, n, "IQ3_XXS", IQF_MODE_BEST);
    r[i3].kld = 0.5;
    int t = find(r, n, "Q8_0", IQF_MODE_BEST);
    r[t].done = false; /* a rung still to do */
    ladder_limits lim = iqf_ladder_default_limits();
    ladder_finding f[256];
    int na;
    int nf = iqf_ladder_judge(r, n, &lim, f, 256, &na);
    char dir[] = "/tmp/iqf-ladder-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char jp[256], cp[256], sp[256], err[256];
    snprintf(jp, sizeof jp, "%s/ladder.json", dir);
    snprintf(cp, sizeof cp, "%s/ladder.csv", dir);
    snprintf(sp, sizeof sp, "%s/ladder.svg", dir);
    ladder_inputs in = { "kjv-3m-f32.gguf", "heldout.txt", "imatrix.gguf", NULL, 14713632, 3672320, 256, -1, 2,
                         false, NULL, NULL, KJV_BASE_PPL, 0.20831, "0011" };
    CHECK(iqf_ladder_write_json(jp, &in, r, n, f, nf, na, err, sizeof err) == 0, "json: %s", err);
    CHECK(iqf_ladder_write_csv(cp, r, n, err, sizeof err) == 0, "csv: %s", err);
    CHECK(iqf_ladder_write_svg(sp, &in, r, n, err, sizeof err) == 0, "svg: %s", err);
    size_t len;
    char *j = read_file(jp, &len);
    int rungs = 0, opens = 0, closes = 0;
    for (const char *p = j; p && (p = strstr(p, "\"type\": ")); p++) rungs++;
    for (size_t k = 0; j && k < len; k++) opens += j[k] == '{', closes += j[k] == '}';
    CHECK(j && rungs == n && opens == closes, "json: %d rungs (want %d), braces %d/%d", rungs, n, opens, closes);
    CHECK(j && strstr(j, "\"kind\": \"alarm-family\", \"rung\": \"IQ3_XXS\", \"mode\": \"best\""), "json names the alarm");
    CHECK(j && strstr(j, "\"alarms\": 2\n"), "json alarm count (family and cross-family)");
    free(j);
    char *c = read_file(cp, &len);
    int lines = 0;
    for (size_t k = 0; c && k < len; k++) lines += c[k] == '\n';
    CHECK(c && lines == n + 1, "csv: %d lines, want %d", lines, n + 1);
    CHECK(c && strstr(c, "Q8_0,best,legacy,,,,,,,,,,,,,,,,,0,todo\n"), "csv todo row");
    free(c);
    char *s = read_file(sp, &len);
    int pts = 0, alarms = 0;
    for (const char *p = s; p && (p = strstr(p, "class=\"rung\"")); p++) pts++;
    for (const char *p = s; p && (p = strstr(p, "class=\"alarm\"")); p++) alarms++;
    /* Two panels (KLD, PPL) x the done rungs, and the relative panel: one point per best rung
     * with a compat twin (the alarmed IQ3_XXS among them). */
    int ratios = 0;
    for (const char *p = s; p && (p = strstr(p, "class=\"ratio\"")); p++) ratios++;
    CHECK(s && pts == 2 * (n - 1), "svg: %d points, want %d", pts, 2 * (n - 1));
    CHECK(s && ratios == n / 2 - 1, "svg: %d ratio points, want %d", ratios, n / 2 - 1);
    CHECK(s && alarms == 3, "svg: %d alarm marks, want 3 (one per panel)", alarms);
    CHECK(s && strstr(s, "mean KLD (log scale)") && strstr(s, "perplexity") && strstr(s, "bits per weight") &&
          strstr(s, "KLD / compat's"), "svg axis titles");
    check_svg_ticks_and_labels(s);
    CHECK(s && strstr(s, "data-mode=\"compat\"") && strstr(s, "data-mode=\"best\""), "svg: one series per mode");
    CHECK(s && strstr(s, "</svg>\n"), "svg complete");
    free(s);
    unlink(jp);
    unlink(cp);
    unlink(sp);
    rmdir(dir);
}

/* A stock llama-perplexity's output (tests/data/ladder: the kjv-3m base and its Q4_K_M file over
 * 4 chunks of 512, as llama.cpp's own build printed them, model-loading lines left out) reads
 * into exactly the numbers it prints; damaged output is refused, naming the line. */
static void test_llama_output(void) {
    size_t n;
    char *base = read_file(src_path("tests/data/ladder/llama-perplexity-base.log"), &n);
    char *kld = read_file(src_path("tests/data/ladder/llama-perplexity-kld.log"), &n);
    CHECK(base && kld, "llama-perplexity fixtures missing");
    if (!base || !kld) { free(base); free(kld); return; }
    char err[256];
    double ppl = 0, ppl_err = 0;
    CHECK(iqf_ladder_parse_llama_base(base, &ppl, &ppl_err, err, sizeof err) == 0, "base: %s", err);
    CHECK(ppl == 20.5437 && ppl_err == 1.45041, "base PPL %.6f +/- %.6f", ppl, ppl_err);
    ladder_rung r;
    memset(&r, 0, sizeof r);
    CHECK(iqf_ladder_parse_llama_kld(kld, &r, err, sizeof err) == 0, "kld: %s", err);
    CHECK(r.n_chunks == 4, "chunks %d", r.n_chunks);
    CHECK(r.ppl == 20.733853 && r.ppl_err == 1.464007, "PPL(Q) %.6f +/- %.6f", r.ppl, r.ppl_err);
    CHECK(r.ppl_ratio == 1.009255 && r.ppl_ratio_err == 0.004088, "ratio %.6f +/- %.6f", r.ppl_ratio, r.ppl_ratio_err);
    CHECK(r.kld == 0.007025 && r.kld_err == 0.000355, "KLD %.6f +/- %.6f", r.kld, r.kld_err);
    CHECK(r.kld_p99 == 0.058742 && r.kld_max == 0.115621, "KLD p99 %.6f max %.6f", r.kld_p99, r.kld_max);
    CHECK(fabs(r.same_top - 0.95392) < 1e-12 && fabs(r.same_top_err - 0.00657) < 1e-12, "same top %.6f +/- %.6f",
          r.same_top, r.same_top_err);
    /* Damage: a missing statistics line, a value that is not a number, no output at all. */
    char *cut = strstr(kld, "Mean    KLD");
    if (cut) {
        char saved = *cut;
        *cut = 0;
        ladder_rung z = r;
        CHECK(iqf_ladder_parse_llama_kld(kld, &z, err, sizeof err) != 0 && strstr(err, "KLD"), "truncated output: %s", err);
        CHECK(z.kld == r.kld, "a failed parse left the rung untouched");
        *cut = saved;
    }
    char *num = strstr(kld, "0.007025");
    if (num) {
        memcpy(num, "nan     ", 8);
        CHECK(iqf_ladder_parse_llama_kld(kld, &r, err, sizeof err) != 0, "a NaN KLD is refused");
    }
    CHECK(iqf_ladder_parse_llama_base("", &ppl, &ppl_err, err, sizeof err) != 0 && strstr(err, "Final estimate"),
          "empty output: %s", err);
    CHECK(iqf_ladder_parse_llama_kld("Mean    KLD:   0.1 ± 0.01\n", &r, err, sizeof err) != 0, "partial output refused");
    free(base);
    free(kld);
}

int main(void) {
    test_llama_output();
    test_families();
    test_families_match_traits();
    test_healthy_kjv();
    test_healthy_stories();
    test_seed_case();
    test_other_rules();
    test_cache_record();
    test_reports();
    return test_finish("test_ladder");
}
