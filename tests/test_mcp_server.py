"""The live notebooks as an MCP server for outside agents: the official SDK's client against a real
Jupyter server with qloop's extension and real kernels; a notebook page played over the REST routes
the JupyterLab extension uses (the browser test plays it in JupyterLab itself)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from qloop_kernel.names import POLICIES, Policy
from qloop_kernel.policy.permissions import policy_verdict
from qloop_kernel.policy.risk import RISKS, Assessment, Reason, Risk
from qloop_kernel.records import load_record
from qloop_kernel.records.protocol_schema import STOPPED_BEFORE
from qloop_kernel.server import record
from qloop_kernel.server.broker import OutsideBroker
from qloop_kernel.server.gate import Gate, Step, Verdict
from qloop_kernel.server.handlers import is_loopback
from tests.jupyter_server import JupyterServer, Page, jupyter_server

pytestmark = pytest.mark.timeout(240)

SECRET = "sk-ant-api03-outside0agent0secret0value0123456789abcdef"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    root = tmp_path_factory.mktemp("outside") / "root"
    with jupyter_server(root, env={"ANTHROPIC_API_KEY": SECRET}) as running:
        yield running


def notebook(server: JupyterServer, *sources: str) -> str:
    return server.open_notebook(f"nb-{uuid.uuid4().hex[:8]}.ipynb", sources)


@contextlib.asynccontextmanager
async def session(
    server: JupyterServer, name: str = "test-outside"
) -> AsyncIterator[ClientSession]:
    info = types.Implementation(name=name, version="1.0")
    async with (
        httpx.AsyncClient(headers=server.headers, timeout=120) as http,
        streamable_http_client(server.mcp_url, http_client=http) as (read, write, *_),
        ClientSession(read, write, client_info=info) as client,
    ):
        await client.initialize()
        yield client


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(client: ClientSession, tool: str, **arguments: Any) -> types.CallToolResult:
    return await client.call_tool(tool, arguments)


def run(work: Any) -> Any:
    return asyncio.run(work)


# --- authentication -------------------------------------------------------------------------------


def test_a_missing_or_wrong_token_is_refused_and_no_page_login_is_offered(
    server: JupyterServer,
) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    missing = httpx.post(server.mcp_url, json=body, timeout=30)
    wrong = httpx.post(
        server.mcp_url, json=body, headers={"Authorization": "token not-the-token"}, timeout=30
    )
    for reply in (missing, wrong):
        assert reply.status_code == 401, reply.text
        assert "token is required" in reply.json()["message"]
    pending = httpx.get(
        server.url + "qloop/outside/pending", params={"path": "x.ipynb"}, timeout=30
    )
    assert pending.status_code == 403  # the page routes need Jupyter's auth too

    async def refused() -> None:
        async with (
            httpx.AsyncClient(headers={"Authorization": "token wrong"}, timeout=30) as http,
            streamable_http_client(server.mcp_url, http_client=http) as (r, w, *_),
            ClientSession(r, w) as client,
        ):
            await client.initialize()

    with pytest.raises(BaseException) as failed:
        run(refused())
    assert server.token not in str(failed.value)


def test_a_token_in_the_url_is_refused_saying_to_use_the_header(server: JupyterServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for headers in ({}, server.headers):  # refused even beside a good header: it leaked already
        reply = httpx.post(
            server.mcp_url, params={"token": server.token}, json=body, headers=headers, timeout=30
        )
        assert reply.status_code == 401, reply.text
        message = reply.json()["message"]
        assert "Authorization: token" in message and "not in the URL" in message
        assert server.token not in reply.text


def test_a_page_of_another_origin_is_refused_even_with_the_token(server: JupyterServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    for origin in ("http://evil.example", "http://127.0.0.1:1", "null"):
        reply = httpx.post(
            server.mcp_url, json=body, headers={**server.headers, "Origin": origin}, timeout=30
        )
        assert reply.status_code == 403, (origin, reply.text)
        assert "another origin" in reply.json()["message"]

    async def tools(headers: dict[str, str]) -> list[str]:
        async with (
            httpx.AsyncClient(headers=headers, timeout=60) as http,
            streamable_http_client(server.mcp_url, http_client=http) as (read, write, *_),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return [t.name for t in (await client.list_tools()).tools]

    same = server.url.rstrip("/")  # a page of the Jupyter server itself, with the token
    assert "run_code" in run(tools({**server.headers, "Origin": same}))
    assert "run_code" in run(tools(server.headers))  # no Origin: a program, not a browser page


def test_only_loopback_addresses_count_as_this_machine() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("127.8.0.2")
    assert not is_loopback("10.0.0.5") and not is_loopback("192.168.1.2") and not is_loopback("")


# --- read tools -----------------------------------------------------------------------------------


def test_read_tools_answer_from_the_kernel_and_the_saved_notebook(server: JupyterServer) -> None:
    path = notebook(server, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})")

    async def scenario() -> dict[str, str]:
        async with session(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "list_notebooks", "list_variables", "inspect_variable", "read_notebook", "run_code",
                "add_cell", "edit_cell", "run_cell",
            }  # fmt: skip
            assert tools["list_variables"].annotations.read_only_hint is True
            assert tools["run_code"].annotations.read_only_hint is False
            listed = json.loads(text(await call(client, "list_notebooks")))
            before = text(await call(client, "list_variables", path=path))
            page = Page(server, path, lambda card: {"decision": "approve", "reason": ""})
            async with page.open():
                made = await call(client, "run_code", path=path, code="frame = {'rows': 3}")
            assert not made.is_error, text(made)
            return {
                "listed": json.dumps(listed),
                "before": before,
                "after": text(await call(client, "list_variables", path=path)),
                "inspect": text(await call(client, "inspect_variable", path=path, name="frame")),
                "unknown": text(await call(client, "inspect_variable", path=path, name="fram")),
                "cells": text(await call(client, "read_notebook", path=path)),
                "missing": text(await call(client, "list_variables", path="nope.ipynb")),
            }

    found = run(scenario())
    assert path in found["listed"]
    assert "No user variables" in found["before"]  # no cell of the notebook has run
    assert "frame" in found["after"] and "dict" in found["after"]
    assert "rows" in found["inspect"]
    assert "fram" in found["unknown"] and "frame" in found["unknown"]  # a close name suggested
    assert "df = pd.DataFrame" in found["cells"] and "as last saved" in found["cells"]
    assert "no kernel runs 'nope.ipynb'" in found["missing"]


# --- run_code behind the approval card ------------------------------------------------------------


def test_run_code_with_no_page_is_refused_runs_nothing_and_is_recorded(
    server: JupyterServer,
) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, str, Page]:
        async with session(server) as client:
            refused = await call(client, "run_code", path=path, code="y = 1")
            after = text(await call(client, "list_variables", path=path))
            page = Page(server, path, lambda card: None)
            async with page.open():
                await asyncio.sleep(1.0)  # the refusal's record waits for a page to save it
            return refused, after, page

    refused, after, page = run(scenario())
    assert refused.is_error
    assert "no page shows" in text(refused) and "c.QloopMCP.policy" in text(refused)
    assert "No user variables" in after  # nothing ran
    assert page.cards == []
    [entry] = page.saved
    assert entry["client"] == "test-outside" and entry["tool"] == "run_code"
    assert entry["decision"].startswith("refused") and entry["ran"] is None
    assert record.verified(entry)
    assert not record.verified({**entry, "input": {"code": "y = 2"}})  # edited: no longer


# One snippet of each class, none of which may run here (the notebook's kernel is fresh).
EVERY_CLASS = {
    "read": "print('ran' + '-' + 'read')",
    "write": "total = 6",
    "compute": "import dask\ndask.compute(1)",
    "unknown": "exec('total = 6')",
    "destructive": "import os\nos.remove('gone.txt')",
    "external": "import urllib.request\nurllib.request.urlopen('http://example.invalid')",
}


def _documented_outside_verdicts() -> dict[str, dict[str, str]]:
    """The policy table of docs/mcp.md's approval card section: policy -> class -> cell."""
    section = (ROOT / "docs" / "mcp.md").read_text("utf-8").split("## The approval card")[1]
    rows = [line for line in section.split("\n## ")[0].splitlines() if line.startswith("| `")]
    table: dict[str, dict[str, str]] = {}
    for row in rows:
        policy, *cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[policy.strip("`")] = dict(zip(RISKS, cells, strict=True))
    return table


