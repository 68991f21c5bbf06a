"""The notebook side of MCP: ``%agent mcp`` and the card that approves a project's ``.mcp.json``.

``%agent mcp`` shows each connected server's tools as the model receives them (name, description,
input schema) with every character a person cannot see marked, and flags a tool held to asking
(its description hides characters); ``%agent mcp stderr NAME`` shows the end of what a stdio
server wrote to stderr, redacted and marked, which never reaches a cell otherwise or the model.

A server the user adds in a cell (``%agent mcp add``) is the user's own act, like any code cell.
A project file can start processes, so it is received until the user approves it once: a card
lists the exact commands and URLs (secrets by name only); the approval is kept by path and sha256
in the user's state, not in the notebook. Headless, an unapproved project file is not started,
and the cell says so.
"""

from __future__ import annotations

import json
from typing import Any

from IPython.core.error import UsageError

from ..mcp.config import McpConfigError, ServerConfig, check_name
from ..messages import ToolCall
from ..policy.permissions import ApprovalRequest, Approve
from ..redact import redact_text
from ..visible import as_shown, bounded
from .approval import CardApprover
from .cell import CellContext
from .display import line

USAGE = """\
%agent mcp                                  servers, their state and tools
%agent mcp add NAME -- COMMAND [ARGS...]    add a stdio server for this kernel session
%agent mcp add NAME --url URL [--header K=V ...]
                                            add a streamable HTTP server
%agent mcp remove NAME | restart NAME       remove or restart a server
%agent mcp trust NAME                       take NAME's tool hints (read-only...) as they are
%agent mcp approve                          approve the project's .mcp.json files as they are now
%agent mcp stderr NAME                      the end of what a stdio server wrote to stderr"""
SHOWN_CHARS = 4_000  # of one tool's description or schema, as %agent mcp shows it
STDERR_LINES = 12  # of a stopped server's stderr, shown in the listing


def mcp_command(magics: Any, args: list[str]) -> None:
    """``%agent mcp [add|remove|restart|trust|approve] ...``."""
    servers = magics.agent.mcp
    verb, rest = (args[0], args[1:]) if args else ("list", [])
    try:
        match verb, rest:
            case "list", []:
                print(listing(servers))
            case "add", [name, *spec] if spec:
                _add(servers, name, spec)
            case ("remove" | "restart" | "trust") as verb, [name]:
                _named(servers, verb, name)
            case "approve", []:
                _approve_all(servers)
            case "stderr", [name]:
                print(_stderr(servers, name))
            case _:
                raise UsageError(f"%agent mcp: usage:\n{USAGE}")
    except McpConfigError as exc:
        raise UsageError(f"%agent mcp: {exc}") from None


def _named(servers: Any, verb: str, name: str) -> None:
    if verb == "remove":
        servers.remove(name)
        print(f"MCP server {name!r} removed for this session")
    elif verb == "restart":
        server = servers.restart(name)
        print(f"MCP server {name!r}: {_state(server)}")
    else:
        servers.trust(name)
        print(f"MCP server {name!r} is trusted: its tools' hints set their class")


def _add(servers: Any, name: str, spec: list[str]) -> None:
    check_name(name)
    if spec[0] == "--":
        if len(spec) < 2:
            raise UsageError("%agent mcp add NAME -- COMMAND [ARGS...]: the command is missing")
        config = ServerConfig(command=spec[1], args=tuple(spec[2:]))
    elif spec[0] == "--url" and len(spec) >= 2:
        config = ServerConfig(type="http", url=spec[1], headers=_headers(spec[2:]))
    else:
        raise UsageError(f"%agent mcp: usage:\n{USAGE}")
    servers.add(name, config)
    print(f"MCP server {name!r} added: {config.shown()}; it starts at the next agent turn")


def _headers(words: list[str]) -> dict[str, str]:
    """``--header K=V`` pairs; a value runs to the next ``--header`` (``Authorization=Bearer
    TOKEN`` arrives as two words)."""
    values: list[list[str]] = []
    for word in words:
        if word == "--header":
            values.append([])
        elif values:
            values[-1].append(word)
        else:
            raise UsageError("%agent mcp add NAME --url URL [--header K=V ...]")
    headers: dict[str, str] = {}
    for parts in values:
        key, sign, text = " ".join(parts).partition("=")
        if not sign or not key.strip():
            raise UsageError("%agent mcp add NAME --url URL [--header K=V ...]")
        headers[key.strip()] = text
    return headers


