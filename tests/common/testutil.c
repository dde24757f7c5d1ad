#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

int tu_passed, tu_failed;

int test_finish(const char *name) {
    printf("%s: %d passed, %d failed\n", name, tu_passed, tu_failed);
    return (tu_failed == 0 && tu_passed > 0) ? 0 : 1;
}

const char *src_path(const char *rel) {
    static char bufs[8][4096];
    static int slot;
    char *b = bufs[slot++ & 7];
    const char *root = getenv("IQF_SOURCE_DIR");
    snprintf(b, 4096, "%s/%s", root && *root ? root : ".", rel);
    return b;
}

const char *shared_dir(void) {
    static char b[4096];
    const char *env = getenv("IQF_SHARED_DIR");
    if (env && *env) snprintf(b, sizeof b, "%s", env);
    else snprintf(b, sizeof b, "%s", src_path("../shared"));
    struct stat st;
    return stat(b, &st) == 0 && S_ISDIR(st.st_mode) ? b : NULL;
}

void *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    /* One byte more, always NUL: text files can be searched with strstr. */
    char *buf = malloc(sz > 0 ? (size_t)sz + 1 : 1);
    if (buf && sz > 0 && fread(buf, 1, (size_t)sz, f) != (size_t)sz) { free(buf); buf = NULL; }
    if (buf) buf[sz > 0 ? sz : 0] = 0;
    fclose(f);
    if (buf && n) *n = (size_t)sz;
    return buf;
}

bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

uint64_t tu_next(tu_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double tu_uniform(tu_rng *r) { return ((double)(tu_next(r) >> 11) + 0.5) * 0x1.0p-53; }

double tu_normal(tu_rng *r) {
    double u1 = tu_uniform(r), u2 = tu_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* CI is on for any value but "", "0", "false" and "no" (CI=true, CI=1, CI=yes ...). */
bool tu_ci(void) {
    const char *ci = getenv("CI");
    return ci && *ci && strcmp(ci, "0") && strcasecmp(ci, "false") && strcasecmp(ci, "no");
}

char *tu_tool_path(char *buf, size_t n, const char *name) {
    const char *cli = getenv("IQF_CLI");
    snprintf(buf, n, "%s", cli && *cli ? cli : "./iqforge");
    char *slash = strrchr(buf, '/');
    if (slash) snprintf(slash + 1, n - (size_t)(slash + 1 - buf), "%s", name);
    else snprintf(buf, n, "./%s", name);
    return buf;
}

iqf_status tu_context_simd(const iqf_model *m, int n_ctx, int threads, iqf_simd simd, iqf_context **c,
                           char *err, size_t errlen) {
    iqf_context_params p = iqf_context_default_params();
    p.n_ctx = n_ctx;
    p.n_threads = threads;
    p.simd = simd;
    return iqf_context_new_ex(m, &p, c, err, errlen);
}

bool tu_write_small_llama(const char *path, const tu_small_llama *spec) {
    enum { E = 256, F = 512, L = 2, V = 300 };
    char err[256];
    iqf_gguf_writer *w = iqf_gguf_writer_open(path, err, sizeof err);
    if (!w) return false;
    iqf_gguf_writer_set_str(w, "general.architecture", "llama");
    iqf_gguf_writer_set_u32(w, "llama.embedding_length", E);
    iqf_gguf_writer_set_u32(w, "llama.block_count", L);
    iqf_gguf_writer_set_u32(w, "llama.feed_forward_length", F);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count", 4);
    iqf_gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2);
    iqf_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    static const struct { const char *name; int ne0, ne1; } layer[9] = {
        { "attn_norm", E, 1 }, { "attn_q", E, E }, { "attn_k", E, E / 2 }, { "attn_v", E, E / 2 },
        { "attn_output", E, E }, { "ffn_norm", E, 1 }, { "ffn_gate", E, F }, { "ffn_up", E, F },
        { "ffn_down", F, E },
    };
    struct { char name[64]; int64_t ne0, ne1; int ty; } t[3 + 9 * L];
    int n = 0, k = spec->first;
    snprintf(t[n].name, 64, "token_embd.weight");
    t[n].ne0 = E, t[n].ne1 = V, t[n].ty = spec->tok_embd_type, n++;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 9; j++, n++) {
            snprintf(t[n].name, 64, "blk.%d.%s.weight", l, layer[j].name);
            t[n].ne0 = layer[j].ne0, t[n].ne1 = layer[j].ne1;
            t[n].ty = layer[j].ne1 == 1 ? IQF_TYPE_F32 : spec->mats[(k++) % spec->n_mats];
        }
    snprintf(t[n].name, 64, "output_norm.weight");
    t[n].ne0 = E, t[n].ne1 = 1, t[n].ty = IQF_TYPE_F32, n++;
    snprintf(t[n].name, 64, "output.weight");
    t[n].ne0 = E, t[n].ne1 = V, t[n].ty = spec->output_type, n++;
    for (int i = 0; i < n; i++) {
        int64_t ne[2] = { t[i].ne0, t[i].ne1 };
        iqf_gguf_writer_add_tensor(w, t[i].name, t[i].ne1 > 1 ? 2 : 1, ne, t[i].ty);
    }
    iqf_gguf_writer_write_header(w);
    float im[F];
    for (int i = 0; i < F; i++) im[i] = 1;
    tu_rng r = { 5 };
    bool ok = true;
    for (int i = 0; i < n; i++) {
        int64_t cnt = t[i].ne0 * t[i].ne1;
        float *f = malloc(sizeof(float) * (size_t)cnt);
        size_t bytes = iqf_row_size(t[i].ty, t[i].ne0) * (size_t)t[i].ne1;
        void *q = malloc(bytes);
        if (!f || !q) {
            free(f);
            free(q);
            iqf_gguf_writer_abort(w);
            return false;
        }
        for (int64_t j = 0; j < cnt; j++)
            f[j] = t[i].ne1 == 1 ? 1.0f : (float)(tu_normal(&r) * (i == 0 ? 1.0 : 0.06));
        ok &= iqf_quantize(t[i].ty, f, q, t[i].ne1, t[i].ne0, spec->unit_imatrix ? im : NULL, NULL, NULL, 0) == IQF_OK;
        iqf_gguf_writer_write_data(w, q, bytes);
        free(f);
        free(q);
    }
    return iqf_gguf_writer_finish(w, err, sizeof err) == IQF_OK && ok;
}
