"""The Jupyter server's ``qloop/outside`` routes and the ``qloop.host`` comm against the committed
protocol schema: the shared example messages (labextension/test/outside-vectors.json, which
labextension/test/outside-schema.spec.ts reads with the page's own parsers) are what the schema
and the Python types accept or refuse, and every body a page posts and every answer a real Jupyter
server gives, through outside calls of every kind, matches its message in the schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from pydantic import TypeAdapter, ValidationError

from qloop_kernel.records import outside_schema, protocol_schema
from qloop_kernel.records.schema_export import render, schemas, stale
from tests.jupyter_server import JupyterServer, Page, jupyter_server
from tests.test_mcp_server import call, run, session
from tests.test_schema_ts import committed, problems, validator

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parent.parent
VECTORS = ROOT / "labextension" / "test" / "outside-vectors.json"
SCHEMA = "protocol.schema.json"
BODIES = {"decide": "OutsideDecision", "claim": "OutsideItemRef", "stop": "OutsideItemRef",
          "saved": "OutsideItemRef", "agent_cell": "OutsideAgentCellRequest"}  # fmt: skip


def vectors() -> dict[str, dict[str, list[Any]]]:
    return json.loads(VECTORS.read_text("utf-8"))  # type: ignore[no-any-return]


def python_type(name: str) -> Any:
    return getattr(outside_schema, name, None) or getattr(protocol_schema, name)


def python_problem(name: str, value: Any) -> str | None:
    try:
        TypeAdapter[Any](python_type(name)).validate_python(value, strict=True)
    except ValidationError as exc:
        return str(exc)
    return None


# -- the shared vectors -----------------------------------------------------------------------------


def test_every_outside_and_host_message_is_in_the_committed_schema() -> None:
    defs = committed(SCHEMA)["$defs"]
    page = {r["$ref"].split("/")[-1] for r in defs["OutsidePageMessage"]["anyOf"]}
    server = {r["$ref"].split("/")[-1] for r in defs["OutsideServerMessage"]["anyOf"]}
    assert page == set(BODIES.values())
    assert {r["$ref"].split("/")[-1] for r in defs["OutsideRoutes"]["properties"].values()} < server
    host = {"HostRequest", "HostCancel", "HostStarted", "HostAnswer"}
    assert {r["$ref"].split("/")[-1] for r in defs["HostMessage"]["anyOf"]} == host
    assert set(vectors()) >= page | server | {"OutsideItem"} | host


def test_a_changed_outside_message_makes_the_committed_protocol_schema_stale(
    tmp_path: Path,
) -> None:
    for name, schema in schemas().items():
        if name == SCHEMA:
            schema["$defs"]["OutsideApproval"]["required"].remove("verified")
        (tmp_path / name).write_text(render(schema), "utf-8")
    assert stale(tmp_path) == [SCHEMA]


@pytest.mark.parametrize("name", sorted(vectors()))
def test_the_shared_vectors_are_what_the_schema_and_the_python_types_accept(name: str) -> None:
    check = validator(SCHEMA, name)
    cases = vectors()[name]
    assert cases["valid"] and cases["invalid"]
    assert [(v, problems(check, v)) for v in cases["valid"] if problems(check, v)] == []
    assert [(v, python_problem(name, v)) for v in cases["valid"] if python_problem(name, v)] == []
    assert [v for v in cases["invalid"] if not problems(check, v)] == []
    assert [v for v in cases["invalid"] if python_problem(name, v) is None] == []


# -- a real Jupyter server and a page ---------------------------------------------------------------


@dataclass
class Exchange:
    route: str
    status: int
    sent: Any  # the posted body (None for a GET)
    answer: Any


@dataclass
class Traffic:
    """Every exchange with the ``qloop/outside`` routes that got an answer."""

    seen: list[Exchange] = field(default_factory=list)

    async def __call__(self, response: httpx.Response) -> None:
        path = response.request.url.path
        if "/qloop/outside/" not in path:
            return
        await response.aread()
        content = response.request.content
        sent = json.loads(content) if content else None
        self.seen.append(Exchange(path.rsplit("/", 1)[-1], response.status_code, sent,
                                  response.json()))  # fmt: skip

    @property
    def hooks(self) -> dict[str, list[Any]]:
        return {"response": [self]}


def mismatches(traffic: Traffic) -> list[tuple[str, int, str]]:
    """Each exchange whose body or answer does not match its message in the schema."""
    routes = committed(SCHEMA)["$defs"]["OutsideRoutes"]["properties"]
    found = []
    for exchange in traffic.seen:
        if exchange.status == 200:
            answer = routes[exchange.route]["$ref"].split("/")[-1]
        else:
            answer = "OutsidePostAnswer" if exchange.status == 409 else "OutsideError"
        found += [(exchange.route, exchange.status, p)
                  for p in problems(validator(SCHEMA, answer), exchange.answer)]  # fmt: skip
        body = BODIES.get(exchange.route)
        if body is not None and exchange.status != 400:  # a body the server took is a message
            found += [(exchange.route, exchange.status, f"body {exchange.sent}: {p}")
                      for p in problems(validator(SCHEMA, body), exchange.sent)]  # fmt: skip
    return found


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with jupyter_server(tmp_path_factory.mktemp("schema") / "root") as running:
        yield running


def decision(card: dict[str, Any]) -> dict[str, Any] | None:
    """The user's click on each card of the scenario (None: the test decides it)."""
    if card.get("cell", {}).get("op") == "add":
        return {"decision": "edit", "reason": "", "code": "# mine", "applied": {"cell_id": "new1"}}
    if card.get("cell", {}).get("op") == "edit":
        return {"decision": "approve", "reason": "", "applied": {"error": "no cell c9"}}
    if "limit" in card["code"]:
        return {"decision": "edit", "reason": "smaller", "code": "limit = 10"}
    if "rm -rf" in card["code"]:
        return {"decision": "deny", "reason": "not on my data"}
    if "z = " in card["code"]:
        return {"decision": "always", "reason": "", "name": "my agent"}
    return None


