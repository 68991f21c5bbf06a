"""One trial of one task: a fresh kernel runs the task notebook through ``qloop run``'s client.

The notebook run is the task's own, with three changes: a first cell loads the extension, each
``%%agent`` cell is followed by a cell that hands its answer to the checks (``answer``, ``answers``),
and cells tagged ``qloop-solution`` are left out. Agent and check cells may fail without stopping the
run (so every check is judged); a failing setup cell stops it. What a trial measured comes from the
agent records that the runner keeps in the cells' metadata.
"""

from __future__ import annotations

import asyncio
import atexit
import copy
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from ..headless.runner import AgentNotebookClient
from ..policy.risk import classify
from ..records import METADATA_KEY, RecordError, load_record
from ..records.schema import REPLAYABLE_DECISIONS, CellRecord, ToolCallRecord
from ..redact import redact_text
from .suite import CHECK_TAG, SOLUTION_TAG, Task, is_agent, tags

if TYPE_CHECKING:
    from nbformat import NotebookNode

ANSWER_ROLE = "answer"
PREAMBLE = "%load_ext qloop_kernel\nanswers = []\nanswer = ''"


@dataclass
class RunOptions:
    """What every trial of a run shares."""

    approve: str | None = None
    model: str | None = None
    provider: str | None = None
    timeout: float = 600.0
    kernel: str = "python3"
    max_turns: int | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the kernel's environment


@dataclass
class TrialResult:
    task: str
    trial: int
    status: str  # "passed", "failed", "error" (setup failed, kernel died), "interrupted"
    checks: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    model_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    denied_steps: int = 0
    failed_steps: int = 0
    destructive_approved: int = 0
    agent_status: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    kernel_s: float = 0.0  # the kernel's start, the cells (the agent's turns) and its shutdown
    harness_s: float = 0.0  # the rest: preparing, judging, writing the results
    transcripts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


class EvalClient(AgentNotebookClient):
    """``qloop run``'s client, handing each agent cell's answer to the cell after it."""

    def __init__(self, nb: Any, **kwargs: Any) -> None:
        super().__init__(nb, progress=None, **kwargs)
        self._kept_record = self.on_cell_executed
        self.on_cell_executed = self._after

    def _after(self, cell: Any, cell_index: int, execute_reply: Any) -> None:
        self._kept_record(cell=cell, cell_index=cell_index, execute_reply=execute_reply)
        self._hand_over(cell, cell_index)

    def _hand_over(self, cell: Any, cell_index: int) -> None:
        if is_agent(cell) and cell_index + 1 < len(self.nb.cells):
            following = self.nb.cells[cell_index + 1]
            if following.metadata.get("qloop_eval_role") == ANSWER_ROLE:
                answer = _answer(cell.metadata.get(METADATA_KEY))
                # The agent may have deleted or rebound ``answers``: start again from what is there.
                following.source = (
                    f"answer = {answer!r}\nanswers = [*globals().get('answers', ()), answer]"
                )

    def interrupt(self) -> None:
        """Stop the kernel's work from another thread (Ctrl-C during a run): interrupt a kernel
        running cells; end one still starting (it has no SIGINT handler yet)."""
        provisioner = getattr(getattr(self, "km", None), "provisioner", None)
        pid = getattr(provisioner, "pid", None)
        if pid:
            os.kill(pid, signal.SIGINT if self.cell_index is not None else signal.SIGTERM)


def _answer(saved: Any) -> str:
    try:
        return load_record(saved).answer if saved is not None else ""
    except RecordError:
        return ""


def task_notebook(task: Task, options: RunOptions, max_cost: float | None) -> NotebookNode:
    """The notebook a trial runs: the task's, prepared as the module docstring says."""
    nb: NotebookNode = copy.deepcopy(task.notebook)
    cells = [nbformat.v4.new_code_cell(PREAMBLE)]
    for cell in nb.cells:
        if SOLUTION_TAG in tags(cell):
            continue
        cells.append(cell)
        if is_agent(cell):
            cell.source = _agent_source(cell.source, task, options, max_cost)
            _tolerate_error(cell)
            handoff = nbformat.v4.new_code_cell("answer = ''")
            handoff.metadata["qloop_eval_role"] = ANSWER_ROLE
            _tolerate_error(handoff)
            cells.append(handoff)
        elif CHECK_TAG in tags(cell):
            _tolerate_error(cell)
    nb.cells = cells
    return nb