def test_the_documented_table_the_policy_verdicts_and_the_gate_with_no_page_agree() -> None:
    """For every policy and class: what docs/mcp.md says, what policy_verdict says, and what the
    gate does when no page shows the notebook (only what runs unasked runs; the rest is refused)."""
    table = _documented_outside_verdicts()
    assert set(table) == set(POLICIES)
    words = {"run": "runs", "ask": "card (no page: refused)", "deny": "refused"}
    docs = (ROOT / "docs" / "mcp.md").read_text("utf-8")
    assert "a call that would go on a card is refused, whatever\nits class" in docs

    async def no_page(policy: Policy, risk: Risk) -> Verdict:
        gate = Gate(OutsideBroker(), lambda: policy)
        assessment = Assessment(risk, (Reason(1, risk, "a step"),), frozenset())
        step = Step("claude-code", "nb.ipynb", "run_code", "x", assessment, session="s1")
        return await gate.decide(step, lambda waited, message: asyncio.sleep(0))

    for policy in POLICIES:
        for risk in RISKS:
            verdict = policy_verdict(policy, risk)
            assert table[policy][risk] == words[verdict], (policy, risk)
            decided = run(no_page(policy, risk))
            assert decided.run == (verdict == "run"), (policy, risk, decided)
            if verdict == "ask":
                assert decided.how == "refused: no page to approve it", (policy, risk)


