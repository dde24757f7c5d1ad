#!/usr/bin/env bash
# CLI test for `iqforge ladder --evaluator llama-perplexity[=PATH]` (scoring rungs with a stock
# llama-perplexity instead of the built-in engine).
#  1. Always: a stand-in evaluator that prints llama-perplexity's recorded output
#     (tests/data/ladder) checks the plumbing: the command lines it is given, the numbers that
#     reach the table, the kept logs, the cache (the evaluator's bytes are part of the key), the
#     usage errors, a failing evaluator.
#  2. CI-only, Release run (CI=true; elsewhere when llama.cpp's tools are already built by
#     scripts/build-llama.sh): the real llama-perplexity, built from the llama.cpp source bundled
#     with the oracle, on kjv-3m: every rung's numbers equal what that tool prints when run by hand
#     on the kept file, and the alarm fires on the --test-break rung as with the built-in engine.
set -u
. "$(dirname "$0")/lib/common.sh"
D=$SRC/tests/data/kjv-3m
M=$D/kjv-3m-f32.gguf
E=$D/heldout-70k.txt
I=$D/imatrix.gguf

# 1. The stand-in: records its arguments, writes the base file, prints the recorded output.
cat >"$T/fake-llama-perplexity" <<FAKE
#!/usr/bin/env bash
echo "\$*" >>"$T/fake.args"
base=; prev=
for a in "\$@"; do [ "\$prev" = --kl-divergence-base ] && base=\$a; prev=\$a; done
case " \$* " in
  *" --kl-divergence "*) cat "$SRC/tests/data/ladder/llama-perplexity-kld.log" ;;
  *) echo base >"\$base"; cat "$SRC/tests/data/ladder/llama-perplexity-base.log" ;;
esac
FAKE
chmod +x "$T/fake-llama-perplexity"
L=("$CLI" ladder -m "$M" -f "$E" -c 256 --chunks 2 --imatrix "$I" -t 2 --types Q4_K_M,Q8_0)
"${L[@]}" --evaluator "llama-perplexity=$T/fake-llama-perplexity" -o "$T/f" >"$T/f.out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || { bad "stand-in ladder: exit $rc"; cat "$T/f.out" >&2; }
expect base_ppl "base PPL 20\.5437 \+/- 1\.45041" "$T/f.out"
expect row_q4 "^\| Q4_K_M +\| compat \| +[0-9]+ \| +[0-9.]+ \| 20\.7339 \+/- 1\.4640 +\| 0\.007025 \+/- 0\.000355" "$T/f.out"
expect row_q8 "^\| Q8_0 +\| compat .*0\.007025 \+/- 0\.000355" "$T/f.out"
[ "$(grep -c -- '--kl-divergence-base' "$T/fake.args")" -eq 3 ] && ok || bad "want 1 base + 2 rung runs"
expect base_args "^-m $M -f $E -c 256 -t 2 --chunks 2 --kl-divergence-base $T/f/base\.llama\.kld$" "$T/fake.args"
expect rung_args "^-m $T/f/Q4_K_M\.compat\.gguf -c 256 -t 2 --kl-divergence-base $T/f/base\.llama\.kld --kl-divergence$" "$T/fake.args"
for f in logs/base.log logs/Q4_K_M.compat.log logs/Q8_0.compat.log ladder.json base.llama.kld; do
    [ -s "$T/f/$f" ] && ok || bad "missing $f"
done
# Served from DIR the second time; a different evaluator (other bytes) is another input.
: >"$T/fake.args"
"${L[@]}" --evaluator "llama-perplexity=$T/fake-llama-perplexity" -o "$T/f" >"$T/f2.out" 2>&1 && ok || bad "second run"
[ ! -s "$T/fake.args" ] && ok || bad "second run re-ran the evaluator: $(cat "$T/fake.args")"
echo "# changed" >>"$T/fake-llama-perplexity"
"${L[@]}" --evaluator "llama-perplexity=$T/fake-llama-perplexity" -o "$T/f" >"$T/f3.out" 2>&1 && ok || bad "third run"
[ "$(grep -c -- '--kl-divergence-base' "$T/fake.args")" -eq 3 ] && ok || bad "a changed evaluator must re-run base and rungs"
# --kv-type f32: an F32 cache without flash attention.
: >"$T/fake.args"
"${L[@]}" --types Q8_0 --kv-type f32 --evaluator "llama-perplexity=$T/fake-llama-perplexity" -o "$T/k" >/dev/null 2>&1 && ok || bad "--kv-type f32"
expect kv_f32 "-ctk f32 -ctv f32 -fa off" "$T/fake.args"
# Errors: unknown evaluator, missing executable, with --simulate (exit 2); a failing evaluator
# fails its rung (the alarm, exit 3) and names its log.
"${L[@]}" --evaluator llama-bench -o "$T/x" >"$T/e.out" 2>&1; [ $? -eq 2 ] && ok || bad "unknown evaluator: want 2"
expect unknown_eval "unknown evaluator 'llama-bench'" "$T/e.out"
"${L[@]}" --evaluator "llama-perplexity=$T/nope" -o "$T/x" >"$T/e.out" 2>&1; [ $? -eq 2 ] && ok || bad "missing evaluator: want 2"
expect missing_eval "nope: not an executable file" "$T/e.out"
"${L[@]}" --simulate --evaluator "llama-perplexity=$T/fake-llama-perplexity" -o "$T/x" >"$T/e.out" 2>&1; [ $? -eq 2 ] && ok || bad "--simulate: want 2"
printf '#!/usr/bin/env bash\nbase=; prev=\nfor a in "$@"; do [ "$prev" = --kl-divergence-base ] && base=$a; prev=$a; done\ncase " $* " in *" --kl-divergence "*) echo "load failed"; exit 1;; *) echo base >"$base"; cat %s;; esac\n' \
    "$SRC/tests/data/ladder/llama-perplexity-base.log" >"$T/failing"
