"""Python's own containers, strings and bytes.

Containers of other libraries (which may load or compute on ``len()`` or iteration) are left to
their own kinds or to the generic summary; only Python's types and their subclasses are walked.
"""

from __future__ import annotations

import sys
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from itertools import islice
from typing import Any, cast

from ...redact import redacted_excerpt
from .common import (
    BYTES_EXCERPT,
    ITEM_CHARS,
    NAMES_CHARS,
    STR_EXCERPT,
    TYPE_SCAN,
    Brief,
    Kind,
    Paging,
    check_offset,
    cut,
    format_bytes,
    is_plain_python,
    qualified_name,
    reject_paging,
    window,
)
from .reprs import DICT_VIEWS, bounded_repr
from .trust import builtin_base, class_name, origin, readable

_BUILTIN_COLLECTIONS = (list, tuple, set, frozenset, deque, range, *DICT_VIEWS)


def type_census(items: Iterable[object]) -> str:
    """``int (3), str (1)``: the types of ``items``, most common first."""
    counts = Counter(qualified_name(type(item)) for item in items)
    shown = ", ".join(f"{name} ({count:,})" for name, count in counts.most_common(8))
    rest = len(counts) - 8
    return (shown or "none") + (f", ... {rest} more types" if rest > 0 else "")


def _census_scope(length: int) -> str:
    return f" (first {TYPE_SCAN:,} scanned)" if length > TYPE_SCAN else ""


def is_plain_mapping(obj: object) -> bool:
    """A dict, or a mapping class of Python or the notebook."""
    return isinstance(obj, dict) or (isinstance(obj, Mapping) and is_plain_python(type(obj)))


def is_plain_collection(obj: object) -> bool:
    """A list, tuple, set, deque, range or dict view, or such a class of Python or the notebook."""
    if isinstance(obj, (str, bytes, bytearray)):
        return False
    if isinstance(obj, _BUILTIN_COLLECTIONS):
        return True
    return isinstance(obj, (Sequence, AbstractSet)) and is_plain_python(type(obj))


def summarize_mapping(mapping: Mapping[Any, Any], label: str, paging: Paging) -> str:
    """Length, key and value types, the first keys and a window of items."""
    return _mapping_summary(mapping, label, paging, _Reader.of(mapping))


def _mapping_summary(mapping: Any, label: str, paging: Paging, read: _Reader) -> str:
    start, stop = window(paging, read.length, "items")
    scanned = list(islice(read.items(), TYPE_SCAN))
    lines = [
        f"{label}: {qualified_name(type(mapping))}{read.note}, {read.length:,} items",
        f"Key types{_census_scope(read.length)}: {type_census(k for k, _ in scanned)}",
        f"Value types{_census_scope(read.length)}: {type_census(v for _, v in scanned)}",
        _keys_line(read),
    ]
    if stop > start:
        lines += ["", f"Items {start:,}-{stop - 1:,} of {read.length:,}:"]
        lines += [
            f"  {bounded_repr(key, 100)}: {bounded_repr(value, ITEM_CHARS)}"
            for key, value in islice(read.items(), start, stop)
        ]
    return "\n".join(lines)


def _keys_line(read: _Reader) -> str:
    keys = ", ".join(bounded_repr(key, 60) for key, _ in islice(read.items(), 50))
    rest = read.length - 50
    return f"Keys: {cut(keys, NAMES_CHARS)}" + (f" ... (+{rest:,} more)" if rest > 0 else "")


def summarize_collection(items: Any, label: str, paging: Paging) -> str:
    """Length, element types and a window of items."""
    return _collection_summary(items, label, paging, _Reader.of(items))


def _collection_summary(items: Any, label: str, paging: Paging, read: _Reader) -> str:
    start, stop = window(paging, read.length, "items")
    lines = [
        f"{label}: {qualified_name(type(items))}{read.note}, {read.length:,} items",
        f"Element types{_census_scope(read.length)}: {type_census(islice(read.items(), TYPE_SCAN))}",
    ]
    if stop > start:
        lines += [
            "",
            f"Items {start:,}-{stop - 1:,} of {read.length:,}"
            f"{'' if read.ordered else ' (iteration order)'}:",
        ]
        lines += [
            f"  [{index:,}] {bounded_repr(item, ITEM_CHARS)}"
            for index, item in enumerate(islice(read.items(), start, stop), start)
        ]
    return "\n".join(lines)


