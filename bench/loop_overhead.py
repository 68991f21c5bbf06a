"""Loop overhead: a 50-turn tool session through the stand-in, qloop's QueryLoop vs the SDK's tool runner.

Both drive the real SDK (streaming) against the same loopback stand-in, run as a separate process so its
work is not counted, with the same tool and the same scripted replies; runs alternate, and the median of 5
each is compared. The SDK runner is run with ``thread=False``: by default it uses the beta "message
threads" feature and sends only the newest message, a different workload. The headline is the client
CPU time (the loop's own overhead: request building, streaming, tool dispatch); wall time is shown too.
Target: ratio qloop / SDK <= 1.0.
Run: ``python bench/loop_overhead.py``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import anthropic

from qloop_kernel.loop import Limits, QueryLoop
from qloop_kernel.model import AnthropicModel
from qloop_kernel.permissions import AutoApprover
from qloop_kernel.testing import Reply, items_to_json, text, tool_use
from qloop_kernel.tools.runtime import Tool, ToolRuntime

TURNS = 50
RUNS = 5
MODEL = "claude-sonnet-4-6"
PROMPT = [{"role": "user", "content": [{"type": "text", "text": "Add up the numbers."}]}]


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def script() -> list[Reply]:
    calls = [Reply([tool_use("add", {"a": i, "b": i + 1})]) for i in range(TURNS - 1)]
    return [*calls, Reply([text("All added.")])]


@contextmanager
def stand_in() -> object:
    """The stand-in as its own process; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "qloop_kernel.testing", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def load(base_url: str) -> None:
    body = json.dumps(items_to_json(script())).encode()
    for path in ("/_qloop/reset", "/_qloop/script"):
        request = urllib.request.Request(base_url + path, data=body, method="POST")
        urllib.request.urlopen(request, timeout=10).read()


def measure(run: object) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()  # type: ignore[operator]
    return time.perf_counter() - wall, time.process_time() - cpu


def run_qloop(base_url: str) -> tuple[float, float]:
    load(base_url)
    runtime = ToolRuntime.of([Tool.from_function(add, requires_approval=False)], AutoApprover())
    model = AnthropicModel(MODEL)
    loop = QueryLoop(model, runtime, system="bench", limits=Limits(max_turns=TURNS))

    def run() -> None:
        result = loop.run(PROMPT)
        assert result.status == "completed" and result.model_calls == TURNS, result.stop

    return measure(run)


def run_sdk(base_url: str) -> tuple[float, float]:
    load(base_url)
    client = anthropic.Anthropic(max_retries=0)

    def run() -> None:
        runner = client.beta.messages.tool_runner(
            model=MODEL, max_tokens=8192, system="bench", messages=PROMPT,
            tools=[anthropic.beta_tool(add)], stream=True, max_iterations=TURNS,
            thread=False,  # send the whole conversation each turn, as qloop does
        )  # fmt: skip
        turns = 0
        for stream in runner:
            turns += 1
            for _ in stream:
                pass
        assert turns == TURNS, turns

    return measure(run)


def main() -> int:
    with stand_in() as base_url:
        os.environ.update(
            ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="bench", NO_PROXY="127.0.0.1"
        )
        run_qloop(base_url), run_sdk(base_url)  # warm-up: imports, connections
        ours, theirs = [], []
        for _ in range(RUNS):
            ours.append(run_qloop(base_url))
            theirs.append(run_sdk(base_url))
    wall = [statistics.median(t[0] for t in runs) for runs in (ours, theirs)]
    cpu = [statistics.median(t[1] for t in runs) for runs in (ours, theirs)]
    print(f"{'loop':<18}{'wall s':>9}{'cpu s':>9}{'cpu/turn ms':>13}")
    for name, w, c in zip(("qloop QueryLoop", "SDK tool_runner"), wall, cpu, strict=True):
        print(f"{name:<18}{w:>9.3f}{c:>9.3f}{c / TURNS * 1000:>13.2f}")
    ratio = cpu[0] / cpu[1]
    print(f"ratio qloop/SDK: cpu {ratio:.3f} (target <= 1.0), wall {wall[0] / wall[1]:.3f}")
    return 0 if ratio <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
