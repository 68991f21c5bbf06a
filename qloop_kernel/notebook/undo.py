"""Undo of the last approved code step: snapshots taken before it runs, within a memory budget.

Before a step runs, the variables it may change (``policy.risk.classify(...).may_change``; every
variable when the analysis cannot bound them) are saved: pandas objects by a copy-on-write copy
(free until one side is written), numpy arrays by a copy, polars by ``clone()``, Arrow objects and
lazy plans as they are (immutable), connections, sessions, locks and files as they are (never
copied), small plain objects by deep copy. What does not fit the budget or cannot be copied is not
saved, and the card says so before the user approves, as it says which effects are outside the
namespace (files, network, processes, settings, work on a cluster).

After the step, fingerprints (``values.fingerprint``) say what it created, changed and deleted.
Undo puts the saved variables back, removes those the step created, and says what it could not
restore. One step can be undone: the last one that changed something.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import re
import sys
import types
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..policy.risk import classify
from ..records.drift import CHANGES_HEADING
from ..settings import Settings
from ..values import fingerprint as fingerprints
from ..values.fingerprint import (
    CHECK_EVERY,
    Change,
    OutOfTime,
    TimeLimit,
    ValuePrint,
    builtin_base,
    change_lines,
    changes,
    fingerprint,
    tracked_names,
)
from ..values.summaries import format_bytes, is_dataframe, is_ndarray, is_series
from ..values.summaries.arrow import is_arrow_array, is_arrow_table
from ..values.summaries.common import instance_of, is_lazy_like, libraries_of
from ..values.summaries.device import device_array, is_device_array, is_jax_array
from ..values.summaries.polars import is_polars_frame, is_polars_series

if TYPE_CHECKING:
    from ..policy.risk import Assessment

MAX_RECORDED_STEPS = 500  # steps whose changes are kept for their records
WALK_OBJECTS = 100_000  # objects a plain value may hold and still be measured and deep-copied
BUDGET_HINT = "raise it with `%agent set undo_budget_mb N`"
DEVICE_HINT = "raise it with `%agent set undo_device_budget_mb N`"
_NAMESPACE_REASON = re.compile(r"^(creates|overwrites|changes|deletes) ([A-Za-z_]\w*)(?:,| \(|$)")
# Libraries of connections, sessions, clients, locks and files: such objects are never copied.
_LIVE_LIBRARIES = frozenset({
    "distributed", "pyspark", "py4j", "sqlalchemy", "sqlite3", "duckdb", "psycopg", "psycopg2",
    "pymongo", "redis", "socket", "ssl", "_socket", "_thread", "threading", "multiprocessing",
    "concurrent", "asyncio", "io", "_io", "subprocess", "http", "urllib3", "requests", "httpx", "zmq",
    "logging", "h5py", "zarr",  # arrays in files: a write goes to the file, a copy cannot undo it
})  # fmt: skip
_SHARED = (
    int, float, complex, bool, str, bytes, type(None), range, types.ModuleType, types.FunctionType,
    types.BuiltinFunctionType, types.MethodType, type,
)  # fmt: skip


# -- copying one value -----------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """What a snapshot of a value may keep alive: host bytes, and device bytes with their device."""

    host: int
    device: int = 0
    where: str = ""  # the device of ``device`` bytes ("cuda:0"), "" when none


class NotMeasured(Exception):
    """A value that cannot be measured within the limits: the message says why."""


def _pandas_copy_on_write() -> bool:
    import pandas as pd

    if int(pd.__version__.split(".")[0]) >= 3:
        return True  # always on since pandas 3 (the option is deprecated there)
    return pd.get_option("mode.copy_on_write") is True


def _pandas_size(value: Any, limit: TimeLimit | None = None) -> int:
    """Bytes of a frame or Series: numpy columns from their dtypes, others one by one (object
    cells estimated from a few of them), the clock checked between columns."""
    import numpy as np

    frame = value.ndim == 2
    dtypes = list(value.dtypes) if frame else [value.dtype]
    total = int(value.index.memory_usage(deep=False))
    others = []
    for dtype, positions in _positions_by_dtype(dtypes).items():
        if isinstance(dtype, np.dtype) and dtype.kind != "O":
            total += len(value) * dtype.itemsize * len(positions)
        else:
            others += positions
    for position in others:
        column = value.iloc[:, position] if frame else value
        total += int(column.memory_usage(index=False, deep=False))
        if column.dtype == object and len(column):  # object cells: their Python objects
            sample = column.iloc[:: max(1, len(column) // 100)]
            total += int(sum(sys.getsizeof(v) for v in sample) / len(sample) * len(column))
        if limit is not None:
            limit.check()
    return total


def _positions_by_dtype(dtypes: list[Any]) -> dict[Any, list[int]]:
    found: dict[Any, list[int]] = {}
    for position, dtype in enumerate(dtypes):
        try:
            found.setdefault(dtype, []).append(position)
        except TypeError:  # an unhashable dtype: its own group
            found[object()] = [position]
    return found


def data_size(value: object, limit: TimeLimit | None = None) -> int | None:
    """Bytes a snapshot of a data value may keep alive in host memory; None when ``value`` is not
    data (device arrays: see :func:`measure`)."""
    if is_dataframe(value) or is_series(value):
        return _pandas_size(value, limit)
    if is_ndarray(value):
        return int(value.nbytes)  # type: ignore[attr-defined]
    if is_polars_frame(value) or is_polars_series(value):
        return int(value.estimated_size())  # type: ignore[attr-defined]
    if is_arrow_table(value) or is_arrow_array(value):
        return int(value.nbytes)  # type: ignore[attr-defined]
    if is_lazy_like(value):
        return 0  # a plan: its data is elsewhere
    return None


def _device_size(value: object) -> Size | None:
    """The size of a device array (its host bytes when it lives on the host); None otherwise."""
    if not is_device_array(value):
        return None
    info = device_array(value)
    if info is None:
        return Size(0)
    return Size(info.nbytes) if info.on_host else Size(0, info.nbytes, info.device)


_PLAIN_TYPES = frozenset({
    int, float, complex, bool, str, bytes, type(None), list, tuple, dict, set, frozenset, deque,
})  # fmt: skip


def _big_container(item: object, room: int) -> bool:
    """A container with more items than ``room``: known without listing what it holds."""
    if isinstance(item, list | tuple | dict | set | frozenset | deque):
        return int(builtin_base(item).__len__(item)) > room  # a subclass's __len__ is not run
    return False


def _walk_size(value: object, limit: TimeLimit) -> Size:
    """Host and device bytes of a plain value and what it holds (a bounded walk)."""
    seen: set[int] = set()
    stack = [value]
    host = device = 0
    where = ""
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, types.ModuleType | type | types.FunctionType):
            continue
        seen.add(id(item))
        if len(seen) > WALK_OBJECTS or _big_container(item, WALK_OBJECTS - len(seen)):
            raise NotMeasured(f"is too big to copy (over {WALK_OBJECTS:,} objects)")
        if not len(seen) % CHECK_EVERY:
            limit.check()
        plain = item is value or type(item) in _PLAIN_TYPES
        size = None if plain else data_size(item, limit)
        inner = None if plain or size is not None else _device_size(item)
        if inner is not None:
            host, device, where = host + inner.host, device + inner.device, where or inner.where
        elif size is not None:
            host += size
        else:
            host += sys.getsizeof(item)
            stack.extend(gc.get_referents(item))
    return Size(host, device, where)


def plain_size(value: object) -> int | None:
    """Bytes of a plain value and what it holds; None past ``WALK_OBJECTS`` objects or
    ``VALUE_TIME_S`` of measuring."""
    found = _measured(value)
    return found.host if isinstance(found, Size) else None


def is_live_handle(value: object) -> bool:
    """A connection, cluster client, session, lock or open file: never copied (copying one may
    connect, or fail), kept as it is, so undo can only rebind its name."""
    return bool(libraries_of(type(value)) & _LIVE_LIBRARIES)


def measure(value: object, seconds: float | None = None) -> Size:
    """Host and device bytes a snapshot of ``value`` may keep alive.

    Raises NotMeasured (its message says why) past ``WALK_OBJECTS`` objects or ``seconds``
    (``VALUE_TIME_S``) of CPU time.
    """
    if isinstance(value, _SHARED) or is_live_handle(value) or is_jax_array(value):
        return Size(0)  # kept as they are (a jax array cannot change in place)
    try:
        with TimeLimit(seconds) as limit:
            found = data_size(value, limit)
            device = _device_size(value) if found is None else None
            if device is not None:
                return device
            size = Size(found) if found is not None else _walk_size(value, limit)
            limit.check()
    except OutOfTime:
        took = limit.seconds * 1000
        raise NotMeasured(f"is not tracked: measuring it takes over {took:g} ms") from None
    return size


def _measured(value: object) -> Size | str:
    try:
        return measure(value)
    except NotMeasured as why:
        return str(why)


def size_of(value: object) -> int | None:
    """Host bytes a snapshot of ``value`` may keep alive; None when it cannot be measured."""
    found = _measured(value)
    return found.host if isinstance(found, Size) else None


def snapshot_copy(value: object) -> tuple[object, str]:
    """A copy of ``value`` that the step cannot change, and how it was made; raises if none."""
    if isinstance(value, _SHARED):
        return value, "kept (immutable)"
    if is_dataframe(value) or is_series(value):
        if _pandas_copy_on_write():
            return value.copy(deep=False), "copy-on-write copy"  # type: ignore[attr-defined]
        return value.copy(deep=True), "copy"  # type: ignore[attr-defined]
    if is_ndarray(value):
        return value.copy(), "copy"  # type: ignore[attr-defined]
    if is_polars_frame(value) or is_polars_series(value):
        return value.clone(), "clone"  # type: ignore[attr-defined]
    if is_arrow_table(value) or is_arrow_array(value) or instance_of(value, "polars", "LazyFrame"):
        return value, "kept (immutable)"
    if is_jax_array(value):
        return value, "kept (immutable)"  # jax arrays cannot be changed in place
    if is_lazy_like(value):
        return copy.copy(value), "copy of the plan"
    if is_live_handle(value):
        return value, "kept (a live handle)"
    return copy.deepcopy(value), "deep copy"


# -- a snapshot ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Saved:
    """One variable as it was before the step."""

    value: Any
    identity: int  # id() of the object the name held: an in-place restore keeps aliases right
    size: int
    how: str
    device: int = 0  # device memory the copy takes


@dataclass
class Snapshot:
    """What a step may change, saved before it runs, and what cannot be undone."""

    code: str
    identities: dict[str, int]  # every tracked name before the step -> id() of its value
    prints: dict[str, ValuePrint]  # fingerprints before, of the names the step may change
    saved: dict[str, Saved] = field(default_factory=dict)
    missed: dict[str, str] = field(default_factory=dict)  # name -> why it is not saved
    outside: list[str] = field(default_factory=list)  # effects outside the namespace
    unbounded: str = ""  # why the step may change any variable ("" when bounded)
    budget: int = 0
    may_change: frozenset[str] = frozenset()  # what the analysis says it changes (when bounded)
    device_budget: int = 0  # device memory the copies may take

    @property
    def held(self) -> int:
        return sum(s.size for s in self.saved.values())

    @property
    def device_held(self) -> int:
        return sum(s.device for s in self.saved.values())

    def not_undone(self) -> list[str]:
        """Why this step cannot be undone entirely, one reason each (empty when it can)."""
        reasons = [f"{effect}, outside the namespace" for effect in self.outside]
        if self.unbounded:
            count = len(self.saved)
            reasons.append(
                f"it may change any variable ({self.unbounded}): {count} of "
                f"{count + len(self.missed)} saved, what it does elsewhere is not undone"
            )
        reasons += [f"{name} {why}" for name, why in sorted(self.missed.items())]
        return reasons

    def notice(self) -> str | None:
        """The card's line before approval, or None when the step can be undone."""
        reasons = self.not_undone()
        return "cannot be undone: " + "; ".join(reasons) if reasons else None


