#!/usr/bin/env bash
# Installs the test oracle (ggml 0.25.1 from npm @node-llama-cpp/linux-x64@3.22.1) into a cache
# outside the repository: $IQF_ORACLE_DIR, default ~/.cache/iqforge/oracle. Used only by the
# differential tests and benchmarks; iqforge itself never links it.
# Under CI=true a failure here fails the run; elsewhere it only warns (those tests then skip).
set -u
dir="${IQF_ORACLE_DIR:-$HOME/.cache/iqforge/oracle}"
lib="$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so"
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
echo "install-oracle: npm install @node-llama-cpp/linux-x64@3.22.1 into $dir" >&2
npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts --loglevel=error \
  @node-llama-cpp/linux-x64@3.22.1 >&2 || fail "npm install failed"
[ -f "$lib" ] || fail "npm install did not produce $lib"
exit 0
