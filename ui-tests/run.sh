#!/usr/bin/env bash
# Browser tests of the JupyterLab extension.
#
#   ui-tests/run.sh [playwright test arguments...]
#
# Needs the package installed in the active Python environment
# (`pip install -e .[test]`) and Node.js >= 20. Installs Debian's Chromium
# when it is missing and the npm packages of ui-tests/ (no browser download),
# then runs Playwright, which starts the Messages API stand-in
# (`$PYTHON -m qloop_kernel.testing`, on a free port) and JupyterLab from that
# environment (`$PYTHON -m jupyter lab`) on port $QLOOP_UI_PORT (8888) with a
# temporary root folder; the kernels call the stand-in with a fake key.
# With no arguments it then runs tests-rtc/ under real-time collaboration
# (jupyter-collaboration, playwright.rtc.config.js) on the same port;
# `ui-tests/run.sh --rtc [arguments...]` runs only those.
# Exits with Playwright's exit code (the first failing run's).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${PYTHON:-}" ]; then
  PYTHON="$(command -v python || command -v python3)"
fi
export PYTHON
export CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# Playwright checks and calls the test servers on loopback: never through a proxy.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"

if [ ! -x "$CHROMIUM_PATH" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "Chromium is missing: run 'apt-get install -y chromium' as root" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
fi

if ! "$PYTHON" -m jupyter labextension list 2>&1 | grep -q 'qloop-kernel.*enabled.*OK'; then
  echo "The qloop-kernel extension is not installed in $PYTHON's environment:" >&2
  echo "run 'pip install -e .[test]' at the repository root first" >&2
  exit 2
fi

cd "$here"
# npm ci starts from scratch each time: skip it while node_modules matches the lock.
if ! cmp -s package-lock.json node_modules/.qloop-installed-lock 2>/dev/null; then
  npm ci --no-fund --no-audit
  cp package-lock.json node_modules/.qloop-installed-lock
fi

# Playwright strips the types without checking them: the specs are type-checked first.
npx tsc --noEmit -p .

root="$(mktemp -d -t qloop-ui-tests.XXXXXX)"
trap 'rm -rf "$root"' EXIT
export JUPYTERLAB_GALATA_ROOT_DIR="$root"

rtc_suite() {
  if ! "$PYTHON" -c 'import jupyter_collaboration' 2>/dev/null; then
    echo "jupyter-collaboration is missing in $PYTHON's environment:" >&2
    echo "run 'pip install -e .[test]' at the repository root first" >&2
    return 2
  fi
  npx playwright test --config playwright.rtc.config.js "$@"
}

status=0
if [ "${1:-}" = "--rtc" ]; then
  shift
  rtc_suite "$@" || status=$?
  exit "$status"
fi
npx playwright test "$@" || status=$?
if [ "$#" -eq 0 ]; then
  rtc_status=0
  rtc_suite || rtc_status=$?
  [ "$status" -ne 0 ] || status="$rtc_status"
fi
exit "$status"
