#!/usr/bin/env bash
# CLI contract of `iqforge quantize-raw` / `dequantize-raw`: round trips, and every error case
# gives a one-line message naming the file, exit status 1, and no output file.
set -u
. "$(dirname "$0")/lib/common.sh"
cli=$CLI
t=$T

# expect_fail NAME PATTERN OUT -- command...: exit 1, one stderr line matching PATTERN, no OUT.
expect_fail() {
  local name=$1 pat=$2 out=$3; shift 4
  "$@" 2>"$t/err" >/dev/null; local rc=$?
  local lines; lines=$(wc -l <"$t/err")
  if [ $rc -ne 1 ]; then bad "$name: exit $rc (want 1): $(cat "$t/err")"; return; fi
  if [ "$lines" -ne 1 ]; then bad "$name: $lines stderr lines: $(cat "$t/err")"; return; fi
  if ! grep -q -- "$pat" "$t/err"; then bad "$name: message '$(cat "$t/err")' lacks '$pat'"; return; fi
  if [ -n "$out" ] && ls "$out"* >/dev/null 2>&1; then bad "$name: output file left: $(ls "$out"*)"; return; fi
  ok
}

# Input: 4 rows x 512 float32 (deterministic), via python-free printf of a small generator.
gen() { # rows cols > file
  awk -v r="$1" -v c="$2" 'BEGIN{srand(7); for(i=0;i<r*c;i++){ v=(rand()-0.5)*4; printf "%s\n", v } }' |
    perl -e 'while(<>){ print pack("f<", $_) }'
}
gen 4 512 > "$t/x.f32"
perl -e 'print pack("f<", 1.0) x 512' > "$t/im.f32"

types=$("$cli" quantize-raw --list-types)
[ $? -eq 0 ] && ok || bad "--list-types failed"
"$cli" quantize-raw --help | grep -q "usage: iqforge quantize-raw" && ok || bad "quantize-raw --help"
"$cli" dequantize-raw --help | grep -q "usage: iqforge dequantize-raw" && ok || bad "dequantize-raw --help"

