"""Fingerprints of namespace values, and what one code step changed, at bounded cost.

A fingerprint is what can be read of a value cheaply: its type, shape or length, the dtype of each
column (frames) or of the elements (arrays, Series), a short value for small scalars and strings,
and a content hash of a bounded, deterministic sample: at most ``HASH_CELLS`` evenly spaced cells
of a frame or array, the first and last ``HASH_BYTES`` of a long string, ``WALK_NODES`` items of
a container (a bounded walk), ``HASH_COLUMNS`` evenly spaced columns of a wide frame, and
``DEVICE_SAMPLE`` evenly spaced elements of a device array (gathered on its device: a few KB move
to the host). Nothing is deep-copied and no big frame is scanned whole; lazy and distributed
collections (dask, Spark, polars LazyFrame) are described from their metadata and never computed.
Reading one value stops after ``VALUE_TIME_S``: such a value is "not tracked" (its type, shape and
identity are kept, not its content).

:func:`changes` compares fingerprints taken before and after a step and gives one line per
variable ("df: DataFrame 600×5 → 598×5, column date str → datetime64[us]"). No data library is
imported here: values are recognised by the modules of their classes.

:func:`record_print` is the form a saved record's drift check holds (type, shape and dtypes as
text, and a hash of at most ``RECORD_HASH_ROWS`` rows or the first ``RECORD_HASH_BYTES`` of a
string); records saved earlier are compared with it, so it is made as it always was.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import hashlib
import math
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from typing import Any, Literal, Protocol

from .arrow_content import UnreadableArrow, content_bytes
from .summaries import (
    bounded_repr,
    is_dataframe,
    is_ndarray,
    is_series,
    qualified_name,
    shape_of,
)
from .summaries.arrow import is_arrow_array, is_arrow_table
from .summaries.common import instance_of, is_lazy_like, libraries_of
from .summaries.device import device_array, host_sample, is_device_array
from .summaries.lazy import _metadata, is_dask_frame, is_polars_lazyframe, is_spark_frame
from .summaries.numpy import is_file_backed, page_sample
from .summaries.polars import is_polars_frame, is_polars_series
from .summaries.xarray import is_data_array, is_dataset

HASH_CELLS = 100_000  # cells (rows × columns, or elements) behind the hash of big data
PYTHON_CELLS = 5_000  # the same for cells hashed one by one (object and string columns, Arrow)
HASH_BYTES = 65_536  # of a long string or bytes: this much of its head and of its tail
WALK_NODES = 1_000  # items of a container (nested ones included) behind its hash
VALUE_CHARS = 40  # scalars and strings up to this long are shown with their value
MAX_COLUMNS = 200  # columns whose dtypes a fingerprint keeps
MAX_LINES = 30  # lines of a change list before "… and N more"
SHOWN_COLUMNS = 3  # column changes named in one line before "and N more"
HASH_COLUMNS = 100  # columns of a wide frame behind its hash, evenly spaced
VALUE_TIME_S = 0.02  # CPU seconds hashing (or sizing, for undo) one value may take: "not tracked"
CHECK_EVERY = 256  # walked items between two looks at the clock
CELL_ELEMENTS = 1_000  # elements of an array held in an object cell behind its hash
CHECK_CELLS = 16  # object cells made into texts between two looks at the clock

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
    untracked: bool = field(default=False, compare=False)  # reading it took over VALUE_TIME_S

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


class OutOfTime(Exception):
    """Reading one value took longer than its time limit."""


class TimeLimit:
    """A limit on the CPU time of reading one value; :meth:`check` raises OutOfTime past it.

    The thread's CPU time, not the wall clock: what is bounded is the work, which other busy
    processes on the machine do not change. Used as a context manager, it also leaves out the
    garbage collections its thread runs meanwhile: a full collection of a kernel holding
    millions of objects takes hundreds of milliseconds, which is not the value's cost.
    """

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = VALUE_TIME_S if seconds is None else seconds
        self.end = time.thread_time() + self.seconds
        self._thread = threading.get_ident()
        self._collecting_since: float | None = None

    def __enter__(self) -> TimeLimit:
        gc.callbacks.append(self._collection)
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(ValueError):  # already gone: code run meanwhile cleared the list
            gc.callbacks.remove(self._collection)

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        if threading.get_ident() != self._thread:
            return  # another thread's collection is not in this thread's CPU time
        if phase == "start":
            self._collecting_since = time.thread_time()
        elif self._collecting_since is not None:
            self.end += time.thread_time() - self._collecting_since
            self._collecting_since = None

    def check(self) -> None:
        if time.thread_time() > self.end:
            raise OutOfTime(f"over {self.seconds * 1000:g} ms")


def _digest(*parts: bytes, framed: bool = True) -> str:
    """The first 16 hex digits of the SHA-256 of ``parts``, each after its length when ``framed``
    (a saved record's hash is not)."""
    hasher = hashlib.sha256()
    for part in parts:
        if framed:
            hasher.update(len(part).to_bytes(8, "little"))
        hasher.update(part)
    return hasher.hexdigest()[:16]


def _step(length: int, budget: int) -> int:
    return max(1, math.ceil(length / max(budget, 1)))


def spread(length: int, count: int) -> list[int]:
    """``count`` evenly spaced positions of ``range(length)`` (all of them when fewer)."""
    if length <= count:
        return list(range(length))
    return sorted({round(i * (length - 1) / (count - 1)) for i in range(count)})


_CELL_BY_CELL = ("object", "str", "string")  # dtypes whose cells pandas hashes one by one
_TEXT, _OBJECTS, _ARROW, _EXTENSION = "text", "objects", "arrow", "extension"  # column kinds
CHUNK_CELLS = 256  # object cells hashed between two looks at the clock


def dtype_text(dtype: Any) -> str:
    """``str(dtype)``, remembered: numpy builds the name in Python (20 µs a column)."""
    try:
        return _dtype_text(dtype)
    except TypeError:  # an unhashable dtype
        return str(dtype)


@lru_cache(maxsize=1024)
def _dtype_text(dtype: Any) -> str:
    return str(dtype)


# Any: a numpy dtype, or one of the kinds named above
def _column_kind(dtype: Any) -> Any:
    """How a column's cells are hashed: a numeric numpy dtype (one block per dtype), object
    cells and strings (pandas hashes them one by one, in one block), Arrow-backed columns (from
    their buffers), other extension types (by pandas, a column at a time)."""
    import numpy as np

    if isinstance(dtype, np.dtype) and dtype.kind in "biufcmM":
        return dtype
    text = dtype_text(dtype)
    if text == "object":
        return _OBJECTS
    if text in _CELL_BY_CELL:
        return _TEXT
    return _ARROW if instance_of(dtype, "pandas", "ArrowDtype") else _EXTENSION


def _pandas_column_hash(column: Any, limit: TimeLimit) -> bytes:
    """A hash of one sampled column (or Index), made as pandas' ``hash_pandas_object`` makes it
    where that reads no user code in bounded time: object cells a few at a time, Arrow-backed
    columns from their buffers."""
    import pandas as pd

    kind = _column_kind(column.dtype)
    if kind is _OBJECTS and not instance_of(column, "pandas", "MultiIndex"):
        return _object_cells(column.to_numpy(dtype=object), limit, categorize=True)
    if kind is _ARROW:
        return _arrow_column(column, limit)
    try:
        return bytes(pd.util.hash_pandas_object(column, index=False).to_numpy().tobytes())
    except Exception:  # a type without a hash: its cells as Python objects
        return _object_cells(column.to_numpy(dtype=object), limit, categorize=True)


def _arrow_column(column: Any, limit: TimeLimit) -> bytes:
    """An Arrow-backed column's sampled cells, from its buffers (a type they cannot be read from:
    its rows as Python values, a few at a time)."""
    chunked = column.array.__arrow_array__()
    try:
        return _digest(*content_bytes(chunked, limit.check)).encode()
    except UnreadableArrow:
        parts = []
        for start in range(0, len(chunked), CHUNK_CELLS):
            parts.append(_walk_digest(chunked.slice(start, CHUNK_CELLS).to_pylist(), limit)[0])
            limit.check()
        return "".join(parts).encode()


def _pandas_cells(sample: Any, frame: bool, limit: TimeLimit) -> list[bytes]:
    """Hashes of the sampled cells: numeric columns as one block per dtype, object and string
    columns together (pandas hashes those cell by cell), Arrow-backed and other extension
    columns one by one."""
    import numpy as np

    if not frame:
        return [_pandas_column_hash(sample, limit)]
    groups: dict[Any, list[int]] = {}  # by _column_kind, in the order of the columns
    for position, dtype in enumerate(sample.dtypes):
        groups.setdefault(_column_kind(dtype), []).append(position)
    parts = []
    for kind, positions in groups.items():
        block = sample.iloc[:, positions]
        if isinstance(kind, np.dtype):
            parts.append(np.ascontiguousarray(block.to_numpy()).tobytes())
        elif kind is _TEXT or kind is _OBJECTS:
            parts.append(_object_cells(block.to_numpy(dtype=object).ravel(), limit))
        else:
            parts += [_pandas_column_hash(column, limit) for _, column in block.items()]
        limit.check()
    return parts


def _object_cells(cells: Any, limit: TimeLimit, *, categorize: bool = False) -> bytes:
    """pandas' hashes of a flat array of object cells, ``CHUNK_CELLS`` at a time (the limit is
    looked at between them). Cells of other than scalar types (containers, arrays, a notebook's
    own classes) are hashed by a text made without running their code (:func:`_cell_text`)."""
    import pandas as pd

    if not all(map(_scalar_cell, set(map(type, cells)))):
        cells = _cell_texts(cells, limit)
    parts = []
    for start in range(0, len(cells), CHUNK_CELLS):
        chunk = cells[start : start + CHUNK_CELLS]
        parts.append(pd.util.hash_array(chunk, categorize=categorize).tobytes())
        limit.check()
    return b"".join(parts)


_CELL_LIBRARIES = frozenset({"builtins", "numpy", "pandas", "datetime", "decimal", "fractions"})


def _class_of(value: object) -> type:
    """``type(value)``, as a key of the caches by class."""
    return type(value)


@lru_cache(maxsize=256)
def _scalar_cell(cls: type) -> bool:
    """Whether pandas may hash a cell of class ``cls`` as it does (``str()`` of it): a scalar of
    Python, numpy, pandas, datetime or decimal, no subclass of it from elsewhere."""
    scalar = issubclass(cls, str | bytes) or not hasattr(cls, "__len__")
    return scalar and libraries_of(cls) <= _CELL_LIBRARIES


# Any: a numpy object array (numpy is not imported at module level)
def _cell_texts(cells: Any, limit: TimeLimit) -> Any:
    """``cells`` with those of other than scalar types as :func:`_cell_text` (the limit is looked
    at every ``CHECK_CELLS`` cells)."""
    import numpy as np

    texts = np.empty(len(cells), dtype=object)
    for position, cell in enumerate(cells):
        if not position % CHECK_CELLS:
            limit.check()
        texts[position] = cell if _scalar_cell(_class_of(cell)) else _cell_text(cell, limit)
    return texts


@lru_cache(maxsize=256)
def _cell_class(cls: type) -> tuple[str, bool]:
    """The qualified name of a cell's class, and whether it is a numpy array."""
    import numpy as np

    return qualified_name(cls), issubclass(cls, np.ndarray)


def _cell_text(cell: object, limit: TimeLimit) -> str:
    """A cell pandas would hash by its ``str()``, as a text made without its own code: a short
    list or tuple of scalars by the built-in repr, another container by a bounded walk, an
    array by a sample of its bytes, another object by its class and attributes."""
    kind, array = _cell_class(_class_of(cell))
    if type(cell) in (list, tuple) and _scalars_only(cell):  # type: ignore[arg-type]
        return repr(cell)
    if isinstance(cell, (dict, *_CONTAINERS)):
        return f"<{kind} {_walk_digest(cell, limit)[0]}>"
    if array:
        return f"<{kind} {_array_digest(cell, CELL_ELEMENTS)[0]}>"
    attributes = _instance_dict(cell)
    state = _state(_class_of(cell), attributes) if attributes is not None else []
    return f"<{kind} " + ", ".join(f"{k}={_kind_of(v)}" for k, v in state) + ">"


def _scalars_only(items: list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``items`` holds at most ``CELL_ELEMENTS`` plain scalars and strings (whose repr is
    Python's own)."""
    return len(items) <= CELL_ELEMENTS and all(type(item) in _SCALAR_TYPES for item in items)


def _pandas_print(value: Any, limit: TimeLimit) -> ValuePrint:
    import pandas as pd

    frame = value.ndim == 2
    length = len(value)
    width = value.shape[1] if frame else 1
    positions = spread(width, HASH_COLUMNS)
    dtypes: Any = value.dtypes if frame else None
    sampled_dtypes = list(dtypes.iloc[positions]) if frame else [value.dtype]
    objects = any(dtype_text(d) in _CELL_BY_CELL for d in sampled_dtypes)
    cells = PYTHON_CELLS if objects else HASH_CELLS  # such cells are hashed one by one
    step = _step(length, cells // max(len(positions), 1))
    sample = value.iloc[::step, positions] if frame else value.iloc[::step]
    parts = _pandas_cells(sample, frame, limit)
    parts.append(_pandas_column_hash(sample.index, limit))
    parts.append(_pandas_column_hash(value.columns if frame else pd.Index([value.name]), limit))
    if frame:
        parts.append(repr([dtype_text(d) for d in sampled_dtypes]).encode())
    columns = (
        tuple((str(k), dtype_text(v)) for k, v in dtypes.iloc[:MAX_COLUMNS].items())
        if frame
        else ()
    )
    return ValuePrint(
        qualified_name(type(value)),
        shape=tuple(value.shape),
        columns=columns,
        dtype="" if frame else str(value.dtype),
        hash=_digest(*parts, str(length).encode()),
        sampled=step > 1 or len(positions) < width,
    )


def _array_digest(value: Any, cells: int) -> tuple[str, int]:
    """A hash of ``cells`` evenly spaced elements of a numpy array (a few contiguous pages of a
    file-backed one), and the step between them; "" for an empty or object array."""
    import numpy as np

    step = _step(value.size, cells)
    if value.dtype.hasobject or not value.size:
        return "", step
    if is_file_backed(value):  # a few contiguous pages, not every page of the file
        sample = np.ascontiguousarray(page_sample(value, cells))
    else:
        sample = np.ascontiguousarray(value.flat[np.arange(0, value.size, step)])
    return _digest(sample.tobytes(), str(value.shape).encode(), str(value.dtype).encode()), step


def _numpy_print(value: Any, limit: TimeLimit, share: int = 1) -> ValuePrint:
    import numpy as np

    if value.dtype.hasobject and value.size:  # Python objects: as pandas hashes object cells
        step = _step(value.size, PYTHON_CELLS // share)
        cells = _object_cells(value.flat[np.arange(0, value.size, step)], limit)
        hashed = _digest(cells, str(value.shape).encode(), str(value.dtype).encode())
    else:
        hashed, step = _array_digest(value, HASH_CELLS // share)
    return ValuePrint(
        qualified_name(type(value)), shape=tuple(value.shape), dtype=str(value.dtype), hash=hashed,
        sampled=step > 1,
    )  # fmt: skip


def _device_print(value: Any, limit: TimeLimit) -> ValuePrint:
    """Shape, dtype, device and a hash of a bounded sample gathered on the device."""
    info = device_array(value)
    if info is None:
        raise ValueError("not a readable device array")
    hashed, sampled = "", False
    try:
        sample = host_sample(value)
    except Exception:  # meta tensors, device memory no loaded library reads
        pass
    else:
        sampled = len(sample) < math.prod(info.shape)
        hashed = _digest(sample.tobytes(), repr(info).encode())
    return ValuePrint(
        qualified_name(type(value)), shape=info.shape, dtype=info.dtype, hash=hashed,
        sampled=sampled,
    )  # fmt: skip


def _polars_print(value: Any, limit: TimeLimit) -> ValuePrint:
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


def _arrow_print(value: Any, limit: TimeLimit) -> ValuePrint:
    table = is_arrow_table(value)
    length = value.num_rows if table else len(value)
    width = value.num_columns if table else 1
    step = _step(length, PYTHON_CELLS // max(width, 1))
    sample = value.take(list(range(0, length, step)))
    rows = _rows_text(sample, limit)
    schema = value.schema if table else None
    columns = tuple((f.name, str(f.type)) for f in list(schema)[:MAX_COLUMNS]) if schema else ()
    return ValuePrint(
        qualified_name(type(value)),
        shape=(length, width) if table else (length,),
        columns=columns,
        dtype="" if table else str(value.type),
        hash=_digest(rows.encode("utf-8", "replace"), repr(columns).encode()),
        sampled=step > 1,
    )


def _rows_text(sample: Any, limit: TimeLimit) -> str:
    """``repr(sample.to_pylist())`` of an Arrow table or array, made ``CHUNK_CELLS`` rows at a
    time (the limit is looked at between them)."""
    texts: list[str] = []
    for start in range(0, len(sample), CHUNK_CELLS):
        texts += map(repr, sample.slice(start, CHUNK_CELLS).to_pylist())
        limit.check()
    return "[" + ", ".join(texts) + "]"


def _is_index(value: object) -> bool:
    return instance_of(value, "pandas", "Index")


def _is_extension_array(value: object) -> bool:
    return instance_of(value, "pandas.api.extensions", "ExtensionArray")


def _index_print(value: Any, limit: TimeLimit, share: int = 1) -> ValuePrint:
    """A pandas Index of any kind, or an extension array (Categorical, ArrowExtensionArray): a
    hash of its sampled values and names, never of the caches that reading it fills."""
    import pandas as pd

    index = _is_index(value)
    levels = value.nlevels if index else 1
    by_cell = levels == 1 and dtype_text(value.dtype) in _CELL_BY_CELL
    cells = (PYTHON_CELLS if by_cell else HASH_CELLS) // (levels * share)
    step = _step(len(value), cells)
    sample = value[::step] if index else pd.Series(value[::step], copy=False)
    names = _walk_digest(list(value.names) if index else [], limit)[0]
    hashed = _digest(_pandas_column_hash(sample, limit), names.encode(), str(len(value)).encode())
    return ValuePrint(
        qualified_name(type(value)), shape=(len(value),), dtype=dtype_text(value.dtype),
        hash=hashed, sampled=step > 1,
    )  # fmt: skip


def _xarray_print(value: Any, limit: TimeLimit) -> ValuePrint:
    """An xarray DataArray or Dataset: dims, dtypes and a hash of the sampled values of the
    variables held in memory (data in dask, or in a file not loaded yet, is never read)."""
    dataset = is_dataset(value)
    every = list(value.variables.items() if dataset else value.coords.variables.items())
    if not dataset:
        every.insert(0, (value.name, value.variable))
    variables = every[:HASH_COLUMNS]
    parts, sampled = [], False
    for name, variable in variables:
        hashed, cut = _variable_digest(variable, limit, len(variables))
        shape = str(variable.shape) + dtype_text(variable.dtype)
        parts += [_walk_digest([name, *variable.dims])[0].encode(), shape.encode(), hashed.encode()]
        sampled = sampled or cut
        limit.check()
    kept = islice(value.data_vars.items(), MAX_COLUMNS) if dataset else ()
    return ValuePrint(
        qualified_name(type(value)), shape=None if dataset else tuple(value.shape),
        columns=tuple((str(k), dtype_text(v.dtype)) for k, v in kept),
        dtype="" if dataset else dtype_text(value.dtype),
        hash=_digest(*parts), sampled=sampled or len(variables) < len(every),
    )  # fmt: skip


def _variable_digest(variable: Any, limit: TimeLimit, share: int) -> tuple[str, bool]:
    """The hash of one xarray variable's values, and whether it was sampled; "not loaded" for
    data in dask or in a file (``Variable.data`` would load it: the wrapped array is read)."""
    data = getattr(variable, "_data", None)
    index = getattr(data, "array", None)
    if _is_index(index):
        found = _index_print(index, limit, share)
    elif is_ndarray(data):
        found = _numpy_print(data, limit, share)
    else:
        return "not loaded", False
    return found.hash, found.sampled


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


_CONTAINERS = (list, tuple, set, frozenset, deque)


_SCALAR_TYPES = (str, bytes, int, float, complex, bool, type(None))
_REPR_BASES = (bool, int, float, complex, str, bytes)  # bool before int: its subclass


def _scalar_text(value: object) -> str:
    """``repr`` of a scalar or string by its built-in class: a subclass's own ``__repr__`` (a
    notebook's code) is not run."""
    if type(value) in _SCALAR_TYPES:
        return repr(value)
    base = next((b for b in _REPR_BASES if isinstance(value, b)), object)
    return str(base.__repr__(value))


def _exact(value: str | bytes) -> str | bytes:
    """``value`` as a plain str or bytes (a copy made by the built-in class, none of a
    subclass's methods run)."""
    if type(value) in (str, bytes):
        return value
    base: Any = str if isinstance(value, str) else bytes
    return base.__getitem__(value, slice(None))  # type: ignore[no-any-return]


def _library_attribute(cls: type, name: str) -> bool:
    """Whether attribute ``name`` of ``cls`` is defined by a library (not by the notebook's own
    classes, whose properties are their code and are never run to read a value)."""
    for owner in cls.__mro__:
        if name in vars(owner):
            return str(getattr(owner, "__module__", "")).partition(".")[0] not in ("__main__", "")
    return False


def _shape(value: object) -> tuple[int, ...] | None:
    """The ``shape`` of a library's array-like object; None for others and the notebook's own."""
    return shape_of(value) if _library_attribute(type(value), "shape") else None


# Any: a class whose methods are called unbound on ``item`` (a union of classes rejects that)
def builtin_base(item: Any) -> Any:
    """The built-in container class ``item`` is an instance of (its subclass's methods, which
    may block or compute, are never called: the base class's are)."""
    return next(base for base in (dict, *_CONTAINERS) if isinstance(item, base))


def _length(item: Any) -> int:
    return int(builtin_base(item).__len__(item))


def _container_items(item: Any) -> list[Any]:
    """At most WALK_NODES items of a container, in a stable order (sets by the repr of items)."""
    first = list(islice(builtin_base(item).__iter__(item), WALK_NODES))
    if isinstance(item, set | frozenset):
        return sorted(first, key=_order_key)
    return first


def _order_key(item: object) -> str:
    return _scalar_text(item) if isinstance(item, _SCALAR_TYPES) else qualified_name(type(item))


def _walk_digest(value: object, limit: TimeLimit | None = None) -> tuple[str, bool]:
    """A hash of a container's items, nested ones included, up to ``WALK_NODES`` of them, and
    whether the walk was cut there.

    Scalars and strings count by value; other objects by type and shape (not by content).
    """
    hasher = hashlib.sha256()
    stack: list[object] = [value]
    seen = 0
    while stack and seen < WALK_NODES:
        item = stack.pop()
        seen += 1
        if limit is not None and not seen % CHECK_EVERY:
            limit.check()
        if isinstance(item, dict):
            hasher.update(b"{%d" % _length(item))
            for key, inner in islice(dict.items(item), WALK_NODES):
                stack.extend((inner, key))
        elif isinstance(item, _CONTAINERS):
            hasher.update(b"[%d" % _length(item))
            stack.extend(reversed(_container_items(item)))
        elif isinstance(item, _SCALAR_TYPES):
            hasher.update(_scalar_text(item)[: 2 * HASH_BYTES].encode("utf-8", "replace"))
        else:
            hasher.update(f"<{qualified_name(type(item))} {_shape(item)}>".encode())
    hasher.update(b"+" if stack else b".")  # a container cut at the node budget says so
    return hasher.hexdigest()[:16], bool(stack)


def _plain_print(value: object, limit: TimeLimit) -> ValuePrint:
    kind = qualified_name(type(value))
    if isinstance(value, _SCALARS):
        text = _scalar_text(value)
        shown = text if len(text) <= VALUE_CHARS else ""
        return ValuePrint(kind, value=shown, hash=_digest(text.encode()))
    if isinstance(value, str | bytes):
        plain = _exact(value)
        raw = plain.encode("utf-8", "replace") if isinstance(plain, str) else plain
        ends = raw if len(raw) <= 2 * HASH_BYTES else raw[:HASH_BYTES] + raw[-HASH_BYTES:]
        shown = repr(plain) if len(plain) <= VALUE_CHARS else ""
        return ValuePrint(kind, length=len(plain), value=shown, hash=_digest(ends))
    if isinstance(value, (dict, *_CONTAINERS)):
        hashed, cut = _walk_digest(value, limit)
        return ValuePrint(kind, length=_length(value), hash=hashed, identity=id(value), sampled=cut)
    return _object_print(value, limit)


def _object_print(value: object, limit: TimeLimit) -> ValuePrint:
    """Other objects: shape if any, and a hash of their attributes (containers by a bounded walk)."""
    shape = _shape(value)
    hashed, cut = _attributes_digest(value, limit)
    return ValuePrint(
        qualified_name(type(value)), shape=tuple(shape) if shape is not None else None,
        hash=hashed, identity=id(value), sampled=cut,
    )  # fmt: skip


def _attributes_digest(value: object, limit: TimeLimit) -> tuple[str, bool]:
    """A hash of an object's attributes, caches left out (containers by a bounded walk), and
    whether a walk was cut; "" for an object without an attribute dict, a class or a module."""
    attributes = _instance_dict(value)
    if attributes is None or isinstance(value, type | types.ModuleType):
        return "", False
    state = _state(_class_of(value), attributes)
    hashed, cut = _walk_digest({k: _kind_of(v) for k, v in state}, limit)
    containers = [v for _, v in state if isinstance(v, (dict, *_CONTAINERS))]
    if containers:
        inner, inner_cut = _walk_digest(containers, limit)
        hashed, cut = _digest(hashed.encode(), inner.encode()), cut or inner_cut
    return hashed, cut


def _instance_dict(value: object) -> dict[str, Any] | None:
    """The attribute dict of ``value``, read by the interpreter's own descriptor: no property,
    ``__getattr__`` or ``__getattribute__`` of its class runs (None when it has none)."""
    slot = _dict_slot(_class_of(value))
    found = slot.__get__(value, type(value)) if slot is not None else None
    return found if isinstance(found, dict) else None


@lru_cache(maxsize=512)
# Any: the interpreter's getset descriptor (types.GetSetDescriptorType has no typed __get__)
def _dict_slot(cls: type) -> Any:
    """The interpreter's ``__dict__`` descriptor of ``cls`` (None when a class in its MRO defines
    ``__dict__`` itself, or it has none)."""
    for owner in cls.__mro__:
        slot = vars(owner).get("__dict__")
        if slot is not None:
            return slot if isinstance(slot, types.GetSetDescriptorType) else None
    return None


def _state(cls: type, attributes: dict[str, Any]) -> list[tuple[str, Any]]:
    """An object's attributes but its caches: what a cached property stored, and attributes
    named as caches (pandas' ``_cache``, ``_item_cache``), which reading the object fills."""
    cached = _cached_names(cls)
    return [
        (key, inner)
        for key, inner in islice(dict.items(attributes), 500)
        if type(key) is str and key not in cached and "cache" not in key.lower()
    ]


_CACHING_DESCRIPTORS = frozenset({
    "cached_property", "cache_readonly", "cachedproperty", "lazyproperty", "lazy_property", "reify",
})  # fmt: skip


@lru_cache(maxsize=512)
def _cached_names(cls: type) -> frozenset[str]:
    """Attributes of ``cls`` computed on first read and stored on the instance under their name
    (``functools.cached_property`` and the libraries' own kinds of it)."""
    return frozenset(
        name
        for owner in cls.__mro__
        for name, attribute in vars(owner).items()
        if type(attribute).__name__.lower() in _CACHING_DESCRIPTORS
        or isinstance(attribute, functools.cached_property)
    )


def _kind_of(value: object) -> str:
    if isinstance(value, (*_SCALARS, str)):
        return _scalar_text(value)[:200]
    if isinstance(value, (dict, *_CONTAINERS)):
        return f"{qualified_name(type(value))} len {_length(value)}"
    return f"{qualified_name(type(value))} {_shape(value)}"


_READERS: list[tuple[Callable[[object], bool], Callable[[Any, TimeLimit], ValuePrint]]] = [
    (lambda v: is_dataframe(v) or is_series(v), _pandas_print),
    (is_ndarray, _numpy_print),
    (lambda v: is_polars_frame(v) or is_polars_series(v), _polars_print),
    (lambda v: is_arrow_table(v) or is_arrow_array(v), _arrow_print),
    (is_device_array, _device_print),
    (lambda v: _is_index(v) or _is_extension_array(v), _index_print),
    (lambda v: is_data_array(v) or is_dataset(v), _xarray_print),
]


def fingerprint(value: object, seconds: float | None = None) -> ValuePrint:
    """The fingerprint of ``value``, at bounded cost; never raises (a failure gives the type).

    Past ``seconds`` (``VALUE_TIME_S``) of reading, the print is marked ``untracked`` and has no
    content hash.
    """
    for attempt in (1, 2):
        try:
            with TimeLimit(seconds) as limit:
                return _read(value, limit)
        except OutOfTime:
            if attempt == 2 or not _first_overrun(value):
                return _untracked(value)
        except Exception:  # a value that cannot be read is described by its type alone
            return ValuePrint(qualified_name(type(value)), identity=id(value))
    raise AssertionError("unreachable")  # pragma: no cover


_OVERRUN: set[str] = set()  # the types of values that ran out of time once in this process


def _first_overrun(value: object) -> bool:
    """Whether a value of this type runs out of time for the first time in this process: it is
    read once more. The first read of a kind pays the libraries' one-time costs (Arrow's compute
    kernels, numpy's and pandas' dispatch tables, path tables), which are not the value's."""
    kind = qualified_name(type(value))
    if kind in _OVERRUN:
        return False
    _OVERRUN.add(kind)
    return True


def _read(value: object, limit: TimeLimit) -> ValuePrint:
    for matches, read in _READERS:
        if matches(value):
            found = _with_identity(read(value, limit), value)
            if read is not _device_print:  # a device sample is bounded; its first gather
                limit.check()  # compiles (JAX) or loads kernels: not the value's size
            return found
    if is_lazy_like(value):
        return _lazy_print(value)
    found = _plain_print(value, limit)
    limit.check()
    return found


def _untracked(value: object) -> ValuePrint:
    """The print of a value whose content took too long to read: what its metadata says."""
    shape = _shape(value)
    length = _length(value) if isinstance(value, (dict, *_CONTAINERS)) else None
    columns: tuple[tuple[str, str], ...] = ()
    dtype = ""
    try:
        if is_dataframe(value):
            dtypes = value.dtypes.iloc[:MAX_COLUMNS]  # type: ignore[attr-defined]
            columns = tuple((str(k), str(v)) for k, v in dtypes.items())
        elif shape is not None and _library_attribute(type(value), "dtype"):
            dtype = str(value.dtype)  # type: ignore[attr-defined]
    except Exception:  # metadata that cannot be read: the type and shape alone
        pass
    return ValuePrint(
        qualified_name(type(value)), shape=shape, length=length, columns=columns, dtype=dtype,
        identity=id(value), untracked=True,
    )  # fmt: skip


def _with_identity(print_: ValuePrint, value: object) -> ValuePrint:
    return dataclasses.replace(print_, identity=id(value))


# -- the print a saved record holds (replay's drift check) --------------------------------------

RECORD_HASH_ROWS = 10_000  # rows of a frame (and 8× as many elements of an array) a record hashes
RECORD_HASH_BYTES = 1_000_000  # of a long string or bytes: the head a record hashes


@dataclass(frozen=True)
class RecordPrint:
    """A value as a saved record describes it for the drift check of a replay.

    Saved records hold these texts and are compared with prints taken now: each is made as it
    always was (its own type names, sampling and hash, not :class:`ValuePrint`'s), or every saved
    notebook would show as drifted.
    """

    type: str  # "pandas.DataFrame": the top-level module and the class
    shape: str  # "600×5", "len 3", or ""
    dtypes: str  # "a:int64, b:float64" of a pandas value, the dtype of an array, or ""
    hash: str  # of a bounded sample of the content; "" when that is not cheap


def record_print(value: object) -> RecordPrint:
    """The print of ``value`` a saved record holds."""
    return RecordPrint(
        type=_record_type(value),
        shape=_record_shape(value),
        dtypes=_record_dtypes(value),
        hash=record_hash(value),
    )


def _record_type(value: object) -> str:
    cls = type(value)
    module = cls.__module__.partition(".")[0]
    return (
        cls.__qualname__ if module in ("builtins", "__main__") else f"{module}.{cls.__qualname__}"
    )


def _record_shape(value: object) -> str:
    shape = _shape(value)
    if shape is not None:
        return "×".join(str(dim) for dim in shape)
    if isinstance(value, str | bytes):
        return f"len {len(_exact(value))}"
    if isinstance(value, list | tuple | dict | set | frozenset):
        return f"len {_length(value)}"
    return ""


def _record_dtypes(value: object) -> str:
    dtypes = getattr(type(value), "dtypes", None)
    try:
        if dtypes is not None and _record_type(value).startswith("pandas."):
            return ", ".join(f"{k}:{v}" for k, v in value.dtypes.items())[:400]  # type: ignore[attr-defined]
        dtype = value.dtype if _library_attribute(type(value), "dtype") else None  # type: ignore[attr-defined]
        return str(dtype)[:100] if dtype is not None else ""
    except Exception:
        return ""


def record_hash(value: object) -> str:
    """The content hash a saved record holds for ``value``, from a bounded sample; "" when that is
    not cheap."""
    try:
        if isinstance(value, _SCALARS):
            return _digest(_scalar_text(value).encode(), framed=False)
        if isinstance(value, str | bytes):
            plain = _exact(value)
            head = plain[:RECORD_HASH_BYTES]
            raw = head.encode("utf-8", "replace") if isinstance(head, str) else head
            return _digest(raw, str(len(plain)).encode(), framed=False)
        if is_lazy_like(value):
            return ""
        name = _record_type(value)
        if name in ("pandas.DataFrame", "pandas.Series"):
            return _record_pandas_hash(value)
        if name == "numpy.ndarray":
            return _record_numpy_hash(value)
        if isinstance(value, list | tuple | dict | set | frozenset) and _length(value) <= 1_000:
            text = bounded_repr(value, limit=20_000)
            return _digest(text.encode("utf-8", "replace"), framed=False)
    except Exception:  # a value that cannot be hashed is described by type and shape alone
        return ""
    return ""


def _record_pandas_hash(value: Any) -> str:
    import pandas as pd

    step = max(1, len(value) // RECORD_HASH_ROWS)
    hashed = pd.util.hash_pandas_object(value.iloc[::step], index=True)
    columns = repr(list(value.columns)) if hasattr(value, "columns") else str(value.name)
    return _digest(
        hashed.to_numpy().tobytes(), columns.encode(), str(len(value)).encode(), framed=False
    )


def _record_numpy_hash(value: Any) -> str:
    if value.dtype.hasobject:
        return ""
    flat = value.reshape(-1)
    step = max(1, flat.size // (RECORD_HASH_ROWS * 8))
    return _digest(
        flat[::step].tobytes(), str(value.shape).encode(), str(value.dtype).encode(), framed=False
    )


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
    A print marked ``untracked`` has no content hash: only what else it keeps is compared.
    """
    if before.untracked or after.untracked:
        before, after = dataclasses.replace(before, hash=""), dataclasses.replace(after, hash="")
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
