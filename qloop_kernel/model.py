"""The Anthropic Messages API client: streaming, prompt caching, bounded retries. The only anthropic import.

The SDK's own retries are switched off (``max_retries=0``): it obeys ``retry-after`` without a cap and does
not retry an ``event: error`` mid-stream, a dropped connection or a stream that ends early. Here all of
those are retried with a bound on attempts and on the turn's remaining time. Blocks come back as the API
sent them, every field included, so they can be sent again unchanged (thinking blocks are signed).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .context import estimate_tokens
from .contracts import CancelToken, TurnCancelled
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
    UsageUpdate,
    api_ready,
)
from .pricing import retirement
from .probe import probe_capabilities
from .providers import (
    CREDENTIAL_SOURCES,
    DEFAULT_PROVIDER,
    PLATFORM_CAPABILITIES,
    TRANSIENT_ERROR_NAMES,
    TRANSIENT_STREAM_ERRORS,
    Capabilities,
    ProviderError,
    ProviderName,
    build_client,
    model_id,
    short_model,
)
from .redact import redact_text
from .settings import DEFAULT_MODEL
from .text import clip

if TYPE_CHECKING:
    from anthropic import Anthropic, AnthropicBedrock, AnthropicVertex
    from anthropic.types import Message as SdkMessage

    # Every platform's client (AnthropicFoundry is an Anthropic).
    SdkClient = Anthropic | AnthropicBedrock | AnthropicVertex

EPHEMERAL = {"type": "ephemeral"}
MAX_BREAKPOINTS = 4  # the API accepts at most four cache_control blocks
LOOKBACK_BLOCKS = 20  # it looks this many blocks back from a breakpoint for a cached prefix
# The shortest cacheable prefix by model family ("Prompt caching > Cache limitations"; Opus 5.5 and
# Sonnet 5.5 as their family's). Checked in order: the first family the model id contains.
CACHE_MINIMUMS = (
    ("claude-haiku-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-8", 1024),
    ("claude-opus-5", 512),
    ("claude-fable-5", 512),
    ("claude-sonnet", 1024),
)
RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
SPEND_LIMIT_CODE = "enforced_spend_limit_reached"
MODELS_HINT = "check --model; `%agent models` lists the known ones"
KEY_HINT = (
    "the API key was refused: check ANTHROPIC_API_KEY in the kernel's environment, or type a key "
    "with `%agent key`"
)
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")


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


class _ClientPool:
    """SDK clients kept for the process, one per platform and what the client reads when built.

    Building one costs about 20 ms of CPU (the TLS context loads the CA certificates) and its open
    connections are what a next turn can reuse. The key is what makes two clients differ: the
    platform, the explicit key and URL, and the environment the SDK and httpx read at construction
    (``ANTHROPIC_*``: key, token, base URL, headers; proxies; CA files), hashed so no secret is kept
    in it. Timeouts are per request (``RetryPolicy``), not the client's. Platforms whose clients
    read other credentials (Bedrock, Vertex, Foundry) and clients given options get their own client.
    """

    SHARED = ("anthropic", "compatible")
    SIZE = 4  # then the least recently used client is closed (a model holding it takes a new one)

    def __init__(self) -> None:
        self._clients: dict[str, SdkClient] = {}
        self._lock = threading.Lock()

    def get(
        self,
        provider: ProviderName,
        *,
        strict: bool,
        api_key: str | None,
        base_url: str | None,
        options: Mapping[str, Any] | None,
    ) -> SdkClient:
        import anthropic

        def build() -> SdkClient:
            client: SdkClient = build_client(
                anthropic,
                provider,
                strict=strict,
                api_key=api_key,
                base_url=base_url,
                options=options,
            )
            return client

        if provider not in self.SHARED or options:
            return build()
        key = _client_key(provider, strict, api_key, base_url)
        with self._lock:
            client = self._clients.pop(key, None)
            if client is None or client.is_closed():
                client = build()
            self._clients[key] = client  # the newest last
            while len(self._clients) > self.SIZE:
                # Closed now, not when collected: its sockets would be left to the garbage collector.
                self._clients.pop(next(iter(self._clients))).close()
            return client

    def discard(self, client: SdkClient) -> None:
        """Forget ``client`` (it is being closed)."""
        with self._lock:
            self._clients = {k: c for k, c in self._clients.items() if c is not client}


def _client_key(provider: str, strict: bool, api_key: str | None, base_url: str | None) -> str:
    read = sorted(
        (name, value) for name, value in os.environ.items()
        if name.startswith("ANTHROPIC_") or name.lower().endswith("_proxy")
        or name in ("SSL_CERT_FILE", "SSL_CERT_DIR")
    )  # fmt: skip
    parts = json.dumps([provider, strict, api_key, base_url, read])
    return hashlib.sha256(parts.encode()).hexdigest()


_clients = _ClientPool()


def warm_client(provider: ProviderName = DEFAULT_PROVIDER) -> bool:
    """Build, into the kernel's pool, the client a model with no explicit key, URL or options
    takes on ``provider`` (no request is made), with the resources it imports on first use.

    The first turn then finds it (building one costs about 20 ms of CPU), unless the key, URL,
    proxy or platform changes before; an unused one is closed when the pool is full. False for a
    platform whose clients are not kept (each model builds its own).
    """
    if provider not in _ClientPool.SHARED:
        return False
    client = _clients.get(provider, strict=False, api_key=None, base_url=None, options=None)
    client.messages  # noqa: B018  # a cached property that imports the resource modules
    return True


class AnthropicModel:
    """ModelClient for the Messages API through the ``anthropic`` SDK on one platform.

    ``provider`` picks the SDK client (see providers.py); ``client_options`` go to it as they are
    (e.g. Vertex ``credentials``). ``capabilities`` switch features off; for ``compatible`` they
    are probed on first use unless given.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        provider: ProviderName = DEFAULT_PROVIDER,
        api_key: str | None = None,
        base_url: str | None = None,
        retry: RetryPolicy | None = None,
        strict: bool = False,
        clock: Callable[[], float] = time.monotonic,
        client_options: Mapping[str, Any] | None = None,
        capabilities: Capabilities | None = None,
    ) -> None:
        import anthropic

        self._anthropic = anthropic
        self.model = model or DEFAULT_MODEL  # settings.py reads QLOOP_MODEL, not the client
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self.clock = clock
        # api_key / base_url None: each client reads its platform's own environment variables
        self._client_args: dict[str, Any] = {
            "strict": strict, "api_key": api_key, "base_url": base_url, "options": client_options
        }  # fmt: skip
        self._client = _clients.get(provider, **self._client_args)
        self._probed = capabilities is not None or provider != "compatible"
        self.capabilities = capabilities or PLATFORM_CAPABILITIES[provider]

    def capability_notes(self) -> list[str]:
        """Probe a ``compatible`` server once (cached per URL and model); one line per probe
        that switched features off, else nothing."""
        if self._probed:
            return []

        self._probed = True
        self.capabilities = probe_capabilities(self._client, model_id(self.provider, self.model))
        off = self.capabilities.off()
        if not off:
            return []
        return [f"{self._client.base_url} does not support {', '.join(off)}: switched off"]

    def close(self) -> None:
        """Close the SDK client's connections (idempotent). The client may be shared: a model
        still holding it takes a new one on its next request, as a later model does."""
        _clients.discard(self._client)
        self._client.close()

    def __enter__(self) -> AnthropicModel:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse:
        """Stream one response, retrying transient failures within the attempt and time bounds."""
        retired = retirement(short_model(self.provider, self.model))
        if retired is not None:
            raise ModelError(retired)
        try:
            self.capability_notes()
        except ProviderError as exc:
            raise ModelError(str(exc)) from None
        params = adapt_params(
            build_params(model_id(self.provider, self.model), request), self.capabilities
        )
        if self._client.is_closed():  # closed by another model sharing it
            self._client = _clients.get(self.provider, **self._client_args)
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
        asked = "the API asked to wait" if exc.retry_after is not None else "the next retry is in"
        reason = exc.reason.rstrip(". ")
        left = None if deadline is None else deadline - self.clock()
        if left is not None and delay >= left:
            raise ModelError(
                f"{reason}; {asked} {delay:.1f} s, more than the time left for this turn "
                f"({max(left, 0.0):.1f} s, --timeout)"
            ) from None
        if delay > self.retry.max_delay_s:
            raise ModelError(
                f"{reason}; {asked} {delay:.1f} s, longer than the {self.retry.max_delay_s:g} s "
                "this client waits between attempts"
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
            raise self._classify(exc, deadline, params["model"]) from exc

    def _consume(
        self,
        params: dict[str, Any],
        timeout: float,
        deadline: float | None,
        on_event: Callable[[ModelEvent], None],
        cancel: CancelToken,
    ) -> ModelResponse:
        if not self.capabilities.streaming:
            message = self._client.messages.create(**params, timeout=timeout)
            _forward_message(message, on_event)
        else:
            message = self._read_stream(params, timeout, deadline, on_event, cancel)
        if message.stop_reason is None:
            raise _Transient("the response stream ended early, before the model finished")
        details = getattr(message, "stop_details", None)
        return ModelResponse(
            content=[block_param(b) for b in message.content],
            stop_reason=message.stop_reason,
            usage=_usage(message.usage),
            model=message.model,
            stop_details=details.to_dict(mode="json") if details is not None else None,
        )

    def _read_stream(
        self,
        params: dict[str, Any],
        timeout: float,
        deadline: float | None,
        on_event: Callable[[ModelEvent], None],
        cancel: CancelToken,
    ) -> SdkMessage:
        with self._client.messages.stream(**params, timeout=timeout) as stream:
            unregister = cancel.on_cancel(stream.close)
            try:
                for event in stream:
                    if cancel.cancelled:
                        raise TurnCancelled("cancelled")
                    if deadline is not None and self.clock() > deadline:
                        raise ModelTimeout("the model response ran past the turn's time limit")
                    _forward(event, stream, on_event)
                return stream.get_final_message()
            finally:
                unregister()

    def _classify(self, exc: Exception, deadline: float | None, model: str) -> Exception:
        sdk = self._anthropic
        if deadline is not None and self.clock() >= deadline:
            return ModelTimeout("the model response ran past the turn's time limit")
        if isinstance(exc, sdk.APIStatusError):
            if self.provider != "anthropic" and exc.status_code in (401, 403):
                return ModelError(_platform_auth_error(exc, self.provider))
            return _status_error(exc, model)
        if isinstance(exc, sdk.APIConnectionError) and _cut_mid_stream(exc):
            return _Transient(f"connection dropped: {_describe(exc)}")
        if isinstance(exc, sdk.APIConnectionError):
            where = _connection_note(str(self._client.base_url.host), os.environ)
            return _Transient(f"connection problem reaching {where}: {_describe(exc)}")
        if type(exc).__module__.startswith(("httpx", "httpcore", "h11")):
            return _Transient(f"connection dropped: {_describe(exc)}")
        # A malformed answer (invalid JSON, a missing field, an HTML page, a non-object tool
        # input) or any other SDK failure ends the turn with one clean line, never a traceback.
        return ModelError(f"the API's response could not be read: {_describe(exc)}")


def _cut_mid_stream(exc: Exception) -> bool:
    """Whether a connection error is a response cut off after it began (SDK 2.17 wraps the
    transport's protocol or read error; earlier versions raised it bare)."""
    cause = exc.__cause__
    return cause is not None and type(cause).__name__ in ("RemoteProtocolError", "ReadError")


def _status_error(exc: Any, model: str) -> Exception:
    status = int(getattr(exc, "status_code", 0) or 0)
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    error = error if isinstance(error, dict) else {}
    kind, message = _error_kind(exc, error), str(error.get("message", ""))
    text = redact_text(f"API error {status} ({kind or 'unknown'}): {message or _describe(exc)}")
    if status == 200:  # an `event: error` in the middle of a stream
        said = redact_text(f"the stream reported an error ({kind}): {message}")
        return _Transient(said) if kind in TRANSIENT_STREAM_ERRORS else ModelError(said)
    if status == 404 and kind == "not_found_error" and message.startswith("model:"):
        return ModelError(redact_text(f"model {model} not found: {MODELS_HINT}"))
    if status == 401:
        return ModelError(f"{text} — {KEY_HINT}")
    if status == 429 and _is_spend_limit(error):
        return ModelError(f"{text} — the spend limit is reached; retrying cannot help")
    should_retry = _header(exc, "x-should-retry")
    if should_retry == "false":
        return ModelError(f"{text} (the API said not to retry)")
    transient = status in RETRYABLE_STATUS or status >= 500 or kind in TRANSIENT_ERROR_NAMES
    if should_retry == "true" or transient:
        return _Transient(text, _retry_after(exc))
    return ModelError(text)


def _connection_note(host: str, environ: Any) -> str:
    """The API host and whether a proxy is in the way; a proxy's address is never shown (it may
    hold a password), only the variable that sets it."""
    found = [n for n in PROXY_VARIABLES if environ.get(n) or environ.get(n.lower())]
    if not found:
        return f"{host} (no proxy set)"
    bypass = [
        h.strip().lstrip(".")
        for h in (environ.get("NO_PROXY") or environ.get("no_proxy") or "").split(",")
    ]
    if any(h and (host == h or host.endswith("." + h)) for h in bypass) or "*" in bypass:
        return f"{host} (directly: NO_PROXY covers it, though {found[0]} is set)"
    return f"{host} (through the proxy in {found[0]})"


def _platform_auth_error(exc: Any, provider: ProviderName) -> str:
    """A refused credential on a platform: what it said and where its credentials come from."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else {}
    said = error.get("message", "") if isinstance(error, dict) else ""
    text = redact_text(f"API error {exc.status_code}: {said or _describe(exc)}")
    return f"{text} — the {provider} credentials were refused: {CREDENTIAL_SOURCES[provider]}"


def _error_kind(exc: Any, error: dict[str, Any]) -> str:
    """The error's name: the API's ``type``, Google's ``status`` (Vertex) or AWS's
    ``x-amzn-ErrorType`` header (Bedrock, ``Name:namespace``)."""
    kind = error.get("type") or error.get("status")
    if kind:
        return str(kind)
    response = getattr(exc, "response", None)
    amazon = response.headers.get("x-amzn-errortype") if response is not None else None
    return str(amazon).split(":", 1)[0] if amazon else ""


def _is_spend_limit(error: dict[str, Any]) -> bool:
    details = error.get("details")
    if isinstance(details, dict) and details.get("error_code") == SPEND_LIMIT_CODE:
        return True
    words = str(error.get("message", "")).lower()
    return "spend limit" in words or "usage limit" in words


def _header(exc: Any, name: str) -> str | None:
    response = getattr(exc, "response", None)
    value = response.headers.get(name) if response is not None else None
    return value.strip().lower() if isinstance(value, str) else None


def _retry_after(exc: Any) -> float | None:
    value = _header(exc, "retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    line = " ".join(text.split())
    return redact_text(clip(line, 300))


def _forward(event: Any, stream: Any, on_event: Callable[[ModelEvent], None]) -> None:
    kind = getattr(event, "type", "")
    if kind == "text" and event.text:
        on_event(TextDelta(event.text))
    elif kind == "thinking" and event.thinking:
        on_event(ThinkingDelta(event.thinking))
    elif kind == "content_block_stop" and getattr(event.content_block, "type", "") == "tool_use":
        block = event.content_block
        on_event(ToolCallReady(block.id, block.name, _tool_input(block.input)))
    elif kind == "message_delta":
        on_event(UsageUpdate(_usage(stream.current_message_snapshot.usage)))


def _forward_message(message: Any, on_event: Callable[[ModelEvent], None]) -> None:
    """The events of a whole (not streamed) message, in the order a stream would give them."""
    for block in message.content:
        kind = getattr(block, "type", "")
        if kind == "text" and block.text:
            on_event(TextDelta(block.text))
        elif kind == "thinking" and block.thinking:
            on_event(ThinkingDelta(block.thinking))
        elif kind == "tool_use":
            on_event(ToolCallReady(block.id, block.name, _tool_input(block.input)))
    on_event(UsageUpdate(_usage(message.usage)))


def _tool_input(value: Any) -> dict[str, Any]:
    # The loop answers a non-object input with an is_error result; it reads it from "_raw".
    return dict(value) if isinstance(value, dict) else {"_raw": value}


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=getattr(usage, "input_tokens", 0) or 0,
        output_tokens=getattr(usage, "output_tokens", 0) or 0,
        cache_read_input_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
        cache_creation_input_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
    )


def block_param(block: Any) -> Block:
    """A response content block as the API sent it: every field it set, unknown ones included.

    Sending it back unchanged is what the API asks for (thinking blocks are checked against their
    signature); ``api_ready`` drops what the API refuses back (empty text).
    """
    # warnings=False: a tool input that is not an object is kept as sent, not warned about.
    dumped: Block = block.to_dict(mode="json", exclude_unset=True, warnings=False)
    dumped.pop("parsed_output", None)  # the SDK's own parse of structured output, not the API's
    return dumped


def build_params(model: str, request: ModelRequest) -> dict[str, Any]:
    """Request parameters with cache breakpoints where a prefix can be cached.

    On the tool list and the system prompt only when the prefix they end is at least the model's
    minimum cacheable length (a shorter one is never written); on the newest block once the prompt
    is that long; and inside a newest exchange of more than 20 blocks (many tool calls at once),
    so the API's 20-block lookback still finds the previous request's prefix.
    """
    minimum = cache_minimum(model)
    tools = list(request.tools)
    prefix = estimate_tokens(tools) if tools else 0
    if tools and prefix >= minimum:
        tools[-1] = {**tools[-1], "cache_control": EPHEMERAL}
    params: dict[str, Any] = {"model": model, "max_tokens": request.max_tokens, "tools": tools}
    if request.system:
        prefix += estimate_tokens(request.system)
        system: Block = {"type": "text", "text": request.system}
        params["system"] = [{**system, "cache_control": EPHEMERAL} if prefix >= minimum else system]
    messages = api_ready(request.messages)
    if _reaches(messages, minimum - prefix):
        used = sum("cache_control" in b for b in [*tools[-1:], *params.get("system", [])])
        messages = with_breakpoints(messages, MAX_BREAKPOINTS - used)
    params["messages"] = messages
    return params


def cache_minimum(model: str) -> int:
    """The shortest prefix (tokens) the model caches; 1,024 for a model not listed."""
    for family, tokens in CACHE_MINIMUMS:
        if family in model:
            return tokens
    return 1024


def _reaches(messages: list[Message], tokens: int) -> bool:
    """Whether the messages hold at least ``tokens`` tokens (stops counting once they do)."""
    chars = 0
    for message in messages:
        chars += len(json.dumps(message.get("content"), default=str))
        if chars // 4 >= tokens:
            return True
    return chars // 4 >= tokens


def adapt_params(params: dict[str, Any], capabilities: Capabilities) -> dict[str, Any]:
    """``params`` without what the platform does not support (see providers.Capabilities)."""
    if not capabilities.off():
        return params
    out = dict(params)
    if not capabilities.tools:
        out.pop("tools", None)
    out["messages"] = [_adapt_message(m, capabilities) for m in out["messages"]]
    if not capabilities.prompt_caching:
        out = _without_cache_control(out)
    return out


IMAGE_OFF = "[image left out: the model server does not accept images]"


def _adapt_message(message: Message, capabilities: Capabilities) -> Message:
    content = message["content"]
    if isinstance(content, str):
        return message
    blocks = []
    for block in content:
        kind = block.get("type")
        if kind in ("thinking", "redacted_thinking") and not capabilities.thinking:
            continue
        if kind == "image" and not capabilities.images:
            block = {"type": "text", "text": IMAGE_OFF}
        elif kind == "tool_result" and isinstance(block.get("content"), list):
            inner = {"role": "user", "content": block["content"]}
            block = {**block, "content": _adapt_message(inner, capabilities)["content"]}
        blocks.append(block)
    return {**message, "content": blocks}


# Any: a JSON value of any shape (request params, a message, a block), given back in that shape
def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def with_last_breakpoint(messages: list[Message]) -> list[Message]:
    """A shallow copy of ``messages`` whose newest cacheable block carries a cache breakpoint."""
    return with_breakpoints(messages, 1)


def with_breakpoints(messages: list[Message], room: int = MAX_BREAKPOINTS) -> list[Message]:
    """A shallow copy of ``messages`` with breakpoints on the newest cacheable block and, when the
    newest exchange (the last two messages) has more than the lookback, every 19 blocks within it.
    At most ``room`` breakpoints; only the messages that get one are copied."""
    out = list(messages)
    if not out or room < 1:
        return out
    start = max(len(out) - 2, 0) if len(out) >= 3 else len(out) - 1
    places = [(i, j) for i in range(start, len(out)) for j in range(len(_blocks(out[i])))]
    cacheable = [p for p in places if _cacheable(_blocks(out[p[0]])[p[1]])]
    if not cacheable:
        return out
    marked = [cacheable[-1]]
    step = LOOKBACK_BLOCKS - 1
    bridges = [p for p in cacheable[:-1] if places.index(p) % step == step - 1]
    marked += bridges[: room - 1]
    for i in sorted({i for i, _ in marked}):
        blocks = list(_blocks(out[i]))
        for j in sorted(j for m, j in marked if m == i):
            blocks[j] = {**blocks[j], "cache_control": EPHEMERAL}
        out[i] = {**out[i], "content": blocks}
    return out


def _blocks(message: Message) -> list[Block]:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _cacheable(block: Block) -> bool:
    if block.get("type") in ("thinking", "redacted_thinking"):
        return False
    return not (block.get("type") == "text" and not block.get("text"))
