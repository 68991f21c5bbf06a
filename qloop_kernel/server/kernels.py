"""The live kernels the Jupyter server runs, as the outside tools reach them.

A notebook's kernel is the one its session (the page's, or an outside one the user started) holds.
The server keeps one long-lived :class:`KernelConnection` per kernel: a ``Session`` of its own
(the kernel's key and signature scheme, a fresh session id, so jupyter_client's duplicate
signature check never drops a reply another client of the same kernel received) and one reader
that routes shell replies by their parent's msg_id, and the ``qloop.host`` comm's answers by
their request id, to the call that waits for them. Read tools send an empty ``execute_request``
with ``user_expressions`` that call :mod:`qloop_kernel.server.probe`. ``run_code`` forwards the
approved step over the ``qloop.host`` comm (:mod:`qloop_kernel.notebook.host`): the kernel session
runs it as the in-notebook agent's steps run; nothing here runs user code. A connection is made
again when its kernel restarts or dies, and closed when the kernel shuts down or the server stops.
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import inspect
import json
import re
import uuid
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zmq
import zmq.asyncio
from jupyter_client.session import Session

from ..errors import QloopError
from ..records.protocol_schema import STOPPED_BEFORE
from .broker import notebook_key

if TYPE_CHECKING:
    from ..records.protocol_schema import HostAnswer, HostRequest

READ_TIMEOUT_S = 15.0  # a read tool waits this long for a kernel busy with a cell
START_TIMEOUT_S = 60.0  # the first call to a kernel waits this long for it to start
READY_RETRY_S = 1.0  # how often a kernel that did not answer yet is asked again
GONE_CHECK_S = 1.0  # how often a running call checks that its kernel is still the same process
INTERRUPT_TRIES = 10  # a Stop interrupts a running step this many times at most
INTERRUPT_AGAIN_S = 1.0  # ... one second apart, until it answers
STEP_GRACE_S = 10.0  # the kernel stops a step at its limit; the server waits this much longer
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PROBE = "__import__('qloop_kernel.server.probe', fromlist=['probe'])"
HOST = "__import__('qloop_kernel.notebook.host', fromlist=['host'])"
HOST_TARGET = "qloop.host"
KERNEL_ACTIONS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"
NOT_INSTALLED = (
    "qloop-kernel is not installed in this kernel's environment: install it there "
    "(`pip install qloop-kernel`) and restart the kernel"
)


class OutsideError(QloopError):
    """A call an outside agent made that cannot be served; the message says why and what to do."""


class ConnectionClosed(OutsideError):
    """The kernel's connection closed under a call: the kernel shut down or restarted."""


@dataclass
class RunResult:
    """What running code printed and returned, in order, and whether it raised."""

    texts: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (mime type, base64 data)
    error: str | None = None
    status: str = "ok"  # ok, error, refused (the kernel did not run it, or undid it), gone, timeout
    changes: list[str] = field(default_factory=list)  # what it did to the kernel's variables

    def text(self) -> str:
        parts = list(self.texts)
        if self.error is not None:
            parts.append(self.error)
        return "".join(parts)


def _plain(text: str) -> str:
    return _ANSI.sub("", text)


