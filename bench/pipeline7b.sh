#!/usr/bin/env bash
# pipeline7b.sh - the whole pipeline on a Mistral-7B-shaped model (iqf-genmodel: full shapes, F16,
# random weights, llama SPM vocabulary; LAYERS of its 32 layers), iqforge against llama.cpp's tools
# in the same run (iqforge first, then the reference tools):
#   imatrix         iqforge imatrix --hessian, CHUNKS chunks of CTX tokens  | llama-imatrix, same chunks
#   imatrix plain   iqforge imatrix (no Hessians), same chunks              | llama-imatrix (same row)
#   IQ3_XXS recipe  iqforge quantize IQ3_XXS (compat, its imatrix)          | llama-quantize IQ3_XXS (llama-imatrix's)
#   target best     quantize --target-size S --mode best --hessian H --imatrix IM --calibrate TEXT
#   target default  quantize --target-size S --imatrix IM --calibrate TEXT
# S is the size of the IQ3_XXS recipe file (iqforge's recipe output is llama-quantize's bytes;
# the reference file's size, when it ran, is printed beside it). Each phase: wall, CPU (user +
# sys) and peak RSS from /usr/bin/time; the quantize --target-size log's phase lines (target: /
# calibrate: ... in X s, and the final "quantized ..." line) show the sensitivity step.
#
# Growth mode (LAYERS_LIST="2 4 8" set): only `quantize --dry-run --target-size S --imatrix IM
# --calibrate TEXT` (genmodel's synthetic imatrix; S the IQ3_XXS dry run's "would be" MiB: its
# tensor data without the metadata, ~0.7 MB under the recipe file) at each layer count, to show
# how the sensitivity step grows with depth.
#
# usage: bench/pipeline7b.sh [BUILD]
# env: LAYERS (2; 32 = the whole 7B shape, a 14.5 GB F16 file), LAYERS_LIST (growth mode),
#      WORK (folder for the files, default BUILD/bench-pipeline7b; deleted at the end unless
#      KEEP=1), THREADS (nproc), CHUNKS (16), CTX (512), TEXT (tests/data/text/wiki-calibration.txt:
#      27383 tokens with this vocabulary, 53 chunks of 512), PLAIN (1: also the imatrix without
#      Hessians, the like-for-like row against llama-imatrix; 0 skips it),
#      LLAMA_BIN (llama.cpp's tools; default ${IQF_LLAMA_DIR:-~/.cache/iqforge/llama-src}/build/bin,
#      as scripts/build-llama.sh builds them; REF_BUILD=1 builds them first; REF=0 skips them).
set -u
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "${1:-$here/build}" && pwd)" || exit 2
IQF="$build/iqforge"
GEN="$build/iqf-genmodel"
VOCAB="$here/tests/data/vocab/ggml-vocab-llama-spm.gguf"
LAYERS="${LAYERS:-2}"
WORK="${WORK:-$build/bench-pipeline7b}"
KEEP="${KEEP:-0}"
THREADS="${THREADS:-$(nproc)}"
CHUNKS="${CHUNKS:-16}"
CTX="${CTX:-512}"
TEXT="${TEXT:-$here/tests/data/text/wiki-calibration.txt}"
PLAIN="${PLAIN:-1}"
REF="${REF:-1}"
LLAMA_BIN="${LLAMA_BIN:-${IQF_LLAMA_DIR:-$HOME/.cache/iqforge/llama-src}/build/bin}"
for x in "$IQF" "$GEN"; do
  [ -x "$x" ] || { echo "pipeline7b: $x missing (make build)" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "pipeline7b: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }
mkdir -p "$WORK" || exit 2
WORK="$(cd "$WORK" && pwd)"
cleanup() { [ "$KEEP" = 1 ] || rm -f "$WORK"/p7b-*; rmdir "$WORK" 2>/dev/null; true; }
trap cleanup EXIT
status=0

# timed NAME CMD...: runs CMD, its output in $WORK/p7b-NAME.log, the figures in $WORK/p7b-NAME.time
# ("wall user sys maxrss_kb"). Returns CMD's status.
timed() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/p7b-$name.time" "$@" >"$WORK/p7b-$name.log" 2>&1
  local rc=$?
  [ $rc = 0 ] || { echo "pipeline7b: $name failed ($rc); the last lines of its log:" >&2; tail -5 "$WORK/p7b-$name.log" >&2; }
  return $rc
}
# fig NAME: "wall cpu rss_gb" of a timed run, or "- - -"
fig() {
  local f="$WORK/p7b-$1.time"
  [ -s "$f" ] || { echo "- - -"; return; }
  tail -1 "$f" | awk '{ printf "%.1f %.1f %.2f\n", $1, $2 + $3, $4 / 1048576 }'
}
# ok NAME: the run's figures exist and it did not fail
ok() { [ -s "$WORK/p7b-$1.time" ] && ! grep -q "^Command exited with non-zero status" "$WORK/p7b-$1.time"; }
# phase lines of a quantize --target-size log
phases() {
  grep -E '^(target|calibrate):.* in [0-9.]+ s|^quantized .* in [0-9.]+ s' "$WORK/p7b-$1.log" | sed 's/^/    /'
}
sz() { stat -c %s "$1" 2>/dev/null || echo 0; }