async def ran_cell(server: JupyterServer, page: Page, client: ClientSession, path: str) -> None:
    """A run_cell card: claimed (twice: the second 409), then decided with what ran."""
    task = asyncio.create_task(call(client, "run_cell", path=path, cell_id="c1"))
    while not any(c.get("cell", {}).get("op") == "run" for c in page.cards):
        await asyncio.sleep(0.1)
    item = page.cards[-1]["id"]
    ran = {"cell_id": "c1", "source": "print(1)", "outputs": "1\n", "status": "ok"}
    async with httpx.AsyncClient(headers=server.headers, event_hooks=page.hooks) as http:
        for route in ("claim", "claim"):
            await http.post(server.url + f"qloop/outside/{route}", json={"id": item})
        await http.post(server.url + "qloop/outside/decide",
                        json={"id": item, "decision": "approve", "reason": "", "applied": ran})  # fmt: skip
    await task


async def stopped(server: JupyterServer, page: Page, client: ClientSession, path: str) -> None:
    """A run_code of a few seconds, approved by the test, then stopped from the page (the call
    ends when the kernel takes the interrupt, or when the sleep does)."""
    task = asyncio.create_task(
        call(client, "run_code", path=path, code="import time\ntime.sleep(5)")
    )
    while not page.cards or "sleep" not in page.cards[-1]["code"]:
        await asyncio.sleep(0.1)
    item = page.cards[-1]["id"]
    async with httpx.AsyncClient(headers=server.headers, event_hooks=page.hooks) as http:
        await http.post(
            server.url + "qloop/outside/decide", json={"id": item, "decision": "approve"}
        )
        while all(r["id"] != item for r in page.running):
            await asyncio.sleep(0.1)
        await http.post(server.url + "qloop/outside/stop", json={"id": item})
    await asyncio.wait_for(task, 30)


