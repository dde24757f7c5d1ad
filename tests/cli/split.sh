#!/usr/bin/env bash
# gguf-split models (PREFIX-00001-of-00003.gguf ...) through the CLI, given the first part:
# quantize gives the same bytes as from the single file; --keep-split writes 3 parts (readable,
# together the same tensors and types as the single output); inspect lists the parts; perplexity,
# imatrix and generate on split stories260K give exactly the single file's output; a later part
# is refused naming the first; peak RSS of quantizing the 3-part model is not above the single
# file's; SIGTERM during --keep-split leaves none of the parts. Bytes against llama-quantize on
# split input / --keep-split: tests/quantize/test_quantize_oracle.c; reader edge cases: tests/gguf/test_gguf.c.
set -u
. "$(dirname "$0")/lib/common.sh"
GEN="$(dirname "$CLI")/iqf-genmodel"
set -m

"$GEN" "$T/one.gguf" --scale 4 --layers 4 --imatrix "$T/im.gguf" || { echo "generator failed"; exit 1; }
"$GEN" "$T/sp.gguf" --from "$T/one.gguf" --split 3 || { echo "split failed"; exit 1; }
[ -f "$T/sp-00001-of-00003.gguf" ] && [ -f "$T/sp-00003-of-00003.gguf" ] && ok || bad "split parts not written"

# quantize: the split input gives the single file's bytes; peak RSS no higher, within 2% or
# 2 MiB of slack, whichever is more (measured: within 0.6 MiB either way; under ASan the
# allocator's own pages move it by that much from run to run).
rss() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
r1=$(rss "$CLI" quantize --quiet "$T/one.gguf" "$T/q1.gguf" Q8_0 1)
r3=$(rss "$CLI" quantize --quiet "$T/sp-00001-of-00003.gguf" "$T/q3.gguf" Q8_0 1)
cmp -s "$T/q1.gguf" "$T/q3.gguf" && ok || bad "split input quantizes differently from the single file"
echo "peak RSS quantize Q8_0 of 135 MiB: single file ${r1} KiB, 3 parts ${r3} KiB"
slack=$(( r1 / 50 > 2048 ? r1 / 50 : 2048 ))
[ -n "$r1" ] && [ -n "$r3" ] && [ "$r3" -le $((r1 + slack)) ] && ok || bad "peak RSS: 3 parts $r3 KiB > single $r1 KiB"

# --keep-split: three parts named from OUT (its .gguf dropped), with the split keys.
"$CLI" quantize --quiet --keep-split --imatrix "$T/im.gguf" "$T/sp-00001-of-00003.gguf" "$T/k.gguf" Q4_K_M 2 >/dev/null 2>"$T/err" &&
    ok || bad "--keep-split: $(cat "$T/err")"
for k in 1 2 3; do [ -f "$T/k-0000$k-of-00003.gguf" ] && ok || bad "--keep-split part $k missing"; done
[ -e "$T/k.gguf" ] && bad "--keep-split also wrote k.gguf" || ok
"$CLI" inspect "$T/k-00001-of-00003.gguf" >"$T/ins" 2>&1 && ok || bad "inspect of the parts: $(head -3 "$T/ins")"
grep -q "^split model: 3 parts, .* 39 tensors in all; metadata from part 1$" "$T/ins" && ok || bad "inspect: no split line"
grep -Eq "^  split\.count +u16 += 3$" "$T/ins" && ok || bad "inspect: split.count"
grep -Eq "^  split\.tensors\.count +i32 += 39$" "$T/ins" && ok || bad "inspect: split.tensors.count"
"$CLI" quantize --quiet --imatrix "$T/im.gguf" "$T/one.gguf" "$T/k1.gguf" Q4_K_M 2 >/dev/null 2>&1
"$CLI" inspect --no-kv "$T/k1.gguf" | awk '$2 ~ /\./ {print $2, $4, $5}' | sort >"$T/t1"
awk '$2 ~ /\./ && NF >= 7 {print $2, $4, $5}' "$T/ins" | sort >"$T/t3"
[ -s "$T/t1" ] && cmp -s "$T/t1" "$T/t3" && ok || bad "--keep-split parts hold other tensors/types than the single output"
"$CLI" inspect "$T/k-00002-of-00003.gguf" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "part 2 of a 3-part split model: give the first part, .*k-00001-of-00003.gguf" "$T/err" && ok ||
    bad "a later part: $(cat "$T/err")"
"$CLI" quantize "$T/sp-00002-of-00003.gguf" "$T/x.gguf" Q8_0 >/dev/null 2>"$T/err"
[ $? -eq 1 ] && [ ! -e "$T/x.gguf" ] && grep -q "give the first part" "$T/err" && ok || bad "quantize of part 2: $(cat "$T/err")"
mv "$T/sp-00003-of-00003.gguf" "$T/gone.gguf"
"$CLI" quantize "$T/sp-00001-of-00003.gguf" "$T/x.gguf" Q8_0 >/dev/null 2>"$T/err"
[ $? -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "sp-00003-of-00003.gguf: cannot open" "$T/err" && ok ||
    bad "missing part: $(cat "$T/err")"
mv "$T/gone.gguf" "$T/sp-00003-of-00003.gguf"

# SIGTERM while the parts are written: none of them (nor a temporary) is left.
mkdir "$T/o"
"$CLI" quantize --quiet --keep-split --imatrix "$T/im.gguf" "$T/sp-00001-of-00003.gguf" "$T/o/k.gguf" IQ2_XXS 1 >/dev/null 2>"$T/err" &
pid=$!
n=0
while [ -z "$(ls "$T/o")" ] && [ $n -lt 1000 ]; do sleep 0.01; n=$((n + 1)); done
sleep 0.2
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
[ $rc -eq 143 ] && ok || bad "SIGTERM during --keep-split: exit $rc"
[ -z "$(ls "$T/o")" ] && ok || bad "SIGTERM during --keep-split left: $(ls "$T/o")"

# The engine on split stories260K: identical output to the single file.
model="$SRC/tests/data/stories260K/stories260K-f32.gguf"
text="$SRC/tests/data/text/tinystories-valid-excerpt.txt"
"$GEN" "$T/st.gguf" --from "$model" --split 3 || bad "split stories260K"
st="$T/st-00001-of-00003.gguf"
"$CLI" perplexity -m "$model" -f "$text" -c 128 --chunks 4 -t 2 >"$T/p1" 2>/dev/null
"$CLI" perplexity -m "$st" -f "$text" -c 128 --chunks 4 -t 2 >"$T/p3" 2>"$T/err" && ok || bad "perplexity on split: $(cat "$T/err")"
grep -q "Final estimate: PPL" "$T/p1" && cmp -s "$T/p1" "$T/p3" && ok || bad "perplexity differs on the split model"
"$CLI" generate -m "$st" -n 40 -t 2 >"$T/g3" 2>/dev/null && "$CLI" generate -m "$model" -n 40 -t 2 >"$T/g1" 2>/dev/null
[ -s "$T/g1" ] && cmp -s "$T/g1" "$T/g3" && ok || bad "generate differs on the split model"
"$CLI" imatrix -m "$st" -f "$text" -c 128 --chunks 3 -t 2 -o "$T/i3.dat" >/dev/null 2>&1 &&
    "$CLI" imatrix -m "$model" -f "$text" -c 128 --chunks 3 -t 2 -o "$T/i1.dat" >/dev/null 2>&1
[ -s "$T/i1.dat" ] && cmp -s "$T/i1.dat" "$T/i3.dat" && ok || bad "imatrix differs on the split model"

finish split
