#!/usr/bin/env bash
# CLI test: the suite's subset of the architecture matrix (scripts/arch-matrix.sh runs all of
# it under CI). One model per family of llama-quantize's rules (tests/data/archs/record.sh names
# them: dense, MoE, MLA, hybrid/SSM, falcon, multimodal LM part, ...), each rebuilt from its
# skeleton (the metadata and tensor infos of llama.cpp's test-llama-archs model) with
# iqf-archmodel's deterministic weights and iqf-genimatrix's importance matrix; iqforge's output
# for each file type must have the sha256 of llama-quantize's (tests/data/archs/expected.tsv,
# recorded by record.sh). Needs neither llama.cpp nor ../shared. A file type this build does
# not offer (`quantize --help`) is reported and skipped; one llama-quantize refuses must be
# refused by iqforge too. Under the sanitizers (IQF_SANITIZED=1, a Debug build) only Q4_K_M and
# Q8_0 run: the IQ searches there cost minutes.
set -u
. "$(dirname "$0")/lib/common.sh"
BIN=$(dirname "$CLI")
D=$SRC/tests/data/archs
[ -s "$D/expected.tsv" ] || { bad "missing $D/expected.tsv"; finish archs; exit; }
"$CLI" quantize --help >"$T/help" 2>&1
types_ran=0
while IFS=$'\t' read -r name size; do
  "$BIN/iqf-archmodel" "$D/$name.skel" "$size" "$T/m.gguf" 42 && ok || { bad "$name: iqf-archmodel"; continue; }
  "$BIN/iqf-genimatrix" "$T/m.gguf" "$T/im.gguf" 42 && ok || bad "$name: iqf-genimatrix"
  while IFS=$'\t' read -r n ft want; do
    [ "$n" = "$name" ] || continue
    [ -n "${IQF_SANITIZED:-}" ] && [ "$ft" != Q4_K_M ] && [ "$ft" != Q8_0 ] && continue
    if ! grep -q "\b$ft\b" "$T/help"; then
      echo "  $name $ft: not offered by this build, skipped"
      continue
    fi
    args=()
    case $ft in IQ3_XXS|IQ2_XS) args=(--imatrix im.gguf) ;; esac
    (cd "$T" && "$CLI" quantize "${args[@]}" m.gguf o.gguf "$ft" 1 >log 2>&1); rc=$?
    if [ "$want" = refused ]; then
      [ $rc != 0 ] && ok || bad "$name $ft: llama-quantize refuses it, iqforge wrote a file"
    elif [ $rc != 0 ]; then
      bad "$name $ft: iqforge refuses: $(tail -1 "$T/log")"
    else
      got=$(sha256sum "$T/o.gguf" | cut -c1-64)
      [ "$got" = "$want" ] && ok || bad "$name $ft: sha256 $got, llama-quantize's is $want"
      types_ran=$((types_ran + 1))
    fi
    rm -f "$T/o.gguf"
  done <"$D/expected.tsv"
done <"$D/MANIFEST.tsv"
echo "archs: $types_ran (model, file type) outputs byte-identical with llama-quantize's"
finish archs
