#!/usr/bin/env bash
# CLI test for `iqforge quantize --target-size/--target-bpw` on a synthetic Mistral-shaped model:
# the file is at or under the target and has the printed size; --dry-run writes nothing and
# prints the plan; --plan-out gives a --tensor-type-file that reproduces the same bytes;
# impossible budgets and refused combinations give one line on stderr, exit 1 (2 for usage),
# and no output file.
set -u
. "$(dirname "$0")/lib/common.sh"
GEN="$(dirname "$CLI")/iqf-genmodel"
"$GEN" "$T/m.gguf" --scale 16 --layers 2 --imatrix "$T/im.gguf" || { echo "generator failed"; exit 1; }

# dry run: the plan, nothing written
"$CLI" quantize --dry-run --imatrix "$T/im.gguf" --target-size 1.5M "$T/m.gguf" "$T/dry.gguf" >"$T/out" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] && ok || { bad "dry run exit $rc"; cat "$T/err" >&2; }
[ -e "$T/dry.gguf" ] && bad "dry run wrote a file" || ok
expect plan_row '^[0-9]+ +blk\.0\.attn_q\.weight +[a-z0-9_KS]+ +[0-9]+ +[0-9.e+-]+ ' "$T/out"
expect plan_total '^total: file [0-9]+ bytes .* for a target of 1572864 bytes' "$T/out"
size=$(sed -n 's/^total: file \([0-9]*\) bytes.*/\1/p' "$T/out")
[ -n "$size" ] && [ "$size" -le 1572864 ] && ok || bad "dry-run size '$size' not <= 1572864"

# the real run: same plan, file of exactly that size, plan file
"$CLI" quantize --imatrix "$T/im.gguf" --target-size 1572864 --plan-out "$T/plan.txt" "$T/m.gguf" "$T/a.gguf" 2 >"$T/out2" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] && ok || { bad "target run exit $rc"; cat "$T/err" >&2; }
got=$(stat -c %s "$T/a.gguf" 2>/dev/null || echo 0)
[ "$got" = "$size" ] && ok || bad "file has $got bytes, the plan said $size"
expect quantized_line "^quantized .* $size bytes .*target 1572864" "$T/out2"
expect plan_file '^\^blk\\\.0\\\.attn_q\\\.weight\$=[a-z0-9_KS]+$' "$T/plan.txt"
ft=$(sed -n 's/.*file type \([A-Z0-9_]*\),.*/\1/p' "$T/out2")
"$CLI" quantize --quiet --imatrix "$T/im.gguf" --tensor-type-file "$T/plan.txt" "$T/m.gguf" "$T/b.gguf" "$ft" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] && ok || { bad "--tensor-type-file run exit $rc"; cat "$T/err" >&2; }
cmp -s "$T/a.gguf" "$T/b.gguf" && ok || bad "the plan file does not reproduce the file"
# the plan was checked against the recipe below the target, and the file written from the
# check's blocks (an unlinked temporary file beside the output: nothing left behind)
expect recipe_check '^target: joint KLD on the calibration text: plan [0-9.]+, recipe [A-Z0-9_]+ \([0-9]+ bytes\) [0-9.]+: writing the (plan|recipe)' "$T/out2"
ls -A "$T" | grep -q '^\.iqforge-blocks' && bad "a temporary blocks file was left" || ok
# the types in the file are the plan's
"$CLI" inspect --no-kv "$T/a.gguf" >"$T/insp"
while IFS='=' read -r pat ty; do
    name=$(printf '%s' "$pat" | sed 's/^\^//; s/\$$//; s/\\//g')
    grep -Eq " $name +[0-9 x]+ +$ty " "$T/insp" || { bad "tensor $name is not $ty in the file"; break; }
done <"$T/plan.txt" && ok
# --target-bpw
"$CLI" quantize --quiet --imatrix "$T/im.gguf" --target-bpw 4.5 "$T/m.gguf" "$T/c.gguf" 2>"$T/err"; rc=$?
[ $rc -eq 0 ] && ok || { bad "--target-bpw exit $rc"; cat "$T/err" >&2; }

# errors: one line, exit 1 (2 for usage), no file
err_case() { # err_case DESCRIPTION WANT_RC PATTERN ARGS...
    local d=$1 want=$2 pat=$3
    shift 3
    rm -f "$T/x.gguf"
    "$CLI" quantize "$@" >"$T/o" 2>"$T/e"; local rc=$?
    [ $rc -eq "$want" ] && ok || bad "$d: exit $rc (want $want)"
    [ "$(wc -l <"$T/e")" -eq 1 ] && ok || { bad "$d: stderr is not one line"; cat "$T/e" >&2; }
    expect "$d" "$pat" "$T/e"
    [ -e "$T/x.gguf" ] && bad "$d: output written" || ok
}
err_case "below minimum" 1 "below the smallest file" --imatrix "$T/im.gguf" --target-size 100K "$T/m.gguf" "$T/x.gguf"
err_case "above f16" 1 "above the largest file" --imatrix "$T/im.gguf" --target-size 1G "$T/m.gguf" "$T/x.gguf"
err_case "bpw above f16" 1 "above the largest file" --imatrix "$T/im.gguf" --target-bpw 17 "$T/m.gguf" "$T/x.gguf"
err_case "pure" 2 "--pure" --pure --imatrix "$T/im.gguf" --target-size 1M "$T/m.gguf" "$T/x.gguf"
err_case "no imatrix" 2 "imatrix" --target-size 1M "$T/m.gguf" "$T/x.gguf"
err_case "both" 2 "together" --imatrix "$T/im.gguf" --target-size 1M --target-bpw 3 "$T/m.gguf" "$T/x.gguf"
err_case "bad size" 2 "invalid --target-size" --imatrix "$T/im.gguf" --target-size 12Q "$T/m.gguf" "$T/x.gguf"
err_case "plan without target" 2 "need --target-size" --imatrix "$T/im.gguf" --plan-out "$T/p" "$T/m.gguf" "$T/x.gguf" Q4_K_M