def test_under_ask_with_no_page_a_call_of_every_class_is_refused(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> tuple[dict[str, types.CallToolResult], str]:
        async with session(server) as client:
            results = {
                risk: await call(client, "run_code", path=path, code=code)
                for risk, code in EVERY_CLASS.items()
            }
            return results, text(await call(client, "list_variables", path=path))

    results, after = run(scenario())
    for risk, result in results.items():
        assert result.is_error, (risk, text(result))
        assert f"this '{risk}' call needs the user's approval, and no page shows" in text(result)
    assert "ran-read" not in text(results["read"])  # it did not run: the output is not there
    assert "No user variables" in after


def test_a_card_names_the_client_and_the_call_waits_for_the_click(server: JupyterServer) -> None:
    path = notebook(server)
    progress: list[str] = []

    async def scenario() -> tuple[types.CallToolResult, Page]:
        async with session(server, name="claude-code") as client:
            page = Page(server, path, lambda card: None)  # the user takes their time
            async with page.open():
                call_task = asyncio.create_task(
                    client.call_tool(
                        "run_code",
                        {"path": path, "code": "z = 6 * 7\nprint('z is', z)"},
                        progress_callback=lambda p, t, m: _note(progress, m),
                    )
                )
                while not page.cards:
                    await asyncio.sleep(0.1)
                await asyncio.sleep(6)  # still waiting: progress goes to the client meanwhile
                assert not call_task.done()
                async with httpx.AsyncClient(headers=server.headers) as http:
                    card = page.cards[0]
                    decided = await http.post(
                        server.url + "qloop/outside/decide",
                        json={"id": card["id"], "decision": "approve", "reason": "fine by me"},
                    )
                    again = await http.post(
                        server.url + "qloop/outside/decide",
                        json={"id": card["id"], "decision": "deny"},
                    )
                assert decided.status_code == 200 and again.status_code == 409
                result = await call_task
                await asyncio.sleep(0.5)
            return result, page

    result, page = run(scenario())
    [card] = page.cards
    assert card["client"] == "claude-code" and card["tool"] == "run_code"
    assert card["title"].startswith("claude-code wants to run code")
    assert card["risk"] == "write" and card["reasons"] == ["line 1: creates z"]
    assert card["code"] == "z = 6 * 7\nprint('z is', z)"
    assert any("waiting for the user's approval" in m for m in progress)
    assert not result.is_error
    said = text(result)
    assert "approved by the user" in said and "fine by me" in said and "z is 42" in said
    [entry] = page.saved
    assert entry["decision"] == "approved by the user" and entry["reason"] == "fine by me"
    assert "z is 42" in entry["result"] and record.verified(entry)


def _note(progress: list[str], message: str | None) -> None:
    progress.append(message or "")


def test_a_denial_runs_nothing_and_tells_the_client_why(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, str, Page]:
        async with session(server) as client:
            page = Page(server, path, lambda card: {"decision": "deny", "reason": "not on my data"})
            async with page.open():
                denied = await call(client, "run_code", path=path, code="import os\n!rm -rf data")
                await asyncio.sleep(0.5)
            return denied, text(await call(client, "list_variables", path=path)), page

    denied, after, page = run(scenario())
    assert denied.is_error and text(denied) == "denied by the user: not on my data"
    assert page.cards[0]["risk"] == "external"  # the `!` line, as the kernel's IPython runs it
    assert "runs the shell command `rm`" in page.cards[0]["reasons"][-1]
    assert "No user variables" in after  # `import os` did not run either
    assert page.saved[0]["decision"] == "denied by the user" and page.saved[0]["ran"] is None


def test_an_edit_runs_what_the_user_wrote_and_says_so(server: JupyterServer) -> None:
    path = notebook(server)
    edited = "limit = 10\nprint('limit', limit)"

    async def scenario() -> tuple[types.CallToolResult, Page]:
        async with session(server) as client:
            page = Page(
                server, path, lambda card: {"decision": "edit", "code": edited, "reason": ""}
            )
            async with page.open():
                result = await call(client, "run_code", path=path, code="limit = 10_000_000")
                await asyncio.sleep(0.5)
            return result, page

    result, page = run(scenario())
    said = text(result)
    assert "edited by the user" in said and edited in said and "limit 10" in said
    assert page.saved[0]["input"] == {"code": "limit = 10_000_000"}
    assert page.saved[0]["ran"] == edited


def test_the_saved_calls_become_an_agent_cell_that_replays_what_ran(server: JupyterServer) -> None:
    path = notebook(server)
    edited = "rows = 12"

    def answer(card: dict[str, Any]) -> dict[str, Any]:
        if "rows" in card["code"]:
            return {"decision": "edit", "code": edited, "reason": ""}
        return {"decision": "approve", "reason": ""}

    async def scenario() -> Page:
        async with session(server, name="Claude Code") as client:
            page = Page(server, path, answer)
            async with page.open():
                await call(client, "run_code", path=path, code="cols = 3")
                await call(client, "run_code", path=path, code="rows = 10_000")
                await asyncio.sleep(0.5)
            return page

    page = run(scenario())
    url = server.url + "qloop/outside/agent_cell"
    made = httpx.post(
        url, headers=server.headers, json={"id": "cell-9", "entries": page.saved}, timeout=30
    )
    assert made.status_code == 200, made.text
    body = made.json()
    saved = load_record(body["record"])
    assert body["own"] and saved.is_own() and body["steps"] == 2 and body["skipped"] == 0
    assert body["source"] == "%%agent\n" + saved.prompt and "Claude Code" in saved.prompt
    assert [s.input["code"] for s in saved.replay_steps()] == ["cols = 3", edited]
    assert saved.cell_id == "cell-9"

    forged = [{**page.saved[0], "ran": "cols = 3; import os"}, page.saved[1]]
    received = httpx.post(url, headers=server.headers, json={"id": "c", "entries": forged})
    assert received.status_code == 200 and not received.json()["own"]
    assert not load_record(received.json()["record"]).is_own()

    for bad in ({"id": "c", "entries": []}, {"id": "c"}, {"entries": page.saved}):
        assert httpx.post(url, headers=server.headers, json=bad).status_code == 400
    junk = httpx.post(url, headers=server.headers, json={"id": "c", "entries": ["x", 1]})
    assert junk.status_code == 409 and "readable" in junk.json()["message"]
    assert httpx.post(url, json={"id": "c", "entries": page.saved}).status_code == 403


def test_always_allow_covers_this_clients_later_calls_of_that_class_or_milder(
    server: JupyterServer,
) -> None:
    path = notebook(server)

    async def scenario() -> tuple[list[types.CallToolResult], types.CallToolResult, Page]:
        page = Page(server, path, lambda card: {"decision": "always", "reason": ""})
        async with page.open():
            async with session(server, name="cursor") as client:
                first = await call(client, "run_code", path=path, code="a = 1")
                second = await call(client, "run_code", path=path, code="b = 2")
            page.answer = lambda card: None
            async with session(server, name="another-agent") as other:
                task = asyncio.create_task(call(other, "run_code", path=path, code="c = 3"))
                while len(page.cards) < 2:
                    await asyncio.sleep(0.1)
                task.cancel()  # the client gives up: its card goes away
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        return [first, second], page.cards[1], page

    results, other_card, page = run(scenario())
    assert all(not r.is_error for r in results)
    assert "run by the user's grant" in text(results[1])
    assert other_card["client"] == "another-agent"  # the grant is the client's, not everyone's
    assert len([c for c in page.cards if c["client"] == "cursor"]) == 1


def test_a_grant_belongs_to_the_session_the_server_issued_not_to_the_announced_name(
    server: JupyterServer,
) -> None:
    path = notebook(server)

    def decide(card: dict[str, Any]) -> dict[str, Any] | None:
        if len(page.cards) == 1:  # the first card of the first session: always, and named
            return {"decision": "always", "reason": "", "name": "my Claude Code"}
        return None

    page = Page(server, path, decide)

    async def waiting(client: ClientSession, code: str) -> dict[str, Any]:
        """The card of a call that waits for the click (the client then gives up), or what the
        call answered without one."""
        task = asyncio.create_task(call(client, "run_code", path=path, code=code))
        seen = len(page.cards)
        while len(page.cards) == seen and not task.done():
            await asyncio.sleep(0.1)
        if task.done():
            return {"answered without a card": text(task.result())}
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return page.cards[-1]

    async def scenario() -> tuple[list[types.CallToolResult], list[dict[str, Any]]]:
        async with page.open():
            async with session(server, name="claude-code") as first:
                granted = [
                    await call(first, "run_code", path=path, code="a = 1"),
                    await call(first, "run_code", path=path, code="b = 2"),
                ]
                named = await waiting(first, "import os\nos.remove('gone.txt')")
            async with session(server, name="claude-code") as impostor:
                other = await waiting(impostor, "c = 3")
        return granted, [named, other]

    granted, (named, other) = run(scenario())
    # Another session announcing the same name holds no grant: its call waits on a card.
    assert "answered without a card" not in other, other
    first_card = page.cards[0]
    assert first_card["client"] == "claude-code" and first_card["verified"] is False
    assert first_card["grantable"] is True
    assert all(not r.is_error for r in granted) and "user's grant" in text(granted[1])
    # The same session later: under the name the user gave it, verified; the grant covers
    # 'write' calls, not this 'destructive' one.
    assert named["client"] == "my Claude Code" and named["verified"] is True
    assert named["title"].startswith("my Claude Code wants to run code")
    # ... and it is shown unverified, under the name it announced.
    assert other["client"] == "claude-code" and other["verified"] is False
    assert other["code"] == "c = 3"
    assert [e["client"] for e in page.saved[:2]] == ["claude-code", "my Claude Code"]


def test_stop_interrupts_a_running_call(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, str]:
        async with session(server) as client:
            page = Page(server, path, lambda card: {"decision": "approve", "reason": ""})
            async with page.open():
                task = asyncio.create_task(
                    call(
                        client, "run_code", path=path, code="import time\ntime.sleep(60)\nslept = 1"
                    )
                )
                while not page.running:
                    await asyncio.sleep(0.1)
                async with httpx.AsyncClient(headers=server.headers) as http:
                    stop = await http.post(
                        server.url + "qloop/outside/stop", json={"id": page.running[0]["id"]}
                    )
                assert stop.status_code == 200
                result = await asyncio.wait_for(task, 30)
            return result, text(await call(client, "list_variables", path=path))

    result, after = run(scenario())
    # Interrupted while it ran, or stopped before the server sent it to the kernel (never run).
    said = text(result)
    assert result.is_error and ("KeyboardInterrupt" in said or STOPPED_BEFORE in said), said
    assert "slept" not in after


def test_images_reach_the_client_and_secrets_do_not(server: JupyterServer) -> None:
    path = notebook(server)
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    code = (
        "import os\nfrom IPython.display import display\n"
        f"display({{'image/png': '{pixel}', 'text/plain': '<image>'}}, raw=True)\n"
        "print(os.environ['ANTHROPIC_API_KEY'])"
    )

    async def scenario() -> tuple[types.CallToolResult, Page]:
        async with session(server) as client:
            page = Page(server, path, lambda card: {"decision": "approve", "reason": ""})
            async with page.open():
                result = await call(client, "run_code", path=path, code=code)
                await asyncio.sleep(0.5)
            return result, page

    result, page = run(scenario())
    images = [c for c in result.content if isinstance(c, types.ImageContent)]
    assert [i.mime_type for i in images] == ["image/png"] and images[0].data == pixel
    assert SECRET not in text(result) and SECRET not in json.dumps(page.saved)
    assert "outside0agent0secret" not in text(result)


# --- policies from the user's Jupyter config ------------------------------------------------------


def test_the_users_policy_decides_without_a_page(tmp_path: Path) -> None:
    with jupyter_server(tmp_path / "root", "--QloopMCP.policy=readonly") as server:
        path = server.open_notebook("p.ipynb")

        async def scenario() -> list[types.CallToolResult]:
            async with session(server) as client:
                return [
                    await call(client, "run_code", path=path, code="print(sum(range(4)))"),
                    await call(client, "run_code", path=path, code="total = 6"),
                    await call(client, "add_cell", path=path, source="total = 6"),
                ]

        read, write, cell = run(scenario())
    assert not read.is_error and "6" in text(read) and "policy 'readonly'" in text(read)
    assert write.is_error and "denied by the approval policy 'readonly'" in text(write)
    assert cell.is_error and "denied by the approval policy 'readonly'" in text(cell)


def _first_listing(tmp_path: Path, launch: str) -> types.CallToolResult:
    """``list_variables``, called as soon as a notebook opens on a kernel that ``launch`` (a bash
    line) starts."""
    spec = tmp_path / "kernels" / "kernels" / "started"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps({"argv": ["bash", "-c", launch], "display_name": "started", "language": "python"})
    )
    env = {"JUPYTER_PATH": str(tmp_path / "kernels")}
    with jupyter_server(tmp_path / "root", env=env) as server:
        path = server.open_notebook("started.ipynb", kernel="started")

        async def scenario() -> types.CallToolResult:
            async with session(server) as client:
                return await call(client, "list_variables", path=path)

        return run(scenario())


