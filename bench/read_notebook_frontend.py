"""The extension's answer to ``read_notebook`` for a 500-cell notebook with big outputs.

Runs ``bench/read_notebook_frontend.mjs`` under node: 500 code cells, each with a 2,000-character
source, a 100 KB stream output and a 200 KB base64 image/png display_data with text/plain. It
times ``notebookView`` plus ``JSON.stringify`` of the answer (median of 20 runs after one warm-up)
and measures the answer's UTF-8 size. The compiled ``labextension/lib/notebookview.js`` is built
first with ``jlpm build:lib`` when it is missing.

Run: python bench/read_notebook_frontend.py
Exits non-zero when a target is missed (at most 50 ms and 200 KB, and no image data in the
answer), or when node or the build is not available.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABEXTENSION = ROOT / "labextension"
LIB_MODULE = LABEXTENSION / "lib" / "notebookview.js"
SCRIPT = ROOT / "bench" / "read_notebook_frontend.mjs"
TARGET_MS = 50.0
TARGET_BYTES = 200 * 1024
NOTEBOOK_BYTES = 500 * (2_000 + 100 * 1024 + 200 * 1024)  # the sources and outputs, roughly


def build_lib() -> None:
    """Compile the extension's TypeScript (``tsc``) when lib/notebookview.js is missing."""
    if LIB_MODULE.exists():
        return
    jlpm = shutil.which("jlpm") or shutil.which("jlpm", path=str(Path(sys.executable).parent))
    if jlpm is None:
        raise SystemExit("jlpm not found: install jupyterlab, or build labextension/lib first")
    print("building labextension/lib (jlpm clean:lib, jlpm build:lib) ...", flush=True)
    # tsc's incremental build info would skip a module whose output alone was deleted.
    subprocess.run([jlpm, "clean:lib"], cwd=LABEXTENSION, check=True)
    subprocess.run([jlpm, "build:lib"], cwd=LABEXTENSION, check=True)


def run_node() -> dict[str, float]:
    """The figures the node script prints, one ``name value`` a line."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node not found")
    done = subprocess.run([node, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"node {SCRIPT.name} failed:\n{done.stderr}")
    figures: dict[str, float] = {}
    for line in done.stdout.splitlines():
        name, _, value = line.partition(" ")
        figures[name] = float(value)
    return figures


def main() -> int:
    build_lib()
    figures = run_node()
    ms, size = figures["median_ms"], int(figures["answer_bytes"])
    leaked = figures["image_data_in_answer"] > 0
    rows = [
        ("notebookView + JSON.stringify, median", f"{ms:.1f} ms", f"target <= {TARGET_MS:.0f} ms"),
        ("answer size", f"{size:,} bytes", f"target <= {TARGET_BYTES:,}"),
        (
            "answer / notebook content",
            f"{size / NOTEBOOK_BYTES:.2e}x",
            f"of about {NOTEBOOK_BYTES / 2**20:.0f} MiB",
        ),
        (
            "cells shown in full / omitted",
            f"{figures['cells'] - figures['cells_omitted']:.0f} / {figures['cells_omitted']:.0f}",
            "the rest past the answer's budget",
        ),
        ("image data in the answer", "yes" if leaked else "no", "target no"),
    ]
    width = max(len(label) for label, _, _ in rows)
    print(f"\n{'measure'.ljust(width)}  {'value':>16}  ratio / target")
    for label, value, note in rows:
        print(f"{label.ljust(width)}  {value:>16}  {note}")
    missed = ms > TARGET_MS or size > TARGET_BYTES or leaked
    print("\nTARGET MISSED" if missed else "\ntarget met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
