"""The approval card and its typed decisions, clicked with ipywidgets' ``Button.click()`` (no kernel).

A click decides at once; ``wait()`` then returns without blocking. Where a test needs the card to
really wait (a click from another thread, an interrupt), ``blocked`` tells it when the wait found
no decision yet and goes on to sleep.
"""

from __future__ import annotations

import html
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as widgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from traitlets.config import Config

from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook import approval, pump
from qloop_kernel.notebook.approval import ApprovalCard, CardApprover
from qloop_kernel.policy.permissions import (
    AlwaysAllow,
    ApprovalRequest,
    Approve,
    ApproveEdited,
    Deny,
    ReplayRequest,
)

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WAIT_CAP = 10.0


def code_request(code: str = "v = 1", **other: Any) -> ApprovalRequest:
    return ApprovalRequest(
        ToolCall("toolu_1", "run_code", {"code": code, **other}), "run_code", "code"
    )


def text_of(card: ApprovalCard) -> str:
    """What the card's HTML parts show, without tags."""
    parts = [
        c.value
        for c in card.widget.children
        if isinstance(c, widgets.HTML) and c.layout.display != "none"
    ]
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(parts)))


def status(card: ApprovalCard) -> str:
    """The decision on the card's folded line."""
    found = re.search(r"<span class='qloop-card-decision'>(.*?)</span>", card.status.value)
    return html.unescape(found.group(1)) if found else ""


def assert_closed(card: ApprovalCard) -> None:
    assert all(item.disabled for item in [*card.buttons, card.editor])


# -- one click, one typed decision ------------------------------------------------------------


def test_approve() -> None:
    card = ApprovalCard(code_request())
    assert card.decision is None and not any(b.disabled for b in card.buttons)
    card.approve.click()
    assert card.decision == Approve()
    assert card.wait() == Approve()
    assert_closed(card)
    assert status(card) == "✔ approved"
    assert "qloop-card-decision" in card.status.value


def test_deny_sends_the_reason_typed_next_to_the_button() -> None:
    card = ApprovalCard(code_request())
    card.reason.value = "  not on the shared data  "
    card.deny.click()
    assert card.wait() == Deny("not on the shared data")
    assert_closed(card)
    assert status(card) == "✘ denied: not on the shared data"


def test_deny_without_a_reason() -> None:
    card = ApprovalCard(code_request())
    card.deny.click()
    assert card.wait() == Deny("")
    assert status(card) == "✘ denied"


def test_edited_code_is_the_decision() -> None:
    card = ApprovalCard(code_request("v = 1", note="kept"))
    assert card.editor.layout.display == "none" and card.editor.value == "v = 1"
    card.edit.click()
    assert card.editor.layout.display == "block"
    card.editor.value = "v = 2"
    card.approve.click()
    assert card.wait() == ApproveEdited({"code": "v = 2", "note": "kept"})
    assert_closed(card)
    assert status(card) == "✔ approved with your edits"


def test_an_editor_opened_but_left_unchanged_approves_as_written() -> None:
    card = ApprovalCard(code_request())
    card.edit.click()
    card.approve.click()
    assert card.wait() == Approve()


def test_always_allow() -> None:
    card = ApprovalCard(code_request())
    assert card.always in card.buttons
    card.always.click()
    assert card.wait() == AlwaysAllow()
    assert_closed(card)
    assert status(card) == "✔ approved (always allowed for this session)"


def test_always_allow_keeps_the_edits() -> None:
    card = ApprovalCard(code_request())
    card.editor.value = "v = 3"
    card.always.click()
    assert card.wait() == AlwaysAllow({"code": "v = 3"})
    assert status(card) == "✔ approved with your edits (always allowed for this session)"


def test_the_first_click_decides() -> None:
    card = ApprovalCard(code_request())
    card.deny.click()
    card.approve.click()
    card.always.click()
    assert card.wait() == Deny("")


# -- what the card shows ----------------------------------------------------------------------


def test_the_card_shows_the_code_and_the_buttons_that_apply() -> None:
    card = ApprovalCard(code_request("total = df['x'].sum()"), allow_always=False)
    assert [b.description for b in card.buttons if isinstance(b, widgets.Button)] == [
        "Approve",
        "Deny",
        "Edit",
    ]
    assert card.reason in card.buttons
    shown = text_of(card)
    assert "run_code wants to run — approve?" in shown
    assert "total = df['x'].sum()" in shown
    assert "qloop-approval-card" in card.widget._dom_classes


