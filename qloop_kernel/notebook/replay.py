"""Replay of a saved agent cell: re-run its approved code steps in order, with no model call.

Replay runs code that is not visible in the cell, so it needs approval like any code. Where the approval
comes from never depends on the notebook's own text (a cell's ``--approve`` option is ignored here). The
kernel's configured policy (``QLOOP_APPROVAL``, ``c.QloopAgent.approve``) decides first, for every record;
then the record's provenance, then grants, then the card: the one permission pipeline
(``policy.pipeline``) decides a replay as a typed ``ReplayRequest`` (``_decide``):
- a record this user's kernel signed: runs when the policy runs its class; otherwise one card listing the
  steps when someone can click (or grants that cover every step);
- a received record (signed by someone else, not signed, or edited and re-digested): a policy that denies
  its class denies it; otherwise always the card with every step verbatim and a "received" notice, and
  headless only with the explicit opt-in ``qloop run --replay-received`` (under the policy).
A headless replay that is not run fails the cell (``AgentError``), so a run stops where the notebook's
saved state was not produced, unless ``QLOOP_CONTINUE_ON_DENIED=1`` (``qloop run --continue-on-denied``).
Taking the saved conversation into the session is part of what is approved. Steps run through the same
ToolRuntime as a turn (log line, code timeout). A step that now fails stops the replay; the saved record
is kept unchanged.

Which saved calls replay is a property of their tool (``Tool.replayable``), and each step is classified
the way a turn's step is: the card lists every step's class and reasons, and the policy decides on the
most severe class among the steps (``readonly`` replays a turn of ``read`` steps without a card).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..conversation import ConversationManager
from ..messages import ToolCall, ToolOutcome
from ..policy.grants import Grants
from ..policy.permissions import (
    ApprovalPolicy,
    Approve,
    Decision,
    Deny,
    Policy,
    ReplayRequest,
    Request,
)
from ..policy.pipeline import Permission, PermissionPipeline, Provenance
from ..policy.risk import Assessment, Reason, most_severe
from ..records import CellRecord, RecordError, ToolCallRecord, image_placeholder, load_record
from ..records.drift import changed_after, differences, output_differences
from ..records.schema import REPLAYABLE_DECISIONS
from ..records.text import usage_line
from ..redact import redact_text
from ..settings import Settings
from ..telemetry import ReplayTrace, replay_trace
from ..text import clip, counted
from ..tools.runtime import Tool, ToolRuntime
from ..values.fingerprint import compare_changes
from .approval import CardApprover
from .cell import AgentError, CellContext, store_for
from .changes import variable_changes
from .display import line, show_answer
from .ledger import cell_ledger
from .options import agent_prompt
from .queued import queued_agent_cells
from .undo import StepChanges, UndoLog

if TYPE_CHECKING:
    from .session import KernelSession

RECEIVED_OPT_IN = (
    "QLOOP_REPLAY_RECEIVED"  # set by `qloop run --replay-received`, never by a notebook
)
REPLAY_HINT = (
    "to allow it, set QLOOP_APPROVAL=auto (`qloop run --approve auto` headless); a cell's own "
    "--approve does not apply to saved steps"
)
# A received record that the run may not replay either: every flag it needs, in the first message.
RECEIVED_REPLAY_HINT = (
    "to allow it, run `qloop run --approve auto --replay-received` (QLOOP_APPROVAL=auto and "
    "QLOOP_REPLAY_RECEIVED=1 for other clients): the saved record was received from elsewhere, not "
    "signed by your kernel, so read its steps first with `qloop show`; a cell's own --approve does "
    "not apply to saved steps"
)
# Set by `qloop run --continue-on-denied`: a headless replay that was not run warns instead of failing.
CONTINUE_ON_DENIED = "QLOOP_CONTINUE_ON_DENIED"
RECEIVED_NOTICE = (
    "received from elsewhere: this record was not written by your kernel (not signed with your key). "
    "Read every step before you approve."
)


class ReplayHost(Protocol):
    """What replay needs from the kernel agent."""

    manager: ConversationManager
    session: KernelSession  # the kernel's undo log, cell ledger and steps approved ahead
    shell: Any
    base_settings: Settings  # the kernel's configuration: the policy for hidden code
    grants: Grants  # grants cover the steps of this user's own replays too

    def replay_runtime(self, policy: ApprovalPolicy | None = None) -> ToolRuntime:
        """A runtime with the turn's tools under ``policy``, whose steps the pipeline decides by
        the replay's approval (``Provenance.approved``: ``replay``)."""


