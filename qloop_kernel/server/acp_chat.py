"""Chats with hosted coding agents: one agent process per chat, spoken to over ACP (stdio).

A chat starts its agent with the official SDK (``acp.spawn_agent_process``), initializes it with
the client capabilities qloop decides (:class:`~.acp_client.GatedClient`) and opens an ACP session
whose MCP server is qloop's own authenticated ``qloop/mcp`` endpoint, so the agent's notebook work
is reviewed there (read tools, ``run_code``, cell proposals). Everything the agent streams, every
decision and every change of state is an *event* of the chat, numbered, which the panel reads in
order. An agent that exits is reported in the chat with its exit code and the end of what it wrote
to stderr; the next prompt starts it again (``session/load`` where it supports it). Modes that
would bypass approval are offered only where the policy and the admin floor allow running
everything unasked.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp
from acp import schema as acp_schema

from ..errors import QloopError
from ..names import Policy
from ..policy.admin import AdminError, admin_floor
from ..redact import redact_text
from .acp_agents import CLIENT_HEADER, AgentSpec
from .acp_client import GatedClient
from .acp_log import SessionLog
from .gate import Gate

BYPASS_WORDS = ("bypass", "yolo", "dangerous", "full-access", "full_access", "auto-approve")
STDERR_LINES = 20


@dataclass(frozen=True)
class Endpoint:
    """qloop's MCP server as the agent reaches it (None url: MCP is not served)."""

    url: str | None
    token: str


def bypasses(mode_id: str, name: str) -> bool:
    """Whether a mode's id or name says it skips asking."""
    text = f"{mode_id} {name}".lower()
    return any(word in text for word in BYPASS_WORDS)


def bypass_allowed(policy: Policy) -> bool:
    """A mode that skips asking is offered only where everything runs unasked anyway."""
    try:
        return policy == "auto" and admin_floor().policy_refusal("auto") is None
    except AdminError:
        return False


class ChatError(QloopError):
    """A request of the panel this chat cannot serve; the message says why."""


