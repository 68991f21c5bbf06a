"""An outside agent for the browser tests: the official MCP SDK's client calls one tool of the
test server's ``qloop/mcp`` and prints the result as JSON.

    python outside_client.py SERVER_URL CLIENT_NAME TOOL 'JSON_ARGUMENTS'

The test server runs without a token (jupyter_server_test_config.py), so none is sent.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from mcp import types
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, name: str, tool: str, arguments: dict[str, object]) -> None:
    info = types.Implementation(name=name, version="1.0")
    async with (
        httpx.AsyncClient(timeout=300) as http,
        streamable_http_client(url.rstrip("/") + "/qloop/mcp", http_client=http) as (r, w, *_),
        ClientSession(r, w, client_info=info) as client,
    ):
        await client.initialize()
        result = await client.call_tool(tool, arguments)
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        print(json.dumps({"is_error": bool(result.is_error), "text": "\n".join(texts)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
