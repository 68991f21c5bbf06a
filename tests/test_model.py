"""The Anthropic client with the real SDK against the loopback stand-in: streaming, caching, faults."""

from __future__ import annotations

import time

import pytest

from qloop_kernel.loop import CancelToken, Limits, QueryLoop
from qloop_kernel.messages import Completed, Failed, ModelRequest, TimedOut
from qloop_kernel.model import AnthropicModel, RetryPolicy
from qloop_kernel.permissions import AutoApprover
from qloop_kernel.testing import (
    DropConnection,
    EarlyClose,
    Fault,
    Reply,
    StandInAPI,
    StreamError,
    text,
    thinking,
    tool_use,
)
from qloop_kernel.tools.runtime import Tool, ToolRuntime

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=5.0, read_timeout_s=5.0)
USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


@pytest.fixture
def api(monkeypatch):
    with StandInAPI(api_key="test-key") as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server


def client(retry: RetryPolicy = FAST) -> AnthropicModel:
    return AnthropicModel("claude-sonnet-4-6", retry=retry, strict=True)


def request(deadline: float | None = None) -> ModelRequest:
    return ModelRequest(USER, [], "system prompt", 1024, deadline)


def complete(model: AnthropicModel, deadline: float | None = None):
    events = []
    response = model.complete(request(deadline), events.append, CancelToken())
    return response, events


def test_streams_text_thinking_and_tool_calls(api: StandInAPI) -> None:
    call = tool_use("run_code", {"code": "x = 1"})
    api.set_script([Reply([thinking("hmm"), text("Let me run it."), call])])
    response, events = complete(client())
    assert response.stop_reason == "tool_use"
    assert [b["type"] for b in response.content] == ["thinking", "text", "tool_use"]
    assert response.content[2] == {"type": "tool_use", "id": call.id, "name": "run_code",
                                   "input": {"code": "x = 1"}}  # fmt: skip
    kinds = [e.kind for e in events]
    assert "thinking" in kinds and "text" in kinds and kinds.count("tool_call") == 1
    assert api.requests[0].headers["authorization"] != "Bearer test-key"  # redacted in the log


def test_cache_breakpoints_make_later_turns_read_from_cache(api: StandInAPI) -> None:
    def run_code(code: str) -> str:
        """Run code."""
        return "ok " + "x" * 2000

    runtime = ToolRuntime.of([Tool.from_function(run_code)], AutoApprover())
    api.set_script([Reply([tool_use("run_code", {"code": str(i)})]) for i in range(4)]
                   + [Reply([text("done")])])  # fmt: skip
    result = QueryLoop(client(), runtime, system="s" * 4000).run(USER)
    assert result.stop == Completed()
    body = api.requests[1].body
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    for recorded in api.requests[1:]:
        usage = recorded.usage
        total = (usage["input_tokens"] + usage["cache_read_input_tokens"]
                 + usage["cache_creation_input_tokens"])  # fmt: skip
        assert usage["cache_read_input_tokens"] / total > 0.5


@pytest.mark.parametrize(
    "fault",
    [
        Fault(429, retry_after=0.05),
        Fault(500),
        Fault(529),
    ],
    ids=["429", "500", "529"],
)
def test_transient_statuses_are_retried(api: StandInAPI, fault: Fault) -> None:
    api.set_script([fault, Reply([text("recovered")])])
    response, events = complete(client())
    assert response.content == [{"type": "text", "text": "recovered"}]
    assert len(api.requests) == 2
    assert [e.kind for e in events][0] == "retry"


@pytest.mark.parametrize(
    "broken",
    [
        Reply([text("partial answer " * 20)], stream_fault=StreamError(after_events=3)),
        Reply([text("partial answer " * 20)], stream_fault=DropConnection(after_events=3)),
        Reply([text("partial answer " * 20)], stream_fault=EarlyClose(after_events=3)),
    ],
    ids=["error-event", "dropped-connection", "early-close"],
)
def test_broken_streams_are_retried(api: StandInAPI, broken: Reply) -> None:
    api.set_script([broken, Reply([text("whole answer")])])
    response, _ = complete(client())
    assert response.content == [{"type": "text", "text": "whole answer"}]
    assert response.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (
            Fault(401, message="invalid x-api-key"),
            "API error 401 (authentication_error): invalid x-api-key",
        ),
        (
            Fault(400, message="messages: bad"),
            "API error 400 (invalid_request_error): messages: bad",
        ),
    ],
    ids=["401", "400"],
)
def test_permanent_errors_end_the_turn_with_the_api_message(api, fault, words) -> None:
    api.set_script([fault])
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert result.stop == Failed(words)
    assert len(api.requests) == 1


def test_retries_are_bounded(api: StandInAPI) -> None:
    api.set_script([Fault(529)] * 5)
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert isinstance(result.stop, Failed) and "gave up after 3 attempts" in result.stop.message
    assert len(api.requests) == 3


def test_retry_after_longer_than_the_time_left_is_not_waited_for(api: StandInAPI) -> None:
    api.set_script([Fault(429, retry_after=60), Reply([text("late")])])
    started = time.monotonic()
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s",
                       limits=Limits(timeout_s=5)).run(USER)  # fmt: skip
    assert isinstance(result.stop, Failed) and "more than the time left" in result.stop.message
    assert time.monotonic() - started < 2


def test_a_stream_slower_than_the_timeout_ends_as_timeout(api: StandInAPI) -> None:
    api.set_script([Reply([text("slow " * 100)], event_delay=0.1)])
    started = time.monotonic()
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s",
                       limits=Limits(timeout_s=1.0)).run(USER)  # fmt: skip
    assert result.stop == TimedOut(1.0)
    assert time.monotonic() - started < 3


def test_cancel_closes_the_stream(api: StandInAPI) -> None:
    api.set_script([Reply([text("slow " * 100)], event_delay=0.05)])
    cancel = CancelToken()
    seen = []

    def on_event(event) -> None:
        seen.append(event)
        if len(seen) == 3:
            cancel.cancel()

    from qloop_kernel.loop import TurnCancelled

    with pytest.raises(TurnCancelled):
        client().complete(request(), on_event, cancel)
