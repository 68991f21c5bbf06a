#!/usr/bin/env bash
# Install qloop-kernel into .venv and replay the demo notebook offline (no API key, no network).
# The headless replay needs no JupyterLab extension, so this install skips building it (no Node);
# `pip install .` builds it. Bytecode is compiled when a module is first imported, not for every
# file installed: that was half of the install time, mostly for modules the replay never imports.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
started=$SECONDS

# pip's lines, shortened to one line a package (pip's own errors and warnings go to stderr as usual).
progress() {
  awk '
    /^Processing \.\/?\.?$/ { print "      building qloop-kernel from this checkout"; fflush(); next }
    /^(Collecting|Processing) / {
      name = $2
      if (name ~ /\//) {  # a file, NAME-VERSION...: wheels spell "-" in a name as "_"
        sub(/.*\//, "", name); sub(/-[0-9].*/, "", name); gsub(/_/, "-", name)
      } else {  # a requirement: NAME, then a version, extras, a marker or a URL
        sub(/[<>=!~;[ (@].*/, "", name)
      }
      printf "      %3d %s\n", ++n, name; fflush(); next
    }
    /^Installing collected packages/ { printf "      installing %d packages…\n", NF - 3; fflush() }
  '
}

echo "[1/3] Python environment in .venv, with a current pip (it resolves faster)"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
echo "[2/3] installing qloop-kernel with pandas, numpy and matplotlib"
HATCH_BUILD_NO_HOOKS=true .venv/bin/python -m pip install --disable-pip-version-check --no-compile \
  --progress-bar off ".[data]" | progress
echo "      done after $((SECONDS - started)) s"
echo "[3/3] replaying notebooks/demo.ipynb without a model (the shipped records are not signed by you:"
echo "      --replay-received allows them, under the policy --approve auto; read them first with:"
echo "      .venv/bin/qloop show notebooks/demo.ipynb)"
env -u ANTHROPIC_API_KEY .venv/bin/qloop run notebooks/demo.ipynb --approve auto --replay-received -o notebooks/demo.executed.ipynb
.venv/bin/qloop show notebooks/demo.executed.ipynb
echo "done after $((SECONDS - started)) s"
