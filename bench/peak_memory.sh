#!/usr/bin/env bash
# Peak memory (max RSS) and wall time of the reference evaluator through `dlc-egg run`, measured with
# /usr/bin/time -v on the benchmark graphs, next to the issue-2 budget: 2 × (inputs + outputs) + 64 MB.
# Usage: bash bench/peak_memory.sh     (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet
bin=target/release/dlc-egg
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# name  graph  bytes of inputs+outputs
cases=(
  "matmul_512_fp32 bench/graphs/matmul_512_fp32.json $((3 * 512 * 512 * 4))"
  "conv3x3_64_56_fp32 bench/graphs/conv3x3_64_56_fp32.json $(((64 * 56 * 56 * 2 + 64 * 64 * 9) * 4))"
)
printf '%-22s %10s %12s %12s %6s\n' case wall_s peak_MiB budget_MiB ok
for c in "${cases[@]}"; do
  read -r name graph io <<<"$c"
  log="$out/$name.time"
  /usr/bin/time -v "$bin" run "$graph" --random 0 --out-dir "$out/$name" >/dev/null 2>"$log"
  kb=$(awk -F: '/Maximum resident set size/ {gsub(/ /, "", $2); print $2}' "$log")
  wall=$(awk '/Elapsed \(wall clock\)/ {print $NF}' "$log")
  peak=$((kb / 1024))
  budget=$(((2 * io) / 1048576 + 64))
  ok=$([ "$peak" -le "$budget" ] && echo yes || echo NO)
  printf '%-22s %10s %12s %12s %6s\n' "$name" "$wall" "$peak" "$budget" "$ok"
done
