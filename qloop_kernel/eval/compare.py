"""``qloop eval compare A.json B.json``: per-task differences, and which exceed the trials' noise.

A difference in pass rate counts as real when Fisher's exact test (two-sided, ``stats.fisher_exact``)
on the two runs' passes and fails gives p < 0.05; with few trials most differences do not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .stats import ALPHA, fisher_exact
from .suite import SuiteError


def read_report(path: str) -> dict[str, Any]:
    """A report written by ``qloop eval`` (anything else raises SuiteError)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{path}: no such file") from None
    except (OSError, ValueError) as exc:
        raise SuiteError(f"{path}: not a JSON report ({exc})") from None
    if (
        not isinstance(data, dict)
        or "qloop_eval" not in data
        or not isinstance(data.get("tasks"), list)
    ):
        raise SuiteError(f"{path}: not a report of `qloop eval` (report.json)")
    return data


def _cell(summary: dict[str, Any] | None) -> str:
    if summary is None or not summary["trials"]:
        return "-"
    return f"{summary['passed']}/{summary['trials']}"


def _verdict(a: dict[str, Any] | None, b: dict[str, Any] | None) -> tuple[str, float | None]:
    if a is None or b is None or not a["trials"] or not b["trials"]:
        return "not in both", None
    p = fisher_exact(a["passed"], a["trials"], b["passed"], b["trials"])
    if a["passed"] / a["trials"] == b["passed"] / b["trials"]:
        return "same", p
    better = "B better" if b["passed"] / b["trials"] > a["passed"] / a["trials"] else "A better"
    return (better if p < ALPHA else f"{better}, within noise"), p


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per task and overall: both pass counts, the p-value and the verdict."""
    tasks_a = {t["id"]: t for t in a["tasks"]}
    tasks_b = {t["id"]: t for t in b["tasks"]}
    rows = []
    for name in [*tasks_a, *(t for t in tasks_b if t not in tasks_a)]:
        ta, tb = tasks_a.get(name), tasks_b.get(name)
        verdict, p = _verdict(ta, tb)
        rows.append({"task": name, "a": _cell(ta), "b": _cell(tb), "p": p, "verdict": verdict,
                     "cost_a": ta and ta["cost_usd"], "cost_b": tb and tb["cost_usd"]})  # fmt: skip
    verdict, p = _verdict(a["overall"], b["overall"])
    rows.append({"task": "overall", "a": _cell(a["overall"]), "b": _cell(b["overall"]), "p": p,
                 "verdict": verdict, "cost_a": a["overall"]["cost_usd"],
                 "cost_b": b["overall"]["cost_usd"]})  # fmt: skip
    return {"test": "Fisher's exact test, two-sided, alpha 0.05", "rows": rows}


def table(result: dict[str, Any]) -> str:
    header = ["task", "A passed", "B passed", "p", "cost A $", "cost B $", "verdict"]
    rows = [header] + [
        [r["task"], r["a"], r["b"], "-" if r["p"] is None else f"{r['p']:.3f}",
         "-" if r["cost_a"] is None else f"{r['cost_a']:.4f}",
         "-" if r["cost_b"] is None else f"{r['cost_b']:.4f}", r["verdict"]]
        for r in result["rows"]
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    lines.append(f"test: {result['test']} on each task's passes and fails")
    return "\n".join(lines)
