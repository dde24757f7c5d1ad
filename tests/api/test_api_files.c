/*
 * test_api_files.c - the file APIs of iqforge.h that tools/ and embedders use, through the public
 * header only: the atomic output file (iqf_outfile_*, iqf_same_file) and the progress callback
 * of model quantization (iqf_model_quantize_params.progress).
 */
#include "testutil.h"

#include "iqforge.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files in dir whose name starts with prefix. */
static int count_prefix(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

static void test_outfile(const char *dir) {
    char path[512], other[512], err[512];
    snprintf(path, sizeof path, "%s/out.bin", dir);
    snprintf(other, sizeof other, "%s/other.bin", dir);

    /* Commit: exactly the bytes written, nothing else left in the folder. */
    iqf_outfile *of = NULL;
    CHECK(iqf_outfile_open(path, &of, err, sizeof err) == IQF_OK && of, "open: %s", err);
    CHECK(access(path, F_OK) != 0, "the final name exists before commit");
    CHECK(count_prefix(dir, "out.bin.tmp.") == 1, "one temporary file while writing");
    unsigned char data[3000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
    CHECK(iqf_outfile_write(of, data, 1000, err, sizeof err) == IQF_OK, "write: %s", err);
    CHECK(iqf_outfile_write(of, data + 1000, 0, err, sizeof err) == IQF_OK, "empty write: %s", err);
    CHECK(iqf_outfile_write(of, data + 1000, 2000, err, sizeof err) == IQF_OK, "write: %s", err);
    CHECK(iqf_outfile_commit(of, err, sizeof err) == IQF_OK, "commit: %s", err);
    size_t n = 0;
    unsigned char *back = read_file(path, &n);
    CHECK(back && n == sizeof data && !memcmp(back, data, n), "committed %zu bytes, want %zu", n, sizeof data);
    free(back);
    CHECK(count_prefix(dir, "out.bin.tmp.") == 0, "temporary file left after commit");
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "mode %o, want 644", (unsigned)(st.st_mode & 0777));

    /* Abort: the previous file stays as it was, the temporary goes. */
    CHECK(iqf_outfile_open(path, &of, err, sizeof err) == IQF_OK, "open: %s", err);
    CHECK(iqf_outfile_write(of, "xyz", 3, err, sizeof err) == IQF_OK, "write: %s", err);
    iqf_outfile_abort(of);
    back = read_file(path, &n);
    CHECK(back && n == sizeof data && !memcmp(back, data, n), "abort changed the file (%zu bytes)", n);
    free(back);
    CHECK(count_prefix(dir, "out.bin.tmp.") == 0, "temporary file left after abort");
    iqf_outfile_abort(NULL);

    /* Same file: by inode, not by name. */
    char alias[600];
    snprintf(alias, sizeof alias, "%s/./out.bin", dir);
    CHECK(iqf_same_file(path, alias), "%s and %s are the same file", path, alias);
    CHECK(!iqf_same_file(path, other), "%s does not exist", other);
    CHECK(write_file(other, "a", 1), "write %s", other);
    CHECK(!iqf_same_file(path, other), "two files are not the same");

    /* Errors: a missing folder, bad arguments. */
    char bad[600];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.bin", dir);
    of = (iqf_outfile *)&of;
    err[0] = 0;
    CHECK(iqf_outfile_open(bad, &of, err, sizeof err) == IQF_E_IO && of == NULL, "open in a missing folder");
    CHECK(strstr(err, bad) == err && strstr(err, "No such file"), "message \"%s\"", err);
    CHECK(iqf_outfile_open(NULL, &of, err, sizeof err) == IQF_E_INVALID_ARG, "NULL path");
    CHECK(iqf_outfile_open(path, NULL, err, sizeof err) == IQF_E_INVALID_ARG, "NULL out");
    CHECK(iqf_outfile_write(NULL, "a", 1, err, sizeof err) == IQF_E_INVALID_ARG, "NULL handle");
    CHECK(iqf_outfile_commit(NULL, err, sizeof err) == IQF_E_INVALID_ARG, "NULL handle");

    /* A full device: the write or the commit fails with IQF_E_IO and a message naming it; the
     * error is sticky (every later write fails too). */
    if (access("/dev/full", W_OK) == 0) {
        CHECK(iqf_outfile_open("/dev/full", &of, err, sizeof err) == IQF_OK, "open /dev/full: %s", err);
        iqf_status st = IQF_OK;
        static unsigned char big[1 << 16];
        for (int i = 0; i < 4 && !st; i++) st = iqf_outfile_write(of, big, sizeof big, err, sizeof err);
        CHECK(st == IQF_E_IO, "writing 256 KiB to /dev/full: %d", (int)st);
        CHECK(strstr(err, "/dev/full: ") == err, "message \"%s\"", err);
        CHECK(iqf_outfile_write(of, "a", 1, err, sizeof err) == IQF_E_IO, "sticky error");
        CHECK(iqf_outfile_commit(of, err, sizeof err) == IQF_E_IO, "commit after a failed write");
        CHECK(strstr(err, "No space left"), "message \"%s\"", err);
    }
}

typedef struct prog_log {
    int calls, ends, bad_order, max_item, n_items;
    int64_t last_done, total;
    bool after_end;
} prog_log;

static void on_progress(void *user, int item, int n_items, const char *name, const char *what,
                        int64_t done, int64_t total) {
    prog_log *l = user;
    if (l->ends) l->after_end = true;
    if (!name) { l->ends++; l->last_done = done; l->total = total; return; }
    l->calls++;
    if (item < 1 || item > n_items || done < l->last_done || done > total || !what) l->bad_order++;
    if (item > l->max_item) l->max_item = item;
    l->n_items = n_items;
    l->last_done = done;
    l->total = total;
}

/* stories260K (F32) to Q8_0: the callback sees every tensor in order, input bytes rising to the
 * sum of the tensors' sizes, then one end call; a dry run reports nothing. */
static void test_progress(const char *dir) {
    const char *in = src_path("tests/data/stories260K/stories260K-f32.gguf");
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/q8.gguf", dir);
    iqf_gguf *g = iqf_gguf_open(in, err, sizeof err);
    CHECK(g, "%s", err);
    if (!g) return;
    int64_t nt = iqf_gguf_n_tensors(g), bytes = 0;
    for (int64_t i = 0; i < nt; i++) bytes += (int64_t)iqf_gguf_tensor_at(g, i)->nbytes;
    iqf_gguf_close(g);
    prog_log l = { 0 };
    iqf_model_quantize_params qp = iqf_model_quantize_default_params();
    CHECK(qp.progress == NULL && qp.progress_user == NULL, "no progress by default");
    qp.ftype = IQF_FTYPE_MOSTLY_Q8_0;
    qp.quiet = true; /* quiet silences the log, not the callback */
    qp.progress = on_progress;
    qp.progress_user = &l;
    CHECK(iqf_model_quantize(in, out, &qp, NULL, NULL, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(l.n_items == nt && l.max_item == nt, "items %d of %d, want %lld", l.max_item, l.n_items, (long long)nt);
    CHECK(l.calls >= nt && l.bad_order == 0, "%d calls, %d out of order", l.calls, l.bad_order);
    CHECK(l.ends == 1 && !l.after_end, "%d end calls", l.ends);
    CHECK(l.total == bytes && l.last_done == bytes, "done %lld of %lld, want %lld", (long long)l.last_done,
          (long long)l.total, (long long)bytes);
    prog_log d = { 0 };
    qp.progress_user = &d;
    qp.dry_run = true;
    CHECK(iqf_model_quantize(in, NULL, &qp, NULL, NULL, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(d.calls == 0 && d.ends == 0, "dry run: %d calls", d.calls + d.ends);
}

/* A Hessian captured on stories260K with the public API, written, read back: every matrix's
 * input has one (q/k/v and gate/up shared), of the model's widths, symmetric, diagonal > 0. */
static void test_hessian(const char *dir) {
    const char *in = src_path("tests/data/stories260K/stories260K-f32.gguf");
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/h.gguf", dir);
    iqf_model *m = NULL;
    iqf_model_params mp = iqf_model_default_params();
    CHECK(iqf_model_load(in, &mp, &m, err, sizeof err) == IQF_OK, "%s", err);
    if (!m) return;
    const iqf_model_info *mi = iqf_model_get_info(m);
    iqf_context *c = NULL;
    iqf_hess_acc *acc = NULL;
    CHECK(iqf_context_new(m, 64, 1, &c, err, sizeof err) == IQF_OK, "%s", err);
    CHECK(c && iqf_hessian_attach(c, -1, &acc, err, sizeof err) == IQF_OK, "%s", err);
    int32_t tok[64];
    for (int i = 0; i < 64; i++) tok[i] = 1 + (i * 37) % (mi->n_vocab - 1);
    CHECK(acc && iqf_decode(c, tok, 64, 0, 63, NULL, err, sizeof err) == IQF_OK, "%s", err);
    iqf_hessian_detach(c);
    CHECK(iqf_hessian_acc_write(acc, m, path, 1, 64, "test", false, err, sizeof err) == IQF_OK, "%s", err);
    iqf_hessian_acc_free(acc);
    iqf_context_free(c);
    iqf_hessian_file *hf = NULL;
    CHECK(iqf_hessian_file_load(path, &hf, err, sizeof err) == IQF_OK && hf, "%s", err);
    const char *names[] = { "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.1.attn_output.weight",
                            "blk.0.ffn_up.weight", "blk.0.ffn_down.weight" };
    const int64_t widths[] = { mi->n_embd, mi->n_embd, mi->n_embd, mi->n_embd, mi->n_ff };
    for (int k = 0; k < 5 && hf; k++) {
        int64_t n = 0, bs = 0;
        CHECK(iqf_hessian_file_find(hf, names[k], &n, &bs) && n == widths[k] && bs == n,
              "%s: %lld x %lld, want %lld full", names[k], (long long)n, (long long)bs, (long long)widths[k]);
        if (n != widths[k] || bs != n) continue;
        float *h = malloc(sizeof *h * (size_t)(n * n));
        CHECK(h && iqf_hessian_file_read(hf, names[k], h), "read %s", names[k]);
        int asym = 0, baddiag = 0;
        for (int64_t i = 0; h && i < n; i++) {
            if (!(h[i * n + i] > 0)) baddiag++;
            for (int64_t j = 0; j < i; j++)
                if (fabsf(h[i * n + j] - h[j * n + i]) > 1e-5f * (fabsf(h[i * n + j]) + 1e-30f)) asym++;
        }
        CHECK(asym == 0 && baddiag == 0, "%s: %d asymmetric, %d diagonal <= 0", names[k], asym, baddiag);
        free(h);
    }
    int64_t n, bs;
    CHECK(hf && !iqf_hessian_file_find(hf, "no.such.weight", &n, &bs), "absent entry found");
    iqf_hessian_file_free(hf);
    iqf_hessian_file_free(NULL);
    CHECK(iqf_hessian_file_load(in, &hf, err, sizeof err) == IQF_E_FORMAT && !hf, "a model is not a Hessian file");
    iqf_model_free(m);
}

int main(void) {
    char dir[] = "/tmp/iqf_api_files.XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    test_outfile(dir);
    test_progress(dir);
    test_hessian(dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_finish("test_api_files");
}
