"""The report of a run: per task and overall, as JSON, a terminal table and one HTML file.

The HTML file is self-contained (inline CSS, no script, nothing fetched) and every piece of text in it
comes from the run, so all of it is escaped (``html.escape``). Records are redacted when the kernel
builds them; error lines are redacted again here.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from ..redact import redact_text
from .stats import wilson
from .suite import Suite

REPORT_VERSION = 1
SUMS = ("model_calls", "tokens", "cost_usd", "wall_s", "denied_steps", "failed_steps",
        "destructive_approved")  # fmt: skip


def _aggregate(results: list[dict[str, Any]]) -> dict[str, Any]:
    trials = len(results)
    passed = sum(r["status"] == "passed" for r in results)
    low, high = wilson(passed, trials)
    summary: dict[str, Any] = {
        "trials": trials, "passed": passed,
        "pass_rate": passed / trials if trials else None, "interval95": [low, high],
        "errors": sum(r["status"] == "error" for r in results),
    }  # fmt: skip
    for name in SUMS:
        total = sum(float(r.get(name) or 0) for r in results)
        summary[name] = round(total, 6) if name in ("cost_usd", "wall_s") else int(total)
    return summary


def build(suite: Suite, config: dict[str, Any], results: list[dict[str, Any]],
          stopped: str | None, planned: int) -> dict[str, Any]:  # fmt: skip
    """The JSON report: every task of the suite (a task not run yet has 0 trials)."""
    ordered = sorted(results, key=lambda r: (r["task"], r["trial"]))
    tasks = []
    for task in suite.tasks:
        own = [r for r in ordered if r["task"] == task.id]
        tasks.append({"id": task.id, "prompts": task.prompts,
                      "forbid_destructive": task.forbid_destructive,
                      **_aggregate(own), "results": own})  # fmt: skip
    return {
        "qloop_eval": REPORT_VERSION, "suite": suite.name, "config": config,
        "stopped": stopped, "complete": len(results) == planned and stopped is None,
        "planned_trials": planned, "overall": {"tasks": len(tasks), **_aggregate(results)},
        "tasks": tasks,
    }  # fmt: skip


def _rate(summary: dict[str, Any]) -> str:
    if not summary["trials"]:
        return "not run"
    low, high = summary["interval95"]
    return (
        f"{summary['passed']}/{summary['trials']} {summary['pass_rate']:.0%} [{low:.0%}-{high:.0%}]"
    )


COLUMNS = ("task", "passed [95%]", "calls", "tokens", "cost $", "wall s", "denied", "failed")


def _row(name: str, summary: dict[str, Any]) -> list[str]:
    counts = [int(summary[key]) for key in ("model_calls", "tokens")]
    steps = [int(summary[key]) for key in ("denied_steps", "failed_steps")]
    return [name, _rate(summary), *map(str, counts), f"{summary['cost_usd']:.4f}",
            f"{summary['wall_s']:.1f}", *map(str, steps)]  # fmt: skip


def table(report: dict[str, Any]) -> str:
    """The terminal table: a row per task and one for the whole run, then why it stopped."""
    rows = [list(COLUMNS)] + [_row(t["id"], t) for t in report["tasks"]]
    rows.append(_row("overall", report["overall"]))
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
             for row in rows]  # fmt: skip
    lines.insert(1, "-" * len(lines[0]))
    lines.insert(len(lines) - 1, "-" * len(lines[0]))
    lines += _error_lines(report)
    if report["stopped"] == "budget":
        lines.append(f"stopped: --max-cost {report['config'].get('max_cost')} was reached "
                     f"after {report['overall']['trials']} of {report['planned_trials']} trials")  # fmt: skip
    elif report["stopped"] == "interrupted":
        lines.append("interrupted: the finished trials are kept; --resume runs the rest")
    return redact_text("\n".join(lines))


def _error_lines(report: dict[str, Any]) -> list[str]:
    """Why trials were errors, each reason once with how many trials it stopped (at most 3)."""
    reasons: dict[str, int] = {}
    for task in report["tasks"]:
        for result in task["results"]:
            if result["status"] == "error":
                # "cell 4 (%%agent): UsageError: ..." names the task's own cell: the reason follows.
                why = re.sub(r"^cell \d+ \(.*?\): ", "", str(result.get("error") or "unknown"))
                reasons[why] = reasons.get(why, 0) + 1
    if not reasons:
        return []
    total = sum(reasons.values())
    lines = [f"errors: {total} of {report['overall']['trials']} trials did not run to the end:"]
    ranked = sorted(reasons.items(), key=lambda item: -item[1])
    lines += [f"  {count} x {why}" for why, count in ranked[:3]]
    if len(ranked) > 3:
        lines.append(f"  ... {len(ranked) - 3} other reasons (report.json has each trial's)")
    return lines


def write(report: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """``report.json`` and ``report.html`` in the folder."""
    json_path, html_path = folder / "report.json", folder / "report.html"
    json_path.write_text(redact_text(json.dumps(report, indent=1)), encoding="utf-8")
    html_path.write_text(to_html(report), encoding="utf-8")
    return json_path, html_path


CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}.passed{color:#176f2c}.failed,.error{color:#b00020}
pre{background:#f4f4f4;padding:6px;white-space:pre-wrap;max-height:30em;overflow:auto}
details{margin:4px 0}"""


