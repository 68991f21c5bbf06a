"""Blocking waits inside a running cell: clicks, queued cells, interrupts, wake-ups, nesting.

The kernel tests drive a real ipykernel as JupyterLab does (tests/kernel_client.py).
"""

from __future__ import annotations

import re
import threading
import time
import types
import uuid
from collections.abc import Callable

import pytest

from qloop_kernel.notebook import pump
from qloop_kernel.notebook.pump import (
    PumpUnavailable,
    ShellPump,
    ThreadWaiter,
    check_supported,
    wait_until,
)
from tests.kernel_client import LabKernel

WAITING_CELL = """
import ipywidgets as widgets
from qloop_kernel.notebook.pump import wait_until
clicked = []
button = widgets.Button(description={label!r})
button.on_click(lambda _: clicked.append({label!r}))
display(button)
print("waiting", flush=True)
resumed = wait_until(lambda: bool(clicked), timeout={timeout})
print("resumed", resumed, "x during wait:", globals().get("x_{suffix}"))
"""


def waiting_cell(label: str, timeout: float = 20.0) -> str:
    """A cell that shows a button labelled ``label`` and waits for its click."""
    return WAITING_CELL.format(label=label, timeout=timeout, suffix=_suffix(label))


def _suffix(label: str) -> str:
    return re.sub(r"\W", "_", label)


def unique(prefix: str) -> str:
    return f"{prefix} {uuid.uuid4().hex[:8]}"


def start_waiting(kernel: LabKernel, label: str) -> tuple[str, str]:
    """Execute a waiting cell; return its msg_id and the button's comm id once it waits."""
    cell = kernel.execute(waiting_cell(label))
    button = kernel.wait_for_button(label, parent=cell)
    kernel.wait_for_output(cell, "waiting")
    kernel.round_trip(button)  # answered only from inside the pump: the cell is in wait_until
    return cell, button


def assert_still_waiting(kernel: LabKernel, cell: str, widget: str) -> None:
    """After a round trip through the pump (so every request sent before is in), the cell
    is still busy and has neither resumed nor replied."""
    kernel.round_trip(widget)
    assert not kernel.replied(cell)
    assert "resumed" not in kernel.stdout(cell)
    assert kernel.status(cell) == "busy"


# -- in a kernel ---------------------------------------------------------------------------------


@pytest.mark.kernel
@pytest.mark.parametrize("on_subshell", [False, True], ids=["main-shell", "subshell"])
def test_click_resumes_the_waiting_cell(kernel: LabKernel, on_subshell: bool) -> None:
    subshell = kernel.create_subshell() if on_subshell else None
    label = unique("Approve")
    cell, button = start_waiting(kernel, label)
    assert_still_waiting(kernel, cell, button)

    kernel.click(button, subshell_id=subshell)

    assert kernel.complete(cell)["content"]["status"] == "ok"
    assert "resumed True" in kernel.stdout(cell)
    assert kernel.run("print(clicked)") == f"[{label!r}]\n"


@pytest.mark.kernel
def test_queued_requests_wait_for_the_cell_and_keep_their_order(kernel: LabKernel) -> None:
    label = unique("Run all")
    cell_a, button = start_waiting(kernel, label)
    cell_b = kernel.execute(f"x_{_suffix(label)} = 2\nprint('B ran')")
    info = kernel.request("kernel_info_request")
    assert_still_waiting(kernel, cell_a, button)
    assert kernel.messages(cell_b) == []  # B has not even started: no busy, no execute_input
    assert not kernel.replied(cell_b)
    assert kernel.reply(info)["msg_type"] == "kernel_info_reply"  # answered during the wait

    kernel.click(button)

    reply_a, reply_b = kernel.complete(cell_a), kernel.complete(cell_b)
    assert reply_b["content"]["status"] == "ok"
    assert reply_b["content"]["execution_count"] == reply_a["content"]["execution_count"] + 1
    assert "resumed True x during wait: None" in kernel.stdout(cell_a)
    assert kernel.stdout(cell_b) == "B ran\n"
    replies = [
        m["parent_header"]["msg_id"] for channel, m in kernel.history() if channel == "shell"
    ]
    assert [r for r in replies if r in (cell_a, cell_b, info)] == [info, cell_a, cell_b]


