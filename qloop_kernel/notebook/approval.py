"""The approval card (ipywidgets): Approve / Deny / Always allow, blocking the cell until a click;
after the step, what it changed and its Undo button.

The card is the contract: what runs is what the card shows at the moment of the click — the code as
the model wrote it, or, once the editor is open, the editor's text (then the original is hidden, so
only one version is ever on screen). After the click the card shows the code that runs. The card
shows the call's risk class with each reason on its line, re-classified as the user edits.

The only ipywidgets import of the package. Button callbacks may run on another thread (ipykernel 7.0-7.3
subshells), so the decision is handed over through a lock and the pump is woken.
"""

from __future__ import annotations

import difflib
import functools
import html
import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets
from IPython.display import display

from ..policy.grants import SCOPE_TEXT, Grant, Scope
from ..policy.permissions import (
    AlwaysAllow,
    ApprovalRequest,
    Approve,
    ApproveEdited,
    Decision,
    Deny,
    ReplayRequest,
    Request,
)
from ..policy.risk import most_severe
from ..text import clip, counted
from ..visible import Piece, as_shown, bounded, has_marks, mixed_script_names, pieces
from .pump import wait_until, wake
from .waiting import announced

if TYPE_CHECKING:
    from pygments.lexers import PythonLexer

    from ..policy.risk import Assessment, Risk

# Theme colours (JupyterLab's CSS variables, so Light and Dark both read well) of each class.
RISK_COLOURS: dict[str, str] = {
    "read": "var(--jp-success-color1)",
    "write": "var(--jp-brand-color1)",
    "compute": "var(--jp-warn-color1)",
    "unknown": "var(--jp-warn-color1)",
    "destructive": "var(--jp-error-color1)",
    "external": "var(--jp-error-color1)",
}
MUTED = "color:var(--jp-ui-font-color2)"
DEFAULT_SCOPES: tuple[Scope, ...] = ("cell", "session")
SETTLE_S = 0.5  # after a click, wait until nothing was typed for this long (one round trip)
SETTLE_MAX_S = 2.0
FOLDED_CODE_CHARS = 60  # of the first line of code on a folded card
# The saved messages a replay adopts, as the card lists them: per message and in all.
ADOPTED_MESSAGE_CHARS = 2_000
ADOPTED_TOTAL_CHARS = 20_000
MARK_CLASS = "qloop-mark"  # a character or run shown as a mark (visible.py's rule)


def shown_html(text: str) -> str:
    """Text as HTML, escaped, each character or run the rule marks (``visible.pieces``) shown as a
    styled mark instead: what a person reads is every character that will run, or its mark."""
    return "".join(_piece_html(piece) for piece in pieces(text))


def _piece_html(piece: Piece) -> str:
    if piece.mark is None:
        return html.escape(piece.text, quote=False)
    return (
        f"<span class='{MARK_CLASS}' title='not shown as itself; runs as written'>"
        f"{html.escape(piece.mark)}</span>"
    )


# The card's code is coloured like a JupyterLab code cell: pygments token classes, which the
# extension's stylesheet maps to the editor theme's --jp-mirror-editor-* colours (base.css).
CODE_CLASS = "qloop-code"
TOKEN_PREFIX = "qloop-tok-"


def highlight(code: str) -> str:
    """Python source as syntax-highlighted HTML, every character visible (``shown_html``), then a
    line for each identifier that mixes scripts.

    Leading and trailing blank lines are kept: the card shows the code exactly as it runs; long
    lines wrap (base.css). Colours come from the theme (classes, no inline colour), so Light, Dark
    and high-contrast all read.
    """
    try:
        lexer = _lexer()
    except ImportError:
        body = shown_html(code)
    else:
        body = "<span></span>" + _tokens_html(code, lexer)
    return f'<div class="{CODE_CLASS}"><pre>{body}</pre></div>' + _mixed_names_html(code)


@functools.cache
def _lexer() -> PythonLexer:
    """One lexer for every card: it keeps no state between codes."""
    from pygments.lexers import PythonLexer

    return PythonLexer(stripnl=False, ensurenl=False)


