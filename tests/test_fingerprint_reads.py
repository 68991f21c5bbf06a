"""Fingerprints that reads do not change: reading a value (its dtype, uniqueness, shape, a summary,
the record's print, repr, a head) leaves its fingerprint as it was, while a real change shows.
Arrow-backed and nested columns are hashed from their buffers within the time limit, which holds
inside the loop over cells; a fingerprint runs no code of the notebook's own classes."""

from __future__ import annotations

import contextlib
import functools
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
import xarray as xr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qloop_kernel.notebook.undo import step_changes, take_snapshot, undo_step
from qloop_kernel.policy.risk import classify
from qloop_kernel.values import fingerprint as fp
from qloop_kernel.values.fingerprint import changes, fingerprint, record_print
from qloop_kernel.values.summaries import Paging, brief, summarize

DEMO = Path(__file__).resolve().parents[1] / "notebooks" / "demo.ipynb"


class Measured:
    """A plain object with a cached property and a cache dict, as libraries keep them."""

    def __init__(self, values: list[int]) -> None:
        self.values = list(values)
        self._cache: dict[str, object] = {}

    @functools.cached_property
    def total(self) -> int:
        return sum(self.values)

    def mean(self) -> float:
        self._cache["mean"] = sum(self.values) / len(self.values)
        return float(self._cache["mean"])  # type: ignore[arg-type]


def days_like(values: list[int]) -> pd.DatetimeIndex:
    """The demo's ``days``: a DatetimeIndex built from day offsets."""
    return pd.Timestamp("2025-01-01") + pd.to_timedelta(values, unit="D")


def mixed_frame(values: list[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": values,
            "x": [v / 7 for v in values],
            "s": [f"w{v}" for v in values],
            "o": pd.Series([f"o{v}" if v % 3 else None for v in values], dtype=object),
            "l": pd.Series([[v, v + 1] for v in values], dtype=pd.ArrowDtype(pa.list_(pa.int64()))),
            "t": pd.Series(
                [{"id": v, "w": v / 2} for v in values],
                dtype=pd.ArrowDtype(pa.struct([("id", pa.int64()), ("w", pa.float64())])),
            ),
            "c": pd.Categorical([str(v % 4) for v in values]),
        }
    )


def bumped(values: list[int]) -> list[int]:
    return [values[0] + 1, *values[1:]]


def set_first(obj: Any, values: list[int]) -> Any:
    """Change the first element in place (numpy, pandas, xarray)."""
    obj[0] = values[0] + 1
    return obj


def set_first_cell(frame: pd.DataFrame, values: list[int]) -> pd.DataFrame:
    frame.iloc[0, 0] = values[0] + 1
    return frame


def set_first_category(categorical: pd.Categorical, values: list[int]) -> pd.Categorical:
    categorical[0] = "z"
    return categorical


def grow_measured(obj: Measured, values: list[int]) -> Measured:
    obj.values[0] += 1
    return obj


def set_first_variable(dataset: xr.Dataset, values: list[int]) -> xr.Dataset:
    dataset["a"].values[0] = values[0] + 1
    return dataset


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[list[int]], Any]
    change: Callable[[Any, list[int]], Any]  # a value that differs (changed in place, or new)


def rebuilt(build: Callable[[list[int]], Any]) -> Callable[[Any, list[int]], Any]:
    return lambda _, values: build(bumped(values))


