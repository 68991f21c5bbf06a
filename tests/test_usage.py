"""The usage panel's route, ``GET qloop/usage?days=N``, on a real Jupyter server: the ledger two
kernels wrote, summed by day, notebook and model with the same report as ``qloop usage``; lines that
cannot be read are counted and skipped; today's spend against the admin's daily cap; a missing ledger
gives empty figures; the route is served without the ``mcp`` extra, and only with the token."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import httpx
import pytest

from qloop_kernel.headless.cli import main
from qloop_kernel.messages import ModelResponse, Usage
from qloop_kernel.policy.admin import ADMIN_ENV
from qloop_kernel.spend import USAGE_ENV, SpendGuard, SpendLedger
from tests.jupyter_server import jupyter_server
from tests.test_mcp_missing import NO_MCP


def bad_lines(today: str) -> list[str]:
    """Lines no kernel writes, some of them of ``today``."""
    return [
        "not json at all",
        "[1, 2, 3]",
        '{"day": "yesterday", "cost_usd": 1}',
        json.dumps({"day": today, "model": "m", "cost_usd": "a lot", "input_tokens": 5}),
        json.dumps({"day": today, "model": "m", "cost_usd": 1.0, "output_tokens": -3}),
        json.dumps({"day": today, "model": "m", "cost_usd": -2.0}),
        '{"day": "2026-12-0',
    ]


def _call(steps: int, tokens: tuple[int, int, int, int]) -> ModelResponse:
    content = [{"type": "tool_use", "id": f"t{i}", "name": "run_code", "input": {}}
               for i in range(steps)]  # fmt: skip
    return ModelResponse(content, "end_turn", Usage(*tokens), "claude-haiku-5-5")


def write_ledger(path: Path, now: dt.datetime) -> None:
    """Two kernels' calls (sales.ipynb today and yesterday, plots.ipynb today and 40 days ago, as of
    ``now``), then lines no kernel writes."""
    sales = SpendGuard(SpendLedger(path), notebook="sales.ipynb", session="s1", now=lambda: now)
    plots = SpendGuard(SpendLedger(path), notebook="plots.ipynb", session="s2", now=lambda: now)
    sales.record(_call(2, (100, 20, 5, 1)), "claude-haiku-5-5", 0.25)
    sales.record(_call(1, (200, 40, 0, 0)), "claude-sonnet-5-5", 0.5)
    plots.record(_call(0, (10, 2, 0, 0)), "claude-haiku-5-5", None)  # no known price
    sales.now = plots.now = lambda: now - dt.timedelta(days=1)
    sales.record(_call(3, (1000, 300, 50, 10)), "claude-sonnet-5-5", 1.0)
    plots.now = lambda: now - dt.timedelta(days=40)
    plots.record(_call(1, (1, 1, 1, 1)), "claude-haiku-5-5", 7.0)
    with path.open("a", encoding="utf-8") as ledger:
        ledger.write("\n".join(bad_lines(now.date().isoformat())) + "\n\n")


def figures(calls: int, steps: int, tokens: tuple[int, int, int, int], cost: float,
            unpriced: int = 0) -> dict[str, object]:  # fmt: skip
    names = ("input_tokens", "output_tokens", "cache_read_input_tokens",
             "cache_creation_input_tokens")  # fmt: skip
    return {"calls": calls, "steps": steps, **dict(zip(names, tokens, strict=True)),
            "cost_usd": pytest.approx(cost), "unpriced_calls": unpriced}  # fmt: skip


def test_the_route_sums_two_kernels_ledger_by_day_notebook_and_model_with_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger, admin = tmp_path / "usage.jsonl", tmp_path / "admin.json"
    admin.write_text(json.dumps({"max_cost_per_day": 5}))
    env = {USAGE_ENV: str(ledger), ADMIN_ENV: str(admin)}
    with jupyter_server(tmp_path / "root", env=env) as server:
        # The days as of the requests (the route reads the ledger and the clock at each one), not
        # as of the tests' start: a run may go past midnight UTC meanwhile.
        now = dt.datetime.now(dt.timezone.utc)
        today = now.date().isoformat()
        yesterday = (now.date() - dt.timedelta(days=1)).isoformat()
        write_ledger(ledger, now)
        url = server.url + "qloop/usage"
        month = httpx.get(url, headers=server.headers, timeout=30)
        quarter = httpx.get(url, params={"days": 90}, headers=server.headers, timeout=30)
        refused = [httpx.get(url, params={"days": d}, headers=server.headers, timeout=30)
                   for d in ("0", "x", "4000")]  # fmt: skip
        anonymous = httpx.get(url, timeout=30)
    assert month.status_code == 200, month.text
    report = month.json()
    assert (report["ledger"], report["days"], report["today"]) == (str(ledger), 30, today)
    assert report["unreadable_lines"] == len(bad_lines(today))
    assert report["by_day"] == [
        {"day": yesterday, **figures(1, 3, (1000, 300, 50, 10), 1.0)},
        {"day": today, **figures(3, 3, (310, 62, 5, 1), 0.75, unpriced=1)},
    ]
    assert report["by_notebook"] == [
        {"notebook": "plots.ipynb", **figures(1, 0, (10, 2, 0, 0), 0.0, unpriced=1)},
        {"notebook": "sales.ipynb", **figures(3, 6, (1300, 360, 55, 11), 1.75)},
    ]
    assert report["by_model"] == [
        {"model": "claude-haiku-5-5", **figures(2, 2, (110, 22, 5, 1), 0.25, unpriced=1)},
        {"model": "claude-sonnet-5-5", **figures(2, 4, (1200, 340, 50, 10), 1.5)},
    ]
    assert report["totals"] == figures(4, 6, (1310, 362, 55, 11), 1.75, unpriced=1)
    assert len(report["rows"]) == 4
    cap = report["cap"]
    assert cap["max_cost_per_day"] == 5 and cap["spent_today"] == pytest.approx(0.75)
    assert cap["source"] == f"the admin setting max_cost_per_day in {admin}"
    assert cap["resets_at"] == f"{(now.date() + dt.timedelta(days=1)).isoformat()}T00:00:00+00:00"
    assert quarter.json()["totals"] == figures(5, 7, (1311, 363, 56, 12), 8.75, unpriced=1)
    assert [r.status_code for r in refused] == [400, 400, 400]
    assert "days is a number of days from 1 to 3,660" in refused[0].json()["message"]
    assert anonymous.status_code == 403  # the server's token is required
    # qloop usage shows the same report.
    monkeypatch.setenv(USAGE_ENV, str(ledger))
    monkeypatch.setenv(ADMIN_ENV, str(admin))
    assert main(["usage", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == report["rows"]
    assert main(["usage"]) == 0
    table = capsys.readouterr().out
    assert "total: $1.7500 + 1 unpriced over 4 model calls" in table
    assert "7 lines of the ledger could not be read (skipped)" in table
    assert (
        f"today: $0.7500 of the daily cap $5.00 (the admin setting max_cost_per_day in {admin})"
        in table
    )
    assert "plots.ipynb" in table and "unknown" in table
    assert main(["usage", "--days", "0"]) != 0
    assert "qloop usage: --days is a number of days from 1 to 3,660" in capsys.readouterr().err


def test_without_the_mcp_extra_a_missing_ledger_gives_empty_figures(tmp_path: Path) -> None:
    shim = tmp_path / "no-mcp"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_MCP)
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(shim)]))
    ledger = tmp_path / "nothing" / "usage.jsonl"
    env = {"PYTHONPATH": path, USAGE_ENV: str(ledger)}
    with jupyter_server(tmp_path / "root", env=env) as server:
        answer = httpx.get(server.url + "qloop/usage?days=7", headers=server.headers, timeout=30)
        log = server.log.read_text()
    assert "qloop: MCP is not served" in log
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["days"] == 7 and report["ledger"] == str(ledger)
    assert report["totals"] == figures(0, 0, (0, 0, 0, 0), 0.0)
    assert report["rows"] == report["by_day"] == report["by_notebook"] == report["by_model"] == []
    assert report["unreadable_lines"] == 0 and report["cap"] is None
    assert not ledger.parent.exists()  # reading never creates the ledger