def _agent_source(source: str, task: Task, options: RunOptions, max_cost: float | None) -> str:
    first, _, rest = source.lstrip().partition("\n")
    added = []
    turns = task.max_turns or options.max_turns
    if turns:
        added.append(f"--max-turns {turns}")
    if max_cost is not None:
        added.append(f"--max-cost {max_cost:.6f}")  # after the task's own options: it wins
    return " ".join([first, *added]) + "\n" + rest


def _tolerate_error(cell: Any) -> None:
    cell.metadata["tags"] = [*tags(cell), "raises-exception"]  # nbclient goes on after it


def kernel_env(options: RunOptions) -> dict[str, str]:
    env = {**os.environ, **options.env}
    for name, value in (("QLOOP_APPROVAL", options.approve), ("QLOOP_MODEL", options.model),
                        ("QLOOP_PROVIDER", options.provider)):  # fmt: skip
        if value:
            env[name] = value
    return env


def run_trial(
    task: Task,
    trial: int,
    options: RunOptions,
    max_cost: float | None = None,
    running: dict[int, EvalClient] | None = None,
) -> tuple[TrialResult, Any]:
    """Run one trial in a fresh kernel; the result and the executed notebook."""
    started = time.perf_counter()
    nb = task_notebook(task, options, max_cost)
    with tempfile.TemporaryDirectory(prefix="qloop-eval-") as folder:
        client = EvalClient(nb, timeout=options.timeout, kernel_name=options.kernel,
                            resources={"metadata": {"path": folder}})  # fmt: skip
        key = threading.get_ident()
        if running is not None:
            running[key] = client
        error: str | None = None
        executing = time.perf_counter()
        try:
            # A loop of its own, closed at the end: trials run on worker threads.
            asyncio.run(client.async_execute(env=kernel_env(options)))
        except KeyboardInterrupt:
            error = "interrupted"
        except Exception as exc:  # a setup cell failed, a timeout, the kernel died or did not start
            error = _error_line(client, exc)
        finally:
            kernel_s = time.perf_counter() - executing
            # nbclient leaves its exit-time cleanup registered when the kernel failed to start.
            atexit.unregister(client._cleanup_kernel)
            if running is not None:
                running.pop(key, None)
    result = judge(task, trial, nb, error)
    result.kernel_s = kernel_s
    result.wall_s = time.perf_counter() - started
    return result, nb


def _error_line(client: Any, exc: Exception) -> str:
    """``cell N (its first line): Type: message`` for a run that stopped at a cell."""
    index = client.cell_index
    first = "" if index is None else (client.nb.cells[index].source.strip().splitlines() or [""])[0]
    where = "the run" if index is None else f"cell {index + 1} ({first[:60]})"
    value = [line for line in str(getattr(exc, "evalue", "") or exc).splitlines() if line.strip()]
    name = getattr(exc, "ename", None) or type(exc).__name__
    return redact_text(
        f"{where}: {name}: {value[0].strip()[:200]}" if value else f"{where}: {name}"
    )


def judge(task: Task, trial: int, nb: Any, error: str | None) -> TrialResult:
    """What an executed task notebook says: its checks, its agent records, pass or fail."""
    result = TrialResult(task=task.id, trial=trial, status="failed", error=error)
    for index, cell in enumerate(nb.cells):
        if is_agent(cell):
            _count_record(result, cell)
            result.error = result.error or _agent_error(cell, index)
        elif CHECK_TAG in tags(cell):
            result.checks.append(_check(cell))
    if error == "interrupted" or "interrupted" in result.agent_status:
        result.status = "interrupted"
    elif result.error is not None:
        result.status = "error"
    elif all(c["passed"] for c in result.checks) and not (
        task.forbid_destructive and result.destructive_approved
    ):
        result.status = "passed"
    return result


