"""``qloop mcp``: the stdio bridge to the Jupyter server's ``qloop/mcp``, driven by the SDK's stdio
client against a streamable-HTTP server built here with the SDK, behind a token check."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
import uvicorn
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Implementation, TextContent

from qloop_kernel.headless.cli import main
from qloop_kernel.server.stdio import resolve_endpoint
from tests.mcp_servers import png_bytes

pytestmark = pytest.mark.timeout(20)

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "secret"
BASE = "/lab-base/"
OUTSIDE = Implementation(name="test-outside", version="9.8.7")
TOOLS = ["echo", "chart", "refuse", "wait_for_click"]
T = TypeVar("T")


# -- the stand-in for the Jupyter server's qloop/mcp --------------------------------------------------


def stand_in(seen: list[str]) -> MCPServer:
    """An MCP server with the kinds of result the extension sends; each call notes the caller's
    clientInfo name in ``seen``."""
    app = MCPServer("jupyter-stand-in", instructions="Call echo first.")

    def note(ctx: Context) -> None:
        params = ctx.request_context.session.client_params
        seen.append(params.client_info.name if params else "")

    @app.tool()
    def echo(text: str, ctx: Context) -> str:
        """Say the text back."""
        note(ctx)
        return f"echo: {text}"

    @app.tool()
    def chart(ctx: Context) -> Image:
        """A PNG."""
        note(ctx)
        return Image(data=png_bytes(), format="png")

    @app.tool()
    def refuse(ctx: Context) -> CallToolResult:
        """Refused, as a denied approval is."""
        note(ctx)
        text = TextContent(type="text", text="denied by the user: not now")
        return CallToolResult(content=[text], is_error=True)

    @app.tool()
    async def wait_for_click(ctx: Context) -> str:
        """Report progress three times while 'waiting for the user', then answer."""
        note(ctx)
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"waiting for approval ({step})")
        return "approved"

    return app


def token_required(app: Any, token: str) -> Any:
    """The Jupyter server's check, reduced: ``Authorization: token <TOKEN>`` or 401."""
    expected = f"token {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            start = {"type": "http.response.start", "status": 401, "headers": []}
            await send(start | {"headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"Unauthorized"})
            return
        await app(scope, receive, send)

    return guarded


class JupyterStandIn:
    """The stand-in served by uvicorn on a free 127.0.0.1 port, in a thread."""

    def __init__(self, port: int = 0) -> None:
        self.seen: list[str] = []
        app = stand_in(self.seen).streamable_http_app(streamable_http_path=BASE + "qloop/mcp")
        self._socket = socket.socket()
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart's port
        self._socket.bind(("127.0.0.1", port))
        self.port = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}{BASE}"
        config = uvicorn.Config(
            token_required(app, TOKEN),
            log_level="warning",
            ws="none",
            timeout_graceful_shutdown=1,  # stops with the bridge's streams still open, as a restart
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    def __enter__(self) -> JupyterStandIn:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the stand-in did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


@pytest.fixture(scope="module")
def jupyter() -> Iterator[JupyterStandIn]:
    with JupyterStandIn() as server:
        yield server


# -- the outside agent: the SDK's stdio client running `qloop mcp` ------------------------------------


def bridge_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "QLOOP_JUPYTER_URL")}
    return env | extra


