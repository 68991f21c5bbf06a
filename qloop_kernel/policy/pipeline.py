"""The one permission pipeline: policy, then provenance, then grants, then the approver.

Every step that changes anything is decided here, whatever its source: a tool call the model makes
now (``tools.runtime.ToolRuntime``), a cell proposal on its way to the page, the saved steps of a
replay (``notebook.replay``), which come as a typed :class:`~.permissions.ReplayRequest`, and an
outside agent's call (``server.gate``, which settles the first three stages here and asks the page
itself, asynchronously).

1. The policy gives a verdict on the request's class (run, ask, deny). A request whose tool is held
   to asking (``always_ask``: an MCP tool whose description hides characters) is asked about
   whatever the policy would run, and denied where nobody can be asked.
2. Provenance combines with it, never replacing it (:func:`combined_verdict`): steps received from
   elsewhere are never run by a policy or a grant alone.
3. An approval given ahead runs it (``Provenance.approved``: the replay card that listed the
   steps, or the page's card for an outside client's step); grants the user gave run the request
   without asking when they cover every step of it (never a request held to asking).
4. Otherwise the approver decides (a card, the proposal bar, or a denier when nobody can click).

The admin floor (``admin.py``) combines with the policy at stage 1: a class it holds to asking is
asked about whatever the policy or a grant would run, and denied where nobody can be asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from .admin import AdminFloor, admin_floor
from .permissions import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Approver,
    Decision,
    Deny,
    ReplayRequest,
    Request,
    Verdict,
)

if TYPE_CHECKING:
    from .grants import Grant
    from .risk import Risk

RECEIVED_BLOCK = (
    "the saved record was received from elsewhere (not signed by your kernel); replay it headless "
    "only with `qloop run --replay-received`, or open the notebook in JupyterLab to review its steps"
)

Combined = Literal["run", "ask", "deny", "received"]
HELD_HINT = (
    "no policy or grant runs this tool: approve each call on its card, in JupyterLab or Notebook 7"
)


Ahead = Literal["replay", "outside"]


@dataclass(frozen=True)
class Provenance:
    """Where a request's steps come from.

    ``received``: saved steps this user's kernel did not sign (a notebook from someone else, an
    edited record). ``opted_in``: a headless run was told to run received steps anyway
    (``qloop run --replay-received``), under the policy. ``approved``: an approval given ahead,
    an input the pipeline consults after the policy and provenance, before grants and the approver:
    ``replay`` for the steps a replay card approved (the saved steps of the replay it decided, and
    the replays a Run All card listed), ``outside`` for an outside client's step the Jupyter
    server's policy, grant or card approved. The pipeline says it decided by that approval.
    """

    received: bool = False
    opted_in: bool = False
    approved: Ahead | None = None


LIVE = Provenance()  # a call the model makes now, in this user's session


def combined_verdict(
    verdict: Verdict, *, received: bool, interactive: bool, opted_in: bool
) -> Combined:
    """Policy, then provenance, for a step from any source that did not come from the model now:
    a policy that denies the class denies it; a received one is asked about when someone can click
    (never run by the policy or grants alone) and headless runs only with the opt-in ("received":
    blocked); the user's own runs or is asked about as the policy says."""
    if verdict == "deny":
        return "deny"
    if not received:
        return verdict
    if interactive:
        return "ask"
    return "run" if opted_in else "received"


Decider = Literal["policy", "provenance", "grant", "approver", "admin", "replay", "outside"]


class GrantLookup(Protocol):
    """The grants a pipeline consults: the session's (``grants.Grants``), or an outside client's."""

    def covering(self, tool: str, risk: Risk | None, cell_id: str | None) -> Grant | None: ...


@dataclass(frozen=True)
class Permission:
    """What the pipeline decided, which stage decided it, the grants that covered it, and how long
    the approver took."""

    decision: Decision
    by: Decider
    grants: tuple[Grant, ...] = ()
    waited_s: float = 0.0

    @property
    def who(self) -> str:
        """Who decided, as audit traces name it: ``policy``, ``provenance``, ``grant``, ``admin``,
        ``replay``, ``outside`` or ``person``; an approver that answers for a policy (a headless
        denier) is the policy."""
        if self.by != "approver":
            return self.by
        decision = self.decision
        if isinstance(decision, Deny) and decision.admin is not None:
            return "admin"
        if isinstance(decision, Approve | Deny) and decision.policy is not None:
            return "policy"
        return "person"


