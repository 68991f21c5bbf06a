"""What the stand-in puts on the wire for a reply: a Message JSON or its SSE event stream.

A streamed reply is: ``message_start``; for each block ``content_block_start``, its deltas (text
and thinking in pieces of ``DELTA_CHARS`` characters, a thinking block's ``signature_delta``, a
tool call's input JSON in pieces of ``DELTA_CHARS``) and ``content_block_stop``; then
``message_delta`` (stop reason, usage) and ``message_stop``. One ``ping`` follows the first
``content_block_start`` (or ``message_start`` when there is no content), as in the API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from .script import ContentBlock, Reply, TextBlock, ThinkingBlock, ToolUseBlock
from .tokens import InputUsage

DELTA_CHARS = 16
Event = tuple[str, dict[str, Any]]
_PING: Event = ("ping", {"type": "ping"})


def usage_json(
    usage: InputUsage, output_tokens: int, overrides: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """Return the Message ``usage`` object; ``overrides`` replace computed counters."""
    counters = {
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "output_tokens": output_tokens,
    }
    breakdown = {
        "ephemeral_5m_input_tokens": usage.cache_creation_5m,
        "ephemeral_1h_input_tokens": usage.cache_creation_1h,
    }
    if overrides:
        counters.update(overrides)
        if "cache_creation_input_tokens" in overrides:
            breakdown = {
                "ephemeral_5m_input_tokens": overrides["cache_creation_input_tokens"],
                "ephemeral_1h_input_tokens": 0,
            }
    return {**counters, "cache_creation": breakdown, "service_tier": "standard"}


def stop_details(reply: Reply) -> dict[str, Any] | None:
    """Return the ``stop_details`` the API attaches to a refusal (None otherwise)."""
    if reply.resolved_stop_reason == "refusal":
        return {"type": "refusal", "category": None, "explanation": None}
    return None


def message_json(
    reply: Reply, *, message_id: str, model: str, usage: Mapping[str, Any]
) -> dict[str, Any]:
    """Return the complete Message object of a non-streaming response."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block.to_json() for block in reply.blocks],
        "stop_reason": reply.resolved_stop_reason,
        "stop_sequence": reply.stop_sequence,
        "stop_details": stop_details(reply),
        "usage": dict(usage),
    }


def stream_events(
    reply: Reply, *, message_id: str, model: str, usage: Mapping[str, Any]
) -> list[Event]:
    """Return the SSE events (name, data) of a streamed response, in order."""
    start = {**message_json(reply, message_id=message_id, model=model, usage=usage)}
    start.update(content=[], stop_reason=None, stop_sequence=None, stop_details=None)
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(reply.blocks):
        events.extend(_block_events(index, block))
    events.insert(min(2, len(events)), _PING)
    events.append(("message_delta", _message_delta(reply, usage)))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def stream_event_types(reply: Reply) -> list[str]:
    """Return the event names a reply streams, to pick ``after_events`` for a stream fault."""
    usage = usage_json(InputUsage(), 1)
    return [name for name, _ in stream_events(reply, message_id="", model="", usage=usage)]


def encode_event(name: str, data: Mapping[str, Any]) -> bytes:
    """Encode one server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _message_delta(reply: Reply, usage: Mapping[str, Any]) -> dict[str, Any]:
    cumulative = (
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    )
    return {
        "type": "message_delta",
        "delta": {
            "stop_reason": reply.resolved_stop_reason,
            "stop_sequence": reply.stop_sequence,
            "stop_details": stop_details(reply),
        },
        "usage": {name: usage[name] for name in cumulative},
    }


def _block_events(index: int, block: ContentBlock) -> Iterator[Event]:
    yield (
        "content_block_start",
        {
            "type": "content_block_start",
            "index": index,
            "content_block": _empty_block(block),
        },
    )
    for delta in _deltas(block):
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _empty_block(block: ContentBlock) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": ""}
    if isinstance(block, ThinkingBlock):
        return {"type": "thinking", "thinking": "", "signature": ""}
    return {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}


def _deltas(block: ContentBlock) -> Iterator[dict[str, Any]]:
    if isinstance(block, TextBlock):
        for piece in _pieces(block.text):
            yield {"type": "text_delta", "text": piece}
    elif isinstance(block, ThinkingBlock):
        for piece in _pieces(block.thinking):
            yield {"type": "thinking_delta", "thinking": piece}
        yield {"type": "signature_delta", "signature": block.signature}
    elif isinstance(block, ToolUseBlock):
        for piece in _pieces(json.dumps(dict(block.input), ensure_ascii=False)):
            yield {"type": "input_json_delta", "partial_json": piece}


def _pieces(value: str) -> Iterator[str]:
    for start in range(0, len(value), DELTA_CHARS):
        yield value[start : start + DELTA_CHARS]
