/*
 * bench_tokenizer.c - tokenizer speed against libllama's llama_tokenize (the oracle), same run.
 *   bench_tokenizer [TEXT]   (default: ../shared/data/wiki.test.raw)
 * Tokenizes the whole text with add_special=true (as llama-perplexity does) with each vocab in
 * tests/data (llama-spm, phi-3, gpt-2, stories260K), best of 3, and checks the ids are equal.
 */
#include "model/tokenizer.h"
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct { _Alignas(16) unsigned char b[256]; } params_buf; /* >= llama_model_params */
static void quiet(int l, const char *t, void *u) { (void)l; (void)t; (void)u; }

int main(int argc, char **argv) {
    const char *text_path = argc > 1 ? argv[1] : NULL;
    char def[4200];
    if (!text_path) {
        const char *sh = shared_dir();
        if (!sh) { fprintf(stderr, "usage: bench_tokenizer TEXT (no ../shared for the default)\n"); return 1; }
        snprintf(def, sizeof def, "%s/data/wiki.test.raw", sh);
        text_path = def;
    }
    size_t n;
    char *text = read_file(text_path, &n);
    if (!text) { fprintf(stderr, "cannot read %s\n", text_path); return 1; }

    /* libllama */
    char dir[4096], path[4600] = "";
    const char *od = getenv("IQF_ORACLE_DIR"), *home = getenv("HOME");
    if (od && *od) snprintf(dir, sizeof dir, "%s/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64", od);
    else snprintf(dir, sizeof dir, "%s/.cache/iqforge/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64", home ? home : "/root");
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (!strncmp(e->d_name, "libllama", 8) && strstr(e->d_name, ".so") && !strstr(e->d_name, "common"))
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        closedir(d);
    }
    void *h = path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h) { fprintf(stderr, "oracle libllama not found in %s (scripts/install-oracle.sh)\n", dir); return 1; }
    ((void (*)(void (*)(int, const char *, void *), void *))dlsym(h, "llama_log_set"))(quiet, NULL);
    ((void (*)(void))dlsym(h, "llama_backend_init"))();
    params_buf (*defp)(void) = (params_buf(*)(void))dlsym(h, "llama_model_default_params");
    void *(*load)(const char *, params_buf) = (void *(*)(const char *, params_buf))dlsym(h, "llama_model_load_from_file");
    void (*mfree)(void *) = (void (*)(void *))dlsym(h, "llama_model_free");
    const void *(*get_vocab)(const void *) = (const void *(*)(const void *))dlsym(h, "llama_model_get_vocab");
    int32_t (*ltok)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool) =
        (int32_t(*)(const void *, const char *, int32_t, int32_t *, int32_t, bool, bool))dlsym(h, "llama_tokenize");
    params_buf mp = defp();
    static const unsigned char expect[6] = { 0, 0, 1, 0, 0, 0 };
    if (memcmp(mp.b + 72, expect, 6) != 0) { fprintf(stderr, "unexpected llama_model_params layout\n"); return 1; }
    mp.b[72] = 1; /* vocab_only */

    static const char *const files[4] = { "tests/data/vocab/ggml-vocab-llama-spm.gguf", "tests/data/vocab/ggml-vocab-phi-3.gguf",
                                          "tests/data/vocab/ggml-vocab-gpt-2.gguf", "tests/data/stories260K/stories260K-f32.gguf" };
    int32_t *a = malloc(sizeof(int32_t) * (n + 16)), *b = malloc(sizeof(int32_t) * (n + 16));
    printf("text: %s (%zu bytes), add_special=true, best of 3\n\n", text_path, n);
    printf("| vocab | tokens | ours load (ms) | ours (s) | libllama (s) | ours MB/s | speed-up | ids equal |\n|---|---|---|---|---|---|---|---|\n");
    for (int f = 0; f < 4; f++) {
        char err[512];
        double t0 = now();
        iqf_gguf *g = iqf_gguf_open(src_path(files[f]), err, sizeof err);
        iqf_vocab *v = g ? iqf_vocab_load(g, err, sizeof err) : NULL;
        iqf_gguf_close(g);
        double t_load = now() - t0;
        if (!v) { fprintf(stderr, "%s\n", err); return 1; }
        void *model = load(src_path(files[f]), mp);
        if (!model) { fprintf(stderr, "libllama cannot load %s\n", files[f]); return 1; }
        double best_o = 1e9, best_l = 1e9;
        int32_t na = 0, nb = 0;
        for (int r = 0; r < 3; r++) {
            t0 = now();
            na = iqf_tokenize(v, text, n, true, a, (int32_t)n + 16);
            double t1 = now();
            nb = ltok(get_vocab(model), text, (int32_t)n, b, (int32_t)n + 16, true, false);
            double t2 = now();
            if (t1 - t0 < best_o) best_o = t1 - t0;
            if (t2 - t1 < best_l) best_l = t2 - t1;
        }
        bool eq = na == nb && na > 0 && memcmp(a, b, sizeof(int32_t) * (size_t)na) == 0;
        const char *name = strrchr(files[f], '/') + 1;
        printf("| %s | %d | %.1f | %.3f | %.3f | %.2f | %.1fx | %s |\n", name, na, t_load * 1e3, best_o, best_l,
               (double)n / best_o / 1e6, best_l / best_o, eq ? "yes" : "NO");
        iqf_vocab_free(v);
        mfree(model);
    }
    free(a); free(b); free(text);
    return 0;
}
