#!/usr/bin/env bash
# Writes the seed corpus of the `pipeline` fuzz target into fuzz/corpus/pipeline: every
# examples/*.json and tests/data/*.json as a graph input (first byte 0), and every .npy under
# tests/data as an .npy input (first byte 1). The egraph-serialize seeds (first byte 2) are the
# final e-graphs of two examples, from `dlc-egg optimize --dump egraph`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=fuzz/corpus/pipeline
mkdir -p "$out"
for f in examples/*.json tests/data/*.json; do
    { printf '\x00'; cat "$f"; } > "$out/graph-$(basename "$f")"
done
find tests/data -name '*.npy' | sort | while read -r f; do
    { printf '\x01'; cat "$f"; } > "$out/npy-$(echo "$f" | tr '/' '_')"
done
bin=target/release/dlc-egg
[[ -x $bin ]] || cargo build --release
for ex in gemm_bias_relu layernorm; do
    { printf '\x02'; "$bin" optimize "examples/$ex.json" --dump egraph; } > "$out/egraph-$ex.json"
done
ls "$out" | wc -l
