"""Audit traces: every agent turn, model call and decision as OpenTelemetry spans, sent over OTLP/HTTP
to the collector the operator or the user names (docs/teams.md, "Traces").

The spans follow the GenAI semantic conventions of OpenTelemetry semantic-conventions v1.41.0 (status:
development). A turn is an ``invoke_agent`` span; each model call a ``chat`` span under it; each tool
call an ``execute_tool`` span under it, with its risk class and the approval decision (``qloop.*``);
a replay is an ``invoke_agent`` span (``qloop.replay``) whose steps are decided by the replay; an
outside agent's call is an ``execute_tool`` span of its own. ``gen_ai.conversation.id`` is the session.

Where they go: the admin's ``otel_endpoint`` (a user cannot move it), else
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, else ``OTEL_EXPORTER_OTLP_ENDPOINT`` plus ``/v1/traces``.
With none, nothing here imports OpenTelemetry and nothing is sent. Content (prompts, code, outputs,
tool input and results) is exported only when the admin's ``capture_content``, or where the admin sets
none ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, turns it on, and then redacted. Spans
leave through a batch processor's thread: a turn never waits for the collector, and at exit the queue
gets a bounded time to drain.
"""

from __future__ import annotations

import atexit
import getpass
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from . import __version__
from .contracts import CancelToken, ModelClient, TurnObserver
from .messages import (
    Block,
    Message,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolOutcome,
    TurnResult,
    Usage,
)
from .policy.admin import AdminError, AdminFloor, admin_floor
from .policy.permissions import Approve, Deny
from .redact import redact, redact_text
from .text import clip

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.trace import Span, Tracer
    from opentelemetry.util.types import AttributeValue

    from .policy.pipeline import Permission
    from .pricing import Price

log = logging.getLogger("qloop.telemetry")
SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
AGENT = "qloop"
EXPORT_TIMEOUT_S = 5.0  # one export request, on the processor's thread
EXIT_FLUSH_MS = 2000  # what the process waits at exit for spans not yet sent
CONTENT_CHARS = 8000  # each exported piece of text (a message part, a tool's input or result)
CONTENT_MESSAGES = 40  # the newest messages of a model call's input that are exported
# gen_ai.provider.name of each platform (the conventions' names; a compatible server speaks Anthropic's)
PROVIDERS = {"anthropic": "anthropic", "bedrock": "aws.bedrock", "vertex": "gcp.vertex_ai",
             "foundry": "azure.ai.inference", "compatible": "anthropic"}  # fmt: skip
_ON = ("1", "true", "yes", "on")

Attributes = dict[str, "AttributeValue"]


@dataclass(frozen=True)
class TraceConfig:
    """Where spans go (the OTLP/HTTP traces URL) and whether they carry content."""

    endpoint: str
    capture_content: bool = False


def trace_config(
    environ: Mapping[str, str] | None = None, floor: AdminFloor | None = None
) -> TraceConfig | None:
    """The traces configured now, or None: the admin's endpoint and content setting win over the
    environment's (raises the floor's ``AdminError`` for an admin file that cannot be used)."""
    environ = os.environ if environ is None else environ
    floor = admin_floor() if floor is None else floor
    admin_endpoint, admin_capture = floor.otel()
    endpoint = _traces_url(admin_endpoint) if admin_endpoint else _environment_endpoint(environ)
    if endpoint is None:
        return None
    user_capture = environ.get(CAPTURE_ENV, "").strip().lower() in _ON
    return TraceConfig(endpoint, user_capture if admin_capture is None else admin_capture)


def _environment_endpoint(environ: Mapping[str, str]) -> str | None:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _ON:
        return None
    traces = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if traces:
        return traces  # the signal's own URL, used as it is (the OTLP exporter spec)
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return _traces_url(base) if base else None


def _traces_url(url: str) -> str:
    """A collector's base URL with the traces path, or a traces URL as it is."""
    url = url.strip()
    return url if url.rstrip("/").endswith("/v1/traces") else url.rstrip("/") + "/v1/traces"


# One provider per endpoint for the process: the exporter's thread and connection are the process's,
# whatever kernel object asks; drained at exit.
_providers: dict[str, Tracer] = {}
_lock = threading.Lock()


