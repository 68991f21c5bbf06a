"""Bounding text: one helper and one marker for everything qloop cuts (tool results, records, outputs)."""

from __future__ import annotations

MARKER = "\n[... {omitted:,} characters omitted ...]\n"


def truncate(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else its head and tail around a marker."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    omitted = len(text) - head - tail
    return text[:head] + MARKER.format(omitted=omitted) + (text[-tail:] if tail else "")
