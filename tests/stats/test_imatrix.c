/*
 * test_imatrix.c - importance matrix readers and writers (src/stats/imatrix*.c).
 * Fixtures: tests/data/stories260K/imatrix-groups_merged-c256.{dat,gguf}, written by
 * llama-imatrix from the same run (35 entries, 511 chunks of 256 tokens).
 * Reference semantics: llama 0.25.1 common/imatrix-loader.cpp + tools/quantize/quantize.cpp.
 * Combining (iqf_stats_combine, `imatrix --combine`): llama-imatrix's --in-file sums and counts
 * for importance matrices, and Hessian files whose shards add up to the whole (test_combine).
 */
#include "stats/hessian_file.h"
#include "stats/imatrix.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put_i32(uint8_t **p, int32_t v) {
    memcpy(*p, &v, 4);
    *p += 4;
}

static bool exists(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void write_im(const char *path, const iqf_imatrix_stats *st, int n, int chunk_count, const char *ds, bool dat) {
    char err[512];
    const iqf_imatrix_meta meta = { chunk_count, 5, ds };
    iqf_status r = dat ? iqf_imatrix_write_dat(path, st, n, &meta, err, sizeof err)
                       : iqf_imatrix_write_gguf(path, st, n, &meta, err, sizeof err);
    CHECK(r == IQF_OK, "write %s: %s", path, err);
}

/* Importance matrices and Hessian files of shards combine into the whole's (iqf_stats_combine). */
static void test_combine(const char *dir) {
    char err[512], pa[256], pb[256], pc[256], pd[256], pl[256], po[256];
    snprintf(pa, sizeof pa, "%s/a.gguf", dir);
    snprintf(pb, sizeof pb, "%s/b.gguf", dir);
    snprintf(pc, sizeof pc, "%s/c.gguf", dir);
    snprintf(pd, sizeof pd, "%s/d.gguf", dir);
    snprintf(pl, sizeof pl, "%s/a.dat", dir);
    snprintf(po, sizeof po, "%s/out.gguf", dir);
    /* a: a dense weight (10 rows) and an expert weight (5 and 0 rows); b: the same plus a weight
     * of its own; chunks of 5 tokens */
    float ad[4] = { 1, 2, 3, 4 }, ae[4] = { 1, 2, 3, 4 }, bd[4] = { 10, 20, 30, 40 }, be[4] = { 0, 0, 1, 1 },
          bo[3] = { 7, 8, 9 }, cd[5] = { 1, 1, 1, 1, 1 };
    int64_t a10[1] = { 10 }, ae_c[2] = { 5, 0 }, be_c[2] = { 0, 3 }, d6[1] = { 6 };
    const iqf_imatrix_stats sa[2] = { { "w.dense", 4, 1, ad, a10 }, { "w.exps", 2, 2, ae, ae_c } };
    const iqf_imatrix_stats sb[3] = { { "w.dense", 4, 1, bd, a10 }, { "w.exps", 2, 2, be, be_c }, { "w.onlyb", 3, 1, bo, a10 } };
    const iqf_imatrix_stats sc[1] = { { "w.dense", 5, 1, cd, a10 } };   /* another width */
    const iqf_imatrix_stats sd[1] = { { "w.exps", 4, 1, ae, d6 } };     /* an older 3-D entry: 1 count */
    write_im(pa, sa, 2, 2, "a.txt", false);
    write_im(pb, sb, 3, 2, "b.txt", false);
    write_im(pc, sc, 1, 2, "c.txt", false);
    write_im(pd, sd, 1, 1, "d.txt", false);
    write_im(pl, sa, 2, 2, "a.txt", true);
    const char *ab[2] = { pa, pb };
    iqf_combine_info info;
    CHECK(iqf_stats_combine(ab, 2, po, 0, 0, &info, err, sizeof err) == IQF_OK, "combine a b: %s", err);
    CHECK(info.kind == IQF_STATS_IMATRIX && info.n_entries == 3 && info.chunk_size == 5 && info.chunk_count == 4 &&
              info.tokens == 20 && !info.dat, "info: kind %d, %d entries, %d chunks of %d", info.kind, info.n_entries,
          info.chunk_count, info.chunk_size);
    iqf_imatrix_raw r;
    CHECK(iqf_imatrix_raw_load(po, 512, &r, err, sizeof err) == IQF_OK, "reload: %s", err);
    CHECK(r.n_entries == 3 && r.chunk_count == 4 && r.chunk_size == 5, "combined: %d entries, %d chunks", r.n_entries,
          r.chunk_count);
    CHECK(r.n_datasets == 2 && !strcmp(r.datasets[0], "a.txt") && !strcmp(r.datasets[1], "b.txt"), "datasets in order");
    if (r.n_entries == 3) {
        const iqf_imatrix_raw_entry *d = &r.entries[0], *e = &r.entries[1], *o = &r.entries[2];
        CHECK(!strcmp(d->name, "w.dense") && d->n_mat == 1 && d->counts[0] == 20 && d->sum[0] == 11 && d->sum[3] == 44,
              "dense: sums and counts add");
        CHECK(!strcmp(e->name, "w.exps") && e->n_mat == 2 && e->counts[0] == 5 && e->counts[1] == 3 && e->sum[0] == 1 &&
                  e->sum[2] == 4 && e->sum[3] == 5, "experts: per expert");
        CHECK(!strcmp(o->name, "w.onlyb") && o->counts[0] == 10 && o->sum[2] == 9, "a weight of one file is kept");
    }
    iqf_imatrix_raw_free(&r);
    /* an older single count meets two: broadcast, then added */
    const char *ad_[2] = { pa, pd };
    CHECK(iqf_stats_combine(ad_, 2, po, 1, 0, NULL, err, sizeof err) == IQF_OK, "combine a d: %s", err);
    CHECK(iqf_imatrix_raw_load(po, 512, &r, err, sizeof err) == IQF_OK, "reload: %s", err);
    const iqf_imatrix_raw_entry *x = r.n_entries == 2 ? &r.entries[1] : NULL;
    CHECK(x && x->n_mat == 2 && x->counts[0] == 11 && x->counts[1] == 6 && x->sum[1] == 4, "broadcast count");
    iqf_imatrix_raw_free(&r);
    /* a mismatched width: one line naming the file, nothing written, the merge target unchanged */
    unlink(po);
    const char *ac[2] = { pa, pc };
    CHECK(iqf_stats_combine(ac, 2, po, 0, 0, NULL, err, sizeof err) == IQF_E_FORMAT, "mismatch");
    CHECK(!strncmp(err, pc, strlen(pc)) && strstr(err, "w.dense has 5 values, the files before it 4") && !strchr(err, '\n'),
          "message: %s", err);
    CHECK(!exists(po), "nothing written");
    iqf_imatrix_raw ra, rc;
    CHECK(iqf_imatrix_raw_load(pa, 512, &ra, err, sizeof err) == IQF_OK && iqf_imatrix_raw_load(pc, 512, &rc, err, sizeof err) == IQF_OK,
          "load a c");
    CHECK(iqf_imatrix_raw_merge(&ra, &rc, "c", err, sizeof err) == IQF_E_FORMAT && ra.n_entries == 2 &&
              ra.entries[0].counts[0] == 10 && ra.entries[0].sum[0] == 1 && ra.n_datasets == 1, "dst unchanged");
    iqf_imatrix_raw_free(&ra);
    iqf_imatrix_raw_free(&rc);
    /* legacy .dat: sums = stored * chunk size, counts = ncall * chunk size (llama-imatrix) */
    CHECK(iqf_imatrix_raw_load(pl, 5, &r, err, sizeof err) == IQF_OK && r.is_legacy, "load .dat: %s", err);
    if (r.n_entries == 2) {
        const iqf_imatrix_raw_entry *d = &r.entries[0], *e = &r.entries[1];
        CHECK(d->counts[0] == 10 && fabs(d->sum[3] - 4) < 1e-6, "legacy dense: %g over %lld", d->sum[3], (long long)d->counts[0]);
        /* one ncall for both experts: ceil(5 / 5) = 1, so 5 rows each; the unseen expert's 1s */
        CHECK(e->n_mat == 1 && e->counts[0] == 5 && fabs(e->sum[0] - 1) < 1e-6 && fabs(e->sum[2] - 5) < 1e-6,
              "legacy experts: %g %g over %lld", e->sum[0], e->sum[2], (long long)e->counts[0]);
    }
    iqf_imatrix_raw_free(&r);

    /* Hessians: shard sums S1 over 3 rows (experts 2 and 1), S2 over 5 (experts 0 and 5); the
     * whole is S1 + S2 over 8 (2 and 6). */
    enum { N = 8, BS = 4, NM = 2 };
    double s1[N * BS], s2[N * BS], sw[N * BS], e1[NM * 2 * 2], e2[NM * 2 * 2], ew[NM * 2 * 2];
    uint64_t z = 12345;
    for (int r_ = 0; r_ < N; r_++)
        for (int j = 0; j < BS; j++) {
            z = z * 6364136223846793005ull + 1442695040888963407ull;
            const double u = (double)(z >> 11) / 9007199254740992.0 - 0.5;
            s1[r_ * BS + j] = j == r_ % BS ? 3 + u : u;
            s2[r_ * BS + j] = j == r_ % BS ? 7 - u : u * u;
            sw[r_ * BS + j] = s1[r_ * BS + j] + s2[r_ * BS + j];
        }
    for (int k = 0; k < NM * 4; k++) {
        const int diag = (k % 4) == 0 || (k % 4) == 3;
        e1[k] = diag ? 2.0 + k : 0.25 * k;
        e2[k] = k < 4 ? 0 : (diag ? 5.0 + k : -0.5 * k); /* expert 0 unseen in shard 2 */
        ew[k] = e1[k] + e2[k];
    }
    const int64_t c1[NM] = { 2, 1 }, c2[NM] = { 0, 5 }, cw[NM] = { 2, 6 };
    iqf_hessian_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.model.name, sizeof meta.model.name, "tiny");
    snprintf(meta.model.arch, sizeof meta.model.arch, "llama");
    meta.model.n_embd = 8;
    meta.chunk_size = 4;
    char h1[256], h2[256], hw[256], hx[256];
    snprintf(h1, sizeof h1, "%s/h1.gguf", dir);
    snprintf(h2, sizeof h2, "%s/h2.gguf", dir);
    snprintf(hw, sizeof hw, "%s/hw.gguf", dir);
    snprintf(hx, sizeof hx, "%s/hx.gguf", dir);
    const struct { const char *path; const double *s, *e; int64_t count; const int64_t *ec; int chunks; } files[3] = {
        { h1, s1, e1, 3, c1, 1 }, { h2, s2, e2, 5, c2, 2 }, { hw, sw, ew, 8, cw, 3 } };
    for (int f = 0; f < 3; f++) {
        const iqf_hessian_wentry w[2] = { { "blk.0.attn_qkv.hessian", N, BS, files[f].s, files[f].count, 0, NULL },
                                          { "blk.0.ffn_down_exps.hessian", 2, 2, files[f].e, files[f].count, NM, files[f].ec } };
        meta.chunk_count = files[f].chunks;
        CHECK(iqf_hessian_write(files[f].path, w, 2, &meta, err, sizeof err) == IQF_OK, "write %s: %s", files[f].path, err);
    }
    const char *hh[2] = { h1, h2 };
    CHECK(iqf_stats_combine(hh, 2, po, 0, 0, &info, err, sizeof err) == IQF_OK, "combine Hessians: %s", err);
    CHECK(info.kind == IQF_STATS_HESSIAN && info.n_entries == 2 && info.tokens == 8 && info.chunk_count == 3, "Hessian info");
    iqf_hessian_file fo, fw;
    CHECK(iqf_hessian_open(po, &fo, err, sizeof err) == IQF_OK && iqf_hessian_open(hw, &fw, err, sizeof err) == IQF_OK,
          "open: %s", err);
    CHECK(fo.token_count == 8 && fo.chunk_count == 3 && fo.chunk_size == 4, "header");
    float vo[N * BS], vw[N * BS];
    double maxulp = 0;
    int same = 0, tot = 0;
    const char *names[2] = { "blk.0.attn_qkv.hessian", "blk.0.ffn_down_exps.hessian" };
    for (int k = 0; k < 2; k++)
        for (int e = 0; e < (k ? NM : 1); e++) {
            CHECK(iqf_hessian_read_mat(&fo, names[k], e, vo) && iqf_hessian_read_mat(&fw, names[k], e, vw), "read");
            for (int j = 0; j < (k ? 4 : N * BS); j++) {
                tot++;
                if (vo[j] == vw[j]) {
                    same++;
                    continue;
                }
                const double d = fabs((double)vo[j] - vw[j]) / ldexp(1.0, ilogb(fmax(fabs(vo[j]), fabs(vw[j]))) - 23);
                if (d > maxulp) maxulp = d;
            }
        }
    CHECK(maxulp <= 1.0, "combined Hessian within 1 ulp of the whole's: %g ulp (%d of %d equal)", maxulp, same, tot);
    CHECK(same * 2 > tot, "most values bitwise equal: %d of %d", same, tot);
    printf("test_imatrix: combined Hessian vs whole: %d of %d values bitwise equal, max %g ulp\n", same, tot, maxulp);
    iqf_hessian_close(&fo);
    iqf_hessian_close(&fw);
    iqf_hessian_sums hs;
    CHECK(iqf_hessian_sums_load(po, &hs, err, sizeof err) == IQF_OK, "sums: %s", err);
    CHECK(hs.n_entries == 2 && hs.entries[1].counts && hs.entries[1].counts[0] == 2 && hs.entries[1].counts[1] == 6,
          "expert rows add");
    iqf_hessian_sums_free(&hs);
    /* another model: refused, nothing written */
    unlink(po);
    snprintf(meta.model.name, sizeof meta.model.name, "other");
    const iqf_hessian_wentry w1 = { "blk.0.attn_qkv.hessian", N, BS, s1, 3, 0, NULL };
    CHECK(iqf_hessian_write(hx, &w1, 1, &meta, err, sizeof err) == IQF_OK, "write hx: %s", err);
    const char *hxs[2] = { h1, hx };
    CHECK(iqf_stats_combine(hxs, 2, po, 0, 0, NULL, err, sizeof err) == IQF_E_FORMAT && strstr(err, "another model") &&
              !exists(po), "another model: %s", err);
    const char *mixed[2] = { h1, pa };
    CHECK(iqf_stats_combine(mixed, 2, po, 0, 0, NULL, err, sizeof err) == IQF_E_FORMAT && strstr(err, "of one kind") &&
              !exists(po), "mixed kinds: %s", err);
    CHECK(iqf_stats_combine(hh, 2, po, 2, 0, NULL, err, sizeof err) == IQF_E_INVALID_ARG && !exists(po), "Hessian as .dat");
    const char *files_[] = { pa, pb, pc, pd, pl, h1, h2, hw, hx };
    for (size_t i = 0; i < sizeof files_ / sizeof files_[0]; i++) unlink(files_[i]);
}