@dataclass(frozen=True)
class ReplayPlan:
    """What approving a replay means: these steps run, these messages join the conversation."""

    record: CellRecord
    steps: list[ToolCallRecord]
    received: bool
    drift: tuple[str, ...] = ()  # what differs now from when the turn ran
    shown: tuple[str, ...] = ()  # each step as the card shows it (its code)
    assessments: tuple[Assessment | None, ...] = ()  # each step's class, None for unclassified

    @property
    def codes(self) -> list[str]:
        return list(self.shown) or [str(step.input.get("code", "")) for step in self.steps]

    def assessment(self) -> Assessment:
        """The steps' classes as one: the most severe, with every reason named by its step."""
        reasons: list[Reason] = []
        for index, found in enumerate(self.assessments, 1):
            if found is None:
                reasons.append(StepReason(1, "unknown", "cannot be classified", step=index))
                continue
            reasons += [StepReason(r.line, r.risk, r.text, step=index) for r in found.reasons]
        risks = [a.risk if a is not None else "unknown" for a in self.assessments]
        return Assessment(most_severe(risks), tuple(reasons), None)

    def request(self, later: tuple[ReplayPlan, ...] = ()) -> ReplayRequest:
        """The card's request; ``later``: the saved agent cells queued behind this one, which the
        same approval covers (Run All asks once), each step listed under its cell."""
        notices = [RECEIVED_NOTICE] if self.received else []
        if self.drift:
            notices.append("changed since the turn ran: " + "; ".join(self.drift))
        if self.record.messages:
            notices.append(
                f"{counted(len(self.record.messages), 'saved message')} will become context for later agent "
                "cells of this kernel"
            )
        codes, assessments = list(self.codes), list(self.assessments)
        tools = [step.name for step in self.steps]
        for number, plan in enumerate(later, 2):
            label = " ".join(plan.record.prompt.split())[:60]
            codes += [f"# saved agent cell {number}: {label}\n{code}" for code in plan.codes]
            assessments += plan.assessments
            tools += [step.name for step in plan.steps]
            if plan.received:
                notices.append(f"saved agent cell {number}: {RECEIVED_NOTICE}")
        steps = len(self.steps) + sum(len(plan.steps) for plan in later)
        title = f"Replay {counted(steps, 'saved code step')}"
        if later:
            title += (
                f" of {len(later) + 1} agent cells (this one and the {len(later)} queued after it)"
            )
        adopted = tuple(m for plan in (self, *later) for m in plan.record.messages)
        joined = ReplayPlan(self.record, self.steps, self.received, assessments=tuple(assessments))
        return ReplayRequest(
            title, tuple(codes), tuple(tools), tuple(assessments), adopted,
            assessment=joined.assessment(), details={"notices": notices},
        )  # fmt: skip


@dataclass(frozen=True)
class StepReason(Reason):
    """A reason of one replayed step: "step 2, line 1: changes df, which exists"."""

    step: int = 0

    def __str__(self) -> str:
        return f"step {self.step}, line {self.line}: {self.text}"


def replay_steps(record: CellRecord, tools: dict[str, Tool]) -> list[ToolCallRecord]:
    """The saved calls a replay runs again: calls of tools that replay (``Tool.replayable``), that
    were approved and ran without an error, whose editable input (the code) is text."""
    steps = []
    for call in record.tool_calls:
        tool = tools.get(call.name)
        if tool is None or not tool.replayable:
            continue
        field = tool.editable_field
        shown = field is None or isinstance(call.input.get(field), str)
        if call.decision.kind in REPLAYABLE_DECISIONS and not call.is_error and shown:
            steps.append(call)
    return steps


def plan_for(record: CellRecord, tools: dict[str, Tool], drift: tuple[str, ...]) -> ReplayPlan:
    """What the replay of ``record`` runs, each step as shown and classified now."""
    steps = replay_steps(record, tools)
    shown, assessments = [], []
    for step in steps:
        tool = tools[step.name]
        field = tool.editable_field
        value = step.input.get(field) if field else None
        shown.append(value if isinstance(value, str) else json.dumps(step.input, indent=2))
        assessments.append(tool.assessment(dict(step.input)))
    return ReplayPlan(record, steps, not record.is_own(), drift, tuple(shown), tuple(assessments))


