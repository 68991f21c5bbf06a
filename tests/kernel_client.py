"""A real ipykernel driven the way JupyterLab 4 drives it, for kernel-level tests.

:class:`LabKernel` starts ``python -m ipykernel_launcher`` through ``jupyter_client`` and talks
to it like JupyterLab: ``execute_request`` carries ``{**cell_metadata, "cellId": ...}`` in its
metadata, a button click is a shell ``comm_msg`` (optionally on a subshell created with a
control-channel ``create_subshell_request``). With ``headless=True`` it executes like nbclient,
without cell id or metadata.

One background thread owns the ZMQ sockets: it sends queued requests and records every IOPub
message per parent ``msg_id`` and every shell/control reply, so a test can inspect the outputs
and widgets of a cell that is still busy. All accessors are thread-safe.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import zmq
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

T = TypeVar("T")

OUTPUT_TYPES = frozenset(
    {"stream", "display_data", "update_display_data", "execute_result", "error"}
)
WIDGET_TARGET = "jupyter.widget"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
DEFAULT_TIMEOUT = 30.0


class CellFailed(AssertionError):
    """A cell run through :meth:`LabKernel.run` ended with an error or was aborted."""


@dataclass
class Widget:
    """What a frontend knows of one ``jupyter.widget`` comm."""

    comm_id: str
    parent_msg_id: str | None
    state: dict[str, Any] = field(default_factory=dict)
    closed: bool = False


class LabKernel:
    """A running ipykernel plus a JupyterLab-like client; use as a context manager."""

    def __init__(
        self,
        env: Mapping[str, str | None] | None = None,
        *,
        headless: bool = False,
        cwd: str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        """Describe the kernel to start: extra environment variables (added to this process's
        environment; None removes one), nbclient-like ``headless`` execution, working directory."""
        self.headless = headless
        # Widget echoes are what round_trip() waits for; they are on by default, made sure here.
        merged: dict[str, str | None] = {
            **os.environ,
            "PYDEVD_DISABLE_FILE_VALIDATION": "1",
            "JUPYTER_WIDGETS_ECHO": "1",
            **(env or {}),
        }
        self._env = {name: value for name, value in merged.items() if value is not None}
        self._cwd = cwd
        self._startup_timeout = startup_timeout
        self._km: KernelManager | None = None
        self._kc: BlockingKernelClient | None = None
        self._io_thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._outbox: queue.SimpleQueue[tuple[str, dict[str, Any]]] = queue.SimpleQueue()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._changed = threading.Condition()
        self._log: list[tuple[str, dict[str, Any]]] = []
        self._iopub: defaultdict[str | None, list[dict[str, Any]]] = defaultdict(list)
        self._replies: dict[str, dict[str, Any]] = {}
        self._widgets: dict[str, Widget] = {}
        self._io_error: BaseException | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> LabKernel:
        """Start the kernel, wait until it answers ``kernel_info``, start the reader thread."""
        if self._km is not None or self._stopping.is_set():
            raise RuntimeError("a LabKernel is started once")
        self._km = KernelManager(kernel_name="python3")
        try:
            self._km.start_kernel(env=self._env, cwd=self._cwd or os.getcwd())
            self._kc = self._km.blocking_client()
            self._kc.start_channels(stdin=False, hb=False)
            self._kc.wait_for_ready(timeout=self._startup_timeout)
        except BaseException:
            self.shutdown()
            raise
        self._io_thread = threading.Thread(target=self._io_main, name="lab-kernel-io", daemon=True)
        self._io_thread.start()
        return self

    def restart(self) -> None:
        """Restart the kernel process, as "Restart Kernel" does, and wait until it is ready."""
        self._manager.restart_kernel(now=True)
        deadline = time.monotonic() + self._startup_timeout
        while True:
            # The idle status proves IOPub is connected again, not only the shell channel.
            probe = self.request("kernel_info_request")
            try:
                self.wait_idle(probe, timeout=1.0)
                return
            except TimeoutError:
                if time.monotonic() > deadline:
                    raise

    def shutdown(self) -> None:
        """Stop the reader thread, close the channels and kill the kernel. Idempotent."""
        self._stopping.set()
        self._wake_io()
        if self._io_thread is not None:
            self._io_thread.join(timeout=10)
            self._io_thread = None
        if self._kc is not None:
            self._kc.stop_channels()
            self._kc = None
        if self._km is not None:
            if self._km.has_kernel:
                self._km.shutdown_kernel(now=True)
            self._km = None
        self._wake_reader.close()
        self._wake_writer.close()

    def __enter__(self) -> LabKernel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    @property
    def pid(self) -> int:
        """Process id of the kernel."""
        pid = getattr(self._manager.provisioner, "pid", None)
        if not isinstance(pid, int):
            raise RuntimeError("the kernel provisioner does not expose a pid")
        return pid

    def is_alive(self) -> bool:
        """True while the kernel process runs."""
        return self._km is not None and self._km.is_alive()

    def interrupt(self) -> None:
        """Interrupt the kernel as JupyterLab's "Interrupt Kernel" does (through the manager)."""
        self._manager.interrupt_kernel()

    # -- requests ----------------------------------------------------------------------------

    def execute(
        self,
        code: str,
        *,
        cell_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        headless: bool | None = None,
        subshell_id: str | None = None,
        stop_on_error: bool = True,
        wait: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> str:
        """Send an ``execute_request`` and return its msg_id.

        Like JupyterLab, the request metadata is the cell's metadata plus ``cellId`` (a fresh
        uuid unless given), ``deletedCells`` and ``recordTiming``; headless (like nbclient) it is
        empty. ``allow_stdin`` is false: nothing here answers ``input()``. With ``wait``, block
        until the reply and the idle status arrived.
        """
        headless = self.headless if headless is None else headless
        if headless and (cell_id is not None or metadata is not None):
            raise ValueError("a headless execute_request carries no cell id or metadata")
        request_metadata = {} if headless else _lab_metadata(cell_id, metadata)
        content = {
            "code": code,
            "silent": False,
            "store_history": True,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": stop_on_error,
        }
        msg_id = self.request(
            "execute_request", content, metadata=request_metadata, subshell_id=subshell_id
        )
        if wait:
            self.complete(msg_id, timeout)
        return msg_id

    def run(self, code: str, timeout: float = DEFAULT_TIMEOUT, **execute_args: Any) -> str:
        """Execute ``code``, wait until done and return its stdout; raise CellFailed otherwise."""
        msg_id = self.execute(code, timeout=timeout, **execute_args)
        status = self.complete(msg_id, timeout)["content"]["status"]
        if status != "ok":
            raise CellFailed(f"cell {status}:\n{self.error_text(msg_id)}\n{self.stderr(msg_id)}")
        return self.stdout(msg_id)

    def request(
        self,
        msg_type: str,
        content: Mapping[str, Any] | None = None,
        *,
        channel: str = "shell",
        metadata: Mapping[str, Any] | None = None,
        subshell_id: str | None = None,
    ) -> str:
        """Send any request on the shell or control channel; return its msg_id."""
        if channel not in ("shell", "control"):
            raise ValueError(f"requests go on the shell or control channel, not {channel!r}")
        session = self._client.session
        header = session.msg_header(msg_type)
        if subshell_id is not None:
            header["subshell_id"] = subshell_id
        msg = session.msg(
            msg_type, dict(content or {}), header=header, metadata=dict(metadata or {})
        )
        self._outbox.put((channel, msg))
        self._wake_io()
        return str(msg["msg_id"])

    def create_subshell(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """Create a kernel subshell through the control channel, as JupyterLab >= 4.4 does."""
        msg_id = self.request("create_subshell_request", {}, channel="control")
        content = self.reply(msg_id, timeout)["content"]
        if content.get("status") != "ok":
            raise RuntimeError(f"create_subshell_request failed: {content}")
        return str(content["subshell_id"])

    def comm_open(
        self, target_name: str, data: Mapping[str, Any] | None = None, **request_args: Any
    ) -> str:
        """Open a comm from the frontend side; return the new comm id."""
        comm_id = uuid.uuid4().hex
        content = {"comm_id": comm_id, "target_name": target_name, "data": dict(data or {})}
        self.request("comm_open", content, **request_args)
        return comm_id

    def comm_msg(self, comm_id: str, data: Mapping[str, Any], **request_args: Any) -> str:
        """Send a ``comm_msg`` to ``comm_id``; return its msg_id."""
        return self.request("comm_msg", {"comm_id": comm_id, "data": dict(data)}, **request_args)

    def comm_close(self, comm_id: str, **request_args: Any) -> str:
        """Close a comm from the frontend side; return the msg_id."""
        return self.request("comm_close", {"comm_id": comm_id, "data": {}}, **request_args)

    def click(self, comm_id: str, subshell_id: str | None = None) -> str:
        """Click an ipywidgets Button, as the widget manager does; return the msg_id."""
        data = {"method": "custom", "content": {"event": "click"}}
        return self.comm_msg(comm_id, data, subshell_id=subshell_id)

    def set_value(self, comm_id: str, name: str, value: Any, subshell_id: str | None = None) -> str:
        """Set a widget trait (e.g. a Text's ``value``) as the user typing does; return msg_id."""
        data = {"method": "update", "state": {name: value}, "buffer_paths": []}
        return self.comm_msg(comm_id, data, subshell_id=subshell_id)

    def round_trip(self, comm_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Send a widget a no-op state update and wait for the kernel's echo of it.

        The kernel handles shell requests in order, so once the echo is back every request sent
        before it has been received; while a cell is busy, the echo proves the cell is waiting
        in the shell pump (comm messages are handled nowhere else during a cell).
        """
        with self._changed:
            classes = self._widgets[comm_id].state.get("_dom_classes")
        if classes is None:
            raise ValueError(f"widget {comm_id} has no _dom_classes state to echo")
        msg_id = self.set_value(comm_id, "_dom_classes", classes)

        def echoed() -> bool:
            return any(
                m["content"].get("data", {}).get("method") == "echo_update"
                for m in self.messages(msg_id, "comm_msg")
            )

        self.wait_for(echoed, timeout, f"the echo of widget {comm_id}")

    # -- waiting -----------------------------------------------------------------------------

    def wait_for(
        self, probe: Callable[[], T | None], timeout: float = DEFAULT_TIMEOUT, what: str = ""
    ) -> T:
        """Return ``probe()`` once it gives something other than None/False (re-evaluated on
        every received message); raise TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                if self._io_error is not None:
                    raise RuntimeError(
                        "the kernel client's reader thread failed"
                    ) from self._io_error
                found = probe()
                if found is not None and found is not False:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"timed out after {timeout} s waiting for {what or probe}")
                self._changed.wait(min(remaining, 0.5))

    def reply(self, msg_id: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The shell/control reply to ``msg_id`` (e.g. ``execute_reply``), waiting for it."""
        return self.wait_for(lambda: self._replies.get(msg_id), timeout, f"reply to {msg_id}")

    def complete(self, msg_id: str, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The reply to ``msg_id`` once the kernel is idle after it, so all its output is here."""
        self.wait_idle(msg_id, timeout)
        return self.reply(msg_id, timeout)

    def replied(self, msg_id: str) -> bool:
        """True once the reply to ``msg_id`` has arrived (does not wait)."""
        with self._changed:
            return msg_id in self._replies

    def wait_idle(self, msg_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until the kernel published ``idle`` for ``msg_id``."""
        self.wait_for(lambda: self.status(msg_id) == "idle", timeout, f"idle after {msg_id}")

    def wait_for_output(self, msg_id: str, text: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until the stdout of ``msg_id`` contains ``text``."""
        self.wait_for(lambda: text in self.stdout(msg_id), timeout, f"{text!r} in {msg_id}")

    def wait_for_widget(
        self,
        *,
        description: str | None = None,
        model_name: str | None = None,
        parent: str | None = None,
        exclude: frozenset[str] | set[str] = frozenset(),
        timeout: float = DEFAULT_TIMEOUT,
    ) -> str:
        """Comm id of the first open widget matching every given criterion.

        ``parent`` restricts to widgets opened by that request (the cell's msg_id); ``exclude``
        skips comm ids already handled.
        """

        def matches(widget: Widget) -> bool:
            state = widget.state
            return not (
                widget.closed
                or widget.comm_id in exclude
                or (description is not None and state.get("description") != description)
                or (model_name is not None and state.get("_model_name") != model_name)
                or (parent is not None and widget.parent_msg_id != parent)
            )

        def find() -> str | None:
            return next((w.comm_id for w in self._widgets.values() if matches(w)), None)

        return self.wait_for(find, timeout, f"widget {description or model_name or ''}")

    def wait_for_display(
        self, msg_id: str, mime: str, found: Callable[[Any], bool], timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """The first ``mime`` value displayed or updated by ``msg_id`` for which ``found`` holds."""

        def probe() -> Any:
            for message in self.messages(msg_id, "display_data", "update_display_data"):
                data = message["content"]["data"]
                if mime in data and found(data[mime]):
                    return data[mime]
            return None

        return self.wait_for(probe, timeout, f"a {mime} display of {msg_id}")

    def wait_for_shown(self, msg_id: str, comm_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        """Wait until ``msg_id`` displayed the widget ``comm_id`` (its view, sent by display())."""
        self.wait_for_display(
            msg_id, WIDGET_VIEW, lambda view: view.get("model_id") == comm_id, timeout
        )

    def wait_for_button(
        self, description: str, timeout: float = DEFAULT_TIMEOUT, **criteria: Any
    ) -> str:
        """Comm id of the ipywidgets Button whose ``description`` matches."""
        return self.wait_for_widget(
            description=description, model_name="ButtonModel", timeout=timeout, **criteria
        )

    # -- recorded messages -------------------------------------------------------------------

    def widget_state(self, comm_id: str) -> dict[str, Any]:
        """Latest known state of a widget (its comm_open state plus every update since)."""
        with self._changed:
            return dict(self._widgets[comm_id].state)

    def widget_states(
        self, *, parent: str | None = None, model_name: str | None = None
    ) -> list[dict[str, Any]]:
        """Latest states of the widgets opened by ``parent`` (a msg_id) and of ``model_name``."""
        with self._changed:
            return [
                dict(w.state)
                for w in self._widgets.values()
                if (parent is None or w.parent_msg_id == parent)
                and (model_name is None or w.state.get("_model_name") == model_name)
            ]

    def messages(self, msg_id: str, *msg_types: str) -> list[dict[str, Any]]:
        """IOPub messages parented to ``msg_id``, in arrival order, optionally of given types."""
        with self._changed:
            found = list(self._iopub.get(msg_id, ()))
        return [m for m in found if not msg_types or m["msg_type"] in msg_types]

    def history(self) -> list[tuple[str, dict[str, Any]]]:
        """Every received message as ``(channel, message)``, in arrival order."""
        with self._changed:
            return list(self._log)

    def status(self, msg_id: str) -> str | None:
        """Latest ``execution_state`` published for ``msg_id`` (busy/idle), if any."""
        states = self.messages(msg_id, "status")
        return states[-1]["content"]["execution_state"] if states else None

    def outputs(self, msg_id: str) -> list[dict[str, Any]]:
        """Output messages of a cell (stream, display data, results, errors)."""
        return self.messages(msg_id, *OUTPUT_TYPES)

    def stdout(self, msg_id: str) -> str:
        """Everything the cell printed to stdout so far."""
        return _stream_text(self.messages(msg_id, "stream"), "stdout")

    def stderr(self, msg_id: str) -> str:
        """Everything the cell wrote to stderr so far."""
        return _stream_text(self.messages(msg_id, "stream"), "stderr")

    def text(self, msg_id: str) -> str:
        """Streams plus the ``text/plain`` of rich outputs, in order, as one string."""
        return "".join(_output_text(m) for m in self.outputs(msg_id))

    def error(self, msg_id: str) -> dict[str, Any] | None:
        """Content of the cell's ``error`` output (ename, evalue, traceback), if any."""
        errors = self.messages(msg_id, "error")
        return errors[-1]["content"] if errors else None

    def error_text(self, msg_id: str) -> str:
        """``ename: evalue`` of the cell's error, or an empty string."""
        error = self.error(msg_id)
        return f"{error['ename']}: {error['evalue']}" if error else ""

    # -- internals ---------------------------------------------------------------------------

    @property
    def _manager(self) -> KernelManager:
        if self._km is None:
            raise RuntimeError("the kernel is not running")
        return self._km

    @property
    def _client(self) -> BlockingKernelClient:
        if self._kc is None:
            raise RuntimeError("the kernel is not running")
        return self._kc

    def _wake_io(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            self._wake_writer.send(b"\0")

    def _io_main(self) -> None:
        try:
            self._pump_sockets()
        except BaseException as error:
            with self._changed:
                self._io_error = error
                self._changed.notify_all()
            raise

    def _pump_sockets(self) -> None:
        client = self._client
        channels = {
            client.iopub_channel.socket: "iopub",
            client.shell_channel.socket: "shell",
            client.control_channel.socket: "control",
        }
        poller = zmq.Poller()
        for sock in channels:
            poller.register(sock, zmq.POLLIN)
        wake_fd = self._wake_reader.fileno()
        poller.register(wake_fd, zmq.POLLIN)
        sockets = {name: sock for sock, name in channels.items()}
        while not self._stopping.is_set():
            self._send_outbox(sockets)
            for sock, _ in poller.poll(200):
                if sock == wake_fd:
                    self._wake_reader.recv(4096)
                else:
                    self._receive_all(sock, channels[sock])

    def _send_outbox(self, sockets: Mapping[str, zmq.Socket[Any]]) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                channel, msg = self._outbox.get_nowait()
                self._client.session.send(sockets[channel], msg)

    def _receive_all(self, sock: zmq.Socket[Any], channel: str) -> None:
        session = self._client.session
        while True:
            _, msg = session.recv(sock, mode=zmq.NOBLOCK)
            if msg is None:
                return
            self._record(channel, msg)

    def _record(self, channel: str, msg: dict[str, Any]) -> None:
        parent_id = msg["parent_header"].get("msg_id")
        with self._changed:
            self._log.append((channel, msg))
            if channel == "iopub":
                self._iopub[parent_id].append(msg)
                self._track_widget(msg, parent_id)
            elif parent_id is not None:
                self._replies[parent_id] = msg
            self._changed.notify_all()

    def _track_widget(self, msg: dict[str, Any], parent_id: str | None) -> None:
        content = msg["content"]
        msg_type = msg["msg_type"]
        if msg_type == "comm_open" and content.get("target_name") == WIDGET_TARGET:
            state = dict(content.get("data", {}).get("state", {}))
            self._widgets[content["comm_id"]] = Widget(content["comm_id"], parent_id, state)
            return
        widget = self._widgets.get(content.get("comm_id", ""))
        if widget is None:
            return
        if msg_type == "comm_close":
            widget.closed = True
        elif msg_type == "comm_msg":
            data = content.get("data", {})
            if data.get("method") in ("update", "echo_update"):
                widget.state.update(data.get("state", {}))


def _lab_metadata(cell_id: str | None, metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """``execute_request`` metadata as JupyterLab 4 builds it (``CodeCell.execute``)."""
    return {
        **(metadata or {}),
        "deletedCells": [],
        "recordTiming": False,
        "cellId": cell_id or str(uuid.uuid4()),
    }


def _stream_text(messages: list[dict[str, Any]], name: str) -> str:
    return "".join(m["content"]["text"] for m in messages if m["content"]["name"] == name)


def _output_text(msg: dict[str, Any]) -> str:
    content = msg["content"]
    if msg["msg_type"] == "stream":
        return str(content["text"])
    if msg["msg_type"] == "error":
        return f"{content['ename']}: {content['evalue']}\n"
    plain = content.get("data", {}).get("text/plain")
    return f"{plain}\n" if plain is not None else ""
