"""``qloop mcp``: a stdio MCP server that forwards to the Jupyter server's ``qloop/mcp``.

Outside agents that only speak stdio start ``qloop mcp``; it lists and calls the tools of the
extension's streamable-HTTP endpoint with the Jupyter server's token. The HTTP session opens when
the stdio client initializes, under that client's own name, so the notebook's approval card names
the real agent ("claude-code"), not the bridge. Results and errors pass through unchanged.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import anyio
import anyio.abc
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    CallToolRequest,
    CallToolRequestParams,
    CallToolResult,
    Implementation,
    ListToolsResult,
    PaginatedRequestParams,
)
from pydantic import ValidationError

from ..errors import QloopError

ENDPOINT_PATH = "qloop/mcp"
CONNECT_TIMEOUT_S = 30.0
# A call waits for the user's click on the approval card: minutes, not seconds.
CALL_TIMEOUT_S = 3600.0
BRIDGE_INFO = Implementation(name="qloop-mcp-stdio", version="1")
Ctx = ServerRequestContext[Any, Any]
T = TypeVar("T")


class BridgeError(QloopError):
    """A mistake in what the bridge was told (URL, host, token source): one line on how to fix it."""


@dataclass(frozen=True)
class Endpoint:
    """Where the bridge forwards to. The token is never part of a message or a repr."""

    url: str  # the MCP endpoint: {server}qloop/mcp
    server: str  # the Jupyter server's URL, for messages
    token: str = field(repr=False)


# -- the endpoint: from the command line, the environment, or the running Jupyter servers ----------


def resolve_endpoint(
    url: str | None,
    token: str | None,
    *,
    allow_remote: bool,
    environ: Mapping[str, str],
    running: Callable[[], Iterable[dict[str, Any]]],
) -> Endpoint:
    """The endpoint and token, in the order the ``qloop mcp`` help gives; :class:`BridgeError`
    for an address the bridge will not send the token to."""
    url = url or environ.get("QLOOP_JUPYTER_URL") or None
    found: dict[str, Any] | None = None
    if url is None:
        found = _only_running(list(running()))
        url = server_url(found)
    base, url_token = _without_query(url)
    check_host(base, allow_remote=allow_remote)
    token = token or url_token or environ.get("JUPYTER_TOKEN")
    if not token:
        found = found or _matching(base, running())
        token = str(found.get("token") or "") if found else ""
    server, endpoint = _server_and_endpoint(base)
    return Endpoint(url=endpoint, server=server, token=token)


def _only_running(servers: list[dict[str, Any]]) -> dict[str, Any]:
    if not servers:
        raise BridgeError(
            "no running Jupyter server found: start JupyterLab, or pass --url with the Jupyter "
            "server's URL (or set QLOOP_JUPYTER_URL)"
        )
    if len(servers) > 1:
        listed = ", ".join(sorted(server_url(server) for server in servers))
        raise BridgeError(f"several Jupyter servers are running ({listed}); pass --url with one")
    return servers[0]


def server_url(info: Mapping[str, Any]) -> str:
    """A running server's URL (from its ``jpserver-*.json``), loopback when it listens on all
    interfaces (its recorded URL then names the host, which the token must not leave through)."""
    if str(info.get("hostname", "")) in ("0.0.0.0", "::", ""):
        scheme = "https" if info.get("secure") else "http"
        return f"{scheme}://127.0.0.1:{info.get('port')}{info.get('base_url') or '/'}"
    return _without_query(str(info.get("url", "")))[0]


def _matching(base: str, servers: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The running server at ``base`` (any loopback name matches any other)."""
    want = _server_key(base)
    return next((info for info in servers if _server_key(server_url(info)) == want), None)


def _server_key(url: str) -> tuple[str, bool | str, int | None, str]:
    parts = urlsplit(url)
    host = parts.hostname or ""
    path = parts.path.rstrip("/").removesuffix("/" + ENDPOINT_PATH)
    return parts.scheme, is_loopback(host) or host, parts.port, path.rstrip("/") + "/"


def _without_query(url: str) -> tuple[str, str | None]:
    """The URL without query and fragment, and a ``?token=`` it carried (JupyterLab prints one)."""
    parts = urlsplit(url.strip())
    token = dict(parse_qsl(parts.query)).get("token")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), token


def _server_and_endpoint(base: str) -> tuple[str, str]:
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    if path.endswith("/" + ENDPOINT_PATH):
        path = path.removesuffix(ENDPOINT_PATH)
    else:
        path += "/"
    server = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
    return server, server + ENDPOINT_PATH