class KernelConnection:
    """One long-lived connection to one kernel: its own ``Session``, a shell and an IOPub socket,
    and one reader that hands each message to the call waiting for it."""

    # Any: jupyter_server's ServerKernelManager of this kernel (untyped)
    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        self.process = _process(kernel)  # the kernel process this connection talks to
        self.session = Session(
            key=kernel.session.key,
            signature_scheme=kernel.session.signature_scheme,
            username="qloop",
        )  # a fresh session id: replies to this connection are its alone
        client = kernel.client(session=self.session, context=zmq.asyncio.Context.instance())
        self.shell = client.connect_shell(identity=self.session.bsession)
        self.iopub = client.connect_iopub()
        self.ready = False  # the kernel answered on both channels
        self.registered = False  # the kernel's ``qloop.host`` comm target is registered
        self.host: str | None = None  # the id of the open ``qloop.host`` comm
        self.lock = asyncio.Lock()  # readiness and the host comm are set up once
        self._replies: dict[str, asyncio.Future[dict[str, Any]]] = {}  # by parent msg_id
        self._seen: dict[str, asyncio.Event] = {}  # an IOPub message of this parent arrived
        self._answers: dict[str, asyncio.Future[dict[str, Any]]] = {}  # host answers by request
        self._started: set[str] = set()  # steps the host has begun to run
        self._stop_wanted: set[str] = set()  # steps stopped before they began
        self._reader = asyncio.ensure_future(self._read())

    def current(self, kernel: Any) -> bool:
        """Still the kernel process this connection was made for (not restarted, not dead)."""
        return kernel is self.kernel and _process(kernel) is self.process

    def close(self) -> None:
        self._reader.cancel()
        for waiting in (*self._replies.values(), *self._answers.values()):
            if not waiting.done():
                waiting.set_exception(ConnectionClosed("the kernel shut down or restarted"))
        self._replies.clear()
        self._answers.clear()
        self.shell.close(linger=0)
        self.iopub.close(linger=0)

    async def _read(self) -> None:
        poller = zmq.asyncio.Poller()
        poller.register(self.shell, zmq.POLLIN)
        poller.register(self.iopub, zmq.POLLIN)
        while True:
            ready = dict(await poller.poll())
            for socket in (self.shell, self.iopub):
                if socket in ready:
                    self._route(socket is self.shell, await socket.recv_multipart())

    def _route(self, shell: bool, frames: list[bytes]) -> None:
        try:
            _, parts = self.session.feed_identities(frames)
            msg = self.session.deserialize(parts)
        except Exception:  # not signed with the kernel's key, or malformed: not for a call
            return
        parent = str(msg.get("parent_header", {}).get("msg_id", ""))
        if shell:
            _settle(self._replies.pop(parent, None), msg)
            return
        content = msg.get("content", {})
        if msg["header"]["msg_type"] in ("comm_msg", "comm_close") and (
            self.host is not None and content.get("comm_id") == self.host
        ):
            self._host_message(msg)
        seen = self._seen.get(parent)
        if seen is not None:
            seen.set()

    def _host_message(self, msg: dict[str, Any]) -> None:
        if msg["header"]["msg_type"] == "comm_close":  # the kernel closed it: open it again
            self.host = None
            return
        data = msg.get("content", {}).get("data") or {}
        request_id = str(data.get("request_id", ""))
        if data.get("op") == "started":
            if request_id in self._answers:
                self._started.add(request_id)
                if request_id in self._stop_wanted:  # Stop came before the step began
                    self._interrupt(request_id)
            return
        _settle(self._answers.pop(request_id, None), data)

    def began(self, request_id: str) -> bool:
        """Whether the host has begun to run the step ``request_id``."""
        return request_id in self._started

    def stop(self, request_id: str) -> None:
        """Stop a step: interrupt the kernel once the step runs, never before (the interrupt
        would land in whatever the step waits behind: a user's cell); ask the host to drop a
        step that has not started."""
        if request_id in self._started and request_id in self._answers:
            self._interrupt(request_id)
            return
        self._stop_wanted.add(request_id)  # not sent yet: :meth:`step` will not send it
        if request_id in self._answers and self.host is not None:
            self.send("comm_msg", {"comm_id": self.host,
                                   "data": {"op": "cancel", "request_id": request_id}})  # fmt: skip

    def _interrupt(self, request_id: str) -> None:
        """Interrupt the kernel while the step ``request_id`` runs, again each second until it
        answers: an interrupt that lands in the host's own code before the step's code runs
        (its undo snapshot, say) may be taken as that code's failure while the step goes on."""
        asyncio.ensure_future(self._interrupt_until_answered(request_id))

    async def _interrupt_until_answered(self, request_id: str) -> None:
        for _ in range(INTERRUPT_TRIES):
            if request_id not in self._answers or request_id not in self._started:
                return  # answered: the kernel has moved on to other work
            done = self.kernel.interrupt_kernel()
            if inspect.isawaitable(done):
                await done
            await asyncio.sleep(INTERRUPT_AGAIN_S)

    def send(self, msg_type: str, content: dict[str, Any]) -> str:
        """Send a shell message; its msg_id."""
        msg = self.session.msg(msg_type, content)
        self.session.send(self.shell, msg)
        return str(msg["header"]["msg_id"])

    async def request(
        self, msg_type: str, content: dict[str, Any], timeout: float
    ) -> dict[str, Any]:
        """The shell reply to one request; TimeoutError when none comes in ``timeout`` s."""
        msg = self.session.msg(msg_type, content)
        msg_id = str(msg["header"]["msg_id"])
        waiting = self._replies[msg_id] = asyncio.get_running_loop().create_future()
        try:
            self.session.send(self.shell, msg)
            return await asyncio.wait_for(waiting, timeout)
        finally:
            self._replies.pop(msg_id, None)

    async def wait_ready(self, timeout: float) -> None:
        """Ask for the kernel's info until it answers on the shell and on IOPub (a subscription
        made just now misses what the kernel publishes before it is in place)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.ready:
            if not self.current(self.kernel):
                # Died while starting (a port it was given was taken meanwhile, say): the server
                # starts it again on new ports, which this connection does not talk to.
                raise ConnectionClosed("the kernel restarted while it started")
            msg = self.session.msg("kernel_info_request", {})
            msg_id = str(msg["header"]["msg_id"])
            seen = self._seen[msg_id] = asyncio.Event()
            reply = self._replies[msg_id] = asyncio.get_running_loop().create_future()
            self.session.send(self.shell, msg)
            left = deadline - asyncio.get_running_loop().time()
            try:
                await asyncio.wait_for(_both(reply, seen), min(READY_RETRY_S, max(left, 0.01)))
                self.ready = True
            except TimeoutError:
                if asyncio.get_running_loop().time() >= deadline:
                    raise
            finally:
                self._seen.pop(msg_id, None)
                self._replies.pop(msg_id, None)

    async def step(self, request: HostRequest) -> HostAnswer:
        """Forward one step to the kernel's host; its answer (the caller bounds the wait)."""
        assert self.host is not None
        request_id = request["request_id"]
        if request_id in self._stop_wanted:  # stopped before it was sent
            self._stop_wanted.discard(request_id)
            return {"op": "ack", "request_id": request_id, "ok": True, "status": "refused",
                    "text": STOPPED_BEFORE, "images": []}  # fmt: skip
        waiting = self._answers[request_id] = asyncio.get_running_loop().create_future()
        try:
            self.send("comm_msg", {"comm_id": self.host, "data": dict(request)})
            answer: HostAnswer = await waiting
            return answer
        finally:
            self._answers.pop(request_id, None)
            self._started.discard(request_id)
            self._stop_wanted.discard(request_id)


