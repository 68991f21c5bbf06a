"""Bounding text: ``truncate`` with its marker for long texts (tool results, records, outputs), ``clip``
for one line; everything qloop cuts goes through them."""

from __future__ import annotations

MARKER = "\n[... {omitted:,} characters omitted ...]\n"


def marker(count: int, unit: str = "characters", hint: str = "") -> str:
    """The one marker style for anything left out: ``[... 1,234 characters omitted; hint ...]``."""
    return f"[... {count:,} {unit} omitted{'; ' + hint if hint else ''} ...]"


def truncate(text: str, limit: int, *, note: str | None = None) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker; with
    ``note``, its first ``limit`` characters followed by ``note``, the caller's own words for what
    was left out."""
    if len(text) <= limit:
        return text
    if note is not None:
        return text[:limit] + note
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return text[:head] + f"\n{marker(omitted)}\n" + (text[-tail:] if tail else "")


def clip(text: str, limit: int, ellipsis: str = "…") -> str:
    """``text`` if it fits in ``limit`` characters, else its start ending in ``ellipsis``: for one
    line (a label, a reason, a log line); long texts keep head and tail with ``truncate``."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(ellipsis))] + ellipsis


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and the noun, singular for one: "1 model call", "2 model calls", "1,024 tokens"."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"
