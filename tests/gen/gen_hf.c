/* gen_hf.c - iqf-genhf: a llama-architecture GGUF (e.g. iqf-genmodel's Mistral-7B-shaped model,
 * --type bf16 --layers 32) written back as a Hugging Face checkpoint: sharded safetensors
 * (model-0000k-of-0000n.safetensors, at most --shard-mib MiB each, default 4768 = 5 GB as
 * transformers' save_pretrained), model.safetensors.index.json, a MistralForCausalLM config.json
 * and the tokenizer files of --tokenizer DIR (tokenizer.json, tokenizer_config.json; e.g. the
 * llama2 tokenizer of tests/cli/convert_hfref.sh, 32000 tokens). Tensor names are the converter's
 * in reverse, and the q/k rows are un-permuted, so `iqforge convert` gives back the GGUF's tensors.
 * For the memory and speed figures of docs/PERFORMANCE.md (issue 24), not a test fixture.
 * usage: iqf-genhf IN.gguf OUT_DIR --tokenizer DIR [--shard-mib N] */
#include "iqforge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int die(const char *m, const char *a) {
    fprintf(stderr, "iqf-genhf: %s%s%s\n", m, a ? ": " : "", a ? a : "");
    return 1;
}

/* GGUF name -> HF name; false if unknown. */
static bool hf_name(const char *g, char *out, size_t cap) {
    static const char *const glob[][2] = { { "token_embd.weight", "model.embed_tokens.weight" },
                                           { "output_norm.weight", "model.norm.weight" },
                                           { "output.weight", "lm_head.weight" } };
    static const char *const lay[][2] = {
        { "attn_norm.weight", "input_layernorm.weight" },     { "ffn_norm.weight", "post_attention_layernorm.weight" },
        { "attn_q.weight", "self_attn.q_proj.weight" },       { "attn_k.weight", "self_attn.k_proj.weight" },
        { "attn_v.weight", "self_attn.v_proj.weight" },       { "attn_output.weight", "self_attn.o_proj.weight" },
        { "ffn_gate.weight", "mlp.gate_proj.weight" },        { "ffn_up.weight", "mlp.up_proj.weight" },
        { "ffn_down.weight", "mlp.down_proj.weight" } };
    for (size_t i = 0; i < sizeof glob / sizeof glob[0]; i++)
        if (!strcmp(g, glob[i][0])) return snprintf(out, cap, "%s", glob[i][1]) > 0;
    int l, n = 0;
    if (sscanf(g, "blk.%d.%n", &l, &n) != 1 || n == 0) return false;
    for (size_t i = 0; i < sizeof lay / sizeof lay[0]; i++)
        if (!strcmp(g + n, lay[i][0])) return snprintf(out, cap, "model.layers.%d.%s", l, lay[i][1]) > 0;
    return false;
}

static const char *st_dtype(int type) {
    return type == IQF_TYPE_BF16 ? "BF16" : type == IQF_TYPE_F16 ? "F16" : type == IQF_TYPE_F32 ? "F32" : NULL;
}

static int64_t geti(const iqf_gguf *g, const char *k, int64_t def) {
    int64_t v;
    return iqf_gguf_get_int(g, k, &v) ? v : def;
}

/* Row r of the HF tensor from the GGUF one: the converter's permute(w, n_head) maps HF row
 * (h, j, i) (j < 2, i < hd/2) to GGUF row (h, i, j); its inverse here. */
static int64_t src_row(int64_t r, int64_t nrows, int n_head) {
    if (n_head <= 0) return r;
    const int64_t hd = nrows / n_head, h = r / hd, j = (r % hd) / (hd / 2), i = r % (hd / 2);
    return h * hd + i * 2 + j;
}

static bool copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = a ? fopen(to, "wb") : NULL;
    char buf[1 << 16];
    size_t n;
    bool ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b && fclose(b)) ok = false;
    return ok;
}

