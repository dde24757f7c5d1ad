#!/usr/bin/env bash
# link_reject.sh BUILD_DIR - the layer libraries' edges are enforced by the linker: a codec-layer
# file that calls the engine (tests/layers/codec_calls_model.c) does not link against the codec
# layer and the layers below it (iqf_linkreject_codec_model), while the same file calling util
# does (iqf_linkok_codec_util). Both targets are outside `all`; this builds them.
set -u
B=${1:?usage: link_reject.sh BUILD_DIR}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail=0
if cmake --build "$B" --target iqf_linkok_codec_util >"$log" 2>&1; then
    echo "ok: a codec file calling util links"
else
    echo "FAIL: a codec file calling util does not link:"; tail -20 "$log"; fail=1
fi
if cmake --build "$B" --target iqf_linkreject_codec_model >"$log" 2>&1; then
    echo "FAIL: a codec file calling iqf_model_free linked against the codec layer"; fail=1
elif grep -q "undefined reference to .iqf_model_free" "$log"; then
    echo "ok: the linker rejects a call from the codec layer into the model layer"
else
    echo "FAIL: the codec -> model probe failed, but not at link time:"; tail -20 "$log"; fail=1
fi
[ $fail = 0 ] && echo "link_reject: 2 passed, 0 failed"
exit $fail
