"""Fault matrix: API failures on the 2nd model call of a turn, through a real kernel driven like JupyterLab.

Every case runs one agent cell whose 1st model call asks for an auto-approved ``run_code`` step that sets a
variable; the fault hits the 2nd call. Each case asserts the outcome (retried and completed, or a clean
stop), the transcript saved in the output mirror, a live kernel and an intact namespace.
docs/reliability.md documents the same matrix; ``test_the_reliability_doc_shows_this_matrix`` keeps the
two in step.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from qloop_kernel.testing import (
    DropConnection,
    EarlyClose,
    Fault,
    Reply,
    StandInAPI,
    StreamError,
    text,
    tool_use,
)
from qloop_kernel.testing.script import ScriptItem
from tests.agent_outputs import saved_record, shown_answers
from tests.kernel_client import LabKernel

pytestmark = pytest.mark.kernel

DOC = Path(__file__).resolve().parents[1] / "docs" / "reliability.md"
DONE = "Recovered: the step is kept."
SLOW_TEXT = "word " * 400  # 125 text deltas: about 25 s at 0.2 s an event


@dataclass(frozen=True)
class FaultCase:
    """One row of the matrix: what the 2nd model call gets, and what the cell must end with."""

    key: str
    fault: str  # as the documentation names it
    second_call: tuple[ScriptItem, ...]  # served to the 2nd call and its retries, in order
    outcome: str  # "retried, completed" / "fatal" / "stopped"
    status: str  # the saved record's status
    retries: int
    message: str  # in the retry notices (retried) or on stderr and in the record (fatal)
    options: str = ""

    @property
    def variable(self) -> str:
        return f"step_{self.key}"


CASES = [
    FaultCase(
        "rate_limit", "429 with retry-after 0.1 s",
        (Fault(429, retry_after=0.1), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "API error 429 (rate_limit_error)",
    ),
    FaultCase(
        "server_error", "500",
        (Fault(500), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "API error 500 (api_error)",
    ),
    FaultCase(
        "overloaded", "529",
        (Fault(529, retry_after=0.1), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "API error 529 (overloaded_error)",
    ),
    FaultCase(
        "overloaded_4x", "529 on every attempt",
        tuple(Fault(529, retry_after=0.05) for _ in range(4)),
        "fatal", "error", 3, "API error 529 (overloaded_error): Overloaded (gave up after 4 attempts)",
    ),
    FaultCase(
        "unauthorized", "401",
        (Fault(401),),
        "fatal", "error", 0, "API error 401 (authentication_error): invalid x-api-key",
    ),
    FaultCase(
        "bad_request", "400",
        (Fault(400, message="messages.1.content: tool_result block is malformed"),),
        "fatal", "error", 0,
        "API error 400 (invalid_request_error): messages.1.content: tool_result block is malformed",
    ),
    FaultCase(
        "stream_error", "mid-stream `error` event",
        (Reply([text("partial " * 20)], stream_fault=StreamError(after_events=4)), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "the stream reported an error (overloaded_error)",
    ),
    FaultCase(
        "dropped", "dropped connection",
        (Reply([text("partial " * 20)], stream_fault=DropConnection(after_events=4)), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "connection dropped",
    ),
    FaultCase(
        "early_close", "early-closed stream",
        (Reply([text("partial " * 20)], stream_fault=EarlyClose(after_events=4)), Reply([text(DONE)])),
        "retried, completed", "completed", 1, "the response stream ended early",
    ),
    FaultCase(
        "slow_stream", "stream slower than `--timeout 3`",
        (Reply([text(SLOW_TEXT)], event_delay=0.2),),
        "stopped", "timeout", 0, "stopped: the turn ran past its 3 s time limit (--timeout)",
        options="--timeout 3",
    ),
]  # fmt: skip


@pytest.fixture(scope="module")
def api() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


@pytest.fixture(scope="module")
def lab(api: StandInAPI) -> Iterator[LabKernel]:
    with LabKernel(api.environment()) as kernel:
        kernel.run("%load_ext qloop_kernel")
        yield kernel


def retry_notices(lab: LabKernel, msg_id: str) -> list[str]:
    return [line for line in lab.text(msg_id).splitlines() if line.startswith("retrying in ")]


def run_case(lab: LabKernel, api: StandInAPI, case: FaultCase) -> tuple[str, dict, float]:
    """Run the case's agent cell; return its msg_id, its execute_reply content and the seconds."""
    step = Reply([text("Setting it."), tool_use("run_code", {"code": f"{case.variable} = 42"})])
    api.reset([step, *case.second_call])
    started = time.monotonic()
    msg_id = lab.execute(
        f"%%agent --new --approve auto {case.options}\nSet {case.variable} to 42.",
        cell_id=f"fault-{case.key}",
    )
    reply = lab.complete(msg_id, 60)["content"]
    return msg_id, reply, time.monotonic() - started


