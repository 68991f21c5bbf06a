"""Permission by risk class, grants and their scopes, in the ToolRuntime (no kernel).

A small ``run_code`` runs Python in a dict namespace and is classified with the real classifier, as
the notebook's is; what ran is told by the namespace, never by the decision alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.grants import (
    Grant,
    Grants,
    NotebookGrants,
    covered_classes,
    covers,
    open_notebook_grants,
    seal_notebook_grants,
)
from qloop_kernel.policy.permissions import (
    POLICY_DENIAL_PREFIX,
    AlwaysAllow,
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    ApproveEdited,
    Decision,
    Deny,
    PolicyDenier,
    denial_line,
    policy_approver,
)
from qloop_kernel.policy.risk import RISKS, classify
from qloop_kernel.records import signing
from qloop_kernel.tools.runtime import Tool, ToolRuntime

# One step of each class, each leaving a mark in the namespace when it runs.
STEPS = {
    "read": "probe.head()",
    "write": "made = 1",
    "compute": "probe.compute()",
    "unknown": "helper()",
    "destructive": "del victim",
    "external": "import os\nos.environ['QLOOP_TEST_MARK'] = '1'",
}


@pytest.fixture(autouse=True)
def _no_mark_left() -> Iterator[None]:
    yield
    os.environ.pop("QLOOP_TEST_MARK", None)  # the external step's mark, where a test did not read it


class Probe:
    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    def head(self) -> None:
        self.ran.append("read")

    def compute(self) -> None:
        self.ran.append("compute")


class Notebook:
    """A namespace with the objects the steps use, and a run_code tool bound to it."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.ns: dict[str, Any] = {
            "probe": Probe(self.ran),
            "helper": lambda: self.ran.append("unknown"),
            "victim": 1,
        }

    def run_code(self, code: str) -> str:
        """Run code.

        Args:
            code: Python source.
        """
        exec(code, self.ns)
        return "ok"

    def assess(self, input: dict[str, Any]) -> Any:
        return classify(str(input["code"]), frozenset(self.ns))

    def tool(self) -> Tool:
        return Tool.from_function(
            self.run_code, name="run_code", editable_field="code", classify=self.assess
        )

    def what_ran(self) -> set[str]:
        marks = set(self.ran)
        if "made" in self.ns:
            marks.add("write")
        if "victim" not in self.ns:
            marks.add("destructive")
        if self.ns.get("os") is not None and self.ns["os"].environ.pop("QLOOP_TEST_MARK", None):
            marks.add("external")
        return marks