def _effects(assessment: Any) -> tuple[list[str], str]:
    """The effects outside the namespace, and why the names it changes cannot be bounded."""
    outside: list[str] = []
    unbounded: list[str] = []
    may_change = assessment.may_change
    for reason in assessment.reasons:
        match = _NAMESPACE_REASON.match(reason.text)
        if reason.risk == "read" or (
            match and (may_change is None or match.group(2) in may_change)
        ):
            continue
        (unbounded if reason.risk == "unknown" else outside).append(str(reason))
    why = "; ".join(unbounded) or "the analysis cannot bound it"
    return outside, (why if may_change is None else "")


def take_snapshot(
    code: str,
    namespace: Mapping[str, Any],
    *,
    assessment: Any,
    budget: int,
    hidden: Mapping[str, Any] | None = None,
    reuse: Snapshot | None = None,
    device_budget: int = 0,
) -> Snapshot:
    """Save what ``code`` may change (per ``assessment``) within ``budget`` bytes of host memory
    and ``device_budget`` bytes of device memory (device arrays are not copied beyond it).

    ``reuse``: an earlier snapshot whose copies are taken again where the value is the same object.
    """
    names = tracked_names(namespace, hidden)
    outside, unbounded = _effects(assessment)
    may_change = assessment.may_change
    candidates = names if may_change is None else [n for n in names if n in may_change]
    snapshot = Snapshot(
        code,
        {n: id(namespace[n]) for n in names},
        {n: fingerprint(namespace[n]) for n in candidates},
        outside=outside,
        unbounded=unbounded,
        budget=budget,
        may_change=frozenset(may_change or ()),
        device_budget=device_budget,
    )
    sizes = {n: _measured(namespace[n]) for n in candidates}
    for name in sorted(candidates, key=lambda n: _order(sizes[n], n)):
        _save(snapshot, name, namespace[name], sizes[name], reuse)
    return snapshot


