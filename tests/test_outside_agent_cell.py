"""Outside agents' saved calls become an agent cell that replays like any saved turn: signed when
every entry verifies, received otherwise, and run headless under the same policy and provenance."""

from __future__ import annotations

import io
import re
from typing import Any

import nbformat
import pytest

from qloop_kernel.headless.runner import AgentNotebookClient
from qloop_kernel.notebook.proposals import where_now
from qloop_kernel.records import load_record
from qloop_kernel.server import record
from qloop_kernel.server.agent_cell import agent_cell, decision_kind
from qloop_kernel.server.gate import Gate

CELL_ID = "outside-cell"


def entries() -> list[dict[str, Any]]:
    """A session as the server saves it: approved, edited, denied, failed, a cell added, a cell run."""
    return [
        record.entry(client="Claude Code", tool="run_code", input={"code": "base = 40"},
                     decision="approved by the user", ran="base = 40", risk="write",
                     result="It printed nothing."),
        record.entry(client="Claude Code", tool="run_code", input={"code": "total = base * 1000"},
                     decision="edited by the user", ran="total = base + 2", risk="write",
                     result="It printed nothing."),
        record.entry(client="Claude Code", tool="run_code", input={"code": "import shutil"},
                     decision="denied by the user", reason="not that", ran=None, risk="destructive",
                     is_error=True),
        record.entry(client="Claude Code", tool="run_code", input={"code": "1/0"},
                     decision="run by the user's grant for this client", ran="1/0", risk="read",
                     result="ZeroDivisionError", is_error=True),
        record.entry(client="Cursor", tool="add_cell",
                     input={"source": "print(total)", "op": "add", "cell_type": "code",
                            "after": "c1"},
                     decision="approved by the user", ran="print(total)", risk="write",
                     result="cell new-1"),
        record.entry(client="Cursor", tool="run_cell", input={"source": "", "op": "run",
                                                               "cell_id": "c1"},
                     decision="approved by the user", ran="x = 1", risk="unknown",
                     result="cell c1"),
    ]  # fmt: skip


def test_the_cell_replays_the_code_that_ran_and_is_signed_when_every_entry_verifies() -> None:
    made = agent_cell(entries(), CELL_ID)
    saved = load_record(made.record)  # a valid record: the digest holds
    assert made.own and saved.is_own() and made.skipped == 0
    assert made.source == "%%agent\n" + saved.prompt
    assert "Claude Code, Cursor" in saved.prompt and saved.cell_id == CELL_ID
    assert [s.input["code"] for s in saved.replay_steps()] == ["base = 40", "total = base + 2"]
    assert made.steps == 2
    kinds = [(c.name, c.decision.kind, c.is_error) for c in saved.tool_calls]
    assert kinds == [
        ("run_code", "approved", False),
        ("run_code", "edited", False),
        ("run_code", "denied", True),
        ("run_code", "always", True),
        ("add_cell", "approved", False),
        ("run_cell", "approved", False),  # the notebook's own cell: never re-run by the replay
    ]
    assert saved.tool_calls[2].decision.reason == "not that"
    assert "2 code steps ran" in saved.answer and saved.messages == []


def test_one_received_entry_makes_the_whole_cell_received() -> None:
    found = entries()
    found[1] = {**found[1], "ran": "total = base + 2; import os"}  # edited after it was saved
    made = agent_cell(found, CELL_ID)
    saved = load_record(made.record)
    assert not made.own and not saved.is_own() and saved.signature == ""
    assert saved.replay_steps()[1].input["code"] == "total = base + 2; import os"


def test_unreadable_entries_are_skipped_and_counted() -> None:
    made = agent_cell([*entries()[:1], "junk", {"tool": "run_code"}, None], CELL_ID)
    assert made.skipped == 3 and made.steps == 1 and made.own


def test_code_with_a_secret_cut_out_stops_the_replay_instead_of_running_other_code() -> None:
    cut = record.entry(client="c", tool="run_code", input={"code": "k = '[REDACTED]'"},
                       decision="approved by the user", ran="k = '[REDACTED]'",
                       ran_redacted=True)  # fmt: skip
    [step] = load_record(agent_cell([cut], CELL_ID).record).replay_steps()
    assert step.input_redacted


