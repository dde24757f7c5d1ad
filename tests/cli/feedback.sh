#!/usr/bin/env bash
# CLI of error feedback on stories260K: `iqforge imatrix --hessian` writes a Hessian GGUF
# (general.type hessian, token count, model identity), `iqforge quantize --hessian` uses it
# (log names the tensors with and without feedback, metadata quantize.feedback.*, same bytes at
# 1 and 2 threads, a loadable model), and bad Hessians fail with one line, exit 1, no output:
# another model's, truncated, NaN; a bad --hessian-damp is a usage error (exit 2).
set -u
. "$(dirname "$0")/lib/common.sh"
cli=$CLI src=$SRC t=$T
GEN="$(dirname "$cli")/iqf-genmodel"
model="$src/tests/data/stories260K/stories260K-f32.gguf"
text="$src/tests/data/text/tinystories-valid-excerpt.txt"
expect() { # expect DESCRIPTION PATTERN FILE
  if grep -Eq -- "$2" "$3"; then ok; else bad "$1: no /$2/ in output"; sed 's/^/  | /' "$3" | head -20 >&2; fi
}
# expect_fail NAME PATTERN OUT -- command...: exit 1, one stderr line matching PATTERN, no OUT.
expect_fail() {
  local name=$1 pat=$2 out=$3; shift 4
  "$@" 2>"$t/err" >/dev/null; local rc=$?
  if [ $rc -ne 1 ]; then bad "$name: exit $rc (want 1): $(cat "$t/err")"; return; fi
  if [ "$(wc -l < "$t/err")" -ne 1 ]; then bad "$name: want one line, got: $(cat "$t/err")"; return; fi
  if ! grep -q -- "$pat" "$t/err"; then bad "$name: message '$(cat "$t/err")' lacks '$pat'"; return; fi
  if [ -e "$out" ] || ls "$out".* >/dev/null 2>&1; then bad "$name: output left behind"; return; fi
  ok
}

"$cli" imatrix -m "$model" -f "$text" -c 128 --chunks 6 -o "$t/im.gguf" --hessian "$t/h.gguf" -t 2 >/dev/null 2>"$t/err" && ok || bad "imatrix --hessian: $(cat "$t/err")"
expect "hessian note" "wrote 21 Hessians \(768 tokens\)" "$t/err"
"$cli" inspect "$t/h.gguf" >"$t/ins" 2>&1 && ok || bad "inspect Hessian: $(cat "$t/ins")"
expect "general.type" '^  general\.type +str += "hessian"$' "$t/ins"
expect "token count" '^  hessian\.token_count +u64 += 768$' "$t/ins"
expect "model name" '^  hessian\.model\.n_embd +u32 += 64$' "$t/ins"
expect "qkv entry" 'blk\.0\.attn_qkv\.hessian' "$t/ins"
"$cli" imatrix -m "$model" -f "$text" -c 128 --chunks 6 -o "$t/im2.gguf" --hessian "$t/h1.gguf" -t 1 >/dev/null 2>&1 && ok || bad "imatrix -t 1"
cmp -s "$t/h.gguf" "$t/h1.gguf" && ok || bad "Hessian depends on the thread count"
# --no-ppl: no logits, no running perplexity; the same importance and Hessian bytes. --quiet:
# nothing but errors (stdout and stderr empty).
"$cli" imatrix -m "$model" -f "$text" -c 128 --chunks 6 -o "$t/im4.gguf" --hessian "$t/h4.gguf" -t 2 --no-ppl --quiet >"$t/out" 2>"$t/err" && ok || bad "imatrix --no-ppl --quiet: $(cat "$t/err")"
cmp -s "$t/h.gguf" "$t/h4.gguf" && cmp -s "$t/im.gguf" "$t/im4.gguf" && ok || bad "--no-ppl changed the files"
[ ! -s "$t/out" ] && [ ! -s "$t/err" ] && ok || bad "imatrix --quiet printed: $(cat "$t/out" "$t/err")"
"$cli" imatrix -m "$model" -f "$text" -c 128 --chunks 2 -o "$t/im3.gguf" --hessian "$t/hb.gguf" --hessian-block 32 --hessian-f16 >/dev/null 2>"$t/err"
[ $? -eq 1 ] && grep -q "does not divide" "$t/err" && ok || bad "block 32 does not divide 172: $(cat "$t/err")"
"$cli" imatrix -m "$model" -f "$text" -c 128 --chunks 2 -o "$t/im3.gguf" --hessian "$t/hb.gguf" --hessian-block 4 --hessian-f16 >/dev/null 2>&1 && ok || bad "block 4 f16"
"$cli" inspect "$t/hb.gguf" >"$t/ins" 2>&1
expect "f16 block tensor" 'blk\.0\.ffn_down\.hessian +4 x 172 +f16' "$t/ins"

