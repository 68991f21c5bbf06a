"""Any other object: its type, a bounded repr, its instance attributes and public names.

An object of another library is neither measured (``len()``) nor iterated here, and one with
the methods of a deferred collection (``compute``, ``collect``, ...) is not even rendered: any
of that may run its computation.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Mapping
from itertools import islice

from .common import (
    MAX_ATTRIBUTES,
    NAMES_CHARS,
    REPR_SECONDS,
    VALUE_CHARS,
    Brief,
    Paging,
    TookTooLong,
    cut,
    format_bytes,
    format_shape,
    is_lazy_like,
    is_plain_python,
    qualified_name,
    reject_paging,
    shape_of,
    time_limit,
)
from .reprs import bounded_repr

_PREVIEW_TYPES = (bool, int, float, complex, type(None))


def summarize_object(obj: object, label: str, paging: Paging) -> str:
    """Type, value (bounded repr), length, instance attributes and other public names."""
    reject_paging(obj, label, paging)
    lazy = is_lazy_like(obj)
    lines = [f"{label}: {qualified_name(type(obj))}"]
    if lazy:
        lines.append(
            "Value: not rendered: this object has the methods of a lazy collection "
            "(compute/collect/...), and rendering, measuring or iterating it may compute it"
        )
    else:
        lines.append(f"Value: {bounded_repr(obj, VALUE_CHARS)}")
        length = _length(obj)
        if isinstance(length, str):
            lines.append(f"Length: {length}")
        elif length is not None:
            lines.append(f"Length: {length:,}")
    lines += _attribute_lines(obj)
    names = _public_names(obj, lazy)
    if names:
        lines.append(f"Other public names: {cut(', '.join(names), NAMES_CHARS)}")
    return "\n".join(lines)


def _length(obj: object) -> int | str | None:
    """``len(obj)`` for Python's and the notebook's classes only; a note when it blocks."""
    if not hasattr(type(obj), "__len__") or not is_plain_python(type(obj)):
        return None
    try:
        with time_limit(REPR_SECONDS):
            return len(obj)  # type: ignore[arg-type]
    except TookTooLong as late:
        return f"not known (len() {late}, cut off)"
    except Exception:
        return None


def _attribute_lines(obj: object) -> list[str]:
    attributes = instance_attributes(obj)
    if not attributes:
        return []
    lines = [f"Instance attributes ({len(attributes):,}):"]
    lines += [
        f"  {name}: {qualified_name(type(value))} = {bounded_repr(value, 100)}"
        for name, value in islice(attributes.items(), MAX_ATTRIBUTES)
    ]
    if len(attributes) > MAX_ATTRIBUTES:
        lines.append(f"  ... {len(attributes) - MAX_ATTRIBUTES:,} more")
    return lines


def instance_attributes(obj: object) -> dict[str, object]:
    """Public entries of the instance ``__dict__`` (no properties are run)."""
    try:
        attributes = vars(obj)
    except TypeError:  # no __dict__ (slots, builtins)
        return {}
    if not isinstance(attributes, Mapping):
        return {}
    return {str(name): value for name, value in attributes.items() if not str(name).startswith("_")}


def _public_names(obj: object, lazy: bool) -> list[str]:
    if type(obj).__module__ == "builtins" or isinstance(obj, numbers.Number):
        return []
    exclude = instance_attributes(obj)
    try:
        with time_limit(REPR_SECONDS):
            # A lazy object's own __dir__ may list its columns from a computed schema.
            names = dir(type(obj)) if lazy else dir(obj)
    except (Exception, TookTooLong):
        return []
    return [name for name in names if not name.startswith("_") and name not in exclude]


def brief_object(value: object) -> Brief:
    """Shape (or a length for Python's own classes), shallow size and a preview of scalars."""
    if is_lazy_like(value):
        return Brief(details="lazy; not computed")
    shape = shape_of(value)
    length = _length(value)
    size = (
        format_shape(shape)
        if shape is not None
        else f"{length:,}"
        if isinstance(length, int)
        else ""
    )
    try:
        memory = format_bytes(sys.getsizeof(value))
    except Exception:  # a broken __sizeof__ must not hide the variable
        memory = ""
    preview = isinstance(value, _PREVIEW_TYPES) or type(value).__module__ == "numpy"
    return Brief(size, memory, bounded_repr(value, 40) if preview else "")
