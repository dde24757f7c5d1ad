#!/usr/bin/env bash
# CLI of the inference commands on stories260K: generate (greedy, byte for byte vs llama.cpp),
# perplexity (llama-perplexity's figure and output format), KL-divergence against itself,
# imatrix (GGUF and .dat written, readable), simulated quantization, and error cases.
set -u
. "$(dirname "$0")/lib/common.sh"
cli=$CLI src=$SRC t=$T
model="$src/tests/data/stories260K/stories260K-f32.gguf"
text="$src/tests/data/text/tinystories-valid-excerpt.txt"

# expect_fail NAME PATTERN -- command...: exit status 1 and a stderr line matching PATTERN.
expect_fail() {
  local name=$1 pat=$2; shift 3
  "$@" 2>"$t/err" >/dev/null; local rc=$?
  if [ $rc -ne 1 ]; then bad "$name: exit $rc (want 1): $(cat "$t/err")"; return; fi
  if ! grep -q -- "$pat" "$t/err"; then bad "$name: message '$(cat "$t/err")' lacks '$pat'"; return; fi
  ok
}

# generate: 200 greedy tokens from BOS reproduce llama.cpp's text byte for byte.
"$cli" generate -m "$model" -n 200 -t 2 > "$t/gen.txt" 2>"$t/err" && ok || bad "generate: $(cat "$t/err")"
cmp -s "$t/gen.txt" "$src/tests/data/stories260K/expected-greedy-200.txt" && ok || bad "generate output differs"
"$cli" generate -m "$model" -p "Once upon a time" -n 8 > "$t/gen2.txt" 2>"$t/err" && ok || bad "generate -p: $(cat "$t/err")"
head -c 16 "$t/gen2.txt" | grep -q "^Once upon a time" && ok || bad "prompt not echoed: $(cat "$t/gen2.txt")"

# perplexity. The default is llama.cpp's tools' default (F16 cache, CPU flash attention): the
# oracle's libllama gives 6.2133 with it on this text (bench_llama_eval). ../shared/REFERENCE.md's
# stories260K figures were measured with the plain graph (F32 cache, flash attention off), which
# --kv-type f32 is: llama-perplexity -c 256 gave [1]5.7548 ... Final estimate: PPL = 6.2132 +/- 0.15668.
"$cli" perplexity -m "$model" -f "$text" -c 256 -t 2 > "$t/ppl16.txt" 2>"$t/err" && ok || bad "perplexity: $(cat "$t/err")"
grep -Eq '^\[1\]5\.75[0-9]{2},' "$t/ppl16.txt" && ok || bad "per-chunk values (F16): $(head -c 100 "$t/ppl16.txt")"
grep -q '^Final estimate: PPL = 6\.213[23] +/- 0\.1566' "$t/ppl16.txt" && ok || bad "final (F16): $(tail -1 "$t/ppl16.txt")"
"$cli" perplexity -m "$model" -f "$text" -c 256 -t 2 --kv-type f32 > "$t/ppl.txt" 2>"$t/err" && ok || bad "--kv-type f32: $(cat "$t/err")"
grep -q '^\[1\]5\.7548,\[2\]6\.0197,' "$t/ppl.txt" && ok || bad "per-chunk values: $(head -c 100 "$t/ppl.txt")"
grep -q '^Final estimate: PPL = 6\.213[123] +/- 0\.156[67]' "$t/ppl.txt" && ok || bad "final: $(tail -1 "$t/ppl.txt")"
"$cli" perplexity -m "$model" -f "$text" -c 256 --kv-type q8 > /dev/null 2>"$t/err"; [ $? -eq 2 ] && ok || bad "--kv-type q8: want exit 2"
grep -q "kv-type must be f16 or f32" "$t/err" && ok || bad "--kv-type message: $(cat "$t/err")"

