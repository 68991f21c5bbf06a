"""The live kernels the Jupyter server runs, as the outside tools reach them.

A notebook's kernel is the one its session (the page's, or an outside one the user started) holds.
Read tools send an empty ``execute_request`` with ``user_expressions`` that call
:mod:`qloop_kernel.server.probe`; ``run_code`` sends the approved code and collects its outputs.
Each call uses its own kernel client, so outputs of other clients never mix in; the page ignores
ours, whose parent it did not send.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import QloopError
from .broker import notebook_key

if TYPE_CHECKING:
    from jupyter_client.asynchronous.client import AsyncKernelClient

READ_TIMEOUT_S = 15.0  # a read tool waits this long for a kernel busy with a cell
START_TIMEOUT_S = 60.0  # the first call to a kernel waits this long for it to start
GONE_CHECK_S = 1.0  # how often a running call checks that its kernel is still the same process
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
PROBE = "__import__('qloop_kernel.server.probe', fromlist=['probe'])"


class OutsideError(QloopError):
    """A call an outside agent made that cannot be served; the message says why and what to do."""


@dataclass
class RunResult:
    """What running code printed and returned, in order, and whether it raised."""

    texts: list[str] = field(default_factory=list)
    images: list[tuple[str, str]] = field(default_factory=list)  # (mime type, base64 data)
    error: str | None = None
    status: str = "ok"

    def text(self) -> str:
        parts = list(self.texts)
        if self.error is not None:
            parts.append(self.error)
        return "".join(parts)


def _plain(text: str) -> str:
    return _ANSI.sub("", text)


class Kernels:
    """The Jupyter server's sessions and kernels, for the outside tools."""

    def __init__(self, serverapp: Any) -> None:
        self.serverapp = serverapp
        self._answered: set[str] = set()  # kernels that answered once: started

    async def _started(self, kernel_id: str, client: Any) -> None:
        """Wait for a kernel this server has not heard from yet to answer (it may still start:
        a notebook just opened); OutsideError when it does not."""
        if kernel_id in self._answered:
            return
        try:
            await client.wait_for_ready(timeout=START_TIMEOUT_S)
        except RuntimeError as exc:  # jupyter_client's "did not respond" or "died"
            raise OutsideError(
                f"the kernel did not answer in {START_TIMEOUT_S:.0f} s (it may still be starting, "
                "or running a cell); try again when it is idle"
            ) from exc
        self._answered.add(kernel_id)

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

    def _client(self, kernel_id: str) -> AsyncKernelClient:
        manager = self.serverapp.kernel_manager
        if kernel_id not in manager:
            raise OutsideError(f"the kernel {kernel_id} is gone")
        client: AsyncKernelClient = manager.get_kernel(kernel_id).client()
        client.start_channels()
        return client

    # Any: the JSON value the kernel sent back, of whatever shape the probe gives
    async def evaluate(self, kernel_id: str, expression: str) -> Any:
        """The JSON value ``expression`` (a call into ``probe``) returns in the kernel."""
        client = self._client(kernel_id)
        try:
            await self._started(kernel_id, client)
            reply = await client.execute_interactive(
                "",
                silent=True,
                store_history=False,
                user_expressions={"r": expression},
                timeout=READ_TIMEOUT_S,
                output_hook=lambda msg: None,
            )
        except TimeoutError as exc:
            raise OutsideError(
                f"the kernel did not answer in {READ_TIMEOUT_S:.0f} s (a cell may be running); "
                "try again when it is idle"
            ) from exc
        finally:
            client.stop_channels()
        found = reply.get("content", {}).get("user_expressions", {}).get("r", {})
        if found.get("status") != "ok":
            name = found.get("ename", "error")
            if name in ("ModuleNotFoundError", "ImportError"):
                raise OutsideError(
                    "qloop-kernel is not installed in this kernel's environment: install it "
                    "there (`pip install qloop-kernel`) and restart the kernel"
                )
            raise OutsideError(f"the kernel could not answer: {name}: {found.get('evalue', '')}")
        text = found.get("data", {}).get("text/plain", "null")
        return json.loads(ast.literal_eval(text))

    async def prepared(self, kernel_id: str, code: str) -> tuple[str, list[str]]:
        """``code`` as the kernel's IPython runs it, and the names bound in its namespace."""
        found = await self.evaluate(kernel_id, f"{PROBE}.prepared(get_ipython(), {code!r})")
        return str(found["source"]), [str(n) for n in found["names"]]

    async def run(self, kernel_id: str, code: str, timeout_s: float) -> RunResult:
        """Run ``code`` in the kernel as a cell would (not in its history); its outputs. A kernel
        that dies or restarts meanwhile ends the call at once (no reply will come)."""
        client = self._client(kernel_id)
        result = RunResult()
        running = asyncio.ensure_future(
            client.execute_interactive(
                code,
                store_history=False,
                allow_stdin=False,
                timeout=timeout_s,
                output_hook=lambda msg: _collect(result, msg),
            )
        )
        watch = asyncio.ensure_future(self._gone(kernel_id))
        try:
            await asyncio.wait({running, watch}, return_when=asyncio.FIRST_COMPLETED)
            if not running.done():
                running.cancel()
                result.status = "gone"
                result.error = "\n[the kernel died or restarted while this ran]\n"
                return result
            reply = running.result()
        except TimeoutError:
            await self.interrupt(kernel_id)
            result.status = "timeout"
            result.error = f"\n[interrupted: still running after {timeout_s:.0f} s]\n"
            return result
        finally:
            watch.cancel()
            client.stop_channels()
        result.status = str(reply.get("content", {}).get("status", "ok"))
        return result

    async def _gone(self, kernel_id: str) -> None:
        """Return once the kernel is no longer the process it was (dead, restarted, shut down)."""
        manager = self.serverapp.kernel_manager
        kernel = manager.get_kernel(kernel_id)
        started = getattr(kernel.provisioner, "process", None) or kernel.provisioner
        while True:
            await asyncio.sleep(GONE_CHECK_S)
            if kernel_id not in manager or kernel.provisioner is None:
                return
            now = getattr(kernel.provisioner, "process", None) or kernel.provisioner
            alive = kernel.is_alive()
            if now is not started or not (await alive if inspect.isawaitable(alive) else alive):
                return

    async def interrupt(self, kernel_id: str) -> None:
        done = self.serverapp.kernel_manager.interrupt_kernel(kernel_id)
        if inspect.isawaitable(done):
            await done


def _collect(result: RunResult, msg: dict[str, Any]) -> None:
    kind = msg.get("msg_type") or msg.get("header", {}).get("msg_type")
    content = msg.get("content", {})
    if kind == "stream":
        result.texts.append(_plain(str(content.get("text", ""))))
    elif kind in ("execute_result", "display_data"):
        data = content.get("data", {})
        for mime in ("image/png", "image/jpeg"):
            if isinstance(data.get(mime), str):
                result.images.append((mime, data[mime].strip()))
        if "text/plain" in data:
            result.texts.append(_plain(str(data["text/plain"])) + "\n")
    elif kind == "error":
        trace = "\n".join(_plain(str(line)) for line in content.get("traceback", []))
        head = f"{content.get('ename', 'Error')}: {content.get('evalue', '')}"
        result.error = trace if trace.strip() else head
    elif kind == "clear_output":
        result.texts.clear()
        result.images.clear()
