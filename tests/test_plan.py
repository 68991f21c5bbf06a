"""Plan first in the page: a ``%%agent --plan`` turn shows its plan as a list (the extension's
editable list, text elsewhere); Run plan's ``%%agent --run-plan`` cell carries the edited plan to the
model exactly; Discard (``%agent --discard-plan``) drops it; the run-plan turn's record keeps the plan
proposed and the plan run. Through a real kernel and the scripted stand-in."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.errors import RecordError
from qloop_kernel.notebook.options import valued_flags
from qloop_kernel.notebook.plan import PLAN_MIME, PLAN_TOOLS, plan_steps, plan_text
from qloop_kernel.records import load_record
from qloop_kernel.records.schema import CellRecord, PlanRecord, Timings
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.agent_outputs import saved_record
from tests.test_fix import prompt_of, tools_of

PLAN = "Here is my plan.\n\n1. Drop the rows of df with nulls.\n2) Plot a by index,\n   titled.\nThat is all."


def plan_lists(lab: Any, msg_id: str) -> list[dict[str, Any]]:
    """The plan list outputs of a cell: each its whole display bundle."""
    return [
        m["content"]["data"]
        for m in lab.messages(msg_id, "display_data")
        if PLAN_MIME in m["content"]["data"]
    ]


def test_steps_are_read_from_the_numbered_lines_and_written_back_the_same() -> None:
    steps = plan_steps(PLAN)
    assert steps == ["Drop the rows of df with nulls.", "Plot a by index,\ntitled.\nThat is all."]
    assert plan_text(steps) == (
        "1. Drop the rows of df with nulls.\n2. Plot a by index,\n   titled.\n   That is all."
    )
    assert plan_steps(plan_text(steps)) == steps
    assert plan_steps("Look at df, then plot it.") == ["Look at df, then plot it."]
    assert plan_steps("  \n") == []


def test_the_plan_is_shown_as_a_list_and_the_edited_plan_is_what_the_run_receives(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([
        Reply([tool_use("run_code", {"code": "df = None"})]),  # not offered: refused
        Reply([text(PLAN)]),
        Reply([tool_use("run_code", {"code": "df = df.dropna()"})]),
        Reply([text("done")]),
    ])  # fmt: skip
    lab.run("import pandas as pd\ndf = pd.DataFrame({'a': [1, None]})")
    planned = lab.execute("%%agent --plan --approve auto\nClean df and plot it.", cell_id="plan")
    assert lab.complete(planned, 60)["content"]["status"] == "ok"
    assert "run_code" not in tools_of(api.requests[0]) and tools_of(api.requests[0]) <= PLAN_TOOLS
    assert lab.run("print(len(df))").strip() == "2"  # nothing ran during the plan turn
    [bundle] = plan_lists(lab, planned)
    assert bundle[PLAN_MIME] == {
        "steps": plan_steps(PLAN), "task": "Clean df and plot it.", "cell_id": "plan"
    }  # fmt: skip
    assert "<ol><li>Drop the rows of df with nulls.</li>" in bundle["text/html"]
    assert bundle["text/plain"].startswith("The plan:\n1. Drop the rows of df with nulls.\n2. ")
    # Run plan: the page inserts the edited plan (a step changed, one added) as a cell below.
    edited = "1. Drop the rows of df with nulls in a.\n2. Plot a by index,\n   titled.\n3. Save it."
    ran = lab.execute(f"%%agent --run-plan --approve auto\n{edited}", cell_id="run")
    assert lab.complete(ran, 60)["content"]["status"] == "ok"
    task = prompt_of(api.requests[2])
    assert task == (
        f"Carry out this plan for the task: Clean df and plot it., step by step:\n\n{edited}"
    )
    assert "run_code" in tools_of(api.requests[2])
    assert lab.run("print(len(df))").strip() == "1"  # the run's step ran, under --approve auto
    record = saved_record(lab, ran)
    assert record["plan"] == {
        "task": "Clean df and plot it.", "proposed": plan_text(plan_steps(PLAN)), "run": edited
    }  # fmt: skip
    assert load_record(record).plan == PlanRecord(**record["plan"])
    assert "plan" not in saved_record(lab, planned) or saved_record(lab, planned)["plan"] is None


def test_an_unedited_run_runs_the_kept_plan_and_its_record_says_so(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text(PLAN)]), Reply([text("done")])])
    planned = lab.execute("%%agent --plan --approve auto\nClean df.", cell_id="plan")
    assert lab.complete(planned, 60)["content"]["status"] == "ok"
    ran = lab.execute("%agent --run-plan --approve auto", cell_id="run")
    assert lab.complete(ran, 60)["content"]["status"] == "ok"
    kept = plan_text(plan_steps(PLAN))
    assert prompt_of(api.requests[1]).endswith(f"step by step:\n\n{kept}")
    plan = load_record(saved_record(lab, ran)).plan
    assert plan is not None and plan.run == plan.proposed == kept and not plan.edited


def test_discard_drops_the_plan_and_run_plan_then_says_there_is_none(
    lab: Any, api: StandInAPI
) -> None:
    api.set_script([Reply([text(PLAN)])])
    planned = lab.execute("%%agent --plan --approve auto\nClean df.", cell_id="plan")
    assert lab.complete(planned, 60)["content"]["status"] == "ok"
    discarded = lab.execute("%agent --discard-plan", cell_id="discard")
    assert lab.complete(discarded, 60)["content"]["status"] == "ok"
    assert "the plan was discarded" in lab.text(discarded)
    ran = lab.execute("%agent --run-plan --approve auto", cell_id="run")
    assert lab.complete(ran, 60)["content"]["status"] == "error"
    assert "no plan in this session" in lab.stderr(ran)
    assert len(api.requests) == 1  # neither asked the model
    again = lab.execute("%agent --discard-plan", cell_id="again")
    assert lab.complete(again, 60)["content"]["status"] == "ok"
    assert "no plan to discard" in lab.text(again)
    task = lab.execute("%agent --discard-plan Clean df.", cell_id="task")
    assert lab.complete(task, 60)["content"]["status"] == "error"
    assert "takes no task" in lab.stderr(task)


def test_a_replayed_plan_cell_is_the_sessions_plan_again(lab: Any, api: StandInAPI) -> None:
    api.set_script([Reply([text(PLAN)]), Reply([text("done")])])
    source = "%%agent --plan --approve auto\nClean df."
    planned = lab.execute(source, cell_id="plan")
    assert lab.complete(planned, 60)["content"]["status"] == "ok"
    lab.restart()
    lab.run("%load_ext qloop_kernel")
    saved = saved_record(lab, planned)
    replayed = lab.execute(source, cell_id="plan", metadata={"qloop": saved})
    assert lab.complete(replayed, 60)["content"]["status"] == "ok"
    assert len(api.requests) == 1  # replayed: no model call
    assert [b[PLAN_MIME]["steps"] for b in plan_lists(lab, replayed)] == [plan_steps(PLAN)]
    ran = lab.execute("%agent --run-plan --approve auto", cell_id="run")
    assert lab.complete(ran, 60)["content"]["status"] == "ok"
    assert prompt_of(api.requests[1]).endswith(plan_text(plan_steps(PLAN)))


def _record(**update: Any) -> CellRecord:
    return CellRecord(
        session_id="s", prompt="p", model="m", status="completed",
        timings=Timings(started_at="2026-12-07T00:00:00Z"), **update,
    )  # fmt: skip


def test_records_before_the_plan_field_load_and_a_changed_plan_is_refused() -> None:
    before = _record().to_json()
    before.pop("plan")  # a record written before the field
    assert load_record(before).plan is None
    planned = _record(plan=PlanRecord(task="t", proposed="1. a", run="1. b")).to_json()
    assert load_record(planned).plan == PlanRecord(task="t", proposed="1. a", run="1. b")
    assert load_record(planned).plan.edited  # type: ignore[union-attr]
    changed = {**planned, "plan": {**planned["plan"], "run": "1. a"}}
    with pytest.raises(RecordError, match="digest mismatch"):
        load_record(changed)


ROOT = Path(__file__).resolve().parents[1]


def test_the_page_writes_plans_and_reads_options_as_the_kernel_does() -> None:
    vectors = json.loads((ROOT / "labextension/test/plan-vectors.json").read_text("utf-8"))
    for vector in vectors["texts"]:  # plan.spec.ts checks planText against the same texts
        cleaned = [s for s in ("\n".join(w.strip() for w in v.split("\n") if w.strip())
                               for v in vector["steps"]) if s]  # fmt: skip
        assert plan_text(cleaned) == vector["text"]
        assert plan_steps(vector["text"]) == cleaned
    page = (ROOT / "labextension/src/planfirst.ts").read_text("utf-8")
    listed = re.search(r"VALUED_FLAGS = \[(.*?)\]", page, re.DOTALL)
    assert listed is not None
    assert set(re.findall(r"'(--[a-z-]+)'", listed.group(1))) == valued_flags()
