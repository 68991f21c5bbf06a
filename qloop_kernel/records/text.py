"""Text forms of a saved record: Markdown (the mirror's fallback, ``qloop show``) and a one-line summary."""

from __future__ import annotations

import json

from ..text import counted
from ..visible import as_shown
from .schema import CellRecord, shown_code


def usage_line(record: CellRecord) -> str:
    """Calls, tokens and cost as a person reads them: "1 model call · 812 tokens · $0.0012",
    "4 model calls · 10,246 tokens (2,332 cached) · $0.0231", or "no model call"."""
    if record.model_calls == 0:
        return "no model call"
    usage = record.usage
    total = (
        usage.input_tokens
        + usage.output_tokens
        + usage.cache_read_input_tokens
        + usage.cache_creation_input_tokens
    )
    cost = "cost unknown" if record.cost_usd is None else f"${record.cost_usd:.4f}"
    cached = usage.cache_read_input_tokens
    tokens = counted(total, "token") + (f" ({cached:,} cached)" if cached else "")
    return f"{counted(record.model_calls, 'model call')} · {tokens} · {cost}"


def summary_line(record: CellRecord) -> str:
    steps = counted(len(record.replay_steps()), "code step")
    return f"qloop agent turn · {record.status} · {steps} · {usage_line(record)}"


def to_markdown(record: CellRecord) -> str:
    """A readable transcript for frontends without the qloop extension: record text is untrusted,
    so every character a person cannot see is shown as its mark (``visible.as_shown``)."""
    model = as_shown(record.model)
    lines = [f"**qloop** · `{record.status}` · {model} · {usage_line(record)}", ""]
    lines += ["> " + line for line in as_shown(record.prompt, runs=False).splitlines() or [""]]
    for index, call in enumerate(record.tool_calls, 1):
        decision = call.decision.kind + (
            f": {call.decision.reason}" if call.decision.reason else ""
        )
        lines += ["", f"**{index}. `{as_shown(call.name)}`** — {as_shown(decision)}"]
        code = shown_code(call)
        if code is not None:
            lines += ["```python", as_shown(code.rstrip()), "```"]  # as the card shows it
        else:
            lines += ["```json", as_shown(json.dumps(call.input, ensure_ascii=False)), "```"]
    if record.error:
        lines += ["", f"**Error:** {as_shown(record.error)}"]
    if record.answer:
        lines += ["", as_shown(record.answer, runs=False)]
    return "\n".join(lines)
