"""Undo of the last agent step: snapshots within a budget, restore, the card, the record, the model.

The first part runs in this process against an IPython shell; the second through a real kernel
driven like JupyterLab (clicks on the card's buttons), with a scripted model on the loopback API.
"""

from __future__ import annotations

import copy
import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ipywidgets as widgets
import numpy as np
import pandas as pd
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.approval import ApprovalCard, StepChangesBox
from qloop_kernel.notebook.changes import UndoNotices, with_changes
from qloop_kernel.notebook.session import undo_log
from qloop_kernel.notebook.undo import (
    UndoLog,
    note_in_conversation,
    size_of,
    snapshot_copy,
)
from qloop_kernel.policy.permissions import ApprovalRequest, Approve, Decision, Deny
from qloop_kernel.records import (
    CellRecord,
    DecisionRecord,
    RecordError,
    Timings,
    ToolCallRecord,
    load_record,
)
from qloop_kernel.settings import Settings
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import result_text, saved_record, tool_results
from tests.kernel_client import LabKernel

# -- in this process ---------------------------------------------------------------------------


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ipython = InteractiveShell.instance(config=config)
    ipython.user_ns.update(pd=pd, np=np)
    yield ipython
    InteractiveShell.clear_instance()


def run_step(log: UndoLog, code: str) -> Any:
    """Run ``code`` as run_code does: snapshot, run, changes."""
    snapshot = log.begin(code)
    log.shell.run_cell(code, store_history=False)
    return log.finish(snapshot)


def test_dropped_rows_a_created_and_a_deleted_variable_are_undone(shell: InteractiveShell) -> None:
    shell.run_cell("df = pd.DataFrame({'a': range(600), 'b': 1.0})\noriginal = df.copy()\nold = 5")
    log = UndoLog(shell)
    step = run_step(log, "df = df.drop(index=[0, 1])\nkept = len(df)\ndel old")
    assert step.lines() == [
        "kept: created (int 598)",
        "df: DataFrame 600×2 → 598×2",
        "old: deleted (was int 5)",
    ]
    report = log.undo()
    ns = shell.user_ns
    assert ns["df"].equals(ns["original"]) and ns["old"] == 5 and "kept" not in ns
    assert report.lines() == ["restored df, old", "removed kept (created by the step)"]
    with pytest.raises(ValueError, match="nothing to undo"):
        log.undo()  # one step, once


def test_a_change_outside_the_sampled_rows_is_named_and_undone(shell: InteractiveShell) -> None:
    shell.run_cell(
        "big = pd.DataFrame({'a': np.arange(1_000_000)})\nsmall = pd.DataFrame({'a': [1]})"
    )
    log = UndoLog(shell)
    step = run_step(log, "big.loc[5, 'a'] = -1\nsmall.loc[0, 'a'] = 1")  # small: unchanged
    assert step.lines() == [
        "big: DataFrame 1000000×1, may have changed (not in the values sampled)"
    ]
    log.undo()
    assert shell.user_ns["big"].loc[5, "a"] == 5


def test_pandas_snapshots_share_memory_until_written(shell: InteractiveShell) -> None:
    frame = pd.DataFrame({"a": np.arange(1_000_000.0)})
    copied, how = snapshot_copy(frame)
    assert how == "copy-on-write copy"
    assert np.shares_memory(copied["a"].to_numpy(), frame["a"].to_numpy())  # nothing copied yet
    frame.loc[0, "a"] = -1.0  # a write in place copies for the written side only
    assert copied.loc[0, "a"] == 0.0


def test_in_place_restores_keep_other_references_right(shell: InteractiveShell) -> None:
    shell.run_cell("arr = np.arange(5.0)\nview = arr\nitems = [1, 2]\nsame = items")
    log = UndoLog(shell)
    run_step(log, "arr *= 2\nitems.append(3)")
    log.undo()
    ns = shell.user_ns
    assert ns["view"] is ns["arr"] and list(ns["view"]) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert ns["same"] is ns["items"] and ns["same"] == [1, 2]


