"""The Messages API stand-in, exercised with the real anthropic SDK (strict response validation)."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from qloop_kernel.testing import (
    DropConnection,
    EarlyClose,
    Fault,
    RecordedRequest,
    Reply,
    ScriptError,
    StandInAPI,
    StreamError,
    estimate_tokens,
    item_from_json,
    items_to_json,
    load_script,
    parse_script,
    stream_event_types,
    text,
    thinking,
    tool_use,
)

MODEL = "claude-test-model"
EPHEMERAL = {"type": "ephemeral"}
HELLO = [{"role": "user", "content": "Hello"}]
PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(scope="module", autouse=True)
def loopback_only() -> Iterator[None]:
    """SDK clients of this module talk to 127.0.0.1 directly, whatever proxies the host sets."""
    with pytest.MonkeyPatch.context() as patch:
        for name in PROXY_VARIABLES:
            patch.delenv(name, raising=False)
        patch.setenv("NO_PROXY", "127.0.0.1,localhost")
        patch.setenv("no_proxy", "127.0.0.1,localhost")
        yield


@pytest.fixture(scope="module")
def shared_standin() -> Iterator[StandInAPI]:
    with StandInAPI() as server:
        yield server


@pytest.fixture
def standin(shared_standin: StandInAPI) -> StandInAPI:
    shared_standin.reset()
    return shared_standin


def make_client(server: StandInAPI, **options: Any) -> anthropic.Anthropic:
    settings: dict[str, Any] = {"api_key": "test", "max_retries": 0, **options}
    return anthropic.Anthropic(
        base_url=server.base_url, _strict_response_validation=True, **settings
    )


@pytest.fixture(scope="module")
def client(shared_standin: StandInAPI) -> Iterator[anthropic.Anthropic]:
    with make_client(shared_standin) as sdk:
        yield sdk


def stream_final(sdk: anthropic.Anthropic, **request: Any) -> anthropic.types.Message:
    with sdk.messages.stream(
        **{"model": MODEL, "max_tokens": 256, "messages": HELLO, **request}
    ) as s:
        return s.get_final_message()


def create(sdk: anthropic.Anthropic, **request: Any) -> anthropic.types.Message:
    return sdk.messages.create(**{"model": MODEL, "max_tokens": 256, "messages": HELLO, **request})


def raw_post(server: StandInAPI, path: str, body: bytes, **headers: str) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def content_json(message: anthropic.types.Message) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in message.content]


# Replies ---------------------------------------------------------------------------------------

MIXED = Reply(
    [
        thinking("The user greets me; I should run a little code first."),
        text("Let me compute that for you, step by step."),
        tool_use("run_code", {"code": "import math\nresult = math.sqrt(2) * 10\nprint(result)"}),
    ]
)


def test_streamed_reply_accumulates_to_the_script(standin, client):
    standin.set_script([MIXED])
    partial_json: list[str] = []
    with client.messages.stream(model=MODEL, max_tokens=256, messages=HELLO) as stream:
        for event in stream:
            if event.type == "input_json":
                partial_json.append(event.partial_json)
        final = stream.get_final_message()

    assert content_json(final) == [block.to_json() for block in MIXED.blocks]
    assert final.stop_reason == "tool_use"
    assert final.model == MODEL
    assert final.id.startswith("msg_")
    assert final.content[2].id.startswith("toolu_")
    assert len(partial_json) > 2
    assert json.loads("".join(partial_json)) == MIXED.blocks[2].input
    assert final.usage == anthropic.types.Usage.model_validate(standin.requests[0].usage)


def test_non_streaming_reply_is_a_full_message(standin, client):
    standin.set_script([MIXED, Reply("Hi!", model="claude-other")])

    first = create(client)
    second = create(client)

    assert content_json(first) == [block.to_json() for block in MIXED.blocks]
    assert first.stop_reason == "tool_use"
    assert (second.content[0].text, second.stop_reason, second.model) == (
        "Hi!",
        "end_turn",
        "claude-other",
    )
    assert [request.stream for request in standin.requests] == [False, False]


@pytest.mark.parametrize(
    ("reply", "stop_reason", "stop_sequence"),
    [
        (Reply("cut", stop_reason="max_tokens"), "max_tokens", None),
        (Reply("wait", stop_reason="pause_turn"), "pause_turn", None),
        (
            Reply("full", stop_reason="model_context_window_exceeded"),
            "model_context_window_exceeded",
            None,
        ),
        (Reply("a b", stop_sequence="END"), "stop_sequence", "END"),
        (Reply([]), "end_turn", None),
    ],
)
@pytest.mark.parametrize("streaming", [True, False])
def test_stop_reasons(standin, client, reply, stop_reason, stop_sequence, streaming):
    standin.set_script([reply])

    message = stream_final(client) if streaming else create(client)

    assert (message.stop_reason, message.stop_sequence) == (stop_reason, stop_sequence)
    assert message.usage.output_tokens >= 1


@pytest.mark.parametrize("streaming", [True, False])
def test_refusal_carries_stop_details(standin, client, streaming):
    standin.set_script([Reply("I can't help with that.", stop_reason="refusal")])

    message = stream_final(client) if streaming else create(client)

    assert message.stop_reason == "refusal"
    assert message.stop_details is not None and message.stop_details.type == "refusal"


def test_usage_overrides_replace_computed_counters(standin, client):
    standin.set_script([Reply("ok", usage={"output_tokens": 4096, "input_tokens": 10})])

    usage = stream_final(client).usage

    assert (usage.output_tokens, usage.input_tokens) == (4096, 10)


def test_count_tokens_matches_the_input_of_a_message(standin, client):
    standin.set_script([Reply("ok")])
    request = {
        "system": "You are terse.",
        "tools": [{"name": "run_code", "input_schema": {"type": "object"}}],
        "messages": [{"role": "user", "content": "What is 2+2? " * 10}],
    }

    counted = client.messages.count_tokens(model=MODEL, **request)
    usage = create(client, **request).usage

    assert counted.input_tokens == usage.input_tokens > 0
    assert standin.requests[0].path == "/v1/messages/count_tokens"
    assert standin.remaining == 0


def test_wire_format_is_chunked_sse_with_ping(standin):
    reply = Reply([text("Hello, world")])
    standin.set_script([reply])
    body = json.dumps({"model": MODEL, "max_tokens": 8, "messages": HELLO, "stream": True})

    connection = http.client.HTTPConnection("127.0.0.1", standin.port, timeout=5)
    connection.request("POST", "/v1/messages", body=body)
    response = connection.getresponse()
    raw = response.read().decode()
    connection.close()

    assert response.getheader("content-type") == "text/event-stream; charset=utf-8"
    assert response.getheader("transfer-encoding") == "chunked"
    assert response.getheader("request-id").startswith("req_")
    names = [line.removeprefix("event: ") for line in raw.splitlines() if line.startswith("event:")]
    assert names == stream_event_types(reply)
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]


# Faults ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 529])
def test_transient_status_is_retried_after_retry_after(standin, status):
    standin.set_script([Fault(status, retry_after=0.2), Reply("recovered")])

    with make_client(standin, max_retries=2) as sdk:
        started = time.monotonic()
        message = stream_final(sdk)
        elapsed = time.monotonic() - started

    assert message.content[0].text == "recovered"
    assert [request.status for request in standin.requests] == [status, 200]
    assert elapsed >= 0.2


@pytest.mark.parametrize(
    ("fault", "error_class", "error_type", "message"),
    [
        (Fault(429), anthropic.RateLimitError, "rate_limit_error", "rate limit"),
        (Fault(500), anthropic.InternalServerError, "api_error", "Internal server error"),
        (Fault(529), anthropic.OverloadedError, "overloaded_error", "Overloaded"),
        (Fault(401), anthropic.AuthenticationError, "authentication_error", "invalid x-api-key"),
        (
            Fault(400, message="messages.1.content: tool_use ids must be unique"),
            anthropic.BadRequestError,
            "invalid_request_error",
            "tool_use ids must be unique",
        ),
    ],
)
def test_status_fault_raises_the_sdk_error(
    standin, client, fault, error_class, error_type, message
):
    standin.set_script([fault])

    with pytest.raises(error_class) as raised:
        stream_final(client)

    error = raised.value
    assert type(error) is error_class
    assert (error.status_code, error.type) == (fault.status, error_type)
    assert message in error.message
    assert error.request_id is not None and error.request_id.startswith("req_")
    assert standin.requests[0].error == fault.message


def test_fault_headers_reach_the_client(standin, client):
    standin.set_script([Fault(529, headers={"x-should-retry": "false"}), Reply("unused")])

    with make_client(standin, max_retries=3) as sdk, pytest.raises(anthropic.OverloadedError):
        stream_final(sdk)

    assert len(standin.requests) == 1
    assert standin.remaining == 1


def test_mid_stream_error_event_is_an_unretried_status_error(standin):
    standin.set_script([Reply("partial answer", stream_fault=StreamError(4)), Reply("unused")])

    with (
        make_client(standin, max_retries=2) as sdk,
        pytest.raises(anthropic.APIStatusError) as raised,
    ):
        stream_final(sdk)

    error = raised.value
    assert type(error) is anthropic.APIStatusError
    assert (error.status_code, error.type) == (200, "overloaded_error")
    assert len(standin.requests) == 1
    assert standin.requests[0].error == "Overloaded"


def test_dropped_stream_raises_a_transport_error_without_retry(standin):
    standin.set_script([Reply("partial answer", stream_fault=DropConnection(4)), Reply("unused")])

    with make_client(standin, max_retries=2) as sdk, pytest.raises(httpx2.TransportError) as raised:
        stream_final(sdk)

    assert isinstance(raised.value, httpx2.RemoteProtocolError)
    assert len(standin.requests) == 1


def test_dropped_non_streaming_request_is_retried_as_a_connection_error(standin):
    standin.set_script([Reply("lost", stream_fault=DropConnection(0)), Reply("second try")])

    with make_client(standin, max_retries=1) as sdk:
        message = create(sdk)

    assert message.content[0].text == "second try"
    assert [request.status for request in standin.requests] == [None, 200]


def test_dropped_non_streaming_request_without_retries(standin, client):
    standin.set_script([Reply("lost", stream_fault=DropConnection(0))])

    with pytest.raises(anthropic.APIConnectionError):
        create(client)


def test_stream_error_on_non_streaming_request_is_an_http_error(standin, client):
    standin.set_script([Reply("x", stream_fault=StreamError(2, "rate_limit_error", "slow down"))])

    with pytest.raises(anthropic.RateLimitError, match="slow down"):
        create(client)


def test_early_close_before_message_delta_leaves_stop_reason_none(standin, client):
    reply = Reply("Hello there, this is a long answer", stream_fault=EarlyClose(4))
    standin.set_script([reply])

    message = stream_final(client)

    assert message.stop_reason is None
    assert message.content[0].text == "Hello there, thi"
    assert len(standin.requests) == 1


def test_early_close_after_message_delta_keeps_its_stop_reason(standin, client):
    names = stream_event_types(Reply("Done."))
    standin.set_script([Reply("Done.", stream_fault=EarlyClose(names.index("message_stop")))])

    message = stream_final(client)

    assert (message.stop_reason, message.content[0].text) == ("end_turn", "Done.")


def test_early_close_needs_a_streaming_request(standin, client):
    standin.set_script([Reply("x", stream_fault=EarlyClose(1))])

    with pytest.raises(anthropic.BadRequestError, match="early_close"):
        create(client)


def test_first_byte_delay_trips_the_read_timeout(standin):
    standin.set_script([Reply("late", first_byte_delay=2.0)])

    with make_client(standin, timeout=0.2) as sdk, pytest.raises(anthropic.APITimeoutError):
        create(sdk)


def test_event_delay_spaces_the_stream(standin, client):
    reply = Reply("0123456789abcdef0123456789", first_byte_delay=0.1, event_delay=0.02)
    standin.set_script([reply])
    gaps = len(stream_event_types(reply)) - 1

    started = time.monotonic()
    stream_final(client)

    assert time.monotonic() - started >= 0.1 + gaps * 0.02


def test_delayed_fault(standin, client):
    standin.set_script([Fault(529, first_byte_delay=0.2)])

    started = time.monotonic()
    with pytest.raises(anthropic.OverloadedError):
        create(client)

    assert time.monotonic() - started >= 0.2


# Requests the API would refuse -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"max_tokens": 5, "messages": HELLO}).encode(), "model: Field required"),
        (json.dumps({"model": MODEL, "max_tokens": 5}).encode(), "messages: Field required"),
        (json.dumps({"model": MODEL, "messages": HELLO}).encode(), "max_tokens: Field required"),
        (
            json.dumps({"model": MODEL, "max_tokens": 5, "messages": [{"role": "bot"}]}).encode(),
            "messages.0.role",
        ),
        (
            json.dumps({"model": MODEL, "max_tokens": 0, "messages": HELLO}).encode(),
            "greater than or equal to 1",
        ),
    ],
)
def test_invalid_requests_are_refused_without_consuming_the_script(standin, body, message):
    standin.set_script([Reply("kept")])

    status, answer = raw_post(standin, "/v1/messages", body)

    assert status == 400
    assert answer["type"] == "error"
    assert answer["error"]["type"] == "invalid_request_error"
    assert message in answer["error"]["message"]
    assert standin.remaining == 1
    assert standin.requests[0].status == 400


def test_more_than_four_breakpoints_is_refused(standin, client):
    blocks = [{"type": "text", "text": f"part {i}", "cache_control": EPHEMERAL} for i in range(5)]
    standin.set_script([Reply("unused")])

    with pytest.raises(anthropic.BadRequestError, match="A maximum of 4 blocks"):
        create(client, messages=[{"role": "user", "content": blocks}])


def test_unknown_path_is_a_not_found_error(standin, client):
    status, answer = raw_post(standin, "/v1/complete", b"{}")

    assert status == 404
    assert answer["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.NotFoundError):
        client.get("/v1/models/nothing", cast_to=object)


def test_api_key_is_required_and_never_logged():
    secret = "sk-test-very-secret"
    with StandInAPI([Reply("welcome"), Reply("by header")], api_key=secret) as server:
        with (
            make_client(server, api_key="wrong") as sdk,
            pytest.raises(anthropic.AuthenticationError),
        ):
            create(sdk)
        with make_client(server, api_key=secret) as sdk:
            assert create(sdk).content[0].text == "welcome"
        body = json.dumps({"model": MODEL, "max_tokens": 5, "messages": HELLO}).encode()
        status, _ = raw_post(server, "/v1/messages", body, **{"x-api-key": secret})
        missing, answer = raw_post(server, "/v1/messages", body)
        log = [request.to_json() for request in server.requests]

    assert (status, missing) == (200, 401)
    assert answer["error"]["message"] == "x-api-key header is required"
    assert [entry["status"] for entry in log] == [401, 200, 200, 401]
    assert log[1]["headers"]["authorization"] == "Bearer [redacted]"
    assert log[2]["headers"]["x-api-key"] == "[redacted]"
    assert secret not in json.dumps(log)
    assert "wrong" not in json.dumps(log)


# Script ----------------------------------------------------------------------------------------


def test_exhausted_script_is_a_clear_bad_request(standin, client):
    with pytest.raises(anthropic.BadRequestError, match="script is exhausted"):
        create(client)


def test_callable_items_and_responder_see_the_request():
    def echo_count(request: RecordedRequest) -> Reply:
        return Reply(f"{len(request.messages)} messages, stream={request.stream}")

    with (
        StandInAPI([echo_count], responder=lambda request: Reply(f"fallback {request.model}")) as s,
        make_client(s) as sdk,
    ):
        first = stream_final(sdk, messages=HELLO * 3)
        second = create(sdk)

    assert first.content[0].text == "3 messages, stream=True"
    assert second.content[0].text == f"fallback {MODEL}"


def test_failing_responder_is_reported_not_retried():
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("no such turn")

    with StandInAPI([broken, Reply("unused")]) as server, make_client(server, max_retries=2) as sdk:
        with pytest.raises(anthropic.BadRequestError, match="raised KeyError"):
            create(sdk)
        assert len(server.requests) == 1


def test_reply_fault_is_a_status_fault_shorthand():
    assert Reply.fault(529, retry_after=1) == Fault(529, retry_after=1)
    assert Fault(529).error_type == "overloaded_error"
    assert Fault(418).error_type == "invalid_request_error"


@pytest.mark.parametrize(
    "build",
    [
        lambda: Fault(200),
        lambda: Reply("x", stop_reason="done"),
        lambda: Reply("x", usage={"tokens": 1}),
        lambda: Reply("x", event_delay=-1),
        lambda: Reply([{"type": "image"}]),
        lambda: StreamError(-1),
        lambda: tool_use("run_code", {"code": object()}),
    ],
)
def test_bad_script_items_are_rejected_when_built(build):
    with pytest.raises(ScriptError):
        build()


def test_reset_clears_log_and_cache_while_set_script_keeps_them(standin, client):
    cached = {"system": [{"type": "text", "text": "S" * 400, "cache_control": EPHEMERAL}]}
    standin.set_script([Reply("one"), Reply("two")])
    create(client, **cached)

    standin.set_script([Reply("three")])
    assert create(client, **cached).usage.cache_read_input_tokens > 0
    assert len(standin.requests) == 2

    standin.reset([Reply("four")])
    assert standin.requests == []
    assert create(client, **cached).usage.cache_read_input_tokens == 0


def test_request_log_is_thread_safe():
    echo = StandInAPI(responder=lambda request: Reply(request.messages[0]["content"]))
    answers: list[str] = []

    def ask(number: int) -> None:
        with make_client(echo) as sdk:
            for turn in range(5):
                prompt = f"{number}-{turn}"
                answers.append(
                    create(sdk, messages=[{"role": "user", "content": prompt}]).content[0].text
                )

    with echo:
        threads = [threading.Thread(target=ask, args=(number,)) for number in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    logged = sorted(request.messages[0]["content"] for request in echo.requests)
    assert sorted(answers) == logged
    assert len(set(logged)) == 30


# JSON form -------------------------------------------------------------------------------------


def test_json_form_round_trips():
    items = [
        MIXED,
        Reply("cut", stop_reason="max_tokens", usage={"output_tokens": 3}, model="m"),
        Reply("partial", stream_fault=StreamError(3, "api_error", "boom"), event_delay=0.5),
        Reply("gone", stream_fault=DropConnection(2), first_byte_delay=1.5),
        Reply("short", stream_fault=EarlyClose(5)),
        Fault(529, retry_after=1, headers={"x-should-retry": "true"}, first_byte_delay=0.25),
    ]

    assert parse_script(json.loads(json.dumps(items_to_json(items)))) == items


def test_json_form_example_from_the_docs():
    tool_call = item_from_json(
        {
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "tool_use", "name": "run_code", "input": {"code": "x=1"}},
            ]
        }
    )
    overloaded = item_from_json({"fault": {"status": 529, "retry_after": 1}})

    assert isinstance(tool_call, Reply) and tool_call.resolved_stop_reason == "tool_use"
    assert tool_call.blocks[1].id.startswith("toolu_")
    assert overloaded == Fault(529, retry_after=1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"script": []}, "JSON list"),
        ([{"content": "x", "fault": {"status": 529}}], "item 0: a status fault"),
        ([{"text": "x"}], "unknown reply keys"),
        ([{"fault": {"kind": "explode", "after_events": 1}}], "kind among"),
        ([{"fault": {"status": "529"}}], "integer"),
        ([{"content": [{"type": "tool_use", "input": {}}]}], "bad tool_use block"),
        ([{"usage": [1]}], "usage must be a mapping"),
    ],
)
def test_json_form_errors_name_the_problem(data, message):
    with pytest.raises(ScriptError, match=message):
        parse_script(data)


def test_from_file(tmp_path: Path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps([{"content": "from a file"}]), encoding="utf-8")

    with StandInAPI.from_file(path) as server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "from a file"
    assert load_script(path) == [Reply("from a file")]


# Token and cache accounting --------------------------------------------------------------------


def test_token_estimate_is_four_characters_per_token_of_canonical_json():
    block = {"type": "text", "text": "a" * 100, "cache_control": EPHEMERAL}

    # {"text":"aaa…","type":"text"} is 126 characters
    assert estimate_tokens(block) == 32
    assert estimate_tokens({}) == 1


def conversation_requests(turns: int, breakpoints: bool) -> Iterator[dict[str, Any]]:
    """Yield the request of each turn of a growing conversation, like an agent loop sends."""
    system_block: dict[str, Any] = {"type": "text", "text": "You are a notebook agent. " * 40}
    if breakpoints:
        system_block["cache_control"] = EPHEMERAL
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        messages.append(
            {"role": "user", "content": [{"type": "text", "text": f"Step {turn}. " * 50}]}
        )
        sent = [dict(message) for message in messages]
        if breakpoints:
            last = sent[-1]["content"][-1]
            sent[-1]["content"] = [*sent[-1]["content"][:-1], {**last, "cache_control": EPHEMERAL}]
        yield {"system": [system_block], "messages": sent}
        messages.append({"role": "assistant", "content": [{"type": "text", "text": "Done."}]})


def test_breakpoints_make_each_turn_read_the_previous_prefix(standin, client):
    standin.set_script([Reply("Done.") for _ in range(3)])

    usages = []
    for request in conversation_requests(3, breakpoints=True):
        total = client.messages.count_tokens(model=MODEL, **request).input_tokens
        usage = stream_final(client, **request).usage
        usages.append(usage)
        assert (
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
            == total
        )

    first, second, third = usages
    assert (first.cache_read_input_tokens, first.input_tokens) == (0, 0)
    assert first.cache_creation_input_tokens > 0
    # Each turn reads everything up to the previous turn's last breakpoint, and writes the rest.
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert third.cache_read_input_tokens == (
        second.cache_read_input_tokens + second.cache_creation_input_tokens
    )
    assert second.cache_creation_input_tokens == third.cache_creation_input_tokens
    assert third.cache_read_input_tokens > 4 * third.cache_creation_input_tokens
    assert third.cache_creation.ephemeral_5m_input_tokens == third.cache_creation_input_tokens


def test_without_breakpoints_nothing_is_cached(standin, client):
    standin.set_script([Reply("Done.") for _ in range(3)])

    for request in conversation_requests(3, breakpoints=False):
        usage = create(client, **request).usage
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)
        assert (
            usage.input_tokens == client.messages.count_tokens(model=MODEL, **request).input_tokens
        )


def test_top_level_cache_control_caches_up_to_the_last_block(standin, client):
    standin.set_script([Reply("Done.") for _ in range(2)])
    requests = list(conversation_requests(2, breakpoints=False))

    first = create(client, cache_control=EPHEMERAL, **requests[0]).usage
    second = create(client, cache_control=EPHEMERAL, **requests[1]).usage

    assert (first.input_tokens, first.cache_read_input_tokens) == (0, 0)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens > 0


def test_cache_entries_belong_to_one_model_and_keep_their_ttl(standin, client):
    system = [
        {
            "type": "text",
            "text": "Rules. " * 100,
            "cache_control": {"type": "ephemeral", "ttl": "1h"},
        }
    ]
    standin.set_script([Reply("a"), Reply("b"), Reply("c")])

    written = create(client, system=system).usage
    same_model = create(client, system=system).usage
    other_model = create(client, system=system, model="claude-other").usage

    assert (
        written.cache_creation.ephemeral_1h_input_tokens == written.cache_creation_input_tokens > 0
    )
    assert same_model.cache_read_input_tokens == written.cache_creation_input_tokens
    assert other_model.cache_read_input_tokens == 0


def test_tool_definitions_are_part_of_the_cached_prefix(standin, client):
    tools = [
        {
            "name": "run_code",
            "description": "Run Python. " * 30,
            "input_schema": {"type": "object"},
        },
        {
            "name": "read_file",
            "input_schema": {"type": "object"},
            "cache_control": EPHEMERAL,
        },
    ]
    standin.set_script([Reply("a"), Reply("b")])

    first = create(client, tools=tools).usage
    changed = create(client, tools=[{**tools[0], "description": "Changed."}, tools[1]]).usage

    assert first.cache_creation_input_tokens > 0
    assert first.input_tokens == estimate_tokens({"type": "text", "text": "Hello"})
    assert changed.cache_read_input_tokens == 0


# Environment and command line ------------------------------------------------------------------


def test_environment_points_a_client_at_the_server(standin):
    base = {
        "HTTPS_PROXY": "http://proxy:3128",
        "http_proxy": "x",
        "PATH": "/bin",
        "ANTHROPIC_AUTH_TOKEN": "t",
    }

    env = standin.environment(base)

    assert env == {
        "PATH": "/bin",
        "ANTHROPIC_BASE_URL": standin.base_url,
        "ANTHROPIC_API_KEY": "test",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


def _control(url: str, path: str, data: Any = None) -> Any:
    body = None if data is None else json.dumps(data).encode()
    request = urllib.request.Request(
        url + path, data=body, method="GET" if body is None else "POST"
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=5) as response:
        return json.loads(response.read())


def test_command_line_server(tmp_path: Path):
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps([{"fault": {"status": 500}}]), encoding="utf-8")
    command = [
        sys.executable,
        "-m",
        "qloop_kernel.testing",
        "--port",
        "0",
        "--script",
        str(script_file),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as process:
        try:
            url = process.stdout.readline().strip()
            assert url.startswith("http://127.0.0.1:")
            assert _control(url, "/_qloop/script", items_to_json([Reply("from the CLI")])) == {
                "remaining": 1
            }
            with anthropic.Anthropic(
                api_key="test", base_url=url, max_retries=0, _strict_response_validation=True
            ) as sdk:
                message = sdk.messages.create(model=MODEL, max_tokens=16, messages=HELLO)
            log = _control(url, "/_qloop/requests")
            assert _control(url, "/_qloop/reset", []) == {"remaining": 0}
            assert _control(url, "/_qloop/requests") == []
        finally:
            process.terminate()
            process.wait(timeout=10)
            process.stdout.close()

    assert message.content[0].text == "from the CLI"
    assert [(entry["path"], entry["status"]) for entry in log] == [("/v1/messages", 200)]
    assert log[0]["body"]["messages"] == HELLO
    assert log[0]["usage"]["output_tokens"] >= 1
    assert process.returncode == 0


def test_command_line_rejects_a_bad_script(tmp_path: Path):
    script_file = tmp_path / "script.json"
    script_file.write_text(
        json.dumps([{"content": "x", "fault": {"status": 529}}]), encoding="utf-8"
    )
    command = [sys.executable, "-m", "qloop_kernel.testing", "--script", str(script_file)]

    result = subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert result.returncode == 2
    assert "status fault" in result.stderr
    assert result.stdout == ""


def test_control_endpoint_rejects_a_bad_script(standin):
    status, answer = raw_post(standin, "/_qloop/script", json.dumps([{"bogus": 1}]).encode())

    assert status == 400
    assert "unknown reply keys" in answer["error"]["message"]
    assert standin.requests == []


def test_command_line_reports_a_busy_port(standin):
    command = [sys.executable, "-m", "qloop_kernel.testing", "--port", str(standin.port)]

    result = subprocess.run(command, capture_output=True, text=True, timeout=30)

    assert result.returncode == 2
    assert "cannot listen" in result.stderr


def test_server_stops_and_starts_again():
    server = StandInAPI(responder=lambda request: Reply("again"))
    with server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "again"
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url  # noqa: B018
    with server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "again"
    assert len(server.requests) == 2
