"""ToolRuntime: schemas from functions, every failure kind as an is_error result, approval decisions."""

from __future__ import annotations

import logging

from pydantic import BaseModel, Field

from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.permissions import (
    AlwaysAllow,
    Approve,
    ApproveEdited,
    AutoApprover,
    Deny,
    policy_approver,
)
from qloop_kernel.tools.runtime import Tool, ToolInputError, ToolRuntime, truncate


def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


class Query(BaseModel):
    table: str = Field(description="table name")
    limit: int = Field(10, ge=1)


def query(q: Query) -> str:
    """Query a table."""
    return f"{q.table}:{q.limit}"


class Recorder:
    def __init__(self, *decisions):
        self.decisions = list(decisions)
        self.asked = []

    def decide(self, request):
        self.asked.append(request)
        return self.decisions.pop(0)


def call(name, **input):
    return ToolCall(id=f"toolu_{name}", name=name, input=input)


def test_schema_comes_from_hints_and_docstring():
    schema = Tool.from_function(add).schema()
    assert schema["name"] == "add"
    assert schema["description"] == "Add two numbers."
    props = schema["input_schema"]["properties"]
    # No title per property: the property's name says it, and every request carries the schemas.
    assert props["a"] == {"description": "the first number", "type": "integer"}
    assert schema["input_schema"]["required"] == ["a"]


def test_a_parameter_named_title_keeps_its_place_in_the_schema():
    def label(title: str, x: int = 0) -> str:
        """Label a chart.

        Args:
            title: the chart's title
        """
        return title

    schema = Tool.from_function(label).schema()["input_schema"]
    assert schema["properties"] == {
        "title": {"description": "the chart's title", "type": "string"},
        "x": {"default": 0, "type": "integer"},
    }
    assert schema["required"] == ["title"] and "title" not in {
        k for k in schema if k != "properties"
    }


def test_pydantic_model_parameter_is_the_schema():
    tool = Tool.from_function(query, requires_approval=False)
    assert tool.schema()["input_schema"]["properties"]["table"]["description"] == "table name"
    outcome = ToolRuntime.of([tool], AutoApprover()).run(call("query", table="t", limit=3))
    assert outcome.text == "t:3" and not outcome.is_error


def test_unknown_tool_lists_the_tools():
    outcome = ToolRuntime.of([Tool.from_function(add)], AutoApprover()).run(call("nope"))
    assert outcome.is_error
    assert "Unknown tool 'nope'" in outcome.text and "add" in outcome.text


def test_validation_error_names_each_field():
    runtime = ToolRuntime.of([Tool.from_function(add)], AutoApprover())
    outcome = runtime.run(call("add", a="x", c=1))
    assert outcome.is_error
    assert "- a: Input should be a valid integer" in outcome.text
    assert "- c: Extra inputs are not permitted" in outcome.text
    assert "Expected fields: a, b" in outcome.text


def test_exception_becomes_type_message_and_short_traceback():
    def boom(x: int) -> int:
        """Divide."""
        return 1 // x

    outcome = ToolRuntime.of([Tool.from_function(boom)], AutoApprover()).run(call("boom", x=0))
    assert outcome.is_error
    assert outcome.text.startswith("ZeroDivisionError: integer division or modulo by zero")
    assert "Traceback" in outcome.text and "\x1b[" not in outcome.text


def test_tool_input_error_is_told_plainly():
    def picky(x: int) -> int:
        """Picky."""
        raise ToolInputError("x must be even")

    outcome = ToolRuntime.of([Tool.from_function(picky)], AutoApprover()).run(call("picky", x=1))
    assert outcome.is_error and outcome.text == "x must be even"


def test_denial_carries_the_users_reason_and_nothing_runs():
    ran = []

    def act(code: str) -> str:
        """Act."""
        ran.append(code)
        return "done"

    runtime = ToolRuntime.of([Tool.from_function(act)], Recorder(Deny("not on prod data")))
    outcome = runtime.run(call("act", code="drop()"))
    assert ran == []
    assert (
        outcome.is_error and outcome.decision == "denied" and outcome.reason == "not on prod data"
    )
    assert "not on prod data" in outcome.text