def test_what_cannot_be_undone_is_said_before_the_step_runs(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    shell.run_cell(
        "big = np.zeros(1_000_000)\ngen = (i for i in range(3))\ndf = pd.DataFrame({'a': [1]})"
    )
    log = UndoLog(shell)
    log.budget = lambda: 1024**2  # 1 MB
    assert log.prepare("big[:] = 1").notice() == (
        "cannot be undone: big (7.6 MB) is over the undo budget of 1.0 MB "
        "(raise it with `%agent set undo_budget_mb N`)"
    )
    assert log.prepare("gen = list(gen)").notice() == (
        "cannot be undone: gen (generator) cannot be copied: TypeError: "
        "cannot pickle 'generator' object"
    )
    path = tmp_path / "out.csv"
    assert log.prepare(f"df.to_csv({str(path)!r})").notice() == (
        "cannot be undone: line 1: writes files (df.to_csv), outside the namespace"
    )
    assert log.prepare("import os\nos.system('true')").notice() == (
        "cannot be undone: line 2: runs a shell command (os.system), outside the namespace"
    )
    shell.run_cell("import dask.dataframe as dd\nddf = dd.from_pandas(df, npartitions=1)")
    assert log.prepare("ddf = ddf.persist()").notice() == (
        "cannot be undone: line 1: starts dask computation (ddf.persist), outside the namespace"
    )
    assert log.prepare("df['b'] = 2").notice() is None  # all of it can be undone


def test_a_step_that_may_change_anything_saves_what_fits(shell: InteractiveShell) -> None:
    shell.run_cell("small = [1, 2]\nbig = np.zeros(1_000_000)\ndef f(x):\n    x.append(9)")
    log = UndoLog(shell)
    log.budget = lambda: 100_000
    snapshot = log.prepare("f(small)")
    assert "small" in snapshot.saved and "big" in snapshot.missed
    notice = snapshot.notice() or ""
    assert "it may change any variable (line 1: calls f(), defined earlier" in notice
    assert "big (7.6 MB) is over the undo budget" in notice
    step = run_step(log, "f(small)")
    assert step.lines() == ["small: list len 2 → len 3"]
    assert step.not_undone() == [
        "what it did outside the namespace, if anything (line 1: calls f(), defined earlier, "
        "which it cannot check)"
    ]
    log.undo()
    assert shell.user_ns["small"] == [1, 2]


def test_the_prepared_snapshot_is_reused_and_an_edit_takes_a_new_one(
    shell: InteractiveShell,
) -> None:
    shell.run_cell("df = pd.DataFrame({'a': [1, 2]})\nother = [1]")
    log = UndoLog(shell)
    prepared = log.prepare("df['b'] = 1")
    assert log.begin("df['b'] = 1") is prepared
    log.prepare("df['b'] = 1")
    edited = log.begin("other.append(2)")  # the user edited the code on the card
    assert set(edited.saved) == {"other"} and log.pending is None


def test_changes_since_the_step_are_named_when_undone(shell: InteractiveShell) -> None:
    shell.run_cell("x = [1]")
    log = UndoLog(shell)
    run_step(log, "x.append(2)\ny = 1")
    shell.run_cell("x.append(3)")  # the user changes x again afterwards
    report = log.undo()
    assert "changed again after the step, now put back to before it: x" in report.lines()
    assert shell.user_ns["x"] == [1]


def test_a_step_that_changes_nothing_keeps_the_undo_of_the_one_before(
    shell: InteractiveShell,
) -> None:
    shell.run_cell("x = 1")
    log = UndoLog(shell)
    changed = run_step(log, "x = 2")
    unchanged = run_step(log, "print(x)")
    assert unchanged.changes == [] and log.last is changed
    with pytest.raises(ValueError, match="only the last step"):
        log.undo(unchanged)
    log.undo(changed)
    assert shell.user_ns["x"] == 1


def test_undo_waits_for_the_turn_to_end(shell: InteractiveShell) -> None:
    log = UndoLog(shell)
    run_step(log, "z = 1")
    log.turn_running = lambda: True
    with pytest.raises(ValueError, match="an agent turn is running"):
        log.undo()
    log.turn_running = lambda: False
    log.undo()
    assert "z" not in shell.user_ns


def test_connections_locks_and_files_are_kept_not_copied(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    shell.run_cell(
        "import sqlite3, threading\ndb = sqlite3.connect(':memory:')\nlock = threading.Lock()\n"
        f"out = open({str(tmp_path / 'log.txt')!r}, 'w')"
    )
    ns = shell.user_ns
    for name in ("db", "lock", "out"):
        assert snapshot_copy(ns[name]) == (ns[name], "kept (a live handle)")
        assert size_of(ns[name]) == 0
    log = UndoLog(shell)
    run_step(log, "db = None\nlock = None")
    log.undo()
    assert ns["db"].execute("select 1").fetchone() == (1,) and ns["lock"].acquire(blocking=False)
    ns["out"].close()


def test_sizes_of_data_and_plain_values() -> None:
    assert size_of(np.zeros(1000)) == 8000
    assert size_of("text") == 0 and size_of(np) == 0  # kept as they are
    assert (size_of({"a": list(range(100))}) or 0) > 800
    assert size_of([[i] for i in range(200_000)]) is None  # too many objects


def test_the_model_is_told_in_the_result_of_the_undone_step() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "drop rows"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "run_code", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Dropped."}]},
    ]
    assert note_in_conversation(messages, "t1", "[undone]")
    assert messages[2]["content"][0]["content"] == [
        {"type": "text", "text": "done"},
        {"type": "text", "text": "[undone]"},
    ]
    assert not note_in_conversation(messages, "t9", "[undone]")


class Recorder:
    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.requests: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.requests.append(request)
        return self.decision


def test_the_card_request_carries_the_notice_and_a_denial_lets_the_copies_go(
    shell: InteractiveShell, tmp_path: Path
) -> None:
    shell.run_cell("df = pd.DataFrame({'a': [1]})")
    log = UndoLog(shell)
    inner = Recorder(Deny("no"))
    code = f"df.to_csv({str(tmp_path / 'x.csv')!r})"
    request = ApprovalRequest(ToolCall("t1", "run_code", {"code": code}), "run_code", "code")
    assert isinstance(UndoNotices(inner, log).decide(request), Deny)
    [shown] = inner.requests
    assert shown.details["notices"] == [
        "cannot be undone: line 1: writes files (df.to_csv), outside the namespace"
    ]
    assert log.pending is None
    UndoNotices(Recorder(Approve()), log).decide(request)
    assert log.pending is not None and log.pending.code == code


def test_the_box_undoes_once_and_says_why_it_cannot() -> None:
    calls = []

    def undo() -> list[str]:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("an agent turn is running: undo when it has ended")
        return ["restored df"]

    box = StepChangesBox(["df: DataFrame 600×2 → 598×2"], ["not undone: x"], undo)
    assert box.button is not None
    box.button.click()
    assert "not undone: an agent turn is running" in html.unescape(box.status.value)
    assert not box.button.disabled
    box.button.click()
    assert box.button.disabled and "↶ undone: restored df" in box.status.value
    shown = html.unescape(re.sub(r"<[^>]+>", " ", box.changes.value))
    assert "df: DataFrame 600×2 → 598×2" in shown and "not undone: x" in shown
    retired = StepChangesBox(["y: created (int 1)"], [], lambda: [])
    retired.retire("a later step changed variables: only the last one can be undone")
    assert retired.button is not None and retired.button.disabled
    assert "later step" in retired.status.value
    plain = StepChangesBox(["no variables changed"], ["not undone: files"], None)
    assert plain.button is None


def test_the_card_shows_the_outcome_at_its_foot() -> None:
    card = ApprovalCard(
        ApprovalRequest(ToolCall("t", "run_code", {"code": "x = 1"}), "run_code", "code")
    )
    box = StepChangesBox(["x: created (int 1)"], [], None)
    card.show_after(box.widget)
    assert card.widget.children[-1] is box.widget
    assert isinstance(box.widget, widgets.VBox)


def record_with(changes: list[dict[str, str]] | None) -> CellRecord:
    call = ToolCallRecord(
        id="t1", name="run_code", input={"code": "x = 1"}, decision=DecisionRecord(kind="approved")
    )
    record = CellRecord(
        session_id="s", prompt="p", model="m", status="completed", tool_calls=[call],
        timings=Timings(started_at="2026-12-02T00:00:00Z"),
    )  # fmt: skip
    if changes is None:
        return record
    from qloop_kernel.values.fingerprint import Change

    return with_changes(record, {"t1": [Change(**c) for c in changes]})  # type: ignore[arg-type]


def test_the_record_keeps_the_changes_and_its_digest_covers_them() -> None:
    saved = record_with(
        [{"name": "x", "kind": "created", "summary": "created (int 1)", "hash": "ab"}]
    )
    data = saved.to_json()
    assert data["tool_calls"][0]["changes"] == [
        {"name": "x", "kind": "created", "summary": "created (int 1)", "hash": "ab"}
    ]
    assert load_record(copy.deepcopy(data)).tool_calls[0].changes is not None
    data["tool_calls"][0]["changes"][0]["summary"] = "created (int 2)"
    with pytest.raises(RecordError, match="changed after it was written"):
        load_record(data)


def test_records_made_before_changes_were_recorded_still_verify() -> None:
    data = record_with(None).to_json()
    del data["tool_calls"][0]["changes"]  # as a record written before the field existed
    assert load_record(data).tool_calls[0].changes is None
    version_1 = {**record_with(None).model_copy(update={"schema_version": 1}).to_json()}
    del version_1["tool_calls"][0]["changes"]
    assert load_record(version_1).schema_version == 1


def test_the_budget_setting_and_its_default() -> None:
    assert Settings(undo_budget_mb=2).undo_budget_bytes() == 2 * 1024**2
    default = Settings().undo_budget_bytes()
    assert 0 < default <= 4 * 1024**3


def test_one_log_per_shell(shell: InteractiveShell) -> None:
    assert undo_log(shell) is undo_log(shell)


# -- through a real kernel, clicked like JupyterLab ------------------------------------------


@pytest.fixture
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    api.reset()
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel\nimport pandas as pd, numpy as np")
        yield kernel


def shown_text(lab: LabKernel, parent: str) -> str:
    """What the HTML widgets of a cell show now, without tags."""
    states = lab.widget_states(parent=parent, model_name="HTMLModel")
    joined = "\n".join(str(s.get("value", "")) for s in states)
    return html.unescape(re.sub(r"<[^>]+>", "", joined))


def buttons(lab: LabKernel, parent: str, description: str) -> list[dict[str, Any]]:
    states = lab.widget_states(parent=parent, model_name="ButtonModel")
    return [s for s in states if s.get("description") == description]


@pytest.mark.kernel
def test_undo_button_puts_back_dropped_rows_and_removes_what_the_step_created(
    lab: LabKernel, api: StandInAPI
) -> None:
    lab.run("df = pd.DataFrame({'a': range(600), 'b': 1.0})\noriginal = df.copy()")
    code = "df = df[df.a > 1]\nkept = len(df)"
    api.set_script(
        [Reply([tool_use("run_code", {"code": code})]), Reply([text("Dropped 2 rows.")])]
    )
    agent = lab.execute("%%agent\nDrop the first two rows.", cell_id="undo-1")
    lab.click(lab.wait_for_button("Approve", parent=agent, timeout=30))
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.run("print(len(df), kept)").strip() == "598 598"
    sent = result_text(tool_results(api.requests[1])[0])  # the model learns what changed
    assert "namespace changes:\nkept: created (int 598)\ndf: DataFrame 600×2 → 598×2" in sent
    assert "df: DataFrame 600×2 → 598×2" in shown_text(lab, agent)  # on the card, after it ran
    [change_df, change_kept] = sorted(
        saved_record(lab, agent)["tool_calls"][0]["changes"], key=lambda c: c["name"]
    )
    assert change_df["summary"] == "DataFrame 600×2 → 598×2" and change_kept["kind"] == "created"
    undo = lab.wait_for_button("Undo", parent=agent)
    lab.click(undo)
    lab.wait_for(lambda: "↶ undone" in shown_text(lab, agent), 30, "the undo status")
    assert lab.widget_state(undo)["disabled"] is True
    assert lab.run("print(df.equals(original), 'kept' in dir())").strip() == "True False"


@pytest.mark.kernel
def test_agent_undo_restores_a_deleted_variable_and_the_model_is_told(
    lab: LabKernel, api: StandInAPI
) -> None:
    lab.run("old = [1, 2, 3]")
    api.set_script(
        [
            Reply([tool_use("run_code", {"code": "del old"})]),
            Reply([text("Deleted old.")]),
            Reply([text("old is back.")]),
        ]
    )
    agent = lab.execute("%%agent --approve auto\nDelete old.", cell_id="undo-2")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert lab.run("print('old' in dir())").strip() == "False"
    assert "undone: restored old" in lab.run("%agent undo")
    assert lab.run("print(old)").strip() == "[1, 2, 3]"
    follow = lab.execute("%%agent\nWhat did you do?", cell_id="undo-2b")
    assert lab.complete(follow, 60)["content"]["status"] == "ok"
    history = json.dumps(api.requests[2].body["messages"])
    assert "The user undid this step after it ran: restored old" in history
    again = lab.execute("%agent undo")
    lab.complete(again)
    assert "nothing to undo" in lab.error_text(again) + lab.stderr(again)


@pytest.mark.kernel
def test_an_over_budget_step_says_before_approval_that_it_cannot_be_undone(
    lab: LabKernel, api: StandInAPI
) -> None:
    lab.run("big = np.zeros(1_000_000)\n%agent set undo_budget_mb 1")
    api.set_script([Reply([tool_use("run_code", {"code": "big[:] = 1"})]), Reply([text("ok")])])
    agent = lab.execute("%%agent\nFill big with ones.", cell_id="undo-3")
    approve = lab.wait_for_button("Approve", parent=agent, timeout=30)
    lab.round_trip(approve)  # the card is built and waits: nothing has run
    before = shown_text(lab, agent)
    assert "cannot be undone: big (7.6 MB) is over the undo budget of 1.0 MB" in before
    assert "big: ndarray" not in before
    lab.click(approve)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    after = shown_text(lab, agent)
    assert "big: ndarray 1000000, values changed" in after
    assert "not undone: big (7.6 MB) is over the undo budget" in after
    assert buttons(lab, agent, "Undo") == []  # nothing it could put back
    assert lab.run("print(big.sum())").strip() == "1000000.0"


@pytest.mark.kernel
def test_a_step_writing_a_file_says_its_file_effect_is_not_undone(
    lab: LabKernel, api: StandInAPI, tmp_path: Path
) -> None:
    path = tmp_path / "rows.csv"
    lab.run("df = pd.DataFrame({'a': [1, 2]})")
    code = f"df.to_csv({str(path)!r})\nwritten = True"
    api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("Saved.")])])
    agent = lab.execute("%%agent\nSave df.", cell_id="undo-4")
    approve = lab.wait_for_button("Approve", parent=agent, timeout=30)
    lab.round_trip(approve)
    notice = "line 1: writes files (df.to_csv), outside the namespace"
    assert f"cannot be undone: {notice}" in shown_text(lab, agent)
    lab.click(approve)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    assert f"not undone: {notice}" in shown_text(lab, agent)
    lab.click(lab.wait_for_button("Undo", parent=agent))
    lab.wait_for(lambda: "↶ undone" in shown_text(lab, agent), 30, "the undo status")
    undone = shown_text(lab, agent).split("↶ undone")[-1]
    assert "removed written" in undone and "not undone: line 1: writes files (df.to_csv)" in undone
    assert path.exists()  # the file stays: undo says so, and does not pretend otherwise
    assert lab.run("print('written' in dir())").strip() == "False"


