/*
 * bench_quantize.c - `iqforge quantize` against the oracle's llama_model_quantize (llama/ggml
 * 0.25.1) in the same run, same thread count: the generated Mistral-shaped model (full shapes,
 * 2 layers, F16, with its imatrix) to IQ3_XXS, IQ2_XS and Q4_K_M. Each quantization runs in a
 * forked child, so wall time, CPU time (user + system) and peak RSS (ru_maxrss from wait4) are
 * measured per run; the two outputs are compared byte for byte. On a loaded machine the CPU-time
 * ratio is the steadier figure; the goal (3x) is stated for wall time.
 *
 * usage: bench_quantize [--threads N] [--layers N] [--scale S] [--types IQ3_XXS,IQ2_XS,Q4_K_M]
 *                       [--dir DIR] [--reps N] [--arch ARCH [--experts N]]
 * --arch mixtral|qwen2|qwen3|qwen3moe: genmodel's model of that architecture instead
 * (e.g. --arch mixtral --experts 8: 3-D expert tensors of several GB at scale 1).
 * The model is generated once into DIR (default /tmp/iqf-bench-quantize) and reused.
 * Unknown arguments (BENCH_ARGS shared with other benchmarks) are ignored.
 */
#include "genmodel.h"
#include "ggufcmp.h"
#include "llama_oracle.h"

#include "util/progress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct result {
    double wall;
    double cpu; /* user + system seconds of the child */
    double rss_mb;
    int status;
} result;

static result run_child(bool oracle, const char *in, const char *out, const char *im_path, int ftype, int threads) {
    result r = { 0, 0, 0, -1 };
    double t0 = iqf_now();
    pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) {
        char err[1024] = "";
        if (oracle) {
            lo_api *api = lo_load();
            if (!api) _exit(77);
            iqf_imatrix im;
            if (iqf_imatrix_load(im_path, &im, err, sizeof err) != IQF_OK) _exit(3);
            lo_opts o;
            memset(&o, 0, sizeof o);
            o.ftype = ftype;
            o.nthread = threads;
            o.im = &im;
            o.imatrix_path = im_path;
            o.output_tensor_type = o.token_embedding_type = -1;
            _exit(lo_quantize(api, in, out, &o) == 0 ? 0 : 1);
        }
        iqf_model_quantize_params p = iqf_model_quantize_default_params();
        p.ftype = ftype;
        p.n_threads = threads;
        p.imatrix_path = im_path;
        p.quiet = true;
        iqf_status st = iqf_model_quantize(in, out, &p, NULL, NULL, err, sizeof err);
        if (st) fprintf(stderr, "iqforge: %s\n", err);
        _exit(st == IQF_OK ? 0 : 1);
    }
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return r;
    r.wall = iqf_now() - t0;
    r.rss_mb = (double)ru.ru_maxrss / 1024.0;
    r.cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
            1e-6 * (double)ru.ru_stime.tv_usec;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

static void warm(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return;
    static char buf[1 << 20];
    while (fread(buf, 1, sizeof buf, f) == sizeof buf) {
    }
    fclose(f);
}

