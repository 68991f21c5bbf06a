"""MCP servers as agent tools, without a kernel: configuration, the tools through the one
ToolRuntime (validation, class, policy, grants), results, failures, reconnection and lifecycle.

The servers are real: ``tests/mcp_servers.py`` built with the official SDK, over stdio and over
streamable HTTP on loopback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.mcp import config as mcp_config
from qloop_kernel.mcp.config import McpConfigError, ServerConfig, parse_servers
from qloop_kernel.mcp.servers import McpServers
from qloop_kernel.messages import ToolCall
from qloop_kernel.policy.permissions import (
    AlwaysAllow,
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Decision,
    PolicyDenier,
)
from qloop_kernel.tools.runtime import ToolRuntime

SERVER = str(Path(__file__).with_name("mcp_servers.py"))
SECRET = "mcp-secret-9f8e7d6c5b4a39281706"


@pytest.fixture(autouse=True)
def user_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No user-level file, approvals kept in the test's folder."""
    monkeypatch.setenv(mcp_config.USER_FILE_ENV, str(tmp_path / "user-mcp.json"))
    monkeypatch.setenv(mcp_config.APPROVED_ENV, str(tmp_path / "approved.json"))


def stdio(tmp_path: Path, **extra: Any) -> ServerConfig:
    env = {"MCP_CALLS": str(tmp_path / "calls.txt"), "MCP_TOKEN": SECRET}
    return ServerConfig(command=sys.executable, args=(SERVER,), env=env, **extra)


def calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().split() if path.exists() else []


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[McpServers]:
    found = McpServers(folder=lambda: tmp_path)
    yield found
    found.close()


class Recorder:
    """An approver that records what it is asked and answers with ``decision``."""

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        self.asked: list[ApprovalRequest] = []

    def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.decision


def runtime(servers: McpServers, approver: Any, policy: str = "ask", **kw: Any) -> ToolRuntime:
    interactive = policy in ("ask", "write")
    return ToolRuntime.of(
        servers.tools(), approver, policy=ApprovalPolicy(policy, interactive), **kw
    )  # type: ignore[arg-type]


def call(rt: ToolRuntime, tool: str, **input: Any) -> Any:
    return rt.run(ToolCall(f"toolu_{tool}", tool, input))


# --- configuration --------------------------------------------------------------------------------


def test_the_mcp_servers_format_reads_stdio_and_http_entries() -> None:
    found = parse_servers(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "srv"], "env": {"API_KEY": "k" * 20}},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}},
                "bare": {"url": "http://127.0.0.1:2/mcp"},
            }
        },
        "project",
        "/p/.mcp.json",
    )
    by_name = {c.name: c.config for c in found}
    assert by_name["files"].command == "npx" and by_name["files"].args == ("-y", "srv")
    assert by_name["web"].http and by_name["bare"].http
    assert by_name["files"].shown() == "npx -y srv (env: API_KEY)"  # names, never values
    assert "k" * 20 not in by_name["files"].shown()
    assert by_name["files"].secrets() == ["k" * 20]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"args": ["x"]}, "needs a 'command'"),
        ({"type": "http"}, "needs a 'url'"),
        ({"command": "x", "timeout": -1}, "greater than 0"),
    ],
)
def test_a_bad_entry_says_where_and_why(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(McpConfigError, match=message) as raised:
        parse_servers({"mcpServers": {"s": entry}}, "user", "/u/mcp.json")
    assert "/u/mcp.json: MCP server 's'" in str(raised.value)


def test_a_bad_file_and_a_bad_name_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / ".mcp.json"
    bad.write_text("{not json")
    with pytest.raises(McpConfigError, match="not valid JSON"):
        mcp_config.read_file(bad, "project")
    with pytest.raises(McpConfigError, match="use letters"):
        parse_servers({"a__b": {"command": "x"}}, "user", "u")


def test_project_files_are_received_until_approved_and_again_when_changed(
    tmp_path: Path,
) -> None:
    root = tmp_path / "repo"
    folder = root / "analysis"
    folder.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"r": {"command": "root-srv"}}}))
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"n": {"command": "nb-srv"}}}))
    servers = McpServers(folder=lambda: folder)
    try:
        assert [p.path for p in servers.project_files()] == [
            folder / ".mcp.json",
            root / ".mcp.json",
        ]
        assert servers.configured() == {}  # received: nothing from them is in effect
        for project in servers.project_files():
            servers.approve_project(project)
        assert sorted(servers.configured()) == ["n", "r"]
        assert str(tmp_path / "approved.json") == str(mcp_config.approvals_file())
        (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"r": {"command": "other"}}}))
        assert sorted(servers.configured()) == ["n"]  # a changed file asks again
    finally:
        servers.close()


