#!/bin/bash
# libiqforge.so exports exactly the public API: every dynamic symbol it defines is a function
# marked IQF_API in include/iqforge.h, every such function is exported, and every function the
# header declares is marked.
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
# A function declared in the header without IQF_API would be hidden in the shared library.
unmarked=$(grep -nE '^[A-Za-z_][A-Za-z_0-9 ]*[ *]iqf_[A-Za-z_0-9]+ *\(' "$SRC/include/iqforge.h" | grep -vE ':(IQF_API|typedef|static) ')
if [ -n "$unmarked" ]; then echo "FAIL: declared in iqforge.h without IQF_API:"; echo "$unmarked"; fail=1; fi
extra=$(comm -23 "$T/exported" "$T/api")
missing=$(comm -13 "$T/exported" "$T/api")
if [ -n "$extra" ]; then echo "FAIL: exported but not public API:"; echo "$extra" | head -50; fail=1; fi
if [ -n "$missing" ]; then echo "FAIL: public API not exported:"; echo "$missing"; fail=1; fi
n=$(wc -l <"$T/api")
[ "$n" -gt 100 ] || { echo "FAIL: only $n IQF_API declarations found"; fail=1; }
grep -qv '^iqf_' "$T/exported" && { echo "FAIL: exported names without the iqf_ prefix"; fail=1; }
[ $fail = 0 ] && echo "exports: $n API functions, nothing else: 1 passed, 0 failed"
exit $fail
