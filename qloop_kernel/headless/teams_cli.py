"""``qloop config --show`` and ``qloop usage``: what an operator and a user of a shared Jupyter read
about the admin floor, the settings in effect and the spend recorded (docs/teams.md)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
from typing import Any

from ..effective import effective_lines
from ..policy.admin import AdminError, admin_floor
from ..spend import SpendLedger, usage_path
from .files import CliError


def add_parsers(sub: Any) -> None:
    """Register ``qloop config`` and ``qloop usage`` on the ``qloop`` command's subparsers."""
    config = sub.add_parser(
        "config", help="the settings in effect, where each comes from, and the admin floor"
    )
    config.add_argument("--show", action="store_true", help="list them (the default)")
    config.set_defaults(func=_config)
    usage = sub.add_parser(
        "usage",
        help="cost, tokens and steps of this user's model calls, by day, notebook and model",
    )
    usage.add_argument("--days", type=int, default=30, help="the last N UTC days (default 30)")
    usage.add_argument("--json", action="store_true", help="the rows as JSON, for scripts")
    usage.set_defaults(func=_usage)


def _config(args: argparse.Namespace) -> int:
    for line in effective_lines({}, os.environ):
        print(line)
    print("kernel config (c.QloopAgent) and %agent set: `%agent config` in the notebook")
    return 0


_COLUMNS = ("calls", "steps", "input_tokens", "output_tokens", "cache_read_input_tokens",
            "cache_creation_input_tokens", "cost_usd")  # fmt: skip


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (day, notebook, model): calls, steps, the four token counters and the cost
    (None when a call's cost was not known)."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        key = (str(row.get("day")), str(row.get("notebook") or "-"), str(row.get("model")))
        group = groups.setdefault(key, dict.fromkeys(_COLUMNS, 0))
        group["calls"] += 1
        for name in _COLUMNS[1:-1]:
            group[name] += int(row.get(name) or 0)
        cost = row.get("cost_usd")
        group["cost_usd"] = None if cost is None or group["cost_usd"] is None else (
            group["cost_usd"] + float(cost))  # fmt: skip
    return [{"day": d, "notebook": n, "model": m, **g} for (d, n, m), g in sorted(groups.items())]


def _usage(args: argparse.Namespace) -> int:
    try:
        ledger = SpendLedger(usage_path(admin_floor()))
    except AdminError as exc:
        raise CliError(str(exc)) from None
    since = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=args.days - 1)).isoformat()
    table = summary([r for r in ledger.rows() if str(r.get("day")) >= since])
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    if not table:
        print(f"no model calls recorded since {since} ({ledger.path})")
        return 0
    print(
        f"{'day':<11}{'notebook':<28}{'model':<22}{'calls':>6}{'steps':>6}{'tokens':>11}{'cost':>11}"
    )
    for row in table:
        tokens = sum(int(row[n]) for n in _COLUMNS[2:-1])
        cost = "unknown" if row["cost_usd"] is None else f"${row['cost_usd']:.4f}"
        print(f"{row['day']:<11}{row['notebook'][:27]:<28}{row['model'][:21]:<22}{row['calls']:>6}"
              f"{row['steps']:>6}{tokens:>11,}{cost:>11}")  # fmt: skip
    known = [r["cost_usd"] for r in table if r["cost_usd"] is not None]
    print(
        f"total: ${sum(known):.4f} over {sum(r['calls'] for r in table)} model calls ({ledger.path})"
    )
    return 0
