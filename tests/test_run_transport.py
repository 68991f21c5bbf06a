"""`qloop run` starts its kernels on IPC sockets: no TCP warning, nothing listening on a port."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.kernel
BIN = Path(sys.executable).parent

PROBE = (
    "from ipykernel.kernelapp import IPKernelApp\n"
    "app = IPKernelApp.instance()\n"
    "print('transport', app.transport, app.ip.endswith('-ipc'))"
)


def test_qloop_run_kernels_use_ipc_transport(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [nbformat.v4.new_code_cell(PROBE)]
    source, out = tmp_path / "probe.ipynb", tmp_path / "probe.out.ipynb"
    nbformat.write(nb, source)
    done = subprocess.run(
        [str(BIN / "qloop"), "run", str(source), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "TCP" not in done.stderr and "without encryption" not in done.stderr
    [output] = nbformat.read(out, as_version=4).cells[0].outputs
    assert output["text"].strip() == "transport ipc True"
    # The sockets live in the runtime directory and are removed with the kernel.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["probe.ipynb", "probe.out.ipynb"]
