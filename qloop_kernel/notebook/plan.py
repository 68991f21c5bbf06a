"""Plan first: ``%%agent --plan`` answers with a numbered plan and runs nothing; ``--run-plan`` runs it.

A plan turn is offered the read tools alone (no ``run_code``, no proposals, no MCP tools), so nothing
runs or changes before the user has read the plan. Its record keeps the task and the plan like any
turn's. The session keeps the last plan; ``%agent --run-plan`` starts a turn whose instructions are
that plan, and a ``%%agent --run-plan`` cell one whose instructions are the cell's text (the plan as
the user edited it), each step under the policy and its cards as usual.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from IPython.core.error import UsageError

from .display import line

if TYPE_CHECKING:
    from ..messages import TurnResult

PLAN_TOOLS = frozenset({"list_variables", "inspect_variable", "notebook_history", "read_notebook"})


@dataclass
class Plans:
    """The last plan of the session and the task it is for."""

    task: str | None = None
    plan: str | None = None

    def keep(self, task: str, result: TurnResult) -> None:
        """Keep the plan a completed plan turn answered."""
        if result.status != "completed" or not result.final_text.strip():
            return
        self.task, self.plan = task, result.final_text.strip()
        line("nothing ran. Run this plan with `%agent --run-plan`, or edit it in a "
             "`%%agent --run-plan` cell, whose text is then the plan")  # fmt: skip


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