def test_kernel_config_and_the_notebook_add_servers(tmp_path: Path) -> None:
    servers = McpServers(
        config=lambda: {"mcpServers": {"c": {"command": "from-config"}}}, folder=lambda: tmp_path
    )
    try:
        servers.add("n", ServerConfig(command="from-cell"))
        assert {n: c.source for n, c in servers.configured().items()} == {
            "c": "config",
            "n": "notebook",
        }
        servers.remove("c")
        assert list(servers.configured()) == ["n"]
        with pytest.raises(McpConfigError, match="no MCP server named 'zz'"):
            servers.remove("zz")
    finally:
        servers.close()


# --- tools through the runtime --------------------------------------------------------------------


def test_tools_are_named_for_their_server_with_the_servers_schema(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path))
    tools = {t.name: t for t in servers.tools()}
    assert "mcp__t__lookup" in tools and "mcp__t__drop_table" in tools
    schema = tools["mcp__t__lookup"].schema()
    assert schema["input_schema"]["required"] == ["key"]
    assert schema["description"].startswith("[MCP server 't']")
    assert servers.servers["t"].state == "connected"
    dotted = tools["mcp__t__notes_count"]  # the API's characters; the server's own name is called
    assert dotted.remote_name == "notes.count"
    assert dotted.call(dotted.input_model.model_validate({})) == [
        {"type": "text", "text": "3 notes"}
    ]


def test_input_is_checked_against_the_schema_before_the_call(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path))
    rt = runtime(servers, Recorder(Approve()))
    outcome = call(rt, "mcp__t__lookup", key=3)
    assert outcome.is_error
    assert "key: 3 is not of type 'string'" in outcome.text
    outcome = call(rt, "mcp__t__lookup")
    assert "'key' is a required property" in outcome.text
    assert calls(tmp_path) == []  # the server was never called


def test_untrusted_hints_never_lower_the_class(servers: McpServers, tmp_path: Path) -> None:
    servers.add("t", stdio(tmp_path))
    tools = {t.name: t for t in servers.tools()}
    risk = {n.split("__")[-1]: tools[n].assessment({}).risk for n in tools}  # type: ignore[union-attr]
    assert risk["lookup"] == "unknown"  # says read-only, but is not trusted
    assert risk["write_note"] == "unknown"
    assert risk["drop_table"] == "destructive"  # a hint that raises the class counts
    assert risk["fetch_page"] == "external"
    servers.trust("t")
    tools = {t.name: t for t in servers.tools()}
    assert tools["mcp__t__lookup"].assessment({}).risk == "read"  # type: ignore[union-attr]
    assert tools["mcp__t__write_note"].assessment({}).risk == "unknown"  # type: ignore[union-attr]


def test_readonly_runs_only_the_read_tools_of_a_trusted_server(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    rt = runtime(servers, PolicyDenier("readonly"), "readonly")
    ran = call(rt, "mcp__t__lookup", key="a")
    denied = call(rt, "mcp__t__drop_table", name="sales")
    assert not ran.is_error and "the value of a is 42" in ran.text
    assert ran.decision == "auto"
    assert denied.is_error and "denied by the approval policy 'readonly'" in denied.text
    assert "classed 'destructive'" in denied.text
    assert calls(tmp_path) == ["lookup"]


def test_the_card_names_the_server_and_a_grant_covers_later_calls(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path))
    approver = Recorder(AlwaysAllow())
    rt = runtime(servers, approver)
    first = call(rt, "mcp__t__write_note", text="one")
    second = call(rt, "mcp__t__write_note", text="two")
    assert [first.decision, second.decision] == ["always", "always"]
    assert len(approver.asked) == 1  # the grant answered the second call
    request = approver.asked[0]
    assert request.title == "mcp__t__write_note"
    assert request.details["notices"][0].startswith("a tool of MCP server 't': ")
    assert SECRET not in json.dumps(request.details)  # the env by name only
    assert request.risk == "unknown"
    assert any("MCP server 't'" in str(r) for r in request.assessment.reasons)  # type: ignore[union-attr]
    assert calls(tmp_path) == ["write_note", "write_note"]


