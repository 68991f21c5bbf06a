"""ScriptedModel: an in-process model client that answers from a script and records every request.

For tests of the loop and of notebooks that need no HTTP at all. Items are consumed one per request: a
``ModelResponse``, a callable ``(ModelRequest) -> ModelResponse``, or an exception instance to raise.
Build responses with ``respond(text("..."), tool_use("run_code", {...}))``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..contracts import CancelToken, TurnCancelled
from ..messages import (
    ModelEvent,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    Usage,
    UsageUpdate,
)

ScriptItem = ModelResponse | Callable[[ModelRequest], ModelResponse] | BaseException


def respond(
    *blocks: Any,
    stop_reason: str | None = "auto",
    usage: Usage | None = None,
    stop_details: dict[str, Any] | None = None,
) -> ModelResponse:
    """A response from blocks (dicts or objects with ``to_json()``); stop reason inferred by default.

    Thinking blocks without a signature get a placeholder one, as every thinking block has one.
    """
    content = [_block(b) for b in blocks]
    if stop_reason == "auto":
        stop_reason = (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        )
    if stop_reason == "refusal":
        stop_details = {
            "type": "refusal",
            "category": None,
            "explanation": None,
            **(stop_details or {}),
        }
    return ModelResponse(content, stop_reason, usage or Usage(100, 20), "scripted", stop_details)


def _block(block: Any) -> dict[str, Any]:
    data = dict(block.to_json() if hasattr(block, "to_json") else block)
    if data.get("type") == "thinking" and "signature" not in data:
        data["signature"] = "scripted"
    return data


@dataclass
class ScriptedModel:
    """A ModelClient that replays a script and keeps every request it was sent."""

    script: list[ScriptItem]
    model: str = "claude-sonnet-5-5"
    requests: list[ModelRequest] = field(default_factory=list)
    on_request: Callable[[ModelRequest, CancelToken], None] | None = None

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse:
        self.requests.append(copy.deepcopy(request))
        if self.on_request is not None:
            self.on_request(request, cancel)
        if cancel.cancelled:
            raise TurnCancelled("cancelled")
        if not self.script:
            raise AssertionError(
                f"ScriptedModel: no reply scripted for request {len(self.requests)}"
            )
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        response = item(request) if callable(item) else item
        for event in _events(response.content):
            on_event(event)
        on_event(UsageUpdate(response.usage))
        return response


def _events(content: Iterable[dict[str, Any]]) -> list[ModelEvent]:
    """The events ``AnthropicModel`` forwards for this content (one delta per block here)."""
    events: list[ModelEvent] = []
    for block in content:
        if block.get("type") == "text" and block.get("text"):
            events.append(TextDelta(block["text"]))
        elif block.get("type") == "thinking" and block.get("thinking"):
            events.append(ThinkingDelta(block["thinking"]))
        elif block.get("type") == "tool_use":
            raw = block.get("input")
            call_input = dict(raw) if isinstance(raw, dict) else {"_raw": raw}
            events.append(ToolCallReady(block["id"], block["name"], call_input))
    return events