def assert_outcome(lab: LabKernel, msg_id: str, reply: dict, case: FaultCase) -> None:
    stderr = lab.stderr(msg_id)
    assert stderr == ""
    if case.outcome == "fatal":
        assert reply["status"] == "error" and reply["ename"] == "AgentError", reply
        [shown] = lab.error(msg_id)["traceback"]  # one line, no traceback
        assert shown.startswith(f"AgentError: the agent turn failed: {case.message}"), shown
    else:
        assert reply["status"] == "ok", (reply, stderr)
    notices = retry_notices(lab, msg_id)
    assert len(notices) == case.retries, notices
    if case.outcome == "retried, completed":
        assert all(case.message in notice for notice in notices), notices
        assert DONE in shown_answers(lab, msg_id).values()
    if case.outcome == "stopped":
        assert case.message in lab.text(msg_id)


def assert_transcript(record: dict, case: FaultCase) -> None:
    assert record["status"] == case.status and record["cell_id"] == f"fault-{case.key}"
    [step] = record["tool_calls"]
    assert step["name"] == "run_code" and step["decision"]["kind"] == "auto"  # run by the policy, not a click
    assert step["input"] == {"code": f"{case.variable} = 42"} and not step["is_error"]
    assert record["model_calls"] == (2 if case.status == "completed" else 1)
    if case.outcome == "fatal":
        assert case.message in record["error"]
    if case.status == "completed":
        assert record["answer"] == DONE
        assert "partial" not in json.dumps(record["messages"])  # a failed attempt leaves nothing


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_fault_on_the_second_model_call(lab: LabKernel, api: StandInAPI, case: FaultCase) -> None:
    msg_id, reply, seconds = run_case(lab, api, case)
    assert_outcome(lab, msg_id, reply, case)
    assert len(api.requests) == 2 + case.retries and api.remaining == 0
    assert_transcript(saved_record(lab, msg_id), case)
    assert lab.is_alive()
    assert lab.run(f"print({case.variable})").strip() == "42"
    if case.status == "timeout":
        assert seconds < 10, f"the turn ran {seconds:.1f} s past a 3 s limit"


def test_a_fatal_error_stops_run_all_and_the_next_cell_still_runs(
    lab: LabKernel, api: StandInAPI
) -> None:
    # The answer waits a second: "Run All" has sent the next cell by the time the turn fails, and
    # the kernel has it queued (a busy machine could otherwise deliver it after the failure).
    api.reset([Fault(401, first_byte_delay=1.0)])
    agent = lab.execute("%%agent --new\nhello", cell_id="fault-run-all")
    queued = lab.execute("queued_after_fault = 1", cell_id="fault-queued")
    assert lab.complete(agent, 60)["content"]["status"] == "error"
    assert lab.complete(queued, 30)["content"]["status"] == "aborted"  # like any failing cell
    assert lab.run("print('queued_after_fault' in dir())").strip() == "False"
    assert lab.run("after_fault = 1\nprint(after_fault)").strip() == "1"


def doc_rows() -> list[list[str]]:
    """The fault table of docs/reliability.md: cells of each row after the header."""
    section = DOC.read_text().split("## Fault matrix", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_reliability_doc_shows_this_matrix() -> None:
    expected = [
        [
            case.fault, case.outcome, f"`{case.status}`", str(case.retries),
            "yes", "yes", "yes",
        ]
        for case in CASES
    ]  # fmt: skip
    rows = [[re.sub(r"\s+", " ", cell) for cell in row] for row in doc_rows()]
    assert [row[:7] for row in rows] == expected
    for case, row in zip(CASES, rows, strict=True):
        assert f"`{case.message}`" in row[7], (case.key, row[7])
