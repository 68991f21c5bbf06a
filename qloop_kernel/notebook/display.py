"""Showing a turn in the agent cell: streamed Markdown, collapsed thinking, tool lines, the status line.

All rendering of a turn happens here, from typed events and results. What the model or a tool wrote
is untrusted: the lines and text fallbacks show each character a person cannot see as its mark
(``visible.as_shown``).
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable
from typing import Any

from IPython.display import HTML, display

from ..loop import CancelToken, TurnObserver
from ..markup import markdown_html
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
from ..policy.permissions import POLICY_DENIAL_PREFIX
from ..text import clip, counted
from ..visible import as_shown
from .approval import StopButton
from .deadline import clicks_where_sent, stop_on_arrival
from .pump import wake

REFRESH_S = 0.15  # how often streamed Markdown is re-rendered
# Streamed text is shown in pieces of about this size, cut at paragraph breaks outside code: each
# refresh re-sends only the piece still growing, not the whole answer. A piece that cannot be cut
# (one long code block) is refreshed less often as it grows.
ANSWER_PIECE_CHARS = 2_000
STATUS_REFRESH_S = 0.5  # while calls come fast, the status line is re-sent at most this often
# The model's text is never trusted HTML: the qloop extension renders this MIME type through its
# sanitizer; other viewers show the text/html fallback, rendered and sanitized in the kernel.
ANSWER_MIME = "application/vnd.qloop.answer+json"
ANSWER_CLASS = "qloop-answer"


def answer_bundle(text: str, **flags: Any) -> dict[str, Any]:
    """A display bundle for model-written Markdown (live or saved): sanitized HTML, never
    text/markdown (which a frontend renders as trusted)."""
    rendered = f"<div class='{ANSWER_CLASS}'>{markdown_html(text)}</div>" if text else ""
    plain = as_shown(text, runs=False)
    return {ANSWER_MIME: {"markdown": text, **flags}, "text/html": rendered, "text/plain": plain}


def show_answer(text: str, **flags: Any) -> Any:  # Any: IPython's display handle (untyped)
    """Show model-written Markdown as untrusted text; returns the display handle."""
    return display(answer_bundle(text, **flags), raw=True, display_id=True)


def widget_bundle(widget: Any, text: str) -> dict[str, Any]:
    """A widget's display bundle whose text fallback (what viewers without the widget's state show,
    nbconvert and GitHub among them) is ``text`` instead of the widget's repr."""
    return {**widget._repr_mimebundle_(), "text/plain": text}


def status_text(
    model_calls: int, max_turns: int, elapsed: float, usage: Usage, cost: float | None
) -> str:
    cached = usage.cache_read_input_tokens
    tokens = counted(usage.total_tokens, "token") + (f" ({cached:,} cached)" if cached else "")
    money = "" if cost is None else f" · ${cost:.4f}"
    return f"model call {model_calls}/{max_turns} · {elapsed:.1f} s · {tokens}{money}"


def waiting_text(max_turns: int) -> str:
    return f"waiting for the model · up to {counted(max_turns, 'model call')}"


LINE_KINDS = ("info", "warn", "error", "ok")


