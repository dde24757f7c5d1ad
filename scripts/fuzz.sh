#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] - builds every fuzz/fuzz_*.c with clang -fsanitize=fuzzer,address,
# undefined against the library sources and runs each target for SECONDS (default 60).
#
# Seeds: fuzz/corpus/<name>/ (name = file name without "fuzz_" and ".c") if present, plus every
# tests/data/**/*.gguf and *.dat under 2 MiB. The working corpus persists in build-fuzz/corpus/<name>
# and crash inputs go to build-fuzz/artifacts/. Environment: FUZZ_CC (clang), FUZZ_MAX_LEN
# (131072), FUZZ_TARGETS (space-separated names to run only some), FUZZ_JOBS (2, compile only).
# Exit status: 0 if no target found a problem.
set -uo pipefail
SECS=${1:-60}
[ -n "$SECS" ] || SECS=60
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/build-fuzz"
CC=${FUZZ_CC:-clang}
MAXLEN=${FUZZ_MAX_LEN:-131072}
JOBS=${FUZZ_JOBS:-2}
CFLAGS="-std=c11 -D_GNU_SOURCE -O1 -g -fno-omit-frame-pointer -ffp-contract=off -fno-sanitize-recover=all \
 -I$ROOT/include -I$ROOT/src -Wall -Wextra"
mkdir -p "$OUT/obj" "$OUT/corpus" "$OUT/artifacts"

command -v "$CC" >/dev/null || { echo "fuzz.sh: $CC not found (libFuzzer needs clang)" >&2; exit 1; }

# 1. The library, once, instrumented for coverage (fuzzer-no-link) and sanitizers.
echo "fuzz.sh: building the library with $CC"
find "$ROOT/src" -name '*.c' | sort | while read -r f; do
    rel=${f#"$ROOT/src/"}
    echo "$f $OUT/obj/${rel//\//_}.o"
done | xargs -P "$JOBS" -n 2 sh -c "$CC $CFLAGS -fsanitize=fuzzer-no-link,address,undefined -c \"\$0\" -o \"\$1\"" || {
    echo "fuzz.sh: library build failed" >&2; exit 1; }
rm -f "$OUT/libiqforge-fuzz.a"
ar rcs "$OUT/libiqforge-fuzz.a" "$OUT"/obj/*.o

# 2. Targets.
status=0
summary=""
for src in "$ROOT"/fuzz/fuzz_*.c; do
    [ -e "$src" ] || continue
    base=$(basename "$src" .c)
    name=${base#fuzz_}
    if [ -n "${FUZZ_TARGETS:-}" ] && ! [[ " $FUZZ_TARGETS " == *" $name "* ]]; then continue; fi
    bin="$OUT/$base"
    if ! $CC $CFLAGS -fsanitize=fuzzer,address,undefined "$src" "$OUT/libiqforge-fuzz.a" -lm -lpthread -o "$bin"; then
        echo "fuzz.sh: $base does not build" >&2
        status=1
        summary+="$base: BUILD FAILED"$'\n'
        continue
    fi
    corpus="$OUT/corpus/$name"
    seeds="$OUT/seeds/$name"
    mkdir -p "$corpus" "$seeds"
    [ -d "$ROOT/fuzz/corpus/$name" ] && cp -f "$ROOT/fuzz/corpus/$name"/* "$seeds/" 2>/dev/null
    find "$ROOT/tests/data" \( -name '*.gguf' -o -name '*.dat' \) -size -2048k 2>/dev/null | while read -r f; do
        cp -f "$f" "$seeds/$(echo "${f#"$ROOT/tests/data/"}" | tr / _)"
    done
    echo "fuzz.sh: running $base for $SECS s"
    log="$OUT/$base.log"
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
        "$bin" -max_total_time="$SECS" -max_len="$MAXLEN" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$OUT/artifacts/$base-" "$corpus" "$seeds" >"$log" 2>&1
    rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    ncorp=$(find "$corpus" -type f | wc -l)
    if [ $rc -ne 0 ]; then
        status=1
        summary+="$base: FAILED (exit $rc), ${execs:-?} executions; see $log and $OUT/artifacts/"$'\n'
        grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$log" | head -5 >&2
    else
        summary+="$base: ok, ${execs:-?} executions in ${SECS}s, ${cov:-cov ?}, corpus $ncorp files"$'\n'
    fi
done
echo "--- fuzz summary ---"
printf '%s' "$summary"
exit $status
