"""Loop overhead at 10, 50 and 200 model calls: qloop's bare loop and product path, the SDK runner, pydantic-ai.

All of them drive the same scripted session through the stand-in, run as a separate process so its
work is not counted: the real system prompt, the four built-in tools' schemas with data-sized results
(a frame's summary, ``describe()``, the variable list; ``bench/cache_cost.py``), the same replies.
Every loop keeps one API client and its tools across its runs, as a kernel keeps its client and its
session's tools, and as a script keeps the tools it decorates at import (building an SDK client costs
about 20 ms of CPU, the TLS context loading the CA certificates; ``beta_tool`` on the four tools about
3.5 ms); what a run builds anew is what each loop builds for one turn:

- qloop QueryLoop: the bare loop; ``AnthropicModel`` takes the process's kept client, the kept tools
  go into a new ``ToolRuntime``;
- qloop product path: ``ConversationManager.run_turn`` (records built as the turn runs, running saves)
  with ``ThreadedModel`` (the worker thread), the turn display and the store's mirror and comm, inside
  an IPython shell (outputs captured); a new manager, settings, display, store and ``ToolRuntime``
  each run (as a kernel's turn builds them), the kept client and tools;
- SDK tool_runner (``thread=False``: the whole conversation each request, as qloop sends it) on one
  ``anthropic.Anthropic`` client built once, its tools (``beta_tool``) built once: the headline
  reference;
- pydantic-ai ``Agent.run_sync`` with the same tools, one ``AnthropicProvider`` (its client) and one
  agent kept;
- beside them, the SDK runner with a new client each run, as a script that runs one turn builds it
  (a side figure: it counts the client's construction in every run).

Runs alternate (25 at 10 calls, 9 at 50 and 200): each round runs every loop once, one after the
other. The client CPU time per model call (``time.process_time``, the worker thread included) is
shown as the median of the runs; each ratio is the median over the rounds of that round's ratio to
the SDK runner with its client kept. Target: the product path <= 1.0x that runner at each size (the
bare loop and pydantic-ai are shown beside it).
Run: ``python bench/loop_overhead.py [--runs 3]``. ``--parts 10 --runs 25`` instead runs the product
path at 10 calls without each of its parts in turn (the worker thread, the turn display, the store's
saves), beside the bare loop and the runner, in paired rounds. ``--profile 50`` profiles the product path
and the runner at 50 calls: the CPU per model call of each thread (the worker thread's model calls
apart) and, from cProfile on per-thread CPU clocks, the self time per model call by package and the
functions with the most cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
    """The stand-in as its own process, named by the environment the clients read; yields its
    base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "qloop_kernel.testing", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        os.environ.update(
            ANTHROPIC_BASE_URL=base_url, ANTHROPIC_API_KEY="bench", NO_PROXY="127.0.0.1"
        )
        yield base_url
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


def warm_up(base_url: str, loops: Iterable[Callable[[int], None]]) -> None:
    """Imports, connections, the kept clients and tools: a short run of each loop."""
    for run in loops:
        load(base_url, 3)
        run(3)


def rounds(
    base_url: str, loops: dict[str, Callable[[int], None]], calls: int, runs: int
) -> dict[str, list[float]]:
    """The CPU seconds of ``runs`` rounds at ``calls`` calls, by loop: each round runs every loop
    once, one after the other (see :func:`paired_ratio`)."""
    cpu: dict[str, list[float]] = {name: [] for name in loops}
    for _ in range(runs):
        for name, run in loops.items():
            load(base_url, calls)
            cpu[name].append(cpu_of(lambda: run(calls)))  # noqa: B023
    return cpu


def runtime() -> ToolRuntime:
    tools = kept(
        "qloop tools", lambda: [Tool.from_function(f, requires_approval=False) for f in TOOLS]
    )
    return ToolRuntime.of(tools, AutoApprover())


def bare(calls: int) -> None:
    loop = QueryLoop(AnthropicModel(MODEL), runtime(), system=SYSTEM_PROMPT,
                     limits=Limits(max_turns=calls))  # fmt: skip
    result = loop.run(USER)
    assert result.status == "completed" and result.model_calls == calls, result.stop