def line(text: str, kind: str = "info") -> None:
    """A compact one-line note in the cell (HTML with a plain-text fallback).

    Colours come from the theme through the extension's stylesheet (``qloop-line qloop-KIND``); a
    frontend without it shows the line in its own text colour.
    """
    if kind not in LINE_KINDS:
        raise ValueError(f"line kind {kind!r} is not one of {LINE_KINDS}")
    bundle = {
        "text/html": f"<div class='qloop-line qloop-{kind}'>{html.escape(text)}</div>",
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
        self._text = ""  # the piece of streamed text still growing
        self._text_handle: Any = None
        self._pieces: list[Any] = []  # this segment's finished pieces (a retry blanks them)
        self._thinking = ""
        self._thinking_handle: Any = None
        self._last_refresh = 0.0
        self._stop: Any = None
        self._stop_handle: Any = None
        self._status_handle: Any = None
        self._status_at = 0.0
        if interactive:
            self._stop = StopButton(cancel.cancel)
            self._stop_handle = display(
                widget_bundle(self._stop.widget, waiting_text(max_turns)),
                raw=True,
                display_id=True,
            )
            _stop_while_steps_run(self._stop.button, cancel)
        else:
            self._status_handle = display({"text/plain": ""}, raw=True, display_id=True)
        self._show_status(waiting_text(max_turns))

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
        if self.model_calls == 1 or time.monotonic() - self._status_at >= STATUS_REFRESH_S:
            self._show_status(self._status())

    def on_tool_start(self, call: ToolCall) -> None:
        self._end_segment()
        if call.name not in self.cards_for:
            line(f"→ {as_shown(call.name)}({_short_input(call.input)})")

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        name = as_shown(outcome.call.name)
        if outcome.decision == "denied":  # the person's words; the model's are in the result
            line(f"✘ {name}: not run, {as_shown(denied_words(outcome.reason))}", "warn")
        elif outcome.is_error:
            line(f"✘ {name}: {as_shown(_error_line(outcome.text))}", "warn")
        elif outcome.call.name not in self.cards_for or outcome.decision in ("always", "auto"):
            line(f"✔ {name} ({outcome.duration_s:.2f} s)", "ok")
        if time.monotonic() - self._status_at >= STATUS_REFRESH_S:
            self._show_status(self._status())

    def finish(self, result: TurnResult) -> None:
        self._end_segment()
        # An error is shown once, by the AgentError the cell raises: the status keeps the figures.
        failed = result.status == "error"
        head = "ended with an error" if failed else describe_stop(result.stop)
        text = f"{head} · {self._status()}"
        if self._stop is not None:
            self._stop.finish(text)
            self._stop_handle.update(widget_bundle(self._stop.widget, text), raw=True)
        else:
            self._show_status(text)
        if result.status != "completed" and not failed:
            line(describe_stop(result.stop), "warn")

    # --- helpers ------------------------------------------------------------------------------

    def _status(self) -> str:
        elapsed = time.monotonic() - self.started
        text = status_text(self.model_calls, self.max_turns, elapsed, self.usage, self.cost)
        granted = self.grants() if self.grants is not None else ""
        return f"{text} · {granted}" if granted else text

    def _show_status(self, text: str) -> None:
        self._status_at = time.monotonic()
        if self._stop is not None:
            self._stop.set_text(text)
        elif self._status_handle is not None:
            self._status_handle.update({"text/plain": text}, raw=True)

    def _refresh_text(self, force: bool) -> None:
        now = time.monotonic()
        wait = REFRESH_S * max(1.0, len(self._text) / ANSWER_PIECE_CHARS)
        if not force and now - self._last_refresh < wait:
            return
        self._last_refresh = now
        cut = _piece_end(self._text) if len(self._text) > ANSWER_PIECE_CHARS else None
        if cut is not None:
            done, self._text = self._text[:cut].rstrip("\n"), self._text[cut:].lstrip("\n")
            self._show_piece(done)
            self._pieces.append(self._text_handle)
            self._text_handle = None
        if self._text:
            self._show_piece(self._text)

    def _show_piece(self, text: str) -> None:
        if self._text_handle is None:
            self._text_handle = show_answer(text)
        else:
            self._text_handle.update(answer_bundle(text), raw=True)

    def _refresh_thinking(self) -> None:
        body = html.escape(as_shown(self._thinking, runs=False))
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
        for handle in [*self._pieces, self._text_handle]:
            if handle is not None:
                handle.update(answer_bundle(""), raw=True)
        if self._thinking_handle is not None:
            self._thinking_handle.update(HTML(""))
        self._text, self._text_handle, self._pieces = "", None, []
        self._thinking, self._thinking_handle = "", None

    def _end_segment(self) -> None:
        if self._text:
            self._refresh_text(force=True)
        self._text, self._text_handle, self._pieces = "", None, []
        self._thinking, self._thinking_handle = "", None


STOP_UNREACHABLE = (
    "Stop reaches a running step only from frontends that send clicks on a subshell "
    "(JupyterLab 4.4 or later) with this ipykernel: elsewhere, interrupt the kernel to end a step"
)
_stop_warned = False


def _stop_while_steps_run(button: Any, cancel: CancelToken) -> None:
    """Stop works while a step runs: on the subshell a click arrives on, or else as soon as the
    shell-channel thread sees it (main-shell clicks: VS Code, JupyterLab < 4.4)."""
    global _stop_warned

    clicks_where_sent(button)

    def stop() -> None:
        cancel.cancel()
        wake()

    if stop_on_arrival(button, stop) or _stop_warned:
        return
    from ipykernel.kernelbase import Kernel

    if Kernel.initialized():  # a kernel whose shell channel offers no hook: say so once
        _stop_warned = True
        line(STOP_UNREACHABLE, "warn")


def _error_line(text: str) -> str:
    """The line that says why a tool failed: a code step's ``error:`` section (after its output),
    else the result's first line."""
    sections = text.strip().split("\n\n")
    errors = [s for s in sections if s.startswith("error:")]
    lines = (errors[-1][len("error:") :] if errors else text).strip().splitlines()
    return lines[0] if lines else "error"


def _piece_end(text: str) -> int | None:
    """Where the last paragraph break outside a fenced code block is (None: there is none)."""
    cut, fenced, offset = None, False, 0
    for raw in text.splitlines(keepends=True):
        if raw.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and not raw.strip() and offset:
            cut = offset
        offset += len(raw)
    return cut


def _short_input(value: dict[str, Any], limit: int = 80) -> str:
    # Code is shown once, by the card or the transcript: here only its size.
    text = ", ".join(
        f"{as_shown(k)}=⟨{counted(len(v.splitlines()), 'line')}⟩"
        if k == "code" and isinstance(v, str)
        else f"{as_shown(k)}={as_shown(json.dumps(v, ensure_ascii=False, default=str))}"
        for k, v in value.items()
    )
    return clip(text, limit)


def denied_words(reason: str | None) -> str:
    """A denial as a person reads it: the policy's sentence, or "denied by you" and the reason."""
    if reason and reason.startswith(POLICY_DENIAL_PREFIX):
        return reason
    return f"denied by you: {reason}" if reason else "denied by you"
