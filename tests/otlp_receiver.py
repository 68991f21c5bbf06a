"""A loopback OTLP/HTTP traces receiver: what a collector would get, decoded with the OTLP protobuf
classes (``opentelemetry-proto``), and every raw body kept (nothing secret may be in any byte)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for the root of a trace
    kind: int  # the protobuf's SpanKind: 1 internal, 3 client
    attributes: dict[str, Any]
    status: int  # 0 unset, 2 error
    resource: dict[str, Any]
    start_ns: int
    end_ns: int


def _value(value: AnyValue) -> Any:  # Any: an OTLP attribute value of any kind
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind) if kind else None


def _spans(request: ExportTraceServiceRequest) -> Iterator[ReceivedSpan]:
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                yield ReceivedSpan(
                    span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                    span.kind, {a.key: _value(a.value) for a in span.attributes},
                    span.status.code, resource, span.start_time_unix_nano, span.end_time_unix_nano,
                )  # fmt: skip


class OtlpReceiver:
    """``POST /v1/traces`` on 127.0.0.1; ``url`` is the traces endpoint to configure."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.received: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = ExportTraceServiceRequest.FromString(body)
                with receiver._lock:
                    receiver.bodies.append(body)
                    receiver.received.extend(_spans(request))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self.received)

    def raw(self) -> bytes:
        with self._lock:
            return b"".join(self.bodies)

    def wait_for(
        self, done: Callable[[list[ReceivedSpan]], bool], timeout: float = 30
    ) -> list[ReceivedSpan]:
        """The spans received once ``done`` says they are all there."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.spans()
            if done(found):
                return found
            time.sleep(0.05)
        raise AssertionError(f"spans not received in {timeout} s: {[s.name for s in self.spans()]}")