@pytest.mark.kernel
def test_a_reloaded_page_gets_kernel_and_comm_info_while_a_cell_waits(kernel: LabKernel) -> None:
    label = unique("Reload")
    cell, button = start_waiting(kernel, label)
    queued = kernel.execute("print('queued')")
    started = time.monotonic()
    info = kernel.request("kernel_info_request")
    comms = kernel.request("comm_info_request", {"target_name": "jupyter.widget"})
    assert kernel.reply(info, 5)["content"]["status"] == "ok"
    listed = kernel.reply(comms, 5)["content"]["comms"]
    assert time.monotonic() - started < 5
    assert button in listed  # the frontend restores the waiting card's widgets from these
    assert_still_waiting(kernel, cell, button)
    assert kernel.messages(queued) == []  # an execute request still waits for the cell
    kernel.click(button)
    assert kernel.complete(queued)["content"]["status"] == "ok"


@pytest.mark.kernel
def test_wait_times_out_and_releases_queued_cells(kernel: LabKernel) -> None:
    cell = kernel.execute(
        "import time\nfrom qloop_kernel.notebook.pump import wait_until\n"
        "start = time.monotonic()\n"
        "print(wait_until(lambda: False, timeout=0.3), time.monotonic() - start)"
    )
    queued = kernel.execute("print('queued ran')")
    assert kernel.complete(queued)["content"]["status"] == "ok"
    result, elapsed = kernel.stdout(cell).split()
    assert result == "False"
    assert 0.3 <= float(elapsed) < 2.0
    assert kernel.stdout(queued) == "queued ran\n"


@pytest.mark.kernel
def test_requests_an_ended_wait_handed_back_are_still_queued_for_the_next_look(
    kernel: LabKernel,
) -> None:
    label = unique("First wait")
    cell = kernel.execute(
        waiting_cell(label)
        + "from qloop_kernel.notebook.queued import queued_agent_cells\n"
        + "print('queued:', [c.cell_id for c in queued_agent_cells()])\n"
    )
    button = kernel.wait_for_button(label, parent=cell)
    kernel.wait_for_output(cell, "waiting")
    agent = kernel.execute("%%agent\nDouble x.", cell_id="queued-agent-cell")
    kernel.round_trip(button)  # the agent cell's request is in: held by the first wait
    kernel.click(button)  # the first wait ends and hands it back; the cell still runs
    assert kernel.complete(cell)["content"]["status"] == "ok"
    assert "queued: ['queued-agent-cell']" in kernel.stdout(cell)
    kernel.complete(agent)  # it then runs (an error here: the extension is not loaded)


@pytest.mark.kernel
def test_comms_opened_and_closed_by_the_frontend_are_handled_during_the_wait(
    kernel: LabKernel,
) -> None:
    target = unique("qloop-test").replace(" ", "-")
    cell = kernel.execute(
        "from qloop_kernel.notebook.pump import wait_until\n"
        "events = []\n"
        "def opened(comm, msg):\n"
        "    events.append(('open', msg['content']['data']))\n"
        "    comm.on_msg(lambda m: events.append(('msg', m['content']['data'])))\n"
        "    comm.on_close(lambda m: events.append(('close',)))\n"
        f"get_ipython().kernel.comm_manager.register_target({target!r}, opened)\n"
        "print('waiting', flush=True)\n"
        "print(wait_until(lambda: events and events[-1] == ('close',), timeout=20), events)\n"
    )
    kernel.wait_for_output(cell, "waiting")
    comm_id = kernel.comm_open(target, {"hello": 1})
    kernel.comm_msg(comm_id, {"n": 2})
    kernel.comm_close(comm_id)

    assert kernel.complete(cell)["content"]["status"] == "ok"
    expected = "True [('open', {'hello': 1}), ('msg', {'n': 2}), ('close',)]\n"
    assert kernel.stdout(cell).endswith(expected)


@pytest.mark.kernel
def test_wake_from_a_worker_thread_ends_the_wait_at_once(kernel: LabKernel) -> None:
    out = kernel.run(
        "import queue, threading, time\n"
        "from qloop_kernel.notebook.pump import POLL_INTERVAL, ShellPump, wait_until, wake\n"
        "pump = ShellPump.current()\n"
        "pump.poll_interval = 30.0  # only wake() can end a wait promptly\n"
        "events, blocking = queue.Queue(), threading.Event()\n"
        "def arrived():\n"
        "    if events.empty():\n"
        "        blocking.set()  # the main thread goes on to block in the pump\n"
        "        return False\n"
        "    return True\n"
        "def worker():\n"
        "    for i in range(3):\n"
        "        assert blocking.wait(5)\n"
        "        blocking.clear()\n"
        "        events.put(time.monotonic())\n"
        "        wake()\n"
        "threading.Thread(target=worker).start()\n"
        "latencies = []\n"
        "try:\n"
        "    for _ in range(3):\n"
        "        assert wait_until(arrived, timeout=5)\n"
        "        latencies.append(time.monotonic() - events.get())\n"
        "finally:\n"
        "    pump.poll_interval = POLL_INTERVAL\n"
        "print(max(latencies))\n"
    )
    assert float(out) < 1.0