def _approve_all(servers: Any) -> None:
    pending = [p for p in servers.project_files() if not p.approved]
    if not pending:
        print("no project .mcp.json waits for approval")
    for project in pending:
        servers.approve_project(project)
        print(f"approved {project.path}:\n" + _commands(project))


def _stderr(servers: Any, name: str) -> str:
    if name not in servers.configured():
        raise McpConfigError(f"no MCP server named {name!r}; see `%agent mcp`")
    shown = servers.stderr_text(name)
    return shown or f"MCP server {name!r} wrote nothing to stderr"


def listing(servers: Any) -> str:
    """Every server with its source, state, tools as the model receives them and the end of its
    stderr when it stopped; project files waiting for approval."""
    lines = []
    for name, entry in servers.configured().items():
        server = servers.servers[name]
        trusted = " trusted" if servers.is_trusted(name) else ""
        lines.append(f"{name} ({entry.source}: {entry.origin}){trusted}: {_state(server)}")
        lines.append(f"  {as_shown(entry.config.shown())}")
        lines += _tool_lines(servers.adapted(name))
        lines += _stderr_lines(servers, name, server)
    for project in servers.project_files():
        if not project.approved:
            lines.append(
                f"{project.path}: received, not approved (not started); "
                "`%agent mcp approve` or the card at the next agent turn approves it"
            )
    return "\n".join(lines) or "no MCP servers (see `%agent mcp add` and docs/mcp.md)"


def _tool_lines(tools: list[Any]) -> list[str]:
    """Each tool as the model receives it: name, description and input schema, every character
    a person cannot see marked; a tool held to asking says so first."""
    if not tools:
        return []
    held = sum(1 for tool in tools if tool.always_ask is not None)
    lines = ["  tools, as the model receives them:"]
    if held:
        lines.append(f"  ⚠ {held} of them asked about at every call: see the ⚠ lines below")
    for tool in tools:
        lines.append(f"    {tool.name}")
        if tool.always_ask is not None:
            lines.append(f"      ⚠ {tool.always_ask}")
        schema = json.dumps(tool.input_schema, ensure_ascii=False, sort_keys=True)
        for label, text in (("description", tool.description), ("input", schema)):
            shown = bounded(as_shown(text), SHOWN_CHARS).splitlines() or [""]
            lines += [f"      {label}: {shown[0]}", *(f"        {rest}" for rest in shown[1:])]
    return lines


def _stderr_lines(servers: Any, name: str, server: Any) -> list[str]:
    """A stopped server's last stderr lines; a running one's only by the command that shows it."""
    shown = servers.stderr_text(name)
    if not shown:
        return []
    more = f"`%agent mcp stderr {name}` shows all that is kept"
    if server.state == "connected":
        return [f"  stderr: {more}"]
    tail = shown.splitlines()[-STDERR_LINES:]
    return [f"  stderr ends ({more}, redacted):", *(f"    {line}" for line in tail)]


def _state(server: Any) -> str:
    connection = server.connection
    if connection is not None and connection.error and server.state != "connected":
        return f"{server.state} ({as_shown(redact_text(connection.error))})"
    return str(server.state)


def _commands(project: Any) -> str:
    return "\n".join(f"  {c.name}: {as_shown(c.config.shown())}" for c in project.servers)


def review_project_files(servers: Any, cell: CellContext) -> None:
    """Before a turn: a card for each received project file (interactive), or a line saying it is
    not started (headless). A file declined here is not asked about again in this session."""
    try:
        pending = [p for p in servers.project_files() if not p.approved]
    except McpConfigError as exc:
        line(f"MCP: {exc}", "warn")
        return
    for project in pending:
        key = f"{project.path}:{project.sha256}"
        if key in servers.declined:
            continue
        if not cell.interactive:
            line(f"MCP: {project.path} is not approved, so its servers are not started "
                 "(approve it once with `%agent mcp approve` in an interactive kernel)", "warn")  # fmt: skip
            continue
        request = ApprovalRequest(
            ToolCall(f"mcp-project-{project.sha256[:12]}", "mcp_project", _commands_of(project)),
            title=f"MCP servers from {project.path}",
            details={"notices": _notices(project)},
        )
        card = CardApprover(allow_always=False, cell_id=cell.cell_id)
        if isinstance(card.decide(request), Approve):
            servers.approve_project(project)
        else:
            servers.declined.add(key)


def _commands_of(project: Any) -> dict[str, Any]:
    return {c.name: c.config.shown() for c in project.servers}


def _notices(project: Any) -> list[str]:
    notices = [
        "received: this project file was not written in this notebook; approving starts these "
        "programs or reaches these URLs (kept by path and sha256; a changed file asks again)"
    ]
    return notices
