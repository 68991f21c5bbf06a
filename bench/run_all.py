"""Run every benchmark in bench/ and write the table of docs/benchmarks.md.

Each ``bench/*.py`` runs as its own process, one after the other (they measure time and CPU, so they must
not share the machine). Their printed figures and exit codes are collected into one table (benchmark,
command, figure, target, met?); the "Notes" section of the document is kept as it is. A benchmark this
script has no reader for still gets a row: its last printed line and its exit status.

Run: ``python bench/run_all.py`` (``--only NAME`` to run some and print the table without writing).
Exits 1 if a benchmark fails or misses its target.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import os
import platform
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DOC = ROOT / "docs" / "benchmarks.md"
NOTES = "## Notes"
NUMBER = r"[\d,]*\.?\d+(?:e[+-]?\d+)?"


@dataclass(frozen=True)
class Figure:
    """How to read one row of the table from a benchmark's output."""

    script: str
    label: str
    patterns: tuple[str, ...]  # all must match stdout; their named groups are the values
    figure: Callable[[dict[str, float]], str]
    target: str
    met: Callable[[dict[str, float]], bool] | None  # None: a figure without a target


@dataclass(frozen=True)
class Run:
    script: str
    status: int | None  # None: timed out
    stdout: str
    stderr: str
    seconds: float


@dataclass(frozen=True)
class Row:
    label: str
    command: str
    figure: str
    target: str
    met: str


