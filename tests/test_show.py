"""``qloop show`` reads a notebook's agent cells before anything runs: prompt, provenance, status,
every step with its risk class, decision and code (bounded, ``--full``), ``--json`` for scripts, and a
non-zero exit when a record is invalid."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from qloop_kernel.headless import cli
from qloop_kernel.records import CellRecord
from qloop_kernel.records.schema import DecisionRecord, Timings, ToolCallRecord, UsageRecord

LONG = "\n".join(f"total_{i} = {i}" for i in range(30))


def step(code: str, kind: str = "auto", reason: str | None = None) -> ToolCallRecord:
    return ToolCallRecord(
        id=f"t{abs(hash(code)) % 1000}", name="run_code", input={"code": code},
        decision=DecisionRecord(kind=kind, reason=reason),
    )  # fmt: skip


def record(prompt: str, *steps: ToolCallRecord) -> CellRecord:
    return CellRecord(
        session_id="s", prompt=prompt, model="claude-test", status="completed",
        answer="Made **y**.", tool_calls=list(steps), model_calls=2, cost_usd=0.0012,
        usage=UsageRecord(input_tokens=800, output_tokens=12),
        timings=Timings(started_at="2025-01-01T00:00:00Z"),
    )  # fmt: skip


@pytest.fixture
def notebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cells: setup; yours (three steps); received (signed with another key); invalid (edited
    after it was written); an agent cell without a record."""
    mine = record(
        "Double x into y.",
        step("df.head()"),
        step("y = x * 2"),
        step("import shutil\nshutil.rmtree('data')", "denied", "denied by the approval policy 'readonly': this step is classed 'destructive'"),
    ).sealed()  # fmt: skip
    with monkeypatch.context() as other:
        other.setenv("QLOOP_SIGNING_KEY_FILE", str(tmp_path / "someone-else"))
        theirs = record("Plot it.", step(LONG)).sealed()
    broken = record("Tamper.", step("z = 1")).sealed().model_dump(mode="json")
    broken["tool_calls"][0]["input"]["code"] = "import os; os.system('rm -rf ~')"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("%load_ext qloop_kernel\nx = 10")]
    for prompt, saved in [("Double x into y.", mine.model_dump(mode="json")),
                          ("Plot it.", theirs.model_dump(mode="json")), ("Tamper.", broken)]:  # fmt: skip
        cell = nbformat.v4.new_code_cell(f"%%agent\n{prompt}")
        cell.metadata["qloop"] = saved
        nb.cells.append(cell)
    nb.cells.append(nbformat.v4.new_code_cell("%%agent\nNot run yet."))
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return path


def test_show_prints_provenance_steps_classes_decisions_and_code(notebook: Path, capsys) -> None:
    assert cli.main(["show", str(notebook)]) == 1  # the tampered record is invalid
    out = capsys.readouterr().out
    assert "cell 2  completed  claude-test  2 model calls · 812 tokens · $0.0012" in out
    assert "  provenance: yours (signed by your kernel)" in out
    assert "  prompt: Double x into y." in out
    assert "  step 1/3  run_code  class read · run by the policy · replays" in out
    assert "  step 2/3  run_code  class write · run by the policy · replays" in out
    assert (
        "  step 3/3  run_code  class destructive · denied (denied by the approval policy "
        "'readonly': this step is classed 'destructive') · does not replay"
    ) in out
    assert "      import shutil\n      shutil.rmtree('data')" in out
    assert "  answer:\n      Made **y**." in out
    assert "cell 3  " in out and "  provenance: received: not signed by your kernel" in out
    assert "      total_11 = 11\n      … 18 more lines (`qloop show --full` shows all)" in out
    assert "total_12" not in out
    assert "cell 4  invalid: the saved qloop record was changed after it was written" in out
    assert "rm -rf" not in out  # an invalid record's steps are never shown as if they were saved
    assert "cell 5  no saved record" in out and "  prompt: Not run yet." in out


def test_show_full_prints_every_line(notebook: Path, capsys) -> None:
    cli.main(["show", str(notebook), "--full"])
    out = capsys.readouterr().out
    assert "      total_29 = 29" in out and "more lines" not in out