def _tokens_html(code: str, lexer: Any) -> str:
    """Each token in a span of its pygments class; marked characters and runs as marks, a run
    that spans tokens once, where it starts."""
    marks, offset = [], 0
    for piece in pieces(code):
        if piece.mark is not None:
            marks.append((offset, offset + len(piece.text), _piece_html(piece)))
        offset += len(piece.text)
    out, at = [], 0  # at: the first mark that may still apply
    for start, ttype, value in lexer.get_tokens_unprocessed(code):
        end, parts, index = start + len(value), [], start
        while index < end:
            while at < len(marks) and marks[at][1] <= index:
                at += 1
            if at < len(marks) and marks[at][0] <= index:
                if marks[at][0] == index:
                    parts.append(marks[at][2])
                index = min(marks[at][1], end)
                continue
            stop = min(marks[at][0] if at < len(marks) else end, end)
            parts.append(html.escape(code[index:stop], quote=False))
            index = stop
        out.append(_token_span(ttype, "".join(parts)))
    return "".join(out)


def _token_span(ttype: Any, text: str) -> str:
    from pygments.token import STANDARD_TYPES

    while ttype not in STANDARD_TYPES:
        ttype = ttype.parent
    css = STANDARD_TYPES[ttype]
    return f'<span class="{TOKEN_PREFIX}{css}">{text}</span>' if css and text else text


def _mixed_names_html(code: str) -> str:
    return "".join(
        f"<div class='qloop-card-confusable'>⚠ {shown_html(str(name))}: check each letter</div>"
        for name in mixed_script_names(code)
    )


def risk_badge(risk: Risk) -> str:
    """The class of a call as a small coloured label."""
    colour = RISK_COLOURS.get(risk, RISK_COLOURS["unknown"])
    return (
        f"<span class='qloop-risk qloop-risk-{html.escape(risk)}' title='risk class' "
        f"style='border:1px solid {colour};color:{colour};border-radius:3px;padding:0 4px'>"
        f"{html.escape(risk)}</span>"
    )


def assessment_html(assessment: Assessment | None, *, of_edit: bool = False) -> str:
    """The class and each reason with its line ("line 3: changes df, which exists")."""
    if assessment is None:
        return ""
    label = "class of your edit" if of_edit else "class"
    reasons = "".join(f"<li>{shown_html(str(r))}</li>" for r in assessment.reasons)
    if not reasons:
        reasons = "<li>nothing it can see changes state</li>"
    return (
        f"<div class='qloop-card-assessment'><span style='{MUTED}'>{label}:</span> "
        f"{risk_badge(assessment.risk)}<ul class='qloop-card-reasons' style='margin:2px 0'>"
        f"{reasons}</ul></div>"
    )


