"""Arrays in device memory: torch (meta and CPU tensors), JAX, and other libraries' arrays seen
through ``__cuda_array_interface__`` / ``__dlpack__``.

torch's ``meta`` device stands in for a GPU: its tensors have a shape, a dtype and a size but no
data, and any attempt to read their values raises. So a summary, a fingerprint or an undo snapshot
of a meta tensor that works proves that nothing was read or copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.notebook.undo import UndoLog, measure, size_of, snapshot_copy, take_snapshot
from qloop_kernel.policy.risk import classify
from qloop_kernel.settings import Settings
from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.values.fingerprint import changes, fingerprint
from qloop_kernel.values.summaries.device import (
    DEVICE_SAMPLE,
    device_array,
    host_sample,
    is_device_array,
)
from qloop_kernel.values.summaries.trust import trusting

torch = pytest.importorskip("torch")


class CudaArray:
    """Another library's GPU array: only ``__cuda_array_interface__`` (its pointer is not real
    memory, so reading through it would crash the process)."""

    def __init__(self, shape: tuple[int, ...], typestr: str) -> None:
        self.shape = shape
        self.typestr = typestr

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "typestr": self.typestr,
            "data": (0xDEAD0000, False),
            "version": 3,
            "strides": None,
        }


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ipython = InteractiveShell.instance(config=config)
    yield ipython
    InteractiveShell.clear_instance()


def meta(*shape: int, dtype: Any = None) -> Any:
    return torch.empty(*shape, dtype=dtype or torch.bfloat16, device="meta")


def test_the_meta_device_cannot_be_read() -> None:
    with pytest.raises(NotImplementedError):
        meta(4).float().cpu()  # what makes it the stand-in for "nothing copied"


# -- inspect_variable and list_variables -------------------------------------------------------


def test_a_device_tensor_is_described_from_its_metadata() -> None:
    ns = {"weights": meta(1000, 4096)}
    text = inspect_variable(ns, "weights")
    assert text.startswith(
        "weights: torch.Tensor, shape 1,000 x 4,096, dtype torch.bfloat16, device meta, 7.8 MB"
    )
    assert "Statistics: not computed (the values on meta cannot be read" in text
    row = list_variables(ns).splitlines()[2]
    assert row.split() == ["weights", "torch.Tensor", "1,000", "x", "4,096", "7.8", "MB",
                           "torch.bfloat16,", "meta"]  # fmt: skip


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (torch.bfloat16, "Statistics on all elements: min 0, max 11, mean 5.5, std 3.45205, NaN 0"),
        (torch.float8_e4m3fn, "Statistics on all elements: min 0, max 11, mean 5.5"),
        (torch.float16, "Statistics on all elements: min 0, max 11, mean 5.5"),
        (torch.complex64, "Statistics on all elements: mean (5.5+0j)"),
    ],
)
def test_bfloat16_float8_and_complex_tensors_have_statistics(dtype: Any, expected: str) -> None:
    tensor = torch.arange(12.0).reshape(3, 4).to(dtype)
    text = inspect_variable({"t": tensor}, "t")
    assert expected in text
    assert f"dtype {tensor.dtype}" in text and "Rows 0-2 along axis 0" in text


def test_statistics_of_a_big_tensor_come_from_a_bounded_sample() -> None:
    tensor = torch.arange(1_000_000, dtype=torch.float32).reshape(1000, 1000).to(torch.bfloat16)
    text = inspect_variable({"t": tensor}, "t")
    assert f"Statistics on {DEVICE_SAMPLE:,} evenly spaced of 1,000,000 elements" in text
    sample = host_sample(tensor)
    assert len(sample) == DEVICE_SAMPLE and sample.nbytes <= 16 * 1024  # what moves to the host
    assert sample[0] == 0 and sample[-1] == tensor[-1, -1].float().item()


def test_an_array_known_only_by_its_cuda_interface_is_an_array() -> None:
    ns = {"x": CudaArray((1000, 1000), "<f4"), "h": CudaArray((10,), "<f2")}
    with trusting([f"{__name__}.CudaArray"]):  # read as the library's array it stands for
        text = inspect_variable(ns, "x")
        listing = list_variables(ns)
    assert (
        text.splitlines()[0]
        == "x: tests.test_device_arrays.CudaArray, shape 1,000 x 1,000, dtype float32, device cuda, 3.8 MB"
    )
    assert "Statistics: not computed" in text
    assert "3.8 MB" in listing and "float32, cuda" in listing and "float16, cuda" in listing
    assert device_array(ns["h"]) is not None and device_array(ns["h"]).nbytes == 20  # type: ignore[union-attr]


def test_a_dlpack_array_on_the_host_is_read_through_a_view() -> None:
    class HostArray:
        def __init__(self, data: Any) -> None:
            self.data = data

        @property
        def shape(self) -> tuple[int, ...]:
            return tuple(self.data.shape)

        @property
        def dtype(self) -> Any:
            return self.data.dtype

        def __dlpack__(self, **kwargs: Any) -> Any:
            return self.data.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with trusting([f"{__name__}.*"]):  # read as the library's array it stands for
        text = inspect_variable({"a": HostArray(np.arange(10.0))}, "a")
    assert "device cpu:0, 80 B" in text and "min 0, max 9, mean 4.5" in text


def test_arrow_arrays_offering_dlpack_stay_arrow_arrays() -> None:
    pa = pytest.importorskip("pyarrow")
    column = pa.array(np.arange(1000))
    assert not is_device_array(column)
    assert measure(column).host == column.nbytes
    assert inspect_variable({"col": column}, "col").startswith("col: pyarrow.Int64Array")


def test_jax_arrays_have_their_size_and_sampled_statistics() -> None:
    jnp = pytest.importorskip("jax.numpy")
    array = jnp.arange(10_000.0, dtype=jnp.bfloat16).reshape(100, 100)
    text = inspect_variable({"j": array}, "j")
    assert "dtype bfloat16, 19.5 KB" in text
    assert f"Statistics on {DEVICE_SAMPLE:,} evenly spaced of 10,000 elements" in text
    assert "19.5 KB" in list_variables({"j": array})


# -- fingerprints --------------------------------------------------------------------------------


def test_an_in_place_change_of_a_tensor_is_seen() -> None:
    for tensor in (torch.ones(10, dtype=torch.bfloat16), torch.ones(3000, 3000)):
        before = fingerprint(tensor)
        tensor.mul_(2)
        after = fingerprint(tensor)
        assert before.hash and before.hash != after.hash
        [change] = changes({"x": before}, {"x": after})
        assert change.line.endswith("values changed")


def test_tensors_of_the_same_shape_do_not_share_a_hash() -> None:
    assert fingerprint(torch.zeros(5)).hash != fingerprint(torch.ones(5)).hash


def test_a_rebound_jax_array_is_seen_as_changed() -> None:
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.ones(100)
    before = fingerprint(x)
    x = x * 2
    [change] = changes({"x": before}, {"x": fingerprint(x)})
    assert change.line == "x: jaxlib ArrayImpl 100, values changed"


def test_a_device_tensor_is_fingerprinted_without_reading_it() -> None:
    found = fingerprint(meta(1000, 4096))
    assert (found.shape, found.dtype, found.hash) == ((1000, 4096), "torch.bfloat16", "")
    assert fingerprint(CudaArray((5,), "<f4")).shape == (5,)


# -- undo ----------------------------------------------------------------------------------------


def test_device_memory_is_not_copied_without_a_device_budget(shell: InteractiveShell) -> None:
    shell.user_ns.update(weights=meta(1000, 4096), state={"w": meta(10, dtype=torch.float32)})
    log = UndoLog(shell)
    snapshot = log.prepare("weights.mul_(2)\nstate['w'].add_(1)")
    assert snapshot.saved == {}
    assert snapshot.missed == {
        "state": "(dict, 40 B on meta) is not snapshotted: a copy would take device memory, and "
        "the undo device budget is 0 B (raise it with `%agent set undo_device_budget_mb N`)",
        "weights": "(Tensor, 7.8 MB on meta) is not snapshotted: a copy would take device "
        "memory, and the undo device budget is 0 B (raise it with `%agent set "
        "undo_device_budget_mb N`)",
    }
    assert "weights (Tensor, 7.8 MB on meta) is not snapshotted" in (snapshot.notice() or "")


def test_a_device_budget_lets_a_copy_be_taken(shell: InteractiveShell) -> None:
    weights = meta(1000, 4096)
    shell.user_ns.update(weights=weights, small=meta(10))
    log = UndoLog(shell)
    log.device_budget = lambda: 1024**2  # 1 MB: the small tensor fits, the big one does not
    snapshot = log.prepare("weights.mul_(2)\nsmall.mul_(2)")
    assert set(snapshot.saved) == {"small"} and snapshot.device_held == 20
    assert snapshot.saved["small"].value is not shell.user_ns["small"]
    assert "weights (Tensor, 7.8 MB on meta) is not snapshotted" in (snapshot.notice() or "")


def test_host_tensors_count_their_storage_against_the_budget() -> None:
    tensor = torch.zeros(1_000_000)
    assert size_of(tensor) == 4_000_000  # not sys.getsizeof's few bytes
    snapshot = take_snapshot(
        "t.mul_(2)", {"t": tensor}, assessment=classify("t.mul_(2)", existing={"t"}), budget=1024
    )
    assert "t (3.8 MB) is over the undo budget of 1.0 KB" in (snapshot.notice() or "")


def test_jax_arrays_are_kept_as_they_are() -> None:
    jnp = pytest.importorskip("jax.numpy")
    array = jnp.ones(1000)
    assert snapshot_copy(array) == (array, "kept (immutable)")
    assert measure(array).host == 0 and measure(array).device == 0


def test_the_device_budget_setting_defaults_to_none() -> None:
    assert Settings().undo_device_budget_bytes() == 0
    assert Settings(undo_device_budget_mb=2).undo_device_budget_bytes() == 2 * 1024**2


def test_a_step_that_changes_a_tensor_in_place_reports_it(shell: InteractiveShell) -> None:
    shell.user_ns["x"] = torch.ones(2000, 2000, dtype=torch.bfloat16)
    log = UndoLog(shell)
    snapshot = log.begin("x.mul_(2)")
    shell.run_cell("x.mul_(2)", store_history=False)
    assert log.finish(snapshot).lines() == ["x: torch Tensor 2000×2000, values changed"]


# -- on a real GPU (skipped where there is none) --------------------------------------------------

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
GIB = 1024**3


def on_top(action: Any) -> tuple[Any, int]:
    """What ``action()`` returns, and the device memory it allocated on top of what was there."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.max_memory_allocated()
    found = action()
    torch.cuda.synchronize()
    return found, torch.cuda.max_memory_allocated() - before


