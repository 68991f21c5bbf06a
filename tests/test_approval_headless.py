"""Headless runs (``qloop run``'s client, nobody to click) under each approval policy.

A scripted model proposes one step of every risk class; each step leaves its own mark, and a later
cell reports which marks exist. Replays of saved turns follow the same classes.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

pytestmark = pytest.mark.kernel

SETUP = """\
%load_ext qloop_kernel
import os
class Probe:
    def __init__(self):
        self.ran = []
    def head(self):
        self.ran.append("read")
    def compute(self):
        self.ran.append("compute")
probe = Probe()
def helper():
    probe.ran.append("unknown")
victim = 1
"""
REPORT = """\
marks = set(probe.ran)
marks |= {"write"} if "made" in dir() else set()
marks |= {"destructive"} if "victim" not in dir() else set()
marks |= {"external"} if os.path.exists(MARK_FILE) else set()
print(sorted(marks))
"""


def every_class(mark_file: Path) -> dict[str, str]:
    return {
        "read": "probe.head()",
        "write": "made = 1",
        "compute": "probe.compute()",
        "unknown": "helper()",
        "destructive": "del victim",
        "external": f"open({str(mark_file)!r}, 'w').write('ran')",
    }


def notebook(mark_file: Path, prompt: str = "Try every kind of step.") -> Any:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(SETUP + f"MARK_FILE = {str(mark_file)!r}"),
        nbformat.v4.new_code_cell(f"%%agent\n{prompt}"),
        nbformat.v4.new_code_cell(REPORT),
    ]
    return nb


def run(nb: Any, api: StandInAPI, monkeypatch: pytest.MonkeyPatch, policy: str | None) -> None:
    for name, value in api.environment().items():
        monkeypatch.setenv(name, value)
    if policy is None:
        monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
    else:
        monkeypatch.setenv("QLOOP_APPROVAL", policy)  # what `qloop run --approve POLICY` sets
    AgentNotebookClient(nb, progress=io.StringIO(), timeout=120, kernel_name="python3").execute()


def marks(nb: Any) -> list[str]:
    printed = "".join(o.get("text", "") for o in nb.cells[2].outputs)
    return json.loads(printed.strip().replace("'", '"'))  # type: ignore[no-any-return]


def results(api: StandInAPI) -> list[str]:
    blocks = api.requests[1].body["messages"][-1]["content"]
    return [
        b["content"] if isinstance(b["content"], str) else b["content"][0]["text"] for b in blocks
    ]


@pytest.mark.parametrize(
    ("policy", "ran"),
    [
        (None, ["read"]),  # the headless default: readonly
        ("readonly", ["read"]),
        ("ask", ["read"]),  # nobody to ask: as readonly
        ("write", ["read", "write"]),
        ("auto", ["compute", "destructive", "external", "read", "unknown", "write"]),
        ("deny", []),
    ],
)
def test_each_policy_runs_exactly_the_classes_it_allows(
    policy: str | None, ran: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark_file = tmp_path / "external.txt"
    steps = every_class(mark_file)
    script = [
        Reply([tool_use("run_code", {"code": code}) for code in steps.values()]),
        Reply([text("Done what was allowed.")]),
    ]
    nb = notebook(mark_file)
    with StandInAPI(script) as api:
        run(nb, api, monkeypatch, policy)
        told = results(api)
    assert marks(nb) == ran
    shown = policy or "readonly"
    for risk, result in zip(steps, told, strict=True):
        if risk in ran:
            assert not result.startswith("Not run"), (risk, result)
        else:
            assert result.startswith(f"Not run: denied by the approval policy '{shown}'"), result
            assert f"(a '{risk}' step)" in result.splitlines()[0]
            assert "the user denied" not in result.lower()
    record = nb.cells[1].metadata["qloop"]
    kinds = [c["decision"]["kind"] for c in record["tool_calls"]]
    assert kinds == ["auto" if r in ran else "denied" for r in steps]


def test_a_headless_readonly_run_says_what_runs(tmp_path: Path, monkeypatch) -> None:
    nb = notebook(tmp_path / "x")
    with StandInAPI([Reply([text("Nothing to do.")])]) as api:
        run(nb, api, monkeypatch, None)
    shown = json.dumps(nb.cells[1].outputs)
    assert "only 'read' code steps run (policy 'readonly')" in shown
    assert "--approve write" in shown


def saved_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, policy: str
) -> tuple[Path, Any]:
    mark_file = tmp_path / "external.txt"
    script = [Reply([tool_use("run_code", {"code": code})]), Reply([text("Done.")])]
    nb = notebook(mark_file)
    with StandInAPI(script) as api:
        run(nb, api, monkeypatch, policy)
        assert len(api.requests) == 2
    assert nb.cells[1].metadata["qloop"]["tool_calls"][0]["decision"]["kind"] == "auto"
    return mark_file, nb


def test_replaying_read_steps_needs_no_card_under_readonly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, nb = saved_turn(tmp_path, monkeypatch, "probe.head()", "readonly")
    with StandInAPI() as api:
        run(nb, api, monkeypatch, None)
        assert api.requests == []  # replayed, no model call
    assert marks(nb) == ["read"]
    assert "replay complete" in json.dumps(nb.cells[1].outputs)


def test_replaying_a_write_step_follows_the_kernels_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from nbclient.exceptions import CellExecutionError

    _, nb = saved_turn(tmp_path, monkeypatch, "made = 1", "write")
    nb.cells[2].outputs = []
    with StandInAPI() as api, pytest.raises(CellExecutionError, match="replay not run"):
        run(nb, api, monkeypatch, "readonly")  # the run stops where the replay did not run
    shown = json.dumps(nb.cells[1].outputs)
    assert (
        "replay not run: saved step 1 of 1 (`made = 1`) was not run: denied by the approval policy 'readonly'"
        in shown
    )
    assert "step 1, line 1: creates made" in shown
    assert nb.cells[2].outputs == []  # the report cell never ran
    with StandInAPI() as api:
        run(nb, api, monkeypatch, "write")
        assert api.requests == []
    assert marks(nb) == ["write"]
