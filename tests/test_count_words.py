"""Counts read as a person reads them: singular for one, "no model call" for none, no "(s)"."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.notebook.export import turn_markdown
from qloop_kernel.notebook.replay import ReplayPlan
from qloop_kernel.records import CellRecord, DecisionRecord, Timings, ToolCallRecord
from qloop_kernel.records.history import describe
from qloop_kernel.records.schema import UsageRecord
from qloop_kernel.records.text import summary_line, to_markdown, usage_line

QLOOP = Path(__file__).resolve().parents[1] / "qloop_kernel"


def record(steps: int = 0, **fields: Any) -> CellRecord:
    calls = [
        ToolCallRecord(
            id=f"toolu_{i}", name="run_code", input={"code": f"x = {i}"},
            decision=DecisionRecord(kind="approved"),
        )
        for i in range(steps)
    ]  # fmt: skip
    return CellRecord(
        session_id="s", prompt="Set x.", model="claude-sonnet-4-6", status="completed",
        tool_calls=calls, timings=Timings(started_at="2026-12-01T10:00:00.000+00:00"), **fields,
    )  # fmt: skip


def test_a_turn_without_a_model_call_says_so_and_shows_no_zero_figures() -> None:
    assert usage_line(record()) == "no model call"
    assert summary_line(record()) == "qloop agent turn · completed · 0 code steps · no model call"


def test_one_call_and_one_step_are_singular_and_an_empty_cache_is_left_out() -> None:
    one = record(1, model_calls=1, usage=UsageRecord(input_tokens=1), cost_usd=0.0001)
    assert usage_line(one) == "1 model call · 1 token · $0.0001"
    assert summary_line(one).startswith("qloop agent turn · completed · 1 code step · 1 model call")


def test_many_calls_are_plural_with_thousands_separators_and_the_cached_share() -> None:
    usage = UsageRecord(input_tokens=5_123, output_tokens=842, cache_read_input_tokens=20_480)
    many = record(2, model_calls=4, usage=usage, cost_usd=None)
    assert usage_line(many) == "4 model calls · 26,445 tokens (20,480 cached) · cost unknown"
    assert "· 2 code steps ·" in summary_line(many)
    assert "4 model calls" in to_markdown(many)


def test_the_replay_card_counts_steps_and_messages_in_words() -> None:
    message = {"role": "user", "content": "Set x."}
    one = record(1, messages=[message])
    request = ReplayPlan(one, one.replay_steps(), False).request()
    assert request.title == "Replay 1 saved code step"
    assert request.details["notices"][-1].startswith("1 saved message will become context")
    two = record(2, messages=[message, {"role": "assistant", "content": "ok"}])
    request = ReplayPlan(two, two.replay_steps(), False).request()
    assert request.title == "Replay 2 saved code steps"
    assert request.details["notices"][-1].startswith("2 saved messages will become context")


@pytest.mark.parametrize(("steps", "words"), [(0, "0 code steps"), (1, "1 code step")])
def test_history_and_export_count_steps_in_words(steps: int, words: str) -> None:
    saved = record(steps).model_dump(mode="json")
    assert f"· completed · {words} · Set x." in "\n".join(describe("c1", saved))
    assert f"· completed · {words.replace('code', 'approved code')}" in turn_markdown(
        "Set x.", record(steps)
    )


def test_no_text_a_person_reads_counts_with_a_parenthesised_plural() -> None:
    # The stand-in's API errors copy the Messages API's own wording.
    copied = {"testing/validation.py"}
    found = [
        f"{path.relative_to(QLOOP)}:{number}"
        for path in sorted(QLOOP.rglob("*.py"))
        if str(path.relative_to(QLOOP)) not in copied
        for number, text in enumerate(path.read_text().splitlines(), 1)
        if "(s)" in text and not text.lstrip().startswith("#")
    ]
    assert found == []
