"""The approval card (ipywidgets): Approve / Deny / Always allow, blocking the cell until a click.

The only ipywidgets import of the package. Button callbacks may run on another thread (ipykernel 7.0-7.3
subshells), so the decision is handed over through a lock and the pump is woken.
"""

from __future__ import annotations

import html
import json
import re
import threading
from typing import Any

import ipywidgets as widgets
from IPython.display import display

from ..permissions import AlwaysAllow, ApprovalRequest, Approve, ApproveEdited, Decision, Deny
from .pump import wait_until, wake

# Characters that reorder or hide text (Trojan Source): shown as visible marks, never applied.
INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def _visible(highlighted: str) -> str:
    return INVISIBLE.sub(
        lambda m: f"<span class='qloop-invisible' title='invisible character'>⟨U+{ord(m.group()):04X}⟩</span>",
        highlighted,
    )


def highlight(code: str) -> str:
    """Python source as syntax-highlighted HTML; invisible and bidi control characters made visible."""
    try:
        from pygments import highlight as pyg_highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return _visible(f"<pre>{html.escape(code)}</pre>")
    formatter = HtmlFormatter(noclasses=True, nowrap=False, style="default")
    return _visible(str(pyg_highlight(code, PythonLexer(), formatter)))


class ApprovalCard:
    """One card: the call, its input (code editable), the buttons, then the decision."""

    def __init__(self, request: ApprovalRequest, *, allow_always: bool = True) -> None:
        self.request = request
        self._lock = threading.Lock()
        self._decision: Decision | None = None
        original = _editable_text(request)
        self.editor = widgets.Textarea(
            value=original or "",
            layout=widgets.Layout(width="100%", height="12em", display="none"),
        )
        self._original = original
        self.reason = widgets.Text(placeholder="reason (optional, sent to the model)",
                                   layout=widgets.Layout(width="18em"))  # fmt: skip
        self.approve = _button("Approve", style="success", icon="check")
        self.deny = _button("Deny", style="danger", icon="times")
        self.always = _button(
            "Always allow", tooltip=f"Run {request.call.name} without asking this session"
        )
        self.edit = _button("Edit", icon="pencil")
        self.status = widgets.HTML()
        self.approve.on_click(lambda _: self._decide(self._approval()))
        self.deny.on_click(lambda _: self._decide(Deny(self.reason.value.strip())))
        self.always.on_click(lambda _: self._decide(AlwaysAllow(self._edited_input())))
        self.edit.on_click(lambda _: self._show_editor())
        buttons = [self.approve, self.deny, self.reason]
        if allow_always:
            buttons.insert(2, self.always)
        if original is not None:
            buttons.append(self.edit)
        self.buttons = buttons
        self.widget = widgets.VBox(
            [widgets.HTML(self._header()), widgets.HTML(self._body()), self.editor,
             widgets.HBox(buttons, layout=widgets.Layout(flex_flow="row wrap")), self.status],
            layout=widgets.Layout(border="1px solid #d0d7de", padding="6px", margin="4px 0"),
        )  # fmt: skip
        self.widget.add_class("qloop-approval-card")

    def _header(self) -> str:
        name = html.escape(self.request.title)
        return f"<b>{name}</b> <span style='color:#57606a'>wants to run — approve?</span>"

    def _body(self) -> str:
        notices = "".join(
            f"<div class='qloop-card-notice'>{html.escape(str(n))}</div>"
            for n in self.request.details.get("notices", [])
        )
        steps = self.request.details.get("steps")
        if isinstance(steps, list):
            return notices + "".join(
                f"<div><i>step {i}</i>{highlight(str(s))}</div>" for i, s in enumerate(steps, 1)
            )
        if self._original is not None:
            return notices + highlight(self._original)
        text = json.dumps(self.request.call.input, indent=2, ensure_ascii=False)
        return notices + _visible(f"<pre>{html.escape(text)}</pre>")

    def _show_editor(self) -> None:
        self.editor.layout.display = "block"

    def _edited_input(self) -> dict[str, Any] | None:
        """The input as the card shows it at the moment of the click, if the user changed it."""
        field = self.request.editable_field
        if field is not None and self.editor.value != self._original:
            return {**self.request.call.input, field: self.editor.value}
        return None

    def _approval(self) -> Decision:
        edited = self._edited_input()
        return Approve() if edited is None else ApproveEdited(edited)

    def _decide(self, decision: Decision) -> None:
        with self._lock:
            if self._decision is None:
                self._decision = decision
        wake()

    @property
    def decision(self) -> Decision | None:
        with self._lock:
            return self._decision

    def wait(self) -> Decision:
        """Block until a button is clicked; a kernel interrupt disables the card and propagates."""
        try:
            wait_until(lambda: self.decision is not None)
        finally:
            if self.decision is None:
                self.close("interrupted — not run")
        decision = self.decision
        assert decision is not None
        self.close(describe(decision))
        return decision

    def close(self, text: str) -> None:
        for item in [*self.buttons, self.editor]:
            item.disabled = True
        self.status.value = f"<span class='qloop-card-decision'>{html.escape(text)}</span>"


def _button(label: str, *, style: str = "", icon: str = "", tooltip: str = "") -> widgets.Button:
    """A button as wide as its label, so a narrow notebook wraps the row instead of cutting it."""
    return widgets.Button(
        description=label, button_style=style, icon=icon, tooltip=tooltip or label,
        layout=widgets.Layout(width="auto", min_width="6em"),
    )  # fmt: skip


def describe(decision: Decision) -> str:
    match decision:
        case Approve():
            return "✔ approved"
        case ApproveEdited():
            return "✔ approved with your edits"
        case AlwaysAllow(input=edited):
            edits = " with your edits" if edited is not None else ""
            return f"✔ approved{edits} (always allowed for this session)"
        case Deny(reason=reason):
            return f"✘ denied: {reason}" if reason else "✘ denied"
    raise AssertionError(decision)  # pragma: no cover


def _editable_text(request: ApprovalRequest) -> str | None:
    field = request.editable_field
    value = request.call.input.get(field) if field else None
    return value if isinstance(value, str) else None


class CardApprover:
    """Approver that shows a card in the running cell and waits for the click."""

    def __init__(self, *, allow_always: bool = True) -> None:
        self.allow_always = allow_always

    def decide(self, request: ApprovalRequest) -> Decision:
        card = ApprovalCard(request, allow_always=self.allow_always)
        try:
            display(card.widget)
        except KeyboardInterrupt:
            card.close("interrupted — not run")
            raise
        return card.wait()


def _stop_and_wake(on_stop: Any) -> None:
    on_stop()
    wake()


class StopButton:
    """The status line's Stop button: ends the turn as interrupted, the next cells still run."""

    def __init__(self, on_stop: Any) -> None:
        self.button = widgets.Button(description="Stop", icon="stop", button_style="warning")
        self.button.on_click(lambda _: _stop_and_wake(on_stop))
        self.label = widgets.HTML()
        self.widget = widgets.HBox([self.label, self.button])
        self.widget.add_class("qloop-live-status")

    def set_text(self, text: str) -> None:
        self.label.value = f"<span class='qloop-live-status-text'>{html.escape(text)}</span>"

    def finish(self, text: str) -> None:
        self.set_text(text)
        self.button.disabled = True
