"""A step's limits: the shield around its bookkeeping, on the kernel's main thread."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell

from qloop_kernel.notebook import deadline
from qloop_kernel.notebook.code import CodeRunner
from qloop_kernel.notebook.deadline import REFIRE_S, StepStopped, limit, shielded, time_limit


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    ipython = InteractiveShell.instance()
    ipython.extension_manager.load_extension("qloop_kernel")
    yield ipython
    ipython.extension_manager.unload_extension("qloop_kernel")
    InteractiveShell.clear_instance()


def sleep_until_stopped(seconds: float) -> float:
    """Sleep up to ``seconds``; how long it slept before a StepStopped, or inf."""
    started = time.monotonic()
    try:
        time.sleep(seconds)
    except StepStopped:
        return time.monotonic() - started
    return float("inf")


def test_a_limit_due_inside_a_shield_fires_after_it() -> None:
    with limit(time.monotonic() + 0.05, "the turn's time is up"):
        with shielded():
            assert sleep_until_stopped(0.3) == float("inf")
        left = time.monotonic()
        with pytest.raises(StepStopped, match="the turn's time is up"):
            time.sleep(5)
        assert time.monotonic() - left >= REFIRE_S - 0.05  # what follows the shield gets its time


def test_a_limit_pushed_inside_a_shield_fires() -> None:
    with limit(float("inf"), "stopped"), shielded(), time_limit(0.05, "inner"):
        assert sleep_until_stopped(5) < 1


def test_a_kept_shield_holds_its_limits_until_they_are_popped() -> None:
    with limit(time.monotonic() + 0.05, "the turn's time is up"):
        with shielded() as shield:
            time.sleep(0.1)
            shield.keep()
        assert sleep_until_stopped(REFIRE_S * 2) == float("inf")


def test_a_shield_holds_its_limits_off_for_a_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deadline, "SHIELD_S", 0.3)
    with limit(time.monotonic() + 0.05, "the turn's time is up"), shielded() as shield:
        shield.keep()
        assert 0.25 < sleep_until_stopped(5) < 1  # a hung bookkeeping is cut all the same


class SlowShape:
    """A value whose ``shape`` (read by undo after each step) takes 1 s once the step has run,
    and notes whether a StepStopped cut it."""

    slow = False
    cut: list[str] = []

    @property
    def shape(self) -> tuple[int]:
        if SlowShape.slow:
            try:
                time.sleep(1)
            except StepStopped as stopped:
                SlowShape.cut.append(str(stopped))
                raise
        return (1,)


def test_a_stopped_steps_bookkeeping_is_not_cut_by_the_limit_firing_again(
    shell: InteractiveShell,
) -> None:
    shell.user_ns.update(value=SlowShape(), SlowShape=SlowShape)
    runner = CodeRunner(shell)
    with limit(time.monotonic() + 0.3, "the turn ran past its time limit") as entry:
        ran = runner.execute("value.flag = 1\nSlowShape.slow = True\nimport time\ntime.sleep(30)")
        assert entry is not None and entry.due > time.monotonic()  # held off: the stop is reported
    assert SlowShape.cut == []  # undo read the value to its end, after the stop
    assert isinstance(ran.error, StepStopped) and "time limit" in str(ran.error)
    assert ran.step is not None
