"""What the loop and its collaborators agree on: the model client it calls, the cancel token, the
observer of a turn and a turn's limits.

The model client, settings, replay's fingerprinting observer and the test stand-ins import these
without importing the loop. Nothing here imports anthropic or pydantic.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .errors import ModelError
from .messages import ModelEvent, ModelRequest, ModelResponse, ToolCall, ToolOutcome, Usage


class ModelClient(Protocol):
    """Anything that turns a request into a response, forwarding stream events as they arrive."""

    model: str

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse: ...


class TurnCancelled(ModelError):
    """Raised by a model client when the cancel token fired while it was waiting."""


class CancelToken:
    """Thread-safe cancel signal (the Stop button); callbacks let a waiting thread wake up."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []

    def cancel(self) -> None:
        self._event.set()
        for callback in list(self._callbacks):
            callback()

    def on_cancel(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on cancel; returns a function that unregisters it."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True at once if cancelled meanwhile."""
        return self._event.wait(timeout)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


class TurnObserver:
    """Hooks for showing a turn as it happens. The defaults do nothing."""

    def on_event(self, event: ModelEvent) -> None:
        """A streamed model event (text, thinking, tool call, usage, retry)."""

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        """A model call finished; ``usage``/``cost_usd`` are the turn's running totals."""

    def on_tool_start(self, call: ToolCall) -> None:
        """A tool call is about to be checked and run."""

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        """A tool call was answered."""


@dataclass(frozen=True)
class Limits:
    max_turns: int = 20
    max_tokens: int | None = None  # all tokens of the turn: input (cached or not) plus output
    max_cost_usd: float | None = None
    timeout_s: float | None = None  # wall clock of the turn, time waiting for approval excluded
    max_output_tokens: int = 8192  # per model response
