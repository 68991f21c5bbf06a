"""Loopback stand-ins of the cloud platforms' wire formats around the Messages API stand-in.

``PlatformStandIn(platform=...)`` answers what the SDK's platform clients send:

- ``vertex``: ``POST /v1/projects/P/locations/L/publishers/anthropic/models/M:streamRawPredict``
  (``:rawPredict`` unstreamed), the model in the path, ``anthropic_version`` in the body, SSE
  answers, Google-style error bodies, ``Authorization: Bearer TOKEN``;
- ``bedrock``: ``POST /model/M/invoke-with-response-stream`` (``/invoke`` unstreamed), answers
  in the AWS event-stream binary framing, each event's payload ``{"bytes": base64(event)}``,
  errors as ``exception`` frames or ``{"message"}`` bodies with ``x-amzn-ErrorType``;
- ``foundry``: the Messages API under ``/anthropic/v1/messages`` with an ``api-key`` header;
- ``compatible``: ``/v1/messages`` of a partial implementation that refuses ``cache_control``,
  ``thinking`` and token counting (``lacks`` chooses), as LiteLLM or vLLM-style servers may.

Requests marked with the capability probe's header are answered "OK" without using the script,
so a script holds only the turn's replies.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import unquote

from ..providers import short_model
from .record import RecordedRequest
from .script import Reply
from .server import StandInAPI, _BadRequest
from .transport import Exchange

Platform = Literal["vertex", "bedrock", "foundry", "compatible"]
PROBE_HEADER = "x-qloop-probe"
_VERTEX_PATH = re.compile(
    r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/models/"
    r"(?P<model>[^/:]+):(?P<method>streamRawPredict|rawPredict)$"
)
_BEDROCK_PATH = re.compile(
    r"^/model/(?P<model>[^/]+)/(?P<method>invoke-with-response-stream|invoke)$"
)
COMPATIBLE_LACKS = ("prompt_caching", "thinking", "token_counting")
# Stream error types of the first-party API as Bedrock's exception frames name them.
BEDROCK_STREAM_ERRORS = {
    "overloaded_error": "serviceUnavailableException",
    "api_error": "internalServerException",
    "rate_limit_error": "throttlingException",
    "invalid_request_error": "validationException",
}
BEDROCK_HTTP_ERRORS = {
    400: "ValidationException", 401: "UnrecognizedClientException", 403: "AccessDeniedException",
    404: "ResourceNotFoundException", 429: "ThrottlingException", 500: "InternalServerException",
    503: "ServiceUnavailableException", 529: "ServiceUnavailableException",
}  # fmt: skip
GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                 503: "UNAVAILABLE"}  # fmt: skip


class PlatformStandIn(StandInAPI):
    """The Messages API stand-in behind one platform's paths, auth and framing.

    ``token`` is the credential required (Vertex/Bedrock bearer token, Foundry ``api-key``);
    None accepts any. ``lacks`` (compatible only) names the features the server refuses.
    Other options are ``StandInAPI``'s.
    """

    def __init__(
        self,
        script: Iterable[Any] = (),
        *,
        platform: Platform,
        token: str | None = None,
        lacks: Iterable[str] = COMPATIBLE_LACKS,
        **options: Any,
    ) -> None:
        if platform == "compatible":
            options.setdefault("adaptive_thinking", "thinking" not in set(lacks))
        super().__init__(script, **options)
        self.platform = platform
        self.token = token
        self.lacks = frozenset(lacks) if platform == "compatible" else frozenset()

    @property
    def base_url(self) -> str:
        """The URL to give the platform's SDK client as ``base_url``."""
        root = f"http://127.0.0.1:{self.port}"
        suffix = {"foundry": "/anthropic/", "vertex": "/v1"}.get(self.platform, "")
        return root + suffix

    # Routing -----------------------------------------------------------------------------------

    def _route(self, exchange: Exchange, request: RecordedRequest, parse_error: str | None) -> None:
        self._check_platform_auth(exchange.headers)
        if parse_error is not None:
            raise _BadRequest(400, "invalid_request_error", parse_error)
        translated = self._translate(exchange, request)
        if translated is None:
            message = f"Not found: {exchange.method} {exchange.path}"
            raise _BadRequest(404, "not_found_error", message)
        path, body = translated
        request = replace(request, body=body)
        if path == "/v1/messages/count_tokens":
            self._count_tokens(exchange, request)
        elif self.platform == "bedrock":
            self._messages(_EventStreamExchange(exchange), request)
        else:
            self._messages(exchange, request)

    def _translate(self, exchange: Exchange, request: RecordedRequest) -> tuple[str, Any] | None:
        """The first-party path and body for a platform request, or None if not routed."""
        if exchange.method != "POST":
            return None
        body = request.body
        if self.platform == "vertex":
            return _vertex_request(exchange.path, body)
        if self.platform == "bedrock":
            return _bedrock_request(exchange.path, body)
        path = exchange.path
        if self.platform == "foundry":
            if not path.startswith("/anthropic/"):
                return None
            path = path[len("/anthropic") :]
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return None
        if path.endswith("count_tokens") and "token_counting" in self.lacks:
            return None
        self._refuse_lacking(body)
        return path, body

    def _refuse_lacking(self, body: Any) -> None:
        if "streaming" in self.lacks and isinstance(body, dict) and body.get("stream"):
            raise _BadRequest(400, "invalid_request_error", "stream: streaming is not supported")
        if "prompt_caching" in self.lacks and '"cache_control"' in json.dumps(body):
            raise _BadRequest(
                400, "invalid_request_error", "cache_control: Extra inputs are not permitted"
            )
        if "thinking" in self.lacks and isinstance(body, dict) and "thinking" in body:
            raise _BadRequest(
                400, "invalid_request_error", "thinking: Extra inputs are not permitted"
            )
        if "images" in self.lacks and '"type": "image"' in json.dumps(body):
            raise _BadRequest(400, "invalid_request_error", "image content is not supported")
        if "tools" in self.lacks and isinstance(body, dict) and "tools" in body:
            raise _BadRequest(400, "invalid_request_error", "tools: Extra inputs are not permitted")

    def _check_platform_auth(self, headers: Mapping[str, str]) -> None:
        if self.token is None:
            return
        lowered = {name.lower(): value for name, value in headers.items()}
        if self.platform == "foundry":
            offered = lowered.get("api-key", "")
        else:
            scheme, _, offered = lowered.get("authorization", "").partition(" ")
            offered = offered.strip() if scheme.lower() == "bearer" else ""
        if offered != self.token:
            raise _BadRequest(401, "authentication_error", "the credential was not accepted")

    def _messages(self, exchange: Any, request: RecordedRequest) -> None:
        if PROBE_HEADER in request.headers:
            probe = self._script
            self._script = _Probe()  # type: ignore[assignment]
            try:
                super()._messages(exchange, request)
            finally:
                self._script = probe
            return
        super()._messages(exchange, request)

    @property
    def probes(self) -> list[str]:
        """The features of the capability probes received (accepted or not), oldest first."""
        return [r.headers[PROBE_HEADER] for r in self.requests if PROBE_HEADER in r.headers]

    # Errors in the platform's shape ------------------------------------------------------------

    def _answer_error(
        self,
        exchange: Any,
        request: RecordedRequest,
        status: int,
        error_type: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        inner = exchange.inner if isinstance(exchange, _EventStreamExchange) else exchange
        if self.platform == "bedrock":
            name = BEDROCK_HTTP_ERRORS.get(status, "InternalServerException")
            self._log.append(replace(request, status=status, error=message))
            if inner.wait(delay):
                inner.send_json(status, {"message": message},
                                {**(headers or {}), "x-amzn-ErrorType": f"{name}:http://internal.amazon.com/coral/com.amazon.bedrock/"})  # fmt: skip
            return
        if self.platform == "vertex" and status in (401, 403, 429):
            self._log.append(replace(request, status=status, error=message))
            google = {"error": {"code": status, "message": message,
                                "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}  # fmt: skip
            if inner.wait(delay):
                inner.send_json(status, google, headers)
            return
        super()._answer_error(inner, request, status, error_type, message, headers=headers,
                              delay=delay, details=details)  # fmt: skip


class _Probe:
    """Answers every probe request with a short text."""

    remaining = 0

    def next_response(self, request: RecordedRequest) -> Reply:
        return Reply(content="OK", stop_reason="max_tokens")


def _vertex_request(path: str, body: Any) -> tuple[str, Any] | None:
    if path.endswith("/models/count-tokens:rawPredict"):
        return "/v1/messages/count_tokens", _without_version(body, "vertex")
    found = _VERTEX_PATH.match(path)
    if found is None:
        return None
    body = _without_version(body, "vertex")
    if "model" in body:
        raise _BadRequest(400, "invalid_request_error", "model: belongs in the URL on Vertex AI")
    streamed = found["method"] == "streamRawPredict"
    if bool(body.get("stream")) != streamed:
        raise _BadRequest(400, "invalid_request_error", "stream must match the method")
    return "/v1/messages", {"model": short_model("vertex", found["model"]), **body}


def _bedrock_request(path: str, body: Any) -> tuple[str, Any] | None:
    found = _BEDROCK_PATH.match(path)
    if found is None:
        return None
    body = _without_version(body, "bedrock")
    for field in ("model", "stream"):
        if field in body:
            raise _BadRequest(400, "invalid_request_error", f"{field}: extraneous key on Bedrock")

    streamed = found["method"] == "invoke-with-response-stream"
    return "/v1/messages", {
        "model": short_model("bedrock", unquote(found["model"])),
        **body,
        **({"stream": True} if streamed else {}),
    }


def _without_version(body: Any, platform: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _BadRequest(400, "invalid_request_error", "the body must be a JSON object")
    if not isinstance(body.get("anthropic_version"), str):
        message = f"anthropic_version: required in the body on {platform}"
        raise _BadRequest(400, "invalid_request_error", message)
    return {k: v for k, v in body.items() if k not in ("anthropic_version", "anthropic_beta")}


# AWS event-stream framing --------------------------------------------------------------------


def event_stream_frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude (lengths + CRC), string headers, payload, CRC."""
    encoded = b"".join(_frame_header(name, value) for name, value in headers.items())
    prelude = struct.pack(">II", 16 + len(encoded) + len(payload), len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _frame_header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return (
        struct.pack(">B", len(raw_name))
        + raw_name
        + b"\x07"
        + struct.pack(">H", len(raw_value))
        + raw_value
    )


def chunk_frame(event: Mapping[str, Any]) -> bytes:
    """A Bedrock ``chunk`` event carrying one Messages API stream event."""
    data = base64.b64encode(json.dumps(event).encode()).decode()
    headers = {
        ":event-type": "chunk",
        ":content-type": "application/json",
        ":message-type": "event",
    }
    return event_stream_frame(headers, json.dumps({"bytes": data}).encode())


def exception_frame(name: str, message: str) -> bytes:
    """A Bedrock exception frame (``throttlingException``, ``validationException``, ...)."""
    headers = {
        ":exception-type": name,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return event_stream_frame(headers, json.dumps({"message": message}).encode())


class _EventStreamExchange:
    """An Exchange whose server-sent events go out as AWS event-stream frames."""

    def __init__(self, inner: Exchange) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # Any: the inner Exchange's attribute, whatever it is
        return getattr(self.inner, name)

    def start_events(
        self, content_type: str = "", headers: Mapping[str, str] | None = None
    ) -> None:
        self.inner.start_events("application/vnd.amazon.eventstream", headers)

    def send_event(self, name: str, data: Mapping[str, Any]) -> None:
        if name == "error":
            error = data.get("error", {})
            kind = BEDROCK_STREAM_ERRORS.get(str(error.get("type")), "internalServerException")
            self.inner.send_chunk(exception_frame(kind, str(error.get("message", ""))))
        else:
            self.inner.send_chunk(chunk_frame(data))


__all__ = ["PlatformStandIn", "chunk_frame", "event_stream_frame", "exception_frame"]
