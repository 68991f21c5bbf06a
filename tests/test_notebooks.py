"""Saved agent cells: records in metadata via the headless runner, replay, tampering, the CLI."""

from __future__ import annotations

import contextlib
import copy
import io
import json
from pathlib import Path

import nbformat
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qloop_kernel.headless.cli import main as qloop_main
from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.records import RecordError, load_record
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use

pytestmark = pytest.mark.kernel
CANARY = "sk-ant-api03-CANARY-qloop-test-key-000000000000"
PROMPT = "Double x into y."


def notebook(prompt: str = PROMPT) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel\nx = 10"),
        nbformat.v4.new_code_cell(f"%%agent\n{prompt}"),
        nbformat.v4.new_code_cell("print(y + 1)"),
    ]
    return nb


def script() -> list[Reply]:
    return [
        Reply([tool_use("run_code", {"code": "y = x * 2\nprint('y is', y)"})]),
        Reply([text("y is now **20**.")]),
    ]


def run(nb, env: dict[str, str], monkeypatch, approve: str | None = "auto") -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if approve:
        monkeypatch.setenv("QLOOP_APPROVAL", approve)
    else:
        monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
    AgentNotebookClient(nb, progress=io.StringIO(), timeout=120, kernel_name="python3").execute()


@pytest.fixture
def saved(tmp_path: Path, monkeypatch) -> Path:
    """A notebook run once against the stand-in, saved with its record."""
    with StandInAPI(script()) as api:
        nb = notebook()
        run(nb, api.environment(api_key=CANARY), monkeypatch)
        assert len(api.requests) == 2
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    return path


def test_records_land_in_cell_metadata_without_secrets(saved: Path) -> None:
    nb = nbformat.read(saved, as_version=4)
    record = load_record(nb.cells[1].metadata["qloop"])
    assert record.status == "completed" and record.prompt == PROMPT
    assert record.cell_id == nb.cells[1].id
    assert [s.input["code"] for s in record.replay_steps()] == ["y = x * 2\nprint('y is', y)"]
    assert record.tool_calls[0].decision.kind == "approved" or record.tool_calls[0].decision.kind
    assert "21" in nb.cells[2].outputs[0]["text"]
    assert CANARY not in saved.read_text()


