"""The reply and fault model: what the stand-in answers to each Messages request.

A script is a list of items consumed one per ``POST /v1/messages``: a ``Reply`` (a message, maybe
with a mid-stream fault), a ``Fault`` (an HTTP error status instead of a message) or a callable that
receives the ``RecordedRequest`` and returns either. Once the list is empty the responder answers.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from ..errors import QloopError
from .errors import default_message, error_type_for_status
from .record import RecordedRequest

StopReason = Literal[
    "end_turn",
    "max_tokens",
    "stop_sequence",
    "tool_use",
    "pause_turn",
    "refusal",
    "model_context_window_exceeded",
]
STOP_REASONS: frozenset[str] = frozenset(get_args(StopReason))
USAGE_FIELDS = frozenset(
    {"input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"}
)


class ScriptError(QloopError, ValueError):
    """A script that cannot be served: a bad item, a bad JSON form or a failing callable."""


# Content blocks --------------------------------------------------------------------------------

DIRECT_CALLER: Mapping[str, Any] = {"type": "direct"}


@dataclass(frozen=True)
class TextBlock:
    """A text block of a scripted reply, with the ``citations`` the API attaches when given."""

    text: str
    citations: tuple[Mapping[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        if self.citations is not None:
            object.__setattr__(self, "citations", tuple(dict(c) for c in self.citations))
            _check_json("citations", list(self.citations))

    def to_json(self) -> dict[str, Any]:
        """Return the block as the API sends it."""
        data: dict[str, Any] = {"type": "text", "text": self.text}
        if self.citations is not None:
            data["citations"] = [dict(citation) for citation in self.citations]
        return data


@dataclass(frozen=True)
class ThinkingBlock:
    """A thinking block of a scripted reply.

    ``signature`` None (the default) means the server signs the block when it sends it, and accepts it
    back only unchanged; an explicit signature is sent as given (a block the server did not sign).
    """

    thinking: str
    signature: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the block's JSON form (without a signature when the server is to sign it)."""
        data: dict[str, Any] = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            data["signature"] = self.signature
        return data


@dataclass(frozen=True)
class RedactedThinkingBlock:
    """A redacted_thinking block; ``data`` None means the server makes (and checks) its own."""

    data: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the block's JSON form."""
        block: dict[str, Any] = {"type": "redacted_thinking"}
        if self.data is not None:
            block["data"] = self.data
        return block


@dataclass(frozen=True)
class ToolUseBlock:
    """A tool call of a scripted reply. ``input`` is any JSON value: the API means an object, but a
    model can produce something else, and a client must cope."""

    id: str
    name: str
    input: Any
    caller: Mapping[str, Any] | None = field(default_factory=lambda: dict(DIRECT_CALLER))

    def __post_init__(self) -> None:
        _check_json("tool_use input", self.input)

    def to_json(self) -> dict[str, Any]:
        """Return the block as the API sends it."""
        value = dict(self.input) if isinstance(self.input, Mapping) else self.input
        data: dict[str, Any] = {
            "type": "tool_use",
            "id": self.id,
            "name": self.name,
            "input": value,
        }
        if self.caller is not None:
            data["caller"] = dict(self.caller)
        return data


@dataclass(frozen=True)
class ServerToolUseBlock:
    """A server tool call (web search, web fetch, code execution) the API runs itself."""

    id: str
    name: str
    input: Mapping[str, Any]

    def __post_init__(self) -> None:
        _check_json("server_tool_use input", self.input)

    def to_json(self) -> dict[str, Any]:
        """Return the block as the API sends it."""
        return {
            "type": "server_tool_use",
            "id": self.id,
            "name": self.name,
            "input": dict(self.input),
            "caller": dict(DIRECT_CALLER),
        }


