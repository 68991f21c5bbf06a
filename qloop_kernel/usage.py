"""What this user's model calls cost, summarised from the spend ledger (``spend.py``): one report for
``qloop usage`` and the usage panel of JupyterLab and Notebook 7 (the server's ``qloop/usage`` route),
so the two always show the same figures (docs/teams.md).

A report holds the rows by (day, notebook, model), the same figures by day, by notebook and by model,
the totals, how many ledger lines could not be read (skipped), and today's spend against the admin
floor's ``max_cost_per_day`` where one is set. A cost is the sum of the calls whose price was known;
``unpriced_calls`` counts the others.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from .policy.admin import AdminFloor
from .spend import COUNTERS, SpendLedger, ledger_call, resets_in, usage_path

MAX_DAYS = 3660


def _group(calls: Iterable[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    """One row per value of ``keys``, in their order: calls, the counters, cost, unpriced calls."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for call in calls:
        group = groups.setdefault(tuple(call[k] for k in keys), _empty())
        group["calls"] += 1
        for name in COUNTERS:
            group[name] += call[name]
        if call["cost_usd"] is None:
            group["unpriced_calls"] += 1
        else:
            group["cost_usd"] += call["cost_usd"]
    return [{**dict(zip(keys, key, strict=True)), **g} for key, g in sorted(groups.items())]


def _empty() -> dict[str, Any]:
    return {"calls": 0, **dict.fromkeys(COUNTERS, 0), "cost_usd": 0.0, "unpriced_calls": 0}


def _cap(floor: AdminFloor, spent_today: float, now: dt.datetime) -> dict[str, Any] | None:
    found = floor.day_cap()
    if found is None:
        return None
    cap, path = found
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
    return {
        "max_cost_per_day": cap,
        "spent_today": spent_today,
        "source": f"the admin setting max_cost_per_day in {path}",
        "resets_at": midnight.isoformat(),
        "resets_in": resets_in(now),
    }


def unreadable_line(count: int) -> str:
    """What the usage says of ledger lines it skipped."""
    return f"{count} line{'' if count == 1 else 's'} of the ledger could not be read (skipped)"


def usage_report(floor: AdminFloor, days: int, now: dt.datetime) -> dict[str, Any]:
    """The usage of the last ``days`` UTC days up to ``now``'s, from this user's ledger as the
    admin floor and ``QLOOP_USAGE_FILE`` place it; a missing ledger gives empty figures."""
    ledger = SpendLedger(usage_path(floor))
    rows, unreadable = ledger.read()
    today = now.date()
    since = (today - dt.timedelta(days=days - 1)).isoformat()
    calls = []
    for row in rows:
        call = ledger_call(row)
        if call is None:
            unreadable += 1
        elif since <= call["day"] <= today.isoformat():
            calls.append(call)
    spent_today = sum(c["cost_usd"] or 0.0 for c in calls if c["day"] == today.isoformat())
    return {
        "ledger": str(ledger.path),
        "days": days,
        "since": since,
        "today": today.isoformat(),
        "unreadable_lines": unreadable,
        "rows": _group(calls, "day", "notebook", "model"),
        "by_day": _group(calls, "day"),
        "by_notebook": _group(calls, "notebook"),
        "by_model": _group(calls, "model"),
        "totals": {**_empty(), **(_group(calls)[0] if calls else {})},
        "cap": _cap(floor, spent_today, now),
    }