def _order(size: Size | str, name: str) -> tuple[bool, int, str]:
    return (isinstance(size, str), size.host if isinstance(size, Size) else 0, name)


def _over_budget(snapshot: Snapshot, value: object, size: Size) -> str | None:
    """Why ``value`` does not fit the snapshot's budgets (None when it does)."""
    if size.device and snapshot.device_held + size.device > snapshot.device_budget:
        kind = type(value).__name__
        return (
            f"({kind}, {format_bytes(size.device)} on {size.where}) is not snapshotted: a copy "
            f"would take device memory, and the undo device budget is "
            f"{format_bytes(snapshot.device_budget)} ({DEVICE_HINT})"
        )
    if snapshot.held + size.host > snapshot.budget:
        return (
            f"({format_bytes(size.host)}) is over the undo budget of "
            f"{format_bytes(snapshot.budget)} ({BUDGET_HINT})"
        )
    return None


def _save(
    snapshot: Snapshot, name: str, value: object, size: Size | str, reuse: Snapshot | None
) -> None:
    kind = type(value).__name__
    if isinstance(size, str):
        snapshot.missed[name] = f"({kind}) {size}"
        return
    over = _over_budget(snapshot, value, size)
    if over is not None:
        snapshot.missed[name] = over
        return
    earlier = reuse.saved.get(name) if reuse is not None else None
    if earlier is not None and earlier.identity == id(value):
        snapshot.saved[name] = earlier
        return
    try:
        saved, how = snapshot_copy(value)
    except Exception as exc:  # unpicklable, uncopyable: the card names it
        snapshot.missed[name] = f"({kind}) cannot be copied: {type(exc).__name__}: {exc}"[:300]
        return
    snapshot.saved[name] = Saved(saved, id(value), size.host, how, size.device)


