"""A whole run: every task × trial, in parallel, within a budget, resumable.

Each finished trial is appended to ``results.jsonl`` in the output folder at once (its first line says
what the run was: suite, model, provider, policy, trials), so an interrupted run loses only the trials
that were running; ``--resume`` reads it back and runs the rest. Before a trial starts, the cost so far is
compared with ``--max-cost``: once it is reached no trial starts, and the running ones get the rest of the
budget as their own ``--max-cost``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import nbformat

from .harness import EvalClient, RunOptions, TrialResult, executed_path, run_trial
from .suite import Suite, SuiteError, Task

RESULTS = "results.jsonl"


@dataclass
class RunState:
    """The trials done (read back on resume) and why the run stopped early, if it did."""

    config: dict[str, Any]
    results: list[dict[str, Any]] = field(default_factory=list)
    stopped: str | None = None  # "budget" or "interrupted"
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def spent(self) -> float:
        return sum(float(r.get("cost_usd") or 0.0) for r in self.results)

    def done(self) -> set[tuple[str, int]]:
        return {(str(r["task"]), int(r["trial"])) for r in self.results}


def open_results(folder: Path, config: dict[str, Any], resume: bool) -> RunState:
    """The results file of a new run, or the one of the run being resumed (checked to match)."""
    path = folder / RESULTS
    if not resume:
        if path.exists():
            raise SuiteError(
                f"{folder} holds the results of an earlier run: add --resume to go on with it, "
                "or choose another folder with -o"
            )
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"config": config}) + "\n", encoding="utf-8")
        return RunState(config)
    if not path.exists():
        raise SuiteError(f"--resume: {path} does not exist (nothing to resume)")
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    saved = lines[0].get("config") if lines else None
    if saved != config:
        raise SuiteError(
            f"--resume: {path} is a run with other settings ({_differs(saved, config)})"
        )
    return RunState(config, results=[line["result"] for line in lines[1:] if "result" in line])


def _differs(saved: Any, config: dict[str, Any]) -> str:
    if not isinstance(saved, dict):
        return "no settings line"
    names = [k for k in config if saved.get(k) != config[k]]
    return ", ".join(f"{k}: {saved.get(k)!r} there, {config[k]!r} now" for k in names)


@dataclass
class Runner:
    suite: Suite
    options: RunOptions
    folder: Path
    state: RunState
    trials: int = 1
    jobs: int = 1
    max_cost: float | None = None
    progress: TextIO | None = None
    on_result: Callable[[TrialResult], None] | None = None
    _running: dict[int, EvalClient] = field(default_factory=dict)
    _total: int = 0

    def pending(self) -> list[tuple[Task, int]]:
        done = self.state.done()
        return [(task, trial) for trial in range(1, self.trials + 1) for task in self.suite.tasks
                if (task.id, trial) not in done]  # fmt: skip

    def run(self) -> RunState:
        """Run what is pending; Ctrl-C interrupts the running kernels and keeps what finished."""
        queue = self.pending()
        self._total = len(queue) + len(self.state.results)
        with ThreadPoolExecutor(max_workers=max(1, self.jobs)) as pool:
            futures: set[Future[None]] = set()
            try:
                while queue or futures:
                    while queue and len(futures) < self.jobs and self._may_start():
                        futures.add(pool.submit(self._one, *queue.pop(0)))
                    if not futures:
                        break
                    finished, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
                    for future in finished:
                        future.result()
            except KeyboardInterrupt:
                self.state.stopped = "interrupted"
                for client in list(self._running.values()):
                    client.interrupt()
                wait(futures)
        return self.state

    def _may_start(self) -> bool:
        if self.state.stopped is not None:
            return False
        if self.max_cost is not None and self.state.spent >= self.max_cost:
            self.state.stopped = "budget"
            return False
        return True

    def _one(self, task: Task, trial: int) -> None:
        started = time.perf_counter()
        remaining = None if self.max_cost is None else max(self.max_cost - self.state.spent, 0.0)
        result, nb = run_trial(task, trial, self.options, remaining, self._running)
        if result.status == "interrupted" or self.state.stopped == "interrupted":
            return  # not kept: --resume runs it again
        path = executed_path(self.folder, task.id, trial)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
        result.harness_s = time.perf_counter() - started - result.kernel_s
        with self.state.lock:
            self.state.results.append(result.to_json())
            with open(self.folder / RESULTS, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"result": result.to_json()}) + "\n")
            if self.progress is not None:
                self.progress.write(self._line(result))
                self.progress.flush()

    def _line(self, result: TrialResult) -> str:
        done = len(self.state.results)
        width = 20
        bar = "#" * (done * width // max(self._total, 1))
        checks = sum(c["passed"] for c in result.checks)
        why = f": {result.error}" if result.error else ""
        return (
            f"[{bar:<{width}}] {done}/{self._total} {result.status:<6} {result.task} "
            f"(trial {result.trial}) checks {checks}/{len(result.checks)}, "
            f"{result.model_calls} calls, ${result.cost_usd:.4f}, {result.wall_s:.1f} s{why}\n"
        )
