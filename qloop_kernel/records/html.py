"""The transcript mirror's HTML: a saved turn as one readable, safe block in every viewer.

nbconvert, GitHub, nbviewer, VS Code and JupyterLab without the qloop extension show this (the
extension shows its own transcript view instead). It holds what only the record can show: the
prompt, each tool call once with its code and decision, the error. The answer is not repeated
here: the cell's answer output shows it, formatted, after the steps' own outputs (plots, tables).
"""

from __future__ import annotations

import html
import json

from ..markup import code_html, markdown_html
from ..visible import as_shown
from .schema import CellRecord, ToolCallRecord, shown_code
from .text import usage_line

TRANSCRIPT_CLASS = "qloop-transcript"
RECEIVED_NOTE = (
    "received from elsewhere (not signed by you): read the steps before you replay them "
    "(qloop show)"
)


def to_html(record: CellRecord, *, received: bool = False) -> str:
    """The record as sanitized HTML (model- and notebook-written text never runs), every
    character a person cannot see shown as its mark."""
    head = (
        f"<b>qloop</b> · <code>{html.escape(record.status)}</code> · "
        f"{_text(record.model)} · {html.escape(usage_line(record))}"
    )
    parts = [f"<div>{head}</div>"]
    if received:
        parts.append(f"<div><em>{html.escape(RECEIVED_NOTE)}</em></div>")
    parts.append(f"<blockquote>{markdown_html(record.prompt) or '<p></p>'}</blockquote>")
    if record.tool_calls:
        parts.append("<ol>" + "".join(_call_html(call) for call in record.tool_calls) + "</ol>")
    if record.error:
        parts.append(f"<p><strong>Error:</strong> {_text(record.error)}</p>")
    return f"<div class='{TRANSCRIPT_CLASS}'>" + "".join(parts) + "</div>"


def _call_html(call: ToolCallRecord) -> str:
    decision = call.decision.kind + (f": {call.decision.reason}" if call.decision.reason else "")
    failed = " · failed" if call.is_error else ""
    title = f"<code>{_text(call.name)}</code> — {_text(decision + failed)}"
    code = shown_code(call)
    shown = code.rstrip() if code is not None else json.dumps(call.input, ensure_ascii=False)
    body = code_html(shown)
    cut = "<div><em>a secret was cut from this input when it was saved</em></div>"
    return f"<li>{title}{cut if call.input_redacted else ''}{body}</li>"


def _text(text: str) -> str:
    """Record text in one line of HTML: escaped, each character a person cannot see as its mark."""
    return html.escape(as_shown(text))