async def _both(reply: asyncio.Future[dict[str, Any]], seen: asyncio.Event) -> None:
    await reply
    await seen.wait()


def _settle(waiting: asyncio.Future[dict[str, Any]] | None, value: dict[str, Any]) -> None:
    if waiting is not None and not waiting.done():
        waiting.set_result(value)


def _close_at_exit(held: weakref.ref[Kernels]) -> None:
    """The server stops: its connections to the kernels close with it."""
    found = held()
    if found is not None:
        found.close()


# Any: the provisioner's process object (or the provisioner), compared by identity only
def _process(kernel: Any) -> Any:
    """What identifies the kernel's process: it changes when the kernel restarts."""
    provisioner = kernel.provisioner
    return getattr(provisioner, "process", None) or provisioner


class Kernels:
    """The Jupyter server's sessions and kernels, for the outside tools: one connection each."""

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp
        self._connections: dict[str, KernelConnection] = {}
        self._stopped: set[str] = set()  # steps stopped before their kernel was connected
        self._locks: dict[str, asyncio.Lock] = {}
        events = getattr(serverapp, "event_logger", None)
        if events is not None:  # a kernel shut down or restarted: its connection goes
            events.add_listener(schema_id=KERNEL_ACTIONS, listener=self._kernel_action)
        atexit.register(_close_at_exit, weakref.ref(self))

    async def _kernel_action(self, logger: Any, schema_id: str, data: dict[str, Any]) -> None:
        if data.get("action") in ("shutdown", "restart") and data.get("status") == "success":
            self._drop(str(data.get("kernel_id", "")))

    def _drop(self, kernel_id: str) -> None:
        found = self._connections.pop(kernel_id, None)
        if found is not None:
            found.close()

    def close(self) -> None:
        """Close every connection (the server stops)."""
        for kernel_id in list(self._connections):
            self._drop(kernel_id)

    async def sessions(self) -> list[dict[str, Any]]:
        found = await self.serverapp.session_manager.list_sessions()
        return [s for s in found if isinstance(s, dict)]

    async def kernel_for(self, path: str) -> str:
        """The id of the kernel of the notebook at ``path``; OutsideError when none runs."""
        key = notebook_key(path)
        for session in await self.sessions():
            if notebook_key(str(session.get("path", ""))) == key and session.get("kernel"):
                return str(session["kernel"]["id"])
        raise OutsideError(
            f"no kernel runs {key!r}: open the notebook in JupyterLab (list_notebooks lists the "
            "open ones)"
        )

    async def connection(self, kernel_id: str) -> KernelConnection:
        """The kernel's connection, made (again, after a restart) and ready. A kernel this server
        has not heard from yet may still be starting (a notebook just opened), or start again
        on new ports when its first start fails: the call waits up to START_TIMEOUT_S in all, then
        says so (OutsideError)."""
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_S
        manager = self.serverapp.kernel_manager
        while True:
            for gone in [k for k in self._connections if k not in manager]:
                self._drop(gone)  # shut down without this server hearing of it
            if kernel_id not in manager:
                raise OutsideError(f"the kernel {kernel_id} is gone")
            kernel = manager.get_kernel(kernel_id)
            async with self._locks.setdefault(kernel_id, asyncio.Lock()):
                found = self._connections.get(kernel_id)
                if found is not None and not found.current(kernel):
                    self._drop(kernel_id)
                    found = None
                if found is None:
                    found = self._connections[kernel_id] = KernelConnection(kernel)
                if found.ready:
                    return found
                left = deadline - asyncio.get_running_loop().time()
                try:
                    await found.wait_ready(max(left, 0.01))
                    return found
                except ConnectionClosed:
                    self._drop(kernel_id)  # restarted while starting: connect to the new process
                except TimeoutError:
                    self._drop(kernel_id)
                    left = 0.0
            if left <= 0 or asyncio.get_running_loop().time() >= deadline:
                raise OutsideError(
                    f"the kernel did not answer in {START_TIMEOUT_S:.0f} s (it may still be "
                    "starting, or running a cell); try again when it is idle"
                )
            await asyncio.sleep(READY_RETRY_S)

    # Any: the JSON value the kernel sent back, of whatever shape the probe gives
    async def evaluate(self, kernel_id: str, expression: str) -> Any:
        """The JSON value ``expression`` (a call into ``probe``) returns in the kernel."""
        connection = await self.connection(kernel_id)
        return await _evaluate(connection, expression)

    async def prepared(self, kernel_id: str, code: str) -> tuple[str, list[str]]:
        """``code`` as the kernel's IPython runs it, and the names bound in its namespace. The
        kernel's host is registered in the same request, before the decision: the step then
        needs no further round trip, and a kernel restarted while the card waits is told apart."""
        connection = await self.connection(kernel_id)
        expression = f"{PROBE}.prepared(get_ipython(), {code!r})"
        if not connection.registered:
            expression = f"({HOST}.register(get_ipython()), {expression})[1]"
        found = await _evaluate(connection, expression)
        connection.registered = True
        return str(found["source"]), [str(n) for n in found["names"]]

    async def hosted(self, kernel_id: str) -> KernelConnection:
        """The kernel's connection with its ``qloop.host`` comm open (the target registered by
        importing qloop's host in the kernel, whether or not ``%load_ext`` ran there)."""
        connection = await self.connection(kernel_id)
        async with connection.lock:
            if not connection.registered:
                await _evaluate(connection, f"{HOST}.register(get_ipython())")
                connection.registered = True
            if connection.host is None:
                comm_id = uuid.uuid4().hex
                content = {"comm_id": comm_id, "target_name": HOST_TARGET, "data": {}}
                connection.send("comm_open", content)
                connection.host = comm_id
        return connection

    async def run(
        self, kernel_id: str, code: str, timeout_s: float, client: str = "an outside agent",
        request_id: str | None = None,
    ) -> RunResult:  # fmt: skip
        """Have the kernel session run ``code`` as a step of ``client`` (undo, step guard,
        changes); what it printed, returned and changed. A kernel that dies or restarts
        meanwhile ends the call at once (no answer will come). ``request_id`` names the step
        for :meth:`stop`."""
        gone = RunResult(error="\n[the kernel died or restarted while this ran]\n", status="gone")
        try:
            connection = await self.hosted(kernel_id)
        except ConnectionClosed:  # restarted while the host was being set up
            return gone
        if request_id is not None and request_id in self._stopped:
            self._stopped.discard(request_id)
            connection.stop(request_id)
        request: HostRequest = {
            "op": "run_step", "request_id": request_id or uuid.uuid4().hex, "client": client,
            "call_id": f"outside-{uuid.uuid4().hex[:12]}", "code": code, "timeout_s": timeout_s,
        }  # fmt: skip
        running = asyncio.ensure_future(connection.step(request))
        watch = asyncio.ensure_future(self._gone(kernel_id))
        try:
            done, _ = await asyncio.wait(
                {running, watch}, timeout=timeout_s + STEP_GRACE_S,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
        finally:
            watch.cancel()
        if running in done:
            closed = isinstance(running.exception(), ConnectionClosed)
            # A shutdown interrupts the kernel first: the step's answer says so before it dies.
            return gone if closed or self._going(kernel_id) else _result(running.result())
        if watch in done:
            running.cancel()
            self._drop(kernel_id)
            return gone
        began = connection.began(request["request_id"])
        connection.stop(request["request_id"])  # interrupted if it runs, else never run
        running.cancel()
        if not began:  # it waited behind the kernel's other work all this time
            return RunResult(
                error=f"\n[not run: the kernel was busy for {timeout_s:.0f} s]\n", status="timeout"
            )
        return RunResult(
            error=f"\n[interrupted: still running after {timeout_s:.0f} s]\n", status="timeout"
        )

    def stop(self, kernel_id: str, request_id: str) -> None:
        """Stop the step ``request_id`` (Stop on its card): interrupted once it runs, dropped if
        it has not started; nothing when it has ended or its kernel is gone."""
        connection = self._connections.get(kernel_id)
        if connection is not None:
            connection.stop(request_id)
        else:  # not connected yet: :meth:`run` hands it on once it is
            self._stopped.add(request_id)

    def _going(self, kernel_id: str) -> bool:
        """The kernel is gone, or shutting down (to stop, or to restart)."""
        manager = self.serverapp.kernel_manager
        if kernel_id not in manager:
            return True
        return bool(getattr(manager.get_kernel(kernel_id), "shutting_down", False))

    async def _gone(self, kernel_id: str) -> None:
        """Return once the kernel is no longer the process it was (dead, restarted, shut down)."""
        manager = self.serverapp.kernel_manager
        kernel = manager.get_kernel(kernel_id)
        started = _process(kernel)
        while True:
            await asyncio.sleep(GONE_CHECK_S)
            if kernel_id not in manager or kernel.provisioner is None:
                return
            alive = kernel.is_alive()
            if _process(kernel) is not started or not (
                await alive if inspect.isawaitable(alive) else alive
            ):
                return

    async def interrupt(self, kernel_id: str) -> None:
        done = self.serverapp.kernel_manager.interrupt_kernel(kernel_id)
        if inspect.isawaitable(done):
            await done


# Any: the JSON value the kernel sent back, of whatever shape the probe gives
async def _evaluate(connection: KernelConnection, expression: str) -> Any:
    """The JSON value of ``expression``, evaluated as a silent ``user_expressions`` request."""
    content = {
        "code": "", "silent": True, "store_history": False, "allow_stdin": False,
        "user_expressions": {"r": expression}, "stop_on_error": False,
    }  # fmt: skip
    try:
        reply = await connection.request("execute_request", content, READ_TIMEOUT_S)
    except TimeoutError as exc:
        raise OutsideError(
            f"the kernel did not answer in {READ_TIMEOUT_S:.0f} s (a cell may be running); "
            "try again when it is idle"
        ) from exc
    found = reply.get("content", {}).get("user_expressions", {}).get("r", {})
    if found.get("status") != "ok":
        name = found.get("ename", "error")
        if name in ("ModuleNotFoundError", "ImportError"):
            raise OutsideError(NOT_INSTALLED)
        raise OutsideError(f"the kernel could not answer: {name}: {found.get('evalue', '')}")
    text = found.get("data", {}).get("text/plain", "null")
    return json.loads(ast.literal_eval(text))


def _result(answer: HostAnswer) -> RunResult:
    """The host's answer as the tools read a run: its text, images and status."""
    result = RunResult(status=answer["status"])
    result.texts.append(_plain(answer["text"]))
    result.images = [(i["mime"], i["data"]) for i in answer["images"]]
    result.changes = list(answer.get("changes", []))
    return result
