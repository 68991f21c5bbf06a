"""What looking at a big GPU array costs: inspect_variable, list_variables, the fingerprint and the
undo snapshot on one large device array, with torch, CuPy and JAX where each has a GPU.

For each operation: the wall time, the device memory allocated on top of what was allocated before
(torch: ``max_memory_allocated`` delta; CuPy: the memory pool's; JAX: the device's peak), the host
memory grown (resident set size), and, for torch, the bytes moved from the device to the host (every
``Tensor.cpu``/``.to``/``.item``/``.tolist`` of a CUDA tensor is counted while the operation runs).
Then an in-place change (``x.mul_(2)``) must show in the fingerprint, and the undo snapshot must not
copy the array (the default undo device budget is 0).

Run: python bench/gpu_check.py --gib 40
Exits 0 with a message when no GPU is present; 1 when a target is missed (device to host < 1 MB and
device memory on top < 64 MB per operation, the change seen, nothing copied by undo).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX: measure what it uses

TARGET_MOVED = 1024**2  # bytes from the device to the host per operation
TARGET_ON_TOP = 64 * 1024**2  # device memory allocated on top per operation
COLUMNS = 8192


@dataclass
class Cost:
    label: str
    ms: float
    device_on_top: int
    host_grown: int
    moved: int | None  # None: not measured for this library
    note: str = ""


def rss() -> int:
    """Resident set size of this process, in bytes (Linux /proc, else the peak from getrusage)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class TorchMoves:
    """Counts the bytes of CUDA tensors brought to the host while active."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.moved = 0

    def _count(self, tensor: Any) -> None:
        if tensor.is_cuda:
            self.moved += int(tensor.element_size()) * int(tensor.numel())

    @contextmanager
    def counting(self) -> Iterator[None]:
        tensor = self.torch.Tensor
        saved = {name: getattr(tensor, name) for name in ("cpu", "to", "item", "tolist", "numpy")}

        def wrap(name: str) -> Callable[..., Any]:
            original = saved[name]

            def counted(this: Any, *args: Any, **kwargs: Any) -> Any:
                target = args[0] if args else kwargs.get("device")
                to_host = name != "to" or str(target).startswith("cpu")
                if to_host:
                    self._count(this)
                return original(this, *args, **kwargs)

            return counted

        for name in saved:
            setattr(tensor, name, wrap(name))
        try:
            yield
        finally:
            for name, original in saved.items():
                setattr(tensor, name, original)


def operations(value: Any) -> list[tuple[str, Callable[[], str]]]:
    """The four things the agent does to a variable, each returning a line to check."""
    from qloop_kernel.notebook.undo import take_snapshot
    from qloop_kernel.policy.risk import classify
    from qloop_kernel.tools.namespace import inspect_variable, list_variables
    from qloop_kernel.values.fingerprint import fingerprint

    namespace = {"x": value}
    assessment = classify("x *= 2", existing={"x"})

    def snapshot() -> str:  # what UndoLog.prepare does before the card, default budgets
        taken = take_snapshot("x *= 2", namespace, assessment=assessment, budget=8 * 1024**3)
        saved = taken.saved.get("x")
        return taken.missed.get("x", "") if saved is None else f"saved: {saved.how}"

    return [
        ("inspect_variable", lambda: inspect_variable(namespace, "x").splitlines()[1]),
        ("list_variables", lambda: list_variables(namespace).splitlines()[-1]),
        ("fingerprint", lambda: str(fingerprint(value).hash)),
        ("undo snapshot", snapshot),
    ]


def measure(
    label: str,
    action: Callable[[], str],
    device_peak: Callable[[], int],
    reset: Callable[[], None],
    moves: TorchMoves | None,
) -> Cost:
    reset()
    before_device, before_host = device_peak(), rss()
    started = time.perf_counter()
    if moves is not None:
        moves.moved = 0
        with moves.counting():
            note = action()
    else:
        note = action()
    ms = (time.perf_counter() - started) * 1000
    return Cost(
        label,
        ms,
        device_peak() - before_device,
        rss() - before_host,
        None if moves is None else moves.moved,
        note,
    )


def torch_check(gib: float, device: str = "cuda") -> tuple[list[Cost], list[str]]:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return [], ["torch: no CUDA device"]
    rows = int(gib * 1024**3 / 2 / COLUMNS)
    x = torch.empty(rows, COLUMNS, dtype=torch.bfloat16, device=device)
    x.normal_()
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
    costs = run_all(
        f"torch bf16 {tuple(x.shape)} ({x.numel() * 2 / 1024**3:.1f} GiB) on {device}",
        x,
        (lambda: int(torch.cuda.max_memory_allocated())) if cuda else (lambda: 0),
        torch.cuda.reset_peak_memory_stats if cuda else (lambda: None),
        TorchMoves(torch),
    )
    problems = change_seen(x, lambda v: v.mul_(2), "torch")
    del x
    if cuda:
        torch.cuda.empty_cache()
    return costs, problems


def cupy_check(gib: float) -> tuple[list[Cost], list[str]]:
    try:
        import cupy
    except ImportError:
        return [], []
    if not cupy.cuda.runtime.getDeviceCount():
        return [], ["cupy: no CUDA device"]
    pool = cupy.get_default_memory_pool()
    x = cupy.ones((int(gib * 1024**3 / 4 / COLUMNS), COLUMNS), dtype=cupy.float32)
    costs = run_all(
        f"cupy float32 {x.shape}", x, lambda: int(pool.total_bytes()), lambda: None, None
    )
    problems = change_seen(x, lambda v: v.__imul__(2), "cupy")
    del x
    pool.free_all_blocks()
    return costs, problems


def jax_check(gib: float) -> tuple[list[Cost], list[str]]:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return [], []
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:
        return [], ["jax: no GPU backend"]
    rows = int(gib * 1024**3 / 2 / COLUMNS)
    x = jax.device_put(jnp.ones((rows, COLUMNS), dtype=jnp.bfloat16), device)
    x.block_until_ready()

    def peak() -> int:
        return int((device.memory_stats() or {}).get("peak_bytes_in_use", 0))

    costs = run_all(f"jax bf16 {x.shape}", x, peak, lambda: None, None)
    return costs, []


def run_all(
    title: str,
    value: Any,
    device_peak: Callable[[], int],
    reset: Callable[[], None],
    moves: TorchMoves | None,
) -> list[Cost]:
    print(f"\n{title}")
    found = []
    for label, action in operations(value):
        measure(label, action, device_peak, reset, moves)  # warm: first-call kernels and imports
        cost = measure(label, action, device_peak, reset, moves)
        moved = "n/a" if cost.moved is None else f"{cost.moved:,} B"
        print(
            f"  {label:18} {cost.ms:9.1f} ms   device on top {cost.device_on_top / 1024**2:8.2f} MB"
            f"   host grown {cost.host_grown / 1024**2:8.2f} MB   moved to host {moved}"
        )
        print(f"  {'':18} {cost.note[:150]}")
        found.append(cost)
    return found


def change_seen(x: Any, change: Callable[[Any], Any], library: str) -> list[str]:
    from qloop_kernel.values.fingerprint import fingerprint

    before = fingerprint(x)
    change(x)
    after = fingerprint(x)
    seen = before.hash != after.hash and bool(after.hash)
    print(f"  in-place change seen by the fingerprint: {'yes' if seen else 'NO'}")
    return [] if seen else [f"{library}: an in-place change was not seen"]


def problems_of(costs: list[Cost]) -> list[str]:
    found = []
    for cost in costs:
        if cost.moved is not None and cost.moved >= TARGET_MOVED:
            found.append(f"{cost.label}: {cost.moved:,} B moved to the host")
        if cost.device_on_top >= TARGET_ON_TOP:
            found.append(f"{cost.label}: {cost.device_on_top:,} B of device memory on top")
        if cost.label == "undo snapshot" and "copy" in cost.note and "saved" in cost.note:
            found.append(f"undo snapshot: the array was copied ({cost.note})")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=40, help="size of the device array in GiB")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="a dry run of the torch checks on the CPU (no GPU needed)",
    )
    args = parser.parse_args(argv)
    if args.cpu:
        costs, problems = torch_check(args.gib, "cpu")  # host memory: undo may copy it
        return 1 if problems + [p for p in problems_of(costs) if "undo" not in p] else 0
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        print("no GPU here (torch with CUDA is needed): nothing measured")
        return 0
    print(f"GPU: {torch.cuda.get_device_name(0)}, array of {args.gib:g} GiB per library")
    costs: list[Cost] = []
    problems: list[str] = []
    for check in (torch_check, cupy_check, jax_check):
        found, issues = check(args.gib)
        costs += found
        problems += issues if found else [i for i in issues if "no " not in i]
    problems += problems_of(costs)
    most = max((c.moved or 0 for c in costs), default=0)
    print(
        f"\nmost moved to the host by one operation: {most:,} B (target < {TARGET_MOVED:,} B); "
        f"most device memory on top: {max((c.device_on_top for c in costs), default=0):,} B"
    )
    for problem in problems:
        print(f"MISSED: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
