"""The values of an Arrow array as canonical bytes, read from its buffers.

What a fingerprint hashes of an Arrow-backed column (``int64[pyarrow]``, ``list<int64>[pyarrow]``,
``struct<…>[pyarrow]``, maps, dictionaries): no Python object is made per cell, so the sampled rows
of a nested column take about a millisecond where converting them to Python objects took a second.
Equal values give equal bytes whatever their chunks, slice offsets and the bytes Arrow leaves
undefined behind null slots: validity is read as a mask and the values under it are zeroed, nested
lists are read as their lengths and their flattened values, strings as rebased offsets and data.
pyarrow is imported only when an Arrow array is read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_LIST_KINDS = (
    "is_list",
    "is_large_list",
    "is_fixed_size_list",
    "is_list_view",
    "is_large_list_view",
)
_VIEWS = {"is_string_view": "large_string", "is_binary_view": "large_binary"}


class UnreadableArrow(TypeError):
    """An Arrow type whose buffers this module does not read (unions, and types newer than it)."""


# Any: pyarrow arrays (pyarrow is optional and untyped)
def content_bytes(array: Any, check: Callable[[], None]) -> list[bytes]:
    """Canonical bytes of a pyarrow ``Array`` or ``ChunkedArray``; ``check`` is called between
    nested arrays (it may raise to stop). Raises UnreadableArrow for a type it cannot read."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    parts = [str(array.type).encode()]
    _append(array, parts, check)
    return parts


def _append(array: Any, parts: list[bytes], check: Callable[[], None]) -> None:
    import pyarrow as pa

    check()
    kind = array.type
    parts.append(b"%d:%d" % (len(array), array.null_count))
    if array.null_count:
        parts.append(_valid(array).tobytes())
    if pa.types.is_dictionary(kind):
        _append(array.dictionary_decode(), parts, check)
    elif isinstance(kind, pa.ExtensionType):
        _append(array.storage, parts, check)
    elif pa.types.is_map(kind):
        entries = pa.list_(pa.struct([kind.key_field, kind.item_field]))
        _append_list(array.cast(entries), parts, check)
    elif _is(kind, _LIST_KINDS):
        _append_list(array, parts, check)
    elif pa.types.is_struct(kind):
        for child in array.flatten():  # each field with the struct's offset and nulls applied
            _append(child, parts, check)
    else:
        parts.append(_flat_bytes(array))


def _is(kind: Any, tests: tuple[str, ...] | dict[str, str]) -> bool:
    import pyarrow as pa

    return any(getattr(pa.types, test, lambda _: False)(kind) for test in tests)


def _append_list(array: Any, parts: list[bytes], check: Callable[[], None]) -> None:
    import pyarrow.compute as pc

    lengths = pc.list_value_length(array).fill_null(0)
    parts.append(lengths.to_numpy(zero_copy_only=False).tobytes())
    _append(pc.list_flatten(array), parts, check)  # the values of valid lists only


# Any: a numpy bool array (numpy is imported only when an array is read)
def _valid(array: Any) -> Any:
    return array.is_valid().to_numpy(zero_copy_only=False)


def _flat_bytes(array: Any) -> bytes:
    """Bytes of an array of scalars: booleans, fixed-width values, strings and binary."""
    import pyarrow as pa

    kind = array.type
    if pa.types.is_null(kind) or not len(array):
        return b""
    if pa.types.is_boolean(kind):
        return bytes(array.fill_null(False).to_numpy(zero_copy_only=False).tobytes())
    for test, wide in _VIEWS.items():
        if _is(kind, (test,)):
            return _binary_bytes(array.cast(getattr(pa, wide)()))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _binary_bytes(array)
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return _binary_bytes(array)
    return _fixed_bytes(array)


def _fixed_bytes(array: Any) -> bytes:
    import numpy as np

    try:
        bits = array.type.bit_width
    except ValueError:  # not fixed-width: a union, or a type this module does not know
        raise UnreadableArrow(str(array.type)) from None
    width = bits // 8
    if bits % 8 or len(array.buffers()) != 2:
        raise UnreadableArrow(str(array.type))
    raw = np.frombuffer(array.buffers()[1], dtype=np.uint8)
    start = array.offset * width
    values = raw[start : start + len(array) * width].reshape(len(array), width)
    if array.null_count:
        values = values.copy()
        values[~_valid(array)] = 0  # what lies behind a null slot is undefined
    return bytes(values.tobytes())


def _binary_bytes(array: Any) -> bytes:
    """Strings or binary: their lengths and their bytes (nulls, already in the mask, as empty)."""
    import numpy as np
    import pyarrow as pa

    if array.null_count:
        array = array.fill_null(pa.scalar(b"", type=array.type))
    large = pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int64 if large else np.int32)
    offsets = offsets[array.offset : array.offset + len(array) + 1]
    data = array.buffers()[2]
    body = b"" if data is None else memoryview(data)[int(offsets[0]) : int(offsets[-1])].tobytes()
    return bytes(np.diff(offsets).tobytes()) + body
