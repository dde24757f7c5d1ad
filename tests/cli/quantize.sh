#!/usr/bin/env bash
# CLI test for `iqforge quantize`: help, llama-quantize's argument forms (IN OUT TYPE [N] and
# IN TYPE), the summary line, --dry-run, metadata of the result (file type, quantization version,
# imatrix keys), thread-count independence. Bad inputs: tests/quantize/test_quantize_errors.c; bytes
# against the oracle: tests/quantize/test_quantize_oracle.c.
set -u
. "$(dirname "$0")/lib/common.sh"
GEN="$(dirname "$CLI")/iqf-genmodel"

"$CLI" quantize --help >"$T/out" 2>&1 && ok || bad "--help exit status"
expect usage "usage: iqforge quantize \[options\] IN.gguf\|HF_DIR \[OUT.gguf\] TYPE \[NTHREADS\]" "$T/out"
expect types "IQ3_XXS" "$T/out"
"$CLI" quantize >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "no arguments: want exit 2"

"$GEN" "$T/m.gguf" --scale 16 --layers 2 --imatrix "$T/im.gguf" --imatrix-dat "$T/im.dat" || { echo "generator failed"; exit 1; }

# IN OUT TYPE NTHREADS, with the summary line.
"$CLI" quantize --imatrix "$T/im.gguf" "$T/m.gguf" "$T/q1.gguf" Q4_K_M 1 >"$T/out" 2>"$T/err" && ok || bad "Q4_K_M exit"
expect summary "quantized .*m\.gguf -> .*q1\.gguf as Q4_K_M: 21 tensors \(16 converted\), .* MiB \(16\.0. bpw\) -> .* MiB \([0-9.]+ bpw\) in [0-9.]+ s" "$T/out"
[ -s "$T/err" ] && bad "stderr not empty (no TTY: no progress line)" || ok
"$CLI" quantize --imatrix "$T/im.gguf" "$T/m.gguf" "$T/q3.gguf" Q4_K_M 3 >/dev/null 2>&1 && ok || bad "3 threads exit"
cmp -s "$T/q1.gguf" "$T/q3.gguf" && ok || bad "output depends on the thread count"
"$CLI" inspect "$T/q1.gguf" >"$T/ins" 2>&1 && ok || bad "inspect of the result"
expect file_type "^  general\.file_type +u32 += 15$" "$T/ins"
expect qversion "^  general\.quantization_version +u32 += 2$" "$T/ins"
expect imatrix_file "^  quantize\.imatrix\.file +str += \".*im\.gguf\"$" "$T/ins"
expect imatrix_dataset "^  quantize\.imatrix\.dataset +str += \"synthetic\"$" "$T/ins"
expect imatrix_entries "^  quantize\.imatrix\.entries_count +u32 += 14$" "$T/ins"
expect imatrix_chunks "^  quantize\.imatrix\.chunks_count +u32 += 100$" "$T/ins"
expect attn_v_q6 "blk\.1\.attn_v\.weight .* q6_K" "$T/ins"
expect compat_mode "^encoder mode: compat$" "$T/ins"
grep -q "quantize\.mode" "$T/ins" && bad "compat output carries a quantize.mode key (llama-quantize's metadata has none)" || ok
# --mode best: same tensor types and sizes, the mode recorded; unknown modes are usage errors.
"$CLI" quantize --mode best --imatrix "$T/im.gguf" "$T/m.gguf" "$T/qb.gguf" Q4_K_M 2 >/dev/null 2>&1 && ok || bad "--mode best exit"
"$CLI" inspect "$T/qb.gguf" >"$T/insb" 2>&1 && ok || bad "inspect of the best-mode result"
expect best_key "^  quantize\.mode +str += \"best\"$" "$T/insb"
expect best_mode "^encoder mode: best$" "$T/insb"
[ "$(stat -c %s "$T/qb.gguf")" -gt 0 ] && [ "$(grep -c ' q[0-9]_K\| f32' "$T/insb")" = "$(grep -c ' q[0-9]_K\| f32' "$T/ins")" ] && ok || bad "best mode changed the tensor types"
"$CLI" quantize --mode fastest "$T/m.gguf" "$T/qx.gguf" Q4_K_M >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "unknown --mode: want exit 2"
expect bad_mode "unknown mode 'fastest'" "$T/out"
[ -e "$T/qx.gguf" ] && bad "unknown --mode left an output" || ok
expect output_q6 "output\.weight .* q6_K" "$T/ins"
expect norm_f32 "blk\.0\.ffn_norm\.weight .* f32" "$T/ins"

