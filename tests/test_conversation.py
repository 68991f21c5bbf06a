"""ConversationManager, records, context policy and pricing."""

from __future__ import annotations

import base64
import json

import pytest

from qloop_kernel.context import ContextPolicy
from qloop_kernel.conversation import ConversationManager
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.pricing import UnknownModelPrice, parse_price, price_for, prices_as_of
from qloop_kernel.records import RecordError, load_record
from qloop_kernel.settings import Settings
from qloop_kernel.testing.script import text, tool_use
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import Tool, ToolRuntime

PNG = base64.b64encode(b"\x89PNG fake image bytes").decode()


class ListStore:
    def __init__(self):
        self.saved = []

    def save(self, record):
        self.saved.append(record)

    def keep(self, record):
        self.saved.append(record)


def run_code(code: str) -> list:
    """Run code."""
    return [
        {"type": "text", "text": f"ran {code}"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]


def make_runtime():
    return ToolRuntime.of([Tool.from_function(run_code)], AutoApprover())


def test_turns_share_one_conversation_and_records_are_saved_as_they_grow():
    store = ListStore()
    manager = ConversationManager(save_every_s=0)  # every change saved (the default throttles)
    model = ScriptedModel(
        [respond(tool_use("run_code", {"code": "df = 1"})), respond(text("made df")),
         respond(text("df is 1"))]
    )  # fmt: skip
    first, record = manager.run_turn(
        "make df",
        model=model,
        runtime=make_runtime(),
        settings=Settings(),
        cell_id="c1",
        store=store,
    )
    second, _ = manager.run_turn(
        "what is df?",
        model=model,
        runtime=make_runtime(),
        settings=Settings(),
        cell_id="c2",
        store=store,
    )
    assert first.status == second.status == "completed"
    statuses = [s.status for s in store.saved]
    assert statuses == ["running"] * 4 + ["completed"] + ["running"] * 2 + ["completed"]
    assert store.saved[1].model_calls == 1 and store.saved[1].usage.input_tokens == 100
    assert store.saved[2].tool_calls[0].input == {"code": "df = 1"}  # saved as soon as it ran
    assert model.requests[2].messages[:4] == manager.messages[:4]  # turn 2 sees turn 1
    assert record.tool_calls[0].input == {"code": "df = 1"}
    assert record.tool_calls[0].images[0].bytes == len(base64.b64decode(PNG))
    assert PNG not in str(record.to_json())  # image bytes are never saved
    assert manager.totals.turns == 2 and manager.totals.model_calls == 3


def test_record_round_trip_and_tamper_detection():
    manager = ConversationManager()
    _, record = manager.run_turn(
        "hi", model=ScriptedModel([respond(text("hello"))]), runtime=make_runtime(),
        settings=Settings(), cell_id="c1",
    )  # fmt: skip
    saved = record.to_json()
    assert load_record(saved).answer == "hello"
    saved["tool_calls"] = [
        {"id": "t", "name": "run_code", "input": {"code": "import os"},
         "decision": {"kind": "approved"}}
    ]  # fmt: skip
    with pytest.raises(RecordError, match="changed after it was written"):
        load_record(saved)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("text", "not an object"),
        ({"schema_version": 99}, "schema_version 99"),
        ({"schema_version": 1, "prompt": 3}, "invalid"),
    ],
)
def test_bad_records_get_clear_messages(data, message):
    with pytest.raises(RecordError, match=message):
        load_record(data)


def test_secrets_never_reach_the_record(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-canary-canary-canary")
    manager = ConversationManager()
    model = ScriptedModel(
        [respond(tool_use("run_code", {"code": "print('sk-ant-api03-canary-canary-canary')"})),
         respond(text("key is sk-ant-api03-canary-canary-canary"))]
    )  # fmt: skip
    _, record = manager.run_turn(
        "show the key sk-ant-api03-canary-canary-canary", model=model, runtime=make_runtime(),
        settings=Settings(),
    )  # fmt: skip
    assert "canary" not in str(record.to_json())


def test_unknown_model_price_is_required_only_with_a_usd_budget():
    assert price_for("claude-sonnet-4-6").input == 3.0
    assert price_for("claude-haiku-4-5-20251001").output == 5.0
    assert prices_as_of() == "2026-12-02"
    with pytest.raises(UnknownModelPrice, match="QLOOP_PRICE"):
        Settings(max_cost=1.0).resolved_price("claude-new-model")
    assert Settings().resolved_price("claude-new-model") is None
    assert Settings(max_cost=1.0, price=(2.0, 8.0)).resolved_price("claude-new-model").input == 2.0
    assert parse_price("3, 15").output == 15.0
    with pytest.raises(ValueError):
        parse_price("3")


def test_context_policy_trims_old_tool_results_and_keeps_the_newest():
    def exchange(i, size):
        return [
            {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "x",
                                               "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}",
                                          "content": [{"type": "text", "text": "y" * size}]}]},
        ]  # fmt: skip

    messages = [{"role": "user", "content": "start"}]
    for i in range(6):
        messages += exchange(i, 4000)
    policy = ContextPolicy(tool_result_budget_tokens=2500, keep_recent_messages=2)
    trimmed = policy.apply(messages)
    sizes = [len(str(m["content"])) for m in trimmed if m["role"] == "user"][1:]
    assert sizes[-1] > 4000 and sizes[-2] > 4000  # newest kept whole
    assert all(s < 400 for s in sizes[:-2])
    assert "older tool output removed" in str(trimmed[2]["content"])
    assert [m["role"] for m in trimmed] == [m["role"] for m in messages]
    assert messages[2]["content"][0]["content"][0]["text"] == "y" * 4000  # input untouched


def test_digest_survives_a_browser_saving_whole_floats_as_ints():
    manager = ConversationManager()
    _, record = manager.run_turn(
        "hi", model=ScriptedModel([respond(text("hello"))]), runtime=make_runtime(),
        settings=Settings(max_cost=1.0, timeout=30.0), cell_id="c1",
    )  # fmt: skip
    saved = json.loads(json.dumps(record.to_json()))
    saved["settings"]["max_cost"] = 1  # what JSON.stringify writes for 1.0
    saved["settings"]["timeout"] = 30
    assert load_record(saved).settings["max_cost"] == 1


def test_a_record_with_unanswered_tool_calls_is_not_adopted():
    manager = ConversationManager()
    _, record = manager.run_turn(
        "hi", model=ScriptedModel([respond(text("hello"))]), runtime=make_runtime(),
        settings=Settings(), cell_id="c1",
    )  # fmt: skip
    fresh = ConversationManager()
    assert fresh.adopt(record) is True and len(fresh.messages) == 2
    broken = record.model_copy(update={"messages": [
        *record.messages,
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {}}]},
    ]})  # fmt: skip
    other = ConversationManager()
    assert other.adopt(broken) is False and other.messages == []


def test_a_refusal_is_saved_with_its_explanation_and_leaves_the_conversation() -> None:
    model = ScriptedModel(
        [respond(text(""), stop_reason="refusal",
                 stop_details={"category": "cyber", "explanation": "I can't help with that."})]
    )  # fmt: skip
    manager = ConversationManager()
    result, record = manager.run_turn(
        "do harm", model=model, runtime=make_runtime(), settings=Settings()
    )
    assert result.status == "refused" and record.status == "refused"
    assert record.refusal is not None and record.refusal.category == "cyber"
    assert record.refusal.explanation == "I can't help with that."
    assert manager.messages == []  # later cells do not see the refused exchange
