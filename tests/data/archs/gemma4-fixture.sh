#!/usr/bin/env bash
# Records tests/data/archs/gemma4-dense.skel and gemma4-moe.skel. llama.cpp's test-llama-archs skips gemma4 ("FIXME:
# ISWA KV cache initialization needs more fixture params"): its fixture gives a scalar
# sliding_window_pattern where gemma4's loader wants an array, and llama_model_saver writes
# neither embedding_length_per_layer_input, attention.shared_kv_layers nor the tensors
# per_layer_model_proj / per_layer_proj_norm, so libllama cannot load what it saves.
# gemma4-fixture.patch, applied to a copy of the test outside the repository, supplies them: 6
# layers sliding/global alternating, global heads twice the sliding ones' size (key_length 128,
# key_length_swa 64, rope dims likewise), head_count_kv [1, 2, ...] (1 on the sliding layers, 2 on
# the global ones), the last 2 layers on shared KV with a double-wide FFN (feed_forward_length
# [192 x 4, 384 x 2], as E2B's use_double_wide_mlp), layer 3 (global, the K/V of layer 5) without
# attn_v (V = K's projection, attention_k_eq_v), per-layer embeddings of 64, final softcapping 30;
# the MoE model (moe_implemented gains GEMMA4) the same with every layer's experts beside its dense
# FFN: 2 experts, 2 used, fused gate_up, 192 wide, ffn_gate_inp.scale, pre/post_ffw_norm_1/2. The copy is linked against scripts/build-llama.sh's
# static libllama (the oracle's llama.cpp).
# Usage: tests/data/archs/gemma4-fixture.sh [BUILD_DIR]   (prints each model's size for MANIFEST)
set -eu
cd "$(dirname "$0")/../../.."
build=${1:-build}
bin=$(bash scripts/build-llama.sh)
dir=$(dirname "$bin")/..
src=$dir/llama.cpp
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cp "$src/tests/test-llama-archs.cpp" "$w/t.cpp"
(cd "$w" && patch -s -p1 t.cpp <"$OLDPWD/tests/data/archs/gemma4-fixture.patch")
sed -i "s#\"\\.\\./src/#\"$src/src/#" "$w/t.cpp"
c++ -O1 -DGGML_USE_CPU -I"$src/include" -I"$src/ggml/include" -I"$src/common" -I"$src/vendor" -I"$src/src" -c "$w/t.cpp" -o "$w/t.o"
b=$(cd "$bin/.." && pwd)
c++ "$w/t.o" -o "$w/t" "$b/src/libllama.a" "$b/common/libllama-common.a" "$b/src/libllama.a" "$b/ggml/src/libggml.a" -ldl \
  "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/libggml-base.a" -lm "$b/common/libllama-common-base.a" \
  "$b/vendor/cpp-httplib/libcpp-httplib.a" -lssl -lcrypto -lpthread
mkdir "$w/out"
"$w/t" -s 42 -a gemma4 -o "$w/out" >/dev/null 2>&1
for n in dense moe; do
  f=$w/out/gemma4-$n.gguf
  off=$("$build/iqforge" inspect "$f" | grep -o 'data at offset [0-9]*' | awk '{print $4}')
  head -c "$off" "$f" >tests/data/archs/gemma4-$n.skel
  echo "gemma4-$n $(stat -c %s "$f")"
done