int main(void) {
    char err[512];
    iqf_imatrix dat, gg;
    size_t n_raw = 0;
    const char *dat_path = src_path("tests/data/stories260K/imatrix-groups_merged-c256.dat");
    uint8_t *raw = read_file(dat_path, &n_raw);
    CHECK(raw != NULL, "read %s", dat_path);
    if (!raw) return test_finish("test_imatrix");

    iqf_status st = iqf_imatrix_load(dat_path, &dat, err, sizeof err);
    CHECK(st == IQF_OK, "load dat: %s", err);
    CHECK(dat.is_legacy, "legacy");
    CHECK(dat.n_entries == 35, "35 entries, got %d", dat.n_entries);
    CHECK(dat.chunk_count == 511, "chunk count %d", dat.chunk_count);
    CHECK(dat.n_datasets == 1 && strstr(dat.datasets[0], "groups_merged.txt"), "dataset");
    /* First entry of the file: blk.0.attn_k.weight, ncall 511, 64 values; value = stored / ncall */
    const iqf_imatrix_entry *e = iqf_imatrix_find(&dat, "blk.0.attn_k.weight");
    CHECK(e && e->n == 64, "attn_k entry");
    if (e) {
        float stored;
        memcpy(&stored, raw + 4 + 4 + strlen("blk.0.attn_k.weight") + 8, 4);
        CHECK(e->values[0] == stored / 511.0f, "value 0: %g vs %g", e->values[0], stored / 511.0f);
    }
    for (int i = 1; i < dat.n_entries; i++)
        CHECK(strcmp(dat.entries[i - 1].name, dat.entries[i].name) < 0, "sorted");

    const char *gg_path = src_path("tests/data/stories260K/imatrix-groups_merged-c256.gguf");
    st = iqf_imatrix_load(gg_path, &gg, err, sizeof err);
    CHECK(st == IQF_OK, "load gguf: %s", err);
    CHECK(!gg.is_legacy && gg.has_metadata, "gguf metadata");
    CHECK(gg.n_entries == dat.n_entries, "same entries %d vs %d", gg.n_entries, dat.n_entries);
    CHECK(gg.chunk_count == 511 && gg.chunk_size == 256, "chunks %d size %d", gg.chunk_count, gg.chunk_size);
    /* Both formats give E[x^2]; the .dat goes through (s/c)*ncall/ncall, so allow rounding. */
    double maxrel = 0;
    for (int i = 0; i < gg.n_entries && i < dat.n_entries; i++) {
        CHECK(!strcmp(gg.entries[i].name, dat.entries[i].name), "name %d", i);
        CHECK(gg.entries[i].n == dat.entries[i].n, "n %d", i);
        for (int64_t j = 0; j < gg.entries[i].n && j < dat.entries[i].n; j++) {
            double a = gg.entries[i].values[j], b = dat.entries[i].values[j];
            double rel = fabs(a - b) / (fabs(a) + 1e-30);
            if (rel > maxrel) maxrel = rel;
        }
    }
    CHECK(maxrel < 1e-5, "gguf vs dat max rel diff %g", maxrel);

    /* Filters: exclude, then include, by substring. */
    iqf_imatrix f;
    CHECK(iqf_imatrix_load(dat_path, &f, err, sizeof err) == IQF_OK, "reload");
    const char *exc[] = { "ffn_" };
    iqf_imatrix_filter(&f, NULL, 0, exc, 1);
    CHECK(f.n_entries == 35 - 15, "exclude ffn_: %d", f.n_entries);
    const char *inc[] = { "attn_q", "attn_k" };
    iqf_imatrix_filter(&f, inc, 2, NULL, 0);
    CHECK(f.n_entries == 10, "include attn_q/attn_k: %d", f.n_entries);
    iqf_imatrix_free(&f);

    /* Every truncation of the .dat either parses (only the optional trailer cut) or fails. */
    size_t body = n_raw - 4 - 4 - strlen(dat.datasets[0]);
    for (size_t cut = 0; cut < n_raw; cut += (cut < 64 ? 1 : 97)) {
        iqf_imatrix t;
        st = iqf_imatrix_parse_dat(raw, cut, &t, err, sizeof err);
        if (cut < body) CHECK(st != IQF_OK, "truncated at %zu must fail", cut);
        else CHECK(st == IQF_OK, "cut in trailer at %zu: %s", cut, err);
        iqf_imatrix_free(&t);
    }
    /* Hand-made bad files. */
    uint8_t buf[256], *p;
    p = buf;
    put_i32(&p, 0);
    CHECK(iqf_imatrix_parse_dat(buf, (size_t)(p - buf), &f, err, sizeof err) == IQF_E_FORMAT, "0 entries");
    p = buf;
    put_i32(&p, 1);
    put_i32(&p, -5);
    put_i32(&p, 1);
    put_i32(&p, 1);
    put_i32(&p, 0);
    CHECK(iqf_imatrix_parse_dat(buf, (size_t)(p - buf), &f, err, sizeof err) == IQF_E_FORMAT, "negative name length");
    p = buf;
    put_i32(&p, 1);
    put_i32(&p, 1);
    *p++ = 'a';
    put_i32(&p, 1);
    put_i32(&p, 0);
    CHECK(iqf_imatrix_parse_dat(buf, (size_t)(p - buf), &f, err, sizeof err) == IQF_E_FORMAT, "nval 0");
    p = buf;
    put_i32(&p, 0x7fffffff);
    put_i32(&p, 1);
    CHECK(iqf_imatrix_parse_dat(buf, (size_t)(p - buf), &f, err, sizeof err) == IQF_E_FORMAT, "huge count");
    /* Duplicate names: the later entry wins; ncall 0 keeps the stored values. */
    p = buf;
    put_i32(&p, 2);
    for (int k = 0; k < 2; k++) {
        put_i32(&p, 1);
        *p++ = 'w';
        put_i32(&p, 0);
        put_i32(&p, 1);
        float val = k ? 7.0f : 3.0f;
        memcpy(p, &val, 4);
        p += 4;
    }
    CHECK(iqf_imatrix_parse_dat(buf, (size_t)(p - buf), &f, err, sizeof err) == IQF_OK, "dups: %s", err);
    CHECK(f.n_entries == 1 && f.entries[0].values[0] == 7.0f && f.n_datasets == 0, "later duplicate wins");
    iqf_imatrix_free(&f);
    CHECK(iqf_imatrix_load("/nonexistent/imatrix.dat", &f, err, sizeof err) == IQF_E_IO, "missing file");
    CHECK(strstr(err, "/nonexistent/imatrix.dat") != NULL, "message names the file: %s", err);

    /* Writers: round trip through both formats. */
    float s0[8], s1[3 * 4];
    int64_t c0[1] = { 1000 }, c1[3] = { 20, 0, 7 };
    for (int i = 0; i < 8; i++) s0[i] = 1000.0f * (0.5f + (float)i);
    for (int i = 0; i < 12; i++) s1[i] = 3.0f * (float)(i + 1);
    iqf_imatrix_stats stats[2] = {
        { "blk.0.ffn_up.weight", 8, 1, s0, c0 },
        { "blk.0.attn_q.weight", 4, 3, s1, c1 },
    };
    iqf_imatrix_meta meta = { 12, 512, "calib.txt" };
    char tmpl[] = "/tmp/iqf_test_imatrix_XXXXXX";
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    char pg[256], pd[256];
    snprintf(pg, sizeof pg, "%s/im.gguf", dir);
    snprintf(pd, sizeof pd, "%s/im.dat", dir);
    CHECK(iqf_imatrix_write_gguf(pg, stats, 2, &meta, err, sizeof err) == IQF_OK, "write gguf: %s", err);
    CHECK(iqf_imatrix_write_dat(pd, stats, 2, &meta, err, sizeof err) == IQF_OK, "write dat: %s", err);
    iqf_imatrix rg, rd;
    CHECK(iqf_imatrix_load(pg, &rg, err, sizeof err) == IQF_OK, "read back gguf: %s", err);
    CHECK(iqf_imatrix_load(pd, &rd, err, sizeof err) == IQF_OK, "read back dat: %s", err);
    CHECK(rg.n_entries == 2 && rd.n_entries == 2, "2 entries");
    CHECK(rg.chunk_count == 12 && rg.chunk_size == 512 && rg.n_datasets == 1 &&
              !strcmp(rg.datasets[0], "calib.txt"), "gguf meta");
    CHECK(rd.chunk_count == 12 && rd.n_datasets == 1 && !strcmp(rd.datasets[0], "calib.txt"), "dat meta");
    e = iqf_imatrix_find(&rg, "blk.0.attn_q.weight");
    CHECK(e && e->n == 12, "gguf attn_q");
    if (e) {
        CHECK(e->values[0] == 3.0f / 20.0f, "sum/count");
        CHECK(e->values[4] == 1.0f && e->values[7] == 1.0f, "count 0 -> 1");
        CHECK(e->values[8] == 27.0f / 7.0f, "expert 2");
    }
    e = iqf_imatrix_find(&rd, "blk.0.ffn_up.weight");
    CHECK(e && e->n == 8 && fabsf(e->values[3] - 3.5f) < 1e-6f, "dat ffn_up %g", e ? e->values[3] : -1);
    iqf_imatrix_free(&rg);
    iqf_imatrix_free(&rd);
    /* The writers refuse unwritable places and leave nothing behind. */
    CHECK(iqf_imatrix_write_gguf("/nonexistent/x.gguf", stats, 2, &meta, err, sizeof err) != IQF_OK, "unwritable");
    CHECK(iqf_imatrix_write_dat("/dev/full", stats, 2, &meta, err, sizeof err) == IQF_E_IO, "dev/full dat");
    CHECK(iqf_imatrix_write_gguf("/dev/full", stats, 2, &meta, err, sizeof err) == IQF_E_IO, "dev/full gguf");
    unlink(pg);
    unlink(pd);
    test_combine(dir);
    rmdir(dir);

    iqf_imatrix_free(&dat);
    iqf_imatrix_free(&gg);
    free(raw);
    return test_finish("test_imatrix");
}
