#!/usr/bin/env bash
# arm64 (aarch64) check for CI: cross-compiles with Debian's gcc-aarch64-linux-gnu at
# -Wall -Wextra -Werror (cmake/aarch64-linux-gnu.cmake) and runs a subset of the tests under
# qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR), the differential ones against ggml's arm64 build
# (npm @node-llama-cpp/linux-arm64@3.22.1, scripts/install-oracle.sh arm64). Installs what it
# needs with apt. Budget: about 8 minutes on the 2-core CI machine (qemu runs code 10-30x slower
# than native, so only quick tests are here; `ARM64_TESTS=regex` runs others).
# Usage: scripts/arm64-ci.sh [BUILD_DIR]   (default build-arm64)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build-arm64}"
need=()
command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null 2>&1 || need+=(qemu-user)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "arm64-ci: missing ${need[*]}; install them with your package manager" >&2
    exit 1
  fi
fi
bash scripts/install-oracle.sh arm64
# The quick tests (test_tokenizer: against the arm64 libllama; test_compat_platform: compat bytes
# and decoders of the 18 types whose rounding depends on the platform's ggml, against ggml's
# arm64 build, about 3 minutes under qemu; docs/COMPAT.md, "arm64"; test_model: the engine on
# stories260K, greedy text against llama.cpp's and the NEON level's logits equal to the scalar path's, 11 s).
tests="${ARM64_TESTS:-^(test_types|test_gguf|test_codec_api|test_recipe|test_tokenizer|test_compat_platform|test_model)$}"
targets=$(echo "$tests" | tr -d '^$()' | tr '|' ' ')
cmake -S . -B "$build" -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release >/dev/null
# shellcheck disable=SC2086
cmake --build "$build" -j "$(nproc)" --target iqforge-cli $targets >/dev/null
cd "$build"
ctest --output-on-failure -j "$(nproc)" -R "$tests"