@pytest.mark.kernel
def test_stop_button_works_while_a_worker_streams_events(kernel: LabKernel) -> None:
    label = unique("Stop")
    cell = kernel.execute(
        "import queue, threading, time\n"
        "import ipywidgets as widgets\n"
        "from qloop_kernel.notebook.pump import wait_until, wake\n"
        "events, stop = queue.Queue(), threading.Event()\n"
        "def stream():\n"
        "    while not stop.is_set():\n"
        "        events.put('delta')\n"
        "        wake()\n"
        "        time.sleep(0.02)\n"
        "worker = threading.Thread(target=stream)\n"
        f"button = widgets.Button(description={label!r})\n"
        "button.on_click(lambda _: (stop.set(), wake()))\n"
        "display(button)\n"
        "worker.start()\n"
        "received = 0\n"
        "while not stop.is_set():\n"
        "    wait_until(lambda: not events.empty() or stop.is_set())\n"
        "    while not events.empty():\n"
        "        events.get()\n"
        "        received += 1\n"
        "        if received == 5: print('streaming', flush=True)\n"
        "worker.join(5)\n"
        "print('stopped', received >= 5, worker.is_alive())\n"
    )
    button = kernel.wait_for_button(label, parent=cell)
    kernel.wait_for_output(cell, "streaming")

    kernel.click(button)

    assert kernel.complete(cell)["content"]["status"] == "ok"
    assert kernel.stdout(cell).endswith("stopped True False\n")


@pytest.mark.kernel
def test_nested_wait_in_a_widget_callback(kernel: LabKernel) -> None:
    outer_label, inner_label = unique("Outer"), unique("Inner")
    cell = kernel.execute(
        "import ipywidgets as widgets\n"
        "from qloop_kernel.notebook.pump import wait_until\n"
        "log = []\n"
        f"outer = widgets.Button(description={outer_label!r})\n"
        f"inner = widgets.Button(description={inner_label!r})\n"
        "inner.on_click(lambda _: log.append('inner clicked'))\n"
        "def on_outer(_):\n"
        "    log.append('outer clicked')\n"
        "    wait_until(lambda: 'inner clicked' in log, timeout=20)\n"
        "    log.append('outer done')\n"
        "outer.on_click(on_outer)\n"
        "display(outer, inner)\n"
        "print('waiting', flush=True)\n"
        "print(wait_until(lambda: 'outer done' in log, timeout=20), log)\n"
    )
    outer = kernel.wait_for_button(outer_label, parent=cell)
    inner = kernel.wait_for_button(inner_label, parent=cell)
    kernel.wait_for_output(cell, "waiting")
    queued = kernel.execute("print('queued ran', log)")

    kernel.click(outer)
    assert_still_waiting(kernel, cell, inner)  # the echo comes from the nested wait's pump
    kernel.click(inner)

    assert kernel.complete(queued)["content"]["status"] == "ok"
    assert kernel.stdout(cell).endswith("True ['outer clicked', 'inner clicked', 'outer done']\n")
    assert kernel.stdout(queued) == "queued ran ['outer clicked', 'inner clicked', 'outer done']\n"


@pytest.mark.kernel
def test_pump_facts_in_a_kernel(kernel: LabKernel) -> None:
    out = kernel.run(
        "import threading\n"
        "from qloop_kernel.notebook.pump import ShellPump, ThreadWaiter, check_supported, waiter\n"
        "check_supported()\n"
        "pump = ShellPump.current()\n"
        "found = {}\n"
        "def off_main_thread():\n"
        "    found['waiter'] = type(waiter()).__name__\n"
        "    try:\n"
        "        pump.wait(lambda: True)\n"
        "    except RuntimeError as error:\n"
        "        found['error'] = str(error)\n"
        "thread = threading.Thread(target=off_main_thread)\n"
        "thread.start(); thread.join()\n"
        "print(pump is ShellPump.current(), waiter() is pump, pump.waiting)\n"
        "print(found['waiter'])\n"
        "print(found['error'])\n"
    )
    assert out.splitlines() == [
        "True True False",
        "ThreadWaiter",
        "ShellPump.wait() must be called on the kernel's main thread",
    ]


