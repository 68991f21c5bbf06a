"""Outside agents' calls end to end: a real Jupyter server with qloop's extension, the official MCP
client, the outside policy ``auto`` deciding (no page, no card).

- read: ``inspect_variable`` of a small variable (MCP request -> the kernel -> the result);
- run_code: ``1+1`` (MCP request -> policy -> the kernel session's step -> the result);
- concurrent: 20 reads sent at once from one client, how many answer and how long all take.

Each figure is the median of ``--calls`` calls after a few warm-up calls. ``--baseline DIR`` also
measures, in the same run and on the same machine, a server and kernels importing the package
from ``DIR`` (an earlier checkout's tree, e.g. ``git archive COMMIT qloop_kernel | tar -x -C DIR``),
and prints both side by side with their ratio.

Run: ``python bench/outside_calls.py [--calls 50] [--baseline DIR]``. Exits 1 if a target is
missed (read p50 <= 30 ms, run_code p50 <= 50 ms, all 20 concurrent reads answer).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from mcp import types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from tests.jupyter_server import JupyterServer, jupyter_server  # noqa: E402

READ_TARGET_MS = 30.0
RUN_TARGET_MS = 50.0
CONCURRENT = 20
WARM_UP = 5


async def _median_ms(work: Any, calls: int) -> float:
    for _ in range(WARM_UP):
        await work()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result: types.CallToolResult = await work()
        times.append((time.perf_counter() - started) * 1000)
        if result.is_error:
            raise SystemExit(f"a call failed: {result.content}")
    return statistics.median(times)


async def measure(server: JupyterServer, calls: int) -> dict[str, float]:
    path = server.open_notebook("bench.ipynb", ("frame = {'rows': 3}",))
    info = types.Implementation(name="bench", version="1")
    async with (
        httpx.AsyncClient(headers=server.headers, timeout=120) as http,
        streamable_http_client(server.mcp_url, http_client=http) as (read, write, *_),
        ClientSession(read, write, client_info=info) as client,
    ):
        await client.initialize()
        made = {"path": path, "code": "frame = {'rows': 3}"}
        await client.call_tool("run_code", made)  # the notebook's cell has not run
        found = {"path": path, "name": "frame"}
        read_ms = await _median_ms(lambda: client.call_tool("inspect_variable", found), calls)
        one = {"path": path, "code": "1+1"}
        run_ms = await _median_ms(lambda: client.call_tool("run_code", one), calls)
        started = time.perf_counter()
        reads = [client.call_tool("inspect_variable", found) for _ in range(CONCURRENT)]
        answers = await asyncio.gather(*reads, return_exceptions=True)
        all_ms = (time.perf_counter() - started) * 1000
    answered = sum(1 for a in answers if isinstance(a, types.CallToolResult) and not a.is_error)
    return {"read": read_ms, "run_code": run_ms, "answered": answered, "concurrent": all_ms}


def run_one(package: Path | None, calls: int) -> dict[str, float]:
    """The figures of a server whose Python finds the package at ``package`` (None: this tree)."""
    env: dict[str, str] = {}
    if package is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(package), os.environ.get("PYTHONPATH")])
        )
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "root"
        with jupyter_server(root, "--QloopMCP.policy=auto", env=env) as server:
            return asyncio.run(measure(server, calls))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--baseline", type=Path, help="a tree holding an earlier qloop_kernel")
    args = parser.parse_args()
    now = run_one(None, args.calls)
    before = run_one(args.baseline.resolve(), args.calls) if args.baseline else None
    print(f"{'':<28}{'this tree':>12}" + (f"{'baseline':>12}{'ratio':>8}" if before else ""))
    rows = [
        ("read p50 (ms)", "read"), ("run_code 1+1 p50 (ms)", "run_code"),
        (f"{CONCURRENT} concurrent: answered", "answered"), (f"{CONCURRENT} concurrent: all (ms)", "concurrent"),
    ]  # fmt: skip
    for label, key in rows:
        line = f"{label:<28}{now[key]:>12.1f}"
        if before:
            line += f"{before[key]:>12.1f}{now[key] / before[key] if before[key] else 0:>8.2f}"
        print(line)
    missed = now["read"] > READ_TARGET_MS or now["run_code"] > RUN_TARGET_MS
    missed = missed or now["answered"] < CONCURRENT
    print(f"targets: read <= {READ_TARGET_MS:g} ms, run_code <= {RUN_TARGET_MS:g} ms, "
          f"{CONCURRENT}/{CONCURRENT} answer: {'missed' if missed else 'met'}")  # fmt: skip
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
