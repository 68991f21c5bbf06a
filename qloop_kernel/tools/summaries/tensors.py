"""torch tensors and jax arrays: shape, dtype, device; values without copying a big tensor.

Statistics are computed for tensors in CPU memory only (through a zero-copy numpy view of a
sample); a tensor on another device shows at most HEAD_ELEMENTS elements, copied for display.
"""

from __future__ import annotations

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
    reject_paging,
    window,
)
from .lazy import head_extent
from .numpy import array_statistics, format_array


def is_torch_tensor(obj: object) -> bool:
    """A torch Tensor."""
    return instance_of(obj, "torch", "Tensor")


def is_jax_array(obj: object) -> bool:
    """A jax Array."""
    return instance_of(obj, "jax", "Array")


def summarize_torch_tensor(tensor: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, device, layout, gradient flag; statistics on CPU; a head of rows."""
    shape = tuple(tensor.shape)
    device = str(tensor.device)
    nbytes = tensor.element_size() * tensor.numel()
    lines = [
        f"{label}: torch.Tensor, shape {format_shape(shape)}, dtype {tensor.dtype}, "
        f"device {device}, {format_bytes(nbytes)}, layout {tensor.layout}"
        + (", requires_grad" if tensor.requires_grad else ""),
    ]
    view = _cpu_numpy_view(tensor)
    if view is not None:
        lines += array_statistics(view)
    else:
        lines.append(
            f"Statistics: not computed (on {device}; a big tensor is not copied to the CPU)"
        )
    lines += ["", _head(tensor, shape, label, paging, lambda part: part.detach().cpu().numpy())]
    return "\n".join(lines).rstrip()


def _cpu_numpy_view(tensor: Any) -> Any:
    """A numpy view of a dense CPU tensor (no copy), or None."""
    if tensor.device.type != "cpu" or tensor.is_sparse or tensor.is_quantized:
        return None
    try:
        return tensor.detach().numpy()  # shares memory with the tensor
    except (TypeError, RuntimeError):  # bfloat16 and other dtypes numpy lacks
        return None


def _head(array: Any, shape: tuple[int, ...], label: str, paging: Paging, to_numpy: Any) -> str:
    if not shape:
        reject_paging(array, label, paging)
        return f"Value: {to_numpy(array).item()!r}"
    start, stop = window(paging, shape[0], "rows along axis 0")
    if stop <= start:
        return ""
    trailing = head_extent(shape[1:], stop - start)
    index = (slice(start, stop), *(slice(0, n) for n in trailing))
    part = array[index]
    scope = "" if tuple(trailing) == shape[1:] else ", first elements of other axes"
    return f"Rows {start:,}-{stop - 1:,} along axis 0{scope}:\n" + format_array(to_numpy(part))


def summarize_jax_array(array: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, devices and sharding; a head of rows (a small copy to the host)."""
    shape = tuple(array.shape)
    devices = sorted(str(device) for device in array.devices())
    np = loaded_module("numpy")
    lines = [
        f"{label}: jax.Array, shape {format_shape(shape)}, dtype {array.dtype}, "
        f"{format_bytes(int(array.nbytes))}, devices {cut(', '.join(devices), 200)}",
        f"Sharding: {cut(str(array.sharding), 200)}",
        "Statistics: not computed (jax arrays live on their devices; values are not copied)",
        "",
        _head(array, shape, label, paging, np.asarray),
    ]
    return "\n".join(lines).rstrip()


def brief_torch_tensor(tensor: Any) -> Brief:
    """Shape, bytes, dtype and device of a tensor."""
    nbytes = tensor.element_size() * tensor.numel()
    details = f"{tensor.dtype}, {tensor.device}"
    return Brief(format_shape(tuple(tensor.shape)), format_bytes(nbytes), cut(details, 60))


def brief_jax_array(array: Any) -> Brief:
    """Shape, bytes, dtype and device count of a jax array."""
    devices = len(array.devices())
    details = f"{array.dtype}, {devices} device{'s' if devices != 1 else ''}"
    return Brief(format_shape(tuple(array.shape)), format_bytes(int(array.nbytes)), details)


KINDS = [
    Kind(
        "torch Tensor",
        frozenset({"torch"}),
        is_torch_tensor,
        summarize_torch_tensor,
        brief_torch_tensor,
    ),
    Kind(
        "jax Array",
        frozenset({"jax", "jaxlib"}),
        is_jax_array,
        summarize_jax_array,
        brief_jax_array,
    ),
]
