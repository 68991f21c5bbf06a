"""pyarrow Table, RecordBatch, arrays and datasets: schema, rows, null counts and a head slice.

A dataset's files are not read: neither its rows counted nor a head taken, unless rows are asked.
"""

from __future__ import annotations

from typing import Any

from ...text import counted
from .common import (
    HEAD_COLUMNS,
    LISTED_COLUMNS,
    Brief,
    Kind,
    Paging,
    count_with_share,
    cut,
    format_bytes,
    format_table,
    instance_of,
    lazy_note,
    pick_columns,
    window,
)
from .polars import rows_table
from .reprs import bounded_repr


def is_arrow_table(obj: object) -> bool:
    """A pyarrow Table or RecordBatch."""
    return instance_of(obj, "pyarrow", "Table", "RecordBatch")


def is_arrow_array(obj: object) -> bool:
    """A pyarrow Array or ChunkedArray."""
    return instance_of(obj, "pyarrow", "Array", "ChunkedArray")


def is_arrow_dataset(obj: object) -> bool:
    """A pyarrow.dataset Dataset."""
    return instance_of(obj, "pyarrow.dataset", "Dataset")


def _type_name(obj: object) -> str:
    return f"pyarrow.{type(obj).__name__}"


def summarize_arrow_table(table: Any, label: str, paging: Paging) -> str:
    """Schema with null counts, rows, bytes and a head slice."""
    names = list(table.schema.names)
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    head = positions if paging.columns else positions[:HEAD_COLUMNS]
    start, stop = window(paging, table.num_rows, "rows")
    rows = [
        [
            cut(names[p], 40),
            cut(str(table.schema.field(p).type), 40),
            count_with_share(table.column(p).null_count, table.num_rows),
        ]
        for p in listed
    ]
    chunked = bool(names) and hasattr(table.column(0), "num_chunks")  # a Table, not a batch
    chunks = f", {table.column(0).num_chunks:,} chunks" if chunked else ""
    lines = [
        f"{label}: {_type_name(table)}, {table.num_rows:,} rows x {table.num_columns:,} columns, "
        f"{format_bytes(int(table.nbytes))}{chunks}",
        "",
        rows_table(table, [names[p] for p in head], start, stop),
        "",
        f"Schema ({len(listed)} of {len(names):,} columns):",
        format_table(["column", "type", "nulls"], rows),
        *_metadata_lines(table.schema),
    ]
    return "\n".join(lines).rstrip()


def _metadata_lines(schema: Any) -> list[str]:
    metadata = schema.metadata or {}
    if not metadata:
        return []
    keys = ", ".join(bounded_repr(key, 40) for key in list(metadata)[:10])
    return ["", f"Schema metadata keys: {keys}"]


def summarize_arrow_array(array: Any, label: str, paging: Paging) -> str:
    """Type, length, null count and a window of values."""
    start, stop = window(paging, len(array), "values")
    lines = [
        f"{label}: {_type_name(array)}, type {array.type}, {len(array):,} values, "
        f"{format_bytes(int(array.nbytes))}",
        f"Nulls: {count_with_share(array.null_count, len(array))}",
    ]
    if stop > start:
        lines += ["", f"Values {start:,}-{stop - 1:,} of {len(array):,}:"]
        values = array.slice(start, stop - start).to_pylist()
        lines += [f"  [{i:,}] {bounded_repr(v, 100)}" for i, v in enumerate(values, start)]
    return "\n".join(lines)


def summarize_arrow_dataset(dataset: Any, label: str, paging: Paging) -> str:
    """Schema, format and files; rows only when asked (that reads files)."""
    names = list(dataset.schema.names)
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    schema = [[cut(names[p], 40), cut(str(dataset.schema.field(p).type), 40)] for p in listed]
    lines = [
        f"{label}: {_type_name(dataset)} (read lazily), {len(names):,} columns",
        *_dataset_files(dataset),
        lazy_note("the number of rows", f"run {label}.count_rows() with run_code to count"),
        "",
        f"Schema ({len(listed)} of {len(names):,} columns):",
        format_table(["column", "type"], schema),
        "",
        _dataset_head(dataset, [names[p] for p in positions[:HEAD_COLUMNS]], paging),
    ]
    return "\n".join(lines).rstrip()


def _dataset_files(dataset: Any) -> list[str]:
    files = getattr(dataset, "files", None)
    if not isinstance(files, list):
        return []
    shown = ", ".join(cut(str(path), 120) for path in files[:3])
    more = f" ... (+{len(files) - 3:,} more)" if len(files) > 3 else ""
    fmt = getattr(getattr(dataset, "format", None), "default_extname", "") or "?"
    return [f"Files ({len(files):,}, format {fmt}): {shown}{more}"]


def _dataset_head(dataset: Any, columns: list[str], paging: Paging) -> str:
    if not paging.rows_asked:
        return "Rows: not read; pass rows=N to read the first N rows (that reads the first files)."
    table = dataset.head(paging.offset + paging.rows_asked, columns=columns)
    start, stop = window(paging, table.num_rows, "rows read")
    return rows_table(table, columns, start, stop)


def brief_arrow_table(table: Any) -> Brief:
    """Shape, bytes and column types of a Table or RecordBatch."""
    types = ", ".join(str(field.type) for field in list(table.schema)[:6])
    return Brief(
        f"{table.num_rows:,} x {table.num_columns:,}",
        format_bytes(int(table.nbytes)),
        cut(types, 60),
    )


def brief_arrow_array(array: Any) -> Brief:
    """Length, bytes and type of an Arrow array."""
    return Brief(f"{len(array):,}", format_bytes(int(array.nbytes)), cut(f"type {array.type}", 60))


def brief_arrow_dataset(dataset: Any) -> Brief:
    """Columns of a dataset; its rows are not counted."""
    files = getattr(dataset, "files", None)
    count = f"{counted(len(files), 'file')}; " if isinstance(files, list) else ""
    return Brief(f"? x {len(dataset.schema.names):,}", "", cut(f"lazy, {count}dataset", 60))


_ARROW = frozenset({"pyarrow"})
KINDS = [
    Kind("Arrow table", _ARROW, is_arrow_table, summarize_arrow_table, brief_arrow_table, True),
    Kind("Arrow array", _ARROW, is_arrow_array, summarize_arrow_array, brief_arrow_array),
    Kind(
        "Arrow dataset",
        _ARROW,
        is_arrow_dataset,
        summarize_arrow_dataset,
        brief_arrow_dataset,
        True,
    ),
]
