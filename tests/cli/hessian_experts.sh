#!/usr/bin/env bash
# CLI of per-expert Hessians on test-llama-archs' qwen3moe (2 layers, 2 experts; rebuilt from
# tests/data/archs/qwen3moe-moe.skel by iqf-archmodel): `imatrix --hessian` writes one 3-D entry per
# expert input (gate/up's shared one, down's) of shape [bs, n, n_expert], `--hessian-experts 32`
# keeps 32-blocks, `off` none; `quantize --hessian` uses them per expert (log), the same bytes at 1
# and 2 threads, different bytes from a file without the expert entries; a bad value is a usage
# error (exit 2).
set -u
. "$(dirname "$0")/lib/common.sh"
BIN=$(dirname "$CLI")
text="$SRC/tests/data/text/tinystories-valid-excerpt.txt"
"$BIN/iqf-archmodel" "$SRC/tests/data/archs/qwen3moe-moe.skel" 7119776 "$T/m.gguf" 42 && ok || { bad "iqf-archmodel"; finish hessian_experts; exit; }
capture() { # OUT [--hessian-experts V]
    local out=$1; shift
    "$CLI" imatrix -m "$T/m.gguf" -f "$text" -c 128 --chunks 2 -o "$T/im.gguf" --hessian "$out" "$@" -t 2 --quiet 2>"$T/err" &&
        ok || bad "imatrix --hessian $*: $(cat "$T/err")"
    "$CLI" inspect "$out" >"$T/ins" 2>&1 || bad "inspect $out"
}
capture "$T/h.gguf"
expect "gate/up entry" 'blk\.0\.ffn_gate_up_exps\.hessian +256 x 256 x 2 ' "$T/ins"
expect "down entry" 'blk\.1\.ffn_down_exps\.hessian +384 x 384 x 2 ' "$T/ins"
[ "$(grep -v expert_counts "$T/ins" | grep -c '_exps\.hessian')" = 4 ] && ok || bad "want 4 expert entries: $(grep '_exps' "$T/ins")"
expect "their rows recorded" 'hessian\.expert_counts\.blk\.1\.ffn_down_exps\.hessian +arr\[u64\] += \[[0-9]+, [0-9]+\]' "$T/ins"
capture "$T/h32.gguf" --hessian-experts 32
expect "32-blocks" 'blk\.0\.ffn_gate_up_exps\.hessian +32 x 256 x 2 ' "$T/ins"
capture "$T/hoff.gguf" --hessian-experts off
reject "off: no expert entries" '_exps\.hessian' "$T/ins"
expect "off: dense entries stay" 'blk\.0\.attn_qkv\.hessian' "$T/ins"
for v in 0 abc; do
    "$CLI" imatrix -m "$T/m.gguf" -f "$text" -o "$T/x.gguf" --hessian "$T/hx.gguf" --hessian-experts "$v" >/dev/null 2>"$T/err"
    [ $? -eq 2 ] && grep -q "bad --hessian-experts" "$T/err" && ok || bad "--hessian-experts $v: $(cat "$T/err")"
done
q() { # HESSIAN OUT THREADS
    "$CLI" quantize --imatrix "$T/im.gguf" --hessian "$1" "$T/m.gguf" "$2" Q4_K_M "$3" >"$T/log" 2>&1 || bad "quantize --hessian $1: $(tail -3 "$T/log")"
}
q "$T/h.gguf" "$T/q1.gguf" 1
expect "per-expert feedback in the log" 'blk\.0\.ffn_down_exps\.weight: error feedback with blk\.0\.ffn_down_exps\.hessian \(384 x 384, full, per expert\)' "$T/log"
expect "gate uses the shared slot" 'blk\.1\.ffn_gate_exps\.weight: error feedback with blk\.1\.ffn_gate_up_exps\.hessian' "$T/log"
q "$T/h.gguf" "$T/q2.gguf" 2
cmp -s "$T/q1.gguf" "$T/q2.gguf" && ok || bad "per-expert feedback depends on the thread count"
q "$T/hoff.gguf" "$T/qoff.gguf" 2
expect "without expert entries: plain encoder" 'blk\.0\.ffn_down_exps\.weight: no Hessian' "$T/log"
cmp -s "$T/q1.gguf" "$T/qoff.gguf" && bad "the expert Hessians changed nothing" || ok
finish hessian_experts
