"""A waiting approval card that a reloaded page can find and show again.

While a card waits, the kernel keeps a ``qloop.waiting`` comm open whose only job is to say which
cell waits and which widget is its card. A page that connects later (a reload, a second tab) does
not get the cell's earlier output; its extension lists the kernel's comms (``comm_info_request``,
answered while the cell waits, see :mod:`.pump`), sends ``{"op": "describe"}`` on each waiting comm
and shows the card widget in that cell again, so the click that ends the wait is one click away.
The comm closes when the card is decided.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from comm.base_comm import BaseComm

log = logging.getLogger("qloop.waiting")
WAITING_TARGET = "qloop.waiting"


def describe(cell_id: str, widget: Any) -> dict[str, Any]:
    """What a frontend needs to show the card again: the cell and the card's widget model."""
    return {"op": "waiting", "cell_id": cell_id, "model_id": widget.model_id}


@contextlib.contextmanager
def announced(cell_id: str | None, widget: Any) -> Iterator[None]:
    """Keep the ``qloop.waiting`` comm open while the body waits at the card ``widget``.

    Without a cell id (headless, a frontend that sends none) there is no cell to show it in:
    nothing is announced. A comm that cannot open never keeps the card from waiting.
    """
    comm = _open(cell_id, widget) if cell_id else None
    try:
        yield
    finally:
        if comm is not None:
            with contextlib.suppress(Exception):
                comm.close()


def _open(cell_id: str, widget: Any) -> BaseComm | None:
    try:
        from comm import create_comm

        comm = create_comm(target_name=WAITING_TARGET, data=describe(cell_id, widget))
    except Exception as exc:
        log.info("cannot announce the waiting card (%s)", exc)
        return None

    def answer(msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data", {})
        if isinstance(data, dict) and data.get("op") == "describe":
            comm.send(describe(cell_id, widget))

    comm.on_msg(answer)
    return comm
