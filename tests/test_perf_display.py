"""A long streamed answer is shown in pieces: a refresh re-sends the growing piece, not the whole text."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output
from traitlets.config import Config

from qloop_kernel.loop import CancelToken
from qloop_kernel.messages import (
    ModelResponse,
    RetryNotice,
    TextDelta,
    ToolCall,
    ToolOutcome,
    Usage,
)
from qloop_kernel.notebook import display as display_module
from qloop_kernel.notebook.display import ANSWER_MIME, TurnDisplay

PARAGRAPH = "The sales in this region grew steadily over the year, with a dip in the summer. " * 3
CODE = "```python\n" + "\n\n".join(f"x{i} = df.sales.sum() * {i}" for i in range(120)) + "\n```"
LONG_CODE = "```python\n" + "\n\n".join(f"x{i} = df.sales.sum() * {i}" for i in range(480)) + "\n```"


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


@pytest.fixture
def shown(shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> Iterator[CapturedIO]:
    monkeypatch.setattr(display_module, "REFRESH_S", 0.0)  # every delta may re-render
    with capture_output() as captured:
        yield captured


def turn() -> TurnDisplay:
    return TurnDisplay(interactive=False, max_turns=5, cancel=CancelToken(), cards_for=set())


def stream(display: TurnDisplay, text: str, size: int = 40) -> None:
    for start in range(0, len(text), size):
        display.on_event(TextDelta(text[start : start + size]))


def answers(captured: CapturedIO) -> dict[str, str]:
    """The text each answer display shows at the end, by display id, in order of appearance."""
    latest: dict[str, str] = {}
    for output in captured.outputs:
        if ANSWER_MIME in output.data:
            latest[output.transient["display_id"]] = output.data[ANSWER_MIME]["markdown"]
    return latest


def sent_chars(captured: CapturedIO) -> int:
    return sum(
        len(o.data[ANSWER_MIME]["markdown"]) for o in captured.outputs if ANSWER_MIME in o.data
    )


def response() -> ModelResponse:
    return ModelResponse([], "end_turn", Usage(10, 10), "claude-x")


def test_a_long_answer_is_sent_in_pieces_cut_between_paragraphs(shown: CapturedIO) -> None:
    text = "\n\n".join(f"## Part {i}\n\n{PARAGRAPH}" for i in range(40))  # about 11,000 chars
    display = turn()
    stream(display, text)
    display.on_response(response(), Usage(10, 10), None)
    pieces = list(answers(shown).values())
    assert len(pieces) >= 4 and all(len(p) <= 2 * display_module.ANSWER_PIECE_CHARS for p in pieces)
    assert "\n\n".join(pieces) == text  # nothing lost, nothing repeated, in order
    # Each delta re-renders only the piece still growing, not the whole text so far.
    deltas = len(text) // 40
    whole_text_each_time = 40 * deltas * (deltas + 1) // 2
    assert sent_chars(shown) < whole_text_each_time / 3


def test_the_pieces_keep_a_code_block_whole(shown: CapturedIO) -> None:
    text = f"{PARAGRAPH}\n\n{CODE}\n\n{PARAGRAPH}"
    display = turn()
    stream(display, text)
    display.on_response(response(), Usage(10, 10), None)
    pieces = list(answers(shown).values())
    assert any(CODE in p for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)


def test_a_piece_that_cannot_be_cut_is_refreshed_less_often_as_it_grows(
    shown: CapturedIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter(i * 0.01 for i in range(100_000))  # 10 ms between deltas
    monkeypatch.setattr(display_module.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(display_module, "REFRESH_S", 0.15)
    display = turn()
    stream(display, LONG_CODE, size=20)  # one block: no paragraph break outside code
    display.on_response(response(), Usage(10, 10), None)
    updates = [o for o in shown.outputs if ANSWER_MIME in o.data]
    deltas = len(LONG_CODE) // 20
    assert len(updates) < deltas / 15 / 2  # fewer than half the fixed-interval refreshes
    assert list(answers(shown).values()) == [LONG_CODE]


def test_a_retry_blanks_every_piece_of_the_failed_attempt(shown: CapturedIO) -> None:
    text = "\n\n".join(PARAGRAPH for _ in range(30))
    display = turn()
    stream(display, text)
    display.on_event(RetryNotice(attempt=1, delay_s=0.5, reason="connection dropped"))
    stream(display, "The whole answer.")
    display.on_response(response(), Usage(10, 10), None)
    shown_now = [t for t in answers(shown).values() if t]
    assert shown_now == ["The whole answer."]


def test_status_after_fast_tool_calls_is_sent_at_most_twice_a_second(shown: CapturedIO) -> None:
    display = turn()
    before = len(shown.outputs)
    for i in range(50):
        call = ToolCall(f"toolu_{i}", "list_variables", {})
        display.on_tool_start(call)
        display.on_tool_end(ToolOutcome(call, [{"type": "text", "text": "x"}], False, "auto", {}))
    status = [
        o
        for o in shown.outputs[before:]
        if "qloop-line" not in o.data.get("text/html", "") and ANSWER_MIME not in o.data
    ]
    assert len(status) <= 1, [json.dumps(o.data) for o in status]
