"""Work a step started on a cluster stops with the step: dask futures and Spark jobs.

Interrupting a step ends its Python frames, not what they asked a cluster to do: the interrupted
frames (kept by the traceback) hold a dask client's futures, so their tasks stay ``processing``,
and a Spark action's JVM thread keeps running its job. So around each ``run_code`` step:

- dask.distributed: the keys of each connected client's futures are noted before the step; when
  the step is stopped, the futures it created that have not finished are cancelled through their
  client (their tasks, and the tasks only they needed, are released on the scheduler).
- Spark: when a SparkContext runs, the step's jobs get a job group of their own
  (``setJobGroup(group, ..., interruptOnCancel=True)``); when the step is stopped, the group is
  cancelled, jobs its interrupted action submits later included; after the step, the thread's
  earlier job group is put back.

"Stopped" is the Stop button, the turn's ``--timeout``, the code time limit or a kernel interrupt.
Nothing here imports dask or pyspark: only libraries the user's code already loaded are looked at,
and nothing here submits work.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..text import counted
from .deadline import STOPPED, StepStopped

if TYPE_CHECKING:
    from pyspark import SparkContext

T = TypeVar("T")
CANCEL_WAIT_S = 10.0  # the longest a stopped step waits for its cluster work to be cancelled
COUNT_LIMIT = 100_000  # scheduler tasks walked to count what a cancel stops
COUNT_WAIT_S = 2.0  # the longest the count waits for the scheduler before the cancel goes ahead
GROUP_PREFIX = "qloop-step-"
_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


# ---------------------------------------------------------------------------------------------
# dask.distributed
# ---------------------------------------------------------------------------------------------


def _clients() -> list[Any]:
    """The running, synchronous dask.distributed clients of this process."""
    module = sys.modules.get("distributed.client")
    client_class = vars(module).get("Client") if module is not None else None
    # Client._instances (a WeakSet of every client) is private: no public API lists them all.
    instances = getattr(client_class, "_instances", ())
    return [
        c
        for c in list(instances)
        if getattr(c, "status", None) == "running" and not getattr(c, "asynchronous", True)
    ]


def _future_keys(client: Any) -> frozenset[Any]:
    return frozenset(list(client.futures))  # list(): one step in C, safe against the loop thread


def _pending(client: Any, keys: frozenset[Any]) -> list[Any]:
    states = client.futures
    return [k for k in keys if getattr(states.get(k), "status", None) == "pending"]


def _unfinished_tasks(client: Any, keys: list[Any]) -> int | None:
    """Tasks not yet computed that ``keys`` need, counted on the scheduler (nothing runs); None
    when the scheduler does not answer (it may refuse ``run_on_scheduler``)."""

    # Nested, so that it is pickled by value: the scheduler need not have qloop_kernel.
    def count(dask_scheduler: Any, keys: list[Any], limit: int) -> int:
        done = {"memory", "erred", "released", "forgotten"}
        seen: set[Any] = set()
        stack = list(keys)
        while stack and len(seen) < limit:
            key = stack.pop()
            task = dask_scheduler.tasks.get(key)
            if key in seen or task is None or task.state in done:
                continue
            seen.add(key)
            stack.extend(dependency.key for dependency in task.dependencies)
        return len(seen)

    try:
        return int(client.run_on_scheduler(count, keys=keys, limit=COUNT_LIMIT))
    except Exception:
        return None


def _cancel_futures(client: Any, keys: list[Any]) -> int:
    """Cancel the futures of ``keys``; the number of tasks that stops (futures if unknown)."""
    from distributed import Future

    # A busy or distant scheduler must not hold up the cancel: the count waits COUNT_WAIT_S.
    counted_tasks = _off_main_thread(
        functools.partial(_unfinished_tasks, client, keys), COUNT_WAIT_S
    )
    tasks = counted_tasks if counted_tasks is not None else len(keys)
    # The step's own Future objects are held by its interrupted frames: new handles to the
    # same keys (bound to the client's existing state) are what client.cancel takes.
    client.cancel([Future(key, client) for key in keys], reason="the agent step was stopped")
    return tasks


# ---------------------------------------------------------------------------------------------
# Spark
# ---------------------------------------------------------------------------------------------


def _spark_context() -> SparkContext | None:
    """The running SparkContext of this process, or None (never starts one)."""
    module = sys.modules.get("pyspark")
    context_class = vars(module).get("SparkContext") if module is not None else None
    # _active_spark_context is private: SparkContext.getOrCreate() would start one.
    context: SparkContext | None = getattr(context_class, "_active_spark_context", None)
    return context if getattr(context, "_jsc", None) is not None else None


@dataclass
class _SparkGroup:
    """The step's Spark job group on the kernel's main thread, and the one it replaced."""

    context: Any
    group: str
    previous: tuple[str | None, ...]

    @classmethod
    def begin(cls, context: Any) -> _SparkGroup:
        previous = tuple(context.getLocalProperty(name) for name in _PROPERTIES)
        group = GROUP_PREFIX + uuid.uuid4().hex[:12]
        context.setJobGroup(group, "qloop agent step", interruptOnCancel=True)
        return cls(context, group, previous)

    def restore(self, stopped: bool) -> None:
        """Put back the thread's earlier job group, unless the step set one of its own.

        An interrupted action drops the main thread's py4j connection, and its JVM thread with
        the local properties: then the earlier group is set again too.
        """
        current = self.context.getLocalProperty(_PROPERTIES[0])
        if current == self.group or (stopped and current is None and self.previous[0]):
            for name, value in zip(_PROPERTIES, self.previous, strict=True):
                self.context.setLocalProperty(name, value)

    def cancel(self) -> str:
        tracker = self.context.statusTracker()
        running = [
            job
            for job in tracker.getJobIdsForGroup(self.group)
            if getattr(tracker.getJobInfo(job), "status", None) == "RUNNING"
        ]
        try:  # Spark >= 4.0: also the jobs the interrupted action has yet to submit
            self.context._jsc.sc().cancelJobGroupAndFutureJobs(self.group)
        except Exception:
            self.context.cancelJobGroup(self.group)
        jobs = counted(len(running), "running job")
        return f"Spark job group {self.group!r} cancelled ({jobs})"


# ---------------------------------------------------------------------------------------------
# One step
# ---------------------------------------------------------------------------------------------


@dataclass
class ClusterStep:
    """What one step may start on a cluster, noted before it runs (:meth:`begin`)."""

    futures: list[tuple[Any, frozenset[Any]]] = field(default_factory=list)
    spark: _SparkGroup | None = None
    had_spark: bool = False
    notes: list[str] = field(default_factory=list)

    @classmethod
    def begin(cls) -> ClusterStep:
        """Note each dask client's futures; give the step's Spark jobs a job group."""
        step = cls(futures=[(client, _future_keys(client)) for client in _clients()])
        context = _spark_context()
        step.had_spark = context is not None
        if context is not None:
            try:
                step.spark = _SparkGroup.begin(context)
            except Exception as exc:  # a context whose JVM is gone: nothing of it to stop
                step.notes.append(f"Spark job group not set ({type(exc).__name__})")
        return step

    def end(self, stopped: bool) -> list[str]:
        """After the step: when it was stopped, cancel what it started. What was cancelled."""
        if self.spark is not None:
            # py4j failing here must not hide the step's own outcome.
            with contextlib.suppress(Exception):
                self.spark.restore(stopped)
        if not stopped:
            return []
        done = _off_main_thread(self._cancel, CANCEL_WAIT_S)
        if done is None:  # the cancel goes on in the background
            return [f"cluster work still being cancelled after {CANCEL_WAIT_S:g} s"]
        return done

    def _cancel(self) -> list[str]:
        notes: list[str] = []
        _guarded(functools.partial(self._cancel_into, notes), notes, "cluster")
        return [note for note in notes if note]

    def _cancel_into(self, notes: list[str]) -> None:
        tasks = 0
        before = {id(client): keys for client, keys in self.futures}
        for client in _clients():  # clients the step connected count too: all their futures
            keys = _pending(client, _future_keys(client) - before.get(id(client), frozenset()))
            if keys:
                cancelled = _guarded(
                    functools.partial(_cancel_futures, client, keys), notes, "dask"
                )
                tasks += cancelled or 0
        if tasks:
            notes.append(f"{counted(tasks, 'dask task')} cancelled")
        if self.spark is not None:
            notes.append(_guarded(self.spark.cancel, notes, "Spark") or "")
        elif not self.had_spark and (context := _spark_context()) is not None:
            _guarded(context.cancelAllJobs, notes, "Spark")  # a context the step started
            notes.append("the Spark jobs of the SparkContext the step started cancelled")


def _guarded(action: Callable[[], T], notes: list[str], what: str) -> T | None:
    try:
        return action()
    except Exception as exc:
        notes.append(f"{what} work not cancelled ({type(exc).__name__}: {str(exc)[:200]})")
        return None


def _off_main_thread(work: Callable[[], T], wait_s: float) -> T | None:
    """``work()`` on a thread of its own, waited for up to ``wait_s``; None if it had not ended.

    A stopped step's time limit fires again every half second until the step ends: a py4j or
    scheduler call on the main thread would be cut by it, so the calls run on another thread and
    the main thread only waits (a repeated stop interrupts the wait, which goes on).
    """
    result: list[T] = []
    worker = threading.Thread(target=lambda: result.append(work()), daemon=True)
    ends = time.monotonic() + wait_s
    while True:
        try:
            if worker.ident is None:  # not started yet
                worker.start()
            while worker.is_alive() and time.monotonic() < ends:
                worker.join(0.05)
            return result[0] if result else None
        except StepStopped:
            continue


def stop_message(
    error: BaseException | None, watch: Any, code_limit: tuple[float, str] | None
) -> str | None:
    """Why the step was stopped, or None: a time limit, the Stop button, a kernel interrupt.

    A stop that lands inside a library call may come out as that library's error (py4j wraps it
    in a ``Py4JError``): then the Stop button's state and the clocks tell.
    """
    if error is None or isinstance(error, StepStopped):
        return None if error is None else str(error)
    if isinstance(error, KeyboardInterrupt):
        return "interrupted"
    now = time.monotonic()
    if watch is not None and watch.cancel.cancelled:
        return STOPPED
    if code_limit is not None and now >= code_limit[0]:
        return code_limit[1]
    if watch is not None and getattr(watch, "timeout_s", None) is not None:
        # The turn's deadline and its message, as the watch computes them for the step.
        at, message = watch._deadline(now)
        return str(message) if at <= now else None
    return None
