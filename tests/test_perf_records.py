"""Records built as the turn runs: each tool call once, running saves throttled, unsigned but loadable."""

from __future__ import annotations

from typing import Any

import pytest

from qloop_kernel.conversation import ConversationManager
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.records import CellRecord, RecordError, load_record, unsigned_json
from qloop_kernel.settings import Settings
from qloop_kernel.testing.script import text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import Tool, ToolRuntime

CALLS = 200


class ListStore:
    """A RecordStore that keeps what it was given, and when (by the manager's clock)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.saved: list[tuple[float, CellRecord]] = []

    def save(self, record: CellRecord) -> None:
        self.saved.append((self.clock(), record))

    def keep(self, record: CellRecord) -> None:
        self.saved.append((self.clock(), record))

    def running(self) -> list[CellRecord]:
        return [r for _, r in self.saved if r.status == "running"]


class FakeClock:
    """Seconds that move on only when a tool runs (each call takes ``step`` seconds)."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        return self.now


def describe(name: str) -> str:
    """Describe a column."""
    return f"{name}: " + "count 1000, mean 12.5, std 3.1, min 1.0, max 30.0; " * 40


def counting_runtime(clock: FakeClock) -> ToolRuntime:
    def timed_describe(name: str) -> str:
        """Describe a column."""
        clock.now += clock.step
        return describe(name)

    tool = Tool.from_function(timed_describe, name="describe", requires_approval=False)
    return ToolRuntime.of([tool], AutoApprover())


def long_script(calls: int) -> list[Any]:
    steps = [respond(tool_use("describe", {"name": f"c{i}"})) for i in range(calls)]
    return [*steps, respond(text("All columns described."))]


def run_long_turn(step: float, every_s: float = 3.0) -> tuple[ListStore, CellRecord]:
    clock = FakeClock(step)
    store = ListStore(clock)
    manager = ConversationManager(save_every_s=every_s, clock=clock)
    _, record = manager.run_turn(
        "Describe every column.", model=ScriptedModel(long_script(CALLS)),
        runtime=counting_runtime(clock), settings=Settings(max_turns=CALLS + 1), cell_id="c1",
        store=store,
    )  # fmt: skip
    return store, record


def test_a_long_turn_saves_its_running_record_at_most_every_few_seconds() -> None:
    store, record = run_long_turn(step=0.1)  # 200 calls in 20 s of tool time
    assert record.status == "completed" and len(record.tool_calls) == CALLS
    times = [t for t, r in store.saved if r.status == "running"]
    assert times[0] == 0.0  # the turn's record is there from its start
    assert all(b - a >= 3.0 for a, b in zip(times, times[1:], strict=False))
    assert 6 <= len(times) <= 8, times  # 20 s / 3 s, plus the first
    assert [r.status for _, r in store.saved][-1] == "completed"  # once at the end
    grown = [len(r.tool_calls) for r in store.running()]
    assert grown == sorted(grown) and grown[-1] < CALLS


def test_without_a_throttle_every_change_is_saved() -> None:
    store, _ = run_long_turn(step=0.1, every_s=0.0)
    # the start, then each model response and each tool call; then the finished record
    assert len(store.running()) == 1 + (CALLS + 1) + CALLS


def test_each_tool_call_is_built_once_and_shared_by_later_records() -> None:
    store, record = run_long_turn(step=1.0)
    first, later = store.running()[1], store.running()[-1]
    assert first.tool_calls and all(
        a is b for a, b in zip(first.tool_calls, later.tool_calls, strict=False)
    )
    # A running record is re-sent as it grows: its output summaries are short; the final one's full.
    assert all(len(c.output_summary) < 300 for c in later.tool_calls)
    full = record.tool_calls[0].output_summary
    assert len(full) > 1000 and full.startswith(later.tool_calls[0].output_summary[:100])


def test_a_running_record_holds_the_prompt_and_calls_but_not_the_conversation() -> None:
    store, record = run_long_turn(step=1.0)
    running = store.running()[-1]
    assert [m["role"] for m in running.messages] == ["user"]
    assert running.answer == "" and running.timings.ended_at is None
    assert running.model_calls >= len(running.tool_calls) > 0
    assert len(record.messages) == 2 * CALLS + 2 and record.answer == "All columns described."


def test_running_records_are_unsigned_but_load_and_the_finished_one_is_signed() -> None:
    store, record = run_long_turn(step=1.0)
    sent = unsigned_json(store.running()[-1])
    assert sent["signature"] == "" and sent["updated_at"]
    loaded = load_record(sent)  # a cell left running (a crashed kernel) can still be read
    assert loaded.status == "running" and not loaded.is_own()
    assert load_record(record.to_json()).is_own()
    sent["tool_calls"][0]["input"] = {"name": "other"}
    with pytest.raises(RecordError, match="changed after it was written"):
        load_record(sent)
