"""What ``qloop/mcp`` answers where the Jupyter server cannot serve MCP: the ``mcp`` package (the
``mcp`` extra) is not installed. A client is told what to install instead of a generic 404."""

from __future__ import annotations

from jupyter_server.base.handlers import APIHandler
from tornado import web

MISSING_MCP = (
    "qloop's MCP server needs the mcp package, which is not installed here: pip install "
    "'qloop-kernel[mcp]' in the Jupyter server's environment, then restart the server"
)


class MissingMCPHandler(APIHandler):
    """Answers every request with 501 and :data:`MISSING_MCP` (JSON ``message``)."""

    @web.authenticated
    def get(self) -> None:
        raise web.HTTPError(501, MISSING_MCP)

    @web.authenticated
    def post(self) -> None:
        raise web.HTTPError(501, MISSING_MCP)

    @web.authenticated
    def delete(self) -> None:
        raise web.HTTPError(501, MISSING_MCP)
