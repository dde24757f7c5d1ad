#!/usr/bin/env bash
# Records tests/data/archs/: for each model named below, the skeleton of the random-weight GGUF
# that llama.cpp's test-llama-archs writes (`test-llama-archs -s 42 -o DIR`: the bytes before the
# tensor data) and, for the model iqf-archmodel rebuilds from it (seed 42) with iqf-genimatrix's
# importance matrix (seed 42), the sha256 of llama-quantize's output for each file type.
# tests/cli/archs.sh checks iqforge's outputs against those hashes.
# Usage: tests/data/archs/record.sh [BUILD_DIR]   (needs scripts/build-llama.sh's tools)
set -eu
cd "$(dirname "$0")/../../.."
build=${1:-build}
bin=$(bash scripts/build-llama.sh)
models=$(mktemp -d)
trap 'rm -rf "$models"' EXIT
# one per family of llama-quantize's rules: dense with n_gqa 4 (qwen3: 4 heads, 1 KV head), MoE
# (qwen3moe), MLA (deepseek2), hybrid Gated-DeltaNet/SSM (qwen35), falcon, a multimodal LM part
# (qwen3vl with deepstack), MoE with sinks (gpt-oss), MoE + MLA with 3-D projections (bailingmoe3),
# gemma4 dense and MoE (per-layer embeddings, shared KV, experts beside the dense FFN: skeletons
# from gemma4-fixture.sh, as test-llama-archs itself skips gemma4)
names="qwen3-dense qwen3moe-moe deepseek2-moe qwen35-dense falcon-dense qwen3vl-dense gpt-oss-moe bailingmoe3-moe gemma4-dense gemma4-moe"
types="Q4_K_M Q2_K IQ3_XXS IQ2_XS Q8_0 Q6_K"
out=tests/data/archs
: >"$out/MANIFEST.tsv"
: >"$out/expected.tsv"
for n in $names; do
  arch=${n%-*}
  if [ "$arch" = gemma4 ]; then
    size=$(bash "$out/gemma4-fixture.sh" "$build" | awk -v n="$n" '$1 == n {print $2}')
  else
    "$bin/test-llama-archs" -s 42 -a "$arch" -o "$models" >/dev/null 2>&1
    src="$models/$n.gguf"
    off=$("$build/iqforge" inspect "$src" | grep -o 'data at offset [0-9]*' | awk '{print $4}')
    head -c "$off" "$src" >"$out/$n.skel"
    size=$(stat -c %s "$src")
  fi
  printf '%s\t%s\n' "$n" "$size" >>"$out/MANIFEST.tsv"
  w=$(mktemp -d)
  "$build/iqf-archmodel" "$out/$n.skel" "$size" "$w/m.gguf" 42
  "$build/iqf-genimatrix" "$w/m.gguf" "$w/im.gguf" 42
  ts=$types
  "$build/iqforge" inspect "$w/m.gguf" | grep -Eq ' [0-9]+ x [0-9]+ x [0-9]+ ' && ts="$ts MXFP4_MOE"
  for t in $ts; do
    args=()
    case $t in IQ3_XXS|IQ2_XS) args=(--imatrix im.gguf) ;; esac
    if (cd "$w" && "$bin/llama-quantize" "${args[@]}" m.gguf o.gguf "$t" 1 >log 2>&1); then
      printf '%s\t%s\t%s\n' "$n" "$t" "$(sha256sum "$w/o.gguf" | cut -c1-64)" >>"$out/expected.tsv"
    else
      printf '%s\t%s\trefused\n' "$n" "$t" >>"$out/expected.tsv"
    fi
    rm -f "$w/o.gguf"
  done
  rm -rf "$w" "$models"/*
done
