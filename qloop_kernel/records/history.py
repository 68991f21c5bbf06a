"""Earlier records of a cell: no record is ever lost when a newer one is written.

A record carries ``history``: the cell's earlier records, newest first, each a whole sealed record
that verifies on its own (the list is not part of the digest, so a frontend can add to it). The
history is bounded in entries and bytes; the oldest entries go first.

Which record a cell keeps when the output mirror and the metadata disagree (``merged``) follows
one rule everywhere (the headless runners here, ``mirror.ts`` in JupyterLab): a record that was
written knowing the saved one (the saved record is in its history) succeeds it; any other
disagreement keeps the saved record and puts the other one first in its history.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..text import counted
from .schema import MAX_RECORD_BYTES, CellRecord, Fingerprint

HISTORY_ENTRIES = 5
HISTORY_BYTES = 1_500_000
Record = dict[str, Any]


def _size(data: object) -> int:
    return len(json.dumps(data, ensure_ascii=False, default=str).encode("utf-8"))


def entry(record: Record) -> Record:
    """A record as a history entry: without its own history (the list stays flat)."""
    return {k: v for k, v in record.items() if k != "history"}


def _same(a: Record, b: Record) -> bool:
    digest = a.get("digest")
    return isinstance(digest, str) and bool(digest) and digest == b.get("digest")


def _same_turn(a: Record, b: Record) -> bool:
    """Two saves of one turn (a running record and its end): one is not the other's history."""
    started = (a.get("timings") or {}).get("started_at")
    return (
        bool(started)
        and a.get("session_id") == b.get("session_id")
        and started == (b.get("timings") or {}).get("started_at")
    )


def pushed(history: list[Record], record: Record, room: int = HISTORY_BYTES) -> list[Record]:
    """``history`` with ``record`` first (and without its copies), bounded in entries and bytes."""
    first = entry(record)
    kept = [first] + [e for e in history if not _same(e, first)]
    bounded: list[Record] = []
    used = 0
    for item in kept[:HISTORY_ENTRIES]:
        used += _size(item)
        if used > room:
            break
        bounded.append(item)
    return bounded


def history_after(previous: Record | None, current: Record | None = None) -> list[Record]:
    """The history of a new record that replaces ``previous`` (the cell's saved record)."""
    if not isinstance(previous, dict) or not previous:
        return []
    earlier = [e for e in previous.get("history") or [] if isinstance(e, dict)]
    if current is not None and (_same(previous, current) or _same_turn(previous, current)):
        return earlier
    return pushed(earlier, previous)


def knows(record: Record, saved: Record) -> bool:
    """Whether ``record`` was written knowing ``saved`` (it is in its history)."""
    return any(isinstance(e, dict) and _same(e, saved) for e in record.get("history") or [])


def merged(saved: Record | None, mirror: Record | None) -> Record | None:
    """The record a cell keeps when its metadata holds ``saved`` and its output ``mirror``."""
    if not isinstance(mirror, dict) or not mirror:
        return saved
    if not isinstance(saved, dict) or not saved:
        return mirror
    if _same(saved, mirror) or knows(saved, mirror):
        return saved
    if _same_turn(saved, mirror):  # two saves of one turn: the later one
        newer = str(mirror.get("updated_at", "")) > str(saved.get("updated_at", ""))
        return mirror if newer else saved
    if knows(mirror, saved):
        return mirror
    return {**saved, "history": pushed(list(saved.get("history") or []), mirror)}


def restored(current: Record, index: int) -> Record:
    """``current`` with its history entry ``index`` made the record, and itself put in history."""
    history = [e for e in current.get("history") or [] if isinstance(e, dict)]
    if not 0 <= index < len(history):
        raise IndexError(f"no earlier record {index + 1} (the cell has {len(history)})")
    chosen = history[index]
    rest = history[:index] + history[index + 1 :]
    return {**chosen, "history": pushed(rest, current)}


class AnnotatedStore:
    """A RecordStore that adds what the conversation does not know to each record it saves.

    ``previous``: the cell's saved record when the turn began (it goes first in the history);
    ``unseen``: the client sent no cell metadata, so there may be a saved record this run did not
    see; ``fingerprint``: a function giving the turn's fingerprint for a record (None: none yet).
    """

    def __init__(
        self,
        inner: Any,
        *,
        previous: Record | None = None,
        unseen: bool = False,
        fingerprint: Callable[[CellRecord], Fingerprint | None] | None = None,
    ) -> None:
        self.inner = inner
        self.previous = previous if isinstance(previous, dict) else None
        self.unseen = unseen
        self.fingerprint = fingerprint
        self.last: CellRecord | None = None  # the latest record saved, as annotated

    def save(self, record: CellRecord) -> None:
        self.last = self.annotated(record)
        self.inner.save(self.last)

    def keep(self, record: CellRecord) -> None:
        self.inner.keep(record)

    def annotated(self, record: CellRecord) -> CellRecord:
        update: dict[str, Any] = {"metadata_unseen": self.unseen}
        if self.fingerprint is not None:
            update["fingerprint"] = self.fingerprint(record)
        room = min(HISTORY_BYTES, MAX_RECORD_BYTES - 400 - _size(record.model_dump(mode="json")))
        history = history_after(self.previous)
        update["history"] = pushed(history[1:], history[0], room) if history and room > 0 else []
        return record.model_copy(update=update)


def describe(cell_id: str, record: Record) -> list[str]:
    """Lines listing a cell's record and its earlier ones (``%agent history``)."""

    def one(item: Record) -> str:
        when = str(item.get("updated_at", ""))[:19].replace("T", " ") or "undated"
        calls = [c for c in item.get("tool_calls") or [] if isinstance(c, dict)]
        steps = sum(1 for c in calls if c.get("name") == "run_code")
        unseen = " · made without the saved record" if item.get("metadata_unseen") else ""
        prompt = " ".join(str(item.get("prompt", "")).split())[:60]
        status = item.get("status", "?")
        return f"{when} · {status} · {counted(steps, 'code step')}{unseen} · {prompt}"

    history = [e for e in record.get("history") or [] if isinstance(e, dict)]
    lines = [f"cell {cell_id}: {one(record)}"]
    lines += [f"  {index}. {one(item)}" for index, item in enumerate(history, 1)]
    if not history:
        lines.append("  no earlier records")
    return lines
