"""inspect_variable on a 1,000,000 x 50 DataFrame at both string backends, and on lazy objects.

CPU time (``time.process_time``) of ``inspect_variable`` on a mixed frame (float, int, object,
str, datetime columns) with Python-backed and with Arrow-backed strings; the larger of the two
medians is the figure checked against the target. Then the same tool and ``list_variables`` on
dask collections (when dask is installed), whose inspection must run no task.

Run: python bench/inspect_variable.py
Exits non-zero when a target is missed (at most 8,000 characters in at most 50 ms of CPU, and no
dask task run by inspection).
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable

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
    """Float, int, object (mixed Python values), str and datetime columns in equal shares.

    ``storage`` picks the string backend ("python" or "pyarrow"); None keeps pandas' default.
    """
    rng = np.random.default_rng(7)
    mixed = np.array(["a", 1, 2.5, None, (1, 2)], dtype=object)
    string = None if storage is None else pd.StringDtype(storage, na_value=np.nan)
    makers = [
        lambda: rng.normal(size=n_rows),
        lambda: rng.integers(0, 10_000, n_rows),
        lambda: pd.Series(mixed[rng.integers(0, 5, n_rows)], dtype=object),
        lambda: pd.Series(distinct_strings(rng.integers(0, 5, n_rows)), dtype=string),
        lambda: pd.date_range("2021-01-01", periods=n_rows, freq="s"),
    ]
    return pd.DataFrame({f"col{i}": makers[i % 5]() for i in range(n_cols)})


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


def string_backends() -> list[str]:
    has_arrow = importlib.util.find_spec("pyarrow") is not None
    return ["python", "pyarrow"] if has_arrow else ["python"]


def pandas_rows() -> tuple[list[tuple[str, str, str]], bool]:
    rows: list[tuple[str, str, str]] = []
    worst, worst_text, df = 0.0, "", None
    for storage in string_backends():
        print(f"building a {ROWS:,} x {COLUMNS} DataFrame with {storage} strings ...", flush=True)
        df = build_frame(storage=storage)
        elapsed, text = median_cpu_ms(lambda df=df: inspect_variable({"df": df}, "df"))
        rows.append(
            (f"  {storage} strings, median CPU", f"{elapsed:.1f} ms", f"<= {TARGET_MS:.0f} ms")
        )
        if elapsed >= worst:
            worst, worst_text = elapsed, text
    assert df is not None
    repr_chars = len(repr(df))
    to_string_chars, to_string_s = estimated_to_string_chars(df)
    rows = [
        ("inspect_variable median time", f"{worst:.1f} ms", f"target <= {TARGET_MS:.0f} ms"),
        *rows,
        ("inspect_variable output", f"{len(worst_text):,} chars", f"target <= {TARGET_CHARS:,}"),
        (
            "repr(df) (pandas default)",
            f"{repr_chars:,} chars",
            f"{len(worst_text) / repr_chars:.2f}x",
        ),
        (
            "df.to_string() (not run; estimated)",
            f"{to_string_chars:,} chars",
            f"{len(worst_text) / to_string_chars:.2e}x, ~{to_string_s:.0f} s to build",
        ),
    ]
    return rows, worst > TARGET_MS or len(worst_text) > TARGET_CHARS


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
