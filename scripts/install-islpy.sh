#!/usr/bin/env bash
# Installs islpy (Python bindings of isl, the Integer Set Library) from PyPI into the git-ignored
# folder `.islpy/` of the repository. It is the test oracle of the pure-Rust affine engine
# (`src/poly/affine`): tests/poly_islpy.rs runs tests/poly/isl_oracle.py with PYTHONPATH=.islpy.
#
# Usage: bash scripts/install-islpy.sh   (from anywhere; idempotent, skips when present)
# Needs: python3 (>= 3.10) with pip, and network access to PyPI on the first run. Installs nothing
# system-wide.
set -euo pipefail

# Pinned version (a 2.6 MB manylinux wheel with isl built in; no Python dependencies).
ISLPY_VERSION=2026.2.2

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.islpy"
stamp="$dest/.installed"
want="islpy==$ISLPY_VERSION"

if [[ -d "$dest/islpy" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "islpy already installed in $dest ($want)"
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
    echo "       Install Python 3 with pip (e.g. apt-get install python3-pip), or install" >&2
    echo "       $want by hand with: pip install --no-deps --target $dest $want" >&2
    exit 1
fi

# A partial or older install is replaced as a whole.
rm -rf "$dest"
mkdir -p "$dest"
echo "== installing $want into $dest"
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" "$want"
if ! PYTHONPATH="$dest" "$python" -c 'import islpy' >/dev/null 2>&1; then
    echo "error: $want installed into $dest but \`import islpy\` fails" >&2
    exit 1
fi
echo "$want" >"$stamp"
echo "islpy installed in $dest"
