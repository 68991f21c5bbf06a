"""Saving records into the notebook: the ``qloop`` comm to the labextension, and the output mirror.

The kernel never writes the .ipynb. The labextension sets ``cell.metadata.qloop`` from the comm; the
mirror (a display_data with the record as JSON, updated in place) keeps the record in headless runs and in
frontends without the extension.

A running turn's record is sent one way only (the comm when a frontend holds the cell, else the mirror)
and unsigned; the finished record, sealed, goes both ways once. So a cell's traffic stays about twice
its final record, however long the turn.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Any

from IPython.display import display

from ..records import MIME_TYPE, CellRecord, unsigned_json
from ..records.html import to_html
from ..records.text import to_markdown
from ..text import truncate

if TYPE_CHECKING:
    from comm.base_comm import BaseComm

log = logging.getLogger("qloop.store")
COMM_TARGET = "qloop"
TEXT_FALLBACK_CHARS = (
    20_000  # the mirror's plain-text transcript, for frontends without the extension
)


class _Bridge:
    """One comm per kernel to the frontend; replies (acks) are logged, never waited for."""

    def __init__(self) -> None:
        self._comm: BaseComm | None = None
        self._ids = itertools.count(1)

    def send(self, payload: dict[str, Any]) -> None:
        payload = {**payload, "request_id": f"r{next(self._ids)}"}
        try:
            self._open().send(payload)
        except Exception as exc:  # a closed or refused comm: the mirror still holds the record
            log.info("qloop comm unavailable (%s); the output mirror keeps the record", exc)
            self._comm = None

    def _open(self) -> BaseComm:
        if self._comm is None or getattr(self._comm, "_closed", False):
            from comm import create_comm

            hello = {"op": "hello", "request_id": f"r{next(self._ids)}"}
            self._comm = create_comm(target_name=COMM_TARGET, data=hello)
            self._comm.on_msg(self._on_msg)
        return self._comm

    def _on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        if isinstance(data, dict) and data.get("ok") is False:
            # Every notebook view on this kernel answers; only the one holding the cell saves it.
            log.info("a frontend did not save the record: %s", data.get("error"))


_bridge = _Bridge()


class NotebookStore:
    """RecordStore for one agent cell."""

    def __init__(
        self, cell_id: str | None, *, to_frontend: bool = True, live_client: str | None = None
    ) -> None:
        self.cell_id = cell_id
        self.to_frontend = to_frontend  # False in headless runs: no frontend holds the notebook
        # The extension folds the mirror while this frontend connection shows the live output.
        self.metadata: dict[str, dict[str, Any]] = (
            {MIME_TYPE: {"live_client": live_client}} if live_client else {}
        )
        self._handle: Any = None

    def save(self, record: CellRecord) -> None:
        if record.status == "running":
            self._save_running(record)
        else:
            self.publish(record.to_json(), record)

    def keep(self, record: CellRecord) -> None:
        if not record.is_own():  # only the kernel can check the signature: tell the transcript view
            self.metadata = {MIME_TYPE: {**self.metadata.get(MIME_TYPE, {}), "received": True}}
        self.publish(record.model_dump(mode="json"), record)

    def publish(self, data: dict[str, Any], record: CellRecord) -> None:
        """Show ``data`` (an already sealed record) in the mirror and send it to the frontend."""
        self._show(data, record)
        self._send(data)

    def _save_running(self, record: CellRecord) -> None:
        data = unsigned_json(record)
        if self._handle is None:  # the turn starts: the mirror's place in the cell, and metadata
            self.publish(data, record)
        elif self.cell_id and self.to_frontend:
            self._send(data)
        else:
            self._show(data, record)

    def _show(self, data: dict[str, Any], record: CellRecord) -> None:
        # Viewers without the extension show the HTML, rendered and sanitized here: no text/markdown,
        # which a frontend would render from record text (the model's answer, code) as trusted.
        received = bool(self.metadata.get(MIME_TYPE, {}).get("received"))
        text = truncate(to_markdown(record), TEXT_FALLBACK_CHARS)
        bundle = {
            MIME_TYPE: data,
            "text/html": to_html(record, received=received),
            "text/plain": text,
        }
        if self._handle is None:
            self._handle = display(bundle, raw=True, metadata=self.metadata, display_id=True)
        else:
            self._handle.update(bundle, raw=True, metadata=self.metadata)

    def _send(self, data: dict[str, Any]) -> None:
        if self.cell_id and self.to_frontend:
            _bridge.send(
                {"op": "set_metadata", "cell_id": self.cell_id, "key": "qloop", "value": data}
            )
