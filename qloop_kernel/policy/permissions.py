"""Approval decisions (typed values, never bare bools) and the approval policies by risk class."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, TypeAlias

if TYPE_CHECKING:
    from ..messages import ToolCall
    from .grants import Scope
    from .risk import Assessment, Risk

from ..names import POLICIES as POLICIES  # their home is names.py (the load imports only it)
from ..names import Policy as Policy

Verdict: TypeAlias = Literal["run", "ask", "deny"]

# The risk classes (qloop_kernel.policy.risk) each policy runs without asking anyone.
RUNS_WITHOUT_ASKING: dict[Policy, tuple[str, ...]] = {
    "auto": ("read", "write", "compute", "unknown", "destructive", "external"),
    "readonly": ("read",),
    "write": ("read", "write"),
    "ask": (),  # ("read",) with ask_read=False
    "deny": (),
}


@dataclass(frozen=True)
class Approve:
    """Run the call as the model wrote it. ``policy`` names the policy that ran it without asking
    anyone (None: a person approved it)."""

    policy: Policy | None = None


@dataclass(frozen=True)
class ApproveEdited:
    """Run the call with input the user edited; the model is told what really ran."""

    input: dict[str, Any]


@dataclass(frozen=True)
class Deny:
    """Do not run the call. ``reason`` is what the model is told; ``policy`` names the approval
    policy that denied it (None: a person did), with the class it gave the call."""

    reason: str = ""
    policy: Policy | None = None
    risk: Risk | None = None
    admin: str | None = None  # the admin floor's line, when the floor denied it (admin.py)


@dataclass(frozen=True)
class AlwaysAllow:
    """Run this call (with the user's edits, if any) and, in ``scope``, later calls of the same tool
    of the same risk class or a milder one without asking (see :mod:`qloop_kernel.policy.grants`)."""

    input: dict[str, Any] | None = None
    scope: Scope = "session"


Decision: TypeAlias = Approve | ApproveEdited | Deny | AlwaysAllow


@dataclass(frozen=True)
class ApprovalRequest:
    """A call to decide on, with what the card shows about it."""

    call: ToolCall
    title: str
    editable_field: str | None = None  # the input field a user may edit (e.g. "code")
    details: dict[str, Any] = field(default_factory=dict)
    assessment: Assessment | None = None  # the call's risk class and reasons, for classified tools
    # Classifies an edited input the same way (the card shows the class of what would run).
    classify: Callable[[dict[str, Any]], Assessment | None] | None = field(
        default=None, compare=False
    )
    # Why every call of the tool is put to a person (None: the policy and grants apply as usual).
    always_ask: str | None = None

    @property
    def risk(self) -> Risk | None:
        """The call's class; None for a tool whose calls are not classified."""
        return self.assessment.risk if self.assessment is not None else None


@dataclass(frozen=True)
class ReplayRequest:
    """A replay to decide on: the saved steps that run again, each as the card shows it (a queued
    cell's steps under its header), their classes, and the saved messages that join the
    conversation. ``details`` holds the card's notices, as a tool call's request does."""

    title: str
    codes: tuple[str, ...]
    tools: tuple[str, ...]  # each step's tool: grants cover a step by its tool and class
    assessments: tuple[Assessment | None, ...]  # each step's class; None: not classified
    adopted: tuple[dict[str, Any], ...] = ()
    assessment: Assessment | None = None  # the steps' classes as one: the most severe
    details: dict[str, Any] = field(default_factory=dict)
    editable_field: ClassVar[None] = None  # saved steps are approved as saved, never edited
    classify: ClassVar[None] = None
    always_ask: ClassVar[None] = None  # a tool held to asking is never among replayed steps

    @property
    def risk(self) -> Risk | None:
        """The most severe class among the steps."""
        return self.assessment.risk if self.assessment is not None else None


# What the permission pipeline decides: a tool call, or the saved steps of a replay.
Request: TypeAlias = "ApprovalRequest | ReplayRequest"


class Approver(Protocol):
    """Decides on steps that change something. May block (an approval card) or not (a policy)."""

    def decide(self, request: Request) -> Decision: ...


HEADLESS_HINT = (
    "to allow it, re-run with `%%agent --approve auto` or set QLOOP_APPROVAL=auto "
    "(`qloop run --approve auto` for the headless runner)"
)


class AutoApprover:
    """Approves everything: for trusted, unattended runs."""

    def decide(self, request: Request) -> Decision:
        return Approve()


class PolicyDenier:
    """Denies every call it is asked about, saying which policy did, the call's class and how to
    allow it (the approver when a policy would ask but nobody can click)."""

    def __init__(self, policy: Policy, hint: str = HEADLESS_HINT) -> None:
        self.policy = policy
        self.hint = hint

    def decide(self, request: Request) -> Decision:
        return ApprovalPolicy(self.policy, interactive=False, hint=self.hint).denial(request)


@dataclass(frozen=True)
class ApprovalPolicy:
    """A policy as one turn applies it: by risk class, with or without someone to ask.

    The default asks about every call, as a card in a notebook does.
    """

    name: Policy = "ask"
    interactive: bool = True  # someone can click an approval card
    ask_read: bool = True  # with ``ask``: False runs ``read`` steps without asking
    hint: str = HEADLESS_HINT  # how to allow a denied step, told to the model

    def verdict(self, risk: Risk | None) -> Verdict:
        """Run, ask or deny a call of class ``risk`` (a call without a class counts as unknown)."""
        return policy_verdict(
            self.name, risk or "unknown", ask_read=self.ask_read, interactive=self.interactive
        )

    def denial(self, request: Request) -> Deny:
        """The decision when this policy denies ``request``: worded as the policy's, not a person's."""
        risk = request.risk or "unknown"
        reasons = request.assessment.reasons if request.assessment is not None else ()
        text = policy_denial(self.name, risk, reasons, self.hint)
        return Deny(text, policy=self.name, risk=risk)


def denial_line(decision: Deny) -> str:
    """The short sentence a person reads about a denial (the model reads ``decision.reason``)."""
    if decision.admin is not None:
        return f"denied: {decision.admin}"
    if decision.policy is not None:
        return f"{POLICY_DENIAL_PREFIX} '{decision.policy}' (a '{decision.risk or 'unknown'}' step)"
    return f"denied by you: {decision.reason}" if decision.reason else "denied by you"


def policy_verdict(
    policy: Policy, risk: Risk, *, ask_read: bool = True, interactive: bool = True
) -> Verdict:
    """What a policy does with a step of a risk class: run it, ask a person, or deny it.

    ``readonly`` runs ``read`` steps and denies the rest; ``write`` runs ``read`` and ``write``
    steps and asks for the rest; ``ask`` asks for every step (``read`` steps run without asking
    when ``ask_read`` is False); ``auto`` runs everything; ``deny`` denies everything. When nobody
    can be asked (``interactive=False``, a headless run), asking becomes denying and ``ask``
    behaves as ``readonly``.
    """
    if policy == "ask" and not interactive:
        policy = "readonly"
    runs = RUNS_WITHOUT_ASKING[policy]
    if risk in runs or (policy == "ask" and not ask_read and risk == "read"):
        return "run"
    if policy in ("readonly", "deny") or not interactive:
        return "deny"
    return "ask"


def policy_denial(
    policy: Policy, risk: Risk, reasons: Sequence[object] = (), hint: str = HEADLESS_HINT
) -> str:
    """Why a policy denied a step, worded as the policy's decision (never as the user's).

    ``reasons`` are the classifier's findings (shown as "line 3: changes df, which exists").
    """
    found = "; ".join(str(reason) for reason in reasons[:3])
    more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
    why = f" ({found}{more})" if found else ""
    allows = _POLICY_ALLOWS[policy]
    extra = _WRITE_HINT if policy == "readonly" and risk == "write" else ""
    return (
        f"{POLICY_DENIAL_PREFIX} '{policy}': this step is classed '{risk}'{why}, and "
        f"'{policy}' {allows}; {hint}{extra}"
    )


POLICY_DENIAL_PREFIX = "denied by the approval policy"
_POLICY_ALLOWS: dict[Policy, str] = {
    "readonly": "runs only 'read' steps",
    "write": "runs 'read' and 'write' steps and needs a person to approve the rest, "
    "but nobody can approve here",
    "ask": "needs a person to approve it, but nobody can approve here",
    "deny": "runs no step that needs approval",
    "auto": "runs every step",
}
_WRITE_HINT = "; `--approve write` also runs 'write' steps"


def policy_approver(policy: Policy, interactive: Approver | None) -> Approver:
    """Who answers when the permission pipeline asks about a call (:class:`ApprovalPolicy`
    decides when it asks): the interactive approver (the card) whenever there is one (under
    ``auto``, ``readonly`` and ``deny`` only a call held to asking, ``always_ask``, reaches it);
    without one, a denier (``ask`` then behaves as ``readonly``)."""
    if interactive is not None:
        return interactive
    if policy == "auto":
        return AutoApprover()
    if policy == "ask":
        return PolicyDenier(
            "readonly", HEADLESS_HINT + "; no frontend can show approval cards here"
        )
    return PolicyDenier(policy)