def replay(host: ReplayHost, record: CellRecord, policy: Policy, cell: CellContext) -> None:
    """Replay ``record`` in the kernel and take it into the shared conversation once approved; the
    replay, who decided it and each step it ran are traced where traces are on (telemetry.py)."""
    provider = host.base_settings.provider
    trace = replay_trace(host.manager.session_id, model=record.model, provider=provider,
                         cell_id=cell.cell_id)  # fmt: skip
    with trace:
        _replay(host, record, policy, cell, trace)


def _replay(
    host: ReplayHost, record: CellRecord, policy: Policy, cell: CellContext, trace: ReplayTrace
) -> None:
    drift = tuple(drift_before(host.session, record))
    hint = REPLAY_HINT if record.is_own() or _opted_in() else RECEIVED_REPLAY_HINT
    approval = ApprovalPolicy(policy, cell.interactive, host.base_settings.ask_read, hint)
    runtime = host.replay_runtime(approval)
    plan = plan_for(record, runtime.tools, drift)
    line(f"replaying the saved turn: {counted(len(plan.steps), 'code step')}, no model call now "
         f"(the original turn: {usage_line(record)}); run with --fresh to ask the model again")  # fmt: skip
    if drift:
        line("changed since the turn ran: " + "; ".join(drift), "warn")
    store_for(cell).keep(record)  # shown again unchanged: the store writes it as it was
    permission = _decide(plan, approval, cell, host)
    trace.decided(permission)
    decision = permission.decision
    if isinstance(decision, Deny):
        if plan.steps and not cell.interactive and os.environ.get(CONTINUE_ON_DENIED) != "1":
            # What the notebook says did not happen: the cells after it would run on other state.
            raise AgentError(denied_line(plan, decision, policy))
        line(f"replay not run: {decision.reason or 'denied'}", "warn")
        if record.answer:
            show_answer(record.answer, replayed=False)
        return
    differing = _run_steps(runtime, plan, host.session.undo, trace)
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


def drift_before(session: KernelSession, record: CellRecord) -> list[str]:
    """What differs before a replay: variables read, Python and libraries, edited input cells."""
    found = differences(record.fingerprint, session.shell.user_ns)
    if record.fingerprint is not None:
        ledger = cell_ledger(session).defined
        for cell in record.fingerprint.cells:
            now = [ledger[n] for n in cell.defines if n in ledger]
            if any(c.cell_id == cell.cell_id and c.sha256 != cell.sha256 for c in now):
                found.append(f"the cell that defines {', '.join(cell.defines[:3])} was edited")
    return found


def _run_steps(
    runtime: ToolRuntime, plan: ReplayPlan, log: UndoLog, trace: ReplayTrace
) -> list[str]:
    """Run the steps in order; return how their outputs and changes differ from the saved run."""
    differing: list[str] = []
    total = len(plan.steps)
    for index, step in enumerate(plan.steps, 1):
        if step.input_redacted:
            raise AgentError(
                f"replay stopped at step {index} of {total}: the step held a secret that was not "
                "saved, so the saved code is not what ran. Re-run the cell with --fresh"
            )
        line(f"step {index}/{total}")
        call = ToolCall(step.id, step.name, dict(step.input))
        trace.on_tool_start(call)
        outcome = runtime.run(call)
        trace.on_tool_end(outcome)
        if outcome.is_error:
            raise AgentError(
                f"replay stopped at step {index} of {total}: {error_line(outcome.text)}. The saved record is "
                "unchanged; re-run the cell with --fresh to ask the model again"
            )
        now = log.claim(step.id)  # what the step changed: the last one `%agent undo` undoes
        if now is not None and now.changes:
            line(f"step {index}/{total} changed: " + "; ".join(now.lines()))
        for change in [*_output_changes(step, outcome), *_namespace_changes(step, now)]:
            line(f"step {index}/{total}: {change}", "warn")
            differing.append(f"step {index}: {change}")
    return differing


def error_line(text: str) -> str:
    """The ``Type: message`` line of a failed step's result (not a traceback's source line, not a
    change line after it); its first line when it has no error section."""
    lines = [ln.strip() for ln in text.splitlines()]
    for index in range(len(lines) - 1, -1, -1):
        if lines[index] == "error:" and index + 1 < len(lines) and lines[index + 1]:
            return lines[index + 1]
        if lines[index].startswith("error: "):
            return lines[index].removeprefix("error: ")
    return next((ln for ln in lines if ln), "failed")


