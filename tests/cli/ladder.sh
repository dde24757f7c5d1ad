#!/usr/bin/env bash
# CLI test for `iqforge ladder` on the bundled kjv-3m (tests/data/kjv-3m: whole files, native
# rows) and stories260K (simulated): a healthy ladder is quiet (exit 0) and writes its table and
# reports; the same inputs again are served from DIR; a deliberately broken rung (the test-only
# --test-break hook) raises the alarm naming that rung, exit status 3; the numbers equal
# `iqforge perplexity` run by hand on the kept file; --only/--prepare/--report-only merge; the
# smoke gate; usage and input errors. The alarm's rules on known ladders: tests/cli/test_ladder.c.
set -u
. "$(dirname "$0")/lib/common.sh"
D=$SRC/tests/data/kjv-3m
M=$D/kjv-3m-f32.gguf
E=$D/heldout-70k.txt
I=$D/imatrix.gguf
# Keep the sanitizer run short: fewer rungs and chunks.
CH=6
TYPES=IQ2_XS,IQ3_XXS,IQ3_S,Q4_K_S,Q4_K_M,Q8_0
[ "${IQF_SANITIZED:-}" = 1 ] && { CH=2; TYPES=IQ2_XS,IQ3_XXS,Q4_K_M; } # IQ2_XS: the smaller IQ rung the alarm test needs
L=("$CLI" ladder -m "$M" -f "$E" -c 256 --chunks $CH --imatrix "$I" -t 2)

"$CLI" ladder --help >"$T/out" 2>&1 && ok || bad "--help exit status"
expect usage "usage: iqforge ladder -m MODEL.gguf -f EVAL.txt" "$T/out"
"$CLI" ladder >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "no arguments: want exit 2"
"$CLI" ladder -m "$M" -f "$E" --types IQ9_Z -o "$T/x" >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "unknown type: want 2"
expect bad_type "unknown file type 'IQ9_Z'" "$T/out"
"$CLI" ladder -m "$M" -f "$E" --mode fastest -o "$T/x" >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "unknown mode: want 2"
"$CLI" ladder -m "$T/none.gguf" -f "$E" -o "$T/x" >"$T/out" 2>&1; [ $? -eq 1 ] && ok || bad "missing model: want 1"
expect missing_model "none\.gguf: cannot read" "$T/out"
"$CLI" ladder -m "$M" -f "$E" --imatrix "$I" --calibration "$E" -o "$T/x" >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "--imatrix with --calibration: want 2"

