"""The Jupyter server's routes: ``qloop/mcp`` (MCP over streamable HTTP) and ``qloop/outside/*``.

Every route requires the Jupyter server's authentication (its token or identity provider), like
its own REST API. ``qloop/mcp`` hands the request to the MCP SDK's streamable HTTP session manager
(an ASGI application) and streams its answer back through Tornado: the SDK speaks the protocol,
this module only carries bytes between the two servers. Requests from another host are refused
unless ``QloopMCP.allow_remote`` is set. ``qloop/mcp`` takes the token only in the
``Authorization`` header, never in the URL, and refuses a browser page of another origin even
with the token (the MCP transport spec requires servers to check ``Origin``), by the Jupyter
server's own origin check and its ``allow_origin`` settings.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
from typing import Any, TypeVar

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler, JupyterHandler
from pydantic import TypeAdapter, ValidationError
from tornado import web
from tornado.iostream import StreamClosedError

from ..policy.admin import AdminError, admin_floor
from ..records.outside_schema import (
    OutsideAgentCell,
    OutsideAgentCellRequest,
    OutsideDecision,
    OutsideItemRef,
    OutsidePending,
    OutsidePostAnswer,
)
from .agent_cell import agent_cell
from .broker import Decision, OutsideBroker
from .config import QloopMCP

Body = TypeVar("Body")

AUTH_RESOURCE = "kernels"  # outside agents run code in kernels: the same permission
MAX_AGENT_CELL_ENTRIES = 2_000
TOKEN_REQUIRED = "the Jupyter server's token is required, in the header Authorization: token …"
TOKEN_IN_URL = (
    "pass the Jupyter server's token in the header Authorization: token …, not in the URL "
    "(?token=): a URL ends up in logs and shell history"
)
CROSS_ORIGIN = (
    "a browser page of another origin may not call qloop's MCP server (its Origin header names "
    "another site); the Jupyter server's c.ServerApp.allow_origin lists origins that may"
)


def outside_refusal() -> str | None:
    """Why the admin floor keeps outside agents out (an admin file that cannot be used keeps
    them out too, saying why), or None."""
    try:
        return admin_floor().outside_refusal()
    except AdminError as exc:
        return str(exc)


def is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


class MCPHandler(JupyterHandler):
    """Carries MCP requests to the SDK's session manager and streams its answers back."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, session_manager: Any, config: QloopMCP) -> None:
        self.mcp_sessions = session_manager
        self.qloop_config = config
        self._gone = asyncio.Event()

    def check_xsrf_cookie(self) -> None:
        """Only token-authenticated clients call this route (never a browser page with a cookie)."""
        if not hasattr(self, "_jupyter_current_user"):
            return  # Tornado asks before the user is known; prepare() asks again after
        if self.current_user is None:
            raise web.HTTPError(401, TOKEN_REQUIRED)
        if not self.token_authenticated and self.identity_provider.auth_enabled:
            # A page's cookie is not enough: a client sends the token. (A server run with no
            # authentication at all, which its owner chose, is open to every client anyway.)
            raise web.HTTPError(403, "MCP clients authenticate with the Jupyter server's token")

    def skip_check_origin(self) -> bool:
        """Never skipped for a token, as Jupyter's own API does: a page of another origin that
        learned the token is still refused (only a preflight, which carries no call, is not)."""
        return self.request.method == "OPTIONS"

    async def prepare(self, *, _redirect_to_login: Any = True) -> None:
        if not self.qloop_config.allow_remote and not is_loopback(self.request.remote_ip or ""):
            raise web.HTTPError(403, "qloop's MCP server answers this machine only")
        refusal = outside_refusal()
        if refusal is not None:
            raise web.HTTPError(403, refusal)
        if "token" in self.request.arguments:  # in the query (or a form body), not the header
            raise web.HTTPError(401, TOKEN_IN_URL)
        if not self.check_origin():  # Jupyter's check: same host, or its allow_origin settings
            raise web.HTTPError(403, CROSS_ORIGIN)
        await super().prepare(_redirect_to_login=False)
        self.check_xsrf_cookie()

    def on_connection_close(self) -> None:
        self._gone.set()

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        """Errors as JSON with the reason, for the client to show (never a login page)."""
        error = kwargs.get("exc_info", (None, None, None))[1]
        message = getattr(error, "log_message", None) or self._reason
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps({"message": message}))

    @web.authenticated
    @authorized
    async def get(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def post(self) -> None:
        await self._serve()

    @web.authenticated
    @authorized
    async def delete(self) -> None:
        await self._serve()

    def _scope(self) -> dict[str, Any]:
        request = self.request
        headers = [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in request.headers.get_all()
        ]
        host, _, port = (request.host or "127.0.0.1").rpartition(":")
        return {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": request.protocol,
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": request.query.encode("latin-1"),
            "headers": headers,
            "client": (request.remote_ip, 0),
            "server": (host or request.host, int(port) if port.isdigit() else 80),
        }

    async def _serve(self) -> None:
        body_sent = False

        async def receive() -> dict[str, Any]:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": self.request.body, "more_body": False}
            await self._gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.clear_header("Content-Type")
                self.set_status(message["status"])
                for name, value in message.get("headers", []):
                    self.add_header(name.decode("latin-1"), value.decode("latin-1"))
            elif message["type"] == "http.response.body" and not self._gone.is_set():
                chunk = message.get("body", b"")
                if chunk:
                    self.write(chunk)
                try:
                    await self.flush()
                except StreamClosedError:
                    self._gone.set()

        await self.mcp_sessions.handle_request(self._scope(), receive, send)
        if not self._finished:
            self.finish()


def _problem(error: ValidationError) -> str:
    """The first field error of a body, in one line: where and what."""
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the body"
    return f"{where}: {first['msg']}"


ITEM_REF = TypeAdapter(OutsideItemRef)
DECISION = TypeAdapter(OutsideDecision)
AGENT_CELL_REQUEST = TypeAdapter(OutsideAgentCellRequest)


class OutsideHandler(APIHandler):
    """Base of the routes a notebook page calls: JSON in and out (the bodies and answers of
    ``records/outside_schema.py``), Jupyter's auth."""

    auth_resource = AUTH_RESOURCE

    def initialize(self, broker: OutsideBroker) -> None:
        self.broker = broker

    def body(self, adapter: TypeAdapter[Body]) -> Body:
        """The request's body as ``adapter``'s message; 400 with the field at fault if not."""
        try:
            found = json.loads(self.request.body or b"{}")
        except ValueError as exc:
            raise web.HTTPError(400, "the body is not JSON") from exc
        try:
            return adapter.validate_python(found)
        except ValidationError as exc:
            raise web.HTTPError(400, _problem(exc)) from exc

    def answer(self, ok: bool, message: str = "") -> None:
        if not ok:
            self.set_status(409)
        answer: OutsidePostAnswer = {"ok": ok, "message": message} if message else {"ok": ok}
        self.finish(json.dumps(answer))


class PendingHandler(OutsideHandler):
    """``GET qloop/outside/pending?path=&after=``: the notebook's items, long-polled."""

    @web.authenticated
    @authorized
    async def get(self) -> None:
        path = self.get_query_argument("path", "")
        if not path:
            raise web.HTTPError(400, "path is required")
        try:
            after = int(self.get_query_argument("after", "0"))
        except ValueError as exc:
            raise web.HTTPError(400, "after is a number") from exc
        version, items = await self.broker.pending(path, after)
        answer: OutsidePending = {"version": version, "items": items}
        self.finish(json.dumps(answer))


class DecideHandler(OutsideHandler):
    """``POST qloop/outside/decide``: the user's decision on a card."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        found = self.body(DECISION)
        code = found.get("code")
        if found["decision"] == "edit" and code is None:
            raise web.HTTPError(400, 'an "edit" decision carries the edited "code"')
        applied = found.get("applied")
        said = found.get("reason", "")[:2000]
        name = found.get("name", "").strip()[:80]
        decision = Decision(
            found["decision"], said, code, None if applied is None else dict(applied), name
        )
        ok = self.broker.decide(found["id"], decision)
        self.answer(ok, "" if ok else "this call was already decided or is gone")


class ClaimHandler(OutsideHandler):
    """``POST qloop/outside/claim``: a page takes a cell change to apply it; 409 for any other
    page (under real-time collaboration every page of the notebook shows the card)."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        ok = self.broker.claim(self.body(ITEM_REF)["id"])
        self.answer(ok, "" if ok else "another page applies this change, or it is gone")


class StopHandler(OutsideHandler):
    """``POST qloop/outside/stop``: interrupt a running call."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        ok = self.broker.stop(self.body(ITEM_REF)["id"])
        self.answer(ok, "" if ok else "this call is not running")


class SavedHandler(OutsideHandler):
    """``POST qloop/outside/saved``: a page saved a record item into the notebook."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        ok = self.broker.saved(self.body(ITEM_REF)["id"])
        self.answer(ok, "" if ok else "no such record waits")


class AgentCellHandler(OutsideHandler):
    """``POST qloop/outside/agent_cell``: the ``%%agent`` cell that replays the saved outside calls
    the page sends (``entries``, in order) as the cell ``id``; its source and record."""

    @web.authenticated
    @authorized
    def post(self) -> None:
        found = self.body(AGENT_CELL_REQUEST)
        entries = found["entries"]
        if not entries:
            raise web.HTTPError(400, '"entries" is the non-empty list of saved calls')
        if len(entries) > MAX_AGENT_CELL_ENTRIES:
            raise web.HTTPError(400, f"at most {MAX_AGENT_CELL_ENTRIES:,} entries make one cell")
        made = agent_cell(entries, found["id"])
        if made.skipped == len(entries):
            self.answer(False, "none of these entries is a readable saved call")
            return
        answer: OutsideAgentCell = {"ok": True, "source": made.source, "record": made.record,
                                     "steps": made.steps, "own": made.own, "skipped": made.skipped}  # fmt: skip
        self.finish(json.dumps(answer))
