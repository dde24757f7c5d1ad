#!/usr/bin/env bash
# Doc check: the docs a user reads stay current references, not diaries. Fails when
# docs/QUALITY.md or docs/PERFORMANCE.md pass 400 lines or README.md passes 200, or when
# README.md or any *.md under docs/ speaks of work periods ("this session", "last session",
# "previous session", "kept for the record", "today"; case-insensitive): a figure's table names
# its command, machine and date, and how figures changed is git's history.
set -u
. "$(dirname "$0")/lib/common.sh"

max_lines() {  # FILE LIMIT
    local f=$SRC/$1 n
    [ -f "$f" ] || { bad "$1: missing"; return; }
    n=$(wc -l < "$f")
    [ "$n" -le "$2" ] && ok || bad "$1: $n lines, more than $2"
}
max_lines README.md 200
max_lines docs/QUALITY.md 400
max_lines docs/PERFORMANCE.md 400

words='this session|last session|previous session|kept for the record|today'
files=("$SRC/README.md")
while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$SRC/docs" -name '*.md' -print0)
[ ${#files[@]} -gt 5 ] && ok || bad "found only ${#files[@]} docs"
for f in "${files[@]}"; do
    if grep -Ein -- "$words" "$f" >"$T/hits"; then
        bad "${f#"$SRC"/} speaks of work periods:"; sed 's/^/  | /' "$T/hits" >&2
    else ok; fi
done
finish docs
