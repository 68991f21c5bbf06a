"""Run a model client on a worker thread; stream its events to the main thread.

The kernel's main thread renders output, shows approval cards and runs user code, so it must stay free:
the HTTP stream is read on a worker, events cross over through a queue, and the main thread waits with the
shell pump so widget clicks (the Stop button) keep working while the model streams.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from ..loop import CancelToken, ModelClient
from ..messages import ModelEvent, ModelRequest, ModelResponse
from .pump import wait_until, wake

_DONE = object()


class ThreadedModel:
    """A ModelClient wrapper: ``inner.complete`` runs on a worker; callbacks run on the caller's thread."""

    def __init__(self, inner: ModelClient) -> None:
        self.inner = inner
        self.model = inner.model

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse:
        events: queue.SimpleQueue[Any] = queue.SimpleQueue()
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["response"] = self.inner.complete(request, _forward(events), cancel)
            except BaseException as exc:  # handed to the caller's thread, raised there
                outcome["error"] = exc
            finally:
                events.put(_DONE)
                wake()

        worker = threading.Thread(target=work, name="qloop-model", daemon=True)
        worker.start()
        try:
            _drain_until_done(events, on_event)
        except BaseException:
            cancel.cancel()  # a KeyboardInterrupt here: close the stream, let the worker end
            raise
        if "error" in outcome:
            raise outcome["error"]
        response: ModelResponse = outcome["response"]
        return response


def _forward(events: queue.SimpleQueue[Any]) -> Callable[[ModelEvent], None]:
    def put(event: ModelEvent) -> None:
        events.put(event)
        wake()

    return put


def _drain_until_done(
    events: queue.SimpleQueue[Any], on_event: Callable[[ModelEvent], None]
) -> None:
    while True:
        wait_until(lambda: not events.empty())
        while not events.empty():
            item = events.get_nowait()
            if item is _DONE:
                return
            on_event(item)
