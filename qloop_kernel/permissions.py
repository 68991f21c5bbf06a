"""Approval decisions (typed values, never bare bools) and the non-interactive approval policies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

if TYPE_CHECKING:  # the magics import this module at load time: keep it light
    from .messages import ToolCall

Policy: TypeAlias = Literal["ask", "auto", "readonly", "deny"]
POLICIES: tuple[Policy, ...] = ("ask", "auto", "readonly", "deny")


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
    """Run this call and every later call of the same tool in this session without asking."""


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


def policy_approver(policy: Policy, interactive: Approver | None) -> Approver:
    """The approver for a policy. ``ask`` without an interactive approver behaves as ``readonly``."""
    if policy == "auto":
        return AutoApprover()
    if policy == "ask" and interactive is not None:
        return interactive
    if policy == "ask":
        return PolicyDenier(
            "readonly", HEADLESS_HINT + "; no frontend can show approval cards here"
        )
    return PolicyDenier(policy)
