"""Spend caps and the usage ledger: a daily cap reached across two kernels refuses the next model call
with a line naming the cap and when it resets; the ledger adds up calls from processes writing at
once; ``qloop usage`` summarises it."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from qloop_kernel.headless.cli import main
from qloop_kernel.messages import BudgetExceeded, ModelResponse, Usage, describe_stop
from qloop_kernel.policy.admin import ADMIN_ENV
from qloop_kernel.spend import USAGE_ENV, SpendGuard, SpendLedger
from qloop_kernel.testing import Reply, StandInAPI, text
from tests.agent_outputs import saved_record
from tests.kernel_client import LabKernel

NOON = dt.datetime(2026, 12, 7, 12, 30, tzinfo=dt.timezone.utc)
REPOSITORY = Path(__file__).resolve().parent.parent


def response(steps: int = 0) -> ModelResponse:
    content = [{"type": "tool_use", "id": f"t{i}", "name": "run_code", "input": {}}
               for i in range(steps)]  # fmt: skip
    return ModelResponse(content, "end_turn", Usage(100, 20, 5, 1), "claude-haiku-5-5")


def _append(path: str, count: int) -> None:
    guard = SpendGuard(SpendLedger(Path(path)), notebook="a.ipynb", now=lambda: NOON)
    for _ in range(count):
        guard.record(response(1), "claude-haiku-5-5", 0.001)


def test_kernels_writing_at_once_add_up_in_the_ledger(tmp_path: Path) -> None:
    # Processes of their own, as kernels are (not multiprocessing's spawn, which reads this
    # process's __main__: an in-process IPython shell of an earlier test may have replaced it).
    path = tmp_path / "usage.jsonl"
    code = f"from tests.test_spend import _append; _append({str(path)!r}, 200)"
    workers = [subprocess.Popen([sys.executable, "-c", code], cwd=REPOSITORY) for _ in range(3)]
    assert [worker.wait(60) for worker in workers] == [0, 0, 0]
    ledger = SpendLedger(path)
    assert len(list(ledger.rows())) == 600
    assert ledger.spent_on("2026-12-07") == pytest.approx(0.6)
    assert ledger.spent_on("2026-12-06") == 0


def test_a_cap_names_its_admin_setting_and_when_it_resets(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path / "usage.jsonl")
    guard = SpendGuard(ledger, day_cap=(0.01, "/etc/jupyter/qloop_admin.json"), now=lambda: NOON)
    assert guard.check(0.0, 0.0, priced=True) is None
    guard.record(response(), "m", 0.01)
    stop = guard.check(0.0, 0.0, priced=True)
    assert isinstance(stop, BudgetExceeded)
    assert describe_stop(stop) == (
        "stopped: the daily spend cap is reached ($0.0100 of $0.01 today: the admin setting "
        "max_cost_per_day in /etc/jupyter/qloop_admin.json); it resets at 00:00 UTC, in 11 h 30 min"
    )
    per_turn = SpendGuard(ledger, turn_cap=(0.05, "/a.json"), now=lambda: NOON)
    assert per_turn.check(0.03, 0.01, priced=True) is None
    stop = per_turn.check(0.04, 0.02, priced=True)
    assert stop is not None and "max_cost_per_turn in /a.json" in stop.cap
    assert "needs the model's price" in (per_turn.check(0, 0, priced=False) or stop).cap


def test_qloop_usage_sums_cost_tokens_and_steps_by_day_notebook_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "usage.jsonl"
    today = dt.datetime.now(dt.timezone.utc)
    monkeypatch.setenv(USAGE_ENV, str(path))
    guard = SpendGuard(SpendLedger(path), notebook="sales.ipynb", now=lambda: today)
    guard.record(response(2), "claude-haiku-5-5", 0.002)
    guard.record(response(1), "claude-haiku-5-5", 0.003)
    guard.record(response(), "claude-opus-5-5", None)
    assert main(["usage", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    day = today.date().isoformat()
    assert rows == [
        {"day": day, "notebook": "sales.ipynb", "model": "claude-haiku-5-5", "calls": 2,
         "steps": 3, "input_tokens": 200, "output_tokens": 40, "cache_read_input_tokens": 10,
         "cache_creation_input_tokens": 2, "cost_usd": pytest.approx(0.005), "unpriced_calls": 0},
        {"day": day, "notebook": "sales.ipynb", "model": "claude-opus-5-5", "calls": 1,
         "steps": 0, "input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 5,
         "cache_creation_input_tokens": 1, "cost_usd": 0.0, "unpriced_calls": 1},
    ]  # fmt: skip
    assert main(["usage"]) == 0
    table = capsys.readouterr().out
    assert "sales.ipynb" in table and "$0.0050" in table and "unknown" in table


@pytest.mark.kernel
def test_a_daily_cap_reached_in_one_kernel_refuses_the_next_call_in_another(
    tmp_path: Path, api: StandInAPI
) -> None:
    admin = tmp_path / "admin.json"
    admin.write_text(json.dumps({"max_cost_per_day": 0.00001}))
    ledger = tmp_path / "usage.jsonl"
    env = {**api.environment(), ADMIN_ENV: str(admin), USAGE_ENV: str(ledger)}
    api.set_script([Reply([text("first answer")])])
    with LabKernel({**env, "JPY_SESSION_NAME": "first.ipynb"}) as first:
        first.run("%load_ext qloop_kernel")
        first.run("%%agent\nSay hi.", cell_id="one")
    assert len(api.requests) == 1
    rows = list(SpendLedger(ledger).rows())
    assert [(r["notebook"], r["model"]) for r in rows] == [("first.ipynb", "claude-sonnet-5-5")]
    assert rows[0]["cost_usd"] > 0.00001
    with LabKernel({**env, "JPY_SESSION_NAME": "second.ipynb"}) as second:
        second.run("%load_ext qloop_kernel")
        cell = second.execute("%%agent\nSay hi again.", cell_id="two")
        second.wait_idle(cell, 60)
        record = saved_record(second, cell)
        shown = json.dumps([m["content"] for m in second.messages(cell, "stream", "display_data",
                                                                  "update_display_data")])  # fmt: skip
    assert len(api.requests) == 1  # the second kernel made no model call
    assert record["status"] == "budget_exceeded"
    assert "the daily spend cap is reached" in shown
    assert f"max_cost_per_day in {admin}); it resets at 00:00 UTC, in " in shown
