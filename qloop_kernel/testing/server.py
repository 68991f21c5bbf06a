"""``StandInAPI``: a loopback stand-in for the Anthropic Messages API, driven by a script."""

from __future__ import annotations

import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from os import PathLike
from types import TracebackType
from typing import Any

from .errors import error_body, status_for_error_type
from .jsonform import load_script, parse_script
from .models import ModelInfo, model_table
from .record import RecordedRequest, RequestLog, redact_headers
from .script import (
    DropConnection,
    Fault,
    RawReply,
    Reply,
    Responder,
    Script,
    ScriptError,
    ScriptItem,
    StreamError,
)
from .signing import Signer
from .tokens import PromptCache, count_input_tokens, output_tokens
from .transport import Exchange, LoopbackHTTPServer
from .validation import Checks, Problem, check_count_tokens_request, check_messages_request
from .wire import message_json, sent_blocks, stream_events, thinking_blocks_in, usage_json

NO_PROXY = "127.0.0.1,localhost"
_PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})
DEFAULT_RETRY_AFTER_S = 1.0


class _BadRequest(Exception):
    """An API error answer decided before any reply is produced."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


class StandInAPI:
    """A Messages API on 127.0.0.1 that answers from a script, for tests with the real SDK.

    ``script`` items are consumed one per ``POST /v1/messages``: a ``Reply``, a ``Fault`` or a
    callable ``(RecordedRequest) -> Reply | Fault | RawReply``. When they run out, ``responder``
    answers (default: a 400 ``invalid_request_error`` saying the script is exhausted). With
    ``api_key`` set, requests need ``x-api-key: KEY`` or ``Authorization: Bearer KEY``.
    ``port=0`` picks a free port. Use it as a context manager, or call ``start()`` and ``stop()``.

    ``models`` are the model ids served (default: the documented lineup, ``DOCUMENTED_MODELS``);
    any other gets the API's 404. ``adaptive_thinking`` makes models that think by default start
    each reply with a (signed, empty-text) thinking block unless the request disables thinking.
    ``clock`` drives prompt-cache expiry.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] = (),
        *,
        responder: Responder | None = None,
        api_key: str | None = None,
        port: int = 0,
        models: Iterable[str | ModelInfo] | None = None,
        adaptive_thinking: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._script = Script(script, responder)
        self._api_key = api_key
        self._requested_port = port
        self._log = RequestLog()
        self._cache = PromptCache(clock)
        self._signer = Signer()
        self.models: Mapping[str, ModelInfo] = model_table(models)
        self.adaptive_thinking = adaptive_thinking
        self._http: LoopbackHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_file(cls, path: str | PathLike[str], **options: Any) -> StandInAPI:
        """Create a server whose script is read from a JSON script file."""
        return cls(load_script(path), **options)

    # Lifecycle ---------------------------------------------------------------------------------

    def start(self) -> StandInAPI:
        """Bind 127.0.0.1 and serve on a background thread; return self."""
        if self._http is not None:
            raise RuntimeError("the stand-in is already running")
        self._http = LoopbackHTTPServer(self._requested_port, self._handle)
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"qloop-standin-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, close open connections and wait for the handler threads."""
        http, thread = self._http, self._thread
        if http is None or thread is None:
            return
        http.stopping.set()
        http.shutdown()
        http.close_connections()
        http.server_close()
        thread.join()
        self._http = self._thread = None

    def __enter__(self) -> StandInAPI:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (only while running)."""
        if self._http is None:
            raise RuntimeError("the stand-in is not running: call start() first")
        return int(self._http.server_address[1])

    @property
    def base_url(self) -> str:
        """The URL to give the SDK as ``base_url`` / ``ANTHROPIC_BASE_URL``."""
        return f"http://127.0.0.1:{self.port}"

    def environment(
        self, base: Mapping[str, str] | None = None, *, api_key: str | None = None
    ) -> dict[str, str]:
        """Return environment variables for an SDK client (e.g. a kernel) that uses this server.

        Starts from ``base`` (default ``os.environ``), drops proxy variables and
        ``ANTHROPIC_AUTH_TOKEN``, and sets ``ANTHROPIC_BASE_URL``, ``ANTHROPIC_API_KEY``
        (``api_key``, else the server's key, else "test") and ``NO_PROXY``.
        """
        source = os.environ if base is None else base
        env = {
            name: value
            for name, value in source.items()
            if name.lower() not in _PROXY_VARIABLES and name != "ANTHROPIC_AUTH_TOKEN"
        }
        env.update(
            ANTHROPIC_BASE_URL=self.base_url,
            ANTHROPIC_API_KEY=api_key or self._api_key or "test",
            NO_PROXY=NO_PROXY,
            no_proxy=NO_PROXY,
        )
        return env

    # Script and log ----------------------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the request log, oldest first (control requests are not logged)."""
        return self._log.snapshot()

    @property
    def remaining(self) -> int:
        """How many script items have not been consumed yet."""
        return self._script.remaining

    def set_script(self, script: Iterable[ScriptItem]) -> None:
        """Replace the items still to serve; the log and the prompt cache are kept."""
        self._script.replace(script)

    def reset(self, script: Iterable[ScriptItem] = ()) -> None:
        """Start afresh: new script items, empty request log, empty prompt cache."""
        self._script.replace(script)
        self._log.clear()
        self._cache.clear()

    # Routing -----------------------------------------------------------------------------------

    def _handle(self, exchange: Exchange) -> None:
        if exchange.path.startswith("/_qloop/"):
            self._control(exchange)
            return
        body, parse_error = _parse_json(exchange.body)
        request = RecordedRequest(
            method=exchange.method,
            path=exchange.path,
            headers=redact_headers(exchange.headers),
            body=body,
            time=exchange.time,
        )
        try:
            self._route(exchange, request, parse_error)
        except _BadRequest as bad:
            self._answer_error(exchange, request, bad.status, bad.error_type, bad.message)

    def _route(self, exchange: Exchange, request: RecordedRequest, parse_error: str | None) -> None:
        route = (exchange.method, exchange.path)
        if route not in {("POST", "/v1/messages"), ("POST", "/v1/messages/count_tokens")}:
            message = f"Not found: {exchange.method} {exchange.path}"
            raise _BadRequest(404, "not_found_error", message)
        self._check_auth(exchange.headers)
        if parse_error is not None:
            raise _BadRequest(400, "invalid_request_error", parse_error)
        if exchange.path == "/v1/messages":
            self._messages(exchange, request)
        else:
            self._count_tokens(exchange, request)

    def _check_auth(self, headers: Mapping[str, str]) -> None:
        if self._api_key is None:
            return
        lowered = {name.lower(): value for name, value in headers.items()}
        scheme, _, token = lowered.get("authorization", "").strip().partition(" ")
        offered = lowered.get("x-api-key") or (token.strip() if scheme.lower() == "bearer" else "")
        if not offered:
            raise _BadRequest(401, "authentication_error", "x-api-key header is required")
        if not hmac.compare_digest(offered.encode(), self._api_key.encode()):
            raise _BadRequest(401, "authentication_error", "invalid x-api-key")

    @property
    def _checks(self) -> Checks:
        return Checks(models=self.models, signer=self._signer)

    def _count_tokens(self, exchange: Exchange, request: RecordedRequest) -> None:
        _refuse(check_count_tokens_request(request.body, self._checks))
        answer = {"input_tokens": count_input_tokens(request.body)}
        self._log.append(replace(request, status=200, usage=answer))
        exchange.send_json(200, answer)

    # Messages ----------------------------------------------------------------------------------

    def _messages(self, exchange: Exchange, request: RecordedRequest) -> None:
        _refuse(check_messages_request(request.body, self._checks))
        try:
            response = self._script.next_response(request)
        except ScriptError as error:
            raise _BadRequest(400, "invalid_request_error", str(error)) from None
        if isinstance(response, Fault):
            self._answer_fault(exchange, request, response)
        elif isinstance(response, RawReply):
            self._answer_raw(exchange, request, response)
        elif request.stream:
            self._answer_stream(exchange, request, response)
        else:
            self._answer_message(exchange, request, response)

    def _answer_fault(self, exchange: Exchange, request: RecordedRequest, fault: Fault) -> None:
        headers = {**_fault_headers(fault), **fault.headers}
        self._answer_error(
            exchange,
            request,
            fault.status,
            fault.error_type,
            fault.message,
            headers=headers,
            delay=fault.first_byte_delay,
            details=fault.details,
        )

    def _answer_raw(self, exchange: Exchange, request: RecordedRequest, raw: RawReply) -> None:
        for block in thinking_blocks_in(raw.payload, stream=raw.is_stream):
            self._signer.remember(block)
        self._log.append(replace(request, status=raw.status))
        if not exchange.wait(raw.first_byte_delay):
            return
        if raw.is_stream and raw.status == 200:
            exchange.start_events(raw.content_type, raw.headers)
            exchange.send_chunk(raw.payload)
            exchange.end_events()
        else:
            exchange.send_bytes(raw.status, raw.payload, {"content-type": raw.content_type,
                                                          **raw.headers})  # fmt: skip

    def _answer_message(self, exchange: Exchange, request: RecordedRequest, reply: Reply) -> None:
        if reply.stream_fault is not None:
            self._answer_unstreamed_fault(exchange, request, reply)
            return
        message = self._message(request, reply)
        self._log.append(replace(request, status=200, usage=message["usage"]))
        if exchange.wait(reply.first_byte_delay):
            exchange.send_json(200, message)

    def _answer_unstreamed_fault(
        self, exchange: Exchange, request: RecordedRequest, reply: Reply
    ) -> None:
        """Apply a stream fault to a non-streaming request, as the API's failure would look."""
        fault = reply.stream_fault
        if isinstance(fault, StreamError):
            status = status_for_error_type(fault.error_type)
            delay = reply.first_byte_delay
            self._answer_error(
                exchange, request, status, fault.error_type, fault.message, delay=delay
            )
        elif isinstance(fault, DropConnection):
            self._log.append(replace(request, error="connection dropped before a response"))
            if exchange.wait(reply.first_byte_delay):
                exchange.drop()
        else:
            message = "qloop stand-in: an early_close fault needs a streaming request"
            raise _BadRequest(400, "invalid_request_error", message)

    def _answer_stream(self, exchange: Exchange, request: RecordedRequest, reply: Reply) -> None:
        message = self._message(request, reply)
        events = stream_events(
            reply,
            message["content"],
            message_id=message["id"],
            model=message["model"],
            usage=message["usage"],
        )
        fault = reply.stream_fault
        error = fault.message if isinstance(fault, StreamError) else None
        if isinstance(fault, DropConnection):
            error = f"connection dropped after {fault.after_events} events"
        self._log.append(replace(request, status=200, usage=message["usage"], error=error))
        if not exchange.wait(reply.first_byte_delay):
            return
        exchange.start_events()
        sent = events if fault is None else events[: fault.after_events]
        for number, (name, data) in enumerate(sent):
            if number and not exchange.wait(reply.event_delay):
                return
            exchange.send_event(name, data)
        self._end_stream(exchange, reply)

    @staticmethod
    def _end_stream(exchange: Exchange, reply: Reply) -> None:
        fault = reply.stream_fault
        if isinstance(fault, DropConnection):
            exchange.drop()
            return
        if isinstance(fault, StreamError):
            if not exchange.wait(reply.event_delay):
                return
            exchange.send_event("error", error_body(fault.error_type, fault.message))
        exchange.end_events()

    def _message(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
        info = self.models.get(request.model or "") or ModelInfo(request.model or "")
        content = sent_blocks(reply, self._signer, think_first=self._thinks(request, info))
        accounted = self._cache.account(request.body, minimum=info.cache_minimum)
        usage = usage_json(accounted, output_tokens(content), reply.usage)
        return message_json(
            reply,
            content,
            message_id=f"msg_{secrets.token_hex(12)}",
            model=reply.model or request.model or "",
            usage=usage,
        )

    def _thinks(self, request: RecordedRequest, info: ModelInfo) -> bool:
        """Whether this reply starts with adaptive thinking: on by default for models that do it."""
        thinking = request.body.get("thinking") if isinstance(request.body, dict) else None
        disabled = isinstance(thinking, dict) and thinking.get("type") == "disabled"
        return self.adaptive_thinking and info.thinks_by_default and not disabled

    def _answer_error(
        self,
        exchange: Exchange,
        request: RecordedRequest,
        status: int,
        error_type: str,
        message: str,
        *,
        headers: Mapping[str, str] | None = None,
        delay: float = 0.0,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self._log.append(replace(request, status=status, error=message))
        if exchange.wait(delay):
            body = error_body(error_type, message, exchange.request_id, details)
            exchange.send_json(status, body, headers)

    # Control endpoints -------------------------------------------------------------------------

    def _control(self, exchange: Exchange) -> None:
        route = (exchange.method, exchange.path)
        if route == ("GET", "/_qloop/requests"):
            exchange.send_json(200, [request.to_json() for request in self.requests])
            return
        if route not in {("POST", "/_qloop/script"), ("POST", "/_qloop/reset")}:
            message = f"Not found: {exchange.method} {exchange.path}"
            exchange.send_json(404, error_body("not_found_error", message, exchange.request_id))
            return
        try:
            items = self._control_script(exchange)
        except ScriptError as error:
            body = error_body("invalid_request_error", str(error), exchange.request_id)
            exchange.send_json(400, body)
            return
        if exchange.path == "/_qloop/reset":
            self.reset(items or ())
        else:
            self.set_script(items or ())
        exchange.send_json(200, {"remaining": self.remaining})

    @staticmethod
    def _control_script(exchange: Exchange) -> list[Reply | Fault | RawReply] | None:
        if exchange.path == "/_qloop/reset" and not exchange.body.strip():
            return None
        body, parse_error = _parse_json(exchange.body)
        if parse_error is not None:
            raise ScriptError(parse_error)
        return parse_script(body)


def _parse_json(raw: bytes) -> tuple[Any, str | None]:
    """Return (parsed body, None), or (None, error message) when the body is empty or not JSON."""
    if not raw.strip():
        return None, "The request body is empty; it must be a JSON object."
    try:
        return json.loads(raw), None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"The request body is not valid JSON: {error}"


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _refuse(problem: Problem | None) -> None:
    if problem is not None:
        raise _BadRequest(problem.status, problem.error_type, problem.message)


def _fault_headers(fault: Fault) -> dict[str, str]:
    """``retry-after`` as asked; a rate-limit 429 also gets the API's ``anthropic-ratelimit-*``
    headers ("Rate limits > Response headers") and a default ``retry-after``."""
    headers: dict[str, str] = {}
    retry_after = fault.retry_after
    if fault.status == 429 and not fault.is_spend_limit:
        retry_after = DEFAULT_RETRY_AFTER_S if retry_after is None else retry_after
        reset = datetime.now(timezone.utc) + timedelta(seconds=retry_after)
        stamp = reset.replace(microsecond=0).isoformat().replace("+00:00", "Z")
        for kind, limit in (("requests", "50"), ("tokens", "40000"),
                            ("input-tokens", "30000"), ("output-tokens", "8000")):  # fmt: skip
            prefix = f"anthropic-ratelimit-{kind}"
            headers.update({f"{prefix}-limit": limit, f"{prefix}-remaining": "0",
                            f"{prefix}-reset": stamp})  # fmt: skip
    if retry_after is not None:
        headers["retry-after"] = _seconds(retry_after)
    return headers
