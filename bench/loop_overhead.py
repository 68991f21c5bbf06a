"""Loop overhead at 10, 50 and 200 model calls: qloop's bare loop and product path, the SDK runner, pydantic-ai.

All four drive the same scripted session through the stand-in, run as a separate process so its work is
not counted: the real system prompt, the four built-in tools' schemas with data-sized results (a frame's
summary, ``describe()``, the variable list; ``bench/cache_cost.py``), the same replies. The runs:

- qloop QueryLoop: the bare loop with the Anthropic client;
- qloop product path: ``ConversationManager.run_turn`` (records built as the turn runs, running saves)
  with ``ThreadedModel`` (the worker thread), the turn display and the store's mirror and comm, inside
  an IPython shell (outputs captured);
- SDK tool_runner (``thread=False``: the whole conversation each request, as qloop sends it), with a
  new client each run, as a script that runs one turn builds it;
- the same runner with one client kept for every run: qloop keeps one SDK client per kernel, so this
  is the runner's cost without the client's construction (about 20 ms: the TLS context);
- pydantic-ai ``Agent.run_sync`` with the same tools.

Runs alternate (25 at 10 calls, 5 at 50 and 200); the figure is the client CPU time per model call
(``time.process_time``, the worker thread included), median of the runs, as a ratio to the SDK runner. Targets: the product path <= 1.0x
the SDK runner at each size (the bare loop is shown beside it, and both against the runner with its
client kept).
Run: ``python bench/loop_overhead.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import anthropic  # noqa: E402

from bench.cache_cost import PROMPT, STEPS, TOOLS  # noqa: E402
from qloop_kernel.conversation import SYSTEM_PROMPT, ConversationManager  # noqa: E402
from qloop_kernel.loop import Limits, QueryLoop  # noqa: E402
from qloop_kernel.model import AnthropicModel  # noqa: E402
from qloop_kernel.policy.permissions import AutoApprover  # noqa: E402
from qloop_kernel.settings import Settings  # noqa: E402
from qloop_kernel.testing import Reply, items_to_json, text, tool_use  # noqa: E402
from qloop_kernel.tools.runtime import Tool, ToolRuntime  # noqa: E402

SIZES = (10, 50, 200)
MODEL = "claude-sonnet-4-6"
TARGET = 1.0
USER = [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}]


def script(calls: int) -> list[Reply]:
    replies = [
        Reply([text(f"Step {i + 1}."), tool_use(*STEPS[i % len(STEPS)])]) for i in range(calls - 1)
    ]
    return [*replies, Reply([text("## Sales profile\n\nAll columns are clean.")])]


@contextmanager
def stand_in() -> Iterator[str]:
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


def load(base_url: str, calls: int) -> None:
    body = json.dumps(items_to_json(script(calls))).encode()
    for path in ("/_qloop/reset", "/_qloop/script"):
        request = urllib.request.Request(base_url + path, data=body, method="POST")
        urllib.request.urlopen(request, timeout=10).read()


def cpu_of(run: Callable[[], None]) -> float:
    cpu = time.process_time()
    run()
    return time.process_time() - cpu


def runtime() -> ToolRuntime:
    return ToolRuntime.of([Tool.from_function(f, requires_approval=False) for f in TOOLS],
                          AutoApprover())  # fmt: skip


def bare(calls: int) -> None:
    loop = QueryLoop(AnthropicModel(MODEL), runtime(), system=SYSTEM_PROMPT,
                     limits=Limits(max_turns=calls))  # fmt: skip
    result = loop.run(USER)
    assert result.status == "completed" and result.model_calls == calls, result.stop


def product(calls: int) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from qloop_kernel.notebook.display import TurnDisplay
    from qloop_kernel.notebook.store import NotebookStore
    from qloop_kernel.notebook.threaded import ThreadedModel

    settings = Settings(model=MODEL, max_turns=calls)
    manager = ConversationManager(settings=settings)
    InteractiveShell.instance()  # display() publishes through the shell, as in a kernel
    with capture_output(display=True):
        view = TurnDisplay(interactive=False, max_turns=calls, cancel=None, cards_for=set())  # type: ignore[arg-type]
        result, _ = manager.run_turn(
            PROMPT, model=ThreadedModel(AnthropicModel(MODEL)), runtime=runtime(),
            settings=settings, cell_id="bench", observer=view, store=NotebookStore("bench"),
        )  # fmt: skip
        view.finish(result)
    assert result.status == "completed" and result.model_calls == calls, result.stop


def sdk(calls: int, client: anthropic.Anthropic | None = None) -> None:
    client = client or anthropic.Anthropic(max_retries=0)
    runner = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=8192, system=SYSTEM_PROMPT, messages=USER, stream=True,
        tools=[anthropic.beta_tool(f) for f in TOOLS], max_iterations=calls, thread=False,
    )  # fmt: skip
    turns = 0
    for stream in runner:
        turns += 1
        for _ in stream:
            pass
    assert turns == calls, turns


_kept: list[anthropic.Anthropic] = []


def sdk_client_kept(calls: int) -> None:
    if not _kept:  # built in the warm-up run, once the environment names the stand-in
        _kept.append(anthropic.Anthropic(max_retries=0))
    sdk(calls, _kept[0])


def pydantic_ai(calls: int) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel as PaiModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.usage import UsageLimits

    provider = AnthropicProvider(api_key="bench", base_url=os.environ["ANTHROPIC_BASE_URL"])
    agent = Agent(PaiModel(MODEL, provider=provider), instructions=SYSTEM_PROMPT, tools=list(TOOLS),
                  model_settings={"max_tokens": 8192})  # fmt: skip
    result = agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=calls + 1))
    assert result.usage.requests == calls, result.usage


LOOPS: dict[str, Callable[[int], None]] = {
    "qloop QueryLoop": bare,
    "qloop product path": product,
    "SDK tool_runner": sdk,
    "SDK runner, client kept": sdk_client_kept,
    "pydantic-ai Agent": pydantic_ai,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each loop at each size")
    args = parser.parse_args(argv)
    cpu: dict[tuple[str, int], list[float]] = {}
    with stand_in() as base_url:
        os.environ.update(
            ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="bench", NO_PROXY="127.0.0.1"
        )
        for run in LOOPS.values():  # warm-up: imports, connections
            load(base_url, 3), run(3)
        for calls in SIZES:
            for _ in range(max(args.runs, 250 // calls)):  # short runs: more of them
                for name, run in LOOPS.items():
                    load(base_url, calls)
                    cpu.setdefault((name, calls), []).append(cpu_of(lambda: run(calls)))  # noqa: B023
    print(f"{'client CPU ms per model call':<30}" + "".join(f"{n:>10}" for n in SIZES))
    per_call = {k: statistics.median(v) / k[1] * 1000 for k, v in cpu.items()}
    for name in LOOPS:
        print(f"{name:<30}" + "".join(f"{per_call[name, n]:>10.2f}" for n in SIZES))
    met = True
    for calls in SIZES:
        sdk_ms = per_call["SDK tool_runner", calls]
        ratios = {name: per_call[name, calls] / sdk_ms for name in LOOPS}
        met = met and ratios["qloop product path"] <= TARGET
        kept = {name: per_call[name, calls] / per_call["SDK runner, client kept", calls]
                for name in LOOPS}  # fmt: skip
        print(f"ratio to the SDK runner at {calls} calls: product path "
              f"{ratios['qloop product path']:.2f} (target <= {TARGET}), bare loop "
              f"{ratios['qloop QueryLoop']:.2f}, pydantic-ai {ratios['pydantic-ai Agent']:.2f}; "
              f"to the runner with its client kept: product path "
              f"{kept['qloop product path']:.2f}, bare loop {kept['qloop QueryLoop']:.2f}")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