class ApprovalCard:
    """One card: the call, its class and reasons, its input (code editable), the buttons, then the
    decision and what runs."""

    def __init__(
        self,
        request: Request,
        *,
        allow_always: bool = True,
        scopes: Sequence[Scope] = DEFAULT_SCOPES,
    ) -> None:
        self.request = request
        self._lock = threading.Lock()
        self._clicked: Callable[[], Decision] | None = None  # the first button clicked
        self._decision: Decision | None = None  # made from what the card shows once settled
        self._typed_at: float | None = None  # when the editor or reason text last arrived
        original = _editable_text(request)
        self._original = original
        self._edit_assessment: Assessment | None = None
        self._editing = False
        self.editor = _code_editor(original or "")
        self.editor.observe(self._on_edit, names="value")
        self.reason = widgets.Text(
            placeholder="reason (optional, sent to the model)",
            layout=widgets.Layout(
                width="auto", flex="1 1 16em", min_width="10em", max_width="100%"
            ),
        )
        self.reason.observe(lambda _: self._typed(), names="value")
        self.approve = _button("Approve", style="success", icon="check")
        self.deny = _button("Deny", style="danger", icon="times")
        self.always = _button("Always allow", tooltip=self._always_tooltip())
        self.scope = _scope_choice(scopes)
        self.edit = _button("Edit", icon="pencil")
        self.status = widgets.HTML()
        self._wire_buttons()
        self.buttons = self._buttons(allow_always, original is not None)
        self.header = widgets.HTML(self._header())
        self.body = widgets.HTML(self._body())
        self._folded: tuple[str, str | None] | None = None  # the decision and the code that runs
        self._ran = ""  # how long the step ran, once it has
        self.row = widgets.HBox(self.buttons, layout=widgets.Layout(flex_flow="row wrap"))
        self.row.add_class("qloop-card-buttons")
        self.widget = widgets.VBox(
            [self.header, self.body, self.editor, self.row, self.status],
            layout=widgets.Layout(border="1px solid var(--jp-border-color1)", padding="6px",
                                  margin="4px 0"),
        )  # fmt: skip
        self.widget.add_class("qloop-approval-card")

    def _wire_buttons(self) -> None:
        self.approve.on_click(lambda _: self._decide(self._approval))
        self.deny.on_click(lambda _: self._decide(lambda: Deny(self.reason.value.strip())))
        self.always.on_click(lambda _: self._decide(self._always_allow))
        self.edit.on_click(lambda _: self._show_editor())

    def _buttons(self, allow_always: bool, editable: bool) -> list[widgets.Widget]:
        buttons: list[widgets.Widget] = [self.approve, self.deny]
        if allow_always:
            buttons.append(self.always)
            if self.scope is not None:
                buttons.append(self.scope)
        buttons.append(self.reason)
        if editable:
            buttons.append(self.edit)
        return buttons

    # --- what the card shows ----------------------------------------------------------------

    def _header(self) -> str:
        name = html.escape(self.request.title)
        risk = self._shown_risk()
        badge = f" {risk_badge(risk)}" if risk is not None else ""
        return f"<b>{name}</b> <span style='{MUTED}'>wants to run — approve?</span>{badge}"

    def _body(self) -> str:
        request = self.request
        notices = "".join(
            f"<div class='qloop-card-notice'>{html.escape(str(n))}</div>"
            for n in request.details.get("notices", [])
        )
        if isinstance(request, ReplayRequest):
            adopted = adopted_html(list(request.adopted))
            return notices + adopted + _steps_html(list(request.codes), list(request.assessments))
        if self._original is None:
            text = json.dumps(request.call.input, indent=2, ensure_ascii=False)
            return notices + f"<pre class='qloop-card-input'>{shown_html(text)}</pre>"
        if self._editing:  # the editor below holds the only code on screen
            edited = self._edit_assessment is not None
            shown = self._edit_assessment if edited else self.request.assessment
            hint = f"<div style='{MUTED}'>editing: the text below is what runs when you click</div>"
            return (
                notices
                + hint
                + _unseen_html(self.editor.value)
                + assessment_html(shown, of_edit=edited)
            )
        return notices + highlight(self._original) + assessment_html(self.request.assessment)

    def plain_text(self) -> str:
        """The card as plain text (frontends without widgets): the call, its notices, every step's
        code as shown (``visible.as_shown``), the class and reasons, the messages it adopts."""
        request = self.request
        lines = [f"{request.title} wants to run — approve? (class: {self._shown_risk()})"]
        lines += [str(n) for n in request.details.get("notices", [])]
        if isinstance(request, ReplayRequest):
            for role, text in adopted_texts(list(request.adopted))[0]:
                lines += [f"[saved message, {role}]", as_shown(text)]
            codes = list(request.codes)
        elif self._original is None:
            codes = [json.dumps(request.call.input, indent=2, ensure_ascii=False)]
        else:
            codes = [self._original]
        for index, code in enumerate(codes, 1):
            lines += [f"step {index}:" if len(codes) > 1 else "code:", as_shown(code)]
            lines += [f"⚠ {name}: check each letter" for name in mixed_script_names(code)]
        if self.request.assessment is not None:
            lines += [f"  {as_shown(str(r))}" for r in self.request.assessment.reasons]
        return "\n".join(lines)

    def bundle(self) -> dict[str, Any]:
        """The widget's display bundle, with the card's plain text as its fallback."""
        data = dict(self.widget._repr_mimebundle_() or {})
        return {**data, "text/plain": self.plain_text()}

    def _shown_risk(self) -> Risk | None:
        if self._edit_assessment is not None:
            return self._edit_assessment.risk
        request = self.request
        if isinstance(request, ReplayRequest) and request.assessments:
            return most_severe(a.risk if a is not None else "unknown" for a in request.assessments)
        return request.risk

    def _always_tooltip(self) -> str:
        risk = self.request.risk
        name = self.request.call.name if isinstance(self.request, ApprovalRequest) else "replay"
        what = f"'{risk}' steps of {name}" if risk else name
        return f"Run {what} (and milder ones) without asking; choose for how long on the right"

    def _refresh(self) -> None:
        self.header.value = self._header()
        self.body.value = self._body()

    def _show_editor(self) -> None:
        self._editing = True
        self.editor.layout.display = "block"
        self._refresh()

    def _on_edit(self, change: dict[str, Any]) -> None:
        """Re-classify the editor's text, so the card shows the class of what would run."""
        self._typed()
        classify = self.request.classify
        field = self.request.editable_field
        if classify is None or field is None or self._decision is not None:
            return
        edited = self._edited_input()
        self._edit_assessment = classify(edited) if edited is not None else None
        self._refresh()

    # --- the decision -----------------------------------------------------------------------

    def _edited_input(self) -> dict[str, Any] | None:
        """The input as the card shows it at the moment of the click, if the user changed it."""
        request, field = self.request, self.request.editable_field
        edited = self.editor.value != self._original
        if isinstance(request, ApprovalRequest) and field is not None and edited:
            return {**request.call.input, field: self.editor.value}
        return None

    def _approval(self) -> Decision:
        edited = self._edited_input()
        return Approve() if edited is None else ApproveEdited(edited)

    def _always_allow(self) -> Decision:
        scope: Scope = self.scope.value if self.scope is not None else "session"
        return AlwaysAllow(self._edited_input(), scope)

    def _decide(self, make: Callable[[], Decision]) -> None:
        with self._lock:
            if self._clicked is None:
                self._clicked = make
        wake()

    def _typed(self) -> None:
        self._typed_at = time.monotonic()

    @property
    def decision(self) -> Decision | None:
        """The decision: made from what the card shows, once a button was clicked."""
        with self._lock:
            if self._decision is not None or self._clicked is None:
                return self._decision
            make = self._clicked
        return make()

    def wait(self) -> Decision:
        """Block until a button is clicked and what was typed before the click has arrived; a
        kernel interrupt disables the card and propagates."""
        try:
            wait_until(lambda: self._clicked is not None)
            self._settle()
        except BaseException:
            self.close("interrupted — not run")
            raise
        decision = self.decision
        assert decision is not None
        with self._lock:
            self._decision = decision
        self.close(describe(decision, self.request, self._granted_risk(decision)))
        return decision

    def _settle(self) -> None:
        """Let the last text typed before the click arrive. The widget frontend holds back a text
        box's next update until the kernel acknowledged the previous one, so the last keystrokes
        may arrive just after the click; nothing typed, nothing to wait for."""
        if self._typed_at is None:
            return
        wait_until(lambda: time.monotonic() - (self._typed_at or 0.0) >= SETTLE_S, SETTLE_MAX_S)

    def _granted_risk(self, decision: Decision) -> Risk | None:
        if isinstance(decision, AlwaysAllow) and decision.input is not None:
            return self._edit_assessment.risk if self._edit_assessment else self.request.risk
        return self.request.risk

    def show_after(self, widget: widgets.Widget) -> None:
        """Add what the step did (its changes, its Undo) at the foot of the card."""
        self.widget.children = (*self.widget.children, widget)

    @property
    def closed(self) -> bool:
        """Whether the card was disabled and folded (decided or interrupted)."""
        return self._folded is not None

    def close(self, text: str) -> None:
        """Disable the card and fold it to one line: the decision, the tool and the first line of
        what runs (the duration joins it when the step ends); the whole card stays a click away."""
        if self._folded is not None:
            return  # closed once already: the first outcome stands
        for item in [*self.buttons, self.editor]:
            item.disabled = True
        decision = self._decision
        edited = getattr(decision, "input", None)
        field = self.request.editable_field
        shown = self._original
        if field is not None and isinstance(edited, dict) and isinstance(edited.get(field), str):
            shown = edited[field]
            self.body.value = (
                f"<div style='{MUTED}'>your edit, which is what runs:</div>"
                + highlight(shown)
                + assessment_html(self._edit_assessment, of_edit=True)
                + changes_html(self._original or "", shown)
            )
        elif self._editing:
            self._editing = False
            self._refresh()
        self._folded = (text, shown)
        for part in (self.header, self.body, self.editor, self.row):
            part.layout.display = "none"
        self.widget.add_class("qloop-card-done")
        self._show_folded()

    def finished(self, duration_s: float, failed: bool) -> None:
        """The step ran: its duration, and whether it failed, join the folded line."""
        self._ran = f"failed after {_duration(duration_s)}" if failed else _duration(duration_s)
        self._show_folded()

    def _show_folded(self) -> None:
        if self._folded is None:
            return
        text, code = self._folded
        parts = [html.escape(self.request.title)]
        lines = as_shown(code or "").splitlines()
        first = next((line.strip() for line in lines if line.strip()), "")
        if first:
            cut = clip(first, FOLDED_CODE_CHARS)
            parts.append(f"<code class='qloop-card-first-line'>{html.escape(cut)}</code>")
        if self._ran:
            parts.append(f"<span class='qloop-card-duration'>{html.escape(self._ran)}</span>")
        what = " · ".join(parts)
        self.status.value = (
            "<details class='qloop-card-folded'><summary>"
            f"<span class='qloop-card-decision'>{html.escape(text)}</span>"
            f"<span class='qloop-card-what' style='{MUTED}'> · {what}</span></summary>"
            f"<div class='qloop-card-details'>{self.body.value}</div></details>"
        )


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes else f"{rest} s"


