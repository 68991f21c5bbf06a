"""The generic summary and listing never measure, iterate or render an unknown lazy object;
pandas frames at any string backend stay within their work budget."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.values.summaries import bounded_repr
from qloop_kernel.values.summaries.trust import trusting

touched: list[str] = []


class DeferredTable:
    """Stands for a collection of an unknown library whose len, iteration and repr compute."""

    def __init__(self) -> None:
        self.source = "s3://bucket/table"

    def compute(self) -> list[int]:
        touched.append("compute")
        return [1, 2, 3]

    def __len__(self) -> int:
        touched.append("len")
        return 3

    def __iter__(self) -> Iterator[int]:
        touched.append("iter")
        return iter(self.compute())

    def __repr__(self) -> str:
        touched.append("repr")
        return "DeferredTable(rows=3)"

    def __sizeof__(self) -> int:
        touched.append("sizeof")
        return 64


class RemoteStore(Mapping[str, int]):
    """A mapping of an unknown library whose items are fetched on access."""

    def __getitem__(self, key: str) -> int:
        touched.append("getitem")
        return 1

    def __iter__(self) -> Iterator[str]:
        touched.append("iter")
        return iter(["a", "b"])

    def __len__(self) -> int:
        touched.append("len")
        return 2


class Plain:
    """An ordinary object of an unknown library: rendered, but not measured."""

    def __len__(self) -> int:
        touched.append("len")
        return 7

    def __repr__(self) -> str:
        return "Plain()"


@pytest.fixture(autouse=True)
def clear_touched() -> None:
    touched.clear()


def test_unknown_lazy_objects_are_not_touched() -> None:
    namespace: dict[str, Any] = {"table": DeferredTable(), "inside": {"t": DeferredTable()}}
    listing = list_variables(namespace)
    text = inspect_variable(namespace, "table")
    inside = inspect_variable(namespace, "inside")
    assert touched == []
    assert "lazy; not computed" in listing
    assert "Value: not rendered: this object has the methods of a lazy collection" in text
    assert "source: str = 's3://bucket/table'" in text and "compute" in text
    assert f"<{__name__}.DeferredTable (lazy; not rendered)>" in inside
    assert bounded_repr([DeferredTable()]) == f"[<{__name__}.DeferredTable (lazy; not rendered)>]"
    assert touched == []


def test_library_containers_are_neither_measured_nor_iterated() -> None:
    namespace: dict[str, Any] = {"store": RemoteStore(), "plain": Plain()}
    with trusting([f"{__name__}.RemoteStore", f"{__name__}.Plain"]):  # as installed libraries'
        listing = list_variables(namespace)
        store = inspect_variable(namespace, "store")
        plain = inspect_variable(namespace, "plain")
    assert "len" not in touched and "iter" not in touched and "getitem" not in touched
    assert "Length" not in plain and "Value: Plain()" in plain
    assert store.startswith(f"store: {__name__}.RemoteStore")
    lines = {line.split()[0]: line.split() for line in listing.splitlines()[2:]}
    assert "7" not in lines["plain"]


def mixed_frame(n_rows: int, storage: str) -> pd.DataFrame:
    """Float, int, object, str (of ``storage``) and datetime columns, with nulls."""
    rng = np.random.default_rng(7)
    words = np.array(["north", "south", "east", "west", None], dtype=object)
    string = pd.StringDtype(storage, na_value=np.nan)
    columns = {
        "f": np.where(rng.random(n_rows) < 0.1, np.nan, rng.normal(size=n_rows)),
        "i": rng.integers(0, 100, n_rows),
        "o": pd.Series(np.array(["a", 1, None], dtype=object)[rng.integers(0, 3, n_rows)]),
        "s": pd.Series(words[rng.integers(0, 5, n_rows)], dtype=string),
        "d": pd.date_range("2021-01-01", periods=n_rows, freq="s"),
    }
    return pd.DataFrame(
        {f"{name}{k}": values for k in range(10) for name, values in columns.items()}
    )


@pytest.mark.parametrize("storage", ["python", "pyarrow"])
def test_big_frame_nulls_are_exact_where_free_and_estimated_elsewhere(storage: str) -> None:
    if storage == "pyarrow":
        pytest.importorskip("pyarrow")
    df = mixed_frame(1_000_000, storage)
    text = inspect_variable({"df": df}, "df")
    assert "~ null share estimated from the sample (an exact count scans every row)" in text
    rows = {
        line.split()[0]: line.split() for line in text.splitlines() if line and line[0] in "fiosd"
    }
    assert rows["i0"][2] == "0"  # integers cannot hold nulls: exact
    assert rows["f0"][2].startswith("~")  # 10 million float cells: from the sample
    share = float(rows["f0"][2].strip("~%"))
    assert 8.5 < share < 11.5
    if storage == "pyarrow":
        exact = int(df["s0"].isna().sum())
        assert rows["s0"][2:4] == [f"{exact:,}", f"({exact / len(df):.1%})"]  # Arrow keeps it
    else:
        assert rows["s0"][2].startswith("~")


def test_small_frame_nulls_are_exact() -> None:
    df = mixed_frame(50_000, "python")
    text = inspect_variable({"df": df}, "df", columns=["f0", "s0", "o0"])
    assert "estimated" not in text
    assert f"{int(df['f0'].isna().sum()):,} (" in text
