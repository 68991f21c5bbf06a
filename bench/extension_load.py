"""Kernel start with the qloop extension preloaded vs a plain kernel, and ``%load_ext`` inside a kernel.

- Start: time from launching the kernel process to its first ``kernel_info_reply``, for the "Python 3
  (qloop)" kernel spec (``--ext=qloop_kernel``, from ``qloop_kernel/kernelspec.py``) and for the same
  command without the extension. Starts run in pairs, back to back and in alternating order; the
  figure is the median of the pairs' ratios (a pair shares the machine's load). Target: <= 1.1.
  The kernel's CPU time until that reply is shown too: it hardly depends on the load. The package
  is byte-compiled first, as an installed wheel is (``compile_like_an_install``).
- Load: wall time of ``%load_ext qloop_kernel`` in a fresh plain kernel (measured in the kernel).

Run: ``python bench/extension_load.py [--runs 10]``. Exits 1 if the target is missed.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

import qloop_kernel
from qloop_kernel.headless.kernelspec import kernel_json

RATIO_TARGET = 1.1
PLAIN, QLOOP = "bench-plain", "bench-qloop"
# (code, expression): the expression's value comes back in the execute reply, so no output is awaited.
LOAD_CELL = (
    "import time as _t\n_s = _t.perf_counter()\n"
    "get_ipython().run_line_magic('load_ext', 'qloop_kernel')\n"
    "_load_ms = (_t.perf_counter() - _s) * 1000",
    "_load_ms",
)
LOADED_CELL = ("", "'qloop_kernel' in get_ipython().extension_manager.loaded")


def write_specs(folder: Path) -> KernelSpecManager:
    """Kernel specs for the measurement: the qloop spec as installed, and the same without --ext."""
    qloop = kernel_json(sys.executable)
    argv = [arg for arg in cast("list[str]", qloop["argv"]) if not arg.startswith("--ext=")]
    for name, spec in ((QLOOP, qloop), (PLAIN, {**qloop, "argv": argv})):
        (folder / name).mkdir()
        (folder / name / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(folder)])


@dataclass(frozen=True)
class Start:
    seconds: float  # launch to the first kernel_info_reply
    cpu_seconds: float | None  # the kernel process's CPU time by then (None without /proc)
    value: str = ""  # the value of the expression evaluated after the start, if any


def start_kernel(specs: KernelSpecManager, name: str, then: tuple[str, str] | None = None) -> Start:
    """Launch a kernel, time its first kernel_info_reply, optionally run ``then``, shut it down."""
    manager = KernelManager(kernel_name=name, kernel_spec_manager=specs)
    started = time.perf_counter()
    manager.start_kernel()
    client = manager.blocking_client()
    client.start_channels()
    try:
        # ZMQ queues the request until the kernel listens, so the reply marks the kernel as ready.
        reply(client, client.kernel_info())
        seconds = time.perf_counter() - started
        cpu = cpu_seconds(getattr(manager.provisioner, "pid", None))
        return Start(seconds, cpu, evaluate(client, *then) if then else "")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process, from /proc/<pid>/stat (Linux)."""
    stat = Path(f"/proc/{pid}/stat")
    if pid is None or not stat.exists():
        return None
    fields = stat.read_text().rsplit(")", 1)[1].split()  # the command name may contain spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def reply(client: Any, msg_id: str) -> dict[str, Any]:
    """The shell reply to ``msg_id``."""
    while True:
        msg: dict[str, Any] = client.get_shell_msg(timeout=60)
        if msg["parent_header"].get("msg_id") == msg_id:
            return msg


def evaluate(client: Any, code: str, expression: str) -> str:
    """Run ``code``, then return the text of ``expression`` from the execute reply."""
    msg_id = client.execute(code, silent=True, user_expressions={"value": expression})
    content = reply(client, msg_id)["content"]
    value = content.get("user_expressions", {}).get("value", {})
    if content["status"] != "ok" or value.get("status") != "ok":
        raise RuntimeError(f"the measuring cell failed: {content}")
    return str(value["data"]["text/plain"])


def compile_like_an_install() -> None:
    """Byte-compile the package, as pip does when it installs the wheel.

    An editable checkout has no ``__pycache__`` until a process writes it, and none is written under
    ``PYTHONDONTWRITEBYTECODE`` (set on some CI machines): every qloop kernel would then compile the
    extension's modules anew at start, which no installed package does, while the plain kernel's
    modules (all installed) are compiled already. Python reads the compiled files under that setting.
    """
    compileall.compile_dir(Path(qloop_kernel.__file__).parent, quiet=1)


def measure(runs: int) -> tuple[list[Start], list[Start]]:
    """Pairs of starts, plain and qloop, in alternating order; the plain one also times %load_ext."""
    compile_like_an_install()
    plain, qloop = [], []
    with tempfile.TemporaryDirectory() as folder:
        specs = write_specs(Path(folder))
        start_kernel(specs, PLAIN), start_kernel(specs, QLOOP)  # warm-up: disk cache, imports
        for pair in range(runs):
            if pair % 2:
                qloop.append(start_kernel(specs, QLOOP, then=LOADED_CELL))
            plain.append(start_kernel(specs, PLAIN, then=LOAD_CELL))
            if not pair % 2:
                qloop.append(start_kernel(specs, QLOOP, then=LOADED_CELL))
    if any(start.value != "True" for start in qloop):
        raise RuntimeError("the qloop kernel spec did not load the extension at start")
    return plain, qloop


def show(label: str, values: list[float]) -> None:
    median, low, high = statistics.median(values), min(values), max(values)
    print(f"{label:<48}{median:>9.1f}ms{low:>9.1f}ms{high:>9.1f}ms")


def main(argv: list[str] | None = None) -> int:
    """Measure, print the figures, return the exit status (1 if the target is missed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="pairs of starts")
    args = parser.parse_args(argv)
    plain, qloop = measure(args.runs)
    # Each pair ran back to back, so its ratio cancels the machine's changing load.
    ratio = statistics.median(q.seconds / p.seconds for p, q in zip(plain, qloop, strict=True))
    print(f"{'measure':<48}{'median':>11}{'min':>11}{'max':>11}")
    show("kernel start to kernel_info, plain", [1000 * s.seconds for s in plain])
    show("kernel start to kernel_info, --ext=qloop_kernel", [1000 * s.seconds for s in qloop])
    if all(s.cpu_seconds is not None for s in plain + qloop):
        show("kernel CPU by kernel_info, plain", [1000 * (s.cpu_seconds or 0) for s in plain])
        show(
            "kernel CPU by kernel_info, --ext=qloop_kernel",
            [1000 * (s.cpu_seconds or 0) for s in qloop],
        )
    show("%load_ext qloop_kernel in a running kernel", [float(s.value) for s in plain])
    met = ratio <= RATIO_TARGET
    print(f"start ratio with/without the extension, median of {args.runs} pairs: {ratio:.3f} "
          f"(target <= {RATIO_TARGET}) {'met' if met else 'MISSED'}")  # fmt: skip
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
