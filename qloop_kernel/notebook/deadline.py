"""Interrupting a running step: the code timeout, the turn's ``--timeout`` and the Stop button.

A step runs on the kernel's main thread (``run_code`` through ``shell.run_cell``, a read-only tool
calling a slow ``__repr__``). Checking the clock between model requests cannot end it, so a watchdog
on the main thread does: ``signal.setitimer`` raises :class:`StepStopped` in the running code at the
earliest of the active limits. The limits nest (a code timeout inside the turn's deadline) and share
the one timer. The Stop button, clicked on another thread while a step runs, fires the timer at
once; the step ends as it does on a timeout, and says why.
"""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..loop import CancelToken, TurnObserver
from ..messages import ModelEvent, ModelResponse, ToolCall, ToolOutcome, Usage

log = logging.getLogger("qloop.deadline")
MIN_DELAY_S = 0.001  # setitimer(0) would switch the timer off
REFIRE_S = 0.5
# The longest a step's bookkeeping holds off its limits (shielded): a cluster's cancel waits 12 s at
# most, and a value's property read for undo that never returns is cut all the same.
SHIELD_S = 15.0
REPORTERS = frozenset({"showtraceback", "showsyntaxerror", "_showtraceback"})
STOPPED = "stopped with the Stop button: the step was interrupted"


class StepStopped(Exception):
    """A running step was interrupted: by a time limit or the Stop button."""


@dataclass
class _Limit:
    at: float  # time.monotonic() when the step is interrupted
    message: str
    not_before: float = -math.inf  # held off by a shield until then

    @property
    def due(self) -> float:
        return max(self.at, self.not_before)


@dataclass
class _Alarm:
    """The main thread's SIGALRM timer, set to the earliest active limit."""

    limits: list[_Limit] = field(default_factory=list)
    previous: Any = None

    def push(self, limit: _Limit) -> None:
        if not self.limits:
            previous = signal.signal(signal.SIGALRM, self._expire)
            if previous != self._expire:
                self.previous = previous
        self.limits.append(limit)
        self._arm()

    def pop(self, limit: _Limit) -> None:
        self.limits.remove(limit)
        if self.limits:
            self._arm()
            return
        signal.setitimer(signal.ITIMER_REAL, 0)
        # A late Stop from another thread may still fire the timer: SIGALRM's default action
        # would end the kernel, so this handler (idle: it ignores the alarm) stays instead.
        if callable(self.previous):
            signal.signal(signal.SIGALRM, self.previous)

    def _arm(self) -> None:
        earliest = min(limit.due for limit in self.limits)
        if math.isinf(earliest):  # only Stop can end the step: no timer until it is clicked
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        signal.setitimer(signal.ITIMER_REAL, max(earliest - time.monotonic(), MIN_DELAY_S))

    def _expire(self, signum: int, frame: Any) -> None:
        if not self.limits:
            return
        now = time.monotonic()
        due = [limit for limit in self.limits if limit.due <= now + MIN_DELAY_S]
        if not due:  # the earliest limit moved later meanwhile
            self._arm()
            return
        first = min(due, key=lambda limit: limit.at)
        first.at = now + REFIRE_S  # code that catches the exception and goes on is stopped again
        self._arm()
        if _reporting(frame):  # IPython is showing the step's traceback: the step has ended
            return
        raise StepStopped(first.message)


