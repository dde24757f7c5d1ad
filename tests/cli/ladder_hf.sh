#!/usr/bin/env bash
# `iqforge ladder -m HF_DIR`: the ladder on a Hugging Face checkpoint (the hf-tiny fixture, converted
# in memory for the base logits and the --calibration capture, tensor by tensor for each rung's
# quantization) gives the same records as on the file `iqforge convert HF_DIR` writes: every rung's
# bytes, PPL, KLD and smoke text, the same base logits and importance matrix bytes. The directory's
# cache key is stable (a second run recomputes nothing) and distinct (not the converted file's; a
# changed weight recomputes). --evaluator llama-perplexity needs a GGUF: a usage error.
set -u
. "$(dirname "$0")/lib/common.sh"
TXT="$SRC/tests/data/text/tinystories-sample.txt"
cp -r "$SRC/tests/data/hf-tiny/ckpt" "$T/ckpt"
"$CLI" convert "$T/ckpt" "$T/conv.gguf" 2>"$T/err" && ok || bad "convert: $(cat "$T/err")"
TYPES=Q4_0,Q5_1,Q8_0
L() { # MODEL DIR [more options]
    local m=$1 d=$2; shift 2
    "$CLI" ladder -m "$m" -f "$TXT" -c 64 --chunks 4 -t 2 --calibration "$TXT" --types $TYPES --mode compat,best,full \
        --prompt "Once upon a time" --expect "" --smoke-tokens 8 -o "$d" "$@"
}
nrungs=9
L "$T/conv.gguf" "$T/f" >"$T/f.out" 2>"$T/f.err" && ok || { bad "ladder -m conv.gguf: exit"; cat "$T/f.out" "$T/f.err" >&2; }
L "$T/ckpt" "$T/d" >"$T/d.out" 2>"$T/d.err" && ok || { bad "ladder -m ckpt: exit"; cat "$T/d.out" "$T/d.err" >&2; }
[ "$(ls "$T/d/rungs" | wc -l)" -eq $nrungs ] && ok || bad "ladder -m ckpt: want $nrungs rung records, have $(ls "$T/d/rungs" | wc -l)"
# The records: everything but the key and the times.
for f in "$T/f/rungs"/*.txt; do
    r=$(basename "$f")
    if diff <(grep -Ev '^(key|quantize_s|eval_s) ' "$f") <(grep -Ev '^(key|quantize_s|eval_s) ' "$T/d/rungs/$r") >"$T/diff"; then ok
    else bad "rung $r: the directory's record differs"; cat "$T/diff" >&2; fi
done
grep -q '^ppl ' "$T/d/rungs/Q4_0.compat.txt" && ok || bad "no ppl line in a rung record"
for f in base.kld imatrix.gguf hessian.gguf; do
    [ -s "$T/d/$f" ] && cmp -s "$T/f/$f" "$T/d/$f" && ok || bad "$f: the directory's differs from the file's"
done
diff <(grep '^|' "$T/f.out" | cut -d'|' -f2-8) <(grep '^|' "$T/d.out" | cut -d'|' -f2-8) >/dev/null && ok ||
    bad "the tables differ"
bytes=$(stat -c %s "$T/conv.gguf")
grep -q "\"model_bytes\": $bytes" "$T/d/ladder.json" && ok || bad "ladder.json: model_bytes is not the converted file's $bytes"
# Stable: nothing recomputed the second time.
L "$T/ckpt" "$T/d" >/dev/null 2>&1 && ok || bad "second run exit"
[ "$(grep -c '"cached": true' "$T/d/ladder.json")" -eq $nrungs ] && ok || bad "second run on the directory recomputed rungs"
# Distinct: the converted file's records are not the directory's ...
[ "$(grep '^key ' "$T/f/rungs/Q8_0.compat.txt")" != "$(grep '^key ' "$T/d/rungs/Q8_0.compat.txt")" ] && ok ||
    bad "the directory and the converted file have the same key"
# ... and a changed weight (the last byte of the shard) or a new file is another input.
cp -r "$T/ckpt" "$T/ckpt2"
python3 - "$T/ckpt2/model.safetensors" <<'EOF' || bad "could not change a weight"
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[-1] ^= 0x01
open(p, "wb").write(bytes(b))
EOF
L "$T/ckpt2" "$T/d" --only Q8_0:compat >/dev/null 2>&1 && ok || bad "changed checkpoint: exit"
grep -q '"cached": true' "$T/d/ladder.json" && bad "a changed checkpoint was served from the cache" || ok
# Back to the first checkpoint with a dot file added (not part of it): the eight records the
# changed one left are served again (its base logits and importance matrix recomputed, the same).
touch "$T/ckpt/.ignored"
L "$T/ckpt" "$T/d" >/dev/null 2>&1 && ok || bad "third run exit"
[ "$(grep -c '"cached": true' "$T/d/ladder.json")" -eq $((nrungs - 1)) ] && ok || bad "a dot file changed the key"
# --evaluator llama-perplexity reads GGUF files.
"$CLI" ladder -m "$T/ckpt" -f "$TXT" --evaluator llama-perplexity=/bin/true -o "$T/e" >"$T/out" 2>&1
[ $? -eq 2 ] && ok || bad "--evaluator with a directory: want exit 2"
expect evaluator_dir "reads GGUF files: convert the checkpoint" "$T/out"
finish ladder_hf