def test_results_images_structured_content_and_links(servers: McpServers, tmp_path: Path) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    rt = runtime(servers, Recorder(Approve()), "auto")
    image = call(rt, "mcp__t__chart")
    assert image.content[0]["type"] == "image"
    assert image.content[0]["source"]["media_type"] == "image/png"
    bad = call(rt, "mcp__t__bad_images")
    assert bad.content[0] == {
        "type": "text",
        "text": "(an image labelled image/png, which the model cannot read)",
    }
    assert bad.content[1]["source"]["media_type"] == "image/png"  # read from its bytes
    stats = call(rt, "mcp__t__stats", n=7)
    assert '"square": 49' in stats.text
    link = call(rt, "mcp__t__links")
    assert "resource link: file:///data/report.csv (report)" in link.text


def test_secrets_in_env_never_reach_results_or_logs(
    servers: McpServers, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    rt = runtime(servers, Recorder(Approve()), "auto")
    with caplog.at_level("INFO"):
        outcome = call(rt, "mcp__t__show_env")
    assert "MCP_TOKEN=[REDACTED]" in outcome.text
    assert SECRET not in json.dumps(outcome.content)
    assert SECRET not in caplog.text
    from qloop_kernel.notebook.mcp import listing

    assert SECRET not in listing(servers) and "(env: MCP_CALLS, MCP_TOKEN)" in listing(servers)


def test_errors_of_the_server_are_is_error_results(servers: McpServers, tmp_path: Path) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    rt = runtime(servers, Recorder(Approve()), "auto")
    outcome = call(rt, "mcp__t__fails")
    assert outcome.is_error
    assert "MCP server 't' answered with an error" in outcome.text


def test_a_hanging_call_times_out_and_the_server_stays_usable(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path, trusted=True, timeout=1.5))
    rt = runtime(servers, Recorder(Approve()), "auto")
    started = time.monotonic()
    outcome = call(rt, "mcp__t__hang")
    assert time.monotonic() - started < 6
    assert outcome.is_error and "did not answer hang within 1.5 s" in outcome.text
    assert not call(rt, "mcp__t__lookup", key="b").is_error


def test_a_crashed_server_is_an_error_and_starts_again_at_the_next_call(
    servers: McpServers, tmp_path: Path
) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    rt = runtime(servers, Recorder(Approve()), "auto")
    outcome = call(rt, "mcp__t__crash")
    assert outcome.is_error and "disconnected during crash" in outcome.text
    assert servers.servers["t"].state in ("disconnected", "failed")
    again = call(rt, "mcp__t__lookup", key="c")
    assert not again.is_error, again.text
    assert calls(tmp_path) == ["crash", "lookup"]


def test_a_server_that_cannot_start_is_reported_not_raised(servers: McpServers) -> None:
    servers.add("gone", ServerConfig(command="/nonexistent/mcp-server"))
    assert servers.tools() == []
    server = servers.servers["gone"]
    assert server.state == "failed"
    assert server.connection is not None and server.connection.error
    (note,) = servers.unavailable()
    assert note.startswith("MCP server 'gone' is not available, its tools are left out: ")
    first = server.connection
    assert servers.tools() == [] and server.connection is first  # not tried at every turn
    servers.restart("gone")
    assert server.connection is not first  # a restart tries again


def test_only_read_tools_of_a_connected_server_replay(servers: McpServers, tmp_path: Path) -> None:
    servers.add("t", stdio(tmp_path, trusted=True))
    servers.add("u", stdio(tmp_path))
    replayable = {t.name for t in servers.tools() if t.replayable}
    assert "mcp__t__lookup" in replayable
    assert "mcp__t__write_note" not in replayable  # not read-only
    assert "mcp__u__lookup" not in replayable  # untrusted: its read-only hint is not taken