@dataclass(frozen=True)
class _Reader:
    """How a container is read: through its own methods, or (a class that is not installed
    code) through those of the built-in class it extends, which Python runs in C."""

    length: int
    items: Callable[[], Iterator[Any]]  # a mapping's (key, value) pairs, else its elements
    ordered: bool
    note: str = ""  # after the type in the title: why the class's own methods were not used

    @classmethod
    def of(cls, obj: Any) -> _Reader:
        base = builtin_base(type(obj))
        if base is None or readable(type(obj)):
            pairs = isinstance(obj, Mapping)
            items = (lambda: iter(obj.items())) if pairs else (lambda: iter(obj))
            return cls(len(obj), items, isinstance(obj, (Sequence, deque)))
        note = (
            f" (a {class_name(base)} subclass {origin(type(obj))}; read through "
            f"{class_name(base)}'s own methods, the class's are not called)"
        )
        methods = cast("Any", base)  # the built-in class: its unbound methods read ``obj``
        items = (lambda: iter(dict.items(obj))) if base is dict else (lambda: methods.__iter__(obj))
        ordered = base is list or base is tuple or base is deque
        return cls(methods.__len__(obj), items, ordered, note)


def summarize_subclass(obj: Any, label: str, paging: Paging) -> str:
    """A subclass of Python's containers, strings or numbers whose class is not installed code:
    its data, read through the built-in class's own methods."""
    cls = type(obj)
    base = builtin_base(cls)
    read_as = (
        f"{label}: {qualified_name(cls)} (a {class_name(base or object)} subclass {origin(cls)})"
    )
    if base is str or base is bytes or base is bytearray:
        plain = cast("Any", base).__getitem__(obj, slice(None))  # a copy, of the built-in class
        text = (
            summarize_str(plain, label, paging)
            if base is str
            else summarize_bytes(plain, label, paging)
        )
        return read_as + "; read as the " + class_name(base) + " it holds:\n" + text
    if base is int or base is float or base is complex:
        reject_paging(obj, label, paging)
        return f"{read_as}\nValue: {bounded_repr(obj, ITEM_CHARS)}"
    read = _Reader.of(obj)
    if base is dict:
        return _mapping_summary(obj, label, paging, read)
    return _collection_summary(obj, label, paging, read)


def summarize_str(text: str, label: str, paging: Paging) -> str:
    """Length, line count and a page of characters from ``offset``."""
    check_offset(paging.offset, len(text), "characters")
    stop = min(len(text), paging.offset + STR_EXCERPT)
    lines = text.count("\n") + 1 if text else 0
    header = f"{label}: {qualified_name(type(text))}, {len(text):,} characters, {lines:,} lines"
    if not text:
        return header + "\n(empty string)"
    return (
        f"{header}\nCharacters {paging.offset:,}-{stop - 1:,} of {len(text):,} "
        f"(page with offset=):\n{redacted_excerpt(text, paging.offset, stop)}"
    )


def summarize_bytes(data: bytes | bytearray, label: str, paging: Paging) -> str:
    """Length and a page of bytes from ``offset``."""
    check_offset(paging.offset, len(data), "bytes")
    stop = min(len(data), paging.offset + BYTES_EXCERPT)
    return (
        f"{label}: {qualified_name(type(data))}, {len(data):,} bytes\n"
        f"Bytes {paging.offset:,}-{max(stop - 1, 0):,}: "
        f"{bytes(redacted_excerpt(data, paging.offset, stop))!r}"
    )


def brief_sized(obj: Any) -> Brief:
    """Length and shallow size; a short preview for strings and bytes."""
    preview = bounded_repr(obj, 40) if isinstance(obj, (str, bytes)) else ""
    return Brief(f"{len(obj):,}", format_bytes(sys.getsizeof(obj)), preview)


KINDS = [
    Kind("str", frozenset(), lambda obj: isinstance(obj, str), summarize_str, brief_sized),
    Kind(
        "bytes",
        frozenset(),
        lambda obj: isinstance(obj, (bytes, bytearray)),
        summarize_bytes,
        brief_sized,
    ),
    Kind("mapping", frozenset(), is_plain_mapping, summarize_mapping, brief_sized),
    Kind("collection", frozenset(), is_plain_collection, summarize_collection, brief_sized),
]