def denied_line(plan: ReplayPlan, decision: Deny, policy: Policy) -> str:
    """Which saved step a headless replay did not run and why, with the ways on."""
    index = next(
        (i for i, found in enumerate(plan.assessments, 1)
         if decision.risk is not None and (found.risk if found else "unknown") == decision.risk),
        1,
    )  # fmt: skip
    code = " ".join(plan.codes[index - 1].split())
    shown = clip(code, 60)
    why = decision.reason or f"denied under the policy '{policy}'"
    return (
        f"replay not run: saved step {index} of {len(plan.steps)} (`{shown}`) was not run: {why}. "
        "The cells after this one would run on state the replay never produced; "
        "`qloop run --continue-on-denied` (QLOOP_CONTINUE_ON_DENIED=1) goes on without it"
    )


def _namespace_changes(step: ToolCallRecord, now: StepChanges | None) -> list[str]:
    """How a replayed step's changes differ from the saved run's (none if they were not saved)."""
    if step.changes is None or now is None:
        return []
    return compare_changes(step.changes, variable_changes(now.changes))


def _output_changes(step: ToolCallRecord, outcome: ToolOutcome) -> list[str]:
    images = [image_placeholder(b) for b in outcome.content if b.get("type") == "image"]
    return output_differences(step, outcome.text, [i.sha256 for i in images if i is not None])


def _decide(
    plan: ReplayPlan, policy: ApprovalPolicy, cell: CellContext, host: ReplayHost | None = None
) -> Permission:
    """The approval of a replay, by the one permission pipeline: the policy's verdict on the steps'
    most severe class, combined with the record's provenance, then grants, then the card."""
    if not plan.steps and not plan.received:
        # nothing runs; the user's own conversation is taken back
        return Permission(Approve(), "policy")
    # Digests of saved records whose replay a card approved ahead (Run All), kept by the session:
    # listed on the card of a cell before it in the same Run All, an input to the pipeline.
    ahead = host.session.approved_ahead if host is not None else set()
    listed = cell.interactive and plan.record.digest in ahead
    if listed:
        ahead.discard(plan.record.digest)
    provenance = Provenance(plan.received, _opted_in(), "replay" if listed else None)
    card = _RunAllCard(plan, host, ahead, cell.cell_id)
    grants = host.grants if host is not None else Grants()
    pipeline = PermissionPipeline(policy, grants, card, cell.cell_id)
    permission = pipeline.decide(plan.request(), provenance)
    if permission.by == "grant":
        used = "; ".join(dict.fromkeys(g.describe() for g in permission.grants))
        line(f"replaying without a card: every step is covered by a grant ({used})")
    return permission


def _opted_in() -> bool:
    """Whether this run was told to replay received records (``qloop run --replay-received``)."""
    return os.environ.get(RECEIVED_OPT_IN) == "1"


class _RunAllCard:
    """The approver of a replay: one card for it and the saved agent cells queued behind it (Run
    All asks once); their replays are then approved ahead."""

    def __init__(
        self, plan: ReplayPlan, host: ReplayHost | None, ahead: set[str], cell_id: str | None
    ) -> None:
        self.plan, self.host, self.ahead, self.cell_id = plan, host, ahead, cell_id

    def decide(self, request: Request) -> Decision:
        later = tuple(_queued_plans(self.host)) if self.host is not None else ()
        card = CardApprover(allow_always=False, cell_id=self.cell_id)
        decision = card.decide(self.plan.request(later) if later else request)
        if not isinstance(decision, Deny):
            self.ahead.update(p.record.digest for p in later)
        return decision


def _queued_plans(host: ReplayHost) -> list[ReplayPlan]:
    """The replays of the saved agent cells whose requests wait behind this one."""
    tools = host.replay_runtime().tools
    plans = []
    for queued in queued_agent_cells():
        options, prompt = agent_prompt(queued.code)
        if "--fresh" in options or queued.saved is None:
            continue
        try:
            record = load_record(queued.saved)
        except RecordError:
            continue  # that cell says why when it runs
        same_prompt = record.prompt == redact_text(prompt)
        if same_prompt and record.replayable:
            plans.append(plan_for(record, tools, ()))
    return [p for p in plans if p.steps]


def replay_policy(base: Settings, cell: CellContext) -> Policy:
    """The policy for hidden code: the kernel's configuration only, never a cell's options."""
    return base.approve or ("ask" if cell.interactive else "readonly")
