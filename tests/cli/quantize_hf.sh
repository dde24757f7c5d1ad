#!/usr/bin/env bash
# `iqforge quantize HF_DIR OUT TYPE`: a Hugging Face checkpoint converted in memory and quantized in
# one pass must give the very file `iqforge convert HF_DIR tmp.gguf` then `iqforge quantize tmp.gguf
# OUT TYPE` gives (sha256), on the hf-tiny fixture (always) and, with ../shared/hfref, on three of
# its checkpoints (tests/cli/quantize_hfref.sh). Bad directories: one line "iqforge: quantize:
# FILE: what is wrong", exit 1, no output file.
set -u
. "$(dirname "$0")/lib/common.sh"
GENIM="$(dirname "$CLI")/iqf-genimatrix"
sum() { sha256sum <"$1" | cut -d' ' -f1; }

cp -r "$SRC/tests/data/hf-tiny/ckpt" "$T/ckpt"
"$CLI" convert "$T/ckpt" "$T/tmp.gguf" 2>"$T/err" && ok || bad "convert: $(cat "$T/err")"
for t in Q4_K_M Q8_0 Q6_K; do
    "$CLI" quantize --quiet "$T/tmp.gguf" "$T/ref.gguf" $t 2 2>"$T/err" && ok || bad "quantize tmp.gguf $t: $(cat "$T/err")"
    "$CLI" quantize --quiet "$T/ckpt" "$T/dir.gguf" $t 2 2>"$T/err" && ok || bad "quantize DIR $t: $(cat "$T/err")"
    [ "$(sum "$T/ref.gguf")" = "$(sum "$T/dir.gguf")" ] && ok || bad "$t: from the directory differs from convert + quantize"
done
# with an importance matrix (synthetic, made for the converted file)
if [ -x "$GENIM" ]; then
    "$GENIM" "$T/tmp.gguf" "$T/im.gguf" 7 >/dev/null 2>&1 && ok || bad "iqf-genimatrix"
    "$CLI" quantize --quiet --imatrix "$T/im.gguf" "$T/tmp.gguf" "$T/ref.gguf" IQ4_XS 2 2>"$T/err" && ok || bad "imatrix ref: $(cat "$T/err")"
    "$CLI" quantize --quiet --imatrix "$T/im.gguf" "$T/ckpt" "$T/dir.gguf" IQ4_XS 2 2>"$T/err" && ok || bad "imatrix dir: $(cat "$T/err")"
    [ "$(sum "$T/ref.gguf")" = "$(sum "$T/dir.gguf")" ] && ok || bad "IQ4_XS with imatrix differs"
    # --target-size: measured tensor by tensor from the source; calibrated (KLD) by the engine on
    # the materialized checkpoint by default at this size, by relative error with --no-calibrate;
    # --calib-rounds 1 adds the in-context round
    for a in "--target-size 12K" "--target-size 16K --no-calibrate" "--target-bpw 7 --calib-rounds 1"; do
        "$CLI" quantize --quiet --imatrix "$T/im.gguf" $a "$T/tmp.gguf" "$T/ref.gguf" 2>"$T/err" && ok || bad "$a ref: $(cat "$T/err")"
        "$CLI" quantize --quiet --imatrix "$T/im.gguf" $a "$T/ckpt" "$T/dir.gguf" 2>"$T/err" && ok || bad "$a dir: $(cat "$T/err")"
        [ "$(sum "$T/ref.gguf")" = "$(sum "$T/dir.gguf")" ] && ok || bad "$a: from the directory differs"
    done
    "$CLI" quantize --imatrix "$T/im.gguf" --target-size 14K "$T/ckpt" "$T/dir.gguf" >"$T/out" 2>&1 && ok || bad "--target-size log"
    expect "calibrated on the checkpoint" "^calibrate: blk.0.ffn_down.weight" "$T/out"
fi
# the summary names the directory; --dry-run works on it
"$CLI" quantize --dry-run "$T/ckpt" Q4_K_M >"$T/out" 2>&1 && ok || bad "--dry-run exit"
expect dry-run "dry run: .*ckpt as Q4_K_M would be" "$T/out"
# bad inputs: one line naming the file, exit 1, nothing written
one_line() { # DESC EXPECTED-SUBSTRING
    local n; n=$(wc -l <"$T/err")
    [ "$rc" -eq 1 ] && ok || bad "$1: exit $rc"
    [ "$n" -eq 1 ] && grep -qF -- "$2" "$T/err" && ok || { bad "$1: message"; cat "$T/err" >&2; }
    [ ! -e "$T/bad.gguf" ] && ok || bad "$1: output written"
    ls "$T" | grep -q '\.tmp' && bad "$1: temp file left" || ok
}
mkdir "$T/empty"
"$CLI" quantize "$T/empty" "$T/bad.gguf" Q8_0 2>"$T/err" >/dev/null; rc=$?
one_line "empty directory" "iqforge: quantize: $T/empty/config.json: "
cp -r "$T/ckpt" "$T/shard"
mv "$T/shard/model.safetensors" "$T/shard/model-00001-of-00002.safetensors"
printf '{"metadata":{},"weight_map":{"model.embed_tokens.weight":"model-00002-of-00002.safetensors"}}' \
    >"$T/shard/model.safetensors.index.json"
"$CLI" quantize "$T/shard" "$T/bad.gguf" Q8_0 2>"$T/err" >/dev/null; rc=$?
one_line "missing shard" "iqforge: quantize: $T/shard/model-00002-of-00002.safetensors: "
printf '{"architectures":["MistralForCausalLM"' >"$T/ckpt/config.json"
"$CLI" quantize "$T/ckpt" "$T/bad.gguf" Q8_0 2>"$T/err" >/dev/null; rc=$?
one_line "malformed config" "iqforge: quantize: $T/ckpt/config.json: malformed JSON"
finish quantize_hf
