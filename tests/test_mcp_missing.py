"""A Jupyter server without the ``mcp`` package (the ``mcp`` extra not installed) answers
``qloop/mcp`` with one message naming the extra, not a generic 404. The server is real; a
``sitecustomize`` on its PYTHONPATH makes ``import mcp`` fail, as on an install without the extra."""

from __future__ import annotations

import os
from pathlib import Path

import httpx

from tests.jupyter_server import jupyter_server

# On the PYTHONPATH after the tests' network guard, whose sitecustomize runs the one it shadows.
NO_MCP = """\
import sys

sys.modules["mcp"] = None  # `import mcp` and its submodules raise ImportError
"""


def test_without_the_mcp_extra_the_route_names_the_extra(tmp_path: Path) -> None:
    shim = tmp_path / "no-mcp"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_MCP)
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(shim)]))
    with jupyter_server(tmp_path / "root", env={"PYTHONPATH": path}) as server:
        answers = [
            httpx.get(server.mcp_url, headers=server.headers, timeout=30),
            httpx.post(server.mcp_url, headers=server.headers, json={}, timeout=30),
        ]
        anonymous = httpx.get(server.mcp_url, timeout=30)
        log = server.log.read_text()
    for answer in answers:
        assert answer.status_code == 501, (answer.request.method, answer.text)
        message = answer.json()["message"]
        assert message.startswith("qloop's MCP server needs the mcp package")
        assert "pip install 'qloop-kernel[mcp]'" in message
    assert anonymous.status_code == 403  # the server's token is still required
    assert "qloop: MCP is not served" in log and "Traceback" not in log
