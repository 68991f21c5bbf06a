#!/usr/bin/env bash
# Install everything the tests need (Python packages into .venv, plus Debian's PostgreSQL and
# Chromium and the browser-test packages when ui-tests/ is present) and run the whole suite:
# ruff and mypy with the extension's lint and jest tests beside them, pytest (in worker processes
# side by side), and the browser tests. Prints how long each phase took at the end (docs/testing.md
# has the table; the extension's phase is what it took past mypy, its own time printed above).
#
#   QLOOP_TEST_WORKERS=N   pytest's worker processes (default 4: most tests wait on kernels)
#   QLOOP_SKIP_BROWSER=1   leave out the browser tests
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
phases=()
phase_start=$SECONDS
phase() {  # phase NAME: the time since the previous phase ended goes to NAME
  phases+=("$(printf '%-26s %5ss' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}
report() {
  echo "== time by phase =="
  printf '%s\n' "${phases[@]}"
  echo "total                      ${SECONDS}s"
}
trap report EXIT

# Debian's packages first, in one apt run: the PostgreSQL server binaries (the database tests start
# a throwaway cluster of their own; no default cluster is created or started) and Chromium.
apt_packages=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || apt_packages+=(postgresql)
if [ -x ui-tests/run.sh ] && [ "${QLOOP_SKIP_BROWSER:-0}" != "1" ]; then
  [ -x /usr/bin/chromium ] || apt_packages+=(chromium)
  [ -x /usr/bin/chromium-headless-shell ] || apt_packages+=(chromium-headless-shell)
fi
if [ "${#apt_packages[@]}" -gt 0 ] && command -v apt-get >/dev/null; then
  $SUDO mkdir -p /etc/postgresql-common
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.conf >/dev/null
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    "${apt_packages[@]}" >/dev/null
fi
phase "install: Debian packages"

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch's CPU build where the package index has it (the default wheel brings the CUDA libraries)
.venv/bin/python -m pip install --quiet "torch==2.13.0+cpu" 2>/dev/null || true
phase "install: pip, torch"
.venv/bin/python -m pip install --quiet -e ".[test]"
# jsonschema's optional IRI checker (rfc3987-syntax, from jupyter-events' jsonschema[format-nongpl])
# builds a grammar when imported: about a second of CPU in every process that imports nbformat or
# starts a Jupyter server (each test's CLI run, papermill, nbconvert, server). Nothing here checks
# an IRI format, and jsonschema goes on without it.
.venv/bin/python -m pip uninstall --quiet --yes rfc3987-syntax
phase "install: package + extension"

# Bytecode is cached as an installed package has it (an editable install compiles nothing): with
# PYTHONDONTWRITEBYTECODE set, every kernel, CLI run and pytest worker would compile the package
# and the test modules again.
unset PYTHONDONTWRITEBYTECODE

export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PATH="$PWD/.venv/bin:$PATH"
# The tests run in .venv, whatever environment the caller has activated (IPython warns when
# VIRTUAL_ENV names another one, and the tests turn warnings into errors).
export VIRTUAL_ENV="$PWD/.venv"
# The extension's lint and jest tests run beside ruff and mypy (each of those uses one core). Its
# node_modules come from the install's build; the immutable install only catches up when yarn.lock
# changed since that build. Its output is printed once it ends, whole.
extension_log="$(mktemp -t qloop-extension.XXXXXX)"
(
  set -e
  lane_start=$SECONDS
  cd labextension
  jlpm install --immutable
  jlpm lint:check
  jlpm test
  echo "extension: lint + jest took $((SECONDS - lane_start))s"
) >"$extension_log" 2>&1 &
extension_pid=$!
.venv/bin/python -m ruff check qloop_kernel tests bench
phase "ruff"
.venv/bin/python -m mypy  # configured in pyproject.toml: strict on the whole package
phase "mypy"
extension_status=0
wait "$extension_pid" || extension_status=$?
cat "$extension_log"
rm -f "$extension_log"
if [ "$extension_status" -ne 0 ]; then
  echo "extension: lint + jest failed (exit $extension_status)" >&2
  exit "$extension_status"
fi
phase "extension: lint + jest"
# --dist loadfile: a module's tests share its kernel and stand-in fixtures, in one worker.
# The browser tests' npm install and type check (mostly waiting on the registry) go on beside pytest.
browser=0
if [ -x ui-tests/run.sh ] && [ "${QLOOP_SKIP_BROWSER:-0}" != "1" ]; then
  browser=1
  browser_log="$(mktemp -t qloop-browser-prepare.XXXXXX)"
  PYTHON="$PWD/.venv/bin/python" ui-tests/run.sh --prepare >"$browser_log" 2>&1 &
  browser_pid=$!
fi
pytest_status=0
.venv/bin/python -m pytest -p no:cacheprovider -n "${QLOOP_TEST_WORKERS:-4}" --dist loadfile \
  --durations=25 || pytest_status=$?
phase "pytest"
if [ "$browser" = 1 ]; then
  prepare_status=0
  wait "$browser_pid" || prepare_status=$?
  cat "$browser_log"
  rm -f "$browser_log"
fi
[ "$pytest_status" -eq 0 ] || exit "$pytest_status"
if [ "$browser" = 1 ]; then
  if [ "$prepare_status" -ne 0 ]; then
    echo "browser tests: the install or the specs' type check failed (exit $prepare_status)" >&2
    exit "$prepare_status"
  fi
  PYTHON="$PWD/.venv/bin/python" QLOOP_UI_PREPARED=1 ui-tests/run.sh
  phase "browser (Playwright)"
fi
