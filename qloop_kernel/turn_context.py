"""What a turn sends besides its prompt: the rules in the system prompt, the attached items, and the
first request's estimated size and cost (``%agent context`` shows it; the record keeps it).

The estimate counts what ``model.build_params`` would send (the tools, the system prompt with the
rules, the conversation and the first message) at about four characters a token of its compact
JSON (no spaces after separators, characters as they are), as the API's tokenizer averages on code
and English.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .attachments import Attachment, first_message
from .context_rules import RulesUse, with_rules
from .messages import Message, ModelRequest, Usage
from .model import build_params
from .pricing import Price
from .records.schema import AttachmentRecord, ContextRecord, RulesRecord, SourcePrint, ToolSize
from .redact import redact_text

ESTIMATE_METHOD = (
    "about 4 characters a token of the request's compact JSON: tools, system, messages"
)


@dataclass(frozen=True)
class TurnContext:
    """The rules files found for a turn (used or not) and the items attached to it."""

    rules: list[RulesUse] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)

    def system(self, base: str) -> str:
        """The system prompt with the rules used, after it (inside the same cached block)."""
        return with_rules(base, self.rules)

    def first_message(self, prompt: str) -> Message:
        """The turn's user message: the attachments, then the (redacted) prompt."""
        return {"role": "user", "content": first_message(self.attachments, redact_text(prompt))}

    def sources(self) -> list[SourcePrint]:
        """The rules files used and the files and cells attached, with their hashes (drift)."""
        prints = [SourcePrint(kind="rules", path=u.file.path, sha256=u.file.sha256)
                  for u in self.rules if u.used]  # fmt: skip
        for item in self.attachments:
            if item.kind in ("file", "table", "image"):
                prints.append(
                    SourcePrint(kind="file", path=item.path or item.name, sha256=item.sha256)
                )
            elif item.kind == "cell":
                prints.append(SourcePrint(kind="cell", path=item.name, sha256=item.sha256))
        return prints


@dataclass(frozen=True)
class RequestEstimate:
    """The first request of a turn as it would be sent, and its size."""

    params: dict[str, Any]
    tokens: int
    cost_usd: float | None

    @property
    def system_text(self) -> str:
        system = self.params.get("system") or []
        return "".join(str(b.get("text", "")) for b in system)

    def tool_sizes(self) -> list[ToolSize]:
        return [
            ToolSize(name=str(t.get("name")), chars=_chars(_without_cache(t)))
            for t in self.params.get("tools", [])
        ]

    def cached_prefix(self) -> bool:
        """Whether the tools and system prompt carry a cache breakpoint (long enough to cache)."""
        blocks = [*self.params.get("tools", [])[-1:], *(self.params.get("system") or [])]
        return any("cache_control" in b for b in blocks)


def estimate_request(
    model: str,
    *,
    system: str,
    tools: list[dict[str, Any]],
    messages: list[Message],
    max_tokens: int,
    price: Price | None,
) -> RequestEstimate:
    """The first request's parameters (as ``build_params`` makes them), tokens and input cost."""
    params = build_params(model, ModelRequest(messages, tools, system, max_tokens))
    sent = {k: params[k] for k in ("tools", "system", "messages") if k in params}
    tokens = len(json.dumps(_without_cache(sent), separators=(",", ":"), ensure_ascii=False)) // 4
    cost = price.cost(Usage(input_tokens=tokens)) if price is not None else None
    return RequestEstimate(params, tokens, cost)


def context_record(context: TurnContext, estimate: RequestEstimate, history: int) -> ContextRecord:
    """What the record keeps of a turn's context (no text, only where, hashes and sizes)."""
    rules = [
        RulesRecord(path=u.file.path, origin=u.file.origin, sha256=u.file.sha256,
                    chars=len(u.sent) if u.used else 0, status=u.status)
        for u in context.rules
    ]  # fmt: skip
    attached = [
        AttachmentRecord(kind=a.kind, name=a.name, sha256=a.sha256, chars=a.chars,
                         image_bytes=a.image_bytes, note=a.note)
        for a in context.attachments
    ]  # fmt: skip
    return ContextRecord(
        system_chars=len(estimate.system_text),
        rules=rules,
        attachments=attached,
        tools=estimate.tool_sizes(),
        history_messages=history,
        estimated_tokens=estimate.tokens,
        estimated_cost_usd=None if estimate.cost_usd is None else round(estimate.cost_usd, 6),
        estimate_method=ESTIMATE_METHOD,
    )


def _chars(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))


# Any: a JSON value of any shape (a tool, the request params), given back in that shape
def _without_cache(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache(v) for v in value]
    return value
