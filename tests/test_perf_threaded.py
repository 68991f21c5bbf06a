"""ThreadedModel: the model call on a kept worker thread, its events on the caller's thread, in order."""

from __future__ import annotations

import threading

import pytest

from qloop_kernel.errors import ModelError
from qloop_kernel.loop import CancelToken
from qloop_kernel.messages import ModelEvent, ModelRequest, TextDelta, ToolCallReady, UsageUpdate
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
