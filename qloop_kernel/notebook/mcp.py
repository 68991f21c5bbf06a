"""The notebook side of MCP: ``%agent mcp`` and the card that approves a project's ``.mcp.json``.

A server the user adds in a cell (``%agent mcp add``) is the user's own act, like any code cell.
A project file can start processes, so it is received until the user approves it once: a card
lists the exact commands and URLs (secrets by name only); the approval is kept by path and sha256
in the user's state, not in the notebook. Headless, an unapproved project file is not started,
and the cell says so.
"""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError

from ..mcp.config import McpConfigError, ServerConfig, check_name
from ..messages import ToolCall
from ..policy.permissions import ApprovalRequest, Approve
from ..redact import redact_text
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
%agent mcp approve                          approve the project's .mcp.json files as they are now"""


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


def listing(servers: Any) -> str:
    """Every server with its source, state and tools; project files waiting for approval."""
    lines = []
    for name, entry in servers.configured().items():
        server = servers.servers[name]
        trusted = " trusted" if servers.is_trusted(name) else ""
        lines.append(f"{name} ({entry.source}: {entry.origin}){trusted}: {_state(server)}")
        lines.append(f"  {entry.config.shown()}")
        if server.tools:
            lines.append("  tools: " + ", ".join(t.name for t in server.tools))
    for project in servers.project_files():
        if not project.approved:
            lines.append(
                f"{project.path}: received, not approved (not started); "
                "`%agent mcp approve` or the card at the next agent turn approves it"
            )
    return "\n".join(lines) or "no MCP servers (see `%agent mcp add` and docs/mcp.md)"


def _state(server: Any) -> str:
    connection = server.connection
    if connection is not None and connection.error and server.state != "connected":
        return f"{server.state} ({redact_text(connection.error)})"
    return str(server.state)


def _commands(project: Any) -> str:
    return "\n".join(f"  {c.name}: {c.config.shown()}" for c in project.servers)


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
