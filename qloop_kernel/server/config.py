"""The ``QloopMCP`` section of the Jupyter server's config: what outside agents may do unasked.

Only the user's Jupyter config sets these (``jupyter_server_config.py`` or the command line),
never an MCP client.
"""

from __future__ import annotations

from traitlets import Bool, Enum, Float, Int
from traitlets.config import Configurable

from ..names import POLICIES


class QloopMCP(Configurable):
    """Settings of the MCP server the Jupyter server extension serves at ``qloop/mcp``."""

    policy = Enum(
        list(POLICIES),
        default_value="ask",
        help="Approval policy for outside agents' calls, by the risk class of the code: 'ask' "
        "shows a card for every call that can change anything (and refuses it when no page shows "
        "the notebook); 'readonly' runs read-only code and refuses the rest; 'write' also runs "
        "'write' code unasked; 'auto' runs everything unasked; 'deny' refuses every call that "
        "could change anything.",
    ).tag(config=True)

    enabled = Bool(True, help="Serve MCP at {base_url}qloop/mcp.").tag(config=True)

    allow_remote = Bool(
        False,
        help="Answer MCP requests from hosts other than this machine (loopback only by default; "
        "the Jupyter server's authentication applies either way).",
    ).tag(config=True)

    call_timeout_s = Float(
        600.0,
        help="Longest a run_code call may run once approved (seconds); then it is interrupted.",
    ).tag(config=True)

    page_gap_s = Float(
        40.0,
        help="A notebook counts as shown in a page while that page asked for its outside "
        "requests within this many seconds.",
    ).tag(config=True)

    result_chars = Int(
        20_000, help="Most characters of text an outside agent gets back from one call."
    ).tag(config=True)
