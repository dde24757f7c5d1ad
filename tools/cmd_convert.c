/*
 * cmd_convert.c - `iqforge convert HF_DIR [OUT.gguf] [--outtype T]`: a Hugging Face checkpoint to
 * the GGUF file llama.cpp's convert_hf_to_gguf.py writes from it, with no Python (src/convert).
 * Errors: one line "FILE: what is wrong", exit 1, nothing written.
 */
#include "cli.h"

#include "iqforge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: iqforge convert HF_DIR [OUT.gguf] [--outtype f32|f16|bf16|q8_0|auto]\n\n"
            "Converts a Hugging Face checkpoint directory (config.json, model*.safetensors or a sharded\n"
            "model.safetensors.index.json, tokenizer.json, tokenizer_config.json) to the GGUF file\n"
            "llama.cpp's convert_hf_to_gguf.py writes from it: the same keys, values and order, the same\n"
            "tensor names, order, types, shapes and data. Tensors are read from the mapped files and\n"
            "written one at a time (memory does not grow with the model).\n\n"
            "Architectures: LlamaForCausalLM (Llama 3 rope_freqs), MistralForCausalLM, MixtralForCausalLM,\n"
            "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, Gemma3ForCausalLM,\n"
            "GptOssForCausalLM (unquantized), DeepseekV2/V3ForCausalLM. Tokenizers: tokenizer.json BPE\n"
            "(Llama 2 style with byte fallback, or GPT-2 style with a recognised pre-tokenizer).\n\n"
            "  OUT.gguf         output file (default: HF_DIR-OUTTYPE.gguf beside the directory)\n"
            "  --outtype T      f32, f16, bf16, q8_0, or auto (default: F16 if the first tensor is F16,\n"
            "                   else BF16, as the converter's auto)\n");
}

int cmd_convert(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    iqf_convert_outtype ot = IQF_CONVERT_AUTO;
    const char *ots = "auto";
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (cli_is_help(s)) {
            usage(stdout);
            return 0;
        } else if (!strcmp(s, "--outtype")) {
            if (++i >= argc) return cli_error("convert: --outtype needs a value"), usage(stderr), 2;
            ots = argv[i];
            if (!strcmp(ots, "f32")) ot = IQF_CONVERT_F32;
            else if (!strcmp(ots, "f16")) ot = IQF_CONVERT_F16;
            else if (!strcmp(ots, "bf16")) ot = IQF_CONVERT_BF16;
            else if (!strcmp(ots, "q8_0")) ot = IQF_CONVERT_Q8_0;
            else if (!strcmp(ots, "auto")) ot = IQF_CONVERT_AUTO;
            else return cli_error("convert: unknown --outtype '%s' (f32, f16, bf16, q8_0, auto)", ots), 2;
        } else if (s[0] == '-' && s[1]) {
            cli_error("convert: unknown option '%s'", s);
            usage(stderr);
            return 2;
        } else if (!dir)
            dir = s;
        else if (!out)
            out = s;
        else
            return cli_error("convert: unexpected argument '%s'", s), 2;
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    char defout[4096];
    if (!out) {
        size_t l = strlen(dir);
        while (l > 1 && dir[l - 1] == '/') l--;
        snprintf(defout, sizeof defout, "%.*s-%s.gguf", (int)l, dir, ots);
        out = defout;
    }
    iqf_outfile_install_signal_cleanup("iqforge convert");
    char err[1024];
    iqf_status st = iqf_convert_hf(dir, out, ot, err, sizeof err);
    if (st != IQF_OK) {
        fprintf(stderr, "%s\n", err[0] ? err : "iqforge convert: failed");
        return 1;
    }
    return 0;
}
