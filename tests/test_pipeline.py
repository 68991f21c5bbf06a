"""The one permission pipeline: policy, then provenance, then grants, then the approver."""

from __future__ import annotations

from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.grants import Grant, Grants
from qloop_kernel.policy.permissions import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Decision,
    Deny,
    ReplayRequest,
    Request,
)
from qloop_kernel.policy.pipeline import RECEIVED_BLOCK, PermissionPipeline, Provenance
from qloop_kernel.policy.risk import Assessment, Risk


class Person:
    """Someone at the card: approves, and remembers what they were shown."""

    def __init__(self) -> None:
        self.asked: list[Request] = []

    def decide(self, request: Request) -> Decision:
        self.asked.append(request)
        return Approve()


def call(risk: Risk, tool: str = "run_code") -> ApprovalRequest:
    assessment = Assessment(risk, (), frozenset())
    return ApprovalRequest(ToolCall("c1", tool, {"code": "x = 1"}), tool, assessment=assessment)


def replay(*risks: Risk) -> ReplayRequest:
    assessments = tuple(Assessment(r, (), frozenset()) for r in risks)
    worst = Assessment(max(risks, key=["read", "write", "compute"].index), (), frozenset())
    return ReplayRequest(
        "Replay", tuple(f"step {i}" for i in range(len(risks))), ("run_code",) * len(risks),
        assessments, assessment=worst,
    )  # fmt: skip


def pipeline(policy: str = "ask", *, interactive: bool = True, grants: Grants | None = None,
             person: Person | None = None) -> PermissionPipeline:  # fmt: skip
    return PermissionPipeline(
        ApprovalPolicy(policy, interactive),  # type: ignore[arg-type]
        grants or Grants(),
        person or Person(),
    )


def test_the_policy_decides_first_then_the_grants_then_the_person() -> None:
    person = Person()
    assert pipeline("write", person=person).decide(call("write")).by == "policy"
    denied = pipeline("readonly", person=person).decide(call("write"))
    assert denied.by == "policy" and isinstance(denied.decision, Deny)
    grants = Grants()
    grants.add(Grant("run_code", "write", "session"))
    granted = pipeline(grants=grants, person=person).decide(call("write"))
    assert granted.by == "grant" and granted.grants[0].tool == "run_code"
    assert person.asked == []
    asked = pipeline(grants=grants, person=person).decide(call("compute"))  # milder grants only
    assert asked.by == "approver" and len(person.asked) == 1


def test_received_steps_are_never_run_by_a_grant_and_headless_only_when_opted_in() -> None:
    grants = Grants()
    grants.add(Grant("run_code", "compute", "session"))
    person = Person()
    received = Provenance(received=True)
    assert pipeline(grants=grants, person=person).decide(replay("read"), received).by == "approver"
    blocked = pipeline("auto", interactive=False).decide(replay("write"), received)
    assert blocked.by == "provenance" and blocked.decision == Deny(RECEIVED_BLOCK)
    opted = Provenance(received=True, opted_in=True)
    assert pipeline("auto", interactive=False).decide(replay("write"), opted).by == "policy"
    assert pipeline("readonly", interactive=False).decide(replay("write"), opted).by == "policy"
    assert isinstance(
        pipeline("readonly", interactive=False).decide(replay("write"), opted).decision, Deny
    )


def test_a_replay_runs_by_grants_only_when_they_cover_every_step() -> None:
    grants = Grants()
    grants.add(Grant("run_code", "write", "session"))
    person = Person()
    assert pipeline(grants=grants, person=person).decide(replay("read", "write")).by == "grant"
    assert pipeline(grants=grants, person=person).decide(replay("read", "compute")).by == "approver"


def test_settle_and_would_ask_decide_nothing_that_needs_a_person() -> None:
    person = Person()
    quiet = pipeline(person=person)
    assert quiet.settle(call("write")) is None and quiet.would_ask(call("write"))
    assert not pipeline("auto").would_ask(call("write"))
    without = PermissionPipeline(ApprovalPolicy("write"), Grants(), None)
    assert without.settle(call("read")) is not None and without.settle(call("compute")) is None
    assert person.asked == []


def test_an_approval_given_ahead_is_an_input_decided_after_the_policy_and_before_grants() -> None:
    person = Person()
    grants = Grants()
    grants.add(Grant("run_code", "write", "session"))
    ahead = Provenance(approved="replay")
    listed = pipeline(grants=grants, person=person).decide(replay("write", "compute"), ahead)
    assert listed.by == "replay" and listed.who == "replay" and listed.decision == Approve()
    covered = pipeline(grants=grants, person=person).decide(call("write"), ahead)
    assert covered.by == "replay" and covered.grants == ()  # the replay's card, not the grant
    assert pipeline("write", person=person).decide(call("read"), ahead).by == "policy"
    denied = pipeline("readonly", person=person).decide(call("compute"), ahead)
    assert denied.by == "policy" and isinstance(denied.decision, Deny)  # never past the policy
    outside = pipeline(person=person).decide(call("compute"), Provenance(approved="outside"))
    assert outside.who == "outside"
    assert not pipeline(person=person).would_ask(call("compute"), ahead)
    assert person.asked == []
    received = Provenance(received=True, approved="replay")  # listed on a card: asked already
    assert pipeline(person=person).decide(replay("write"), received).by == "replay"
    headless = pipeline("auto", interactive=False).decide(replay("write"), received)
    assert headless.by == "provenance"  # a headless run never takes a received record ahead
