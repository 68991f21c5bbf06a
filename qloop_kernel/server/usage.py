"""``GET qloop/usage?days=N``: the usage report of ``qloop usage`` (``qloop_kernel/usage.py``) for the
usage panel, from the ledger the user's kernels write (the admin floor's ``usage_file``, else
``QLOOP_USAGE_FILE`` in the server's environment, which its kernels inherit). Served with or without
the ``mcp`` extra, behind the Jupyter server's authentication like the other qloop routes."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from ..policy.admin import AdminError, admin_floor
from ..usage import MAX_DAYS, usage_report
from .handlers import AUTH_RESOURCE

DEFAULT_DAYS = 30


def _report(days: int) -> dict[str, Any]:
    return usage_report(admin_floor(), days, dt.datetime.now(dt.timezone.utc))


class UsageHandler(APIHandler):
    """Cost, model calls, steps and tokens by day, notebook and model, and today's spend against
    the admin's daily cap, as JSON."""

    auth_resource = AUTH_RESOURCE

    @web.authenticated
    @authorized
    async def get(self) -> None:
        try:
            days = int(self.get_query_argument("days", str(DEFAULT_DAYS)))
        except ValueError:
            days = 0
        if not 1 <= days <= MAX_DAYS:
            raise web.HTTPError(400, f"days is a number of days from 1 to {MAX_DAYS:,}")
        try:
            # Off the event loop: a long ledger takes a while to read.
            report = await asyncio.to_thread(_report, days)
        except AdminError as exc:
            raise web.HTTPError(503, str(exc)) from None
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(report))