if [ -n "${LAYERS_LIST:-}" ]; then
  echo "## sensitivity step against depth: quantize --dry-run --target-size (IQ3_XXS size) --imatrix --calibrate"
  echo "(model: iqf-genmodel Mistral-7B shape, F16, genmodel's synthetic imatrix; $THREADS threads; text $(basename "$TEXT"))"
  echo
  rows=()
  for n in $LAYERS_LIST; do
    m="$WORK/p7b-g$n.gguf"
    "$GEN" "$m" --layers "$n" --imatrix "$WORK/p7b-g$n-im.gguf" --vocab "$VOCAB" || { status=1; continue; }
    mib=$("$IQF" quantize --dry-run --imatrix "$WORK/p7b-g$n-im.gguf" "$m" IQ3_XXS 2>&1 |
      sed -n 's/.* would be \([0-9.]*\) MiB.*/\1/p')
    S=$(awk -v m="$mib" 'BEGIN { printf "%d", m * 1048576 }')
    timed "g$n" "$IQF" quantize --dry-run --target-size "$S" --imatrix "$WORK/p7b-g$n-im.gguf" \
      --calibrate "$TEXT" "$m" IQ3_XXS "$THREADS" || status=1
    echo "### $n layers (target $S bytes)"
    phases "g$n"
    l="$WORK/p7b-g$n.log"
    get() { sed -n "s/.*$1 \([0-9.]*\) s.*/\1/p" "$l" | head -1; }
    read -r w c r <<<"$(fig "g$n")"
    rows+=("| $n | $(get 'measured in') | $(get 'layer cache in') | $(get 'probes in') | $(get 'checked in') | $w | $c | $r |")
    rm -f "$m"
  done
  echo
  echo "| layers | measured s | distributions + layer cache s | probes s | checked s | dry run wall s | CPU s | peak RSS GiB |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  exit $status
fi

M="$WORK/p7b-model.gguf"
echo "## 7B-shape pipeline: $LAYERS of 32 layers, F16, $CHUNKS chunks of $CTX tokens, $THREADS threads"
"$GEN" "$M" --layers "$LAYERS" --vocab "$VOCAB" || { echo "pipeline7b: iqf-genmodel failed" >&2; exit 1; }
echo "model: $(sz "$M") bytes; text: $(basename "$TEXT") ($(wc -c <"$TEXT") bytes)"

# 1. importance matrices
timed imatrix "$IQF" imatrix -m "$M" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
  -o "$WORK/p7b-im.gguf" --hessian "$WORK/p7b-h.gguf" || status=1
grep -q "computing over $CHUNKS chunks" "$WORK/p7b-imatrix.log" ||
  echo "note: iqforge imatrix did not run $CHUNKS chunks: $(grep -m1 'computing over' "$WORK/p7b-imatrix.log")"
if [ "$PLAIN" = 1 ]; then
  timed imatrix-plain "$IQF" imatrix -m "$M" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    -o "$WORK/p7b-im-plain.gguf" || status=1
fi
# 2. the IQ3_XXS recipe, whose size is the target
timed recipe "$IQF" quantize --imatrix "$WORK/p7b-im.gguf" "$M" "$WORK/p7b-iq3xxs.gguf" IQ3_XXS "$THREADS" || status=1
S=$(sz "$WORK/p7b-iq3xxs.gguf")
if [ "$S" = 0 ]; then
  mib=$("$IQF" quantize --dry-run "$M" IQ3_XXS 2>&1 | sed -n 's/.* would be \([0-9.]*\) MiB.*/\1/p')
  S=$(awk -v m="$mib" 'BEGIN { printf "%d", m * 1048576 }')
  echo "note: target from the dry run's $mib MiB"
fi
echo "target size S: $S bytes (iqforge's IQ3_XXS recipe file)"

