"""Approval decisions (typed values, never bare bools) and the non-interactive approval policies."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:  # the magics import this module at load time: keep it light
    from .messages import ToolCall
    from .tools.risk import Risk

Policy: TypeAlias = Literal["ask", "auto", "readonly", "write", "deny"]
POLICIES: tuple[Policy, ...] = ("ask", "auto", "readonly", "write", "deny")
Verdict: TypeAlias = Literal["run", "ask", "deny"]

# The risk classes (qloop_kernel.tools.risk) each policy runs without asking anyone.
RUNS_WITHOUT_ASKING: dict[Policy, tuple[str, ...]] = {
    "auto": ("read", "write", "compute", "unknown", "destructive", "external"),
    "readonly": ("read",),
    "write": ("read", "write"),
    "ask": (),  # ("read",) with ask_read=False
    "deny": (),
}


@dataclass(frozen=True)
class Approve:
    """Run the call as the model wrote it."""


@dataclass(frozen=True)
class ApproveEdited:
    """Run the call with input the user edited; the model is told what really ran."""

    input: dict[str, Any]


@dataclass(frozen=True)
class Deny:
    reason: str = ""


@dataclass(frozen=True)
class AlwaysAllow:
    """Run this call (with the user's edits, if any) and later calls of the same tool without asking."""

    input: dict[str, Any] | None = None


Decision: TypeAlias = Approve | ApproveEdited | Deny | AlwaysAllow


@dataclass(frozen=True)
class ApprovalRequest:
    call: ToolCall
    title: str
    editable_field: str | None = None  # the input field a user may edit (e.g. "code")
    details: dict[str, Any] = field(default_factory=dict)


class Approver(Protocol):
    """Decides on tool calls that change something. May block (an approval card) or not (a policy)."""

    def decide(self, request: ApprovalRequest) -> Decision: ...


HEADLESS_HINT = (
    "to allow it, re-run with `%%agent --approve auto` or set QLOOP_APPROVAL=auto "
    "(`qloop run --approve auto` for the headless runner)"
)


class AutoApprover:
    """Approves everything: for trusted, unattended runs."""

    def decide(self, request: ApprovalRequest) -> Decision:
        return Approve()


class PolicyDenier:
    """Denies every call that needs approval, saying which policy did and how to allow it."""

    def __init__(self, policy: Policy, hint: str = HEADLESS_HINT) -> None:
        self.policy = policy
        self.hint = hint

    def decide(self, request: ApprovalRequest) -> Decision:
        return Deny(
            f"not run: the approval policy is '{self.policy}', which does not allow "
            f"'{request.call.name}' without a person approving it; {self.hint}"
        )


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
    """The approver for a policy. ``ask`` without an interactive approver behaves as ``readonly``;
    ``write`` asks the interactive approver (when there is one) for every call it is given."""
    if policy == "auto":
        return AutoApprover()
    if policy in ("ask", "write") and interactive is not None:
        return interactive
    if policy == "ask":
        return PolicyDenier(
            "readonly", HEADLESS_HINT + "; no frontend can show approval cards here"
        )
    return PolicyDenier(policy)
