"""The cells the frontend ran, in order: what the drift check needs to know which cell defined what.

Registered when the extension loads, and light: it keeps each cell's id and source as run, in the
kernel's session (the names they define are worked out later, by ``records.drift.CellLedger``, when a
turn needs them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .failures import assist_running, track_failures

if TYPE_CHECKING:
    from ..records.drift import CellLedger
    from .session import KernelSession

MAX_CELLS = 500
MAX_SOURCE_CHARS = 200_000  # a longer cell is kept as its first characters (never analysed)


def track_cells(session: KernelSession) -> None:
    """Note every cell run with a cell id (the frontend's), after it ran."""
    if session.tracking_cells:
        return
    session.tracking_cells = True
    runs = session.cells_run

    def after(result: Any) -> None:
        info = getattr(result, "info", None)
        cell_id, source = getattr(info, "cell_id", None), getattr(info, "raw_cell", None)
        if assist_running(session.shell):  # the page's Fix or Edit of a cell: not a run of it
            return
        if isinstance(cell_id, str) and cell_id and isinstance(source, str):
            runs.append((cell_id, source[:MAX_SOURCE_CHARS]))
            del runs[:-MAX_CELLS]

    session.shell.events.register("post_run_cell", after)
    track_failures(
        session.shell, session.failed_cells
    )  # the cells that failed: what %agent fix works from


def cell_ledger(session: KernelSession) -> CellLedger:
    """Which cell last defined each variable, from the cells run so far."""
    from ..records.drift import CellLedger

    ledger = CellLedger()
    for cell_id, source in session.cells_run:
        ledger.ran(cell_id, source)
    return ledger
