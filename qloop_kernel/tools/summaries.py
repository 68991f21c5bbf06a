"""Type-aware, size-bounded text summaries of live Python objects.

Nothing here imports pandas or numpy: their objects are recognised through ``sys.modules``, so
the summaries cost nothing at kernel start and work where those libraries are not installed.
Every summary is bounded in size and in work: big frames and arrays are summarised from a
deterministic sample, and no full ``repr()`` of a big container, string or array is ever built.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import linecache
import math
import numbers
import sys
import types
from collections import Counter, deque
from collections.abc import Callable, ItemsView, Iterable, KeysView, Mapping, Sequence, ValuesView
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import islice
from typing import Any

SAMPLE_ROWS = 10_000  # rows behind the statistics of a big DataFrame or Series
ARRAY_SAMPLE = 100_000  # elements behind the statistics of a big ndarray
SAMPLE_SEED = 0
EXACT_NULL_CELLS = 2_000_000  # object/str cells scanned for nulls; beyond that, estimate
LISTED_COLUMNS = 60  # columns described one per line when the caller picks none
HEAD_COLUMNS = 12  # columns shown in the head when the caller picks none
HEAD_COLWIDTH = 40
SMALL_ARRAY_CELLS = 100  # arrays and frames up to this size are shown with their own repr
REPR_ITEMS = 10  # container items rendered inside a bounded repr
REPR_DEPTH = 3
TYPE_SCAN = 10_000  # container elements scanned for the element-type census
ITEM_CHARS = 300
STR_EXCERPT = 3_000
BYTES_EXCERPT = 400
DOC_CHARS = 1_500
SOURCE_CHARS = 4_000
NAMES_CHARS = 1_500
VALUE_CHARS = 1_000
MAX_ATTRIBUTES = 30


@dataclass(frozen=True)
class Paging:
    """Which part of a variable to show: selected DataFrame columns and a window of rows/items."""

    columns: tuple[str, ...] | None = None
    offset: int = 0
    rows: int = 5


# ---------------------------------------------------------------------------------------------
# Text helpers shared by the namespace tools
# ---------------------------------------------------------------------------------------------


def qualified_name(cls: type) -> str:
    """Short qualified name of a class: ``pandas.DataFrame``, ``dict``, ``Thing`` (notebook)."""
    module = str(getattr(cls, "__module__", None) or "")
    name = _name_of(cls)
    if module in ("builtins", "__main__", ""):
        return name
    top = module.partition(".")[0]
    top_module = sys.modules.get(top)
    # vars(), not getattr(): a module-level __getattr__ may import or warn on access.
    if top != module and top_module is not None and vars(top_module).get(name) is cls:
        return f"{top}.{name}"
    return f"{module}.{name}"


def _name_of(obj: object) -> str:
    return str(getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or "?")


def format_bytes(size: int) -> str:
    """Human-readable byte count with 1024-based units, like ``DataFrame.info()``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_shape(shape: tuple[int, ...]) -> str:
    """``(1000000, 50)`` as ``1,000,000 x 50``; a 0-d shape as ``0-d``."""
    return " x ".join(f"{dim:,}" for dim in shape) if shape else "0-d"


def shape_of(obj: object) -> tuple[int, ...] | None:
    """The ``shape`` of an array-like object (numpy, pandas, torch, ...), or None."""
    if isinstance(obj, type) or not hasattr(type(obj), "shape"):
        return None
    try:
        shape = obj.shape  # type: ignore[attr-defined]
    except Exception:
        return None
    if isinstance(shape, tuple) and all(isinstance(dim, int) for dim in shape):
        return shape
    return None


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``...`` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 3)] + "..."


def fit_text(text: str, max_chars: int, hint: str) -> str:
    """Cut ``text`` to ``max_chars``, preferably at a line end, with an explicit marker.

    The marker says how much was left out and ``hint`` tells the reader how to see the rest.
    """
    if len(text) <= max_chars:
        return text
    widest = f"{len(text):,}"
    template = "\n[... output truncated: {} of {} characters not shown; {}]"
    budget = max_chars - len(template.format(widest, widest, hint))
    end = text.rfind("\n", 0, budget + 1)
    if end < budget // 2:
        end = max(budget, 0)
    return text[:end] + template.format(f"{len(text) - end:,}", widest, hint)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Plain-text table with left-aligned columns separated by two spaces."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in (header, *rows)
    ]
    return "\n".join(lines)


def format_number(value: object) -> str:
    """Compact text for a statistic: ints exactly, floats to 6 significant digits."""
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return "nan" if math.isnan(number) else f"{number:.6g}"
    return cut(str(value), 40)