def test_the_first_call_waits_for_a_kernel_that_is_still_starting(tmp_path: Path) -> None:
    """A notebook just opened: its kernel starts slower than a read waits for a busy kernel."""
    launch = f"sleep 18; exec {sys.executable} -m ipykernel_launcher -f {{connection_file}}"
    listed = _first_listing(tmp_path, launch)
    assert not listed.is_error, text(listed)
    assert "No user variables" in text(listed)


def test_the_first_call_follows_a_kernel_that_failed_its_first_start(tmp_path: Path) -> None:
    """A kernel that dies while it starts (a port it was given taken meanwhile, say) is started
    again by the server on new ports: the waiting call talks to that one."""
    marker = tmp_path / "started-once"
    launch = (
        f"if [ ! -e {marker} ]; then touch {marker}; sleep 4; exit 1; fi; "
        f"exec {sys.executable} -m ipykernel_launcher -f {{connection_file}}"
    )
    listed = _first_listing(tmp_path, launch)
    assert marker.exists()
    assert not listed.is_error, text(listed)
    assert "No user variables" in text(listed)


# --- cells ----------------------------------------------------------------------------------------


def test_a_proposed_cell_is_added_by_the_page_once_the_user_accepts_it(
    server: JupyterServer,
) -> None:
    path = notebook(server, "x = 1")

    def accept(card: dict[str, Any]) -> dict[str, Any]:
        if card["cell"]["op"] == "edit":
            return {"decision": "deny", "reason": "keep my cell"}
        applied = {"cell_id": "cell-new"}
        return {"decision": "edit", "code": "# mine\ny = 2", "reason": "", "applied": applied}

    async def scenario() -> tuple[list[types.CallToolResult], types.CallToolResult, Page]:
        async with session(server, name="cursor") as client:
            refused = await call(client, "add_cell", path=path, source="y = 2")  # no page yet
            page = Page(server, path, accept)
            async with page.open():
                added = await call(
                    client, "add_cell", path=path, source="y = 2", after_cell_id="c0"
                )
                edited = await call(client, "edit_cell", path=path, cell_id="c0", source="x = 9")
                await asyncio.sleep(0.5)
            return [refused, added], edited, page

    (refused, added), edited, page = run(scenario())
    assert refused.is_error and "cells are changed in the page" not in text(refused)
    assert "no page shows" in text(refused)
    add, edit = page.cards
    assert add["title"] == "cursor proposes a new code cell — accept?"
    assert add["cell"] == {"op": "add", "cell_type": "code", "after_cell_id": "c0"}
    assert add["code"] == "y = 2" and add["risk"] == "write"
    assert add["reasons"] == ["line 1: adds a code cell after cell c0"]
    assert not added.is_error
    assert "added as cell cell-new" in text(added) and "# mine\ny = 2" in text(added)
    assert edit["cell"] == {"op": "edit", "cell_id": "c0"} and edit["code"] == "x = 9"
    assert edited.is_error and text(edited) == "denied by the user: keep my cell"
    saved = {e["tool"]: e for e in page.saved if e["decision"] != "refused: no page to approve it"}
    assert (
        saved["add_cell"]["ran"] == "# mine\ny = 2"
        and saved["add_cell"]["result"] == "cell cell-new"
    )
    assert saved["add_cell"]["input"]["source"] == "y = 2"
    assert saved["edit_cell"]["ran"] is None and record.verified(saved["edit_cell"])