def test_show_json_is_the_same_for_scripts(notebook: Path, capsys) -> None:
    assert cli.main(["show", str(notebook), "--json"]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["invalid"] == 1
    cells = {c["cell"]: c for c in shown["cells"]}
    assert [cells[n]["provenance"] for n in (2, 3, 4, 5)] == [
        "yours",
        "received",
        "invalid",
        "none",
    ]
    steps = cells[2]["steps"]
    assert [s["risk"] for s in steps] == ["read", "write", "destructive"]
    assert [s["decision"] for s in steps] == ["auto", "auto", "denied"]
    assert [s["replays"] for s in steps] == [True, True, False]
    assert steps[1]["code"] == "y = x * 2"
    assert cells[3]["steps"][0]["code"] == LONG  # whole, always
    assert "digest mismatch" in cells[4]["reason"] and cells[4]["steps"] == []
    assert cells[2]["cost_usd"] == 0.0012 and cells[2]["status"] == "completed"


def test_show_exits_zero_when_every_record_is_valid(notebook: Path, capsys) -> None:
    nb = nbformat.read(notebook, as_version=4)
    del nb.cells[3]
    nbformat.write(nb, notebook)
    assert cli.main(["show", str(notebook)]) == 0


def test_show_lists_outside_agents_calls_with_whether_your_key_signed_them(
    tmp_path: Path, capsys
) -> None:
    from qloop_kernel.server import record as outside

    mine = outside.entry(
        client="claude-code", tool="run_code", input={"code": "y = 1"}, decision="approved by the user",
        reason="fine", ran="y = 1", risk="write", result="",
    )  # fmt: skip
    forged = {**outside.entry(client="cursor", tool="add_cell", input={"source": "z = 2"},
              decision="approved by the user", ran="z = 2", risk="write"), "ran": "import os"}  # fmt: skip
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["qloop_outside"] = {"entries": [mine, forged, "not an entry"]}
    path = tmp_path / "outside.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["show", str(path)]) == 0  # entries never fail the notebook: they do not replay
    out = capsys.readouterr().out
    assert "outside agents (MCP): 3 calls saved in this notebook" in out
    assert "claude-code  run_code  class write · approved by the user · yours" in out
    assert "cursor  add_cell  class write · approved by the user · received" in out
    assert "      import os" in out and "an unreadable entry" in out
    assert cli.main(["show", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["outside"]
    assert [e["provenance"] for e in shown] == ["yours", "received", "unreadable"]
    assert shown[0]["code"] == "y = 1" and shown[0]["reason"] == "fine"


def test_show_lists_the_fix_explain_and_edit_turns_saved_on_ordinary_cells(
    tmp_path: Path, capsys
) -> None:
    fix = record("Fix the error of notebook cell lookup.\n\nThe cell's source now:", step("d"))
    broken = record("Explain notebook cell lookup.").sealed().model_dump(mode="json")
    broken["answer"] = "changed after it was written"
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("value = d['b']", id="lookup")
    cell.metadata["qloop_assist"] = {"turns": [
        {"action": "fix", "record": fix.sealed().model_dump(mode="json")},
        {"action": "explain", "record": broken},
    ]}  # fmt: skip
    nb.cells = [nbformat.v4.new_code_cell("d = {}"), cell]
    path = tmp_path / "fixed.ipynb"
    nbformat.write(nb, path)
    assert cli.main(["show", str(path)]) == 1  # the changed explanation is invalid
    out = capsys.readouterr().out
    assert "no agent cells" not in out
    assert "fix of cell 2 (lookup): completed  claude-test  2 model calls" in out
    assert "  provenance: yours (signed by your kernel)" in out
    assert "  prompt: Fix the error of notebook cell lookup.\n" in out  # its first line
    assert "The cell's source now" not in out
    assert "explain of cell 2 (lookup): invalid: the saved qloop record was changed" in out
    assert cli.main(["show", str(path), "--json"]) == 1
    shown = json.loads(capsys.readouterr().out)
    assert shown["cells"] == [] and shown["invalid"] == 1
    assert [(a["action"], a["cell_id"], a["provenance"]) for a in shown["assists"]] == [
        ("fix", "lookup", "yours"),
        ("explain", "lookup", "invalid"),
    ]
