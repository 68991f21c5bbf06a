"""Context policy: keep a long session under the model's window, outside the loop.

Old tool-result bodies are the bulk of a data session (frame summaries, printed output). Beyond a token
threshold they are replaced by a short placeholder, newest first kept whole. Messages keep their shape,
so every tool_use still has its tool_result.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .messages import Block, Message

PLACEHOLDER = "[older tool output removed to keep the conversation within the context window: {n:,} characters]"


def estimate_tokens(value: object) -> int:
    """About four characters a token, as the API's tokenizer averages on code and English."""
    return len(json.dumps(value, default=str)) // 4


@dataclass(frozen=True)
class ContextPolicy:
    tool_result_budget_tokens: int = 40_000  # total size of tool results kept whole
    keep_recent_messages: int = 2  # the newest tool-result messages are never trimmed

    def apply(self, messages: list[Message]) -> list[Message]:
        """A copy of ``messages`` with old tool-result bodies over the budget replaced."""
        out = list(messages)
        kept_tokens = 0
        seen = 0
        for index in range(len(out) - 1, -1, -1):
            message = out[index]
            if message["role"] != "user" or not _has_tool_results(message):
                continue
            seen += 1
            size = estimate_tokens(message["content"])
            if (
                seen <= self.keep_recent_messages
                or kept_tokens + size <= self.tool_result_budget_tokens
            ):
                kept_tokens += size
                continue
            out[index] = {**message, "content": [_trim(b) for b in message["content"]]}
        return out


def _has_tool_results(message: Message) -> bool:
    content = message["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


def _trim(block: Block) -> Block:
    if block.get("type") != "tool_result":
        return block
    size = len(json.dumps(block.get("content", ""), default=str))
    text = PLACEHOLDER.format(n=size)
    trimmed: Block = {**block, "content": [{"type": "text", "text": text}]}
    return trimmed