def test_a_policy_that_allows_a_cell_change_still_has_the_page_apply_it(tmp_path: Path) -> None:
    with jupyter_server(tmp_path / "root", "--QloopMCP.policy=write") as server:
        path = server.open_notebook("w.ipynb")

        async def scenario() -> tuple[types.CallToolResult, types.CallToolResult, Page]:
            async with session(server) as client:
                ran = await call(client, "run_code", path=path, code="w = 1")
                page = Page(server, path, lambda card: None)
                async with page.open():
                    added = await call(client, "add_cell", path=path, source="w += 1")
                return ran, added, page

        ran, added, page = run(scenario())
    assert not ran.is_error and "policy 'write'" in text(ran)  # a 'write' step: no card, no page
    assert page.cards == [] and [a["cell"]["op"] for a in page.applied] == ["add"]
    assert "added as cell applied-1" in text(added)


def test_with_no_page_a_cell_change_the_policy_allows_goes_into_the_saved_file(
    tmp_path: Path,
) -> None:
    import nbformat

    with jupyter_server(tmp_path / "root", "--QloopMCP.policy=write") as server:
        path = server.open_notebook("disk.ipynb", ("x = 1", "# keep me"))
        file = server.root / path
        first, second = (c.id for c in nbformat.read(file, as_version=4).cells)

        async def scenario() -> list[types.CallToolResult]:
            async with session(server, name="Cursor") as client:
                return [
                    await call(client, "add_cell", path=path, source="y = x + 1",
                               after_cell_id=first),
                    await call(client, "add_cell", path=path, source="# Notes",
                               cell_type="markdown"),
                    await call(client, "edit_cell", path=path, cell_id=first, source="x = 2"),
                    await call(client, "edit_cell", path=path, cell_id="nope", source="z"),
                    await call(client, "run_cell", path=path, cell_id=first),
                ]  # fmt: skip

        added, markdown, edited, missing, ran = run(scenario())
        saved = nbformat.read(file, as_version=4)
    assert not added.is_error and "written into the saved notebook" in text(added)
    assert [(c.cell_type, c.source) for c in saved.cells] == [
        ("code", "x = 2"),
        ("code", "y = x + 1"),
        ("code", "# keep me"),
        ("markdown", "# Notes"),
    ]
    assert saved.cells[0].id == first and saved.cells[2].id == second
    assert f"added as cell {saved.cells[1].id}" in text(added)
    assert saved.cells[1].metadata["qloop_outside"] == {"client": "Cursor", "tool": "add_cell"}
    assert saved.cells[0].metadata["qloop_outside"] == {"client": "Cursor", "tool": "edit_cell"}
    assert not markdown.is_error and not edited.is_error
    assert missing.is_error and "no cell with id nope" in text(missing)
    assert ran.is_error and "no page shows" in text(ran)  # cells run in a page


