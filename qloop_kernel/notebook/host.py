"""The kernel session as the host of outside agents' steps: the ``qloop.host`` comm target.

The Jupyter server decides an outside agent's ``run_code`` (policy, grant or the page's card,
``server/gate.py``) and forwards the approved code here as a typed request
(:class:`~qloop_kernel.records.protocol_schema.HostRequest`) on its one connection to the kernel.
The step then runs through the same machinery as the in-notebook agent's ``run_code``: the
built-in tool in a :class:`~qloop_kernel.tools.runtime.ToolRuntime`, under the step guard
(:mod:`.guard`: a step that rebinds qloop's policy is undone and refused), with the undo snapshot
and the changes report of :class:`~.code.CodeRunner`; the step joins the session's undo log
under the client's name, so ``%agent undo`` takes it back. The answer
(:class:`~qloop_kernel.records.protocol_schema.HostAnswer`) is redacted here, before it leaves.

:func:`register` registers the target; the server calls it through ``user_expressions`` before it
opens the comm, so a kernel where ``%load_ext qloop_kernel`` was not run hosts steps too (the first
step loads the extension: ``%agent undo`` must exist to take the step back). A request that
arrives while a cell waits for a click (the shell pump dispatches comm messages then) runs once
that cell has ended, as a cell queued behind it would.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, cast

from ..messages import ToolCall
from ..policy.permissions import PolicyDenier
from ..policy.pipeline import Provenance
from ..records.protocol_schema import STOPPED_BEFORE
from ..redact import redact_text
from ..tools.runtime import ToolRuntime
from .guard import StepGuard
from .pump import ShellPump
from .session import session_for
from .tools import BuiltinTools

if TYPE_CHECKING:
    from ..records.protocol_schema import HostAnswer, HostRequest
    from .agent import KernelAgent

TARGET = "qloop.host"
BUSY_RETRY_S = 0.05  # how often a step deferred behind a waiting cell checks again
INTERRUPTED = "KeyboardInterrupt: the step was interrupted (the kernel got an interrupt)"


# Any: the shell, as the server's user_expressions hands over get_ipython()
def register(shell: Any) -> str:
    """Register the ``qloop.host`` comm target on ``shell``'s kernel (once); JSON text naming it."""
    manager = shell.kernel.comm_manager
    if TARGET not in manager.targets:
        manager.register_target(TARGET, OutsideHost(shell).opened)
    return json.dumps({"target": TARGET})


class OutsideHost:
    """Runs the steps the Jupyter server forwards over ``qloop.host`` comms of one kernel."""

    # Any: the IPython shell the comm target was registered on
    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.session = session_for(shell)
        self._tools: BuiltinTools | None = None
        self._cancelled: set[str] = set()  # steps stopped before they started

    # Any: ipykernel's Comm and its message dict (the comm package is untyped)
    def opened(self, comm: Any, msg: dict[str, Any]) -> None:
        comm.on_msg(lambda message: self.received(comm, message))

    def received(self, comm: Any, message: dict[str, Any]) -> None:
        """One request: run it now, or once the cell that waits for a click has ended; a cancel
        of a step that has not started yet (Stop on the card) keeps it from running."""
        request = message.get("content", {}).get("data", {})
        if not isinstance(request, dict):
            return  # not of the protocol: nobody waits for an answer
        request_id = str(request.get("request_id", ""))
        if request.get("op") == "cancel":
            self._cancelled.add(request_id)
            return
        if request.get("op") != "run_step":
            return
        if request_id in self._cancelled:
            self._cancelled.discard(request_id)
            comm.send({"op": "ack", "request_id": request_id, "ok": True, "status": "refused",
                       "text": STOPPED_BEFORE, "images": []})  # fmt: skip
            return
        if self._busy():
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # no loop to defer to: the kernel is not ipykernel's
                loop = None
            if loop is not None:
                loop.call_later(BUSY_RETRY_S, self.received, comm, message)
                return
        # The server interrupts the kernel for a Stop only once the step has started, so an
        # interrupt never lands in a cell the step waited behind.
        try:
            comm.send({"op": "started", "request_id": request_id})
            answer = self.answer(request)  # type: ignore[arg-type]
        except KeyboardInterrupt:  # landed before the step's own handling: it still answers
            answer = {"op": "ack", "request_id": request_id, "ok": True, "status": "error",
                      "text": INTERRUPTED, "images": []}  # fmt: skip
        comm.send(answer)

    def _busy(self) -> bool:
        """A cell waits for a click (the pump dispatched this), or an agent turn is under way."""
        pump = ShellPump._instance
        agent = self.session.agent
        turn = agent is not None and bool(getattr(agent, "turn_running", False))
        return (pump is not None and pump.waiting) or turn

    def answer(self, request: HostRequest) -> HostAnswer:
        """Run the step; what it printed, returned and changed, or why it did not run."""
        base: dict[str, Any] = {"op": "ack", "request_id": str(request.get("request_id", ""))}
        try:
            found = self.run_step(request)
        except KeyboardInterrupt:
            found = {"status": "error", "text": INTERRUPTED, "images": []}
        except _Refused as exc:
            found = {"status": "refused", "text": str(exc), "images": []}
        return {**base, "ok": True, **found}  # type: ignore[typeddict-item]

    def run_step(self, request: HostRequest) -> dict[str, Any]:
        agent = self._agent()
        timeout = request.get("timeout_s")
        tools = self._builtins().for_turn(code_timeout_s=float(timeout) if timeout else None)
        run_code = next(t for t in tools if t.name == "run_code")
        runtime = ToolRuntime.of(
            [run_code], PolicyDenier("ask"), grants=agent.grants, guard=StepGuard(agent),
            provenance=Provenance(approved="outside"),
        )  # fmt: skip  # the server's policy, grant or card approved it: the pipeline's input
        call = ToolCall(str(request["call_id"]), "run_code", {"code": str(request["code"])})
        outcome = runtime.run(call)
        step = agent.undo.claim(call.id)
        if step is not None:
            step.by = str(request.get("client") or "an outside agent")
        texts = [str(b["text"]) for b in outcome.content if b.get("type") == "text"]
        images = [
            {"mime": str(b["source"]["media_type"]), "data": str(b["source"]["data"])}
            for b in outcome.content
            if b.get("type") == "image"
        ]
        status = "refused" if outcome.fatal else ("error" if outcome.is_error else "ok")
        changed = step.shown_lines() if step is not None and step.changes else []
        return {
            "status": status,
            "text": redact_text("\n".join(texts)),
            "images": images,
            "changes": [redact_text(line) for line in changed],
            "not_undone": [redact_text(n) for n in step.not_undone()] if step else [],
        }

    def _builtins(self) -> BuiltinTools:
        if self._tools is None:
            self._tools = BuiltinTools(self.shell, session=self.session)
        return self._tools

    def _agent(self) -> KernelAgent:
        """The kernel's agent (its grants, settings and undo log), the extension loaded first."""
        from IPython.core.error import UsageError

        if "qloop_kernel" not in self.shell.extension_manager.loaded:
            self.shell.extension_manager.load_extension("qloop_kernel")
        try:
            agent = self.session.kernel_agent()
        except RuntimeError:
            raise _Refused("qloop's extension did not load in this kernel") from None
        except UsageError as exc:  # the kernel's qloop settings are invalid: the message says why
            raise _Refused(f"not run: {exc}") from None
        return cast("KernelAgent", agent)  # the magics make a KernelAgent (magic.py)


class _Refused(Exception):
    """A step that cannot run in this kernel; the message says why."""