# -- after the step ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NotebookEdit:
    """A notebook edit a step made (a cell the user accepted, added or edited), and how to take
    it back."""

    what: str  # "added cell 3f2a", "edited cell 3f2a"
    revert: Callable[[], str]  # takes it back; says what it did, or why it could not


@dataclass
class StepChanges:
    """What one step did to the namespace and the notebook, and what undoing it would do."""

    snapshot: Snapshot
    changes: list[Change]
    after: dict[str, ValuePrint]  # fingerprints after, of every name that changed
    call_id: str | None = None
    undone: bool = False
    notebook: list[NotebookEdit] = field(default_factory=list)  # cells it added or edited
    ran: bool = True  # False: a notebook edit that ran no code
    by: str | None = None  # the outside client that asked for it; None: the kernel's agent

    @property
    def created(self) -> list[str]:
        return [c.name for c in self.changes if c.kind == "created"]

    @property
    def undoable(self) -> bool:
        """Undo would put something back or remove something."""
        touched = {c.name for c in self.changes}
        return (
            bool(self.created) or bool(touched & self.snapshot.saved.keys()) or bool(self.notebook)
        )

    def lines(self) -> list[str]:
        return change_lines(self.changes) if self.changes else ["no variables changed"]

    def shown_lines(self) -> list[str]:
        """What the step did, as shown with its Undo: its variables' changes and its cells."""
        cells = [edit.what for edit in self.notebook]
        return [*(self.lines() if self.changes or not cells else []), *cells]

    def not_undone(self) -> list[str]:
        """What undoing this step would not put back: effects elsewhere, variables not saved."""
        snapshot = self.snapshot
        reasons = [f"{effect}, outside the namespace" for effect in snapshot.outside]
        if snapshot.unbounded:
            reasons.append(f"what it did outside the namespace, if anything ({snapshot.unbounded})")
        for change in self.changes:
            name = change.name
            if change.kind == "created" or name in snapshot.saved:
                continue
            why = snapshot.missed.get(name, "was not saved (the analysis did not foresee it)")
            reasons.append(f"{name} {why}")
        return reasons

    def text(self) -> str:
        """The section of the tool result that tells the model what the step changed."""
        return f"{CHANGES_HEADING}\n" + "\n".join(self.lines())


