#!/usr/bin/env bash
# feedback_archs.sh - error feedback on random-weight models of the newer architectures: KLD of
# compat, best and best + feedback (`imatrix --hessian`, `quantize --hessian`) at Q2_K, IQ3_XXS
# and Q4_K_M, with the feedback/best and best/compat ratios (docs/QUALITY.md, error feedback).
# Models: iqf-genmodel's gemma3, gpt-oss and deepseek2 (as test_model_fleet_imatrix: n_embd 256,
# 2 layers, MoE 8 experts / 2 used, GPT-2 vocabulary; seeds 25, 26, 26) and test-llama-archs'
# qwen35-dense and qwen35moe-moe rebuilt by iqf-archmodel with --unit-norms (128 "test" tokens).
# Text: tests/data/text/tinystories-valid-excerpt.txt, its first half of lines for the imatrix
# and the Hessians, the second half for the KLD (-c 128). Every tensor is quantized by the file
# type's recipe; 3-D expert tensors take their per-expert Hessians (experts no calibration row
# reached: plain encoder).
# usage: bench/feedback_archs.sh [BUILD] ; env: DIR (default BUILD/bench-feedback-archs), THREADS,
# MODELS (default "gemma3 gpt-oss deepseek2 qwen35 qwen35moe")
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
IQF="$build/iqforge"
DIR="${DIR:-$build/bench-feedback-archs}"
THREADS="${THREADS:-2}"
mkdir -p "$DIR" && cd "$DIR" || exit 1
T="$here/tests/data/text/tinystories-valid-excerpt.txt"
n=$(wc -l <"$T")
head -n $((n / 2)) "$T" >calib.txt
tail -n +$((n / 2 + 1)) "$T" >eval.txt
V="$here/tests/data/vocab/ggml-vocab-gpt-2.gguf"
for a in gemma3:25 gpt-oss:26 deepseek2:26; do
  [ -f "${a%:*}.gguf" ] || "$build/iqf-genmodel" "${a%:*}.gguf" --arch "${a%:*}" --scale 16 --layers 2 --type f32 \
    --seed "${a#*:}" --experts 8 --experts-used 2 --vocab "$V" || exit 1
done
[ -f qwen35.gguf ] || "$build/iqf-archmodel" "$here/tests/data/archs/qwen35-dense.skel" 5294240 qwen35.gguf 42 --unit-norms || exit 1
[ -f qwen35moe.gguf ] || "$build/iqf-archmodel" "$here/tests/data/archs/qwen35moe-moe.skel" 8840768 qwen35moe.gguf 42 --unit-norms || exit 1
echo "| model | type | KLD compat | KLD best | KLD best + feedback | feedback / best | best / compat | tensors with feedback |"
echo "|---|---|---:|---:|---:|---:|---:|---|"
status=0
for m in ${MODELS:-gemma3 gpt-oss deepseek2 qwen35 qwen35moe}; do
  "$IQF" imatrix -m $m.gguf -f calib.txt -c 128 -t "$THREADS" -o $m.im.gguf --hessian $m.h.gguf --quiet >$m.imlog 2>&1 ||
    { echo "$m: imatrix --hessian failed: $(tail -1 $m.imlog)"; status=1; continue; }
  "$IQF" perplexity -m $m.gguf -f eval.txt -c 128 -t "$THREADS" --kld-base $m.kld --quiet >/dev/null 2>&1 ||
    { echo "$m: perplexity --kld-base failed"; status=1; continue; }
  for t in Q2_K IQ3_XXS Q4_K_M; do
    k=()
    for mode in compat best feedback; do
      args=(--imatrix $m.im.gguf --mode best)
      [ $mode = compat ] && args=(--imatrix $m.im.gguf --mode compat)
      [ $mode = feedback ] && args+=(--hessian $m.h.gguf)
      if ! "$IQF" quantize "${args[@]}" $m.gguf q.gguf $t "$THREADS" >q.log 2>&1; then
        echo "$m $t $mode: quantize failed: $(tail -1 q.log)"; status=1; k+=(nan); continue
      fi
      [ $mode = feedback ] && fbt="$(grep -c 'error feedback with' q.log) of $(grep -c '^feedback:' q.log)"
      k+=("$("$IQF" perplexity -m q.gguf --kld $m.kld -t "$THREADS" 2>&1 | awk '/Mean +KLD/ {print $3}')")
    done
    awk -v m=$m -v t=$t -v c="${k[0]}" -v b="${k[1]}" -v f="${k[2]}" -v n="$fbt" \
      'BEGIN { printf "| %s | %s | %s | %s | %s | %.3f | %.3f | %s |\n", m, t, c, b, f, f / b, b / c, n }'
  done
done
rm -f q.gguf
exit $status
