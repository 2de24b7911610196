#!/usr/bin/env bash
# Installs the `onnx` 1.22.0 wheel (no dependencies) into the git-ignored folder `.onnx/` of the
# repository. dlc-egg does not use its Python code: the wheel ships the ONNX backend node tests
# (onnx/backend/test/data/node/*/model.onnx with input_*.pb / output_*.pb), which
# tests/onnx_node.rs imports and runs, and the official onnx.proto that src/onnx/onnx.proto copies.
#
# Usage: bash scripts/install-onnx-tests.sh   (from anywhere; idempotent, skips when present)
# Needs: python3 with pip (and network access to PyPI on the first run). Installs nothing
# system-wide.
set -euo pipefail

VERSION=1.22.0
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.onnx"
stamp="$dest/.installed"
want="onnx==$VERSION"

if [[ -d "$dest/onnx/backend/test/data/node" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "ONNX backend test data already installed in $dest ($want)"
    exit 0
fi

python=""
for candidate in python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -m pip --version >/dev/null 2>&1; then
        python="$candidate"
        break
    fi
done
if [[ -z "$python" ]]; then
    echo "error: pip is not available (tried python3 -m pip and python -m pip)." >&2
    echo "       Install Python 3 with pip, or run: pip install --no-deps --target $dest $want" >&2
    exit 1
fi

rm -rf "$dest"
"$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" "$want"
echo "$want" >"$stamp"
echo "installed $want into $dest"