# 1. A healthy ladder, two modes side by side.
"${L[@]}" --types "$TYPES" --mode compat,best -o "$T/h" >"$T/h.out" 2>"$T/h.err"; rc=$?
[ $rc -eq 0 ] && ok || { bad "healthy ladder: exit $rc"; cat "$T/h.out" "$T/h.err" >&2; }
[ -s "$T/h.err" ] && bad "stderr not empty off a terminal: $(head -3 "$T/h.err")" || ok
expect header "^\| type +\| mode +\| +bytes \| +bpw \| PPL +\| mean KLD" "$T/h.out"
expect row_iq3 "^\| IQ3_XXS +\| compat +\| +15186[0-9]{2} \| +3\.30[0-9]{2} \| [0-9.]+ \+/- [0-9.]+ +\| 0\.[0-9]{6} \+/- 0\.[0-9]{6}" "$T/h.out"
expect row_best "^\| Q4_K_M +\| best " "$T/h.out"
reject no_alarm "^ALARM" "$T/h.out"
for f in ladder.json ladder.csv ladder.svg base.kld; do [ -s "$T/h/$f" ] && ok || bad "missing $f"; done
ls "$T/h"/*.gguf >/dev/null 2>&1 && bad "quantized files left without --keep-files" || ok
nrungs=$(( $(echo "$TYPES" | tr ',' '\n' | wc -l) * 2 ))
[ "$(grep -c '"type": ' "$T/h/ladder.json")" -eq "$nrungs" ] && ok || bad "json rungs != $nrungs"
[ "$(($(wc -l <"$T/h/ladder.csv") - 1))" -eq "$nrungs" ] && ok || bad "csv rows != $nrungs"
expect json_version "\"version\": \"[0-9.]+\"" "$T/h/ladder.json"
expect json_inputs "\"imatrix\": \".*imatrix\.gguf\"" "$T/h/ladder.json"
expect svg_axes "bits per weight" "$T/h/ladder.svg"
expect svg_series "data-mode=\"best\"" "$T/h/ladder.svg"
[ "$(grep -c 'class="rung"' "$T/h/ladder.svg")" -eq $((2 * nrungs)) ] && ok || bad "svg points != 2 x rungs"
reject svg_no_alarm "class=\"alarm\"" "$T/h/ladder.svg"
# In a browser, when one is installed (CI installs Debian's chromium): it renders to a picture.
BROWSER=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$BROWSER" ]; then
    (cd "$T" && timeout 120 "$BROWSER" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size=960,800 --screenshot="$T/svg.png" "file://$T/h/ladder.svg" >/dev/null 2>&1)
    png=$(stat -c %s "$T/svg.png" 2>/dev/null || echo 0)
    [ "$png" -gt 20000 ] && ok || bad "headless browser screenshot of the SVG: $png bytes"
    [ "$(head -c 8 "$T/svg.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] && ok || bad "screenshot is not a PNG"
fi

# 2. The same inputs again: nothing recomputed, same numbers.
"${L[@]}" --types "$TYPES" --mode compat,best -o "$T/h" >"$T/h2.out" 2>&1 && ok || bad "second run exit"
[ "$(grep -c '"cached": true' "$T/h/ladder.json")" -eq "$nrungs" ] && ok || bad "second run recomputed rungs"
diff <(grep '^|' "$T/h.out" | cut -d'|' -f2-8) <(grep '^|' "$T/h2.out" | cut -d'|' -f2-8) >/dev/null && ok || bad "cached numbers differ"
# Another text: a new key, recomputed.
head -c 40000 "$E" >"$T/e2.txt"
"$CLI" ladder -m "$M" -f "$T/e2.txt" -c 256 --chunks 2 --imatrix "$I" --types Q8_0 -o "$T/h" >/dev/null 2>&1 && ok || bad "new inputs exit"
grep -q '"cached": true' "$T/h/ladder.json" && bad "new inputs served from the cache" || ok

# 3. The numbers equal `iqforge perplexity` by hand on the same file.
"${L[@]}" --types IQ3_XXS --keep-files -o "$T/k" >"$T/k.out" 2>&1 && ok || bad "--keep-files exit"
[ -s "$T/k/IQ3_XXS.compat.gguf" ] && ok || bad "--keep-files kept no file"
"$CLI" perplexity -m "$T/k/IQ3_XXS.compat.gguf" -c 256 --chunks $CH -t 1 --kld "$T/k/base.kld" >"$T/p.out" 2>/dev/null
kld_hand=$(sed -n 's/^Mean *KLD: *\([0-9.]*\).*/\1/p' "$T/p.out")
kld_lad=$(awk -F, '$1=="IQ3_XXS"{printf "%.6f", $10}' "$T/k/ladder.csv")
[ -n "$kld_hand" ] && [ "$kld_hand" = "$kld_lad" ] && ok || bad "ladder KLD $kld_lad != perplexity's $kld_hand"
ppl_hand=$(sed -n 's/^Mean PPL(Q) *: *\([0-9.]*\).*/\1/p' "$T/p.out")
ppl_lad=$(awk -F, '$1=="IQ3_XXS"{printf "%.6f", $6}' "$T/k/ladder.csv")
[ -n "$ppl_hand" ] && [ "$ppl_hand" = "$ppl_lad" ] && ok || bad "ladder PPL $ppl_lad != perplexity's $ppl_hand"
bytes=$(stat -c %s "$T/k/IQ3_XXS.compat.gguf")
grep -q "^IQ3_XXS,compat,IQ,$bytes," "$T/k/ladder.csv" && ok || bad "ladder bytes != the file's $bytes"

# 4. A broken rung: the alarm names it, exit 3; its neighbours stay quiet.
"${L[@]}" --types "$TYPES" --test-break IQ3_XXS -o "$T/b" >"$T/b.out" 2>&1; rc=$?
[ $rc -eq 3 ] && ok || { bad "broken rung: exit $rc, want 3"; cat "$T/b.out" >&2; }
expect alarm_names "^ALARM: IQ3_XXS \(compat, 3\.30[0-9]+ bpw\) has mean KLD .* that of the smaller IQ2_XS .* same family \(IQ\)" "$T/b.out"
expect alarm_row "^\| IQ3_XXS +\| compat .* ALARM +\|$" "$T/b.out"
reject others_quiet "^\| (IQ2_XS|IQ3_S|Q4_K_S|Q4_K_M|Q8_0) .* ALARM" "$T/b.out"
expect exit_line "^ALARM: [0-9]+ findings?; exit status 3$" "$T/b.out"
expect json_alarm "\"kind\": \"alarm-family\", \"rung\": \"IQ3_XXS\"" "$T/b/ladder.json"
expect svg_alarm "class=\"alarm\" data-type=\"IQ3_XXS\"" "$T/b/ladder.svg"

