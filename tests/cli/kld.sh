#!/usr/bin/env bash
# Hostile .kld files given to `perplexity --kld`: every one is a one-line error with exit status 1,
# found from the header and the file's length before any context or buffer is sized from it
# (checked under a 1 GiB address-space limit: a 20-byte file claiming n_ctx = 2^20 and 2^24
# chunks used to size a KV cache and a token buffer of terabytes from its header).
set -u
. "$(dirname "$0")/lib/common.sh"
cli=$CLI src=$SRC t=$T
model="$src/tests/data/stories260K/stories260K-f32.gguf"
text="$src/tests/data/text/tinystories-valid-excerpt.txt"

le32() { # prints the 4 little-endian bytes of $1
  local v=$1
  printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((v & 255)) $(((v >> 8) & 255)) $(((v >> 16) & 255)) $(((v >> 24) & 255)))"
}
header() { printf '_logits_'; le32 "$1"; le32 "$2"; le32 "$3"; }

# kld_fail NAME PATTERN FILE: exit 1, exactly one line on stderr, matching PATTERN.
# Under the sanitizers (IQF_SANITIZED=1) ASan's shadow memory cannot live under ulimit -v; its
# allocator aborts on any absurd allocation instead, which the exit status check catches.
lim() { if [ "${IQF_SANITIZED:-0}" = 1 ]; then "$@"; else (ulimit -v 1048576; "$@"); fi; }
kld_fail() {
  (lim "$cli" perplexity -m "$model" -t 1 --kld "$3" >/dev/null 2>"$t/err"); local rc=$?
  if [ $rc -ne 1 ]; then bad "$1: exit $rc (want 1): $(cat "$t/err")"; return; fi
  if [ "$(wc -l < "$t/err")" -ne 1 ]; then bad "$1: want one line: $(cat "$t/err")"; return; fi
  grep -q -- "$2" "$t/err" && ok || bad "$1: message '$(cat "$t/err")' lacks '$2'"
}

# A real file: stories260K has n_vocab 512, so nv = 516; n_ctx 64 gives 31 scored positions.
"$cli" perplexity -m "$model" -f "$text" -c 64 --chunks 2 -t 1 --kld-base "$t/base.kld" >/dev/null 2>"$t/err" \
  && ok || bad "kld-base: $(cat "$t/err")"
want=$((20 + 2 * 64 * 4 + 2 * 31 * 516 * 2))
[ "$(stat -c %s "$t/base.kld")" -eq $want ] && ok || bad "base file size $(stat -c %s "$t/base.kld"), want $want"
(lim "$cli" perplexity -m "$model" -t 1 --kld "$t/base.kld" >"$t/out" 2>"$t/err") && ok || bad "kld of itself: $(cat "$t/err")"
grep -q 'Same top p: 100.000' "$t/out" && ok || bad "kld of itself: $(cat "$t/out")"

header 1048576 512 16777216 > "$t/huge.kld"
kld_fail "20-byte file, huge header" "huge.kld: truncated: 20 bytes, its header (n_ctx 1048576, n_vocab 512, 16777216 chunks) needs" "$t/huge.kld"
printf '_logits_\001\000' > "$t/short.kld"
kld_fail "10-byte file" "short.kld: truncated (10 bytes, a header needs 20)" "$t/short.kld"
: > "$t/empty.kld"
kld_fail "empty file" "empty.kld: truncated (0 bytes" "$t/empty.kld"
head -c $((want - 1)) "$t/base.kld" > "$t/cut.kld"
kld_fail "one byte short" "cut.kld: truncated: $((want - 1)) bytes" "$t/cut.kld"
head -c 600 "$t/base.kld" > "$t/cut2.kld"
kld_fail "cut in the tokens" "cut2.kld: truncated: 600 bytes" "$t/cut2.kld"
{ cat "$t/base.kld"; printf 'x'; } > "$t/long.kld"
kld_fail "trailing byte" "long.kld: 1 bytes more than its header" "$t/long.kld"
{ header 64 512 3; tail -c +21 "$t/base.kld"; } > "$t/count.kld"
kld_fail "chunk count inconsistent" "count.kld: truncated" "$t/count.kld"
{ header 64 513 2; tail -c +21 "$t/base.kld"; } > "$t/vocab.kld"
kld_fail "vocab inconsistent with length" "vocab.kld: .*bytes" "$t/vocab.kld"
{ header 3 512 2; tail -c +21 "$t/base.kld"; } > "$t/ctx.kld"
kld_fail "n_ctx below 4" "ctx.kld: n_ctx 3 out of range" "$t/ctx.kld"
{ header 64 512 0; } > "$t/zero.kld"
kld_fail "zero chunks" "zero.kld: 0 chunks out of range" "$t/zero.kld"
{ header 64 512 -1; } > "$t/neg.kld"
kld_fail "negative chunks" "neg.kld: -1 chunks out of range" "$t/neg.kld"
{ header 64 0 2; } > "$t/v0.kld"
kld_fail "zero vocabulary" "v0.kld: n_vocab 0 out of range" "$t/v0.kld"
{ head -c 20 "$t/base.kld"; le32 999999; tail -c +25 "$t/base.kld"; } > "$t/tok.kld"
kld_fail "token out of range" "tok.kld: token 0 is 999999, outside the vocabulary" "$t/tok.kld"
{ header 64 1000 1; head -c $((64 * 4 + 31 * 1004 * 2)) /dev/zero; } > "$t/othervocab.kld"
kld_fail "another model's vocabulary" "othervocab.kld: made with a vocabulary of 1000 tokens, the model has 512" "$t/othervocab.kld"
kld_fail "not a kld file" "not a log-probability file" "$text"
kld_fail "a directory" "not a regular file" "$t"

finish kld
