"""The import warm-up after ``%load_ext``: off the main thread, never during a cell, no deadlocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from qloop_kernel.notebook.warmup import Warmup
from qloop_kernel.testing import Reply, StandInAPI, text
from tests.kernel_client import LabKernel

DONE = "from qloop_kernel.notebook import warmup as _w\nprint(_w._current.done.is_set())"
# User code importing what the warm-up imports, submodules before their packages (the order that
# can deadlock with another thread importing the package).
SAME_MODULES = """
import importlib
errors = []
for name in ["anthropic.types", "pydantic.fields", "ipywidgets.widgets", "anthropic.lib.streaming",
             "anthropic", "qloop_kernel.notebook.approval", "anthropic.resources.messages"]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        errors.append(f"{name}: {type(exc).__name__}: {exc}")
print("errors:", errors)
"""


def test_the_warm_up_waits_while_a_cell_runs_and_goes_on_after() -> None:
    ran: list[str] = []
    gate = threading.Event()
    warm = Warmup(
        [lambda: ran.append("a"), lambda: (gate.wait(5), ran.append("b")), lambda: ran.append("c")]
    )
    warm.pause()  # a cell is running: nothing starts
    warm.start()
    time.sleep(0.2)
    assert ran == []
    warm.resume()
    time.sleep(0.2)
    assert ran == ["a"]  # the second step is under way
    pausing = threading.Thread(target=warm.pause)
    pausing.start()
    time.sleep(0.2)
    assert pausing.is_alive()  # a cell starting waits for the step under way...
    gate.set()
    pausing.join(5)
    assert ran == ["a", "b"]  # ...and no further step starts while it runs
    time.sleep(0.2)
    assert ran == ["a", "b"]
    warm.resume()
    assert warm.wait(5) and ran == ["a", "b", "c"]


LOADED_BY_THE_LOAD = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
before = set(sys.modules)
shell.run_line_magic("load_ext", "qloop_kernel")
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_the_load_imports_only_the_magics_and_the_names_they_accept() -> None:
    # A kernel started with the extension (the "Python 3 (qloop)" spec) pays for these imports
    # before its first reply; everything else comes with the warm-up or the first turn.
    env = {**os.environ, "QLOOP_WARMUP": "0"}
    done = subprocess.run([sys.executable, "-c", LOADED_BY_THE_LOAD], env=env,
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    ours = {name for name in json.loads(done.stdout) if name.startswith("qloop_kernel")}
    # notebook.failures: the hook that keeps failed cells for %agent fix (standard library only)
    assert ours == {"qloop_kernel", "qloop_kernel.names", "qloop_kernel.notebook",
                    "qloop_kernel.notebook.failures",
                    "qloop_kernel.notebook.ledger", "qloop_kernel.notebook.magic",
                    "qloop_kernel.notebook.options", "qloop_kernel.notebook.session",
                    "qloop_kernel.notebook.warmup"}  # fmt: skip
    assert "difflib" not in json.loads(done.stdout)


@pytest.mark.kernel
def test_load_returns_at_once_and_the_warm_up_runs_while_the_kernel_is_idle() -> None:
    with LabKernel() as lab:
        started = time.monotonic()
        out = lab.run("%load_ext qloop_kernel\nimport sys\nprint('anthropic' in sys.modules)")
        assert out.strip() == "False"  # nothing heavy imported by the load or during its cell
        assert time.monotonic() - started < 5
        deadline = time.monotonic() + 60
        while "True" not in lab.run(DONE):
            assert time.monotonic() < deadline, "the warm-up did not finish"
            time.sleep(0.2)
        assert lab.run("print('anthropic' in sys.modules)").strip() == "True"


@pytest.mark.kernel
def test_user_code_importing_the_same_modules_right_after_load_does_not_deadlock() -> None:
    for _ in range(3):  # fresh kernels: the race is at the first imports
        with LabKernel() as lab:
            load = lab.execute("%load_ext qloop_kernel")
            imports = lab.execute(SAME_MODULES)  # queued right behind the load, like "Run All"
            lab.complete(load, 60)
            lab.complete(imports, 120)
            out = lab.stdout(imports)
            assert "errors: []" in out, out


@pytest.mark.kernel
def test_an_agent_cell_right_after_load_runs() -> None:
    with (
        StandInAPI([Reply([text("Hello from the first cell.")])]) as api,
        LabKernel(api.environment()) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        cell = lab.execute("%%agent\nSay hello.", cell_id="first")
        assert lab.complete(cell, 120)["content"]["status"] == "ok"
        assert len(api.requests) == 1


POOL = "from qloop_kernel import model as _m\nprint([id(c) for c in _m._clients._clients.values()])"


@pytest.mark.kernel
def test_the_first_agent_cell_takes_the_client_the_warm_up_built() -> None:
    with (
        StandInAPI([Reply([text("Hello from the first cell.")])]) as api,
        LabKernel(api.environment()) as lab,
    ):
        lab.run("%load_ext qloop_kernel")
        deadline = time.monotonic() + 60
        while "True" not in lab.run(DONE):
            assert time.monotonic() < deadline, "the warm-up did not finish"
            time.sleep(0.2)
        built = lab.run(POOL).strip()
        assert built.count(",") == 0 and built != "[]", built  # one client, kept
        cell = lab.execute("%%agent\nSay hello.", cell_id="first")
        assert lab.complete(cell, 120)["content"]["status"] == "ok"
        assert len(api.requests) == 1
        assert lab.run(POOL).strip() == built  # the turn took it: no client built for the cell


class _StartingKernel:
    """A kernel that is starting: no request is being handled."""

    def get_parent(self) -> dict:
        return {}


class _Shell:
    def __init__(self) -> None:
        self.kernel = _StartingKernel()


def test_loaded_at_kernel_start_the_warm_up_waits_for_the_kernel_to_be_up(monkeypatch) -> None:
    from qloop_kernel.notebook import warmup

    ran: list[float] = []
    monkeypatch.setattr(warmup, "_current", None)
    monkeypatch.setattr(warmup, "MODULES", ("json",))
    monkeypatch.setattr(warmup, "_notebook_modules", list)
    monkeypatch.setattr(warmup, "_client_parts", lambda: ran.append(time.monotonic()))
    started = time.monotonic()
    warm = warmup.start_warmup(_Shell(), start_delay_s=0.6)
    assert warm is not None
    time.sleep(0.3)
    assert ran == []  # held while the kernel starts
    assert warm.wait(10) and ran[0] - started >= 0.6


def test_a_cell_running_when_the_start_delay_ends_still_holds_the_warm_up() -> None:
    ran: list[str] = []
    warm = Warmup([lambda: ran.append("a")]).start(delay_s=0.3)
    warm.pause()  # a cell starts within the delay
    time.sleep(0.6)
    assert ran == []  # the delay is over, the cell still runs: nothing imported
    warm.resume()  # the cell ends
    assert warm.wait(5) and ran == ["a"]
