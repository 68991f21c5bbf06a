"""The MCP servers of one kernel session: what is configured, what runs, and their tools.

Servers connect on first use (the first agent turn after they are configured) and stay connected
for the session; a server whose connection ended (an HTTP server restarted, a stdio server that
crashed) is connected again at the next turn. :meth:`McpServers.close` stops them all; a stdio
server also dies with the kernel process (:mod:`.launch`). The values of a server's ``env`` and
``headers`` are redacted from everything the session shows, saves or logs.

What a stdio server writes to stderr is kept (its end, :class:`~.client.StderrRing`) and shown only
by ``%agent mcp``, redacted and with every character a person cannot see marked: never in a cell
output or in what the model reads (a crashed server's tool result says where to look instead).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ToolFailure
from ..messages import Block
from ..redact import redact_text, redacting_also
from ..text import marker
from ..visible import as_shown
from .client import (
    CLOSE_TIMEOUT_S,
    CONNECT_TIMEOUT_S,
    Connection,
    LoopThread,
    McpCallError,
    StderrRing,
    describe_error,
)
from .config import (
    Configured,
    McpConfigError,
    ServerConfig,
    admitted,
    approve,
    check_admitted,
    digest,
    is_approved,
    parse_servers,
    project_files,
    read_file,
    user_file,
)
from .tools import McpTool, adapt, result_blocks

log = logging.getLogger("qloop.mcp")
_GRACE_S = 2.0  # the main thread waits this much past a call's own timeout
RETRY_AFTER_S = 60.0  # a server that failed to start is tried again after this (or on restart)
STDERR_SHOWN_CHARS = 20_000  # of a server's kept stderr once marked, the end `%agent mcp` shows


@dataclass(frozen=True)
class ProjectFile:
    """A project ``.mcp.json``: its servers, its digest, and whether the user approved it."""

    path: Path
    sha256: str
    servers: tuple[Configured, ...]
    approved: bool


@dataclass
class Server:
    """A configured server and its connection (None until first use)."""

    entry: Configured
    connection: Connection | None = None
    tools: list[Any] = field(default_factory=list)  # the SDK's listed tools
    trusted: bool = False  # `%agent mcp trust NAME` (config's "trusted" counts too)
    stderr: StderrRing = field(default_factory=StderrRing)  # of every process it was started as
    announced: bool = True  # its held tools were named in a cell since it last connected

    @property
    def state(self) -> str:
        return self.connection.state if self.connection is not None else "not started"


class McpServers:
    """The kernel session's MCP servers.

    ``config`` gives kernel config's servers (``c.QloopAgent.mcp_servers``) when asked, so a
    ``%config`` change is seen at the next turn; ``folder`` is the notebook's folder.
    """

    def __init__(
        self, config: Callable[[], Any] = dict, folder: Callable[[], Path] = Path.cwd
    ) -> None:
        self._config = config
        self._folder = folder
        self.added: dict[str, Configured] = {}  # `%agent mcp add`: the user's act in the notebook
        self.removed: set[str] = set()
        self.trusted: set[str] = set()
        self.declined: set[str] = set()  # project files the user declined this session
        self.refused: list[str] = []  # servers the admin floor left out, each with its line
        self.servers: dict[str, Server] = {}
        self.loop = LoopThread()
        self._secrets: contextlib.ExitStack = contextlib.ExitStack()
        self._secret_values: tuple[str, ...] = ()

    # --- configuration -------------------------------------------------------------------------

    def project_files(self) -> list[ProjectFile]:
        """The project files next to the notebook, with whether each is approved."""
        found = []
        for path in project_files(self._folder()):
            sha = digest(path)
            servers = tuple(read_file(path, "project"))
            found.append(ProjectFile(path, sha, servers, is_approved(path, sha)))
        return found

    def approve_project(self, project: ProjectFile) -> None:
        """The user approved this file (as it is now): remembered in the user's own state."""
        approve(project.path, project.sha256)

    def configured(self) -> dict[str, Configured]:
        """Every server in effect: user file, kernel config, approved project files, then the
        notebook's own ``%agent mcp add``; removed ones left out."""
        entries = list(read_file(user_file(), "user"))
        config = self._config() or {}
        if config:
            entries += parse_servers(config, "config", "c.QloopAgent.mcp_servers")
        for project in reversed(self.project_files()):  # the nearest file wins
            if project.approved:
                entries += project.servers
        entries += self.added.values()
        entries, self.refused = admitted(entries)
        table = {e.name: e for e in entries if e.name not in self.removed}
        self._sync(table)
        return table

    def add(self, name: str, config: ServerConfig) -> None:
        """``%agent mcp add``: a server added by the user's own cell."""
        entry = Configured(name, config, "notebook", "this notebook")
        check_admitted(entry)
        self.removed.discard(name)
        self.added[name] = entry
        self.stop(name)

    def remove(self, name: str) -> None:
        if name not in self.configured():
            raise McpConfigError(f"no MCP server named {name!r}; see `%agent mcp`")
        self.added.pop(name, None)
        self.removed.add(name)
        self.stop(name)
        self.servers.pop(name, None)

    def trust(self, name: str) -> None:
        if name not in self.configured():
            raise McpConfigError(f"no MCP server named {name!r}; see `%agent mcp`")
        self.trusted.add(name)

    def is_trusted(self, name: str) -> bool:
        server = self.servers.get(name)
        return name in self.trusted or (server is not None and server.entry.config.trusted)

    def _sync(self, table: dict[str, Configured]) -> None:
        """Keep a server whose entry is unchanged; stop one whose entry changed or went away."""
        for name in list(self.servers):
            if name not in table or self.servers[name].entry.config != table[name].config:
                self.stop(name)
                del self.servers[name]
        for name, entry in table.items():
            self.servers.setdefault(name, Server(entry))
        self._redact(table.values())

    def _redact(self, entries: Iterable[Configured]) -> None:
        values = tuple(sorted({v for e in entries for v in e.config.secrets()}))
        if values == self._secret_values:
            return
        self._secrets.close()
        self._secrets = contextlib.ExitStack()
        self._secrets.enter_context(redacting_also(values))
        self._secret_values = values

    # --- connections ---------------------------------------------------------------------------

    def connect(self, name: str, *, retry: bool = False) -> Server:
        """Connect ``name`` unless it is connected; a failure is kept in its state, and tried
        again after ``RETRY_AFTER_S`` (at once with ``retry``)."""
        server = self.servers[name]
        connection = server.connection
        if connection is not None and connection.state == "connected":
            return server
        recent = connection is not None and time.monotonic() - connection.failed_at < RETRY_AFTER_S
        if connection is not None and connection.state == "failed" and recent and not retry:
            return server  # a server that failed to start is not waited for at every turn
        if connection is not None:
            self._close(connection)
        connection = Connection(name, server.entry.config, os.getpid(), server.stderr)
        server.connection = connection
        try:
            server.tools = self.loop.wait(connection.open(), CONNECT_TIMEOUT_S + _GRACE_S)
            server.announced = False
        except (McpCallError, TimeoutError, OSError) as exc:
            connection.state, connection.failed_at = "failed", time.monotonic()
            connection.error = connection.error or describe_error(exc)
            server.tools = []
            log.info("MCP server %s: %s", name, redact_text(connection.error))
        return server

    def tools(self) -> list[McpTool]:
        """The tools of every configured server, connecting those not connected yet."""
        made: list[McpTool] = []
        for name in self.configured():
            server = self.connect(name)
            made += self._adapted(server)
        return made

    def unavailable(self) -> list[str]:
        """One line per server that could not be started or reached, with why (redacted)."""
        notes = []
        for name, server in self.servers.items():
            connection = server.connection
            if connection is not None and connection.state == "failed":
                why = as_shown(redact_text(connection.error or "unknown error"))
                notes.append(f"MCP server '{name}' is not available, its tools are left out: {why}"
                             + self._stderr_hint(server))  # fmt: skip
        return notes

    def notes(self) -> list[str]:
        """The lines a turn shows about the servers: those not available, and, once after a
        server connects, each of its tools held to asking (its description hides characters)."""
        notes = self.unavailable() + self.refused  # left out by the admin floor
        for server in self.servers.values():
            if server.announced or server.state != "connected":
                continue
            server.announced = True
            notes += [
                f"{tool.name}: {tool.always_ask}; `%agent mcp` shows what the model reads"
                for tool in self._adapted(server)
                if tool.always_ask is not None
            ]
        return notes

    def adapted(self, name: str) -> list[McpTool]:
        """Server ``name``'s tools as the model receives them (none before it connects)."""
        server = self.servers.get(name)
        return self._adapted(server) if server is not None else []

    def stderr_text(self, name: str) -> str:
        """The end of what server ``name`` wrote to stderr, redacted, every character a person
        cannot see marked, with how much before it is left out; "" when it wrote nothing."""
        server = self.servers.get(name)
        if server is None:
            return ""
        text, left_out = server.stderr.text()
        shown = as_shown(redact_text(text)).strip("\n")
        head = marker(left_out, "bytes", "only the end is kept") if left_out else ""
        if len(shown) > STDERR_SHOWN_CHARS:  # its marks made it longer: the end, whole lines
            shown = shown[-STDERR_SHOWN_CHARS:].partition("\n")[2]
            head = "[... earlier lines left out; only the end is shown ...]"
        return f"{head}\n{shown}" if head and shown else shown

    def _stderr_hint(self, server: Server) -> str:
        return (
            f" (its stderr: `%agent mcp stderr {server.entry.name}`)" if server.stderr.total else ""
        )

    def _adapted(self, server: Server) -> list[McpTool]:
        name = server.entry.name
        connected = server.state == "connected"
        made: list[McpTool] = []
        for listed in server.tools:
            try:
                made.append(
                    adapt(
                        name, listed, trusted=self.is_trusted(name), connected=connected,
                        call=self._caller(name), shown=server.entry.config.shown(),
                    )
                )  # fmt: skip
            except ValueError as exc:
                log.info("MCP tool %s of %s left out: %s", listed.name, name, exc)
        names = [tool.name for tool in made]
        return [tool for tool in made if names.count(tool.name) == 1]  # never one name for two

    def _caller(self, name: str) -> Callable[[str, dict[str, Any]], list[Block]]:
        def call(tool: str, arguments: dict[str, Any]) -> list[Block]:
            return self.call(name, tool, arguments)

        return call

    def call(self, name: str, tool: str, arguments: dict[str, Any]) -> list[Block]:
        """Call a tool of server ``name`` from the main thread; every failure is a ToolFailure the
        model reads (a timeout, a crash, a disconnection, the server's own error)."""
        if name not in self.servers:
            raise ToolFailure(f"MCP server '{name}' is not configured any more")
        server = self.servers[name]
        if server.state != "connected":
            server = self.connect(name, retry=True)  # reconnects HTTP, restarts a crashed one
        connection = server.connection
        if connection is None or connection.state != "connected":
            why = connection.error if connection is not None else "not started"
            raise ToolFailure(f"MCP server '{name}' is not available: {why}")
        timeout = server.entry.config.timeout
        try:
            result = self.loop.wait(connection.call(tool, arguments, timeout), timeout + _GRACE_S)
        except TimeoutError:
            raise ToolFailure(
                f"MCP server '{name}' did not answer {tool} within {timeout:g} s; the call was "
                "cancelled"
            ) from None
        except McpCallError as exc:  # the server's failures; Stop and interrupts pass through
            lost = connection.state != "connected"
            raise ToolFailure(self._stopped(name, str(exc)) if lost else str(exc)) from None
        return result_blocks(result, name)

    def _stopped(self, name: str, text: str) -> str:
        """A lost server's result: where its stderr is, never the stderr itself (a server's own
        words are no instructions, and may hold its environment)."""
        return (
            f"{text}\nIt is started or reached again at the next call. What it wrote to stderr is "
            f"not shown here: the user reads it with `%agent mcp stderr {name}`."
        )

    def restart(self, name: str) -> Server:
        if name not in self.configured():
            raise McpConfigError(f"no MCP server named {name!r}; see `%agent mcp`")
        self.stop(name)
        return self.connect(name, retry=True)

    def stop(self, name: str) -> None:
        server = self.servers.get(name)
        if server is not None and server.connection is not None:
            self._close(server.connection)

    def _close(self, connection: Connection) -> None:
        with contextlib.suppress(BaseException):
            self.loop.wait(connection.close(), CLOSE_TIMEOUT_S + _GRACE_S)
        connection.state = "stopped"

    def close(self) -> None:
        """Stop every server and the loop thread (the kernel is shutting down)."""
        for name in list(self.servers):
            self.stop(name)
        self.loop.stop()
        self._secrets.close()
        self._secret_values = ()
