/*
 * bench_gguf.c - GGUF reader and writer speed against ggml's gguf (the oracle), same run.
 *   bench_gguf [FILE.gguf ...]   (default: tests/data/stories260K/stories260K-f32.gguf)
 * 1. open + validate + close, ours (mmap) vs gguf_init_from_file(no_alloc) (metadata only).
 * 2. writing 256 MiB of tensor data (64 x 4 MiB f32) to $TMPDIR: ours streams in 1 MiB chunks
 *    (and fsyncs before the rename), ggml's gguf_write_to_file writes from a ggml context.
 */
#include "iqforge.h"
#include "oracle.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct o_gguf_params { bool no_alloc; void **ctx; };
struct o_ggml_params { size_t mem_size; void *mem_buffer; bool no_alloc; };

int main(int argc, char **argv) {
    oracle_require();
    void *(*o_open)(const char *, struct o_gguf_params) = (void *(*)(const char *, struct o_gguf_params))oracle_sym("gguf_init_from_file");
    void (*o_free)(void *) = (void (*)(void *))oracle_sym("gguf_free");
    void *(*o_empty)(void) = (void *(*)(void))oracle_sym("gguf_init_empty");
    void *(*o_ggml_init)(struct o_ggml_params) = (void *(*)(struct o_ggml_params))oracle_sym("ggml_init");
    void (*o_ggml_free)(void *) = (void (*)(void *))oracle_sym("ggml_free");
    void *(*o_new)(void *, int, int, const int64_t *) = (void *(*)(void *, int, int, const int64_t *))oracle_sym("ggml_new_tensor");
    void *(*o_name)(void *, const char *) = (void *(*)(void *, const char *))oracle_sym("ggml_set_name");
    void *(*o_data)(const void *) = (void *(*)(const void *))oracle_sym("ggml_get_data");
    void (*o_add)(void *, const void *) = (void (*)(void *, const void *))oracle_sym("gguf_add_tensor");
    bool (*o_write)(const void *, const char *, bool) = (bool (*)(const void *, const char *, bool))oracle_sym("gguf_write_to_file");
    void (*o_set_str)(void *, const char *, const char *) = (void (*)(void *, const char *, const char *))oracle_sym("gguf_set_val_str");
    if (!o_open || !o_free || !o_empty || !o_ggml_init || !o_new || !o_write) { fprintf(stderr, "oracle symbols missing\n"); return 1; }

    const char *def[] = { src_path("tests/data/stories260K/stories260K-f32.gguf") };
    int nf = argc > 1 ? argc - 1 : 1;
    const char **files = argc > 1 ? (const char **)argv + 1 : def;
    printf("| file | ours open+validate (ms) | ggml gguf_init_from_file (ms) | ours/ggml |\n|---|---|---|---|\n");
    for (int f = 0; f < nf; f++) {
        char err[512];
        int reps = 0;
        double t0 = now(), t_ours, t_ggml;
        do {
            iqf_gguf *g = iqf_gguf_open(files[f], err, sizeof err);
            if (!g) { fprintf(stderr, "%s\n", err); return 1; }
            iqf_gguf_close(g);
            reps++;
        } while (now() - t0 < 1.0);
        t_ours = (now() - t0) / reps;
        struct o_gguf_params op = { true, NULL };
        reps = 0;
        t0 = now();
        do {
            void *o = o_open(files[f], op);
            if (!o) { fprintf(stderr, "ggml cannot read %s\n", files[f]); return 1; }
            o_free(o);
            reps++;
        } while (now() - t0 < 1.0);
        t_ggml = (now() - t0) / reps;
        printf("| %s | %.3f | %.3f | %.2f |\n", strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f],
               1e3 * t_ours, 1e3 * t_ggml, t_ours / t_ggml);
    }

    /* Writer throughput. */
    const char *tmp = getenv("TMPDIR");
    char p_ours[512], p_ggml[512];
    snprintf(p_ours, sizeof p_ours, "%s/bench_gguf_ours.gguf", tmp && *tmp ? tmp : "/tmp");
    snprintf(p_ggml, sizeof p_ggml, "%s/bench_gguf_ggml.gguf", tmp && *tmp ? tmp : "/tmp");
    const int NT = 64;
    const int64_t ne[2] = { 1024, 1024 }; /* 4 MiB of f32 each */
    size_t tbytes = 1024 * 1024 * 4, total = tbytes * NT;
    size_t chunk = 1 << 20;
    uint8_t *buf = malloc(chunk);
    memset(buf, 0x3c, chunk);
    char err[512];
    double t0 = now();
    iqf_gguf_writer *w = iqf_gguf_writer_open(p_ours, err, sizeof err);
    if (!w) { fprintf(stderr, "%s\n", err); return 1; }
    iqf_gguf_writer_set_str(w, "general.architecture", "bench");
    for (int i = 0; i < NT; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        iqf_gguf_writer_add_tensor(w, name, 2, ne, IQF_TYPE_F32);
    }
    iqf_gguf_writer_write_header(w);
    for (size_t o = 0; o < total; o += chunk) iqf_gguf_writer_write_data(w, buf, chunk);
    if (iqf_gguf_writer_finish(w, err, sizeof err)) { fprintf(stderr, "%s\n", err); return 1; }
    double t_ours = now() - t0;

    struct o_ggml_params gp = { total + (size_t)NT * 1024 + (1 << 20), NULL, false };
    void *gctx = o_ggml_init(gp);
    void *ctx = o_empty();
    o_set_str(ctx, "general.architecture", "bench");
    for (int i = 0; i < NT; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        void *t = o_new(gctx, IQF_TYPE_F32, 2, ne);
        o_name(t, name);
        memset(o_data(t), 0x3c, tbytes);
        o_add(ctx, t);
    }
    t0 = now();
    if (!o_write(ctx, p_ggml, false)) { fprintf(stderr, "ggml write failed\n"); return 1; }
    double t_ggml = now() - t0;
    o_free(ctx);
    o_ggml_free(gctx);
    size_t n1, n2;
    uint8_t *f1 = read_file(p_ours, &n1), *f2 = read_file(p_ggml, &n2);
    bool same = f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1);
    free(f1);
    free(f2);
    unlink(p_ours);
    unlink(p_ggml);
    free(buf);
    printf("\n| writer, 256 MiB of tensor data | seconds | MiB/s |\n|---|---|---|\n");
    printf("| ours (1 MiB chunks, fsync + rename) | %.3f | %.0f |\n", t_ours, (double)total / 1048576.0 / t_ours);
    printf("| ggml gguf_write_to_file (from memory) | %.3f | %.0f |\n", t_ggml, (double)total / 1048576.0 / t_ggml);
    printf("ratio ours/ggml: %.2f; files byte-identical: %s\n", t_ours / t_ggml, same ? "yes" : "NO");
    return same ? 0 : 1;
}
