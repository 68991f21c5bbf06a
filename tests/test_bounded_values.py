"""Looking at a value is bounded whatever the value: in time (fingerprints and undo sizing stop and
say "not tracked"; a blocking ``__repr__`` or ``__len__`` is cut off; Stop ends it), in what is read
(wide frames by sampled columns, big containers by a bounded walk, memory-mapped files by pages),
and it never raises on a value's type (nested Arrow columns, object columns, extension dtypes).
"""

from __future__ import annotations

import collections
import dataclasses
import decimal
import gc
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from qloop_kernel.notebook.undo import NotMeasured, UndoLog, measure
from qloop_kernel.tools.namespace import inspect_variable, list_variables
from qloop_kernel.values import fingerprint as fp
from qloop_kernel.values.fingerprint import HASH_COLUMNS, changes, fingerprint
from qloop_kernel.values.summaries import bounded_repr, common
from qloop_kernel.values.summaries.numpy import PAGE_RUN_BYTES, PAGE_RUNS
from qloop_kernel.values.summaries.trust import trusting


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    ipython = InteractiveShell.instance(config=config)
    yield ipython
    InteractiveShell.clear_instance()


@dataclasses.dataclass
class Holder:
    items: list[int]


# -- bounded in time -----------------------------------------------------------------------------


def test_a_value_read_past_the_time_limit_is_not_tracked() -> None:
    frame = pd.DataFrame({f"c{i}": ["x"] * 1000 for i in range(20)})
    found = fingerprint(frame, seconds=0)
    assert found.untracked and found.hash == ""
    assert found.shape == (1000, 20) and found.columns[0] == ("c0", "str")  # metadata kept
    assert not fingerprint(frame).untracked
    # a tracked print against an untracked one of the same object: no change claimed
    assert changes({"f": fingerprint(frame)}, {"f": found}) == []


