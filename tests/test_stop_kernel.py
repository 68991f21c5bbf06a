"""Stop means stop: the Stop button and ``--timeout`` end a running step, through a real kernel.

A step runs on the kernel's main thread, so only a watchdog there can end it; JupyterLab >= 4.4
sends widget clicks on a subshell, whose thread runs the Stop button's callback meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel
SLOW_REPR = """
import time
class Slow(list):  # a repr() alone is cut off after 1 s; iterating a list is not
    def __iter__(self):
        time.sleep(30)
        return iter([])
slow = Slow([1])
%agent set trusted_reprs Slow
"""  # opted in: a read calls the notebook's class's own methods (else it reads list's)


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


@pytest.fixture(scope="module")
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel")
        yield kernel


def tool_lines(lab: LabKernel, msg_id: str) -> list[str]:
    return [ln for ln in lab.text(msg_id).splitlines() if ln.startswith(("✘", "✔", "→"))]


def test_timeout_bounds_a_read_only_tool_whose_repr_sleeps(lab: LabKernel, api: StandInAPI) -> None:
    lab.run(SLOW_REPR)
    api.reset([Reply([tool_use("inspect_variable", {"name": "slow"})]), Reply([text("unused")])])
    started = time.monotonic()
    agent = lab.execute("%%agent --new --timeout 5\nLook at slow.", cell_id="stop-timeout")
    reply = lab.complete(agent, 40)["content"]
    took = time.monotonic() - started
    assert reply["status"] == "ok", reply
    # The repr sleeps 30 s: a turn that waited for it would take longer than that. (The margin
    # over 5 s is the kernel's first agent cell on a busy machine: imports, the first request.)
    assert took < 25, f"the turn took {took:.1f} s with --timeout 5"
    assert len(api.requests) == 1  # the turn stopped instead of asking the model again
    # The summary code catches what repr raises: the tool ends, describing the failed repr.
    assert [ln.split(" (")[0] for ln in tool_lines(lab, agent)][-1] in (
        "✔ inspect_variable",
        "✘ inspect_variable: the turn ran past its 5 s time limit (--timeout) and the step was "
        "interrupted",
    )
    assert "stopped: the turn ran past its 5 s time limit (--timeout)" in lab.text(agent)
    assert saved_record(lab, agent)["status"] == "timeout"
    assert lab.run("print('alive')").strip() == "alive"


@pytest.mark.parametrize("shell", ["subshell", "main shell"])
def test_stop_ends_a_looping_run_code(lab: LabKernel, api: StandInAPI, shell: str) -> None:
    """JupyterLab >= 4.4 sends the click on a subshell; VS Code and JupyterLab < 4.4 on the main
    shell, where it waits behind the running step: the shell-channel thread sees it first."""
    loop = "import time\nlaps = 0\nwhile True:\n    laps += 1\n    time.sleep(0.05)"
    api.reset([Reply([tool_use("run_code", {"code": loop})]), Reply([text("unused")])])
    subshell = lab.create_subshell() if shell == "subshell" else None
    agent = lab.execute("%%agent --new --approve auto\nLoop.", cell_id=f"stop-loop-{shell}")
    stop = lab.wait_for_button("Stop", parent=agent, timeout=30)
    lab.wait_for(lambda: "→ run_code" in lab.text(agent) or None, 30, "the step to start")
    time.sleep(0.5)
    clicked = time.monotonic()
    lab.click(stop, subshell_id=subshell)
    reply = lab.complete(agent, 30)["content"]
    assert time.monotonic() - clicked < 3, "the step kept running after Stop"
    assert reply["status"] == "ok", reply
    [failed] = [ln for ln in tool_lines(lab, agent) if ln.startswith("✘")]
    assert "stopped with the Stop button: the step was interrupted" in failed
    assert saved_record(lab, agent)["status"] == "interrupted"
    assert len(api.requests) == 1
    laps = int(lab.run("print(laps)").strip())
    time.sleep(0.3)
    assert int(lab.run("print(laps)").strip()) == laps  # the loop is not running any more


def test_without_the_shell_channel_hook_stop_on_arrival_says_it_cannot() -> None:
    """Outside a kernel whose shell-channel thread asks comms where messages go, nothing is
    patched and the caller is told (the turn then says once that Stop needs a subshell)."""
    from types import SimpleNamespace

    from qloop_kernel.notebook.deadline import stop_on_arrival

    clicked: list[bool] = []
    widget = SimpleNamespace(comm=SimpleNamespace(_reply_subshell_for=lambda data, default: None))
    assert stop_on_arrival(widget, lambda: clicked.append(True)) is False
    assert stop_on_arrival(SimpleNamespace(comm=None), lambda: clicked.append(True)) is False
    assert clicked == []
