"""Outside agents' calls waiting for the user, by notebook, and the pages that show them.

A call that needs approval becomes an *approval item* of its notebook; each page showing that
notebook long-polls :meth:`OutsideBroker.pending` for the notebook's items, shows a card per
approval item and posts the user's decision (:meth:`OutsideBroker.decide`). *Record items* carry
entries the page appends to the notebook's metadata and acknowledges (:meth:`OutsideBroker.saved`);
they wait here until a page does, so a call made while no page is open is saved when one opens.

Grants ("always allow") are kept per MCP session, notebook and tool for as long as the Jupyter
server runs; like the in-notebook agent's, a grant covers calls of the class it was given for or a
milder one. The session is the one the server issued the client at its ``initialize``, never the
name the client announced: until the user approves one of its calls, a session's client is shown
unverified, under the name it announced; then under the name the user confirmed or gave it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import TypeAdapter

from ..policy.risk import Risk, severity
from ..records.outside_schema import (
    OUTSIDE_KEY,
    DecisionKind,
    OutsideApproval,
    OutsideCellChange,
    OutsideEntry,
    OutsideItem,
    OutsideRecordItem,
)

DECISIONS: tuple[DecisionKind, ...] = get_args(DecisionKind)
POLL_WAIT_S = 25.0  # longest a page's poll is held when nothing changes
ENTRY = TypeAdapter[OutsideEntry](OutsideEntry)


def notebook_key(path: str) -> str:
    """One spelling of a server-relative notebook path, as pages and clients may write it."""
    return path.strip().replace("\\", "/").strip("/")


@dataclass(frozen=True)
class Decision:
    """What the user decided on a card: ``code`` is the edited code (``edit`` only); for a cell
    change, ``applied`` is what the page did (``{"cell_id": ...}``, or ``{"error": ...}``)."""

    kind: DecisionKind
    reason: str = ""
    code: str | None = None
    applied: dict[str, Any] | None = None
    name: str = ""  # the name the user gave the client (empty: the name it announced)


@dataclass
class Approval:
    """One call waiting for a decision (``waiting``), then running after it (``running``); a cell
    change the policy or a grant allowed waits for a page to apply it (``apply``, no card).
    ``cell`` describes a cell change: ``op`` (add, edit), ``cell_id`` or ``after_cell_id``,
    ``cell_type``. ``verified``: the user approved a call of this client's MCP session before;
    ``grantable``: the client holds a session, to which an "always allow" is bound."""

    id: str
    path: str
    client: str
    tool: str
    title: str
    code: str
    risk: Risk
    reasons: list[str]
    editable: bool = True
    state: Literal["waiting", "running", "apply"] = "waiting"
    decided: asyncio.Future[Decision] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    stop: Callable[[], Any] | None = None
    cell: OutsideCellChange | None = None
    claimed: bool = False  # a page took the cell change to apply it (one page only)
    verified: bool = False
    grantable: bool = True

    def item(self) -> OutsideApproval:
        found: OutsideApproval = {
            "id": self.id,
            "kind": "approval",
            "state": self.state,
            "client": self.client,
            "tool": self.tool,
            "title": self.title,
            "code": self.code,
            "risk": self.risk,
            "reasons": list(self.reasons),
            "editable": self.editable,
            "verified": self.verified,
            "grantable": self.grantable,
        }
        if self.cell is not None:
            found["cell"] = self.cell
        return found


@dataclass
class Record:
    """An entry waiting to be saved in the notebook's ``qloop_outside`` metadata by a page."""

    id: str
    path: str
    entry: OutsideEntry

    def item(self) -> OutsideRecordItem:
        return {"id": self.id, "kind": "record", "key": OUTSIDE_KEY, "entry": self.entry}