def changes_html(original: str, edited: str) -> str:
    """What the user's edit changed, as diff lines (removed, then added), each marked by class."""
    lines = []
    for line in difflib.unified_diff(original.splitlines(), edited.splitlines(), lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "same")
        lines.append(f"<span class='qloop-diff-{kind}'>{shown_html(line)}</span>")
    if not lines:
        return ""
    return (
        f"<div class='qloop-card-changes'><span style='{MUTED}'>what you changed:</span>"
        f"<pre class='qloop-diff'>{chr(10).join(lines)}</pre></div>"
    )


def _steps_html(steps: list[Any], assessments: object) -> str:
    """Each step of a replay with its class and reasons."""
    found = assessments if isinstance(assessments, list) else []
    parts = []
    for index, step in enumerate(steps, 1):
        assessment = found[index - 1] if index <= len(found) else None
        parts.append(
            f"<div><i>step {index}</i>{highlight(str(step))}{assessment_html(assessment)}</div>"
        )
    return "".join(parts)


def message_text(message: dict[str, Any]) -> str:
    """A saved message as text: its text blocks, each tool call with its input, each tool result."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            data = json.dumps(block.get("input"), ensure_ascii=False, indent=1)
            parts.append(f"[tool call {block.get('name')}]\n{data}")
        elif kind == "tool_result":
            parts.append("[tool result]\n" + message_text({"content": block.get("content", "")}))
        else:
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def adopted_texts(messages: object) -> tuple[list[tuple[str, str]], int]:
    """The saved messages a replay adopts as (role, text) pairs, each text bounded, and in all at
    most ``ADOPTED_TOTAL_CHARS``; with how many messages were left out."""
    found = messages if isinstance(messages, list) else []
    shown: list[tuple[str, str]] = []
    left = ADOPTED_TOTAL_CHARS
    for message in found:
        if left <= 0 or not isinstance(message, dict):
            break
        text = message_text(message)
        limit = min(ADOPTED_MESSAGE_CHARS, left)
        shown.append((str(message.get("role", "?")), bounded(text, limit)))
        left -= min(len(text), limit)
    return shown, len(found) - len(shown)


def adopted_html(messages: object) -> str:
    """The saved messages a replay adopts, folded under one line, escaped and marked like code."""
    shown, more = adopted_texts(messages)
    if not shown:
        return ""
    items = "".join(
        f"<div class='qloop-adopted-message'><i>{index}. {html.escape(role)}</i>"
        f"<pre class='qloop-adopted-text'>{shown_html(text)}</pre></div>"
        for index, (role, text) in enumerate(shown, 1)
    )
    if more:
        items += f"<div class='qloop-adopted-more'>… {counted(more, 'more message')}</div>"
    total = counted(len(shown) + more, "saved message")
    return (
        f"<details class='qloop-card-adopted'><summary>show the {total} that will become "
        f"context</summary>{items}</details>"
    )


def _unseen_html(code: str) -> str:
    """For the editor's text: where it holds characters a text box does not show (invisible or
    confusable ones, long blank runs, names mixing scripts), the text as it runs, every one marked."""
    if not has_marks(code) and not mixed_script_names(code):
        return ""
    return (
        f"<div class='qloop-card-notice'>the editor's text holds characters it does not show; "
        f"as it runs:</div>{highlight(code)}"
    )


def _code_editor(code: str) -> widgets.Textarea:
    """The card's editor, hidden until Edit. It syncs when it loses focus (a click on a button does
    that first): one update per edit, sent before the click."""
    editor = widgets.Textarea(
        value=code,
        continuous_update=False,
        layout=widgets.Layout(width="100%", height="12em", display="none"),
    )
    editor.add_class("qloop-card-editor")
    return editor


def _scope_choice(scopes: Sequence[Scope]) -> widgets.Dropdown | None:
    """How long "Always allow" lasts; None when there is only one choice (the session)."""
    if len(scopes) < 2:
        return None
    choice = widgets.Dropdown(
        options=[(f"for {SCOPE_TEXT[s]}", s) for s in scopes],
        value="session" if "session" in scopes else scopes[0],
        tooltip="How long Always allow lasts",
        layout=widgets.Layout(width="auto"),
    )
    choice.add_class("qloop-card-scope")
    return choice


def _button(label: str, *, style: str = "", icon: str = "", tooltip: str = "") -> widgets.Button:
    """A button as wide as its label, so a narrow notebook wraps the row instead of cutting it."""
    return widgets.Button(
        description=label, button_style=style, icon=icon, tooltip=tooltip or label,
        layout=widgets.Layout(width="auto", min_width="6em"),
    )  # fmt: skip


def describe(decision: Decision, request: Request | None = None, risk: Risk | None = None) -> str:
    """The card's status line after the click."""
    match decision:
        case Approve():
            return "✔ approved"
        case ApproveEdited():
            return "✔ approved with your edits"
        case AlwaysAllow(input=edited, scope=scope):
            edits = " with your edits" if edited is not None else ""
            what = ""
            if isinstance(request, ApprovalRequest) and risk is not None:
                what = Grant(request.call.name, risk, scope).what() + " "
            return f"✔ approved{edits} ({what}always allowed for {SCOPE_TEXT[scope]})"
        case Deny(reason=reason):
            return f"✘ denied: {reason}" if reason else "✘ denied"
    raise AssertionError(decision)  # pragma: no cover


