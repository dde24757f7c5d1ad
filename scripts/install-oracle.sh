#!/usr/bin/env bash
# Installs the test oracle (ggml 0.25.1 from npm @node-llama-cpp/linux-x64@3.22.1) into a cache
# outside the repository: $IQF_ORACLE_DIR, default ~/.cache/iqforge/oracle. Used only by the
# differential tests and benchmarks; iqforge itself never links it.
# `install-oracle.sh arm64` installs the same release built for arm64
# (@node-llama-cpp/linux-arm64@3.22.1, beside the x64 one) for the aarch64 build's tests under
# qemu (scripts/arm64-ci.sh; tests/oracle/oracle.h picks the build's platform).
# Under CI=true a failure here fails the run; elsewhere it only warns (those tests then skip).
set -u
dir="${IQF_ORACLE_DIR:-$HOME/.cache/iqforge/oracle}"
case "${1:-x64}" in
  x64) plat=linux-x64 ;;
  arm64) plat=linux-arm64 ;;
  *) echo "install-oracle: unknown platform '$1' (x64 or arm64)" >&2; exit 2 ;;
esac
lib="$dir/node_modules/@node-llama-cpp/$plat/bins/$plat/libggml-base.so"
[ -f "$lib" ] && exit 0
fail() {
  echo "install-oracle: $*" >&2
  case "${CI:-}" in ""|0|false|FALSE|False|no) ;; *) exit 1 ;; esac
  echo "install-oracle: differential tests will be skipped" >&2
  exit 0
}
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "install-oracle: npm not found; installing Debian's nodejs and npm" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm) >&2 \
      || fail "could not install npm with apt-get"
  else
    fail "npm not found (install nodejs and npm)"
  fi
fi
mkdir -p "$dir"
echo "install-oracle: npm install @node-llama-cpp/$plat@3.22.1 into $dir" >&2
npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
  "@node-llama-cpp/$plat@3.22.1" >&2 || fail "npm install failed"
[ -f "$lib" ] || fail "npm install did not produce $lib"
exit 0
