"""HTTP/1.1 plumbing for the stand-in: a loopback server that can stream, stall and drop.

Responses are HTTP/1.1 with keep-alive, as the SDK's connection pool expects. Streams use chunked
transfer encoding, so a client can tell a clean end (terminating chunk) from a dropped connection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from .errors import error_body
from .wire import encode_event

logger = logging.getLogger("qloop_kernel.testing")

_REASONS = {529: "Overloaded"}


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return _REASONS.get(status, "Error")


class Exchange:
    """One request and the means to answer it; a closed client makes writes raise OSError."""

    def __init__(self, handler: _Handler, stopping: threading.Event) -> None:
        self._handler = handler
        self._stopping = stopping
        self.time = time.time()
        self.method = handler.command
        self.path = urlsplit(handler.path).path
        self.headers: Mapping[str, str] = dict(handler.headers.items())
        self.request_id = f"req_{secrets.token_hex(12)}"
        self.started = False
        self.body = self._read_body()

    def _read_body(self) -> bytes:
        if self._handler.headers.get("transfer-encoding", "").lower() == "chunked":
            # The SDK always sends Content-Length; an unread chunked body would desync keep-alive.
            self._handler.close_connection = True
            return b""
        try:
            length = int(self._handler.headers.get("content-length") or 0)
        except ValueError:
            self._handler.close_connection = True
            return b""
        return self._handler.rfile.read(length) if length > 0 else b""

    def wait(self, seconds: float) -> bool:
        """Sleep, returning False at once if the server is stopping meanwhile."""
        if seconds <= 0:
            return not self._stopping.is_set()
        return not self._stopping.wait(seconds)

    def send_json(self, status: int, data: Any, headers: Mapping[str, str] | None = None) -> None:
        """Send a complete JSON response."""
        payload = json.dumps(data, ensure_ascii=False).encode()
        self.send_bytes(status, payload, {"content-type": "application/json", **(headers or {})})

    def send_bytes(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
        """Send a complete response with this body, whatever it holds."""
        self._start(status, headers)
        self._handler.send_header("content-length", str(len(payload)))
        self._handler.end_headers()
        self._handler.wfile.write(payload)

    def start_events(
        self,
        content_type: str = "text/event-stream; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        """Send the headers of a server-sent event stream."""
        self._start(
            200,
            {
                "content-type": content_type,
                "cache-control": "no-cache",
                "transfer-encoding": "chunked",
                **(headers or {}),
            },
        )
        self._handler.end_headers()

    def send_event(self, name: str, data: Mapping[str, Any]) -> None:
        """Send one server-sent event as one chunk."""
        self.send_chunk(encode_event(name, data))

    def send_chunk(self, payload: bytes) -> None:
        """Send bytes as one chunk of a chunked response."""
        if payload:
            self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(payload), payload))

    def end_events(self) -> None:
        """End the stream cleanly with the terminating chunk."""
        self._handler.wfile.write(b"0\r\n\r\n")

    def drop(self) -> None:
        """Close the connection at once, whatever has been sent so far."""
        self._handler.close_connection = True
        with contextlib.suppress(OSError):
            self._handler.connection.shutdown(socket.SHUT_RDWR)

    def _start(self, status: int, headers: Mapping[str, str]) -> None:
        self.started = True
        self._handler.send_response(status, _reason(status))
        self._handler.send_header("request-id", self.request_id)
        for name, value in headers.items():
            self._handler.send_header(name, value)


Handle = Callable[[Exchange], None]


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server on 127.0.0.1 that can close its open connections when stopping."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, port: int, app: Handle) -> None:
        self.app = app
        self.stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", port), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host name (getfqdn), which can stall without DNS.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down every open connection, so idle keep-alive handlers return."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.exception("qloop stand-in: error while serving %s", client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # many small SSE writes: do not wait for ACKs between them
    server: LoopbackHTTPServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self._dispatch()

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch()

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch()

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch()

    def _dispatch(self) -> None:
        try:
            exchange = Exchange(self, self.server.stopping)
            self._serve(exchange)
        except OSError as error:
            logger.debug("qloop stand-in: client went away: %s", error)
            self.close_connection = True

    def _serve(self, exchange: Exchange) -> None:
        try:
            self.server.app(exchange)
        except OSError:
            raise
        except Exception as error:
            logger.exception("qloop stand-in: failed to answer %s %s", self.command, self.path)
            if exchange.started:
                exchange.drop()
                return
            body = error_body("api_error", f"qloop stand-in failed: {error!r}", exchange.request_id)
            # A bug in the stand-in must not be retried as if the service were flaky.
            exchange.send_json(500, body, {"x-should-retry": "false"})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        logger.info("%s %s", self.address_string(), format % args)
