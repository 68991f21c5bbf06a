"""What undo and the per-step diff cost: a 1,000,000 x 50 DataFrame, and a step that touches nothing.

For a step that changes one column of a mixed 1,000,000 x 50 frame (float, int, str, datetime and
object columns): the CPU time (``time.process_time``, median of 5) and, in a separate run, the
peak of memory allocated (``tracemalloc``: numpy and Python allocations) of the snapshot taken
before the step, of the diff after it, and of the undo. For contrast, the snapshot of a 1,000,000 x 50 float array, which
is a real copy. Then the whole overhead undo and the diff add to a step that changes nothing
(classification, snapshot, fingerprints, diff) in a namespace holding the frame and 200 other
variables, as ``run_code`` pays it.

Last, what undo and the diff add to a step that changes a 50 x 10,000 frame, a dataclass holding a
list of 1,000,000 items, a deque of 1,000,000 and a frozenset of 100,000 (snapshot before, changes
after, as ``run_code`` pays it through ``UndoLog``): wide frames are hashed from sampled columns,
containers by a bounded walk, and reading any one value stops at ``VALUE_TIME_S``.

Run: python bench/undo.py
Exits non-zero when a target is missed (frame snapshot + diff at most 100 ms of CPU and 50 MB, a
step touching nothing at most 5 ms, the step on wide and big values at most 50 ms).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import time
import tracemalloc
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.notebook.undo import UndoLog, step_changes, take_snapshot, undo_step
from qloop_kernel.policy.risk import classify
from qloop_kernel.values import fingerprint as fingerprints

ROWS = 1_000_000
COLUMNS = 50
RUNS = 5
NOOP_RUNS = 200
TARGET_FRAME_MS = 100.0
TARGET_FRAME_MB = 50.0
TARGET_NOOP_MS = 5.0
TARGET_WIDE_MS = 50.0
WIDE_RUNS = 20
WIDE_STEP = "wide[0] = wide[0] + 1\nholder.items.append(1)\nqueue.append(1)\ntags = tags | {-1}"
STEP = "df['col0'] = df['col0'] * 2"
NOTHING = "print(len(df))"  # reads the frame, changes nothing


def build_frame() -> pd.DataFrame:
    """Float, int, str, datetime and object columns in equal shares."""
    rng = np.random.default_rng(7)
    words = np.array(["north", "south", "east", "west"], dtype=object)
    mixed = np.array(["a", 1, 2.5, None, (1, 2)], dtype=object)
    makers: list[Callable[[], Any]] = [
        lambda: rng.normal(size=ROWS),
        lambda: rng.integers(0, 10_000, ROWS),
        lambda: pd.Series(words[rng.integers(0, 4, ROWS)], dtype="str"),
        lambda: pd.date_range("2021-01-01", periods=ROWS, freq="s"),
        lambda: pd.Series(mixed[rng.integers(0, 5, ROWS)], dtype=object),
    ]
    return pd.DataFrame({f"col{i}": makers[i % 5]() for i in range(COLUMNS)})


def cpu_ms(action: Callable[[], Any]) -> tuple[float, Any]:
    """CPU milliseconds of ``action()``, and its value."""
    started = time.process_time()
    value = action()
    return (time.process_time() - started) * 1000, value


def peak_mb(action: Callable[[], Any]) -> tuple[float, Any]:
    """Peak MB allocated by ``action()`` (a separate run: tracing slows Python code down, so the
    time limit on reading one value is lifted for it)."""
    limit, fingerprints.VALUE_TIME_S = fingerprints.VALUE_TIME_S, 60.0
    tracemalloc.start()
    try:
        value = action()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        fingerprints.VALUE_TIME_S = limit
    return peak / 1024**2, value


def one_run(df: pd.DataFrame, assessment: Any, trace: bool) -> dict[str, float]:
    """Snapshot, step, diff and undo of ``STEP`` on a view of ``df``: CPU ms or peak MB of each."""
    measure = peak_mb if trace else cpu_ms
    ns = {"df": df.copy(deep=False)}
    found: dict[str, float] = {}
    found["snapshot"], snapshot = measure(
        lambda: take_snapshot(STEP, ns, assessment=assessment, budget=8 * 1024**3)
    )
    ns["df"]["col0"] = ns["df"]["col0"] * 2  # the step
    found["diff"], step = measure(lambda: step_changes(snapshot, ns))
    assert [c.line for c in step.changes] == ["df: DataFrame 1000000×50, values changed"]
    found["undo"], _ = measure(lambda: undo_step(step, ns))
    assert ns["df"]["col0"].equals(df["col0"])
    return found


def frame_costs(df: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Snapshot, diff and undo of ``STEP`` on ``df``: median CPU ms and peak MB of each."""
    assessment = classify(STEP, existing={"df"})
    timed = [one_run(df, assessment, trace=False) for _ in range(RUNS)]
    traced = one_run(df, assessment, trace=True)
    return {name: (statistics.median(run[name] for run in timed), traced[name]) for name in traced}


