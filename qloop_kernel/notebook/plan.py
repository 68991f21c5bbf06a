"""Plan first: ``%%agent --plan`` answers with a numbered plan and runs nothing; ``--run-plan`` runs it.

A plan turn is offered the read tools alone (no ``run_code``, no proposals, no MCP tools), so nothing
runs or changes before the user has read the plan. Its record keeps the task and the plan like any
turn's. The session keeps the last plan (its numbered steps) and the cell shows it as a list
(``PLAN_MIME``: the extension renders it editable, with Run plan, Edit and Discard; other viewers
show the text/html and text/plain fallbacks). ``%agent --run-plan`` starts a turn whose instructions
are that plan, and a ``%%agent --run-plan`` cell one whose instructions are the cell's text (the plan
as the user edited it: Run plan inserts such a cell below the plan), each step under the policy and
its cards as usual; its record keeps the plan proposed and the plan run. ``%agent --discard-plan``
drops the kept plan.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.display import display

from ..records.schema import PlanRecord
from ..redact import redact_text
from ..visible import as_shown
from .display import line

if TYPE_CHECKING:
    from ..messages import TurnResult
    from ..records.schema import CellRecord

PLAN_TOOLS = frozenset({"list_variables", "inspect_variable", "notebook_history", "read_notebook"})
# The plan list: {"steps": [...], "task": ..., "cell_id": ...}; the extension's plan.ts renders it.
PLAN_MIME = "application/vnd.qloop.plan+json"
PLAN_CLASS = "qloop-plan"
_STEP = re.compile(r"\s*(\d{1,3})[.)]\s+(.*)")
_INDENT = "   "  # a step's further lines, under its text (plan.ts writes them the same way)
RUN_HINT = (
    "nothing ran. Run this plan with `%agent --run-plan`, or edit it in a `%%agent --run-plan` "
    "cell, whose text is then the plan"
)


def plan_steps(text: str) -> list[str]:
    """The numbered steps of a plan: a line ``N. text`` (or ``N) text``) starts a step, the lines
    after it up to the next one belong to it; text before the first step and blank lines are left
    out. A text with no numbered line is one step."""
    steps: list[str] = []
    for raw in text.splitlines():
        found = _STEP.fullmatch(raw)
        if found is not None:
            steps.append(found.group(2).strip())
        elif steps and raw.strip():
            steps[-1] += "\n" + raw.strip()
    if not steps and text.strip():
        return ["\n".join(s.strip() for s in text.strip().splitlines() if s.strip())]
    return steps


def plan_text(steps: list[str]) -> str:
    """The plan as the numbered text a turn receives (``plan_steps`` reads it back)."""
    return "\n".join(
        f"{number}. {step.strip().replace(chr(10), chr(10) + _INDENT)}"
        for number, step in enumerate(steps, 1)
    )


def plan_bundle(steps: list[str], task: str, cell_id: str | None) -> dict[str, Any]:
    """The plan list's display bundle: the extension's editable list, a numbered list elsewhere."""
    items = "".join(
        f"<li>{html.escape(as_shown(step, runs=False)).replace(chr(10), '<br>')}</li>"
        for step in steps
    )
    return {
        PLAN_MIME: {"steps": steps, "task": task, "cell_id": cell_id},
        "text/html": f"<div class='{PLAN_CLASS}'><p>The plan:</p><ol>{items}</ol></div>",
        "text/plain": "The plan:\n" + as_shown(plan_text(steps), runs=False),
    }


@dataclass
class Plans:
    """The last plan of the session (its numbered steps) and the task it is for."""

    task: str | None = None
    plan: str | None = None

    def keep(self, task: str, result: TurnResult, cell_id: str | None = None) -> None:
        """Keep the plan a completed plan turn answered, and show it as a list."""
        if result.status == "completed":
            self.keep_text(task, result.final_text, cell_id)

    def keep_text(self, task: str, answer: str, cell_id: str | None = None) -> None:
        """Keep the plan in ``answer`` (a plan turn's, live or replayed) and show it as a list."""
        steps = plan_steps(redact_text(answer))
        if not steps:
            return
        self.task, self.plan = redact_text(task), plan_text(steps)
        display(plan_bundle(steps, self.task, cell_id), raw=True)
        line(RUN_HINT)

    def discard(self) -> None:
        """Drop the kept plan: ``--run-plan`` without a plan of its own then says there is none."""
        had = self.plan is not None
        self.task = self.plan = None
        line("the plan was discarded" if had else "no plan to discard: none is kept")

    def record(self, prompt: str) -> PlanRecord:
        """What a ``--run-plan`` turn's record keeps: the plan proposed (the one kept) and the
        plan run, as the turn receives it (the cell's text, else the plan kept)."""
        run = prompt.strip() or self.plan or ""
        return PlanRecord(task=self.task or "", proposed=self.plan or "", run=redact_text(run))


class PlannedStore:
    """A RecordStore that keeps a ``--run-plan`` turn's plan (proposed and run) in its records;
    with no plan, the records pass as they are."""

    def __init__(self, inner: Any, plan: PlanRecord | None) -> None:
        self.inner = inner
        self.plan = plan

    def save(self, record: CellRecord) -> None:
        planned = record if self.plan is None else record.model_copy(update={"plan": self.plan})
        self.inner.save(planned)

    def keep(self, record: CellRecord) -> None:
        self.inner.keep(record)


def plan_task(plans: Plans, prompt: str, plan: bool, run_plan: bool) -> str:
    """The turn's task: ``prompt`` as a request for a plan (``plan``), the plan to carry out
    (``run_plan``: ``prompt`` where given, else the last plan), or ``prompt`` itself."""
    if plan and run_plan:
        raise UsageError(
            "%%agent: --plan asks for a plan and --run-plan runs one: give one of them"
        )
    if plan:
        return (
            "Plan first: answer with a numbered plan for the task below, one step a line (what "
            "you will look at, the code you will run and what it changes), and run nothing: only "
            "read tools are offered. The user reads and edits the plan, then runs it.\n\n"
            f"The task: {prompt}"
        )
    if not run_plan:
        return prompt
    steps = prompt.strip() or plans.plan
    if not steps:
        raise UsageError(
            "--run-plan: no plan in this session: run a `%%agent --plan` cell first, or write "
            "the plan in a `%%agent --run-plan` cell"
        )
    task = f" for the task: {plans.task}" if plans.task else ""
    return f"Carry out this plan{task}, step by step:\n\n{steps}"
