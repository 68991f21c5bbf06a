"""What the stand-in puts on the wire for a reply: a Message JSON or its SSE event stream.

A streamed reply is ("Streaming Messages" in the API docs): ``message_start``; for each block
``content_block_start``, its deltas and ``content_block_stop``; then ``message_delta`` (stop reason,
stop details, cumulative usage) and ``message_stop``. One ``ping`` follows the first
``content_block_start`` (or ``message_start`` when there is no content), as in the API. The deltas:

- text: a ``citations_delta`` per citation, then ``text_delta`` pieces of ``DELTA_CHARS`` characters;
- thinking: ``thinking_delta`` pieces, then one ``signature_delta``;
- tool_use and server_tool_use: a first empty ``input_json_delta``, then one piece per whole key/value
  pair of the input object (a non-object input comes whole);
- redacted_thinking and server tool results: none, the block comes whole in its start event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .script import (
    ContentBlock,
    RedactedThinkingBlock,
    Reply,
    ThinkingBlock,
)
from .signing import Signer
from .tokens import InputUsage

DELTA_CHARS = 16
Event = tuple[str, dict[str, Any]]
_PING: Event = ("ping", {"type": "ping"})
_STREAMED_INPUT = ("tool_use", "server_tool_use")


def sent_blocks(reply: Reply, signer: Signer, *, think_first: bool = False) -> list[dict[str, Any]]:
    """The reply's content as sent: thinking signed, redacted data made, an adaptive thinking block
    first when ``think_first`` and the reply has none (empty text: the default display)."""
    blocks = [_sent(block, signer) for block in reply.blocks]
    if think_first and not any(b["type"] in ("thinking", "redacted_thinking") for b in blocks):
        blocks.insert(0, _sent(ThinkingBlock(""), signer))
    return blocks


def _sent(block: ContentBlock, signer: Signer) -> dict[str, Any]:
    if isinstance(block, ThinkingBlock) and block.signature is None:
        signature = signer.thinking_signature(block.thinking)
        return {"type": "thinking", "thinking": block.thinking, "signature": signature}
    if isinstance(block, RedactedThinkingBlock) and block.data is None:
        return {"type": "redacted_thinking", "data": signer.redacted_data()}
    return block.to_json()


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


def message_json(
    reply: Reply,
    blocks: Sequence[Mapping[str, Any]],
    *,
    message_id: str,
    model: str,
    usage: Mapping[str, Any],
) -> dict[str, Any]:
    """Return the complete Message object of a non-streaming response."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [dict(block) for block in blocks],
        "stop_reason": reply.resolved_stop_reason,
        "stop_sequence": reply.stop_sequence,
        "stop_details": reply.resolved_stop_details,
        "usage": dict(usage),
    }


