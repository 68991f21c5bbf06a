"""Bounded repr (reprlib style): containers, strings and arrays are never rendered in full.

Objects of libraries with deferred computation (dask, Spark, polars plans, xarray, ...) are
shown by type only: their ``repr()`` may compute, and so may ``len()`` or iteration.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import ItemsView, Iterable, KeysView, ValuesView
from collections.abc import Set as AbstractSet
from itertools import islice
from typing import Any

from .common import (
    REPR_DEPTH,
    REPR_ITEMS,
    REPR_SECONDS,
    SMALL_ARRAY_CELLS,
    TookTooLong,
    cut,
    format_shape,
    is_lazy_like,
    loaded_module,
    qualified_name,
    shape_of,
    time_limit,
)

_SCALARS = (bool, float, complex, type(None))
DICT_VIEWS = (KeysView, ValuesView, ItemsView)


def bounded_repr(obj: object, limit: int = 200) -> str:
    """``repr(obj)`` cut to ``limit`` characters without building the repr of a big object.

    Strings, bytes, builtin containers and arrays are rendered piecewise (first items only, with a
    count of the rest); lazy collections by their type; other objects get their own ``repr()``
    cut to size, and a ``repr()`` that raises is reported instead of propagated.
    """
    return cut(_render(obj, 0, limit), limit)


def _render(obj: object, depth: int, limit: int) -> str:
    try:
        return _render_unguarded(obj, depth, limit)
    except Exception as exc:
        return _repr_failure(obj, exc)


def _render_unguarded(obj: object, depth: int, limit: int) -> str:
    if isinstance(obj, (str, bytes, bytearray)):
        return repr(obj[: limit + 1])
    if isinstance(obj, int) and not isinstance(obj, bool) and obj.bit_length() > 4_000:
        return f"<int with {obj.bit_length():,} bits>"
    if isinstance(obj, (int, *_SCALARS)):
        return repr(obj)
    if is_numpy_number(obj):  # 10, not numpy 2's np.int64(10): the dtype is shown elsewhere
        return repr(obj.item())  # type: ignore[attr-defined]
    if is_lazy_like(obj):
        return f"<{qualified_name(type(obj))} (lazy; not rendered)>"
    placeholder = _array_placeholder(obj)
    if placeholder is not None:
        return placeholder
    container = _render_container(obj, depth, limit)
    if container is not None:
        return container
    return cut(limited_repr(obj), limit)


def limited_repr(obj: object) -> str:
    """``repr(obj)``, or a note when it runs past ``REPR_SECONDS`` (a repr that blocks)."""
    try:
        with time_limit(REPR_SECONDS):
            return repr(obj)
    except TookTooLong as late:
        return f"<{qualified_name(type(obj))} object; repr() {late}, cut off>"


def is_numpy_number(obj: object) -> bool:
    """Whether ``obj`` is a numpy bool, integer, float or complex scalar."""
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


_BUILTINS = (dict, list, deque, tuple, set, frozenset)


# Any: a class whose unbound methods are called on ``obj`` (as fingerprint.builtin_base)
def _base(obj: object) -> Any:
    """The built-in class of a container: its methods are used, never a subclass's (which may
    block, compute or load)."""
    return next((base for base in _BUILTINS if isinstance(obj, base)), type(obj))


def _size(obj: Any) -> int:
    return int(_base(obj).__len__(obj))


def _container_shape(obj: object) -> tuple[str, str, Iterable[Any], str | None] | None:
    """Brackets, items and key separator (None: plain items) of a container rendered piecewise."""
    if isinstance(obj, dict):
        return "{", "}", dict.items(obj), ": "
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return (
            f"{type(obj).__name__}(",
            ")",
            zip(obj._fields, tuple.__iter__(obj), strict=True),
            "=",
        )
    if isinstance(obj, (list, deque, set, frozenset)):
        left, right = ("[", "]") if isinstance(obj, (list, deque)) else ("{", "}")
        return left, right, _base(obj).__iter__(obj), None
    if isinstance(obj, tuple):
        return "(", ",)" if _size(obj) == 1 else ")", tuple.__iter__(obj), None
    if isinstance(obj, DICT_VIEWS):
        return "[", "]", obj, None
    return None


def _render_container(obj: Any, depth: int, limit: int) -> str | None:
    container = _container_shape(obj)
    if container is None:
        return None
    left, right, items, separator = container
    if not _size(obj):
        return (
            f"{type(obj).__name__}()" if isinstance(obj, AbstractSet) else _wrap(obj, left + right)
        )
    if depth >= REPR_DEPTH:
        return _wrap(obj, f"{left}...{right}")
    parts = _render_items(items, separator, depth, limit)
    rest = _size(obj) - len(parts)
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
