#!/usr/bin/env bash
# Install qloop-kernel into .venv and replay the demo notebook offline (no API key, no network).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet ".[data]"
env -u ANTHROPIC_API_KEY .venv/bin/qloop run notebooks/demo.ipynb --approve auto --replay-received -o notebooks/demo.executed.ipynb
.venv/bin/qloop show notebooks/demo.executed.ipynb