def through_bridge(
    args: list[str],
    use: Callable[[ClientSession], Awaitable[T]],
    env: dict[str, str] | None = None,
) -> tuple[T, str]:
    """Start ``qloop mcp ARGS`` as the stdio client does, initialize as ``test-outside``, run
    ``use`` on the session; its value and the bridge's stderr."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "qloop_kernel.headless.cli", "mcp", *args],
        env=env or bridge_env(),
        cwd=str(ROOT),
    )

    async def session() -> T:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, client_info=OUTSIDE) as client,
        ):
            return await use(client)

    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        value = anyio.run(session)
        errlog.seek(0)
        return value, errlog.read()


def direct(url: str, use: Callable[[ClientSession], Awaitable[T]]) -> T:
    """The same, straight to the HTTP endpoint with the token: what the bridge must pass on."""

    async def session() -> T:
        headers = {"Authorization": f"token {TOKEN}"}
        async with (
            create_mcp_http_client(headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await use(client)

    return anyio.run(session)


async def every_call(client: ClientSession) -> dict[str, Any]:
    results = {}
    for name, arguments in [("echo", {"text": "hi"}), ("chart", {}), ("refuse", {})]:
        result = await client.call_tool(name, arguments)
        results[name] = result.model_dump(by_alias=True, exclude_none=True)
    return results


# -- tests ---------------------------------------------------------------------------------------------


def test_tools_results_and_progress_pass_through_unchanged(jupyter: JupyterStandIn) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def use(client: ClientSession) -> dict[str, Any]:
        init = await client.initialize()
        listed = await client.list_tools()

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        waited = await client.call_tool("wait_for_click", {}, progress_callback=on_progress)
        return {
            "instructions": init.instructions,
            "tools": [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools],
            "calls": await every_call(client),
            "waited": waited.model_dump(by_alias=True, exclude_none=True),
        }

    jupyter.seen.clear()
    seen, stderr = through_bridge(["--url", jupyter.url, "--token", TOKEN], use)
    callers = list(jupyter.seen)

    async def expected_tools(client: ClientSession) -> list[dict[str, Any]]:
        listed = await client.list_tools()
        return [tool.model_dump(by_alias=True, exclude_none=True) for tool in listed.tools]

    endpoint = jupyter.url + "qloop/mcp"
    assert [tool["name"] for tool in seen["tools"]] == TOOLS
    assert seen["tools"] == direct(endpoint, expected_tools)
    assert seen["calls"] == direct(endpoint, every_call)
    assert seen["calls"]["refuse"]["isError"] is True
    assert seen["calls"]["chart"]["content"][0]["type"] == "image"
    assert seen["waited"]["content"] == [{"type": "text", "text": "approved"}]
    assert progress == [(step, 3, f"waiting for approval ({step})") for step in (1, 2, 3)]
    assert seen["instructions"] == "Call echo first."
    # Every call the bridge made was under the outside agent's own name.
    assert callers == ["test-outside"] * 4
    assert stderr == ""


def test_wrong_token_fails_initialize_saying_so_without_the_token(jupyter: JupyterStandIn) -> None:
    wrong = "wrong-token-8f3a"

    async def use(client: ClientSession) -> str:
        with pytest.raises(MCPError) as refused:
            await client.initialize()
        return refused.value.error.message

    message, stderr = through_bridge(["--url", jupyter.url, "--token", wrong], use)
    assert "refused the token (HTTP 401)" in message
    assert "--token" in message and "JUPYTER_TOKEN" in message
    assert stderr.count("\n") == 1 and "refused the token" in stderr
    assert "Traceback" not in stderr
    for secret in (wrong, TOKEN):
        assert secret not in message and secret not in stderr


def test_token_from_the_environment(jupyter: JupyterStandIn) -> None:
    async def use(client: ClientSession) -> str:
        await client.initialize()
        result = await client.call_tool("echo", {"text": "env"})
        return str(result.content[0].text)  # type: ignore[union-attr]

    text, _ = through_bridge(["--url", jupyter.url], use, env=bridge_env(JUPYTER_TOKEN=TOKEN))
    assert text == "echo: env"


def test_the_one_running_jupyter_server_is_found(jupyter: JupyterStandIn, tmp_path: Path) -> None:
    """No --url and no token: both come from the running server's jpserver-*.json."""
    info = {"url": jupyter.url, "hostname": "127.0.0.1", "port": jupyter.port, "token": TOKEN}
    (tmp_path / f"jpserver-{os.getpid()}.json").write_text(json.dumps(info | {"pid": os.getpid()}))

    async def use(client: ClientSession) -> list[str]:
        await client.initialize()
        return [tool.name for tool in (await client.list_tools()).tools]

    env = bridge_env(JUPYTER_RUNTIME_DIR=str(tmp_path))
    names, _ = through_bridge([], use, env=env)
    assert names == TOOLS


def test_no_qloop_endpoint_and_nothing_listening(jupyter: JupyterStandIn) -> None:
    async def use(client: ClientSession) -> str:
        with pytest.raises(MCPError) as refused:
            await client.initialize()
        return refused.value.error.message

    other = f"http://127.0.0.1:{jupyter.port}/elsewhere/"
    message, stderr = through_bridge(["--url", other, "--token", TOKEN], use)
    assert "has no qloop MCP endpoint (HTTP 404" in message and "Traceback" not in stderr
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    message, stderr = through_bridge(["--url", f"http://127.0.0.1:{port}/"], use)
    assert "nothing answers at" in message and "start JupyterLab" in message
    assert stderr.startswith("qloop mcp: nothing answers") and "Traceback" not in stderr


