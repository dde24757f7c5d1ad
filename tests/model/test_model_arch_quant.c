/*
 * test_model_arch_quant.c - recipe parity for the other architectures: `iqforge quantize`
 * (iqf_model_quantize, compat) against the oracle's llama_model_quantize (llama/ggml 0.25.1) on
 * random-weight qwen2, qwen3, Mixtral-style llama MoE and qwen3moe models from iqf-genmodel
 * (F16, 2 layers, scale 1/16: n_embd 256, n_ff 896, so ffn_down of the dense and Mixtral models
 * takes llama-quantize's shape fallbacks; MoE: 8 experts, 2 used, 3-D expert tensors quantized
 * per expert; qwen3moe experts 256 wide) with the per-expert imatrix genmodel writes. For every
 * file type: the same tensor types, bytes and metadata (whole-file comparison, tests/gen/ggufcmp.h).
 * Under CI=true every file type of llama-quantize's list runs; locally a subset (IQF_FULL_TESTS=1
 * for all); under IQF_SANITIZED one (IQ3_XXS) per architecture. Needs the oracle (skips locally without it, fails under CI=true).
 */
#include "genmodel.h"
#include "ggufcmp.h"
#include "llama_oracle.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const all_ftypes[] = {
    "IQ3_XXS", "Q4_K_M", "Q2_K",   "IQ2_XS", "Q3_K_M", "Q5_K_M", "IQ1_S",  "IQ1_M",  "IQ2_XXS", "IQ2_S",
    "IQ2_M",   "IQ3_XS", "IQ3_S",  "IQ3_M",  "IQ4_NL", "IQ4_XS", "Q2_K_S", "Q3_K_S", "Q3_K_L",  "Q4_K_S",
    "Q5_K_S",  "Q6_K",   "Q8_0",   "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",
};

static int compare(lo_api *api, const char *model, const char *imatrix, int ftype, const char *label,
                   const char *ref, const char *got) {
    char err[1024] = "";
    iqf_imatrix im;
    memset(&im, 0, sizeof im);
    if (iqf_imatrix_load(imatrix, &im, err, sizeof err) != IQF_OK) {
        CHECK(0, "%s: imatrix: %s", label, err);
        return 1;
    }
    unlink(ref);
    unlink(got);
    iqf_model_quantize_params p = iqf_model_quantize_default_params();
    p.ftype = ftype;
    p.n_threads = 2;
    p.imatrix_path = imatrix;
    p.quiet = true;
    iqf_status st = iqf_model_quantize(model, got, &p, NULL, NULL, err, sizeof err);
    lo_opts o;
    memset(&o, 0, sizeof o);
    o.ftype = ftype;
    o.nthread = 2;
    o.im = &im;
    o.imatrix_path = imatrix;
    o.output_tensor_type = -1;
    o.token_embedding_type = -1;
    uint32_t orc = lo_quantize(api, model, ref, &o);
    iqf_imatrix_free(&im);
    CHECK(st == IQF_OK, "%s: iqforge failed: %s", label, err);
    CHECK(orc == 0, "%s: oracle failed (IQF_ORACLE_VERBOSE=1 shows its log)", label);
    if (st != IQF_OK || orc != 0) return 1;
    int d = gguf_compare(ref, got, label);
    CHECK(d == 0, "%s: %d differences from the oracle", label, d);
    unlink(ref);
    unlink(got);
    return d;
}

int main(void) {
    lo_api *api = lo_load();
    if (!api) {
        oracle_require();
        return 77;
    }
    CHECK(lo_check_layout(api), "llama_model_quantize_params layout");
    const bool all = tu_ci() || getenv("IQF_FULL_TESTS");
    const int n_ft = (int)(sizeof all_ftypes / sizeof all_ftypes[0]);
    const int n_run = getenv("IQF_SANITIZED") ? 1 : all ? n_ft : 4;
    static const char *const archs[] = { "qwen2", "qwen3", "mixtral", "qwen3moe" };
    const int pid = (int)getpid();
    for (int a = 0; a < 4; a++) {
        char model[128], img[128], ref[128], got[128], err[512];
        snprintf(model, sizeof model, "/tmp/iqf_test_archq_%d_%s.gguf", pid, archs[a]);
        snprintf(img, sizeof img, "/tmp/iqf_test_archq_%d_%s-imatrix.gguf", pid, archs[a]);
        snprintf(ref, sizeof ref, "/tmp/iqf_test_archq_%d_ref.gguf", pid);
        snprintf(got, sizeof got, "/tmp/iqf_test_archq_%d_got.gguf", pid);
        iqf_genmodel_opts o = iqf_genmodel_default_opts();
        o.arch = archs[a];
        o.scale = 16;
        o.n_layer = 2;
        o.seed = 7 + (uint64_t)a;
        o.tied = a == 1; /* qwen3 with tied embeddings */
        o.vocab = src_path(a == 2 ? "tests/data/vocab/ggml-vocab-llama-spm.gguf" : "tests/data/vocab/ggml-vocab-gpt-2.gguf");
        if (iqf_genmodel_write(&o, model, img, NULL, err, sizeof err) != IQF_OK) {
            CHECK(0, "%s: genmodel: %s", archs[a], err);
            continue;
        }
        int ok = 0;
        for (int i = 0; i < n_run; i++) {
            char label[64];
            snprintf(label, sizeof label, "%s %s", archs[a], all_ftypes[i]);
            const int d = compare(api, model, img, iqf_ftype_from_name(all_ftypes[i]), label, ref, got);
            fprintf(stderr, "%s: %s\n", label, d == 0 ? "identical" : "DIFFERS");
            ok += d == 0;
        }
        printf("%-8s: %d of %d file types identical to llama_model_quantize's files\n", archs[a], ok, n_run);
        remove(model);
        remove(img);
    }
    return test_finish("test_model_arch_quant");
}
