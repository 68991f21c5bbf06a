"""Cost of a cell blocked on an approval card, measured on a real kernel.

- CPU: the kernel process's CPU time (utime + stime from /proc/<pid>/stat) while a cell waits
  for a click, as a percentage of one core; an idle kernel over the same span is the baseline.
- Latency: from sending the click ``comm_msg`` to receiving the line the cell prints right
  after the wait (median and worst of several runs).

Run: ``python bench/approval_wait.py``. Exits 1 if a target is missed (Linux only: reads /proc).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.kernel_client import LabKernel  # noqa: E402

CPU_TARGET_PERCENT = 2.0
LATENCY_TARGET_MS = 100.0

SETUP = "import ipywidgets as widgets\nfrom qloop_kernel.notebook.pump import wait_until\n"
WAITING_CELL = """
clicked = []
button = widgets.Button(description={label!r})
button.on_click(lambda _: clicked.append(1))
display(button)
print("waiting", flush=True)
wait_until(lambda: bool(clicked))
print("resumed", flush=True)
"""


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may contain spaces
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def cpu_percent(kernel: LabKernel, seconds: float) -> float:
    """CPU use of the kernel process over the next ``seconds``, as % of one core."""
    cpu_before, wall_before = cpu_seconds(kernel.pid), time.monotonic()
    time.sleep(seconds)
    cpu_after, wall_after = cpu_seconds(kernel.pid), time.monotonic()
    return 100.0 * (cpu_after - cpu_before) / (wall_after - wall_before)


def start_waiting(kernel: LabKernel) -> tuple[str, str]:
    """Run a cell that waits on a fresh button; return (cell msg_id, button comm id)."""
    label = f"Approve {uuid.uuid4().hex[:8]}"
    cell = kernel.execute(WAITING_CELL.format(label=label))
    button = kernel.wait_for_button(label, parent=cell)
    kernel.wait_for_output(cell, "waiting")
    return cell, button


def waiting_cpu(kernel: LabKernel, seconds: float) -> float:
    """CPU % of the kernel while a cell waits for a click for ``seconds``."""
    cell, button = start_waiting(kernel)
    time.sleep(0.5)  # let the display and stream flushes settle
    percent = cpu_percent(kernel, seconds)
    kernel.click(button)
    kernel.complete(cell)
    return percent


def click_latencies(kernel: LabKernel, runs: int) -> list[float]:
    """Seconds from sending the click to receiving the output after the wait, per run."""
    latencies = []
    for _ in range(runs):
        cell, button = start_waiting(kernel)
        time.sleep(0.2)  # the cell is blocked in the pump, not still starting
        sent = time.monotonic()
        kernel.click(button)
        kernel.wait_for_output(cell, "resumed")
        latencies.append(time.monotonic() - sent)
        kernel.complete(cell)
    return latencies


def summarize(idle: float, waiting: float, latencies: list[float], seconds: float) -> bool:
    """Print the results table; True if every target is met."""
    median_ms, worst_ms = 1000 * statistics.median(latencies), 1000 * max(latencies)
    cpu_ok, latency_ok = waiting <= CPU_TARGET_PERCENT, median_ms <= LATENCY_TARGET_MS
    runs = len(latencies)
    rows = [
        (f"kernel CPU, idle ({seconds:g} s)", f"{idle:.2f} %", "", True),
        (
            f"kernel CPU, cell waiting ({seconds:g} s)",
            f"{waiting:.2f} %",
            f"<= {CPU_TARGET_PERCENT:g} %",
            cpu_ok,
        ),
        ("waiting / idle CPU", f"{waiting / idle:.1f}x" if idle > 0 else "n/a (idle 0)", "", True),
        (
            f"click to resume, median of {runs}",
            f"{median_ms:.1f} ms",
            f"<= {LATENCY_TARGET_MS:g} ms",
            latency_ok,
        ),
        (f"click to resume, worst of {runs}", f"{worst_ms:.1f} ms", "", True),
    ]
    print(f"{'measure':<34} {'value':>12} {'target':>10}  ok")
    for name, value, target, ok in rows:
        print(f"{name:<34} {value:>12} {target:>10}  {'yes' if ok else 'NO'}")
    return cpu_ok and latency_ok


def main(argv: list[str] | None = None) -> int:
    """Measure, print the table, return the exit status (1 if a target is missed)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="length of the CPU sample")
    parser.add_argument("--runs", type=int, default=10, help="click-to-resume runs")
    args = parser.parse_args(argv)

    with LabKernel() as kernel:
        kernel.run(SETUP)
        time.sleep(0.5)
        idle = cpu_percent(kernel, args.seconds)
        waiting = waiting_cpu(kernel, args.seconds)
        latencies = click_latencies(kernel, args.runs)
    return 0 if summarize(idle, waiting, latencies, args.seconds) else 1


if __name__ == "__main__":
    sys.exit(main())