def step_changes(
    snapshot: Snapshot,
    namespace: Mapping[str, Any],
    *,
    hidden: Mapping[str, Any] | None = None,
    private: Collection[str] = (),
) -> StepChanges:
    """Compare the namespace now with ``snapshot``: created, changed and deleted variables.

    Only names the step may have changed, or that now hold another object, are fingerprinted.
    """
    now = tracked_names(namespace, hidden)
    before_ids = snapshot.identities
    rebound = {n for n in now if n in before_ids and id(namespace[n]) != before_ids[n]}
    looked = {n for n in now if n not in before_ids} | rebound | (snapshot.prints.keys() & set(now))
    after = {n: fingerprint(namespace[n]) for n in looked}
    before = dict(snapshot.prints)
    for name in rebound - before.keys():  # a change the analysis did not foresee
        before[name] = ValuePrint("?", identity=before_ids[name])
    for name in before_ids.keys() - set(now):
        before.setdefault(name, ValuePrint("?"))
    found = changes(before, after, private=private)
    return StepChanges(snapshot, found + _unseen_changes(snapshot, found, after), after)


def _unseen_changes(
    snapshot: Snapshot, found: list[Change], after: Mapping[str, ValuePrint]
) -> list[Change]:
    """Values the code may change whose content cannot be compared: big ones whose sampled
    content looks the same (when they were saved), and any that were not tracked (reading
    them took over ``VALUE_TIME_S``).

    A change outside the sample cannot be seen, so they are listed as maybe changed.
    """
    seen = {c.name for c in found}
    sampled = snapshot.may_change & snapshot.saved.keys() & after.keys() - seen
    untracked = {
        name
        for name in snapshot.prints.keys() & after.keys() - seen
        if after[name].untracked or snapshot.prints[name].untracked
    }
    return [
        Change(
            name,
            "changed",
            f"{after[name].describe()}, may have changed ("
            + (
                f"not tracked: reading it takes over {fingerprints.VALUE_TIME_S * 1000:g} ms)"
                if name in untracked
                else "not in the values sampled)"
            ),
            after[name].hash,
        )
        for name in sorted(untracked | {n for n in sampled if after[n].sampled})
    ]