def count_with_share(count: int, total: int) -> str:
    """``1,234 (12.3%)``, or ``0``."""
    return f"{count:,} ({count / total:.1%})" if count and total else f"{count:,}"


# ---------------------------------------------------------------------------------------------
# Bounded repr (reprlib style: containers, strings and arrays are never rendered in full)
# ---------------------------------------------------------------------------------------------

_SCALARS = (bool, float, complex, type(None))
_DICT_VIEWS = (KeysView, ValuesView, ItemsView)


def bounded_repr(obj: object, limit: int = 200) -> str:
    """``repr(obj)`` cut to ``limit`` characters without building the repr of a big object.

    Strings, bytes, builtin containers and arrays are rendered piecewise (first items only, with a
    count of the rest); other objects get their own ``repr()`` cut to size, and a ``repr()`` that
    raises is reported instead of propagated.
    """
    return cut(_render(obj, 0, limit), limit)


def _render(obj: object, depth: int, limit: int) -> str:
    try:
        return _render_unguarded(obj, depth, limit)
    except Exception as exc:
        return _repr_failure(obj, exc)


def _render_unguarded(obj: object, depth: int, limit: int) -> str:
    if isinstance(obj, str):
        return repr(obj[: limit + 1])
    if isinstance(obj, (bytes, bytearray)):
        return repr(obj[: limit + 1])
    if isinstance(obj, int) and not isinstance(obj, bool) and obj.bit_length() > 4_000:
        return f"<int with {obj.bit_length():,} bits>"
    if isinstance(obj, (int, *_SCALARS)):
        return repr(obj)
    if _is_numpy_number(obj):  # 10, not numpy 2's np.int64(10): the dtype is shown elsewhere
        return repr(obj.item())  # type: ignore[attr-defined]
    placeholder = _array_placeholder(obj)
    if placeholder is not None:
        return placeholder
    container = _render_container(obj, depth, limit)
    if container is not None:
        return container
    return cut(repr(obj), limit)


def _is_numpy_number(obj: object) -> bool:
    np = loaded_module("numpy")
    return np is not None and isinstance(obj, np.generic) and obj.dtype.kind in "biufc"


def _repr_failure(obj: object, exc: Exception) -> str:
    try:
        message = cut(str(exc), 100)
    except Exception:
        message = "<unprintable>"
    return f"<{qualified_name(type(obj))} object; repr() raised {type(exc).__name__}: {message}>"


def _array_placeholder(obj: object) -> str | None:
    shape = shape_of(obj)
    if shape is None or math.prod(shape) <= SMALL_ARRAY_CELLS:
        return None
    dtype = getattr(obj, "dtype", None) if hasattr(type(obj), "dtype") else None
    dtype_text = f", dtype {dtype}" if dtype is not None else ""
    return f"<{qualified_name(type(obj))} shape {format_shape(shape)}{dtype_text}>"


def _container_shape(obj: object) -> tuple[str, str, Iterable[Any], str | None] | None:
    """Brackets, items and key separator (None: plain items) of a container rendered piecewise."""
    if isinstance(obj, dict):
        return "{", "}", obj.items(), ": "
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return f"{type(obj).__name__}(", ")", zip(obj._fields, obj, strict=True), "="
    if isinstance(obj, (list, deque)):
        return "[", "]", obj, None
    if isinstance(obj, tuple):
        return "(", ",)" if len(obj) == 1 else ")", obj, None
    if isinstance(obj, (set, frozenset)):
        return "{", "}", obj, None
    if isinstance(obj, _DICT_VIEWS):
        return "[", "]", obj, None
    return None


def _render_container(obj: Any, depth: int, limit: int) -> str | None:
    container = _container_shape(obj)
    if container is None:
        return None
    left, right, items, separator = container
    if not len(obj):
        return (
            f"{type(obj).__name__}()" if isinstance(obj, AbstractSet) else _wrap(obj, left + right)
        )
    if depth >= REPR_DEPTH:
        return _wrap(obj, f"{left}...{right}")
    parts = _render_items(items, separator, depth, limit)
    rest = len(obj) - len(parts)
    more = f", ... (+{rest:,} more)" if rest else ""
    return _wrap(obj, left + ", ".join(parts) + more + right)


def _render_items(items: Iterable[Any], separator: str | None, depth: int, limit: int) -> list[str]:
    parts: list[str] = []
    used = 0
    for item in islice(items, REPR_ITEMS):
        if separator is None:
            text = _render(item, depth + 1, limit)
        else:
            key, value = item
            key_text = key if separator == "=" else _render(key, depth + 1, limit)
            text = f"{key_text}{separator}{_render(value, depth + 1, limit)}"
        parts.append(text)
        used += len(text) + 2
        if used > limit:  # the rest would be cut anyway
            break
    return parts