chmod +x "$T/failing"
"${L[@]}" --types Q8_0 --evaluator "llama-perplexity=$T/failing" -o "$T/bad" >"$T/e.out" 2>&1; rc=$?
[ $rc -eq 3 ] && ok || bad "failing evaluator: want exit 3, got $rc"
expect failing_eval "exited with status 1 \(its output: .*logs/Q8_0\.compat\.log\)" "$T/e.out"

# 2. The real llama-perplexity (the Release run only: the sanitizer run repeats part 1).
ci=false
case "${CI:-}" in ""|0|false|FALSE|False|no) ;; *) ci=true ;; esac
[ "${IQF_SANITIZED:-}" = 1 ] && { finish ladder_evaluator; exit; }
BIN=${IQF_LLAMA_DIR:-$HOME/.cache/iqforge/llama-src}/build/bin
if $ci; then
    BIN=$(bash "$SRC/scripts/build-llama.sh" llama-perplexity 2>"$T/build.log") || { cat "$T/build.log" >&2; bad "scripts/build-llama.sh failed"; }
fi
LP=$BIN/llama-perplexity
if [ -x "$LP" ]; then
    TYPES=IQ2_XS,IQ3_XXS,Q4_K_M
    R=("$CLI" ladder -m "$M" -f "$E" -c 256 --chunks 4 --imatrix "$I" -t 2 --types $TYPES --evaluator "llama-perplexity=$LP")
    "${R[@]}" -o "$T/r" --keep-files >"$T/r.out" 2>&1; rc=$?
    [ $rc -eq 0 ] && ok || { bad "llama-perplexity ladder: exit $rc"; cat "$T/r.out" >&2; }
    for try in 1 2 3; do
        "$LP" -m "$M" -f "$E" -c 256 --chunks 4 -t 2 --kl-divergence-base "$T/hand.kld" >"$T/hand-base.log" 2>&1 || bad "by hand: base"
        grep -q "Final estimate" "$T/hand-base.log" && break
    done
    bp=$(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 +\/- \2/p' "$T/hand-base.log")
    expect hand_base "base PPL ${bp//+/\\+}" "$T/r.out"
    for t in ${TYPES//,/ }; do
        for try in 1 2 3; do # llama.cpp may lose its last log lines at exit on a loaded machine (tools/ladder_eval.c)
            "$LP" -m "$T/r/$t.compat.gguf" -c 256 -t 2 --kl-divergence-base "$T/hand.kld" --kl-divergence >"$T/hand-$t.log" 2>&1 \
                || bad "by hand: $t"
            grep -q "Same top p:" "$T/hand-$t.log" && break
        done
        # the numbers as printed by hand, against the rung's record in ladder.json (%.9g of the same decimals)
        num() { sed -n "s/^.*$1 *\([0-9.]*\)$2/\1/p" "$T/hand-$t.log"; }
        ppl=$(num 'Mean PPL(Q) *:' ' ±.*'); ppl_err=$(num 'Mean PPL(Q) *: *[0-9.]* ±' ' *$')
        kld=$(num 'Mean    KLD:' ' ±.*'); kld_err=$(num 'Mean    KLD: *[0-9.]* ±' ' *$')
        p99=$(num '99.0%   KLD:' ' *$'); top=$(num 'Same top p:' ' ±.*')
        [ -n "$kld" ] && [ -n "$ppl" ] && [ -n "$p99" ] && ok || bad "no statistics in llama-perplexity's output for $t"
        grep "\"type\": \"$t\"" "$T/r/ladder.json" >"$T/rung-$t.json"
        strip() { echo "$1" | sed 's/0*$//; s/\.$//'; }
        expect "json_${t}_ppl" "\"ppl\": $(strip "$ppl"), \"ppl_err\": $(strip "$ppl_err")," "$T/rung-$t.json"
        expect "json_${t}_kld" "\"kld\": $(strip "$kld"), \"kld_err\": $(strip "$kld_err"), \"kld_p99\": $(strip "$p99")," "$T/rung-$t.json"
        expect "table_$t" "^\| $t +\| compat .*\| $kld \+/- $kld_err .*\| +$p99 \| +$top%" "$T/r.out"
    done
    "${R[@]}" -o "$T/rb" --test-break IQ3_XXS >"$T/rb.out" 2>&1; rc=$?
    [ $rc -eq 3 ] && ok || { bad "--test-break with llama-perplexity: want exit 3, got $rc"; cat "$T/rb.out" >&2; }
    expect alarm_rung "ALARM.*IQ3_XXS" "$T/rb.out"
elif $ci; then
    bad "llama-perplexity not available under CI"
fi
finish ladder_evaluator