# -- undo ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UndoReport:
    """What an undo did, for the user and for the model."""

    restored: list[str]
    removed: list[str]
    not_restored: list[str]  # "name: why"
    since: list[str]  # variables that had changed again after the step
    outside: list[str]
    call_id: str | None = None
    notebook: list[str] = field(default_factory=list)  # what was done to the step's cells
    by: str | None = None  # the outside client whose step it was; None: the kernel's agent

    def lines(self) -> list[str]:
        found = list(self.notebook)
        if self.restored:
            found.append("restored " + ", ".join(self.restored))
        if self.removed:
            found.append("removed " + ", ".join(self.removed) + " (created by the step)")
        if self.since:
            found.append(
                "changed again after the step, now put back to before it: " + ", ".join(self.since)
            )
        found += [f"not restored: {item}" for item in self.not_restored]
        found += [f"not undone: {effect}" for effect in self.outside]
        return found or ["nothing to put back"]

    def model_note(self) -> str:
        """What the model is told in its next turn."""
        return (
            "[The user undid this step after it ran: " + "; ".join(self.lines()) + ". The "
            "namespace and the notebook are as they were before the step, except what is listed "
            "as not restored or left as it is.]"
        )


def _restore_in_place(current: Any, saved: Saved) -> bool:
    """Put ``saved`` back into the same object, so other references see it too."""
    value = saved.value
    if id(current) != saved.identity or type(current) is not type(value):
        return False
    if isinstance(current, list):
        current[:] = value
    elif isinstance(current, dict | set):
        current.clear()
        current.update(value)
    elif is_ndarray(current) and current.shape == value.shape:
        current[...] = value
    else:
        return False
    return True


def undo_step(step: StepChanges, namespace: dict[str, Any]) -> UndoReport:
    """Put back what ``step`` changed and remove what it created."""
    snapshot = step.snapshot
    restored, removed, missing, since = [], [], [], []
    for change in step.changes:
        name = change.name
        after = step.after.get(name)
        if name in namespace and after is not None and fingerprint(namespace[name]) != after:
            since.append(name)
        if change.kind == "created":
            namespace.pop(name, None)
            removed.append(name)
        elif name in snapshot.saved:
            saved = snapshot.saved[name]
            if not (name in namespace and _restore_in_place(namespace[name], saved)):
                namespace[name] = saved.value
            restored.append(name)
        else:
            why = snapshot.missed.get(name, "was not saved (the analysis did not foresee it)")
            missing.append(f"{name} {why}")
    cells = [_revert(edit) for edit in step.notebook]
    step.undone = True
    return UndoReport(
        restored, removed, missing, since, list(snapshot.outside), step.call_id, cells, step.by
    )


def _revert(edit: NotebookEdit) -> str:
    try:
        return edit.revert()
    except Exception as exc:  # the page went away, or refused: the edit stays, and it is said
        return f"{edit.what}: not taken back ({exc})"


# -- the log of one kernel --------------------------------------------------------------------


def default_budget() -> int:
    """The budget of the default settings (a share of the memory available now)."""
    return Settings().undo_budget_bytes()


