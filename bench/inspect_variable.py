"""inspect_variable on a 1,000,000 x 50 DataFrame: time, output size, size against pandas.

Run: python bench/inspect_variable.py
Exits non-zero when the target is missed (at most 8,000 characters in at most 100 ms).
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import pandas as pd

from qloop_kernel.tools.namespace import inspect_variable

ROWS = 1_000_000
COLUMNS = 50
RUNS = 5
TARGET_MS = 100.0
TARGET_CHARS = 8_000
TO_STRING_SLICE = 10_000  # rows rendered to extrapolate the size of df.to_string()


def build_frame(n_rows: int = ROWS, n_cols: int = COLUMNS) -> pd.DataFrame:
    """Float, int, object (mixed Python values), str and datetime columns in equal shares."""
    rng = np.random.default_rng(7)
    words = np.array(["north", "south", "east", "west", None], dtype=object)
    mixed = np.array(["a", 1, 2.5, None, (1, 2)], dtype=object)
    makers = [
        lambda: rng.normal(size=n_rows),
        lambda: rng.integers(0, 10_000, n_rows),
        lambda: pd.Series(mixed[rng.integers(0, 5, n_rows)], dtype=object),
        lambda: words[rng.integers(0, 5, n_rows)],
        lambda: pd.date_range("2021-01-01", periods=n_rows, freq="s"),
    ]
    return pd.DataFrame({f"col{i}": makers[i % 5]() for i in range(n_cols)})


def median_ms(df: pd.DataFrame) -> tuple[float, str]:
    """Median wall time of RUNS calls after one warm-up, and the output."""
    namespace = {"df": df}
    text = inspect_variable(namespace, "df")
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        text = inspect_variable(namespace, "df")
        times.append((time.perf_counter() - start) * 1000)
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


def main() -> int:
    print(f"building a {ROWS:,} x {COLUMNS} DataFrame ...", flush=True)
    df = build_frame()
    print("dtypes:", ", ".join(f"{n} {dtype}" for dtype, n in df.dtypes.value_counts().items()))
    elapsed, text = median_ms(df)
    repr_chars = len(repr(df))
    to_string_chars, to_string_s = estimated_to_string_chars(df)
    rows = [
        ("inspect_variable median time", f"{elapsed:.1f} ms", f"target <= {TARGET_MS:.0f} ms"),
        ("inspect_variable output", f"{len(text):,} chars", f"target <= {TARGET_CHARS:,}"),
        ("repr(df) (pandas default)", f"{repr_chars:,} chars", f"{len(text) / repr_chars:.2f}x"),
        (
            "df.to_string() (not run; estimated)",
            f"{to_string_chars:,} chars",
            f"{len(text) / to_string_chars:.2e}x, ~{to_string_s:.0f} s to build",
        ),
    ]
    width = max(len(label) for label, _, _ in rows)
    print(f"\n{'measure'.ljust(width)}  {'value':>16}  ratio / target")
    for label, value, note in rows:
        print(f"{label.ljust(width)}  {value:>16}  {note}")
    missed = elapsed > TARGET_MS or len(text) > TARGET_CHARS
    print("\nTARGET MISSED" if missed else "\ntarget met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
