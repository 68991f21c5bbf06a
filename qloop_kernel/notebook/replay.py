"""Replay of a saved agent cell: re-run its approved code steps in order, with no model call.

Replay runs code that is not visible in the cell, so it needs approval like any code. Where the approval
comes from never depends on the notebook's own text (a cell's ``--approve`` option is ignored here):
- a record this user's kernel signed: one card listing the steps when someone can click; otherwise the
  kernel's configured policy (``QLOOP_APPROVAL``, ``c.QloopAgent.approve``);
- a received record (signed by someone else, or not signed): always the card with every step verbatim and
  a "received" notice; headless only with the explicit opt-in ``qloop run --replay-received``.
Taking the saved conversation into the session is part of what is approved. Steps run through the same
ToolRuntime as a turn (log line, code timeout). A step that now fails stops the replay; the saved record
is kept unchanged.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Protocol

from ..conversation import ConversationManager
from ..messages import ToolCall, ToolOutcome
from ..permissions import ApprovalRequest, Approve, Decision, Deny, Policy, policy_approver
from ..records import CellRecord, ToolCallRecord
from ..records.drift import changed_after
from ..records.text import usage_line
from ..settings import Settings
from ..tools.runtime import ToolRuntime
from .cell import AgentError, CellContext, store_for

RECEIVED_OPT_IN = "QLOOP_REPLAY_RECEIVED"  # set by `qloop run --replay-received`, never by a notebook
RECEIVED_NOTICE = (
    "received from elsewhere: this record was not written by your kernel (not signed with your key). "
    "Read every step before you approve."
)


class ReplayHost(Protocol):
    """What replay needs from the kernel agent."""

    manager: ConversationManager
    shell: Any

    def replay_runtime(self) -> ToolRuntime:
        """A runtime with the turn's tools whose approval was given by the replay's own card."""


@dataclass(frozen=True)
class ReplayPlan:
    """What approving a replay means: these steps run, these messages join the conversation."""

    record: CellRecord
    steps: list[ToolCallRecord]
    received: bool
    drift: tuple[str, ...] = ()  # what differs now from when the turn ran

    @property
    def codes(self) -> list[str]:
        return [str(step.input["code"]) for step in self.steps]

    def request(self) -> ApprovalRequest:
        notices = [RECEIVED_NOTICE] if self.received else []
        if self.drift:
            notices.append("changed since the turn ran: " + "; ".join(self.drift))
        if self.record.messages:
            notices.append(
                f"{len(self.record.messages)} saved message(s) will become context for later agent "
                "cells of this kernel"
            )
        title = f"Replay {len(self.steps)} saved code step(s)"
        details = {"steps": self.codes, "notices": notices}
        return ApprovalRequest(ToolCall("replay", "replay", {"steps": self.codes}), title, None, details)


def replay(host: ReplayHost, record: CellRecord, policy: Policy, cell: CellContext) -> None:
    """Replay ``record`` in the kernel and take it into the shared conversation once approved."""
    from .display import line, show_answer

    drift = tuple(drift_before(host.shell, record))
    plan = ReplayPlan(record, record.replay_steps(), not record.is_own(), drift)
    line(f"replaying the saved turn: {len(plan.steps)} code step(s), no model call now "
         f"(the original turn: {usage_line(record)}); run with --fresh to ask the model again")  # fmt: skip
    if drift:
        line("changed since the turn ran: " + "; ".join(drift), "warn")
    host.manager.keep(record, store_for(cell))
    decision = _decide(plan, policy, cell)
    if isinstance(decision, Deny):
        if plan.received and plan.steps and not cell.interactive:
            raise AgentError(f"replay not run: {decision.reason}")
        line(f"replay not run: {decision.reason or 'denied'}", "warn")
        if record.answer:
            show_answer(record.answer, replayed=False)
        return
    differing = _run_steps(host.replay_runtime(), plan)
    differing += changed_after(record.fingerprint, host.shell.user_ns)
    if not host.manager.adopt(record):
        line("the saved conversation cannot be sent to the model again; later agent cells will not "
             "see this turn", "warn")  # fmt: skip
    stale = bool(drift or differing)
    if record.answer:
        if stale:
            line("the saved answer below may be stale: it was written for the original run, and "
                 "this replay differs from it", "warn")  # fmt: skip
        show_answer(record.answer, **({"stale": True} if stale else {}))
    line("replay complete" + (" (may be stale)" if stale else ""), "warn" if stale else "ok")


def drift_before(shell: Any, record: CellRecord) -> list[str]:
    """What differs before a replay: variables read, Python and libraries, edited input cells."""
    from ..records.drift import differences
    from .ledger import cell_ledger

    found = differences(record.fingerprint, shell.user_ns)
    if record.fingerprint is not None:
        ledger = cell_ledger(shell).defined
        for cell in record.fingerprint.cells:
            now = [ledger[n] for n in cell.defines if n in ledger]
            if any(c.cell_id == cell.cell_id and c.sha256 != cell.sha256 for c in now):
                found.append(f"the cell that defines {', '.join(cell.defines[:3])} was edited")
    return found


def _run_steps(runtime: ToolRuntime, plan: ReplayPlan) -> list[str]:
    """Run the steps in order; return how their outputs differ from the saved run."""
    from .display import line

    differing: list[str] = []
    total = len(plan.steps)
    for index, step in enumerate(plan.steps, 1):
        if step.input_redacted:
            raise AgentError(
                f"replay stopped at step {index} of {total}: the step held a secret that was not "
                "saved, so the saved code is not what ran. Re-run the cell with --fresh"
            )
        line(f"step {index}/{total}")
        outcome = runtime.run(ToolCall(step.id, step.name, dict(step.input)))
        if outcome.is_error:
            first = outcome.text.strip().splitlines()[-1] if outcome.text.strip() else "failed"
            raise AgentError(
                f"replay stopped at step {index} of {total}: {first}. The saved record is "
                "unchanged; re-run the cell with --fresh to ask the model again"
            )
        for change in _output_changes(step, outcome):
            line(f"step {index}/{total}: {change}", "warn")
            differing.append(f"step {index}: {change}")
    return differing


def _output_changes(step: ToolCallRecord, outcome: ToolOutcome) -> list[str]:
    from ..records import image_placeholder
    from ..records.drift import output_differences

    images = [image_placeholder(b) for b in outcome.content if b.get("type") == "image"]
    return output_differences(step, outcome.text, [i.sha256 for i in images if i is not None])


def _decide(plan: ReplayPlan, policy: Policy, cell: CellContext) -> Decision:
    """The approval of a replay: the card, the configured policy, or the received-record opt-in."""
    from .approval import CardApprover

    if not plan.steps and not plan.received:
        return Approve()  # nothing runs; the user's own conversation is taken back
    if cell.interactive and (plan.received or policy == "ask"):
        return CardApprover(allow_always=False).decide(plan.request())
    if plan.received and os.environ.get(RECEIVED_OPT_IN) != "1":
        return Deny(
            "the saved record was received from elsewhere (not signed by your kernel); replay it "
            "headless only with `qloop run --replay-received`, or open the notebook in JupyterLab "
            "to review its steps"
        )
    if plan.received:
        return Approve()  # the user opted in on the command line
    return policy_approver(policy, None).decide(plan.request())


def replay_policy(base: Settings, cell: CellContext) -> Policy:
    """The policy for hidden code: the kernel's configuration only, never a cell's options."""
    return base.approve or ("ask" if cell.interactive else "readonly")
