"""Grants: calls that run without a card, per tool and risk class, for a cell, the session or the notebook.

A grant is what "Always allow" (or ``%agent allow``) leaves behind. It names a tool and, for a tool whose
calls are classified (``run_code``), a risk class: a grant for a class covers steps of that class and of
the milder ones, except that ``destructive`` and ``external`` steps need a grant of their own class, so
granting ``write`` never grants deleting data or reaching outside the kernel. Scopes:

- ``cell``: later calls in the same agent cell (its re-runs too), until the kernel restarts;
- ``session``: every agent cell of this kernel, until ``%agent reset``, a revoke or a restart;
- ``notebook``: saved in the notebook's metadata, signed with this user's key (like records), so a
  notebook received from someone else brings no grants with it.

"This call" is the plain Approve button: it leaves no grant.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias, get_args

from ..messages import now_iso
from ..records import signing
from .admin import AdminError, admin_floor
from .risk import RISKS, Risk, severity

Scope: TypeAlias = Literal["cell", "session", "notebook"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
SCOPE_TEXT: dict[Scope, str] = {
    "cell": "this cell",
    "session": "this session",
    "notebook": "this notebook",
}
# Classes a grant of a milder class never covers: each needs a grant of its own.
OWN_GRANT_ONLY: frozenset[Risk] = frozenset({"destructive", "external"})
NOTEBOOK_KEY: Final = "qloop_grants"  # the notebook-level metadata key the frontend writes
NOTEBOOK_VERSION: Final = 1


def covers(granted: Risk | None, risk: Risk | None) -> bool:
    """Whether a grant for class ``granted`` (None: every call) covers a step of class ``risk``."""
    if granted is None:
        return True
    if risk is None:  # a call without a class is covered only by a grant without one
        return False
    if risk in OWN_GRANT_ONLY:
        return risk == granted
    return severity(risk) <= severity(granted)


def covered_classes(granted: Risk | None) -> tuple[Risk, ...]:
    """The classes a grant for ``granted`` covers, mildest first."""
    return tuple(r for r in RISKS if covers(granted, r))


@dataclass(frozen=True)
class Grant:
    """One grant: a tool, a class (None for every call), a scope, and for ``cell`` the cell."""

    tool: str
    risk: Risk | None
    scope: Scope
    cell_id: str | None = None
    granted_at: str = field(default="", compare=False)

    def applies(self, tool: str, risk: Risk | None, cell_id: str | None) -> bool:
        """Whether a call of ``tool`` classed ``risk`` in cell ``cell_id`` runs under this grant."""
        if tool != self.tool or not covers(self.risk, risk):
            return False
        return self.scope != "cell" or (cell_id is not None and cell_id == self.cell_id)

    def what(self, held: Collection[Risk] = ()) -> str:
        """What runs without asking: "run_code 'read' and 'write' steps", "my_tool calls"; the
        classes in ``held`` (the admin floor's ``always_ask``) never do, and are left out ("" when
        nothing is left)."""
        if self.risk is None:
            return "" if "unknown" in held else f"{self.tool} calls"
        names = [f"'{r}'" for r in covered_classes(self.risk) if r not in held]
        if not names:
            return ""
        joined = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        return f"{self.tool} {joined} steps"

    def describe(self, held: Collection[Risk] = ()) -> str:
        """One line for ``%agent grants`` and the status line ("" for a grant ``held`` voids)."""
        what = self.what(held)
        where = SCOPE_TEXT[self.scope]
        if self.scope == "cell" and self.cell_id:
            where += f" ({self.cell_id[:8]})"
        return f"{what}, {where}" if what else ""

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "risk": self.risk, "granted_at": self.granted_at}


@dataclass(frozen=True)
class NotebookGrants:
    """What a notebook's metadata held: its grants, and whether this user's kernel signed them."""

    grants: tuple[Grant, ...] = ()
    own: bool = True
    problem: str = ""  # why the saved grants do not apply ("" when they do or there are none)

    @property
    def received(self) -> tuple[Grant, ...]:
        """Saved grants that do not apply (not signed by this user, or for another notebook)."""
        return () if self.own else self.grants


class Grants:
    """The grants of one kernel: cell and session grants, and the grants of the open notebook.

    Iterating gives every grant that applies. ``on_notebook_change`` is called with the notebook's
    grants whenever they change, so the notebook layer can save them; the notebook's received
    grants (``notebook.received``) are kept only to be shown.
    """

    def __init__(self) -> None:
        self._items: list[Grant] = []
        self.notebook = NotebookGrants()
        self.on_notebook_change: Callable[[tuple[Grant, ...]], None] | None = None

    def __iter__(self) -> Iterator[Grant]:
        return iter(tuple(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def covering(self, tool: str, risk: Risk | None, cell_id: str | None) -> Grant | None:
        """The grant under which this call runs without asking, if any."""
        return next((g for g in self._items if g.applies(tool, risk, cell_id)), None)

    def add(self, grant: Grant) -> Grant:
        """Add a grant (stamped now); one it makes redundant in the same scope goes."""
        made = replace(grant, granted_at=grant.granted_at or now_iso())
        kept = [g for g in self._items if not _redundant(g, made)]
        self._items = [*kept, made]
        if made.scope == "notebook":
            self._notebook_changed()
        return made

    def revoke(self, tool: str | None = None) -> list[Grant]:
        """Remove the grants of ``tool`` (every grant when None), the notebook's received ones
        too; returns what was removed."""
        gone = [g for g in self._items if tool is None or g.tool == tool]
        self._items = [g for g in self._items if g not in gone]
        received = [g for g in self.notebook.received if tool is None or g.tool == tool]
        if received:
            kept = tuple(g for g in self.notebook.grants if g not in received)
            self.notebook = replace(self.notebook, grants=kept)
        if received or any(g.scope == "notebook" for g in gone):
            self._notebook_changed()
        return gone + received

    def clear_session(self) -> list[Grant]:
        """Remove the cell and session grants (``%agent reset``); the notebook's stay."""
        gone = [g for g in self._items if g.scope != "notebook"]
        self._items = [g for g in self._items if g.scope == "notebook"]
        return gone

    def load_notebook(self, saved: NotebookGrants) -> None:
        """Take the grants of a newly opened notebook (only those it holds signed by this user)."""
        self._items = [g for g in self._items if g.scope != "notebook"]
        if saved.own:
            self._items.extend(saved.grants)
        self.notebook = saved

    def in_notebook(self) -> tuple[Grant, ...]:
        return tuple(g for g in self._items if g.scope == "notebook")

    def snapshot(self) -> tuple[tuple[Grant, ...], NotebookGrants]:
        """Everything that decides what runs without asking, to compare and to put back."""
        return tuple(self._items), self.notebook

    def restore(self, snapshot: tuple[tuple[Grant, ...], NotebookGrants]) -> None:
        before = self.in_notebook()
        self._items, self.notebook = list(snapshot[0]), snapshot[1]
        if self.in_notebook() != before:
            self._notebook_changed()

    def summary(self, cell_id: str | None = None, held: Collection[Risk] | None = None) -> str:
        """The grants that apply in ``cell_id``, in one short line ("" when there are none),
        without the classes in ``held``, which a person approves at every step whatever the grants
        (None: the admin floor's ``always_ask``, read now)."""
        held = _floor_held() if held is None else held
        here = [g for g in self._items if g.scope != "cell" or g.cell_id == cell_id]
        shown = [line for g in here if (line := g.describe(held))]
        if not shown:
            return ""
        return "allowed without asking: " + "; ".join(shown)

    def _notebook_changed(self) -> None:
        if self.on_notebook_change is not None:
            self.on_notebook_change(self.in_notebook())