int main(int argc, char **argv) {
    int threads = 2, layers = 2, scale = 1, reps = 1;
    const char *types = "IQ3_XXS,IQ2_XS,Q4_K_M";
    const char *dir = "/tmp/iqf-bench-quantize";
    const char *arch = NULL;
    int experts = 0;
    for (int i = 1; i < argc; i++) {
        bool v = i + 1 < argc;
        if (!strcmp(argv[i], "--threads") && v) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && v) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--scale") && v) scale = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--types") && v) types = argv[++i];
        else if (!strcmp(argv[i], "--dir") && v) dir = argv[++i];
        else if (!strcmp(argv[i], "--reps") && v) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--arch") && v) arch = argv[++i];
        else if (!strcmp(argv[i], "--experts") && v) experts = atoi(argv[++i]);
    }
    if (!oracle_load()) {
        fprintf(stderr, "bench_quantize: oracle not installed\n");
        return 77;
    }
    mkdir(dir, 0755);
    char model[1024], img[1024], ref[1024], got[1024];
    if (arch) {
        snprintf(model, sizeof model, "%s/%s-e%d-s%d-l%d-f16.gguf", dir, arch, experts, scale, layers);
        snprintf(img, sizeof img, "%s/%s-e%d-s%d-l%d.imatrix.gguf", dir, arch, experts, scale, layers);
    } else {
        snprintf(model, sizeof model, "%s/mistral-s%d-l%d-f16.gguf", dir, scale, layers);
        snprintf(img, sizeof img, "%s/mistral-s%d-l%d.imatrix.gguf", dir, scale, layers);
    }
    snprintf(ref, sizeof ref, "%s/out-oracle.gguf", dir);
    snprintf(got, sizeof got, "%s/out-iqforge.gguf", dir);
    struct stat st;
    if (stat(model, &st) != 0 || stat(img, &st) != 0) {
        iqf_genmodel_opts o = iqf_genmodel_default_opts();
        o.scale = scale;
        o.n_layer = layers;
        if (arch) o.arch = arch;
        if (experts > 0) o.n_expert = experts;
        char err[512];
        double t0 = iqf_now();
        if (iqf_genmodel_write(&o, model, img, NULL, err, sizeof err) != IQF_OK) {
            fprintf(stderr, "bench_quantize: %s\n", err);
            return 1;
        }
        fprintf(stderr, "generated %s in %.1f s\n", model, iqf_now() - t0);
    }
    stat(model, &st);
    printf("model: %s (%.0f MiB, F16, %s, Mistral-7B widths / %d, %d layers, %d experts), imatrix %s; %d threads each\n\n",
           model, (double)st.st_size / 1048576.0, arch ? arch : "llama", scale, layers, experts, img, threads);
    printf("| type | iqforge wall s | oracle wall s | wall speedup | iqforge CPU s | oracle CPU s | CPU ratio | "
           "iqforge peak RSS MiB | oracle peak RSS MiB | identical |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    char list[256];
    snprintf(list, sizeof list, "%s", types);
    int rc = 0;
    for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int ftype = iqf_ftype_from_name(t);
        if (ftype < 0) {
            fprintf(stderr, "bench_quantize: unknown type %s\n", t);
            continue;
        }
        result best_i = { 1e30, 0, 0, 0 }, best_o = { 1e30, 0, 0, 0 };
        for (int k = 0; k < reps; k++) {
            warm(model);
            result a = run_child(false, model, got, img, ftype, threads);
            fprintf(stderr, "%s iqforge: %.2f s wall, %.2f s CPU, %.0f MiB peak RSS, status %d\n", t, a.wall, a.cpu,
                    a.rss_mb, a.status);
            warm(model);
            result b = run_child(true, model, ref, img, ftype, threads);
            fprintf(stderr, "%s oracle: %.2f s wall, %.2f s CPU, %.0f MiB peak RSS, status %d\n", t, b.wall, b.cpu,
                    b.rss_mb, b.status);
            if (a.status || b.status) {
                fprintf(stderr, "bench_quantize: %s failed (iqforge %d, oracle %d)\n", t, a.status, b.status);
                rc = 1;
            }
            if (a.wall < best_i.wall) best_i = a;
            if (b.wall < best_o.wall) best_o = b;
        }
        int d = gguf_compare(ref, got, t);
        printf("| %s | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx | %.0f | %.0f | %s |\n", t, best_i.wall, best_o.wall,
               best_o.wall / best_i.wall, best_i.cpu, best_o.cpu, best_o.cpu / best_i.cpu, best_i.rss_mb, best_o.rss_mb,
               d == 0 ? "yes" : "NO");
        fflush(stdout);
        if (d != 0) rc = 1;
        unlink(ref);
        unlink(got);
    }
    return rc;
}