def test_a_replay_says_where_each_cell_the_outside_agent_added_is_now() -> None:
    saved = load_record(agent_cell(entries(), CELL_ID).record)
    view = {"cells": [{"id": "new-1", "source": "print(total)", "source_chars": 12}]}
    assert where_now(saved.tool_calls, view) == [
        "cell new-1, added by this turn, is in the notebook as accepted; the replay does not "
        "propose it again"
    ]
    assert "was deleted since" in where_now(saved.tool_calls, {"cells": []})[0]


def test_every_way_the_gate_decides_maps_to_a_record_decision() -> None:
    import inspect

    said = set(
        re.findall(r'"((?:approved|edited|run|denied|refused)[^"]*)"', inspect.getsource(Gate))
    )
    assert said  # the gate's own words
    kinds = {how: decision_kind(how) for how in said}
    assert kinds["approved by the user"] == "approved"
    assert kinds["edited by the user"] == "edited"
    assert kinds["run by the user's grant for this client"] == "always"
    assert (
        kinds["approved by the user, who also allowed later such calls of this client"] == "always"
    )
    assert decision_kind("run without asking by the policy 'auto'") == "auto"
    assert all(
        kind == "denied" for how, kind in kinds.items() if how.startswith(("denied", "refused"))
    )


# --- through a kernel, headless ---------------------------------------------------------------------


def _notebook(made_record: dict[str, Any], source: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    agent = nbformat.v4.new_code_cell(source, metadata={"qloop": made_record})
    agent.id = CELL_ID
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext qloop_kernel"),
        agent,
        nbformat.v4.new_code_cell("print('total is', total)"),
    ]
    return nb


def _run(nb: nbformat.NotebookNode, monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # a replay calls no model
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    progress = io.StringIO()
    AgentNotebookClient(nb, progress=progress, timeout=120, kernel_name="python3").execute()
    return progress.getvalue()


def _outputs(cell: nbformat.NotebookNode) -> str:
    return "".join(str(o.get("text", "")) + str(o.get("evalue", "")) for o in cell.outputs)


@pytest.mark.kernel
def test_qloop_run_replays_the_outside_calls_without_the_agent_under_the_policy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = agent_cell(entries(), CELL_ID)
    nb = _notebook(made.record, made.source)
    _run(nb, monkeypatch, QLOOP_APPROVAL="write")
    assert "total is 42" in _outputs(nb.cells[2])
    assert "replaying the saved turn: 2 code steps, no model call now" in str(nb.cells[1].outputs)

    readonly = _notebook(made.record, made.source)
    with pytest.raises(Exception, match="denied"):
        _run(readonly, monkeypatch, QLOOP_APPROVAL="readonly")
    assert "total is" not in _outputs(readonly.cells[2])


@pytest.mark.kernel
def test_a_received_outside_cell_replays_headless_only_with_the_opt_in(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = entries()
    found[0] = {**found[0], "client": "Someone Else"}  # not what this user's server signed
    made = agent_cell(found, CELL_ID)
    assert not made.own
    refused = _notebook(made.record, made.source)
    with pytest.raises(Exception, match="received from elsewhere"):
        _run(refused, monkeypatch, QLOOP_APPROVAL="write")
    assert "total is" not in _outputs(refused.cells[2])


# --- a cell change written into the saved notebook (no page) ---------------------------------------


def test_a_change_that_cannot_apply_leaves_the_file_byte_identical(tmp_path: Any) -> None:
    import asyncio

    from jupyter_server.services.contents.filemanager import AsyncFileContentsManager

    from qloop_kernel.server.notebook_file import apply_change

    contents = AsyncFileContentsManager(root_dir=str(tmp_path))
    old = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1")])
    old.nbformat_minor = 4
    for made in old.cells:
        del made["id"]
    nbformat.write(old, tmp_path / "old.ipynb", version=nbformat.NO_CONVERT)
    new = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("a = 1")])
    nbformat.write(new, tmp_path / "new.ipynb")
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")}

    add = {"op": "add", "cell_type": "code", "after_cell_id": None}
    edit = {"op": "edit", "cell_id": "nope"}
    answers = [
        asyncio.run(apply_change(contents, "old.ipynb", add, "b = 2", "c")),
        asyncio.run(apply_change(contents, "new.ipynb", edit, "b = 2", "c")),
        asyncio.run(apply_change(contents, "gone.ipynb", add, "b = 2", "c")),
    ]
    assert "before nbformat 4.5" in answers[0]["error"]
    assert answers[1] == {"error": "no cell with id nope in the notebook"}
    assert "cannot read 'gone.ipynb'" in answers[2]["error"]
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")} == before
