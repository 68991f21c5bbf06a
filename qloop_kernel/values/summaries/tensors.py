"""torch tensors and jax arrays: shape, dtype, device, bytes; statistics from a bounded sample.

Statistics of a CPU tensor whose dtype numpy has come from a zero-copy numpy view (sampled like a
numpy array); any other tensor or jax array (a GPU, bfloat16, float8) is sampled on its device
(:mod:`.device`): a few KB are moved to the host, never the array. A head shows at most
HEAD_ELEMENTS elements, converted on the device where numpy lacks the dtype.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .common import (
    Brief,
    Kind,
    Paging,
    cut,
    format_bytes,
    format_shape,
    loaded_module,
    reject_paging,
    window,
)
from .device import device_array, is_jax_array, is_torch_tensor, statistics_lines
from .lazy import head_extent
from .numpy import array_statistics, format_array

if TYPE_CHECKING:
    from numpy.typing import NDArray


def summarize_torch_tensor(tensor: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, device, bytes, layout, gradient flag; statistics; a head of rows."""
    info = device_array(tensor)
    assert info is not None
    lines = [
        f"{label}: torch.Tensor, shape {format_shape(info.shape)}, dtype {info.dtype}, "
        f"device {info.device}, {format_bytes(info.nbytes)}, layout {tensor.layout}"
        + (", requires_grad" if tensor.requires_grad else ""),
    ]
    view = _cpu_numpy_view(tensor)
    if view is not None:
        lines += array_statistics(view)
    elif tensor.is_sparse or tensor.is_quantized:
        lines.append(f"Statistics: not computed ({tensor.layout} tensor)")
    else:
        lines += statistics_lines(tensor, info)
    lines += ["", _head(tensor, info.shape, label, paging, _torch_to_numpy)]
    return "\n".join(lines).rstrip()


def _cpu_numpy_view(tensor: Any) -> NDArray[Any] | None:
    """A numpy view of a dense CPU tensor (no copy), or None."""
    if tensor.device.type != "cpu" or tensor.is_sparse or tensor.is_quantized:
        return None
    try:
        view: NDArray[Any] = tensor.detach().numpy()  # shares memory with the tensor
    except (TypeError, RuntimeError):  # bfloat16 and other dtypes numpy lacks
        return None
    return view


def _torch_to_numpy(part: Any) -> NDArray[Any]:
    """A small part of a tensor on the host; dtypes numpy lacks are converted on the device."""
    torch = loaded_module("torch")
    part = part.detach()
    if part.is_complex() and part.dtype != torch.complex128:
        part = part.to(torch.complex64)
    elif part.is_floating_point() and part.dtype not in (
        torch.float16,
        torch.float32,
        torch.float64,
    ):
        part = part.to(torch.float32)
    host: NDArray[Any] = part.cpu().numpy()
    return host


def _jax_to_numpy(part: Any) -> NDArray[Any]:
    np = loaded_module("numpy")
    if "bfloat16" in str(part.dtype) or "float8" in str(part.dtype):
        part = part.astype("float32")
    host: NDArray[Any] = np.asarray(part)
    return host


def _head(array: Any, shape: tuple[int, ...], label: str, paging: Paging, to_numpy: Any) -> str:
    try:
        return _head_unguarded(array, shape, label, paging, to_numpy)
    except (RuntimeError, NotImplementedError, TypeError, ValueError) as exc:
        return f"Values: not shown ({cut(f'{type(exc).__name__}: {exc}', 160)})"


def _head_unguarded(
    array: Any, shape: tuple[int, ...], label: str, paging: Paging, to_numpy: Any
) -> str:
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
    """Shape, dtype, devices, bytes and sharding; statistics from a sample; a head of rows."""
    info = device_array(array)
    assert info is not None
    devices = sorted(str(device) for device in array.devices())
    lines = [
        f"{label}: jax.Array, shape {format_shape(info.shape)}, dtype {info.dtype}, "
        f"{format_bytes(info.nbytes)}, devices {cut(', '.join(devices), 200)}",
        f"Sharding: {cut(str(array.sharding), 200)}",
        *statistics_lines(array, info),
        "",
        _head(array, info.shape, label, paging, _jax_to_numpy),
    ]
    return "\n".join(lines).rstrip()


def brief_torch_tensor(tensor: Any) -> Brief:
    """Shape, bytes, dtype and device of a tensor."""
    info = device_array(tensor)
    if info is None:
        return Brief()
    details = f"{info.dtype}, {info.device}"
    return Brief(format_shape(info.shape), format_bytes(info.nbytes), cut(details, 60))


def brief_jax_array(array: Any) -> Brief:
    """Shape, bytes, dtype and devices of a jax array."""
    info = device_array(array)
    if info is None:
        return Brief()
    return Brief(
        format_shape(info.shape), format_bytes(info.nbytes), cut(f"{info.dtype}, {info.device}", 60)
    )


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
