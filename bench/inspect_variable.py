"""inspect_variable on 1,000,000 x 50 DataFrames with every kind of string column, and on lazy objects.

CPU time (``time.process_time``) of ``inspect_variable`` on a mixed frame (float, int, object,
string, datetime columns in equal shares) whose strings are Arrow-backed, Python-backed
(``StringDtype("python")``) or plain Python ``str`` objects in object-dtype columns (each cell its
own object, as after reading a file), and on a frame of 50 such object-dtype string columns. The
largest of the medians is the figure checked against the target. Then the same tool and
``list_variables`` on dask collections (when dask is installed), whose inspection must run no task.

Run: python bench/inspect_variable.py
Exits non-zero when a target is missed (at most 8,000 characters in at most 50 ms of CPU, and no
dask task run by inspection).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from qloop_kernel.tools.namespace import inspect_variable, list_variables

ROWS = 1_000_000
COLUMNS = 50
RUNS = 5
TARGET_MS = 50.0
TARGET_CHARS = 8_000
TO_STRING_SLICE = 10_000  # rows rendered to extrapolate the size of df.to_string()


def build_frame(
    n_rows: int = ROWS, n_cols: int = COLUMNS, storage: str | None = None
) -> pd.DataFrame:
    """Float, int, object (mixed Python values), string and datetime columns in equal shares.

    ``storage`` picks the string columns: "python" or "pyarrow" (``StringDtype``), "object"
    (``str`` objects in object-dtype columns); None keeps pandas' default.
    """
    rng = np.random.default_rng(7)
    mixed = np.array(["a", 1, 2.5, None, (1, 2)], dtype=object)
    string: Any = object
    if storage != "object":
        string = None if storage is None else pd.StringDtype(storage, na_value=np.nan)
    makers = [
        lambda: rng.normal(size=n_rows),
        lambda: rng.integers(0, 10_000, n_rows),
        lambda: pd.Series(mixed[rng.integers(0, 5, n_rows)], dtype=object),
        lambda: pd.Series(distinct_strings(rng.integers(0, 5, n_rows)), dtype=string),
        lambda: pd.date_range("2021-01-01", periods=n_rows, freq="s"),
    ]
    return pd.DataFrame({f"col{i}": makers[i % 5]() for i in range(n_cols)})


def strings_frame(n_rows: int = ROWS, n_cols: int = COLUMNS) -> pd.DataFrame:
    """Object-dtype columns of Python strings (and None) only."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            f"col{i}": pd.Series(distinct_strings(rng.integers(0, 5, n_rows)), dtype=object)
            for i in range(n_cols)
        }
    )


def distinct_strings(codes: np.ndarray) -> np.ndarray:
    """Words (None for code 4) as one string object per cell, as after reading a file."""
    words = np.array(["north", "south", "east", "west", ""])[codes].astype(object)
    words[codes == 4] = None
    return words


def median_cpu_ms(call: Callable[[], str]) -> tuple[float, str]:
    """Median CPU time of RUNS calls after one warm-up, and the output."""
    text = call()
    times = []
    for _ in range(RUNS):
        start = time.process_time()
        text = call()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times), text


def estimated_to_string_chars(df: pd.DataFrame) -> tuple[int, float]:
    """``len(df.to_string())`` and its time, extrapolated from a slice of rows.

    The full call is not affordable: it would build a string of hundreds of megabytes.
    """
    start = time.perf_counter()
    chars = len(df.iloc[:TO_STRING_SLICE].to_string())
    seconds = time.perf_counter() - start
    scale = len(df) / TO_STRING_SLICE
    return round(chars * scale), seconds * scale


def frames() -> Iterator[tuple[str, pd.DataFrame]]:
    """The frames measured, one at a time (each holds hundreds of megabytes)."""
    has_arrow = importlib.util.find_spec("pyarrow") is not None
    for storage in ["python", "pyarrow", "object"] if has_arrow else ["python", "object"]:
        yield f"mixed, {storage} strings", build_frame(storage=storage)
    yield "50 object-dtype string columns", strings_frame()


def pandas_rows() -> tuple[list[tuple[str, str, str]], bool]:
    """Each frame's median CPU time and output size; the slowest time and the longest output
    (beside it, pandas' own renderings of that frame) are the figures checked."""
    rows: list[tuple[str, str, str]] = []
    slowest, longest = 0.0, ""
    repr_chars, to_string_chars, to_string_s = 0, 0, 0.0
    for name, df in frames():
        print(f"building a {ROWS:,} x {COLUMNS} DataFrame ({name}) ...", flush=True)
        elapsed, text = median_cpu_ms(lambda df=df: inspect_variable({"df": df}, "df"))
        rows.append((f"  {name}, median CPU", f"{elapsed:.1f} ms", f"{len(text):,} chars"))
        slowest = max(slowest, elapsed)
        if len(text) >= len(longest):
            longest, repr_chars = text, len(repr(df))
            to_string_chars, to_string_s = estimated_to_string_chars(df)
    rows = [
        ("inspect_variable median time", f"{slowest:.1f} ms", f"target <= {TARGET_MS:.0f} ms"),
        *rows,
        ("inspect_variable output", f"{len(longest):,} chars", f"target <= {TARGET_CHARS:,}"),
        (
            "repr(df) (pandas default)",
            f"{repr_chars:,} chars",
            f"{len(longest) / repr_chars:.2f}x",
        ),
        (
            "df.to_string() (not run; estimated)",
            f"{to_string_chars:,} chars",
            f"{len(longest) / to_string_chars:.2e}x, ~{to_string_s:.0f} s to build",
        ),
    ]
    return rows, slowest > TARGET_MS or len(longest) > TARGET_CHARS


def dask_rows() -> tuple[list[tuple[str, str, str]], bool]:
    """Inspection of dask collections: CPU time and the number of tasks it ran (target 0)."""
    if importlib.util.find_spec("dask") is None:
        return [("dask collections", "skipped", "dask not installed")], False
    import dask.array as da
    import dask.dataframe as dd
    from dask.callbacks import Callback

    ddf = dd.from_pandas(build_frame(200_000, 20), npartitions=20)
    namespace = {"ddf": ddf, "by_col1": ddf.set_index("col1"), "grid": da.ones((20_000, 5_000))}
    tasks = 0

    def count(key: object, dsk: object, state: object) -> None:
        nonlocal tasks
        tasks += 1

    rows = []
    with Callback(pretask=count):
        for name in namespace:
            ms, _ = median_cpu_ms(lambda name=name: inspect_variable(namespace, name))
            rows.append((f"inspect_variable, dask {name}", f"{ms:.1f} ms", "CPU, median"))
        ms, _ = median_cpu_ms(lambda: list_variables(namespace))
        rows.append(("list_variables, 3 dask collections", f"{ms:.1f} ms", "CPU, median"))
    rows.append(("dask tasks run by inspection", f"{tasks}", "target 0"))
    return rows, tasks > 0


def main() -> int:
    frame_rows, frame_missed = pandas_rows()
    lazy_rows, lazy_missed = dask_rows()
    rows = frame_rows + lazy_rows
    width = max(len(label) for label, _, _ in rows)
    print(f"\n{'measure'.ljust(width)}  {'value':>16}  ratio / target")
    for label, value, note in rows:
        print(f"{label.ljust(width)}  {value:>16}  {note}")
    missed = frame_missed or lazy_missed
    print("\nTARGET MISSED" if missed else "\ntarget met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
