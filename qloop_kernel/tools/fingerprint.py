"""Fingerprints of namespace values, and what one code step changed, at bounded cost.

A fingerprint is what can be read of a value cheaply: its type, shape or length, the dtype of each
column (frames) or of the elements (arrays, Series), a short value for small scalars and strings,
and a content hash of a bounded, deterministic sample: at most ``HASH_CELLS`` evenly spaced cells
of a frame or array, the first and last ``HASH_BYTES`` of a long string, ``WALK_NODES`` items of
a container. Nothing is deep-copied and no big frame is scanned whole; lazy and distributed
collections (dask, Spark, polars LazyFrame) are described from their metadata and never computed.

:func:`changes` compares fingerprints taken before and after a step and gives one line per
variable ("df: DataFrame 600×5 → 598×5, column date str → datetime64[us]"). No data library is
imported here: values are recognised by the modules of their classes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import types
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from .summaries import is_dataframe, is_ndarray, is_series, qualified_name, shape_of
from .summaries.arrow import is_arrow_array, is_arrow_table
from .summaries.common import is_lazy_like
from .summaries.lazy import _metadata, is_dask_frame, is_polars_lazyframe, is_spark_frame
from .summaries.polars import is_polars_frame, is_polars_series

HASH_CELLS = 100_000  # cells (rows × columns, or elements) behind the hash of big data
PYTHON_CELLS = 20_000  # the same for data read through Python objects (object columns, Arrow)
HASH_BYTES = 65_536  # of a long string or bytes: this much of its head and of its tail
WALK_NODES = 10_000  # items of a container (nested ones included) behind its hash
VALUE_CHARS = 40  # scalars and strings up to this long are shown with their value
MAX_COLUMNS = 200  # columns whose dtypes a fingerprint keeps
MAX_LINES = 30  # lines of a change list before "… and N more"
SHOWN_COLUMNS = 3  # column changes named in one line before "and N more"

ChangeKind = Literal["created", "changed", "deleted"]
_SCALARS = (int, float, complex, bool, type(None))


@dataclass(frozen=True)
class ValuePrint:
    """What a value is, read cheaply; two prints that compare equal describe equal-looking values.

    ``identity`` (the object's ``id``) is kept to tell a rebound name from an untouched one when
    the content cannot be hashed; it takes no part in comparisons.
    """

    type: str  # qualified: "pandas.DataFrame", "int"
    shape: tuple[int | None, ...] | None = None  # None: no shape; None inside: unknown (lazy)
    length: int | None = None  # of strings, bytes and containers without a shape
    columns: tuple[tuple[str, str], ...] = ()  # (name, dtype) of a frame's columns
    dtype: str = ""  # of arrays and Series
    value: str = ""  # the repr of a small scalar or short string
    hash: str = ""  # of a bounded sample of the content; "" when that is not cheap
    identity: int = field(default=0, compare=False)
    sampled: bool = field(default=False, compare=False)  # the hash read a part of the content

    @property
    def label(self) -> str:
        """The short type name shown to people: "DataFrame", "polars DataFrame", "ndarray"."""
        module, _, name = self.type.rpartition(".")
        top = module.partition(".")[0]
        return name if top in ("", "pandas", "numpy") else f"{top} {name}"

    def size_text(self) -> str:
        """The size as "600×5", "len 3", or "" (scalars)."""
        if self.shape is not None:
            return "×".join("?" if dim is None else str(dim) for dim in self.shape)
        return f"len {self.length:,}" if self.length is not None else ""

    def describe(self, *, show_value: bool = True) -> str:
        """The value as "DataFrame 600×5", "int 20", "str len 12"."""
        parts = [self.label, self.size_text()]
        if show_value and self.value:
            parts.append(self.value)
        elif self.dtype and self.shape is not None:
            parts.append(self.dtype)
        return " ".join(p for p in parts if p)


# -- one value -------------------------------------------------------------------------------


def _digest(*parts: bytes) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()[:16]


def _step(length: int, budget: int) -> int:
    return max(1, math.ceil(length / max(budget, 1)))


def _pandas_column_hash(column: Any) -> bytes:
    """A hash of one sampled column; cells pandas cannot hash (tuples, lists) by their repr."""
    import pandas as pd

    try:
        return bytes(pd.util.hash_pandas_object(column, index=False).to_numpy().tobytes())
    except (TypeError, ValueError):
        return repr(column.tolist()).encode("utf-8", "replace")


def _pandas_print(value: Any) -> ValuePrint:
    import pandas as pd

    frame = value.ndim == 2
    length = len(value)
    width = len(value.columns) if frame else 1
    objects = any(str(d) == "object" for d in (value.dtypes if frame else [value.dtype]))
    cells = PYTHON_CELLS if objects else HASH_CELLS  # object cells are hashed in Python
    step = _step(length, cells // max(width, 1))
    sample = value.iloc[::step]
    columns = [sample.iloc[:, i] for i in range(width)] if frame else [sample]
    parts = [_pandas_column_hash(column) for column in columns]
    try:
        parts.append(pd.util.hash_pandas_object(sample.index).to_numpy().tobytes())
    except (TypeError, ValueError):
        parts.append(repr(sample.index.tolist()).encode("utf-8", "replace"))
    names = repr(list(value.columns) if frame else value.name).encode("utf-8", "replace")
    dtypes = (
        tuple((str(k), str(v)) for k, v in list(value.dtypes.items())[:MAX_COLUMNS])
        if frame
        else ()
    )
    return ValuePrint(
        qualified_name(type(value)),
        shape=tuple(value.shape),
        columns=dtypes,
        dtype="" if frame else str(value.dtype),
        hash=_digest(*parts, names, str(length).encode()),
        sampled=step > 1,
    )


def _numpy_print(value: Any) -> ValuePrint:
    import numpy as np

    hashed = ""
    step = _step(value.size, HASH_CELLS)
    if not value.dtype.hasobject and value.size:
        sample = np.ascontiguousarray(value.flat[np.arange(0, value.size, step)])
        hashed = _digest(sample.tobytes(), str(value.shape).encode(), str(value.dtype).encode())
    return ValuePrint(
        qualified_name(type(value)), shape=tuple(value.shape), dtype=str(value.dtype), hash=hashed,
        sampled=step > 1,
    )  # fmt: skip


def _polars_print(value: Any) -> ValuePrint:
    frame = is_polars_frame(value)
    length = value.height if frame else len(value)
    width = value.width if frame else 1
    step = _step(length, HASH_CELLS // max(width, 1))
    sample = value.gather_every(step)
    hashed = sample.hash_rows(seed=0) if frame else sample.hash(seed=0)
    columns = (
        tuple((k, str(v)) for k, v in list(value.schema.items())[:MAX_COLUMNS]) if frame else ()
    )
    return ValuePrint(
        qualified_name(type(value)),
        shape=(length, width) if frame else (length,),
        columns=columns,
        dtype="" if frame else str(value.dtype),
        hash=_digest(
            hashed.to_numpy().tobytes(), repr(value.columns if frame else value.name).encode()
        ),
        sampled=step > 1,
    )


def _arrow_print(value: Any) -> ValuePrint:
    table = is_arrow_table(value)
    length = value.num_rows if table else len(value)
    width = value.num_columns if table else 1
    step = _step(length, PYTHON_CELLS // max(width, 1))
    sample = value.take(list(range(0, length, step)))
    rows = sample.to_pylist()
    schema = value.schema if table else None
    columns = tuple((f.name, str(f.type)) for f in list(schema)[:MAX_COLUMNS]) if schema else ()
    return ValuePrint(
        qualified_name(type(value)),
        shape=(length, width) if table else (length,),
        columns=columns,
        dtype="" if table else str(value.type),
        hash=_digest(repr(rows).encode("utf-8", "replace"), repr(columns).encode()),
        sampled=step > 1,
    )


def _lazy_print(value: Any) -> ValuePrint:
    """Columns from metadata only (dask meta, Spark schema, polars schema); nothing computed."""
    kind = qualified_name(type(value))
    columns: tuple[tuple[str, str], ...] = ()
    read: Callable[[], Any] | None = None
    if is_dask_frame(value):
        read = lambda: list(value.dtypes.items())  # noqa: E731
    elif is_spark_frame(value):
        read = lambda: [(f.name, f.dataType.simpleString()) for f in value.schema.fields]  # noqa: E731
    elif is_polars_lazyframe(value):
        read = lambda: list(value.collect_schema().items())  # noqa: E731
    if read is not None:
        try:
            found = _metadata(read) or []
        except Exception:  # metadata that cannot be read: the type alone
            found = []
        columns = tuple((str(k), str(v)) for k, v in found[:MAX_COLUMNS])
    shape = (None, len(columns)) if columns else None
    return ValuePrint(kind, shape=shape, columns=columns, identity=id(value))


def _walk_digest(value: object) -> str:
    """A hash of a container's items, nested ones included, up to ``WALK_NODES`` of them.

    Scalars and strings count by value; other objects by type and shape (not by content).
    """
    hasher = hashlib.sha256()
    stack: list[object] = [value]
    seen = 0
    while stack and seen < WALK_NODES:
        item = stack.pop()
        seen += 1
        if isinstance(item, dict):
            hasher.update(b"{%d" % len(item))
            for key, inner in list(item.items())[:WALK_NODES]:
                stack.extend((inner, key))
        elif isinstance(item, list | tuple | set | frozenset):
            hasher.update(b"[%d" % len(item))
            items = sorted(item, key=repr) if isinstance(item, set | frozenset) else item
            stack.extend(reversed(list(items)[:WALK_NODES]))
        elif isinstance(item, str | bytes | int | float | complex | bool | type(None)):
            hasher.update(repr(item)[: 2 * HASH_BYTES].encode("utf-8", "replace"))
        else:
            hasher.update(f"<{qualified_name(type(item))} {shape_of(item)}>".encode())
    hasher.update(b"+" if stack else b".")  # a container cut at the node budget says so
    return hasher.hexdigest()[:16]


def _plain_print(value: object) -> ValuePrint:
    kind = qualified_name(type(value))
    if isinstance(value, _SCALARS):
        text = repr(value)
        shown = text if len(text) <= VALUE_CHARS else ""
        return ValuePrint(kind, value=shown, hash=_digest(text.encode()))
    if isinstance(value, str | bytes):
        raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
        ends = raw if len(raw) <= 2 * HASH_BYTES else raw[:HASH_BYTES] + raw[-HASH_BYTES:]
        shown = repr(value) if len(value) <= VALUE_CHARS else ""
        return ValuePrint(kind, length=len(value), value=shown, hash=_digest(ends))
    if isinstance(value, list | tuple | dict | set | frozenset):
        return ValuePrint(kind, length=len(value), hash=_walk_digest(value), identity=id(value))
    return _object_print(value)


def _object_print(value: object) -> ValuePrint:
    """Other objects: shape if any, and a hash of their attribute names and kinds."""
    kind = qualified_name(type(value))
    shape = shape_of(value)
    attributes = getattr(value, "__dict__", None)
    hashed = ""
    if isinstance(attributes, dict) and not isinstance(value, type | types.ModuleType):
        hashed = _walk_digest({str(k): _kind_of(v) for k, v in list(attributes.items())[:500]})
    return ValuePrint(
        kind, shape=tuple(shape) if shape is not None else None, hash=hashed, identity=id(value)
    )


def _kind_of(value: object) -> str:
    if isinstance(value, _SCALARS | str):
        return repr(value)[:200]
    return f"{qualified_name(type(value))} {shape_of(value)}"


_READERS: list[tuple[Callable[[object], bool], Callable[[Any], ValuePrint]]] = [
    (lambda v: is_dataframe(v) or is_series(v), _pandas_print),
    (is_ndarray, _numpy_print),
    (lambda v: is_polars_frame(v) or is_polars_series(v), _polars_print),
    (lambda v: is_arrow_table(v) or is_arrow_array(v), _arrow_print),
]


def fingerprint(value: object) -> ValuePrint:
    """The fingerprint of ``value``, at bounded cost; never raises (a failure gives the type)."""
    try:
        for matches, read in _READERS:
            if matches(value):
                return _with_identity(read(value), value)
        if is_lazy_like(value):
            return _lazy_print(value)
        return _plain_print(value)
    except Exception:  # a value that cannot be read is described by its type alone
        return ValuePrint(qualified_name(type(value)), identity=id(value))


def _with_identity(print_: ValuePrint, value: object) -> ValuePrint:
    return dataclasses.replace(print_, identity=id(value))


# -- which names, and what changed -------------------------------------------------------------


IPYTHON_NAMES = frozenset({"In", "Out", "get_ipython", "exit", "quit"})


def tracked_names(
    namespace: Mapping[str, object], hidden: Mapping[str, object] | None = None
) -> list[str]:
    """The names a step's changes are reported for: not ``_``-prefixed, not IPython's own."""
    hidden = hidden or {}
    return [
        name
        for name, value in namespace.items()
        if isinstance(name, str)
        and not name.startswith("_")
        and name not in IPYTHON_NAMES
        and not (name in hidden and hidden[name] is value)
    ]


@dataclass(frozen=True)
class Change:
    """How one step changed one variable, with its one-line summary."""

    name: str
    kind: ChangeKind
    summary: str  # "DataFrame 600×5 → 598×5, column date str → datetime64[us]"
    hash: str = ""  # the content hash after the step ("" for a deleted variable)

    @property
    def line(self) -> str:
        return f"{self.name}: {self.summary}"


def describe_change(before: ValuePrint, after: ValuePrint, *, private: bool = False) -> str | None:
    """The change as "DataFrame 600×5 → 598×5, column date str → datetime64"; None if none shows.

    ``private``: only the type and whether it changed (no sizes, values or columns).
    """
    if before == after and (before.hash or before.identity == after.identity):
        return None
    if private:
        return (
            f"{after.label}, changed"
            if before.type == after.type
            else f"{before.label} → {after.label}"
        )
    if before.type != after.type:
        return f"{before.describe()} → {after.describe()}"
    head = after.label
    details = _detail_changes(before, after)
    if before.size_text() != after.size_text():
        head += f" {before.size_text() or '?'} → {after.size_text() or '?'}"
    elif after.size_text():
        head += f" {after.size_text()}"
    if before.value != after.value and before.value and after.value:
        head += f" {before.value} → {after.value}"
        return ", ".join([head, *details])
    if not details and before.size_text() == after.size_text():
        details.append("values changed" if before.hash != after.hash else "rebound to a new object")
    return ", ".join([head, *details])


def _detail_changes(before: ValuePrint, after: ValuePrint) -> list[str]:
    details: list[str] = []
    if before.dtype != after.dtype and before.dtype and after.dtype:
        details.append(f"dtype {before.dtype} → {after.dtype}")
    old, new = dict(before.columns), dict(after.columns)
    added = [c for c in new if c not in old]
    removed = [c for c in old if c not in new]
    retyped = [f"column {c} {old[c]} → {new[c]}" for c in new if c in old and old[c] != new[c]]
    if added:
        details.append("added " + _names(added))
    if removed:
        details.append("removed " + _names(removed))
    details.extend(retyped[:SHOWN_COLUMNS])
    if len(retyped) > SHOWN_COLUMNS:
        details.append(f"{len(retyped) - SHOWN_COLUMNS} more columns retyped")
    return details


def _names(columns: list[str]) -> str:
    shown = ", ".join(columns[:SHOWN_COLUMNS])
    more = len(columns) - SHOWN_COLUMNS
    noun = "column" if len(columns) == 1 else "columns"
    return f"{noun} {shown}" + (f" and {more} more" if more > 0 else "")


def changes(
    before: Mapping[str, ValuePrint],
    after: Mapping[str, ValuePrint],
    *,
    private: Collection[str] = (),
) -> list[Change]:
    """Created, changed and deleted variables from fingerprints taken before and after a step.

    A name in only one map was created or deleted; names in both are compared. Names in
    ``private`` are described by their type alone.
    """
    found: list[Change] = []
    for name in sorted(after.keys() - before.keys()):
        shown = after[name].label if name in private else after[name].describe()
        found.append(Change(name, "created", f"created ({shown})", after[name].hash))
    for name in sorted(after.keys() & before.keys()):
        summary = describe_change(before[name], after[name], private=name in private)
        if summary is not None:
            found.append(Change(name, "changed", summary, after[name].hash))
    for name in sorted(before.keys() - after.keys()):
        shown = before[name].label if name in private else before[name].describe()
        found.append(Change(name, "deleted", f"deleted (was {shown})"))
    return found


def change_lines(found: Iterable[Change], limit: int = MAX_LINES) -> list[str]:
    """One line per change, at most ``limit`` of them and a line saying how many more."""
    lines = [change.line for change in found]
    if len(lines) > limit:
        return [*lines[:limit], f"… and {len(lines) - limit} more"]
    return lines


class ChangeLike(Protocol):
    """A change as a step made it now (:class:`Change`) or as a record saved it."""

    @property
    def name(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def hash(self) -> str: ...


def compare_changes(saved: Iterable[ChangeLike], now: Iterable[ChangeLike]) -> list[str]:
    """How a step's changes now differ from the saved run's, one line per variable."""
    before = {c.name: c for c in saved}
    after = {c.name: c for c in now}
    found = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old is None and new is not None:
            found.append(f"{name}: {new.summary} now, untouched in the saved run")
        elif new is None and old is not None:
            found.append(f"{name}: {old.summary} in the saved run, untouched now")
        elif old is not None and new is not None:
            if old.summary != new.summary:
                found.append(f"{name}: {old.summary} in the saved run, {new.summary} now")
            elif old.hash and new.hash and old.hash != new.hash:
                found.append(f"{name}: {new.summary}, with other values than in the saved run")
    return found
