"""The notebook's grants: read from and saved into the notebook's metadata through the ``qloop`` comm.

The kernel never reads the .ipynb. When an agent cell (or ``%agent grants``) runs from a frontend
connection it has not heard from, it opens a comm to the ``qloop`` target with a ``hello``; the
JupyterLab extension answers with the notebook's path and its ``qloop_grants`` metadata, and the
kernel waits for that answer (briefly, pumping the shell like an approval card does). Only the
answer from the connection that sent the running cell counts: another notebook on the same kernel
answers too. Grants signed by this user for this notebook apply; others are kept only to be shown.
Saving sends ``set_notebook_metadata`` with the running cell's id, so only that cell's notebook
writes it. Without the extension nothing is saved and "this notebook" is not offered.
"""

from __future__ import annotations

import itertools
import logging
import threading
from typing import Any

from ..policy.grants import NOTEBOOK_KEY, Grant, Grants, NotebookGrants, open_notebook_grants
from ..policy.grants import seal_notebook_grants as seal
from .cell import CellContext
from .pump import wait_until, wake

log = logging.getLogger("qloop.grants")
COMM_TARGET = "qloop"
ANSWER_TIMEOUT_S = 2.0  # JupyterLab answers in milliseconds; a frontend without the extension never


class NotebookGrantStore:
    """Loads the open notebook's grants into ``grants`` and saves them back when they change."""

    def __init__(self, grants: Grants, *, timeout_s: float = ANSWER_TIMEOUT_S) -> None:
        self.grants = grants
        self.timeout_s = timeout_s
        self.path: str | None = None  # the notebook's path, as its frontend reports it
        self._client: str | None = None  # the frontend connection whose notebook is loaded
        self._asked = False
        self._cell_id: str | None = None
        self._comm: Any = None
        self._ids = itertools.count(1)
        self._answers: dict[str, dict[str, Any]] = {}  # acks by request id
        self._waiting: dict[str, dict[str, Any]] = {}  # requests sent, by id, until answered
        self._closed = threading.Event()  # the comm of the loaded notebook was closed
        self.operations: frozenset[str] = frozenset()  # what the frontend's extension answers
        grants.on_notebook_change = self._save

    @property
    def available(self) -> bool:
        """True when a frontend answered: grants for "this notebook" can be saved."""
        return self.path is not None

    def load(self, cell: CellContext) -> NotebookGrants | None:
        """Load the notebook of ``cell``'s frontend if not done yet; returns what was newly
        loaded (to be shown), or None."""
        if not cell.interactive:
            return None
        self._cell_id = cell.cell_id
        if self._asked and cell.client == self._client:
            return None
        self._asked, self._client = True, cell.client
        answer = self._hello(cell.client)
        path = answer.get("notebook_path") if answer else None
        if not isinstance(path, str) or not path:
            self.path = None
            self.grants.load_notebook(NotebookGrants())
            return None
        self.path = path
        saved = open_notebook_grants(answer.get("notebook_grants") if answer else None, path)
        self.grants.load_notebook(saved)
        return saved

    def _hello(self, client: str | None) -> dict[str, Any] | None:
        """The frontend's answer to a ``hello`` on a new comm, or None (no extension, timeout)."""
        from comm import create_comm

        request_id = f"g{next(self._ids)}"
        self._answers, self._closed = {}, threading.Event()
        self.operations = frozenset()
        try:
            comm = create_comm(
                target_name=COMM_TARGET, data={"op": "hello", "request_id": request_id}
            )
        except Exception as exc:  # no frontend to talk to
            log.info("qloop comm unavailable (%s); notebook grants are not loaded", exc)
            return None
        closed = self._closed

        def on_close(msg: Any) -> None:
            closed.set()
            wake()

        comm.on_msg(self._on_msg)
        comm.on_close(on_close)
        wait_until(lambda: request_id in self._answers or closed.is_set(), self.timeout_s)
        self._comm = None if closed.is_set() else comm
        answer = self._answers.pop(request_id, None)
        operations = answer.get("operations") if answer else None
        if isinstance(operations, list):
            self.operations = frozenset(str(o) for o in operations)
        return answer

    def _on_msg(self, msg: dict[str, Any]) -> None:
        """An ack from a frontend, kept when it answers a request of ours: a ``hello`` from the
        connection that sent the running cell (every notebook view on this kernel answers it); a
        request naming the running cell from any page (only the view holding the cell answers
        ``ok``: a reloaded page, or a second page under real-time collaboration). A page that
        took the comm over (``attached``: a reload) is sent again what still waits for an answer."""
        data = msg.get("content", {}).get("data", {})
        session = msg.get("header", {}).get("session")
        if isinstance(data, dict) and data.get("op") == "attached":
            self._send_again()
            return
        if not isinstance(data, dict) or not data.get("ok"):
            return
        request_id = str(data.get("request_id"))
        if request_id in self._waiting or self._client is None or session == self._client:
            self._answers[request_id] = data
            wake()

    def _send_again(self) -> None:
        comm = self._comm
        for payload in list(self._waiting.values()):
            try:
                comm.send(payload)
            except Exception as exc:  # a closed comm: the wait ends with it
                log.info("qloop comm unavailable (%s)", exc)
                return

    def request(
        self, op: str, timeout_s: float | None = 10.0, **fields: Any
    ) -> dict[str, Any] | None:
        """Ask the frontend of the loaded notebook ``op`` (one it listed in its ``hello``); its
        answer, or None (no such frontend, a refusal, the comm closed, or no answer in
        ``timeout_s``; None: wait for as long as the user takes, as for a proposal)."""
        request_id = self.send(op, **fields)
        return None if request_id is None else self.answer(request_id, timeout_s)

    def send(self, op: str, **fields: Any) -> str | None:
        """Send request ``op`` without waiting: its id, for :meth:`answer` (None: not sent)."""
        comm = self._comm
        if comm is None or op not in self.operations or self._closed.is_set():
            return None
        request_id = f"g{next(self._ids)}"
        payload = {"op": op, "request_id": request_id, **fields}
        try:
            comm.send(payload)
        except Exception as exc:  # a closed comm
            log.info("qloop comm unavailable (%s)", exc)
            self._comm = None
            return None
        self._waiting[request_id] = payload
        return request_id

    def forget(self, request_id: str) -> None:
        """Stop waiting for the answer to a request (it is not sent again to a new page)."""
        self._waiting.pop(request_id, None)
        self._answers.pop(request_id, None)

    def answer(self, request_id: str, timeout_s: float | None = 10.0) -> dict[str, Any] | None:
        """The answer to a request :meth:`send` sent, waiting for it up to ``timeout_s`` (None:
        as long as it takes); None when the comm closed or no answer came."""
        if request_id not in self._waiting:
            return self._answers.pop(request_id, None)
        closed = self._closed
        try:
            wait_until(lambda: request_id in self._answers or closed.is_set(), timeout_s)
        finally:
            self._waiting.pop(request_id, None)
        return self._answers.pop(request_id, None)

    def _save(self, grants: tuple[Grant, ...]) -> None:
        """Write the notebook's grants into its metadata, signed (only the running cell's
        notebook takes the write)."""
        if self.path is None or self._cell_id is None or self._comm is None:
            log.info("notebook grants not saved: no frontend holds this notebook")
            return
        payload = {
            "op": "set_notebook_metadata",
            "request_id": f"g{next(self._ids)}",
            "cell_id": self._cell_id,
            "key": NOTEBOOK_KEY,
            "value": seal(grants, self.path),
        }
        try:
            self._comm.send(payload)
        except Exception as exc:  # a closed comm: the grant still holds for this session
            log.info("notebook grants not saved (%s)", exc)
            self._comm = None

    def use_cell(self, cell: CellContext) -> None:
        """Remember the running cell: a save goes to the notebook that holds it."""
        if cell.interactive:
            self._cell_id = cell.cell_id


def notebook_notice(saved: NotebookGrants) -> tuple[str, str] | None:
    """What to tell the user about a newly opened notebook's grants: (text, kind), or None."""
    if not saved.grants:
        return None
    listed = "; ".join(g.what() for g in saved.grants)
    if saved.own:
        return (
            f"this notebook's saved grants apply: {listed} run without asking "
            "(`%agent grants` lists them, `%agent revoke TOOL|all` removes them)",
            "warn",
        )
    return (
        f"this notebook holds approval grants that do not apply: {saved.problem} ({listed}); "
        "these calls still ask. `%agent revoke all` removes them from the notebook",
        "warn",
    )
