#!/usr/bin/env bash
# Runs every benchmark program built in the build directory ($1, default build): bench/bench_*.c
# become $BUILD/bench_*. Extra arguments for all of them: $BENCH_ARGS (e.g. "--rows 256").
# A benchmark that exits 77 (oracle missing) is reported as skipped.
# Then bench/quality.sh and bench/pipeline7b.sh (the whole pipeline on a 2-layer Mistral-7B shape,
# iqforge against llama-imatrix and llama-quantize when scripts/build-llama.sh has built them;
# about 20-30 minutes on 2 cores; its LAYERS, CHUNKS ... pass through; PIPELINE7B=0 skips it).
set -u
build="${1:-build}"
status=0
found=0
for b in "$build"/bench_*; do
  [ -f "$b" ] && [ -x "$b" ] || continue
  found=1
  echo "# $(basename "$b")"
  echo
  # shellcheck disable=SC2086
  "$b" ${BENCH_ARGS:-}
  rc=$?
  if [ $rc -eq 77 ]; then
    echo "(skipped: oracle not installed)"
  elif [ $rc -ne 0 ]; then
    echo "$(basename "$b") failed with status $rc" >&2
    status=1
  fi
  echo
done
[ $found -eq 1 ] || { echo "bench.sh: no bench_* programs in $build" >&2; exit 1; }
# The quality benchmark: the kjv-3m and stories260K ladders, compat against best.
echo "# bench/quality.sh"
echo
bash "$(dirname "$0")/../bench/quality.sh" "$build" || { echo "bench/quality.sh failed" >&2; status=1; }
if [ "${PIPELINE7B:-1}" != 0 ]; then
  echo
  echo "# bench/pipeline7b.sh"
  echo
  bash "$(dirname "$0")/../bench/pipeline7b.sh" "$build" || { echo "bench/pipeline7b.sh failed" >&2; status=1; }
fi
exit $status
