/*
 * test_imatrix.c - importance matrix readers and writers (src/stats/imatrix*.c).
 * Fixtures: tests/data/stories260K/imatrix-groups_merged-c256.{dat,gguf}, written by
 * llama-imatrix from the same run (35 entries, 511 chunks of 256 tokens).
 * Reference semantics: llama 0.25.1 common/imatrix-loader.cpp + tools/quantize/quantize.cpp.
 */
#include "stats/imatrix.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_i32(uint8_t **p, int32_t v) {
    memcpy(*p, &v, 4);
    *p += 4;
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
    rmdir(dir);

    iqf_imatrix_free(&dat);
    iqf_imatrix_free(&gg);
    free(raw);
    return test_finish("test_imatrix");
}
