"""Arrays in device memory: torch tensors, CuPy and JAX arrays, any ``__cuda_array_interface__``
or ``__dlpack__`` object.

Such an array is described from its metadata (shape, dtype, device, bytes); its values are read
only through a bounded sample: ``DEVICE_SAMPLE`` evenly spaced elements gathered on the device and
moved to the host (a few KB, in float32 where numpy lacks the dtype: bfloat16, float8), never the
array. A value that cannot be read (torch's ``meta`` device, an unknown library's device memory)
is described without statistics. Nothing here imports torch, CuPy or JAX.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .common import (
    Brief,
    Kind,
    Paging,
    cut,
    format_bytes,
    format_shape,
    instance_of,
    is_lazy_like,
    loaded_module,
    qualified_name,
    reject_paging,
)
from .numpy import array_statistics

if TYPE_CHECKING:
    from numpy.typing import NDArray

DEVICE_SAMPLE = 2_048  # elements of a device array read for statistics and fingerprints
# DLPack device types (dlpack.h, DLDeviceType)
_DLPACK_DEVICES = {
    1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
    10: "rocm", 11: "rocm_host", 13: "cuda_managed", 14: "oneapi", 15: "webgpu", 16: "hexagon",
}  # fmt: skip


@dataclass(frozen=True)
class DeviceArray:
    """What can be read of a device array without touching its values."""

    library: str  # "torch", "cupy", "jax", or the qualified type of another array
    shape: tuple[int, ...]
    dtype: str
    device: str  # "cuda:0", "meta", "cpu", "TFRT_CPU_0", ...
    nbytes: int

    @property
    def on_host(self) -> bool:
        """The values live in host memory (a copy of them would use no device memory)."""
        return self.device.split(":")[0].lower() in ("cpu", "cuda_host") or "CPU" in self.device


def is_torch_tensor(obj: object) -> bool:
    """A torch Tensor."""
    return instance_of(obj, "torch", "Tensor")


def is_jax_array(obj: object) -> bool:
    """A jax Array."""
    return instance_of(obj, "jax", "Array")


def is_cupy_array(obj: object) -> bool:
    """A CuPy ndarray."""
    return instance_of(obj, "cupy", "ndarray")


def is_interface_array(obj: object) -> bool:
    """Another library's array that exposes ``__cuda_array_interface__`` or ``__dlpack__``."""
    cls = type(obj)
    if isinstance(obj, type) or is_lazy_like(obj):
        return False
    if hasattr(cls, "__cuda_array_interface__"):
        return True
    # DLPack alone is also offered by columns and tables (Arrow): an array has a shape and a dtype.
    dlpack = hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__")
    return dlpack and hasattr(cls, "shape") and hasattr(cls, "dtype")


def is_device_array(obj: object) -> bool:
    """A torch, CuPy or JAX array, or an object exposing a device-array interface."""
    return (
        is_torch_tensor(obj)
        or is_cupy_array(obj)
        or is_jax_array(obj)
        or (is_interface_array(obj) and not instance_of(obj, "numpy", "ndarray"))
    )


def device_array(obj: object) -> DeviceArray | None:
    """The metadata of a device array, or None when ``obj`` is not one (or cannot be read)."""
    try:
        if is_torch_tensor(obj):
            return _torch_info(obj)
        if is_cupy_array(obj):
            return _cupy_info(obj)
        if is_jax_array(obj):
            return _jax_info(obj)
        if is_interface_array(obj):
            return _interface_info(obj)
    except Exception:  # a broken property: not described as an array
        return None
    return None


def _torch_info(tensor: Any) -> DeviceArray:
    nbytes = int(tensor.element_size()) * int(tensor.numel())
    return DeviceArray("torch", tuple(tensor.shape), str(tensor.dtype), str(tensor.device), nbytes)


def _cupy_info(array: Any) -> DeviceArray:
    device = f"cuda:{array.device.id}"
    return DeviceArray("cupy", tuple(array.shape), str(array.dtype), device, int(array.nbytes))


def _jax_info(array: Any) -> DeviceArray:
    devices = sorted(str(device) for device in array.devices())
    device = devices[0] if len(devices) == 1 else f"{len(devices)} devices ({devices[0]}, ...)"
    return DeviceArray("jax", tuple(array.shape), str(array.dtype), device, int(array.nbytes))


def _interface_info(obj: Any) -> DeviceArray:
    interface = getattr(obj, "__cuda_array_interface__", None)
    library = qualified_name(type(obj))
    if isinstance(interface, dict):
        shape = tuple(int(n) for n in interface["shape"])
        typestr = str(interface["typestr"])
        itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 0
        return DeviceArray(
            library, shape, _typestr_name(typestr), "cuda", math.prod(shape) * itemsize
        )
    kind, index = obj.__dlpack_device__()
    device = f"{_DLPACK_DEVICES.get(int(kind), f'device type {int(kind)}')}:{int(index)}"
    shape = tuple(int(n) for n in obj.shape)
    dtype = getattr(obj, "dtype", None)
    itemsize = int(getattr(dtype, "itemsize", 0) or getattr(obj, "itemsize", 0) or 0)
    return DeviceArray(library, shape, str(dtype), device, math.prod(shape) * itemsize)


def _typestr_name(typestr: str) -> str:
    """numpy's name for an array-interface type string (``<f4`` -> float32), else the string."""
    np = loaded_module("numpy")
    if np is None:
        return typestr
    try:
        return str(np.dtype(typestr))
    except TypeError:
        return typestr


# -- a bounded sample of the values --------------------------------------------------------------


