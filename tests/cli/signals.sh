#!/usr/bin/env bash
# Interrupted runs leave no file: SIGINT, SIGTERM, SIGHUP and a double SIGINT sent to a running
# `quantize` (a 135 MiB synthetic model to IQ2_XXS on one thread, a few seconds), and a file size
# limit (`ulimit -f`, SIGXFSZ/EFBIG) under quantize, perplexity --kld-base and imatrix. Each must
# exit with the stated status, print one line saying what happened, and leave neither the output
# nor its OUT.tmp.XXXXXX temporary file.
set -u
. "$(dirname "$0")/lib/common.sh"
GEN="$(dirname "$CLI")/iqf-genmodel"
# Job control: background jobs get their own process group and do not ignore SIGINT.
set -m

"$GEN" "$T/m.gguf" --scale 4 --layers 4 --imatrix "$T/im.gguf" || { echo "generator failed"; exit 1; }

no_leftovers() { # DESCRIPTION
    local left
    left=$(ls "$T/out" 2>/dev/null)
    [ -z "$left" ] && ok || bad "$1: left behind: $left"
}

# interrupt DESCRIPTION WANT_STATUS SIGNAL [SIGNAL...]: start quantize, wait until its temporary
# output exists (the run is then writing tensor data), send the signals, check.
interrupt() {
    local what=$1 want=$2
    shift 2
    rm -rf "$T/out"
    mkdir "$T/out"
    "$CLI" quantize --quiet --imatrix "$T/im.gguf" "$T/m.gguf" "$T/out/q.gguf" IQ2_XXS 1 >/dev/null 2>"$T/err" &
    local pid=$! k=0
    while [ -z "$(ls "$T/out" 2>/dev/null)" ] && [ $k -lt 1000 ]; do sleep 0.01; k=$((k + 1)); done
    if [ -z "$(ls "$T/out" 2>/dev/null)" ]; then
        bad "$what: no temporary file appeared"
        wait $pid
        return
    fi
    sleep 0.2
    for s in "$@"; do kill -s "$s" $pid 2>/dev/null; done
    wait $pid
    local rc=$?
    [ $rc -eq "$want" ] && ok || bad "$what: exit status $rc, want $want ($(cat "$T/err"))"
    [ "$(wc -l <"$T/err")" -eq 1 ] && ok || bad "$what: want one line on stderr, got: $(cat "$T/err")"
    grep -Eq "^iqforge quantize: interrupted by SIG$1; temporary output removed, nothing written$" "$T/err" && ok ||
        bad "$what: message: $(cat "$T/err")"
    no_leftovers "$what"
}

interrupt SIGINT 130 INT
interrupt SIGTERM 143 TERM
interrupt SIGHUP 129 HUP
interrupt "double SIGINT" 130 INT INT

# A file size limit: the write that crosses it fails with EFBIG (SIGXFSZ is ignored), one line,
# exit 1, no file. 1024-byte blocks: 2 MiB is far below the outputs.
limited() { # DESCRIPTION PATTERN COMMAND...
    local what=$1 pat=$2
    shift 2
    rm -rf "$T/out"
    mkdir "$T/out"
    (ulimit -f 2048; "$@" >/dev/null 2>"$T/err")
    local rc=$?
    [ $rc -eq 1 ] && ok || bad "$what: exit status $rc, want 1 ($(cat "$T/err"))"
    grep -q -- "$pat" "$T/err" && ok || bad "$what: message lacks '$pat': $(cat "$T/err")"
    [ "$(wc -l <"$T/err")" -eq 1 ] && ok || bad "$what: want one line on stderr: $(cat "$T/err")"
    no_leftovers "$what"
}
limited "quantize under ulimit -f" "q.gguf: File too large" "$CLI" quantize --quiet "$T/m.gguf" "$T/out/q.gguf" Q8_0 1

# Engine commands on stories260K (their outputs are small: a limit of 1 KiB is crossed).
model="$SRC/tests/data/stories260K/stories260K-f32.gguf"
text="$SRC/tests/data/text/tinystories-valid-excerpt.txt"
limited1() {
    local what=$1 pat=$2
    shift 2
    rm -rf "$T/out"
    mkdir "$T/out"
    (ulimit -f 1; "$@" >/dev/null 2>"$T/err")
    local rc=$?
    [ $rc -eq 1 ] && ok || bad "$what: exit status $rc, want 1 ($(cat "$T/err"))"
    grep -q -- "$pat" "$T/err" && ok || bad "$what: message lacks '$pat': $(cat "$T/err")"
    [ "$(grep -c '^iqforge: ' "$T/err")" -eq 1 ] && ok || bad "$what: want one error line: $(cat "$T/err")"
    no_leftovers "$what"
}
limited1 "perplexity --kld-base under ulimit -f" "base.kld: File too large" \
    "$CLI" perplexity -m "$model" -f "$text" -c 64 --chunks 4 -t 1 --kld-base "$T/out/base.kld"
limited1 "imatrix under ulimit -f" "im.gguf: File too large" \
    "$CLI" imatrix -m "$model" -f "$text" -c 64 --chunks 4 -t 1 -o "$T/out/im.gguf"

finish signals
