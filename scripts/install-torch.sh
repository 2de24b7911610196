#!/usr/bin/env bash
# Creates the git-ignored venv .torchenv/ with the pinned torch stack that
# scripts/export-real-models.py and tests/real_exports.rs (#[ignore]) use: torch + torchvision,
# transformers, onnx, onnxscript (the dynamo exporter) and onnxruntime (the reference outputs).
# Everything runs on the CPU. By default the CPU-only torch wheels of download.pytorch.org are
# used (torch ~190 MB; about 350 MB of downloads in all, ~1.5 GB installed); with
# TORCH_INDEX=pypi (e.g. where only PyPI is reachable) torch comes from PyPI, the CUDA build,
# which also runs on the CPU but pulls the nvidia-* wheels: about 3.5 GB of downloads, ~7 GB
# installed. CI does not need any of it.
#
# Usage: [TORCH_INDEX=pypi] scripts/install-torch.sh [VENV_DIR]   (default .torchenv)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.torchenv}"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --upgrade pip
if [ "${TORCH_INDEX:-cpu}" = pypi ]; then
  "$venv/bin/pip" install --quiet torch==2.15.0 torchvision==0.29.2
else
  "$venv/bin/pip" install --quiet --index-url https://download.pytorch.org/whl/cpu \
    torch==2.15.0 torchvision==0.29.2
fi
"$venv/bin/pip" install --quiet transformers==5.24.0 onnx==1.23.2 onnxscript==0.7.2 \
  onnxruntime==1.32.0 numpy
"$venv/bin/python" -c "import torch, torchvision, transformers, onnx, onnxruntime; print('torch', torch.__version__, 'transformers', transformers.__version__, 'onnxruntime', onnxruntime.__version__)"