# Pick a 256-block type to exercise: iq3_xxs when present, else any listed type.
ty=iq3_xxs; echo "$types" | grep -qx iq3_xxs || ty=$(echo "$types" | head -1)
if [ -n "$ty" ]; then
  "$cli" quantize-raw --type "$ty" --cols 512 --imatrix "$t/im.f32" --threads 2 "$t/x.f32" "$t/q.bin" && ok || bad "quantize $ty"
  "$cli" quantize-raw --type "$ty" --cols 512 --imatrix "$t/im.f32" --threads 1 "$t/x.f32" "$t/q1.bin" && ok || bad "quantize $ty 1 thread"
  cmp -s "$t/q.bin" "$t/q1.bin" && ok || bad "$ty output depends on thread count"
  "$cli" dequantize-raw --type "$ty" --cols 512 "$t/q.bin" "$t/y.f32" && ok || bad "dequantize $ty"
  [ "$(stat -c %s "$t/y.f32")" = 8192 ] && ok || bad "dequantized size"
  # The values, not only the size: the relative RMS error of the round trip against the input
  # (float64 in perl) is that of a ~3-bit code on uniform data (iq3_xxs: about 0.1), and
  # nonzero (the decoder did not just copy).
  rel=$(perl -e 'open A,"<",$ARGV[0]; open B,"<",$ARGV[1]; binmode A; binmode B; local $/; my @x=unpack("f<*",<A>); my @y=unpack("f<*",<B>);
    die "count" if @x != @y; my ($e,$s)=(0,0); for my $i (0..$#x){ $e+=($x[$i]-$y[$i])**2; $s+=$x[$i]**2 } printf "%.6f", sqrt($e/$s)' "$t/x.f32" "$t/y.f32")
  awk -v r="$rel" 'BEGIN{exit !(r > 0.01 && r < 0.2)}' && ok || bad "$ty round trip: relative RMS error $rel, want in (0.01, 0.2)"
  ls "$t"/*.tmp.* >/dev/null 2>&1 && bad "temporary file left behind" || ok
  expect_fail "cols not multiple of block" "not a multiple" "$t/o1" -- "$cli" quantize-raw --type "$ty" --cols 100 "$t/x.f32" "$t/o1"
  head -c 100 "$t/q.bin" > "$t/q.short"
  expect_fail "truncated block file" "q.short: size 100 bytes is not a whole number of rows" "$t/o3" -- "$cli" dequantize-raw --type "$ty" --cols 512 "$t/q.short" "$t/o3"
  expect_fail "imatrix wrong size" "im.f32" "$t/o4" -- "$cli" quantize-raw --type "$ty" --cols 256 --imatrix "$t/im.f32" "$t/x.f32" "$t/o4"
  # NaN at row 2, column 5.
  cp "$t/x.f32" "$t/nan.f32"
  perl -e 'print pack("f<", 9**9**9/9**9**9)' | dd of="$t/nan.f32" bs=4 seek=$((2*512+5)) conv=notrunc status=none
  expect_fail "NaN input" "row 2, column 5" "$t/o5" -- "$cli" quantize-raw --type "$ty" --cols 512 "$t/nan.f32" "$t/o5"
  expect_fail "full disk" "/dev/full" "" -- "$cli" quantize-raw --type "$ty" --cols 512 --imatrix "$t/im.f32" "$t/x.f32" /dev/full
  expect_fail "output is input" "same file" "" -- "$cli" quantize-raw --type "$ty" --cols 512 "$t/x.f32" "$t/x.f32"
  mkdir "$t/ro"; chmod 500 "$t/ro"
  if [ "$(id -u)" != 0 ]; then
    expect_fail "unwritable output" "ro/o" "$t/ro/o" -- "$cli" quantize-raw --type "$ty" --cols 512 "$t/x.f32" "$t/ro/o"
  fi
  expect_fail "output folder missing" "nodir/o" "" -- "$cli" quantize-raw --type "$ty" --cols 512 "$t/x.f32" "$t/nodir/o"
fi
# q8_0 round trip: every value within half a step (d = amax/127 per block of 32; d is stored as f16,
# which adds up to 127 * d * 2^-11)
# of the input, computed independently in perl.
if echo "$types" | grep -qx q8_0; then
  "$cli" quantize-raw --type q8_0 --cols 512 "$t/x.f32" "$t/q8.bin" && ok || bad "quantize q8_0"
  "$cli" dequantize-raw --type q8_0 --cols 512 "$t/q8.bin" "$t/y8.f32" && ok || bad "dequantize q8_0"
  worst=$(perl -e 'open A,"<",$ARGV[0]; open B,"<",$ARGV[1]; binmode A; binmode B; local $/; my @x=unpack("f<*",<A>); my @y=unpack("f<*",<B>);
    die "count" if @x != @y; my $w=0; for (my $b=0; $b<@x; $b+=32){ my $m=0; for my $i ($b..$b+31){ $m=abs($x[$i]) if abs($x[$i])>$m }
    my $d=$m/127; for my $i ($b..$b+31){ my $r=abs($x[$i]-$y[$i])/($d*(0.5+127/2048)+1e-30); $w=$r if $r>$w } } printf "%.4f", $w' "$t/x.f32" "$t/y8.f32")
  awk -v r="$worst" 'BEGIN{exit !(r > 0.1 && r <= 1.0)}' && ok || bad "q8_0 round trip: worst error $worst half-steps, want <= 1"
fi
head -c 1000 "$t/x.f32" > "$t/x.short"
expect_fail "float file not whole rows" "x.short: size 1000 bytes is not a whole number of rows" "$t/o6" -- "$cli" quantize-raw --type f16 --cols 512 "$t/x.short" "$t/o6"
expect_fail "missing input" "nope.f32: cannot open" "$t/o7" -- "$cli" quantize-raw --type f16 --cols 512 "$t/nope.f32" "$t/o7"
expect_fail "unknown type" "unknown type 'q9_9'" "$t/o8" -- "$cli" quantize-raw --type q9_9 --cols 512 "$t/x.f32" "$t/o8"
"$cli" quantize-raw --type f16 --cols 512 "$t/x.f32" 2>/dev/null; [ $? -eq 2 ] && ok || bad "missing OUT is a usage error"

finish raw
