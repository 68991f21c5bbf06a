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
from typing import Any, cast

from ...redact import redacted_head
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
from .readguard import UserCodeStopped, allowing, reading
from .trust import (
    builtin_base,
    class_name,
    instance_attributes,
    is_subclass,
    opted_in,
    readable,
    static_lookup,
)

_SCALARS = (bool, float, complex, type(None))
DICT_VIEWS = (KeysView, ValuesView, ItemsView)


def bounded_repr(obj: object, limit: int = 200) -> str:
    """``repr(obj)`` cut to ``limit`` characters without building the repr of a big object.

    Strings, bytes, builtin containers and arrays are rendered piecewise (first items only, with a
    count of the rest); lazy collections by their type; other objects of installed code get their
    own ``repr()`` cut to size, and a ``repr()`` that raises is reported instead of propagated. An
    object of a class that is not installed code (``trust``) is rendered from the outside: its type
    and instance attributes, or the data of the built-in class it extends; its methods are not
    called. Code that is not installed code is stopped meanwhile (``readguard``).
    """
    with reading():
        return cut(_render(obj, 0, limit), limit)


def _render(obj: object, depth: int, limit: int) -> str:
    try:
        with reading():  # put back after a stop in the item before
            if not readable(type(obj)):
                return _render_outside(obj, depth, limit)
            return _render_unguarded(obj, depth, limit)
    except UserCodeStopped as stop:
        return f"<{qualified_name(type(obj))} object; repr() stopped: {stop}>"
    except Exception as exc:
        return _repr_failure(obj, exc)


def _render_unguarded(obj: object, depth: int, limit: int) -> str:
    if isinstance(obj, (str, bytes, bytearray)):
        return repr(redacted_head(obj, limit + 1))  # a secret the cut crosses: redacted whole
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
    if opted_in(type(obj)):
        with allowing():
            return cut(limited_repr(obj), limit)
    return cut(limited_repr(obj), limit)


def _render_outside(obj: object, depth: int, limit: int) -> str:
    """An object of a class that is not installed code, from what Python holds for it."""
    cls = type(obj)
    if is_lazy_like(obj):
        return f"<{qualified_name(cls)} (lazy; not rendered)>"
    if is_subclass(cls, type):  # a class whose metaclass is the user's
        return f"<class {qualified_name(obj)} of metaclass {qualified_name(cls)}>"  # type: ignore[arg-type]
    base = builtin_base(cls)
    if base is None:
        return _attributes_repr(obj, depth, limit)
    methods = cast("Any", base)  # the built-in class: its unbound methods read ``obj``
    if base is str or base is bytes or base is bytearray:
        plain = methods.__getitem__(obj, slice(None))  # a copy, of Python's own class
        return f"{class_name(cls)}({_render_unguarded(plain, depth, limit)})"
    if base is int and int.bit_length(cast("int", obj)) > 4_000:
        return f"<{qualified_name(cls)} with {int.bit_length(cast('int', obj)):,} bits>"
    if base is int or base is float or base is complex:
        return f"{class_name(cls)}({methods.__repr__(obj)})"
    return _render_container(obj, depth, limit) or _attributes_repr(obj, depth, limit)


def _attributes_repr(obj: object, depth: int, limit: int) -> str:
    name = qualified_name(type(obj))
    if depth >= REPR_DEPTH:
        return f"<{name} object>"
    attributes = instance_attributes(obj)
    parts: list[str] = []
    used = 0
    for key, value in islice(attributes.items(), REPR_ITEMS):
        parts.append(f"{key}={_render(value, depth + 1, limit)}")
        used += len(parts[-1]) + 2
        if used > limit:
            break
    more = len(attributes) - len(parts)
    shown = ", ".join(parts) + (f", ... (+{more:,} more)" if more > 0 else "")
    return f"<{name} object, repr not called" + (f": {shown}>" if shown else ">")


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


_CONTAINERS = (dict, list, deque, tuple, set, frozenset)


def _base(obj: object) -> type | None:
    """The built-in container class ``obj``'s class extends: its methods are used, never a
    subclass's (which may block, compute or load, or be the user's code)."""
    base = builtin_base(type(obj))
    return base if any(base is container for container in _CONTAINERS) else None


# Any: a class whose unbound methods are called on ``obj`` (as fingerprint.builtin_base)
def _size(obj: Any, base: Any) -> int:
    return int(base.__len__(obj))


def _fields(cls: type) -> tuple[str, ...] | None:
    """A named tuple's field names, read from its class (None when it has none)."""
    found, fields = static_lookup(cls, "_fields")
    if not found or type(fields) is not tuple or not all(type(f) is str for f in fields):
        return None
    return fields


def _container_shape(obj: Any, base: Any) -> tuple[str, str, Iterable[Any], str | None] | None:
    """Brackets, items and key separator (None: plain items) of a container rendered piecewise."""
    if base is dict:
        return "{", "}", dict.items(obj), ": "
    fields = _fields(type(obj)) if base is tuple else None
    if fields is not None:
        name = class_name(type(obj))
        return f"{name}(", ")", zip(fields, tuple.__iter__(obj), strict=True), "="
    if base is not None and base is not tuple:
        left, right = ("[", "]") if base is list or base is deque else ("{", "}")
        return left, right, base.__iter__(obj), None
    if base is tuple:
        return "(", ",)" if _size(obj, base) == 1 else ")", tuple.__iter__(obj), None
    return None


def _render_container(obj: Any, depth: int, limit: int) -> str | None:
    base = _base(obj)
    view = base is None and readable(type(obj)) and isinstance(obj, DICT_VIEWS)
    container = _container_shape(obj, base) if not view else ("[", "]", obj, None)
    if container is None:
        return None
    left, right, items, separator = container
    size = len(obj) if view else _size(obj, base)
    if not size:
        empty = base is set or base is frozenset or (view and isinstance(obj, AbstractSet))
        return f"{class_name(type(obj))}()" if empty else _wrap(obj, left + right)
    if depth >= REPR_DEPTH:
        return _wrap(obj, f"{left}...{right}")
    parts = _render_items(items, separator, depth, limit)
    rest = size - len(parts)
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
    cls = type(obj)
    exact = cls is dict or cls is list or cls is tuple or cls is set
    if exact or (is_subclass(cls, tuple) and _fields(cls) is not None):
        return body
    return f"{class_name(cls)}({body})"
