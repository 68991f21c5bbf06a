"""Block a running cell until a condition holds, while widget clicks keep being processed.

A cell that waits for an approval click cannot simply sleep: the click arrives as a shell
``comm_msg`` that ipykernel only dispatches once the cell has finished. In ipykernel 7 the
main thread receives every main-shell request through one inproc ZMQ stream. While blocked,
:class:`ShellPump` reads that stream itself: ``comm_open``, ``comm_msg`` and ``comm_close`` are
dispatched at once, and so are ``kernel_info_request`` and ``comm_info_request`` (a page reloaded
while a card waits learns the kernel's status and its widgets, and shows the card again); every
other request (``execute_request``, ``complete_request``, ...) is held and handed back to the
kernel, in arrival order, when the wait ends. Queued cells therefore
run after the waiting cell, as they would after any busy cell.

This relies on private ipykernel and pyzmq attributes; :func:`check_supported` verifies them and
raises :class:`PumpUnavailable` with the missing attribute and the installed versions.

Outside a kernel (plain Python, IPython terminal) or off the kernel's main thread there are no
messages to pump: :func:`wait_until` then sleeps on a :class:`ThreadWaiter`.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import math
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import zmq

from ..errors import QloopError

if TYPE_CHECKING:
    from zmq.eventloop.zmqstream import ZMQStream

__all__ = [
    "PumpUnavailable",
    "ShellPump",
    "ThreadWaiter",
    "Waiter",
    "check_supported",
    "wait_until",
    "waiter",
    "wake",
]

POLL_INTERVAL = 0.05
"""Longest sleep (seconds) between two checks of ``done()`` when nothing wakes the waiter."""

COMM_MSG_TYPES = frozenset({"comm_open", "comm_msg", "comm_close"})
"""Shell requests dispatched while a cell waits; all others are held until the wait ends."""

INFO_MSG_TYPES = frozenset({"kernel_info_request", "comm_info_request"})
"""Requests a connecting frontend sends first, answered while a cell waits."""

_log = logging.getLogger(__name__)


class PumpUnavailable(QloopError, RuntimeError):
    """The running ipykernel lacks an internal attribute the shell pump relies on."""


class Waiter(Protocol):
    """Something a thread can block on until ``done()`` holds."""

    def wait(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``done()`` is true (True) or ``timeout`` seconds pass (False)."""
        ...

    def wake(self) -> None:
        """Make a current :meth:`wait` re-check ``done()`` now; callable from any thread."""
        ...


