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
# With no arguments it runs the whole suite side by side: tests/ in
# $QLOOP_UI_SHARDS shards (2) and tests-rtc/ under real-time collaboration
# (jupyter-collaboration, playwright.rtc.config.js), each run with its own
# stand-in and JupyterLab on the next port (8888, 8889, ...), its lines
# prefixed with its name. With arguments it runs tests/ once, passing them to
# Playwright; `ui-tests/run.sh --rtc [arguments...]` runs only tests-rtc/;
# `ui-tests/run.sh --prepare` installs and type-checks the specs, and runs none.
# Exits with Playwright's exit code (the first failing run's).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ -z "${PYTHON:-}" ]; then
  PYTHON="$(command -v python || command -v python3)"
fi
export PYTHON
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# Playwright checks and calls the test servers on loopback: never through a proxy.
export NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
export no_proxy="$NO_PROXY"

# Debian's Chromium, in its headless shell where installed (package chromium-headless-shell: the
# same build as the browser, without the browser's windowing; Playwright's own choice for headless
# runs), which loads JupyterLab's page for about a quarter less CPU; else the browser itself.
# CHROMIUM_PATH=/usr/bin/chromium runs the specs in the full browser.
if [ -z "${CHROMIUM_PATH:-}" ] && [ ! -x /usr/bin/chromium-headless-shell ] && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "Chromium is missing: run 'apt-get install -y chromium chromium-headless-shell' as root" >&2
    exit 2
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    chromium chromium-headless-shell
fi
if [ -z "${CHROMIUM_PATH:-}" ]; then
  CHROMIUM_PATH=/usr/bin/chromium
  [ ! -x /usr/bin/chromium-headless-shell ] || CHROMIUM_PATH=/usr/bin/chromium-headless-shell
fi
if [ ! -x "$CHROMIUM_PATH" ]; then
  echo "No Chromium at CHROMIUM_PATH=$CHROMIUM_PATH" >&2
  exit 2
fi
export CHROMIUM_PATH

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
# `ui-tests/run.sh --prepare` does only this and the install above (scripts/test.sh runs it beside
# pytest); a run started with QLOOP_UI_PREPARED=1 then skips the type check.
if [ "${1:-}" = "--prepare" ]; then
  npx tsc --noEmit -p .
  exit 0
fi
[ "${QLOOP_UI_PREPARED:-0}" = "1" ] || npx tsc --noEmit -p .

root="$(mktemp -d -t qloop-ui-tests.XXXXXX)"
trap 'rm -rf "$root"' EXIT

have_collaboration() {
  "$PYTHON" -c 'import jupyter_collaboration' 2>/dev/null && return 0
  echo "jupyter-collaboration is missing in $PYTHON's environment:" >&2
  echo "run 'pip install -e .[test]' at the repository root first" >&2
  return 2
}

# One run of Playwright: NAME, PORT, then its arguments. Each run has its own stand-in, JupyterLab
# (on PORT, with a root folder of its own), results folder and server log; its lines are prefixed
# with NAME when runs go side by side.
playwright_run() {
  local name="$1" port="$2"
  shift 2
  mkdir -p "$root/$name"
  local run="$name"
  # A single run keeps test-results/ and jupyter-server.log, unless QLOOP_UI_RUN names its own
  # (runs of single specs side by side, each also on its own QLOOP_UI_PORT).
  [ "$name" != main ] || run="${QLOOP_UI_RUN:-}"
  QLOOP_UI_PORT="$port" QLOOP_UI_RUN="$run" JUPYTERLAB_GALATA_ROOT_DIR="$root/$name" \
    npx playwright test "$@"
}

prefixed() {
  local name="$1"
  shift
  set +e
  "$@" 2>&1 | sed -u "s/^/[$name] /"
  local status="${PIPESTATUS[0]}"
  set -e
  return "$status"
}

port="${QLOOP_UI_PORT:-8888}"
if [ "${1:-}" = "--rtc" ]; then
  shift
  have_collaboration || exit 2
  playwright_run rtc "$port" --config playwright.rtc.config.js "$@"
  exit $?
fi
if [ "$#" -gt 0 ]; then
  playwright_run main "$port" "$@"
  exit $?
fi

# The whole suite: the main specs in QLOOP_UI_SHARDS shards (default 2) and the specs under
# collaboration, all side by side on consecutive ports from QLOOP_UI_PORT. The browser tests wait on
# kernels and pages most of the time: on two cores, three runs side by side take about the time of
# the longest.
have_collaboration || exit 2
shards="${QLOOP_UI_SHARDS:-2}"
pids=()
names=()
for ((i = 1; i <= shards; i++)); do
  prefixed "shard-$i" playwright_run "shard-$i" $((port + i - 1)) --shard="$i/$shards" &
  pids+=($!)
  names+=("shard-$i")
done
prefixed rtc playwright_run rtc $((port + shards)) --config playwright.rtc.config.js &
pids+=($!)
names+=(rtc)
status=0
for index in "${!pids[@]}"; do
  run_status=0
  wait "${pids[$index]}" || run_status=$?
  if [ "$run_status" -ne 0 ]; then
    echo "browser tests: ${names[$index]} failed (exit $run_status)" >&2
    [ "$status" -ne 0 ] || status="$run_status"
  fi
done
exit "$status"
