"""Export: approved agent steps as ordinary cells, run by plain ``jupyter execute`` without qloop.

The environment without qloop_kernel is this venv's Python started with ``-S`` (no site
initialisation, so the editable install's ``.pth`` is never read) and the venv's site-packages on
``PYTHONPATH``: every library is there, and ``import qloop_kernel`` fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from qloop_kernel.headless.cli import main as qloop_main
from qloop_kernel.notebook.export import exported_cells, plain_source, to_script

DEMO = Path(__file__).parent.parent / "notebooks" / "demo.ipynb"
BIN = Path(sys.executable).parent
NO_QLOOP_CHECK = (
    "import importlib.util\n"
    "assert importlib.util.find_spec('qloop_kernel') is None, 'qloop_kernel is importable'\n"
    "print('no qloop_kernel here')"
)
VARIABLES = "print(json.dumps({'by_region': by_region.round(1).to_dict(), 'rows': len(df)}))"


def test_the_demo_exports_to_markdown_and_code_cells() -> None:
    nb = nbformat.read(DEMO, as_version=4)
    cells = exported_cells(nb)
    kinds = [kind for kind, _ in cells]
    assert kinds == ["markdown", "code", "markdown", "code", "code", "markdown", "code", "code"]
    assert not any("qloop" in source for kind, source in cells if kind == "code")
    task = cells[2][1]
    assert "Clean the date column" in task and "**Saved answer**" in task
    assert cells[3][1].startswith('formats = ["%Y-%m-%d"')  # the approved steps, as they ran


def test_qloop_lines_are_left_out() -> None:
    assert plain_source("%load_ext qloop_kernel\nx = 1\n%agent status") == (
        "x = 1\n# %agent status  (qloop, left out by export)"
    )


def test_script_export_is_in_the_percent_format(tmp_path: Path) -> None:
    out = tmp_path / "demo.py"
    assert qloop_main(["export", str(DEMO), "--to", "script", "-o", str(out)]) == 0
    script = out.read_text()
    assert script == to_script(nbformat.read(DEMO, as_version=4))
    assert script.count("# %%\n") == 5 and "# %% [markdown]" in script
    compile(script, str(out), "exec")  # plain Python: no magics left


def plain_kernel(folder: Path) -> dict[str, str]:
    """A kernel spec of this Python without site initialisation: qloop_kernel cannot be imported."""
    spec = folder / "kernels" / "plain"
    spec.mkdir(parents=True)
    site = sysconfig.get_paths()["purelib"]
    # -S skips sitecustomize too: the tests' network guard (on PYTHONPATH) is loaded by hand.
    launcher = (
        "import runpy\ntry:\n    import sitecustomize\nexcept ImportError:\n    pass\n"
        "runpy.run_module('ipykernel_launcher', run_name='__main__')"
    )
    kernel = {
        "argv": [sys.executable, "-S", "-c", launcher, "-f", "{connection_file}"],
        "display_name": "plain Python",
        "language": "python",
    }
    (spec / "kernel.json").write_text(json.dumps(kernel))
    python_path = [
        p
        for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if p and not (Path(p) / "qloop_kernel").exists()
    ]
    return {
        **os.environ,
        "JUPYTER_PATH": str(folder),
        "PYTHONPATH": os.pathsep.join([*python_path, site]),
    }


@pytest.mark.kernel
def test_an_exported_notebook_runs_without_qloop_and_yields_the_same_variables(
    tmp_path: Path, monkeypatch
) -> None:
    from qloop_kernel.headless.runner import AgentNotebookClient
    from qloop_kernel.testing import StandInAPI

    exported = tmp_path / "exported.ipynb"
    assert qloop_main(["export", str(DEMO), "-o", str(exported)]) == 0
    nb = nbformat.read(exported, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(NO_QLOOP_CHECK))
    nb.cells.append(nbformat.v4.new_code_cell("import json\n" + VARIABLES))
    nbformat.write(nb, exported)
    env = plain_kernel(tmp_path / "jupyter")
    done = subprocess.run(
        [str(BIN / "jupyter"), "execute", "--kernel_name=plain", str(exported), "--output=ran"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    ran = nbformat.read(tmp_path / "ran.ipynb", as_version=4)
    assert ran.cells[0].outputs[0]["text"] == "no qloop_kernel here\n"
    plain = json.loads(ran.cells[-1].outputs[0]["text"])
    # The same notebook replayed by qloop, with its agent cells.
    replayed = nbformat.read(DEMO, as_version=4)
    replayed.cells.append(nbformat.v4.new_code_cell("import json\n" + VARIABLES))
    with StandInAPI() as api:
        for name, value in {**api.environment(), "QLOOP_REPLAY_RECEIVED": "1"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("QLOOP_APPROVAL", "auto")
        AgentNotebookClient(replayed, progress=False, timeout=300).execute()
        assert api.requests == []
    assert json.loads(replayed.cells[-1].outputs[0]["text"]) == plain


@pytest.mark.kernel
def test_agent_export_and_history_in_a_kernel() -> None:
    from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
    from tests.kernel_client import LabKernel

    script = [Reply([tool_use("run_code", {"code": "y = 2 * 21"})]), Reply([text("y is 42")])]
    with (
        StandInAPI(script) as api,
        LabKernel({**api.environment(), "QLOOP_APPROVAL": "auto"}) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        earlier = {"digest": "sha256:earlier", "status": "completed", "prompt": "Set y.",
                   "updated_at": "2026-12-01T10:00:00", "tool_calls": [], "history": []}  # fmt: skip
        # The cell holds a record from elsewhere that cannot be read: the new turn keeps it.
        agent = lab.execute("%%agent --fresh\nSet y.", cell_id="c1", metadata={"qloop": earlier})
        assert lab.complete(agent, 60)["content"]["status"] == "ok"
        exported = lab.execute("%agent export", cell_id="c2")
        reply = lab.complete(exported, 30)["content"]
        assert reply["status"] == "ok" and "y = 2 * 21" in lab.stdout(exported)
        [payload] = [p for p in reply["payload"] if p["source"] == "set_next_input"]
        assert "y = 2 * 21" in payload["text"] and "# > Set y." in payload["text"]
        listing = lab.run("%agent history", cell_id="c3")
        assert "cell c1:" in listing and "1 code step · Set y." in listing
        assert "  1. 2026-12-01 10:00:00 · completed · 0 code steps · Set y." in listing
