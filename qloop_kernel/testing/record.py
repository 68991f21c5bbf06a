"""The stand-in's request log: one ``RecordedRequest`` per API request received."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REDACTED = "[redacted]"
_AUTHORIZATION_HEADERS = frozenset({"authorization", "proxy-authorization"})
_KEY_HEADERS = frozenset({"x-api-key"})


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Lower-case header names and hide credentials (an Authorization header keeps its scheme)."""
    redacted: dict[str, str] = {}
    for name, value in headers.items():
        key = name.lower()
        if key in _KEY_HEADERS:
            value = REDACTED
        elif key in _AUTHORIZATION_HEADERS:
            scheme, _, secret = value.strip().partition(" ")
            value = f"{scheme} {REDACTED}" if secret else REDACTED
        redacted[key] = value
    return redacted


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received and answered it.

    ``headers`` has lower-case names with credentials redacted; ``body`` is the parsed JSON body
    (None when absent or not JSON); ``time`` is ``time.time()`` on arrival. ``status`` is the HTTP
    status answered (None when the connection was dropped before any response); ``usage`` is the
    usage object reported (for count_tokens, the count; None when no message was produced);
    ``error`` is the error message sent, HTTP or mid-stream, or a note on a dropped connection.
    """

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    time: float
    status: int | None = None
    usage: Mapping[str, Any] | None = None
    error: str | None = None

    @property
    def model(self) -> str | None:
        """The requested model, if the body names one."""
        value = self._field("model")
        return value if isinstance(value, str) else None

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` list (empty when absent)."""
        value = self._field("messages")
        return value if isinstance(value, list) else []

    @property
    def stream(self) -> bool:
        """Whether the request asked for a streamed response."""
        return self._field("stream") is True

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by ``GET /_qloop/requests``."""
        return {
            "method": self.method,
            "path": self.path,
            "headers": dict(self.headers),
            "body": self.body,
            "time": self.time,
            "status": self.status,
            "usage": None if self.usage is None else dict(self.usage),
            "error": self.error,
        }

    def _field(self, name: str) -> object:
        return self.body.get(name) if isinstance(self.body, dict) else None


@dataclass
class RequestLog:
    """A thread-safe, append-only list of recorded requests."""

    _items: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def append(self, request: RecordedRequest) -> None:
        """Add one request at the end of the log."""
        with self._lock:
            self._items.append(request)

    def snapshot(self) -> list[RecordedRequest]:
        """Return a copy of the log, oldest first."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        """Empty the log."""
        with self._lock:
            self._items.clear()
