#include "oracle.h"
#include "testutil.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ggml_init_params_o { size_t mem_size; void *mem_buffer; bool no_alloc; };
struct ggml_type_traits_o {
    const char *type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    void (*to_float)(const void *x, float *y, int64_t k);
    void (*from_float_ref)(const float *x, void *y, int64_t k);
};

static void *h_base;
static char lib_dir[4096];
static void *(*p_init)(struct ggml_init_params_o);
static size_t (*p_quantize_chunk)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);
static const struct ggml_type_traits_o *(*p_traits)(int);
static bool (*p_validate)(int, const void *, size_t);
static bool (*p_requires_imatrix)(int);
static const char *load_error;
void *oracle_ggml_ctx;

static const char *lib_path(void) {
    static char path[4096];
    const char *lib = getenv("IQF_ORACLE_LIB");
    if (lib && *lib) {
        snprintf(path, sizeof path, "%s", lib);
    } else {
        const char *dir = getenv("IQF_ORACLE_DIR");
        static char def[2048];
        if (!dir || !*dir) {
            const char *home = getenv("HOME");
            snprintf(def, sizeof def, "%s/.cache/iqforge/oracle", home ? home : "/root");
            dir = def;
        }
        snprintf(path, sizeof path, "%s/node_modules/@node-llama-cpp/" ORACLE_PLATFORM "/bins/" ORACLE_PLATFORM "/libggml-base.so",
                 dir);
    }
    snprintf(lib_dir, sizeof lib_dir, "%s", path);
    char *slash = strrchr(lib_dir, '/');
    if (slash) *slash = 0;
    return path;
}

bool oracle_load(void) {
    if (h_base) return true;
    if (load_error) return false;
    const char *path = lib_path();
    h_base = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h_base) { load_error = dlerror(); return false; }
    p_init = (void *(*)(struct ggml_init_params_o))dlsym(h_base, "ggml_init");
    p_quantize_chunk = dlsym(h_base, "ggml_quantize_chunk");
    p_traits = dlsym(h_base, "ggml_get_type_traits");
    p_validate = dlsym(h_base, "ggml_validate_row_data");
    p_requires_imatrix = dlsym(h_base, "ggml_quantize_requires_imatrix");
    if (!p_init || !p_quantize_chunk || !p_traits || !p_validate || !p_requires_imatrix) {
        load_error = "missing symbols in libggml-base.so";
        dlclose(h_base);
        h_base = NULL;
        return false;
    }
    /* ggml_init fills the fp16 table that to_float needs; a small context is enough. */
    struct ggml_init_params_o ip = { 1024 * 1024, NULL, false };
    /* Kept in a global so it stays reachable: the oracle context lives for the whole test. */
    oracle_ggml_ctx = p_init(ip);
    if (!oracle_ggml_ctx) { load_error = "ggml_init failed"; return false; }
    return true;
}

void oracle_require(void) {
    if (oracle_load()) return;
    fprintf(stderr, "oracle not available (%s): %s\n", lib_path(), load_error ? load_error : "?");
    if (tu_ci()) {
        fprintf(stderr, "CI=%s: a missing oracle is a failure (run scripts/install-oracle.sh)\n", getenv("CI"));
        exit(1);
    }
    fprintf(stderr, "skipping differential test (run scripts/install-oracle.sh)\n");
    exit(77);
}

const char *oracle_lib_dir(void) { oracle_load(); return lib_dir; }

size_t oracle_quantize(int type, const float *src, void *dst, int64_t nrows, int64_t ncols,
                       const float *imatrix) {
    return p_quantize_chunk(type, src, dst, 0, nrows, ncols, imatrix);
}

void oracle_dequantize(int type, const void *src, float *dst, int64_t n) {
    p_traits(type)->to_float(src, dst, n);
}

bool oracle_validate(int type, const void *data, size_t nbytes) { return p_validate(type, data, nbytes); }
bool oracle_requires_imatrix(int type) { return p_requires_imatrix(type); }
const char *oracle_type_name(int type) { return p_traits(type)->type_name; }
int64_t oracle_blck_size(int type) { return p_traits(type)->blck_size; }
size_t oracle_type_size(int type) { return p_traits(type)->type_size; }
void *oracle_sym(const char *name) { return h_base ? dlsym(h_base, name) : NULL; }
