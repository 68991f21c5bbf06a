"""Replay of a saved agent cell: re-run its approved code steps in order, with no model call.

Replay runs code that is not visible in the cell, so it needs approval like any code: one card listing the
steps when someone can click, the approval policy otherwise. A step that now fails stops the replay; the
saved record is kept unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.display import Markdown, display

from ..messages import ToolCall
from ..permissions import ApprovalRequest, Deny, policy_approver
from ..records import CellRecord
from ..records.text import usage_line
from ..settings import Settings
from ..tools.runtime import ToolFailure
from .cell import AgentError, CellContext, store_for
from .code import CodeRunner

if TYPE_CHECKING:
    from .agent import KernelAgent


def replay(agent: KernelAgent, record: CellRecord, settings: Settings, cell: CellContext) -> None:
    """Replay ``record`` in the agent's kernel and take it into the shared conversation."""
    from .display import line

    steps = record.replay_steps()
    line(f"replaying the saved turn: {len(steps)} code step(s), no model call "
         f"(saved: {usage_line(record)}); run with --fresh to ask the model again")  # fmt: skip
    store = store_for(cell)
    store.publish(record.model_dump(mode="json"), record)  # unchanged: digest and time kept
    if steps and not _approved(agent, record, settings, cell):
        return
    runner = CodeRunner(agent.shell, timeout_s=None)
    for index, step in enumerate(steps, 1):
        line(f"step {index}/{len(steps)}")
        try:
            runner.run_code(str(step.input["code"]))
        except ToolFailure as exc:
            first = str(exc).strip().splitlines()[-1] if str(exc).strip() else "failed"
            raise AgentError(
                f"replay stopped at step {index} of {len(steps)}: {first}. The saved record is "
                "unchanged; re-run the cell with --fresh to ask the model again"
            ) from None
    if not agent.manager.adopt(record):
        line("the saved conversation has unanswered tool calls; later agent cells will not see "
             "this turn", "warn")  # fmt: skip
    if record.answer:
        display(Markdown(record.answer))
    line("replay complete", "ok")


def _approved(
    agent: KernelAgent, record: CellRecord, settings: Settings, cell: CellContext
) -> bool:
    from .approval import CardApprover
    from .display import line

    codes = [str(step.input["code"]) for step in record.replay_steps()]
    request = ApprovalRequest(
        ToolCall("replay", "replay", {"steps": codes}),
        title=f"Replay {len(codes)} saved code step(s)",
        details={"steps": codes},
    )
    policy = agent.policy_for(settings, cell)
    approver = policy_approver(
        policy, CardApprover(allow_always=False) if cell.interactive else None
    )
    decision = approver.decide(request)
    if isinstance(decision, Deny):
        line(f"replay not run: {decision.reason or 'denied'}", "warn")
        return False
    return True