FIGURES = [
    Figure(
        "loop_overhead.py",
        "client CPU per model call, 10 calls, data-sized tool results and the real system prompt: "
        "qloop's product path (ConversationManager, records, ThreadedModel, display, store) / the "
        "SDK's tool runner, each keeping one client and its tools across runs (beside it, the runner with a new "
        "client each run), median of the paired ratios of 25 runs at 10 calls, 9 above",
        (rf"ratio to the SDK runner \(client and tools kept\) at 10 calls: product path (?P<ratio>{NUMBER}) "
         rf"\(target <= (?P<target>{NUMBER})\), bare loop (?P<bare>{NUMBER}), pydantic-ai "
         rf"(?P<pai>{NUMBER}); to the runner with a new client each run: product path "
         rf"(?P<new_client>{NUMBER})",),
        lambda v: f"product path {v['ratio']:.2f}; bare QueryLoop {v['bare']:.2f}; pydantic-ai "
        f"{v['pai']:.2f} (runner with a new client each run: product path {v['new_client']:.2f})",
        "≤ 1.0",
        lambda v: v["ratio"] <= v["target"],
    ),
    Figure(
        "loop_overhead.py",
        "client CPU per model call, 50 calls, data-sized tool results and the real system prompt: "
        "qloop's product path (ConversationManager, records, ThreadedModel, display, store) / the "
        "SDK's tool runner, each keeping one client and its tools across runs (beside it, the runner with a new "
        "client each run), median of the paired ratios of 25 runs at 10 calls, 9 above",
        (rf"ratio to the SDK runner \(client and tools kept\) at 50 calls: product path (?P<ratio>{NUMBER}) "
         rf"\(target <= (?P<target>{NUMBER})\), bare loop (?P<bare>{NUMBER}), pydantic-ai "
         rf"(?P<pai>{NUMBER}); to the runner with a new client each run: product path "
         rf"(?P<new_client>{NUMBER})",),
        lambda v: f"product path {v['ratio']:.2f}; bare QueryLoop {v['bare']:.2f}; pydantic-ai "
        f"{v['pai']:.2f} (runner with a new client each run: product path {v['new_client']:.2f})",
        "≤ 1.0",
        lambda v: v["ratio"] <= v["target"],
    ),
    Figure(
        "loop_overhead.py",
        "client CPU per model call, 200 calls, data-sized tool results and the real system prompt: "
        "qloop's product path (ConversationManager, records, ThreadedModel, display, store) / the "
        "SDK's tool runner, each keeping one client and its tools across runs (beside it, the runner with a new "
        "client each run), median of the paired ratios of 25 runs at 10 calls, 9 above",
        (rf"ratio to the SDK runner \(client and tools kept\) at 200 calls: product path (?P<ratio>{NUMBER}) "
         rf"\(target <= (?P<target>{NUMBER})\), bare loop (?P<bare>{NUMBER}), pydantic-ai "
         rf"(?P<pai>{NUMBER}); to the runner with a new client each run: product path "
         rf"(?P<new_client>{NUMBER})",),
        lambda v: f"product path {v['ratio']:.2f}; bare QueryLoop {v['bare']:.2f}; pydantic-ai "
        f"{v['pai']:.2f} (runner with a new client each run: product path {v['new_client']:.2f})",
        "≤ 1.0",
        lambda v: v["ratio"] <= v["target"],
    ),
    Figure(
        "agent_cell.py",
        "IOPub bytes of a 200-call `%%agent` cell through a real kernel (mirror, comm, display), "
        "whole messages as sent (every frame), against its final record",
        (rf"IOPub bytes of the 200-call cell: (?P<mb>{NUMBER}) MB, final record (?P<rec>{NUMBER}) "
         rf"MB \(target <= (?P<limit>{NUMBER}) MB\)",),
        lambda v: f"{v['mb']:.2f} MB for a {v['rec']:.2f} MB record",
        "≤ 2 × record + 1 MB",
        lambda v: v["mb"] <= v["limit"],
    ),
    Figure(
        "agent_cell.py",
        "kernel CPU per model call of the whole `%%agent` cell (display, approval and risk checks, "
        "fingerprints, records) / a kernel cell driving the SDK runner with the same tools",
        (rf"kernel CPU ratio qloop/SDK at 10 calls: (?P<r10>{NUMBER})",
         rf"kernel CPU ratio qloop/SDK at 50 calls: (?P<r50>{NUMBER})",
         rf"kernel CPU ratio qloop/SDK at 200 calls: (?P<r200>{NUMBER})"),
        lambda v: f"{v['r10']:.2f} at 10 calls, {v['r50']:.2f} at 50, {v['r200']:.2f} at 200",
        "—",
        None,
    ),
    Figure(
        "first_cell.py",
        "first `%%agent` cell: kernel CPU from the cell's start to its first request, median of 5 "
        "kernels",
        (rf"first agent cell: (?P<ms>{NUMBER}) ms of kernel CPU before its first request \(target "
         rf"<= (?P<target>{NUMBER}) ms\); without the warm-up (?P<cold>{NUMBER}) ms",),
        lambda v: f"{v['ms']:.0f} ms after the import warm-up ({v['cold']:,.0f} ms without it)",
        "≤ 150 ms",
        lambda v: v["ms"] <= v["target"],
    ),
    Figure(
        "cache_cost.py",
        "effective input cost of a 50-call session, claude-sonnet-5-5: input + 1.25 × writes + 0.1 × "
        "reads, in input tokens (beside it, over all input sent), qloop vs pydantic-ai with its "
        "Anthropic cache settings",
        (rf"effective input cost, claude-sonnet-5-5: qloop (?P<ours>{NUMBER}) tokens \((?P<our_share>"
         rf"{NUMBER}) of its (?P<our_all>{NUMBER}) input tokens\), pydantic-ai (?P<theirs>{NUMBER}) "
         rf"\((?P<their_share>{NUMBER}) of (?P<their_all>{NUMBER})\)",),
        lambda v: (f"qloop {v['ours']:,.0f} ({v['our_share']:.4f} of {v['our_all']:,.0f}), "
                   f"pydantic-ai {v['theirs']:,.0f} ({v['their_share']:.4f} of {v['their_all']:,.0f})"),
        "qloop ≤ pydantic-ai",
        lambda v: v["ours"] <= v["theirs"],
    ),
    Figure(
        "cache_cost.py",
        "effective input cost of a 50-call session, claude-haiku-5-5: input + 1.25 × writes + 0.1 × "
        "reads, in input tokens (beside it, over all input sent), qloop vs pydantic-ai with its "
        "Anthropic cache settings",
        (rf"effective input cost, claude-haiku-5-5: qloop (?P<ours>{NUMBER}) tokens \((?P<our_share>"
         rf"{NUMBER}) of its (?P<our_all>{NUMBER}) input tokens\), pydantic-ai (?P<theirs>{NUMBER}) "
         rf"\((?P<their_share>{NUMBER}) of (?P<their_all>{NUMBER})\)",),
        lambda v: (f"qloop {v['ours']:,.0f} ({v['our_share']:.4f} of {v['our_all']:,.0f}), "
                   f"pydantic-ai {v['theirs']:,.0f} ({v['their_share']:.4f} of {v['their_all']:,.0f})"),
        "qloop ≤ pydantic-ai",
        lambda v: v["ours"] <= v["theirs"],
    ),
    Figure(
        "cache_ratio.py",
        "cache reads of a 10-turn session, turns 2–10: requests reading less than the most any "
        "breakpoint placement could (a prefix shared with an earlier request that reaches the "
        "model's minimum); beside it, the share of input tokens read",
        (rf"share of input tokens, turns 2-(?P<turns>\d+): (?P<share>{NUMBER})%; turns "
         rf"3-\d+: (?P<later>{NUMBER})%",
         rf"(?m)^\s*10\s+\d+\s+\d+\s+\d+\s+(?P<last>{NUMBER})%",
         rf"the most any breakpoints could read, turns 2-\d+: (?P<ceiling>{NUMBER})%",
         r"requests reading less than they could: (?P<short>\d+)"),
        lambda v: f"{v['short']:.0f} of 9; share read {v['share']:.1f} % of "
        f"{v['ceiling']:.1f} % readable (turns 3–10: {v['later']:.1f} %, turn 10: "
        f"{v['last']:.1f} %)",
        "0 (every request reads all it could)",
        lambda v: v["short"] == 0,
    ),
    Figure(
        "inspect_variable.py",
        "`inspect_variable` on 1,000,000 × 50 DataFrames (mixed columns with Arrow, Python-backed "
        "or object-dtype `str` strings; 50 object-dtype string columns): the slowest median of 5",
        (rf"inspect_variable median time\s+(?P<ms>{NUMBER}) ms\s+target <= (?P<max_ms>{NUMBER}) ms",
         rf"inspect_variable output\s+(?P<chars>{NUMBER}) chars\s+target <= (?P<max_chars>{NUMBER})",
         rf"repr\(df\).*?chars\s+(?P<repr>{NUMBER})x",
         rf"to_string\(\).*?chars\s+(?P<to_string>{NUMBER})x"),
        lambda v: f"{v['ms']:.1f} ms, {v['chars']:,.0f} characters ({v['repr']:.1f}× pandas' "
        f"truncated repr; {v['to_string']:.0e}× `to_string()`)",
        "≤ 50 ms CPU, ≤ 8,000 chars",
        lambda v: v["ms"] <= v["max_ms"] and v["chars"] <= v["max_chars"],
    ),
    Figure(
        "approval_wait.py",
        "kernel CPU while a cell waits for approval (5 s)",
        (rf"kernel CPU, cell waiting \({NUMBER} s\)\s+(?P<cpu>{NUMBER}) %\s+<= (?P<target>{NUMBER}) %",),
        lambda v: f"{v['cpu']:.1f} % of one core",
        "≤ 2 %",
        lambda v: v["cpu"] <= v["target"],
    ),
    Figure(
        "approval_wait.py",
        "click to resume, median of 10",
        (rf"click to resume, median of \d+\s+(?P<ms>{NUMBER}) ms\s+<= (?P<target>{NUMBER}) ms",
         rf"click to resume, worst of \d+\s+(?P<worst>{NUMBER}) ms"),
        lambda v: f"{v['ms']:.1f} ms (worst {v['worst']:.1f} ms)",
        "≤ 100 ms",
        lambda v: v["ms"] <= v["target"],
    ),
    Figure(
        "outside_calls.py",
        "outside agent's call end to end through a real Jupyter server and the official MCP client, "
        "the outside policy `auto` deciding: `inspect_variable` and `run_code` of `1+1` (median of "
        "50), and 20 reads sent at once from one client",
        (rf"read p50 \(ms\)\s+(?P<read>{NUMBER})",
         rf"run_code 1\+1 p50 \(ms\)\s+(?P<run>{NUMBER})",
         rf"20 concurrent: answered\s+(?P<answered>{NUMBER})",
         rf"20 concurrent: all \(ms\)\s+(?P<all>{NUMBER})"),
        lambda v: f"read {v['read']:.1f} ms, run_code {v['run']:.1f} ms; {v['answered']:.0f}/20 "
        f"concurrent reads answered in {v['all']:,.0f} ms",
        "read ≤ 30 ms, run_code ≤ 50 ms, 20/20",
        lambda v: v["read"] <= 30 and v["run"] <= 50 and v["answered"] == 20,
    ),
    Figure(
        "extension_load.py",
        "kernel start to the first `kernel_info` reply, `--ext=qloop_kernel` vs plain, median ratio "
        "of 10 alternating pairs",
        (rf"kernel_info, plain\s+(?P<plain>{NUMBER})ms",
         rf"kernel_info, --ext=qloop_kernel\s+(?P<qloop>{NUMBER})ms",
         rf"start ratio .*?: (?P<ratio>{NUMBER}) \(target <= (?P<target>{NUMBER})\)"),
        lambda v: f"ratio {v['ratio']:.2f} (medians {v['qloop']:,.0f} ms vs {v['plain']:,.0f} ms)",
        "≤ 1.1",
        lambda v: v["ratio"] <= v["target"],
    ),
    Figure(
        "extension_load.py",
        "kernel process CPU until that reply (less sensitive to a busy machine), median of 10",
        (rf"kernel CPU by kernel_info, plain\s+(?P<plain>{NUMBER})ms",
         rf"kernel CPU by kernel_info, --ext=qloop_kernel\s+(?P<qloop>{NUMBER})ms"),
        lambda v: f"{v['qloop']:,.0f} ms vs {v['plain']:,.0f} ms (ratio {v['qloop'] / v['plain']:.2f})",
        "—",
        None,
    ),
    Figure(
        "extension_load.py",
        "`%load_ext qloop_kernel` in a running kernel, median of 10",
        (rf"%load_ext qloop_kernel in a running kernel\s+(?P<ms>{NUMBER})ms",),
        lambda v: f"{v['ms']:.1f} ms",
        "—",
        None,
    ),
    Figure(
        "undo.py",
        "undo snapshot before and diff after a step changing one column of a 1,000,000 × 50 "
        "DataFrame (CPU, median of 5; peak allocated)",
        (rf"(?m)^snapshot\s+(?P<snap>{NUMBER})\s+{NUMBER}$",
         rf"(?m)^diff\s+(?P<diff>{NUMBER})\s+{NUMBER}$",
         rf"array snapshot \(a copy\)\s+(?P<array>{NUMBER})\s+(?P<array_mb>{NUMBER})",
         rf"frame snapshot \+ diff: (?P<ms>{NUMBER}) ms, (?P<mb>{NUMBER}) MB \(target <= "
         rf"(?P<max_ms>{NUMBER}) ms, <= (?P<max_mb>{NUMBER}) MB\)"),
        lambda v: f"{v['snap']:.1f} ms + {v['diff']:.1f} ms, peak {v['mb']:.1f} MB (a float "
        f"array's snapshot, a real copy: {v['array']:.0f} ms, {v['array_mb']:.0f} MB)",
        "≤ 100 ms, ≤ 50 MB",
        lambda v: v["ms"] <= v["max_ms"] and v["mb"] <= v["max_mb"],
    ),
    Figure(
        "undo.py",
        "what undo and the diff add to a step touching nothing (the frame and 200 other "
        "variables in the namespace), median of 200",
        (rf"step touching nothing, median of \d+: (?P<ms>{NUMBER}) ms \(target <= "
         rf"(?P<target>{NUMBER}) ms\)",),
        lambda v: f"{v['ms']:.2f} ms",
        "≤ 5 ms",
        lambda v: v["ms"] <= v["target"],
    ),
    Figure(
        "undo.py",
        "what undo and the diff add to a step changing a 50 × 10,000 DataFrame, a dataclass "
        "holding a list of 1,000,000 items, a deque of 1,000,000 and a frozenset of 100,000 "
        "(CPU, median of 20)",
        (rf"wide frame and big containers, median of \d+: (?P<ms>{NUMBER}) ms per step \(target "
         rf"<= (?P<target>{NUMBER}) ms\)",),
        lambda v: f"{v['ms']:.1f} ms",
        "≤ 50 ms",
        lambda v: v["ms"] <= v["target"],
    ),
    Figure(
        "nested_arrow.py",
        "fingerprint and undo snapshot of a 200,000-row DataFrame with `list<int64>[pyarrow]` and "
        "`struct<id, w>[pyarrow]` columns, each read within the limit (CPU, median of 20; beside "
        "them the diff after a step, and the same for a frame of numpy columns)",
        (rf"nested Arrow frame, [\d,]+ rows: fingerprint (?P<fp>{NUMBER}) ms, undo snapshot "
         rf"(?P<snap>{NUMBER}) ms, diff (?P<diff>{NUMBER}) ms, tracked \(numpy columns "
         rf"(?P<flat_fp>{NUMBER}), (?P<flat_snap>{NUMBER}), (?P<flat_diff>{NUMBER}) ms; target "
         rf"<= (?P<target>{NUMBER}) ms each\)",),
        lambda v: f"{v['fp']:.1f} ms and {v['snap']:.1f} ms, tracked; diff {v['diff']:.1f} ms "
        f"(numpy columns: {v['flat_fp']:.1f}, {v['flat_snap']:.1f}, {v['flat_diff']:.1f} ms)",
        "≤ 20 ms each",
        lambda v: v["fp"] <= v["target"] and v["snap"] <= v["target"],
    ),
    Figure(
        "eval_overhead.py",
        "`qloop eval`: the harness's own time per trial (preparing the notebook, judging checks and "
        "agent records, writing the executed notebook and the results line), the kernel's start, the "
        "cells and its shutdown excluded; 6 starter tasks, the correct solver through the stand-in, "
        "median (beside it: kernel and cells per trial, reports per task)",
        (rf"harness per trial: median (?P<ms>{NUMBER}) ms \(max (?P<max>{NUMBER}) ms\), target <= "
         rf"(?P<target>{NUMBER}) ms",
         rf"kernel start, cells and shutdown per trial: median (?P<kernel>{NUMBER}) s",
         rf"reports \(JSON and HTML\) per task: (?P<reports>{NUMBER}) ms"),
        lambda v: f"{v['ms']:.1f} ms (max {v['max']:.1f} ms; kernel and cells {v['kernel']:.2f} s "
        f"per trial; reports {v['reports']:.1f} ms per task)",
        "≤ 100 ms",
        lambda v: v["ms"] <= v["target"],
    ),
    Figure(
        "read_notebook_frontend.py",
        "the extension's answer to `read_notebook` for a 500-cell notebook with big outputs (each cell a "
        "2,000-character source, a 100 KB stream and a 200 KB PNG): building the view and its JSON, "
        "median of 20, and the answer's size",
        (rf"notebookView \+ JSON.stringify, median\s+(?P<ms>{NUMBER}) ms",
         rf"answer size\s+(?P<bytes>{NUMBER}) bytes"),
        lambda v: f"{v['ms']:.1f} ms, {v['bytes'] / 1024:.0f} KB",
        "≤ 50 ms, ≤ 200 KB",
        lambda v: v["ms"] <= 50 and v["bytes"] <= 200 * 1024,
    ),
]  # fmt: skip