def array_snapshot() -> tuple[float, float]:
    array = np.random.default_rng(1).random((ROWS, COLUMNS))
    assessment = classify("arr *= 2", existing={"arr"})

    def snapshot() -> Any:
        return take_snapshot("arr *= 2", {"arr": array}, assessment=assessment, budget=8 * 1024**3)

    times = [cpu_ms(snapshot)[0] for _ in range(RUNS)]
    return statistics.median(times), peak_mb(snapshot)[0]


def noop_overhead(df: pd.DataFrame) -> float:
    """Median ms that undo and the diff add to a step changing nothing, as run_code pays it."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.user_ns.update({f"v{i}": list(range(i % 50)) for i in range(200)}, df=df, pd=pd, np=np)
    log = UndoLog(shell)
    times = []
    for _ in range(NOOP_RUNS):
        started = time.process_time()
        snapshot = log.begin(NOTHING)
        log.finish(snapshot)
        times.append((time.process_time() - started) * 1000)
    InteractiveShell.clear_instance()
    return statistics.median(times)


@dataclasses.dataclass
class Holder:
    items: list[int]


def wide_overhead() -> tuple[float, list[str]]:
    """Median CPU ms that undo and the diff add to WIDE_STEP, and the changes it reported."""
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    shell.user_ns.update(
        wide=pd.DataFrame(np.random.default_rng(3).random((50, 10_000))),
        holder=Holder(list(range(1_000_000))),
        queue=deque(range(1_000_000)),
        tags=frozenset(range(100_000)),
    )
    log = UndoLog(shell)
    times, lines = [], []
    for _ in range(WIDE_RUNS):
        started = time.process_time()
        snapshot = log.begin(WIDE_STEP)
        spent = time.process_time() - started
        shell.run_cell(WIDE_STEP, store_history=False)  # the step itself: not counted
        started = time.process_time()
        lines = log.finish(snapshot).lines()
        times.append((spent + time.process_time() - started) * 1000)
    InteractiveShell.clear_instance()
    return statistics.median(times), lines


def main() -> int:
    df = build_frame()
    costs = frame_costs(df)
    array_ms, array_mb = array_snapshot()
    noop = noop_overhead(df)
    wide_ms, wide_lines = wide_overhead()
    print(f"frame {ROWS:,} x {COLUMNS} (mixed columns), step: {STEP}, median of {RUNS}")
    print(f"{'':28}{'CPU ms':>10}{'peak MB':>10}")
    for name, (cpu, peak) in costs.items():
        print(f"{name:28}{cpu:10.1f}{peak:10.1f}")
    print(f"{'array snapshot (a copy)':28}{array_ms:10.1f}{array_mb:10.1f}")
    frame_ms = costs["snapshot"][0] + costs["diff"][0]
    frame_mb = max(costs["snapshot"][1], costs["diff"][1])
    print(
        f"frame snapshot + diff: {frame_ms:.1f} ms, {frame_mb:.1f} MB "
        f"(target <= {TARGET_FRAME_MS:g} ms, <= {TARGET_FRAME_MB:g} MB)"
    )
    print(
        f"step touching nothing, median of {NOOP_RUNS}: {noop:.2f} ms (target <= {TARGET_NOOP_MS:g} ms)"
    )
    print("step changing a 50 x 10,000 frame, a dataclass of a 1,000,000-item list, a deque of")
    print("1,000,000 and a frozenset of 100,000; changes reported: " + "; ".join(wide_lines))
    print(
        f"wide frame and big containers, median of {WIDE_RUNS}: {wide_ms:.1f} ms per step "
        f"(target <= {TARGET_WIDE_MS:g} ms)"
    )
    met = frame_ms <= TARGET_FRAME_MS and frame_mb <= TARGET_FRAME_MB and noop <= TARGET_NOOP_MS
    return 0 if met and wide_ms <= TARGET_WIDE_MS else 1


if __name__ == "__main__":
    sys.exit(main())
