"""The capability probe of a Messages-compatible server: which features it accepts.

Each probe is one tiny request (``max_tokens`` 1, marked with an ``x-qloop-probe`` header naming
the feature). A 4xx answer switches the feature off; an authentication error or an unreachable
server is not a missing feature and raises ProviderError. Results are kept per URL and model for
the life of the process, so a kernel probes once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .providers import Capabilities, ProviderError

PROBE_HEADER = "x-qloop-probe"
_ASK = [{"role": "user", "content": "Reply with OK."}]
# A 1×1 transparent PNG.
_PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
_TOOL = {
    "name": "probe",
    "description": "Answers nothing; checks that tools are accepted.",
    "input_schema": {"type": "object", "properties": {}},
}
_NOT_A_FEATURE = {401, 403, 407, 429}

_cache: dict[tuple[str, str], Capabilities] = {}
_lock = threading.Lock()


def probe_capabilities(client: Any, model: str) -> Capabilities:
    """The features the server behind ``client`` accepts for ``model`` (probed once)."""
    key = (str(client.base_url), model)
    with _lock:
        if key not in _cache:
            _cache[key] = _probe(client, model)
        return _cache[key]


def forget_probes() -> None:
    """Drop the kept probe results (a server was upgraded, or between tests)."""
    with _lock:
        _cache.clear()


def _probe(client: Any, model: str) -> Capabilities:
    import anthropic

    def accepts(feature: str, call: Callable[[dict[str, str]], object]) -> bool:
        try:
            call({PROBE_HEADER: feature})
        except anthropic.APIStatusError as exc:
            if exc.status_code in _NOT_A_FEATURE or exc.status_code >= 500:
                raise ProviderError(_unusable(client, exc)) from None
            return False
        except anthropic.APIConnectionError as exc:
            raise ProviderError(f"{client.base_url} cannot be reached: {exc}") from None
        return True

    def ask(**extra: Any) -> Callable[[dict[str, str]], object]:
        def call(headers: dict[str, str]) -> object:
            params = {"model": model, "max_tokens": 1, "messages": _ASK, **extra}
            return client.messages.create(**params, extra_headers=headers, timeout=30)

        return call

    def stream(headers: dict[str, str]) -> object:
        params = {"model": model, "max_tokens": 1, "messages": _ASK}
        with client.messages.stream(**params, extra_headers=headers, timeout=30) as events:
            return events.get_final_message()

    def count(headers: dict[str, str]) -> object:
        return client.messages.count_tokens(model=model, messages=_ASK, extra_headers=headers)

    streaming = accepts("streaming", stream)
    if not streaming and not accepts("messages", ask()):
        raise ProviderError(f"{client.base_url} answers no Messages API request for {model}")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": _PIXEL}}  # fmt: skip
    return Capabilities(
        streaming=streaming,
        tools=accepts("tools", ask(tools=[_TOOL])),
        prompt_caching=accepts(
            "prompt_caching",
            ask(
                system=[
                    {
                        "type": "text",
                        "text": "Answer briefly.",
                        "cache_control": {"type": "ephemeral"},
                    }
                ]
            ),
        ),  # fmt: skip
        thinking=accepts("thinking", ask(thinking={"type": "adaptive"})),
        images=accepts(
            "images",
            ask(
                messages=[
                    {"role": "user", "content": [image, {"type": "text", "text": "Reply with OK."}]}
                ]
            ),
        ),  # fmt: skip
        token_counting=accepts("token_counting", count),
    )


def _unusable(client: Any, exc: Any) -> str:
    message = getattr(exc, "message", "") or str(exc)
    first = message.splitlines()[0] if message else type(exc).__name__
    return f"{client.base_url} refused the capability probe ({exc.status_code}): {first}"
