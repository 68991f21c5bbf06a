"""What a step starts on a dask.distributed cluster stops with it, and looking at it runs nothing.

A real LocalCluster (worker processes) runs in a real kernel; this test process connects its own
client to the same scheduler to watch it. A step that waits on ``client.gather`` and is stopped
leaves its futures held by the interrupted frames: only the cancel of ``notebook/clusters.py``
ends their tasks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from tests.kernel_client import LabKernel

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.kernel

CLUSTER = """
from distributed import Client, LocalCluster
cluster = LocalCluster(n_workers=2, threads_per_worker=10, processes=True, host="127.0.0.1",
                       dashboard_address=None)
client = Client(cluster)
print(cluster.scheduler_address)
"""
SLOW_GATHER = """
import time
def slow(i):
    time.sleep(120)
    return i
parts = client.map(slow, range(6))
total = client.submit(sum, parts)
client.gather(total)
"""


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


@pytest.fixture(scope="module")
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel")
        yield kernel


@pytest.fixture(scope="module")
def watcher(lab: LabKernel) -> Iterator[Any]:
    """A client of this test process on the kernel's cluster: it watches, it submits nothing."""
    address = lab.run(CLUSTER, timeout=120).strip().splitlines()[-1]
    with distributed.Client(address, timeout=60) as client:
        yield client


def scheduler_state(client: Any) -> dict[str, Any]:
    def read(dask_scheduler: Any) -> dict[str, Any]:
        return {
            "tasks": len(dask_scheduler.tasks),
            "processing": sum(len(ws.processing) for ws in dask_scheduler.workers.values()),
            "transitions": dask_scheduler.transition_counter,
        }

    return dict(client.run_on_scheduler(read))


def slow_tasks(client: Any) -> int:
    """Tasks of SLOW_GATHER (its keys are named after ``slow``) the scheduler still holds."""

    def read(dask_scheduler: Any) -> int:
        return sum(str(key).startswith("slow-") for key in dask_scheduler.tasks)

    return int(client.run_on_scheduler(read))


def wait_until(check: Any, timeout: float, what: str) -> Any:
    ends = time.monotonic() + timeout
    while time.monotonic() < ends:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_stop_cancels_the_tasks_the_step_started(
    lab: LabKernel, api: StandInAPI, watcher: Any
) -> None:
    api.reset([Reply([tool_use("run_code", {"code": SLOW_GATHER})]), Reply([text("unused")])])
    subshell = lab.create_subshell()
    agent = lab.execute("%%agent --new --approve auto\nSum slowly.", cell_id="dask-stop")
    stop = lab.wait_for_button("Stop", parent=agent, timeout=60)
    wait_until(lambda: scheduler_state(watcher)["processing"] > 0, 60, "the tasks to run")
    clicked = time.monotonic()
    lab.click(stop, subshell_id=subshell)
    assert lab.complete(agent, 60)["content"]["status"] == "ok"
    # Within a few seconds the scheduler holds none of the step's tasks (they sleep 120 s).
    wait_until(lambda: scheduler_state(watcher)["tasks"] == 0, 10, "the tasks to be released")
    assert time.monotonic() - clicked < 15
    failed = [line for line in lab.text(agent).splitlines() if line.startswith("✘ run_code")]
    assert failed and "stopped with the Stop button" in failed[0], lab.text(agent)
    assert "7 dask tasks cancelled" in failed[0]
    # The variables the step bound hold cancelled futures; the kernel and the client still work
    # (a worker thread already in slow() sleeps on: dask cannot interrupt it; free ones run).
    assert lab.run("print(total.status, {p.status for p in parts})").strip() == (
        "cancelled {'cancelled'}"
    )
    assert lab.run("print(client.submit(sum, [1, 2]).result())").strip() == "3"


def test_a_step_that_finishes_keeps_its_futures(
    lab: LabKernel, api: StandInAPI, watcher: Any
) -> None:
    code = "kept = client.submit(sum, [1, 2, 3])\nkept.result()"
    api.reset([Reply([tool_use("run_code", {"code": code})]), Reply([text("done")])])
    agent = lab.execute("%%agent --new --approve auto\nSum.", cell_id="dask-done")
    try:
        lab.complete(agent, 60)
    except TimeoutError:
        raise AssertionError(lab.text(agent) + lab.stderr(agent)) from None
    assert "cancelled" not in lab.text(agent)
    assert lab.run("print(kept.status, kept.result())").strip() == "finished 6"


def test_looking_at_cluster_data_runs_no_task(lab: LabKernel, watcher: Any) -> None:
    lab.run(
        "import dask.dataframe as dd, pandas as pd\n"
        "frame = pd.DataFrame({'x': range(1000), 'y': 1.5})\n"
        "persisted = client.persist(dd.from_pandas(frame, npartitions=4))\n"
        "lazy = dd.from_pandas(frame, npartitions=4).x.sum()\n"
        "future = client.submit(sum, [1, 2])\n"
        "from distributed import wait\n"
        "wait([persisted, future])",
        timeout=60,
    )
    before = scheduler_state(watcher)
    names = ["persisted", "lazy", "future", "client", "cluster"]
    lab.run(
        "from qloop_kernel.tools.namespace import inspect_variable, list_variables\n"
        "from qloop_kernel.values.fingerprint import fingerprint\n"
        "from qloop_kernel.notebook.session import undo_log\n"
        "list_variables(globals())\n"
        f"for name in {names!r}:\n"
        "    inspect_variable(globals(), name)\n"
        "    fingerprint(globals()[name])\n"
        "log = undo_log(get_ipython())\n"
        "log.finish(log.begin('persisted = persisted.x + 1; future = 1'))",
        timeout=60,
    )
    after = scheduler_state(watcher)
    assert after["transitions"] == before["transitions"], (before, after)
    assert after["tasks"] == before["tasks"]
    # The count is sensitive: a computation on the cluster moves it.
    lab.run("lazy.compute()", timeout=60)
    assert scheduler_state(watcher)["transitions"] > after["transitions"]


def test_a_kernel_interrupt_cancels_them_too(lab: LabKernel, api: StandInAPI, watcher: Any) -> None:
    api.reset([Reply([tool_use("run_code", {"code": SLOW_GATHER})]), Reply([text("unused")])])
    # Last in this module: jupyter_client signals the kernel's process group, and the
    # LocalCluster's worker processes the kernel started are in it.
    agent = lab.execute("%%agent --new --approve auto\nSum slowly.", cell_id="dask-interrupt")
    wait_until(lambda: scheduler_state(watcher)["processing"] > 0, 60, "the tasks to run")
    lab.interrupt()
    try:
        lab.complete(agent, 60)
    except TimeoutError:
        raise AssertionError(lab.text(agent) + lab.stderr(agent)) from None
    wait_until(lambda: slow_tasks(watcher) == 0, 15, "the tasks to be released")
    assert lab.run("print(total.status)").strip() == "cancelled"
