"""ThreadedModel: the model call on a kept worker thread, its events on the caller's thread, in order."""

from __future__ import annotations

import threading
import time

import pytest

from qloop_kernel.errors import ModelError
from qloop_kernel.loop import CancelToken
from qloop_kernel.messages import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallReady,
    Usage,
    UsageUpdate,
)
from qloop_kernel.notebook import pump, threaded
from qloop_kernel.notebook.threaded import ThreadedModel
from qloop_kernel.testing.script import text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond

REQUEST = ModelRequest(
    messages=[{"role": "user", "content": "hi"}], tools=[], system="", max_tokens=64
)


def test_events_arrive_on_the_callers_thread_in_order_and_the_call_runs_elsewhere() -> None:
    callers: list[threading.Thread] = []
    inner = ScriptedModel(
        [respond(text("one"), text("two"), tool_use("t", {"a": 1}, id="toolu_1"))]
    )
    inner.on_request = lambda request, cancel: callers.append(threading.current_thread())
    seen: list[tuple[ModelEvent, threading.Thread]] = []
    response = ThreadedModel(inner).complete(
        REQUEST, lambda e: seen.append((e, threading.current_thread())), CancelToken()
    )
    assert [b["type"] for b in response.content] == ["text", "text", "tool_use"]
    events = [e for e, _ in seen]
    assert events[:3] == [
        TextDelta("one"),
        TextDelta("two"),
        ToolCallReady("toolu_1", "t", {"a": 1}),
    ]
    assert isinstance(events[3], UsageUpdate)
    assert {thread for _, thread in seen} == {threading.current_thread()}
    assert callers and callers[0] is not threading.current_thread()


def test_workers_are_kept_between_calls() -> None:
    inner = ScriptedModel([respond(text(f"reply {i}")) for i in range(30)])
    workers: set[int] = set()
    inner.on_request = lambda request, cancel: workers.add(threading.get_ident())
    model = ThreadedModel(inner)
    for _ in range(30):
        model.complete(REQUEST, lambda e: None, CancelToken())
    assert len(workers) <= 2  # not a new thread per call


def test_the_workers_error_is_raised_on_the_callers_thread() -> None:
    model = ThreadedModel(ScriptedModel([ModelError("the API is down")]))
    with pytest.raises(ModelError, match="the API is down"):
        model.complete(REQUEST, lambda e: None, CancelToken())
    # the worker is free again for the next call
    model.inner.script.append(respond(text("back")))  # type: ignore[attr-defined]
    assert model.complete(REQUEST, lambda e: None, CancelToken()).content[0]["text"] == "back"


class Streaming:
    """A model client that sends text deltas, with pauses where the script says."""

    model = "claude-sonnet-4-6"

    def __init__(self, script: list[str | float]) -> None:
        self.script = script
        self.sent: dict[str, float] = {}

    def complete(self, request: ModelRequest, on_event, cancel: CancelToken) -> ModelResponse:
        for item in self.script:
            if isinstance(item, float):
                time.sleep(item)
            else:
                self.sent[item] = time.monotonic()
                on_event(TextDelta(item))
        return ModelResponse(content=[], stop_reason="end_turn", usage=Usage(), model=self.model)


def test_fast_events_wake_the_caller_rarely_and_all_arrive_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wakes: list[float] = []
    monkeypatch.setattr(threaded, "wake", lambda: (wakes.append(1), pump.wake()))
    pieces = [f"piece {i} " for i in range(300)]
    seen: list[ModelEvent] = []
    ThreadedModel(Streaming(list(pieces))).complete(REQUEST, seen.append, CancelToken())
    assert seen == [TextDelta(p) for p in pieces]
    assert len(wakes) <= 3  # the end, and once per EVENT_WAKE_S at most; not once per event


def test_a_slow_streams_events_are_shown_while_it_streams() -> None:
    model = Streaming(["first", 0.6, "second", 0.6])
    arrived: dict[str, float] = {}
    ThreadedModel(model).complete(
        REQUEST, lambda e: arrived.setdefault(e.text, time.monotonic()), CancelToken()
    )  # type: ignore[union-attr]
    # each delta reaches the caller soon after it was sent, not when the call ends
    assert arrived["first"] - model.sent["first"] < 0.3
    assert arrived["second"] - model.sent["second"] < 0.3