def test_a_tool_without_code_shows_its_input_and_no_editor() -> None:
    request = ApprovalRequest(
        ToolCall("toolu_2", "<b>drop</b>", {"table": "<i>sales</i>"}), "<b>drop</b>"
    )
    card = ApprovalCard(request)
    assert card.edit not in card.buttons
    assert "<b>drop</b>" not in card.widget.children[0].value  # the title is text, not markup
    assert "<i>sales</i>" not in card.widget.children[1].value
    shown = text_of(card)
    assert "<b>drop</b> wants to run" in shown and '"table": "<i>sales</i>"' in shown
    card.approve.click()
    assert card.wait() == Approve()


def test_a_replay_card_lists_every_step_and_the_notices() -> None:
    steps = ["y = x * 2", "print(y)"]
    request = ReplayRequest(
        "Replay 2 saved code steps",
        tuple(steps),
        ("run_code", "run_code"),
        (None, None),
        details={"notices": ["1 saved message will become context"]},
    )
    card = ApprovalCard(request)
    shown = text_of(card)
    assert re.search(
        r"1 saved message will become context.*step 1\s*y = x \* 2.*step 2\s*print\(y\)",
        shown,
        re.S,
    )
    assert card.edit not in card.buttons


# -- waiting ------------------------------------------------------------------------------------