# 5. Spread over jobs: prepare, two single-rung jobs, then the merged report.
"${L[@]}" --types IQ3_XXS,Q4_K_M,Q8_0 -o "$T/j" --prepare >"$T/j0.out" 2>&1 && ok || bad "--prepare exit"
expect prepared "^ladder: prepared " "$T/j0.out"
"${L[@]}" --types IQ3_XXS,Q4_K_M,Q8_0 -o "$T/j" --only Q4_K_M >/dev/null 2>&1 && ok || bad "--only Q4_K_M exit"
"${L[@]}" --types IQ3_XXS,Q4_K_M,Q8_0 -o "$T/j" --only iq3_xxs:compat >/dev/null 2>&1 && ok || bad "--only iq3_xxs:compat exit"
"${L[@]}" --types IQ3_XXS,Q4_K_M,Q8_0 -o "$T/j" --report-only >"$T/j.out" 2>&1 && ok || bad "--report-only exit"
[ "$(grep -c '"cached": true' "$T/j/ladder.json")" -eq 2 ] && ok || bad "merged report: want 2 finished rungs"
expect todo_row "^\| Q8_0 +\| compat .* todo +\|$" "$T/j.out"
"${L[@]}" --types IQ3_XXS -o "$T/j" --only Q6_K >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "--only of no rung: want 2"

# 6. The smoke gate.
"${L[@]}" --types Q8_0 -o "$T/s" --prompt "The LORD is my" --expect "God" >"$T/s.out" 2>&1 && ok || { bad "smoke pass: exit"; cat "$T/s.out" >&2; }
expect smoke_ok "^\| Q8_0 .* ok\+sm +\|$" "$T/s.out"
"${L[@]}" --types Q8_0 -o "$T/s2" --prompt "The LORD is my" --expect "zebra" >"$T/s2.out" 2>&1; [ $? -eq 3 ] && ok || bad "smoke fail: want exit 3"
expect smoke_alarm "^ALARM: Q8_0 \(compat\): smoke test failed: the greedy continuation \".*God.*\" does not contain" "$T/s2.out"
"${L[@]}" --types Q8_0 -o "$T/s2" --prompt "x" >"$T/out" 2>&1; [ $? -eq 2 ] && ok || bad "--prompt without --expect: want 2"

# 7. --calibration captures an importance matrix first (cached in DIR); --simulate on stories260K.
"$CLI" ladder -m "$M" -f "$E" -c 256 --chunks 2 --calibration "$E" --types IQ2_XS -o "$T/c" -t 2 >"$T/c.out" 2>&1 && ok || { bad "--calibration exit"; cat "$T/c.out" >&2; }
[ -s "$T/c/imatrix.gguf" ] && ok || bad "--calibration wrote no imatrix"
S=$SRC/tests/data/stories260K/stories260K-f32.gguf
"$CLI" ladder -m "$S" -f "$SRC/tests/data/text/tinystories-valid-excerpt.txt" -c 256 --chunks 4 --simulate \
    --types q4_K,q8_0 --mode compat,best -o "$T/sim" -t 2 >"$T/sim.out" 2>&1 && ok || { bad "--simulate exit"; cat "$T/sim.out" >&2; }
expect sim_row "^\| q4_K +\| compat +\| +[0-9]+ \| +[0-9.]+ \| " "$T/sim.out"
expect sim_header "simulated" "$T/sim.out"
# The whole default simulated ladder of stories260K with llama.cpp's imatrix is healthy: quiet.
if [ "${IQF_SANITIZED:-}" != 1 ]; then
    "$CLI" ladder -m "$S" -f "$SRC/tests/data/text/tinystories-valid-excerpt.txt" -c 256 --chunks 20 --simulate \
        --imatrix "$SRC/tests/data/stories260K/imatrix-groups_merged-c256.gguf" -o "$T/sim2" -t 2 >"$T/sim2.out" 2>&1
    rc=$?
    [ $rc -eq 0 ] && ok || { bad "healthy stories260K simulated ladder: exit $rc"; cat "$T/sim2.out" >&2; }
    [ "$(grep -c '^| [iq][q0-9]' "$T/sim2.out")" -ge 15 ] && ok || bad "stories260K ladder: fewer than 15 rungs"
fi

# 8. Interrupted: SIGINT during a run leaves no temporary file in DIR, exit 130, and finished
# rungs stay usable.
"${L[@]}" --types IQ1_S,IQ1_M,IQ2_XXS,IQ2_XS,IQ2_S,IQ3_XXS --chunks 40 -o "$T/int" >"$T/int.out" 2>&1 &
pid=$!
sleep 2
kill -INT $pid 2>/dev/null
wait $pid; rc=$?
[ $rc -eq 130 ] || [ $rc -eq 0 ] && ok || bad "SIGINT: exit $rc, want 130"
ls "$T/int" "$T/int/rungs" 2>/dev/null | grep -q '\.tmp' && bad "SIGINT left a temporary file: $(ls "$T/int")" || ok

finish ladder