# IN TYPE: the output goes next to the input as ggml-model-TYPE.gguf; the .dat imatrix works too.
"$CLI" quantize --quiet --imatrix "$T/im.dat" "$T/m.gguf" iq3_xxs >"$T/out" 2>&1 && ok || bad "IN TYPE form"
[ -f "$T/ggml-model-IQ3_XXS.gguf" ] && ok || bad "ggml-model-IQ3_XXS.gguf not written"
[ -s "$T/out" ] && bad "--quiet printed something" || ok

# Options: --pure, --leave-output-tensor, --output-tensor-type, --token-embedding-type, --tensor-type.
"$CLI" quantize --quiet --pure --leave-output-tensor --token-embedding-type q8_0 --tensor-type 'ffn_(up|gate)=q5_0' \
    "$T/m.gguf" "$T/q2.gguf" Q4_K_M 2 >/dev/null 2>&1 && ok || bad "options exit"
"$CLI" inspect "$T/q2.gguf" >"$T/ins2" 2>&1
expect leave_output "output\.weight .* f16" "$T/ins2"
expect embd_q8 "token_embd\.weight .* q8_0" "$T/ins2"
expect pure_v "blk\.1\.attn_v\.weight .* q4_K" "$T/ins2"
expect tt_up "blk\.0\.ffn_up\.weight .* q5_0" "$T/ins2"

# --dry-run: the plan per tensor and the size, no file.
"$CLI" quantize --dry-run "$T/m.gguf" "$T/dry.gguf" IQ2_M >"$T/out" 2>&1 && ok || bad "dry-run exit"
expect plan_line "\[ +5/ +21\] blk\.0\.attn_norm\.weight +- \[ +256, +1, +1, +1\], type = +f32, size = +0\.001 MiB" "$T/out"
expect plan_q "blk\.0\.attn_q\.weight .* -> .*MiB \(iq2_s\)" "$T/out"
expect plan_fallback "blk\.0\.ffn_down\.weight .*\(iq4_nl\) \(fallback\)" "$T/out"
expect plan_total "dry run: .* as IQ2_M would be [0-9.]+ MiB" "$T/out"
expect plan_imatrix "will require an imatrix" "$T/out"
[ -e "$T/dry.gguf" ] && bad "--dry-run wrote a file" || ok

# --override-kv and --prune-layers (bytes against the oracle: test_quantize_oracle).
"$CLI" quantize --quiet --override-kv general.name=str:renamed --override-kv llama.context_length=int:-512 \
    --override-kv x.f=float:0.5 --override-kv x.b=bool:true --prune-layers 0 "$T/m.gguf" "$T/ov.gguf" Q8_0 >/dev/null 2>&1 && ok || bad "override/prune exit"
"$CLI" inspect "$T/ov.gguf" >"$T/ins3" 2>&1
expect ov_name '^  general\.name +str += "renamed"$' "$T/ins3"
expect ov_ctx '^  llama\.context_length +u32 += 512$' "$T/ins3"
expect ov_f '^  x\.f +f32 += 0\.5$' "$T/ins3"
expect ov_b '^  x\.b +bool += true$' "$T/ins3"
expect prune_count '^  llama\.block_count +u32 += 1$' "$T/ins3"
expect prune_renamed 'blk\.0\.attn_q\.weight' "$T/ins3"
grep -q 'blk\.1\.' "$T/ins3" && bad "pruned model still has blk.1" || ok
for a in "x=int:1.5" "x=float:nan" "x=bool:yes" "=str:a" "x=u32:1" "x"; do
    "$CLI" quantize --override-kv "$a" "$T/m.gguf" "$T/bad.gguf" Q8_0 >/dev/null 2>"$T/err"
    [ $? -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -- "--override-kv" "$T/err" && ok || bad "--override-kv '$a': $(cat "$T/err")"
done
"$CLI" quantize --override-kv llama.block_count=str:two "$T/m.gguf" "$T/bad.gguf" Q8_0 >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "key llama.block_count has type str, llama.cpp reads u32" "$T/err" && ok || bad "schema of an override: $(cat "$T/err")"
"$CLI" quantize --prune-layers 2 "$T/m.gguf" "$T/bad.gguf" Q8_0 >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "layer 2 does not exist" "$T/err" && ok || bad "prune a missing layer: $(cat "$T/err")"
"$CLI" quantize --prune-layers 0,1 "$T/m.gguf" "$T/bad.gguf" Q8_0 >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "cannot prune every layer" "$T/err" && ok || bad "prune all: $(cat "$T/err")"
for a in "1,,2" "-1" "a" "1," ""; do
    "$CLI" quantize --prune-layers "$a" "$T/m.gguf" "$T/bad.gguf" Q8_0 >/dev/null 2>"$T/err"
    [ $? -eq 2 ] && grep -q "invalid --prune-layers" "$T/err" && ok || bad "--prune-layers '$a': $(cat "$T/err")"
done
[ -e "$T/bad.gguf" ] && bad "a failed run left bad.gguf" || ok

finish quantize