class Chat:
    """One conversation with one agent process."""

    def __init__(
        self, chat_id: str, spec: AgentSpec, root: Path, endpoint: Endpoint, gate: Gate
    ) -> None:
        self.id = chat_id
        self.spec = spec
        self.root = root
        self.endpoint = endpoint
        self.gate = gate
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()
        self.client = GatedClient(
            chat_id, spec.name, root, gate, SessionLog(root, chat_id), self.emit
        )
        self.conn: Any = None  # acp.ClientSideConnection while the agent runs
        self.process: asyncio.subprocess.Process | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._watch: asyncio.Task[None] | None = None
        self.turn: asyncio.Task[None] | None = None
        self.session_id: str | None = None
        self.can_load = False
        self.modes: list[dict[str, str]] = []
        self.mode: str | None = None
        self.options: list[dict[str, Any]] = []
        self.stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._closing = False

    # --- events -------------------------------------------------------------------------------

    def emit(self, event: dict[str, Any]) -> None:
        # A snapshot: the chat's state changes later, an event says what held when it happened.
        self.events.append(copy.deepcopy({"n": len(self.events) + 1, **event}))
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def after(self, n: int, wait_s: float) -> list[dict[str, Any]]:
        """The events after the ``n``-th, waiting up to ``wait_s`` for one."""
        if len(self.events) <= n:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait_s)
        return self.events[n:]

    def state(self) -> dict[str, Any]:
        return {
            "id": self.id, "agent": self.spec.name, "cards": self.client.key,
            "running": self.conn is not None, "busy": self.busy,
            "modes": self.modes, "mode": self.mode, "options": self.options,
        }  # fmt: skip

    @property
    def busy(self) -> bool:
        return self.turn is not None and not self.turn.done()

    # --- the agent process --------------------------------------------------------------------

    async def start(self) -> None:
        stack = contextlib.AsyncExitStack()
        try:
            conn, process = await stack.enter_async_context(
                acp.spawn_agent_process(
                    self.client, self.spec.command, *self.spec.args, env=self.spec.env,
                    cwd=self.root,
                )
            )  # fmt: skip
            await self._open(conn)
        except FileNotFoundError as exc:
            await stack.aclose()
            raise ChatError(
                f"cannot start {self.spec.name}: {self.spec.command} is not found"
            ) from exc
        except (ConnectionError, acp.RequestError) as exc:
            await stack.aclose()
            raise ChatError(f"{self.spec.name} did not start a session: {self._why(exc)}") from exc
        self.conn, self._stack, self.process = conn, stack, process
        self._watch = asyncio.ensure_future(self._watch_process(process))
        self.emit({"kind": "ready", **self.state()})

    async def _open(self, conn: Any) -> None:
        capabilities = acp_schema.ClientCapabilities(
            fs=acp_schema.FileSystemCapabilities(read_text_file=True, write_text_file=True),
            terminal=True,
        )
        info = acp_schema.Implementation(name="qloop", version="1")
        found = await conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=capabilities,
            client_info=info,
        )
        agent = found.agent_capabilities
        self.can_load = bool(agent is not None and agent.load_session)
        servers = self._mcp_servers()
        if self.session_id is not None and self.can_load:
            opened = await conn.load_session(cwd=str(self.root), session_id=self.session_id,
                                             mcp_servers=servers)  # fmt: skip
        else:
            opened = await conn.new_session(cwd=str(self.root), mcp_servers=servers)
            self.session_id = opened.session_id
        self._pickers(opened)

    def _mcp_servers(self) -> list[acp_schema.HttpMcpServer]:
        if self.endpoint.url is None:
            return []
        headers = [acp_schema.HttpHeader(name=CLIENT_HEADER, value=self.client.source)]
        if self.endpoint.token:
            token = f"token {self.endpoint.token}"
            headers.append(acp_schema.HttpHeader(name="Authorization", value=token))
        return [acp_schema.HttpMcpServer(type="http", name="qloop", url=self.endpoint.url,
                                         headers=headers)]  # fmt: skip

    def _pickers(self, opened: Any) -> None:
        allowed = bypass_allowed(self.gate.policy())
        modes = getattr(opened, "modes", None)
        if modes is not None:
            self.modes = [
                {"id": m.id, "name": m.name}
                for m in modes.available_modes
                if allowed or not bypasses(m.id, m.name)
            ]
            self.mode = modes.current_mode_id
        options = getattr(opened, "config_options", None) or []
        self.options = [_option(o) for o in options if _option(o)]

    async def _watch_process(self, process: asyncio.subprocess.Process) -> None:
        reader = asyncio.ensure_future(self._read_stderr(process))
        code = await process.wait()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader, 2)
        if self._closing:
            return
        said = f"; it wrote: {self.stderr[-1]}" if self.stderr else ""
        text = (f"{self.spec.name} stopped (exit code {code}){said}. "
                "Send a message to start it again.")  # fmt: skip
        self.emit({"kind": "error", "text": text})
        await self._release()

    async def _read_stderr(self, process: asyncio.subprocess.Process) -> None:
        if process.stderr is None:
            return
        while line := await process.stderr.readline():
            self.stderr.append(redact_text(line.decode("utf-8", "replace").rstrip()))

    async def _release(self) -> None:
        stack, self._stack, self.conn = self._stack, None, None
        self.client.close()
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()
        self.emit({"kind": "state", **self.state()})

    def _why(self, exc: BaseException) -> str:
        said = f" ({self.stderr[-1]})" if self.stderr else ""
        return redact_text(str(exc) or type(exc).__name__) + said

    # --- the panel's requests -----------------------------------------------------------------

    async def prompt(self, text: str) -> None:
        if self.busy:
            raise ChatError("the agent is still answering: Stop it or wait")
        if self.conn is None:
            await self.start()
        self.emit({"kind": "user", "text": redact_text(text)})
        self.turn = asyncio.ensure_future(self._turn(text))

    async def _turn(self, text: str) -> None:
        try:
            answer = await self.conn.prompt(session_id=self.session_id,
                                            prompt=[acp.text_block(text)])  # fmt: skip
            stop = str(answer.stop_reason)
        except (ConnectionError, acp.RequestError, AttributeError) as exc:
            stop = "agent_stopped" if not isinstance(exc, acp.RequestError) else "error"
            if stop == "error":
                self.emit({"kind": "error", "text": f"{self.spec.name}: {self._why(exc)}"})
        self.emit({"kind": "turn_end", "stop_reason": stop})

    async def cancel(self) -> None:
        if self.conn is None or not self.busy:
            raise ChatError("no turn is running")
        await self.conn.cancel(session_id=self.session_id)

    async def set_mode(self, mode_id: str) -> None:
        if self.conn is None:
            raise ChatError("the agent is not running: send a message first")
        if all(m["id"] != mode_id for m in self.modes):
            raise ChatError(f"{mode_id!r} is not a mode offered here")
        await self.conn.set_session_mode(session_id=self.session_id, mode_id=mode_id)
        self.mode = mode_id
        self.emit({"kind": "state", **self.state()})

    async def set_option(self, option_id: str, value: str) -> None:
        found = next((o for o in self.options if o["id"] == option_id), None)
        if self.conn is None or found is None:
            raise ChatError(f"{option_id!r} is not an option of this agent now")
        if value not in {v["value"] for v in found["values"]}:
            raise ChatError(f"{value!r} is not a value of {option_id!r}")
        await self.conn.set_config_option(config_id=option_id, session_id=self.session_id,
                                          value=value)  # fmt: skip
        found["current"] = value
        self.emit({"kind": "state", **self.state()})

    async def close(self) -> None:
        self._closing = True
        if self.turn is not None:
            self.turn.cancel()
        await self._release()


def _option(option: Any) -> dict[str, Any]:
    """A select option the agent offers (a model picker, say), or {} for others."""
    values = getattr(option, "options", None)
    if getattr(option, "type", None) != "select" or not isinstance(values, list):
        return {}
    listed = [
        {"value": str(getattr(v, "value", "")), "name": str(getattr(v, "name", ""))}
        for v in values
        if getattr(v, "value", None) is not None
    ]
    return {"id": option.id, "name": option.name, "current": str(option.current_value),
            "category": str(getattr(option, "category", "") or ""), "values": listed}  # fmt: skip


class Chats:
    """Every chat of this Jupyter server, by id."""

    def __init__(self, make: Callable[[str, AgentSpec], Chat]) -> None:
        self._make = make
        self.chats: dict[str, Chat] = {}

    async def open(self, spec: AgentSpec) -> Chat:
        chat = self._make(uuid.uuid4().hex[:12], spec)
        await chat.start()
        self.chats[chat.id] = chat
        return chat

    def get(self, chat_id: str) -> Chat:
        found = self.chats.get(chat_id)
        if found is None:
            raise ChatError(f"no chat {chat_id!r} (the server may have restarted)")
        return found

    def kill_all(self) -> None:
        """Stop every agent process now (the server is exiting: no event loop to close them)."""
        for chat in self.chats.values():
            chat._closing = True
            if chat.process is not None and chat.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    chat.process.kill()

    async def close_all(self) -> None:
        for chat in list(self.chats.values()):
            await chat.close()
        self.chats.clear()
