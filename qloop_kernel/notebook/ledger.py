"""The cells the frontend ran, in order: what the drift check needs to know which cell defined what.

Registered when the extension loads, and light: it keeps each cell's id and source as run (the
names they define are worked out later, by ``records.drift.CellLedger``, when a turn needs them).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..records.drift import CellLedger

MAX_CELLS = 500
MAX_SOURCE_CHARS = 200_000  # a longer cell is kept as its first characters (never analysed)

_runs: weakref.WeakKeyDictionary[Any, list[tuple[str, str]]] = weakref.WeakKeyDictionary()


def track_cells(shell: Any) -> None:
    """Note every cell run with a cell id (the frontend's), after it ran."""
    if shell in _runs:
        return
    runs: list[tuple[str, str]] = []
    _runs[shell] = runs

    def after(result: Any) -> None:
        info = getattr(result, "info", None)
        cell_id, source = getattr(info, "cell_id", None), getattr(info, "raw_cell", None)
        if isinstance(cell_id, str) and cell_id and isinstance(source, str):
            runs.append((cell_id, source[:MAX_SOURCE_CHARS]))
            del runs[:-MAX_CELLS]

    shell.events.register("post_run_cell", after)


def cells_run(shell: Any) -> list[tuple[str, str]]:
    """(cell id, source) of the cells run since the extension loaded, oldest first."""
    return _runs.get(shell, [])


def cell_ledger(shell: Any) -> CellLedger:
    """Which cell last defined each variable, from the cells run so far."""
    from ..records.drift import CellLedger

    ledger = CellLedger()
    for cell_id, source in cells_run(shell):
        ledger.ran(cell_id, source)
    return ledger
