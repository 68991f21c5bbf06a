"""The Anthropic Messages API client: streaming, prompt caching, bounded retries. The only anthropic import.

The SDK's own retries are switched off (``max_retries=0``): it obeys ``retry-after`` without a cap and does
not retry an ``event: error`` mid-stream, a dropped connection or a stream that ends early. Here all of
those are retried with a bound on attempts and on the turn's remaining time.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .loop import CancelToken, TurnCancelled
from .messages import (
    Block,
    Message,
    ModelError,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelTimeout,
    RetryNotice,
    TextDelta,
    ThinkingDelta,
    ToolCallReady,
    Usage,
)
from .redact import redact_text

DEFAULT_MODEL = "claude-sonnet-4-6"
EPHEMERAL = {"type": "ephemeral"}
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}


def default_model() -> str:
    return os.environ.get("QLOOP_MODEL") or DEFAULT_MODEL


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0  # a retry-after above this (or above the time left) is not waited for
    read_timeout_s: float = 120.0


class _Transient(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class AnthropicModel:
    """ModelClient for the Messages API through the ``anthropic`` SDK (always streaming)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        strict: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        import anthropic

        self._anthropic = anthropic
        self.model = model or default_model()
        self.retry = retry or RetryPolicy()
        self.clock = clock
        self._client = anthropic.Anthropic(
            api_key=api_key,  # None: the SDK reads ANTHROPIC_API_KEY
            base_url=base_url,  # None: the SDK reads ANTHROPIC_BASE_URL
            max_retries=0,
            _strict_response_validation=strict,
        )

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse:
        """Stream one response, retrying transient failures within the attempt and time bounds."""
        params = build_params(self.model, request)
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._stream_once(params, request.deadline, on_event, cancel)
            except _Transient as exc:
                delay = self._retry_delay(exc, attempt, request.deadline)
                on_event(RetryNotice(attempt, delay, exc.reason))
                if cancel.wait(delay):
                    raise TurnCancelled("cancelled") from None

    def _retry_delay(self, exc: _Transient, attempt: int, deadline: float | None) -> float:
        if attempt >= self.retry.max_attempts:
            raise ModelError(f"{exc.reason} (gave up after {attempt} attempts)") from None
        backoff = self.retry.base_delay_s * 2 ** (attempt - 1) * (1 + random.random() / 4)
        delay = exc.retry_after if exc.retry_after is not None else backoff
        left = None if deadline is None else deadline - self.clock()
        if delay > self.retry.max_delay_s or (left is not None and delay >= left):
            raise ModelError(
                f"{exc.reason}; the API asked to wait {delay:.1f} s, more than the time left "
                "for this turn"
            ) from None
        return delay

    def _stream_once(
        self,
        params: dict[str, Any],
        deadline: float | None,
        on_event: Callable[[ModelEvent], None],
        cancel: CancelToken,
    ) -> ModelResponse:
        timeout = self.retry.read_timeout_s
        if deadline is not None:
            timeout = max(0.01, min(timeout, deadline - self.clock()))
        try:
            return self._consume(params, timeout, deadline, on_event, cancel)
        except (TurnCancelled, ModelError, _Transient):
            raise
        except Exception as exc:
            if cancel.cancelled:
                raise TurnCancelled("cancelled") from exc
            raise self._classify(exc, deadline) from exc

    def _consume(
        self,
        params: dict[str, Any],
        timeout: float,
        deadline: float | None,
        on_event: Callable[[ModelEvent], None],
        cancel: CancelToken,
    ) -> ModelResponse:
        with self._client.messages.stream(**params, timeout=timeout) as stream:
            unregister = cancel.on_cancel(stream.close)
            try:
                for event in stream:
                    if cancel.cancelled:
                        raise TurnCancelled("cancelled")
                    if deadline is not None and self.clock() > deadline:
                        raise ModelTimeout("the model response ran past the turn's time limit")
                    _forward(event, on_event)
                message = stream.get_final_message()
            finally:
                unregister()
        if message.stop_reason is None:
            raise _Transient("the response stream ended early, before the model finished")
        return ModelResponse(
            content=[block_param(b) for b in message.content],
            stop_reason=message.stop_reason,
            usage=_usage(message.usage),
            model=message.model,
        )

    def _classify(self, exc: Exception, deadline: float | None) -> Exception:
        sdk = self._anthropic
        if deadline is not None and self.clock() >= deadline:
            return ModelTimeout("the model response ran past the turn's time limit")
        if isinstance(exc, sdk.APIStatusError):
            return _status_error(exc)
        if isinstance(exc, sdk.APIConnectionError | sdk.APIResponseValidationError):
            return _Transient(f"connection problem: {_describe(exc)}")
        if type(exc).__module__.startswith(("httpx", "httpcore", "h11")):
            return _Transient(f"connection dropped: {_describe(exc)}")
        if isinstance(exc, sdk.AnthropicError):
            return ModelError(redact_text(str(exc)))
        return exc


def _status_error(exc: Any) -> Exception:
    status = int(getattr(exc, "status_code", 0) or 0)
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    kind = error.get("type", "") if isinstance(error, dict) else ""
    message = error.get("message", "") if isinstance(error, dict) else ""
    text = redact_text(f"API error {status} ({kind or 'unknown'}): {message or _describe(exc)}")
    if status == 200:  # an `event: error` in the middle of a stream
        return _Transient(redact_text(f"the stream reported an error ({kind}): {message}"))
    if status in RETRYABLE_STATUS or status >= 500:
        return _Transient(text, _retry_after(exc))
    return ModelError(text)


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    return redact_text(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def _forward(event: Any, on_event: Callable[[ModelEvent], None]) -> None:
    kind = getattr(event, "type", "")
    if kind == "text":
        on_event(TextDelta(event.text))
    elif kind == "thinking":
        on_event(ThinkingDelta(event.thinking))
    elif kind == "content_block_stop" and getattr(event.content_block, "type", "") == "tool_use":
        block = event.content_block
        on_event(ToolCallReady(block.id, block.name, dict(block.input or {})))


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens or 0,
        output_tokens=usage.output_tokens or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
    )


def block_param(block: Any) -> Block:
    """A response content block in the shape the API accepts back in a later request."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    dumped: Block = block.model_dump(mode="json", exclude_none=True)
    return dumped


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    """Request parameters with cache breakpoints on the tools, the system prompt and the newest block."""
    tools = list(request.tools)
    if tools:
        tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": with_last_breakpoint(request.messages),
        "tools": tools,
    }
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": EPHEMERAL}]
    return params


def with_last_breakpoint(messages: list[Message]) -> list[Message]:
    """A shallow copy of ``messages`` whose newest cacheable block carries a cache breakpoint."""
    out = list(messages)
    if not out:
        return out
    last = dict(out[-1])
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].get("type") not in ("thinking", "redacted_thinking"):
            blocks[i] = {**blocks[i], "cache_control": EPHEMERAL}
            break
    last["content"] = blocks
    out[-1] = last
    return out
