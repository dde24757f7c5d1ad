#!/usr/bin/env bash
# CLI test for `iqforge inspect`: output on stories260K, errors as one line "FILE: what is wrong".
set -u
. "$(dirname "$0")/lib/common.sh"
M="$SRC/tests/data/stories260K/stories260K-f32.gguf"

"$CLI" inspect "$M" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] && ok || bad "inspect exit $rc"
[ -s "$T/err" ] && bad "stderr not empty" || ok
expect header "GGUF v3, 1185472 bytes .* 22 KVs, 48 tensors, alignment 32, data at offset 14272" "$T/out"
expect block_count "^  llama\.block_count +u32 += 5$" "$T/out"
expect embedding "^  llama\.embedding_length +u32 += 64$" "$T/out"
expect arch '^  general\.architecture +str += "llama"$' "$T/out"
expect freq_base "^  llama\.rope\.freq_base +f32 += 10000$" "$T/out"
expect add_bos "^  tokenizer\.ggml\.add_bos_token +bool += true$" "$T/out"
expect tokens 'tokenizer\.ggml\.tokens +arr\[str\] += \["<unk>", "<s>", "</s>", .*\.\.\. \(512 elements\)\]' "$T/out"
expect scores 'tokenizer\.ggml\.scores +arr\[f32\] += \[.*\(512 elements\)\]' "$T/out"
expect tensor0 "^ +0 +token_embd\.weight +64 x 512 +f32 +131072 +0$" "$T/out"
expect tensor_norm "^ +1 +blk\.0\.attn_norm\.weight +64 +f32 +256 +131072$" "$T/out"
expect ffn_down "blk\.4\.ffn_down\.weight +172 x 64 +f32 +44032" "$T/out"
expect histogram "^  f32 +48 +292800 +1171200 +32\.0000 +100\.00%$" "$T/out"
expect total "^total: 48 tensors, 292800 weights, 1171200 bytes of tensor data .* 32\.0000 bits per weight$" "$T/out"
[ "$(grep -c '^ \+[0-9]\+  ' "$T/out")" -eq 48 ] && ok || bad "48 tensor rows"

"$CLI" inspect --no-kv --no-tensors "$M" >"$T/out2" 2>&1 && ok || bad "--no-kv --no-tensors"
grep -q "llama.block_count" "$T/out2" && bad "--no-kv still prints KVs" || ok
grep -q "token_embd" "$T/out2" && bad "--no-tensors still prints tensors" || ok
expect total2 "^total: 48 tensors" "$T/out2"
"$CLI" inspect --full "$M" >"$T/full" 2>&1 && ok || bad "--full"
expect full '"<0x61>"' "$T/full"

"$CLI" inspect --help >"$T/help" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || bad "--help exit $rc"
expect help "usage: iqforge inspect" "$T/help"

# Errors: exit 1, exactly one line "FILE: what is wrong".
err_case() { # err_case DESCRIPTION FILE PATTERN
    "$CLI" inspect "$2" >"$T/o" 2>"$T/e"; local rc=$?
    [ $rc -eq 1 ] && ok || bad "$1: exit $rc (want 1)"
    [ "$(wc -l <"$T/e")" -eq 1 ] && ok || { bad "$1: stderr is not one line"; cat "$T/e" >&2; }
    grep -Fq -- "$2: " "$T/e" && ok || bad "$1: message does not start with the file name"
    expect "$1" "$3" "$T/e"
    [ -s "$T/o" ] && bad "$1: stdout not empty" || ok
}
err_case missing "$T/nope.gguf" "cannot open"
printf 'hello world, not gguf' >"$T/text.gguf"
err_case "bad magic" "$T/text.gguf" "not a GGUF file"
head -c 5000 "$M" >"$T/trunc.gguf"
err_case truncated "$T/trunc.gguf" "truncated"
head -c 1000000 "$M" >"$T/trunc2.gguf"
err_case "truncated data" "$T/trunc2.gguf" "truncated: tensor '.*' data"
: >"$T/empty.gguf"
err_case empty "$T/empty.gguf" "empty file"
err_case directory "$T" "directory"
cp "$M" "$T/v1.gguf"
printf '\001' | dd of="$T/v1.gguf" bs=1 seek=4 conv=notrunc status=none
err_case "version 1" "$T/v1.gguf" "version 1 is not supported"

"$CLI" inspect >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok || bad "no file: exit $rc (want 2)"
"$CLI" inspect --bogus "$M" >/dev/null 2>&1; rc=$?
[ $rc -eq 2 ] && ok || bad "unknown option: exit $rc (want 2)"

finish inspect