@pytest.mark.kernel
def test_interrupt_while_waiting(fresh_kernel: LabKernel) -> None:
    kernel = fresh_kernel
    kernel.run(
        "from qloop_kernel.notebook.pump import ShellPump\n"
        "pump = ShellPump.current()\n"
        "original = pump._stream._recv_callback"
    )
    label = unique("Interrupt me")
    cell, button = start_waiting(kernel, label)
    queued = kernel.execute("x_queued = 1")

    started = time.monotonic()
    kernel.interrupt()
    reply = kernel.reply(cell, timeout=5)
    elapsed = time.monotonic() - started

    assert reply["content"]["status"] == "error"
    assert reply["content"]["ename"] == "KeyboardInterrupt"
    assert elapsed < 1.5
    assert kernel.reply(queued)["content"]["status"] == "aborted"
    kernel.click(button)  # handled by the kernel's own dispatch again
    out = kernel.run(
        "print(clicked, pump.waiting, pump._stream._recv_callback is original,"
        " 'x_queued' in globals())"
    )
    assert out == f"[{label!r}] False True False\n"


@pytest.mark.kernel
def test_waiting_cell_after_a_kernel_restart(fresh_kernel: LabKernel) -> None:
    kernel = fresh_kernel
    start_waiting(kernel, unique("Before restart"))
    kernel.restart()  # kills the blocked kernel, as "Restart Kernel" does
    assert kernel.run("print('clicked' in globals())") == "False\n"

    cell, button = start_waiting(kernel, unique("After restart"))
    kernel.click(button)
    assert kernel.complete(cell)["content"]["status"] == "ok"
    assert "resumed True" in kernel.stdout(cell)


@pytest.mark.kernel
def test_lab_and_headless_execute_requests(kernel: LabKernel) -> None:
    code = "print(sorted(get_ipython().kernel.get_parent()['metadata'].items()))"
    lab = kernel.run(code, cell_id="cell-1", metadata={"tags": ["x"]})
    headless = kernel.run(code, headless=True)
    assert lab == (
        "[('cellId', 'cell-1'), ('deletedCells', []), ('recordTiming', False), ('tags', ['x'])]\n"
    )
    assert headless == "[]\n"


# -- outside a kernel ----------------------------------------------------------------------------


def _wake_once_blocked(done: threading.Event) -> tuple[Callable[[], bool], threading.Thread]:
    """A condition for ``wait_until`` and a thread that sets it and wakes the waiter as soon as
    the condition was found false (the waiter then blocks: ThreadWaiter holds its lock from the
    check until it sleeps, and wake() takes that lock)."""
    checked = threading.Event()

    def condition() -> bool:
        if not done.is_set():
            checked.set()
        return done.is_set()

    def work() -> None:
        assert checked.wait(5)
        done.set()
        pump.wake()

    thread = threading.Thread(target=work)
    thread.start()
    return condition, thread


def test_outside_a_kernel_there_is_no_pump() -> None:
    assert ShellPump.current() is None
    assert isinstance(pump.waiter(), ThreadWaiter)
    check_supported()  # nothing to check without a kernel


def test_wait_until_returns_on_wake_from_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pump.waiter(), "poll_interval", 30.0)  # only wake() ends it promptly
    done = threading.Event()
    condition, worker = _wake_once_blocked(done)
    started = time.monotonic()
    assert wait_until(condition, timeout=5)
    assert time.monotonic() - started < 1.0
    worker.join()


def test_wait_until_times_out() -> None:
    started = time.monotonic()
    assert wait_until(lambda: False, timeout=0.2) is False
    assert 0.2 <= time.monotonic() - started < 2.0


def test_done_already_true_returns_without_blocking() -> None:
    waiter = ThreadWaiter()
    waiter.poll_interval = 30.0
    started = time.monotonic()
    assert waiter.wait(lambda: True, timeout=10)
    assert waiter.wait(lambda: True, timeout=0)
    assert time.monotonic() - started < 1.0


def test_unsupported_kernel_is_reported_clearly() -> None:
    stand_in = types.SimpleNamespace(session=types.SimpleNamespace(feed_identities=print))
    with pytest.raises(PumpUnavailable, match=r"SimpleNamespace\.session\.unpack is missing"):
        check_supported(stand_in)
    with pytest.raises(PumpUnavailable, match=r"ipykernel \S+, pyzmq \S+.*ipykernel>=7\.1,<8"):
        ShellPump(stand_in)