@pytest.mark.kernel
def test_only_the_last_step_can_be_undone_and_not_while_the_turn_runs(
    lab: LabKernel, api: StandInAPI
) -> None:
    api.set_script(
        [
            Reply([tool_use("run_code", {"code": "a = 1"})]),
            Reply([tool_use("run_code", {"code": "b = 2"})]),
            Reply([text("word " * 120)], event_delay=0.05),
        ]
    )
    agent = lab.execute("%%agent --approve auto\nSet a and b.", cell_id="undo-5")
    lab.wait_for(lambda: len(buttons(lab, agent, "Undo")) == 2, 30, "two Undo buttons")
    first, second = _button_ids(lab, agent, "Undo")
    lab.wait_for(lambda: lab.widget_state(first)["disabled"] is True, 30, "the first Undo retired")
    lab.click(second)  # while the model still streams
    lab.wait_for(lambda: "an agent turn is running" in shown_text(lab, agent), 30, "the refusal")
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    lab.click(second)
    lab.wait_for(lambda: "↶ undone: removed b" in shown_text(lab, agent), 30, "the undo")
    assert lab.run("print('a' in dir(), 'b' in dir())").strip() == "True False"


def _button_ids(lab: LabKernel, parent: str, description: str) -> list[str]:
    """Comm ids of a cell's buttons labelled ``description``, in the order they were opened."""
    found: list[str] = []
    while True:
        try:
            found.append(
                lab.wait_for_button(description, parent=parent, exclude=set(found), timeout=1)
            )
        except TimeoutError:
            return found


