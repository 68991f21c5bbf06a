"""The JSON form of scripts, used by script files and ``POST /_qloop/script``.

A script is a JSON list of items. A reply::

    {"content": [{"type": "text", "text": "hi"},
                 {"type": "tool_use", "name": "run_code", "input": {"code": "x=1"}}],
     "stop_reason": "tool_use", "usage": {"output_tokens": 7}, "model": "...",
     "fault": {"kind": "drop_connection", "after_events": 3},
     "first_byte_delay": 0.5, "event_delay": 0.01}

(every key optional; ``content`` may be a plain string; a refusal may carry ``stop_details``). An HTTP
error instead of a reply::

    {"fault": {"status": 529, "retry_after": 1, "error_type": "overloaded_error",
               "message": "Overloaded", "headers": {"x-should-retry": "true"},
               "details": {"error_code": "..."}},
     "first_byte_delay": 0.5}

A body sent byte for byte (a documented example stream, a malformed one)::

    {"raw": {"body": "event: message_start\\ndata: {...}\\n\\n", "status": 200,
             "content_type": "text/event-stream; charset=utf-8", "headers": {}}}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import Any

from .script import (
    ContentBlock,
    DropConnection,
    EarlyClose,
    Fault,
    RawReply,
    Reply,
    ScriptError,
    StreamError,
    StreamFault,
    block_from_json,
)

_REPLY_KEYS = frozenset(
    {"content", "stop_reason", "stop_sequence", "usage", "model", "fault", "stop_details"}
    | {"first_byte_delay", "event_delay"}
)
_FAULT_ITEM_KEYS = frozenset({"fault", "first_byte_delay"})
_STATUS_FAULT_KEYS = frozenset(
    {"status", "error_type", "message", "retry_after", "headers", "details"}
)
_RAW_ITEM_KEYS = frozenset({"raw", "first_byte_delay"})
_RAW_KEYS = frozenset({"body", "status", "content_type", "headers"})
Item = Reply | Fault | RawReply
_STREAM_FAULTS: dict[str, type[StreamError | DropConnection | EarlyClose]] = {
    "stream_error": StreamError,
    "drop_connection": DropConnection,
    "early_close": EarlyClose,
}
_STREAM_FAULT_KEYS = frozenset({"kind", "after_events", "error_type", "message"})


def parse_script(data: Any) -> list[Item]:
    """Build script items from the JSON form (a list of reply and fault objects)."""
    if not isinstance(data, list):
        raise ScriptError(f"a script must be a JSON list of items, got {type(data).__name__}")
    items: list[Item] = []
    for index, item in enumerate(data):
        try:
            items.append(item_from_json(item))
        except (ScriptError, TypeError) as error:
            raise ScriptError(f"script item {index}: {error}") from None
    return items


def load_script(path: str | PathLike[str]) -> list[Item]:
    """Read a script file (UTF-8 JSON) and build its items."""
    with open(path, encoding="utf-8") as file:
        try:
            data = json.load(file)
        except json.JSONDecodeError as error:
            raise ScriptError(f"{path}: not valid JSON: {error}") from None
    return parse_script(data)


def item_from_json(data: Any) -> Item:
    """Build one script item: a ``Fault`` when its ``fault`` has a ``status``, a ``RawReply``
    for a ``raw`` item, else a ``Reply``."""
    if not isinstance(data, Mapping):
        raise ScriptError(f"an item must be an object, got {data!r}")
    fault = data.get("fault")
    if isinstance(fault, Mapping) and "status" in fault:
        return _fault_from_json(data, fault)
    if "raw" in data:
        return _raw_from_json(data)
    _reject_unknown(data, _REPLY_KEYS, "reply")
    return Reply(
        content=_content_from_json(data.get("content", [])),
        stop_reason=data.get("stop_reason"),
        stop_sequence=data.get("stop_sequence"),
        usage=data.get("usage"),
        model=data.get("model"),
        stream_fault=None if fault is None else _stream_fault_from_json(fault),
        first_byte_delay=data.get("first_byte_delay", 0.0),
        event_delay=data.get("event_delay", 0.0),
        stop_details=data.get("stop_details"),
    )


def items_to_json(items: Iterable[Item]) -> list[dict[str, Any]]:
    """Return the JSON form of script items (callables have none)."""
    return [item_to_json(item) for item in items]


def item_to_json(item: Item) -> dict[str, Any]:
    """Return the JSON form of one script item; ``item_from_json`` reads it back."""
    if isinstance(item, Fault):
        return _fault_to_json(item)
    if isinstance(item, RawReply):
        return _raw_to_json(item)
    data: dict[str, Any] = {"content": [block.to_json() for block in item.blocks]}
    optional = {
        "stop_reason": item.stop_reason,
        "stop_sequence": item.stop_sequence,
        "usage": None if item.usage is None else dict(item.usage),
        "model": item.model,
        "fault": None if item.stream_fault is None else _stream_fault_to_json(item.stream_fault),
        "stop_details": None if item.stop_details is None else dict(item.stop_details),
    }
    data.update({key: value for key, value in optional.items() if value is not None})
    data.update(_delays(item.first_byte_delay, item.event_delay))
    return data


def _content_from_json(content: Any) -> str | list[ContentBlock]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ScriptError(f"content must be a string or a list of blocks, got {content!r}")
    return [block_from_json(block) for block in content]


def _fault_from_json(data: Mapping[str, Any], fault: Mapping[str, Any]) -> Fault:
    if "content" in data:
        raise ScriptError(
            "a status fault answers with an HTTP error and sends no content: "
            "put the reply in the next item, which the retry consumes"
        )
    _reject_unknown(data, _FAULT_ITEM_KEYS, "fault item")
    _reject_unknown(fault, _STATUS_FAULT_KEYS, "status fault")
    return Fault(
        status=fault["status"],
        error_type=fault.get("error_type", ""),
        message=fault.get("message", ""),
        retry_after=fault.get("retry_after"),
        headers=fault.get("headers", {}),
        first_byte_delay=data.get("first_byte_delay", 0.0),
        details=fault.get("details"),
    )


def _raw_from_json(data: Mapping[str, Any]) -> RawReply:
    _reject_unknown(data, _RAW_ITEM_KEYS, "raw item")
    raw = data["raw"]
    if not isinstance(raw, Mapping):
        raise ScriptError(f"raw must be an object, got {raw!r}")
    _reject_unknown(raw, _RAW_KEYS, "raw reply")
    options = {key: raw[key] for key in ("status", "content_type", "headers") if key in raw}
    return RawReply(
        raw.get("body", ""), first_byte_delay=data.get("first_byte_delay", 0.0), **options
    )


def _raw_to_json(raw: RawReply) -> dict[str, Any]:
    body = raw.body if isinstance(raw.body, str) else raw.body.decode("utf-8", "replace")
    data: dict[str, Any] = {"body": body, "status": raw.status, "content_type": raw.content_type}
    if raw.headers:
        data["headers"] = dict(raw.headers)
    return {"raw": data, **_delays(raw.first_byte_delay, 0.0)}


def _stream_fault_from_json(fault: Any) -> StreamFault:
    if not isinstance(fault, Mapping):
        raise ScriptError(f"fault must be an object, got {fault!r}")
    _reject_unknown(fault, _STREAM_FAULT_KEYS, "stream fault")
    kind = fault.get("kind")
    if kind not in _STREAM_FAULTS:
        raise ScriptError(
            f"a fault needs a status, or a kind among {sorted(_STREAM_FAULTS)}; got {kind!r}"
        )
    options = {key: value for key, value in fault.items() if key != "kind"}
    return _STREAM_FAULTS[kind](**options)


def _fault_to_json(fault: Fault) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": fault.status,
        "error_type": fault.error_type,
        "message": fault.message,
    }
    if fault.retry_after is not None:
        body["retry_after"] = fault.retry_after
    if fault.headers:
        body["headers"] = dict(fault.headers)
    if fault.details is not None:
        body["details"] = dict(fault.details)
    return {"fault": body, **_delays(fault.first_byte_delay, 0.0)}


def _stream_fault_to_json(fault: StreamFault) -> dict[str, Any]:
    kind = next(name for name, cls in _STREAM_FAULTS.items() if type(fault) is cls)
    data: dict[str, Any] = {"kind": kind, "after_events": fault.after_events}
    if isinstance(fault, StreamError):
        data.update(error_type=fault.error_type, message=fault.message)
    return data


def _delays(first_byte: float, between_events: float) -> dict[str, float]:
    delays = {"first_byte_delay": first_byte, "event_delay": between_events}
    return {key: value for key, value in delays.items() if value}


def _reject_unknown(data: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = set(data) - allowed
    if unknown:
        raise ScriptError(f"unknown {what} keys {sorted(unknown)}; allowed: {sorted(allowed)}")