def _versions() -> str:
    found = []
    for name in ("ipykernel", "pyzmq", "tornado"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _unavailable(what: str) -> PumpUnavailable:
    return PumpUnavailable(
        f"Cannot wait inside a running cell: {what} ({_versions()}). "
        "qloop-kernel supports ipykernel>=7.1,<8."
    )


# Any: an ipykernel internal, whatever that version has at ``path``
def _require(obj: Any, path: str) -> Any:
    """Follow the dotted ``path`` from ``obj``; raise PumpUnavailable at a missing step."""
    current = obj
    walked: list[str] = []
    for name in path.split("."):
        walked.append(name)
        current = getattr(current, name, None)
        if current is None:
            missing = ".".join(walked)
            raise _unavailable(f"ipykernel internal {type(obj).__name__}.{missing} is missing")
    return current


def _main_shell_stream(kernel: Any) -> ZMQStream:
    """The ZMQStream on which the main thread receives main-shell requests (ipykernel 7)."""
    pair_for = _require(kernel, "shell_channel_thread.manager.get_shell_channel_to_subshell_pair")
    stream: ZMQStream | None = getattr(pair_for(None), "to_stream", None)
    if stream is None:
        raise _unavailable("the main-shell socket pair has no to_stream")
    return stream


def check_supported(kernel: Any | None = None) -> None:
    """Raise :class:`PumpUnavailable` unless ``kernel`` has every internal the pump uses.

    ``kernel`` defaults to the running ipykernel; outside a kernel there is nothing to check.
    """
    kernel = kernel if kernel is not None else _running_kernel()
    if kernel is None:
        return
    for path in (
        "session.feed_identities",
        "session.unpack",
        "session.deserialize",
        "shell_handlers",
        "set_parent",
        "get_parent",
        "_parent_ident",
        "_publish_status",
        "shell_channel_thread.parent_thread",
        "shell_channel_thread.manager.get_subshell_to_shell_channel_socket",
    ):
        _require(kernel, path)
    missing = sorted((COMM_MSG_TYPES | INFO_MSG_TYPES) - set(kernel.shell_handlers))
    if missing:
        raise _unavailable(f"the kernel has no shell handler for {', '.join(missing)}")
    stream = _main_shell_stream(kernel)
    for name in ("socket", "io_loop", "on_recv", "flush", "_recv_callback", "_recv_copy"):
        if not hasattr(stream, name):
            raise _unavailable(f"pyzmq internal ZMQStream.{name} is missing")


# Any: ipykernel's kernel, whose internals the pump reads after check_supported
def _running_kernel() -> Any | None:
    """The ipykernel kernel of this process, or None (without importing ipykernel)."""
    kernelbase = sys.modules.get("ipykernel.kernelbase")
    if kernelbase is None or not kernelbase.Kernel.initialized():
        return None
    return kernelbase.Kernel.instance()


class _Waker:
    """A self-pipe (socket pair, so zmq.Poller accepts it on every platform) that ends a poll."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def fileno(self) -> int:
        return self._reader.fileno()

    def wake(self) -> None:
        # A full buffer means a wake-up is already pending.
        with contextlib.suppress(BlockingIOError):
            self._writer.send(b"\0")

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._reader.recv(4096):
                pass


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + max(timeout, 0.0)


def _remaining(deadline: float | None, interval: float) -> float:
    """Seconds to sleep before the next check: at most ``interval``, 0 once the deadline passed."""
    if deadline is None:
        return interval
    return min(interval, max(deadline - time.monotonic(), 0.0))


def _finish_inline(awaitable: Awaitable[Any]) -> None:
    """Run an awaitable that completes without suspending.

    ipykernel 7.4's comm handlers are plain functions; an async handler can still be completed
    here as long as it never waits on the event loop, which is blocked by the waiting cell.
    """
    steps = awaitable.__await__()
    try:
        steps.send(None)
    except StopIteration:
        return
    steps.close()
    raise RuntimeError("an async shell handler waited on the event loop, blocked by the cell")


class ShellPump:
    """Blocks the kernel's main thread while dispatching widget comm messages.

    One pump exists per kernel (:meth:`current`). A :meth:`wait` called while another is active
    on the same thread (for example from a widget callback) pumps the same intercepted stream and
    returns when its own ``done()`` holds; the outermost wait restores the stream and hands the
    held requests back. Inner waits therefore finish before outer ones (a stack).
    """

    _instance: ClassVar[ShellPump | None] = None
    _instance_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, kernel: Any) -> None:
        """Prepare a pump for ``kernel``; prefer :meth:`current`. Raises PumpUnavailable."""
        check_supported(kernel)
        self._kernel = kernel
        channel_thread = kernel.shell_channel_thread
        self._stream = _main_shell_stream(kernel)
        self._reply_socket = channel_thread.manager.get_subshell_to_shell_channel_socket(None)
        self._owner = channel_thread.parent_thread
        self._waker = _Waker()
        self._held: list[list[Any]] = []
        # Handed back by an ended wait and scheduled on the event loop, not yet dispatched: a
        # later wait in the same cell still sees them as queued (notebook/queued.py).
        self._handed_back: list[list[Any]] = []
        self._depth = 0
        self.poll_interval = POLL_INTERVAL

    @classmethod
    def current(cls) -> ShellPump | None:
        """The pump for the running ipykernel, or None outside a kernel.

        Raises :class:`PumpUnavailable` inside a kernel whose internals the pump does not know.
        """
        kernel = _running_kernel()
        if kernel is None:
            return None
        with cls._instance_lock:
            if cls._instance is None or cls._instance._kernel is not kernel:
                cls._instance = cls(kernel)
            return cls._instance

    @property
    def waiting(self) -> bool:
        """True while a :meth:`wait` is active."""
        return self._depth > 0

    def wait(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block the main thread until ``done()`` is true, pumping widget comm messages meanwhile.

        ``done()`` is checked before blocking, after each pumped batch of messages, after each
        :meth:`wake` and at least every ``poll_interval`` seconds. Returns True once it holds,
        False after ``timeout`` seconds. A kernel interrupt raises KeyboardInterrupt after the
        stream's callback is restored and the held requests are handed back, so queued cells
        are aborted by the kernel as usual.
        """
        if threading.current_thread() is not self._owner:
            raise RuntimeError("ShellPump.wait() must be called on the kernel's main thread")
        deadline = _deadline(timeout)
        with self._intercepting():
            return self._pump_until(done, deadline)

    def wake(self) -> None:
        """Make an active :meth:`wait` re-check ``done()`` now. Thread-safe."""
        self._waker.wake()

    def _pump_until(self, done: Callable[[], bool], deadline: float | None) -> bool:
        socket_ = self._stream.socket
        poller = zmq.Poller()
        poller.register(socket_, zmq.POLLIN)
        poller.register(self._waker.fileno(), zmq.POLLIN)
        while not done():
            pause = _remaining(deadline, self.poll_interval)
            if pause <= 0:
                return False
            events = dict(poller.poll(math.ceil(pause * 1000)))
            if self._waker.fileno() in events:
                self._waker.drain()
            if socket_ in events:
                self._stream.flush(zmq.POLLIN)
        return True

    @contextlib.contextmanager
    def _intercepting(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        stream = self._stream
        original, original_copy = stream._recv_callback, stream._recv_copy
        stream.on_recv(self._intercept, copy=False)
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            self._release(original, original_copy)

    def _release(self, original: Callable[[Any], Any] | None, original_copy: bool) -> None:
        """Hand the held requests back in order, then restore the stream's own callback."""
        held, self._held = self._held, []
        if original is not None:
            for frames in held:
                message = [frame.bytes for frame in frames] if original_copy else frames
                self._handed_back.append(frames)
                # Scheduled before the callback is restored, so they precede any newer request.
                self._stream.io_loop.add_callback(self._hand_back, original, frames, message)
        elif held:
            _log.error("Dropped %d shell requests: the stream had no receive callback", len(held))
        self._stream.on_recv(original, copy=original_copy)

    def _hand_back(self, original: Callable[[Any], Any], frames: list[Any], message: Any) -> object:
        """Give one held request to the stream's own callback (the event loop runs this)."""
        with contextlib.suppress(ValueError):
            self._handed_back.remove(frames)
        return original(message)  # ipykernel's coroutine: the loop runs it as a task

    @property
    def queued(self) -> list[list[Any]]:
        """The frames of the requests waiting for this cell that the pump has read: handed back
        by an earlier wait and not yet dispatched, then held by the current one, in order."""
        return [*self._handed_back, *self._held]

    def _intercept(self, frames: list[Any]) -> None:
        if self._msg_type(frames) in COMM_MSG_TYPES | INFO_MSG_TYPES:
            self._dispatch(frames)
        else:
            self._held.append(frames)

    def _msg_type(self, frames: list[Any]) -> str | None:
        """The msg_type from the header alone.

        A full ``session.deserialize`` would record the signature, and the kernel would reject
        the later real dispatch of a held request as "Duplicate Signature".
        """
        if len(frames) < 2:  # ipykernel's single-frame "stop aborting" marker
            return None
        try:
            _, parts = self._kernel.session.feed_identities(frames, copy=False)
            header = self._kernel.session.unpack(parts[1].bytes)
        except Exception:
            return None  # malformed: let the kernel's own dispatch report it
        msg_type = header.get("msg_type") if isinstance(header, dict) else None
        return msg_type if isinstance(msg_type, str) else None

    def _dispatch(self, frames: list[Any]) -> None:
        """Run the kernel's handler for a comm message, parented to it as ipykernel does.

        Like ipykernel's own dispatch, the message gets a busy and an idle status: a widget
        frontend holds back a widget's next state update (the next keystroke in a text box) until
        it sees the idle of the previous one. Then the waiting cell is busy again.
        """
        kernel = self._kernel
        idents, parts = kernel.session.feed_identities(frames, copy=False)
        try:
            msg = kernel.session.deserialize(parts, content=True, copy=False)
        except Exception:
            _log.error("Invalid comm message received while a cell waits", exc_info=True)
            return
        handler = kernel.shell_handlers[msg["header"]["msg_type"]]
        parent = kernel.get_parent("shell")
        parent_ident = kernel._parent_ident["shell"]
        kernel.set_parent(idents, msg, channel="shell")
        kernel._publish_status("busy", "shell")
        try:
            result = handler(self._reply_socket, idents, msg)
            if inspect.isawaitable(result):
                _finish_inline(result)
        except Exception:
            _log.error("Exception in %s handler", msg["header"]["msg_type"], exc_info=True)
        finally:
            kernel._publish_status("idle", "shell")
            kernel.set_parent(parent_ident, parent, channel="shell")
            if parent:
                kernel._publish_status("busy", "shell")


class ThreadWaiter:
    """A :class:`Waiter` on a ``threading.Condition``, for use where no messages need pumping."""

    def __init__(self) -> None:
        """Create a waiter; ``poll_interval`` bounds the time between checks of ``done()``."""
        self._condition = threading.Condition()
        self.poll_interval = POLL_INTERVAL

    def wait(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Block until ``done()`` is true (True) or ``timeout`` seconds pass (False).

        ``done()`` is checked before blocking, after each :meth:`wake` and at least every
        ``poll_interval`` seconds.
        """
        deadline = _deadline(timeout)
        with self._condition:
            while not done():
                pause = _remaining(deadline, self.poll_interval)
                if pause <= 0:
                    return False
                self._condition.wait(pause)
        return True

    def wake(self) -> None:
        """Make every current :meth:`wait` re-check ``done()`` now. Thread-safe."""
        with self._condition:
            self._condition.notify_all()


_thread_waiter = ThreadWaiter()


def waiter() -> Waiter:
    """The waiter for the calling thread: the shell pump on a kernel's main thread, else a
    process-wide :class:`ThreadWaiter`. Raises PumpUnavailable in an unsupported kernel."""
    pump = ShellPump.current()
    if pump is not None and threading.current_thread() is pump._owner:
        return pump
    return _thread_waiter


def wait_until(done: Callable[[], bool], timeout: float | None = None) -> bool:
    """Block until ``done()`` is true (True) or ``timeout`` seconds pass (False).

    In a kernel, widget clicks are processed meanwhile (see :class:`ShellPump`); call
    :func:`wake` after changing what ``done()`` reads to have it re-checked at once.
    """
    return waiter().wait(done, timeout)


def wake() -> None:
    """Make every current :func:`wait_until` re-check its condition now. Thread-safe."""
    pump = ShellPump._instance
    if pump is not None:
        pump.wake()
    _thread_waiter.wake()
