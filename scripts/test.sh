#!/usr/bin/env bash
# Install everything the tests need (Python packages into .venv, plus Debian's Chromium and the
# browser-test packages when ui-tests/ is present) and run the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch's CPU build where the package index has it (the default wheel brings the CUDA libraries)
.venv/bin/python -m pip install --quiet "torch==2.13.0+cpu" 2>/dev/null || true
.venv/bin/python -m pip install --quiet -e ".[test]"
# Debian's PostgreSQL server binaries: the database tests start a throwaway cluster of their own
# (no default cluster is created or started by the package here).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
fi
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PATH="$PWD/.venv/bin:$PATH"
.venv/bin/python -m ruff check qloop_kernel tests bench
.venv/bin/python -m mypy  # configured in pyproject.toml: strict on the whole package
.venv/bin/python -m pytest -p no:cacheprovider
# The extension's lint and jest unit tests. Its node_modules come from the install's build; the
# immutable install only catches up when yarn.lock changed since that build.
(cd labextension && jlpm install --immutable && jlpm lint:check && jlpm test)
if [ -x ui-tests/run.sh ] && [ "${QLOOP_SKIP_BROWSER:-0}" != "1" ]; then
  PYTHON="$PWD/.venv/bin/python" ui-tests/run.sh
fi
