"""Which cell is running: what the frontend sent with the execute request, and that cell's store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from IPython.core.error import UsageError

from ..errors import QloopError
from ..notebook_view import CELLS_KEY, NOTEBOOK_VIEW_KEY
from .failures import assist_of
from .store import NotebookStore


class AgentError(QloopError, UsageError):
    """A turn ended with a fatal error: one line, no traceback, and "Run All" stops."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows only the exact UsageError class without a traceback; this hook is how an
        # exception class chooses its own rendering.
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class CellContext:
    """What the frontend sent with the execute request."""

    cell_id: str | None
    saved: Any  # the cell's saved ``qloop`` metadata, unvalidated
    headless: bool = False  # sent by `qloop run`: a cell id, but nobody to click
    client: str | None = None  # the frontend connection that sent the request (header.session)
    notebook: Any = None  # `qloop run`: the view of the notebook it executes (notebook_view.py)
    cells: Any = None  # `qloop run`: every cell's type and whole source (cell_runs.CELLS_KEY)
    assist: str | None = None  # the page's Fix, Explain or Edit of this cell (ASSIST_KEY), or None

    @property
    def interactive(self) -> bool:
        return self.cell_id is not None and not self.headless


def current_cell(shell: Any) -> CellContext:
    kernel = getattr(shell, "kernel", None)
    parent = kernel.get_parent() if kernel is not None and hasattr(kernel, "get_parent") else {}
    metadata = (parent or {}).get("metadata") or {}
    cell_id = metadata.get("cellId")
    client = ((parent or {}).get("header") or {}).get("session")
    return CellContext(
        cell_id if isinstance(cell_id, str) and cell_id else None,
        metadata.get("qloop"),
        headless=bool(metadata.get("qloopHeadless")),
        client=client if isinstance(client, str) else None,
        notebook=metadata.get(NOTEBOOK_VIEW_KEY) if metadata.get("qloopHeadless") else None,
        cells=metadata.get(CELLS_KEY) if metadata.get("qloopHeadless") else None,
        assist=assist_of(metadata),
    )


def store_for(cell: CellContext) -> NotebookStore:
    """The record store of a cell: to the frontend and folded next to live output when interactive."""
    if cell.assist is not None:  # the mirror only: the page saves it beside the cell's own record
        return NotebookStore(cell.cell_id, to_frontend=False, live_client=cell.client)
    if cell.interactive:
        return NotebookStore(cell.cell_id, live_client=cell.client)
    return NotebookStore(cell.cell_id, to_frontend=False)