def run(script: Path, timeout: float) -> Run:
    """Run one benchmark in its own process, echoing its output as it comes."""
    print(f"\n=== python bench/{script.name}", flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return Run(script.name, None, out, f"timed out after {timeout:g} s", timeout)
    print(done.stdout, end="", flush=True)
    return Run(script.name, done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def read_figure(spec: Figure, result: Run) -> Row:
    command = f"`python bench/{spec.script}`"
    values: dict[str, float] = {}
    for pattern in spec.patterns:
        match = re.search(pattern, result.stdout, re.DOTALL)
        if match is None:
            return Row(
                spec.label,
                command,
                failure(result, "its figure was not found"),
                spec.target,
                "**no**",
            )
        values.update({k: float(v.replace(",", "")) for k, v in match.groupdict().items()})
    met = "—" if spec.met is None else ("yes" if spec.met(values) else "**no**")
    return Row(spec.label, command, spec.figure(values), spec.target, met)


def failure(result: Run, why: str) -> str:
    status = "timed out" if result.status is None else f"exit {result.status}"
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return f"failed ({status}; {why}){': ' + lines[-1].strip() if lines else ''}"


def unknown_benchmark(result: Run) -> Row:
    """A row for a benchmark without a reader: its last line and exit status."""
    lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
    figure = lines[-1] if result.status == 0 and lines else failure(result, "no output")
    met = "yes" if result.status == 0 else "**no**"
    return Row(f"`{result.script}`", f"`python bench/{result.script}`", figure, "exit 0", met)


def rows_for(results: list[Run]) -> list[Row]:
    """Rows in the order of FIGURES, then one row per benchmark without a reader."""
    by_script = {result.script: result for result in results}
    rows = [
        read_figure(spec, by_script[spec.script]) for spec in FIGURES if spec.script in by_script
    ]
    known = {spec.script for spec in FIGURES}
    return rows + [unknown_benchmark(r) for r in results if r.script not in known]


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def environment() -> str:
    versions = ", ".join(
        f"{name} {_version(name)}"
        for name in ("anthropic", "ipykernel", "ipython", "pydantic-ai-slim")
    )
    return (
        f"Measured on {datetime.date.today():%Y-%m-%d} on {platform.system()} with "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, {versions}."
    )


def table(rows: list[Row]) -> str:
    lines = ["| benchmark | command | figure | target | met? |", "|---|---|---|---|---|"]
    lines += [f"| {r.label} | {r.command} | {r.figure} | {r.target} | {r.met} |" for r in rows]
    return "\n".join(lines)


def document(rows: list[Row], old: str) -> str:
    """The benchmarks page: intro, table, and the notes section of ``old`` unchanged."""
    notes = old[old.index(NOTES) :].rstrip() if NOTES in old else f"{NOTES}\n\n- (none yet)"
    intro = "# Benchmarks\n\n" + textwrap.fill(
        "Each benchmark is a script under `bench/` that prints its figures and exits non-zero when its "
        "target is missed; none is a timed test. `python bench/run_all.py` runs them all, one after "
        "the other, and rewrites the table below (the notes are kept). Figures are ratios or medians "
        "measured side by side in one run; the comparisons with pydantic-ai need the `bench` extra "
        f'(`pip install -e ".[bench]"`). {environment()}',
        width=105,
    )
    return f"{intro}\n\n{table(rows)}\n\n{notes}\n"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, print the table, write the document; 1 if anything failed or missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run these (e.g. cache_ratio)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per benchmark")
    args = parser.parse_args(argv)
    scripts = sorted(p for p in BENCH.glob("*.py") if p.name != Path(__file__).name)
    if args.only:
        scripts = [p for p in scripts if p.stem in args.only or p.name in args.only]
    results = [run(script, args.timeout) for script in scripts]
    rows = rows_for(results)
    print("\n" + table(rows))
    if not args.only:
        DOC.write_text(document(rows, DOC.read_text() if DOC.exists() else ""))
        print(f"\nwrote {DOC.relative_to(ROOT)}")
    failed = any(r.status != 0 for r in results) or any(row.met not in ("yes", "—") for row in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