class OutsideBroker:
    """The approval and record items of every notebook, and who polls for them."""

    def __init__(self, page_gap_s: float = 40.0, poll_wait_s: float = POLL_WAIT_S) -> None:
        self.page_gap_s = page_gap_s
        self.poll_wait_s = poll_wait_s
        self._ids = itertools.count(1)
        self._approvals: dict[str, Approval] = {}
        self._records: dict[str, Record] = {}
        self._versions: dict[str, int] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._polling: dict[str, int] = {}  # open polls, by notebook
        self._last_poll: dict[str, float] = {}  # monotonic time a poll of the notebook last ended
        self._grants: dict[tuple[str, str, str], Risk] = {}  # (session, notebook, tool) -> class
        self._confirmed: dict[str, str] = {}  # MCP session -> the client's name, as confirmed

    # --- pages -------------------------------------------------------------------------------

    def shown(self, path: str) -> bool:
        """Whether a page shows the notebook: it polls now, or did within ``page_gap_s``."""
        key = notebook_key(path)
        if self._polling.get(key, 0) > 0:
            return True
        last = self._last_poll.get(key)
        return last is not None and time.monotonic() - last < self.page_gap_s

    def shown_paths(self) -> list[str]:
        return sorted(k for k in set(self._polling) | set(self._last_poll) if self.shown(k))

    async def pending(self, path: str, after: int) -> tuple[int, list[OutsideItem]]:
        """The notebook's items once its version passes ``after`` (or after the poll wait)."""
        key = notebook_key(path)
        self._polling[key] = self._polling.get(key, 0) + 1
        try:
            if self._versions.get(key, 0) == after:  # past it (a restarted server): answer now
                event = self._changed.setdefault(key, asyncio.Event())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), self.poll_wait_s)
            return self._versions.get(key, 0), self.items(key)
        finally:
            self._polling[key] -= 1
            self._last_poll[key] = time.monotonic()

    def items(self, path: str) -> list[OutsideItem]:
        key = notebook_key(path)
        found: list[OutsideItem] = [a.item() for a in self._approvals.values() if a.path == key]
        return found + [r.item() for r in self._records.values() if r.path == key]

    def _bump(self, key: str) -> None:
        self._versions[key] = self._versions.get(key, 0) + 1
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    # --- approvals ---------------------------------------------------------------------------

    def new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._ids)}-{int(time.time() * 1000) % 100_000_000}"

    def add(self, approval: Approval) -> None:
        approval.path = notebook_key(approval.path)
        self._approvals[approval.id] = approval
        self._bump(approval.path)

    def decide(self, item_id: str, decision: Decision) -> bool:
        """Settle a waiting call; False when there is none by that id (decided, gone)."""
        approval = self._approvals.get(item_id)
        if approval is None or approval.decided.done():
            return False
        if approval.state == "running" and not approval.claimed:  # run_code: decided already
            return False
        approval.decided.set_result(decision)
        return True

    def claim(self, item_id: str) -> bool:
        """Let one page apply a cell change: True for the first page that asks, once."""
        approval = self._approvals.get(item_id)
        if approval is None or approval.cell is None or approval.claimed:
            return False
        if approval.state == "running" or approval.decided.done():
            return False
        approval.claimed = True
        if approval.cell.get("op") == "run":  # the page runs the cell now: show it running
            approval.state = "running"
            self._bump(approval.path)
        return True

    def running(self, item_id: str, stop: Callable[[], Any]) -> None:
        approval = self._approvals.get(item_id)
        if approval is not None:
            approval.state, approval.stop = "running", stop
            self._bump(approval.path)

    def stop(self, item_id: str) -> bool:
        approval = self._approvals.get(item_id)
        if approval is None or approval.state != "running" or approval.stop is None:
            return False
        approval.stop()
        return True

    def drop(self, item_id: str) -> None:
        approval = self._approvals.pop(item_id, None)
        if approval is not None:
            if not approval.decided.done():
                approval.decided.cancel()
            self._bump(approval.path)

    # --- records -----------------------------------------------------------------------------

    def add_record(self, path: str, entry: dict[str, Any]) -> str:
        """Hand ``entry`` (``record.entry``) to the notebook's pages: checked as they read it."""
        record = Record(self.new_id("r"), notebook_key(path), ENTRY.validate_python(entry))
        self._records[record.id] = record
        self._bump(record.path)
        return record.id

    def saved(self, item_id: str) -> bool:
        record = self._records.pop(item_id, None)
        if record is None:
            return False
        self._bump(record.path)
        return True

    def unsaved(self, path: str) -> int:
        key = notebook_key(path)
        return sum(1 for r in self._records.values() if r.path == key)

    # --- outside clients and their grants ----------------------------------------------------

    def confirm(self, session: str, name: str) -> None:
        """The user approved a call of the client holding ``session``, as ``name``."""
        self._confirmed[session] = name

    def confirmed(self, session: str | None) -> str | None:
        """The name the user confirmed for the client holding ``session``; None: unverified."""
        return None if session is None else self._confirmed.get(session)

    def grant(self, session: str, path: str, tool: str, risk: Risk) -> None:
        key = (session, notebook_key(path), tool)
        held = self._grants.get(key)
        if held is None or severity(risk) > severity(held):
            self._grants[key] = risk

    def granted(self, session: str, path: str, tool: str, risk: Risk) -> bool:
        held = self._grants.get((session, notebook_key(path), tool))
        return held is not None and severity(risk) <= severity(held)