@dataclass
class PermissionPipeline:
    """Decides requests for one turn or replay: its policy, the session's grants, its approver."""

    policy: ApprovalPolicy
    grants: GrantLookup
    approver: Approver | None  # None: the caller asks someone itself (see ``settle``)
    cell_id: str | None = None  # the agent cell, for grants scoped to a cell
    clock: Callable[[], float] = time.monotonic
    floor: AdminFloor = field(default_factory=admin_floor)

    def held(self, request: Request) -> str | None:
        """Why the admin floor puts ``request`` to a person whatever the policy and grants say."""
        if isinstance(request, ApprovalRequest):
            return self.floor.held([request.risk])
        return self.floor.held([a.risk if a is not None else None for a in request.assessments])

    def verdict(self, request: Request, provenance: Provenance = LIVE) -> Combined:
        """The policy's verdict on the request's class, combined with its provenance. A replay
        with no step has no class: someone is asked about the conversation it adopts."""
        steps = not isinstance(request, ReplayRequest) or bool(request.codes)
        verdict = self.policy.verdict(request.risk) if steps else "ask"
        if request.always_ask is not None and verdict != "deny":  # held to asking a person
            verdict = "ask" if self.policy.interactive else "deny"
        if verdict == "run" and self.held(request) is not None:
            verdict = "ask" if self.policy.interactive else "deny"
        return combined_verdict(
            verdict,
            received=provenance.received,
            interactive=self.policy.interactive,
            opted_in=provenance.opted_in,
        )

    def covering(self, request: Request) -> tuple[Grant, ...] | None:
        """The grants that cover every step of ``request``, or None where one is not covered (a
        request held to asking is never covered)."""
        if request.always_ask is not None or self.held(request) is not None:
            return None
        if isinstance(request, ApprovalRequest):
            steps = [(request.call.name, request.risk)]
        else:
            steps = [(tool, a.risk if a is not None else None)
                     for tool, a in zip(request.tools, request.assessments, strict=True)]  # fmt: skip
        found = [self.grants.covering(tool, risk, self.cell_id) for tool, risk in steps]
        if not found or any(g is None for g in found):
            return None
        return tuple(g for g in found if g is not None)

    def would_ask(self, request: Request, provenance: Provenance = LIVE) -> bool:
        """Whether deciding ``request`` now would reach the approver. Decides nothing."""
        verdict = self.verdict(request, provenance)
        if verdict != "ask" or provenance.approved is not None:
            return False
        return provenance.received or self.covering(request) is None

    def settle(self, request: Request, provenance: Provenance = LIVE) -> Permission | None:
        """The policy, the provenance and the grants: their decision, or None where someone must
        be asked."""
        verdict = self.verdict(request, provenance)
        held = self.held(request)
        if verdict == "deny" and held is not None and self.policy.verdict(request.risk) != "deny":
            return Permission(
                Deny(f"denied: {held}", self.policy.name, request.risk, held), "admin"
            )
        if verdict == "deny":
            return Permission(self.denial(request), "policy")
        if verdict == "received":
            return Permission(Deny(RECEIVED_BLOCK), "provenance")
        if verdict == "run":
            return Permission(Approve(self.policy.name), "policy")
        if provenance.approved is not None:  # approved ahead, by the replay's or the page's card
            return Permission(Approve(), provenance.approved)
        if not provenance.received:
            grants = self.covering(request)
            if grants is not None:
                return Permission(Approve(), "grant", grants)
        return None

    def denial(self, request: Request) -> Deny:
        """The policy's denial; for a request held to asking that the policy itself would not
        deny, the denial of ``ask`` where nobody can click, with the reason it is held."""
        if request.always_ask is not None and self.policy.verdict(request.risk) != "deny":
            return ApprovalPolicy("ask", interactive=False, hint=HELD_HINT).denial(request)
        return self.policy.denial(request)

    def decide(self, request: Request, provenance: Provenance = LIVE) -> Permission:
        """Decide ``request``: the policy and provenance first, then grants, then the approver."""
        settled = self.settle(request, provenance)
        if settled is not None:
            return settled
        assert self.approver is not None, "a pipeline without an approver only settles"
        held = self.held(request)
        if held is not None:  # the card says why no policy or grant ran it
            notices = [*request.details.get("notices", []), held]
            request = replace(request, details={**request.details, "notices": notices})
            if isinstance(request, ApprovalRequest):  # nor offers a grant, which never runs it
                request = replace(request, always_ask=held)
        asked = self.clock()
        decision = self.approver.decide(request)
        return Permission(decision, "approver", waited_s=self.clock() - asked)