# --- qloop mcp: stdio clients -----------------------------------------------------------------------


def test_a_stdio_client_reaches_the_notebook_through_qloop_mcp_under_its_own_name(
    server: JupyterServer,
) -> None:
    import os
    import sys

    from mcp.client.stdio import StdioServerParameters, stdio_client

    path = notebook(server)
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "QLOOP_JUPYTER_URL")}
    # The URL as `jupyter server list` prints it: the bridge sends its token in the header (the
    # endpoint refuses a token in the URL).
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "qloop_kernel.headless.cli",
            "mcp",
            "--url",
            f"{server.url}?token={server.token}",
        ],
        env=env,
    )

    async def scenario() -> tuple[list[str], types.CallToolResult, Page]:
        info = types.Implementation(name="codex", version="2")
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, client_info=info) as client,
        ):
            await client.initialize()
            names = [t.name for t in (await client.list_tools()).tools]
            page = Page(server, path, lambda card: {"decision": "approve", "reason": "ok"})
            async with page.open():
                result = await call(client, "run_code", path=path, code="via = 'stdio'\nprint(via)")
                await asyncio.sleep(0.5)
            return names, result, page

    names, result, page = run(scenario())
    assert "run_code" in names and "list_notebooks" in names
    assert page.cards[0]["client"] == "codex"  # the stdio client's name, not the bridge's
    assert not result.is_error and "stdio" in text(result)
    assert page.saved[0]["client"] == "codex"


