#!/usr/bin/env bash
# CLI test: the man pages of docs/man (installed into share/man/man1, written by
# scripts/gen-man.sh). Every command of tools/main.c's commands[] (and so every cmd_*.c) has a
# page docs/man/iqforge-NAME.1, and iqforge.1 exists; no page is left for a command that is
# gone; each page has .TH, .SH NAME (with "NAME \- ..."), SYNOPSIS and DESCRIPTION; each
# command page's OPTIONS block is the binary's current `iqforge NAME --help` (else: rerun
# scripts/gen-man.sh). Where groff is installed, each page renders with
# `groff -man -Tutf8 -ww -z` without a warning; without groff that part is skipped.
set -u
. "$(dirname "$0")/lib/common.sh"
MAN=$SRC/docs/man
MAIN=$SRC/tools/main.c

# The commands: rows `{ "NAME", cmd_FUNC, "..." }` of commands[] in main.c.
cmds=$(sed -n 's/^ *{ *"\([a-z-]*\)", *cmd_[a-z_]*,.*/\1/p' "$MAIN")
[ -n "$cmds" ] && ok || bad "no commands found in $MAIN"
# Every cmd_FUNC defined in tools/cmd_*.c is dispatched by a row of commands[].
for f in "$SRC"/tools/cmd_*.c; do
    for fn in $(sed -n 's/^int \(cmd_[a-z_]*\)(int argc.*/\1/p' "$f"); do
        grep -Eq "^ *\{ *\"[a-z-]+\", *$fn," "$MAIN" && ok || bad "$(basename "$f"): $fn is not in commands[] of tools/main.c"
    done
done

check_page() {  # FILE NAME
    local f=$1 name=$2
    [ -s "$f" ] || { bad "$name: no man page $f"; return; }
    grep -q '^\.TH ' "$f" && ok || bad "$f: no .TH line"
    grep -A1 '^\.SH NAME' "$f" | grep -q "^$name \\\\- ." && ok || bad "$f: no .SH NAME with '$name \\- ...'"
    grep -q '^\.SH SYNOPSIS' "$f" && ok || bad "$f: no .SH SYNOPSIS"
    grep -q '^\.SH DESCRIPTION' "$f" && ok || bad "$f: no .SH DESCRIPTION"
    if command -v groff >/dev/null; then
        groff -man -Tutf8 -ww -z "$f" >"$T/groff" 2>&1
        if [ $? -eq 0 ] && [ ! -s "$T/groff" ]; then ok; else bad "$f: groff warnings"; sed 's/^/  | /' "$T/groff" | head >&2; fi
    fi
}

check_page "$MAN/iqforge.1" iqforge
for c in $cmds; do
    f=$MAN/iqforge-$c.1
    check_page "$f" "iqforge-$c"
    [ -s "$f" ] || continue
    # The OPTIONS block (between ".SH OPTIONS ... .nf" and ".fi") is the current --help after its
    # usage lines, escaped as gen-man.sh escapes it.
    awk '/^\.SH OPTIONS/ {s = 1; next} s && /^\.nf/ {on = 1; next} on && /^\.fi/ {exit} on' "$f" >"$T/page"
    "$CLI" "$c" --help 2>&1 | awk 'f {print} /^ *$/ {f = 1}' |
        sed -e 's/\\/\\e/g' -e "s/^\\([.']\\)/\\\\\\&\\1/" >"$T/help"
    if cmp -s "$T/page" "$T/help"; then ok
    else bad "$f: OPTIONS differ from \`iqforge $c --help\` (rerun scripts/gen-man.sh)"; diff "$T/page" "$T/help" | head >&2; fi
done
for f in "$MAN"/iqforge-*.1; do
    c=$(basename "$f" .1); c=${c#iqforge-}
    printf '%s\n' $cmds | grep -qx -- "$c" && ok || bad "$f: no command '$c' in tools/main.c"
done
command -v groff >/dev/null || echo "  groff not installed: pages not rendered"
finish man