@cuda
def test_a_gpu_tensor_is_inspected_listed_and_fingerprinted_within_a_few_kb() -> None:
    x = torch.ones(GIB // 2 // 8192, 8192, dtype=torch.bfloat16, device="cuda")
    ns = {"x": x}
    text, extra = on_top(lambda: inspect_variable(ns, "x"))
    assert "dtype torch.bfloat16, device cuda:0, 1.0 GB" in text
    assert f"Statistics on {DEVICE_SAMPLE:,} evenly spaced of 536,870,912 elements, gathered on cuda:0: min 1, max 1" in text  # fmt: skip
    assert extra < 1024**2
    assert "1.0 GB" in list_variables(ns)
    before, extra = on_top(lambda: fingerprint(x))
    assert extra < 1024**2
    x.mul_(2)
    assert fingerprint(x).hash != before.hash


@cuda
def test_undo_never_copies_a_gpu_tensor_without_a_device_budget(shell: InteractiveShell) -> None:
    shell.user_ns["x"] = torch.zeros(GIB // 4, device="cuda")
    log = UndoLog(shell)
    snapshot, extra = on_top(lambda: log.prepare("x += 1"))
    assert extra < 1024**2 and snapshot.saved == {}
    assert snapshot.missed["x"].startswith("(Tensor, 1.0 GB on cuda:0) is not snapshotted")
    log.device_budget = lambda: 2 * GIB
    snapshot, extra = on_top(lambda: log.prepare("x += 1"))
    assert snapshot.device_held == GIB and extra >= GIB  # allowed: a real copy on the device


@cuda
def test_cupy_and_jax_gpu_arrays() -> None:
    cupy = pytest.importorskip("cupy")
    array = cupy.ones((1000, 1000), dtype=cupy.float32)
    assert "dtype float32, device cuda:0, 3.8 MB" in inspect_variable({"c": array}, "c")
    before = fingerprint(array)
    array *= 2
    assert fingerprint(array).hash != before.hash
    assert measure(array).device == 4_000_000
    jax = pytest.importorskip("jax")
    gpu = jax.devices("gpu")[0]
    j = jax.device_put(jax.numpy.ones((1000, 1000), dtype=jax.numpy.bfloat16), gpu)
    assert "dtype bfloat16, 1.9 MB" in inspect_variable({"j": j}, "j")
    assert fingerprint(j).hash != fingerprint(j * 2).hash
