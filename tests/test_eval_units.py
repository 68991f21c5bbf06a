"""``qloop eval`` without kernels: suites and their mistakes, the notebook a trial runs, the
statistics, the comparison of two reports, the HTML report's escaping, the results file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat
import pytest

from qloop_kernel.eval import stats
from qloop_kernel.eval.compare import compare
from qloop_kernel.eval.harness import RunOptions, judge, run_trial, task_notebook
from qloop_kernel.eval.report import build, table, to_html
from qloop_kernel.eval.run import open_results
from qloop_kernel.eval.suite import SuiteError, load_suite, load_task
from qloop_kernel.headless.cli import main
from qloop_kernel.records import CellRecord
from qloop_kernel.records.schema import DecisionRecord, Timings, ToolCallRecord, UsageRecord


def task_file(
    folder: Path, name: str, cells: list[tuple[str, str | None]], meta: Any = None
) -> Path:
    nb = nbformat.v4.new_notebook()
    for source, tag in cells:
        cell = nbformat.v4.new_code_cell(source)
        if tag:
            cell.metadata["tags"] = [tag]
        nb.cells.append(cell)
    if meta is not None:
        nb.metadata["qloop_eval"] = meta
    path = folder / f"{name}.ipynb"
    nbformat.write(nb, path)
    return path


GOOD = [("x = 1", "qloop-setup"), ("%%agent\nDouble x.", None), ("x = 2", "qloop-solution"),
        ("assert x == 2", "qloop-check")]  # fmt: skip


# -- suites ---------------------------------------------------------------------------------------


def test_a_task_is_read_from_its_tags(tmp_path: Path) -> None:
    task = load_task(
        task_file(tmp_path, "double", GOOD, {"forbid_destructive": True, "max_turns": 4})
    )
    assert (task.id, task.prompts, task.checks) == ("double", ["Double x."], ["assert x == 2"])
    assert task.solutions == ["x = 2"]
    assert task.forbid_destructive is True and task.max_turns == 4


@pytest.mark.parametrize(
    ("cells", "meta", "says"),
    [
        ([("x = 1", "qloop-setup"), ("assert x", "qloop-check")], None, "has no %%agent cell"),
        ([("%%agent\nGo.", None)], None, "has no cell tagged 'qloop-check'"),
        ([("assert 1", "qloop-check"), ("%%agent\nGo.", None)], None, "comes before the first"),
        ([("%%agent\nA.", None), ("%%agent\nB.", None), ("y = 1", "qloop-solution"),
          ("assert 1", "qloop-check")], None, "1 'qloop-solution' cells for 2 %%agent cells"),
        (GOOD, {"forbid_destructive": "yes"}, "forbid_destructive must be true or false"),
        (GOOD, {"max_turns": 0}, "max_turns must be a whole number >= 1"),
        (GOOD, {"timeout": 3}, "unknown 'qloop_eval' keys: timeout"),
        (GOOD, ["x"], "metadata 'qloop_eval' must be an object"),
    ],
)  # fmt: skip
def test_a_malformed_task_is_refused_with_one_line(
    cells: list[tuple[str, str | None]], meta: Any, says: str, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    path = task_file(tmp_path, "bad", cells, meta)
    with pytest.raises(SuiteError, match="bad.ipynb: ") as caught:
        load_task(path)
    assert says in str(caught.value)
    assert main(["eval", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qloop eval: ") and says in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_a_notebook_that_is_not_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json")
    with pytest.raises(SuiteError, match=r"broken.ipynb: not a valid notebook"):
        load_suite(str(tmp_path))


def test_missing_and_empty_suites(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", str(tmp_path / "nowhere")]) == 2
    assert "nowhere: no such folder or file (shipped suites: starter)" in capsys.readouterr().err
    with pytest.raises(SuiteError, match="the suite has no task notebooks"):
        load_suite(str(tmp_path))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(SuiteError, match="a suite is a folder of notebooks or a .toml/.yaml list"):
        load_suite(str(tmp_path / "notes.txt"))


def test_a_yaml_list_without_pyyaml_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    (tmp_path / "s.yaml").write_text("tasks:\n  - tasks/a.ipynb\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # `import yaml` fails, as without PyYAML
    with pytest.raises(
        SuiteError, match=r"s.yaml: reading YAML needs PyYAML: `pip install pyyaml`"
    ):
        load_suite(str(tmp_path / "s.yaml"))


def test_a_toml_or_yaml_list_names_the_tasks_in_its_order(tmp_path: Path) -> None:
    (tmp_path / "tasks").mkdir()
    task_file(tmp_path / "tasks", "b", GOOD)
    task_file(tmp_path / "tasks", "a", GOOD)
    (tmp_path / "s.toml").write_text('tasks = ["tasks/b.ipynb", "tasks/a.ipynb"]\n')
    (tmp_path / "s.yaml").write_text("tasks:\n  - tasks/a.ipynb\n")
    assert [t.id for t in load_suite(str(tmp_path / "s.toml")).tasks] == ["b", "a"]
    assert [t.id for t in load_suite(str(tmp_path / "s.yaml")).tasks] == ["a"]
    (tmp_path / "bad.toml").write_text("tasks = [")
    with pytest.raises(SuiteError, match="bad.toml: not valid TOML"):
        load_suite(str(tmp_path / "bad.toml"))
    (tmp_path / "wrong.toml").write_text("tasks = 3\n")
    with pytest.raises(SuiteError, match="expected a list of notebook paths"):
        load_suite(str(tmp_path / "wrong.toml"))
    (tmp_path / "gone.toml").write_text('tasks = ["tasks/gone.ipynb"]\n')
    with pytest.raises(SuiteError, match="gone.ipynb: no such task notebook"):
        load_suite(str(tmp_path / "gone.toml"))


def test_the_starter_suite_is_found_by_name_inside_the_package() -> None:
    suite = load_suite("starter")
    assert suite.name == "starter" and len(suite.tasks) == 25
    assert all("qloop_kernel/eval/suites/starter" in str(t.path) for t in suite.tasks)


def test_the_wheel_carries_the_starter_suite() -> None:
    wheel = pytest.importorskip("hatchling.builders.wheel")
    root = Path(__file__).resolve().parents[1]
    shipped = {f.distribution_path for f in wheel.WheelBuilder(str(root)).recurse_included_files()}
    tasks = {f"qloop_kernel/eval/suites/starter/{t.id}.ipynb" for t in load_suite("starter").tasks}
    assert tasks <= shipped


# -- the notebook a trial runs ---------------------------------------------------------------------


def test_a_trial_runs_the_task_without_its_solution_and_hands_over_the_answer(
    tmp_path: Path,
) -> None:
    task = load_task(task_file(tmp_path, "t", GOOD, {"max_turns": 3}))
    nb = task_notebook(task, RunOptions(), max_cost=0.25)
    sources = [c.source for c in nb.cells]
    assert sources[0].startswith("%load_ext qloop_kernel")
    assert "x = 2" not in sources  # the solution is never run
    assert sources[2] == "%%agent --max-turns 3 --max-cost 0.250000\nDouble x."
    assert nb.cells[3].metadata["qloop_eval_role"] == "answer"
    assert "raises-exception" in nb.cells[4].metadata["tags"]  # a failing check: the next one runs
    assert "raises-exception" not in nb.cells[1].metadata.get("tags", [])  # a failing setup stops
    assert task.notebook.cells[1].source == "%%agent\nDouble x."  # the task itself is unchanged


def test_a_kernel_that_does_not_start_makes_the_trial_an_error(tmp_path: Path) -> None:
    task = load_task(task_file(tmp_path, "t", GOOD))
    result, _ = run_trial(task, 1, RunOptions(kernel="no-such-kernel"))
    assert result.status == "error" and not result.passed
    assert result.error is not None and result.error.startswith("the run: NoSuchKernel")
    assert result.checks == [{"name": "assert x == 2", "passed": False, "error": "not run"}]


def executed(task: Any, agent: dict[str, Any]) -> Any:
    """The trial notebook of ``task`` as a run leaves it: every cell ran; the agent cell got
    ``agent`` (its metadata and outputs)."""
    nb = task_notebook(task, RunOptions(), max_cost=None)
    for count, cell in enumerate(nb.cells, start=1):
        cell.execution_count = count
    agent_cell = next(c for c in nb.cells if c.source.startswith("%%agent"))
    agent_cell.metadata.update(agent.get("metadata", {}))
    agent_cell.outputs = [nbformat.from_dict(o) for o in agent.get("outputs", [])]
    return nb


def code_step(code: str, kind: str = "auto", name: str = "run_code", **more: Any) -> Any:
    field = "code" if name == "run_code" else "source"
    return ToolCallRecord(id=f"t{abs(hash((code, name))) % 10_000}", name=name,
                          input={field: code, **more}, decision=DecisionRecord(kind=kind))  # fmt: skip


def saved(*steps: Any) -> dict[str, Any]:
    record = CellRecord(
        session_id="s", prompt="Double x.", model="claude-test", status="completed", answer="ok",
        tool_calls=list(steps), model_calls=2, usage=UsageRecord(input_tokens=10, output_tokens=2),
        timings=Timings(started_at="2025-01-01T00:00:00Z"),
    ).sealed()  # fmt: skip
    return {"metadata": {"qloop": record.model_dump(mode="json")}}


SWAP = ("import os, shutil\nshutil.copy('data.csv', 'copy.csv')\nos.remove('data.csv')\n"
        "shutil.move('copy.csv', 'data.csv')")  # fmt: skip


def test_a_removal_inside_a_step_classed_external_counts_as_destructive(tmp_path: Path) -> None:
    from qloop_kernel.policy.risk import classify

    assert classify(SWAP).risk == "external"  # its most severe class; os.remove is a reason
    task = load_task(task_file(tmp_path, "t", GOOD, {"forbid_destructive": True}))
    swapped = judge(task, 1, executed(task, saved(code_step(SWAP))), None)
    assert (swapped.destructive_approved, swapped.status) == (1, "failed")
    # Denied, writing elsewhere only, or proposed without running: not counted.
    calm = saved(code_step(SWAP, kind="denied"), code_step("import shutil\nshutil.copy('a', 'b')"),
                 code_step("import os\nos.remove('x')", name="add_cell"))  # fmt: skip
    assert judge(task, 1, executed(task, calm), None).destructive_approved == 0
    # A cell the agent ran (run_cell, add_cell with run) counts like run_code.
    ran = saved(code_step("import os\nos.remove('x')", name="run_cell", cell_id="c"),
                code_step(SWAP, name="add_cell", run=True))  # fmt: skip
    assert judge(task, 1, executed(task, ran), None).destructive_approved == 2


def test_an_agent_cell_that_could_not_start_makes_the_trial_an_error_that_says_why(
    tmp_path: Path,
) -> None:
    task = load_task(task_file(tmp_path, "t", GOOD))
    missing = ("ANTHROPIC_API_KEY is not set in the kernel's environment: set it before starting "
               "Jupyter (export ANTHROPIC_API_KEY=...)")  # fmt: skip
    failed = {"outputs": [{"output_type": "error", "ename": "UsageError", "evalue": missing,
                           "traceback": []}]}  # fmt: skip
    judged = judge(task, 1, executed(task, failed), None)
    assert judged.status == "error" and judged.agent_status == ["no record"]
    assert judged.error == f"cell 3 (%%agent): UsageError: {missing}"
    report = build(load_suite(str(tmp_path)), {}, [judged.to_json()], None, 1)
    assert table(report).splitlines()[-2:] == [
        "errors: 1 of 1 trials did not run to the end:",
        f"  1 x UsageError: {missing}",
    ]
    # A turn that ran and failed keeps its record: its status says so, the trial is judged.
    assert judge(task, 1, executed(task, saved()), None).status == "passed"


# -- statistics -------------------------------------------------------------------------------------


def test_fisher_exact_matches_published_values() -> None:
    assert stats.fisher_exact(3, 4, 1, 4) == pytest.approx(
        0.4857, abs=1e-4
    )  # the tea-tasting table
    assert stats.fisher_exact(1, 12, 9, 12) == pytest.approx(0.002759, abs=1e-5)  # 1 9 / 11 3
    assert stats.fisher_exact(5, 5, 5, 5) == 1.0
    # The examples of docs/eval.md: 5/5 against 0/5 is beyond the noise, 5/5 against 2/5 is not.
    assert stats.fisher_exact(5, 5, 0, 5) == pytest.approx(0.0079, abs=1e-4)
    assert stats.fisher_exact(5, 5, 2, 5) == pytest.approx(0.1667, abs=1e-4)
    assert stats.fisher_exact(10, 10, 0, 10) == pytest.approx(1.0825e-5, rel=1e-3)
    with pytest.raises(ValueError):
        stats.fisher_exact(6, 5, 0, 5)


def test_wilson_interval() -> None:
    assert stats.wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert stats.wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert stats.wilson(0, 0) == (0.0, 1.0)


# -- reports and comparisons --------------------------------------------------------------------------


def result(task: str, trial: int, passed: bool, **extra: Any) -> dict[str, Any]:
    return {"task": task, "trial": trial, "status": "passed" if passed else "failed",
            "checks": [{"name": "the check", "passed": passed, "error": None if passed else "AssertionError: no"}],
            "error": None, "model_calls": 2, "tokens": 100, "cost_usd": 0.01, "wall_s": 1.0,
            "denied_steps": 0, "failed_steps": 0, "destructive_approved": 0, "agent_status": ["completed"],
            "kernel_s": 0.9, "harness_s": 0.01, "transcripts": [], **extra}  # fmt: skip


def report_of(tmp_path: Path, passes: dict[str, int], trials: int) -> dict[str, Any]:
    folder = tmp_path / f"suite{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    for name in passes:
        task_file(folder, name, GOOD)
    results = [
        result(name, i + 1, i < passed) for name, passed in passes.items() for i in range(trials)
    ]
    return build(load_suite(str(folder)), {"model": "m"}, results, None, len(results))


def test_compare_says_which_differences_exceed_the_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = report_of(tmp_path, {"easy": 10, "hard": 2, "same": 5}, trials=10)
    b = report_of(tmp_path, {"easy": 0, "hard": 3, "same": 5}, trials=10)
    rows = {row["task"]: row for row in compare(a, b)["rows"]}
    assert rows["easy"]["verdict"] == "A better" and rows["easy"]["p"] < 0.001
    assert rows["hard"]["verdict"] == "B better, within noise" and rows["hard"]["p"] == 1.0
    assert rows["same"]["verdict"] == "same"
    assert rows["overall"]["a"] == "17/30" and rows["overall"]["b"] == "8/30"
    assert a["overall"]["model_calls"] == 60 and isinstance(a["overall"]["model_calls"], int)
    assert a["overall"]["cost_usd"] == pytest.approx(0.3)
    paths = []
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data))
        paths.append(str(tmp_path / name))
    assert main(["eval", "compare", *paths]) == 0
    out = capsys.readouterr().out
    assert "easy" in out and "A better" in out and "Fisher's exact test, two-sided" in out


def test_compare_refuses_what_is_not_two_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.json").write_text('{"some": "json"}')
    assert main(["eval", "compare", str(tmp_path / "x.json")]) == 2
    assert "compare takes two reports" in capsys.readouterr().err
    assert main(["eval", "compare", str(tmp_path / "x.json"), str(tmp_path / "x.json")]) == 2
    assert "not a report of `qloop eval`" in capsys.readouterr().err
    assert main(["eval", "compare", str(tmp_path / "x.json"), str(tmp_path / "none.json")]) == 2


def test_the_html_report_escapes_everything_from_the_run(tmp_path: Path) -> None:
    turn = {"prompt": "<script>alert(1)</script>", "status": "completed", "error": None,
            "answer": "<img src=x onerror=alert(2)>",
            "steps": [{"tool": "run_code", "input": {"code": "print('</pre><b>')"}, "decision": "auto",
                       "reason": None, "is_error": False, "output": "<i>out</i>"}]}  # fmt: skip
    folder = tmp_path / "s"
    folder.mkdir()
    task_file(folder, "t", GOOD)
    report = build(load_suite(str(folder)), {}, [result("t", 1, True, transcripts=[turn])], None, 1)
    page = to_html(report)
    for raw in ("<script>", "<img", "</pre><b>", "<i>"):
        assert raw not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;i&gt;out&lt;/i&gt;" in page
    assert "<style>" in page and "http" not in page  # self-contained: nothing fetched


def test_a_partial_report_says_why_it_stopped(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    task_file(folder, "t", GOOD)
    task_file(folder, "u", GOOD)
    report = build(load_suite(str(folder)), {"max_cost": 0.5}, [result("t", 1, False)], "budget", 2)
    assert report["complete"] is False and report["tasks"][1]["trials"] == 0
    text = table(report)
    assert "stopped: --max-cost 0.5 was reached after 1 of 2 trials" in text
    assert "not run" in text.splitlines()[3]


def test_resuming_needs_the_same_settings(tmp_path: Path) -> None:
    config = {"suite": "s", "model": "a", "trials": 2}
    state = open_results(tmp_path, config, resume=False)
    assert state.results == []
    with (tmp_path / "results.jsonl").open("a") as handle:
        handle.write(json.dumps({"result": result("t", 1, True)}) + "\n")
    with pytest.raises(SuiteError, match="add --resume"):
        open_results(tmp_path, config, resume=False)
    with pytest.raises(SuiteError, match="other settings \\(model: 'a' there, 'b' now\\)"):
        open_results(tmp_path, {**config, "model": "b"}, resume=True)
    resumed = open_results(tmp_path, config, resume=True)
    assert resumed.done() == {("t", 1)} and resumed.spent == pytest.approx(0.01)
    with pytest.raises(SuiteError, match="nothing to resume"):
        open_results(tmp_path / "other", config, resume=True)
