"""The Anthropic client with the real SDK against the loopback stand-in: streaming, caching, faults.

The stand-in validates requests like the API, so every test that continues a conversation also proves
that what the client sends back (thinking blocks, citations, server tool blocks, tool results) is
accepted.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace
from typing import Any

import pytest

from qloop_kernel.conversation import ConversationManager
from qloop_kernel.loop import CancelToken, Limits, QueryLoop, TurnCancelled
from qloop_kernel.messages import (
    Completed,
    Failed,
    ModelRequest,
    Refused,
    TimedOut,
    ToolCallReady,
    Usage,
    UsageUpdate,
    api_ready,
)
from qloop_kernel.model import AnthropicModel, RetryPolicy
from qloop_kernel.notebook.commands import COMMANDS
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.pricing import (
    UnknownModelPrice,
    known_models,
    parse_price,
    price_for,
    prices_as_of,
    retirement,
)
from qloop_kernel.settings import DEFAULT_MODEL, Settings
from qloop_kernel.testing import (
    DropConnection,
    EarlyClose,
    Fault,
    RawReply,
    Reply,
    StandInAPI,
    StreamError,
    redacted_thinking,
    server_tool_use,
    spend_limit_reached,
    text,
    thinking,
    tool_use,
    web_search_result,
)
from qloop_kernel.tools.runtime import Tool, ToolRuntime

FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=5.0, read_timeout_s=5.0)
USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
LEGACY = "claude-sonnet-4-6"  # no thinking unless asked


OPEN: list[AnthropicModel] = []  # clients a test made; closed when it ends


@pytest.fixture
def api(monkeypatch):
    with StandInAPI(api_key="test-key") as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server
        while OPEN:
            OPEN.pop().close()


def client(retry: RetryPolicy = FAST, model: str = LEGACY, strict: bool = True) -> AnthropicModel:
    made = AnthropicModel(model, retry=retry, strict=strict)
    OPEN.append(made)
    return made


def request(deadline: float | None = None) -> ModelRequest:
    return ModelRequest(USER, [], "system prompt", 1024, deadline)


def complete(model: AnthropicModel, deadline: float | None = None):
    events = []
    response = model.complete(request(deadline), events.append, CancelToken())
    return response, events


def run_code(code: str) -> str:
    """Run code."""
    return f"ran {code}"


def runtime() -> ToolRuntime:
    return ToolRuntime.of([Tool.from_function(run_code)], AutoApprover())


def loop(model: str = LEGACY, strict: bool = True, **limits: Any) -> QueryLoop:
    chosen = client(model=model, strict=strict)
    return QueryLoop(chosen, runtime(), system="s", limits=Limits(**limits))


def sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def message_start(**usage: int) -> dict[str, Any]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "content": [],
               "model": LEGACY, "stop_reason": None, "stop_sequence": None}  # fmt: skip
    if usage:
        message["usage"] = usage
    return {"type": "message_start", "message": message}


def text_block_events(body: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": body}},
        {"type": "content_block_stop", "index": 0},
    ]


END = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
     "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]  # fmt: skip


# Streaming and what comes back -----------------------------------------------------------------


def test_streams_text_thinking_and_tool_calls(api: StandInAPI) -> None:
    call = tool_use("run_code", {"code": "x = 1"})
    api.set_script([Reply([thinking("hmm"), text("Let me run it."), call])])
    response, events = complete(client())
    assert response.stop_reason == "tool_use"
    assert [b["type"] for b in response.content] == ["thinking", "text", "tool_use"]
    assert response.content[2] == {"type": "tool_use", "id": call.id, "name": "run_code",
                                   "input": {"code": "x = 1"}, "caller": {"type": "direct"}}  # fmt: skip
    assert response.content[0]["signature"]  # kept as sent, so it can go back unchanged
    kinds = [e.kind for e in events]
    assert "thinking" in kinds and "text" in kinds and kinds.count("tool_call") == 1
    assert kinds[-1] == "usage" and events[-1].usage == response.usage
    assert api.requests[0].headers["authorization"] != "Bearer test-key"  # redacted in the log


def test_blocks_pass_through_with_every_field_and_go_back_accepted(api: StandInAPI) -> None:
    search = server_tool_use("web_search", {"query": "pandas 3"})
    found = web_search_result(search.id, [{"url": "https://example.org/p3", "title": "pandas 3"}])
    cite = {
        "type": "web_search_result_location",
        "url": "https://example.org/p3",
        "title": "pandas 3",
        "encrypted_index": "Eo8B",
        "cited_text": "pandas 3.0 is out",
    }
    first = Reply([redacted_thinking(), search, found, text("pandas 3 is out.", citations=[cite])])
    api.set_script([first, Reply("ok")])

    response, _ = complete(client())
    follow_up = [*USER, {"role": "assistant", "content": response.content},
                 {"role": "user", "content": [{"type": "text", "text": "thanks"}]}]  # fmt: skip
    client().complete(ModelRequest(follow_up, [], "s", 1024), lambda e: None, CancelToken())

    assert [b["type"] for b in response.content] == [
        "redacted_thinking", "server_tool_use", "web_search_tool_result", "text"
    ]  # fmt: skip
    assert response.content[3]["citations"] == [cite]
    assert response.content[2]["content"][0]["url"] == "https://example.org/p3"
    sent = api.requests[1].body["messages"][1]["content"]
    assert sent == response.content  # byte for byte, citations and signed data included
    assert api.requests[1].status == 200


def test_a_field_this_version_does_not_know_is_kept(api: StandInAPI) -> None:
    start = {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": "", "provenance": {"source": "x"}}}  # fmt: skip
    body = sse(message_start(input_tokens=3, output_tokens=1), start,
               *text_block_events("Hi")[1:], *END)  # fmt: skip
    api.set_script([RawReply(body)])

    response = client(strict=False).complete(request(), lambda e: None, CancelToken())

    assert response.content == [{"type": "text", "text": "Hi", "provenance": {"source": "x"}}]


def test_empty_text_blocks_are_never_sent_back(api: StandInAPI) -> None:
    # The API sends an empty text block before tool calls; it refuses one sent back (400).
    api.set_script([Reply([text(""), tool_use("run_code", {"code": "1"})]), Reply("done")])

    result = loop().run(USER)

    assert result.stop == Completed()
    assert result.messages[1]["content"][0] == {"type": "text", "text": ""}  # kept as received
    sent = api.requests[1].body["messages"][1]["content"]
    assert [b["type"] for b in sent] == ["tool_use"]


def test_api_ready_drops_empty_text_and_stray_breakpoints_only() -> None:
    signed = {"type": "thinking", "thinking": "", "signature": "sig"}
    history = [
        {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": [signed, {"type": "text", "text": ""},
                                          {"type": "tool_use", "id": "t", "name": "n", "input": [1]}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "e"}]},
        {"role": "assistant", "content": [{"type": "text", "text": ""}]},
    ]  # fmt: skip

    ready = api_ready(history)

    assert ready[0]["content"] == [{"type": "text", "text": "q"}]
    assert ready[1]["content"][0] is signed  # passed through untouched
    assert ready[1]["content"][1] == {"type": "tool_use", "id": "t", "name": "n", "input": {}}
    assert ready[2] is history[2]
    assert len(ready) == 3  # a message left without blocks is left out
    assert history[1]["content"][1] == {"type": "text", "text": ""}  # the input is not changed


def test_the_default_model_thinks_and_its_signed_blocks_go_back_unchanged(api: StandInAPI) -> None:
    assert DEFAULT_MODEL == "claude-sonnet-5-5"
    api.set_script([Reply([tool_use("run_code", {"code": "1"})]),
                    Reply([tool_use("run_code", {"code": "2"})]), Reply("done")])  # fmt: skip

    result = loop(model=DEFAULT_MODEL).run(USER)

    assert result.stop == Completed()
    assert [b["type"] for b in result.messages[1]["content"]] == ["thinking", "tool_use"]
    assert all(r.status == 200 for r in api.requests)  # the stand-in checked every signature


def test_cache_breakpoints_make_later_turns_read_from_cache(api: StandInAPI) -> None:
    def long_run(code: str) -> str:
        """Run code."""
        return "ok " + "x" * 2000

    tools = ToolRuntime.of([Tool.from_function(long_run)], AutoApprover())
    api.set_script([Reply([tool_use("long_run", {"code": str(i)})]) for i in range(4)]
                   + [Reply([text("done")])])  # fmt: skip
    result = QueryLoop(client(model=DEFAULT_MODEL), tools, system="s" * 4000).run(USER)
    assert result.stop == Completed()
    body = api.requests[1].body
    assert "cache_control" not in body["tools"][-1]  # about 60 tokens: never cached on its own
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # tools + system: 1,060
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    for recorded in api.requests[1:]:
        usage = recorded.usage
        total = (usage["input_tokens"] + usage["cache_read_input_tokens"]
                 + usage["cache_creation_input_tokens"])  # fmt: skip
        assert usage["cache_read_input_tokens"] / total > 0.5


# Refusals --------------------------------------------------------------------------------------


def test_a_refused_exchange_leaves_the_conversation_and_keeps_its_explanation(api) -> None:
    details = {"category": "cyber", "explanation": "This request looks like malware work."}
    refusal = Reply([text("I'll start"), tool_use("run_code", {"code": "x"})],
                    stop_reason="refusal", stop_details=details)  # fmt: skip
    api.set_script([refusal, Reply("Sure: 4.")])
    history = [*USER, {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}]
    prompt = {"role": "user", "content": [{"type": "text", "text": "write a worm"}]}

    refused = loop().run([*history, prompt])
    later = loop().run([*refused.messages, {"role": "user", "content": "2+2?"}])

    assert refused.stop == Refused("cyber", "This request looks like malware work.")
    assert refused.messages == history  # the prompt and the partial answer are gone
    assert refused.final_text == "This request looks like malware work."
    assert refused.outcomes == []  # the refused turn's tool call was not run
    assert later.stop == Completed()
    assert "worm" not in json.dumps(api.requests[1].body["messages"])


# Malformed answers end the turn cleanly --------------------------------------------------------


MALFORMED = [
    ("no_usage", RawReply(sse(message_start(), *text_block_events("Hi"), *END)),
     "AttributeError"),
    ("invalid_json", RawReply("event: message_start\ndata: {not json\n\n"), "JSONDecodeError"),
    ("html_page", RawReply("<html><body>Bad gateway</body></html>", content_type="text/html"),
     "the API's response could not be read"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("reply", "words"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_a_malformed_answer_is_a_one_line_error_stop(api, reply, words) -> None:
    api.set_script([reply])

    result = loop(strict=False).run(USER)  # as in a notebook: the SDK's lenient parsing

    assert isinstance(result.stop, Failed)
    assert result.stop.message.startswith("the API's response could not be read: ")
    assert words in result.stop.message and "\n" not in result.stop.message
    assert len(api.requests) == 1  # not retried


@pytest.mark.parametrize("value", [[1, 2], "print(1)", 5], ids=["list", "string", "number"])
def test_a_tool_input_that_is_not_an_object_is_an_error_result(api, value) -> None:
    api.set_script([Reply([tool_use("run_code", value)]), Reply("I will use an object.")])
    ran: list[str] = []

    def counted(code: str) -> str:
        """Run code."""
        ran.append(code)
        return "ok"

    tools = ToolRuntime.of([Tool.from_function(counted, name="run_code")], AutoApprover())
    result = QueryLoop(client(), tools, system="s").run(USER)

    assert result.stop == Completed()
    assert ran == []
    (outcome,) = result.outcomes
    assert outcome.is_error and "not an object" in outcome.text
    assert json.dumps(value) in outcome.text
    sent = api.requests[1].body["messages"]
    assert sent[1]["content"][0]["input"] == {}  # the API accepts only an object back
    assert sent[2]["content"][0]["is_error"] is True


# Retries ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fault",
    [
        Fault(429, retry_after=0.05),
        Fault(500),
        Fault(529),
    ],
    ids=["429", "500", "529"],
)
def test_transient_statuses_are_retried(api: StandInAPI, fault: Fault) -> None:
    api.set_script([fault, Reply([text("recovered")])])
    response, events = complete(client())
    assert response.content == [{"type": "text", "text": "recovered"}]
    assert len(api.requests) == 2
    assert [e.kind for e in events][0] == "retry"


@pytest.mark.parametrize(
    "broken",
    [
        Reply([text("partial answer " * 20)], stream_fault=StreamError(after_events=3)),
        Reply([text("partial answer " * 20)], stream_fault=DropConnection(after_events=3)),
        Reply([text("partial answer " * 20)], stream_fault=EarlyClose(after_events=3)),
    ],
    ids=["error-event", "dropped-connection", "early-close"],
)
def test_broken_streams_are_retried(api: StandInAPI, broken: Reply) -> None:
    api.set_script([broken, Reply([text("whole answer")])])
    response, _ = complete(client())
    assert response.content == [{"type": "text", "text": "whole answer"}]
    assert response.stop_reason == "end_turn"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (
            Fault(401, message="invalid x-api-key"),
            "API error 401 (authentication_error): invalid x-api-key — the API key was refused: "
            "check ANTHROPIC_API_KEY in the kernel's environment, or type a key with `%agent key`",
        ),
        (
            Fault(400, message="messages: bad"),
            "API error 400 (invalid_request_error): messages: bad",
        ),
        (
            Fault(529, headers={"x-should-retry": "false"}),
            "API error 529 (overloaded_error): Overloaded (the API said not to retry)",
        ),
    ],
    ids=["401", "400", "529-should-not-retry"],
)
def test_permanent_errors_end_the_turn_with_the_api_message(api, fault, words) -> None:
    api.set_script([fault, Reply("unused")])
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert result.stop == Failed(words)
    assert len(api.requests) == 1


def test_x_should_retry_true_retries_what_would_not_be(api: StandInAPI) -> None:
    api.set_script([Fault(400, headers={"x-should-retry": "true"}), Reply("second try")])
    response, events = complete(client())
    assert response.content == [{"type": "text", "text": "second try"}]
    assert [e.kind for e in events].count("retry") == 1


def test_a_spend_limit_is_not_retried_and_is_named(api: StandInAPI) -> None:
    api.set_script([spend_limit_reached(), Reply("unused")])
    result = loop().run(USER)
    assert isinstance(result.stop, Failed)
    assert result.stop.message.startswith("API error 429 (rate_limit_error): ")
    assert result.stop.message.endswith("the spend limit is reached; retrying cannot help")
    assert len(api.requests) == 1


def test_an_unknown_model_says_how_to_fix_it(api: StandInAPI) -> None:
    api.set_script([Reply("unused")])
    result = loop(model="claude-sonnet-9").run(USER)
    assert result.stop == Failed(
        "model claude-sonnet-9 not found: check --model; `%agent models` lists the known ones"
    )


def test_a_retired_model_is_refused_before_any_request(api: StandInAPI) -> None:
    result = loop(model="claude-sonnet-4-5-20250929").run(USER)
    assert result.stop == Failed(
        "model claude-sonnet-4-5-20250929 was retired on 2026-11-30; use claude-sonnet-5-5 "
        "instead (`%agent models` lists the known ones)"
    )
    assert api.requests == []


def test_retries_are_bounded(api: StandInAPI) -> None:
    api.set_script([Fault(529)] * 5)
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert isinstance(result.stop, Failed) and "gave up after 3 attempts" in result.stop.message
    assert len(api.requests) == 3


def test_retry_after_longer_than_the_time_left_is_not_waited_for(api: StandInAPI) -> None:
    api.set_script([Fault(429, retry_after=4), Reply([text("late")])])
    started = time.monotonic()
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s",
                       limits=Limits(timeout_s=2)).run(USER)  # fmt: skip
    assert isinstance(result.stop, Failed)
    assert (
        "the API asked to wait 4.0 s, more than the time left for this turn" in result.stop.message
    )
    assert result.stop.message.count("rate limit") == 1
    assert time.monotonic() - started < 2


def test_retry_after_longer_than_the_cap_names_the_cap(api: StandInAPI) -> None:
    api.set_script([Fault(429, retry_after=60), Reply([text("late")])])
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert isinstance(result.stop, Failed)
    assert result.stop.message.endswith(
        "rate limit; the API asked to wait 60.0 s, longer than the 5 s this client waits "
        "between attempts"
    )
    assert "time left" not in result.stop.message


def test_a_stream_slower_than_the_timeout_ends_as_timeout(api: StandInAPI) -> None:
    api.set_script([Reply([text("slow " * 100)], event_delay=0.1)])
    started = time.monotonic()
    result = QueryLoop(client(), ToolRuntime.of([], AutoApprover()), system="s",
                       limits=Limits(timeout_s=1.0)).run(USER)  # fmt: skip
    assert result.stop == TimedOut(1.0)
    assert time.monotonic() - started < 3


def test_cancel_closes_the_stream(api: StandInAPI) -> None:
    api.set_script([Reply([text("slow " * 100)], event_delay=0.05)])
    cancel = CancelToken()
    seen = []

    def on_event(event) -> None:
        seen.append(event)
        if len(seen) == 3:
            cancel.cancel()

    with pytest.raises(TurnCancelled):
        client().complete(request(), on_event, cancel)


def test_usage_and_tool_events_are_typed(api: StandInAPI) -> None:
    api.set_script([Reply([tool_use("run_code", {"code": "1"})])])
    _, events = complete(client())
    assert [type(e) for e in events] == [ToolCallReady, UsageUpdate]


# Models and prices -------------------------------------------------------------------------------


def test_the_price_table_has_the_current_lineup_and_the_available_legacy_models() -> None:
    table = {m.id: m for m in known_models()}
    assert prices_as_of() == "2026-12-02"
    assert [m for m in table if table[m].status == "active"] == [
        "claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"
    ]  # fmt: skip
    assert {"claude-opus-5", "claude-sonnet-5", "claude-opus-4-8", "claude-sonnet-4-6",
            "claude-haiku-4-5"} <= set(table)  # fmt: skip
    opus = price_for("claude-opus-5-5")
    assert (opus.input, opus.output, opus.cache_write, opus.cache_write_1h, opus.cache_read) == (
        4.0, 20.0, 5.0, 8.0, 0.2
    )  # fmt: skip
    assert price_for("claude-fable-5-1").cache_read == 0.25
    assert (price_for("claude-sonnet-5-5").input, price_for("claude-sonnet-5-5").output) == (
        2.0,
        10.0,
    )
    assert price_for("claude-haiku-4-5-20251001").output == 5.0  # a dated id falls back


def test_a_prompt_length_tier_prices_every_token_of_a_long_request() -> None:
    haiku = price_for("claude-haiku-5-5")
    short = Usage(input_tokens=50_000, output_tokens=1_000, cache_read_input_tokens=40_000)
    long = Usage(input_tokens=50_000, output_tokens=1_000, cache_read_input_tokens=60_000)

    assert haiku.cost(short) == pytest.approx((50_000 * 0.1 + 1_000 * 0.5 + 40_000 * 0.01) / 1e6)
    assert haiku.cost(long) == pytest.approx((50_000 * 0.5 + 1_000 * 2.5 + 60_000 * 0.05) / 1e6)


def test_a_retired_model_has_no_price_and_names_its_replacement() -> None:
    assert retirement("claude-sonnet-5-5") is None
    with pytest.raises(UnknownModelPrice, match="retired on 2026-11-30; use claude-sonnet-5-5"):
        price_for("claude-sonnet-4-5")


def test_cache_prices_follow_the_model_familys_published_ratios() -> None:
    assert parse_price("4, 20", model="claude-opus-5-5").cache_read == pytest.approx(0.2)
    newer_opus = parse_price("3 15", model="claude-opus-6")  # unknown: its family's newest model
    assert (newer_opus.cache_write, newer_opus.cache_read) == pytest.approx((3.75, 0.15))
    other = parse_price("3 15")  # no family: the usual 1.25x and 0.1x
    assert (other.cache_write, other.cache_read) == pytest.approx((3.75, 0.3))
    given = parse_price("3 15 4 0.2")
    assert (given.cache_write, given.cache_read) == (4.0, 0.2)
    with pytest.raises(ValueError, match="two numbers"):
        parse_price("3 15 4")


def agent_magics(model: str) -> Any:
    """What the sub-commands use of the magics object: the agent's session manager."""
    return SimpleNamespace(
        agent=SimpleNamespace(manager=ConversationManager(settings=Settings(model=model)))
    )


