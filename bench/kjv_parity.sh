#!/usr/bin/env bash
# kjv_parity.sh - iqforge's engine against llama.cpp on whole quantized files of kjv-3m.
#
# For every file type of REFERENCE.md's kjv-3m table (models/kjv-3m/ggml-ladder.tsv): quantize
# the F32 model with `iqforge quantize --imatrix` (compat: byte-identical to llama-quantize's
# file), evaluate it with `iqforge perplexity -c 256 --kld` over all 471 chunks of heldout.txt,
# and print ours vs llama-perplexity's PPL, mean KLD and same-top-token, with relative
# differences. Needs ../shared (or SHARED=...); not a test.
#
# usage: bench/kjv_parity.sh [TYPE...]      (default: every type of the table)
#   IQF=build/iqforge  SHARED=../shared  THREADS=2  CHUNKS=  (set CHUNKS=100 to iterate quickly)
set -eu
here="$(cd "$(dirname "$0")/.." && pwd)"
IQF="${IQF:-$here/build/iqforge}"
SHARED="${SHARED:-$here/../shared}"
M="$SHARED/models/kjv-3m"
THREADS="${THREADS:-2}"
CHUNKS="${CHUNKS:-}"
[ -x "$IQF" ] || { echo "kjv_parity: $IQF: not built" >&2; exit 1; }
[ -f "$M/ggml-ladder.tsv" ] || { echo "kjv_parity: $M/ggml-ladder.tsv: missing" >&2; exit 1; }
tmp="$(mktemp -d /tmp/kjv_parity.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
chunks=()
[ -n "$CHUNKS" ] && chunks=(--chunks "$CHUNKS")

"$IQF" perplexity -m "$M/kjv-3m-f32.gguf" -f "$M/heldout.txt" -c 256 -t "$THREADS" "${chunks[@]}" \
  --kld-base "$tmp/f32.kld" >"$tmp/base.log" 2>&1 || { cat "$tmp/base.log" >&2; exit 1; }

if [ $# -gt 0 ]; then types=("$@"); else mapfile -t types < <(awk -F'\t' 'NR > 1 { print $2 }' "$M/ggml-ladder.tsv"); fi

printf '| file type | PPL ours | PPL llama.cpp | dPPL %% | KLD ours | KLD llama.cpp | dKLD %% | same top ours | llama.cpp |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
worst_ppl=0 worst_kld=0
for t in "${types[@]}"; do
  ref="$(awk -F'\t' -v t="$t" '$2 == t { print $5, $6, $8 }' "$M/ggml-ladder.tsv")"
  [ -n "$ref" ] || { echo "kjv_parity: $t: not in the table" >&2; exit 1; }
  read -r rppl rkld rtop <<<"$ref"
  "$IQF" quantize --imatrix "$M/imatrix.gguf" "$M/kjv-3m-f32.gguf" "$tmp/q.gguf" "$t" >"$tmp/q.log" 2>&1 \
    || { cat "$tmp/q.log" >&2; exit 1; }
  "$IQF" perplexity -m "$tmp/q.gguf" -c 256 -t "$THREADS" "${chunks[@]}" --kld "$tmp/f32.kld" \
    >"$tmp/p.log" 2>&1 || { cat "$tmp/p.log" >&2; exit 1; }
  ppl="$(awk '/^Mean PPL\(Q\)/ { print $4 }' "$tmp/p.log")"
  kld="$(awk '/^Mean +KLD:/ { print $3 }' "$tmp/p.log")"
  top="$(awk '/^Same top p:/ { print $4 }' "$tmp/p.log")"
  line="$(awk -v p="$ppl" -v rp="$rppl" -v k="$kld" -v rk="$rkld" -v tp="$top" -v rt="$rtop" -v t="$t" 'BEGIN {
    dp = 100 * (p - rp) / rp; dk = 100 * (k - rk) / rk;
    printf "| %s | %.4f | %.4f | %+.3f | %.6f | %.6f | %+.3f | %.3f | %.3f |\t%.6f\t%.6f\n", t, p, rp, dp, k, rk, dk, tp, rt, (dp < 0 ? -dp : dp), (dk < 0 ? -dk : dk) }')"
  printf '%s\n' "${line%%$'\t'*}"
  rest="${line#*$'\t'}"
  worst_ppl="$(awk -v a="$worst_ppl" -v b="${rest%%$'\t'*}" 'BEGIN { print (b > a ? b : a) }')"
  worst_kld="$(awk -v a="$worst_kld" -v b="${rest#*$'\t'}" 'BEGIN { print (b > a ? b : a) }')"
done
echo
echo "worst |dPPL| ${worst_ppl}%, worst |dKLD| ${worst_kld}% (goal: 0.05% and 0.1%)${CHUNKS:+; only $CHUNKS chunks: the reference is over all 471}"
