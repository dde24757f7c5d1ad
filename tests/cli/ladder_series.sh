#!/usr/bin/env bash
# CLI test for the ladder's series of iqforge's full pipeline (ladder --mode feedback,full) on the
# bundled kjv-3m: the Hessians are captured with the importance matrix from --calibration
# (tests/data/kjv-3m/calibration.txt, the model's calibration documents) and kept in DIR; the
# feedback rung is best mode with error feedback; the full rung is a --target-size plan for the
# compat rung's file bytes (never larger) with best mode and feedback; both beat compat's KLD on
# this model (a regression check: measured 0.61x and 0.36x on IQ3_XXS, docs/QUALITY.md); the
# table, the ratio table and the plot carry the series; usage errors. (Under the sanitizers the
# full rung, whose sensitivity calibration dominates the time, is left to the Release run.)
set -u
. "$(dirname "$0")/lib/common.sh"
D=$SRC/tests/data/kjv-3m
M=$D/kjv-3m-f32.gguf
E=$D/heldout-70k.txt
C=$D/calibration.txt
MODES=compat,feedback,full
[ "${IQF_SANITIZED:-}" = 1 ] && MODES=compat,feedback
L=("$CLI" ladder -m "$M" -f "$E" -c 256 --chunks 3 -t 2 --types IQ3_XXS)

"${L[@]}" --calibration "$C" --mode "$MODES" -o "$T/s" >"$T/s.out" 2>&1; rc=$?
[ $rc -eq 0 ] && ok || { bad "series ladder: exit $rc"; cat "$T/s.out" >&2; }
[ -s "$T/s/hessian.gguf" ] && [ -s "$T/s/imatrix.gguf" ] && ok || bad "the Hessians and imatrix are kept in DIR"
row() { grep -E "^\| IQ3_XXS +\| $1 +\|" "$T/s.out"; }
col() { row "$1" | awk -F'|' -v c="$2" '{ gsub(/ /, "", $c); print $c }'; }
[ -n "$(row feedback)" ] && ok || bad "no feedback row"
ck=$(col compat 7 | sed 's/+\/-.*//'); fk=$(col feedback 7 | sed 's/+\/-.*//')
awk -v a="$fk" -v b="$ck" 'BEGIN { exit !(a > 0 && a < b) }' && ok || bad "feedback KLD $fk not below compat's $ck"
expect ratio_table "^\| IQ3_XXS +\| [0-9.]+ \+/- [0-9.]+ +\| feedback +\| " "$T/s.out"
expect svg_series "data-mode=\"feedback\"" "$T/s/ladder.svg"
if [ "${IQF_SANITIZED:-}" != 1 ]; then
    [ -n "$(row full)" ] && ok || bad "no full row"
    cb=$(col compat 4); fb=$(col full 4); fl=$(col full 7 | sed 's/+\/-.*//')
    [ -n "$fb" ] && [ "$fb" -le "$cb" ] && ok || bad "full rung $fb bytes above compat's $cb"
    awk -v a="$fl" -v b="$fk" 'BEGIN { exit !(a > 0 && a < b) }' && ok || bad "full KLD $fl not below feedback's $fk"
    expect geomean "^geometric mean of full/compat KLD over 1 types: 0\.[0-9]+" "$T/s.out"
fi
# The same folder again: everything served from DIR.
"${L[@]}" --calibration "$C" --mode "$MODES" -o "$T/s" >"$T/s2.out" 2>&1 && ok || bad "second run"
[ "$(grep -c '^| IQ3_XXS' "$T/s2.out")" -ge 2 ] && ok || bad "second run table"
cmp -s <(grep '^| IQ3_XXS' "$T/s.out" | cut -d'|' -f2-8) <(grep '^| IQ3_XXS' "$T/s2.out" | cut -d'|' -f2-8) && ok || bad "cached numbers differ"

# Usage: a series needs Hessians; not with --simulate; unknown modes list the four.
"${L[@]}" --imatrix "$D/imatrix.gguf" --mode feedback -o "$T/x" >"$T/e.out" 2>&1; [ $? -eq 2 ] && ok || bad "feedback without Hessians: want 2"
expect need_hessian "need --hessian FILE or --calibration TEXT" "$T/e.out"
"${L[@]}" --imatrix "$D/imatrix.gguf" --simulate --types iq3_xxs --mode full --hessian "$T/s/hessian.gguf" -o "$T/x" >"$T/e.out" 2>&1
[ $? -eq 2 ] && ok || bad "full with --simulate: want 2"
"${L[@]}" --mode fast -o "$T/x" >"$T/e.out" 2>&1; [ $? -eq 2 ] && ok || bad "unknown mode: want 2"
expect modes_listed "available: compat, best, feedback, full" "$T/e.out"
# --hessian FILE: the captured file given back, with the shipped imatrix.
"${L[@]}" --imatrix "$D/imatrix.gguf" --hessian "$T/s/hessian.gguf" --mode feedback -o "$T/h" >"$T/h.out" 2>&1 && ok || { bad "--hessian FILE"; cat "$T/h.out" >&2; }
[ ! -e "$T/h/hessian.gguf" ] && ok || bad "no capture with --hessian"
finish ladder_series