def product(calls: int, *, thread: bool = True, display: bool = True, store: bool = True) -> None:
    """The product path; ``--parts`` leaves out the worker thread, the display or the store."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    from qloop_kernel.notebook.display import TurnDisplay
    from qloop_kernel.notebook.store import NotebookStore
    from qloop_kernel.notebook.threaded import ThreadedModel

    settings = Settings(model=MODEL, max_turns=calls)
    manager = ConversationManager(settings=settings)
    InteractiveShell.instance()  # display() publishes through the shell, as in a kernel
    with capture_output(display=True):
        view = (TurnDisplay(interactive=False, max_turns=calls, cancel=None, cards_for=set())  # type: ignore[arg-type]
                if display else None)  # fmt: skip
        model = AnthropicModel(MODEL)
        result, _ = manager.run_turn(
            PROMPT, model=ThreadedModel(model) if thread else model, runtime=runtime(),
            settings=settings, cell_id="bench", observer=view,
            store=NotebookStore("bench") if store else None,
        )  # fmt: skip
        if view is not None:
            view.finish(result)
    assert result.status == "completed" and result.model_calls == calls, result.stop


def sdk_new_client(calls: int) -> None:
    sdk(calls, anthropic.Anthropic(max_retries=0))


def sdk(calls: int, client: anthropic.Anthropic | None = None) -> None:
    client = client or kept("anthropic", lambda: anthropic.Anthropic(max_retries=0))
    runner = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=8192, system=SYSTEM_PROMPT, messages=USER, stream=True,
        tools=kept("SDK tools", lambda: [anthropic.beta_tool(f) for f in TOOLS]),
        max_iterations=calls, thread=False,
    )  # fmt: skip
    turns = 0
    for stream in runner:
        turns += 1
        for _ in stream:
            pass
    assert turns == calls, turns


_kept: dict[str, Any] = {}


def kept(name: str, build: Callable[[], Any]) -> Any:
    """One client (and one set of tools) per loop for every run: built in the warm-up, once the
    environment names the stand-in."""
    if name not in _kept:
        _kept[name] = build()
    return _kept[name]


def pydantic_ai(calls: int) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.anthropic import AnthropicModel as PaiModel
    from pydantic_ai.providers.anthropic import AnthropicProvider
    from pydantic_ai.usage import UsageLimits

    def build() -> Agent[None, str]:
        provider = AnthropicProvider(api_key="bench", base_url=os.environ["ANTHROPIC_BASE_URL"])
        return Agent(PaiModel(MODEL, provider=provider), instructions=SYSTEM_PROMPT,
                     tools=list(TOOLS), model_settings={"max_tokens": 8192})  # fmt: skip

    agent = kept("pydantic-ai", build)
    result = agent.run_sync(PROMPT, usage_limits=UsageLimits(request_limit=calls + 1))
    assert result.usage.requests == calls, result.usage


REFERENCE = "SDK tool_runner"
LOOPS: dict[str, Callable[[int], None]] = {
    "qloop QueryLoop": bare,
    "qloop product path": product,
    REFERENCE: sdk,
    "pydantic-ai Agent": pydantic_ai,
    "SDK runner, new client each run": sdk_new_client,
}


PARTS: dict[str, Callable[[int], None]] = {
    "product path": product,
    "  without the worker thread": lambda calls: product(calls, thread=False),
    "  without the turn display": lambda calls: product(calls, display=False),
    "  without the store's saves": lambda calls: product(calls, store=False),
    "bare QueryLoop": bare,
    REFERENCE: sdk,
}


def parts(calls: int, runs: int) -> None:
    """Paired rounds of the product path with each of its parts left out in turn, and the bare
    loop: what each part costs, as a ratio to the SDK runner (client and tools kept)."""
    with stand_in() as base_url:
        warm_up(base_url, PARTS.values())
        cpu = rounds(base_url, PARTS, calls, runs)
    print(f"at {calls} calls, {runs} rounds: CPU ms per model call, ratio to the runner")
    for name in PARTS:
        print(f"{name:<32}{statistics.median(cpu[name]) / calls * 1000:>8.2f}"
              f"{paired_ratio(cpu[name], cpu[REFERENCE]):>8.3f}")  # fmt: skip


class Profiled:
    """cProfile on per-thread CPU clocks: the calling thread, and the product path's model calls
    on its worker thread (each call's job is wrapped: the worker is kept between turns)."""

    def __init__(self) -> None:
        from qloop_kernel.notebook import threaded

        self.main = cProfile.Profile(time.thread_time)
        self.worker = cProfile.Profile(time.thread_time)
        self.cpu = {"main": 0.0, "model worker": 0.0}
        submit = threaded._workers.submit  # the one place the worker's jobs pass

        def profiled_submit(job: Callable[[], None]) -> None:
            def profiled() -> None:
                started = time.thread_time()
                self.worker.enable()
                try:
                    job()
                finally:
                    self.worker.disable()
                    self.cpu["model worker"] += time.thread_time() - started

            submit(profiled)

        threaded._workers.submit = profiled_submit  # type: ignore[method-assign]
        self.restore = lambda: setattr(threaded._workers, "submit", submit)

    def run(self, loop: Callable[[int], None], calls: int) -> None:
        started = time.thread_time()
        self.main.enable()
        try:
            loop(calls)
        finally:
            self.main.disable()
            self.cpu["main"] += time.thread_time() - started

    def report(self, title: str, calls: int, top: int) -> None:
        print(f"\n== {title}: CPU ms per model call by thread: " + ", ".join(
            f"{name} {seconds / calls * 1000:.2f}" for name, seconds in self.cpu.items()))  # fmt: skip
        stats = [s for s in (self.main, self.worker) if s.getstats()]
        merged = pstats.Stats(*stats)
        by_package: dict[str, float] = {}
        for (path, _, _), (_, _, tottime, _, _) in merged.stats.items():  # type: ignore[attr-defined]
            by_package[package_of(path)] = by_package.get(package_of(path), 0.0) + tottime
        print("self CPU ms per model call by package (both threads):")
        for name, seconds in sorted(by_package.items(), key=lambda item: -item[1])[:14]:
            print(f"  {name:<44}{seconds / calls * 1000:>8.3f}")
        print(f"top {top} functions by cumulative CPU per model call (both threads):")
        rows = sorted(merged.stats.items(), key=lambda item: -item[1][3])  # type: ignore[attr-defined]
        for (path, line, name), (_, ncalls, tottime, cumtime, _) in rows[:top]:
            where = f"{package_of(path)}:{Path(path).name}:{line}({name})"
            print(f"  {where[:84]:<84}{cumtime / calls * 1000:>8.3f}{tottime / calls * 1000:>8.3f}"
                  f"{ncalls / calls:>8.1f}/call")  # fmt: skip


def package_of(path: str) -> str:
    """``qloop_kernel/records``, ``anthropic``, ``httpx``, ``stdlib``: where a function lives."""
    parts = Path(path).parts
    for anchor in ("qloop_kernel", "site-packages"):
        if anchor in parts:
            rest = parts[parts.index(anchor) + 1 :]
            if anchor == "qloop_kernel":
                return "/".join(("qloop_kernel", *rest[:-1][:1])) if rest[:-1] else "qloop_kernel"
            return rest[0] if rest else anchor
    if Path(path).parent == Path(__file__).parent:
        return "bench"
    return "builtins" if path == "~" else "stdlib"


# What the product path does beyond the loop, timed on the thread that runs it (inclusive times:
# a phase inside another is counted in both).
PHASES = [
    ("bench.loop_overhead", "runtime", "the turn's ToolRuntime (tools kept)"),
    ("qloop_kernel.conversation", "ConversationManager.__init__", "manager"),
    ("qloop_kernel.conversation", "estimate_request", "request estimate"),
    ("qloop_kernel.records.build", "RecordBuilder.__init__", "record: started"),
    ("qloop_kernel.records.build", "RecordBuilder.add", "record: a tool call added"),
    ("qloop_kernel.records.build", "RecordBuilder.running", "record: running built"),
    ("qloop_kernel.records.build", "RecordBuilder.finished", "record: finished and sealed"),
    ("qloop_kernel.notebook.store", "NotebookStore.save", "store: save (mirror, comm)"),
    ("qloop_kernel.notebook.display", "TurnDisplay.__init__", "display: set up"),
    ("qloop_kernel.notebook.display", "TurnDisplay.on_event", "display: streamed events"),
    ("qloop_kernel.notebook.display", "TurnDisplay.on_response", "display: responses"),
    ("qloop_kernel.notebook.display", "TurnDisplay.on_tool_start", "display: tool lines"),
    ("qloop_kernel.notebook.display", "TurnDisplay.on_tool_end", "display: tool lines (end)"),
    ("qloop_kernel.notebook.display", "TurnDisplay.finish", "display: finish"),
    ("qloop_kernel.tools.runtime", "ToolRuntime.run", "tools: validate, approve, run, format"),
    ("qloop_kernel.notebook.threaded", "ThreadedModel.complete", "model call, main thread side"),
    ("qloop_kernel.model", "AnthropicModel.complete", "model call (worker thread)"),
    ("qloop_kernel.model", "build_params", "request params built"),
]


def timed_phases() -> dict[str, list[float]]:
    """Wrap each phase in a per-thread CPU timer; the seconds spent and the calls, by phase."""
    import importlib

    spent: dict[str, list[float]] = {}
    for module_name, qualname, label in PHASES:
        spent[label] = [0.0, 0]
        if module_name == "bench.loop_overhead":  # this script (IPython replaces __main__)
            globals()[qualname] = _timer(globals()[qualname], spent[label])
            continue
        owner_name, _, name = qualname.rpartition(".")
        owner = importlib.import_module(module_name)
        owner = getattr(owner, owner_name) if owner_name else owner
        setattr(owner, name, _timer(getattr(owner, name), spent[label]))
    return spent


def _timer(function: Callable[..., Any], spent: list[float]) -> Callable[..., Any]:
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            spent[0] += time.thread_time() - started  # one phase runs on one thread at a time
            spent[1] += 1

    return timed


def phases(base_url: str, calls: int, runs: int) -> None:
    """CPU per model call of each phase of the product path (no profiler: the clocks only)."""
    spent = timed_phases()
    cpu = {"qloop product path": 0.0, REFERENCE + ", client kept": 0.0}
    collected = {name: [0.0, 0.0] for name in cpu}  # garbage collection: seconds, start
    current = [""]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            collected[current[0]][1] = time.thread_time()
        else:
            collected[current[0]][0] += time.thread_time() - collected[current[0]][1]

    gc.callbacks.append(on_gc)
    for _ in range(runs):
        for name, loop in (("qloop product path", product), (REFERENCE + ", client kept", sdk)):
            load(base_url, calls)
            current[0] = name
            cpu[name] += cpu_of(lambda: loop(calls))  # noqa: B023
    gc.callbacks.remove(on_gc)
    total = calls * runs
    print(f"\nprocess CPU ms per model call at {calls} calls, over {runs} runs (of which garbage "
          "collection): " + ", ".join(f"{name} {seconds / total * 1000:.2f} "
          f"({collected[name][0] / total * 1000:.2f})" for name, seconds in cpu.items()))  # fmt: skip
    print("product path phases: thread CPU ms per model call (inclusive), calls per model call")
    for label, (seconds, count) in sorted(spent.items(), key=lambda item: -item[1][0]):
        print(f"  {label:<42}{seconds / total * 1000:>8.3f}{count / total:>8.2f}")


def profile(calls: int, runs: int) -> None:
    """Per-thread CPU and cProfile of the product path and the runner at ``calls`` calls, then
    the product path's phases timed without the profiler."""
    with stand_in() as base_url:
        warm_up(base_url, (product, sdk))
        for title, loop in (("qloop product path", product), (REFERENCE + ", client kept", sdk)):
            profiled = Profiled()
            for _ in range(runs):
                load(base_url, calls)
                profiled.run(loop, calls)
            profiled.restore()
            profiled.report(title, calls * runs, top=40)
        phases(base_url, calls, runs)


def paired_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the rounds' ratios: a round's runs are next to each other in time, so a
    burst of other work on the machine weighs on both sides of a ratio."""
    return statistics.median(a / b for a, b in zip(ours, theirs, strict=True))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs of each loop at each size")
    parser.add_argument("--profile", type=int, metavar="CALLS", help="profile at CALLS calls")
    parser.add_argument("--parts", type=int, metavar="CALLS",
                        help="the product path without each of its parts, at CALLS calls")  # fmt: skip
    args = parser.parse_args(argv)
    if args.parts:
        parts(args.parts, args.runs)
        return 0
    if args.profile:
        profile(args.profile, args.runs)
        return 0
    cpu: dict[tuple[str, int], list[float]] = {}
    with stand_in() as base_url:
        warm_up(base_url, LOOPS.values())
        for calls in SIZES:
            runs = max(args.runs, 250 // calls)  # short runs: more of them
            for name, samples in rounds(base_url, LOOPS, calls, runs).items():
                cpu[name, calls] = samples
    print(f"{'client CPU ms per model call':<33}" + "".join(f"{n:>10}" for n in SIZES))
    per_call = {k: statistics.median(v) / k[1] * 1000 for k, v in cpu.items()}
    for name in LOOPS:
        print(f"{name:<33}" + "".join(f"{per_call[name, n]:>10.2f}" for n in SIZES))
    met = True
    for calls in SIZES:
        ratios = {name: paired_ratio(cpu[name, calls], cpu[REFERENCE, calls]) for name in LOOPS}
        met = met and ratios["qloop product path"] <= TARGET
        new_client = cpu["SDK runner, new client each run", calls]
        print(f"ratio to the SDK runner (client and tools kept) at {calls} calls: product path "
              f"{ratios['qloop product path']:.2f} (target <= {TARGET}), bare loop "
              f"{ratios['qloop QueryLoop']:.2f}, pydantic-ai {ratios['pydantic-ai Agent']:.2f}; "
              f"to the runner with a new client each run: product path "
              f"{paired_ratio(cpu['qloop product path', calls], new_client):.2f}")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
