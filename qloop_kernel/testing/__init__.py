"""A loopback stand-in for the Anthropic Messages API, for testing agent notebooks offline.

Start a ``StandInAPI`` with a script of replies and faults, point the SDK at ``base_url``, and
read what the agent sent from ``requests``. See docs/testing.md.
"""

from .jsonform import item_from_json, item_to_json, items_to_json, load_script, parse_script
from .record import RecordedRequest
from .script import (
    DropConnection,
    EarlyClose,
    Fault,
    Reply,
    ScriptError,
    StreamError,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    script_exhausted,
    text,
    thinking,
    tool_use,
)
from .server import StandInAPI
from .tokens import count_input_tokens, estimate_tokens
from .wire import stream_event_types

__all__ = [
    "DropConnection",
    "EarlyClose",
    "Fault",
    "RecordedRequest",
    "Reply",
    "ScriptError",
    "StandInAPI",
    "StreamError",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "count_input_tokens",
    "estimate_tokens",
    "item_from_json",
    "item_to_json",
    "items_to_json",
    "load_script",
    "parse_script",
    "script_exhausted",
    "stream_event_types",
    "text",
    "thinking",
    "tool_use",
]
