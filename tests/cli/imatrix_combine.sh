#!/usr/bin/env bash
# CLI of `iqforge imatrix --combine` and --chunk (issue 34: a capture as an array of independent
# jobs). On test-llama-archs' qwen3moe (2 layers, 2 experts: plain and per-expert entries), the
# text's first 5 chunks of 128 tokens are captured whole (imatrix + Hessian) and as 3 shards
# (--chunks 2, --chunk 2 --chunks 2, --chunk 4 --chunks 1); the shards' combination must equal the
# whole capture: imatrix counts, chunk count and size exactly, sums within 1e-6 relative (each
# file rounds its double sums to F32 once: ~1 ulp), Hessians within 1e-6 * sqrt(H_ii * H_jj)
# (each shard's F32 means are rounded once more: ~1 ulp); iqf-statcmp prints the figures. Bad
# inputs (mismatched shapes, chunk sizes or Hessian blocks, mixed kinds, a model, a text, a
# missing file) exit 1 with one line on stderr and leave nothing in the output folder; usage
# errors exit 2; --help mentions --combine and --chunk.
set -u
. "$(dirname "$0")/lib/common.sh"
BIN=$(dirname "$CLI")
text="$SRC/tests/data/text/tinystories-valid-excerpt.txt"
"$BIN/iqf-archmodel" "$SRC/tests/data/archs/qwen3moe-moe.skel" 7119776 "$T/m.gguf" 42 && ok || { bad "iqf-archmodel"; finish imatrix_combine; exit; }
capture() { # NAME [OPTIONS]: $T/NAME.gguf and $T/hNAME.gguf
    local name=$1; shift
    "$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 -o "$T/$name.gguf" --hessian "$T/h$name.gguf" -t 2 --quiet "$@" 2>"$T/err" &&
        ok || bad "imatrix $name $*: $(cat "$T/err")"
}
capture whole --chunks 5
capture a --chunks 2
capture b --chunk 2 --chunks 2
capture c --from-chunk 4 --chunks 1
# the shards are what they claim: a's chunks are not the whole's
"$BIN/iqf-statcmp" "$T/a.gguf" "$T/whole.gguf" >"$T/cmp" 2>&1 && bad "shard a equals the whole" || ok

"$CLI" imatrix --combine "$T/a.gguf" "$T/b.gguf" "$T/c.gguf" -o "$T/comb.gguf" 2>"$T/err" && ok || bad "combine imatrix: $(cat "$T/err")"
expect "combine says what it wrote" 'combined 3 importance matrices: 16 entries \(5 chunks of 128 tokens\)' "$T/err"
"$BIN/iqf-statcmp" "$T/comb.gguf" "$T/whole.gguf" 1e-6 >"$T/cmp" 2>&1 && ok || bad "combined imatrix differs: $(cat "$T/cmp")"
echo "  imatrix, 3 shards vs whole: $(cat "$T/cmp")"
"$CLI" inspect "$T/comb.gguf" >"$T/ins" 2>&1
expect "chunk count" 'imatrix\.chunk_count +u32 += 5$' "$T/ins"
expect "chunk size" 'imatrix\.chunk_size +u32 += 128$' "$T/ins"
expect "datasets listed per input, as llama-imatrix" 'imatrix\.datasets +arr\[str\] += \[[^,]*, [^,]*, [^,]*\]$' "$T/ins"
expect "per-expert counts kept" 'blk\.0\.ffn_down_exps\.weight\.counts +1 x 2 ' "$T/ins"

"$CLI" imatrix --combine "$T/ha.gguf" "$T/hb.gguf" "$T/hc.gguf" -o "$T/hcomb.gguf" 2>"$T/err" && ok || bad "combine Hessians: $(cat "$T/err")"
expect "Hessian summary" 'combined 3 Hessian files: 9 entries, 640 tokens \(5 chunks of 128\)' "$T/err"
"$BIN/iqf-statcmp" "$T/hcomb.gguf" "$T/hwhole.gguf" 1e-6 >"$T/cmp" 2>&1 && ok || bad "combined Hessian differs: $(cat "$T/cmp")"
echo "  Hessian, 3 shards vs whole: $(cat "$T/cmp")"
"$CLI" inspect "$T/hcomb.gguf" >"$T/ins" 2>&1
expect "expert rows recorded" 'hessian\.expert_counts\.blk\.1\.ffn_down_exps\.hessian +arr\[u64\]' "$T/ins"
# the combined Hessian drives quantize as the whole one does
"$CLI" quantize --imatrix "$T/comb.gguf" --hessian "$T/hcomb.gguf" "$T/m.gguf" "$T/q.gguf" Q4_K_M 2 >"$T/log" 2>&1 &&
    ok || bad "quantize with the combined files: $(tail -3 "$T/log")"