def is_loopback(host: str) -> bool:
    """True for ``localhost``, 127.0.0.0/8 and ::1."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(url: str, *, allow_remote: bool) -> None:
    """Refuse to send the token anywhere but this machine, unless asked to, and then only over TLS."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BridgeError(
            f"{url!r} is not the URL of a Jupyter server; give one like http://127.0.0.1:8888/"
        )
    if is_loopback(parts.hostname):
        return
    if not allow_remote:
        raise BridgeError(
            f"{parts.hostname} is not this machine, and the token would leave it: pass "
            "--allow-remote with an https URL to reach a remote Jupyter server (or use an SSH "
            "tunnel to a local port)"
        )
    if parts.scheme != "https":
        raise BridgeError(
            f"--allow-remote needs an https URL: {url} would send the token in clear text"
        )


# -- the HTTP session ---------------------------------------------------------------------------------


class Upstream:
    """The MCP session with the Jupyter server, held open by one task of the bridge's task group
    (an anyio context is left by the task that entered it). Opened on first use; a session the
    server ended is opened again by the next request."""

    def __init__(self, endpoint: Endpoint, tasks: anyio.abc.TaskGroup) -> None:
        self.endpoint = endpoint
        self._tasks = tasks
        self._session: ClientSession | None = None
        self._held = anyio.CancelScope()  # the holding task's: cancelled, it closes the session
        self._lock = anyio.Lock()

    async def open(self, client: Implementation) -> ClientSession:
        """The session, opened under the stdio client's name; an :class:`MCPError` saying what to
        fix when the server refuses (and the same line on stderr)."""
        async with self._lock:
            if self._session is None:
                try:
                    self._session, self._held = await self._tasks.start(self._hold, client)
                except BridgeError as exc:
                    print(f"qloop mcp: {exc}", file=sys.stderr, flush=True)
                    raise MCPError(code=INTERNAL_ERROR, message=str(exc)) from None
            return self._session

    def close(self, session: ClientSession) -> None:
        """Close ``session`` (the server no longer knows it): the next request opens a new one."""
        if self._session is session:
            self._session = None
            self._held.cancel()

    async def _hold(
        self,
        client: Implementation,
        *,
        task_status: anyio.abc.TaskStatus[tuple[ClientSession, anyio.CancelScope]],
    ) -> None:
        refused: list[int] = []
        session: ClientSession | None = None
        try:
            with anyio.CancelScope() as held:
                async with contextlib.AsyncExitStack() as stack:
                    session = await self._connect(stack, client, refused)
                    task_status.started((session, held))
                    await anyio.sleep_forever()
        except Exception as exc:  # after the start, the server went away: nothing to raise to
            if session is None:
                raise BridgeError(refusal(exc, refused[-1:], self.endpoint)) from None
        finally:
            if session is not None and self._session is session:
                self._session = None

    async def _connect(
        self, stack: contextlib.AsyncExitStack, client: Implementation, refused: list[int]
    ) -> ClientSession:
        async def note_refusal(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                refused.append(response.status_code)

        headers = {"Authorization": f"token {self.endpoint.token}"} if self.endpoint.token else {}
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=CALL_TIMEOUT_S)
        http = await stack.enter_async_context(create_mcp_http_client(headers, timeout))
        http.event_hooks = {"response": [note_refusal]}
        read, write = await stack.enter_async_context(
            streamable_http_client(self.endpoint.url, http_client=http)
        )
        session = await stack.enter_async_context(ClientSession(read, write, client_info=client))
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            await session.initialize()
        return session


def refusal(exc: BaseException, status: list[int], endpoint: Endpoint) -> str:
    """One line on why the session did not open and what to fix (never the token itself)."""
    server = endpoint.server
    if status and status[0] in (401, 403):
        return (
            f"the Jupyter server at {server} refused the token (HTTP {status[0]}): pass --token or "
            "set JUPYTER_TOKEN to its token (`jupyter server list` shows it)"
        )
    if status and status[0] == 404:
        return (
            f"the Jupyter server at {server} has no qloop MCP endpoint (HTTP 404 for "
            f"{ENDPOINT_PATH}): install qloop-kernel in the Jupyter server's environment and "
            "restart it, or check the base path in --url"
        )
    if status:
        return f"the Jupyter server at {server} answered HTTP {status[0]} for {ENDPOINT_PATH}"
    cause = _root(exc)
    if isinstance(cause, httpx2.ConnectError):
        return (
            f"nothing answers at {server} (connection refused): start JupyterLab, or pass --url "
            "with the Jupyter server's URL"
        )
    if isinstance(cause, (TimeoutError, httpx2.TimeoutException)):
        return f"the Jupyter server at {server} did not answer within {CONNECT_TIMEOUT_S:g} s"
    text = str(cause).replace(endpoint.token, "[the token]") if endpoint.token else str(cause)
    return f"could not open an MCP session with {endpoint.url}: {type(cause).__name__}: {text}"


