"""Wiring of the server extension: the routes, and the MCP session manager's lifetime."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from jupyter_server.utils import url_path_join

from .acp_extension import acp_routes
from .broker import OutsideBroker
from .config import QloopMCP
from .handlers import (
    AgentCellHandler,
    ClaimHandler,
    DecideHandler,
    MCPHandler,
    PendingHandler,
    SavedHandler,
    StopHandler,
)
from .missing import MissingMCPHandler
from .usage import UsageHandler

_STATE_KEY = "qloop_outside"


def load(serverapp: Any) -> None:
    """Add qloop's routes to the Jupyter server (its ``_load_jupyter_server_extension``)."""
    config = QloopMCP(parent=serverapp)
    broker = OutsideBroker(page_gap_s=config.page_gap_s)
    base = serverapp.web_app.settings["base_url"]
    routes: list[tuple[str, Any, dict[str, Any]]] = [
        (url_path_join(base, "qloop/outside/pending"), PendingHandler, {"broker": broker}),
        (url_path_join(base, "qloop/outside/decide"), DecideHandler, {"broker": broker}),
        (url_path_join(base, "qloop/outside/stop"), StopHandler, {"broker": broker}),
        (url_path_join(base, "qloop/outside/claim"), ClaimHandler, {"broker": broker}),
        (url_path_join(base, "qloop/outside/saved"), SavedHandler, {"broker": broker}),
        (url_path_join(base, "qloop/outside/agent_cell"), AgentCellHandler, {"broker": broker}),
        (url_path_join(base, "qloop/usage"), UsageHandler, {}),
    ]
    routes += acp_routes(serverapp, broker, config)
    state: dict[str, Any] = {"broker": broker, "config": config, "task": None}
    if config.enabled:
        try:
            from mcp.server.transport_security import TransportSecuritySettings

            from .tools import OutsideTools, build_server
        except ImportError:
            serverapp.log.warning(
                "qloop: MCP is not served: install it with pip install 'qloop-kernel[mcp]'"
            )
            config.enabled = False
            routes.append((url_path_join(base, "qloop/mcp") + "/?", MissingMCPHandler, {}))
    if config.enabled:
        server = build_server(OutsideTools(serverapp, config, broker))
        # The Jupyter server checks the Host header and the token; the SDK's own check assumes
        # it listens alone on a loopback port.
        server.streamable_http_app(
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
        )
        manager = server.session_manager  # the app's routing is Tornado's: only its manager serves
        state["manager"] = manager
        routes.append(
            (
                url_path_join(base, "qloop/mcp") + "/?",
                MCPHandler,
                {"session_manager": manager, "config": config},
            )
        )
    serverapp.web_app.add_handlers(".*$", routes)
    serverapp.web_app.settings[_STATE_KEY] = state
    serverapp.log.info(
        "qloop: outside agents reach the notebooks over MCP at %s (policy %r)",
        url_path_join(base, "qloop/mcp") if config.enabled else "(disabled)",
        config.policy,
    )


async def start(serverapp: Any) -> None:
    """Run the MCP session manager for as long as the server's event loop runs."""
    state = serverapp.web_app.settings.get(_STATE_KEY, {})
    manager = state.get("manager")
    if manager is None:
        return
    started = asyncio.Event()

    async def hold() -> None:
        async with manager.run():
            started.set()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.Event().wait()

    state["task"] = asyncio.ensure_future(hold())
    await started.wait()