CASES = [
    Case("Index", pd.Index, rebuilt(pd.Index)),
    Case("DatetimeIndex", days_like, rebuilt(days_like)),
    Case("RangeIndex", lambda v: pd.RangeIndex(len(v)), lambda _, v: pd.RangeIndex(1, len(v) + 1)),
    Case("MultiIndex", mi := lambda v: pd.MultiIndex.from_arrays([v, [str(x) for x in v]]), rebuilt(mi)),
    Case("CategoricalIndex", ci := lambda v: pd.CategoricalIndex([str(x % 5) for x in v]),
         lambda _, v: pd.CategoricalIndex(["z", *(str(x % 5) for x in v[1:])])),
    Case("IntervalIndex", ii := lambda v: pd.IntervalIndex.from_arrays(v, [x + 1 for x in v]), rebuilt(ii)),
    Case("PeriodIndex", pi := lambda v: pd.PeriodIndex.from_ordinals(v, freq="D"), rebuilt(pi)),
    Case("TimedeltaIndex", ti := lambda v: pd.to_timedelta(v, unit="h"), rebuilt(ti)),
    Case("object Index", oi := lambda v: pd.Index([f"k{x}" for x in v], dtype=object), rebuilt(oi)),
    Case("Series", lambda v: pd.Series(v, name="n"), set_first),
    Case("DataFrame", mixed_frame, set_first_cell),
    Case("Categorical", lambda v: pd.Categorical([str(x % 5) for x in v], categories=[*"01234", "z"]),
         set_first_category),
    Case("ndarray", np.array, set_first),
    Case("object ndarray", lambda v: np.array([f"a{x}" for x in v], dtype=object), set_first),
    Case("Arrow table", at := lambda v: pa.table({"v": v, "l": [[x, x] for x in v]}), rebuilt(at)),
    Case("Arrow nested array", aa := lambda v: pa.array([{"k": [x]} for x in v]), rebuilt(aa)),
    Case("polars DataFrame", pf := lambda v: pl.DataFrame({"v": v, "s": [str(x) for x in v]}), rebuilt(pf)),
    Case("xarray DataArray",
         lambda v: xr.DataArray(np.array(v, dtype=float), dims="x", coords={"x": np.arange(len(v))}),
         set_first),
    Case("xarray Dataset", lambda v: xr.Dataset({"a": ("x", np.array(v))}), set_first_variable),
    Case("object with caches", Measured, grow_measured),
]  # fmt: skip


def _head(obj: Any) -> object:
    return obj.head() if hasattr(obj, "head") else obj[:5]


READS: dict[str, Callable[[Any], object]] = {
    "dtype": lambda obj: obj.dtype,
    "dtypes": lambda obj: obj.dtypes,
    "is_unique": lambda obj: obj.is_unique,
    "is_monotonic_increasing": lambda obj: obj.is_monotonic_increasing,
    "shape": lambda obj: obj.shape,
    "len": len,
    "repr": repr,
    "head": _head,
    "summary": lambda obj: summarize(obj, "value", Paging()),
    "brief": brief,
    "record_print": record_print,
    "contains": lambda obj: 3 in obj,
    "to_numpy": lambda obj: obj.to_numpy(),
    "memory_usage": lambda obj: obj.memory_usage(deep=True),
    "nbytes": lambda obj: obj.nbytes,
    "hasnans": lambda obj: obj.hasnans,
    "inferred_type": lambda obj: obj.inferred_type,
    "unique": lambda obj: obj.unique(),
    "describe": lambda obj: obj.describe(),
    "cached property": lambda obj: obj.total,
    "cached mean": lambda obj: obj.mean(),
}


def read(obj: Any, name: str) -> None:
    """One read-only access; those the value's type lacks are skipped."""
    with warnings.catch_warnings(), contextlib.suppress(Exception):
        warnings.simplefilter("ignore")
        READS[name](obj)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.sampled_from(CASES),
    values=st.lists(st.integers(0, 400), min_size=2, max_size=40),
    reads=st.lists(st.sampled_from(sorted(READS)), max_size=8),
)
def test_reads_leave_a_fingerprint_as_it_was_and_a_change_shows(
    case: Case, values: list[int], reads: list[str]
) -> None:
    value = case.build(values)
    before = fingerprint(value)
    assert before.hash and not before.untracked, case.name
    for name in reads:
        read(value, name)
    after = fingerprint(value)
    assert after == before and after.hash == before.hash, (case.name, reads)
    assert fingerprint(case.change(value, values)).hash != before.hash, case.name


