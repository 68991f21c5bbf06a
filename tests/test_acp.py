"""Coding agents hosted over ACP: the scripted agent (tests/acp_agent.py, the official SDK, no
network) started by a real Jupyter server with qloop's extension, driven over the panel's routes;
its cards answered over the routes the page uses, as tests/test_mcp_server.py does."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from qloop_kernel.headless import cli
from qloop_kernel.server import record
from qloop_kernel.server.acp_agents import AgentSpec, ConfigError, QloopACP, available, declared
from qloop_kernel.server.acp_chat import bypasses
from qloop_kernel.server.acp_client import inside, shell_assessment
from qloop_kernel.server.acp_log import read_log
from tests.jupyter_server import JupyterServer, Page, jupyter_server

pytestmark = pytest.mark.timeout(240)

AGENT = Path(__file__).resolve().parent / "acp_agent.py"
SECRET = "sk-ant-api03-acp0agent0secret0value0123456789abcdef0123"


def _server(root: Path, policy: str, env: dict[str, str] | None = None) -> Any:
    config = root.parent / "acp_config.py"
    scripted = {"name": "Scripted", "command": sys.executable, "args": [str(AGENT)]}
    loads = {**scripted, "name": "Scripted (resumes)", "env": {"SCRIPTED_AGENT_LOADS": "1"}}
    missing = {"name": "Missing", "command": str(root.parent / "no-such-agent")}
    agents = [scripted, loads, missing]
    config.write_text(f"c.QloopACP.agents = {agents!r}\nc.QloopACP.discover = False\n")
    return jupyter_server(
        root, f"--config={config}", f"--QloopMCP.policy={policy}",
        env={"ANTHROPIC_API_KEY": SECRET, **(env or {})},
    )  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with _server(tmp_path_factory.mktemp("acp") / "root", "ask") as running:
        yield running


def run(work: Any) -> Any:
    return asyncio.run(work)


class ChatDriver:
    """The panel, over HTTP: starts a chat, sends prompts, reads the event stream."""

    def __init__(self, server: JupyterServer, http: httpx.AsyncClient) -> None:
        self.server = server
        self.http = http
        self.id = ""
        self.seen: list[dict[str, Any]] = []

    async def open(self, agent: str = "Scripted") -> dict[str, Any]:
        reply = await self.http.post(self.server.url + "qloop/acp/chats", json={"agent": agent})
        assert reply.status_code == 200, reply.text
        state: dict[str, Any] = reply.json()
        self.id = state["id"]
        return state

    async def post(self, action: str, **body: Any) -> httpx.Response:
        return await self.http.post(
            self.server.url + f"qloop/acp/chats/{self.id}/{action}", json=body
        )

    async def until(self, done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """The events after those seen, up to the first that ``done`` accepts."""
        url = self.server.url + f"qloop/acp/chats/{self.id}/events"
        found: list[dict[str, Any]] = []
        params = {"after": len(self.seen)}
        async with self.http.stream("GET", url, params=params, timeout=120) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[len("data: ") :])
                found.append(event)
                self.seen.append(event)
                if done(event):
                    return found
        raise AssertionError(f"the stream ended: {found}")

    async def turn(self, text: str) -> list[dict[str, Any]]:
        reply = await self.post("prompt", text=text)
        assert reply.status_code == 200, reply.text
        return await self.until(lambda e: e["kind"] == "turn_end")


def said(events: list[dict[str, Any]]) -> str:
    """What the agent wrote in these events."""
    return "".join(
        e["update"]["content"]["text"]
        for e in events
        if e["kind"] == "update" and e["update"].get("sessionUpdate") == "agent_message_chunk"
    )


async def scenario(
    server: JupyterServer, play: Callable[[ChatDriver], Any], agent: str = "Scripted"
) -> Any:
    async with httpx.AsyncClient(headers=server.headers, timeout=120) as http:
        chat = ChatDriver(server, http)
        await chat.open(agent)
        return await play(chat)


def log_of(server: JupyterServer, chat: str) -> list[dict[str, Any]]:
    entries = read_log(server.root / ".qloop" / "acp" / f"{chat}.jsonl")
    assert all(ok for _, ok in entries)
    return [e for e, _ in entries]


# --- the agents offered ---------------------------------------------------------------------------


def test_declared_agents_are_checked_and_known_ones_found_on_path(tmp_path: Path) -> None:
    config = QloopACP()
    config.discover = False
    config.agents = [{"name": "Mine", "command": "mine", "args": ["acp"], "env": {"A": "1"}}]
    assert available(config) == [AgentSpec("Mine", "mine", ("acp",), {"A": "1"})]
    for bad in ({"name": "x"}, {"name": "x", "command": "y", "args": "acp"}, "x"):
        with pytest.raises(ConfigError, match="c.QloopACP.agents"):
            declared(bad)
    fake = tmp_path / "goose"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", str(tmp_path))
        config.agents = []
        config.discover = True
        assert available(config) == [AgentSpec("Goose", "goose", ("acp",))]


def test_paths_are_checked_after_symlinks_and_commands_are_classified_like_bang(
    tmp_path: Path,
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "out").symlink_to(tmp_path)
    assert inside(root, str(root / "a.txt")) == (root / "a.txt").resolve()
    assert inside(root, str(root / "out" / "a.txt")) is None
    assert inside(root, str(root / ".." / "a.txt")) is None
    assert shell_assessment("ls", ["-la"]).risk == "external"
    assert bypasses("bypassPermissions", "Bypass permissions")
    assert not bypasses("default", "Ask first")


def test_the_routes_need_the_servers_authentication(server: JupyterServer) -> None:
    reply = httpx.get(server.url + "qloop/acp/agents", timeout=30)
    assert reply.status_code == 403
    listed = httpx.get(server.url + "qloop/acp/agents", headers=server.headers, timeout=30)
    assert listed.json()["agents"] == [
        {"name": "Scripted", "command": sys.executable},
        {"name": "Scripted (resumes)", "command": sys.executable},
        {"name": "Missing", "command": str(server.root.parent / "no-such-agent")},
    ]
    missing = httpx.post(server.url + "qloop/acp/chats", json={"agent": "Missing"},
                         headers=server.headers, timeout=30)  # fmt: skip
    assert missing.status_code == 409
    assert "cannot start Missing:" in missing.json()["message"]
    assert "is not found" in missing.json()["message"]
    unknown = httpx.post(server.url + "qloop/acp/chats", json={"agent": "Nobody"},
                         headers=server.headers, timeout=30)  # fmt: skip
    assert unknown.status_code == 404 and "no agent 'Nobody'" in unknown.json()["message"]


# --- a chat -------------------------------------------------------------------------------------


def test_a_chat_streams_the_plan_and_the_answer_and_hides_a_bypass_mode(
    server: JupyterServer,
) -> None:
    async def play(chat: ChatDriver) -> list[dict[str, Any]]:
        return await chat.turn("hello there")

    events = run(scenario(server, play))
    ready = next(e for e in events if e["kind"] == "ready")
    assert ready["modes"] == [{"id": "default", "name": "Ask first"}]  # no bypass under 'ask'
    plan = next(e["update"] for e in events if e["kind"] == "update"
                and e["update"]["sessionUpdate"] == "plan")  # fmt: skip
    assert [p["content"] for p in plan["entries"]] == ["read the question", "answer it"]
    assert said(events) == "You said: **hello there**"
    assert events[-1] == {"n": events[-1]["n"], "kind": "turn_end", "stop_reason": "end_turn"}


def test_the_pickers_set_the_agents_mode_and_model_and_a_bypass_mode_is_refused(
    server: JupyterServer,
) -> None:
    async def play(chat: ChatDriver) -> list[Any]:
        refused = await chat.post("mode", mode="bypassPermissions")
        assert refused.status_code == 409 and "not a mode offered here" in refused.text
        wrong = await chat.post("option", id="model", value="huge")
        assert wrong.status_code == 409 and "'huge' is not a value" in wrong.text
        for action, body in (
            ("mode", {"mode": "default"}),
            ("option", {"id": "model", "value": "large"}),
        ):
            reply = await chat.post(action, **body)
            assert reply.status_code == 200, reply.text
        return await chat.until(
            lambda e: e["kind"] == "state" and e["options"][0]["current"] == "large"
        )

    events = run(scenario(server, play))
    assert "mode is now default" in said(events) and "model is now large" in said(events)
    (model,) = events[-1]["options"]
    assert model["values"] == [{"value": "small", "name": "Small model"},
                               {"value": "large", "name": "Large model"}]  # fmt: skip


def test_a_file_write_is_asked_on_the_card_and_a_write_outside_the_root_is_refused(
    server: JupyterServer, capsys: pytest.CaptureFixture[str]
) -> None:
    target = server.root / "notes.txt"
    outside = server.root.parent / "escape.txt"

    async def play(chat: ChatDriver) -> tuple[list[Any], list[Any], Page]:
        page = Page(server, f"acp/{chat.id}", lambda card: {"decision": "approve"})
        async with page.open():
            wrote = await chat.turn(f"write {target} hello {SECRET}")
            escaped = await chat.turn(f"write {outside} nope")
        return wrote, escaped, page

    wrote, escaped, page = run(scenario(server, play))
    permission, write, escape_permission = page.cards
    assert permission["client"] == "ACP agent Scripted" and permission["tool"] == "acp:edit"
    assert permission["risk"] == "write"
    assert write["tool"] == "fs/write_text_file" and write["risk"] == "external"
    assert write["title"] == f"ACP agent Scripted wants to write the file {target} — approve?"
    assert permission["title"] == "ACP agent Scripted wants to use its tool: Write " + (
        f"{target} — approve?"
    )
    assert "permission: yes" in said(wrote) and f"wrote {target}" in said(wrote)
    assert target.read_text() == f"hello {SECRET}"
    assert "refused" in said(escaped) and "outside the Jupyter server's root" in said(escaped)
    assert not outside.exists() and escape_permission["tool"] == "acp:edit"
    chat_id = page.path.removeprefix("acp/")
    entries = log_of(server, chat_id)
    tools = [(e["tool"], e["decision"]) for e in entries]
    assert ("fs/write_text_file", "approved by the user") in tools
    assert ("fs/write_text_file", "refused: outside the server root") in tools
    log = server.root / ".qloop" / "acp" / f"{chat_id}.jsonl"
    assert SECRET not in log.read_text()
    assert all(record.verified(e) for e in entries)
    return_code = cli.main(["show", str(log)])
    shown = capsys.readouterr().out
    assert return_code == 0 and shown.startswith("hosted agent's chat (ACP): 4 decisions")
    assert (
        "ACP agent Scripted  fs/write_text_file  class external · approved by the user · yours"
        in shown
    )
    assert "refused: outside the server root" in shown and SECRET not in shown
    with log.open("a") as out:
        out.write("not an entry\n")
    cli.main(["show", str(log)])
    assert "an unreadable entry" in capsys.readouterr().out


def test_under_ask_a_terminal_command_waits_for_the_card_and_runs_once_approved(
    server: JupyterServer,
) -> None:
    (server.root / "here.txt").write_text("x")

    async def play(chat: ChatDriver) -> tuple[list[Any], Page]:
        page = Page(server, f"acp/{chat.id}", lambda card: {"decision": "approve"})
        async with page.open():
            events = await chat.turn("run ls")
        return events, page

    events, page = run(scenario(server, play))
    (card,) = page.cards
    left = httpx.get(server.url + "qloop/outside/pending", headers=server.headers, timeout=30,
                     params={"path": page.path, "after": -1})  # fmt: skip
    assert left.json()["items"] == []  # the card went once approved
    assert card["tool"] == "terminal/create" and card["code"] == "ls"
    assert card["risk"] == "external"
    assert card["title"] == f"ACP agent Scripted wants to run a command in {server.root} — approve?"
    assert "exit 0:" in said(events) and "here.txt" in said(events)


def test_a_denied_command_does_not_run_and_the_agent_gets_the_reason(
    server: JupyterServer,
) -> None:
    marker = server.root / "made.txt"

    async def play(chat: ChatDriver) -> list[Any]:
        page = Page(server, f"acp/{chat.id}", lambda c: {"decision": "deny", "reason": "not now"})
        async with page.open():
            return await chat.turn(f"run touch {marker}")

    events = run(scenario(server, play))
    assert "refused" in said(events) and "denied by the user: not now" in said(events)
    assert not marker.exists()


def test_with_no_panel_open_nothing_that_needs_a_click_runs(server: JupyterServer) -> None:
    marker = server.root / "nobody.txt"

    async def play(chat: ChatDriver) -> list[Any]:
        return await chat.turn(f"run touch {marker}")

    events = run(scenario(server, play))
    assert "no page shows" in said(events) and not marker.exists()


def test_a_cell_edit_goes_through_qloops_mcp_server_and_a_rejection_reason_reaches_the_agent(
    server: JupyterServer,
) -> None:
    path = server.open_notebook("agent.ipynb", ("x = 1",))

    async def play(chat: ChatDriver) -> tuple[list[Any], Page]:
        reject = {"decision": "deny", "reason": "keep x as it is"}
        page = Page(server, path, lambda card: reject)
        async with page.open():
            events = await chat.turn(f"edit {path} c0 x = 2")
            await asyncio.sleep(0.5)  # the record item reaches the page
        return events, page

    events, page = run(scenario(server, play))
    (card,) = page.cards
    assert card["tool"] == "edit_cell" and card["cell"] == {"op": "edit", "cell_id": "c0"}
    assert card["client"] == "ACP agent Scripted" and not card["verified"]
    assert card["code"] == "x = 2"
    assert "edit_cell answered: error: denied by the user: keep x as it is" in said(events)
    (saved,) = page.saved
    assert saved["tool"] == "edit_cell" and saved["ran"] is None and record.verified(saved)


def test_stop_cancels_the_turn(server: JupyterServer) -> None:
    async def play(chat: ChatDriver) -> list[Any]:
        await chat.post("prompt", text="slow")
        await chat.until(lambda e: e["kind"] == "update")
        again = await chat.post("prompt", text="and this?")
        assert again.status_code == 409 and "still answering" in again.json()["message"]
        stopped = await chat.post("cancel")
        assert stopped.status_code == 200, stopped.text
        return await chat.until(lambda e: e["kind"] == "turn_end")

    events = run(scenario(server, play))
    assert events[-1]["stop_reason"] == "cancelled"


def test_an_agent_that_dies_mid_turn_is_reported_and_the_chat_goes_on(
    server: JupyterServer,
) -> None:
    async def play(chat: ChatDriver) -> tuple[list[Any], list[Any], list[Any]]:
        died = await chat.turn("die")
        if all(e["kind"] != "error" for e in chat.seen):  # the exit is reported once noticed
            await chat.until(lambda e: e["kind"] == "error")
        again = await chat.turn("still there?")
        return died, again, chat.seen

    died, again, seen = run(scenario(server, play))
    assert "about to stop" in said(died)
    assert died[-1]["stop_reason"] == "agent_stopped"
    (stopped,) = [e["text"] for e in seen if e["kind"] == "error"]
    assert stopped.startswith("Scripted stopped (exit code 3)")
    assert "Send a message to start it again" in stopped
    assert any(e["kind"] == "ready" for e in again)
    assert said(again) == "You said: **still there?**"


def test_an_agent_that_supports_it_resumes_its_session_after_a_restart(
    server: JupyterServer,
) -> None:
    async def play(chat: ChatDriver) -> tuple[str, str]:
        before = said(await chat.turn("session"))
        await chat.turn("die")
        if all(e["kind"] != "error" for e in chat.seen):
            await chat.until(lambda e: e["kind"] == "error")
        return before, said(await chat.turn("session"))

    before, after = run(scenario(server, play, agent="Scripted (resumes)"))
    first = before.split()[1]
    assert before == f"session {first} loaded False"
    assert after == f"session {first} loaded True"  # a new process, the same session


def test_under_auto_a_bypass_mode_is_offered_unless_the_admin_blocks_auto(tmp_path: Path) -> None:
    admin = tmp_path / "qloop_admin.json"
    admin.write_text("{}")
    with _server(tmp_path / "root", "auto", {"QLOOP_ADMIN_CONFIG": str(admin)}) as free:

        async def play(chat: ChatDriver) -> list[Any]:
            return await chat.turn(f"write {free.root / 'free.txt'} done")

        events = run(scenario(free, play))
        assert (free.root / "free.txt").read_text() == "done"
        admin.write_text('{"blocked_policies": ["auto"]}')
        blocked = run(scenario(free, lambda chat: chat.until(lambda e: e["kind"] == "ready")))
        admin.write_text('{"outside_agents": false}')
        shut = httpx.get(free.url + "qloop/acp/agents", headers=free.headers, timeout=30)
    ready = next(e for e in events if e["kind"] == "ready")
    assert [m["id"] for m in ready["modes"]] == ["default", "bypassPermissions"]
    decisions = [e["decision"] for e in events if e["kind"] == "decision"]
    assert decisions == ["run without asking by the policy 'auto'"] * 2
    assert [m["id"] for m in blocked[-1]["modes"]] == ["default"]
    assert shut.status_code == 403 and "outside agents may not connect" in shut.text


def test_under_readonly_a_terminal_command_is_refused_without_a_card(tmp_path: Path) -> None:
    with _server(tmp_path / "root", "readonly") as strict:

        async def play(chat: ChatDriver) -> tuple[list[Any], Page]:
            page = Page(strict, f"acp/{chat.id}", lambda card: {"decision": "approve"})
            async with page.open():
                events = await chat.turn("run ls")
            return events, page

        events, page = run(scenario(strict, play))
        pid = int(said(run(scenario(strict, lambda chat: chat.turn("pid")))).split()[1])
        assert _alive(pid)
    assert not _alive(pid)  # the agent stopped with the server
    assert page.cards == []
    assert "refused" in said(events) and "readonly" in said(events)


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie that nobody reaped has stopped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_hosted_agents_decisions_are_traced_like_outside_calls(tmp_path: Path) -> None:
    from tests.otlp_receiver import OtlpReceiver

    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
        with _server(tmp_path / "root", "ask", env) as traced:

            async def play(chat: ChatDriver) -> str:
                page = Page(traced, f"acp/{chat.id}", lambda card: {"decision": "approve"})
                async with page.open():
                    await chat.turn("run ls")
                    await chat.turn(f"write {tmp_path / 'out.txt'} x")  # outside the root
                return chat.id

            chat_id = run(scenario(traced, play))
            spans = receiver.wait_for(lambda found: len(found) == 3)
    by_name = {s.name: s.attributes for s in spans}
    ran = by_name["execute_tool terminal/create"]
    assert (ran["qloop.decision"], ran["qloop.decided_by"]) == ("approved", "person")
    assert ran["qloop.outside"] is True and ran["gen_ai.agent.name"] == "ACP agent Scripted"
    assert ran["gen_ai.conversation.id"] == chat_id and ran["qloop.notebook"] == f"acp/{chat_id}"
    assert by_name["execute_tool acp:edit"]["qloop.decision"] == "approved"
    refused = by_name["execute_tool fs/write_text_file"]
    assert (refused["qloop.decision"], refused["qloop.risk_class"]) == ("denied", "external")
    assert SECRET.encode() not in receiver.raw()


def test_ending_a_chat_stops_its_agent(server: JupyterServer) -> None:
    async def play(chat: ChatDriver) -> tuple[int, httpx.Response, httpx.Response]:
        pid = int(said(await chat.turn("pid")).split()[1])
        assert _alive(pid)
        url = server.url + f"qloop/acp/chats/{chat.id}"
        ended = await chat.http.delete(url)
        after = await chat.post("prompt", text="still there?")
        return pid, ended, after

    pid, ended, after = run(scenario(server, play))
    assert ended.status_code == 200 and not _alive(pid)
    assert after.status_code == 404 and "no chat" in after.json()["message"]
