"""numpy ndarrays: shape, dtype, memory, layout, statistics on a sample and rows along axis 0.

A memory-mapped array (``np.memmap``, ``np.load(mmap_mode=...)``) is sampled by pages: a few
contiguous runs of elements spread over the file, never elements strided across all of it, so
inspecting a 10 GB file reads at most about ``PAGE_RUNS * PAGE_RUN_BYTES``.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .common import (
    ARRAY_SAMPLE,
    ITEM_CHARS,
    SAMPLE_SEED,
    Brief,
    Kind,
    Paging,
    count_with_share,
    format_bytes,
    format_number,
    format_shape,
    instance_of,
    loaded_module,
    qualified_name,
    reject_paging,
    window,
)
from .containers import type_census
from .reprs import bounded_repr

if TYPE_CHECKING:
    from numpy.typing import NDArray


def is_ndarray(obj: object) -> bool:
    """Whether ``obj`` is a numpy ndarray."""
    return instance_of(obj, "numpy", "ndarray")


def summarize_ndarray(array: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, memory, layout, statistics and a window of rows along axis 0."""
    lines = [
        f"{label}: {qualified_name(type(array))}, shape {array.shape}, dtype {array.dtype}, "
        f"{format_bytes(array.nbytes)}, {_layout(array)}",
        *array_statistics(array),
        "",
        array_head(array, label, paging),
    ]
    return "\n".join(lines).rstrip()


def _layout(array: Any) -> str:
    if array.flags.c_contiguous:
        return "C-contiguous"
    return "F-contiguous" if array.flags.f_contiguous else "strided view"


PAGE_RUNS = 16  # contiguous runs a file-backed array is sampled by
PAGE_RUN_BYTES = 64 * 1024  # bytes of one run (16 pages of 4 KB)


def is_file_backed(array: Any) -> bool:
    """Whether ``array``'s memory is a mapped file (reading an element may read from disk)."""
    np = loaded_module("numpy")
    base = array
    for _ in range(32):  # views of views: the owner of the memory is at the end of .base
        if isinstance(base, np.memmap | mmap.mmap):
            return True
        base = getattr(base, "base", None)
        if base is None:
            return False
    return False