@dataclass(frozen=True)
class ResultBlock:
    """A server tool's result block (``web_search_tool_result`` and the like), sent whole."""

    data: Mapping[str, Any]

    def __post_init__(self) -> None:
        kind = self.data.get("type") if isinstance(self.data, Mapping) else None
        if not isinstance(kind, str) or not kind.endswith("_tool_result"):
            raise ScriptError(
                f"a server tool result block needs a type ending in _tool_result: {self.data!r}"
            )
        _check_json("a result block", self.data)
        object.__setattr__(self, "data", json.loads(json.dumps(self.data)))

    def to_json(self) -> dict[str, Any]:
        """Return the block as the API sends it."""
        return json.loads(json.dumps(self.data))  # type: ignore[no-any-return]


ContentBlock = (
    TextBlock
    | ThinkingBlock
    | RedactedThinkingBlock
    | ToolUseBlock
    | ServerToolUseBlock
    | ResultBlock
)
_BLOCK_CLASSES = (
    TextBlock, ThinkingBlock, RedactedThinkingBlock, ToolUseBlock, ServerToolUseBlock, ResultBlock
)  # fmt: skip


def text(value: str, citations: Iterable[Mapping[str, Any]] | None = None) -> TextBlock:
    """Return a text block (``citations``: the citation objects the API attaches to it)."""
    return TextBlock(value, None if citations is None else tuple(citations))


def thinking(value: str, signature: str | None = None) -> ThinkingBlock:
    """Return a thinking block, signed by the server unless ``signature`` is given."""
    return ThinkingBlock(value, signature)


def redacted_thinking(data: str | None = None) -> RedactedThinkingBlock:
    """Return a redacted_thinking block (its data made by the server unless given)."""
    return RedactedThinkingBlock(data)


def tool_use(name: str, input: Any, id: str | None = None) -> ToolUseBlock:  # noqa: A002
    """Return a tool call; ``id`` defaults to a fresh ``toolu_...`` identifier."""
    value = dict(input) if isinstance(input, Mapping) else input
    return ToolUseBlock(id or f"toolu_{secrets.token_hex(12)}", name, value)


def server_tool_use(
    name: str, input: Mapping[str, Any], id: str | None = None
) -> ServerToolUseBlock:  # noqa: A002
    """Return a server tool call; ``id`` defaults to a fresh ``srvtoolu_...`` identifier."""
    return ServerToolUseBlock(id or f"srvtoolu_{secrets.token_hex(12)}", name, dict(input))


def web_search_result(tool_use_id: str, results: Iterable[Mapping[str, Any]]) -> ResultBlock:
    """Return a ``web_search_tool_result`` block; each result needs ``url`` and ``title``."""
    content = [
        {
            "type": "web_search_result",
            "url": result["url"],
            "title": result["title"],
            "encrypted_content": result.get("encrypted_content", secrets.token_hex(16)),
            "page_age": result.get("page_age"),
        }
        for result in results
    ]
    return ResultBlock(
        {"type": "web_search_tool_result", "tool_use_id": tool_use_id, "content": content}
    )


def block_from_json(data: Any) -> ContentBlock:
    """Build a content block from its JSON form (ids, signatures and redacted data are optional)."""
    kind = data.get("type") if isinstance(data, Mapping) else None
    try:
        if kind == "text":
            return text(_string(data, "text"), data.get("citations"))
        if kind == "thinking":
            return thinking(_string(data, "thinking"), data.get("signature"))
        if kind == "redacted_thinking":
            return redacted_thinking(data.get("data"))
        if kind == "tool_use":
            return tool_use(_string(data, "name"), data.get("input", {}), data.get("id"))
        if kind == "server_tool_use":
            return server_tool_use(_string(data, "name"), _object(data, "input"), data.get("id"))
        if isinstance(kind, str) and kind.endswith("_tool_result"):
            return ResultBlock(data)
    except (KeyError, TypeError) as error:
        raise ScriptError(f"bad {kind} block {data!r}: {error}") from None
    raise ScriptError(
        "a content block needs type text, thinking, redacted_thinking, tool_use, server_tool_use "
        f"or a server tool result type (..._tool_result), got {data!r}"
    )


