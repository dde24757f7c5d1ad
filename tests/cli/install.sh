#!/usr/bin/env bash
# Installation: `cmake --install` of this build into a temporary prefix puts bin/iqforge,
# lib/libiqforge.a, lib/libiqforge.so.0 (soname libiqforge.so.0, versioned file), include/iqforge.h,
# lib/pkgconfig/iqforge.pc and the man pages (share/man/man1) there; a small C program built with
# `pkg-config --cflags --libs iqforge` against the installed copy (shared, and static) runs and
# checks real values (a q8_0 round trip of known data, the type table, a GGUF written and read
# back). `make install PREFIX=...` is the same cmake --install (checked for the files).
set -u
CLI=${IQF_CLI:?IQF_CLI not set}
BUILD=$(cd "$(dirname "$CLI")" && pwd)
SRC=${IQF_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass+1)); }
bad() { fail=$((fail+1)); echo "FAIL: $*" >&2; }
command -v pkg-config >/dev/null || { echo "FAIL: pkg-config not found" >&2; exit 1; }
CC=${CC:-cc}

P="$T/prefix"
cmake --install "$BUILD" --prefix "$P" >"$T/log" 2>&1 && ok || { bad "cmake --install: $(tail -5 "$T/log")"; }
LIBDIR=$(dirname "$(find "$P" -name iqforge.pc | head -1)")/..
LIBDIR=$(cd "$LIBDIR" && pwd)
for f in "$P/bin/iqforge" "$LIBDIR/libiqforge.a" "$LIBDIR/libiqforge.so" "$LIBDIR/libiqforge.so.0" \
         "$P/include/iqforge.h" "$LIBDIR/pkgconfig/iqforge.pc"; do
    [ -e "$f" ] && ok || bad "not installed: $f"
done
ls "$LIBDIR"/libiqforge.so.0.* >/dev/null 2>&1 && ok || bad "no versioned libiqforge.so.0.x.y"
readelf -d "$LIBDIR/libiqforge.so.0" | grep -q 'SONAME.*\[libiqforge\.so\.0\]' && ok || bad "soname: $(readelf -d "$LIBDIR/libiqforge.so.0" | grep SONAME)"
"$P/bin/iqforge" --version | grep -q "^iqforge [0-9]" && ok || bad "installed iqforge --version"
cmp -s "$P/include/iqforge.h" "$SRC/include/iqforge.h" && ok || bad "installed header differs"
# The man pages (docs/man) under share/man/man1, where `man iqforge-quantize` finds them.
for m in "$SRC"/docs/man/*.1; do
    cmp -s "$m" "$P/share/man/man1/$(basename "$m")" && ok || bad "man page not installed: share/man/man1/$(basename "$m")"
done

export PKG_CONFIG_PATH="$LIBDIR/pkgconfig"
ver=$(pkg-config --modversion iqforge)
grep -q "#define IQF_VERSION \"$ver\"" "$SRC/include/iqforge.h" && ok || bad "pkg-config version $ver is not IQF_VERSION"

cat > "$T/prog.c" <<'C'
#include <iqforge.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
int main(void) {
    float x[64], y[64];
    unsigned char q[2 * 34];
    for (int i = 0; i < 64; i++) x[i] = (float)(i - 32) / 8.0f; /* amax 4: d = 4/127 */
    char err[256];
    if (iqf_type_from_name("q8_0") != IQF_TYPE_Q8_0 || iqf_row_size(IQF_TYPE_Q8_0, 64) != 68) return 2;
    if (iqf_quantize(IQF_TYPE_Q8_0, x, q, 1, 64, NULL, NULL, err, sizeof err)) { puts(err); return 3; }
    if (iqf_dequantize(IQF_TYPE_Q8_0, q, y, 1, 64, 1, err, sizeof err)) { puts(err); return 4; }
    double worst = 0;
    for (int i = 0; i < 64; i++) worst = fmax(worst, fabs(x[i] - y[i]));
    if (!(worst <= 0.5 * 4.0 / 127 * 1.13 && y[0] < -3.95f)) { printf("q8_0 error %g\n", worst); return 5; }
    iqf_gguf_writer *w = iqf_gguf_writer_open(OUT, err, sizeof err);
    if (!w) { puts(err); return 6; }
    int64_t ne[2] = { 64, 1 };
    iqf_gguf_writer_set_str(w, "general.architecture", "llama");
    iqf_gguf_writer_add_tensor(w, "t", 1, ne, IQF_TYPE_Q8_0);
    iqf_gguf_writer_write_header(w);
    iqf_gguf_writer_write_data(w, q, 68);
    if (iqf_gguf_writer_finish(w, err, sizeof err)) { puts(err); return 7; }
    iqf_gguf *g = iqf_gguf_open(OUT, err, sizeof err);
    if (!g || iqf_gguf_n_tensors(g) != 1 || memcmp(iqf_gguf_tensor_at(g, 0)->data, q, 68)) return 8;
    if (iqf_gguf_check_schema(g, err, sizeof err)) { puts(err); return 9; }
    iqf_gguf_close(g);
    printf("ok %s %s\n", IQF_VERSION, iqf_type_get(IQF_TYPE_Q8_0)->name);
    return 0;
}
C
SAN=""
nm "$LIBDIR/libiqforge.a" 2>/dev/null | grep -q __asan_ && SAN="-fsanitize=address,undefined"
cflags=$(pkg-config --cflags iqforge)
libs=$(pkg-config --libs iqforge)
echo "$libs" | grep -q -- "-liqforge" && ok || bad "pkg-config --libs: $libs"
# Shared: the program needs libiqforge.so.0 at run time (found through LD_LIBRARY_PATH).
if $CC $SAN -std=c11 -DOUT="\"$T/a.gguf\"" $cflags "$T/prog.c" -o "$T/prog" $libs -lm 2>"$T/cc.log"; then
    ok
    readelf -d "$T/prog" | grep -q 'NEEDED.*libiqforge\.so\.0' && ok || bad "program does not need libiqforge.so.0"
    out=$(LD_LIBRARY_PATH="$LIBDIR" "$T/prog") && [ "$out" = "ok $ver q8_0" ] && ok || bad "shared program: '$out'"
