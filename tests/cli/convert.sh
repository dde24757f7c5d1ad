#!/usr/bin/env bash
# iqforge convert at the command line: the hf-tiny fixture converts to its expected file (f16 and
# the default name), a broken checkpoint is one line "FILE: what is wrong" with exit 1 and no output,
# a bad option exits 2.
set -u
CLI=${IQF_CLI:-build/iqforge}
SRC=${IQF_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
cp -r "$SRC/tests/data/hf-tiny/ckpt" "$T/ckpt"
"$CLI" convert "$T/ckpt" "$T/out.gguf" --outtype f16 || fail "convert exits $?"
cmp -s "$T/out.gguf" "$SRC/tests/data/hf-tiny/expected-f16.gguf" || fail "f16 output differs from expected-f16.gguf"
"$CLI" convert "$T/ckpt" --outtype q8_0 || fail "convert (default name) exits $?"
cmp -s "$T/ckpt-q8_0.gguf" "$SRC/tests/data/hf-tiny/expected-q8_0.gguf" || fail "default-named q8_0 output differs"
"$CLI" convert --help | grep -q "usage: iqforge convert" || fail "--help"
printf '{"architectures":["MistralForCausalLM"' > "$T/ckpt/config.json"
err=$("$CLI" convert "$T/ckpt" "$T/bad.gguf" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "malformed config: exit $rc"
[ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] && [[ "$err" == "$T/ckpt/config.json: malformed JSON"* ]] || fail "message: $err"
ls "$T" | grep -q bad.gguf && fail "output written on error"
"$CLI" convert "$T/ckpt" --outtype q4 2>/dev/null; [ $? -eq 2 ] || fail "bad --outtype does not exit 2"
[ $fails -eq 0 ] && echo "convert.sh: ok" || exit 1
