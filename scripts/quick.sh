#!/usr/bin/env bash
# The quick loop for daily work: lint, types and the Python tests a change touches.
#
#   scripts/quick.sh [BASE] [-- PYTEST ARGS...]
#
# BASE (default HEAD: what is not committed yet) is the git revision the change is measured from,
# e.g. `scripts/quick.sh main` on a branch. Runs ruff, mypy (its cache kept in .mypy_cache) and, with
# pytest-xdist, the test files that changed or import a changed module (tests/affected.py), without
# the ones marked `kernel`, `spark` or `slow` (the tests that start kernels or a JVM, property tests
# and huge values: QUICK_ALL=1 keeps them). Needs the environment that ./scripts/test.sh installs; that full run stays the check.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || { echo "run ./scripts/test.sh once first: it installs .venv" >&2; exit 2; }
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PATH="$PWD/.venv/bin:$PATH"
# The tests run in .venv, whatever environment the caller has activated (IPython warns when
# VIRTUAL_ENV names another one, and the tests turn warnings into errors).
export VIRTUAL_ENV="$PWD/.venv"
unset PYTHONDONTWRITEBYTECODE  # bytecode cached, as scripts/test.sh has it
base="HEAD"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then base="$1"; shift; fi
[ "${1:-}" != "--" ] || shift

.venv/bin/python -m ruff check qloop_kernel tests bench
.venv/bin/python -m mypy
mapfile -t files < <(.venv/bin/python -m tests.affected "$base")
if [ "${#files[@]}" -eq 0 ]; then
  echo "quick: no test file is touched by the change since $base"
  exit 0
fi
[ "${files[0]}" != "*" ] || files=(tests)
marks=()
[ "${QUICK_ALL:-0}" = "1" ] || marks=(-m "not kernel and not spark and not slow")
echo "quick: ${#files[@]} test file(s) touched since $base"
status=0
.venv/bin/python -m pytest -p no:cacheprovider -q -n 2 "${marks[@]}" "${files[@]}" "$@" || status=$?
# pytest's 5: every touched test is marked kernel, spark or slow (QUICK_ALL=1 runs them).
if [ "$status" -eq 5 ]; then
  echo "quick: the touched tests are all kernel, spark or slow ones; QUICK_ALL=1 scripts/quick.sh runs them"
  exit 0
fi
exit "$status"
