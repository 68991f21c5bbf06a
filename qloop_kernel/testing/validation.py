"""Request checks the API makes before answering: each returns an error message or None.

The messages follow the API's ``field.path: problem`` style, so a malformed request from an agent
loop fails here as it would against the real service.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tokens import MAX_BREAKPOINTS, count_breakpoints

_ROLES = ("user", "assistant")


def check_messages_request(body: Any) -> str | None:
    """Check a ``POST /v1/messages`` body."""
    return _first_error(body, require_max_tokens=True)


def check_count_tokens_request(body: Any) -> str | None:
    """Check a ``POST /v1/messages/count_tokens`` body (no ``max_tokens`` there)."""
    return _first_error(body, require_max_tokens=False)


def _first_error(body: Any, *, require_max_tokens: bool) -> str | None:
    if not isinstance(body, Mapping):
        return "The request body must be a JSON object."
    checks = [
        _check_model(body),
        _check_max_tokens(body) if require_max_tokens else None,
        _check_messages(body.get("messages")),
        _check_system(body.get("system")),
        _check_tools(body.get("tools")),
        _check_stream(body.get("stream")),
    ]
    error = next((check for check in checks if check), None)
    return error or _check_breakpoints(body)


def _check_model(body: Mapping[str, Any]) -> str | None:
    if "model" not in body:
        return "model: Field required"
    if not isinstance(body["model"], str) or not body["model"]:
        return "model: Input should be a non-empty string"
    return None


def _check_max_tokens(body: Mapping[str, Any]) -> str | None:
    if "max_tokens" not in body:
        return "max_tokens: Field required"
    value = body["max_tokens"]
    if isinstance(value, bool) or not isinstance(value, int):
        return "max_tokens: Input should be a valid integer"
    if value < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    return None


def _check_messages(messages: Any) -> str | None:
    if messages is None:
        return "messages: Field required"
    if not isinstance(messages, list):
        return "messages: Input should be a valid list"
    if not messages:
        return "messages: at least one message is required"
    for index, message in enumerate(messages):
        error = _check_message(f"messages.{index}", message)
        if error:
            return error
    return None


def _check_message(path: str, message: Any) -> str | None:
    if not isinstance(message, Mapping):
        return f"{path}: Input should be a valid dictionary"
    if message.get("role") not in _ROLES:
        return f"{path}.role: Input should be 'user' or 'assistant'"
    if "content" not in message:
        return f"{path}.content: Field required"
    return _check_content(f"{path}.content", message["content"])


def _check_content(path: str, content: Any) -> str | None:
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{path}: Input should be a valid string or list"
    for index, block in enumerate(content):
        if not isinstance(block, Mapping):
            return f"{path}.{index}: Input should be a valid dictionary"
        if not isinstance(block.get("type"), str):
            return f"{path}.{index}.type: Field required"
    return None


def _check_system(system: Any) -> str | None:
    if system is None:
        return None
    return _check_content("system", system)


def _check_tools(tools: Any) -> str | None:
    if tools is None:
        return None
    if not isinstance(tools, list):
        return "tools: Input should be a valid list"
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            return f"tools.{index}: Input should be a valid dictionary"
        if not isinstance(tool.get("name"), str):
            return f"tools.{index}.name: Field required"
    return None


def _check_stream(stream: Any) -> str | None:
    if stream is None or isinstance(stream, bool):
        return None
    return "stream: Input should be a valid boolean"


def _check_breakpoints(body: Mapping[str, Any]) -> str | None:
    found = count_breakpoints(body)
    if found > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
    return None