def _floor_held() -> frozenset[Risk]:
    try:
        return admin_floor().always_asked()
    except AdminError:  # no turn runs until the admin fixes the file; nothing to leave out
        return frozenset()


def _redundant(old: Grant, new: Grant) -> bool:
    """An old grant the new one makes unnecessary: same tool and scope (and cell), covered."""
    same_place = (old.tool, old.scope, old.cell_id) == (new.tool, new.scope, new.cell_id)
    return same_place and (old.risk == new.risk or _covers_all(new.risk, old.risk))


def _covers_all(new: Risk | None, old: Risk | None) -> bool:
    return all(covers(new, r) for r in covered_classes(old)) if old is not None else new is None


# --- saved in the notebook ----------------------------------------------------------------------


def seal_notebook_grants(grants: Sequence[Grant], notebook_path: str) -> dict[str, Any]:
    """The notebook metadata value for ``grants``: versioned and signed with this user's key.

    The signature covers the notebook's path too: the same metadata copied into another notebook
    grants nothing there.
    """
    entries = [g.to_json() for g in grants]
    body = _body(entries, notebook_path)
    return {"version": NOTEBOOK_VERSION, "grants": entries, "signature": signing.sign(body)}


def open_notebook_grants(data: object, notebook_path: str) -> NotebookGrants:
    """The grants a notebook's metadata holds, and whether they apply (signed by this user for
    this notebook). Malformed data holds no grants."""
    if data is None:
        return NotebookGrants()
    if not isinstance(data, Mapping) or data.get("version") != NOTEBOOK_VERSION:
        return NotebookGrants(own=False, problem="the saved grants are not in a format this reads")
    entries = data.get("grants")
    if not isinstance(entries, list):
        return NotebookGrants(own=False, problem="the saved grants are not a list")
    grants = tuple(g for g in (_grant_of(e) for e in entries) if g is not None)
    signature = data.get("signature")
    if not isinstance(signature, str) or not signing.verify(
        signature, _body(entries, notebook_path)
    ):
        return NotebookGrants(
            grants,
            own=False,
            problem="they were not saved by your kernel for this notebook (received, copied or "
            "edited)",
        )
    return NotebookGrants(grants)


def _grant_of(entry: object) -> Grant | None:
    if not isinstance(entry, Mapping):
        return None
    tool, risk, at = entry.get("tool"), entry.get("risk"), entry.get("granted_at", "")
    if not isinstance(tool, str) or not tool or (risk is not None and risk not in RISKS):
        return None
    return Grant(tool, risk, "notebook", None, at if isinstance(at, str) else "")


def _body(entries: Iterable[Mapping[str, Any]], notebook_path: str) -> bytes:
    payload = {"grants": list(entries), "notebook": notebook_path, "version": NOTEBOOK_VERSION}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
