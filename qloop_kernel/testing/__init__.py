"""A loopback stand-in for the Anthropic Messages API, for testing agent notebooks offline.

Start a ``StandInAPI`` with a script of replies and faults, point the SDK at ``base_url``, and
read what the agent sent from ``requests``. See docs/testing.md.
"""

from .jsonform import item_from_json, item_to_json, items_to_json, load_script, parse_script
from .models import DOCUMENTED_MODELS, ModelInfo
from .record import RecordedRequest
from .script import (
    DropConnection,
    EarlyClose,
    Fault,
    RawReply,
    RedactedThinkingBlock,
    Reply,
    ResultBlock,
    ScriptError,
    ServerToolUseBlock,
    StreamError,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    redacted_thinking,
    script_exhausted,
    server_tool_use,
    spend_limit_reached,
    text,
    thinking,
    tool_use,
    web_search_result,
)
from .server import StandInAPI
from .tokens import block_tokens, count_input_tokens
from .wire import stream_event_types

__all__ = [
    "DOCUMENTED_MODELS",
    "DropConnection",
    "EarlyClose",
    "Fault",
    "ModelInfo",
    "RawReply",
    "RecordedRequest",
    "RedactedThinkingBlock",
    "Reply",
    "ResultBlock",
    "ScriptError",
    "ServerToolUseBlock",
    "StandInAPI",
    "StreamError",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "count_input_tokens",
    "block_tokens",
    "item_from_json",
    "item_to_json",
    "items_to_json",
    "load_script",
    "parse_script",
    "redacted_thinking",
    "script_exhausted",
    "server_tool_use",
    "spend_limit_reached",
    "stream_event_types",
    "text",
    "thinking",
    "tool_use",
    "web_search_result",
]