@pytest.fixture
def blocked(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once the card's wait checked for a decision, found none, and goes on to sleep.

    ``wait_until`` is wrapped, not replaced: the real waiter still blocks and wakes. Its lock is
    held from that check until it sleeps, so a click after this event cannot be missed. A wait
    that nobody ends fails the test after ``WAIT_CAP`` seconds instead of hanging it.
    """
    event = threading.Event()
    real = pump.wait_until  # what approval imported

    def wait_until(done: Callable[[], bool], timeout: float | None = None) -> bool:
        def check() -> bool:
            found = done()
            if not found:
                event.set()
            return found

        return real(check, timeout if timeout is not None else WAIT_CAP)

    monkeypatch.setattr(approval, "wait_until", wait_until)
    monkeypatch.setattr(pump.waiter(), "poll_interval", 30.0)  # only a wake() ends the wait soon
    return event


def run_when(event: threading.Event, action: Callable[[], object]) -> threading.Thread:
    def work() -> None:
        assert event.wait(10), "the card never waited"
        action()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_click_from_another_thread_ends_the_wait_at_once(blocked: threading.Event) -> None:
    card = ApprovalCard(code_request())
    clicker = run_when(blocked, card.approve.click)  # ipykernel 7.0-7.3 run callbacks on a subshell
    started = time.monotonic()
    assert card.wait() == Approve()
    assert time.monotonic() - started < 2.0
    clicker.join(5)
    assert_closed(card)


def test_an_interrupt_while_waiting_closes_the_card_unanswered(blocked: threading.Event) -> None:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    main = threading.main_thread().ident
    assert main is not None and threading.current_thread() is threading.main_thread()
    card = ApprovalCard(code_request())
    try:
        interrupter = run_when(blocked, lambda: signal.pthread_kill(main, signal.SIGINT))
        with pytest.raises(KeyboardInterrupt):
            card.wait()
        interrupter.join(5)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert card.decision is None
    assert_closed(card)
    assert status(card) == "interrupted — not run"


# -- the approver --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


def find_button(root: widgets.Widget, description: str) -> widgets.Button:
    """The button labelled ``description`` anywhere in a widget tree."""
    if isinstance(root, widgets.Button) and root.description == description:
        return root
    for child in getattr(root, "children", ()):
        try:
            return find_button(child, description)
        except LookupError:
            continue
    raise LookupError(description)


def displayed_card(captured: CapturedIO) -> widgets.Widget:
    """The widget a frontend would render for the one output of the cell."""
    [output] = captured.outputs
    model_id = output.data[WIDGET_MIME]["model_id"]
    card: widgets.Widget = widgets.widget_serialization["from_json"](f"IPY_MODEL_{model_id}", None)
    return card


def test_the_approver_shows_the_card_in_the_cell_and_returns_the_click(
    shell: InteractiveShell, blocked: threading.Event
) -> None:
    with capture_output() as captured:
        clicker = run_when(blocked, lambda: find_button(displayed_card(captured), "Deny").click())
        decision = CardApprover(allow_always=True).decide(code_request())
        clicker.join(5)
    assert decision == Deny("")
    card = displayed_card(captured)
    assert "qloop-approval-card" in card._dom_classes
    assert find_button(card, "Always allow").disabled


def test_the_approver_can_leave_out_always_allow(
    shell: InteractiveShell, blocked: threading.Event
) -> None:
    with capture_output() as captured:
        clicker = run_when(
            blocked, lambda: find_button(displayed_card(captured), "Approve").click()
        )
        decision = CardApprover(allow_always=False).decide(code_request())
        clicker.join(5)
    assert decision == Approve()
    with pytest.raises(LookupError):
        find_button(displayed_card(captured), "Always allow")


def test_an_interrupt_while_the_waiting_comm_opens_still_closes_the_card(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interrupt may land after the card is shown and before the wait begins (here, while
    the comm announcing the waiting card opens): the card shown must not stay clickable."""
    import comm

    from qloop_kernel.notebook.waiting import WAITING_TARGET

    create = comm.create_comm

    def interrupted(**args: Any) -> Any:
        if args.get("target_name") == WAITING_TARGET:
            raise KeyboardInterrupt
        return create(**args)

    monkeypatch.setattr(comm, "create_comm", interrupted)
    with capture_output() as captured, pytest.raises(KeyboardInterrupt):
        CardApprover(allow_always=True, cell_id="cell-1").decide(code_request())
    card = displayed_card(captured)
    for label in ("Approve", "Deny", "Always allow"):
        assert find_button(card, label).disabled
    assert "qloop-card-done" in card._dom_classes


# -- after the decision, the card folds to one line ----------------------------------------------


def test_a_decided_card_folds_to_its_decision_tool_and_first_line_of_code() -> None:
    card = ApprovalCard(code_request("\n\ndf = df.dropna()\nlen(df)"))
    card.approve.click()
    card.wait()
    for part in (card.header, card.body, card.editor, card.row):
        assert part.layout.display == "none"
    assert "qloop-card-done" in card.widget._dom_classes
    folded = card.status.value
    assert folded.startswith("<details class='qloop-card-folded'><summary>")
    line = html.unescape(re.sub(r"<[^>]+>", "", folded.split("</summary>")[0]))
    assert line == "✔ approved · run_code · df = df.dropna()"
    details = folded.split("</summary>")[1]
    assert "len" in details and "qloop-code" in details  # the whole card, a click away
    card.finished(0.42, failed=False)
    line = html.unescape(re.sub(r"<[^>]+>", "", card.status.value.split("</summary>")[0]))
    assert line == "✔ approved · run_code · df = df.dropna() · 0.4 s"
    card.finished(75, failed=True)
    line = html.unescape(re.sub(r"<[^>]+>", "", card.status.value.split("</summary>")[0]))
    assert line.endswith(" · df = df.dropna() · failed after 1 min 15 s")


def test_a_long_first_line_is_cut_on_the_folded_line() -> None:
    card = ApprovalCard(code_request("x = " + "1 + " * 40 + "1"))
    card.deny.click()
    card.wait()
    first = re.search(r"<code class='qloop-card-first-line'>(.*?)</code>", card.status.value)
    assert first is not None and len(first.group(1)) == approval.FOLDED_CODE_CHARS
    assert first.group(1).endswith("…") and status(card) == "✘ denied"


def test_an_edited_card_shows_what_the_edit_changed() -> None:
    card = ApprovalCard(code_request("a = 1\nb = 2\nc = 3"))
    card.edit.click()
    card.editor.value = "a = 10\nb = 20\nc = 3"
    card.approve.click()
    card.wait()
    assert "a = 10" in card.status.value.split("</summary>")[0]  # the folded line: the edit
    changed = html.unescape(card.status.value.split("what you changed:")[1])
    assert "<span class='qloop-diff-del'>-a = 1</span>" in changed
    assert "<span class='qloop-diff-del'>-b = 2</span>" in changed
    assert "<span class='qloop-diff-add'>+b = 20</span>" in changed


def test_stop_goes_away_when_the_turn_ends() -> None:
    stop = approval.StopButton(lambda: None)
    assert stop.button.layout.display != "none"
    stop.finish("✔ completed")
    assert stop.button.layout.display == "none" and "completed" in stop.label.value
