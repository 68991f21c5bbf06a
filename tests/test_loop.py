"""QueryLoop: every exit, budget checks before requests, tool-call answering, with a scripted model."""

from __future__ import annotations

import pytest

from qloop_kernel.loop import CancelToken, Limits, QueryLoop, TurnObserver
from qloop_kernel.messages import (
    BudgetExceeded,
    Completed,
    Failed,
    Interrupted,
    MaxTurns,
    ModelError,
    ModelTimeout,
    Refused,
    TimedOut,
    ToolOutcome,
    Usage,
)
from qloop_kernel.policy.permissions import Approve, AutoApprover, Deny
from qloop_kernel.pricing import Price
from qloop_kernel.testing.script import text, thinking, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import Tool, ToolRuntime

USER = [{"role": "user", "content": [{"type": "text", "text": "go"}]}]


class Namespace:
    """A stand-in for the user namespace that records what ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.values: dict[str, object] = {}

    def run_code(self, code: str) -> str:
        """Run Python code.

        Args:
            code: the code to run
        """
        self.ran.append(code)
        exec(code, self.values)  # noqa: S102 - test namespace
        return "ok"

    def peek(self, name: str) -> str:
        """Look at a variable."""
        return repr(self.values.get(name))


def runtime_for(ns: Namespace, approver=None) -> ToolRuntime:
    return ToolRuntime.of(
        [
            Tool.from_function(ns.run_code, requires_approval=True, editable_field="code"),
            Tool.from_function(ns.peek, requires_approval=False),
        ],
        approver or AutoApprover(),
    )


def loop_for(script, ns=None, **kwargs):
    ns = ns or Namespace()
    model = ScriptedModel(list(script))
    runtime = kwargs.pop("runtime", None) or runtime_for(ns, kwargs.pop("approver", None))
    return QueryLoop(model, runtime, system="sys", **kwargs), model, ns


def test_completes_after_tool_round_trip_and_answers_every_call_in_order():
    first, second = tool_use("run_code", {"code": "x = 1"}), tool_use("peek", {"name": "x"})
    loop, model, ns = loop_for([respond(text("working"), first, second), respond(text("x is 1"))])
    result = loop.run(USER)
    assert result.stop == Completed()
    assert result.final_text == "x is 1"
    assert ns.ran == ["x = 1"]
    results = result.messages[2]
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == [first.id, second.id]
    assert results["content"][1]["content"] == "1"
    assert result.model_calls == 2
    assert result.usage == Usage(200, 40)
    assert len(model.requests) == 2
    assert model.requests[1].messages[-1] == results


def test_max_turns_is_an_explicit_exit():
    script = [respond(tool_use("peek", {"name": "x"})) for _ in range(5)]
    loop, model, _ = loop_for(script, limits=Limits(max_turns=3))
    result = loop.run(USER)
    assert result.stop == MaxTurns(3)
    assert len(model.requests) == 3


def test_token_budget_is_checked_before_the_request_that_would_exceed_it():
    big = Usage(input_tokens=600, output_tokens=100)
    script = [respond(tool_use("peek", {"name": "x"}), usage=big) for _ in range(3)]
    loop, model, _ = loop_for(script, limits=Limits(max_tokens=1000))
    result = loop.run(USER)
    assert isinstance(result.stop, BudgetExceeded) and result.stop.what == "tokens"
    assert len(model.requests) == 1  # 700 spent + 600 expected > 1000: no second request


def test_cost_budget_stops_before_a_request_and_counts_all_four_counters():
    usage = Usage(1000, 1000, cache_read_input_tokens=10_000, cache_creation_input_tokens=1000)
    price = Price(3.0, 15.0, 3.75, 0.3)
    script = [respond(tool_use("peek", {"name": "x"}), usage=usage) for _ in range(5)]
    loop, model, _ = loop_for(script, limits=Limits(max_cost_usd=0.05), price=price)
    result = loop.run(USER)
    one_call = (1000 * 3 + 1000 * 15 + 1000 * 3.75 + 10_000 * 0.3) / 1e6
    assert result.cost_usd == pytest.approx(one_call * len(model.requests))
    assert isinstance(result.stop, BudgetExceeded) and result.stop.what == "cost"
    assert result.cost_usd <= 0.05
    assert len(model.requests) == 2


def test_spent_budget_refuses_the_first_request():
    loop, model, _ = loop_for([respond(text("hi"))], limits=Limits(max_tokens=5))
    result = loop.run([{"role": "user", "content": [{"type": "text", "text": "x" * 100}]}])
    assert isinstance(result.stop, BudgetExceeded)
    assert model.requests == []


def test_timeout_excludes_time_waiting_for_approval():
    now = [0.0]

    class SlowApprover:
        def decide(self, request):
            now[0] += 100.0  # a person thinking for 100 s
            return Approve()

    def clock() -> float:
        return now[0]

    ns = Namespace()
    runtime = runtime_for(ns, SlowApprover())
    runtime.clock = clock
    script = [respond(tool_use("run_code", {"code": "a = 1"})), respond(text("done"))]
    loop, _, _ = loop_for(script, ns, runtime=runtime, limits=Limits(timeout_s=10), clock=clock)
    result = loop.run(USER)
    assert result.stop == Completed()
    assert result.approval_wait_s == pytest.approx(100.0)


def test_timeout_when_tools_run_too_long():
    now = [0.0]
    ns = Namespace()

    def slow(code: str) -> str:
        """Run code."""
        now[0] += 20.0
        return "done"

    runtime = ToolRuntime.of([Tool.from_function(slow, name="run_code")], AutoApprover())
    script = [respond(tool_use("run_code", {"code": "1"})), respond(text("never"))]
    loop, model, _ = loop_for(
        script, ns, runtime=runtime, limits=Limits(timeout_s=10), clock=lambda: now[0]
    )
    result = loop.run(USER)
    assert result.stop == TimedOut(10)
    assert len(model.requests) == 1


def test_model_timeout_becomes_timeout_status():
    loop, _, _ = loop_for([ModelTimeout("slow")], limits=Limits(timeout_s=1))
    assert loop.run(USER).stop == TimedOut(1)


def test_fatal_model_error_carries_the_api_message():
    loop, _, _ = loop_for([ModelError("API error 401 (authentication_error): invalid key")])
    result = loop.run(USER)
    assert result.stop == Failed("API error 401 (authentication_error): invalid key")
    assert result.messages == USER


def test_refusal_never_runs_its_tool_calls():
    loop, _, ns = loop_for(
        [respond(text("no"), tool_use("run_code", {"code": "x = 1"}), stop_reason="refusal")]
    )
    result = loop.run(USER)
    assert result.stop == Refused()
    assert ns.ran == []
    assert result.messages == []  # the refused exchange, prompt included, leaves the conversation


def test_pause_turn_continues_the_turn():
    loop, model, _ = loop_for(
        [respond(text("part"), stop_reason="pause_turn"), respond(text("end"))]
    )
    result = loop.run(USER)
    assert result.stop == Completed()
    assert model.requests[1].messages[-1]["content"] == [{"type": "text", "text": "part"}]


def test_cut_tool_call_at_max_tokens_is_not_run_and_the_model_is_told():
    cut = tool_use("run_code", {"code": "x = "})
    script = [respond(text("writing"), cut, stop_reason="max_tokens"), respond(text("ok"))]
    loop, model, ns = loop_for(script)
    result = loop.run(USER)
    assert result.stop == Completed()
    assert ns.ran == []
    assistant = result.messages[1]
    assert all(b["type"] != "tool_use" for b in assistant["content"])
    note = model.requests[1].messages[-1]["content"][0]["text"]
    assert "not run" in note and "run_code" in note


def test_complete_calls_before_a_cut_one_still_run():
    done, cut = tool_use("run_code", {"code": "y = 2"}), tool_use("run_code", {"code": "z ="})
    script = [respond(done, cut, stop_reason="max_tokens"), respond(text("ok"))]
    loop, _, ns = loop_for(script)
    result = loop.run(USER)
    assert ns.ran == ["y = 2"]
    content = result.messages[2]["content"]
    assert content[0]["tool_use_id"] == done.id and content[1]["type"] == "text"


def test_two_cut_tool_calls_in_a_row_end_with_a_clear_error():
    script = [respond(tool_use("run_code", {"code": "x"}), stop_reason="max_tokens")] * 2
    loop, _, ns = loop_for(script)
    result = loop.run(USER)
    assert isinstance(result.stop, Failed) and "max_output_tokens" in result.stop.message
    assert ns.ran == []


def test_context_window_exceeded_says_what_to_do():
    loop, _, _ = loop_for([respond(text(""), stop_reason="model_context_window_exceeded")])
    result = loop.run(USER)
    assert isinstance(result.stop, Failed) and "--new" in result.stop.message


def test_missing_stop_reason_is_an_error_not_a_silent_stop():
    loop, _, _ = loop_for([respond(text("half"), stop_reason=None)])
    assert isinstance(loop.run(USER).stop, Failed)


def test_cancel_between_tool_calls_answers_the_rest_as_not_run():
    cancel = CancelToken()
    a, b = tool_use("run_code", {"code": "a = 1"}), tool_use("run_code", {"code": "b = 2"})

    class StopAfterFirst(TurnObserver):
        def on_tool_end(self, outcome: ToolOutcome) -> None:
            cancel.cancel()

    loop, model, ns = loop_for([respond(a, b)], cancel=cancel, observer=StopAfterFirst())
    result = loop.run(USER)
    assert result.stop == Interrupted("stop")
    assert ns.ran == ["a = 1"]
    answers = result.messages[-1]["content"]
    assert [x["tool_use_id"] for x in answers] == [a.id, b.id]
    assert answers[1]["is_error"] is True and "interrupted" in str(answers[1]["content"])
    assert [(o.call.id, o.decision) for o in result.outcomes] == [
        (a.id, "approved"),
        (b.id, "denied"),
    ]


def test_keyboard_interrupt_during_a_tool_keeps_what_finished():
    ns = Namespace()

    def explode(code: str) -> str:
        """Run code."""
        if code == "boom":
            raise KeyboardInterrupt
        return ns.run_code(code)

    runtime = ToolRuntime.of([Tool.from_function(explode, name="run_code")], AutoApprover())
    calls = [tool_use("run_code", {"code": "a = 1"}), tool_use("run_code", {"code": "boom"})]
    loop, _, _ = loop_for([respond(*calls)], ns, runtime=runtime)
    result = loop.run(USER)
    assert result.stop == Interrupted("keyboard")
    assert ns.ran == ["a = 1"]
    answers = result.messages[-1]["content"]
    assert answers[0].get("is_error") is None and answers[1]["is_error"] is True


def test_keyboard_interrupt_while_the_model_streams():
    def interrupt(request, cancel):
        raise KeyboardInterrupt

    loop, model, _ = loop_for([respond(text("never"))])
    model.on_request = interrupt
    result = loop.run(USER)
    assert result.stop == Interrupted("keyboard")
    assert result.messages == USER


def test_denial_reason_reaches_the_model_and_the_turn_goes_on():
    loop, model, ns = loop_for(
        [respond(tool_use("run_code", {"code": "rm()"})), respond(text("understood"))],
        approver=type("D", (), {"decide": lambda self, r: Deny("too risky")})(),
    )
    result = loop.run(USER)
    assert result.stop == Completed()
    assert ns.ran == []
    sent = model.requests[1].messages[-1]["content"][0]
    assert sent["is_error"] is True and "too risky" in sent["content"]


def test_thinking_is_kept_and_forwarded():
    events = []

    class Watch(TurnObserver):
        def on_event(self, event):
            events.append(event.kind)

    loop, _, _ = loop_for([respond(thinking("hmm"), text("hi"))], observer=Watch())
    result = loop.run(USER)
    assert result.messages[-1]["content"][0]["type"] == "thinking"
    assert events[:2] == ["thinking", "text"]