def _root(exc: BaseException) -> BaseException:
    while getattr(exc, "exceptions", None):  # an exception group: its first
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


# -- the stdio server ---------------------------------------------------------------------------------


def client_info(ctx: Ctx) -> Implementation:
    """The stdio client's own name and version: from its ``initialize`` (not yet recorded while
    that request runs) or from what the session recorded."""
    if ctx.method == "initialize" and ctx.params is not None:
        with contextlib.suppress(ValidationError):
            return Implementation.model_validate(ctx.params.get("clientInfo"), by_name=False)
    params = ctx.session.client_params
    return params.client_info if params is not None else BRIDGE_INFO


def build_server(upstream: Upstream) -> tuple[Server[Any], InitializationOptions]:
    """The stdio side: tools listed and called on the upstream session, and the options its
    ``initialize`` answers with (the upstream server's instructions, once it is open)."""

    async def list_tools(ctx: Ctx, params: PaginatedRequestParams | None) -> ListToolsResult:
        session = await upstream.open(client_info(ctx))
        return await _forwarded(upstream, session, session.list_tools(params=params))

    async def call_tool(ctx: Ctx, params: CallToolRequestParams) -> CallToolResult:
        session = await upstream.open(client_info(ctx))
        # send_request, not call_tool: the result passes on as it came (the outside client checks
        # it against the output schema it listed), without call_tool's own tools/list and check.
        call = session.send_request(
            CallToolRequest(
                params=CallToolRequestParams(name=params.name, arguments=params.arguments)
            ),
            CallToolResult,
            request_read_timeout_seconds=CALL_TIMEOUT_S,
            progress_callback=ctx.session.report_progress,
        )
        return await _forwarded(upstream, session, call)

    server: Server[Any] = Server(
        "qloop", version=_version(), on_list_tools=list_tools, on_call_tool=call_tool
    )
    options = server.create_initialization_options()

    async def open_on_initialize(ctx: Ctx, call_next: CallNext) -> HandlerResult:
        # Raising here refuses the stdio client's initialize: it learns at once what to fix.
        if ctx.method == "initialize":
            session = await upstream.open(client_info(ctx))
            options.instructions = session.instructions
        return await call_next(ctx)

    server.middleware.append(open_on_initialize)
    return server, options


async def _forwarded(upstream: Upstream, session: ClientSession, call: Awaitable[T]) -> T:
    """What the Jupyter server answered; its errors as they came, but a lost session's named."""
    try:
        return await call
    except MCPError as exc:
        why = exc.error.message
        if why == "Session terminated":  # a restarted Jupyter server no longer knows the session
            upstream.close(session)
        elif exc.error.code != CONNECTION_CLOSED:
            raise
        raise MCPError(
            code=exc.error.code,
            message=f"the Jupyter server at {upstream.endpoint.server} ended the MCP session "
            f"({why}; it stopped or restarted): try again, the next request reconnects",
        ) from None


def _version() -> str:
    try:
        return version("qloop-kernel")
    except PackageNotFoundError:
        return "unknown"


async def serve(endpoint: Endpoint) -> None:
    """Serve stdio until the client closes stdin."""
    async with anyio.create_task_group() as tasks:
        server, options = build_server(Upstream(endpoint, tasks))
        async with stdio_server() as (read, write):
            await server.run(read, write, options)
        tasks.cancel_scope.cancel()


def running_servers() -> list[dict[str, Any]]:
    """The Jupyter servers of this user that are running (their ``jpserver-*.json``)."""
    from jupyter_server.serverapp import list_running_servers  # slow to import: only when needed

    return list(list_running_servers())


def run(
    url: str | None, token: str | None, *, allow_remote: bool, environ: Mapping[str, str]
) -> int:
    """``qloop mcp``: resolve the endpoint, then serve stdio; the exit code."""
    endpoint = resolve_endpoint(
        url, token, allow_remote=allow_remote, environ=environ, running=running_servers
    )
    # The SDK logs to the root logger; stderr is the client's log, and gets only our own lines.
    logging.getLogger().addHandler(logging.NullHandler())
    anyio.run(serve, endpoint)
    return 0
