"""Redaction of secrets from everything sent to the model, saved, shown or logged.

Two sources: the values of environment variables whose names look secret (KEY, TOKEN, SECRET, PASSWORD,
...), and strings shaped like well-known API keys.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
KEY_SHAPES = re.compile(
    r"sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic
    r"|sk-(?:proj-)?[A-Za-z0-9_\-]{20,}"  # OpenAI-style
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
)
REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would redact ordinary text


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names look secret, longest first."""
    if environ is not None:
        return _secret_values(tuple(environ.items()))
    # os.environ's raw mapping gives a cheap fingerprint: the scan reruns only when it changed.
    raw = getattr(os.environ, "_data", None)
    if isinstance(raw, dict):
        return _cached_scan(tuple(raw.items()))
    return _secret_values(tuple(os.environ.items()))


@lru_cache(maxsize=4)
def _cached_scan(raw: tuple[tuple[Any, Any], ...]) -> list[str]:
    return _secret_values(tuple(os.environ.items()))


def _secret_values(items: tuple[tuple[str, str], ...]) -> list[str]:
    values = {v for k, v in items if SECRET_NAME.search(k) and len(v) >= _MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, environ: dict[str, str] | None = None) -> str:
    """``text`` with secret values and key-shaped strings replaced by ``[REDACTED]``."""
    for value in secret_values(environ):
        if value in text:
            text = text.replace(value, REDACTED)
    return KEY_SHAPES.sub(REDACTED, text)


def redact(value: Any, environ: dict[str, str] | None = None) -> Any:
    """A deep copy of a JSON-like value with every string redacted."""
    if isinstance(value, str):
        return redact_text(value, environ)
    if isinstance(value, dict):
        return {k: redact(v, environ) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v, environ) for v in value]
    return value