# legacy .dat shards combine too (their chunk size given by -c; one count for all experts, as
# llama-imatrix reads them)
"$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 --chunks 2 -o "$T/a.dat" -t 2 --quiet 2>"$T/err" && ok || bad "dat a: $(cat "$T/err")"
"$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 --chunk 2 --chunks 2 -o "$T/b.dat" -t 2 --quiet 2>"$T/err" && ok || bad "dat b: $(cat "$T/err")"
"$CLI" imatrix --combine "$T/a.dat" "$T/b.dat" -c 128 -o "$T/ab.gguf" 2>"$T/err" && ok || bad "combine .dat: $(cat "$T/err")"
expect "legacy: 4 chunks of 128" 'combined 2 importance matrices: 16 entries \(4 chunks of 128 tokens\)' "$T/err"

# errors: exit 1, one line, nothing written
mkdir -p "$T/o" "$T/x"
"$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 64 --chunks 2 -o "$T/x/c64.gguf" --hessian "$T/x/h64.gguf" -t 2 --quiet 2>/dev/null || bad "c64 capture"
"$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 --chunks 2 -o "$T/x/b32.gguf" --hessian "$T/x/h32.gguf" --hessian-block 32 -t 2 --quiet 2>/dev/null || bad "block-32 capture"
fails_with() { # DESCRIPTION PATTERN INPUT...
    local what=$1 pat=$2; shift 2
    "$CLI" imatrix --combine "$@" -o "$T/o/out.gguf" >/dev/null 2>"$T/err"
    local rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -Eq -- "$pat" "$T/err" && ok ||
        bad "$what: exit $rc, want 1 and one line /$pat/: $(cat "$T/err")"
    [ -z "$(ls -A "$T/o")" ] && ok || { bad "$what: left $(ls -A "$T/o")"; rm -f "$T"/o/* "$T"/o/.[!.]*; }
}
fails_with "mismatched shapes" "imatrix-groups_merged-c256\.gguf: blk\.0\.attn_k\.weight has 64 values, the files before it 256" \
    "$T/a.gguf" "$SRC/tests/data/stories260K/imatrix-groups_merged-c256.gguf"
fails_with "chunk sizes" "c64\.gguf: chunk size 64, the files before it 128" "$T/a.gguf" "$T/x/c64.gguf"
fails_with "Hessian chunk sizes" "h64\.gguf: chunk size 64" "$T/ha.gguf" "$T/x/h64.gguf"
fails_with "Hessian blocks" "h32\.gguf: blk\.0\.attn_qkv\.hessian is \[32, 256, 1\], the files before it \[256, 256, 1\]" "$T/ha.gguf" "$T/x/h32.gguf"
fails_with "mixed kinds" "ha\.gguf: a Hessian file, but .*a\.gguf is an importance matrix" "$T/a.gguf" "$T/ha.gguf"
fails_with "a model" "m\.gguf: not an importance matrix" "$T/a.gguf" "$T/m.gguf"
fails_with "a text" "tinystories-valid-excerpt\.txt: not an importance matrix" "$T/a.gguf" "$text"
fails_with "a missing file" "nope\.gguf: No such file" "$T/a.gguf" "$T/nope.gguf"
fails_with "a missing Hessian" "nope\.gguf: No such file" "$T/ha.gguf" "$T/nope.gguf"
# usage errors: exit 2
for args in "--combine $T/a.gguf" "--combine -o $T/o/out.gguf" "--combine $T/a.gguf -m $T/m.gguf -o $T/o/out.gguf" "$T/a.gguf -o $T/o/out.gguf"; do
    "$CLI" imatrix $args >/dev/null 2>"$T/err"
    [ $? -eq 2 ] && ok || bad "imatrix $args: want exit 2: $(cat "$T/err")"
done
"$CLI" imatrix --combine "$T/ha.gguf" "$T/hb.gguf" --output-format dat -o "$T/o/out.dat" >/dev/null 2>"$T/err"
[ $? -eq 1 ] && grep -q "Hessian files are written as GGUF only" "$T/err" && ok || bad "Hessian as dat: $(cat "$T/err")"
[ -z "$(ls -A "$T/o")" ] && ok || bad "usage errors left $(ls -A "$T/o")"
"$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 --chunk 46 -o "$T/o/out.gguf" -t 2 --quiet 2>"$T/err"
[ $? -eq 1 ] && grep -q -- "--chunk 46 leaves fewer than the 2 chunks" "$T/err" && ok || bad "--chunk past the text: $(cat "$T/err")"
"$CLI" imatrix --help >"$T/help" 2>&1
expect "--help: --combine" '--combine IN1 IN2' "$T/help"
expect "--help: --chunk" '--chunk K' "$T/help"
finish imatrix_combine
