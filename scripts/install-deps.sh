#!/usr/bin/env bash
# Installs the build tools iqforge needs on Debian if they are missing (gcc, make, cmake) and
# the test oracle (scripts/install-oracle.sh). Safe to run repeatedly.
set -eu
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v cmake >/dev/null 2>&1 || need+=(cmake)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
  else
    echo "install-deps: missing ${need[*]}; install them with your package manager" >&2
    exit 1
  fi
fi
bash "$(dirname "$0")/install-oracle.sh"
# CI only: a headless browser for the ladder SVG's rendering check (tests/cli/ladder.sh). Optional:
# without it that test checks the SVG's structure only.
if [ "${CI:-}" = "true" ] && ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "install-deps: chromium not installed; the SVG is checked structurally only" >&2
fi