class Recorder:
    """An approver that answers from a list and records what it was asked."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else Deny("no more answers")


def call(code: str, n: int = 1) -> ToolCall:
    return ToolCall(f"toolu_{n}", "run_code", {"code": code})


def runtime(
    notebook: Notebook, approver: Any, policy: ApprovalPolicy, **kwargs: Any
) -> ToolRuntime:
    return ToolRuntime.of([notebook.tool()], approver, policy=policy, **kwargs)


def test_the_steps_are_of_the_classes_they_are_named_for() -> None:
    notebook = Notebook()
    for risk, code in STEPS.items():
        assert notebook.assess({"code": code}).risk == risk, code


@pytest.mark.parametrize(
    ("policy", "interactive", "ran", "asked"),
    [
        ("readonly", False, {"read"}, set()),
        ("readonly", True, {"read"}, set()),
        ("write", False, {"read", "write"}, set()),
        ("write", True, set(RISKS), {"compute", "unknown", "destructive", "external"}),
        ("ask", False, {"read"}, set()),
        ("ask", True, set(RISKS), set(RISKS)),
        ("auto", False, set(RISKS), set()),
        ("deny", True, set(), set()),
    ],
)
def test_each_policy_runs_asks_or_denies_by_class(
    policy: Any, interactive: bool, ran: set[str], asked: set[str]
) -> None:
    notebook = Notebook()
    approver = Recorder(*[Approve()] * 6)
    tools = runtime(notebook, approver, ApprovalPolicy(policy, interactive))
    outcomes = {risk: tools.run(call(code)) for risk, code in STEPS.items()}
    assert notebook.what_ran() == ran
    assert {r.risk for r in approver.asked} == asked
    for risk, outcome in outcomes.items():
        if risk not in ran:
            assert outcome.is_error and outcome.decision == "denied"
            assert outcome.text.startswith(f"Not run: {POLICY_DENIAL_PREFIX} '{policy}'")
            assert "user" not in outcome.text.splitlines()[0]
        elif risk not in asked:
            assert outcome.decision == "auto" and not outcome.is_error


def test_ask_can_run_read_steps_without_asking() -> None:
    notebook = Notebook()
    approver = Recorder(Approve())
    tools = runtime(notebook, approver, ApprovalPolicy("ask", ask_read=False))
    assert tools.run(call(STEPS["read"])).decision == "auto"
    assert tools.run(call(STEPS["write"])).decision == "approved"
    assert [r.risk for r in approver.asked] == ["write"]
    assert notebook.what_ran() == {"read", "write"}


def test_a_policy_denial_is_short_for_people_and_complete_for_the_model() -> None:
    notebook = Notebook()
    tools = runtime(notebook, Recorder(), ApprovalPolicy("readonly", interactive=False))
    outcome = tools.run(call("victim = 2\nmade = 3"))
    first, *rest = outcome.text.splitlines()
    assert first == "Not run: denied by the approval policy 'readonly' (a 'destructive' step)."
    assert outcome.reason == "denied by the approval policy 'readonly' (a 'destructive' step)"
    detail = "\n".join(rest)
    assert "line 1: overwrites victim" in detail and "line 2: creates made" in detail
    assert "QLOOP_APPROVAL=auto" in detail and "The user" not in outcome.text
    assert notebook.ns["victim"] == 1 and "made" not in notebook.ns


def test_a_users_denial_keeps_their_reason() -> None:
    notebook = Notebook()
    tools = runtime(notebook, Recorder(Deny("not on shared data")), ApprovalPolicy())
    outcome = tools.run(call(STEPS["write"]))
    assert outcome.text.splitlines()[0] == "The user denied this call: not on shared data"
    assert outcome.reason == "not on shared data" and "made" not in notebook.ns
    assert denial_line(Deny("x")) == "denied by you: x"
    assert denial_line(Deny("long", "write", "external")).endswith("'write' (a 'external' step)")


def test_the_request_carries_the_class_and_reasons_of_the_code() -> None:
    notebook = Notebook()
    approver = Recorder(Deny())
    runtime(notebook, approver, ApprovalPolicy()).run(call("victim = 2"))
    [request] = approver.asked
    assert request.risk == "destructive"
    assert [str(r) for r in request.assessment.reasons] == [
        "line 1: overwrites victim, which exists"
    ]
    assert request.classify is not None
    assert request.classify({"code": "len(victim)"}).risk == "read"


def test_always_allow_grants_the_class_and_milder_ones_never_destructive_or_external() -> None:
    notebook = Notebook()
    approver = Recorder(AlwaysAllow(), Approve(), Approve())
    tools = runtime(notebook, approver, ApprovalPolicy())
    assert tools.run(call("made = 1", 1)).decision == "always"
    assert tools.run(call("more = 2", 2)).decision == "always"
    assert tools.run(call("probe.head()", 3)).decision == "always"
    assert tools.run(call("del victim", 4)).decision == "approved"
    assert tools.run(call(STEPS["external"], 5)).decision == "approved"
    assert [r.risk for r in approver.asked] == ["write", "destructive", "external"]
    assert [(g.tool, g.risk, g.scope) for g in tools.grants] == [("run_code", "write", "session")]


def test_a_cell_grant_applies_in_its_cell_only() -> None:
    notebook = Notebook()
    grants = Grants()
    approver = Recorder(AlwaysAllow(scope="cell"), Approve())
    first = runtime(notebook, approver, ApprovalPolicy(), grants=grants, cell_id="cell-a")
    assert first.run(call("a = 1")).decision == "always"
    assert first.run(call("b = 1")).decision == "always"
    other = runtime(notebook, approver, ApprovalPolicy(), grants=grants, cell_id="cell-b")
    assert other.run(call("c = 1")).decision == "approved"
    assert len(approver.asked) == 2
    assert [g.cell_id for g in grants] == ["cell-a"]


def test_always_allow_after_an_edit_runs_the_edit_and_grants_its_class() -> None:
    notebook = Notebook()
    edited = {"code": "title = 'EDITED'"}
    approver = Recorder(AlwaysAllow(edited), Approve())
    tools = runtime(notebook, approver, ApprovalPolicy())
    outcome = tools.run(call("import os\nos.remove('x')"))
    assert notebook.ns["title"] == "EDITED"
    assert outcome.decision == "edited" and outcome.input_as_run == edited
    assert outcome.content[0]["text"].startswith("Note: the user edited the input")
    assert "title = 'EDITED'" in outcome.content[0]["text"]
    assert [(g.risk) for g in tools.grants] == ["write"]  # the edit's class, not the model's
    assert tools.run(call("again = 1", 2)).decision == "always"


def test_a_policy_denial_wins_over_a_grant() -> None:
    notebook = Notebook()
    grants = Grants()
    grants.add(Grant("run_code", "write", "session"))
    tools = runtime(notebook, Recorder(), ApprovalPolicy("readonly"), grants=grants)
    assert tools.run(call("made = 1")).decision == "denied"
    assert "made" not in notebook.ns


def test_unclassified_tools_count_as_unknown_and_grants_cover_every_call() -> None:
    ran = []

    def drop(table: str) -> str:
        """Drop a table.

        Args:
            table: its name
        """
        ran.append(table)
        return "dropped"

    tool = Tool.from_function(drop)
    denied = ToolRuntime.of([tool], Recorder(), policy=ApprovalPolicy("write", interactive=False))
    assert "(a 'unknown' step)" in denied.run(ToolCall("t", "drop", {"table": "a"})).text
    approver = Recorder(AlwaysAllow())
    tools = ToolRuntime.of([tool], approver)
    tools.run(ToolCall("t1", "drop", {"table": "a"}))
    tools.run(ToolCall("t2", "drop", {"table": "b"}))
    assert ran == ["a", "b"] and len(approver.asked) == 1
    assert [g.risk for g in tools.grants] == [None]


def test_the_coverage_of_a_grant() -> None:
    assert covered_classes("write") == ("read", "write")
    assert covered_classes("unknown") == ("read", "write", "compute", "unknown")
    assert covered_classes("destructive") == ("read", "write", "compute", "unknown", "destructive")
    assert covered_classes("external") == ("read", "write", "compute", "unknown", "external")
    assert not covers("external", "destructive") and not covers("destructive", "external")
    assert covers(None, "external") and not covers("write", None)
    assert Grant("run_code", "write", "session").what() == "run_code 'read' and 'write' steps"
    assert Grant("drop", None, "notebook").describe() == "drop calls, this notebook"


def test_grants_revoke_reset_and_replace_what_they_make_redundant() -> None:
    grants = Grants()
    saved: list[tuple[Grant, ...]] = []
    grants.on_notebook_change = saved.append
    grants.add(Grant("run_code", "read", "session"))
    grants.add(Grant("run_code", "write", "session"))  # covers 'read': replaces it
    grants.add(Grant("run_code", "write", "notebook"))
    grants.add(Grant("drop", None, "cell", "c1"))
    assert [(g.tool, g.risk, g.scope) for g in grants] == [
        ("run_code", "write", "session"),
        ("run_code", "write", "notebook"),
        ("drop", None, "cell"),
    ]
    assert len(saved) == 1 and saved[-1][0].scope == "notebook"
    assert [g.scope for g in grants.clear_session()] == ["session", "cell"]
    assert [g.scope for g in grants] == ["notebook"]
    assert [g.tool for g in grants.revoke("run_code")] == ["run_code"]
    assert saved[-1] == () and len(grants) == 0
    assert "granted_at" in grants.add(Grant("x", None, "session")).to_json()


def test_notebook_grants_apply_only_signed_by_this_user_for_this_notebook(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    grants = [Grant("run_code", "write", "notebook", granted_at="2026-12-01T10:00:00Z")]
    sealed = seal_notebook_grants(grants, "work/analysis.ipynb")
    opened = open_notebook_grants(sealed, "work/analysis.ipynb")
    assert opened.own and [(g.tool, g.risk) for g in opened.grants] == [("run_code", "write")]
    moved = open_notebook_grants(sealed, "elsewhere.ipynb")
    assert not moved.own and moved.received and "not saved by your kernel" in moved.problem
    edited = {**sealed, "grants": [{"tool": "run_code", "risk": "external"}]}
    assert not open_notebook_grants(edited, "work/analysis.ipynb").own
    monkeypatch.setenv(signing.KEY_FILE_ENV, str(tmp_path / "someone_else"))
    assert not open_notebook_grants(sealed, "work/analysis.ipynb").own
    assert open_notebook_grants(None, "x") == NotebookGrants()
    assert not open_notebook_grants({"version": 9}, "x").own
    assert not open_notebook_grants("junk", "x").own


def test_received_notebook_grants_never_apply_and_revoke_removes_them() -> None:
    grants = Grants()
    saved: list[tuple[Grant, ...]] = []
    grants.on_notebook_change = saved.append
    received = NotebookGrants((Grant("run_code", "write", "notebook"),), own=False)
    grants.load_notebook(received)
    assert len(grants) == 0 and grants.covering("run_code", "write", None) is None
    assert grants.revoke() == list(received.grants)
    assert saved == [()] and grants.notebook.received == ()


def test_the_denier_of_a_headless_policy_names_the_policy() -> None:
    denier = policy_approver("ask", None)
    assert isinstance(denier, PolicyDenier)
    decision = denier.decide(ApprovalRequest(call("x = 1"), "run_code"))
    assert isinstance(decision, Deny) and decision.policy == "readonly"
    assert decision.reason.startswith("denied by the approval policy 'readonly'")
    assert ApproveEdited({"code": "x"}) != Approve()
