"""Arrays stored in files: h5py datasets and zarr arrays.

Reading an element reads (and decompresses) the chunk that holds it, so such an array is described
from its metadata (shape, dtype, chunks, compression, where it is stored) and its values only from
one bounded block at the start: at most ``STORED_SAMPLE`` elements for the statistics and the rows
shown, which reads only the chunks that hold them, never the whole file. Nothing here imports
h5py or zarr.
"""

from __future__ import annotations

import math
from typing import Any

from .common import (
    Brief,
    Kind,
    Paging,
    cut,
    format_bytes,
    format_shape,
    instance_of,
    loaded_module,
    qualified_name,
    reject_paging,
    window,
)
from .numpy import format_array, statistics_of
from .reprs import bounded_repr

STORED_SAMPLE = 100_000  # elements read at most for statistics
SHOWN_EDGE = 20  # elements along each axis after the first of the rows shown


def is_h5py_dataset(obj: object) -> bool:
    """An h5py Dataset (an array in an HDF5 file)."""
    return instance_of(obj, "h5py", "Dataset")


def is_zarr_array(obj: object) -> bool:
    """A zarr Array (chunks in a store: a folder, a zip, object storage)."""
    return instance_of(obj, "zarr", "Array")


def _where(array: Any) -> str:
    if is_h5py_dataset(array):
        return f"{array.name} in HDF5 file {array.file.filename}"
    store = getattr(array, "store_path", None) or getattr(array, "store", None)
    return f"zarr store {cut(str(store), 200)}"


def _compression(array: Any) -> str:
    if is_h5py_dataset(array):
        return str(array.compression or "none")  # contiguous (chunks None): read in place
    found = getattr(array, "compressors", None) or getattr(array, "compressor", None)
    return cut(str(found), 120) if found else "none"


def _edges(shape: tuple[int, ...]) -> tuple[slice, ...]:
    """The first ``SHOWN_EDGE`` elements along each axis after the first."""
    return tuple(slice(0, min(n, SHOWN_EDGE)) for n in shape[1:])


def _block(shape: tuple[int, ...], budget: int) -> tuple[slice, ...]:
    """The slices of the first block of at most ``budget`` elements (rows first)."""
    edges = _edges(shape)
    per_row = max(math.prod(e.stop for e in edges), 1)
    return (slice(0, max(1, min(shape[0], budget // per_row))), *edges)


def summarize_stored(array: Any, label: str, paging: Paging) -> str:
    """Metadata, statistics on the first block, and a window of rows along axis 0."""
    shape = tuple(int(n) for n in array.shape)
    dtype = array.dtype
    size = math.prod(shape)
    lines = [
        f"{label}: {qualified_name(type(array))}, shape {shape}, dtype {dtype}, "
        f"{format_bytes(size * dtype.itemsize)} uncompressed",
        f"Stored: {_where(array)}; chunks {array.chunks}, compression {_compression(array)}",
    ]
    if not shape:
        reject_paging(array, label, paging)
        value = array[()]
        lines.append(f"Value: {bounded_repr(getattr(value, 'tolist', lambda: value)(), 200)}")
        return "\n".join(lines)
    if size and not dtype.names:
        np = loaded_module("numpy")
        sample = np.asarray(array[_block(shape, STORED_SAMPLE)]).reshape(-1)
        stats = statistics_of(sample)
        if stats:
            lines.append(
                f"Statistics on the first {sample.size:,} of {size:,} elements (only the chunks "
                f"that hold them are read): {stats}"
            )
    start, stop = window(paging, shape[0], "rows along axis 0")
    if stop > start:
        cutoff = any(n > SHOWN_EDGE for n in shape[1:])
        note = f", the first {SHOWN_EDGE} along the other axes" if cutoff else ""
        index = (slice(start, stop), *_edges(shape))
        rows = loaded_module("numpy").asarray(array[index])
        lines += ["", f"Rows {start:,}-{stop - 1:,} along axis 0 (of {shape[0]:,}{note}):"]
        lines.append(format_array(rows))
    return "\n".join(lines)


def brief_stored(array: Any) -> Brief:
    """Shape, uncompressed bytes and dtype; the file or store."""
    shape = tuple(int(n) for n in array.shape)
    nbytes = math.prod(shape) * array.dtype.itemsize
    details = f"dtype {array.dtype}, {cut(_where(array), 80)}"
    return Brief(format_shape(shape), f"{format_bytes(nbytes)} in file", details)


KINDS = [
    Kind("h5py.Dataset", frozenset({"h5py"}), is_h5py_dataset, summarize_stored, brief_stored),
    Kind("zarr.Array", frozenset({"zarr"}), is_zarr_array, summarize_stored, brief_stored),
]