int main(int argc, char **argv) {
    const char *in = NULL, *dir = NULL, *tok = NULL;
    long long shard_mib = 4768;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc) tok = argv[++i];
        else if (!strcmp(argv[i], "--shard-mib") && i + 1 < argc) shard_mib = atoll(argv[++i]);
        else if (!in) in = argv[i];
        else if (!dir) dir = argv[i];
        else return die("usage: iqf-genhf IN.gguf OUT_DIR --tokenizer DIR [--shard-mib N]", NULL);
    }
    if (!in || !dir || !tok || shard_mib < 1) return die("usage: iqf-genhf IN.gguf OUT_DIR --tokenizer DIR [--shard-mib N]", NULL);
    char err[1024];
    iqf_gguf *g = iqf_gguf_open(in, err, sizeof err);
    if (!g) return die(err, NULL);
    const int64_t nt = iqf_gguf_n_tensors(g);
    const int n_head = (int)geti(g, "llama.attention.head_count", 32), n_kv = (int)geti(g, "llama.attention.head_count_kv", 8);
    if (mkdir(dir, 0755) && errno != EEXIST) return die("cannot create", dir);
    /* shards: tensors in file order, a new shard when the next would pass the limit */
    int *shard = calloc((size_t)nt, sizeof *shard);
    int n_shard = 1;
    uint64_t fill = 0, limit = (uint64_t)shard_mib << 20;
    for (int64_t i = 0; i < nt; i++) {
        const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
        char nm[256];
        if (!st_dtype(t->type) || !hf_name(t->name, nm, sizeof nm) || t->n_dims > 2) return die("tensor not supported", t->name);
        if (fill && fill + t->nbytes > limit) n_shard++, fill = 0;
        fill += t->nbytes;
        shard[i] = n_shard;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    FILE *ix = fopen(path, "w");
    if (!ix) return die("cannot write", path);
    uint64_t total = 0;
    for (int64_t i = 0; i < nt; i++) total += iqf_gguf_tensor_at(g, i)->nbytes;
    fprintf(ix, "{\n  \"metadata\": {\n    \"total_size\": %" PRIu64 "\n  },\n  \"weight_map\": {", total);
    for (int s = 1; s <= n_shard; s++) {
        /* the header: names, dtypes, shapes, offsets; padded with spaces to 8 bytes */
        size_t cap = 1 << 20, len = 0;
        char *h = malloc(cap);
        len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
        uint64_t off = 0;
        for (int64_t i = 0; i < nt; i++) {
            if (shard[i] != s) continue;
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            char nm[256], shape[64];
            hf_name(t->name, nm, sizeof nm);
            if (t->n_dims == 1) snprintf(shape, sizeof shape, "%" PRId64, t->ne[0]);
            else snprintf(shape, sizeof shape, "%" PRId64 ",%" PRId64, t->ne[1], t->ne[0]);
            len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                    nm, st_dtype(t->type), shape, off, off + t->nbytes);
            off += t->nbytes;
            fprintf(ix, "%s\n    \"%s\": \"model-%05d-of-%05d.safetensors\"", i ? "," : "", nm, s, n_shard);
            if (len + 1024 > cap) return die("header too long", NULL);
        }
        h[len++] = '}';
        while (len % 8) h[len++] = ' ';
        snprintf(path, sizeof path, "%s/model-%05d-of-%05d.safetensors", dir, s, n_shard);
        FILE *f = fopen(path, "wb");
        if (!f) return die("cannot write", path);
        uint8_t l8[8];
        for (int k = 0; k < 8; k++) l8[k] = (uint8_t)((uint64_t)len >> (8 * k));
        bool ok = fwrite(l8, 1, 8, f) == 8 && fwrite(h, 1, len, f) == len;
        free(h);
        for (int64_t i = 0; ok && i < nt; i++) {
            if (shard[i] != s) continue;
            const iqf_gguf_tensor *t = iqf_gguf_tensor_at(g, i);
            const int perm = strstr(t->name, "attn_q.weight") ? n_head : strstr(t->name, "attn_k.weight") ? n_kv : 0;
            const int64_t nrows = t->ne[1];
            const size_t rb = t->nbytes / (size_t)nrows;
            for (int64_t r = 0; ok && r < nrows; r++)
                ok = fwrite((const uint8_t *)t->data + (size_t)src_row(r, nrows, perm) * rb, 1, rb, f) == rb;
        }
        if (fclose(f) || !ok) return die("write error", path);
    }
    fprintf(ix, "\n  }\n}\n");
    if (fclose(ix)) return die("write error", "index");
    const iqf_gguf_tensor *emb = iqf_gguf_tensor_at(g, iqf_gguf_find_tensor(g, "token_embd.weight"));
    double base = 1e6, eps = 1e-5;
    iqf_gguf_get_float(g, "llama.rope.freq_base", &base);
    iqf_gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", &eps);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *c = fopen(path, "w");
    if (!c || !emb) return die("cannot write", path);
    fprintf(c,
            "{\n  \"architectures\": [\"MistralForCausalLM\"],\n  \"bos_token_id\": 1,\n  \"eos_token_id\": 2,\n"
            "  \"hidden_size\": %" PRId64 ",\n  \"intermediate_size\": %" PRId64 ",\n  \"max_position_embeddings\": 32768,\n"
            "  \"model_type\": \"mistral\",\n  \"num_attention_heads\": %d,\n  \"num_hidden_layers\": %" PRId64 ",\n"
            "  \"num_key_value_heads\": %d,\n  \"rms_norm_eps\": %g,\n  \"rope_theta\": %.1f,\n  \"sliding_window\": null,\n"
            "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"bfloat16\",\n  \"vocab_size\": %" PRId64 "\n}\n",
            emb->ne[0], geti(g, "llama.feed_forward_length", 14336), n_head, geti(g, "llama.block_count", 32), n_kv, eps, base,
            iqf_gguf_find_tensor(g, "output.weight") < 0 ? "true" : "false", emb->ne[1]);
    if (fclose(c)) return die("write error", path);
    const char *tf[] = { "tokenizer.json", "tokenizer_config.json" };
    for (int k = 0; k < 2; k++) {
        char from[4096];
        snprintf(from, sizeof from, "%s/%s", tok, tf[k]);
        snprintf(path, sizeof path, "%s/%s", dir, tf[k]);
        if (!copy_file(from, path)) return die("cannot copy", from);
    }
    printf("iqf-genhf: %s -> %s: %" PRId64 " tensors, %" PRIu64 " bytes in %d shards\n", in, dir, nt, total, n_shard);
    free(shard);
    iqf_gguf_close(g);
    return 0;
}
