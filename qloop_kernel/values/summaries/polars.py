"""polars DataFrame and Series: schema, height, null counts (kept by polars) and a head."""

from __future__ import annotations

from typing import Any

from .common import (
    HEAD_COLUMNS,
    HEAD_COLWIDTH,
    LISTED_COLUMNS,
    Brief,
    Kind,
    Paging,
    count_with_share,
    cut,
    dtype_counts,
    format_bytes,
    format_shape,
    format_table,
    instance_of,
    pick_columns,
    window,
)
from .reprs import bounded_repr


def is_polars_frame(obj: object) -> bool:
    """A polars DataFrame."""
    return instance_of(obj, "polars", "DataFrame")


def is_polars_series(obj: object) -> bool:
    """A polars Series."""
    return instance_of(obj, "polars", "Series")


def summarize_polars_frame(df: Any, label: str, paging: Paging) -> str:
    """Schema with null counts, height, estimated size and a window of rows."""
    names = list(df.columns)
    dtypes = list(df.dtypes)
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    head = positions if paging.columns else positions[:HEAD_COLUMNS]
    start, stop = window(paging, df.height, "rows")
    nulls = df.null_count().row(0)  # polars keeps a null count per column
    rows = [
        [cut(names[p], 40), cut(str(dtypes[p]), 40), count_with_share(nulls[p], df.height)]
        for p in listed
    ]
    lines = [
        f"{label}: polars.DataFrame, {df.height:,} rows x {df.width:,} columns, "
        f"estimated size {format_bytes(int(df.estimated_size()))}",
        f"dtypes: {dtype_counts(dtypes)}",
        "",
        rows_table(df, [names[p] for p in head], start, stop),
        "",
        f"Columns ({len(listed)} of {df.width:,}):",
        format_table(["column", "dtype", "nulls"], rows),
    ]
    return "\n".join(lines).rstrip()


def rows_table(df: Any, columns: list[str], start: int, stop: int) -> str:
    """Rows ``start``-``stop`` of ``columns`` of a polars or Arrow table as a text table."""
    if stop <= start:
        return "No rows." if not df.shape[0] else ""
    part = df.slice(start, stop - start).select(columns)
    cells = [[bounded_repr(value, HEAD_COLWIDTH) for value in row] for row in _row_tuples(part)]
    shown = ""
    if len(columns) < df.shape[1]:
        shown = f"; {len(columns)} of {df.shape[1]:,} columns, pass columns=[...] to pick others"
    return f"Rows {start:,}-{stop - 1:,} of {df.shape[0]:,}{shown}:\n" + format_table(
        columns, cells
    )


def _row_tuples(part: Any) -> list[tuple[Any, ...]]:
    if hasattr(part, "rows"):  # polars
        return list(part.rows())
    columns = part.to_pydict()  # pyarrow
    return list(zip(*columns.values(), strict=True))


def summarize_polars_series(series: Any, label: str, paging: Paging) -> str:
    """dtype, length, null count and a window of values."""
    start, stop = window(paging, len(series), "values")
    lines = [
        f"{label}: polars.Series {bounded_repr(series.name, 60)}, dtype {series.dtype}, "
        f"{len(series):,} values, estimated size {format_bytes(int(series.estimated_size()))}",
        f"Nulls: {count_with_share(int(series.null_count()), len(series))}",
    ]
    if stop > start:
        lines += ["", f"Values {start:,}-{stop - 1:,} of {len(series):,}:"]
        values = series.slice(start, stop - start).to_list()
        lines += [f"  [{i:,}] {bounded_repr(v, 100)}" for i, v in enumerate(values, start)]
    return "\n".join(lines)


def brief_polars_frame(df: Any) -> Brief:
    """Shape, estimated size and dtypes of a polars DataFrame."""
    size = format_bytes(int(df.estimated_size()))
    return Brief(format_shape(df.shape), size, cut(dtype_counts(list(df.dtypes)), 60))


def brief_polars_series(series: Any) -> Brief:
    """Length, estimated size and dtype of a polars Series."""
    size = format_bytes(int(series.estimated_size()))
    return Brief(f"{len(series):,}", size, f"dtype {series.dtype}")


_POLARS = frozenset({"polars"})
KINDS = [
    Kind(
        "polars DataFrame",
        _POLARS,
        is_polars_frame,
        summarize_polars_frame,
        brief_polars_frame,
        True,
    ),
    Kind("polars Series", _POLARS, is_polars_series, summarize_polars_series, brief_polars_series),
]
