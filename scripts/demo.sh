#!/usr/bin/env bash
# `make demo`: the main job on bundled data.
#  1. Generate (once, cached) a model with Mistral-7B shapes (1 layer, F16, realistic weight
#     statistics) and its importance matrix; quantize it to IQ3_XXS with `iqforge quantize`;
#     show `iqforge inspect` of the result and the timing.
#  2. The quality picture on the real stories260K model: an importance matrix captured by
#     iqforge from the bundled calibration text, then perplexity and KL-divergence of the F32
#     model and of simulated IQ3_XXS, IQ2_XS and Q4_K quantizations of it.
#  3. `iqforge ladder` on the bundled kjv-3m (whole files, every IQ and K type + Q8_0, compat and
#     best side by side): the table, the alarm's verdict and the SVG's path.
#  4. What iqforge is for: the ladder's feedback and full series (error feedback from Hessians
#     captured on the calibration text; per-tensor types for the compat file's bytes + best mode
#     + feedback) beside compat and best on four types, with each series' KLD relative to compat.
set -euo pipefail
cli=${1:-build/iqforge}
bindir=$(dirname "$cli")
work=${IQF_DEMO_DIR:-$bindir/demo}
data=tests/data
mkdir -p "$work"
threads=$(nproc)

echo "== 1. iqforge quantize: a Mistral-7B-shaped model (1 layer, F16) to IQ3_XXS =="
model=$work/mistral-shaped-1l-f16.gguf
imat=$work/mistral-shaped-1l.imatrix.gguf
if [ ! -f "$model" ] || [ ! -f "$imat" ]; then
  echo "generating $model (once) ..."
  "$bindir/iqf-genmodel" "$model" --layers 1 --type f16 --imatrix "$imat"
fi
out=$work/mistral-shaped-1l-iq3_xxs.gguf
start=$(date +%s.%N)
"$cli" quantize --imatrix "$imat" "$model" "$out" IQ3_XXS "$threads"
end=$(date +%s.%N)
echo
"$cli" inspect --no-kv "$out"
awk -v s="$start" -v e="$end" -v t="$threads" 'BEGIN { printf "\nquantize wall time: %.1f s with %d threads\n\n", e - s, t }'

echo "== 2. quality on stories260K (tests/data/stories260K, TinyStories excerpt, -c 256) =="
sm=$data/stories260K/stories260K-f32.gguf
text=$data/text/tinystories-valid-excerpt.txt
simat=$work/stories260K.imatrix.gguf
echo "capturing an importance matrix from $data/text/wiki-calibration.txt ..."
"$cli" imatrix -m "$sm" -f "$data/text/wiki-calibration.txt" -c 256 -o "$simat" -t "$threads" >/dev/null 2>&1
base=$work/stories260K-f32.kld
ppl_f32=$("$cli" perplexity -m "$sm" -f "$text" -c 256 -t "$threads" --kld-base "$base" 2>&1 |
  sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
printf '\n| model | bpw | PPL | mean KLD | same top token |\n|---|---:|---:|---:|---:|\n'
printf '| F32 | 32 | %s | 0 | 100%% |\n' "$ppl_f32"
for t in q4_K iq3_xxs iq2_xs; do
  res=$("$cli" perplexity --kld "$base" -m "$sm" -c 256 -t "$threads" --simulate "$t" --imatrix "$simat" 2>&1)
  ppl=$(echo "$res" | sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p')
  kld=$(echo "$res" | sed -n 's/^Mean *KLD: *\([0-9.]*\).*/\1/p')
  top=$(echo "$res" | sed -n 's/^Same top p: *\([0-9.]*\).*/\1/p')
  bpw=$(case $t in q4_K) echo 4.5;; iq3_xxs) echo 3.0625;; iq2_xs) echo 2.3125;; esac)
  printf '| %s (simulated, imatrix) | %s | %.4f | %.6f | %s%% |\n' "$t" "$bpw" "$ppl" "$kld" "$top"
done
echo
echo "(llama.cpp with its own imatrix, same method: Q4_K 6.6136 / 0.0887, IQ3_XXS 12.0264 / 0.7604, IQ2_XS 51.9476 / 2.2621; see docs/QUALITY.md)"

echo
echo "== 3. iqforge ladder: kjv-3m (tests/data/kjv-3m), every IQ and K type + Q8_0, compat and best =="
kjv=$data/kjv-3m
lstart=$(date +%s.%N)
set +e
"$cli" ladder -m "$kjv/kjv-3m-f32.gguf" -f "$kjv/heldout-70k.txt" --imatrix "$kjv/imatrix.gguf" -c 256 \
  --chunks 30 --mode compat,best -t "$threads" -o "$work/ladder-kjv-3m" --prompt "The LORD is my" --expect "God"
lrc=$?
set -e
lend=$(date +%s.%N)
awk -v s="$lstart" -v e="$lend" 'BEGIN { printf "\nladder wall time: %.1f s (rungs already in the folder are reused)\n", e - s }'
echo "open $work/ladder-kjv-3m/ladder.svg in a browser for the plot (bpw against KLD and PPL)"
[ $lrc -eq 0 ] || { echo "the ladder raised the alarm (exit $lrc)"; exit $lrc; }

echo
echo "== 4. iqforge's full pipeline on kjv-3m: error feedback and types chosen for llama-quantize's bytes =="
"$cli" ladder -m "$kjv/kjv-3m-f32.gguf" -f "$kjv/heldout-70k.txt" --calibration "$kjv/calibration.txt" -c 256 \
  --chunks 30 --types IQ2_XS,IQ3_XXS,Q3_K_M,Q4_K_M --mode compat,best,feedback,full -t "$threads" \
  -o "$work/ladder-kjv-3m-full"
echo "open $work/ladder-kjv-3m-full/ladder.svg for the plot (its third panel: each series' KLD / compat's)"
