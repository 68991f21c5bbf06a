"""Wiring of the agent chat panel into the server extension: its chats, routes and lifetime."""

from __future__ import annotations

import atexit
import json
from pathlib import Path
from typing import Any

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from .acp_agents import QloopACP
from .broker import OutsideBroker
from .config import QloopMCP
from .gate import Gate

try:
    from .acp_chat import Chat, Chats, Endpoint
    from .acp_handlers import routes
except ImportError:  # the ACP SDK is an optional extra
    HAS_ACP = False
else:
    HAS_ACP = True

MISSING = "agent chats need the ACP SDK: pip install 'qloop-kernel[acp]'"


class MissingACPHandler(APIHandler):
    """Every ``qloop/acp`` route when the ACP SDK is not installed: says how to get it."""

    @web.authenticated
    def get(self, *args: str) -> None:
        self.set_status(501)
        self.finish(json.dumps({"message": MISSING}))

    post = delete = get


def acp_routes(
    serverapp: Any, broker: OutsideBroker, mcp: QloopMCP
) -> list[tuple[str, Any, dict[str, Any]]]:
    """The routes of the chat panel (or, without the SDK, routes that say how to install it);
    agents are stopped when the server exits."""
    base = serverapp.web_app.settings["base_url"]
    if not HAS_ACP:
        serverapp.log.warning("qloop: %s", MISSING)
        return [(url_path_join(base, "qloop/acp") + "(/.*)?", MissingACPHandler, {})]
    config = QloopACP(parent=serverapp)
    gate = Gate(broker, lambda: mcp.policy)
    root = Path(serverapp.root_dir).resolve()

    def endpoint() -> Endpoint:
        if not mcp.enabled or serverapp.sock:
            return Endpoint(None, "")
        scheme = "https" if serverapp.certfile else "http"
        url = f"{scheme}://127.0.0.1:{serverapp.port}{url_path_join(base, 'qloop/mcp')}"
        return Endpoint(url, str(getattr(serverapp.identity_provider, "token", "") or ""))

    chats = Chats(lambda chat_id, spec: Chat(chat_id, spec, root, endpoint(), gate))
    atexit.register(chats.kill_all)
    return routes(base, chats, config)
