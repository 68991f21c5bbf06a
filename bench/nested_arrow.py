"""What a fingerprint and an undo snapshot cost for a frame with nested Arrow columns.

A 200,000-row DataFrame with a ``list<int64>[pyarrow]`` column (one row in seven null), a
``struct<id: int64, w: double>[pyarrow]`` column and an int64 column, side by side with a frame of
the same rows in plain int64 and float64 columns. For each: the CPU time (``time.process_time``,
median of 20) of its fingerprint, of the undo snapshot taken before a step that changes it (the
snapshot fingerprints and sizes the frame, and copies it copy-on-write), and of the diff after the
step; and whether the fingerprint is tracked (read within the time limit, with a content hash).
Each is read once before it is timed: a process's first fingerprint imports and warms up pandas'
hashing, whatever the value.
Beside them, the fingerprint of a pyarrow Table holding the same nested columns.

Run: python bench/nested_arrow.py
Exits non-zero when a target is missed: the nested frame's fingerprint and its undo snapshot each at
most ``VALUE_TIME_S`` (20 ms) of CPU, tracked.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from qloop_kernel.notebook.undo import step_changes, take_snapshot
from qloop_kernel.policy.risk import classify
from qloop_kernel.values import fingerprint as fingerprints
from qloop_kernel.values.fingerprint import fingerprint

ROWS = 200_000
RUNS = 20
STEP = "df['n'] = df['n'] + 1"
TARGET_MS = fingerprints.VALUE_TIME_S * 1000


def nested_columns() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    picks = rng.integers(0, 100, ROWS)
    lists = pa.array(
        [[int(x), int(x) + 1] if x % 7 else None for x in picks], type=pa.list_(pa.int64())
    )
    structs = pa.StructArray.from_arrays(
        [pa.array(np.arange(ROWS)), pa.array(rng.random(ROWS))], names=["id", "w"]
    )
    return {"l": lists, "s": structs, "n": pa.array(np.arange(ROWS))}


def nested_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {name: pd.arrays.ArrowExtensionArray(column) for name, column in nested_columns().items()}
    ).astype({"n": "int64"})


def flat_frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {"l": rng.integers(0, 100, ROWS), "s": rng.random(ROWS), "n": np.arange(ROWS)}
    )


def cpu_ms(action: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    """CPU milliseconds of ``action(*args, **kwargs)``, and its value."""
    started = time.process_time()
    value = action(*args, **kwargs)
    return (time.process_time() - started) * 1000, value


def one_run(frame: pd.DataFrame, assessment: Any) -> dict[str, float]:
    """CPU ms of the fingerprint, the snapshot before STEP and the diff after it, on a view."""
    namespace = {"df": frame.copy(deep=False)}
    found = {}
    found["fingerprint"], shown = cpu_ms(fingerprint, namespace["df"])
    assert shown.hash and not shown.untracked, "the fingerprint is not tracked"
    found["snapshot"], snapshot = cpu_ms(
        take_snapshot, STEP, namespace, assessment=assessment, budget=8 * 1024**3
    )
    assert not snapshot.prints["df"].untracked and snapshot.notice() is None
    namespace["df"]["n"] = namespace["df"]["n"] + 1  # the step
    found["diff"], step = cpu_ms(step_changes, snapshot, namespace)
    assert step.lines() == [f"df: DataFrame {ROWS}×3, values changed"], step.lines()
    return found


def costs(frame: pd.DataFrame) -> dict[str, float]:
    """Median CPU ms of the fingerprint, the snapshot before STEP and the diff after it."""
    assessment = classify(STEP, existing={"df"})
    fingerprint(frame, seconds=60.0)  # warm-up: the process's first reads import and compile
    runs = [one_run(frame, assessment) for _ in range(RUNS)]
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


def table_ms() -> float:
    table = pa.table(nested_columns())
    times = []
    fingerprint(table, seconds=60.0)  # warm-up
    for _ in range(RUNS):
        took, shown = cpu_ms(fingerprint, table)
        assert shown.hash and not shown.untracked
        times.append(took)
    return statistics.median(times)


def main() -> int:
    nested, flat = costs(nested_frame()), costs(flat_frame())
    table = table_ms()
    print(f"{ROWS:,} rows: list<int64>, struct<id, w> and int64 columns (nested Arrow) against")
    print(f"int64, float64 and int64 columns (flat numpy); CPU ms, median of {RUNS}")
    print(f"{'':14}{'nested':>10}{'flat':>10}{'ratio':>8}")
    for name in nested:
        print(f"{name:14}{nested[name]:10.1f}{flat[name]:10.1f}{nested[name] / flat[name]:8.1f}")
    print(f"{'Arrow table':14}{table:10.1f}")
    met = nested["fingerprint"] <= TARGET_MS and nested["snapshot"] <= TARGET_MS
    print(
        f"nested Arrow frame, {ROWS:,} rows: fingerprint {nested['fingerprint']:.1f} ms, undo "
        f"snapshot {nested['snapshot']:.1f} ms, diff {nested['diff']:.1f} ms, tracked (numpy columns "
        f"{flat['fingerprint']:.1f}, {flat['snapshot']:.1f}, {flat['diff']:.1f} ms; target <= "
        f"{TARGET_MS:g} ms each)"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