# quantize with feedback
"$cli" quantize --imatrix "$t/im.gguf" --hessian "$t/h.gguf" "$model" "$t/q.gguf" Q4_0 2 >"$t/out" 2>"$t/err" && ok || bad "quantize --hessian: $(cat "$t/err")"
expect "feedback log" 'feedback: blk\.0\.attn_q\.weight: error feedback with blk\.0\.attn_qkv\.hessian \(64 x 64, full\)' "$t/out"
expect "plain log" 'feedback: token_embd\.weight: no Hessian, plain encoder' "$t/out"
"$cli" quantize --imatrix "$t/im.gguf" --hessian "$t/h.gguf" "$model" "$t/q1.gguf" Q4_0 1 >/dev/null 2>&1 && ok || bad "1 thread"
cmp -s "$t/q.gguf" "$t/q1.gguf" && ok || bad "feedback output depends on the thread count"
"$cli" quantize --imatrix "$t/im.gguf" "$model" "$t/p.gguf" Q4_0 2 >/dev/null 2>&1 && ok || bad "plain"
cmp -s "$t/q.gguf" "$t/p.gguf" && bad "feedback changed nothing" || ok
"$cli" inspect "$t/q.gguf" >"$t/ins" 2>&1 && ok || bad "inspect"
expect "meta file" '^  quantize\.feedback\.file +str += ".*h\.gguf"$' "$t/ins"
expect "meta tokens" '^  quantize\.feedback\.token_count +u64 += 768$' "$t/ins"
expect "meta damp" '^  quantize\.feedback\.damp +f32 += 0\.0(1|099999)' "$t/ins"
"$cli" perplexity -m "$t/q.gguf" -f "$text" -c 128 --chunks 2 >/dev/null 2>&1 && ok || bad "feedback model does not load"
"$cli" quantize --imatrix "$t/im.gguf" --hessian "$t/h.gguf" --hessian-damp 0.1 --mode best "$model" "$t/qb.gguf" Q4_0 >/dev/null 2>&1 && ok || bad "--hessian-damp 0.1 --mode best"

# errors
"$GEN" "$t/other.gguf" --scale 16 --layers 1 >/dev/null 2>&1 || bad "generator"
expect_fail "another model" "Hessian made for another model" "$t/x1.gguf" -- "$cli" quantize --hessian "$t/h.gguf" "$t/other.gguf" "$t/x1.gguf" Q8_0
sz=$(stat -c %s "$t/h.gguf")
head -c $((sz - 1000)) "$t/h.gguf" > "$t/trunc.gguf"
expect_fail "truncated" "trunc.gguf" "$t/x2.gguf" -- "$cli" quantize --hessian "$t/trunc.gguf" "$model" "$t/x2.gguf" Q8_0
cp "$t/h.gguf" "$t/nan.gguf"
printf '\x00\x00\xc0\x7f' | dd of="$t/nan.gguf" bs=1 seek=$((sz - 4)) conv=notrunc 2>/dev/null
expect_fail "NaN" "non-finite" "$t/x3.gguf" -- "$cli" quantize --hessian "$t/nan.gguf" "$model" "$t/x3.gguf" Q8_0
expect_fail "imatrix as Hessian" "not a Hessian file" "$t/x4.gguf" -- "$cli" quantize --hessian "$t/im.gguf" "$model" "$t/x4.gguf" Q8_0
expect_fail "missing file" "nonexistent" "$t/x5.gguf" -- "$cli" quantize --hessian "$t/nonexistent.gguf" "$model" "$t/x5.gguf" Q8_0
"$cli" quantize --hessian "$t/h.gguf" --hessian-damp -1 "$model" "$t/x6.gguf" Q8_0 >/dev/null 2>&1; [ $? -eq 2 ] && ok || bad "--hessian-damp -1: want exit 2"

finish feedback