def _wrap(obj: object, body: str) -> str:
    exact = (dict, list, tuple, set)
    if type(obj) in exact or (isinstance(obj, tuple) and hasattr(obj, "_fields")):
        return body
    return f"{type(obj).__name__}({body})"


# ---------------------------------------------------------------------------------------------
# Dispatch
# ---------------------------------------------------------------------------------------------


def loaded_module(name: str) -> Any:
    """The module ``name`` if it has already been imported, else None (never imports it)."""
    return sys.modules.get(name)


def is_dataframe(obj: object) -> bool:
    """Whether ``obj`` is a pandas DataFrame (pandas is not imported to find out)."""
    pd = loaded_module("pandas")
    return pd is not None and isinstance(obj, pd.DataFrame)


def is_series(obj: object) -> bool:
    """Whether ``obj`` is a pandas Series."""
    pd = loaded_module("pandas")
    return pd is not None and isinstance(obj, pd.Series)


def is_ndarray(obj: object) -> bool:
    """Whether ``obj`` is a numpy ndarray."""
    np = loaded_module("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def is_function_like(obj: object) -> bool:
    """Classes, functions, methods, builtins and other named callables (ufuncs, dispatchers)."""
    return isinstance(obj, type) or (callable(obj) and hasattr(obj, "__name__"))


def _is_collection(obj: object) -> bool:
    return isinstance(obj, (Sequence, AbstractSet, deque, *_DICT_VIEWS))


def summarize(obj: object, label: str, paging: Paging) -> str:
    """Type-aware text summary of ``obj`` titled ``label`` (not yet cut to a size limit).

    Raises ValueError when ``paging`` does not apply to the object or points past its end.
    """
    if paging.columns is not None and not is_dataframe(obj):
        raise ValueError(
            f"columns= applies to DataFrames only; {label!r} is a {qualified_name(type(obj))}"
        )
    for matches, render in _SUMMARIES:
        if matches(obj):
            return render(obj, label, paging)
    return _summarize_object(obj, label, paging)


def check_offset(offset: int, length: int, unit: str) -> None:
    """Raise ValueError when ``offset`` is past the end of ``length`` rows/items/characters."""
    if offset and offset >= length:
        raise ValueError(
            f"offset {offset:,} is past the end: there are {length:,} {unit} "
            f"(valid offsets 0-{max(length - 1, 0):,})"
        )


def _window(paging: Paging, length: int, unit: str) -> tuple[int, int]:
    check_offset(paging.offset, length, unit)
    return paging.offset, min(length, paging.offset + paging.rows)


def _reject_paging(obj: object, label: str, paging: Paging) -> None:
    if paging.offset:
        raise ValueError(
            f"offset= does not apply to {label!r} ({qualified_name(type(obj))}); "
            "it pages DataFrames, Series, arrays, containers and strings"
        )


# ---------------------------------------------------------------------------------------------
# pandas
# ---------------------------------------------------------------------------------------------


def _summarize_dataframe(df: Any, label: str, paging: Paging) -> str:
    n_rows, n_cols = df.shape
    positions = _column_positions(df, paging.columns)
    start, stop = _window(paging, n_rows, "rows")
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    head = positions if paging.columns else positions[:HEAD_COLUMNS]
    memory = int(df.memory_usage(deep=False).sum())
    dtypes = ", ".join(f"{count} {dtype}" for dtype, count in df.dtypes.value_counts().items())
    lines = [
        f"{label}: {qualified_name(type(df))}, {n_rows:,} rows x {n_cols:,} columns, "
        f"memory {format_bytes(memory)} (deep=False)",
        f"dtypes: {dtypes or 'none'}",
        _index_line(df.index),
        "",
        _frame_head(df, head, start, stop),
        "",
        _columns_section(df, listed),
    ]
    return "\n".join(lines).rstrip()


def _column_positions(df: Any, columns: tuple[str, ...] | None) -> list[int]:
    labels = [str(column) for column in df.columns]
    if columns is None:
        return list(range(len(labels)))
    by_label: dict[str, int] = {}
    for position, text in enumerate(labels):
        by_label.setdefault(text, position)
    unknown = [name for name in columns if name not in by_label]
    if unknown:
        raise ValueError(f"unknown column(s) {unknown}; {_close_columns(unknown[0], labels)}")
    return list(dict.fromkeys(by_label[name] for name in columns))


def _close_columns(name: str, labels: list[str]) -> str:
    close = difflib.get_close_matches(name, labels, n=5, cutoff=0.5)
    if close:
        return f"did you mean {close}?"
    return f"the frame has {len(labels):,} columns: {cut(str(labels), 400)}"


def _index_line(index: Any) -> str:
    pd = loaded_module("pandas")
    if isinstance(index, pd.RangeIndex):
        return f"Index: {index!r}"
    names = [name for name in index.names if name is not None]
    parts = [qualified_name(type(index)), f"dtype {index.dtype}"]
    if names:
        parts.append(f"names {bounded_repr(names, 100)}")
    if len(index):
        parts.append(f"first {bounded_repr(index[0], 60)}, last {bounded_repr(index[-1], 60)}")
    return "Index: " + ", ".join(parts)


def _frame_head(df: Any, positions: list[int], start: int, stop: int) -> str:
    if stop <= start:
        return "No rows." if not len(df) else ""
    shown = ""
    if len(positions) < df.shape[1]:
        shown = f"; {len(positions)} of {df.shape[1]:,} columns, pass columns=[...] to pick others"
    table = df.iloc[start:stop, positions].to_string(max_colwidth=HEAD_COLWIDTH)
    return f"Rows {start:,}-{stop - 1:,} of {len(df):,}{shown}:\n{table}"


def _sample_positions(length: int) -> Any:
    """Sorted positions of a seeded random sample, or None when everything fits in the sample."""
    if length <= SAMPLE_ROWS:
        return None
    np = loaded_module("numpy")
    positions = np.random.default_rng(SAMPLE_SEED).choice(length, SAMPLE_ROWS, replace=False)
    positions.sort()
    return positions


def _sample_note(length: int, unit: str) -> str:
    if length <= SAMPLE_ROWS:
        return f"computed on all {length:,} {unit}"
    return (
        f"computed on a deterministic random sample of {SAMPLE_ROWS:,} of {length:,} {unit} "
        f"(seed {SAMPLE_SEED})"
    )


def _column_kind(dtype: Any) -> str:
    kind = getattr(dtype, "kind", "O")
    if kind in "iuf":
        return "numeric"
    if kind in "mM":
        return "datetime"
    return "other"


def _null_scan_is_cheap(dtype: Any) -> bool:
    np = loaded_module("numpy")
    if isinstance(dtype, np.dtype):
        return dtype.kind in "iubfcmM"
    # Python-backed strings test every object, like the object dtype.
    return getattr(dtype, "storage", None) != "python"


def _null_count(column: Any) -> int:
    np = loaded_module("numpy")
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iubfcmM":
        if dtype.kind in "iub":
            return 0
        values = column.to_numpy()
        missing = np.isnan(values) if dtype.kind in "fc" else np.isnat(values)
        return int(np.count_nonzero(missing))
    return int(column.isna().sum())


def _columns_section(df: Any, listed: list[int]) -> str:
    n_rows = len(df)
    all_dtypes = df.dtypes
    dtypes = [all_dtypes.iloc[position] for position in listed]
    sample_rows = _sample_positions(n_rows)
    sample = df.iloc[slice(None) if sample_rows is None else sample_rows, listed]
    exact = n_rows * sum(not _null_scan_is_cheap(dtype) for dtype in dtypes) <= EXACT_NULL_CELLS
    nulls = [_null_text(df.iloc[:, p], sample.iloc[:, i], exact) for i, p in enumerate(listed)]
    parts = [
        f"Columns ({len(listed)} of {df.shape[1]:,} described; statistics "
        f"{_sample_note(n_rows, 'rows')}):"
    ]
    if not exact:
        parts.append(
            "~ null share estimated from the sample (scanning object/str columns of "
            "this size is too slow)"
        )
    for kind, render in _GROUP_TABLES.items():
        members = [i for i, dtype in enumerate(dtypes) if _column_kind(dtype) == kind]
        if members:
            parts += ["", render(sample, members, nulls)]
    if len(listed) < df.shape[1]:
        parts += [
            "",
            f"{df.shape[1] - len(listed):,} more columns not described; "
            "pass columns=[...] to describe them",
        ]
    return "\n".join(parts)


def _null_text(column: Any, sample_column: Any, exact_allowed: bool) -> str:
    if exact_allowed or _null_scan_is_cheap(column.dtype):
        return count_with_share(_null_count(column), len(column))
    share = float(sample_column.isna().mean()) if len(sample_column) else 0.0
    return f"~{share:.1%}"


def _cell_name(sample: Any, i: int) -> str:
    return cut(str(sample.columns[i]), 30)


def _numeric_table(sample: Any, members: list[int], nulls: list[str]) -> str:
    stats = _numeric_stats(sample.iloc[:, members])
    header = ["column", "dtype", "nulls", "mean", "std", "min", "25%", "50%", "75%", "max"]
    rows = [
        [_cell_name(sample, i), str(sample.dtypes.iloc[i]), nulls[i], *stats[k]]
        for k, i in enumerate(members)
    ]
    return f"Numeric ({len(members)}):\n{format_table(header, rows)}"


def _numeric_stats(frame: Any) -> list[list[str]]:
    """describe()-like statistics per column, computed column-block-wise (describe() is slower)."""
    if not len(frame):
        return [["-"] * 7 for _ in range(frame.shape[1])]
    quartiles = frame.quantile([0.25, 0.5, 0.75])
    columns = [
        frame.mean(),
        frame.std(),
        frame.min(),
        quartiles.iloc[0],
        quartiles.iloc[1],
        quartiles.iloc[2],
        frame.max(),
    ]
    return [[format_number(stat.iloc[i]) for stat in columns] for i in range(frame.shape[1])]


def _datetime_table(sample: Any, members: list[int], nulls: list[str]) -> str:
    header = ["column", "dtype", "nulls", "min", "max"]
    rows = []
    for i in members:
        column = sample.iloc[:, i]
        rows.append(
            [
                _cell_name(sample, i),
                str(column.dtype),
                nulls[i],
                format_number(column.min()),
                format_number(column.max()),
            ]
        )
    return f"Datetime ({len(members)}):\n{format_table(header, rows)}"


def _other_table(sample: Any, members: list[int], nulls: list[str]) -> str:
    header = ["column", "dtype", "nulls", "unique", "most frequent (count)"]
    rows = []
    for i in members:
        counts = _value_counts(sample.iloc[:, i])
        unique = "-" if counts is None else f"{len(counts):,}"
        rows.append(
            [
                _cell_name(sample, i),
                cut(str(sample.dtypes.iloc[i]), 30),
                nulls[i],
                unique,
                _top_values(counts, 1),
            ]
        )
    return f"Other ({len(members)}):\n{format_table(header, rows)}"


_GROUP_TABLES: dict[str, Callable[[Any, list[int], list[str]], str]] = {
    "numeric": _numeric_table,
    "datetime": _datetime_table,
    "other": _other_table,
}


def _value_counts(column: Any) -> Any:
    try:
        return column.value_counts(dropna=True)
    except TypeError:  # unhashable cells such as lists or dicts
        return None


def _top_values(counts: Any, n: int) -> str:
    if counts is None:
        return "unhashable values"
    if not len(counts):
        return "-"
    return ", ".join(
        f"{bounded_repr(value, 40)} ({count:,})" for value, count in islice(counts.items(), n)
    )


def _summarize_series(series: Any, label: str, paging: Paging) -> str:
    start, stop = _window(paging, len(series), "values")
    name = "" if series.name is None else f" {bounded_repr(series.name, 60)}"
    memory = int(series.memory_usage(deep=False))
    lines = [
        f"{label}: {qualified_name(type(series))}{name}, dtype {series.dtype}, "
        f"{len(series):,} values, memory {format_bytes(memory)} (deep=False)",
        _index_line(series.index),
        *_series_statistics(series),
        "",
        _series_head(series, start, stop),
    ]
    return "\n".join(lines).rstrip()


def _series_statistics(series: Any) -> list[str]:
    positions = _sample_positions(len(series))
    sample = series if positions is None else series.iloc[positions]
    exact = len(series) <= EXACT_NULL_CELLS
    lines = [
        f"Nulls: {_null_text(series, sample, exact)}",
        f"Statistics {_sample_note(len(series), 'values')}:",
    ]
    kind = _column_kind(series.dtype)
    if kind == "numeric":
        names = ["mean", "std", "min", "25%", "50%", "75%", "max"]
        values = _numeric_stats(sample.to_frame())[0]
        lines.append("  " + ", ".join(f"{n} {v}" for n, v in zip(names, values, strict=True)))
    elif kind == "datetime":
        lines.append(f"  min {format_number(sample.min())}, max {format_number(sample.max())}")
    else:
        counts = _value_counts(sample)
        unique = "-" if counts is None else f"{len(counts):,}"
        lines.append(f"  unique {unique}; most frequent: {_top_values(counts, 10)}")
    return lines


def _series_head(series: Any, start: int, stop: int) -> str:
    if stop <= start:
        return "No values." if not len(series) else ""
    frame = series.iloc[start:stop].to_frame(name="value" if series.name is None else series.name)
    table = frame.to_string(max_colwidth=HEAD_COLWIDTH * 2)
    return f"Values {start:,}-{stop - 1:,} of {len(series):,}:\n{table}"


# ---------------------------------------------------------------------------------------------
# numpy
# ---------------------------------------------------------------------------------------------


def _summarize_ndarray(array: Any, label: str, paging: Paging) -> str:
    lines = [
        f"{label}: {qualified_name(type(array))}, shape {array.shape}, dtype {array.dtype}, "
        f"{format_bytes(array.nbytes)}, {_layout(array)}",
        *_array_statistics(array),
        "",
        _array_head(array, paging),
    ]
    return "\n".join(lines).rstrip()


def _layout(array: Any) -> str:
    if array.flags.c_contiguous:
        return "C-contiguous"
    return "F-contiguous" if array.flags.f_contiguous else "strided view"


def _array_sample(array: Any) -> Any:
    np = loaded_module("numpy")
    if array.size <= ARRAY_SAMPLE:
        return array.reshape(-1)
    flat = np.random.default_rng(SAMPLE_SEED).choice(array.size, ARRAY_SAMPLE, replace=False)
    flat.sort()
    # Fancy indexing by coordinates reads only the sampled elements, whatever the strides.
    return array[np.unravel_index(flat, array.shape)]


def _array_statistics(array: Any) -> list[str]:
    kind = array.dtype.kind
    if array.size == 0 or array.dtype.names or kind not in "biufcmMO":
        return []
    values = _array_sample(array)
    note = (
        "all elements"
        if array.size <= ARRAY_SAMPLE
        else f"a deterministic random sample of {ARRAY_SAMPLE:,} of {array.size:,} elements"
    )
    np = loaded_module("numpy")
    with np.errstate(all="ignore"):
        stats = _ARRAY_STATS[kind](np, values)
    return [f"Statistics on {note}: {stats}"]


def _bool_stats(np: Any, values: Any) -> str:
    true = int(np.count_nonzero(values))
    return f"True {count_with_share(true, len(values))}"


def _integer_stats(np: Any, values: Any) -> str:
    return (
        f"min {format_number(values.min())}, max {format_number(values.max())}, "
        f"mean {format_number(values.mean())}"
    )


def _float_stats(np: Any, values: Any) -> str:
    missing = np.isnan(values)
    nan_text = f"NaN {count_with_share(int(np.count_nonzero(missing)), len(values))}"
    finite = values[~missing]
    if not len(finite):
        return nan_text
    return f"{_integer_stats(np, finite)}, std {format_number(finite.std())}, {nan_text}"


def _complex_stats(np: Any, values: Any) -> str:
    return f"mean {values.mean()}, mean |x| {format_number(np.abs(values).mean())}"


def _time_stats(np: Any, values: Any) -> str:
    present = values[~np.isnat(values)]
    nat = f"NaT {count_with_share(len(values) - len(present), len(values))}"
    if not len(present):
        return nat
    return f"min {present.min()}, max {present.max()}, {nat}"


def _object_stats(np: Any, values: Any) -> str:
    return "element types " + _type_census(values.tolist())


_ARRAY_STATS: dict[str, Callable[[Any, Any], str]] = {
    "b": _bool_stats,
    "i": _integer_stats,
    "u": _integer_stats,
    "f": _float_stats,
    "c": _complex_stats,
    "m": _time_stats,
    "M": _time_stats,
    "O": _object_stats,
}


def _array_head(array: Any, paging: Paging) -> str:
    np = loaded_module("numpy")
    if array.ndim == 0:
        _reject_paging(array, "0-d array", paging)
        return f"Value: {bounded_repr(array.item(), ITEM_CHARS)}"
    start, stop = _window(paging, array.shape[0], "rows along axis 0")
    if stop <= start:
        return ""
    element = {"object": lambda x: bounded_repr(x, 60), "numpystr": lambda x: bounded_repr(x, 60)}
    text = np.array2string(
        array[start:stop],
        threshold=200,
        edgeitems=3,
        max_line_width=100,
        formatter=element,
        separator=", ",
    )
    return f"Rows {start:,}-{stop - 1:,} along axis 0 (of {array.shape[0]:,}):\n{text}"


# ---------------------------------------------------------------------------------------------
# Builtin containers, strings and bytes
# ---------------------------------------------------------------------------------------------


def _type_census(items: Iterable[object]) -> str:
    counts = Counter(qualified_name(type(item)) for item in items)
    shown = ", ".join(f"{name} ({count:,})" for name, count in counts.most_common(8))
    rest = len(counts) - 8
    return (shown or "none") + (f", ... {rest} more types" if rest > 0 else "")


def _census_scope(length: int) -> str:
    return f" (first {TYPE_SCAN:,} scanned)" if length > TYPE_SCAN else ""


def _summarize_mapping(mapping: Mapping[Any, Any], label: str, paging: Paging) -> str:
    start, stop = _window(paging, len(mapping), "items")
    scanned = list(islice(mapping.items(), TYPE_SCAN))
    lines = [
        f"{label}: {qualified_name(type(mapping))}, {len(mapping):,} items",
        f"Key types{_census_scope(len(mapping))}: {_type_census(k for k, _ in scanned)}",
        f"Value types{_census_scope(len(mapping))}: {_type_census(v for _, v in scanned)}",
        _keys_line(mapping),
    ]
    if stop > start:
        lines += ["", f"Items {start:,}-{stop - 1:,} of {len(mapping):,}:"]
        lines += [
            f"  {bounded_repr(key, 100)}: {bounded_repr(value, ITEM_CHARS)}"
            for key, value in islice(mapping.items(), start, stop)
        ]
    return "\n".join(lines)


def _keys_line(mapping: Mapping[Any, Any]) -> str:
    keys = ", ".join(bounded_repr(key, 60) for key in islice(mapping, 50))
    rest = len(mapping) - 50
    return f"Keys: {cut(keys, NAMES_CHARS)}" + (f" ... (+{rest:,} more)" if rest > 0 else "")


def _summarize_collection(items: Any, label: str, paging: Paging) -> str:
    start, stop = _window(paging, len(items), "items")
    lines = [
        f"{label}: {qualified_name(type(items))}, {len(items):,} items",
        f"Element types{_census_scope(len(items))}: {_type_census(islice(items, TYPE_SCAN))}",
    ]
    if stop > start:
        ordered = isinstance(items, (Sequence, deque))
        lines += [
            "",
            f"Items {start:,}-{stop - 1:,} of {len(items):,}"
            f"{'' if ordered else ' (iteration order)'}:",
        ]
        lines += [
            f"  [{index:,}] {bounded_repr(item, ITEM_CHARS)}"
            for index, item in enumerate(islice(items, start, stop), start)
        ]
    return "\n".join(lines)


def _summarize_str(text: str, label: str, paging: Paging) -> str:
    check_offset(paging.offset, len(text), "characters")
    stop = min(len(text), paging.offset + STR_EXCERPT)
    lines = text.count("\n") + 1 if text else 0
    header = f"{label}: {qualified_name(type(text))}, {len(text):,} characters, {lines:,} lines"
    if not text:
        return header + "\n(empty string)"
    return (
        f"{header}\nCharacters {paging.offset:,}-{stop - 1:,} of {len(text):,} "
        f"(page with offset=):\n{text[paging.offset : stop]}"
    )


def _summarize_bytes(data: bytes | bytearray, label: str, paging: Paging) -> str:
    check_offset(paging.offset, len(data), "bytes")
    stop = min(len(data), paging.offset + BYTES_EXCERPT)
    return (
        f"{label}: {qualified_name(type(data))}, {len(data):,} bytes\n"
        f"Bytes {paging.offset:,}-{max(stop - 1, 0):,}: "
        f"{bytes(data[paging.offset : stop])!r}"
    )


# ---------------------------------------------------------------------------------------------
# Functions, classes, modules and other objects
# ---------------------------------------------------------------------------------------------


def _callable_kind(obj: object) -> str:
    if isinstance(obj, type):
        return "class"
    if inspect.ismethod(obj):
        return "method"
    if inspect.isfunction(obj):
        return "function"
    if inspect.isbuiltin(obj):
        return "builtin function"
    return qualified_name(type(obj))


def _summarize_callable(obj: Any, label: str, paging: Paging) -> str:
    _reject_paging(obj, label, paging)
    name = _name_of(obj)
    lines = [f"{label}: {_callable_kind(obj)} {name}{_origin(obj)}"]
    signature = _signature(obj)
    if signature:
        lines.append(f"Signature: {cut(name.rpartition('.')[2] + signature, 500)}")
    if isinstance(obj, type):
        lines += _class_lines(obj)
    doc = inspect.getdoc(obj)
    if doc:
        lines += ["Docstring:", cut(doc, DOC_CHARS)]
    lines += _source_lines(obj)
    return "\n".join(lines)


def _origin(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    if module == "__main__":
        return " defined in the notebook"
    return f" from module {module}" if module else ""


def _signature(obj: object) -> str | None:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):  # builtins without text signatures, some C classes
        return None


def _class_lines(cls: type) -> list[str]:
    bases = ", ".join(qualified_name(base) for base in cls.__mro__[1:-1]) or "object"
    methods = sorted(
        name for name, value in vars(cls).items() if not name.startswith("_") and callable(value)
    )
    lines = [f"Bases (MRO): {cut(bases, 500)}"]
    if methods:
        lines.append(f"Public methods defined here: {cut(', '.join(methods), NAMES_CHARS)}")
    return lines


def _source_lines(obj: object) -> list[str]:
    source, problem = _source(obj)
    if source is None:
        return [f"Source: not available ({problem})"]
    total = len(source.splitlines())
    if len(source) > SOURCE_CHARS:
        kept = source[:SOURCE_CHARS].rpartition("\n")[0]
        shown = len(kept.splitlines())
        source = f"{kept}\n[... source truncated: {total - shown:,} more lines]"
    return [f"Source ({total:,} lines):", source.rstrip("\n")]


def _source(obj: object) -> tuple[str | None, str]:
    """The source of ``obj``, or None and the reason it is not available."""
    try:
        return inspect.getsource(obj), ""  # type: ignore[arg-type]
    except (OSError, TypeError) as exc:
        problem = f"{type(exc).__name__}: {cut(str(exc), 100)}"
    if isinstance(obj, type):
        return _class_source_from_methods(obj), problem
    return None, problem


def _class_source_from_methods(cls: type) -> str | None:
    """Source of a class found through one of its methods' code objects.

    ``inspect.getsource`` finds classes through their module's file, which a notebook's
    ``__main__`` has not got (before Python 3.13), while IPython puts each cell in linecache.
    """
    code = next((f.__code__ for f in map(_function_of, vars(cls).values()) if f), None)
    if code is None:
        return None
    lines = linecache.getlines(code.co_filename)
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ClassDef)
            and node.name == cls.__name__
            and node.lineno <= code.co_firstlineno <= (node.end_lineno or 0)
        ):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            return "".join(lines[first - 1 : node.end_lineno])
    return None