def sample_positions(
    shape: tuple[int, ...], count: int = DEVICE_SAMPLE
) -> tuple[NDArray[Any], ...]:
    """Coordinates of ``count`` evenly spaced elements (all of them when fewer), as numpy arrays."""
    np = loaded_module("numpy")
    size = math.prod(shape)
    flat = np.unique(np.linspace(0, size - 1, min(size, count)).astype(np.int64))
    coordinates: tuple[NDArray[Any], ...] = np.unravel_index(flat, shape)
    return coordinates


def host_sample(obj: object, count: int = DEVICE_SAMPLE) -> NDArray[Any]:
    """At most ``count`` evenly spaced values of a device array, as a small numpy array.

    The elements are gathered on the device and only they are moved to the host; dtypes numpy
    lacks (bfloat16, float8, complex32) are converted on the device first. Raises when the values
    cannot be read (torch ``meta`` tensors, device memory no loaded library can read).
    """
    info = device_array(obj)
    if info is None or not math.prod(info.shape):
        raise ValueError("no values")
    if is_torch_tensor(obj):
        return _torch_sample(obj, info, count)
    if is_cupy_array(obj):
        return _cupy_sample(obj, info, count)
    if is_jax_array(obj):
        return _jax_sample(obj, info, count)
    if info.device.startswith("cpu"):
        np = loaded_module("numpy")
        view = np.from_dlpack(obj)  # host memory: a view, no copy
        sample: NDArray[Any] = (
            view[sample_positions(view.shape, count)] if view.ndim else view.reshape(1)
        )
        return sample
    raise ValueError(f"no loaded library reads {info.device} memory of {info.library}")


def _torch_sample(tensor: Any, info: DeviceArray, count: int) -> NDArray[Any]:
    torch = loaded_module("torch")
    part = tensor.detach()
    if info.shape:
        coordinates = sample_positions(info.shape, count)
        part = part[tuple(torch.as_tensor(axis, device=part.device) for axis in coordinates)]
    part = part.reshape(-1)
    if part.is_complex() and part.dtype != torch.complex128:
        part = part.to(torch.complex64)
    elif part.is_floating_point() and part.dtype not in (torch.float16, torch.float64):
        part = part.to(torch.float32)  # bfloat16 and float8: exact in float32
    host: NDArray[Any] = part.cpu().numpy()
    return host


def _cupy_sample(array: Any, info: DeviceArray, count: int) -> NDArray[Any]:
    cupy = loaded_module("cupy")
    part = array.reshape(-1)[:1] if not info.shape else array
    if info.shape:
        part = array[tuple(cupy.asarray(axis) for axis in sample_positions(info.shape, count))]
    host: NDArray[Any] = cupy.asnumpy(part.reshape(-1))
    return host


def _jax_sample(array: Any, info: DeviceArray, count: int) -> NDArray[Any]:
    np = loaded_module("numpy")
    part = array[sample_positions(info.shape, count)] if info.shape else array.reshape(1)
    kind = np.dtype(part.dtype).kind if str(part.dtype) in np.sctypeDict else "V"
    if kind == "V" or "bfloat16" in str(part.dtype) or "float8" in str(part.dtype):
        part = part.astype("float32")
    host: NDArray[Any] = np.asarray(part).reshape(-1)
    return host


def sample_note(info: DeviceArray, sample: Any) -> str:
    """Which elements the statistics are computed on."""
    size = math.prod(info.shape)
    if len(sample) >= size:
        return "all elements"
    return f"{len(sample):,} evenly spaced of {size:,} elements, gathered on {info.device}"


def statistics_lines(obj: object, info: DeviceArray) -> list[str]:
    """The statistics line of a device array from a bounded sample, or why there is none."""
    try:
        sample = host_sample(obj)
    except Exception as exc:  # meta tensors, unreadable device memory
        why = cut(f"{type(exc).__name__}: {exc}", 160)
        return [f"Statistics: not computed (the values on {info.device} cannot be read: {why})"]
    lines = array_statistics(sample)
    note = sample_note(info, sample)
    return [
        line.replace("Statistics on all elements", f"Statistics on {note}", 1) for line in lines
    ]


# -- summaries of arrays of other libraries ---------------------------------------------------------


def summarize_interface_array(array: Any, label: str, paging: Paging) -> str:
    """Shape, dtype, device and bytes of a CuPy array or another library's device array."""
    info = device_array(array)
    if info is None:
        return (
            f"{label}: {qualified_name(type(array))} (a device array whose metadata cannot be read)"
        )
    reject_paging(array, label, paging)  # no rows are read: moving them is the user's call
    lines = [
        f"{label}: {info.library}, shape {format_shape(info.shape)}, dtype {info.dtype}, "
        f"device {info.device}, {format_bytes(info.nbytes)}",
        *statistics_lines(array, info),
    ]
    return "\n".join(lines)


def brief_device_array(array: Any) -> Brief:
    """Shape, bytes (the array's own, not its Python object's), dtype and device."""
    info = device_array(array)
    if info is None:
        return Brief()
    return Brief(
        format_shape(info.shape), format_bytes(info.nbytes), cut(f"{info.dtype}, {info.device}", 60)
    )


KINDS = [
    Kind(
        "CuPy ndarray",
        frozenset({"cupy", "cupy_backends"}),
        is_cupy_array,
        summarize_interface_array,
        brief_device_array,
    ),
    Kind(
        "device array",
        frozenset(),
        is_interface_array,
        summarize_interface_array,
        brief_device_array,
    ),
]