# --- streamable HTTP ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_server(port: int, tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "MCP_CALLS": str(tmp_path / "calls.txt")}
    process = subprocess.Popen([sys.executable, SERVER, "--http", str(port)], env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return process
        time.sleep(0.1)
    process.kill()
    raise AssertionError("the HTTP MCP server did not start")


def test_an_http_server_is_used_and_reconnected_after_a_restart(
    servers: McpServers, tmp_path: Path
) -> None:
    port = free_port()
    process = http_server(port, tmp_path)
    header = "Bearer http-secret-0123456789abcdef"
    try:
        config = ServerConfig(
            type="http", url=f"http://127.0.0.1:{port}/mcp", headers={"Authorization": header}
        )
        servers.add("web", config.model_copy(update={"trusted": True}))
        rt = runtime(servers, Recorder(Approve()), "auto")
        assert "the value of k is 42" in call(rt, "mcp__web__lookup", key="k").text
        process.terminate()
        process.wait(10)
        down = call(rt, "mcp__web__lookup", key="k")
        assert down.is_error and "MCP server 'web'" in down.text
        assert "0123456789abcdef" not in down.text
        assert call(rt, "mcp__web__lookup", key="k").is_error  # still down: each call tries again
        process = http_server(port, tmp_path)
        back = call(rt, "mcp__web__lookup", key="again")
        assert not back.is_error, back.text
        assert "the value of again is 42" in back.text
    finally:
        process.kill()
        process.wait(10)


# --- lifecycle ------------------------------------------------------------------------------------


STARTER = """
import sys, time
from qloop_kernel.mcp.config import ServerConfig
from qloop_kernel.mcp.servers import McpServers
servers = McpServers()
env = {"MCP_PID": sys.argv[2], "MCP_LINGER": "1"}
servers.add("t", ServerConfig(command=sys.executable, args=(sys.argv[1],), env=env))
servers.tools()
print("started", flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_a_stdio_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """Even one that would outlive its closed stdin: the kernel crashing runs no clean-up."""
    pid_file = tmp_path / "server.pid"
    command = [sys.executable, "-c", STARTER, SERVER, str(pid_file)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as starter:
        try:
            assert starter.stdout is not None and starter.stdout.readline().strip() == "started"
            server_pid = int(pid_file.read_text())
            assert alive(server_pid)
        finally:
            starter.send_signal(signal.SIGKILL)  # a crash: nothing runs at exit
            starter.wait(10)
    deadline = time.monotonic() + 10
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid)


def test_close_stops_every_server(tmp_path: Path) -> None:
    servers = McpServers(folder=lambda: tmp_path)
    pid_file = tmp_path / "server.pid"
    servers.add(
        "t", ServerConfig(command=sys.executable, args=(SERVER,), env={"MCP_PID": str(pid_file)})
    )
    servers.tools()
    server_pid = int(pid_file.read_text())
    servers.close()
    deadline = time.monotonic() + 10
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid)
    assert servers.servers["t"].state == "stopped"


def test_a_missing_sdk_is_named_with_the_install_line() -> None:
    from qloop_kernel.mcp.client import describe_error

    missing = ModuleNotFoundError("No module named 'mcp'", name="mcp")
    assert describe_error(missing) == (
        "the mcp package is not installed: pip install 'qloop-kernel[mcp]'"
    )


# --- %agent mcp -----------------------------------------------------------------------------------


def test_agent_mcp_add_takes_stdio_and_http_servers_and_shows_secrets_by_name(
    servers: McpServers, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from IPython.core.error import UsageError

    from qloop_kernel.notebook.mcp import listing, mcp_command

    magics = SimpleNamespace(agent=SimpleNamespace(mcp=servers))
    mcp_command(magics, ["add", "files", "--", "npx", "-y", "server-files", "."])
    token = "Bearer hdr-secret-0123456789abcdef"
    words = [
        "add",
        "web",
        "--url",
        "http://127.0.0.1:9/mcp",
        "--header",
        *f"Authorization={token}".split(),
    ]
    mcp_command(magics, [*words, "--header", "X-Team=data"])  # as %agent splits the line
    printed = capsys.readouterr().out
    assert "MCP server 'files' added: npx -y server-files ." in printed
    assert "http://127.0.0.1:9/mcp (headers: Authorization, X-Team)" in printed
    assert servers.added["web"].config.headers == {"Authorization": token, "X-Team": "data"}
    shown = listing(servers)
    assert "files (notebook: this notebook): not started" in shown
    assert "hdr-secret" not in printed + shown
    with pytest.raises(UsageError, match="usage"):
        mcp_command(magics, ["add", "x", "--url"])
    with pytest.raises(UsageError, match="--header K=V"):
        mcp_command(magics, ["add", "x", "--url", "http://127.0.0.1:9/mcp", "--header", "novalue"])
    with pytest.raises(UsageError, match="no MCP server named 'nope'"):
        mcp_command(magics, ["trust", "nope"])
    mcp_command(magics, ["remove", "files"])
    assert "files" not in servers.configured()
