"""The turn display rendered from typed events, captured from an IPython shell (no kernel)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import CapturedIO, RichOutput, capture_output
from traitlets.config import Config

from qloop_kernel.loop import CancelToken
from qloop_kernel.messages import (
    Completed,
    Failed,
    Interrupted,
    MaxTurns,
    ModelResponse,
    RetryNotice,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolOutcome,
    TurnResult,
    Usage,
)
from qloop_kernel.notebook import display as display_module
from qloop_kernel.notebook.display import ANSWER_MIME, TurnDisplay

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
USAGE = Usage(input_tokens=100, output_tokens=30, cache_read_input_tokens=20)


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


@pytest.fixture
def shown(shell: InteractiveShell) -> Iterator[CapturedIO]:
    """What the display publishes, as the kernel would send it (data, transient, update)."""
    with capture_output() as captured:
        yield captured


def published(captured: CapturedIO) -> list[RichOutput]:
    """Every publication in order, with its update flag and display id."""
    return list(captured.outputs)


def display_id(output: RichOutput) -> str:
    return str(output.transient["display_id"])


def lines(captured: CapturedIO) -> list[str]:
    """The one-line notes (tool calls, retries, stops), as their plain text."""
    return [
        o.data["text/plain"]
        for o in published(captured)
        if "qloop-line" in o.data.get("text/html", "")
    ]


def answers(captured: CapturedIO) -> list[tuple[str, bool, str]]:
    """Every publication of model text: (display id, is an update, Markdown)."""
    return [
        (display_id(o), o.update, o.data[ANSWER_MIME]["markdown"])
        for o in published(captured)
        if ANSWER_MIME in o.data
    ]


def headless(cards_for: frozenset[str] = frozenset({"run_code"})) -> TurnDisplay:
    return TurnDisplay(
        interactive=False, max_turns=5, cancel=CancelToken(), cards_for=set(cards_for)
    )


def response() -> ModelResponse:
    return ModelResponse(content=[], stop_reason="end_turn", usage=USAGE, model="claude-x")


def result(stop: Any) -> TurnResult:
    return TurnResult(stop, [], "", USAGE, 0.0012, 1, 0.5, 0.0)


def outcome(
    name: str, *, text: str = "ok", is_error: bool = False, decision: Any = "approved"
) -> ToolOutcome:
    call = ToolCall("toolu_1", name, {})
    return ToolOutcome(
        call, [{"type": "text", "text": text}], is_error, decision, {}, duration_s=0.25
    )


def test_the_status_line_starts_waiting_and_counts_calls_tokens_and_cost(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_response(response(), USAGE, 0.0012)
    turn.finish(result(Completed()))
    first, *updates = published(shown)
    assert first.data == {"text/plain": ""} and first.update is False
    assert [o.update and display_id(o) == display_id(first) for o in updates] == [True] * 3
    texts = [o.data["text/plain"] for o in updates]
    assert texts[0] == "waiting for the model · up to 5 model calls"
    assert re.fullmatch(
        r"model call 1/5 · \d+\.\d s · 150 tokens \(20 cached\) · \$0\.0012", texts[1]
    )
    assert re.fullmatch(r"completed · model call 1/5 · \d+\.\d s · 150 tokens .*", texts[2])
    assert lines(shown) == []  # a completed turn adds no stop line


def test_the_status_line_is_singular_for_one_and_leaves_out_an_empty_cache(
    shown: CapturedIO,
) -> None:
    turn = TurnDisplay(interactive=False, max_turns=1, cancel=CancelToken(), cards_for=set())
    one = Usage(input_tokens=1)
    turn.on_response(
        ModelResponse(content=[], stop_reason="end_turn", usage=one, model="x"), one, None
    )
    texts = [o.data["text/plain"] for o in published(shown)]
    assert texts[1] == "waiting for the model · up to 1 model call"
    assert re.fullmatch(r"model call 1/1 · \d+\.\d s · 1 token", texts[2])


def test_streamed_text_is_one_untrusted_answer_display_updated_in_place(
    shown: CapturedIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(display_module, "REFRESH_S", 60.0)  # only the end of a segment re-renders
    turn = headless()
    turn.on_event(TextDelta("Hello "))
    turn.on_event(TextDelta("<img src=x onerror=alert(1)> **world**"))
    turn.on_response(response(), USAGE, None)
    first, last = answers(shown)
    assert first == (first[0], False, "Hello ")
    assert last == (first[0], True, "Hello <img src=x onerror=alert(1)> **world**")
    for output in published(shown):
        assert "text/markdown" not in output.data
        if ANSWER_MIME in output.data:
            assert output.data["text/plain"] == output.data[ANSWER_MIME]["markdown"]
    # Viewers without the extension show the answer rendered and sanitized in the kernel.
    assert answer_html(shown) == (
        "<div class='qloop-answer'><p>Hello  <strong>world</strong></p>\n</div>"
    )


def answer_html(shown: CapturedIO) -> str:
    return [o.data["text/html"] for o in published(shown) if ANSWER_MIME in o.data][-1]


def test_a_code_steps_line_gives_its_size_not_its_code(shown: CapturedIO) -> None:
    turn = headless(cards_for=frozenset())
    turn.on_tool_start(ToolCall("toolu_1", "run_code", {"code": "y = 1\nprint(y)"}))
    assert lines(shown) == ["→ run_code(code=⟨2 lines⟩)"]  # the transcript shows the code once


def test_each_model_response_starts_a_new_answer(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_event(TextDelta("first"))
    turn.on_response(response(), USAGE, None)
    turn.on_tool_start(ToolCall("toolu_1", "list_variables", {}))
    turn.on_event(TextDelta("second"))
    turn.on_response(response(), USAGE, None)
    shown_text = {i: text for i, _, text in answers(shown)}
    assert sorted(shown_text.values()) == ["first", "second"]


def test_thinking_is_collapsed_and_escaped(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_event(ThinkingDelta("<b>plan</b> "))
    turn.on_event(ThinkingDelta("step 2"))
    views = [o for o in published(shown) if "qloop-thinking" in o.data.get("text/html", "")]
    assert [o.update for o in views] == [False, True]
    assert display_id(views[0]) == display_id(views[1])
    view = views[1].data["text/html"]
    assert view.startswith("<details class='qloop-thinking'><summary>Thinking</summary>")
    assert "&lt;b&gt;plan&lt;/b&gt; step 2" in view and "<b>plan" not in view


def test_a_retry_blanks_the_failed_attempt_and_says_why(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_event(TextDelta("partial words"))
    turn.on_event(RetryNotice(attempt=1, delay_s=0.5, reason="connection dropped"))
    turn.on_event(TextDelta("the whole answer"))
    turn.on_response(response(), USAGE, None)
    (failed, _, partial), (blanked, update, empty), *fresh = answers(shown)
    assert (partial, blanked, update, empty) == ("partial words", failed, True, "")
    assert {text for _, _, text in fresh} == {"the whole answer"}
    assert all(i != failed for i, _, _ in fresh)  # the retry's text is a new display
    assert lines(shown) == ["retrying in 0.5 s (attempt 1): connection dropped"]
    [note] = [o for o in published(shown) if "retrying" in o.data.get("text/plain", "")]
    assert "qloop-warn" in note.data["text/html"]


def test_tool_lines_skip_calls_that_show_a_card(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_tool_start(ToolCall("toolu_1", "inspect_variable", {"name": "df", "rows": 5}))
    turn.on_tool_end(outcome("inspect_variable", decision="readonly"))
    turn.on_tool_start(ToolCall("toolu_2", "run_code", {"code": "x = 1"}))
    turn.on_tool_end(outcome("run_code"))  # approved on its card: the card says so
    turn.on_tool_end(outcome("run_code", decision="auto"))
    turn.on_tool_end(
        outcome(
            "run_code", text="\nZeroDivisionError: division by zero\n  at line 1", is_error=True
        )
    )
    assert lines(shown) == [
        '→ inspect_variable(name="df", rows=5)',
        "✔ inspect_variable (0.25 s)",
        "✔ run_code (0.25 s)",
        "✘ run_code: ZeroDivisionError: division by zero",
    ]


def test_a_failed_steps_line_quotes_its_error_not_its_output(shown: CapturedIO) -> None:
    turn = headless()
    printed = "stdout:\nstarting\n\nTraceback (most recent call last):\n  x"
    stopped = "error: stopped with the Stop button: the step was interrupted. Variables may be..."
    turn.on_tool_end(
        outcome("run_code", text=f"{printed}\n\n{stopped}\n\nchanges: a", is_error=True)
    )
    assert lines(shown) == [
        "✘ run_code: stopped with the Stop button: the step was interrupted. Variables may be..."
    ]


def test_a_tool_line_is_short_and_escaped(shown: CapturedIO) -> None:
    turn = headless()
    turn.on_tool_start(ToolCall("toolu_1", "lookup", {"q": "<script>" + "x" * 200}))
    [note] = [o for o in published(shown) if "qloop-line" in o.data.get("text/html", "")]
    plain = note.data["text/plain"]
    assert plain.startswith('→ lookup(q="<script>xxx') and plain.endswith("…)")
    assert len(plain) == len("→ lookup()") + 80
    assert "<script>" not in note.data["text/html"] and "&lt;script&gt;" in note.data["text/html"]


def test_a_stopped_turn_says_why_in_the_status_and_a_line(shown: CapturedIO) -> None:
    turn = headless()
    turn.finish(result(MaxTurns(5)))
    reason = "stopped: reached the limit of 5 model calls (--max-turns)"
    status = published(shown)[-2].data["text/plain"]
    assert status.startswith(f"{reason} · model call 0/5 · ")
    assert lines(shown) == [reason]


def test_an_error_is_left_to_the_cell_error_and_not_repeated(shown: CapturedIO) -> None:
    turn = headless()
    turn.finish(result(Failed("model claude-nope not found: list the models with `%agent models`")))
    status = published(shown)[-1].data["text/plain"]
    assert status.startswith("ended with an error · model call 0/5 · ")
    assert "claude-nope" not in status  # the AgentError the cell raises says it, once
    assert lines(shown) == []


@pytest.mark.parametrize("kind", ["info", "warn", "error", "ok"])
def test_lines_take_their_colour_from_the_theme_stylesheet(shown: CapturedIO, kind: str) -> None:
    display_module.line("a note <b>", kind)
    [note] = published(shown)
    assert note.data["text/html"] == f"<div class='qloop-line qloop-{kind}'>a note &lt;b&gt;</div>"
    assert "style" not in note.data["text/html"] and "#" not in note.data["text/html"]


def widget(output: RichOutput) -> widgets.Widget:
    """The widget a frontend would render for a widget-view output."""
    model_id = output.data[WIDGET_MIME]["model_id"]
    found: widgets.Widget = widgets.widget_serialization["from_json"](f"IPY_MODEL_{model_id}", None)
    return found


def test_interactive_turns_show_a_stop_button_that_cancels(shown: CapturedIO) -> None:
    cancel = CancelToken()
    turn = TurnDisplay(interactive=True, max_turns=3, cancel=cancel, cards_for=set())
    [output] = published(shown)
    status = widget(output)
    assert isinstance(status, widgets.HBox) and "qloop-live-status" in status._dom_classes
    label, stop = status.children
    assert isinstance(stop, widgets.Button) and stop.description == "Stop"
    assert "waiting for the model · up to 3 model calls" in label.value
    assert not cancel.cancelled

    stop.click()
    assert cancel.cancelled
    turn.finish(result(Interrupted(by="stop")))
    assert stop.disabled
    assert "interrupted: stopped with the Stop button · model call 0/3" in label.value
    assert lines(shown) == ["interrupted: stopped with the Stop button"]
    # Viewers without the widget's state (nbconvert, GitHub) show the status, not the repr.
    first, *_, last = [o for o in published(shown) if WIDGET_MIME in o.data]
    assert first.data["text/plain"] == "waiting for the model · up to 3 model calls"
    assert last.update and display_id(last) == display_id(first)
    assert last.data["text/plain"].startswith("interrupted: stopped with the Stop button · ")
    assert last.data[WIDGET_MIME] == first.data[WIDGET_MIME]
