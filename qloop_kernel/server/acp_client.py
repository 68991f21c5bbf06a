"""The client side of ACP that qloop gives a hosted agent: every request it makes of this machine
is decided by :class:`~.gate.Gate`, as an outside agent's MCP call is.

``session/request_permission`` (the agent asks before one of its own tool calls), ``fs/read_text_file``,
``fs/write_text_file`` (class ``external``) and ``terminal/*`` (the command classified like a ``!``
command) each become a :class:`~.gate.Step` of the chat: the user's ``QloopMCP.policy``, the admin
floor, the grants of this chat, then the card in the chat panel (the broker's items under the
chat's key, ``acp/<chat id>``), naming "ACP agent <name>". A path outside the server root (symlinks
resolved) is refused before anything is asked. Each decision and action is saved, signed and
redacted, in the chat's session log (:mod:`.acp_log`) and traced like an outside call.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import RequestError, default_environment
from acp import schema as acp_schema

from ..policy.risk import Assessment, Reason, Risk, classify
from ..redact import redact_text
from ..telemetry import OutsideCall, trace_outside
from . import record
from .acp_log import SessionLog
from .gate import Gate, Step, Verdict

OUTPUT_LIMIT = 200_000  # bytes of a terminal's output kept when the agent names no limit
KIND_RISK: dict[str, Risk] = {
    "read": "read", "search": "read", "think": "read", "edit": "write", "move": "write",
    "delete": "destructive", "fetch": "external", "execute": "external", "other": "unknown",
}  # fmt: skip

Emit = Callable[[dict[str, Any]], None]


def refused(message: str) -> RequestError:
    """The error the agent gets: the message says why (agents show an error's message)."""
    return RequestError(-32602, message, {"message": message})


def shell_assessment(command: str, args: list[str]) -> Assessment:
    """A terminal command's class, found as a ``!`` line of the same command would be."""
    line = shlex.join([command, *args])
    return classify(f"get_ipython().system({line!r})\n")


def inside(root: Path, path: str) -> Path | None:
    """``path`` (absolute, as ACP requires) with symlinks resolved, when it lies under ``root``."""
    given = Path(path)
    if not given.is_absolute():
        given = root / given
    resolved = given.resolve()
    return resolved if resolved.is_relative_to(root.resolve()) else None


@dataclass
class Terminal:
    """A command the agent runs, with the output it printed so far."""

    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    async def read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.output += chunk
            if len(self.output) > self.limit:  # keep the end, as ACP asks
                del self.output[: len(self.output) - self.limit]
                self.truncated = True

    def exit_status(self) -> acp_schema.TerminalExitStatus | None:
        code = self.process.returncode
        return None if code is None else acp_schema.TerminalExitStatus(exit_code=code)


class GatedClient:
    """The ``acp.Client`` of one chat; ``emit`` adds an event to the chat's stream."""

    def __init__(
        self, chat_id: str, agent: str, root: Path, gate: Gate, log: SessionLog, emit: Emit
    ) -> None:
        self.chat_id = chat_id
        self.source = f"ACP agent {agent}"
        self.root = root
        self.gate = gate
        self.log = log
        self.emit = emit
        self.terminals: dict[str, Terminal] = {}

    @property
    def key(self) -> str:
        """Where the chat panel finds this chat's cards (the broker's items for this key)."""
        return f"acp/{self.chat_id}"

    # --- the decision, and its record ---------------------------------------------------------

    async def decide(
        self, tool: str, code: str, assessment: Assessment, asks: str
    ) -> tuple[Step, Verdict]:
        step = Step(self.source, self.key, tool, code, assessment, session=self.chat_id, asks=asks)

        async def progress(waited: float, message: str) -> None:
            self.emit({"kind": "waiting", "tool": tool, "waited": round(waited)})

        verdict = await self.gate.decide(step, progress)
        if verdict.approval_id is not None:  # approved on its card: the card goes now
            self.gate.broker.drop(verdict.approval_id)
        return step, verdict

    def saved(self, step: Step, verdict: Verdict, result: str = "", failed: bool = False) -> None:
        ran = redact_text(verdict.code) if verdict.run else None
        entry = record.entry(
            client=step.client, tool=step.tool, input={"code": redact_text(step.code)},
            decision=verdict.how, reason=redact_text(verdict.reason or verdict.message), ran=ran,
            risk=step.assessment.risk, result=redact_text(result), is_error=failed or ran is None,
        )  # fmt: skip
        self.log.append(entry)
        self.emit({"kind": "decision", "tool": step.tool, "decision": verdict.how,
                   "run": verdict.run, "reason": entry["reason"]})  # fmt: skip
        trace_outside(OutsideCall(entry, step.path, self.chat_id, verdict.kind, verdict.by,
                                  step.started))  # fmt: skip

    def refuse(self, tool: str, code: str, risk: Risk, why: str) -> RequestError:
        """A request refused before any decision (a path outside the root): saved, and the error."""
        assessment = Assessment(risk, (Reason(1, risk, why),), frozenset())
        step = Step(self.source, self.key, tool, code, assessment, session=self.chat_id)
        self.saved(step, Verdict(False, "refused: outside the server root", message=why))
        return refused(why)

    def place(self, tool: str, path: str, risk: Risk) -> Path:
        found = inside(self.root, path)
        if found is None:
            why = f"refused: {path} is outside the Jupyter server's root ({self.root})"
            raise self.refuse(tool, path, risk, why)
        return found

    # --- session/request_permission -----------------------------------------------------------

    async def request_permission(
        self, session_id: str, tool_call: acp_schema.ToolCallUpdate,
        options: list[acp_schema.PermissionOption], **kwargs: Any,
    ) -> acp_schema.RequestPermissionResponse:  # fmt: skip
        title = tool_call.title or tool_call.tool_call_id
        raw = tool_call.raw_input
        code = title if raw is None else f"{title}\n{json.dumps(raw, default=str, indent=1)}"
        assessment = _permission_assessment(tool_call)
        step, verdict = await self.decide(
            f"acp:{tool_call.kind or 'other'}", code, assessment, f"use its tool: {title}"
        )
        self.saved(step, verdict)
        wanted = ("allow_once", "allow_always") if verdict.run else ("reject_once", "reject_always")
        for kind in wanted:
            for option in options:
                if option.kind == kind:
                    chosen = acp_schema.AllowedOutcome(
                        outcome="selected", option_id=option.option_id
                    )
                    return acp_schema.RequestPermissionResponse(outcome=chosen)
        return acp_schema.RequestPermissionResponse(
            outcome=acp_schema.DeniedOutcome(outcome="cancelled")
        )

    # --- fs/* ---------------------------------------------------------------------------------

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
        **kwargs: Any,
    ) -> acp_schema.ReadTextFileResponse:  # fmt: skip
        found = self.place("fs/read_text_file", path, "read")
        assessment = Assessment("read", (Reason(1, "read", f"reads {found}"),), frozenset())
        step, verdict = await self.decide(
            "fs/read_text_file", str(found), assessment, f"read the file {found}"
        )
        if not verdict.run:
            self.saved(step, verdict)
            raise refused(verdict.message)
        try:
            lines = found.read_text(encoding="utf-8").splitlines(keepends=True)
        except (OSError, UnicodeDecodeError) as exc:
            self.saved(step, verdict, f"{type(exc).__name__}: {exc}", failed=True)
            raise refused(f"cannot read {path}: {exc}") from exc
        start = max((line or 1) - 1, 0)
        text = "".join(lines[start : None if limit is None else start + limit])
        self.saved(step, verdict, f"{len(text)} characters")
        return acp_schema.ReadTextFileResponse(content=text)

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> acp_schema.WriteTextFileResponse:
        found = self.place("fs/write_text_file", path, "external")
        if found.suffix == ".ipynb":
            why = (f"refused: {path} is a notebook; propose cell changes with qloop's MCP tools "
                   "(add_cell, edit_cell), which the user reviews as a diff")  # fmt: skip
            raise self.refuse("fs/write_text_file", path, "external", why)
        what = f"writes {len(content):,} characters to {found}"
        assessment = Assessment("external", (Reason(1, "external", what),), frozenset())
        step, verdict = await self.decide(
            "fs/write_text_file", f"# {found}\n{content}", assessment, f"write the file {found}"
        )
        if not verdict.run:
            self.saved(step, verdict)
            raise refused(verdict.message)
        written = verdict.code.partition("\n")[2] if verdict.code != step.code else content
        try:
            found.parent.mkdir(parents=True, exist_ok=True)
            found.write_text(written, encoding="utf-8")
        except OSError as exc:
            self.saved(step, verdict, f"{type(exc).__name__}: {exc}", failed=True)
            raise refused(f"cannot write {path}: {exc}") from exc
        self.saved(step, verdict, f"wrote {len(written):,} characters")
        return acp_schema.WriteTextFileResponse()

    # --- terminal/* ---------------------------------------------------------------------------

    async def create_terminal(
        self, session_id: str, command: str, args: list[str] | None = None,
        env: list[acp_schema.EnvVariable] | None = None, cwd: str | None = None,
        output_byte_limit: int | None = None, **kwargs: Any,
    ) -> acp_schema.CreateTerminalResponse:  # fmt: skip
        where = self.place("terminal/create", cwd, "external") if cwd else self.root
        line = shlex.join([command, *(args or [])])
        assessment = shell_assessment(command, list(args or []))
        asks = f"run a command in {where}"
        step, verdict = await self.decide("terminal/create", line, assessment, asks)
        if not verdict.run:
            self.saved(step, verdict)
            raise refused(verdict.message)
        extra = {v.name: v.value for v in env or []}
        process = await asyncio.create_subprocess_exec(
            *shlex.split(verdict.code), cwd=where, env=_environment(extra),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        terminal = Terminal(process, output_byte_limit or OUTPUT_LIMIT)
        terminal.reader = asyncio.ensure_future(terminal.read())
        terminal_id = f"t{len(self.terminals) + 1}-{int(time.time() * 1000) % 100_000}"
        self.terminals[terminal_id] = terminal
        self.saved(step, verdict, f"started as terminal {terminal_id}")
        return acp_schema.CreateTerminalResponse(terminal_id=terminal_id)

    def _terminal(self, terminal_id: str) -> Terminal:
        found = self.terminals.get(terminal_id)
        if found is None:
            raise refused(f"no terminal {terminal_id}")
        return found

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp_schema.TerminalOutputResponse:
        terminal = self._terminal(terminal_id)
        text = redact_text(bytes(terminal.output).decode("utf-8", "replace"))
        return acp_schema.TerminalOutputResponse(
            output=text, truncated=terminal.truncated, exit_status=terminal.exit_status()
        )

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> acp_schema.WaitForTerminalExitResponse:
        terminal = self._terminal(terminal_id)
        code = await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader
        return acp_schema.WaitForTerminalExitResponse(exit_code=code)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        terminal = self._terminal(terminal_id)
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> None:
        terminal = self.terminals.pop(terminal_id, None)
        if terminal is not None and terminal.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                terminal.process.kill()

    def close(self) -> None:
        for terminal_id in list(self.terminals):
            terminal = self.terminals.pop(terminal_id)
            if terminal.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    terminal.process.kill()

    # --- what the agent streams ---------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # The update is an ACP schema model (the SDK validated it): the panel renders its JSON.
        found = update.model_dump(mode="json", by_alias=True, exclude_none=True)
        self.emit({"kind": "update", "update": json.loads(redact_text(json.dumps(found)))})

    async def create_elicitation(
        self, message: str, mode: acp_schema.ElicitationMode, **kwargs: Any
    ) -> acp_schema.CreateElicitationResponse:
        # Forms the agent would put to the user are not shown yet: declined, so it goes on.
        return acp_schema.DeclineElicitationResponse(action="decline")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


def _permission_assessment(tool_call: acp_schema.ToolCallUpdate) -> Assessment:
    """The class of what the agent asks to do: a command it would run is classified as a ``!``
    command; otherwise the tool's kind says it."""
    raw = tool_call.raw_input
    command = raw.get("command") if isinstance(raw, dict) else None
    if isinstance(command, str) and command.strip():
        return shell_assessment(command, [])
    risk = KIND_RISK.get(str(tool_call.kind or "other"), "unknown")
    what = f"the agent's own tool: {tool_call.title or tool_call.kind or 'a tool call'}"
    return Assessment(risk, (Reason(1, risk, what),), frozenset())


def _environment(extra: dict[str, str]) -> dict[str, str]:
    return {**default_environment(), **extra}
