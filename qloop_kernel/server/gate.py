"""How an outside agent's call that can change anything is decided: policy, grant, then the card.

The same permission pipeline as the in-notebook agent's (:class:`qloop_kernel.policy.pipeline.
PermissionPipeline` settles the policy and the grants, on the class
:func:`qloop_kernel.policy.risk.classify` gives the code): the user's ``QloopMCP.policy`` runs
a class unasked, asks, or refuses it; a grant the user gave this client for this notebook and tool
covers the class it was given for and milder ones; otherwise the notebook's page shows a card and
the call waits for the click, sending progress to the client. Nobody can click when no page shows
the notebook: then every call that would go on a card is refused, whatever its class (the outside
agent fails closed: ``ask`` never runs ``read`` code unasked, as a headless notebook run does).

A grant belongs to the MCP session the server issued the client, not to the name it announced: a
client is shown as it announced itself, marked unverified, until the user approves one of its
calls (and may name it); another session announcing the same name holds nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import TypeAdapter

from ..messages import ToolCall
from ..names import Policy
from ..policy.grants import Grant
from ..policy.permissions import ApprovalPolicy, ApprovalRequest, Deny
from ..policy.pipeline import PermissionPipeline
from ..policy.risk import Assessment, Risk
from ..records.outside_schema import OutsideCellChange
from .broker import Approval, Decision, OutsideBroker

PROGRESS_EVERY_S = 5.0
NO_PAGE_HOW = "refused: no page to approve it"
CONFIG_HINT = (
    "the user's Jupyter config sets what outside agents may run without a click "
    "(c.QloopMCP.policy in jupyter_server_config.py)"
)

Progress = Callable[[float, str], Awaitable[None]]
CELL_CHANGE = TypeAdapter[OutsideCellChange](OutsideCellChange)  # what the page is sent


@dataclass(frozen=True)
class Step:
    """One call to decide: who asks, in which notebook, with what code, of what class."""

    client: str  # the name the user confirmed for the session, else the one it announced
    path: str
    tool: str
    code: str
    assessment: Assessment
    cell: dict[str, Any] | None = None  # a cell change the page applies (see Approval.cell)
    stop: Callable[[], Any] | None = None  # interrupts the kernel (a cell the page runs)
    session: str | None = None  # the MCP session the server issued (None: a sessionless request)
    started: float = field(default_factory=time.time)  # when the call arrived (its trace's start)
    asks: str = ""  # what the card says is asked, where it is not code in this notebook

    @property
    def reasons(self) -> list[str]:
        return [str(r) for r in self.assessment.reasons]


@dataclass(frozen=True)
class Verdict:
    """Run ``code`` (``run``) or refuse; ``how`` says who decided, ``reason`` the user's words;
    ``kind`` and ``by`` say it in the record's and the audit trace's words (decided_by)."""

    run: bool
    how: str
    code: str = ""
    reason: str = ""
    message: str = ""  # why it was refused, for the client
    approval_id: str | None = None  # the card, kept to show the call running
    applied: dict[str, Any] | None = None  # what the page did, for a cell change
    kind: str = "denied"  # approved, edited, denied, auto (policy), always (grant, or a click)
    by: str = "policy"  # policy, grant, admin, person


WriteFile = Callable[["Step"], Awaitable[dict[str, Any]]]


class Gate:
    """Decides outside agents' steps for the Jupyter server; ``write_file`` applies a cell change
    the policy or a grant allows to the saved notebook when no page shows it."""

    def __init__(
        self,
        broker: OutsideBroker,
        policy: Callable[[], Policy],
        write_file: WriteFile | None = None,
    ) -> None:
        self.broker = broker
        self.policy = policy
        self.write_file = write_file

    async def decide(self, step: Step, progress: Progress) -> Verdict:
        policy = self.policy()
        shown = self.broker.shown(step.path)
        grants = _ClientGrants(self.broker, step.session, step.path)
        # Interactive: the policy's own verdict. Where it would ask and no page can, the call is
        # refused below; never the headless 'ask' that runs 'read' code unasked.
        pipeline = PermissionPipeline(ApprovalPolicy(policy, hint=CONFIG_HINT), grants, None)
        request = ApprovalRequest(
            ToolCall(step.tool, step.tool, {"code": step.code}), _title(step),
            assessment=step.assessment,
        )  # fmt: skip
        settled = pipeline.settle(request)  # the page is asked below, without blocking
        if settled is not None and isinstance(settled.decision, Deny):
            message = settled.decision.reason
            return Verdict(False, "refused by the policy", message=message, by=settled.who)
        if settled is None and not shown:
            return Verdict(False, NO_PAGE_HOW, message=self._nobody_to_ask(step))
        if settled is not None and settled.by == "policy":
            how = f"run without asking by the policy '{policy}'"
            allowed = Verdict(True, how, step.code, kind="auto")
        elif settled is not None:
            how = "run by the user's grant for this client"
            allowed = Verdict(True, how, step.code, kind="always", by="grant")
        else:
            return await self._ask(step, progress)
        if step.cell is None:
            return allowed
        if not shown:  # no page applies it: an add or an edit goes into the saved file
            if step.cell.get("op") == "run" or self.write_file is None:
                return Verdict(False, "refused: no page to apply it", message=self._no_page(step))
            applied = await self.write_file(step)
            how = f"{allowed.how}; written into the saved notebook, as no page shows it"
            return replace(allowed, how=how, applied=applied)
        return await self._ask(step, progress, allowed)

    def _nobody_to_ask(self, step: Step) -> str:
        return (
            f"refused: this '{step.assessment.risk}' call needs the user's approval, and no page "
            f"shows {step.path!r}, so nobody can give it. Ask the user to open the notebook in "
            f"JupyterLab or Notebook 7 and call again; {CONFIG_HINT}"
        )

    def _no_page(self, step: Step) -> str:
        return (
            f"refused: no page shows {step.path!r}, and cells are run in the page that shows "
            "the notebook. Ask the user to open it in JupyterLab or Notebook 7 and call again"
        )

    async def _ask(self, step: Step, progress: Progress, allowed: Verdict | None = None) -> Verdict:
        """Show the card and wait for the click; with ``allowed`` (a cell change the policy or a
        grant allows), no card: the page applies the change and answers."""
        approval = Approval(
            id=self.broker.new_id("a"),
            path=step.path,
            client=step.client,
            tool=step.tool,
            title=_title(step),
            code=step.code,
            risk=step.assessment.risk,
            reasons=step.reasons,
            state="waiting" if allowed is None else "apply",
            cell=None if step.cell is None else CELL_CHANGE.validate_python(step.cell),
            editable=(step.cell or {}).get("op") != "run",
            stop=step.stop,
            verified=self.broker.confirmed(step.session) is not None,
            grantable=step.session is not None,
        )
        self.broker.add(approval)
        try:
            decision = await self._wait(approval, step, progress)
        except BaseException:
            self.broker.drop(approval.id)
            raise
        if decision is None:
            self.broker.drop(approval.id)
            if approval.claimed:
                return Verdict(
                    False,
                    "the page closed",
                    message="the page that took this change closed before it reported what it "
                    "did; read_notebook shows the notebook as last saved",
                )
            return Verdict(
                False,
                "refused: the page closed",
                message=f"refused: no page shows {step.path!r} any more, so nobody can approve "
                "this call; it did not run",
            )
        if allowed is not None:
            self.broker.drop(approval.id)
            return replace(allowed, applied=decision.applied)
        return self._verdict(approval, step, decision)

    async def _wait(self, approval: Approval, step: Step, progress: Progress) -> Decision | None:
        started = time.monotonic()
        while True:
            done, _ = await asyncio.wait({approval.decided}, timeout=PROGRESS_EVERY_S)
            if done:
                return approval.decided.result()
            if not self.broker.shown(step.path):
                return None
            waited = time.monotonic() - started
            await progress(waited, f"waiting for the user's approval in {step.path}")

    def _verdict(self, approval: Approval, step: Step, decision: Decision) -> Verdict:
        reason = decision.reason.strip()
        if decision.kind == "deny":
            self.broker.drop(approval.id)
            said = f": {reason}" if reason else ""
            return Verdict(
                False, "denied by the user", reason=reason, message=f"denied by the user{said}",
                by="person",
            )  # fmt: skip
        applied = decision.applied
        if step.session is not None:  # approving a call confirms who holds the session
            self.broker.confirm(step.session, decision.name.strip()[:80] or step.client)
        if step.cell is not None:
            self.broker.drop(approval.id)  # the page applied it: nothing runs here
        if decision.kind == "always" and step.session is not None:
            self.broker.grant(step.session, step.path, step.tool, step.assessment.risk)
            how = "approved by the user, who also allowed later such calls of this client"
            return Verdict(True, how, step.code, reason, approval_id=approval.id, applied=applied,
                           kind="always", by="person")  # fmt: skip
        if decision.kind == "edit" and decision.code is not None and decision.code != step.code:
            return Verdict(
                True,
                "edited by the user",
                decision.code,
                reason,
                approval_id=approval.id,
                applied=applied,
                kind="edited",
                by="person",
            )
        return Verdict(
            True,
            "approved by the user",
            step.code,
            reason,
            approval_id=approval.id,
            applied=applied,
            kind="approved",
            by="person",
        )


def _title(step: Step) -> str:
    """The card's first line: who asks for what."""
    cell = step.cell or {}
    if cell.get("op") == "add":
        return f"{step.client} proposes a new {cell.get('cell_type', 'code')} cell — accept?"
    if cell.get("op") == "edit":
        return f"{step.client} proposes an edit of a cell — accept?"
    if cell.get("op") == "run":
        return f"{step.client} wants to run a cell of this notebook — approve?"
    if step.asks:
        return f"{step.client} wants to {step.asks} — approve?"
    return f"{step.client} wants to run code in this notebook — approve?"


@dataclass(frozen=True)
class _ClientGrants:
    """The grants the user gave one MCP session for one notebook, as the pipeline reads them (a
    request outside any session holds none)."""

    broker: OutsideBroker
    session: str | None
    path: str

    def covering(self, tool: str, risk: Risk | None, cell_id: str | None) -> Grant | None:
        if self.session is None:
            return None
        if self.broker.granted(self.session, self.path, tool, risk or "unknown"):
            return Grant(tool, risk, "session")
        return None
