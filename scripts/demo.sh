#!/usr/bin/env bash
# Install qloop-kernel into .venv and replay the demo notebook offline (no API key, no network).
# The headless replay needs no JupyterLab extension, so this install skips building it (no Node);
# `pip install .` builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
echo "[1/3] Python environment in .venv"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
echo "[2/3] installing qloop-kernel with pandas, numpy and matplotlib"
HATCH_BUILD_NO_HOOKS=true .venv/bin/python -m pip install --quiet --disable-pip-version-check ".[data]"
echo "[3/3] replaying notebooks/demo.ipynb without a model (the shipped records are not signed by you:"
echo "      --replay-received allows them; read them first with: .venv/bin/qloop show notebooks/demo.ipynb)"
env -u ANTHROPIC_API_KEY .venv/bin/qloop run notebooks/demo.ipynb --approve auto --replay-received -o notebooks/demo.executed.ipynb
.venv/bin/qloop show notebooks/demo.executed.ipynb
