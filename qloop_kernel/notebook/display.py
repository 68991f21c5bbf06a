"""Showing a turn in the agent cell: streamed Markdown, collapsed thinking, tool lines, the status line.

All rendering of a turn happens here, from typed events and results.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable
from typing import Any

from IPython.display import HTML, display

from ..loop import CancelToken, TurnObserver
from ..messages import (
    ModelEvent,
    ModelResponse,
    RetryNotice,
    TextDelta,
    ThinkingDelta,
    ToolCall,
    ToolOutcome,
    TurnResult,
    Usage,
    describe_stop,
)

REFRESH_S = 0.15  # how often streamed Markdown is re-rendered
# The model's text is never trusted HTML: the qloop extension renders this MIME type through the
# sanitizer; frontends without it show the text/plain fallback.
ANSWER_MIME = "application/vnd.qloop.answer+json"


def answer_bundle(text: str, **flags: Any) -> dict[str, Any]:
    """A display bundle for model-written Markdown (live or saved): never text/markdown or HTML."""
    return {ANSWER_MIME: {"markdown": text, **flags}, "text/plain": text}


def show_answer(text: str, **flags: Any) -> Any:
    """Show model-written Markdown as untrusted text; returns the display handle."""
    return display(answer_bundle(text, **flags), raw=True, display_id=True)


def status_text(
    model_calls: int, max_turns: int, elapsed: float, usage: Usage, cost: float | None
) -> str:
    tokens = f"{usage.total_tokens:,} tokens ({usage.cache_read_input_tokens:,} cached)"
    money = "" if cost is None else f" · ${cost:.4f}"
    return f"turn {model_calls}/{max_turns} · {elapsed:.1f} s · {tokens}{money}"


def line(text: str, kind: str = "info") -> None:
    """A compact one-line note in the cell (HTML with a plain-text fallback)."""
    colour = {"info": "#57606a", "warn": "#9a6700", "error": "#cf222e", "ok": "#1a7f37"}[kind]
    bundle = {
        "text/html": f"<div class='qloop-line qloop-{kind}' style='color:{colour}'>"
        f"{html.escape(text)}</div>",
        "text/plain": text,
    }
    display(bundle, raw=True)


class TurnDisplay(TurnObserver):
    """Renders one turn as it happens."""

    def __init__(
        self,
        *,
        interactive: bool,
        max_turns: int,
        cancel: CancelToken,
        cards_for: set[str],
        grants: Callable[[], str] | None = None,
    ) -> None:
        self.max_turns = max_turns
        self.cards_for = cards_for  # tools whose calls show an approval card instead of a line
        self.grants = grants  # the active grants, in one line, shown on the status line
        self.started = time.monotonic()
        self.usage = Usage()
        self.cost: float | None = None
        self.model_calls = 0
        self._text = ""
        self._text_handle: Any = None
        self._thinking = ""
        self._thinking_handle: Any = None
        self._last_refresh = 0.0
        self._stop: Any = None
        self._status_handle: Any = None
        if interactive:
            from .approval import StopButton

            self._stop = StopButton(cancel.cancel)
            display(self._stop.widget)
        else:
            self._status_handle = display({"text/plain": ""}, raw=True, display_id=True)
        self._show_status(f"turn 0/{max_turns} · waiting for the model")

    # --- model events ---------------------------------------------------------------------

    def on_event(self, event: ModelEvent) -> None:
        if isinstance(event, TextDelta):
            self._text += event.text
            self._refresh_text(force=False)
        elif isinstance(event, ThinkingDelta):
            self._thinking += event.text
            self._refresh_thinking()
        elif isinstance(event, RetryNotice):
            self._discard_partial()
            line(
                f"retrying in {event.delay_s:.1f} s (attempt {event.attempt}): {event.reason}",
                "warn",
            )

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self._end_segment()
        self.model_calls += 1
        self.usage, self.cost = usage, cost_usd
        self._show_status(self._status())

    def on_tool_start(self, call: ToolCall) -> None:
        self._end_segment()
        if call.name not in self.cards_for:
            line(f"→ {call.name}({_short_input(call.input)})")

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        if outcome.is_error:
            first = outcome.text.strip().splitlines()[0] if outcome.text.strip() else "error"
            line(f"✘ {outcome.call.name}: {first}", "warn")
        elif outcome.call.name not in self.cards_for or outcome.decision in ("always", "auto"):
            line(f"✔ {outcome.call.name} ({outcome.duration_s:.2f} s)", "ok")
        self._show_status(self._status())

    def finish(self, result: TurnResult) -> None:
        self._end_segment()
        kind = "ok" if result.status == "completed" else "warn"
        text = f"{describe_stop(result.stop)} · {self._status()}"
        if self._stop is not None:
            self._stop.finish(text)
        else:
            self._show_status(text)
        if result.status != "completed":
            line(describe_stop(result.stop), kind)

    # --- helpers ------------------------------------------------------------------------------

    def _status(self) -> str:
        elapsed = time.monotonic() - self.started
        text = status_text(self.model_calls, self.max_turns, elapsed, self.usage, self.cost)
        granted = self.grants() if self.grants is not None else ""
        return f"{text} · {granted}" if granted else text

    def _show_status(self, text: str) -> None:
        if self._stop is not None:
            self._stop.set_text(text)
        elif self._status_handle is not None:
            self._status_handle.update({"text/plain": text}, raw=True)

    def _refresh_text(self, force: bool) -> None:
        now = time.monotonic()
        if not force and now - self._last_refresh < REFRESH_S:
            return
        self._last_refresh = now
        if self._text_handle is None:
            self._text_handle = show_answer(self._text)
        else:
            self._text_handle.update(answer_bundle(self._text), raw=True)

    def _refresh_thinking(self) -> None:
        body = html.escape(self._thinking)
        view = HTML(
            "<details class='qloop-thinking'><summary>Thinking</summary>"
            f"<pre style='white-space:pre-wrap'>{body}</pre></details>"
        )
        if self._thinking_handle is None:
            self._thinking_handle = display(view, display_id=True)
        else:
            self._thinking_handle.update(view)

    def _discard_partial(self) -> None:
        """A failed attempt's streamed text is not part of the answer: blank it before the retry."""
        if self._text_handle is not None:
            self._text_handle.update(answer_bundle(""), raw=True)
        if self._thinking_handle is not None:
            self._thinking_handle.update(HTML(""))
        self._text, self._text_handle = "", None
        self._thinking, self._thinking_handle = "", None

    def _end_segment(self) -> None:
        if self._text:
            self._refresh_text(force=True)
        self._text, self._text_handle = "", None
        self._thinking, self._thinking_handle = "", None


def _short_input(value: dict[str, Any], limit: int = 80) -> str:
    text = ", ".join(
        f"{k}={json.dumps(v, ensure_ascii=False, default=str)}" for k, v in value.items()
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"
