"""Shared pieces of the summaries: limits, paging, kinds, type detection and text formatting.

Libraries are never imported here: an object's library is read from the modules of its class
and its MRO, and a library's classes are looked up only in modules already in ``sys.modules``.
"""

from __future__ import annotations

import difflib
import math
import numbers
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from qloop_kernel.errors import ToolInputError

from ...redact import redacted_clip, redacted_excerpt
from ...text import marker
from .trust import (
    class_module,
    class_qualname,
    is_subclass,
    module_namespace,
    readable,
    static_lookup,
    static_mro,
)

SAMPLE_ROWS = 10_000  # rows behind the statistics of a big Series or narrow DataFrame
SAMPLE_CELLS = 150_000  # a wide frame's sample has fewer rows (at least MIN_SAMPLE_ROWS)
PYTHON_SAMPLE_CELLS = 60_000  # cells of Python objects in it (each hashed and compared)
MIN_SAMPLE_ROWS = 2_000
ARRAY_SAMPLE = 100_000  # elements behind the statistics of a big array
SAMPLE_SEED = 0
EXACT_NULL_CELLS = 4_000_000  # cells scanned for exact null counts, weighted by scan cost
LISTED_COLUMNS = 60  # columns described one per line when the caller picks none
HEAD_COLUMNS = 12  # columns shown in the head when the caller picks none
HEAD_COLWIDTH = 40
HEAD_ELEMENTS = 1_000  # elements of a lazy or device array brought in for a head
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
PLAN_CHARS = 1_500
MAX_ATTRIBUTES = 30
DEFAULT_ROWS = 5  # rows shown of in-memory data when the caller does not say
MAX_ROWS = 1_000  # the most rows (or items) one call shows

REPR_SECONDS = 1.0  # a repr(), len() or dir() of another object that runs longer is cut off
SUMMARY_SECONDS = 10.0  # one whole summary that runs longer is cut off

# Methods of deferred or out-of-core collections (and query results: DuckDB relations, cursors):
# an unknown object with one of these is never rendered, measured or iterated, since any of that
# may run its computation.
LAZY_MARKERS = ("__dask_graph__", "compute", "persist", "collect", "execute", "fetchall")


@dataclass(frozen=True)
class Paging:
    """Which part of a variable to show: selected columns and a window of rows/items.

    ``rows`` is None when the caller did not ask: in-memory data then shows
    ``DEFAULT_ROWS`` rows, and lazy data shows none (reading rows would compute them).
    """

    columns: tuple[str, ...] | None = None
    offset: int = 0
    rows: int | None = None

    @property
    def head_rows(self) -> int:
        """Rows to show of in-memory data."""
        return DEFAULT_ROWS if self.rows is None else self.rows

    @property
    def rows_asked(self) -> int:
        """Rows the caller asked for explicitly (0 when not asked)."""
        return self.rows or 0


@dataclass(frozen=True)
class Brief:
    """One row of ``list_variables``: shape or length, memory, details (each may be empty)."""

    size: str = ""
    memory: str = ""
    details: str = ""


@dataclass(frozen=True)
class Kind:
    """A kind of object with its own summary: how to recognise it and how to describe it."""

    name: str
    libraries: frozenset[str]  # top-level packages that define it; empty for Python's own types
    matches: Callable[[Any], bool]
    summarize: Callable[[Any, str, Paging], str]
    brief: Callable[[Any], Brief]
    takes_columns: bool = False
    # Its values live elsewhere (a query, a cluster, a plan): a summary that fails falls back to
    # its type alone, never to attributes such as ``shape`` that would run the query.
    lazy: bool = False


# ---------------------------------------------------------------------------------------------
# Time limits (inspection runs on the kernel's main thread: a blocking repr would hold it)
# ---------------------------------------------------------------------------------------------


class TookTooLong(BaseException):
    """Raised in the main thread when a time-limited block runs too long.

    A BaseException, so that an ``except Exception`` in the user's ``__repr__`` cannot swallow it.
    """

    def __init__(self, seconds: float) -> None:
        super().__init__(f"did not finish within {seconds:g} s")
        self.seconds = seconds