def _function_of(member: object) -> types.FunctionType | None:
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        member = member.fget
    return member if isinstance(member, types.FunctionType) else None


def _summarize_module(module: types.ModuleType, label: str, paging: Paging) -> str:
    _reject_paging(module, label, paging)
    version = getattr(module, "__version__", None)
    lines = [
        f"{label}: module {module.__name__}"
        + (f", version {version}" if isinstance(version, str) else ""),
        f"File: {getattr(module, '__file__', None) or 'built-in'}",
    ]
    doc = inspect.getdoc(module)
    if doc:
        first_paragraph = doc.split("\n\n")[0]
        lines.append(f"Doc: {cut(first_paragraph, 500)}")
    exported = getattr(module, "__all__", None)
    names = (
        sorted(str(name) for name in exported)
        if isinstance(exported, (list, tuple))
        else sorted(name for name in vars(module) if not name.startswith("_"))
    )
    lines.append(f"Public names ({len(names):,}): {cut(', '.join(names), NAMES_CHARS)}")
    return "\n".join(lines)


def _summarize_object(obj: object, label: str, paging: Paging) -> str:
    _reject_paging(obj, label, paging)
    lines = [f"{label}: {qualified_name(type(obj))}", f"Value: {bounded_repr(obj, VALUE_CHARS)}"]
    length = _length(obj)
    if length is not None:
        lines.append(f"Length: {length:,}")
    attributes = _instance_attributes(obj)
    if attributes:
        lines += [f"Instance attributes ({len(attributes):,}):"]
        lines += [
            f"  {name}: {qualified_name(type(value))} = {bounded_repr(value, 100)}"
            for name, value in islice(attributes.items(), MAX_ATTRIBUTES)
        ]
        if len(attributes) > MAX_ATTRIBUTES:
            lines.append(f"  ... {len(attributes) - MAX_ATTRIBUTES:,} more")
    names = _public_names(obj, attributes)
    if names:
        lines.append(f"Other public names: {cut(', '.join(names), NAMES_CHARS)}")
    return "\n".join(lines)


