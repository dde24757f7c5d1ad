#!/usr/bin/env bash
# scripts/demo.sh [IQFORGE] - `make demo`: generates the Mistral-shaped model once (full
# Mistral-7B shapes, 2 layers, F16, with its importance matrix; cached in $IQF_DEMO_DIR, default
# ~/.cache/iqforge/demo), quantizes it to IQ3_XXS with that imatrix, and prints `iqforge inspect`
# of the result and the timing. DEMO_SCALE / DEMO_LAYERS / DEMO_THREADS shrink or grow it.
set -euo pipefail
iqf=${1:-build/iqforge}
bindir=$(dirname "$iqf")
gen="$bindir/iqf-genmodel"
dir=${IQF_DEMO_DIR:-$HOME/.cache/iqforge/demo}
scale=${DEMO_SCALE:-1}
layers=${DEMO_LAYERS:-2}
threads=${DEMO_THREADS:-$(nproc)}
model="$dir/mistral-s$scale-l$layers-f16.gguf"
imat="$dir/mistral-s$scale-l$layers.imatrix.gguf"
out="$dir/mistral-s$scale-l$layers-IQ3_XXS.gguf"
mkdir -p "$dir"
if [ ! -f "$model" ] || [ ! -f "$imat" ]; then
  echo "== generating the Mistral-shaped model (scale 1/$scale, $layers layers) into $dir"
  t0=$(date +%s.%N)
  "$gen" "$model" --scale "$scale" --layers "$layers" --imatrix "$imat"
  echo "   done in $(echo "$(date +%s.%N) - $t0" | bc) s"
else
  echo "== reusing $model"
fi
echo "== iqforge quantize --imatrix $(basename "$imat") $(basename "$model") IQ3_XXS $threads"
t0=$(date +%s.%N)
"$iqf" quantize --imatrix "$imat" "$model" "$out" IQ3_XXS "$threads"
t1=$(date +%s.%N)
echo
echo "== iqforge inspect $(basename "$out")"
"$iqf" inspect "$out"
echo
printf '== quantized %s (%s MiB) to IQ3_XXS (%s MiB) in %.2f s wall with %s threads\n' \
  "$(basename "$model")" "$(( $(stat -c %s "$model") / 1048576 ))" "$(( $(stat -c %s "$out") / 1048576 ))" \
  "$(echo "$t1 - $t0" | bc)" "$threads"