async def refusals(server: JupyterServer, page: Page) -> None:
    """What the routes answer to calls that are gone, decided already, or malformed."""
    url = server.url + "qloop/outside/"
    decided = next(c["id"] for c in page.cards if "limit" in c["code"])
    async with httpx.AsyncClient(headers=server.headers, event_hooks=page.hooks) as http:
        await http.post(url + "agent_cell", json={"id": "cell-9", "entries": page.saved})
        await http.post(url + "agent_cell", json={"id": "cell-9", "entries": ["x", 1]})
        await http.post(url + "agent_cell", json={"id": "cell-9"})
        await http.post(url + "decide", json={"id": decided, "decision": "deny"})
        await http.post(url + "decide", json={"id": decided, "decision": "maybe"})
        await http.post(url + "decide", json={"id": decided, "decision": "edit"})
        for route in ("claim", "stop", "saved"):
            await http.post(url + route, json={"id": "gone"})
        await http.post(url + "claim", json={"id": 7})
    async with httpx.AsyncClient(event_hooks=page.hooks) as anonymous:
        await anonymous.post(url + "saved", json={"id": "gone"})


@pytest.mark.kernel
def test_every_body_a_page_posts_and_every_answer_of_the_server_matches_the_schema(
    server: JupyterServer,
) -> None:
    path = server.open_notebook("schema.ipynb", ("print(1)",))
    traffic = Traffic()

    async def scenario() -> Page:
        page = Page(server, path, decision, hooks=traffic.hooks)
        async with page.open(), session(server, name="claude-code") as client:
            await call(client, "run_code", path=path, code="limit = 10_000_000")
            await call(client, "run_code", path=path, code="import os\n!rm -rf data")
            await call(client, "add_cell", path=path, source="y = 2", after_cell_id="c1")
            await call(client, "edit_cell", path=path, cell_id="c9", source="x = 9")
            await ran_cell(server, page, client, path)
            await stopped(server, page, client, path)
            await call(client, "run_code", path=path, code="z = 1")
            await call(client, "run_code", path=path, code="z = 2")  # the grant: no card
            await asyncio.sleep(0.5)
            await refusals(server, page)
        return page

    page = run(scenario())
    assert mismatches(traffic) == []
    seen = {(e.route, e.status) for e in traffic.seen}
    assert seen >= {(r, 200) for r in ("pending", *BODIES)}
    assert seen >= {("decide", 409), ("claim", 409), ("stop", 409), ("saved", 409),
                    ("agent_cell", 409), ("decide", 400), ("agent_cell", 400), ("claim", 400),
                    ("saved", 403)}  # fmt: skip
    items = [i for e in traffic.seen if e.route == "pending" for i in e.answer["items"]]
    assert {i.get("state", i["kind"]) for i in items} >= {"waiting", "running", "record"}
    assert {i["cell"]["op"] for i in items if "cell" in i} == {"add", "edit", "run"}
    assert {i.get("verified") for i in items if i["kind"] == "approval"} == {True, False}
    assert len(page.saved) == 8 and {e["tool"] for e in page.saved} == {
        "run_code", "add_cell", "edit_cell", "run_cell"}  # fmt: skip


@pytest.mark.kernel
def test_a_cell_change_the_policy_allows_is_sent_as_an_item_to_apply(tmp_path: Path) -> None:
    traffic = Traffic()
    with jupyter_server(tmp_path / "root", "--QloopMCP.policy=write") as server:
        path = server.open_notebook("w.ipynb")

        async def scenario() -> Page:
            page = Page(server, path, lambda card: None, hooks=traffic.hooks)
            async with page.open(), session(server) as client:
                await call(client, "add_cell", path=path, source="w = 1")
                await asyncio.sleep(0.5)
            return page

        page = run(scenario())
    assert [a["state"] for a in page.applied] == ["apply"]
    assert mismatches(traffic) == []
    assert {(e.route, e.status) for e in traffic.seen} >= {
        ("pending", 200), ("claim", 200), ("claim", 409), ("decide", 200), ("saved", 200)}  # fmt: skip
