"""Fingerprints of namespace values and the one-line summaries of what a step changed (no kernel)."""

from __future__ import annotations

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from qloop_kernel.values import fingerprint as fp
from qloop_kernel.values.fingerprint import (
    Change,
    change_lines,
    changes,
    compare_changes,
    describe_change,
    fingerprint,
    tracked_names,
)


def dated_frame(rows: int = 600) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "date": [f"2024-01-{i % 28 + 1:02d}" for i in range(rows)],
            "a": range(rows),
            "b": 1.0,
            "c": "x",
            "d": 2,
        }
    )


def test_a_frame_that_lost_rows_and_a_parsed_column_reads_as_one_line() -> None:
    df = dated_frame()
    after = df.drop(index=[0, 1])
    after["date"] = pd.to_datetime(after["date"])
    [change] = changes({"df": fingerprint(df)}, {"df": fingerprint(after)})
    unit = after["date"].dtype  # datetime64 with the unit pandas chose
    assert change.line == f"df: DataFrame 600×5 → 598×5, column date str → {unit}"
    assert change.kind == "changed" and change.hash == fingerprint(after).hash


def test_created_changed_and_deleted_variables_each_get_a_line() -> None:
    before = {"x": fingerprint(5), "items": fingerprint([1, 2]), "old": fingerprint("gone")}
    after = {
        "x": fingerprint(6),
        "items": fingerprint([1, 2, 3]),
        "y": fingerprint(np.zeros((3, 4))),
    }
    assert [c.line for c in changes(before, after)] == [
        "y: created (ndarray 3×4 float64)",
        "items: list len 2 → len 3",
        "x: int 5 → 6",
        "old: deleted (was str len 4 'gone')",
    ]


def test_columns_added_removed_and_values_changed() -> None:
    df = pd.DataFrame({"a": [1, 2, 3], "b": [4, 5, 6]})
    wider = df.assign(c=0).drop(columns=["b"])
    assert describe_change(fingerprint(df), fingerprint(wider)) == (
        "DataFrame 3×2, added column c, removed column b"
    )
    edited = df.copy()
    edited.loc[1, "a"] = 20
    assert describe_change(fingerprint(df), fingerprint(edited)) == "DataFrame 3×2, values changed"
    assert describe_change(fingerprint(df), fingerprint(df.copy())) is None  # equal content
    assert describe_change(fingerprint(1), fingerprint("one")) == "int 1 → str len 3 'one'"


def test_private_variables_show_their_type_only() -> None:
    before, after = (
        {"token": fingerprint("abc")},
        {"token": fingerprint("abcdef"), "key": fingerprint("k" * 9)},
    )
    lines = [c.line for c in changes(before, after, private={"token", "key"})]
    assert lines == ["key: created (str)", "token: str, changed"]
    assert "abc" not in " ".join(lines)


def test_big_frames_are_hashed_from_a_bounded_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    hashed: list[int] = []
    real = pd.util.hash_pandas_object
    monkeypatch.setattr(
        pd.util, "hash_pandas_object", lambda obj, **kw: hashed.append(obj.size) or real(obj, **kw)
    )
    frame = pd.DataFrame(np.arange(2_000_000 * 5).reshape(2_000_000, 5))
    print_ = fingerprint(frame)
    assert print_.shape == (2_000_000, 5) and print_.hash
    assert hashed and hashed[0] <= fp.HASH_CELLS  # cells hashed, of 10,000,000
    frame.iloc[0, 0] = -1  # the first row is always in the sample
    assert fingerprint(frame).hash != print_.hash


def test_object_cells_are_hashed_without_their_own_code() -> None:
    reads = []

    class Cell:
        def __init__(self, n: int) -> None:
            self.n = n

        def __str__(self) -> str:
            reads.append(self.n)
            return str(self.n)

    column = pd.Series([Cell(i) for i in range(500_000)], dtype=object)
    frame = pd.DataFrame({"cell": column, "n": 1})
    # What is checked is that no cell's own code runs, not the time limit (test_fingerprint_reads
    # checks that): 500,000 object cells take 12-16 ms of the 20 ms, more on a busy machine.
    before = fingerprint(frame, seconds=1.0)
    assert before.hash and not before.untracked and reads == []
    column.iloc[0].n = -1  # the first row is always in the sample
    assert fingerprint(frame, seconds=1.0).hash != before.hash and reads == []


def test_arrays_polars_and_arrow_are_sampled() -> None:
    array = np.random.default_rng(0).random((1_000, 500))
    shown = fingerprint(array)
    assert (shown.shape, shown.dtype) == ((1_000, 500), "float64") and shown.hash
    assert fingerprint(array.T).hash != shown.hash  # a strided view is read in its own order
    frame = pl.DataFrame({"a": range(10), "s": ["x"] * 10})
    assert fingerprint(frame).describe() == "polars DataFrame 10×2"
    assert fingerprint(frame).columns == (("a", "Int64"), ("s", "String"))
    assert fingerprint(frame.with_columns(pl.col("a") * 2)).hash != fingerprint(frame).hash
    table = pa.table({"a": [1, 2, 3]})
    assert fingerprint(table).describe() == "pyarrow Table 3×1"
    assert fingerprint(pa.table({"a": [1, 2, 4]})).hash != fingerprint(table).hash