@pytest.mark.kernel
def test_a_replay_compares_its_changes_with_the_saved_ones(lab: LabKernel, api: StandInAPI) -> None:
    lab.run("df = pd.DataFrame({'a': range(600)})")
    api.set_script(
        [Reply([tool_use("run_code", {"code": "df = df[df.a > 1]"})]), Reply([text("Dropped.")])]
    )
    first = lab.execute("%%agent\nDrop rows.", cell_id="undo-6")
    lab.click(lab.wait_for_button("Approve", parent=first, timeout=30))
    assert lab.complete(first, 60)["content"]["status"] == "ok"
    record = saved_record(lab, first)
    lab.run("df = pd.DataFrame({'a': range(800)})")
    api.reset()
    again = lab.execute("%%agent\nDrop rows.", cell_id="undo-6", metadata={"qloop": record})
    lab.click(lab.wait_for_button("Approve", parent=again, timeout=30))
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    shown = lab.text(again)
    assert "step 1/1 changed: df: DataFrame 800×1 → 798×1" in shown
    assert (
        "step 1/1: df: DataFrame 600×1 → 598×1 in the saved run, DataFrame 800×1 → 798×1 now"
        in shown
    )
    assert "may be stale" in shown and api.requests == []
    assert "undone: restored df" in lab.run("%agent undo")  # the replayed step, undone
    assert lab.run("print(len(df))").strip() == "800"


def test_the_changes_shown_are_redacted(shell: InteractiveShell) -> None:
    from IPython.utils.capture import capture_output

    from qloop_kernel.notebook.changes import StepViews

    log = UndoLog(shell)
    step = run_step(log, "token = 'sk-ant-api03-abcdefgh12'")
    with capture_output() as captured:
        StepViews(log).show(step, None, interactive=False)
    shown = " ".join(o.data.get("text/plain", "") for o in captured.outputs)
    assert "token: created (str len" in shown and "abcdefgh12" not in shown
