"""xarray DataArray and Dataset: dims, coordinates, variables, dtypes, chunks and attributes.

Variables backed by dask or by a file that has not been loaded are described from metadata
only; statistics and values are shown for a DataArray whose data is already in memory.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .common import (
    LISTED_COLUMNS,
    Brief,
    Kind,
    Paging,
    cut,
    format_bytes,
    format_shape,
    format_table,
    instance_of,
    lazy_note,
    loaded_module,
    reject_paging,
)
from .numpy import array_head, array_statistics
from .reprs import bounded_repr

if TYPE_CHECKING:
    from numpy.typing import NDArray


def is_data_array(obj: object) -> bool:
    """An xarray DataArray."""
    return instance_of(obj, "xarray", "DataArray")


def is_dataset(obj: object) -> bool:
    """An xarray Dataset."""
    return instance_of(obj, "xarray", "Dataset")


def _in_memory_array(variable: Any) -> NDArray[Any] | None:
    """The numpy array behind ``variable`` if it is loaded, else None (nothing is loaded)."""
    np = loaded_module("numpy")
    # Variable.data would load a lazily opened file; the wrapped array tells without loading.
    data = getattr(variable, "_data", None)
    if np is None or not isinstance(data, np.ndarray):
        return None
    array: NDArray[Any] = data
    return array


def _storage(variable: Any, indexed: bool = False) -> str:
    if indexed:
        return "index, in memory"
    chunks = variable.chunks
    if chunks is not None:
        blocks = math.prod(len(sizes) for sizes in chunks)
        first = format_shape([sizes[0] for sizes in chunks]) if chunks else "0-d"
        return f"dask, {blocks:,} chunks of {first}"
    return "in memory" if _in_memory_array(variable) is not None else "lazy, not loaded"


def _nbytes(variable: Any) -> int:
    return int(math.prod(variable.shape)) * int(variable.dtype.itemsize)


def _dims_text(sizes: Any) -> str:
    return ", ".join(f"{name}: {size:,}" for name, size in sizes.items()) or "none (0-d)"


def _variable_rows(variables: Any, indexes: Any) -> list[list[str]]:
    rows = []
    for name, value in list(variables.items())[:LISTED_COLUMNS]:
        variable = value.variable
        rows.append(
            [
                cut(str(name), 30),
                cut(f"({', '.join(map(str, variable.dims))})", 40),
                str(variable.dtype),
                format_shape(variable.shape),
                _storage(variable, name in indexes),
            ]
        )
    return rows


def _table(title: str, variables: Any, indexes: Any) -> list[str]:
    if not len(variables):
        return []
    header = ["name", "dims", "dtype", "shape", "storage"]
    more = len(variables) - LISTED_COLUMNS
    rest = [f"... {more:,} more"] if more > 0 else []
    return [
        "",
        f"{title} ({len(variables):,}):",
        format_table(header, _variable_rows(variables, indexes)),
    ] + rest


def _attrs_lines(attrs: Any) -> list[str]:
    if not attrs:
        return []
    items = list(attrs.items())
    lines = ["", f"Attributes ({len(items):,}):"]
    lines += [f"  {cut(str(k), 40)}: {bounded_repr(v, 100)}" for k, v in items[:20]]
    return lines


def summarize_dataset(dataset: Any, label: str, paging: Paging) -> str:
    """Dims, coordinates, data variables (dtype, shape, storage) and attributes."""
    reject_paging(dataset, label, paging)
    total = sum(_nbytes(variable) for variable in dataset.variables.values())
    lines = [
        f"{label}: xarray.Dataset, dims {_dims_text(dataset.sizes)}; "
        f"{len(dataset.data_vars):,} data variables, {len(dataset.coords):,} coordinates, "
        f"{format_bytes(total)} when loaded",
        *_table("Coordinates", dataset.coords, dataset.indexes),
        *_table("Data variables", dataset.data_vars, ()),
        *_attrs_lines(dataset.attrs),
    ]
    return "\n".join(lines)


def summarize_data_array(array: Any, label: str, paging: Paging) -> str:
    """Dims, dtype, storage, coordinates, attributes; statistics and rows when in memory."""
    variable = array.variable
    data = _in_memory_array(variable)
    name = "" if array.name is None else f" {bounded_repr(array.name, 60)}"
    lines = [
        f"{label}: xarray.DataArray{name}, dims {_dims_text(array.sizes)}, dtype {array.dtype}, "
        f"{format_bytes(_nbytes(variable))}, {_storage(variable)}",
        *_table("Coordinates", array.coords, array.indexes),
        *_attrs_lines(array.attrs),
        "",
    ]
    if data is None:
        reject_paging(array, label, paging)
        lines.append(lazy_note("the values", f"run {label}.load() or a selection with run_code"))
    else:
        lines += [*array_statistics(data), array_head(data, label, paging)]
    return "\n".join(lines).rstrip()


def brief_dataset(dataset: Any) -> Brief:
    """Dims and variable count of a Dataset."""
    details = f"{len(dataset.data_vars):,} variables; dims {_dims_text(dataset.sizes)}"
    return Brief(format_shape(list(dataset.sizes.values())), "", cut(details, 60))


def brief_data_array(array: Any) -> Brief:
    """Shape, size when loaded and storage of a DataArray."""
    variable = array.variable
    memory = format_bytes(_nbytes(variable)) if _in_memory_array(variable) is not None else ""
    return Brief(
        format_shape(variable.shape), memory, cut(f"{array.dtype}, {_storage(variable)}", 60)
    )


_XARRAY = frozenset({"xarray"})
KINDS = [
    Kind("xarray DataArray", _XARRAY, is_data_array, summarize_data_array, brief_data_array),
    Kind("xarray Dataset", _XARRAY, is_dataset, summarize_dataset, brief_dataset),
]
