"""One decision for a saved step: the policy's verdict first, then the record's provenance."""

from __future__ import annotations

import itertools

import pytest

from qloop_kernel.policy.permissions import POLICIES, policy_verdict
from qloop_kernel.policy.pipeline import combined_verdict
from qloop_kernel.policy.risk import Risk

RISKS: tuple[Risk, ...] = ("read", "write", "compute", "unknown", "destructive", "external")


@pytest.mark.parametrize(
    ("verdict", "received", "interactive", "opted_in", "expected"),
    [
        ("run", False, False, False, "run"),  # your own record, a class the policy runs
        ("deny", False, False, False, "deny"),
        ("ask", False, True, False, "ask"),  # the card (or grants)
        ("run", True, False, False, "received"),  # received, headless, no opt-in: blocked
        ("run", True, False, True, "run"),  # the opt-in lifts only the received block
        ("deny", True, False, True, "deny"),  # ...never the policy's denial
        ("run", True, True, False, "ask"),  # interactive: always the card, even under auto
        ("deny", True, True, False, "deny"),  # a policy that denies the class denies it
    ],
)
def test_policy_then_provenance(
    verdict: str, received: bool, interactive: bool, opted_in: bool, expected: str
) -> None:
    found = combined_verdict(
        verdict,
        received=received,
        interactive=interactive,
        opted_in=opted_in,  # type: ignore[arg-type]
    )
    assert found == expected


def test_a_received_record_never_runs_where_the_policy_would_not_run_your_own() -> None:
    for policy, risk, interactive, opted_in in itertools.product(
        POLICIES, RISKS, (False, True), (False, True)
    ):
        verdict = policy_verdict(policy, risk, interactive=interactive)
        own = combined_verdict(verdict, received=False, interactive=interactive, opted_in=opted_in)
        theirs = combined_verdict(
            verdict, received=True, interactive=interactive, opted_in=opted_in
        )
        if own == "deny":
            assert theirs == "deny", (policy, risk)
        if theirs == "run":
            assert own == "run" and not interactive and opted_in, (policy, risk)
