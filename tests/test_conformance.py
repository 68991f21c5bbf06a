"""Conformance: the API's documented shapes, replayed byte for byte through the real client and loop.

Each fixture in tests/fixtures/api/ is written in a shape the API docs show (the section is cited in the
fixture): example streams (``.sse``) and error answers (``.json``). The stand-in sends it verbatim, the
real SDK parses it, ``AnthropicModel`` and ``QueryLoop`` run the turn, and the stand-in (which checks
requests like the API) accepts whatever the client sends next. A second part checks that
``ScriptedModel`` forwards the same kinds of events as ``AnthropicModel`` for the same replies.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Any

import pytest

from qloop_kernel.loop import CancelToken, QueryLoop, TurnObserver
from qloop_kernel.messages import (
    Completed,
    Failed,
    ModelRequest,
    Refused,
    RetryNotice,
    TurnResult,
)
from qloop_kernel.model import AnthropicModel, RetryPolicy
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.testing import RawReply, Reply, StandInAPI, text, thinking, tool_use
from qloop_kernel.testing.script import ScriptItem
from qloop_kernel.testing.scripted import ScriptedModel, respond
from qloop_kernel.tools.runtime import Tool, ToolRuntime

FIXTURES = Path(__file__).parent / "fixtures" / "api"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=5.0, read_timeout_s=5.0)
MODEL = "claude-sonnet-5-5"
USER = [{"role": "user", "content": [{"type": "text", "text": "What is the weather?"}]}]


def served(name: str) -> RawReply:
    """The fixture as the stand-in sends it: the stream as written, or the error's status and body."""
    path = FIXTURES / name
    if path.suffix == ".sse":
        return RawReply(path.read_text(encoding="utf-8"))
    data = json.loads(path.read_text(encoding="utf-8"))
    return RawReply(json.dumps(data["body"]), status=data["status"],
                    content_type="application/json", headers=data["headers"])  # fmt: skip


def get_weather(location: str, unit: str = "celsius") -> str:
    """Get the current weather in a location.

    Args:
        location: The city and state, e.g. San Francisco, CA.
        unit: celsius or fahrenheit.
    """
    return f"18 degrees {unit} in {location}"


OPEN: list[AnthropicModel] = []  # clients a test made; closed when it ends


@pytest.fixture
def api(monkeypatch):
    with StandInAPI() as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server
        while OPEN:
            OPEN.pop().close()


def client(model: str = MODEL) -> AnthropicModel:
    made = AnthropicModel(model, retry=FAST)
    OPEN.append(made)
    return made


@dataclass
class Turn:
    result: TurnResult
    api: StandInAPI
    events: list[Any]

    def sent(self, number: int) -> list[dict[str, Any]]:
        """The messages of request ``number`` (0-based) as the stand-in received them."""
        return self.api.requests[number].body["messages"]


class Recorder(TurnObserver):
    def __init__(self) -> None:
        self.events: list[Any] = []

    def on_event(self, event: Any) -> None:
        self.events.append(event)


def run(api: StandInAPI, *script: ScriptItem, messages: list[dict[str, Any]] = USER) -> Turn:
    api.set_script(script)
    recorder = Recorder()
    tools = ToolRuntime.of([Tool.from_function(get_weather)], AutoApprover())
    result = QueryLoop(client(), tools, system="Be brief.",
                       observer=recorder).run(messages)  # fmt: skip
    return Turn(result, api, recorder.events)


def accepted(turn: Turn) -> None:
    """Every request after the first was accepted: what the client sent back is valid."""
    assert [r.status for r in turn.api.requests[1:]] == [200] * (len(turn.api.requests) - 1)


# Streams ---------------------------------------------------------------------------------------