def _length(obj: object) -> int | None:
    if not hasattr(type(obj), "__len__"):
        return None
    try:
        return len(obj)  # type: ignore[arg-type]
    except Exception:
        return None


def _instance_attributes(obj: object) -> dict[str, object]:
    try:
        attributes = vars(obj)
    except TypeError:  # no __dict__ (slots, builtins)
        return {}
    return {name: value for name, value in attributes.items() if not str(name).startswith("_")}


def _public_names(obj: object, exclude: Mapping[str, object]) -> list[str]:
    if type(obj).__module__ == "builtins" or isinstance(obj, numbers.Number):
        return []
    try:
        names = dir(obj)
    except Exception:
        return []
    return [name for name in names if not name.startswith("_") and name not in exclude]


_SUMMARIES: list[tuple[Callable[[Any], bool], Callable[[Any, str, Paging], str]]] = [
    (is_dataframe, _summarize_dataframe),
    (is_series, _summarize_series),
    (is_ndarray, _summarize_ndarray),
    (lambda obj: isinstance(obj, types.ModuleType), _summarize_module),
    (is_function_like, _summarize_callable),
    (lambda obj: isinstance(obj, str), _summarize_str),
    (lambda obj: isinstance(obj, (bytes, bytearray)), _summarize_bytes),
    (lambda obj: isinstance(obj, Mapping), _summarize_mapping),
    (_is_collection, _summarize_collection),
]
