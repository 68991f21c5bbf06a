"""The approval card's class, reasons, editor and scopes, clicked with ``Button.click()`` (no kernel).

The classifier is the real one, over plain names (a card in a kernel classifies IPython's source).
"""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

from qloop_kernel.messages import ToolCall
from qloop_kernel.notebook.approval import ApprovalCard, highlight, show_unasked
from qloop_kernel.policy.permissions import (
    AlwaysAllow,
    ApprovalRequest,
    Approve,
    ApproveEdited,
    Deny,
)
from qloop_kernel.policy.risk import classify

EXISTING = frozenset({"df", "victim"})


def assess(input: dict[str, Any]) -> Any:
    return classify(str(input["code"]), EXISTING)


def request(code: str) -> ApprovalRequest:
    call = ToolCall("toolu_1", "run_code", {"code": code})
    return ApprovalRequest(call, "run_code", "code", assessment=assess(call.input), classify=assess)


def text_of(card: ApprovalCard) -> str:
    parts = [
        c.value
        for c in card.widget.children
        if isinstance(c, widgets.HTML) and c.layout.display != "none"
    ]
    return html.unescape(re.sub(r"<[^>]+>", "", "\n".join(parts)))


def test_the_card_shows_the_class_and_each_reason_with_its_line() -> None:
    card = ApprovalCard(request("df['a'] = 1\nimport os\nos.remove('x')"))
    assert "qloop-risk-destructive" in card.header.value
    shown = text_of(card)
    assert "line 1: changes df, which exists" in shown and "line 3: removes files" in shown
    read = ApprovalCard(request("len(df)"))
    assert "qloop-risk-read" in read.header.value
    assert "nothing it can see changes state" in text_of(read)


def test_the_editor_replaces_the_code_and_its_class_follows_the_edit() -> None:
    card = ApprovalCard(request("total = 1"))
    assert "total = 1" in text_of(card)
    card.edit.click()
    assert "total = 1" not in text_of(card)  # only the editor holds code now
    assert "editing: the text below is what runs" in text_of(card)
    card.editor.value = "del victim"
    assert "qloop-risk-destructive" in card.header.value
    assert "class of your edit" in text_of(card) and "line 1: deletes victim" in text_of(card)
    card.always.click()
    assert card.wait() == AlwaysAllow({"code": "del victim"}, "session")
    shown = text_of(card)
    assert "your edit, which is what runs:" in shown and "del victim" in shown
    runs, changed = shown.split("what you changed:")
    assert "total = 1" not in runs  # the original is shown only as what the edit removed
    assert "-total = 1" in changed and "+del victim" in changed
    assert card.editor.layout.display == "none"
    assert "(run_code 'read', 'write', 'compute', 'unknown' and 'destructive' steps always" in shown


def test_while_editing_text_the_editor_cannot_show_is_shown_marked() -> None:
    hidden = "total = 1\u200b; x\u3164 = 2" + " " * 40 + "; import os"
    card = ApprovalCard(request(hidden))
    card.edit.click()
    shown = text_of(card)
    assert "the editor's text holds characters it does not show; as it runs:" in shown
    assert "⟨U+200B ZERO WIDTH SPACE⟩" in shown or "U+200B" in shown
    assert "U+3164" in shown and "40 spaces" in shown and "import os" in shown
    card.editor.value = "total = 1"  # the user removed them: nothing more to show
    assert "does not show" not in text_of(card)
    card.editor.value = "tоtal = 1"  # a Cyrillic o: a name that mixes scripts
    assert "does not show" in text_of(card) and "check each letter" in text_of(card)


def test_an_editor_opened_but_unchanged_shows_the_original_after_the_click() -> None:
    card = ApprovalCard(request("total = 1"))
    card.edit.click()
    card.approve.click()
    assert card.wait() == Approve()
    assert "total = 1" in text_of(card) and card.editor.layout.display == "none"


def test_always_allow_offers_the_scopes_it_is_given() -> None:
    card = ApprovalCard(request("x = 1"), scopes=("cell", "session", "notebook"))
    assert card.scope is not None and card.scope in card.buttons
    assert [label for label, _ in card.scope.options] == [
        "for this cell",
        "for this session",
        "for this notebook",
    ]
    assert card.scope.value == "session"
    card.scope.value = "cell"
    card.always.click()
    assert card.wait() == AlwaysAllow(None, "cell")
    assert card.scope.disabled
    assert "(run_code 'read' and 'write' steps always allowed for this cell)" in text_of(card)
    assert ApprovalCard(request("x = 1"), scopes=("session",)).scope is None
    assert (
        ApprovalCard(request("x = 1"), allow_always=False).scope
        not in ApprovalCard(request("x = 1"), allow_always=False).buttons
    )


def test_text_that_arrives_just_after_the_click_is_what_the_decision_holds() -> None:
    card = ApprovalCard(request("x = 1"))
    card.reason.value = "n"  # the first keystroke arrived before the click
    card.deny.click()
    card.reason.value = "not now"  # the rest, held back by the frontend, arrives after it
    started = time.monotonic()
    assert card.wait() == Deny("not now")
    assert time.monotonic() - started >= 0.4  # it waited for the text to settle
    quiet = ApprovalCard(request("x = 1"))
    quiet.approve.click()
    started = time.monotonic()
    assert quiet.wait() == Approve()
    assert time.monotonic() - started < 0.3  # nothing typed: nothing to wait for


def test_an_edit_arriving_after_the_click_is_what_runs() -> None:
    card = ApprovalCard(request("x = 1"))
    card.edit.click()
    card.editor.value = "x = 2"
    card.approve.click()
    card.editor.value = "x = 3"
    assert card.wait() == ApproveEdited({"code": "x = 3"})
    card.editor.value = "x = 4"  # after the decision: nothing changes
    assert card.decision == ApproveEdited({"code": "x = 3"})


def test_code_is_shown_exactly_with_its_blank_lines() -> None:
    shown = html.unescape(re.sub(r"<[^>]+>", "", highlight("\n\nx = 1\n\n")))
    assert shown.startswith("\n\nx = 1")
    assert "⟨U+202E RIGHT-TO-LEFT OVERRIDE⟩" in highlight("s = '\u202e'")


@pytest.fixture
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("why", ["the approval policy 'write' runs it"])
def test_a_call_without_a_card_is_shown_with_its_class_why_and_code(
    shell: InteractiveShell, why: str
) -> None:
    with capture_output() as captured:
        show_unasked(request("made = 1"), why)
    [output] = captured.outputs
    assert output.data["text/plain"] == (f"→ run_code runs without asking (write): {why}\nmade = 1")
    assert "qloop-risk-write" in output.data["text/html"]
