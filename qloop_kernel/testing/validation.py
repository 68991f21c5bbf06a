"""Request checks the API makes before answering: each returns a ``Problem`` or None.

The messages are the API's own words (as its 400 and 404 answers give them, "Errors" in the API docs
and the error bodies users report), in its ``field.path: problem`` style, so a request that the real
service would refuse fails here the same way. Each check cites the documented rule it follows.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .images import image_problem
from .models import ModelInfo
from .signing import Signer
from .tokens import MAX_BREAKPOINTS, count_breakpoints

_ROLES = ("user", "assistant")
_MESSAGE_KEYS = frozenset({"role", "content"})
# The Messages API's top-level parameters ("Messages > Create" in the API reference).
_CREATE_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
        "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking", "service_tier",
        "container", "mcp_servers", "context_management", "output_config", "cache_control",
        "inference_geo", "diagnostics", "speed", "user_profile_id", "workspace_id",
    }
)  # fmt: skip
_COUNT_FIELDS = frozenset(
    {
        "model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers",
        "context_management", "output_config", "cache_control", "speed", "user_profile_id",
        "workspace_id",
    }
)  # fmt: skip
_SAMPLING_DEFAULTS: dict[str, float | None] = {"temperature": 1.0, "top_p": None, "top_k": None}
THINKING_CHANGED = (
    "`thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified. "
    "These blocks must remain as they were in the original response."
)


@dataclass(frozen=True)
class Problem:
    """Why a request is refused: the HTTP status, the API error type and its message."""

    message: str
    status: int = 400
    error_type: str = "invalid_request_error"


@dataclass(frozen=True)
class Checks:
    """What the checks need besides the body: the served models and the thinking signer."""

    models: Mapping[str, ModelInfo] | None = None  # None: any model id is served
    signer: Signer | None = None  # None: thinking blocks are not checked


def check_messages_request(body: Any, checks: Checks | None = None) -> Problem | None:
    """Check a ``POST /v1/messages`` body."""
    return _first_problem(body, checks or Checks(), _CREATE_FIELDS, require_max_tokens=True)


def check_count_tokens_request(body: Any, checks: Checks | None = None) -> Problem | None:
    """Check a ``POST /v1/messages/count_tokens`` body (no ``max_tokens`` there)."""
    return _first_problem(body, checks or Checks(), _COUNT_FIELDS, require_max_tokens=False)


def _first_problem(
    body: Any, checks: Checks, fields: frozenset[str], *, require_max_tokens: bool
) -> Problem | None:
    if not isinstance(body, Mapping):
        return Problem("The request body must be a JSON object.")
    shape = [
        _check_model(body),
        _check_max_tokens(body) if require_max_tokens else None,
        _check_messages(body.get("messages")),
        _check_system(body.get("system")),
        _check_tools(body.get("tools")),
        _check_stream(body.get("stream")),
        _check_fields(body, fields),
    ]
    error = next((check for check in shape if check), None)
    if error:
        return Problem(error)
    info, problem = _served_model(body["model"], checks)
    if problem is not None:
        return problem
    error = _check_parameters(body, info) or _check_contents(body, checks)
    return Problem(error) if error else None


# Shape ("Messages > Create": required fields and their types) -------------------------------


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
    extra = sorted(set(message) - _MESSAGE_KEYS)
    if extra:
        return f"{path}.{extra[0]}: Extra inputs are not permitted"
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


def _check_fields(body: Mapping[str, Any], fields: frozenset[str]) -> str | None:
    extra = sorted(set(body) - fields)
    return f"{extra[0]}: Extra inputs are not permitted" if extra else None


# Model and parameters ("Models overview"; each model page's breaking changes) ----------------


def _served_model(model: str, checks: Checks) -> tuple[ModelInfo, Problem | None]:
    if checks.models is None:
        return ModelInfo(model), None
    info = checks.models.get(model)
    if info is None:
        return ModelInfo(model), Problem(f"model: {model}", 404, "not_found_error")
    return info, None


def _check_parameters(body: Mapping[str, Any], info: ModelInfo) -> str | None:
    thinking = body.get("thinking")
    manual = isinstance(thinking, Mapping) and thinking.get("type") == "enabled"
    if manual and not info.manual_thinking:
        return (
            '"thinking.type.enabled" is not supported for this model. Use '
            '"thinking.type.adaptive" and "output_config.effort" to control thinking behavior.'
        )
    if info.sampling:
        return None
    for name, default in _SAMPLING_DEFAULTS.items():
        if name in body and body[name] != default:
            return f"{name} is deprecated for this model."
    return None


# Content --------------------------------------------------------------------------------------


def _check_contents(body: Mapping[str, Any], checks: Checks) -> str | None:
    messages = body["messages"]
    return (
        _first(_system_problems(body.get("system")))
        or _first(_message_problems(messages, checks))
        or _first(_pairing_problems(messages))
        or _check_breakpoints(body)
    )


def _first(problems: Iterator[str]) -> str | None:
    return next(problems, None)


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    return list(content) if isinstance(content, list) else []


def _system_problems(system: Any) -> Iterator[str]:
    for index, block in enumerate(_blocks(system)):
        yield from _text_problems(f"system.{index}", block, "system")


def _message_problems(messages: list[Any], checks: Checks) -> Iterator[str]:
    latest = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
    for index, message in enumerate(messages):
        content = message["content"]
        final_assistant = index == len(messages) - 1 and message["role"] == "assistant"
        if content in ([], "") and not final_assistant:
            yield (
                f"messages.{index}: all messages must have non-empty content except for the "
                "optional final assistant message"
            )
        for number, block in enumerate(_blocks(content)):
            path = f"messages.{index}.content.{number}"
            yield from _block_problems(path, block, checks, latest=index == latest)


def _block_problems(
    path: str, block: Mapping[str, Any], checks: Checks, *, latest: bool
) -> Iterator[str]:
    kind = block["type"]
    if kind == "text":
        yield from _text_problems(path, block, "messages")
    elif kind in ("thinking", "redacted_thinking"):
        yield from _thinking_problems(path, block, checks.signer, latest=latest)
    elif kind == "tool_use" and not isinstance(block.get("input"), Mapping):
        yield f"{path}.tool_use.input: Input should be a valid dictionary"
    elif kind == "image":
        yield from _image_problems(f"{path}.image", block)
    elif kind == "tool_result":
        for number, inner in enumerate(_blocks(block.get("content"))):
            inner_path = f"{path}.tool_result.content.{number}"
            if isinstance(inner, Mapping) and inner.get("type") == "image":
                yield from _image_problems(f"{inner_path}.image", inner)
            elif isinstance(inner, Mapping) and inner.get("type") == "text":
                yield from _text_problems(inner_path, inner, "messages")


def _text_problems(path: str, block: Mapping[str, Any], where: str) -> Iterator[str]:
    # "Prompt caching > What can be cached"; empty text: the API's 400 on a returned empty block.
    text = block.get("text")
    if not isinstance(text, str):
        yield f"{path}.text: Field required"
    elif not text:
        if "cache_control" in block:
            yield f"{path}.text: cache_control cannot be set for empty text blocks"
        yield f"{where}: text content blocks must be non-empty"


def _thinking_problems(
    path: str, block: Mapping[str, Any], signer: Signer | None, *, latest: bool
) -> Iterator[str]:
    # "Extended thinking > Preserving thinking blocks": blocks go back exactly as they were sent.
    kind = block["type"]
    if "cache_control" in block:
        yield f"{path}.{kind}.cache_control: Extra inputs are not permitted"
    if signer is None or signer.is_intact(block):
        return
    if latest:
        yield f"{path}: {THINKING_CHANGED}"
    elif kind == "thinking":
        yield f"{path}: Invalid `signature` in `thinking` block"
    else:
        yield f"{path}: Invalid `data` in `redacted_thinking` block"


def _image_problems(path: str, block: Mapping[str, Any]) -> Iterator[str]:
    source = block.get("source")
    if isinstance(source, Mapping) and source.get("type") == "base64":
        problem = image_problem(source.get("media_type"), source.get("data"))
        if problem:
            yield f"{path}.source.base64{problem}"


def _pairing_problems(messages: list[Any]) -> Iterator[str]:
    # "Tool use > Handling tool calls": each tool_use is answered by a tool_result at the start of
    # the next user message, and each tool_result answers a tool_use of the message before.
    for index, message in enumerate(messages):
        blocks = _blocks(message["content"])
        if message["role"] == "user":
            yield from _unexpected_results(index, blocks, messages)
            continue
        asked = [str(b.get("id")) for b in blocks if b["type"] == "tool_use"]
        if not asked:
            continue
        reply = messages[index + 1] if index + 1 < len(messages) else None
        following = _blocks(reply["content"]) if reply and reply["role"] == "user" else []
        answered = {str(b.get("tool_use_id")) for b in following if b["type"] == "tool_result"}
        missing = [tool_id for tool_id in asked if tool_id not in answered]
        if missing:
            yield (
                f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        elif any(b["type"] != "tool_result" for b in following[: len(asked)]):
            yield (
                f"messages.{index + 1}: Did not find {len(asked)} `tool_result` block(s) at the "
                "beginning of this message. Messages following `tool_use` blocks must begin with "
                "a matching number of `tool_result` blocks."
            )


def _unexpected_results(
    index: int, blocks: list[Mapping[str, Any]], messages: list[Any]
) -> Iterator[str]:
    previous = messages[index - 1] if index > 0 else None
    asked = set()
    if previous is not None and previous["role"] == "assistant":
        asked = {str(b.get("id")) for b in _blocks(previous["content"]) if b["type"] == "tool_use"}
    for number, block in enumerate(blocks):
        if block["type"] == "tool_result" and str(block.get("tool_use_id")) not in asked:
            yield (
                f"messages.{index}.content.{number}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` block must "
                "have a corresponding `tool_use` block in the previous message."
            )


def _check_breakpoints(body: Mapping[str, Any]) -> str | None:
    found = count_breakpoints(body)
    if found > MAX_BREAKPOINTS:
        return (
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
            f"Found {found}."
        )
    return None
