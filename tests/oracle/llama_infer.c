/* llama_infer.c - the oracle's libllama inference, loaded and called as llama_infer.h says. */
#include "llama_infer.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void li_quiet(int level, const char *text, void *ud) {
    (void)level;
    (void)ud;
    if (getenv("IQF_ORACLE_VERBOSE")) fputs(text, stderr);
}

li_api *li_load(void) {
    static li_api L;
    static bool tried;
    if (L.h) return &L;
    if (tried) return NULL;
    tried = true;
    if (!oracle_load()) return NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/libggml.v0.5.0.so", oracle_lib_dir());
    void *hg = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", oracle_lib_dir());
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!hg || !h) {
        fprintf(stderr, "libllama not loadable: %s\n", dlerror());
        return NULL;
    }
#define LI_SYM(f, n)                                                       \
    *(void **)&L.f = dlsym(h, n);                                          \
    if (!L.f) {                                                            \
        fprintf(stderr, "libllama: no symbol %s\n", n);                    \
        return NULL;                                                       \
    }
    LI_SYM(backend_init, "llama_backend_init")
    LI_SYM(model_default_params, "llama_model_default_params")
    LI_SYM(context_default_params, "llama_context_default_params")
    LI_SYM(model_load, "llama_model_load_from_file")
    LI_SYM(init_from_model, "llama_init_from_model")
    LI_SYM(model_get_vocab, "llama_model_get_vocab")
    LI_SYM(vocab_n_tokens, "llama_vocab_n_tokens")
    LI_SYM(batch_init, "llama_batch_init")
    LI_SYM(batch_free, "llama_batch_free")
    LI_SYM(decode, "llama_decode")
    LI_SYM(get_logits_ith, "llama_get_logits_ith")
    LI_SYM(get_memory, "llama_get_memory")
    LI_SYM(memory_clear, "llama_memory_clear")
    LI_SYM(free_ctx, "llama_free")
    LI_SYM(model_free, "llama_model_free")
    LI_SYM(log_set, "llama_log_set")
#undef LI_SYM
    L.log_set(li_quiet, NULL);
    void (*ggml_log_set)(void (*)(int, const char *, void *), void *) =
        (void (*)(void (*)(int, const char *, void *), void *))dlsym(hg, "ggml_log_set");
    if (ggml_log_set) ggml_log_set(li_quiet, NULL);
    void (*load_all)(const char *) = (void (*)(const char *))dlsym(hg, "ggml_backend_load_all_from_path");
    if (load_all) load_all(oracle_lib_dir());
    L.backend_init();
    L.h = h;
    return &L;
}

bool li_open(li_run *r, const char *path, int n_ctx, int threads, bool f32_kv) {
    memset(r, 0, sizeof *r);
    r->L = li_load();
    if (!r->L) return false;
    r->model = r->L->model_load(path, r->L->model_default_params());
    if (!r->model) {
        fprintf(stderr, "libllama could not load %s\n", path);
        return false;
    }
    li_big cp = r->L->context_default_params();
    uint32_t *u = (uint32_t *)cp.b;
    int32_t *s = (int32_t *)cp.b;
    if (u[0] != 512 || u[1] != 2048 || u[7] != u[8] || u[7] < 1 || s[13] != -1 || u[26] != 1 || u[27] != 1) {
        fprintf(stderr, "unexpected llama_context_params layout\n");
        r->L->model_free(r->model);
        return false;
    }
    u[0] = u[1] = u[2] = (uint32_t)n_ctx;
    s[7] = s[8] = threads;
    if (f32_kv) {
        s[13] = 0;         /* LLAMA_FLASH_ATTN_TYPE_DISABLED */
        u[26] = u[27] = 0; /* GGML_TYPE_F32 */
    }
    r->ctx = r->L->init_from_model(r->model, cp);
    if (!r->ctx) {
        fprintf(stderr, "libllama: context failed\n");
        r->L->model_free(r->model);
        return false;
    }
    r->n_vocab = r->L->vocab_n_tokens(r->L->model_get_vocab(r->model));
    r->n_ctx = n_ctx;
    r->b = r->L->batch_init(n_ctx, 0, 1);
    return true;
}

void li_close(li_run *r) {
    if (!r->L) return;
    if (r->ctx) {
        r->L->batch_free(r->b);
        r->L->free_ctx(r->ctx);
    }
    if (r->model) r->L->model_free(r->model);
    memset(r, 0, sizeof *r);
}

void li_clear(li_run *r) { r->L->memory_clear(r->L->get_memory(r->ctx), true); }

bool li_decode(li_run *r, const int32_t *tok, int n, int pos, int first_out, float *out) {
    if (n > r->n_ctx) return false;
    r->b.n_tokens = n;
    for (int k = 0; k < n; k++) {
        r->b.token[k] = tok[k];
        r->b.pos[k] = pos + k;
        r->b.n_seq_id[k] = 1;
        r->b.seq_id[k][0] = 0;
        r->b.logits[k] = k >= first_out;
    }
    if (r->L->decode(r->ctx, r->b)) return false;
    if (out)
        for (int k = first_out; k < n; k++)
            memcpy(out + (size_t)(k - first_out) * (size_t)r->n_vocab, r->L->get_logits_ith(r->ctx, k),
                   sizeof(float) * (size_t)r->n_vocab);
    return true;
}