def _tracer(endpoint: str) -> Tracer | None:
    """The process's tracer for ``endpoint``; None (said once in the log) where the OpenTelemetry
    SDK is not installed."""
    with _lock:
        tracer = _providers.get(endpoint)
        if tracer is None and endpoint not in _missing:
            try:
                tracer = _providers[endpoint] = _start_exporting(endpoint)
            except ImportError as exc:
                _missing.add(endpoint)
                log.warning(NO_SDK, endpoint, exc.name)
    return tracer


NO_SDK = (
    "traces are configured (%s) but not sent: the OpenTelemetry SDK is not installed (no module "
    "%s); pip install 'qloop-kernel[otel]'"
)
_missing: set[str] = set()


def _start_exporting(endpoint: str) -> Tracer:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({
        "service.name": os.environ.get("OTEL_SERVICE_NAME") or "qloop-kernel",
        "service.version": __version__, "user.name": _user(), "process.pid": os.getpid(),
    })  # fmt: skip
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT_S))
    provider.add_span_processor(processor)
    atexit.register(_drain, processor, provider)
    return provider.get_tracer("qloop_kernel", __version__, schema_url=SCHEMA_URL)


def _drain(processor: BatchSpanProcessor, provider: TracerProvider) -> None:
    """At exit: send the spans still queued, waiting at most ``EXIT_FLUSH_MS``."""
    # The public shutdown() waits up to 30 s; its inner processor (SDK 1.45) takes the bound.
    inner: Any = getattr(processor, "_batch_processor", None)  # Any: a private SDK object
    try:
        inner.shutdown(timeout_millis=EXIT_FLUSH_MS)
    except (AttributeError, TypeError):  # another SDK version: its own shutdown
        provider.shutdown()


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # a container user without a name
        return str(os.getuid())


def _span(tracer: Tracer, name: str, attributes: Attributes, parent: Span | None = None,
          *, client: bool = False, start_ns: int | None = None) -> Span:  # fmt: skip
    """A span under ``parent``, or the root of a trace of its own (never under whatever span is
    current in the process: the user's code or a library may have one)."""
    from opentelemetry.context import Context
    from opentelemetry.trace import SpanKind, set_span_in_context

    context = set_span_in_context(parent, Context()) if parent is not None else Context()
    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    return tracer.start_span(name, context, kind, attributes, start_time=start_ns)


def _failed(span: Span, error_type: str, description: str = "") -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, redact_text(clip(description, 300)) or None))


# --- content, exported only when capture is on: redacted, each text bounded -----------------------


def _bounded(value: Any) -> Any:  # Any: JSON data of any shape
    if isinstance(value, str):
        return clip(value, CONTENT_CHARS)
    if isinstance(value, dict):
        return {k: _bounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v) for v in value]
    return value


def content_json(value: Any) -> str:
    """``value`` as exported content: redacted first, then each text bounded, as JSON."""
    return json.dumps(_bounded(redact(value)), ensure_ascii=False, default=repr)


def _result_text(content: Any) -> str:
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content or "")


def _tool_call(block: Block) -> dict[str, Any]:
    return {"type": "tool_call", "id": block.get("id"), "name": block.get("name"),
            "arguments": block.get("input")}  # fmt: skip


def _tool_response(block: Block) -> dict[str, Any]:
    return {"type": "tool_call_response", "id": block.get("tool_use_id"),
            "response": _result_text(block.get("content"))}  # fmt: skip


_PARTS: dict[str, Callable[[Block], dict[str, Any]]] = {
    "text": lambda b: {"type": "text", "content": b.get("text", "")},
    "thinking": lambda b: {"type": "reasoning", "content": b.get("thinking", "")},
    "tool_use": _tool_call,
    "tool_result": _tool_response,
}


def _named(block: Block) -> dict[str, Any]:
    return {"type": str(block.get("type"))}


