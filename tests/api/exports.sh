#!/bin/bash
# libiqforge.so exports exactly the public API: every dynamic symbol it defines is a function
# marked IQF_API in include/iqforge.h, and every such function is exported.
# Usage: exports.sh SOURCE_DIR SHARED_LIB
set -u
SRC=$1
LIB=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
command -v nm >/dev/null || { echo "FAIL: nm not found"; exit 1; }
nm -D --defined-only "$LIB" | awk '{print $NF}' | sort -u >"$T/exported"
# The declarations: "IQF_API <type> [*]name(" (the name is the last word before the parenthesis).
grep -E '^IQF_API ' "$SRC/include/iqforge.h" | sed -E 's/\(.*//; s/.*[ *]//' | sort -u >"$T/api"
fail=0
extra=$(comm -23 "$T/exported" "$T/api")
missing=$(comm -13 "$T/exported" "$T/api")
if [ -n "$extra" ]; then echo "FAIL: exported but not public API:"; echo "$extra" | head -50; fail=1; fi
if [ -n "$missing" ]; then echo "FAIL: public API not exported:"; echo "$missing"; fail=1; fi
n=$(wc -l <"$T/api")
[ "$n" -gt 100 ] || { echo "FAIL: only $n IQF_API declarations found"; fail=1; }
grep -qv '^iqf_' "$T/exported" && { echo "FAIL: exported names without the iqf_ prefix"; fail=1; }
[ $fail = 0 ] && echo "exports: $n API functions, nothing else: 1 passed, 0 failed"
exit $fail
