#!/usr/bin/env bash
# Runs every benchmark program built in the build directory ($1, default build): bench/bench_*.c
# become $BUILD/bench_*. Extra arguments for all of them: $BENCH_ARGS (e.g. "--rows 256").
# A benchmark that exits 77 (oracle missing) is reported as skipped.
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
exit $status
