"""Signatures for the thinking blocks the stand-in sends, so it can tell when one comes back changed.

The API signs each ``thinking`` block (``signature``) and encrypts each ``redacted_thinking`` block
(``data``), and answers 400 when a block it sent comes back altered. The stand-in does the same with an
HMAC under a per-server key: a signature binds a random nonce to the exact thinking text, and redacted
data is a nonce with its tag. Blocks sent verbatim from a raw reply (documented example streams carry
the docs' own signatures) are remembered by their canonical JSON instead.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
from collections.abc import Mapping
from typing import Any

_NONCE = 12
_TAG = 20
_PREFIX = b"qls1"


class Signer:
    """Signs and checks thinking blocks under one secret key. Thread-safe."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)
        self._verbatim: set[str] = set()
        self._lock = threading.Lock()

    def thinking_signature(self, thinking: str) -> str:
        """A fresh signature for a thinking text."""
        nonce = secrets.token_bytes(_NONCE)
        return _encode(nonce + self._tag(b"thinking", nonce, thinking.encode()))

    def redacted_data(self) -> str:
        """Fresh opaque data for a redacted_thinking block."""
        nonce = secrets.token_bytes(_NONCE)
        return _encode(nonce + self._tag(b"redacted", nonce, b""))

    def remember(self, block: Mapping[str, Any]) -> None:
        """Accept this exact block when it comes back (for blocks sent verbatim)."""
        with self._lock:
            self._verbatim.add(_canonical(block))

    def is_intact(self, block: Mapping[str, Any]) -> bool:
        """Whether a thinking or redacted_thinking block is exactly as this server sent it."""
        with self._lock:
            if _canonical(block) in self._verbatim:
                return True
        if block.get("type") == "thinking":
            text, signature = block.get("thinking"), block.get("signature")
            if not isinstance(text, str) or not isinstance(signature, str):
                return False
            return self._check(b"thinking", signature, text.encode())
        data = block.get("data")
        return isinstance(data, str) and self._check(b"redacted", data, b"")

    def _tag(self, kind: bytes, nonce: bytes, payload: bytes) -> bytes:
        message = kind + b"\0" + nonce + b"\0" + payload
        return hmac.new(self._key, message, hashlib.sha256).digest()[:_TAG]

    def _check(self, kind: bytes, token: str, payload: bytes) -> bool:
        raw = _decode(token)
        if raw is None or len(raw) != _NONCE + _TAG:
            return False
        nonce, tag = raw[:_NONCE], raw[_NONCE:]
        return hmac.compare_digest(tag, self._tag(kind, nonce, payload))


def _encode(raw: bytes) -> str:
    return base64.b64encode(_PREFIX + raw).decode()


def _decode(token: str) -> bytes | None:
    try:
        raw = base64.b64decode(token.encode(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw[len(_PREFIX) :] if raw.startswith(_PREFIX) else None


def _canonical(block: Mapping[str, Any]) -> str:
    body = {key: value for key, value in block.items() if key != "cache_control"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
