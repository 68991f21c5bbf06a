"""Any other object: its type, a bounded repr, its instance attributes and public names.

An object of another library is neither measured (``len()``) nor iterated here, and one with
the methods of a deferred collection (``compute``, ``collect``, ...) is not even rendered: any
of that may run its computation. An object of a class that is not installed code (``trust``) is
described from the outside (:func:`summarize_outside`): none of its methods is called.
"""

from __future__ import annotations

import numbers
import sys
import types
from collections.abc import Mapping
from itertools import islice
from typing import Any, cast

from . import containers
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
from .trust import (
    builtin_base,
    class_dict,
    class_module,
    class_qualname,
    installed_class,
    instance_attributes,
    is_subclass,
    origin,
    readable,
    static_lookup,
    static_mro,
)

_PREVIEW_TYPES = (bool, int, float, complex, type(None))


def summarize_object(obj: object, label: str, paging: Paging) -> str:
    """Type, value (bounded repr), length, instance attributes and other public names."""
    if not readable(type(obj)):
        return summarize_outside(obj, label, paging)
    reject_paging(obj, label, paging)
    lazy = is_lazy_like(obj)
    lines = [f"{label}: {qualified_name(type(obj))}"]
    if lazy:
        lines.append(_LAZY_VALUE)
    else:
        lines.append(f"Value: {bounded_repr(obj, VALUE_CHARS)}")
        length = _length(obj)
        if isinstance(length, str):
            lines.append(f"Length: {length}")
        elif length is not None:
            lines.append(f"Length: {length:,}")
    lines += _attribute_lines(instance_attributes(obj))
    names = _public_names(obj, lazy)
    if names:
        lines.append(f"Other public names: {cut(', '.join(names), NAMES_CHARS)}")
    return "\n".join(lines)


_LAZY_VALUE = (
    "Value: not rendered: this object has the methods of a lazy collection "
    "(compute/collect/...), and rendering, measuring or iterating it may compute it"
)


def summarize_outside(obj: object, label: str, paging: Paging) -> str:
    """An object of a class that is not installed code, described without calling its methods:
    its type and origin, its instance attributes and the names its classes define; a subclass of
    Python's containers, strings or numbers by the data of the built-in class it extends."""
    cls = type(obj)
    if builtin_base(cls) is not None:
        return containers.summarize_subclass(obj, label, paging)
    reject_paging(obj, label, paging)
    if is_subclass(cls, type):
        return _outside_class(obj, label)  # type: ignore[arg-type]
    lines = [f"{label}: {qualified_name(cls)} ({origin(cls)})"]
    lines.append(_LAZY_VALUE if is_lazy_like(obj) else f"Value: not rendered: {not_called(cls)}")
    lines += _attribute_lines(instance_attributes(obj), private=True)
    lines += _defined_names(cls)
    return "\n".join(lines)


def not_called(cls: type) -> str:
    """Why a read did not call the methods of ``cls``'s objects, and how to let it."""
    name = class_qualname(cls)
    module = class_module(cls)
    named = name if module == "__main__" else f"{module}.{name}"
    return (
        "a read calls no method (__repr__, __len__, properties, ...) of a class that is not "
        f"installed code; `%agent set trusted_reprs {named}` lets it"
    )


def _outside_class(cls: type, label: str) -> str:
    """A class whose metaclass is not installed code: its names, read from its namespace."""
    meta = type(cls)
    lines = [
        f"{label}: class {class_qualname(cls)} from module {class_module(cls)}, of metaclass "
        f"{qualified_name(meta)} ({origin(meta)}; its methods are not called)",
        f"Bases (MRO): {cut(', '.join(qualified_name(k) for k in static_mro(cls)[1:]), 500)}",
    ]
    return "\n".join(lines + _defined_names(cls))


def _defined_names(cls: type) -> list[str]:
    """The public names the classes of ``cls``'s MRO that are not installed code define: methods
    and class attributes, then properties and other computed attributes (which are not read)."""
    names: dict[bool, list[str]] = {False: [], True: []}  # by: computed
    seen: set[str] = set()
    for klass in static_mro(cls):
        if installed_class(klass):
            continue
        for key, member in class_dict(klass).items():
            if not key.startswith("_") and key not in seen:
                seen.add(key)
                names[_computed(member)].append(key)
    lines = []
    if names[False]:
        lines.append(f"Other public names: {cut(', '.join(names[False]), NAMES_CHARS)}")
    if names[True]:
        lines.append(f"Properties (not read): {cut(', '.join(names[True]), NAMES_CHARS)}")
    return lines


def _computed(member: object) -> bool:
    """Whether a class attribute is computed when read (a property or another descriptor that is
    not a function)."""
    if any(type(member) is kind for kind in (types.FunctionType, staticmethod, classmethod)):
        return False
    return static_lookup(type(member), "__get__")[0]


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


def _attribute_lines(attributes: Mapping[str, object], *, private: bool = False) -> list[str]:
    """The instance attributes, one a line (those starting with ``_`` only when ``private``)."""
    shown = {k: v for k, v in attributes.items() if private or not k.startswith("_")}
    if not shown:
        return []
    lines = [f"Instance attributes ({len(shown):,}):"]
    lines += [
        f"  {name}: {qualified_name(type(value))} = {bounded_repr(value, 100)}"
        for name, value in islice(shown.items(), MAX_ATTRIBUTES)
    ]
    if len(shown) > MAX_ATTRIBUTES:
        lines.append(f"  ... {len(shown) - MAX_ATTRIBUTES:,} more")
    return lines


def _public_names(obj: object, lazy: bool) -> list[str]:
    if class_module(type(obj)) == "builtins" or isinstance(obj, numbers.Number):
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
    if not readable(type(value)):
        return _brief_outside(value)
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
    preview = isinstance(value, _PREVIEW_TYPES) or class_module(type(value)) == "numpy"
    return Brief(size, memory, bounded_repr(value, 40) if preview else "")


def _brief_outside(value: object) -> Brief:
    """Length and shallow size from the built-in class's own methods (not the class's)."""
    base = builtin_base(type(value))
    methods = cast("Any", base or object)  # the built-in class: its unbound methods read ``value``
    sized = base is not None and not any(base is number for number in (int, float, complex))
    length = f"{methods.__len__(value):,}" if sized else ""
    memory = format_bytes(methods.__sizeof__(value))
    return Brief(length, memory, "repr not called")
