/* llama_oracle.c - the oracle's llama_model_quantize, loaded and called as llama_oracle.h says. */
#include "llama_oracle.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void lo_quiet_log(int level, const char *text, void *ud) {
    (void)level;
    (void)ud;
    if (getenv("IQF_ORACLE_VERBOSE")) fputs(text, stderr);
}

lo_api *lo_load(void) {
    static lo_api api;
    static bool tried;
    if (api.h) return &api;
    if (tried) return NULL;
    tried = true;
    if (!oracle_load()) return NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/libllama.v0.5.0.so", oracle_lib_dir());
    api.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!api.h) {
        snprintf(path, sizeof path, "%s/libllama.so", oracle_lib_dir());
        api.h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!api.h) {
        fprintf(stderr, "libllama not loadable: %s\n", dlerror());
        return NULL;
    }
    *(void **)&api.backend_init = dlsym(api.h, "llama_backend_init");
    *(void **)&api.default_params = dlsym(api.h, "llama_model_quantize_default_params");
    *(void **)&api.quantize = dlsym(api.h, "llama_model_quantize");
    *(void **)&api.log_set = dlsym(api.h, "llama_log_set");
    if (!api.backend_init || !api.default_params || !api.quantize || !api.log_set) {
        fprintf(stderr, "libllama: missing symbols\n");
        api.h = NULL;
        return NULL;
    }
    api.log_set(lo_quiet_log, NULL);
    api.backend_init();
    return &api;
}

bool lo_check_layout(lo_api *api) {
    lo_quantize_params p = api->default_params();
    return p.nthread == 0 && p.ftype == 7 && p.output_tensor_type == 43 && p.token_embedding_type == 43 &&
           !p.allow_requantize && p.quantize_output_tensor && !p.only_copy && !p.pure && !p.keep_split &&
           !p.dry_run && !p.imatrix && !p.kv_overrides && !p.tt_overrides && !p.prune_layers &&
           p.max_buf_size == 8ull * 1024 * 1024 * 1024;
}

uint32_t lo_quantize(lo_api *api, const char *in, const char *out, const lo_opts *o) {
    lo_quantize_params p = api->default_params();
    p.ftype = o->ftype;
    p.nthread = o->nthread;
    if (o->output_tensor_type >= 0) p.output_tensor_type = o->output_tensor_type;
    if (o->token_embedding_type >= 0) p.token_embedding_type = o->token_embedding_type;
    p.quantize_output_tensor = !o->leave_output;
    p.pure = o->pure;
    p.allow_requantize = o->allow_requantize;
    p.keep_split = o->keep_split;
    struct lo_imatrix_data *id = NULL;
    struct lo_kv_override *kv = calloc((size_t)o->n_kvo + 5, sizeof *kv);
    struct lo_tensor_override *tt = NULL;
    int32_t *prune = NULL;
    int k = 0;
    for (; k < o->n_kvo; k++) {
        kv[k].tag = (int)o->kvo[k].tag;
        memcpy(kv[k].key, o->kvo[k].key, sizeof kv[k].key);
        kv[k].key[sizeof kv[k].key - 1] = 0;
        if (o->kvo[k].tag == IQF_KV_OVERRIDE_INT) kv[k].val_i64 = o->kvo[k].val_i64;
        else if (o->kvo[k].tag == IQF_KV_OVERRIDE_FLOAT) kv[k].val_f64 = o->kvo[k].val_f64;
        else if (o->kvo[k].tag == IQF_KV_OVERRIDE_BOOL) kv[k].val_bool = o->kvo[k].val_bool;
        else {
            memcpy(kv[k].val_str, o->kvo[k].val_str, sizeof kv[k].val_str);
            kv[k].val_str[sizeof kv[k].val_str - 1] = 0;
        }
    }
    if (k > 0) p.kv_overrides = kv;
    if (o->n_prune > 0) { /* -1 terminated */
        prune = calloc((size_t)o->n_prune + 1, sizeof *prune);
        for (int i = 0; i < o->n_prune; i++) prune[i] = o->prune[i];
        prune[o->n_prune] = -1;
        p.prune_layers = prune;
    }
    if (o->im && o->im->n_entries > 0) {
        id = calloc((size_t)o->im->n_entries + 1, sizeof *id);
        for (int i = 0; i < o->im->n_entries; i++) {
            id[i].name = o->im->entries[i].name;
            id[i].data = o->im->entries[i].values;
            id[i].size = (size_t)o->im->entries[i].n;
        }
        p.imatrix = id;
        kv[k].tag = 3;
        snprintf(kv[k].key, sizeof kv[k].key, "quantize.imatrix.file");
        snprintf(kv[k].val_str, sizeof kv[k].val_str, "%s", o->imatrix_path ? o->imatrix_path : "");
        k++;
        if (o->im->n_datasets > 0) {
            kv[k].tag = 3;
            snprintf(kv[k].key, sizeof kv[k].key, "quantize.imatrix.dataset");
            snprintf(kv[k].val_str, sizeof kv[k].val_str, "%s", o->im->datasets[0]);
            k++;
        }
        kv[k].tag = 0;
        snprintf(kv[k].key, sizeof kv[k].key, "quantize.imatrix.entries_count");
        kv[k].val_i64 = o->im->n_entries;
        k++;
        if (o->im->chunk_count > 0) {
            kv[k].tag = 0;
            snprintf(kv[k].key, sizeof kv[k].key, "quantize.imatrix.chunks_count");
            kv[k].val_i64 = o->im->chunk_count;
            k++;
        }
        kv[k].key[0] = 0;
        p.kv_overrides = kv;
    }
    if (o->n_tt > 0) {
        tt = calloc((size_t)o->n_tt + 1, sizeof *tt);
        for (int i = 0; i < o->n_tt; i++) {
            tt[i].pattern = o->tt_pat[i];
            tt[i].type = o->tt_type[i];
        }
        tt[o->n_tt].type = 43;
        p.tt_overrides = tt;
    }
    /* quantize.cpp: with --keep-split, an OUT containing ".gguf" loses its last 5 characters
     * and is the prefix llama_split_path numbers. */
    char outp[4096];
    snprintf(outp, sizeof outp, "%s", out);
    if (o->keep_split && strstr(outp, ".gguf") && strlen(outp) >= 5) outp[strlen(outp) - 5] = 0;
    uint32_t rc = api->quantize(in, outp, &p);
    free(id);
    free(tt);
    free(kv);
    free(prune);
    return rc;
}