def _can_alarm() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise TookTooLong in the block once it has run ``seconds`` (wall clock), via SIGALRM.

    The one SIGALRM timer is shared with an enclosing limit (a step's time limit, the Stop
    button): an alarm that is not this block's goes to the previous handler, and afterwards the
    previous handler and what is left of the enclosing timer are put back. Outside the main
    thread, or where signals cannot be used, the block runs without a limit.
    """
    if not _can_alarm():
        yield
        return
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left and outer_left <= seconds:
        yield  # the enclosing limit ends first
        return
    started = time.monotonic()
    deadline = started + seconds
    state = {"armed": True, "handed_on": False}

    def _alarm(signum: int, frame: Any) -> None:
        if state["armed"] and time.monotonic() >= deadline - 0.001:
            raise TookTooLong(seconds)
        if callable(previous):  # not this block's alarm: Stop, or the enclosing limit
            state["handed_on"] = True
            previous(signum, frame)

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        state["armed"] = False
        if not state["handed_on"]:  # else the enclosing handler has set the timer its own way
            signal.setitimer(signal.ITIMER_REAL, 0)
            if outer_left:
                left = outer_left - (time.monotonic() - started)
                signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)


# ---------------------------------------------------------------------------------------------
# Type detection without imports
# ---------------------------------------------------------------------------------------------


def loaded_module(name: str) -> Any:  # Any: whichever module the user's code imported, or None
    """The module ``name`` if it has already been imported, else None (never imports it)."""
    return sys.modules.get(name)


def loaded_class(module: str, name: str) -> type | None:
    """Class ``name`` of an already imported ``module``, or None."""
    # the module's dict, not getattr(): a module-level __getattr__ may import or warn on access.
    namespace = module_namespace(loaded_module(module))
    cls = namespace.get(name) if namespace is not None else None
    return cls if issubclass(type(cls), type) else None


def instance_of(obj: object, module: str, *names: str) -> bool:
    """Whether ``obj`` is an instance of one of the classes ``names`` of loaded ``module``.

    An object of a class that is not installed code is checked against its MRO alone:
    ``isinstance`` would read its ``__class__``, which such a class may compute.
    """
    classes = tuple(cls for name in names if (cls := loaded_class(module, name)) is not None)
    if not classes:
        return False
    if readable(type(obj)):
        return isinstance(obj, classes)
    return any(is_subclass(type(obj), cls) for cls in classes)


def libraries_of(cls: type) -> frozenset[str]:
    """Top-level packages that define ``cls`` or one of its bases (``builtins`` included)."""
    if type(cls) is type:  # a metaclass of the user's could hash or compare the class itself
        return _libraries(cls)
    return _libraries.__wrapped__(cls)


@lru_cache(maxsize=512)
def _libraries(cls: type) -> frozenset[str]:
    return frozenset((class_module(base) or "").partition(".")[0] for base in static_mro(cls))


def is_plain_python(cls: type) -> bool:
    """Whether ``cls`` and all its bases come from Python itself or from the notebook."""
    return all(
        library in sys.stdlib_module_names or library in ("builtins", "__main__", "")
        for library in libraries_of(cls)
    )


def is_lazy_like(obj: object) -> bool:
    """Whether ``obj`` is of a library class with the methods of a deferred collection."""
    cls = type(obj)
    if is_plain_python(cls) or is_subclass(cls, type):
        return False
    return any(static_lookup(cls, marker)[0] for marker in LAZY_MARKERS)


def qualified_name(cls: type) -> str:
    """Short qualified name of a class: ``pandas.DataFrame``, ``dict``, ``Thing`` (notebook).

    Read from the class's slots: the class's metaclass is not asked.
    """
    module = class_module(cls) or ""
    name = class_qualname(cls)
    if module in ("builtins", "__main__", ""):
        return name
    for public in _public_modules(module):
        namespace = module_namespace(loaded_module(public))
        if namespace is not None and namespace.get(name) is cls:
            return f"{public}.{name}"
    return f"{module}.{name}"


def _public_modules(module: str) -> list[str]:
    """``a``, ``a.b``, ... up to (not including) ``module``: where a class is re-exported."""
    parts = module.split(".")
    return [".".join(parts[:depth]) for depth in range(1, len(parts))] if parts[1:] else []


def name_of(obj: object) -> str:
    """``__qualname__`` or ``__name__`` of ``obj``, or ``?``."""
    return str(getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or "?")


def shape_of(obj: object) -> tuple[int, ...] | None:
    """The ``shape`` of an array-like object (numpy, pandas, torch, ...), or None (also for an
    object whose class is not installed code: its ``shape`` may be a property of the user's)."""
    cls = type(obj)
    if is_subclass(cls, type) or not readable(cls) or not hasattr(cls, "shape"):
        return None
    try:
        shape = obj.shape  # type: ignore[attr-defined]
    except Exception:
        return None
    if isinstance(shape, tuple) and all(isinstance(dim, int) for dim in shape):
        return shape
    return None


# ---------------------------------------------------------------------------------------------
# Paging checks (model mistakes: ToolInputError, which the runtime reports without a traceback)
# ---------------------------------------------------------------------------------------------


def check_offset(offset: int, length: int, unit: str) -> None:
    """Raise ToolInputError when ``offset`` is past the end of ``length`` rows/items/characters."""
    if offset and offset >= length:
        raise ToolInputError(
            f"offset {offset:,} is past the end: there are {length:,} {unit} "
            f"(valid offsets 0-{max(length - 1, 0):,})"
        )


def window(paging: Paging, length: int, unit: str) -> tuple[int, int]:
    """Start and stop of the rows/items to show of in-memory data of ``length``."""
    check_offset(paging.offset, length, unit)
    return paging.offset, min(length, paging.offset + paging.head_rows)


def reject_paging(obj: object, label: str, paging: Paging) -> None:
    """Raise ToolInputError when an offset is given for an object that cannot be paged."""
    if paging.offset:
        raise ToolInputError(
            f"offset= does not apply to {label!r} ({qualified_name(type(obj))}); "
            "it pages DataFrames, Series, arrays, containers and strings"
        )


def pick_columns(names: Sequence[str], columns: tuple[str, ...] | None) -> list[int]:
    """Positions of ``columns`` among ``names`` (all when None); unknown names are an error."""
    if columns is None:
        return list(range(len(names)))
    by_name: dict[str, int] = {}
    for position, text in enumerate(names):
        by_name.setdefault(text, position)
    unknown = [name for name in columns if name not in by_name]
    if unknown:
        noun = "column" if len(unknown) == 1 else "columns"
        raise ToolInputError(f"unknown {noun} {unknown}; {close_columns(unknown[0], names)}")
    return list(dict.fromkeys(by_name[name] for name in columns))


def close_columns(name: str, names: Sequence[str]) -> str:
    """A hint for a misspelt column: close names, or the columns there are."""
    close = difflib.get_close_matches(name, list(names), n=5, cutoff=0.5)
    if close:
        return f"did you mean {close}?"
    return f"the frame has {len(names):,} columns: {cut(str(list(names)), 400)}"


# ---------------------------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------------------------


def format_bytes(size: int) -> str:
    """Human-readable byte count with 1024-based units, like ``DataFrame.info()``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if value < 1024 or unit == "TB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_shape(shape: Sequence[float]) -> str:
    """``(1000000, 50)`` as ``1,000,000 x 50``; an unknown (NaN) length as ``?``; 0-d as ``0-d``."""
    return " x ".join(_dim(dim) for dim in shape) if len(shape) else "0-d"


def _dim(dim: float) -> str:
    return "?" if isinstance(dim, float) and math.isnan(dim) else f"{int(dim):,}"


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, ending in ``...`` when cut (from the redacted
    whole: no piece of a secret is left at the cut)."""
    return redacted_clip(text, limit, "...")


def fit_text(text: str, max_chars: int, hint: str) -> str:
    """Cut ``text`` to ``max_chars``, preferably at a line end, with an explicit marker.

    The marker says how much was left out and ``hint`` tells the reader how to see the rest.
    """
    if len(text) <= max_chars:
        return text
    total = len(text)
    budget = max_chars - len(marker(total, f"of {total:,} characters", hint)) - 1
    end = text.rfind("\n", 0, budget + 1)
    if end < budget // 2:
        end = max(budget, 0)
    kept = redacted_excerpt(text, 0, end)[:end]  # a secret the cut crosses is redacted whole
    return kept + "\n" + marker(total - end, f"of {total:,} characters", hint)


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


def dtype_counts(dtypes: Sequence[object]) -> str:
    """``2 int64, 1 str``: how many columns have each dtype, most common first."""
    counts: dict[str, int] = {}
    for dtype in dtypes:
        counts[str(dtype)] = counts.get(str(dtype), 0) + 1
    ordered = sorted(counts.items(), key=lambda item: -item[1])
    return ", ".join(f"{count} {dtype}" for dtype, count in ordered) or "none"


def lazy_note(what: str, how: str) -> str:
    """The line that says what was not computed, and how the user can compute it."""
    return f"Not computed: {what} ({how})."
