"""pandas DataFrame and Series: shape, dtypes, memory, index, a head and per-column statistics.

Big frames are summarised from a deterministic random sample of rows. Null counts are exact
where they cost nothing (integer and Arrow-backed columns), exact by scanning while the frame is
small enough, and estimated from the sample (marked ``~``) beyond that. A sampled column of Python
objects (object dtype, Python-backed strings) is read once: one count of its values gives its nulls,
its distinct values and the most frequent ones.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .common import (
    EXACT_NULL_CELLS,
    HEAD_COLUMNS,
    HEAD_COLWIDTH,
    LISTED_COLUMNS,
    MIN_SAMPLE_ROWS,
    PYTHON_SAMPLE_CELLS,
    SAMPLE_CELLS,
    SAMPLE_ROWS,
    SAMPLE_SEED,
    Brief,
    Kind,
    Paging,
    count_with_share,
    cut,
    dtype_counts,
    format_bytes,
    format_number,
    format_shape,
    format_table,
    instance_of,
    loaded_module,
    pick_columns,
    qualified_name,
    window,
)
from .readguard import UserCodeStopped, reading
from .reprs import bounded_repr

# Relative cost per cell of an exact null count, by the kind of column.
_FREE, _NUMERIC_SCAN, _CHEAP_SCAN, _PYTHON_SCAN, _OBJECT_SCAN = 0, 1, 1, 3, 40
_TOP_VALUES = 10  # most frequent values kept per column (a Series shows 10, a frame's column 1)


def is_dataframe(obj: object) -> bool:
    """Whether ``obj`` is a pandas DataFrame (pandas is not imported to find out)."""
    return instance_of(obj, "pandas", "DataFrame")


def is_series(obj: object) -> bool:
    """Whether ``obj`` is a pandas Series."""
    return instance_of(obj, "pandas", "Series")


def summarize_dataframe(df: Any, label: str, paging: Paging) -> str:
    """Shape, dtypes, memory, index, a head of rows and statistics per column."""
    n_rows, n_cols = df.shape
    positions = pick_columns([str(column) for column in df.columns], paging.columns)
    start, stop = window(paging, n_rows, "rows")
    listed = positions if paging.columns else positions[:LISTED_COLUMNS]
    head = positions if paging.columns else positions[:HEAD_COLUMNS]
    memory = int(df.memory_usage(deep=False).sum())
    lines = [
        f"{label}: {qualified_name(type(df))}, {n_rows:,} rows x {n_cols:,} columns, "
        f"memory {format_bytes(memory)} (deep=False)",
        f"dtypes: {dtype_counts(list(df.dtypes))}",
        _index_line(df.index),
        "",
        _frame_head(df, head, start, stop),
        "",
        _columns_section(df, listed),
    ]
    return "\n".join(lines).rstrip()


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
    try:
        with reading():  # pandas renders Python objects with their own repr
            part = strings_cut(df.iloc[start:stop, positions], HEAD_COLWIDTH)
            table = part.to_string(max_colwidth=HEAD_COLWIDTH)
    except (
        Exception,
        UserCodeStopped,
    ) as exc:  # a column pandas cannot render: each cell's bounded repr
        table = _plain_head(df, positions, start, stop, exc)
    return f"Rows {start:,}-{stop - 1:,} of {len(df):,}{shown}:\n{table}"


def strings_cut(frame: Any, width: int) -> Any:  # Any: a pandas DataFrame, given back as one
    """``frame`` (a few rows) with each string longer than ``width`` cut here, from the redacted
    whole, as pandas' ``max_colwidth`` would cut it: pandas' own cut would leave a piece of a
    secret that the redaction of the table no longer recognises."""
    textual = [i for i, dtype in enumerate(frame.dtypes) if getattr(dtype, "kind", "O") in "OSU"]
    if not textual:
        return frame
    frame = frame.copy()
    for i in textual:
        frame.isetitem(
            i, frame.iloc[:, i].map(lambda v: cut(v, width) if isinstance(v, str) else v)
        )
    return frame


def _plain_head(df: Any, positions: list[int], start: int, stop: int, exc: BaseException) -> str:
    header = [_cell_name(df, position) for position in positions]
    rows = [
        [bounded_repr(df.iat[row, position], HEAD_COLWIDTH) for position in positions]
        for row in range(start, stop)
    ]
    return f"(pandas could not render the rows: {_failure(exc)})\n" + format_table(header, rows)


def sample_size(columns: int, python_columns: int = 0) -> int:
    """Rows in the sample of a frame with ``columns`` described columns, ``python_columns`` of
    them holding Python objects (work ~ cells, a Python object's cell costing more)."""
    rows = min(SAMPLE_ROWS, SAMPLE_CELLS // max(columns, 1))
    if python_columns:
        rows = min(rows, PYTHON_SAMPLE_CELLS // python_columns)
    return max(MIN_SAMPLE_ROWS, rows)


def _sample_positions(
    length: int, size: int
) -> Any:  # Any: a numpy array (numpy is not imported here)
    """Sorted positions of a seeded random sample, or None when everything fits in the sample."""
    if length <= size:
        return None
    np = loaded_module("numpy")
    positions = np.random.default_rng(SAMPLE_SEED).choice(length, size, replace=False)
    positions.sort()
    return positions


def _sample_note(length: int, size: int, unit: str) -> str:
    if length <= size:
        return f"computed on all {length:,} {unit}"
    return (
        f"computed on a deterministic random sample of {size:,} of {length:,} {unit} "
        f"(seed {SAMPLE_SEED})"
    )


def _column_kind(dtype: Any) -> str:
    kind = getattr(dtype, "kind", "O")
    if kind in "iuf":
        return "numeric"
    if kind in "mM":
        return "datetime"
    return "other"


# ---------------------------------------------------------------------------------------------
# Null counts
# ---------------------------------------------------------------------------------------------


def _is_arrow_backed(dtype: Any) -> bool:
    return getattr(dtype, "storage", None) == "pyarrow" or hasattr(dtype, "pyarrow_dtype")


def _null_scan_cost(dtype: Any) -> int:
    """Relative cost per cell of an exact null count of a column of ``dtype``."""
    np = loaded_module("numpy")
    if isinstance(dtype, np.dtype):
        if dtype.kind in "iub":
            return _FREE
        return _NUMERIC_SCAN if dtype.kind in "fcmM" else _OBJECT_SCAN
    if _is_arrow_backed(dtype):
        return _FREE  # Arrow arrays carry their null count
    if getattr(dtype, "storage", None) == "python":
        return _PYTHON_SCAN
    return _CHEAP_SCAN if getattr(dtype, "name", "") == "category" else _PYTHON_SCAN


def _exact_costs(costs: list[int], n_rows: int) -> set[int]:
    """The scan costs whose columns are counted exactly: the cheapest kinds, within budget."""
    exact = {_FREE}
    spent = 0
    for cost in sorted(set(costs) - {_FREE}):
        spent += n_rows * cost * costs.count(cost)
        if spent > EXACT_NULL_CELLS:
            break
        exact.add(cost)
    return exact


def _null_count(column: Any) -> int:
    np = loaded_module("numpy")
    dtype = column.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iub":
        return 0
    if isinstance(dtype, np.dtype) and dtype.kind in "fcmM":
        values = column.to_numpy()
        missing = np.isnan(values) if dtype.kind in "fc" else np.isnat(values)
        return int(np.count_nonzero(missing))
    if _is_arrow_backed(dtype):
        return int(column.array.__arrow_array__().null_count)
    return int(column.isna().sum())


def _estimated_nulls(share: float) -> str:
    return f"~{share:.1%}"


def _null_texts(
    df: Any, sample: _Sample, listed: list[int], dtypes: list[Any]
) -> tuple[list[str], bool]:
    """Null count text per listed column, and whether any of them is estimated."""
    costs = [_null_scan_cost(dtype) for dtype in dtypes]
    exact = _exact_costs(costs, len(df))
    texts = [
        _null_text(df, sample, position, i, cost in exact)
        for i, (position, cost) in enumerate(zip(listed, costs, strict=True))
    ]
    return texts, any(cost not in exact for cost in costs)


def _null_text(df: Any, sample: _Sample, position: int, i: int, exact: bool) -> str:
    try:
        if exact:
            return count_with_share(_null_count(sample.whole(i)), len(df))
        return _estimated_nulls(sample.null_share(i))
    except Exception:  # a dtype without a null test
        return "?"


# ---------------------------------------------------------------------------------------------
# Value counts
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Counts:
    """A column's distinct non-null values: how many, and the most frequent with their counts."""

    unique: int
    top: list[tuple[Any, int]]  # most frequent first, at most _TOP_VALUES
    nulls: int | None = None  # null cells, when counted in the same pass


def _counted_in_python(dtype: Any) -> bool:
    """Whether a column of ``dtype`` holds Python objects (object dtype, Python-backed strings)."""
    np = loaded_module("numpy")
    if isinstance(dtype, np.dtype):
        return bool(dtype.kind == "O")
    return getattr(dtype, "storage", None) == "python"


def _pandas_counts(column: Any) -> _Counts | None:
    """pandas' ``value_counts`` of a (sampled) column; None when its cells cannot be counted."""
    try:
        with reading():  # hashing a Python object runs its class's __hash__ and __eq__
            counts = column.value_counts(dropna=True)
    except (Exception, UserCodeStopped):  # unhashable cells; Arrow types no counting kernel takes
        return None
    return _Counts(len(counts), list(islice(counts.items(), _TOP_VALUES)))


def _python_counts(values: Any) -> _Counts | None:
    """One pass over an array of Python objects: its values counted (first seen first among
    equal counts, as pandas' ``value_counts``), its nulls taken out of the count; None when a
    cell cannot be hashed."""
    try:
        with reading():  # hashing a Python object runs its class's __hash__ and __eq__
            counts = Counter(values.tolist())
            missing = [value for value in counts if type(value) is not str and _is_null(value)]
    except TypeError:  # unhashable cells (lists, dicts): pandas counts those its own way
        return None
    except UserCodeStopped:  # cells whose __hash__ or __eq__ is not installed code
        return None
    nulls = sum(counts.pop(value) for value in missing)
    return _Counts(len(counts), counts.most_common(_TOP_VALUES), nulls)


def _is_null(value: object) -> bool:
    """What ``pandas.isna`` says of one cell: None, NA, NaT and every kind of NaN."""
    if value is None or value is loaded_module("pandas").NA:
        return True
    try:
        return bool(value != value)  # NaN (float, numpy, Decimal) and NaT differ from themselves
    except Exception:  # a comparison that does not give a truth value
        return False


def _top_values(counts: _Counts | None, n: int) -> str:
    if counts is None:
        return "not counted (nested or unhashable values)"
    if not counts.top:
        return "-"
    return ", ".join(f"{bounded_repr(value, 40)} ({count:,})" for value, count in counts.top[:n])


# ---------------------------------------------------------------------------------------------
# Per-column statistics
# ---------------------------------------------------------------------------------------------


class _Sample:
    """The sampled rows of the described columns, each column's values counted at most once.

    Columns of numbers, dates and other typed values are taken as one frame. A column of Python
    objects is taken alone when its values are counted, so each of its cells (a pointer to an
    object anywhere in memory) is read while it is still in the cache.
    """

    def __init__(self, df: Any, listed: list[int], rows: Any) -> None:
        self._df = df
        self._positions = listed
        self._rows = slice(None) if rows is None else rows
        self.length = len(df) if rows is None else len(rows)
        dtypes = df.dtypes.tolist()  # one call, not one a column
        self.dtypes = [dtypes[position] for position in listed]
        typed = [i for i, dtype in enumerate(self.dtypes) if not _counted_in_python(dtype)]
        self._in_frame = {i: k for k, i in enumerate(typed)}
        self._frame = df.iloc[self._rows, [listed[i] for i in typed]]
        self._counts: dict[int, _Counts | None] = {}
        self._typed_null_shares: list[float] | None = None
        self._whole: dict[int, Any] = {}  # listed column i, all its rows, taken once
        last = max(listed, default=-1) + 1
        if last <= 2 * len(listed):  # most of the first columns: taken in one pass
            wanted = {position: i for i, position in enumerate(listed)}
            for position, (_, whole) in enumerate(islice(df.items(), last)):
                if position in wanted:
                    self._whole[wanted[position]] = whole

    def whole(self, i: int) -> Any:  # Any: a pandas Series of the user's frame
        """Listed column ``i`` with all its rows (taken once, for its nulls and its cells)."""
        if i not in self._whole:
            self._whole[i] = self._df.iloc[:, self._positions[i]]
        return self._whole[i]

    def frame(
        self, members: list[int]
    ) -> Any:  # Any: the user's pandas DataFrame (pandas untyped here)
        """The sampled typed columns ``members`` as one frame."""
        return self._frame.iloc[:, [self._in_frame[i] for i in members]]

    def column(self, i: int) -> Any:  # Any: a pandas Series of the user's frame
        if i in self._in_frame:
            return self._frame.iloc[:, self._in_frame[i]]
        return self.whole(i).iloc[self._rows]

    def name(self, i: int) -> str:
        return cut(str(self._df.columns[self._positions[i]]), 30)

    def counts(self, i: int) -> _Counts | None:
        if i not in self._counts:
            counted = None
            if i not in self._in_frame:
                counted = _python_counts(self._python_values(i))
            self._counts[i] = counted or _pandas_counts(self.column(i))
        return self._counts[i]

    def _python_values(self, i: int) -> Any:  # Any: a numpy object array of the sample
        """Column ``i``'s sampled cells as an array of Python objects."""
        np = loaded_module("numpy")
        column = self.whole(i)
        if isinstance(column.dtype, np.dtype):  # object dtype: a view of the frame's values
            return column.to_numpy()[self._rows]
        return self.column(i).to_numpy(dtype=object)

    def null_share(self, i: int) -> float:
        """The share of null cells in column ``i`` of the sample."""
        if not self.length:
            return 0.0
        if i in self._in_frame:
            shares = self._null_shares()
            if shares:
                return shares[self._in_frame[i]]
        else:
            counts = self.counts(i)
            if counts is not None and counts.nulls is not None:
                return counts.nulls / self.length
        return float(self.column(i).isna().mean())

    def _null_shares(self) -> list[float]:
        """The null share of every typed column from one ``isna`` of the frame (block-wise);
        empty when that fails (then each column is tested on its own)."""
        if self._typed_null_shares is None:
            try:
                self._typed_null_shares = [float(share) for share in self._frame.isna().mean()]
            except Exception:  # a dtype without a null test
                self._typed_null_shares = []
        return self._typed_null_shares


def _columns_section(df: Any, listed: list[int]) -> str:
    n_rows = len(df)
    dtypes = df.dtypes.tolist()
    python_columns = sum(_counted_in_python(dtypes[position]) for position in listed)
    size = sample_size(len(listed), python_columns)
    sample = _Sample(df, listed, _sample_positions(n_rows, size))
    nulls, estimated = _null_texts(df, sample, listed, sample.dtypes)
    parts = [
        f"Columns ({len(listed)} of {df.shape[1]:,} described; statistics "
        f"{_sample_note(n_rows, size, 'rows')}):"
    ]
    if estimated:
        parts.append("~ null share estimated from the sample (an exact count scans every row)")
    kinds = [_column_kind(dtype) for dtype in sample.dtypes]
    for kind, render in _GROUP_TABLES.items():
        members = [i for i, member_kind in enumerate(kinds) if member_kind == kind]
        if members:
            parts += ["", _group_table(render, sample, members, nulls)]
    if len(listed) < df.shape[1]:
        parts += [
            "",
            f"{df.shape[1] - len(listed):,} more columns not described; "
            "pass columns=[...] to describe them",
        ]
    return "\n".join(parts)


def _failure(exc: BaseException) -> str:
    return cut(f"{type(exc).__name__}: {exc}", 120)


_Render = Callable[[_Sample, list[int], list[str]], str]


def _group_table(render: _Render, sample: _Sample, members: list[int], nulls: list[str]) -> str:
    """One group's table; when a column fails it, each column on its own (the failing one said)."""
    try:
        return render(sample, members, nulls)
    except Exception:  # a statistic one column's dtype does not support
        return "\n".join(_column_alone(render, sample, i, nulls) for i in members)


def _column_alone(render: _Render, sample: _Sample, i: int, nulls: list[str]) -> str:
    try:
        return render(sample, [i], nulls)
    except Exception as exc:
        dtype = cut(str(sample.dtypes[i]), 30)
        return f"{sample.name(i)} ({dtype}): statistics not computed ({_failure(exc)})"


def _cell_name(frame: Any, i: int) -> str:
    return cut(str(frame.columns[i]), 30)


def _numeric_table(sample: _Sample, members: list[int], nulls: list[str]) -> str:
    stats = _numeric_stats(sample.frame(members))
    header = ["column", "dtype", "nulls", "mean", "std", "min", "25%", "50%", "75%", "max"]
    rows = [
        [sample.name(i), str(sample.dtypes[i]), nulls[i], *stats[k]] for k, i in enumerate(members)
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
    values = [stat.tolist() for stat in columns]  # one call a statistic, not one a cell
    return [[format_number(stat[i]) for stat in values] for i in range(frame.shape[1])]


def _datetime_table(sample: _Sample, members: list[int], nulls: list[str]) -> str:
    header = ["column", "dtype", "nulls", "min", "max"]
    rows = []
    for i in members:
        column = sample.column(i)
        rows.append(
            [
                sample.name(i),
                str(sample.dtypes[i]),
                nulls[i],
                format_number(column.min()),
                format_number(column.max()),
            ]
        )
    return f"Datetime ({len(members)}):\n{format_table(header, rows)}"


def _other_table(sample: _Sample, members: list[int], nulls: list[str]) -> str:
    header = ["column", "dtype", "nulls", "unique", "most frequent (count)"]
    rows = []
    for i in members:
        counts = sample.counts(i)
        unique = "-" if counts is None else f"{counts.unique:,}"
        rows.append(
            [
                sample.name(i),
                cut(str(sample.dtypes[i]), 30),
                nulls[i],
                unique,
                _top_values(counts, 1),
            ]
        )
    return f"Other ({len(members)}):\n{format_table(header, rows)}"


_GROUP_TABLES: dict[str, _Render] = {
    "numeric": _numeric_table,
    "datetime": _datetime_table,
    "other": _other_table,
}


# ---------------------------------------------------------------------------------------------
# Series
# ---------------------------------------------------------------------------------------------


def summarize_series(series: Any, label: str, paging: Paging) -> str:
    """dtype, length, memory, index, nulls, statistics and a window of values."""
    start, stop = window(paging, len(series), "values")
    name = "" if series.name is None else f" {bounded_repr(series.name, 60)}"
    memory = int(series.memory_usage(deep=False))
    lines = [
        f"{label}: {qualified_name(type(series))}{name}, dtype {series.dtype}, "
        f"{len(series):,} values, memory {format_bytes(memory)} (deep=False)",
        _index_line(series.index),
        *_guarded(lambda: _series_statistics(series), "Statistics"),
        "",
        *_guarded(lambda: [_series_head(series, start, stop)], "Values"),
    ]
    return "\n".join(lines).rstrip()


def _guarded(lines: Callable[[], list[str]], what: str) -> list[str]:
    try:
        with reading():
            return lines()
    except (
        Exception,
        UserCodeStopped,
    ) as exc:  # a dtype the statistics or the rendering do not support
        return [f"{what}: not shown ({_failure(exc)})"]


def _series_statistics(series: Any) -> list[str]:
    positions = _sample_positions(len(series), SAMPLE_ROWS)
    sample = series if positions is None else series.iloc[positions]
    counted = _Sample(series.to_frame(), [0], positions)
    cost = _null_scan_cost(series.dtype)
    if cost in _exact_costs([cost], len(series)):
        nulls = count_with_share(_null_count(series), len(series))
    else:
        nulls = _estimated_nulls(counted.null_share(0))
    lines = [f"Nulls: {nulls}", f"Statistics {_sample_note(len(series), SAMPLE_ROWS, 'values')}:"]
    kind = _column_kind(series.dtype)
    if kind == "numeric":
        names = ["mean", "std", "min", "25%", "50%", "75%", "max"]
        values = _numeric_stats(sample.to_frame())[0]
        lines.append("  " + ", ".join(f"{n} {v}" for n, v in zip(names, values, strict=True)))
    elif kind == "datetime":
        lines.append(f"  min {format_number(sample.min())}, max {format_number(sample.max())}")
    else:
        counts = counted.counts(0)
        unique = "-" if counts is None else f"{counts.unique:,}"
        lines.append(f"  unique {unique}; most frequent: {_top_values(counts, 10)}")
    return lines


def _series_head(series: Any, start: int, stop: int) -> str:
    if stop <= start:
        return "No values." if not len(series) else ""
    frame = series.iloc[start:stop].to_frame(name="value" if series.name is None else series.name)
    try:
        with reading():  # pandas renders Python objects with their own repr
            table = strings_cut(frame, HEAD_COLWIDTH * 2).to_string(max_colwidth=HEAD_COLWIDTH * 2)
    except (Exception, UserCodeStopped) as exc:  # each value's bounded repr
        table = _plain_head(frame, [0], 0, stop - start, exc)
    return f"Values {start:,}-{stop - 1:,} of {len(series):,}:\n{table}"


# ---------------------------------------------------------------------------------------------
# list_variables rows
# ---------------------------------------------------------------------------------------------


def brief_dataframe(df: Any) -> Brief:
    """Shape, shallow memory and the dtype counts of a DataFrame."""
    memory = format_bytes(int(df.memory_usage(deep=False).sum()))
    return Brief(format_shape(df.shape), memory, cut(dtype_counts(list(df.dtypes)), 60))


def brief_series(series: Any) -> Brief:
    """Length, shallow memory and dtype of a Series."""
    memory = format_bytes(int(series.memory_usage(deep=False)))
    return Brief(format_shape(series.shape), memory, f"dtype {series.dtype}")


_PANDAS = frozenset({"pandas"})
KINDS = [
    Kind("pandas.DataFrame", _PANDAS, is_dataframe, summarize_dataframe, brief_dataframe, True),
    Kind("pandas.Series", _PANDAS, is_series, summarize_series, brief_series),
]