# With error feedback (--hessian) and --mode best on the bundled kjv-3m: the plan's predicted size
# counts the feedback keys too (the file is exactly as predicted, never over the target).
KJ=$SRC/tests/data/kjv-3m
"$CLI" imatrix -m "$KJ/kjv-3m-f32.gguf" -f "$KJ/heldout-70k.txt" -c 256 --chunks 4 -t 2 -o "$T/kim.gguf" \
    --hessian "$T/kh.gguf" >/dev/null 2>&1 && ok || bad "imatrix --hessian on kjv-3m"
"$CLI" quantize --imatrix "$KJ/imatrix.gguf" --hessian "$T/kh.gguf" --mode best --target-size 1518624 \
    "$KJ/kjv-3m-f32.gguf" "$T/kfb.gguf" >"$T/kfb.out" 2>&1 && ok || { bad "target + feedback exit"; cat "$T/kfb.out" >&2; }
grep -q "the plan predicted" "$T/kfb.out" && bad "target + feedback: size differs from the plan: $(grep "the plan predicted" "$T/kfb.out")" || ok
sz=$(stat -c %s "$T/kfb.gguf" 2>/dev/null || echo 0)
[ "$sz" -gt 1400000 ] && [ "$sz" -le 1518624 ] && ok || bad "target + feedback: $sz bytes for a 1518624-byte target"
"$CLI" inspect --no-tensors "$T/kfb.gguf" >"$T/kfb.ins" 2>&1
grep -q 'quantize.feedback.file' "$T/kfb.ins" && grep -q 'quantize.mode .*"best"' "$T/kfb.ins" && ok || bad "target + feedback: metadata"

# --target-size with --prune-layers, --override-kv (long keys and values: the metadata grows),
# --tensor-type and --hessian together (kjv-3m, 4 layers): the dry run's size is the written
# file's, the plan names the renumbered layers, the user's type is kept, the keys are written.
KS="--imatrix $KJ/imatrix.gguf --hessian $T/kh.gguf --mode best --no-calibrate --target-bpw 4.25 --prune-layers 1,2
    --override-kv general.name=str:pruned-$(printf 'x%.0s' $(seq 100)) --override-kv extra.count=int:7
    --tensor-type ffn_down=q6_K"
"$CLI" quantize --dry-run $KS "$KJ/kjv-3m-f32.gguf" "$T/kc.gguf" >"$T/kc.dry" 2>&1 && ok || { bad "combined dry run exit"; cat "$T/kc.dry" >&2; }
csize=$(sed -n 's/^total: file \([0-9]*\) bytes.*/\1/p' "$T/kc.dry")
"$CLI" quantize $KS --plan-out "$T/kc.txt" "$KJ/kjv-3m-f32.gguf" "$T/kc.gguf" >"$T/kc.out" 2>&1 && ok || { bad "combined run exit"; cat "$T/kc.out" >&2; }
got=$(stat -c %s "$T/kc.gguf" 2>/dev/null || echo 0)
[ -n "$csize" ] && [ "$got" = "$csize" ] && ok || bad "combined: file has $got bytes, the plan said '$csize'"
reject combined_predicted "the plan predicted" "$T/kc.out"
reject combined_plan_layers '^\^blk\\\.[23]\\\.' "$T/kc.txt"
expect combined_plan_user '^\^blk\\\.1\\\.ffn_down\\\.weight\$=q6_K$' "$T/kc.txt"
"$CLI" inspect "$T/kc.gguf" >"$T/kc.ins" 2>&1
expect combined_blocks '^  llama\.block_count +u32 += 2$' "$T/kc.ins"
expect combined_name '^  general\.name +str += "pruned-xxxx' "$T/kc.ins"
expect combined_kv '^  extra\.count ' "$T/kc.ins"
expect combined_feedback 'quantize\.feedback\.file' "$T/kc.ins"
expect combined_user ' blk\.1\.ffn_down\.weight +[0-9 x]+ +q6_K ' "$T/kc.ins"
reject combined_old_layers ' blk\.[23]\.' "$T/kc.ins"

# a MoE model: every 3-D expert tensor gets a KLD sensitivity from the engine (the calibration's
# weight list covers the expert matrices), and the plan beats the recipe on the calibration text
"$GEN" "$T/moe.gguf" --arch mixtral --layers 2 --scale 16 --imatrix "$T/moe-im.gguf" >/dev/null 2>&1 || bad "MoE generator"
"$CLI" quantize --quiet --imatrix "$T/moe-im.gguf" "$T/moe.gguf" "$T/moe-rec.gguf" IQ3_XXS 2 || bad "MoE recipe"
ms=$(stat -c %s "$T/moe-rec.gguf" 2>/dev/null || echo 0)
"$CLI" quantize --imatrix "$T/moe-im.gguf" --target-size "$ms" "$T/moe.gguf" "$T/moe-t.gguf" 2 >"$T/moe.out" 2>&1 && ok || { bad "MoE target run"; cat "$T/moe.out" >&2; }
for e in gate up down; do
    expect "moe_${e}_exps_sensitivity" "^calibrate: blk\.1\.ffn_${e}_exps\.weight +[a-z0-9_KS]+ +err [0-9.e+-]+ +KLD 0\.[0-9]*[1-9][0-9]* \(layer\) +sensitivity [1-9]" "$T/moe.out"
done
expect moe_plan_wins '^target: joint KLD on the calibration text: plan .*: writing the plan' "$T/moe.out"

finish target