def check_text(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    assert turn.result.final_text == "Hello!"
    assert turn.result.usage.output_tokens == 15


def check_tool_use(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    (outcome,) = turn.result.outcomes
    assert outcome.input_as_run == {"location": "San Francisco, CA", "unit": "fahrenheit"}
    call = turn.sent(1)[1]["content"][1]
    assert call["id"] == "toolu_01T1x1fJ34qAmk2tNTrN7Up6" and call["caller"] == {"type": "direct"}
    assert turn.sent(1)[2]["content"][0]["tool_use_id"] == call["id"]
    accepted(turn)


def check_thinking_tool_use(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    assert turn.sent(1)[1]["content"][0] == {
        "type": "thinking",
        "thinking": "I need the current weather, so I will call the tool.\n\nThe user asked in Celsius.",
        "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
    }  # sent back byte for byte, as the API requires
    accepted(turn)


def check_redacted_thinking(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    block = turn.result.messages[1]["content"][0]
    assert block["type"] == "redacted_thinking" and block["data"].startswith("EmwKAhgB")
    later = run(turn.api, Reply("And more."),
                messages=[*turn.result.messages, {"role": "user", "content": "more"}])  # fmt: skip
    assert later.result.stop == Completed()
    assert later.api.requests[-1].body["messages"][1]["content"][0] == block
    assert later.api.requests[-1].status == 200


def check_web_search(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    content = turn.result.messages[1]["content"]
    assert [b["type"] for b in content] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
    ]
    assert content[1]["input"] == {"query": "latest quantum computing breakthroughs 2026"}
    assert content[2]["content"][0]["url"] == "https://example.com/quantum"
    assert content[3]["citations"][0]["type"] == "web_search_result_location"
    later = run(turn.api, Reply("Anything else?"),
                messages=[*turn.result.messages, {"role": "user", "content": "thanks"}])  # fmt: skip
    sent = later.api.requests[-1].body["messages"][1]["content"]
    assert sent == content  # citations and server blocks go back whole
    assert later.api.requests[-1].status == 200


def check_citations(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    assert turn.result.final_text == "According to the document, the grass is green"
    cited = turn.result.messages[1]["content"][1]["citations"]
    assert cited == [{"type": "char_location", "cited_text": "The grass is green.",
                      "document_index": 0, "document_title": "Example Document",
                      "start_char_index": 0, "end_char_index": 20}]  # fmt: skip


def check_empty_text_before_tool(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    assert [b["type"] for b in turn.sent(1)[1]["content"]] == ["tool_use"]
    accepted(turn)


def check_refusal(turn: Turn) -> None:
    explanation = "This request asks for working malware, which I can't help with."
    assert turn.result.stop == Refused("cyber", explanation)
    assert turn.result.messages == []  # the refused exchange leaves the conversation
    assert turn.result.final_text == explanation


def check_error_event(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    (notice,) = [e for e in turn.events if isinstance(e, RetryNotice)]
    assert notice.reason == "the stream reported an error (overloaded_error): Overloaded"


def check_unknown_event(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    assert turn.result.final_text == "Still fine."


def check_pause_turn(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    last = turn.sent(1)[-1]
    assert last["role"] == "assistant" and last["content"][0]["type"] == "server_tool_use"
    accepted(turn)


def check_tool_input_array(turn: Turn) -> None:
    assert turn.result.stop == Completed()
    (outcome,) = turn.result.outcomes
    assert outcome.is_error and "[1, 2] (a JSON array), not an object" in outcome.text
    assert turn.sent(1)[1]["content"][0]["input"] == {}
    accepted(turn)


def check_docs_thinking_abbreviated(turn: Turn) -> None:
    stop = turn.result.stop
    assert isinstance(stop, Failed) and "\n" not in stop.message
    assert stop.message.startswith("the API's response could not be read: AttributeError")


def check_docs_web_search_abbreviated(turn: Turn) -> None:
    stop = turn.result.stop  # the message has no content list: the SDK's accumulator fails
    assert isinstance(stop, Failed) and "\n" not in stop.message
    assert stop.message.startswith("the API's response could not be read: AttributeError")
    assert len(turn.api.requests) == 1


RECOVERED = Reply("recovered")
STREAMS: list[tuple[str, tuple[ScriptItem, ...], Callable[[Turn], None]]] = [
    ("stream_text.sse", (), check_text),
    ("stream_tool_use.sse", (Reply("It is sunny."),), check_tool_use),
    ("stream_thinking_tool_use.sse", (Reply("18 °C in Paris."),), check_thinking_tool_use),
    ("stream_redacted_thinking.sse", (), check_redacted_thinking),
    ("stream_web_search.sse", (), check_web_search),
    ("stream_citations.sse", (), check_citations),
    ("stream_empty_text_before_tool.sse", (Reply("Cold."),), check_empty_text_before_tool),
    ("stream_refusal.sse", (), check_refusal),
    ("stream_error_event.sse", (RECOVERED,), check_error_event),
    ("stream_unknown_event.sse", (), check_unknown_event),
    ("stream_pause_turn.sse", (Reply("Found it."),), check_pause_turn),
    ("stream_tool_input_array.sse", (Reply("I will send an object."),), check_tool_input_array),
    ("stream_docs_thinking_abbreviated.sse", (), check_docs_thinking_abbreviated),
    ("stream_docs_web_search_abbreviated.sse", (), check_docs_web_search_abbreviated),
]


@pytest.mark.parametrize(("fixture", "then", "check"), STREAMS, ids=[s[0] for s in STREAMS])
def test_documented_streams(
    api: StandInAPI, fixture: str, then: tuple[ScriptItem, ...], check
) -> None:
    check(run(api, served(fixture), *then))


# Error answers ---------------------------------------------------------------------------------

HINT = "check --model; `%agent models` lists the known ones"
ERRORS = [
    ("error_400_invalid_request.json", None,
     "API error 400 (invalid_request_error): messages: text content blocks must be non-empty"),
    ("error_401_authentication.json", None, "API error 401 (authentication_error): invalid x-api-key"),
    ("error_402_billing.json", None, "API error 402 (billing_error): Your credit balance is too low"),
    ("error_403_permission.json", None, "API error 403 (permission_error): Your API key does not"),
    ("error_404_model.json", None, f"model {MODEL} not found: {HINT}"),
    ("error_413_too_large.json", None, "API error 413 (request_too_large): Request exceeds"),
    ("error_429_rate_limit.json", "API error 429 (rate_limit_error): This request would exceed", None),
    ("error_429_spend_limit.json", None, "the spend limit is reached; retrying cannot help"),
    ("error_500_api.json", "API error 500 (api_error): Internal server error", None),
    ("error_529_overloaded.json", "API error 529 (overloaded_error): Overloaded", None),
    ("error_529_should_not_retry.json", None, "(the API said not to retry)"),
]  # fmt: skip


@pytest.mark.parametrize(("fixture", "retried", "fatal"), ERRORS, ids=[e[0] for e in ERRORS])
def test_documented_errors(api: StandInAPI, fixture: str, retried: str | None, fatal: str | None):
    turn = run(api, served(fixture), RECOVERED)
    notices = [e for e in turn.events if isinstance(e, RetryNotice)]

    if retried is not None:
        assert turn.result.stop == Completed()
        assert [n.reason[: len(retried)] for n in notices] == [retried]
    else:
        assert isinstance(turn.result.stop, Failed) and notices == []
        assert fatal in turn.result.stop.message and "\n" not in turn.result.stop.message
        assert len(api.requests) == 1  # not retried


def test_every_fixture_is_replayed_and_cites_its_source() -> None:
    names = {p.name for p in FIXTURES.iterdir()}
    assert names == {s[0] for s in STREAMS} | {e[0] for e in ERRORS}
    for path in FIXTURES.iterdir():
        head = path.read_text(encoding="utf-8")
        assert head.startswith(": shape: ") if path.suffix == ".sse" else '"source"' in head, path


# ScriptedModel forwards what AnthropicModel forwards -------------------------------------------

REPLIES = [
    [text("Hello there, this is a longer answer.")],
    [thinking("Let me think about it for a while."), text("Done.")],
    [text(""), tool_use("get_weather", {"location": "Oslo"})],
    [tool_use("get_weather", [1, 2])],
    [thinking(""), tool_use("get_weather", {"location": "Rome"}), tool_use("get_weather", {"location": "Bern"})],
]  # fmt: skip


def kinds(events: list[Any]) -> list[str]:
    """Event kinds in order, a run of deltas of one block counted once."""
    return [kind for kind, _ in groupby(e.kind for e in events)]


@pytest.mark.parametrize(
    "blocks", REPLIES, ids=["text", "thinking", "empty_text_tool", "bad_input", "two_tools"]
)
def test_scripted_model_emits_the_event_types_of_the_anthropic_client(api: StandInAPI, blocks):
    api.set_script([Reply(blocks)])
    request = ModelRequest(USER, [], "s", 256)
    real: list[Any] = []
    response = client("claude-sonnet-4-6").complete(request, real.append, CancelToken())
    scripted: list[Any] = []
    ScriptedModel([respond(*response.content)]).complete(request, scripted.append, CancelToken())

    assert kinds(scripted) == kinds(real)
    assert [type(e) for e in scripted if e.kind == "tool_call"] == [
        type(e) for e in real if e.kind == "tool_call"
    ]
    assert [e.input for e in scripted if e.kind == "tool_call"] == [
        e.input for e in real if e.kind == "tool_call"
    ]