def _editable_text(request: Request) -> str | None:
    if not isinstance(request, ApprovalRequest):
        return None  # a replay's steps are approved as saved
    field = request.editable_field
    value = request.call.input.get(field) if field else None
    return value if isinstance(value, str) else None


class CardApprover:
    """Approver that shows a card in the running cell and waits for the click.

    ``scopes`` are the lifetimes "Always allow" offers (``notebook`` only where the notebook can
    save grants).
    """

    def __init__(
        self,
        *,
        allow_always: bool = True,
        scopes: Sequence[Scope] = DEFAULT_SCOPES,
        cell_id: str | None = None,
    ) -> None:
        self.allow_always = allow_always
        self.scopes = tuple(scopes)
        self.cell_id = cell_id  # where a reloaded page shows a waiting card again
        self.cards: dict[str, ApprovalCard] = {}  # by call id: a step's card shows its outcome

    def decide(self, request: Request) -> Decision:
        always = self.allow_always and request.always_ask is None  # no grant covers a held tool
        card = ApprovalCard(request, allow_always=always, scopes=self.scopes)
        self.cards[request.call.id if isinstance(request, ApprovalRequest) else "replay"] = card
        try:
            display(card.bundle(), raw=True)
            with announced(self.cell_id, card.widget):
                return card.wait()
        except BaseException:
            # An interrupt may land anywhere here (while the card is sent, while the waiting
            # comm opens, while the click is awaited): the card never stays clickable.
            if not card.closed:
                card.close("interrupted — not run")
            raise


