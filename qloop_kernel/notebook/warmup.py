"""The first agent cell's heavy imports, warmed after ``%load_ext`` on a background thread.

Without it the first ``%%agent`` cell imports anthropic (about a second), pydantic, ipywidgets and the
notebook modules before its first request. A daemon thread imports them one module at a time while the
kernel is idle, so loading the extension stays fast and the kernel stays responsive.

Two threads importing a package and one of its submodules at the same time can deadlock on Python's
per-module import locks (CPython gh-83065, fixed only in 3.15): the import system then raises
``_DeadlockError`` in one of them, possibly the user's. So the warm-up never imports while a cell runs:
a ``pre_run_cell`` hook pauses it, waiting at most for the one module being imported, and
``post_run_cell`` lets it go on. ``QLOOP_WARMUP=0`` turns it off.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import threading
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

log = logging.getLogger("qloop.warmup")

# In the order the first agent cell imports them: each step's own imports are mostly done already.
# Then every module of ``qloop_kernel.notebook`` (the kernel side), whatever it holds.
MODULES = (
    "pydantic",
    "ipywidgets",
    "anthropic",
    "anthropic.lib.streaming",
    "anthropic.resources.messages",
    "qloop_kernel.conversation",
    "qloop_kernel.model",
    "qloop_kernel.records",
    "qloop_kernel.values.summaries",
    "qloop_kernel.tools.namespace",
)
PAUSE_WAIT_S = 10.0  # a cell waits at most this long for the module being imported
# Loaded at kernel start (``--ext``, the ``extensions`` setting): the kernel is still starting and
# answering the frontend's first requests; the warm-up begins this much later, or at the end of the
# first cell, whichever comes first.
START_DELAY_S = 1.0


def _client_parts() -> None:
    """What the SDK imports lazily on its first request (transports, TLS, the messages resource),
    and the client an agent turn on the configured platform takes: built into the kernel's pool,
    where the first turn finds it. A platform whose clients are not kept, or one that cannot be
    set up yet, gets a throwaway client for the imports."""
    import anthropic

    from ..model import warm_client
    from ..settings import settings_from

    try:
        if warm_client(settings_from({}, os.environ).provider):
            return
    except Exception as exc:  # the cell will say what is wrong with the platform
        log.debug("qloop warm-up could not build the client: %s", exc)
    client = anthropic.Anthropic(api_key="warm-up", base_url="http://127.0.0.1:9", max_retries=0)
    client.messages  # noqa: B018
    client.close()


class Warmup:
    """Runs ``steps`` on a daemon thread, one at a time, never while :meth:`pause` holds it."""

    def __init__(self, steps: Iterable[Callable[[], Any]]) -> None:
        self.steps = list(steps)
        self.done = threading.Event()
        self._going = threading.Event()
        self._going.set()
        self._step = threading.Lock()  # held while a step runs
        self._delay_over = threading.Event()  # set: no start delay left (see start)
        self._delay_s = 0.0
        self.thread = threading.Thread(target=self._run, name="qloop-warmup", daemon=True)

    def start(self, *, delay_s: float = 0.0) -> Warmup:
        """Run the steps, the first one ``delay_s`` from now or at the next :meth:`resume`
        (the end of a cell), whichever comes first; a pause still holds them after that."""
        self._delay_s = delay_s
        if delay_s <= 0:
            self._delay_over.set()
        self.thread.start()
        return self

    def pause(self, *_: Any) -> None:
        """Stop before the next step and wait for the current one to finish (a cell starts)."""
        if self.done.is_set():
            return
        self._going.clear()
        if self._step.acquire(timeout=PAUSE_WAIT_S):
            self._step.release()

    def resume(self, *_: Any) -> None:
        self._delay_over.set()
        self._going.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    def _run(self) -> None:
        try:
            self._delay_over.wait(self._delay_s)
            for step in self.steps:
                self._run_step(step)
        finally:
            self.done.set()

    def _run_step(self, step: Callable[[], Any]) -> None:
        while True:
            self._going.wait()
            with self._step:
                if not self._going.is_set():  # paused between the wait and the lock
                    continue
                try:
                    step()
                except Exception as exc:  # a missing optional module: the cell imports it itself
                    log.debug("qloop warm-up step %r failed: %s", step, exc)
                return


_current: Warmup | None = None


def start_warmup(shell: Any, *, start_delay_s: float = START_DELAY_S) -> Warmup | None:
    """Warm the agent's imports in the background, paused while cells run (once per process)."""
    global _current
    if os.environ.get("QLOOP_WARMUP", "1").strip() == "0":
        return None
    if _current is None:
        names = [*MODULES, *_notebook_modules()]
        _current = Warmup([*map(_importer, names), _client_parts])
        if _in_a_cell(shell):  # `%load_ext` in a cell: the rest of that cell runs first
            _current.pause()
            _current.start()
        else:  # the kernel is starting: its first replies do not share the GIL with imports
            _current.start(delay_s=start_delay_s)
    events = getattr(shell, "events", None)
    if events is not None:
        events.register("pre_run_cell", _current.pause)
        events.register("post_run_cell", _current.resume)
    return _current


def _in_a_cell(shell: Any) -> bool:
    """Whether an execute request is being handled (not a kernel start with ``--ext``)."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not hasattr(kernel, "get_parent"):
        return True  # a terminal or a plain shell: the extension is loaded from a cell
    header = (kernel.get_parent() or {}).get("header") or {}
    return bool(header.get("msg_type") == "execute_request")


def stop_warmup(shell: Any) -> None:
    """Take the hooks off (the thread ends by itself)."""
    events = getattr(shell, "events", None)
    if _current is None or events is None:
        return
    for name, hook in (("pre_run_cell", _current.pause), ("post_run_cell", _current.resume)):
        if hook in events.callbacks.get(name, []):
            events.unregister(name, hook)
    _current.resume()


def _notebook_modules() -> list[str]:
    from .. import notebook

    return [f"{notebook.__name__}.{m.name}" for m in pkgutil.iter_modules(notebook.__path__)]


def _importer(name: str) -> Callable[[], ModuleType]:
    def step() -> ModuleType:
        return importlib.import_module(name)

    step.__qualname__ = f"import {name}"
    return step
