"""Lazy and distributed collections: dask, Spark and polars plans, described and never run.

Only metadata is read: dask's dtypes, partitions, divisions and chunks; a Spark DataFrame's
schema, storage level and ``explain()`` plan; a polars LazyFrame's ``collect_schema()``. While
dask metadata is read, a computation started by this thread is refused (some divisions are
only known by computing them). Rows are read only when the caller asks for them with
``rows=``, and then only from the first partition (dask) or through a ``take`` (Spark).
"""

from __future__ import annotations

import contextlib
import io
import math
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from qloop_kernel.errors import ToolInputError

from .common import (
    HEAD_COLUMNS,
    HEAD_COLWIDTH,
    HEAD_ELEMENTS,
    ITEM_CHARS,
    LISTED_COLUMNS,
    PLAN_CHARS,
    Brief,
    Kind,
    Paging,
    cut,
    dtype_counts,
    format_bytes,
    format_shape,
    format_table,
    instance_of,
    lazy_note,
    loaded_module,
    pick_columns,
    qualified_name,
)
from .numpy import format_array
from .pandas import strings_cut
from .reprs import bounded_repr

T = TypeVar("T")


class ComputeRefused(Exception):
    """A dask computation was started while only metadata was being read."""


@contextlib.contextmanager
def refusing_dask_compute() -> Iterator[None]:
    """Within this block, a dask computation started by this thread raises ComputeRefused.

    Other threads keep the scheduler they had: the block swaps dask's configured scheduler for
    one that refuses only this thread's work and passes the rest on.
    """
    dask = loaded_module("dask")
    base = loaded_module("dask.base")
    if dask is None or base is None:
        yield
        return
    previous = base.get_scheduler()
    passed_on = getattr(previous, "get", previous) or base.named_schedulers["threads"]
    inspecting = threading.get_ident()

    # Any: what the passed-on scheduler computes from the graph, whatever it is
    def refuse(dsk: Any, keys: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == inspecting:
            raise ComputeRefused
        return passed_on(dsk, keys, **kwargs)

    with dask.config.set(scheduler=refuse):
        yield


def _metadata(read: Callable[[], T]) -> T | None:
    """``read()``, or None when it would have computed something."""
    try:
        with refusing_dask_compute():
            return read()
    except ComputeRefused:
        return None


def _not_read(how: str) -> str:
    return f"Rows: not read; {how}."


# ---------------------------------------------------------------------------------------------
# dask DataFrame, Series and Index
# ---------------------------------------------------------------------------------------------


def is_dask_frame(obj: object) -> bool:
    """A dask DataFrame."""
    return instance_of(obj, "dask.dataframe", "DataFrame")


def is_dask_series(obj: object) -> bool:
    """A dask Series or Index."""
    return instance_of(obj, "dask.dataframe", "Series", "Index")


def _partitions_text(collection: Any) -> str:
    count = _metadata(lambda: int(collection.npartitions))
    if count is None:
        return "partitions not known without computing"
    return f"{count:,} partition{'s' if count != 1 else ''}"


def _divisions_line(collection: Any) -> str:
    divisions = _metadata(lambda: tuple(collection.divisions))
    if divisions is None:
        return "Divisions: not known without computing them"
    if not divisions or any(d is None for d in divisions):
        return "Divisions: unknown (the index is not sorted into known partitions)"
    return (
        f"Divisions: known, index from {bounded_repr(divisions[0], 60)} "
        f"to {bounded_repr(divisions[-1], 60)} ({len(divisions):,} boundaries)"
    )


def _count_note(label: str) -> str:
    return lazy_note(
        "the number of rows", f"it reads every partition; run len({label}) with run_code to count"
    )


def summarize_dask_frame(ddf: Any, label: str, paging: Paging) -> str:
    """dtypes, partitions, divisions and columns; rows of the first partition on request."""
    names = [str(column) for column in ddf.columns]
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    dtypes = list(ddf.dtypes)
    rows = [[cut(names[p], 40), str(dtypes[p])] for p in listed]
    lines = [
        f"{label}: {qualified_name(type(ddf))} (lazy), {len(names):,} columns, "
        f"{_partitions_text(ddf)}",
        _count_note(label),
        _divisions_line(ddf),
        f"Index: dtype {ddf.index.dtype}, name {bounded_repr(ddf.index.name, 60)}",
        f"dtypes: {dtype_counts(dtypes)}",
        "",
        f"Columns ({len(listed)} of {len(names):,}):",
        format_table(["column", "dtype"], rows),
        "",
        _dask_head(ddf, [names[p] for p in positions[:HEAD_COLUMNS]], paging, label),
    ]
    return "\n".join(lines).rstrip()


def summarize_dask_series(series: Any, label: str, paging: Paging) -> str:
    """dtype, name, partitions and divisions; values of the first partition on request."""
    lines = [
        f"{label}: {qualified_name(type(series))} (lazy) {bounded_repr(series.name, 60)}, "
        f"dtype {series.dtype}, {_partitions_text(series)}",
        _count_note(label),
        _divisions_line(series),
        "",
        _dask_head(series, None, paging, label),
    ]
    return "\n".join(lines).rstrip()


def _dask_head(collection: Any, columns: list[str] | None, paging: Paging, label: str) -> str:
    if not paging.rows_asked:
        return _not_read(
            "pass rows=N to read up to N rows of the first partition "
            "(that computes the first partition only)"
        )
    source = collection[columns] if columns is not None else collection
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Insufficient elements", UserWarning)
        head = source.head(paging.offset + paging.rows_asked, npartitions=1)
    if paging.offset and paging.offset >= len(head):
        raise ToolInputError(
            f"offset {paging.offset:,} is past the {len(head):,} rows read from the first "
            f"partition of {label!r}; rows past the first partition are not read here (that "
            "computes other partitions); select them with run_code"
        )
    shown = head.iloc[paging.offset :]
    frame = shown.to_frame() if shown.ndim == 1 else shown
    table = strings_cut(frame, HEAD_COLWIDTH).to_string(max_colwidth=HEAD_COLWIDTH)
    first, last = paging.offset, paging.offset + len(shown) - 1
    return f"Rows {first:,}-{last:,} of the first partition (only that partition was computed):\n{table}"


def brief_dask_frame(ddf: Any) -> Brief:
    """Columns, partitions and dtypes of a dask DataFrame; its rows are not counted."""
    width = len(ddf.columns)
    details = f"lazy, {_partitions_text(ddf)}; {dtype_counts(list(ddf.dtypes))}"
    return Brief(f"? x {width:,}", "", cut(details, 60))


def brief_dask_series(series: Any) -> Brief:
    """Partitions and dtype of a dask Series; its length is not counted."""
    return Brief("?", "", cut(f"lazy, {_partitions_text(series)}; dtype {series.dtype}", 60))


# ---------------------------------------------------------------------------------------------
# dask Array and Bag
# ---------------------------------------------------------------------------------------------


def is_dask_array(obj: object) -> bool:
    """A dask Array."""
    return instance_of(obj, "dask.array", "Array")


def is_dask_bag(obj: object) -> bool:
    """A dask Bag."""
    return instance_of(obj, "dask.bag", "Bag")


def _known_size(shape: Sequence[float], itemsize: int) -> str:
    if any(math.isnan(dim) for dim in shape):
        return "size unknown (some chunk sizes are unknown)"
    return f"{format_bytes(int(math.prod(shape)) * itemsize)} when computed"


def summarize_dask_array(array: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, chunks; the first chunk's leading rows on request."""
    grid = format_shape(array.numblocks)
    lines = [
        f"{label}: {qualified_name(type(array))} (lazy), shape {format_shape(array.shape)}, "
        f"dtype {array.dtype}, {_known_size(array.shape, array.dtype.itemsize)}",
        f"Chunks: {math.prod(array.numblocks):,} in a {grid} grid, chunk size "
        f"{format_shape(array.chunksize)}",
        lazy_note("the values", f"run {label}.compute() or a slice of it with run_code"),
        "",
        _dask_array_head(array, paging),
    ]
    return "\n".join(lines).rstrip()


def _dask_array_head(array: Any, paging: Paging) -> str:
    if not paging.rows_asked:
        return _not_read("pass rows=N to read leading rows of the first chunk (only that chunk)")
    if array.ndim == 0 or any(math.isnan(size) for size in array.chunks[0][:1]):
        return "Rows: not available (a 0-d array or unknown chunk sizes)"
    first = int(array.chunks[0][0])
    if paging.offset >= first:
        raise ToolInputError(
            f"offset {paging.offset:,} is past the first chunk ({first:,} rows along axis 0); "
            "rows past it are not read here; select them with run_code"
        )
    stop = min(first, paging.offset + paging.rows_asked)
    trailing = head_extent(array.shape[1:], stop - paging.offset)
    index = (slice(paging.offset, stop), *(slice(0, n) for n in trailing))
    block = array[index].compute()
    scope = "" if tuple(trailing) == tuple(array.shape[1:]) else ", first elements of other axes"
    return (
        f"Rows {paging.offset:,}-{stop - 1:,} along axis 0{scope} (from the first chunk only):\n"
        + format_array(block)
    )


def head_extent(trailing: Sequence[float], rows: int) -> list[int]:
    """Leading extents of the trailing axes so that ``rows`` rows hold at most HEAD_ELEMENTS."""
    per_axis = max(1, int((HEAD_ELEMENTS / max(rows, 1)) ** (1 / max(len(trailing), 1))))
    return [min(int(dim), per_axis) if not math.isnan(dim) else per_axis for dim in trailing]


def summarize_dask_bag(bag: Any, label: str, paging: Paging) -> str:
    """Partitions; items of the first partition on request."""
    lines = [
        f"{label}: {qualified_name(type(bag))} (lazy), {_partitions_text(bag)}",
        lazy_note("the items", f"run {label}.take(n) or {label}.compute() with run_code"),
        "",
    ]
    if not paging.rows_asked:
        lines.append(_not_read("pass rows=N to read up to N items of the first partition"))
        return "\n".join(lines)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Insufficient elements", UserWarning)
        items = bag.take(paging.offset + paging.rows_asked, npartitions=1, warn=False)
    if paging.offset and paging.offset >= len(items):
        raise ToolInputError(
            f"offset {paging.offset:,} is past the {len(items):,} items of the first partition"
        )
    lines.append("Items of the first partition (only that partition was computed):")
    lines += [
        f"  [{index:,}] {bounded_repr(item, ITEM_CHARS)}"
        for index, item in enumerate(items[paging.offset :], paging.offset)
    ]
    return "\n".join(lines)


def brief_dask_array(array: Any) -> Brief:
    """Shape, chunk count and dtype of a dask Array."""
    chunks = math.prod(array.numblocks)
    return Brief(format_shape(array.shape), "", f"lazy, {chunks:,} chunks; dtype {array.dtype}")


def brief_dask_bag(bag: Any) -> Brief:
    """Partitions of a dask Bag."""
    return Brief("?", "", f"lazy, {_partitions_text(bag)}")


# ---------------------------------------------------------------------------------------------
# Spark DataFrame
# ---------------------------------------------------------------------------------------------


def is_spark_frame(obj: object) -> bool:
    """A pyspark.sql DataFrame (classic or Spark Connect)."""
    return instance_of(obj, "pyspark.sql", "DataFrame")


def summarize_spark_frame(sdf: Any, label: str, paging: Paging) -> str:
    """Schema, storage level and query plan; rows through take() on request (a Spark job)."""
    fields = list(sdf.schema.fields)
    names = [field.name for field in fields]
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    schema = [
        [cut(fields[p].name, 40), cut(fields[p].dataType.simpleString(), 60),
         "yes" if fields[p].nullable else "no"]
        for p in listed
    ]  # fmt: skip
    lines = [
        f"{label}: pyspark.sql.DataFrame (lazy, Spark), {len(names):,} columns"
        + (", streaming" if sdf.isStreaming else ""),
        lazy_note(
            "the number of rows", f"count() runs a Spark job; run {label}.count() with run_code"
        ),
        f"Cached: {_storage_text(sdf)}",
        "",
        f"Schema ({len(listed)} of {len(names):,} columns):",
        format_table(["column", "type", "nullable"], schema),
        "",
        _spark_plan(sdf),
        "",
        _spark_head(sdf, [names[p] for p in positions[:HEAD_COLUMNS]], paging, label),
    ]
    return "\n".join(lines).rstrip()


def _storage_text(sdf: Any) -> str:
    try:
        level = sdf.storageLevel
    except Exception as exc:  # Spark Connect sessions may not answer
        return f"unknown ({type(exc).__name__})"
    if not (level.useMemory or level.useDisk):
        return "no"
    return f"yes ({level})"


def _spark_plan(sdf: Any) -> str:
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            sdf.explain()  # plans the query; runs no job
    except Exception as exc:
        return f"Plan: not available ({type(exc).__name__}: {cut(str(exc), 200)})"
    plan = printed.getvalue().strip()
    return f"Plan (explain()):\n{cut(plan, PLAN_CHARS)}"


def _spark_head(sdf: Any, columns: list[str], paging: Paging, label: str) -> str:
    if paging.offset:
        raise ToolInputError(
            f"offset= does not apply to {label!r}: a Spark DataFrame has no row positions; "
            "use rows=N for its first rows, or filter it with run_code"
        )
    if not paging.rows_asked:
        return _not_read("pass rows=N to read N rows (that runs a small Spark job, take(N))")
    taken = sdf.select(*columns).take(paging.rows_asked)
    cells = [[cut(str(value), HEAD_COLWIDTH) for value in row] for row in taken]
    table = format_table(columns, cells) if cells else "(no rows)"
    return f"First {len(taken):,} rows (read with take({paging.rows_asked})):\n{table}"


def brief_spark_frame(sdf: Any) -> Brief:
    """Columns and their types of a Spark DataFrame; its rows are not counted."""
    fields = list(sdf.schema.fields)
    details = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in fields[:8])
    return Brief(f"? x {len(fields):,}", "", cut(f"Spark; {details}", 60))


# ---------------------------------------------------------------------------------------------
# polars LazyFrame
# ---------------------------------------------------------------------------------------------


def is_polars_lazyframe(obj: object) -> bool:
    """A polars LazyFrame."""
    return instance_of(obj, "polars", "LazyFrame")


def summarize_polars_lazyframe(frame: Any, label: str, paging: Paging) -> str:
    """The schema from ``collect_schema()``; the plan is never run."""
    schema = frame.collect_schema()
    names = list(schema.names())
    dtypes = list(schema.dtypes())
    positions = pick_columns(names, paging.columns)
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    if paging.offset:
        raise ToolInputError(
            f"offset= does not apply to {label!r}: a LazyFrame is a query plan; collect a "
            "slice with run_code"
        )
    lines = [
        f"{label}: polars.LazyFrame (lazy query plan), {len(names):,} columns",
        lazy_note(
            "rows and values",
            f"collecting runs the whole plan; run {label}.head(n).collect() with run_code",
        ),
        f"dtypes: {dtype_counts(dtypes)}",
        "",
        f"Schema ({len(listed)} of {len(names):,} columns):",
        format_table(["column", "dtype"], [[cut(names[p], 40), str(dtypes[p])] for p in listed]),
    ]
    return "\n".join(lines)


def brief_polars_lazyframe(frame: Any) -> Brief:
    """Columns and dtypes of a LazyFrame's schema."""
    schema = frame.collect_schema()
    return Brief(
        f"? x {len(schema):,}", "", cut(f"lazy plan; {dtype_counts(list(schema.dtypes()))}", 60)
    )


_DASK = frozenset({"dask"})
KINDS = [
    Kind(
        "dask DataFrame",
        _DASK,
        is_dask_frame,
        summarize_dask_frame,
        brief_dask_frame,
        True,
        lazy=True,
    ),
    Kind("dask Series", _DASK, is_dask_series, summarize_dask_series, brief_dask_series, lazy=True),
    Kind("dask Array", _DASK, is_dask_array, summarize_dask_array, brief_dask_array, lazy=True),
    Kind("dask Bag", _DASK, is_dask_bag, summarize_dask_bag, brief_dask_bag, lazy=True),
    Kind(
        "Spark DataFrame",
        frozenset({"pyspark"}),
        is_spark_frame,
        summarize_spark_frame,
        brief_spark_frame,
        True,
        lazy=True,
    ),
    Kind(
        "polars LazyFrame",
        frozenset({"polars"}),
        is_polars_lazyframe,
        summarize_polars_lazyframe,
        brief_polars_lazyframe,
        True,
        lazy=True,
    ),
]