def _string(data: Mapping[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{key} must be a string")
    return value


def _object(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise TypeError(f"{key} must be an object")
    return value


def _check_json(what: str, value: Any) -> None:
    try:
        json.dumps(value)
    except (TypeError, ValueError) as error:
        raise ScriptError(f"{what} must be JSON-serialisable: {error}") from None


# Faults ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """An HTTP error answered instead of a message; it consumes one script item by itself.

    ``error_type`` defaults to the API's type for ``status`` (429 rate_limit_error, 500 api_error,
    529 overloaded_error, ...) and ``message`` to a message like the API's. ``retry_after``
    (seconds) sets the ``retry-after`` header; a 429 without one gets ``retry-after: 1`` and the
    ``anthropic-ratelimit-*`` headers, as the API sends them (except a spend-limit 429, which has no
    retry-after). ``headers`` adds any other response header (e.g. ``{"x-should-retry": "false"}``).
    ``details`` goes into ``error.details`` (e.g. ``{"error_code": "enforced_spend_limit_reached"}``).
    ``first_byte_delay`` waits before answering.
    """

    status: int
    error_type: str = ""
    message: str = ""
    retry_after: float | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    first_byte_delay: float = 0.0
    details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise ScriptError(f"a fault status must be an integer, got {self.status!r}")
        if not 400 <= self.status <= 599:
            raise ScriptError(f"a fault status must be 4xx or 5xx, got {self.status}")
        _check_delay("first_byte_delay", self.first_byte_delay)
        if self.retry_after is not None:
            _check_delay("retry_after", self.retry_after)
        error_type = self.error_type or error_type_for_status(self.status)
        object.__setattr__(self, "error_type", error_type)
        object.__setattr__(self, "message", self.message or default_message(error_type))
        object.__setattr__(self, "headers", dict(self.headers))
        if self.details is not None:
            _check_json("details", self.details)
            object.__setattr__(self, "details", dict(self.details))

    @property
    def is_spend_limit(self) -> bool:
        """Whether this is the 429 of a reached spend limit (which a retry cannot fix)."""
        return (self.details or {}).get("error_code") == SPEND_LIMIT_CODE


SPEND_LIMIT_CODE = "enforced_spend_limit_reached"


def spend_limit_reached(message: str = "") -> Fault:
    """The 429 the API answers once the organization's monthly spend limit is reached.

    It is a ``rate_limit_error`` with ``error.details.error_code`` "enforced_spend_limit_reached"
    and no ``retry-after`` ("Errors > HTTP errors" in the API docs).
    """
    return Fault(
        429,
        "rate_limit_error",
        message
        or "You have reached your organization's monthly spend limit. Usage resumes at "
        "00:00 UTC on the first day of next month, or raise the limit in the Claude Console.",
        details={"error_code": SPEND_LIMIT_CODE},
    )


@dataclass(frozen=True)
class RawReply:
    """A response sent byte for byte: a documented example stream, a malformed one, an HTML page.

    ``body`` is sent with ``status`` and ``content_type`` (SSE by default, chunked like the API's
    streams). Thinking blocks in it are accepted back unchanged, as the server sent them.
    """

    body: str | bytes
    status: int = 200
    content_type: str = "text/event-stream; charset=utf-8"
    headers: Mapping[str, str] = field(default_factory=dict)
    first_byte_delay: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.status, bool) or not isinstance(self.status, int):
            raise ScriptError(f"a raw reply status must be an integer, got {self.status!r}")
        if not isinstance(self.body, (str, bytes)):
            raise ScriptError(f"a raw reply body must be text or bytes, got {self.body!r}")
        _check_delay("first_byte_delay", self.first_byte_delay)
        object.__setattr__(self, "headers", dict(self.headers))

    @property
    def payload(self) -> bytes:
        """The body as bytes."""
        return self.body if isinstance(self.body, bytes) else self.body.encode()

    @property
    def is_stream(self) -> bool:
        """Whether the body is sent as a server-sent event stream."""
        return self.content_type.startswith("text/event-stream")


@dataclass(frozen=True)
class StreamError:
    """Send ``after_events`` events of the stream, then an SSE ``event: error``.

    On a non-streaming request the error is answered as the HTTP status of its type instead.
    """

    after_events: int
    error_type: str = "overloaded_error"
    message: str = ""

    def __post_init__(self) -> None:
        _check_count(self.after_events)
        object.__setattr__(self, "message", self.message or default_message(self.error_type))


@dataclass(frozen=True)
class DropConnection:
    """Send ``after_events`` events, then close the socket with no terminating chunk.

    On a non-streaming request the connection is closed before any response.
    """

    after_events: int

    def __post_init__(self) -> None:
        _check_count(self.after_events)


@dataclass(frozen=True)
class EarlyClose:
    """Send ``after_events`` events, then end the response cleanly without the rest.

    Only meaningful for streaming requests; on a non-streaming one it is a script error.
    """

    after_events: int

    def __post_init__(self) -> None:
        _check_count(self.after_events)


StreamFault = StreamError | DropConnection | EarlyClose


def _check_count(after_events: int) -> None:
    if isinstance(after_events, bool) or not isinstance(after_events, int) or after_events < 0:
        raise ScriptError(f"after_events must be an integer >= 0, got {after_events!r}")


def _check_delay(name: str, seconds: float) -> None:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ScriptError(f"{name} must be a number of seconds >= 0, got {seconds!r}")


# Replies ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """One scripted message.

    ``content`` is a string (one text block) or a list of blocks built with ``text``,
    ``thinking``, ``redacted_thinking``, ``tool_use``, ``server_tool_use`` and
    ``web_search_result`` (or their JSON forms). ``stop_reason`` defaults to "stop_sequence" when
    ``stop_sequence`` is set, else "tool_use" when a tool is called, else "end_turn".
    ``stop_details`` is sent with a refusal (default ``{"type": "refusal", "category": None,
    "explanation": None}``). ``usage`` overrides computed counters; ``model`` defaults to the
    request's model. ``stream_fault`` interrupts the stream; ``first_byte_delay`` and
    ``event_delay`` (seconds) slow the answer down before the first byte and between stream events.
    """

    content: Sequence[ContentBlock | Mapping[str, Any]] | str = ()
    stop_reason: StopReason | None = None
    stop_sequence: str | None = None
    usage: Mapping[str, int] | None = None
    model: str | None = None
    stream_fault: StreamFault | None = None
    first_byte_delay: float = 0.0
    event_delay: float = 0.0
    stop_details: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", _normalise_content(self.content))
        if self.stop_details is not None:
            _check_json("stop_details", self.stop_details)
            object.__setattr__(self, "stop_details", dict(self.stop_details))
        if self.stop_reason is not None and (
            not isinstance(self.stop_reason, str) or self.stop_reason not in STOP_REASONS
        ):
            raise ScriptError(f"stop_reason must be one of {sorted(STOP_REASONS)}")
        for name in ("stop_sequence", "model"):
            if not isinstance(getattr(self, name), (str, type(None))):
                raise ScriptError(f"{name} must be a string, got {getattr(self, name)!r}")
        if self.usage is not None:
            object.__setattr__(self, "usage", _checked_usage(self.usage))
        _check_delay("first_byte_delay", self.first_byte_delay)
        _check_delay("event_delay", self.event_delay)

    @property
    def blocks(self) -> tuple[ContentBlock, ...]:
        """The content blocks, in order."""
        return tuple(self.content)  # type: ignore[arg-type]

    @property
    def resolved_stop_reason(self) -> StopReason:
        """The stop reason sent: the given one, or the one inferred from the content."""
        if self.stop_reason is not None:
            return self.stop_reason
        if self.stop_sequence is not None:
            return "stop_sequence"
        if any(isinstance(block, ToolUseBlock) for block in self.blocks):
            return "tool_use"
        return "end_turn"

    @property
    def resolved_stop_details(self) -> dict[str, Any] | None:
        """The ``stop_details`` sent: the given ones for a refusal, or the API's empty default."""
        if self.resolved_stop_reason != "refusal":
            return None
        default = {"type": "refusal", "category": None, "explanation": None}
        return {**default, **(self.stop_details or {})}

    @staticmethod
    def fault(status: int, **options: Any) -> Fault:
        """Shorthand for ``Fault(status, ...)``: an HTTP error that takes one script item."""
        return Fault(status, **options)


def _normalise_content(
    content: Sequence[ContentBlock | Mapping[str, Any]] | str,
) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(content),)
    if not isinstance(content, Sequence):
        raise ScriptError(f"content must be a string or a list of blocks, got {content!r}")
    blocks: list[ContentBlock] = []
    for block in content:
        if isinstance(block, _BLOCK_CLASSES):
            blocks.append(block)
        else:
            blocks.append(block_from_json(block))
    return tuple(blocks)


def _checked_usage(usage: Mapping[str, int]) -> dict[str, int]:
    if not isinstance(usage, Mapping):
        raise ScriptError(f"usage must be a mapping of counters, got {usage!r}")
    unknown = set(usage) - USAGE_FIELDS
    if unknown:
        raise ScriptError(
            f"unknown usage fields {sorted(unknown)}; allowed: {sorted(USAGE_FIELDS)}"
        )
    for name, value in usage.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ScriptError(f"usage {name} must be an integer >= 0, got {value!r}")
    return dict(usage)


# Scripts ---------------------------------------------------------------------------------------

Response = Reply | Fault | RawReply
Responder = Callable[[RecordedRequest], Response]
ScriptItem = Reply | Fault | RawReply | Responder


def script_exhausted(request: RecordedRequest) -> Response:
    """The default responder: a 400 invalid_request_error saying the script is exhausted."""
    return Fault(
        400,
        "invalid_request_error",
        "qloop stand-in: the script is exhausted; add replies to it or give the server a responder",
    )


class Script:
    """The items still to serve plus the responder for when they run out. Thread-safe."""

    def __init__(self, items: Iterable[ScriptItem] = (), responder: Responder | None = None):
        self._lock = threading.Lock()
        self._items: list[ScriptItem] = []
        self._served = 0
        self.responder: Responder = responder or script_exhausted
        self.replace(items)

    @property
    def remaining(self) -> int:
        """How many items have not been served yet."""
        with self._lock:
            return len(self._items)

    def replace(self, items: Iterable[ScriptItem]) -> None:
        """Replace the items still to serve (the responder stays)."""
        checked = [_checked_item(index, item) for index, item in enumerate(items)]
        with self._lock:
            self._items = checked

    def next_response(self, request: RecordedRequest) -> Response:
        """Consume the next item (or ask the responder) and return what to answer."""
        with self._lock:
            item: ScriptItem = self._items.pop(0) if self._items else self.responder
            self._served += 1
            number = self._served
        if isinstance(item, (Reply, Fault, RawReply)):
            return item
        return _call(item, request, number)


def _checked_item(index: int, item: object) -> ScriptItem:
    if isinstance(item, (Reply, Fault, RawReply)) or callable(item):
        return item
    raise ScriptError(
        f"script item {index} must be a Reply, a Fault, a RawReply or a callable, got {item!r}"
    )


def _call(item: Responder, request: RecordedRequest, number: int) -> Response:
    try:
        response = item(request)
    except Exception as error:
        raise ScriptError(
            f"qloop stand-in: the responder for request {number} raised "
            f"{type(error).__name__}: {error}"
        ) from error
    if not isinstance(response, (Reply, Fault, RawReply)):
        raise ScriptError(
            f"qloop stand-in: the responder for request {number} returned {response!r}, "
            "not a Reply, a Fault or a RawReply"
        )
    return response