# 3. size-targeted quantization, best + Hessians, then the default
timed best "$IQF" quantize --target-size "$S" --mode best --hessian "$WORK/p7b-h.gguf" \
  --imatrix "$WORK/p7b-im.gguf" --calibrate "$TEXT" "$M" "$WORK/p7b-best.gguf" IQ3_XXS "$THREADS" || status=1
timed default "$IQF" quantize --target-size "$S" --imatrix "$WORK/p7b-im.gguf" --calibrate "$TEXT" \
  "$M" "$WORK/p7b-default.gguf" IQ3_XXS "$THREADS" || status=1
echo "files: best $(sz "$WORK/p7b-best.gguf") bytes, default $(sz "$WORK/p7b-default.gguf") bytes"
# 4. the reference tools, last (the same model, chunks and threads): llama-imatrix, then
# llama-quantize IQ3_XXS with its matrix
ref_note=""
if [ "$REF" = 1 ] && [ "${REF_BUILD:-0}" = 1 ]; then
  LLAMA_BIN=$(bash "$here/scripts/build-llama.sh" llama-imatrix llama-quantize) || ref_note="scripts/build-llama.sh failed"
fi
LI="$LLAMA_BIN/llama-imatrix"; LQ="$LLAMA_BIN/llama-quantize"
have_li=0; have_lq=0
if [ "$REF" = 1 ]; then
  [ -x "$LI" ] && have_li=1 || ref_note="$ref_note llama-imatrix not in $LLAMA_BIN;"
  [ -x "$LQ" ] && have_lq=1 || ref_note="$ref_note llama-quantize not in $LLAMA_BIN;"
  [ $have_li = 1 ] && [ $have_lq = 1 ] ||
    ref_note="$ref_note (REF_BUILD=1, or scripts/build-llama.sh llama-imatrix llama-quantize, builds them)"
else
  ref_note="REF=0: reference tools not run"
fi

if [ $have_li = 1 ]; then
  timed ref-imatrix "$LI" -m "$M" -f "$TEXT" -c "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    -o "$WORK/p7b-ref-im.gguf" || status=1
  ok ref-imatrix && [ -s "$WORK/p7b-ref-im.gguf" ] || { have_lq=0; ref_note="$ref_note llama-imatrix failed;"; }
elif [ $have_lq = 1 ]; then
  have_lq=0; ref_note="$ref_note llama-quantize not run (no llama-imatrix matrix to give it);"
fi

if [ $have_lq = 1 ]; then
  timed ref-recipe "$LQ" --imatrix "$WORK/p7b-ref-im.gguf" "$M" "$WORK/p7b-ref-iq3xxs.gguf" IQ3_XXS "$THREADS" || status=1
fi
echo
echo "quantize --target-size --mode best --hessian (phase lines of its log):"
phases best
echo "quantize --target-size (default; phase lines of its log):"
phases default
echo
[ $have_lq = 1 ] && echo "llama-quantize's IQ3_XXS file: $(sz "$WORK/p7b-ref-iq3xxs.gguf") bytes (iqforge's: $S)" && echo
[ -n "$ref_note" ] && echo "reference: $ref_note" && echo

# 5. the table
row() { # LABEL IQF_RUN REF_RUN
  local w c r rw rc rr ratio="-"
  read -r w c r <<<"$(fig "$2")"
  read -r rw rc rr <<<"$(fig "${3:-none}")"
  [ "$rw" != - ] && [ "$w" != - ] && ratio=$(awk -v a="$w" -v b="$rw" -v c="$c" -v d="$rc" \
    'BEGIN { if (b > 0 && d > 0) printf "%.2fx wall, %.2fx CPU", a / b, c / d; else print "-" }')
  echo "| $1 | $w | $c | $r | $rw | $rc | $rr | $ratio |"
}
echo "| phase ($LAYERS layers) | iqforge wall s | CPU s | peak RSS GiB | reference wall s | CPU s | peak RSS GiB | ratio (iqforge / reference) |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
row "imatrix --hessian, $CHUNKS x $CTX (ref: llama-imatrix)" imatrix ref-imatrix
[ "$PLAIN" = 1 ] && row "imatrix, $CHUNKS x $CTX (ref: llama-imatrix)" imatrix-plain ref-imatrix
row "quantize IQ3_XXS recipe (ref: llama-quantize)" recipe ref-recipe
row "quantize --target-size S --mode best --hessian --calibrate" best ref-recipe
row "quantize --target-size S --calibrate" default ref-recipe
exit $status
