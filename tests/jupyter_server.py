"""A real Jupyter server (with qloop's server extension) on a loopback port, for the tests.

:func:`jupyter_server` starts ``python -m jupyter server`` with a token and a temporary root,
waits until it answers, and stops it (and its kernels) afterwards. :class:`Page` does what a
notebook page of the JupyterLab extension does over the ``qloop/outside`` routes: long-polls a
notebook's items, answers approval cards with a scripted decision and saves record items.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nbformat

TOKEN = "qloop-test-token-5f0e9c2a7d41b8"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class JupyterServer:
    url: str
    token: str
    root: Path
    log: Path

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"}

    @property
    def mcp_url(self) -> str:
        return self.url + "qloop/mcp"

    def open_notebook(
        self, name: str, sources: tuple[str, ...] = (), kernel: str = "python3"
    ) -> str:
        """Write a notebook under the root and start its kernel, as opening it in a page does."""
        notebook = nbformat.v4.new_notebook()
        notebook.cells = [nbformat.v4.new_code_cell(s) for s in sources]
        nbformat.write(notebook, self.root / name)
        reply = httpx.post(
            self.url + "api/sessions",
            headers=self.headers,
            json={"path": name, "type": "notebook", "name": name, "kernel": {"name": kernel}},
            timeout=60,
        )
        reply.raise_for_status()
        return name


@contextlib.contextmanager
def jupyter_server(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[JupyterServer]:
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    log = root.parent / f"jupyter-server-{port}.log"
    command = [
        sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
        "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={TOKEN}",
        f"--ServerApp.root_dir={root}", *args,
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(  # in the temporary folder: the server's own files land there
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=root.parent,
        )
    server = JupyterServer(f"http://127.0.0.1:{port}/", TOKEN, root, log)
    try:
        _wait_until_up(server, process)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _wait_until_up(server: JupyterServer, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the Jupyter server exited:\n{server.log.read_text()[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(server.url + "api/status", headers=server.headers, timeout=5).is_success:
                return
        time.sleep(0.2)
    raise AssertionError("the Jupyter server did not start")


Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class Page:
    """A notebook page over the REST routes: ``answer`` turns a waiting card into a decision body
    (None: leave it waiting); ``hooks`` are its HTTP client's event hooks (to see every exchange)."""

    server: JupyterServer
    path: str
    answer: Answer
    cards: list[dict[str, Any]] = field(default_factory=list)
    running: list[dict[str, Any]] = field(default_factory=list)
    saved: list[dict[str, Any]] = field(default_factory=list)
    applied: list[dict[str, Any]] = field(default_factory=list)
    hooks: dict[str, list[Any]] = field(default_factory=dict)

    async def run(self) -> None:
        after = 0
        async with httpx.AsyncClient(
            headers=self.server.headers, timeout=60, event_hooks=self.hooks
        ) as http:
            while True:
                found = await http.get(
                    self.server.url + "qloop/outside/pending",
                    params={"path": self.path, "after": after},
                )
                found.raise_for_status()
                body = found.json()
                after = body["version"]
                for item in body["items"]:
                    await self._handle(http, item)

    async def _handle(self, http: httpx.AsyncClient, item: dict[str, Any]) -> None:
        if item["kind"] == "record":
            self.saved.append(item["entry"])
            await http.post(self.server.url + "qloop/outside/saved", json={"id": item["id"]})
        elif item["state"] == "apply":  # a cell change allowed without a card: the page applies it
            if all(c["id"] != item["id"] for c in self.applied):
                claim = await http.post(
                    self.server.url + "qloop/outside/claim", json={"id": item["id"]}
                )
                again = await http.post(
                    self.server.url + "qloop/outside/claim", json={"id": item["id"]}
                )
                assert (claim.status_code, again.status_code) == (200, 409)
                self.applied.append(item)
                applied = {"cell_id": f"applied-{len(self.applied)}"}
                await http.post(
                    self.server.url + "qloop/outside/decide",
                    json={"id": item["id"], "decision": "approve", "applied": applied},
                )
        elif item["state"] == "running":
            if all(c["id"] != item["id"] for c in self.running):
                self.running.append(item)
        elif all(c["id"] != item["id"] for c in self.cards):
            self.cards.append(item)
            decision = self.answer(item)
            if decision is not None:
                reply = await http.post(
                    self.server.url + "qloop/outside/decide", json={"id": item["id"], **decision}
                )
                assert reply.status_code == 200, reply.text

    @contextlib.asynccontextmanager
    async def open(self) -> Any:
        task = asyncio.create_task(self.run())
        await asyncio.sleep(0.3)  # the first poll reaches the server
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
                await task
