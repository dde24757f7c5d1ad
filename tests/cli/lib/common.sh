# tests/cli/lib/common.sh - sourced by the CLI tests (tests/cli/*.sh): the binary under test, the
# source tree, a temporary folder removed on exit, and the counting helpers. The caller ends with
# `finish NAME`, which prints "cli NAME: N passed, N failed" and sets the exit status.
CLI=${IQF_CLI:-build/iqforge}
SRC=${IQF_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
expect() { # expect DESCRIPTION PATTERN FILE: the file has a line matching the ERE
    if grep -Eq -- "$2" "$3"; then ok; else bad "$1: no /$2/ in output"; sed 's/^/  | /' "$3" | head -30 >&2; fi
}
reject() { # reject DESCRIPTION PATTERN FILE: no line matches
    if grep -Eq -- "$2" "$3"; then bad "$1: /$2/ in output"; sed 's/^/  | /' "$3" | head -30 >&2; else ok; fi
}
finish() {
    echo "cli $1: $pass passed, $fails failed"
    [ $fails -eq 0 ]
}