def _reporting(frame: Any) -> bool:
    """Whether ``frame`` runs inside IPython's traceback display (``showtraceback``), which can
    take longer than ``REFIRE_S`` on a busy machine and reports a second exception as its own
    failure ("Unexpected exception formatting exception") instead of the step's."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in REPORTERS and "IPython" in code.co_filename:
            return True
        frame = frame.f_back
    return False


_ALARM = _Alarm()


def usable() -> bool:
    """Steps can be interrupted here: POSIX timers, on the main thread."""
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def limit(at: float | None, message: str) -> Iterator[_Limit | None]:
    """Raise :class:`StepStopped` with ``message`` in the code running at ``at`` (monotonic; inf:
    only when :func:`stop_now` is called)."""
    if at is None or not usable():
        yield None
        return
    entry = _Limit(at, message)
    _ALARM.push(entry)
    try:
        yield entry
    finally:
        _ALARM.pop(entry)


class Shield:
    """What a :func:`shielded` block does with its limits when it ends."""

    kept = False

    def keep(self) -> None:
        """Go on holding them off after the block (``SHIELD_S`` from its start at most): the step
        was stopped and has ended, and what follows only reports it."""
        self.kept = True


@contextlib.contextmanager
def shielded() -> Iterator[Shield]:
    """Run the block without the limits active now interrupting it, for ``SHIELD_S`` at most: a
    step's code has ended and its bookkeeping (its undo entry, the cancelling of the cluster jobs
    it left running) runs to its end. A limit pushed inside the block fires as usual; one held off
    that came due meanwhile fires ``REFIRE_S`` after the block, unless :meth:`Shield.keep`."""
    held = [(entry, entry.not_before) for entry in (_ALARM.limits if usable() else [])]
    shield = Shield()
    until = time.monotonic() + SHIELD_S
    for entry, _ in held:
        entry.not_before = max(entry.not_before, until)
    try:
        yield shield
    finally:
        if held and not shield.kept:
            now = time.monotonic()
            for entry, before in held:
                entry.not_before = now + REFIRE_S if entry.at <= now else before
        if held and _ALARM.limits:
            _ALARM._arm()


def time_limit(seconds: float | None, message: str) -> contextlib.AbstractContextManager[Any]:
    """:func:`limit` ``seconds`` from now (None: no limit)."""
    return limit(None if not seconds else time.monotonic() + seconds, message)


def stop_now(entry: _Limit) -> None:
    """Interrupt the step guarded by ``entry`` now; callable from any thread."""
    entry.at = time.monotonic()
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, MIN_DELAY_S)


class TurnWatch:
    """Bounds each step of a turn by the turn's time left (``--timeout``, approval waits
    excluded) and ends it on Stop. Told of each step by the agent (``step_running``, set by the
    step guard) and of each call by the turn's observer."""

    def __init__(
        self,
        timeout_s: float | None,
        cancel: CancelToken,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.cancel = cancel
        self.clock = clock
        # Set at the turn's first event, never before the loop's own start: a step stopped at the
        # watch's deadline is past the loop's too, so the loop ends the turn as timed out.
        self.started: float | None = None
        self.waited = 0.0  # time between a call's start and its step: the approval wait
        self._asked_at: float | None = None
        self._step: contextlib.ExitStack | None = None
        self._entry: _Limit | None = None
        cancel.on_cancel(self._stop)

    def observing(self, observer: TurnObserver) -> TurnObserver:
        """The turn's observer, telling this watch when each call starts (to leave out approval)."""
        return _WatchingObserver(observer, self)

    def begin(self) -> None:
        if self.started is None:
            self.started = self.clock()

    def call_started(self) -> None:
        self.begin()
        self._asked_at = self.clock()

    def step_begins(self) -> None:
        now = self.clock()
        if self._asked_at is not None:
            self.waited += now - self._asked_at
            self._asked_at = None
        at, message = self._deadline(now)
        self._step = contextlib.ExitStack()
        self._entry = self._step.enter_context(limit(at, message))
        if self.cancel.cancelled and self._entry is not None:
            stop_now(self._entry)

    def step_ends(self) -> None:
        step, self._step, self._entry = self._step, None, None
        if step is not None:
            step.close()

    def _deadline(self, now: float) -> tuple[float, str]:
        if self.cancel.cancelled:
            return now, STOPPED
        if self.timeout_s is None:
            return math.inf, STOPPED  # no time limit: armed for the Stop button
        started = self.started if self.started is not None else now
        left = self.timeout_s - (now - started - self.waited)
        message = (
            f"the turn ran past its {self.timeout_s:g} s time limit (--timeout) and the step was "
            "interrupted"
        )
        return now + max(left, 0.0), message

    def _stop(self) -> None:
        entry = self._entry
        if entry is not None:
            entry.message = STOPPED
            stop_now(entry)


class _WatchingObserver(TurnObserver):
    def __init__(self, inner: TurnObserver, watch: TurnWatch) -> None:
        self.inner = inner
        self.watch = watch

    def on_event(self, event: ModelEvent) -> None:
        self.watch.begin()
        self.inner.on_event(event)

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self.watch.begin()
        self.inner.on_response(response, usage, cost_usd)

    def on_tool_start(self, call: ToolCall) -> None:
        self.inner.on_tool_start(call)
        self.watch.call_started()

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.inner.on_tool_end(outcome)


def stop_on_arrival(widget: Any, on_click: Callable[[], None]) -> bool:
    """Call ``on_click`` as soon as a click on ``widget`` reaches the kernel, from any frontend.

    VS Code and JupyterLab < 4.4 send widget clicks on the main shell, whose messages wait while
    the main thread runs a step. ipykernel 7.4's shell-channel thread reads every shell message
    first and asks the comm where a comm message goes (``_reply_subshell_for``, private): the
    click is seen there and ``on_click`` runs on that thread, before the message is routed (it is
    still handled later as usual). False when this ipykernel offers no such hook.
    """
    comm: Any = getattr(widget, "comm", None)
    route = getattr(comm, "_reply_subshell_for", None)
    if not callable(route) or not _routes_comm_messages():
        return False

    # Any: what ipykernel's private router answers, passed on as it is
    def routed(data: Any, default: Any) -> Any:
        if _is_click(data):
            try:
                on_click()
            except Exception:  # the shell channel must keep routing whatever happens here
                log.exception("qloop: Stop could not be applied on the shell channel")
        return route(data, default)

    comm._reply_subshell_for = routed
    return True


def _is_click(data: Any) -> bool:
    content = data.get("content") if isinstance(data, dict) else None
    return (
        data.get("method") == "custom"
        and isinstance(content, dict)
        and (content.get("event") == "click")
    )


def _routes_comm_messages() -> bool:
    """Whether the running kernel's shell-channel thread asks comms where their messages go."""
    try:
        from ipykernel.kernelbase import Kernel
    except ImportError:
        return False
    main = getattr(Kernel, "shell_channel_thread_main", None)
    if main is None or not Kernel.initialized():
        return False
    thread = getattr(Kernel.instance(), "shell_channel_thread", None)
    return thread is not None and "_reply_subshell_for" in main.__code__.co_consts


def clicks_where_sent(widget: Any) -> None:
    """Let ``widget``'s messages be handled on the shell the frontend sends them on.

    ipykernel 7.4 routes a comm's messages to the shell that last published on it: the main one,
    busy running the step. Without that note a click goes to the subshell it was sent on
    (JupyterLab >= 4.4 sends widget messages on one), whose thread handles it meanwhile.
    """
    comm: Any = getattr(widget, "comm", None)
    lock = getattr(comm, "_reply_subshell_lock", None)
    if lock is None:
        return
    with lock:
        if hasattr(comm, "_reply_subshell_id"):
            del comm._reply_subshell_id