def test_a_step_on_an_untracked_value_says_it_may_have_changed(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    shell.user_ns["rows"] = {i: str(i) for i in range(5000)}
    log = UndoLog(shell)
    monkeypatch.setattr(fp, "VALUE_TIME_S", 0.0)
    snapshot = log.begin("rows[1] = 'one'")
    assert snapshot.missed == {"rows": "(dict) is not tracked: measuring it takes over 0 ms"}
    shell.run_cell("rows[1] = 'one'", store_history=False)
    assert log.finish(snapshot).lines() == [
        "rows: dict len 5,000, may have changed (not tracked: reading it takes over 0 ms)"
    ]


def test_measuring_for_undo_stops_at_the_time_limit() -> None:
    with pytest.raises(NotMeasured, match="is not tracked: measuring it takes over 0 ms"):
        measure([[i] for i in range(5000)], seconds=0)
    assert measure([[i] for i in range(500)]).host > 500 * 8


@pytest.fixture
def slow_collections() -> Iterator[None]:
    """Every garbage collection takes 60 ms of this thread's CPU, as a full collection of a kernel
    holding millions of objects does."""

    def burn(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            end = time.thread_time() + 0.06
            while time.thread_time() < end:
                pass

    gc.callbacks.insert(0, burn)
    yield
    gc.callbacks.remove(burn)


class CollectsWhenRead:
    """A value whose reading runs a garbage collection (as an allocation can, at any time)."""

    def __init__(self) -> None:
        self.parts = [[i] for i in range(50)]

    def __sizeof__(self) -> int:
        gc.collect()
        return 64


def test_a_garbage_collection_while_reading_is_not_the_values_time(
    slow_collections: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    hash_pandas = pd.util.hash_pandas_object

    def collecting(obj: Any, **kw: Any) -> Any:
        gc.collect()
        return hash_pandas(obj, **kw)

    monkeypatch.setattr(pd.util, "hash_pandas_object", collecting)
    callbacks = list(gc.callbacks)
    frame = pd.DataFrame(np.arange(2_000_000 * 5).reshape(2_000_000, 5))
    found = fingerprint(frame)
    assert found.hash and not found.untracked
    assert measure([CollectsWhenRead()]).host > 0  # sized, not "not tracked"
    assert gc.callbacks == callbacks  # each limit's hook is gone when it ends
    # the limit still counts the reading itself
    assert fingerprint(frame, seconds=0).untracked
    with pytest.raises(NotMeasured):
        measure([CollectsWhenRead()], seconds=0)
    assert gc.callbacks == callbacks


def test_a_value_whose_reading_clears_the_collection_hooks_is_still_read() -> None:
    class Clears:
        def __init__(self) -> None:
            self.rows = [1, 2, 3]

        @property
        def shape(self) -> tuple[int, ...]:
            gc.callbacks.clear()  # the limit's own hook goes with the others
            return (3,)

    saved = list(gc.callbacks)
    try:
        with trusting([f"{__name__}.*"]):  # its shape is read, as an installed library's
            found = fingerprint(Clears())
    finally:
        gc.callbacks[:] = saved
    assert found.hash and found.shape == (3,) and found.type.endswith("Clears")


def test_a_wide_frame_is_hashed_from_sampled_columns() -> None:
    wide = pd.DataFrame(np.zeros((50, 10_000)))
    before = fingerprint(wide)
    assert before.sampled and not before.untracked and before.shape == (50, 10_000)
    wide[0] = 1.0  # column 0 is among the sampled ones
    assert fingerprint(wide).hash != before.hash
    sampled = set(fp.spread(10_000, HASH_COLUMNS))
    unsampled = next(i for i in range(10_000) if i not in sampled)
    again = fingerprint(wide)
    wide[unsampled] = 2.0
    assert fingerprint(wide).hash == again.hash  # outside the sample: undo says "may have"


def test_a_wide_frame_is_measured_for_undo_without_a_pass_per_column() -> None:
    wide = pd.DataFrame(np.zeros((50, 10_000)))
    assert measure(wide).host == 50 * 10_000 * 8 + wide.index.memory_usage()


@pytest.mark.parametrize(
    "make",
    [
        lambda: Holder(list(range(1_000_000))),
        lambda: collections.deque(range(1_000_000)),
        lambda: frozenset(range(100_000)),
        lambda: list(range(1_000_000)),
    ],
    ids=["dataclass", "deque", "frozenset", "list"],
)
def test_big_containers_are_walked_within_bounds(make: Any) -> None:
    value = make()
    found = fingerprint(value)
    assert found.hash and found.sampled and not found.untracked
    with pytest.raises(NotMeasured, match="too big to copy"):
        measure(value)


def test_a_change_in_a_big_container_is_seen() -> None:
    holder, items = Holder(list(range(1_000_000))), collections.deque(range(1_000_000))
    before = fingerprint(holder), fingerprint(items)
    holder.items.append(1)
    items.appendleft(-1)
    assert fingerprint(holder).hash != before[0].hash
    assert fingerprint(items).hash != before[1].hash


# -- inspection never raises ------------------------------------------------------------------------


def odd_frame() -> pd.DataFrame:
    nested = pd.ArrowDtype(pa.list_(pa.int64()))
    struct = pd.ArrowDtype(pa.struct([("x", pa.int64()), ("y", pa.string())]))
    return pd.DataFrame(
        {
            "lists": pd.array([[1, 2], [3], None] * 10, dtype=nested),
            "structs": pd.array([{"x": 1, "y": "a"}, None, {"x": 2, "y": "b"}] * 10, dtype=struct),
            "maps": pd.array(
                [[("a", 1)], None, [("b", 2)]] * 10,
                dtype=pd.ArrowDtype(pa.map_(pa.string(), pa.int64())),
            ),
            "money": pd.array(
                [decimal.Decimal("1.5"), None, decimal.Decimal("2.25")] * 10,
                dtype=pd.ArrowDtype(pa.decimal128(10, 2)),
            ),
            "objects": [[1], {2: 3}, None] * 10,
            "sets": [{1}, {2}, None] * 10,
            "ints": pd.array([1, None, 3] * 10, dtype="Int64"),
            "periods": pd.period_range("2020-01", periods=30, freq="M"),
            "intervals": pd.interval_range(0, 30),
            "sparse": pd.arrays.SparseArray([0, 0, 1] * 10),
        }
    )


def test_nested_arrow_object_and_extension_columns_are_described() -> None:
    frame = odd_frame()
    ns: dict[str, Any] = {"df": frame, **{name: frame[name] for name in frame.columns}}
    text = inspect_variable(ns, "df")
    assert "list<item: int64>[pyarrow]" in text and "struct<x: int64, y: string>" in text
    assert "not counted (nested or unhashable values)" in text
    for name in frame.columns:
        assert inspect_variable(ns, name).startswith(f"{name}: pandas.Series")
    assert "list<item: int64>[pyarrow]" in inspect_variable(ns, "lists")
    list_variables(ns)
    fingerprint(frame)  # and the fingerprint of the frame, by the repr of cells it cannot hash


class FailingRows(np.ndarray):
    """An array whose rows cannot be read (a library subclass with a broken __getitem__)."""

    def __getitem__(self, key: Any) -> Any:
        raise RuntimeError("rows are not available")


def test_a_summary_that_fails_gives_a_bounded_description() -> None:
    broken = np.zeros((1000, 3)).view(FailingRows)
    with trusting([f"{__name__}.FailingRows"]):  # read as the library subclass it stands for
        text = inspect_variable({"b": broken}, "b")
    assert text.splitlines()[:3] == [
        "b: tests.test_bounded_values.FailingRows",
        "Note: its numpy.ndarray summary failed (RuntimeError: rows are not available); "
        "described briefly instead.",
        "Shape: 1,000 x 3",
    ]


class Blocking:
    """An object of the notebook whose __repr__ and __len__ block for 30 s."""

    __module__ = "__main__"  # defined in the notebook: its len() is asked for

    def __repr__(self) -> str:
        try:
            time.sleep(30)
        except Exception:  # what a careless library does: it must not swallow the cut-off
            return "swallowed"
        return "late"

    def __len__(self) -> int:
        time.sleep(30)
        return 1


def alarm_state() -> tuple[Any, float]:
    return signal.getsignal(signal.SIGALRM), signal.getitimer(signal.ITIMER_REAL)[0]


def test_a_blocking_repr_and_len_are_cut_off() -> None:
    handler, timer = alarm_state()
    started = time.monotonic()
    with trusting(["Blocking"]):  # the notebook's class opted in: its repr and len are called
        text = inspect_variable({"slow": Blocking()}, "slow")
    elapsed = time.monotonic() - started
    assert "Value: <Blocking object; repr() did not finish within 1 s, cut off>" in text
    assert "Length: not known (len() did not finish within 1 s, cut off)" in text
    assert elapsed < 2 * common.REPR_SECONDS + 1
    after_handler, after_timer = alarm_state()
    assert after_handler is handler and (after_timer <= timer if timer else after_timer == 0)


def test_stop_ends_a_blocking_inspection() -> None:
    handler, timer = alarm_state()
    main = threading.get_ident()
    stopper = threading.Timer(0.3, lambda: signal.pthread_kill(main, signal.SIGINT))
    started = time.monotonic()
    stopper.start()
    with pytest.raises(KeyboardInterrupt), common.time_limit(5), trusting(["Blocking"]):
        inspect_variable({"slow": Blocking()}, "slow")  # Stop before any cut-off
    assert time.monotonic() - started < 1.0
    after_handler, after_timer = alarm_state()
    assert after_handler is handler and (after_timer <= timer if timer else after_timer == 0)


class Sleeper:
    """An object of the notebook whose __repr__ blocks for 30 s and swallows nothing."""

    __module__ = "__main__"

    def __repr__(self) -> str:
        time.sleep(30)
        return "late"


def test_the_stop_button_ends_a_blocking_repr_before_its_cut_off() -> None:
    """Stop fires the step's timer from another thread: the repr's own limit hands the alarm on."""
    from qloop_kernel.notebook.deadline import STOPPED, limit, stop_now

    handler = alarm_state()[0]
    with limit(float("inf"), STOPPED) as entry:
        assert entry is not None
        threading.Timer(0.3, stop_now, args=(entry,)).start()
        started = time.monotonic()
        with trusting(["Sleeper"]):  # the notebook's class opted in: its repr is called
            text = inspect_variable({"slow": Sleeper()}, "slow")
        took = time.monotonic() - started
    assert took < 0.9, f"{took:.2f} s: the Stop waited for the repr's own cut-off"
    assert f"repr() raised StepStopped: {STOPPED}" in text
    assert alarm_state()[0] is handler


class BlockingList(list[int]):
    """A list subclass whose own __iter__ and __len__ block: only list's own methods are used."""

    def __iter__(self) -> Any:
        time.sleep(30)
        return iter([])

    def __len__(self) -> int:
        time.sleep(30)
        return 0


def test_container_subclasses_are_read_through_the_builtin_methods() -> None:
    value = BlockingList([1, 2, 3])
    started = time.monotonic()
    assert bounded_repr(value) == "BlockingList([1, 2, 3])"
    assert fingerprint(value).length == 3 and fingerprint({"v": value}).hash
    assert fingerprint(value).hash != fingerprint(BlockingList([1, 2, 4])).hash
    assert measure({"v": value}).host > 0
    assert time.monotonic() - started < 1


# -- file-backed arrays ------------------------------------------------------------------------------


def mapped_bytes(path: Path) -> int:
    """Resident bytes of the mappings of ``path`` in this process (pages touched)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            first = line.split(maxsplit=1)[0] if line.strip() else ""
            if "-" in first and all(c in "0123456789abcdef-" for c in first):
                inside = line.rstrip().endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total


@pytest.mark.skipif(not os.path.exists("/proc/self/smaps"), reason="needs Linux /proc")
def test_a_memory_mapped_array_is_read_by_pages(tmp_path: Path) -> None:
    path = tmp_path / "big.f8"
    with open(path, "wb") as sparse:
        sparse.truncate(4 * 1024**3)  # 4 GiB, no blocks on disk
    mapped = np.memmap(path, dtype=np.float64, mode="r", shape=(4 * 1024**3 // 8 // 1000, 1000))
    text = inspect_variable({"m": mapped}, "m")
    assert "elements in 16 contiguous runs (a memory-mapped file: read by pages)" in text
    fingerprint(mapped)
    assert mapped_bytes(path) <= 2 * PAGE_RUNS * PAGE_RUN_BYTES + 1024**2  # about 1 MB of 4 GiB
    del mapped
