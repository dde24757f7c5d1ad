#!/usr/bin/env bash
# The architecture matrix (issue 23): every model llama.cpp's own tests/test-llama-archs.cpp
# writes (`test-llama-archs -s 42 -o DIR`: a random-weight GGUF per architecture its model saver
# supports, dense and MoE variants), quantized by llama-quantize and by iqforge to
#   Q4_K_M Q2_K Q8_0 Q6_K, IQ3_XXS and IQ2_XS with an importance matrix,
#   and MXFP4_MOE where the model has 3-D expert tensors and iqforge knows the file type;
# the two outputs must be byte-identical wherever llama-quantize accepts the model.
# The imatrix is llama-imatrix's on the model (2 chunks of 64 tokens of TinyStories) where
# libllama runs it and llama-quantize accepts it, else a synthetic one with the same names and
# counts (iqf-genimatrix). Reports N/M pairs identical, the pairs llama-quantize refuses, and
# every difference; exits 1 on a difference or an iqforge refusal of an accepted pair.
#
# Usage: scripts/arch-matrix.sh [BUILD_DIR] [-j JOBS] [--only REGEX] [--keep DIR] [--iq-every K]
#   BUILD_DIR  iqforge's build folder (default build; needs iqforge and iqf-genimatrix)
#   -j JOBS    models processed in parallel (default nproc)
#   --only RE  models whose file name matches RE (grep -E)
#   --keep DIR keep the differing outputs there
#   --iq-every K  IQ3_XXS and IQ2_XS on every K-th model only (sorted by name, the first
#              included; default 1: all). llama-quantize spends ~7 s (IQ3_XXS) and ~4 s (IQ2_XS)
#              of CPU on each of these 1M-weight models, against ~0.15 s for the other types:
#              CI uses --iq-every 4 to stay within its time.
# Needs llama.cpp's tools: scripts/build-llama.sh builds them (cached outside the repo).
# The models are cached in $IQF_ARCH_MODELS (default ~/.cache/iqforge/archs/models-s42).
# CI-only (.ci/run runs it under CI=true); not part of ctest.
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
build=build
jobs=$(nproc)
only=.
keep=
iq_every=1
while [ $# -gt 0 ]; do
  case "$1" in
    -j) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --iq-every) iq_every=$2; shift 2 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) build=$1; shift ;;
  esac
done
IQF=$root/$build/iqforge
GENIM=$root/$build/iqf-genimatrix
[ -x "$IQF" ] && [ -x "$GENIM" ] || { echo "arch-matrix: $IQF or $GENIM missing (build first)" >&2; exit 2; }
bin=$(bash scripts/build-llama.sh) || { echo "arch-matrix: llama.cpp tools failed to build" >&2; exit 2; }
models=${IQF_ARCH_MODELS:-$HOME/.cache/iqforge/archs/models-s42}
if [ ! -f "$models/.complete" ]; then
  rm -rf "$models" && mkdir -p "$models"
  "$bin/test-llama-archs" -s 42 -o "$models" >"$models/.log" 2>&1 || { echo "arch-matrix: test-llama-archs -o failed" >&2; tail "$models/.log" >&2; exit 2; }
  touch "$models/.complete"
fi
text=$root/tests/data/text/tinystories-valid-excerpt.txt
work=$(mktemp -d /tmp/iqf-archs.XXXXXX)
trap 'rm -rf "$work"' EXIT
[ -n "$keep" ] && mkdir -p "$keep"
mxfp4=0
"$IQF" quantize --help 2>&1 | grep -q MXFP4_MOE && mxfp4=1
export IQF GENIM bin text work keep mxfp4 iq_every