def test_a_restarted_jupyter_server_is_reached_again() -> None:
    """A call while the server is down fails saying so; once it is back, the next call opens a
    new session, still under the outside agent's name."""
    first = JupyterStandIn().__enter__()

    async def use(client: ClientSession) -> tuple[str, str, list[str]]:
        await client.initialize()
        await client.list_tools()
        first.__exit__()
        with pytest.raises(MCPError) as lost:
            await client.call_tool("echo", {"text": "down"})
        with JupyterStandIn(first.port) as again:
            result = await client.call_tool("echo", {"text": "back"})
            return lost.value.error.message, str(result.content[0].text), again.seen  # type: ignore[union-attr]

    try:
        (lost, text, seen), stderr = through_bridge(["--url", first.url, "--token", TOKEN], use)
    finally:
        first.__exit__()
    assert first.url in lost and TOKEN not in lost  # ended, or not answering yet: both say where
    assert text == "echo: back" and seen == ["test-outside"]
    assert "Traceback" not in stderr and TOKEN not in stderr


# -- where the bridge goes, and with which token -------------------------------------------------------

RUNNING = [
    {
        "url": "http://localhost:8888/lab-base/",
        "hostname": "localhost",
        "port": 8888,
        "token": "t1",
    },
    {
        "url": "http://myhost:8889/",
        "hostname": "0.0.0.0",
        "port": 8889,
        "base_url": "/",
        "token": "t2",
    },
]


@pytest.mark.parametrize(
    ("url", "environ", "endpoint", "token"),
    [
        ("http://127.0.0.1:8888/lab-base", {}, "http://127.0.0.1:8888/lab-base/qloop/mcp", "t1"),
        ("http://[::1]:8888/lab-base/qloop/mcp", {}, "http://[::1]:8888/lab-base/qloop/mcp", "t1"),
        ("http://localhost:8888/x/?token=abc#y", {}, "http://localhost:8888/x/qloop/mcp", "abc"),
        (
            "http://127.0.0.1:8889/",
            {"JUPYTER_TOKEN": "env"},
            "http://127.0.0.1:8889/qloop/mcp",
            "env",
        ),
        (
            None,
            {"QLOOP_JUPYTER_URL": "http://127.0.0.1:8889"},
            "http://127.0.0.1:8889/qloop/mcp",
            "t2",
        ),
        ("http://127.0.0.1:9999/", {}, "http://127.0.0.1:9999/qloop/mcp", ""),
    ],
)
def test_endpoint_and_token(
    url: str | None, environ: dict[str, str], endpoint: str, token: str
) -> None:
    resolved = resolve_endpoint(
        url, None, allow_remote=False, environ=environ, running=lambda: RUNNING
    )
    assert (resolved.url, resolved.token) == (endpoint, token)
    assert not token or token not in repr(resolved)


def test_a_server_on_all_interfaces_is_reached_on_loopback() -> None:
    resolved = resolve_endpoint(
        None, None, allow_remote=False, environ={}, running=lambda: RUNNING[1:]
    )
    assert (resolved.url, resolved.token) == ("http://127.0.0.1:8889/qloop/mcp", "t2")


# -- mistakes on the command line: exit 2 before anything is reached --------------------------------


@pytest.mark.parametrize(
    ("url", "extra", "says"),
    [
        ("http://example.com:8888/", [], "pass --allow-remote with an https URL"),
        ("http://10.1.2.3:8888/", ["--allow-remote"], "--allow-remote needs an https URL"),
        ("ftp://127.0.0.1/", [], "is not the URL of a Jupyter server"),
    ],
)
def test_hosts_other_than_this_machine_are_refused(
    url: str, extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["mcp", "--url", url, "--token", TOKEN, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qloop mcp: ") and says in err and TOKEN not in err


def test_running_servers_none_or_several(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("QLOOP_JUPYTER_URL", raising=False)
    assert main(["mcp"]) == 2
    assert "no running Jupyter server found: start JupyterLab, or pass --url" in (
        capsys.readouterr().err
    )
    for port in (8890, 8891):
        info = {"url": f"http://localhost:{port}/", "hostname": "localhost", "port": port}
        info |= {"token": f"token-{port}", "pid": os.getpid()}
        (tmp_path / f"jpserver-{port}.json").write_text(json.dumps(info))
    assert main(["mcp"]) == 2
    err = capsys.readouterr().err
    assert "several Jupyter servers are running" in err and "pass --url" in err
    assert "http://localhost:8890/" in err and "http://localhost:8891/" in err
    assert "token-8890" not in err


def test_without_the_mcp_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the extra sees
    assert main(["mcp", "--url", "http://127.0.0.1:8888/"]) == 2
    assert "pip install 'qloop-kernel[mcp]'" in capsys.readouterr().err