else
    bad "build against the installed shared library: $(cat "$T/cc.log")"
fi
# Static: the same program with libiqforge.a (pkg-config --static adds the private libraries).
slibs=$(pkg-config --static --libs iqforge | sed 's/-liqforge/-l:libiqforge.a/')
if $CC $SAN -std=c11 -DOUT="\"$T/b.gguf\"" $cflags "$T/prog.c" -o "$T/prog_static" $slibs -lm 2>"$T/cc.log"; then
    ok
    readelf -d "$T/prog_static" | grep -q 'libiqforge' && bad "static program needs a libiqforge shared object" || ok
    out=$("$T/prog_static") && [ "$out" = "ok $ver q8_0" ] && ok || bad "static program: '$out'"
else
    bad "build against the installed static library: $(cat "$T/cc.log")"
fi
# The installed tree is relocatable (iqforge.pc uses ${pcfiledir}).
mv "$P" "$T/moved"
inc=$(PKG_CONFIG_PATH="$T/moved/${LIBDIR#"$P/"}/pkgconfig" pkg-config --cflags iqforge | sed 's/^ *-I//; s/ *$//')
[ -f "$inc/iqforge.h" ] && ok || bad "moved prefix: -I$inc has no iqforge.h"
# make install PREFIX=... (the Makefile's wrapper around cmake --install).
if [ -f "$SRC/Makefile" ]; then
    make -s -C "$SRC" install-only BUILD="$BUILD" PREFIX="$T/mk" >"$T/log" 2>&1 && ok || bad "make install-only: $(tail -3 "$T/log")"
    [ -x "$T/mk/bin/iqforge" ] && [ -e "$T/mk/include/iqforge.h" ] && ls "$T/mk"/lib*/pkgconfig/iqforge.pc >/dev/null 2>&1 && ok ||
        bad "make install PREFIX: files missing"
fi
echo "cli install: $pass passed, $fail failed"
[ $fail -eq 0 ]