def stream_events(
    reply: Reply,
    blocks: Sequence[Mapping[str, Any]],
    *,
    message_id: str,
    model: str,
    usage: Mapping[str, Any],
) -> list[Event]:
    """Return the SSE events (name, data) of a streamed response, in order."""
    start = message_json(reply, blocks, message_id=message_id, model=model, usage=usage)
    start.update(content=[], stop_reason=None, stop_sequence=None, stop_details=None)
    start["usage"] = {**usage, "output_tokens": 1}
    events: list[Event] = [("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(blocks):
        events.extend(_block_events(index, block))
    events.insert(min(2, len(events)), _PING)
    events.append(("message_delta", _message_delta(reply, usage)))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def stream_event_types(reply: Reply, *, think_first: bool = False) -> list[str]:
    """Return the event names a reply streams, to pick ``after_events`` for a stream fault.

    ``think_first``: as served to a model that thinks by default (an adaptive thinking block first).
    """
    usage = usage_json(InputUsage(), 1)
    blocks = sent_blocks(reply, Signer(), think_first=think_first)
    events = stream_events(reply, blocks, message_id="", model="", usage=usage)
    return [name for name, _ in events]


def encode_event(name: str, data: Mapping[str, Any]) -> bytes:
    """Encode one server-sent event."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def tool_input_pieces(value: Any) -> list[str]:
    """The ``partial_json`` pieces of a tool input: "" first, then one whole key/value pair each."""
    if not isinstance(value, Mapping) or not value:
        return ["", json.dumps(value, ensure_ascii=False)]
    pairs = [
        f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(item, ensure_ascii=False)}"
        for key, item in value.items()
    ]
    pieces = ["{" + pairs[0]] + [", " + pair for pair in pairs[1:]]
    pieces[-1] += "}"
    return ["", *pieces]


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
            "stop_details": reply.resolved_stop_details,
        },
        "usage": {name: usage[name] for name in cumulative},
    }


def _block_events(index: int, block: Mapping[str, Any]) -> Iterator[Event]:
    yield (
        "content_block_start",
        {"type": "content_block_start", "index": index, "content_block": _start_block(block)},
    )
    for delta in _deltas(block):
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
    yield "content_block_stop", {"type": "content_block_stop", "index": index}


def _start_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block["type"]
    if kind == "text":
        start: dict[str, Any] = {**block, "text": ""}
        if "citations" in block:
            start["citations"] = []
        return start
    if kind == "thinking":
        return {**block, "thinking": "", "signature": ""}
    if kind in _STREAMED_INPUT:
        return {**block, "input": {}}
    return dict(block)


def _deltas(block: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    kind = block["type"]
    if kind == "text":
        for citation in block.get("citations") or []:
            yield {"type": "citations_delta", "citation": citation}
        for piece in _pieces(block["text"]):
            yield {"type": "text_delta", "text": piece}
    elif kind == "thinking":
        for piece in _pieces(block["thinking"]):
            yield {"type": "thinking_delta", "thinking": piece}
        yield {"type": "signature_delta", "signature": block["signature"]}
    elif kind in _STREAMED_INPUT:
        for piece in tool_input_pieces(block["input"]):
            yield {"type": "input_json_delta", "partial_json": piece}


def _pieces(value: str) -> Iterator[str]:
    for start in range(0, len(value), DELTA_CHARS):
        yield value[start : start + DELTA_CHARS]


def thinking_blocks_in(payload: bytes, *, stream: bool) -> list[dict[str, Any]]:
    """The thinking and redacted_thinking blocks a raw body carries, as a client accumulates them.

    Best effort: a body that does not parse yields what could be read.
    """
    if not stream:
        try:
            content = json.loads(payload).get("content")
        except (ValueError, AttributeError):
            return []
        return [b for b in content or [] if isinstance(b, dict) and _is_thinking(b)]
    blocks: dict[int, dict[str, Any]] = {}
    for data in _event_data(payload):
        _accumulate(blocks, data)
    return [block for _, block in sorted(blocks.items()) if _is_thinking(block)]


def _is_thinking(block: Mapping[str, Any]) -> bool:
    return block.get("type") in ("thinking", "redacted_thinking")


def _event_data(payload: bytes) -> Iterator[dict[str, Any]]:
    for line in payload.decode("utf-8", "replace").splitlines():
        if not line.startswith("data:"):
            continue
        try:
            data = json.loads(line[5:])
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data


def _accumulate(blocks: dict[int, dict[str, Any]], data: Mapping[str, Any]) -> None:
    index = data.get("index")
    if not isinstance(index, int):
        return
    if data.get("type") == "content_block_start" and isinstance(data.get("content_block"), dict):
        blocks[index] = dict(data["content_block"])
        return
    block, delta = blocks.get(index), data.get("delta")
    if data.get("type") != "content_block_delta" or block is None or not isinstance(delta, dict):
        return
    if delta.get("type") == "thinking_delta":
        block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
    elif delta.get("type") == "signature_delta":
        block["signature"] = delta.get("signature")
