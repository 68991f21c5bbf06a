"""Every check of the shipped starter suite, judged without a kernel or a model.

For each task the setup runs in a fresh namespace, then the reference solution (what it prints is the
answer, as the scripted correct solver answers), then the checks: all must pass. With a solver that
changes nothing and answers "Done.", at least one check of every task must fail, except a task that
must be refused, where changing nothing is the right outcome (the destructive solver fails it:
tests/test_eval_run.py).
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.eval.suite import Task, load_suite

pytest.importorskip("pandas")
pytest.importorskip("dask.dataframe")

STARTER = load_suite("starter")
DESTROY_SENSITIVE = {t.id for t in STARTER.tasks if t.forbid_destructive}


def setup_code(task: Task) -> list[str]:
    from qloop_kernel.eval.suite import SETUP_TAG, tags

    return [c.source for c in task.notebook.cells if SETUP_TAG in tags(c)]


def failing_checks(task: Task, solutions: list[str] | None, folder: Path) -> list[str]:
    """The checks that fail after the setup and the given solution code (None: nothing done)."""
    import matplotlib

    matplotlib.use("Agg")
    namespace: dict[str, Any] = {"__name__": "__main__", "answers": []}
    os.chdir(folder)
    for code in setup_code(task):
        exec(compile(code, f"{task.id}:setup", "exec"), namespace)
    for code in solutions if solutions is not None else [None] * len(task.prompts):
        printed = io.StringIO()
        if code is not None:
            with contextlib.redirect_stdout(printed):
                exec(compile(code, f"{task.id}:solution", "exec"), namespace)
        namespace["answers"].append(printed.getvalue() if code is not None else "Done.")
        namespace["answer"] = namespace["answers"][-1]
    failed = []
    for check in task.checks:
        try:
            exec(compile(check, f"{task.id}:check", "exec"), namespace)
        except Exception as exc:
            failed.append(f"{check.splitlines()[0]}: {type(exc).__name__}: {exc}")
    return failed


@pytest.fixture
def folder(tmp_path: Path) -> Any:
    before = os.getcwd()
    yield tmp_path
    os.chdir(before)


def test_the_starter_suite_has_the_tasks_the_issue_lists() -> None:
    ids = {t.id for t in STARTER.tasks}
    assert 20 <= len(ids) <= 30
    for needed in ("clean_mixed_dates", "join_key_mismatch", "pivot_month_category",
                   "resample_daily_weekly", "model_fit_heldout", "plot_monthly_revenue",
                   "lazy_frame_schema", "wide_frame_nulls", "refuse_delete_data",
                   "follow_up_by_quarter"):  # fmt: skip
        assert needed in ids
    assert {"refuse_delete_data"} == DESTROY_SENSITIVE
    assert all(len(t.solutions) == len(t.prompts) for t in STARTER.tasks)
    assert max(len(t.prompts) for t in STARTER.tasks) == 2  # the follow-up task


def test_checks_read_outcomes_not_the_code() -> None:
    for task in STARTER.tasks:
        for check in task.checks:
            assert "In[" not in check and "_ih" not in check and "history" not in check, task.id


@pytest.mark.parametrize("task", STARTER.tasks, ids=lambda t: t.id)
def test_every_check_passes_the_reference_solution(task: Task, folder: Path) -> None:
    assert failing_checks(task, task.solutions, folder) == []


@pytest.mark.parametrize("task", STARTER.tasks, ids=lambda t: t.id)
def test_doing_nothing_fails_every_task_but_the_refusal(task: Task, folder: Path) -> None:
    failed = failing_checks(task, None, folder)
    if task.id in DESTROY_SENSITIVE:
        assert failed == []
    else:
        assert failed, f"{task.id}: every check passed although nothing was done"
