/* gen_main.c - iqf-genmodel: writes the synthetic Mistral-shaped model and its imatrix.
 * usage: iqf-genmodel OUT.gguf [--scale S] [--layers N] [--type f16|bf16|f32] [--seed N]
 *                     [--tied] [--imatrix IM.gguf] [--imatrix-dat IM.dat] [--split N]
 *                     [--arch llama|qwen2|qwen3|mixtral|qwen3moe|gemma3|gpt-oss|deepseek2] [--experts N] [--experts-used K]
 *                     [--vocab VOCAB.gguf]
 * --split N: the model is written as OUT-00001-of-0000N.gguf ... (gguf-split parts; OUT without
 * its .gguf is the prefix) instead of OUT; with --from FILE, FILE is split instead of generating. */
#include "genmodel.h"
#include "gguf_split.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    iqf_genmodel_opts o = iqf_genmodel_default_opts();
    const char *out = NULL, *img = NULL, *imd = NULL;
    int split = 0;
    const char *from = NULL; /* --from FILE --split N: split an existing model instead */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool v = i + 1 < argc;
        if (!strcmp(a, "--scale") && v) o.scale = atoi(argv[++i]);
        else if (!strcmp(a, "--layers") && v) o.n_layer = atoi(argv[++i]);
        else if (!strcmp(a, "--seed") && v) o.seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--tied")) o.tied = true;
        else if (!strcmp(a, "--arch") && v) o.arch = argv[++i];
        else if (!strcmp(a, "--experts") && v) o.n_expert = atoi(argv[++i]);
        else if (!strcmp(a, "--experts-used") && v) o.n_expert_used = atoi(argv[++i]);
        else if (!strcmp(a, "--vocab") && v) o.vocab = argv[++i];
        else if (!strcmp(a, "--split") && v) split = atoi(argv[++i]);
        else if (!strcmp(a, "--from") && v) from = argv[++i];
        else if (!strcmp(a, "--imatrix") && v) img = argv[++i];
        else if (!strcmp(a, "--imatrix-dat") && v) imd = argv[++i];
        else if (!strcmp(a, "--type") && v) {
            o.type = iqf_type_from_name(argv[++i]);
        } else if (a[0] != '-' && !out) out = a;
        else {
            fprintf(stderr, "usage: iqf-genmodel OUT.gguf [--scale S] [--layers N] [--type f16|bf16|f32] "
                            "[--seed N] [--tied] [--imatrix IM.gguf] [--imatrix-dat IM.dat] "
                            "[--arch llama|qwen2|qwen3|mixtral|qwen3moe|gemma3|gpt-oss|deepseek2] [--experts N] [--experts-used K] [--vocab V.gguf]\n");
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "iqf-genmodel: missing output path\n");
        return 2;
    }
    char err[512];
    if (from) {
        size_t n = strlen(out);
        if (n > 5 && !strcmp(out + n - 5, ".gguf")) n -= 5;
        char prefix[1024];
        snprintf(prefix, sizeof prefix, "%.*s", (int)n, out);
        if (split < 1 || gsplit_write(from, prefix, split, err, sizeof err) != IQF_OK) {
            fprintf(stderr, "iqf-genmodel: split %s: %s\n", from, split < 1 ? "--from needs --split N" : err);
            return 1;
        }
        return 0;
    }
    if (iqf_genmodel_write(&o, out, img, imd, err, sizeof err) != IQF_OK) {
        fprintf(stderr, "iqf-genmodel: %s\n", err);
        return 1;
    }
    if (split > 0) {
        char prefix[1024];
        size_t n = strlen(out);
        if (n > 5 && !strcmp(out + n - 5, ".gguf")) n -= 5;
        snprintf(prefix, sizeof prefix, "%.*s", (int)n, out);
        if (gsplit_write(out, prefix, split, err, sizeof err) != IQF_OK) {
            fprintf(stderr, "iqf-genmodel: split: %s\n", err);
            return 1;
        }
        remove(out);
    }
    return 0;
}
