#!/usr/bin/env bash
# `-m HF_DIR` for perplexity, imatrix and generate: the engine loads a Hugging Face checkpoint
# converted in memory (iqf_convert_open + iqf_model_load_gguf, no intermediate file) and must give
# exactly what it gives on the file `iqforge convert HF_DIR` writes: the same perplexity lines, the
# same --kld-base bytes, the same imatrix file bytes, the same generated tokens. On the hf-tiny
# fixture (always); tests/cli/model_hfref.sh does the same on ../shared/hfref. A bad directory is one
# line "iqforge: FILE: what is wrong", exit 1.
set -u
. "$(dirname "$0")/lib/common.sh"
TXT="$SRC/tests/data/text/tinystories-sample.txt"
cp -r "$SRC/tests/data/hf-tiny/ckpt" "$T/ckpt"
"$CLI" convert "$T/ckpt" "$T/conv.gguf" 2>"$T/err" && ok || bad "convert: $(cat "$T/err")"
# perplexity: every line but the timing line (tokens/s)
for m in conv.gguf ckpt; do
    "$CLI" perplexity -m "$T/$m" -f "$TXT" -c 64 --chunks 6 -t 2 --kld-base "$T/$m.kld" >"$T/$m.ppl" 2>"$T/err" ||
        bad "perplexity -m $m: $(cat "$T/err")"
    sed 's/perplexity: [0-9]* chunks.*$//' "$T/$m.ppl" >"$T/$m.ppl2"
done
expect "perplexity ran" "Final estimate: PPL = [0-9.]+ \+/- " "$T/ckpt.ppl"
cmp -s "$T/conv.gguf.ppl2" "$T/ckpt.ppl2" && ok || { bad "perplexity: the directory's numbers differ"; diff "$T/conv.gguf.ppl2" "$T/ckpt.ppl2" >&2; }
cmp -s "$T/conv.gguf.kld" "$T/ckpt.kld" && ok || bad "perplexity --kld-base: the directory's logits differ"
# --simulate on the directory: the same numbers as on the file
for m in conv.gguf ckpt; do
    "$CLI" perplexity -m "$T/$m" -f "$TXT" -c 64 --chunks 4 --simulate Q4_K --quiet >"$T/$m.sim" 2>"$T/err" ||
        bad "perplexity --simulate -m $m: $(cat "$T/err")"
done
cmp -s "$T/conv.gguf.sim" "$T/ckpt.sim" && ok || bad "perplexity --simulate: the directory's numbers differ"
# imatrix: the same file, byte for byte (gguf and dat)
for f in gguf dat; do
    for m in conv.gguf ckpt; do
        "$CLI" imatrix -m "$T/$m" -f "$TXT" -c 64 --chunks 4 --output-format $f -o "$T/$m.im.$f" >/dev/null 2>"$T/err" ||
            bad "imatrix -m $m: $(cat "$T/err")"
    done
    [ -s "$T/ckpt.im.$f" ] && cmp -s "$T/conv.gguf.im.$f" "$T/ckpt.im.$f" && ok || bad "imatrix ($f): the directory's file differs"
done
# generate (greedy): the same text
for m in conv.gguf ckpt; do
    "$CLI" generate -m "$T/$m" -p "Once upon a time" -n 24 >"$T/$m.gen" 2>"$T/err" || bad "generate -m $m: $(cat "$T/err")"
done
[ -s "$T/ckpt.gen" ] && cmp -s "$T/conv.gguf.gen" "$T/ckpt.gen" && ok || bad "generate: the directory's text differs"
# a bad directory: one line naming the file, exit 1
mkdir "$T/empty"
for c in perplexity imatrix; do
    "$CLI" $c -m "$T/empty" -f "$TXT" >/dev/null 2>"$T/err"; rc=$?
    [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF "$T/empty/config.json: " "$T/err" && ok ||
        { bad "$c -m EMPTY_DIR: exit $rc"; cat "$T/err" >&2; }
done
printf '{"architectures":["MistralForCausalLM"' >"$T/ckpt/config.json"
"$CLI" perplexity -m "$T/ckpt" -f "$TXT" >/dev/null 2>"$T/err"; rc=$?
[ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF "$T/ckpt/config.json: malformed JSON" "$T/err" && ok ||
    { bad "perplexity -m DIR with a malformed config: exit $rc"; cat "$T/err" >&2; }
finish model_hf