class UndoLog:
    """The undo state of one kernel: the snapshot of the step about to run, the last step's changes.

    ``budget`` gives the snapshot budget in bytes; ``turn_running`` whether an agent turn is under
    way (undo waits for it to end).
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.budget: Callable[[], int] = default_budget
        self.device_budget: Callable[[], int] = lambda: 0  # device memory for copies (setting)
        self.turn_running: Callable[[], bool] = lambda: False
        self.pending: Snapshot | None = None
        self.last: StepChanges | None = None  # the step Undo applies to
        self.latest: StepChanges | None = None  # the step that ran last (it may change nothing)
        self.recorded: OrderedDict[str, list[Change]] = OrderedDict()  # call id -> its changes
        self.on_step: list[Callable[[StepChanges | None], None]] = []  # a newer step replaces it
        self.on_undone: list[Callable[[UndoReport], None]] = []

    def _classify(self, code: str) -> Assessment:
        try:
            source = self.shell.transform_cell(code)
        except Exception:  # the code as given: an unparsable step cannot be bounded
            source = code
        return classify(source, existing=self.shell.user_ns)

    def _identities(self) -> dict[str, int]:
        ns = self.shell.user_ns
        return {
            n: id(ns[n]) for n in tracked_names(ns, getattr(self.shell, "user_ns_hidden", None))
        }

    def _take(self, code: str, reuse: Snapshot | None, assessment: Any = None) -> Snapshot:
        return take_snapshot(
            code, self.shell.user_ns, assessment=assessment or self._classify(code),
            budget=self.budget(), hidden=getattr(self.shell, "user_ns_hidden", None), reuse=reuse,
            device_budget=self.device_budget(),
        )  # fmt: skip

    def prepare(self, code: str, assessment: Any = None) -> Snapshot:
        """Save what ``code`` may change (before the card, so it can say what cannot be undone).

        ``assessment``: the code's ``classify`` result when the caller has it already.
        """
        self.pending = self._take(code, self.pending, assessment)
        return self.pending

    def begin(self, code: str) -> Snapshot:
        """The snapshot for ``code`` about to run: the prepared one if nothing changed since."""
        pending, self.pending = self.pending, None
        if (
            pending is not None
            and pending.code == code
            and pending.identities == self._identities()
        ):
            return pending
        return self._take(code, reuse=pending)

    def discard(self) -> None:
        """Drop a snapshot prepared for a step that did not run (denied, or the turn ended)."""
        self.pending = None

    @contextlib.contextmanager
    def aside(self) -> Iterator[None]:
        """Around a run that is taken back at once (a proposal's code run ahead, ``ahead.py``):
        it is no step, so no listener hears of it and the log is as before it when it ends."""
        saved = (self.pending, self.last, self.latest, self.on_step, self.on_undone)
        self.pending, self.on_step, self.on_undone = None, [], []
        try:
            yield
        finally:
            self.pending, self.last, self.latest, self.on_step, self.on_undone = saved

    def finish(self, snapshot: Snapshot, private: Collection[str] = ()) -> StepChanges:
        """What the step changed; it becomes the step Undo applies to, if it changed anything."""
        step = step_changes(
            snapshot, self.shell.user_ns,
            hidden=getattr(self.shell, "user_ns_hidden", None), private=private,
        )  # fmt: skip
        self.latest = step
        if step.changes:
            self.last = step
            for listener in list(self.on_step):
                listener(step)
        return step

    def edited(self, edit: NotebookEdit, step: StepChanges | None = None) -> StepChanges:
        """A tool call edited the notebook: Undo takes the edit back, with what ``step`` (the
        code the call ran, if it ran any) did to the namespace."""
        if step is None:
            empty = Snapshot(code="", identities={}, prints={})
            step = StepChanges(empty, [], {}, ran=False)
            self.latest = step
        step.notebook.append(edit)
        self.last = step
        for listener in list(self.on_step):
            listener(step)
        return step

    def claim(self, call_id: str) -> StepChanges | None:
        """The step that tool call ``call_id`` just ran (None if it ran none): named, and kept
        for the turn's record."""
        step = self.latest
        if step is None or step.call_id is not None:
            return None
        step.call_id = call_id
        if not step.ran:
            return step
        self.recorded[call_id] = step.changes
        while len(self.recorded) > MAX_RECORDED_STEPS:
            self.recorded.popitem(last=False)
        return step

    def can_undo(self, step: StepChanges | None = None) -> str | None:
        """Why undo cannot run now (None when it can)."""
        last = self.last
        if last is None or last.undone:
            return "nothing to undo: no step since the last undo changed a variable"
        if step is not None and step is not last:
            return "only the last step that changed variables can be undone"
        if self.turn_running():
            return "an agent turn is running: undo when it has ended"
        if not last.undoable:
            return "the step left nothing that can be put back"
        return None

    def undo(self, step: StepChanges | None = None) -> UndoReport:
        """Undo the last step (``step``, when given, must be it); raises ValueError otherwise."""
        why = self.can_undo(step)
        if why is not None:
            raise ValueError(why)
        assert self.last is not None
        report = undo_step(self.last, self.shell.user_ns)
        for tell in list(self.on_undone):
            tell(report)
        for listener in list(self.on_step):
            listener(None)
        return report


def note_in_conversation(messages: list[dict[str, Any]], call_id: str | None, note: str) -> bool:
    """Add ``note`` to the result of tool call ``call_id`` in the conversation; False if absent."""
    if call_id is None:
        return False
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for index, block in enumerate(content):
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("tool_use_id") == call_id
            ):
                inner = block.get("content")
                blocks = (
                    [{"type": "text", "text": inner}]
                    if isinstance(inner, str)
                    else list(inner or [])
                )
                content[index] = {**block, "content": [*blocks, {"type": "text", "text": note}]}
                return True
    return False
