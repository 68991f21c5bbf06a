"""qloop's Jupyter server extension: the live notebooks as an MCP server for outside agents.

Serves MCP (streamable HTTP) at ``{base_url}qloop/mcp`` behind the Jupyter server's own
authentication, and the ``qloop/outside/*`` routes through which each notebook's page shows the
approval cards of those agents' calls and saves their records. Enabled by
``jupyter_server_config.d/qloop-kernel.json``, installed with the package; configured by the
``QloopMCP`` section of the Jupyter server's config (:mod:`qloop_kernel.server.config`).
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "qloop_kernel.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .extension import load

    load(serverapp)


async def _start_jupyter_server_extension(serverapp: Any) -> None:
    from .extension import start

    await start(serverapp)
