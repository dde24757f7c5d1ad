#!/bin/bash
# The usage example at the top of include/iqforge.h: extracted (BEGIN EXAMPLE .. END EXAMPLE),
# compiled against that header alone with -Wall -Wextra -Werror, linked with the shared library
# (libiqforge.so) and run on the bundled stories260K model: it must quantize the model and print
# a finite perplexity. Usage: example.sh SOURCE_DIR SHARED_LIB
set -u
SRC=$1
LIB=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
CC=${CC:-cc}
sed -n '/^ \* BEGIN EXAMPLE$/,/^ \* END EXAMPLE$/p' "$SRC/include/iqforge.h" | sed '1d;$d' | sed -E 's/^ \*( {1,2}|$)//' >"$T/example.c"
[ -s "$T/example.c" ] || { echo "FAIL: no example found in iqforge.h"; exit 1; }
cat >>"$T/example.c" <<'MAIN'

int main(int argc, char **argv) {
    if (argc != 5) return 2;
    FILE *f = fopen(argv[4], "rb");
    if (!f) return 2;
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text, f);
    fclose(f);
    return quantize_and_measure(argv[1], argv[2], argv[3], text, len, IQF_FTYPE_MOSTLY_Q8_0);
}
MAIN
# A sanitized library (make asan) needs its runtime first: build the example the same way.
SAN=
ldd "$LIB" | grep -q libasan && SAN="-fsanitize=address,undefined"
"$CC" -std=c11 -Wall -Wextra -Werror $SAN -I"$SRC/include" -o "$T/example" "$T/example.c" \
    -L"$(dirname "$LIB")" -liqforge -lm -lpthread || { echo "FAIL: the example does not compile or link"; exit 1; }
ldd "$T/example" | grep -q 'libiqforge\.so' || { echo "FAIL: not linked with the shared library"; exit 1; }
D=$SRC/tests/data
out=$(LD_LIBRARY_PATH="$(dirname "$LIB")" "$T/example" "$D/stories260K/stories260K-f32.gguf" \
      "$D/stories260K/imatrix-groups_merged-c256.gguf" "$T/q8.gguf" "$D/text/tinystories-valid-excerpt.txt") \
    || { echo "FAIL: the example exited with $?: $out"; exit 1; }
echo "$out"
echo "$out" | grep -Eq '^.*q8\.gguf: PPL [0-9]+\.[0-9]+ \+/- [0-9]+\.[0-9]+$' || { echo "FAIL: unexpected output"; exit 1; }
echo "example: 1 passed, 0 failed"