def messages_parts(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages API messages in the conventions' shape (role and parts); an image or a document
    is named by its type, not sent."""
    shaped = []
    for message in messages:
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        parts = [
            _PARTS.get(str(b.get("type")), _named)(b)
            for b in (blocks if isinstance(blocks, list) else [])
            if isinstance(b, dict)
        ]
        shaped.append({"role": message.get("role"), "parts": parts})
    return shaped


def _usage(usage: Usage) -> Attributes:
    # Anthropic's input_tokens excludes cached tokens; the conventions' count includes them.
    return {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
    }


# --- tool calls ---------------------------------------------------------------------------------


@dataclass
class _ToolSpans:
    """An ``execute_tool`` span for each tool call, under ``parent``; ``decided_by`` overrides who
    the outcome says decided (a replay's steps run because the replay was approved)."""

    tracer: Tracer
    parent: Span
    common: Attributes
    capture: bool
    decided_by: str | None = None
    open: dict[str, Span] = field(default_factory=dict)

    def start(self, call: ToolCall) -> None:
        attributes: Attributes = {
            **self.common, "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "extension" if call.name.startswith("mcp__") else "function",
        }  # fmt: skip
        self.open[call.id] = _span(self.tracer, f"execute_tool {call.name}", attributes,
                                   self.parent)  # fmt: skip

    def end(self, outcome: ToolOutcome) -> None:
        span = self.open.pop(outcome.call.id, None)
        if span is None:
            return
        span.set_attributes(_decision(outcome, self.decided_by))
        if self.capture:
            span.set_attributes({
                "gen_ai.tool.call.arguments": content_json(outcome.input_as_run),
                "gen_ai.tool.call.result": content_json(outcome.text),
                "qloop.decision.reason": content_json(outcome.reason or ""),
            })  # fmt: skip
        if outcome.is_error and outcome.decision != "denied":
            _failed(span, "tool_error")
        span.end()

    def close(self) -> None:
        """Calls that never answered (an interrupt while one ran)."""
        for span in self.open.values():
            _failed(span, "interrupted")
            span.end()
        self.open.clear()


def _decision(outcome: ToolOutcome, decided_by: str | None) -> Attributes:
    found: Attributes = {
        "qloop.decision": outcome.decision,
        "qloop.is_error": outcome.is_error,
        "qloop.approval_wait_s": round(outcome.approval_wait_s, 3),
    }
    if outcome.risk is not None:
        found["qloop.risk_class"] = outcome.risk
    by = decided_by or outcome.decided_by
    if by is not None:
        found["qloop.decided_by"] = by
    return found


class _ToolObserver(TurnObserver):
    """Forwards every event to ``inner`` and traces the tool calls."""

    def __init__(self, inner: TurnObserver, tools: _ToolSpans) -> None:
        self.inner, self.tools = inner, tools

    def on_event(self, event: ModelEvent) -> None:
        self.inner.on_event(event)

    def on_response(self, response: ModelResponse, usage: Usage, cost_usd: float | None) -> None:
        self.inner.on_response(response, usage, cost_usd)

    def on_tool_start(self, call: ToolCall) -> None:
        self.tools.start(call)
        self.inner.on_tool_start(call)

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.inner.on_tool_end(outcome)
        self.tools.end(outcome)


# --- a turn -------------------------------------------------------------------------------------


class TurnTrace:
    """The trace of one turn. This one traces nothing: no endpoint is configured."""

    def observing(self, inner: TurnObserver) -> TurnObserver:
        """The turn's observer, tracing its tool calls."""
        return inner

    def traced(self, model: ModelClient, price: Price | None) -> ModelClient:
        """The turn's model client, tracing each call."""
        return model

    def finished(self, result: TurnResult) -> None:
        """The turn ended with ``result``."""

    def __enter__(self) -> TurnTrace:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        return None


class _TracedTurn(TurnTrace):
    def __init__(
        self, tracer: Tracer, config: TraceConfig, common: Attributes, prompt: str
    ) -> None:
        self.tracer, self.capture, self.common = tracer, config.capture_content, common
        attributes: Attributes = {**common, "gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": AGENT}  # fmt: skip
        if self.capture:
            attributes["gen_ai.input.messages"] = content_json(
                messages_parts([{"role": "user", "content": prompt}])
            )
        self.span = _span(tracer, f"invoke_agent {AGENT}", attributes)
        self.tools = _ToolSpans(tracer, self.span, _conversation(common), self.capture)

    def observing(self, inner: TurnObserver) -> TurnObserver:
        return _ToolObserver(inner, self.tools)

    def traced(self, model: ModelClient, price: Price | None) -> ModelClient:
        return _TracedModel(model, self, price)

    def finished(self, result: TurnResult) -> None:
        attributes: Attributes = {**_usage(result.usage), "qloop.stop_reason": result.status,
                                  "qloop.model_calls": result.model_calls,
                                  "qloop.steps": len(result.outcomes)}  # fmt: skip
        if result.cost_usd is not None:
            attributes["qloop.cost_usd"] = round(result.cost_usd, 6)
        if self.capture:
            answer = [{"role": "assistant", "content": result.final_text}]
            attributes["gen_ai.output.messages"] = content_json(messages_parts(answer))
        self.span.set_attributes(attributes)
        if result.status == "error":
            _failed(self.span, "turn_failed", getattr(result.stop, "message", ""))

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.tools.close()
        if kind is not None:
            _failed(self.span, kind.__name__)
        self.span.end()


def _conversation(common: Attributes) -> Attributes:
    keep = ("gen_ai.conversation.id", "qloop.cell_id", "qloop.notebook")
    return {k: v for k, v in common.items() if k in keep}


class _TracedModel:
    """A model client whose every call is a ``chat`` span of the turn."""

    def __init__(self, inner: ModelClient, turn: _TracedTurn, price: Price | None) -> None:
        self.inner, self.turn, self.price = inner, turn, price
        self.model = inner.model

    def complete(
        self, request: ModelRequest, on_event: Callable[[ModelEvent], None], cancel: CancelToken
    ) -> ModelResponse:
        turn = self.turn
        attributes: Attributes = {**turn.common, "gen_ai.operation.name": "chat",
                                  "gen_ai.request.model": self.model,
                                  "gen_ai.request.max_tokens": request.max_tokens,
                                  "gen_ai.request.stream": True}  # fmt: skip
        if turn.capture:
            attributes["gen_ai.input.messages"] = content_json(
                messages_parts(request.messages[-CONTENT_MESSAGES:])
            )
        span = _span(turn.tracer, f"chat {self.model}", attributes, turn.span, client=True)
        try:
            response = self.inner.complete(request, on_event, cancel)
        except BaseException as exc:
            _failed(span, type(exc).__name__, str(exc))
            span.end()
            raise
        span.set_attributes(self._answered(response))
        span.end()
        return response

    def _answered(self, response: ModelResponse) -> Attributes:
        attributes: Attributes = {**_usage(response.usage), "gen_ai.response.model": response.model}
        if response.stop_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [response.stop_reason]
        if self.price is not None:
            attributes["qloop.cost_usd"] = round(self.price.cost(response.usage), 6)
        if self.turn.capture:
            answer = [{"role": "assistant", "content": response.content}]
            attributes["gen_ai.output.messages"] = content_json(messages_parts(answer))
        return attributes


def _common(session_id: str, model: str, provider: str, cell_id: str | None) -> Attributes:
    attributes: Attributes = {
        "gen_ai.conversation.id": session_id,
        "gen_ai.provider.name": PROVIDERS.get(provider, provider),
        "gen_ai.request.model": model,
    }
    if cell_id:
        attributes["qloop.cell_id"] = cell_id
    notebook = os.environ.get("JPY_SESSION_NAME", "")
    if notebook:
        attributes["qloop.notebook"] = notebook
    return attributes


def turn_trace(
    session_id: str, *, model: str, provider: str, cell_id: str | None, prompt: str
) -> TurnTrace:
    """The trace of a turn about to run: one that traces nothing when no endpoint is configured."""
    config = trace_config()
    tracer = _tracer(config.endpoint) if config is not None else None
    if config is None or tracer is None:
        return TurnTrace()
    common = _common(session_id, model, provider, cell_id)
    return _TracedTurn(tracer, config, common, prompt)


# --- a replay -----------------------------------------------------------------------------------


class ReplayTrace:
    """The trace of a replay of a saved cell. This one traces nothing: no endpoint is configured."""

    def decided(self, permission: Permission) -> None:
        """The replay was approved or refused, by ``permission.who``."""

    def on_tool_start(self, call: ToolCall) -> None:
        """A saved step is about to run again."""

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        """A saved step ran again."""

    def __enter__(self) -> ReplayTrace:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        return None


class _TracedReplay(ReplayTrace):
    def __init__(self, tracer: Tracer, config: TraceConfig, common: Attributes) -> None:
        attributes: Attributes = {**common, "gen_ai.operation.name": "invoke_agent",
                                  "gen_ai.agent.name": AGENT, "qloop.replay": True}  # fmt: skip
        self.span = _span(tracer, f"invoke_agent {AGENT}", attributes)
        common = _conversation(common)
        self.tools = _ToolSpans(tracer, self.span, common, config.capture_content, "replay")

    def decided(self, permission: Permission) -> None:
        self.span.set_attributes({"qloop.decision": permission_kind(permission),
                                  "qloop.decided_by": permission.who})  # fmt: skip

    def on_tool_start(self, call: ToolCall) -> None:
        self.tools.start(call)

    def on_tool_end(self, outcome: ToolOutcome) -> None:
        self.tools.end(outcome)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.tools.close()
        if kind is not None:
            _failed(self.span, kind.__name__)
        self.span.end()


def permission_kind(permission: Permission) -> str:
    """A pipeline's decision in the record's words: denied, auto, always, approved."""
    decision = permission.decision
    if isinstance(decision, Deny):
        return "denied"
    if isinstance(decision, Approve) and decision.policy is not None:
        return "auto"
    return "always" if permission.by == "grant" else "approved"


def replay_trace(session_id: str, *, model: str, provider: str, cell_id: str | None) -> ReplayTrace:
    """The trace of a replay about to be decided: one that traces nothing without an endpoint."""
    config = trace_config()
    tracer = _tracer(config.endpoint) if config is not None else None
    if config is None or tracer is None:
        return ReplayTrace()
    common = _common(session_id, model, provider, cell_id)
    return _TracedReplay(tracer, config, common)


# --- an outside agent's call (in the Jupyter server) ------------------------------------------


@dataclass(frozen=True)
class OutsideCall:
    """What the server decided about one outside agent's call, and what ran (``entry``: the signed,
    redacted entry it adds to the notebook's record, server/record.py)."""

    entry: dict[str, Any]
    notebook: str
    session: str | None
    decision: str  # approved, edited, denied, auto, always
    decided_by: str  # policy, grant, person, admin
    started: float  # time.time() when the call arrived


def trace_outside(call: OutsideCall) -> None:
    """One ``execute_tool`` span, a trace of its own, for an outside agent's call (none when no
    endpoint is configured, or the admin floor cannot be read: the call was refused then)."""
    try:
        config = trace_config()
    except AdminError:
        return
    tracer = _tracer(config.endpoint) if config is not None else None
    if config is None or tracer is None:
        return
    entry = call.entry
    attributes: Attributes = {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": str(entry["tool"]),
        "gen_ai.tool.call.id": str(entry["id"]), "gen_ai.tool.type": "function",
        "gen_ai.agent.name": str(entry["client"]), "qloop.outside": True,
        "qloop.notebook": call.notebook, "qloop.decision": call.decision,
        "qloop.decided_by": call.decided_by, "qloop.risk_class": str(entry.get("risk") or ""),
        "qloop.is_error": bool(entry.get("is_error")),
    }  # fmt: skip
    if call.session is not None:
        attributes["gen_ai.conversation.id"] = call.session
    if config.capture_content:  # the entry is redacted already; redacted again on the way out
        attributes["gen_ai.tool.call.arguments"] = content_json(entry.get("input"))
        attributes["gen_ai.tool.call.result"] = content_json(entry.get("result", ""))
        attributes["qloop.decision.reason"] = content_json(entry.get("reason", ""))
    span = _span(tracer, f"execute_tool {entry['tool']}", attributes,
                 start_ns=int(call.started * 1e9))  # fmt: skip
    if entry.get("is_error") and call.decision != "denied":
        _failed(span, "tool_error")
    span.end(time.time_ns())