def page_sample(array: Any, count: int) -> NDArray[Any]:
    """At most ``count`` elements of a file-backed array read as ``PAGE_RUNS`` contiguous runs.

    Elements are taken in memory order (a view: nothing else is read); an array whose elements
    are not contiguous in memory gives its first elements along axis 0.
    """
    np = loaded_module("numpy")
    itemsize = max(int(array.itemsize), 1)
    run = max(1, min(count // PAGE_RUNS, PAGE_RUN_BYTES // itemsize))
    sample: NDArray[Any]
    if array.flags.c_contiguous or array.flags.f_contiguous:
        flat = array.reshape(-1, order="C" if array.flags.c_contiguous else "F")  # a view
        if flat.size <= run * PAGE_RUNS:
            sample = np.asarray(flat)
            return sample
        starts = np.linspace(0, flat.size - run, PAGE_RUNS).astype(np.int64)
        sample = np.concatenate([np.asarray(flat[start : start + run]) for start in starts])
        return sample
    rows = max(1, run * PAGE_RUNS // max(math.prod(array.shape[1:]), 1))
    sample = np.asarray(array[:rows]).reshape(-1)[: run * PAGE_RUNS]
    return sample


def _array_sample(array: Any) -> NDArray[Any]:
    np = loaded_module("numpy")
    sample: NDArray[Any]
    if array.size <= ARRAY_SAMPLE:
        sample = array.reshape(-1)
        return sample
    if is_file_backed(array):
        return page_sample(array, ARRAY_SAMPLE)
    flat = np.random.default_rng(SAMPLE_SEED).choice(array.size, ARRAY_SAMPLE, replace=False)
    flat.sort()
    # Fancy indexing by coordinates reads only the sampled elements, whatever the strides.
    sample = array[np.unravel_index(flat, array.shape)]
    return sample


def array_statistics(array: Any) -> list[str]:
    """One line of statistics of a numpy array, on a deterministic sample when it is big."""
    kind = array.dtype.kind
    if array.size == 0 or array.dtype.names or kind not in "biufcmMO":
        return []
    values = _array_sample(array)
    note = (
        "all elements"
        if array.size <= ARRAY_SAMPLE
        else f"{len(values):,} of {array.size:,} elements in {PAGE_RUNS} contiguous runs "
        "(a memory-mapped file: read by pages)"
        if is_file_backed(array)
        else f"a deterministic random sample of {ARRAY_SAMPLE:,} of {array.size:,} elements"
    )
    return [f"Statistics on {note}: {statistics_of(values)}"]


def statistics_of(values: Any) -> str:
    """Statistics of a 1-d numpy sample by its dtype ("" for a dtype without them)."""
    kind = values.dtype.kind
    if values.size == 0 or values.dtype.names or kind not in "biufcmMO":
        return ""
    np = loaded_module("numpy")
    with np.errstate(all="ignore"):
        return _ARRAY_STATS[kind](np, values)


def _bool_stats(np: Any, values: Any) -> str:
    true = int(np.count_nonzero(values))
    return f"True {count_with_share(true, len(values))}"


def _integer_stats(np: Any, values: Any) -> str:
    return (
        f"min {format_number(values.min())}, max {format_number(values.max())}, "
        f"mean {format_number(values.mean())}"
    )


def _float_stats(np: Any, values: Any) -> str:
    missing = np.isnan(values)
    nan_text = f"NaN {count_with_share(int(np.count_nonzero(missing)), len(values))}"
    finite = values[~missing]
    if not len(finite):
        return nan_text
    return f"{_integer_stats(np, finite)}, std {format_number(finite.std())}, {nan_text}"


def _complex_stats(np: Any, values: Any) -> str:
    return f"mean {values.mean()}, mean |x| {format_number(np.abs(values).mean())}"


def _time_stats(np: Any, values: Any) -> str:
    present = values[~np.isnat(values)]
    nat = f"NaT {count_with_share(len(values) - len(present), len(values))}"
    if not len(present):
        return nat
    return f"min {present.min()}, max {present.max()}, {nat}"


def _object_stats(np: Any, values: Any) -> str:
    return "element types " + type_census(values.tolist())


_ARRAY_STATS: dict[str, Callable[[Any, Any], str]] = {
    "b": _bool_stats,
    "i": _integer_stats,
    "u": _integer_stats,
    "f": _float_stats,
    "c": _complex_stats,
    "m": _time_stats,
    "M": _time_stats,
    "O": _object_stats,
}


def array_head(array: Any, label: str, paging: Paging) -> str:
    """A window of rows along axis 0 of a numpy array (the value of a 0-d array)."""
    if array.ndim == 0:
        reject_paging(array, label, paging)
        return f"Value: {bounded_repr(array.item(), ITEM_CHARS)}"
    start, stop = window(paging, array.shape[0], "rows along axis 0")
    if stop <= start:
        return ""
    return f"Rows {start:,}-{stop - 1:,} along axis 0 (of {array.shape[0]:,}):\n" + format_array(
        array[start:stop]
    )


def format_array(array: Any) -> str:
    """numpy's own text for an array, with long edges elided and cells bounded."""
    np = loaded_module("numpy")
    element = {"object": lambda x: bounded_repr(x, 60), "numpystr": lambda x: bounded_repr(x, 60)}
    return str(
        np.array2string(
            array,
            threshold=200,
            edgeitems=3,
            max_line_width=100,
            formatter=element,
            separator=", ",
        )
    )


def brief_ndarray(array: Any) -> Brief:
    """Shape, bytes and dtype of an ndarray."""
    return Brief(format_shape(array.shape), format_bytes(int(array.nbytes)), f"dtype {array.dtype}")


KINDS = [
    Kind("numpy.ndarray", frozenset({"numpy"}), is_ndarray, summarize_ndarray, brief_ndarray),
]