# KL-divergence of the model against its own log-probabilities.
"$cli" perplexity -m "$model" -f "$text" -c 256 --chunks 3 --kld-base "$t/base.kld" >/dev/null 2>"$t/err" && ok || bad "kld-base: $(cat "$t/err")"
[ -s "$t/base.kld" ] && head -c 8 "$t/base.kld" | grep -q '_logits_' && ok || bad "base file"
"$cli" perplexity -m "$model" --kld "$t/base.kld" > "$t/kld.txt" 2>"$t/err" && ok || bad "kld: $(cat "$t/err")"
grep -q 'Same top p: 100.000' "$t/kld.txt" && ok || bad "same top: $(cat "$t/kld.txt")"
grep -Eq 'Mean +KLD: +-?0\.0000[0-9]' "$t/kld.txt" && ok || bad "mean KLD: $(grep 'Mean    KLD' "$t/kld.txt")"

# --quiet: the final results only (llama-perplexity's lines), nothing on stderr.
"$cli" perplexity -m "$model" -f "$text" -c 256 -t 2 --quiet > "$t/pplq.txt" 2>"$t/err" && ok || bad "perplexity --quiet: $(cat "$t/err")"
[ ! -s "$t/err" ] && [ "$(cat "$t/pplq.txt")" = "$(grep '^Final estimate' "$t/ppl16.txt")" ] && ok || bad "perplexity --quiet printed: $(cat "$t/pplq.txt" "$t/err")"
"$cli" perplexity -m "$model" --kld "$t/base.kld" --quiet > "$t/kldq.txt" 2>"$t/err" && ok || bad "kld --quiet: $(cat "$t/err")"
[ ! -s "$t/err" ] && ! grep -q '^   1 ' "$t/kldq.txt" && grep -q '^Mean    KLD' "$t/kldq.txt" && ok || bad "kld --quiet printed: $(cat "$t/kldq.txt" "$t/err")"

# imatrix: GGUF and legacy .dat.
"$cli" imatrix -m "$model" -f "$text" -c 256 --chunks 4 -o "$t/im.gguf" >/dev/null 2>"$t/err" && ok || bad "imatrix: $(cat "$t/err")"
head -c 4 "$t/im.gguf" | grep -q GGUF && ok || bad "imatrix gguf magic"
"$cli" imatrix -m "$model" -f "$text" -c 256 --chunks 4 -o "$t/im.dat" >/dev/null 2>"$t/err" && ok || bad "imatrix dat: $(cat "$t/err")"
[ -s "$t/im.dat" ] && ! head -c 4 "$t/im.dat" | grep -q GGUF && ok || bad "imatrix .dat"

# the imatrix drives `iqforge quantize`; the quantized model (mixed types) runs in the engine.
"$cli" quantize --imatrix "$t/im.gguf" "$model" "$t/q.gguf" IQ3_XXS >/dev/null 2>"$t/err" && ok || bad "quantize with our imatrix: $(cat "$t/err")"
"$cli" perplexity -m "$t/q.gguf" --kld "$t/base.kld" > "$t/qkld.txt" 2>"$t/err" && ok || bad "kld of quantized: $(cat "$t/err")"
kl=$(awk '/^Mean +KLD:/ {print $3}' "$t/qkld.txt")
awk -v k="${kl:-9}" 'BEGIN{exit !(k > 0.001 && k < 2)}' && ok || bad "KLD of the IQ3_XXS model: '$kl'"

# simulated quantization with the imatrix just written (f16 is always encodable).
"$cli" perplexity -m "$model" -f "$text" -c 256 --chunks 4 --simulate f16 --imatrix "$t/im.gguf" > "$t/sim.txt" 2>"$t/err" && ok || bad "simulate: $(cat "$t/err")"
grep -q '^Final estimate: PPL = ' "$t/sim.txt" && ok || bad "simulate output"

# errors
expect_fail "missing model" "nonexistent" -- "$cli" perplexity -m "$t/nonexistent.gguf" -f "$text"
expect_fail "not llama" "unsupported architecture" -- "$cli" generate -m "$src/tests/data/vocab/ggml-vocab-gpt-2.gguf"
expect_fail "short text" "at least 2048 tokens" -- "$cli" perplexity -m "$model" -f "$src/tests/data/text/tinystories-sample.txt" -c 1024
expect_fail "bad simulate type" "unknown type" -- "$cli" perplexity -m "$model" -f "$text" --simulate nope
expect_fail "bad kld file" "not a log-probability file" -- "$cli" perplexity -m "$model" --kld "$text"
"$cli" perplexity -m "$model" 2>/dev/null; [ $? -eq 2 ] && ok || bad "usage error should exit 2"

finish model
