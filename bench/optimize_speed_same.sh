#!/usr/bin/env bash
# Checks that a change to the optimizer's speed changed no result (issue 23): runs two dlc-egg
# binaries on the same models and compares their `optimize --explain` output and `--report`
# JSON byte for byte (the chosen cover, kernel count, predicted µs and bytes, plans, phases).
#
#   bench/optimize_speed_same.sh BASE_BINARY NEW_BINARY MODEL...
#
# e.g. with the real exports (scripts/export-real-models.py; not committed):
#   bench/optimize_speed_same.sh /tmp/dlc-egg-main target/release/dlc-egg \
#     bert2.onnx bert.onnx resnet18.onnx mobilenet_v2.onnx
# Prints one line per model and each binary's user/sys CPU seconds; exits 1 on a difference.
set -euo pipefail
if [ $# -lt 3 ]; then
  echo "usage: $0 BASE_BINARY NEW_BINARY MODEL..." >&2
  exit 2
fi
base=$1 new=$2
shift 2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
for m in "$@"; do
  n=$(basename "$m")
  for side in base new; do
    bin=$base
    [ "$side" = new ] && bin=$new
    /usr/bin/time -f "%U %S" -o "$dir/$side.time" \
      "$bin" optimize "$m" --explain --report "$dir/$side.json" >"$dir/$side.txt"
  done
  if cmp -s "$dir/base.txt" "$dir/new.txt" && cmp -s "$dir/base.json" "$dir/new.json"; then
    verdict=identical
  else
    verdict=DIFFERENT
    status=1
  fi
  echo "$n: $verdict (explain + report); user/sys s: base $(cat "$dir/base.time"), new $(cat "$dir/new.time")"
done
exit $status