def test_a_kernel_restarted_while_a_call_runs_ends_the_call(server: JupyterServer) -> None:
    path = notebook(server)

    async def scenario() -> tuple[types.CallToolResult, float]:
        async with session(server) as client:
            page = Page(server, path, lambda card: {"decision": "approve", "reason": ""})
            async with page.open():
                task = asyncio.create_task(
                    call(client, "run_code", path=path, code="import time\ntime.sleep(120)")
                )
                while not page.running:
                    await asyncio.sleep(0.1)
                sessions = httpx.get(server.url + "api/sessions", headers=server.headers).json()
                [kernel] = [s["kernel"]["id"] for s in sessions if s["path"] == path]
                started = asyncio.get_running_loop().time()
                restart = httpx.post(
                    server.url + f"api/kernels/{kernel}/restart", headers=server.headers, timeout=60
                )
                assert restart.is_success
                result = await asyncio.wait_for(task, 60)
                return result, asyncio.get_running_loop().time() - started

    result, waited = run(scenario())
    assert result.is_error and "died or was restarted" in text(result)
    assert waited < 30  # not the call's time limit


def test_run_cell_is_approved_on_a_card_and_run_by_the_page(server: JupyterServer) -> None:
    path = notebook(server, "print('hello')")
    ran = {"cell_id": "c1", "source": "print('hello')", "outputs": "hello\n", "status": "ok"}

    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult, Page, list[int]]:
        async with session(server) as client:
            refused = await call(client, "run_cell", path=path, cell_id="c1")  # no page
            page = Page(server, path, lambda card: None)
            async with page.open(), httpx.AsyncClient(headers=server.headers) as http:
                task = asyncio.create_task(call(client, "run_cell", path=path, cell_id="c1"))
                while not page.cards:
                    await asyncio.sleep(0.1)
                item = page.cards[0]["id"]
                codes = [
                    (
                        await http.post(server.url + f"qloop/outside/{route}", json={"id": item})
                    ).status_code
                    for route in ("claim", "claim")
                ]
                while not page.running:  # claimed: the page shows it running, with Stop
                    await asyncio.sleep(0.1)
                decided = await http.post(
                    server.url + "qloop/outside/decide",
                    json={"id": item, "decision": "approve", "reason": "", "applied": ran},
                )
                codes.append(decided.status_code)
                result = await task
                await asyncio.sleep(0.5)
            return refused, result, page, codes

    refused, result, page, codes = run(scenario())
    assert refused.is_error and "no page shows" in text(refused)
    [card] = page.cards
    assert card["title"] == "test-outside wants to run a cell of this notebook — approve?"
    assert card["cell"] == {"op": "run", "cell_id": "c1"} and card["editable"] is False
    assert card["risk"] == "unknown"
    assert codes == [200, 409, 200]
    said = text(result)
    assert not result.is_error and "ran cell c1" in said and "print('hello')" in said
    assert "Output:\nhello" in said
    entry = next(e for e in page.saved if e["tool"] == "run_cell" and e["ran"])
    assert entry["ran"] == "print('hello')" and "hello" in entry["result"]
