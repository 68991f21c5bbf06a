"""MCP connections on one background event-loop thread per kernel session.

The kernel's main thread runs tools; the SDK's client is async. Each :class:`Connection` holds its
transport and ``ClientSession`` open in one task on the :class:`LoopThread` (anyio contexts must be
left by the task that entered them); the main thread submits calls and waits on their futures in
short slices, so a timeout, a server that hangs or the Stop button ends the wait, and the call is
cancelled on the loop.

A stdio server's stderr goes into a :class:`StderrRing` (its last ``STDERR_KEEP_BYTES``, read from
a pipe), never to the cell or to the model: ``%agent mcp`` shows it, redacted and marked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO, TypeVar

from ..errors import QloopError
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp import ClientSession

    # A private module on purpose: the SDK names its transports' streams type only there.
    from mcp.client._transport import TransportStreams
    from mcp_types import CallToolResult

T = TypeVar("T")
CONNECT_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 8.0
PING_TIMEOUT_S = 3.0
_SLICE_S = 0.05  # the main thread's wait is cut in slices: signals (Stop, timeouts) arrive between
STDERR_KEEP_BYTES = 16 * 1024  # of a stdio server's stderr, the end kept for `%agent mcp`
_READ_BYTES = 64 * 1024

State = Literal["not started", "connecting", "connected", "failed", "disconnected", "stopped"]


class McpCallError(QloopError):
    """A server could not be reached or did not answer; the message says which and why."""


class LoopThread:
    """An asyncio event loop on a daemon thread, started on first use."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._thread is None or not self._thread.is_alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="qloop-mcp", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop())

    def wait(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coro`` on the loop and wait at most ``timeout`` seconds; an exception raised in
        the waiting thread (KeyboardInterrupt, the Stop button's) cancels it and propagates."""
        future = self.submit(coro)
        try:
            return wait_future(future, timeout)
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=2)
            if not thread.is_alive():
                loop.close()


class StderrRing:
    """The end of what a server's processes wrote to stderr: at most ``keep`` bytes are held,
    whatever they write. Each process gets its own pipe (:meth:`pipe`), read by a daemon thread
    until the process and every copy of the pipe's write end are gone."""

    def __init__(self, keep: int = STDERR_KEEP_BYTES) -> None:
        self.keep = keep
        self.total = 0  # bytes written, kept or not
        self._data = bytearray()
        self._lock = threading.Lock()

    def pipe(self, name: str) -> TextIO:
        """A new write end for one process's stderr; close it once the process has it."""
        read, write = os.pipe()
        if self.total:
            self._feed(b"\n[qloop: the server was started again]\n")
        reader = threading.Thread(target=self._read, args=(read,), name=f"qloop-mcp-stderr-{name}")
        reader.daemon = True
        reader.start()
        return os.fdopen(write, "w", encoding="utf-8", errors="replace")

    def _read(self, fd: int) -> None:
        with contextlib.suppress(OSError), open(fd, "rb", buffering=0) as source:
            while chunk := source.read(_READ_BYTES):
                self._feed(chunk)

    def _feed(self, chunk: bytes) -> None:
        with self._lock:
            self.total += len(chunk)
            self._data += chunk
            del self._data[: max(0, len(self._data) - self.keep)]

    def text(self) -> tuple[str, int]:
        """The kept text, from its first whole line when the start was cut, and how many bytes
        written before it are left out."""
        with self._lock:
            data, total = bytes(self._data), self.total
        text = data.decode("utf-8", errors="replace")
        if total > len(data):  # a cut line may hold the tail of a secret: start after it
            cut, _, text = text.partition("\n")
            return text, total - len(data) + len(cut.encode("utf-8")) + 1
        return text, 0


def wait_future(future: concurrent.futures.Future[T], timeout: float) -> T:
    """The future's result, waiting in short slices; raises TimeoutError after ``timeout``."""
    ends = time.monotonic() + timeout
    while True:
        left = ends - time.monotonic()
        if left <= 0:
            raise TimeoutError
        try:
            return future.result(timeout=min(_SLICE_S, left))
        except concurrent.futures.TimeoutError:
            continue


class Connection:
    """One server's session, held open by a task on the loop until :meth:`close`."""

    def __init__(
        self,
        name: str,
        config: ServerConfig,
        kernel_pid: int | None = None,
        stderr: StderrRing | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.kernel_pid = kernel_pid or os.getpid()
        self.state: State = "not started"
        self.error: str | None = None
        self.failed_at = 0.0  # time.monotonic() of the last failure to start
        self.session: ClientSession | None = None
        self._closing: asyncio.Event | None = None
        self._held: asyncio.Task[None] | None = None
        self.stderr = stderr if stderr is not None else StderrRing()

    async def open(self) -> list[Any]:
        """Start or reach the server, initialise the session, and list its tools."""
        self.state, self.error = "connecting", None
        ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._held = asyncio.create_task(self._hold(ready), name=f"mcp-{self.name}")
        try:
            return await asyncio.wait_for(asyncio.shield(ready), CONNECT_TIMEOUT_S)
        except BaseException:
            await self.close()
            raise

    async def _hold(self, ready: asyncio.Future[list[Any]]) -> None:
        from mcp import ClientSession

        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(read, write))
                await session.initialize()
                listed = await _all_tools(session)
                self.session, self.state = session, "connected"
                ready.set_result(listed)
                assert self._closing is not None
                await self._closing.wait()
        except BaseException as exc:  # noqa: B036 - the task ends here: record why, never raise
            self.error = describe_error(exc)
            if not ready.done():
                ready.set_exception(McpCallError(self.error))
        finally:
            self.session = None
            if self._closing is not None and self._closing.is_set():
                self.state = "stopped"
            else:
                connected = self.state in ("connected", "disconnected")
                self.state = "disconnected" if connected else "failed"

    def _transport(self) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        if self.config.http:
            return _http_transport(self.config)
        return self._stdio_transport()

    @contextlib.asynccontextmanager
    async def _stdio_transport(self) -> AsyncIterator[TransportStreams]:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        config = self.config
        # A script path, not -m: the server's environment has no PYTHONPATH to find the package by.
        launcher = [
            sys.executable,
            str(Path(__file__).with_name("launch.py")),
            str(self.kernel_pid),
        ]
        params = StdioServerParameters(
            command=launcher[0],
            args=[*launcher[1:], config.command or "", *config.args],
            env=config.env or None,
            cwd=config.cwd,
        )
        # The server's stderr goes to the ring, never to the cell (it may print its environment).
        errlog = self.stderr.pipe(self.name)
        try:
            async with stdio_client(params, errlog=errlog) as streams:
                errlog.close()  # the process holds its own copy: the ring's reader ends with it
                yield streams
        finally:
            errlog.close()

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> CallToolResult:
        """Call one tool; the session's own timeout bounds the wait for the answer."""
        if self.session is None or self._held is None or self._held.done():
            raise McpCallError(f"MCP server {self.name!r} is not connected ({self.state})")
        call = self.session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        waiting = asyncio.ensure_future(call)
        done, _ = await asyncio.wait({waiting, self._held}, return_when=asyncio.FIRST_COMPLETED)
        if waiting not in done:  # the connection ended while the call waited
            waiting.cancel()
            raise McpCallError(
                f"MCP server '{self.name}' disconnected during the call: {self.error or 'closed'}"
            )
        try:
            return waiting.result()
        except Exception as exc:  # the SDK's and the transport's errors, as one kind
            lost = not await self._alive()
            if lost:
                self.error = describe_error(exc)
                self._closing = None  # not closed by us: the state says "disconnected"
                self.session, self.state = None, "disconnected"
                self._held.cancel()
            raise McpCallError(self._failure(tool, exc, timeout, lost)) from exc

    def _failure(self, tool: str, exc: Exception, timeout: float, lost: bool) -> str:
        if lost:
            return f"MCP server '{self.name}' disconnected during {tool}: {describe_error(exc)}"
        if "timed out" in str(exc):
            return (
                f"MCP server '{self.name}' did not answer {tool} within {timeout:g} s; "
                "the call was cancelled"
            )
        return f"MCP server '{self.name}' failed on {tool}: {describe_error(exc)}"

    async def _alive(self) -> bool:
        """Whether the server still answers (a ping), after a call failed."""
        if self.session is None:
            return False
        try:
            await asyncio.wait_for(self.session.send_ping(), PING_TIMEOUT_S)
        except Exception:
            return False
        return True

    async def close(self) -> None:
        """End the session and, for stdio, stop the server process (the SDK's shutdown)."""
        if self._closing is not None:
            self._closing.set()
        held = self._held
        if held is not None and not held.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(held, CLOSE_TIMEOUT_S)
        self.state = "stopped"


async def _all_tools(session: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a server's pages, bounded
        from mcp_types import PaginatedRequestParams

        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        listed = await session.list_tools(params=params)
        tools += listed.tools
        cursor = listed.next_cursor
        if not cursor:
            break
    return tools


@contextlib.asynccontextmanager
async def _http_transport(config: ServerConfig) -> AsyncIterator[TransportStreams]:
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers=dict(config.headers)) as http,
        streamable_http_client(config.url or "", http_client=http) as streams,
    ):
        yield streams


def describe_error(exc: BaseException) -> str:
    """One line for an error from the SDK or the transport (exception groups unwrapped)."""
    while getattr(exc, "exceptions", None):  # an exception group: its first
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, ModuleNotFoundError) and exc.name == "mcp":
        return "the mcp package is not installed: pip install 'qloop-kernel[mcp]'"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if type(exc).__name__ not in text else text
