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
from ..spend import COUNTERS
from ..usage import MAX_DAYS, unreadable_line, usage_report
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


def _cost(row: dict[str, Any]) -> str:
    """The cost of a row: known calls' USD, and how many calls had no known price."""
    if row["unpriced_calls"] == row["calls"]:
        return "unknown"
    cost = f"${row['cost_usd']:.4f}"
    return f"{cost} + {row['unpriced_calls']} unpriced" if row["unpriced_calls"] else cost


def _usage(args: argparse.Namespace) -> int:
    if not 1 <= args.days <= MAX_DAYS:
        raise CliError(f"--days is a number of days from 1 to {MAX_DAYS:,}")
    try:
        report = usage_report(admin_floor(), args.days, dt.datetime.now(dt.timezone.utc))
    except AdminError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print(json.dumps(report["rows"], indent=1))
        return 0
    for line in usage_lines(report):
        print(line)
    return 0


def usage_lines(report: dict[str, Any]) -> list[str]:
    """``qloop usage``'s table of a usage report, its total, unread lines and daily cap."""
    table, ledger = report["rows"], report["ledger"]
    lines = [] if table else [f"no model calls recorded since {report['since']} ({ledger})"]
    if table:
        lines.append(f"{'day':<11}{'notebook':<28}{'model':<22}{'calls':>6}{'steps':>6}"
                     f"{'tokens':>11}{'cost':>11}")  # fmt: skip
    for row in table:
        tokens = sum(int(row[n]) for n in COUNTERS[1:])
        lines.append(f"{row['day']:<11}{row['notebook'][:27]:<28}{row['model'][:21]:<22}"
                     f"{row['calls']:>6}{row['steps']:>6}{tokens:>11,}{_cost(row):>11}")  # fmt: skip
    totals = report["totals"]
    if table:
        lines.append(f"total: {_cost(totals)} over {totals['calls']} model calls ({ledger})")
    if report["unreadable_lines"]:
        lines.append(unreadable_line(report["unreadable_lines"]))
    cap = report["cap"]
    if cap is not None:
        lines.append(f"today: ${cap['spent_today']:.4f} of the daily cap ${cap['max_cost_per_day']:.2f} "
                     f"({cap['source']}); it resets at 00:00 UTC, in {cap['resets_in']}")  # fmt: skip
    return lines
