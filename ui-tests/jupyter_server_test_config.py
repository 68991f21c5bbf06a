"""JupyterLab server configuration for the browser tests.

It removes every security protection (no token, no XSRF check): use it only
for the test server that Playwright starts.
"""

import os
import sys

from jupyterlab.galata import configure_jupyter_server

c = get_config()  # noqa: F821 (provided by the Jupyter config loader)

configure_jupyter_server(c)
c.ServerApp.port = int(os.environ.get("QLOOP_UI_PORT", "8888"))
c.ServerApp.ip = "127.0.0.1"
# CI runs as root.
c.ServerApp.allow_root = True
# The agent chat's coding agent: the scripted ACP agent of the Python tests (docs/acp.md).
_SCRIPTED_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "acp_agent.py")
c.QloopACP.agents = [
    {"name": "Scripted", "command": sys.executable, "args": [os.path.normpath(_SCRIPTED_AGENT)]}
]
