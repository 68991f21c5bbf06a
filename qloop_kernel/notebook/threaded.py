"""Run a model client on a worker thread; stream its events to the main thread.

The kernel's main thread renders output, shows approval cards and runs user code, so it must stay free:
the HTTP stream is read on a worker, events cross over through a queue, and the main thread waits with the
shell pump so widget clicks (the Stop button) keep working while the model streams. One wait covers a
whole model call (events are handled as the wait re-checks; streamed events wake it at most every
50 ms, the call's end at once), and the workers are kept between calls.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from ..loop import CancelToken, ModelClient
from ..messages import ModelEvent, ModelRequest, ModelResponse
from .pump import wait_until, wake

_DONE = object()
EVENT_WAKE_S = 0.05  # streamed events wake the waiting thread at most this often


class _Workers:
    """Daemon threads kept between model calls; a new one starts only when none is idle (a call that
    was interrupted may still be closing its stream). Daemons: the kernel exits without waiting."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            self._idle = max(self._idle - 1, 0)
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._serve, name="qloop-model", daemon=True).start()

    def _serve(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


_workers = _Workers()


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

        _workers.submit(work)
        try:
            wait_until(_Drain(events, on_event))
        except BaseException:
            cancel.cancel()  # a KeyboardInterrupt here: close the stream, let the worker end
            raise
        if "error" in outcome:
            raise outcome["error"]
        response: ModelResponse = outcome["response"]
        return response


def _forward(
    events: queue.SimpleQueue[Any], clock: Callable[[], float] = time.monotonic
) -> Callable[[ModelEvent], None]:
    """Queue an event; wake the waiting thread at most every ``EVENT_WAKE_S`` (the end always).

    A woken main thread takes the GIL from the worker while it is still reading the stream: one
    wake per event cost more CPU than the events' display. Events queued between wakes are handed
    over by the next one, or by the wait's own check (``POLL_INTERVAL``), whichever comes first.
    """
    woken = clock()  # the call just started: its first events ride on the next check

    def put(event: ModelEvent) -> None:
        nonlocal woken
        events.put(event)
        now = clock()
        if now - woken >= EVENT_WAKE_S:
            woken = now
            wake()

    return put


class _Drain:
    """The wait's condition: hands the queued events to ``on_event``; true once the call is over."""

    def __init__(self, events: queue.SimpleQueue[Any], on_event: Callable[[ModelEvent], None]):
        self.events = events
        self.on_event = on_event
        self.done = False

    def __call__(self) -> bool:
        while not self.done and not self.events.empty():
            item = self.events.get_nowait()
            if item is _DONE:
                self.done = True
            else:
                self.on_event(item)
        return self.done