def to_html(report: dict[str, Any]) -> str:
    """The self-contained HTML report: the table, then each trial's checks and transcripts."""
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in COLUMNS)
    body = "".join(_html_row(t["id"], t) for t in report["tasks"])
    body += _html_row("overall", report["overall"])
    config = ", ".join(f"{k}={v}" for k, v in report["config"].items() if v is not None)
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>qloop eval: {e(report['suite'])}"
        f"</title><style>{CSS}</style></head><body><h1>qloop eval: {e(report['suite'])}</h1>",
        f"<p>{e(config)}</p>", f"<p>{e(table(report).splitlines()[-1])}</p>"
        if report["stopped"] else "",
        f"<table><tr>{head}</tr>{body}</table>",
    ]  # fmt: skip
    for task in report["tasks"]:
        parts.append(f"<h2 id='{e(task['id'])}'>{e(task['id'])}</h2>")
        parts.extend(_html_trial(r) for r in task["results"])
    parts.append("</body></html>")
    return redact_text("".join(parts))


def _html_row(name: str, summary: dict[str, Any]) -> str:
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _row(name, summary)) + "</tr>"


def _html_trial(result: dict[str, Any]) -> str:
    e = html.escape
    status = str(result["status"])
    parts = [f"<details><summary class='{e(status)}'>trial {result['trial']}: {e(status)}"
             + (f" ({e(str(result['error']))})" if result.get("error") else "") + "</summary><ul>"]  # fmt: skip
    for check in result["checks"]:
        mark = "passed" if check["passed"] else "failed"
        why = f": {e(str(check['error']))}" if check.get("error") else ""
        parts.append(f"<li class='{mark}'>{mark}: {e(check['name'])}{why}</li>")
    parts.append("</ul>")
    for turn in result.get("transcripts", []):
        parts.append(f"<h4>%%agent ({e(str(turn['status']))})</h4><pre>{e(turn['prompt'])}</pre>")
        for step in turn["steps"]:
            code = step["input"].get("code") if isinstance(step["input"], dict) else None
            shown = code if isinstance(code, str) else json.dumps(step["input"])
            parts.append(f"<p>{e(step['tool'])}: {e(step['decision'])}"
                         + (f" ({e(str(step['reason']))})" if step.get("reason") else "")
                         + f"</p><pre>{e(shown)}</pre><pre>{e(str(step['output']))}</pre>")  # fmt: skip
        parts.append(f"<p>answer:</p><pre>{e(turn['answer'])}</pre>")
    parts.append("</details>")
    return "".join(parts)
