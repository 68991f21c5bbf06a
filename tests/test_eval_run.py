"""``qloop eval`` end to end: real kernels, ``qloop run``'s client, the stand-in playing scripted solvers.

The whole starter suite runs once against the correct solver (every check passes); the wrong, looping
and destructive solvers run on a few tasks (each fails what it should); the budget stops a run with a
partial report; an interrupted run resumes without re-running what finished.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.eval import solvers
from qloop_kernel.eval.suite import load_suite, shipped_suite
from qloop_kernel.headless.cli import main
from qloop_kernel.testing import StandInAPI

pytestmark = pytest.mark.kernel
pytest.importorskip("pandas")
pytest.importorskip("dask.dataframe")

SECRET = "sk-ant-api03-" + "Q" * 40 + "-evalsecret"
SUBSET = ("clean_mixed_dates", "follow_up_by_quarter", "refuse_delete_data")


@pytest.fixture
def subset(tmp_path: Path) -> Path:
    """Three starter tasks: one turn, a follow-up turn, one that must be refused."""
    folder = tmp_path / "subset"
    folder.mkdir()
    for name in SUBSET:
        shutil.copy(shipped_suite("starter") / f"{name}.ipynb", folder)
    return folder


@contextlib.contextmanager
def serve(responder: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInAPI]:
    with StandInAPI(responder=responder, api_key=SECRET) as api:
        for name, value in api.environment().items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("QLOOP_APPROVAL", raising=False)
        yield api


def run_eval(*args: str) -> tuple[int, dict[str, Any]]:
    out = Path(args[args.index("-o") + 1])
    code = main(["eval", *args, "-q"])
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    return code, report


def trials(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{r['task']}#{r['trial']}": r for t in report["tasks"] for r in t["results"]}


@pytest.mark.timeout(900)  # 25 kernels, two at a time: about 3 minutes on two cores
def test_the_correct_solver_passes_every_starter_task_and_the_reports_are_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = load_suite("starter")
    out = tmp_path / "out"
    with serve(solvers.correct(suite), monkeypatch) as api:
        code, report = run_eval("starter", "-o", str(out), "-j", "2", "--approve", "auto")
        calls = len(api.requests)
    assert code == 0
    failed = {
        r["task"]: [c for c in r["checks"] if not c["passed"]] or r["error"] or r["agent_status"]
        for r in trials(report).values()
        if r["status"] != "passed"
    }
    assert failed == {}
    overall = report["overall"]
    assert (overall["trials"], overall["passed"], overall["pass_rate"]) == (25, 25, 1.0)
    assert report["complete"] is True and report["stopped"] is None
    # Each agent cell: one step, one answer; the follow-up task has two agent cells.
    assert overall["model_calls"] == calls == 2 * 26
    assert overall["tokens"] > 0 and overall["cost_usd"] > 0 and overall["wall_s"] > 0
    assert overall["denied_steps"] == overall["failed_steps"] == 0
    for task in report["tasks"]:
        assert task["trials"] == 1 and task["interval95"][1] == 1.0
        result = task["results"][0]
        assert result["kernel_s"] > 0 and 0 <= result["harness_s"] < result["wall_s"]
        assert len(result["transcripts"]) == len(task["prompts"])
        assert result["transcripts"][0]["steps"][0]["decision"] == "auto"
    # The table, the results file and the executed notebooks.
    table = capsys.readouterr().out
    assert all(t["id"] in table for t in report["tasks"])
    assert "overall" in table and "25/25 100%" in table
    lines = (out / "results.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["config"]["approve"] == "auto" and len(lines) == 26
    assert len(list((out / "notebooks").glob("*.trial1.ipynb"))) == 25
    html = (out / "report.html").read_text()
    assert html.count("<details>") == 25 and "model_fit_heldout" in html
    # No key in anything written.
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def test_wrong_solvers_fail_and_say_why(
    subset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(solvers.wrong, monkeypatch):
        code, report = run_eval(str(subset), "-o", str(tmp_path / "wrong"), "-j", "2")
    assert code == 0
    status = {r["task"]: r["status"] for r in trials(report).values()}
    # Changing nothing fails the real tasks; for the one to refuse it is the right outcome.
    assert status == {"clean_mixed_dates": "failed", "follow_up_by_quarter": "failed",
                      "refuse_delete_data": "passed"}  # fmt: skip
    dates = trials(report)["clean_mixed_dates#1"]
    assert [c["passed"] for c in dates["checks"]] == [False, False, False]
    assert dates["checks"][2]["error"].startswith("AssertionError: Done.")
    assert report["overall"]["passed"] == 1


def test_a_destructive_step_fails_a_task_that_forbids_it(
    subset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve(solvers.destructive, monkeypatch):
        code, report = run_eval(
            str(subset), "-o", str(tmp_path / "d"), "-j", "2", "--approve", "auto"
        )
    assert code == 0
    results = trials(report)
    assert {r["status"] for r in results.values()} == {"failed"}
    refused = results["refuse_delete_data#1"]
    assert refused["destructive_approved"] >= 1
    assert [c["passed"] for c in refused["checks"]] == [False, False]
    assert report["overall"]["destructive_approved"] >= 3


def test_a_looping_solver_ends_at_max_turns_on_every_trial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = tmp_path / "one"
    suite.mkdir()
    shutil.copy(shipped_suite("starter") / "split_name_column.ipynb", suite)
    with serve(solvers.looping, monkeypatch) as api:
        code, report = run_eval(str(suite), "-o", str(tmp_path / "l"), "--trials", "2",
                                "--max-turns", "3", "-j", "2")  # fmt: skip
        calls = len(api.requests)
    assert code == 0
    task = report["tasks"][0]
    assert (task["trials"], task["passed"], task["pass_rate"]) == (2, 0, 0.0)
    assert task["interval95"][0] == 0.0 and 0.5 < task["interval95"][1] < 0.9
    assert [r["agent_status"] for r in task["results"]] == [["max_turns"], ["max_turns"]]
    assert task["model_calls"] == calls == 6


def test_the_budget_stops_the_run_with_a_partial_report(
    subset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    out = tmp_path / "b"
    with serve(solvers.correct(load_suite(str(subset))), monkeypatch) as api:
        code, report = run_eval(str(subset), "-o", str(out), "--max-cost", "0.001")
        calls = len(api.requests)
    assert code == 1
    assert report["stopped"] == "budget" and report["complete"] is False
    assert report["overall"]["trials"] == 1 and report["planned_trials"] == 3
    first = next(iter(trials(report).values()))
    # The trial's own agent turn got the budget left: it stopped after one model call.
    assert first["agent_status"] == ["budget_exceeded"] and first["model_calls"] == calls == 1
    assert first["cost_usd"] >= 0.001
    assert "stopped: --max-cost 0.001 was reached after 1 of 3 trials" in capsys.readouterr().out
    # The default policy (readonly) denied the solution's step (a 'write'), and the report says so.
    assert first["task"] == "clean_mixed_dates" and first["denied_steps"] == 1
    assert "budget" in (out / "report.html").read_text()


def test_an_interrupted_run_resumes_without_running_finished_trials_again(
    subset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r"
    suite = load_suite(str(subset))
    with serve(solvers.correct(suite), monkeypatch) as api:
        command = [sys.executable, "-m", "qloop_kernel.headless.cli", "eval", str(subset),
                   "-o", str(out), "--approve", "auto", "-q"]  # fmt: skip
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and process.poll() is None:
            if results.exists() and len(results.read_text().splitlines()) >= 2:
                break
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 130, stderr.decode()
        assert b"interrupted: the finished trials are kept" in stdout
        partial = json.loads((out / "report.json").read_text())
        done_first = {r["task"] for t in partial["tasks"] for r in t["results"]}
        assert partial["stopped"] == "interrupted" and 1 <= len(done_first) < 3
        before = len(api.requests)
        # A new run into the same folder is refused; one with other settings too.
        assert main(["eval", str(subset), "-o", str(out), "-q"]) == 2
        assert main(["eval", str(subset), "-o", str(out), "--resume", "-q"]) == 2
        code, report = run_eval(str(subset), "-o", str(out), "--approve", "auto", "--resume")
        resumed_calls = len(api.requests) - before
    assert code == 0 and report["complete"] is True
    assert report["overall"]["passed"] == 3
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    ran = [line["result"]["task"] for line in lines[1:]]
    assert sorted(ran) == sorted(SUBSET)  # each task once: the finished ones were not run again
    agent_cells = {"clean_mixed_dates": 1, "follow_up_by_quarter": 2, "refuse_delete_data": 1}
    assert resumed_calls == 2 * sum(n for t, n in agent_cells.items() if t not in done_first)


def test_without_an_api_key_every_trial_is_an_error_that_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL",
                 "QLOOP_PROVIDER", "QLOOP_APPROVAL"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    suite = tmp_path / "two"
    suite.mkdir()
    for name in ("split_name_column", "refuse_delete_data"):
        shutil.copy(shipped_suite("starter") / f"{name}.ipynb", suite)
    out = tmp_path / "k"
    code = main(["eval", str(suite), "-o", str(out), "-j", "2"])
    said = capsys.readouterr()
    report = json.loads((out / "report.json").read_text())
    assert code == 0 and report["overall"]["errors"] == 2
    for result in trials(report).values():
        assert result["status"] == "error" and result["model_calls"] == 0
        assert re.match(r"cell \d+ \(%%agent\): AgentError: ANTHROPIC_API_KEY is not set in "
                        "the kernel's environment", result["error"])  # fmt: skip
    assert "errors: 2 of 2 trials did not run to the end:\n  2 x AgentError: ANTHROPIC_API_KEY" in (
        said.out
    )
    assert said.err.count("error  ") == 2 and "): AgentError: ANTHROPIC_API_KEY" in said.err


def test_without_a_kernel_spec_nothing_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", "starter", "-o", str(tmp_path / "k"), "--kernel", "no-such-kernel"])
    assert code == 2
    assert "--kernel no-such-kernel: no such kernel" in capsys.readouterr().err
    assert not (tmp_path / "k").exists()
    assert os.path.isdir(shipped_suite("starter"))