def test_lazy_collections_are_described_without_computing() -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("a fingerprint computed a dask collection")

    lazy = dd.from_pandas(dated_frame(), npartitions=3)
    with dask.config.set(scheduler=refuse):
        shown = fingerprint(lazy)
    assert shown.describe() == "dask DataFrame ?×5" and shown.hash == ""
    plan = (
        pl.DataFrame({"a": [1]})
        .lazy()
        .with_columns(b=pl.col("a").map_elements(refuse, return_dtype=pl.Int64))
    )
    assert fingerprint(plan).columns[0] == ("a", "Int64")
    # Without a hash, a name bound to another plan still reads as changed.
    assert describe_change(fingerprint(lazy), fingerprint(lazy[lazy.a > 1])) == (
        "dask DataFrame ?×5, rebound to a new object"
    )
    assert describe_change(fingerprint(lazy), fingerprint(lazy)) is None


def test_a_value_that_cannot_be_read_is_described_by_its_type() -> None:
    class Broken:
        @property
        def __dict__(self) -> dict[str, object]:  # type: ignore[override]
            raise RuntimeError("no")

    assert fingerprint(Broken()).type.endswith("Broken")


def test_containers_are_hashed_up_to_a_node_budget() -> None:
    nested = [[i, str(i)] for i in range(100)]
    changed = [[i, str(i)] for i in range(100)]
    changed[50][1] = "fifty"
    assert fingerprint(nested).hash != fingerprint(changed).hash
    huge = list(range(fp.WALK_NODES * 5))
    tail = [*huge[:-1], -1]
    assert fingerprint(huge).hash == fingerprint(tail).hash  # past the budget: not read


def test_tracked_names_leave_out_ipython_and_private_names() -> None:
    hidden_value = object()
    ns = {"df": 1, "_": 2, "_i3": 3, "In": [], "get_ipython": print, "exit": hidden_value}
    assert tracked_names(ns, {"exit": hidden_value}) == ["df"]


def test_change_lines_are_bounded() -> None:
    many = [Change(f"v{i}", "created", "created (int 1)") for i in range(40)]
    lines = change_lines(many, limit=30)
    assert len(lines) == 31 and lines[-1] == "… and 10 more"


def test_compare_changes_names_what_differs_from_the_saved_run() -> None:
    saved = [
        Change("df", "changed", "DataFrame 600×5 → 598×5", "h1"),
        Change("y", "created", "created (int 3)", "h2"),
        Change("z", "changed", "int 1 → 2", "h3"),
    ]
    now = [
        Change("df", "changed", "DataFrame 800×5 → 798×5", "h4"),
        Change("y", "created", "created (int 3)", "h9"),
        Change("w", "created", "created (int 1)", "h5"),
    ]
    assert compare_changes(saved, now) == [
        "df: DataFrame 600×5 → 598×5 in the saved run, DataFrame 800×5 → 798×5 now",
        "w: created (int 1) now, untouched in the saved run",
        "y: created (int 3), with other values than in the saved run",
        "z: int 1 → 2 in the saved run, untouched now",
    ]
    assert compare_changes(saved, saved) == []


def test_a_frame_with_cells_pandas_cannot_hash_still_shows_changed_values() -> None:
    frame = pd.DataFrame(
        {"pairs": pd.Series([(1, 2), [3], {"k": 4}] * 100, dtype=object), "n": 1.0}
    )
    edited = frame.copy()
    edited["n"] = 2.0
    assert fingerprint(frame).hash and fingerprint(frame).hash == fingerprint(frame.copy()).hash
    assert (
        describe_change(fingerprint(frame), fingerprint(edited))
        == "DataFrame 300×2, values changed"
    )


def stable_values() -> dict[str, object]:
    rows = 3_000
    return {
        "int": 42, "float": 2.5, "str": "revenue by month", "bytes": b"\x00\x01abc", "none": None,
        "list": [1, 2, "three"], "dict": {"a": 1, "b": [2, 3]}, "set": {3, 1, 2},
        "ndarray": np.arange(12.0).reshape(3, 4),
        "frame": pd.DataFrame({
            "a": range(rows), "c": ["x", "y", "z"] * (rows // 3),
            "d": pd.Series(["p", None, np.nan] * (rows // 3), dtype=object),
            "e": pd.date_range("2024-01-01", periods=rows, freq="h"),
        }),
        "float frame": pd.DataFrame({"b": np.linspace(0, 1, rows)}),
        "series": pd.Series(np.arange(rows), name="n"),
        "strings": pd.Series(["a", "bb", None] * 100, dtype=object, name="s"),
        "arrow": pa.table({"a": [1, 2, 3], "s": ["x", None, "z"]}),
    }  # fmt: skip


# The content hashes of these values as saved records hold them in their steps' changes: a replay
# compares them with the hashes of its own run. A float64 column was hashed as Python objects
# until it was read from its bytes (de880095a5bb37f9 before); the others are unchanged since.
STABLE = {
    "int": "11fb9aabf18da861", "float": "a0262049d4726ee0", "str": "96edb7616086b714",
    "bytes": "ea3b69c0f1fedf48", "none": "f193ee68331ffe60", "list": "90d0e9ae429984fe",
    "dict": "a4e921e65420a791", "set": "7c6cdbf91e45b536", "ndarray": "e50df1f5356bccd6",
    "frame": "298476dfee84e8c1", "float frame": "520ddef1de691eff",
    "series": "5f3496d93e62a4b5", "strings": "5f92568cbbcc54b1", "arrow": "115ecb4c1ccea1f5",
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(STABLE))
def test_a_value_hashes_as_the_changes_of_saved_steps_hold_it(name: str) -> None:
    assert fingerprint(stable_values()[name]).hash == STABLE[name]
