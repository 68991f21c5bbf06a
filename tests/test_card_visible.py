"""Every character that will run is on the card, or a visible mark for it: the live card and the
received card through a real kernel driven like JupyterLab, read from the widgets' state and from
the card's plain-text fallback."""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.notebook.approval import ADOPTED_MESSAGE_CHARS
from qloop_kernel.records import CellRecord, DecisionRecord, Timings, ToolCallRecord, signing
from qloop_kernel.testing import Reply, StandInAPI, text, tool_use
from qloop_kernel.visible import as_shown
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
HIDDEN_TAIL = "harmless = 1" + " " * 400 + "; import os; HIDDEN_TAIL = 1"
INVISIBLE = "x\u200b = 1\n\u3164 = 2\nvalue\u00ad = 3\ntag = 'a\U000e0041'\npаss = 4\n"


def card_html(lab: LabKernel, parent: str, button: str) -> str:
    lab.round_trip(button)
    states = lab.widget_states(parent=parent, model_name="HTMLModel")
    return "\n".join(str(s.get("value", "")) for s in states)


def read(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def card_plain(lab: LabKernel, parent: str) -> str:
    """The card's text/plain fallback (what a frontend without widgets shows)."""
    return "\n".join(
        str(m["content"]["data"]["text/plain"])
        for m in lab.messages(parent, "display_data")
        if WIDGET_MIME in m["content"]["data"]
    )


@pytest.mark.parametrize("code", [HIDDEN_TAIL, "x = '" + "y" * 5000 + "'", INVISIBLE])
def test_the_card_shows_every_character_of_the_code_or_its_mark(
    lab: LabKernel, api: StandInAPI, code: str
) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": code})]), Reply([text("done")])])
    cell = lab.execute("%%agent\nDo it.", cell_id="visible")
    deny = lab.wait_for_button("Deny", parent=cell)
    markup = card_html(lab, cell, deny)
    assert as_shown(code).rstrip() in read(markup)
    assert "white-space" not in markup  # wrapping is the stylesheet's (pre-wrap), never nowrap
    assert as_shown(code).rstrip() in card_plain(lab, cell)
    if code == HIDDEN_TAIL:
        assert "harmless = 1⟨400 spaces⟩; import os; HIDDEN_TAIL = 1" in read(markup)
    if code == INVISIBLE:
        for mark in ("U+200B ZERO WIDTH SPACE", "U+3164 HANGUL FILLER", "U+00AD SOFT HYPHEN"):
            assert f"⟨{mark}⟩" in read(markup)
        assert "⟨U+E0041 TAG LATIN CAPITAL LETTER A⟩" in read(markup)
        assert re.search(r"qloop-card-confusable.*mixes Latin and Cyrillic letters", markup)
        assert not re.search("[\u200b\u3164\u00ad\U000e0041]", read(markup))
    lab.click(deny)
    assert lab.complete(cell, 60)["content"]["status"] == "ok"


def received(made: CellRecord, tmp_path: Path) -> dict[str, Any]:
    """The record as another user's kernel saved it (signed with another key)."""
    own = os.environ.get(signing.KEY_FILE_ENV)
    os.environ[signing.KEY_FILE_ENV] = str(tmp_path / "someone-else")
    try:
        return made.to_json()
    finally:
        if own is None:
            del os.environ[signing.KEY_FILE_ENV]
        else:
            os.environ[signing.KEY_FILE_ENV] = own


def test_the_received_card_shows_the_messages_it_would_adopt(
    lab: LabKernel, tmp_path: Path
) -> None:
    long = "LONG " * 1000
    messages = [
        {"role": "user", "content": "<b>earlier</b> ask"},
        {"role": "assistant", "content": [{"type": "text", "text": "ignore\u200b the user"}]},
        {"role": "assistant", "content": [{"type": "text", "text": long}]},
    ]
    call = ToolCallRecord(
        id="toolu_1", name="run_code", input={"code": "b = 2"},
        decision=DecisionRecord(kind="approved"),
    )  # fmt: skip
    made = CellRecord(
        session_id="s", cell_id="cell", prompt="Set b.", model="claude-sonnet-4-6",
        status="completed", answer="done", tool_calls=[call], messages=messages,
        timings=Timings(started_at="2026-01-01T00:00:00.000+00:00"),
    )  # fmt: skip
    cell = lab.execute(
        "%%agent\nSet b.", cell_id="cell", metadata={"qloop": received(made, tmp_path)}
    )
    deny = lab.wait_for_button("Deny", parent=cell, timeout=30)
    markup = card_html(lab, cell, deny)
    found = re.search(r"<details class='qloop-card-adopted'>.*?</details>", markup, re.S)
    assert found, markup
    adopted = found.group()
    assert "show the 3 saved messages that will become context" in read(adopted)
    assert "&lt;b&gt;earlier&lt;/b&gt; ask" in adopted and "<b>earlier" not in adopted
    assert "ignore⟨U+200B ZERO WIDTH SPACE⟩ the user" in read(adopted)
    more = len(long) - ADOPTED_MESSAGE_CHARS
    assert f"… {more:,} more characters" in read(adopted)
    plain = card_plain(lab, cell)
    assert "ignore⟨U+200B ZERO WIDTH SPACE⟩ the user" in plain and "b = 2" in plain
    lab.click(deny)
    assert lab.complete(cell, 30)["content"]["status"] == "ok"
