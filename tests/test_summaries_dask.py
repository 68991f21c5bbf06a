"""dask collections are described from metadata: no task runs unless rows are asked for.

Local schedulers are watched through dask's callbacks, a real ``dask.distributed``
LocalCluster through its scheduler's transition counter.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.tools.runtime import ToolInputError
from qloop_kernel.values.summaries.lazy import ComputeRefused, refusing_dask_compute
from qloop_kernel.values.summaries.trust import trusting

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
dd = pytest.importorskip("dask.dataframe")
from dask.callbacks import Callback  # noqa: E402

_seeds = itertools.count()


def frame(rows: int = 1_000, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"key": rng.integers(0, 100, rows), "price": rng.normal(size=rows), "city": "Oslo"}
    )


def collections() -> dict[str, Any]:
    ddf = dd.from_pandas(frame(), npartitions=4)
    # Fresh data each time: dask caches divisions by the expression's token.
    unsorted = dd.from_pandas(frame(seed=1_000 + next(_seeds)), npartitions=4)
    return {
        "ddf": ddf,
        "price": ddf.price,
        "by_key": unsorted.set_index("key"),  # its divisions are known only by computing them
        "grid": da.ones((1_000, 2_000), chunks=(100, 500)),
        "bag": db.from_sequence(range(100), npartitions=5),
    }


class TaskCounter(Callback):  # type: ignore[misc]
    """Counts the tasks that dask's local schedulers run."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks = 0

    def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
        self.tasks += 1


def tasks_run(action: Callable[[], object]) -> int:
    # the counter is this module's code: a read lets it run only when it is opted in
    with TaskCounter() as counter, trusting([f"{__name__}.*"]):
        action()
    return counter.tasks


def test_inspection_and_listing_run_no_task() -> None:
    namespace = collections()
    assert tasks_run(lambda: list_variables(namespace)) == 0
    for name in namespace:
        assert tasks_run(lambda name=name: inspect_variable(namespace, name)) == 0, name
    # The check is sensitive: a computation, or these divisions read without the guard, run tasks.
    assert tasks_run(lambda: namespace["ddf"].price.sum().compute()) > 0
    assert tasks_run(lambda: namespace["by_key"].npartitions) > 0


def test_dataframe_summary_is_metadata() -> None:
    namespace = collections()
    text = inspect_variable(namespace, "ddf")
    assert text.startswith("ddf: dask.dataframe.DataFrame (lazy), 3 columns, 4 partitions")
    assert "Not computed: the number of rows" in text
    assert "Divisions: known, index from 0 to 999 (5 boundaries)" in text
    assert "key     int64" in text and "price   float64" in text
    assert "Rows: not read; pass rows=N" in text
    by_key = inspect_variable(namespace, "by_key")
    assert "partitions not known without computing" in by_key
    assert "Divisions: not known without computing them" in by_key
    listing = list_variables(namespace)
    assert "? x 3" in listing and "lazy, 4 partitions" in listing
    assert "1,000 x 2,000" in listing and "lazy, 40 chunks; dtype float64" in listing


def test_rows_read_the_first_partition_only() -> None:
    namespace = collections()
    partitions: list[int] = []
    text = inspect_variable(namespace, "ddf", rows=3, offset=2)
    assert "Rows 2-4 of the first partition (only that partition was computed)" in text
    expected = frame().iloc[2:5]
    assert all(f"{value:.6f}" in text for value in expected.price)

    class PartitionSpy(TaskCounter):
        def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
            if isinstance(key, tuple):
                partitions.append(key[-1])

    with PartitionSpy(), trusting([f"{__name__}.*"]):
        inspect_variable(namespace, "ddf", rows=5)
    assert partitions and set(partitions) == {0}
    with pytest.raises(ToolInputError, match="past the 250 rows read from the first partition"):
        inspect_variable(namespace, "ddf", offset=300, rows=5)
    grid = inspect_variable(namespace, "grid", rows=2)
    assert "Rows 0-1 along axis 0, first elements of other axes (from the first chunk only)" in grid
    with dask.config.set(scheduler="threads"):  # bags default to processes, not wanted here
        bag = inspect_variable(namespace, "bag", rows=3, offset=1)
    assert "[1] 1" in bag and "[3] 3" in bag and "[4]" not in bag


def test_compute_is_refused_only_on_the_inspecting_thread() -> None:
    values = da.arange(10, chunks=5)
    other: list[int] = []

    def elsewhere() -> None:
        other.append(int(values.sum().compute(scheduler=None)))

    with refusing_dask_compute():
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
        with pytest.raises(ComputeRefused):
            values.sum().compute()
    assert other == [45]
    assert int(values.sum().compute()) == 45  # the scheduler is back


# ---------------------------------------------------------------------------------------------
# A real distributed cluster
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=2,
            processes=False,
            protocol="tcp://",
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as dask_client,
    ):
        yield dask_client


def transitions(client: Any) -> int:
    """How many task state transitions the scheduler has made so far."""
    return int(client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter))


def test_no_task_runs_on_a_cluster(client: Any) -> None:
    namespace = collections()
    namespace["persisted"] = client.persist(dd.from_pandas(frame(), npartitions=2))
    pytest.importorskip("distributed").wait(namespace["persisted"])
    before = transitions(client)
    list_variables(namespace)
    for name in namespace:
        inspect_variable(namespace, name)
    assert transitions(client) == before
    inspect_variable(namespace, "ddf", rows=2)  # asked for: the first partition is computed
    assert transitions(client) > before
