"""The agent cells queued behind the running one (Run All), read while the replay card waits.

Requests that wait behind the running cell are in one of three places: read by ipykernel before the
cell started (each a task waiting for the main shell's lock), arriving while the cell blocks (held by
the pump, ``pump.py``), or held by an earlier wait of the same cell and handed back to the kernel's
event loop, which has not run them yet (the cell still holds it). A replay card looks at all three so
that one approval covers every saved agent cell of a Run All. Only the header, metadata and content frames of a waiting request are unpacked: its signature
is not checked or recorded here, so the kernel's own dispatch of the request later is unaffected.
"""

from __future__ import annotations

import asyncio
import inspect
from dataclasses import dataclass
from typing import Any

from .pump import PumpUnavailable, ShellPump

QUEUE_WAIT_S = 0.3  # Run All sends its requests at once: they are in the socket by then


@dataclass(frozen=True)
class QueuedCell:
    cell_id: str
    code: str
    saved: Any  # the cell's saved qloop metadata, unvalidated


def queued_agent_cells(timeout: float = QUEUE_WAIT_S) -> list[QueuedCell]:
    """The ``%%agent`` cells with saved metadata whose requests wait behind this cell."""
    try:
        pump = ShellPump.current()
    except PumpUnavailable:
        return []
    if pump is None:
        return []
    found: list[QueuedCell] = []

    def look() -> bool:
        found[:] = _agent_cells(pump)
        return False  # keep collecting until the timeout: requests may still be arriving

    pump.wait(look, timeout=timeout)
    return found


def _agent_cells(pump: Any) -> list[QueuedCell]:
    kernel = pump._kernel
    running = ((kernel.get_parent() or {}).get("header") or {}).get("msg_id")
    # ipykernel's waiting tasks (private, read on purpose) and the requests the pump has read.
    waiting = [*_waiting_tasks(kernel), *pump.queued]
    found = []
    seen = {running}
    for frames in waiting:
        unpacked = _unpack(kernel.session, frames)
        if unpacked is None or unpacked[0].get("msg_id") in seen:
            continue
        seen.add(unpacked[0].get("msg_id"))
        header, metadata, content = unpacked
        code = content.get("code")
        if header.get("msg_type") != "execute_request" or not isinstance(code, str):
            continue
        cell_id = metadata.get("cellId")
        if isinstance(cell_id, str) and code.lstrip().startswith("%%agent"):
            found.append(
                (str(header.get("date", "")), QueuedCell(cell_id, code, metadata.get("qloop")))
            )
    return [cell for _, cell in sorted(found, key=lambda item: item[0])]


def _unpack(
    session: Any, frames: Any
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]] | None:
    try:
        _, parts = session.feed_identities(frames, copy=False)
        header, metadata, content = (session.unpack(parts[i].bytes) for i in (1, 3, 4))
    except Exception:  # not a message this reader understands: it is simply not listed
        return None
    if not all(isinstance(part, dict) for part in (header, metadata, content)):
        return None
    return header, metadata, content


def _waiting_tasks(kernel: Any) -> list[Any]:
    """The frames of shell requests ipykernel read already, each waiting in a ``shell_main`` task."""
    loop = getattr(getattr(kernel, "io_loop", None), "asyncio_loop", None)
    if loop is None:
        return []
    frames = []
    for task in asyncio.all_tasks(loop):
        coro: Any = task.get_coro()
        name = getattr(getattr(coro, "cr_code", None), "co_name", "")
        local = coro.cr_frame.f_locals if getattr(coro, "cr_frame", None) is not None else {}
        if name == "shell_main" and local.get("msg") is not None:
            frames.append(local["msg"])
        elif name == "run_in_context" and inspect.getcoroutinestate(coro) == "CORO_CREATED":
            args = local.get("args") or ()  # read, not started: its shell_main task is not made yet
            if args:
                frames.append(args[-1])
    return frames