def test_agent_models_lists_ids_prices_and_status(capsys) -> None:
    COMMANDS["models"].run(agent_magics(DEFAULT_MODEL), [])
    out = capsys.readouterr().out

    assert "* claude-sonnet-5-5" in out and "active" in out
    assert "claude-opus-5-5" in out and "$4 in / $20 out, cache write $5, read $0.2" in out
    assert "prompts over 100,000 tokens: $0.5 in / $2.5 out" in out
    assert "claude-sonnet-4-5 (use claude-sonnet-5-5)" in out


def test_agent_price_takes_optional_cache_prices(capsys) -> None:
    magics = agent_magics("claude-opus-6")
    COMMANDS["price"].run(magics, ["3", "15"])
    ratios = magics.agent.manager.settings.resolved_price("claude-opus-6")
    COMMANDS["price"].run(magics, ["3", "15", "4", "0.2"])
    given = magics.agent.manager.settings.resolved_price("claude-opus-6")
    out = capsys.readouterr().out

    assert (ratios.cache_write, ratios.cache_read) == pytest.approx((3.75, 0.15))
    assert (given.cache_write, given.cache_read) == (4.0, 0.2)
    assert magics.agent.manager.settings.price == (3.0, 15.0, 4.0, 0.2)
    assert "cache prices from the claude-opus-6 ratios" in out.splitlines()[0]