def test_replay_needs_no_model_and_rebuilds_the_namespace(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    before = copy.deepcopy(nb.cells[1].metadata["qloop"])
    with StandInAPI() as api:  # any request would fail: the script is empty
        env = api.environment()
        env["ANTHROPIC_API_KEY"] = ""
        run(nb, env, monkeypatch)
        assert api.requests == []
    assert "21" in nb.cells[2].outputs[0]["text"]
    assert nb.cells[1].metadata["qloop"] == before  # replay keeps the record unchanged
    shown = "".join(o.get("text", "") for o in nb.cells[1].outputs)
    assert "replay" in str(nb.cells[1].outputs)
    assert shown is not None


def test_headless_replay_obeys_the_policy(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    # default: readonly; the saved step is a 'write' step: the run stops at the agent cell
    with StandInAPI() as api, pytest.raises(Exception, match="AgentError: replay not run"):
        run(nb, api.environment(), monkeypatch, approve=None)
    assert "denied by the approval policy 'readonly'" in str(nb.cells[1].outputs)


def test_changed_prompt_runs_the_model_and_replaces_the_record(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    nb.cells[1].source = "%%agent\nDouble x into y, please."
    with StandInAPI(script()) as api:
        run(nb, api.environment(), monkeypatch)
        assert len(api.requests) == 2
    assert nb.cells[1].metadata["qloop"]["prompt"] == "Double x into y, please."


def test_tampered_record_runs_nothing(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    nb.cells[1].metadata["qloop"]["tool_calls"][0]["input"]["code"] = "y = 'pwned'"
    nb.cells[2].source = "print(repr(globals().get('y')))"
    with StandInAPI() as api, pytest.raises(Exception, match="changed after it was written"):
        run(nb, api.environment(), monkeypatch)
    assert api.requests == []


def test_failing_replay_step_stops_with_a_clear_message(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    nb.cells[0].source = "%load_ext qloop_kernel\nx = None"
    before = copy.deepcopy(nb.cells[1].metadata["qloop"])
    with StandInAPI() as api, pytest.raises(Exception, match="replay stopped at step 1 of 1"):
        run(nb, api.environment(), monkeypatch)
    assert nb.cells[1].metadata["qloop"] == before


def test_qloop_show_lists_agent_cells(saved: Path, capsys) -> None:
    assert qloop_main(["show", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "prompt: Double x into y." in out and "completed" in out and "$" in out


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["schema_version", "prompt", "status", "tool_calls",
                                        "messages", "digest", "session_id", "model"]) | st.text(max_size=8),
                       json_values, max_size=10))  # fmt: skip
def test_the_loader_never_crashes_on_crafted_records(data: dict) -> None:
    with contextlib.suppress(RecordError):
        load_record(data)


def test_replay_after_a_restart_rebuilds_the_shared_conversation(saved: Path, monkeypatch) -> None:
    nb = nbformat.read(saved, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("%%agent\nNow triple it."))
    with StandInAPI([Reply([text("tripled")])]) as api:
        run(nb, api.environment(), monkeypatch)
        assert len(api.requests) == 1  # only the new cell calls the model
        sent = api.requests[0].body["messages"]
    assert sent[0]["content"][0]["text"] == PROMPT  # the replayed turn is in the conversation
    assert any(b.get("type") == "tool_use" for m in sent for b in m["content"])
    assert sent[-1]["content"][0]["text"] == "Now triple it."


def test_qloop_run_exits_non_zero_when_a_cell_fails(tmp_path: Path, capsys) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("ok = 1"), nbformat.v4.new_code_cell("1 / 0")]
    source, out = tmp_path / "fails.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, source)
    assert qloop_main(["run", str(source), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "qloop run: cell 2 failed: ZeroDivisionError: division by zero" in err
    assert "[1/2] ok" in err
    assert nbformat.read(out, as_version=4).cells[1].outputs[0]["ename"] == "ZeroDivisionError"


def test_the_shipped_demo_replays_offline(monkeypatch) -> None:
    demo = Path(__file__).parent.parent / "notebooks" / "demo.ipynb"
    nb = nbformat.read(demo, as_version=4)
    with StandInAPI() as api:
        env = api.environment()
        env["ANTHROPIC_API_KEY"] = ""
        env["QLOOP_REPLAY_RECEIVED"] = "1"  # the shipped records were not written by this user
        run(nb, env, monkeypatch)
        assert api.requests == []
    outputs = json.dumps([cell.get("outputs", []) for cell in nb.cells])
    assert "image/png" in outputs and "replay complete" in outputs


def test_the_shipped_demo_replays_without_drift_where_nothing_changed(monkeypatch) -> None:
    """With the libraries and the Python its turns ran with, the demo's replay matches its saved
    outputs step by step: no false "differs" or "may be stale" (what a step changed is compared
    by the variable checks, not as text)."""
    from qloop_kernel.records.drift import library_version, python_version

    demo = Path(__file__).parent.parent / "notebooks" / "demo.ipynb"
    nb = nbformat.read(demo, as_version=4)
    prints = [c.metadata["qloop"]["fingerprint"] for c in nb.cells if "qloop" in c.metadata]
    assert prints
    for fingerprint in prints:
        for module, version in fingerprint["libraries"].items():
            if library_version(module) != version:
                pytest.skip(f"{module} {library_version(module)} here, {version} in the demo")
        if fingerprint["python"] != python_version():
            pytest.skip(f"Python {python_version()} here, {fingerprint['python']} in the demo")
    with StandInAPI() as api:
        env = api.environment()
        env["ANTHROPIC_API_KEY"] = ""
        env["QLOOP_REPLAY_RECEIVED"] = "1"
        run(nb, env, monkeypatch)
    outputs = json.dumps([cell.get("outputs", []) for cell in nb.cells])
    assert "replay complete" in outputs
    assert (
        "differs from the saved run" not in outputs and "differ from the saved run" not in outputs
    )
    assert "may be stale" not in outputs and "changed since the turn ran" not in outputs


def test_qloop_run_says_a_replay_called_no_model_and_numbers_cells_as_qloop_show(
    saved: Path, monkeypatch, capsys
) -> None:
    out = saved.parent / "again.ipynb"
    with StandInAPI() as api:
        for name, value in api.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("QLOOP_APPROVAL", "auto")
        assert qloop_main(["run", str(saved), "-o", str(out)]) == 0
        assert api.requests == []
    err = capsys.readouterr().err
    [agent] = [line for line in err.splitlines() if "%%agent" in line]
    assert "→ replayed 1 code step, no model call now (the original turn: completed, " in agent
    assert "2 model call" in agent and "$" in agent
    run_number = agent.split("/")[0].lstrip("[")
    assert qloop_main(["show", str(out)]) == 0
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cell ")]
    assert row.split()[1] == run_number  # the same cell, the same number
