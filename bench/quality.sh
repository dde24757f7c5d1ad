#!/usr/bin/env bash
# quality.sh - the quality benchmark: `iqforge ladder` in compat and best mode side by side on
#  1. kjv-3m, whole files, every IQ/K/legacy file type, KLD against F32 on all 471 chunks of its
#     held-out text (needs ../shared; without it, the bundled 68 KB slice);
#  2. stories260K, simulated (rows of 256), the default tensor types, llama.cpp's imatrix.
# Prints the two ladders (with the best/compat KLD ratios and their geometric mean) and leaves
# DIR/*/ladder.{json,csv,svg}. Rungs already measured in DIR are reused (delete DIR to redo).
# usage: bench/quality.sh [BUILD] ; env: DIR (default BUILD/bench-quality), THREADS, MODES
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$here/build}"
IQF="$build/iqforge"
DIR="${DIR:-$build/bench-quality}"
THREADS="${THREADS:-$(nproc)}"
MODES="${MODES:-compat,best}"
SH="$here/../shared/models/kjv-3m"
if [ -f "$SH/heldout.txt" ]; then
  M="$SH/kjv-3m-f32.gguf"; E="$SH/heldout.txt"; I="$SH/imatrix.gguf"; chunks=()
else
  D="$here/tests/data/kjv-3m"; M="$D/kjv-3m-f32.gguf"; E="$D/heldout-70k.txt"; I="$D/imatrix.gguf"; chunks=()
  echo "(../shared not found: kjv-3m on the bundled 68 KB held-out slice)"
fi
types=IQ1_S,IQ1_M,IQ2_XXS,IQ2_XS,IQ2_S,IQ2_M,IQ3_XXS,IQ3_XS,IQ3_S,IQ3_M,IQ4_XS,IQ4_NL,Q2_K,Q3_K_S,Q3_K_M,Q3_K_L,Q4_K_S,Q4_K_M,Q5_K_S,Q5_K_M,Q6_K,Q8_0,Q4_0,Q4_1,Q5_0,Q5_1
status=0
echo "## kjv-3m, whole files ($MODES)"
"$IQF" ladder -m "$M" -f "$E" --imatrix "$I" -c 256 "${chunks[@]}" --types "$types" --mode "$MODES" \
  -t "$THREADS" -o "$DIR/kjv-3m" --quiet || status=$?
S="$here/tests/data/stories260K"
echo
echo "## stories260K, simulated ($MODES)"
"$IQF" ladder -m "$S/stories260K-f32.gguf" -f "$here/tests/data/text/tinystories-valid-excerpt.txt" -c 256 \
  --simulate --imatrix "$S/imatrix-groups_merged-c256.gguf" --mode "$MODES" -t "$THREADS" -o "$DIR/stories260K" \
  --quiet || status=$?
exit $status
