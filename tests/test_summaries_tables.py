"""polars, pyarrow, xarray and jax/torch objects: schemas and heads, nothing computed or copied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolInputError


def sales(rows: int = 100) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": range(rows),
            "city": [None if i % 4 == 0 else f"c{i % 3}" for i in range(rows)],
            "amount": np.arange(rows) * 1.5,
        }
    )


def row(text: str, first: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.split()[:1] == [first])


# ---------------------------------------------------------------------------------------------
# polars
# ---------------------------------------------------------------------------------------------


def test_polars_frame_schema_nulls_and_head() -> None:
    pl = pytest.importorskip("polars")
    namespace = {"df": pl.from_pandas(sales())}
    text = inspect_variable(namespace, "df", offset=10, rows=2)
    assert text.startswith("df: polars.DataFrame, 100 rows x 3 columns, estimated size")
    assert "Rows 10-11 of 100:" in text and "'c1'" in text and "'c2'" in text
    assert row(text, "city") == ["city", "String", "25", "(25.0%)"]
    assert "100 x 3" in list_variables(namespace)
    with pytest.raises(ToolInputError, match="did you mean \\['city'\\]"):
        inspect_variable(namespace, "df", columns=["cty"])


def test_polars_lazyframe_is_never_collected() -> None:
    pl = pytest.importorskip("polars")
    calls: list[int] = []

    def explode(value: int) -> int:
        calls.append(value)
        raise RuntimeError("the plan ran")

    plan = (
        pl.from_pandas(sales())
        .lazy()
        .with_columns(pl.col("id").map_elements(explode, return_dtype=pl.Int64).alias("boom"))
    )
    namespace = {"plan": plan, "nested": [plan]}
    text = inspect_variable(namespace, "plan", rows=5)
    listing = list_variables(namespace)
    nested = inspect_variable(namespace, "nested")
    assert calls == []
    assert text.startswith("plan: polars.LazyFrame (lazy query plan), 4 columns")
    assert "boom    Int64" in text and "Not computed: rows and values" in text
    assert "? x 4" in listing and "lazy plan" in listing
    assert "<polars.LazyFrame (lazy; not rendered)>" in nested
    with pytest.raises(RuntimeError, match="the plan ran"):  # the plan does fail when run
        plan.collect()


# ---------------------------------------------------------------------------------------------
# pyarrow
# ---------------------------------------------------------------------------------------------


def test_arrow_table_batch_and_array() -> None:
    pa = pytest.importorskip("pyarrow")
    table = pa.Table.from_pandas(sales(), preserve_index=False)
    namespace = {"table": table, "batch": table.to_batches()[0], "ids": table.column("id")}
    text = inspect_variable(namespace, "table", columns=["city", "id"], offset=4, rows=2)
    assert text.startswith("table: pyarrow.Table, 100 rows x 3 columns")
    assert "Rows 4-5 of 100; 2 of 3 columns" in text
    assert row(text.split("Schema")[1], "city")[2:4] == ["25", "(25.0%)"]
    assert "Schema (2 of 3 columns)" in text and "amount" not in text.split("Schema")[1]
    assert inspect_variable(namespace, "batch").startswith("batch: pyarrow.RecordBatch, 100 rows")
    assert "[99] 99" in inspect_variable(namespace, "ids", offset=98)
    listing = list_variables(namespace)
    assert "100 x 3" in listing and "type int64" in listing
    with pytest.raises(ToolInputError, match="offset 100 is past the end"):
        inspect_variable(namespace, "table", offset=100)


def test_arrow_dataset_reads_no_file_until_rows_are_asked(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    ds = pytest.importorskip("pyarrow.dataset")
    pq.write_table(pa.Table.from_pandas(sales(), preserve_index=False), tmp_path / "a.parquet")
    dataset = ds.dataset(tmp_path, format="parquet")
    namespace = {"dataset": dataset}
    text = inspect_variable(namespace, "dataset")
    assert "Files (1, format parquet)" in text and "a.parquet" in text
    assert "Rows: not read" in text
    # Files replaced by garbage: a summary that read them would fail.
    (tmp_path / "a.parquet").write_bytes(b"not parquet")
    assert inspect_variable(namespace, "dataset") == text
    assert "? x 3" in list_variables(namespace)
    failed = inspect_variable(namespace, "dataset", rows=2)  # reading rows fails: said, not raised
    assert "summary failed (ArrowInvalid: " in failed.splitlines()[1]


# ---------------------------------------------------------------------------------------------
# xarray
# ---------------------------------------------------------------------------------------------


def test_xarray_dataset_and_data_array() -> None:
    xr = pytest.importorskip("xarray")
    pytest.importorskip("dask")
    temps = xr.DataArray(
        np.arange(12.0).reshape(3, 4),
        dims=("time", "site"),
        coords={"time": [1, 2, 3]},
        name="temp",
        attrs={"units": "degC"},
    )
    dataset = xr.Dataset({"temp": temps, "rain": ("time", [0.0, 1.5, 3.0])}).chunk({"time": 1})
    namespace = {"temps": temps, "dataset": dataset}
    text = inspect_variable(namespace, "dataset")
    assert text.startswith("dataset: xarray.Dataset, dims time: 3, site: 4; 2 data variables")
    assert row(text, "temp") == ["temp", "(time,", "site)", "float64", "3", "x", "4", "dask,"] + [
        "3",
        "chunks",
        "of",
        "1",
        "x",
        "4",
    ]
    assert row(text, "time")[-3:] == ["index,", "in", "memory"]
    array = inspect_variable(namespace, "temps", offset=1, rows=1)
    assert "xarray.DataArray 'temp', dims time: 3, site: 4, dtype float64" in array
    assert "units: 'degC'" in array and "mean 5.5" in array
    assert "Rows 1-1 along axis 0 (of 3):\n[[4., 5., 6., 7.]]" in array
    lazy_array = inspect_variable({"t": dataset["temp"]}, "t")
    assert "Not computed: the values" in lazy_array
    assert "2 variables; dims time: 3, site: 4" in list_variables(namespace)


# ---------------------------------------------------------------------------------------------
# Tensors
# ---------------------------------------------------------------------------------------------


def test_jax_array() -> None:
    jnp = pytest.importorskip("jax.numpy")
    namespace = {"weights": jnp.arange(200_000.0).reshape(100, 2_000)}
    text = inspect_variable(namespace, "weights", rows=2)
    assert text.startswith("weights: jax.Array, shape 100 x 2,000, dtype float32")
    assert "devices cpu:0" in text
    assert "Statistics on 2,048 evenly spaced of 200,000 elements, gathered on cpu:0" in text
    assert "Rows 0-1 along axis 0, first elements of other axes:" in text
    assert "100 x 2,000" in list_variables(namespace)


def test_torch_tensor() -> None:
    torch = pytest.importorskip("torch")
    namespace: dict[str, Any] = {"t": torch.arange(12.0).reshape(3, 4)}
    text = inspect_variable(namespace, "t", rows=1)
    assert text.startswith("t: torch.Tensor, shape 3 x 4, dtype torch.float32, device cpu")
    assert "mean 5.5" in text and "Rows 0-0 along axis 0:" in text