def test_every_read_of_every_kind_leaves_the_fingerprint() -> None:
    """Each read at least once on each kind (the property test draws some of them)."""
    values = list(range(30, 0, -1))
    for case in CASES:
        value = case.build(values)
        before = fingerprint(value)
        for name in READS:
            read(value, name)
            assert fingerprint(value) == before, (case.name, name)


def test_the_demos_days_read_by_a_records_print_is_not_changed() -> None:
    rng = np.random.default_rng(7)
    days = days_like(list(rng.integers(0, 365, 600)))
    before = {"days": fingerprint(days)}
    record_print(days)  # what a replay's drift check reads: it fills pandas' caches
    assert changes(before, {"days": fingerprint(days)}) == []
    assert before["days"].describe() == f"DatetimeIndex 600 {days.dtype}"


def nested_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    picks = rng.integers(0, 100, rows)
    lists = pa.array(
        [[int(x), int(x) + 1] if x % 7 else None for x in picks], type=pa.list_(pa.int64())
    )
    structs = pa.StructArray.from_arrays(
        [pa.array(np.arange(rows)), pa.array(rng.random(rows))], names=["id", "w"]
    )
    return pd.DataFrame(
        {
            "l": pd.arrays.ArrowExtensionArray(lists),
            "s": pd.arrays.ArrowExtensionArray(structs),
            "n": np.arange(rows),
        }
    )


def nested_frame_after_warmup(rows: int) -> pd.DataFrame:
    """:func:`nested_frame`, once a small one is hashed: Arrow sets up its compute functions on
    their first call in a process (5-20 ms of CPU on a busy machine, once), and the time limit is
    held against the value's own cost."""
    assert fingerprint(nested_frame(10)).hash
    return nested_frame(rows)


def with_first(column: pd.Series, first: object) -> pd.Series:
    """``column`` (Arrow-backed) with another first cell."""
    arrow = column.array.__arrow_array__().combine_chunks()  # type: ignore[attr-defined]
    cells = pa.concat_arrays([pa.array([first], type=arrow.type), arrow.slice(1)])
    return pd.Series(pd.arrays.ArrowExtensionArray(cells), index=column.index)


def test_nested_arrow_columns_are_hashed_within_the_limit() -> None:
    frame = nested_frame_after_warmup(200_000)
    before = fingerprint(frame)
    assert before.hash and not before.untracked and before.sampled
    rechunked = frame.copy()
    rechunked["l"] = pd.arrays.ArrowExtensionArray(
        pa.chunked_array([frame["l"].array[:1_000], frame["l"].array[1_000:]])  # type: ignore[index]
    )
    assert fingerprint(rechunked).hash == before.hash == fingerprint(frame.copy()).hash
    edited = frame.copy()
    edited["l"] = with_first(frame["l"], [999])  # row 0 is always in the sample
    assert fingerprint(edited).hash != before.hash
    restructured = frame.copy()
    restructured["s"] = with_first(frame["s"], {"id": -1, "w": 0.0})
    assert fingerprint(restructured).hash != before.hash


def test_an_undo_snapshot_of_nested_arrow_columns_is_tracked_and_undone() -> None:
    frame = nested_frame_after_warmup(200_000)
    first = frame["l"].iloc[0]
    namespace: dict[str, Any] = {"df": frame}
    code = "df['l'] = edited"
    snapshot = take_snapshot(
        code, namespace, assessment=classify(code, existing={"df"}), budget=1024**3
    )
    assert not snapshot.prints["df"].untracked and snapshot.notice() is None
    frame["l"] = with_first(frame["l"], [999])
    step = step_changes(snapshot, namespace)
    assert step.lines() == ["df: DataFrame 200000×3, values changed"]
    undo_step(step, namespace)
    assert namespace["df"]["l"].iloc[0] == first and first != [999]


