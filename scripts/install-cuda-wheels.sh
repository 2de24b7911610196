#!/usr/bin/env bash
# Installs NVRTC (libnvrtc), the CUDA headers (cuda_fp16.h, cuda_bf16.h, ...) and cuobjdump with nvdisasm
# (SASS of a cubin) from NVIDIA's PyPI wheels into the git-ignored folder `.cuda/` of the repository, so
# that the CUDA code the compiler emits can be compiled (not run) and its SASS inspected
# (tests/static_perf.rs) on a machine with no GPU and no CUDA toolkit.
#
# Usage: bash scripts/install-cuda-wheels.sh   (from anywhere; idempotent, skips when present)
# Needs: python3 with pip (and network access to PyPI on the first run). Installs nothing
# system-wide. `crate::cuda::nvrtc` finds the result under `.cuda/nvidia/cu13/` (cuobjdump and
# nvdisasm in `.cuda/nvidia/cu13/bin/`).
set -euo pipefail

# Pinned versions: all wheels in ONE pip call (a second install into the same --target skips
# files). 13.4 matches the CUDA 13.4 bindings cudarc is built with (`cuda-13040`).
NVRTC_VERSION=13.4.92
RUNTIME_VERSION=13.4.92
CUOBJDUMP_VERSION=13.4.92
# cuobjdump -sass runs nvdisasm (found beside it in bin/).
NVDISASM_VERSION=13.4.92

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/.cuda"
lib="$dest/nvidia/cu13/lib/libnvrtc.so.13"
header="$dest/nvidia/cu13/include/cuda_fp16.h"
cuobjdump="$dest/nvidia/cu13/bin/cuobjdump"
nvdisasm="$dest/nvidia/cu13/bin/nvdisasm"
stamp="$dest/.installed"
want="nvidia-cuda-nvrtc==$NVRTC_VERSION nvidia-cuda-runtime==$RUNTIME_VERSION nvidia-cuda-cuobjdump==$CUOBJDUMP_VERSION nvidia-cuda-nvdisasm==$NVDISASM_VERSION"

if [[ -f "$lib" && -f "$header" && -x "$cuobjdump" && -x "$nvdisasm" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "CUDA wheels already installed in $dest ($want)"
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
    echo "       Install Python 3 with pip (e.g. apt-get install python3-pip), or install the" >&2
    echo "       wheels $want by hand with: pip install --no-deps --target $dest ..." >&2
    echo "       or point DLC_NVRTC_LIB at libnvrtc.so and DLC_CUDA_INCLUDE at the CUDA include dir." >&2
    exit 1
fi

# A partial or older install is replaced as a whole.
rm -rf "$dest"
mkdir -p "$dest"
echo "== installing $want into $dest"
# shellcheck disable=SC2086
PIP_ROOT_USER_ACTION=ignore "$python" -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" $want
for tool in "$cuobjdump" "$nvdisasm"; do
    if [[ -f "$tool" && ! -x "$tool" ]]; then
        chmod +x "$tool"
    fi
done
if [[ ! -f "$lib" || ! -f "$header" || ! -x "$cuobjdump" || ! -x "$nvdisasm" ]]; then
    echo "error: the wheels installed, but $lib, $header, $cuobjdump or $nvdisasm is missing; the wheel" >&2
    echo "       layout changed?" >&2
    exit 1
fi
echo "$want" >"$stamp"
echo "CUDA wheels installed in $dest"