def test_edited_input_is_what_runs_and_what_the_model_is_told():
    ran = []

    def act(code: str) -> str:
        """Act."""
        ran.append(code)
        return "done"

    approver = Recorder(ApproveEdited({"code": "safe()"}))
    outcome = ToolRuntime.of([Tool.from_function(act, editable_field="code")], approver).run(
        call("act", code="risky()")
    )
    assert ran == ["safe()"]
    assert outcome.decision == "edited" and outcome.input_as_run == {"code": "safe()"}
    assert "safe()" in outcome.content[0]["text"]
    assert approver.asked[0].editable_field == "code"


def test_invalid_edit_is_a_denial_not_a_crash():
    approver = Recorder(ApproveEdited({"a": "not a number"}))
    outcome = ToolRuntime.of([Tool.from_function(add)], approver).run(call("add", a=1))
    assert outcome.is_error and outcome.decision == "denied"


def test_always_allow_skips_later_approvals_for_that_tool():
    approver = Recorder(AlwaysAllow(), Approve())
    runtime = ToolRuntime.of([Tool.from_function(add)], approver)
    assert runtime.run(call("add", a=1)).decision == "always"
    assert runtime.run(call("add", a=2)).decision == "always"
    assert len(approver.asked) == 1
    assert [(g.tool, g.risk) for g in runtime.grants] == [("add", None)]


def test_read_only_tools_run_without_asking():
    approver = Recorder()
    runtime = ToolRuntime.of([Tool.from_function(add, requires_approval=False)], approver)
    assert runtime.run(call("add", a=1)).decision == "readonly"
    assert approver.asked == []


def test_headless_policy_denies_with_a_hint():
    runtime = ToolRuntime.of([Tool.from_function(add)], policy_approver("ask", None))
    outcome = runtime.run(call("add", a=1))
    assert outcome.is_error and "QLOOP_APPROVAL=auto" in outcome.text


def test_results_are_bounded_with_a_marker():
    def big() -> str:
        """Big."""
        return "x" * 50_000

    runtime = ToolRuntime.of([Tool.from_function(big)], AutoApprover(), max_result_chars=1000)
    text = runtime.run(call("big")).text
    assert len(text) < 1200 and "49,000 characters omitted" in text
    assert truncate("short") == "short"


def test_each_call_is_logged_without_secrets(caplog, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")

    def echo(s: str) -> str:
        """Echo."""
        return s

    runtime = ToolRuntime.of([Tool.from_function(echo)], AutoApprover())
    with caplog.at_level(logging.INFO, logger="qloop.tools"):
        outcome = runtime.run(call("echo", s="tok-1234567890"))
    assert "tok-1234567890" not in caplog.text and "tok-1234567890" not in outcome.text
    assert "tool=echo" in caplog.text and "decision=approved" in caplog.text
    assert "outcome=ok" in caplog.text


def test_would_ask_tells_what_the_approver_would_be_asked_and_decides_nothing():
    from qloop_kernel.policy.grants import Grant
    from qloop_kernel.policy.permissions import ApprovalPolicy

    approver = Recorder()
    runtime = ToolRuntime.of(
        [Tool.from_function(add), Tool.from_function(query, requires_approval=False)], approver
    )
    asked = runtime.would_ask(call("add", a=1))
    assert asked is not None and asked.call.input == {"a": 1} and asked.title == "add"
    assert runtime.would_ask(call("add", a="x")) is None  # invalid: it would fail, not ask
    assert runtime.would_ask(call("query", table="t")) is None  # needs no approval
    assert runtime.would_ask(call("nope")) is None
    runtime.grants.add(Grant("add", None, "session"))
    assert runtime.would_ask(call("add", a=1)) is None  # a grant covers it
    runtime.grants.revoke()
    runtime.policy = ApprovalPolicy("auto")
    assert runtime.would_ask(call("add", a=1)) is None  # the policy runs it
    assert approver.asked == [] and not runtime.grants.covering("add", None, None)