def test_the_time_limit_holds_inside_the_loop_over_cells() -> None:
    """A column whose cells are slow to hash (long lists: each a bounded walk) stops at the
    limit, not after every sampled cell."""
    slow = pd.DataFrame({"rows": pd.Series([list(range(2_000))] * 50_000, dtype=object)})
    started = time.thread_time()
    found = fingerprint(slow)
    took = time.thread_time() - started
    assert found.untracked and found.shape == (50_000, 1)
    assert took < 5 * fp.VALUE_TIME_S  # all 5,000 sampled cells take over a second


CALLS: list[str] = []  # what the classes below were asked


class Hostile:
    """A notebook's class whose every method a read could call says so."""

    def __init__(self, n: int) -> None:
        self.n = n

    @property
    def shape(self) -> tuple[int, ...]:
        CALLS.append("shape")
        return (self.n,)

    @property
    def dtype(self) -> str:
        CALLS.append("dtype")
        return "hostile"

    def __repr__(self) -> str:
        CALLS.append("repr")
        return "Hostile()"

    def __str__(self) -> str:
        CALLS.append("str")
        return "Hostile"

    def __eq__(self, other: object) -> bool:
        CALLS.append("eq")
        return True

    def __hash__(self) -> int:
        CALLS.append("hash")
        return 0

    def __len__(self) -> int:
        CALLS.append("len")
        return 1

    def __getattr__(self, name: str) -> object:
        CALLS.append(f"getattr {name}")
        raise AttributeError(name)


class Label(str):
    """A notebook's string class with its own repr, length and encoding."""

    def __repr__(self) -> str:
        CALLS.append("label repr")
        return "Label()"

    def __len__(self) -> int:
        CALLS.append("label len")
        return 0

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        CALLS.append("label encode")
        return b""


for _cls in (Hostile, Label):
    _cls.__module__ = "__main__"  # as a class defined in a notebook's cell


def test_a_fingerprint_runs_no_code_of_the_notebooks_classes() -> None:
    cells = pd.Series([Hostile(i) for i in range(100)], dtype=object)
    values = [
        Hostile(1), Label("north"), [Hostile(2), Label("south")], {"k": Hostile(3)},
        pd.DataFrame({"h": cells, "n": 1.0}), np.array([Hostile(4), Label("x")], dtype=object),
    ]  # fmt: skip
    CALLS.clear()
    prints = [fingerprint(value) for value in values]
    records = [record_print(values[0]), record_print(values[1])]
    assert CALLS == []
    assert prints[1].value == "'north'" and records[1].shape == "len 5"
    assert all(p.hash for p in prints)
    assert fingerprint(Hostile(2)).hash != prints[0].hash
    cells.iloc[0].n = -1  # the first cell is in the sample
    assert fingerprint(values[4]).hash != prints[4].hash
    assert CALLS == []


@pytest.mark.kernel
def test_the_demo_replay_says_no_step_changed_days(monkeypatch: pytest.MonkeyPatch) -> None:
    """No step of the demo touches ``days``; its replay reads it (the drift check's print)."""
    import io

    from qloop_kernel.headless.runner import AgentNotebookClient
    from qloop_kernel.testing import StandInAPI

    nb = nbformat.read(DEMO, as_version=4)
    with StandInAPI() as api:
        env = {**api.environment(), "ANTHROPIC_API_KEY": "", "QLOOP_REPLAY_RECEIVED": "1"}
        for name, value in {**env, "QLOOP_APPROVAL": "auto"}.items():
            monkeypatch.setenv(name, value)
        client = AgentNotebookClient(nb, progress=io.StringIO(), timeout=120, kernel_name="python3")
        client.execute()
    outputs = json.dumps([cell.get("outputs", []) for cell in nb.cells])
    assert "replay complete" in outputs
    assert "step 1/2 changed: " in outputs  # what each step changed is shown, as it runs
    assert "days:" not in outputs
