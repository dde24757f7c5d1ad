#!/usr/bin/env bash
# Builds llama.cpp's own tools from the source bundled in npm node-llama-cpp@3.22.1 (the same
# llama.cpp as the oracle's ggml 0.25.1), outside the repository, cached:
#   $IQF_LLAMA_DIR (default ~/.cache/iqforge/llama-src)/build/bin/{llama-quantize,
#   llama-perplexity, llama-imatrix, test-llama-archs}
# For differential tests and benchmarks only; iqforge never links any of it.
# Usage: scripts/build-llama.sh [TARGET...]   (default: the four above). Prints the bin folder.
set -eu
dir="${IQF_LLAMA_DIR:-$HOME/.cache/iqforge/llama-src}"
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(llama-quantize llama-perplexity llama-imatrix test-llama-archs)
mkdir -p "$dir"
# One build at a time (tests running in parallel may all ask for it).
exec 9>"$dir/.lock"
flock 9
if [ ! -f "$dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" ]; then
  command -v npm >/dev/null 2>&1 || bash "$(dirname "$0")/install-oracle.sh"
  npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error node-llama-cpp@3.22.1 >&2
fi
if [ ! -f "$dir/llama.cpp/CMakeLists.txt" ]; then
  rm -rf "$dir/llama.cpp"
  git clone -q "$dir/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$dir/llama.cpp" 2>/dev/null
fi
need=0
for t in "${targets[@]}"; do [ -x "$dir/build/bin/$t" ] || need=1; done
if [ $need = 1 ]; then
  cmake -S "$dir/llama.cpp" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=ON -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF >&2
  cmake --build "$dir/build" -j "$(nproc)" --target "${targets[@]}" >&2
fi
echo "$dir/build/bin"