def show_unasked(request: ApprovalRequest, why: str) -> None:
    """Show a call that runs without a card (by the policy or a grant): its class, why, and the
    code, so what runs is always on screen."""
    risk = request.risk
    badge = f" {risk_badge(risk)}" if risk is not None else ""
    name = html.escape(request.title)
    code = _editable_text(request)
    shown = highlight(code) if code is not None else ""
    plain = f"→ {request.title} runs without asking ({risk or 'no class'}): {why}"
    bundle = {
        "text/html": f"<div class='qloop-unasked'><b>{name}</b>{badge} "
        f"<span style='{MUTED}'>runs without asking: {html.escape(why)}</span>{shown}</div>",
        "text/plain": plain + (f"\n{as_shown(code)}" if code is not None else ""),
    }
    display(bundle, raw=True)


class StepChangesBox:
    """What a step changed, what undo cannot put back, and its Undo button.

    ``on_undo`` undoes the step and returns what it did, or raises ValueError saying why it
    cannot; None: the step has nothing to undo (no button).
    """

    def __init__(
        self,
        lines: Sequence[str],
        notes: Sequence[str],
        on_undo: Callable[[], list[str]] | None,
    ) -> None:
        self.on_undo = on_undo
        items = "".join(f"<li>{shown_html(line)}</li>" for line in lines)
        notes_html = "".join(
            f"<div class='qloop-undo-note' style='{MUTED}'>{html.escape(n)}</div>" for n in notes
        )
        self.changes = widgets.HTML(
            f"<div class='qloop-step-changes'><span style='{MUTED}'>changes:</span>"
            f"<ul style='margin:2px 0'>{items}</ul>{notes_html}</div>"
        )
        self.button: widgets.Button | None = None
        self.status = widgets.HTML()
        row: list[widgets.Widget] = [self.status]
        if on_undo is not None:
            self.button = _button("Undo", icon="undo", tooltip="Put back what this step changed")
            self.button.on_click(lambda _: self._undo())
            row.insert(0, self.button)
        self.widget = widgets.VBox([self.changes, widgets.HBox(row)])
        self.widget.add_class("qloop-step-outcome")

    def _undo(self) -> None:
        if self.on_undo is None:
            return
        try:
            done = self.on_undo()
        except ValueError as exc:
            self.set_status(f"not undone: {exc}")
            return
        self.undone(done)

    def undone(self, done: Sequence[str]) -> None:
        """The step was undone (here or by `%agent undo`): say what was put back."""
        if self.button is not None:
            self.button.disabled = True
        self.set_status("↶ undone: " + "; ".join(done))

    def retire(self, why: str) -> None:
        """Undo no longer applies to this step (a later step changed variables)."""
        if self.button is not None and not self.button.disabled:
            self.button.disabled = True
            self.set_status(why)

    def set_status(self, text: str) -> None:
        self.status.value = f"<span class='qloop-undo-status'>{html.escape(text)}</span>"


class StopButton:
    """The status line's Stop button: ends the turn as interrupted, the next cells still run."""

    def __init__(self, on_stop: Any) -> None:
        self.button = widgets.Button(description="Stop", icon="stop", button_style="warning")
        self.on_stop = on_stop
        self.button.on_click(lambda _: self._stop())
        self.label = widgets.HTML()
        self.widget = widgets.HBox([self.label, self.button])
        self.widget.add_class("qloop-live-status")

    def _stop(self) -> None:
        self.on_stop()
        wake()

    def set_text(self, text: str) -> None:
        self.label.value = f"<span class='qloop-live-status-text'>{html.escape(text)}</span>"

    def finish(self, text: str) -> None:
        """The turn ended: the status says how, and Stop goes away."""
        self.set_text(text)
        self.button.disabled = True
        self.button.layout.display = "none"