one_model() {
  local idx=$1 m=$2 base d res
  base=$(basename "$m" .gguf)
  d=$work/$base
  mkdir -p "$d"
  res=$d/result
  : >"$res"
  local fts="Q4_K_M Q2_K Q8_0 Q6_K"
  [ $((idx % iq_every)) = 0 ] && fts="$fts IQ3_XXS IQ2_XS"
  if [ "$mxfp4" = 1 ] && "$IQF" inspect "$m" 2>/dev/null | grep -Eq ' [0-9]+ x [0-9]+ x [0-9]+ '; then
    fts="$fts MXFP4_MOE"
  fi
  local im=$d/im.gguf imkind=unused
  if [ $((idx % iq_every)) = 0 ]; then
    imkind=llama-imatrix
    if ! "$bin/llama-imatrix" -m "$m" -f "$text" -c 64 --chunks 2 -t 1 -o "$im" >"$d/imatrix.log" 2>&1 || [ ! -s "$im" ]; then
      "$GENIM" "$m" "$im" 42 >"$d/genim.log" 2>&1 || imkind=none
      [ "$imkind" = none ] || imkind=synthetic
    fi
  fi
  local ft args rl ri why
  for ft in $fts; do
    args=()
    case $ft in IQ3_XXS|IQ2_XS) args=(--imatrix "$im") ;; esac
    "$bin/llama-quantize" "${args[@]}" "$m" "$d/l.gguf" "$ft" 1 >"$d/l.log" 2>&1; rl=$?
    if [ $rl != 0 ] && [ ${#args[@]} -gt 0 ] && [ "$imkind" = llama-imatrix ]; then
      # llama-imatrix's matrix may miss tensors (experts never routed, layers not run): synthetic
      "$GENIM" "$m" "$d/imsyn.gguf" 42 >/dev/null 2>&1 && {
        args=(--imatrix "$d/imsyn.gguf")
        "$bin/llama-quantize" "${args[@]}" "$m" "$d/l.gguf" "$ft" 1 >"$d/l.log" 2>&1; rl=$?
      }
    fi
    if [ $rl != 0 ]; then
      why=$(grep -E "failed to quantize|error|Error|GGML_ASSERT|what\(\)" "$d/l.log" | tail -1 | tr -s ' ' | cut -c1-160)
      echo "REFUSED $base $ft llama-quantize: ${why:-exit $rl}" >>"$res"
      rm -f "$d/l.gguf"
      continue
    fi
    "$IQF" quantize "${args[@]}" "$m" "$d/i.gguf" "$ft" 1 >"$d/i.log" 2>&1; ri=$?
    if [ $ri != 0 ]; then
      echo "IQFAIL $base $ft iqforge: $(tail -1 "$d/i.log" | cut -c1-200)" >>"$res"
    elif cmp -s "$d/l.gguf" "$d/i.gguf"; then
      echo "SAME $base $ft" >>"$res"
    else
      echo "DIFF $base $ft $(cmp "$d/l.gguf" "$d/i.gguf" 2>&1 | head -1 | cut -c1-120)" >>"$res"
      [ -n "$keep" ] && cp "$d/l.gguf" "$keep/$base.$ft.llama.gguf" && cp "$d/i.gguf" "$keep/$base.$ft.iqforge.gguf" &&
        { [ ${#args[@]} -gt 0 ] && cp "${args[1]}" "$keep/$base.imatrix.gguf"; true; }
    fi
    rm -f "$d/l.gguf" "$d/i.gguf"
  done
  echo "IMATRIX $base $imkind" >>"$res"
  rm -f "$d"/*.gguf
}
export -f one_model

start=$(date +%s)
ls "$models"/*.gguf | grep -E -- "$only" | awk '{print NR - 1, $0}' | xargs -P "$jobs" -n 2 bash -c 'one_model "$@"' _
cat "$work"/*/result >"$work/all" 2>/dev/null
n_same=$(grep -c '^SAME ' "$work/all")
n_diff=$(grep -c '^DIFF ' "$work/all")
n_fail=$(grep -c '^IQFAIL ' "$work/all")
n_ref=$(grep -c '^REFUSED ' "$work/all")
n_models=$(ls "$work" | grep -vc '^all$')
n_ok_models=0
for r in "$work"/*/result; do
  if ! grep -qE '^(DIFF|IQFAIL) ' "$r" && grep -q '^SAME ' "$r"; then n_ok_models=$((n_ok_models + 1)); fi
done
m=$((n_same + n_diff + n_fail))
echo "== llama-quantize refuses ($n_ref pairs):"
grep '^REFUSED ' "$work/all" | sort | sed 's/^REFUSED /  /'
echo "== imatrix: $(grep -c 'IMATRIX .* llama-imatrix' "$work/all") models with llama-imatrix's, $(grep -c 'IMATRIX .* synthetic' "$work/all") synthetic"
grep '^IMATRIX .* synthetic' "$work/all" | sed 's/^IMATRIX /  synthetic: /' | sort
if [ $((n_diff + n_fail)) -gt 0 ]; then
  echo "== differences ($((n_diff + n_fail))):"
  grep -E '^(DIFF|IQFAIL) ' "$work/all" | sort | sed 's/^/  /'
fi
echo "arch-matrix: $n_same/$m (model, file type) pairs byte-identical with llama-quantize over $n_models models" \
     "($n_ok_models models identical on every accepted type; IQ3_XXS/IQ2_XS on every ${iq_every}th);" \
     "$n_ref pairs refused by llama-quantize; $(( $(date +%s) - start )) s"
[ $((n_diff + n_fail)) -eq 0 ] && [ "$m" -gt 0 ]