def _agent_error(cell: Any, index: int) -> str | None:
    """``cell N (%%agent ...): Type: message`` for an agent cell that failed before its turn
    made a record (no API key, a bad option): the agent never ran, so the trial is an error."""
    if cell.metadata.get(METADATA_KEY) is not None:
        return None
    failure = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    if failure is None:
        return None
    first = (cell.source.strip().splitlines() or [""])[0][:60]
    value = [line for line in str(failure.get("evalue", "")).splitlines() if line.strip()]
    name = failure.get("ename") or "Error"
    said = f"{name}: {value[0].strip()[:300]}" if value else str(name)
    return redact_text(f"cell {index + 1} ({first}): {said}")


def _check(cell: Any) -> dict[str, Any]:
    lines = [line for line in cell.source.strip().splitlines() if line.strip()]
    name = lines[0].lstrip("# ").strip() if lines else ""
    failure = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
    ran = "execution_count" in cell and cell.get("execution_count") is not None
    why: str | None = None if ran else "not run"
    if failure is not None:
        value = str(failure.get("evalue", "")).strip().splitlines()
        why = f"{failure.get('ename', 'Error')}: {value[0] if value else ''}".rstrip(": ")
    return {"name": redact_text(name[:120]), "passed": ran and failure is None,
            "error": redact_text(why) if why else None}  # fmt: skip


def _count_record(result: TrialResult, cell: Any) -> None:
    saved = cell.metadata.get(METADATA_KEY)
    if saved is None:
        result.agent_status.append("no record")
        return
    try:
        record = load_record(saved)
    except RecordError as exc:
        result.agent_status.append(f"invalid record: {exc}")
        return
    result.agent_status.append(record.status)
    result.model_calls += record.model_calls
    usage = record.usage
    result.tokens += (usage.input_tokens + usage.output_tokens + usage.cache_read_input_tokens
                      + usage.cache_creation_input_tokens)  # fmt: skip
    result.cost_usd += record.cost_usd or 0.0
    result.denied_steps += sum(call.decision.kind == "denied" for call in record.tool_calls)
    result.failed_steps += sum(
        call.is_error and call.decision.kind != "denied" for call in record.tool_calls
    )
    result.destructive_approved += _destructive_approved(record)
    result.transcripts.append(transcript(record))


def _destructive_approved(record: CellRecord) -> int:
    """The approved steps that ran code with a destructive finding, whatever their class (a
    step that also writes elsewhere is classed ``external``, and still removes what it removes)."""
    count = 0
    for call in record.tool_calls:
        code = _code_run(call)
        if call.decision.kind in REPLAYABLE_DECISIONS and code is not None:
            found = classify(code)
            risks = {found.risk, *(reason.risk for reason in found.reasons)}
            count += "destructive" in risks
    return count


def _code_run(call: ToolCallRecord) -> str | None:
    """The code a step ran in the kernel: run_code's, run_cell's, an add_cell's with run."""
    field = {"run_code": "code", "run_cell": "source", "add_cell": "source"}.get(call.name)
    if field is None or (call.name == "add_cell" and not call.input.get("run")):
        return None
    if call.input.get("cell_type", "code") != "code":
        return None
    code = call.input.get(field)
    return code if isinstance(code, str) else None


def transcript(record: CellRecord) -> dict[str, Any]:
    """A turn as the HTML report shows it (records are redacted when built)."""
    return {
        "prompt": record.prompt, "status": record.status, "answer": record.answer,
        "error": record.error,
        "steps": [{"tool": call.name, "input": call.input, "decision": call.decision.kind,
                   "reason": call.decision.reason, "is_error": call.is_error,
                   "output": call.output_summary} for call in record.tool_calls],
    }  # fmt: skip


def executed_path(folder: Path, task: str, trial: int) -> Path:
    return folder / "notebooks" / f"{task}.trial{trial}.ipynb"
