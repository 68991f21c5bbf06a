"""The Messages API stand-in, exercised with the real anthropic SDK (strict response validation)."""

from __future__ import annotations

import base64
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
    DOCUMENTED_MODELS,
    DropConnection,
    EarlyClose,
    Fault,
    RawReply,
    RecordedRequest,
    Reply,
    ScriptError,
    StandInAPI,
    StreamError,
    block_tokens,
    item_from_json,
    items_to_json,
    load_script,
    parse_script,
    redacted_thinking,
    server_tool_use,
    spend_limit_reached,
    stream_event_types,
    text,
    thinking,
    tool_use,
    web_search_result,
)

MODEL = "claude-test-model"
TEST_MODELS = [*DOCUMENTED_MODELS, MODEL, "claude-other"]
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
    with StandInAPI(models=TEST_MODELS) as server:
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


def unsigned(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks without the signatures the server adds to thinking blocks."""
    return [{k: v for k, v in block.items() if k != "signature"} for block in blocks]


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

    assert unsigned(content_json(final)) == [block.to_json() for block in MIXED.blocks]
    assert final.content[0].signature
    assert final.stop_reason == "tool_use"
    assert final.model == MODEL
    assert final.id.startswith("msg_")
    assert final.content[2].id.startswith("toolu_")
    assert partial_json[0] == ""  # the API's first input_json_delta is empty
    assert json.loads("".join(partial_json)) == MIXED.blocks[2].input
    assert final.usage == anthropic.types.Usage.model_validate(standin.requests[0].usage)


def test_non_streaming_reply_is_a_full_message(standin, client):
    standin.set_script([MIXED, Reply("Hi!", model="claude-other")])

    first = create(client)
    second = create(client)

    assert unsigned(content_json(first)) == [block.to_json() for block in MIXED.blocks]
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

    dropped = (httpx2.TransportError, anthropic.APIConnectionError)
    with make_client(standin, max_retries=2) as sdk, pytest.raises(dropped) as raised:
        stream_final(sdk)

    # SDK 2.17 wraps the transport's error in APIConnectionError; earlier versions raised it bare.
    error = raised.value
    cause = error.__cause__ if isinstance(error, anthropic.APIConnectionError) else error
    assert isinstance(cause, httpx2.RemoteProtocolError)
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
    with StandInAPI(
        [Reply("welcome"), Reply("by header")], api_key=secret, models=TEST_MODELS
    ) as server:
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
        StandInAPI(
            [echo_count], responder=lambda r: Reply(f"fallback {r.model}"), models=TEST_MODELS
        ) as s,
        make_client(s) as sdk,
    ):
        first = stream_final(sdk, messages=HELLO * 3)
        second = create(sdk)

    assert first.content[0].text == "3 messages, stream=True"
    assert second.content[0].text == f"fallback {MODEL}"


def test_failing_responder_is_reported_not_retried():
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("no such turn")

    with (
        StandInAPI([broken, Reply("unused")], models=TEST_MODELS) as server,
        make_client(server, max_retries=2) as sdk,
    ):
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
    echo = StandInAPI(
        responder=lambda request: Reply(request.messages[0]["content"]), models=TEST_MODELS
    )
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

    with StandInAPI.from_file(path, models=TEST_MODELS) as server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "from a file"
    assert load_script(path) == [Reply("from a file")]


# Token and cache accounting --------------------------------------------------------------------


def test_token_estimate_is_four_characters_per_token_of_canonical_json():
    block = {"type": "text", "text": "a" * 100, "cache_control": EPHEMERAL}

    # {"text":"aaa…","type":"text"} is 126 characters
    assert block_tokens(block) == 32
    assert block_tokens({}) == 1


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
    assert first.input_tokens == block_tokens({"type": "text", "text": "Hello"})
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
        "--model",
        MODEL,
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
    server = StandInAPI(responder=lambda request: Reply("again"), models=TEST_MODELS)
    with server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "again"
    with pytest.raises(RuntimeError, match="not running"):
        server.base_url  # noqa: B018
    with server, make_client(server) as sdk:
        assert create(sdk).content[0].text == "again"
    assert len(server.requests) == 2


# Requests the API refuses (each case: the API's status, type and words) -------------------------

CURRENT = "claude-sonnet-5-5"  # thinks adaptively by default, rejects manual thinking and sampling
LEGACY = "claude-sonnet-4-6"
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + b"\0" * 16).decode()


def tool_turn(*results: dict[str, Any], tool_id: str = "toolu_1") -> list[dict[str, Any]]:
    """A conversation whose assistant turn calls one tool, then the given user blocks."""
    call = {"type": "tool_use", "id": tool_id, "name": "run_code", "input": {"code": "1"}}
    return [
        {"role": "user", "content": "Run it."},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": list(results)},
    ]


def result(tool_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "1"}


def image(media_type: str, data: str) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def user(*blocks: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": list(blocks)}]


REFUSED = [
    ("empty_text", {"messages": user({"type": "text", "text": ""})},
     "messages: text content blocks must be non-empty"),
    ("empty_system_text", {"system": [{"type": "text", "text": ""}]},
     "system: text content blocks must be non-empty"),
    ("cache_control_on_empty_text",
     {"messages": user({"type": "text", "text": "", "cache_control": EPHEMERAL})},
     "messages.0.content.0.text: cache_control cannot be set for empty text blocks"),
    ("text_before_tool_result",
     {"messages": tool_turn({"type": "text", "text": "Here:"}, result())},
     "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message. "
     "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
     "blocks."),
    ("tool_use_without_result",
     {"messages": tool_turn({"type": "text", "text": "Never mind."})},
     "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
     "toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next "
     "message."),
    ("tool_result_without_use", {"messages": user(result("toolu_9"))},
     "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. "
     "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
     "message."),
    ("tool_input_not_an_object",
     {"messages": [{"role": "user", "content": "Go."},
                   {"role": "assistant", "content": [
                       {"type": "tool_use", "id": "toolu_1", "name": "run_code", "input": [1, 2]}]},
                   {"role": "user", "content": [result()]}]},
     "messages.1.content.0.tool_use.input: Input should be a valid dictionary"),
    ("cache_control_on_thinking",
     {"messages": [{"role": "user", "content": "Hi"},
                   {"role": "assistant", "content": [
                       {"type": "thinking", "thinking": "t", "signature": "s",
                        "cache_control": EPHEMERAL},
                       {"type": "text", "text": "Hello"}]},
                   {"role": "user", "content": "Again"}]},
     "messages.1.content.0.thinking.cache_control: Extra inputs are not permitted"),
    ("unknown_top_level_field", {"reasoning_effort": "high"},
     "reasoning_effort: Extra inputs are not permitted"),
    ("unknown_message_field",
     {"messages": [{"role": "user", "content": "Hi", "name": "Ada"}]},
     "messages.0.name: Extra inputs are not permitted"),
    ("empty_message", {"messages": [{"role": "user", "content": []}]},
     "messages.0: all messages must have non-empty content except for the optional final "
     "assistant message"),
    ("image_not_base64", {"messages": user(image("image/png", "not base64!"))},
     "messages.0.content.0.image.source.base64: invalid base64 data"),
    ("image_of_another_type", {"messages": user(image("image/jpeg", PNG))},
     "messages.0.content.0.image.source.base64: The image was specified using the image/jpeg "
     "media type, but the image appears to be a image/png image"),
    ("image_media_type", {"messages": user(image("image/bmp", PNG))},
     "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', "
     "'image/png', 'image/gif' or 'image/webp'"),
    ("image_in_tool_result",
     {"messages": tool_turn({"type": "tool_result", "tool_use_id": "toolu_1",
                             "content": [image("image/png", JPEG)]})},
     "messages.2.content.0.tool_result.content.0.image.source.base64: The image was specified "
     "using the image/png media type, but the image appears to be a image/jpeg image"),
    ("manual_thinking_on_a_current_model",
     {"model": CURRENT, "thinking": {"type": "enabled", "budget_tokens": 1024}},
     '"thinking.type.enabled" is not supported for this model. Use "thinking.type.adaptive" and '
     '"output_config.effort" to control thinking behavior.'),
    ("temperature_on_a_current_model", {"model": CURRENT, "temperature": 0.2},
     "temperature is deprecated for this model."),
    ("top_k_on_a_current_model", {"model": CURRENT, "top_k": 5},
     "top_k is deprecated for this model."),
]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_the_api_refuses(standin, client, fields, message):
    standin.set_script([Reply("unused")])
    request = {"model": MODEL, "max_tokens": 64, "messages": HELLO, **fields}
    known = {k: v for k, v in request.items() if k in ("model", "max_tokens", "messages", "system")}
    extra = {k: v for k, v in request.items() if k not in known}

    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(**known, extra_body=extra)

    assert refused.value.status_code == 400
    assert refused.value.body["error"] == {"type": "invalid_request_error", "message": message}
    assert standin.remaining == 1  # a refused request consumes no script item


@pytest.mark.parametrize(
    "fields",
    [
        {"model": LEGACY, "thinking": {"type": "enabled", "budget_tokens": 1024}},
        {"model": LEGACY, "temperature": 0.2, "top_k": 5},
        {"model": CURRENT, "temperature": 1.0},  # the default value is accepted
        {"messages": user({"type": "text", "text": "Look:"}, image("image/png", PNG))},
        {"messages": tool_turn(result(), {"type": "text", "text": "And a note after."})},
    ],
    ids=["legacy_thinking", "legacy_sampling", "default_temperature", "valid_image",
         "text_after_results"],
)  # fmt: skip
def test_what_the_api_accepts_is_accepted(standin, client, fields):
    standin.set_script([Reply("ok")])
    request = {"model": MODEL, "max_tokens": 64, "messages": HELLO, **fields}
    known = {k: v for k, v in request.items() if k in ("model", "max_tokens", "messages")}
    extra = {k: v for k, v in request.items() if k not in known}

    message = client.messages.create(**known, extra_body=extra)

    assert message.content[-1].text == "ok"


@pytest.mark.parametrize("model", ["claude-nope-9", "claude-sonnet-4-5"], ids=["typo", "retired"])
def test_an_unknown_or_retired_model_is_not_found(standin, client, model):
    standin.set_script([Reply("unused")])

    with pytest.raises(anthropic.NotFoundError) as missing:
        create(client, model=model)

    assert missing.value.body["error"] == {"type": "not_found_error", "message": f"model: {model}"}
    assert standin.remaining == 1


def test_the_documented_models_are_served_by_default():
    ids = {model.id for model in DOCUMENTED_MODELS}
    assert {"claude-fable-5-1", "claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5"} <= ids
    assert "claude-sonnet-4-5" not in ids  # retired on 2026-11-30
    with StandInAPI([Reply("a"), Reply("b")]) as server, make_client(server) as sdk:
        assert create(sdk, model="claude-opus-5-5").stop_reason == "end_turn"
        with pytest.raises(anthropic.NotFoundError):
            create(sdk, model=MODEL)


# Thinking blocks go back unchanged -------------------------------------------------------------


def answered(message: anthropic.types.Message, then: str = "Go on.") -> list[dict[str, Any]]:
    """HELLO, the assistant message as received (every field), and a new user turn."""
    blocks = [block.to_dict(mode="json") for block in message.content]
    return [*HELLO, {"role": "assistant", "content": blocks}, {"role": "user", "content": then}]


def test_signed_thinking_comes_back_accepted_and_a_changed_one_is_refused(standin, client):
    standin.set_script([Reply([thinking("Plan: add."), text("4")]), Reply("again"), Reply("x")])
    first = stream_final(client)
    history = answered(first)

    assert create(client, messages=history).content[0].text == "again"
    history[1]["content"][0]["thinking"] = "Plan: subtract."
    with pytest.raises(anthropic.BadRequestError) as refused:
        create(client, messages=history)

    assert refused.value.body["error"]["message"] == (
        "messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant "
        "message cannot be modified. These blocks must remain as they were in the original "
        "response."
    )


def test_a_changed_thinking_block_in_an_earlier_turn_has_an_invalid_signature(standin, client):
    standin.set_script([Reply([thinking("Plan."), text("1")]), Reply("2"), Reply("unused")])
    first = stream_final(client)
    second = stream_final(client, messages=answered(first))
    history = [*answered(first)[:2], {"role": "user", "content": "More."},
               {"role": "assistant", "content": [b.to_dict() for b in second.content]},
               {"role": "user", "content": "Again."}]  # fmt: skip
    history[1]["content"][0]["signature"] = "forged"

    with pytest.raises(
        anthropic.BadRequestError,
        match=r"messages\.1\.content\.0: Invalid `signature` in `thinking` block",
    ):
        create(client, messages=history)


def test_redacted_thinking_is_sent_whole_and_checked(standin, client):
    standin.set_script([Reply([redacted_thinking(), text("Done.")]), Reply("ok"), Reply("x")])
    events: list[str] = []
    with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
        events = [event.type for event in stream]
        first = stream.get_final_message()

    assert first.content[0].type == "redacted_thinking" and first.content[0].data
    assert events.count("content_block_delta") == 1  # only the text: redacted data comes whole
    assert create(client, messages=answered(first)).content[0].text == "ok"
    tampered = answered(first)
    tampered[1]["content"][0]["data"] = base64.b64encode(b"other").decode()
    with pytest.raises(anthropic.BadRequestError, match="cannot be modified"):
        create(client, messages=tampered)


def test_a_thinking_block_the_server_did_not_sign_is_refused(standin, client):
    standin.set_script([Reply([thinking("Mine.", signature="not-from-this-server"), text("x")])])
    first = stream_final(client)

    assert first.content[0].signature == "not-from-this-server"
    with pytest.raises(anthropic.BadRequestError, match="cannot be modified"):
        create(client, messages=answered(first))


def test_models_that_think_by_default_start_with_a_signed_thinking_block(standin, client):
    standin.set_script([Reply("Hi."), Reply("Hi."), Reply("Hi."), Reply("Hi.")])

    current = stream_final(client, model=CURRENT)
    disabled = create(client, model=CURRENT, extra_body={"thinking": {"type": "disabled"}})
    legacy = create(client, model=LEGACY)

    assert [block.type for block in current.content] == ["thinking", "text"]
    assert current.content[0].thinking == ""  # the default display omits the thinking text
    assert current.content[0].signature
    assert [block.type for block in disabled.content] == ["text"]
    assert [block.type for block in legacy.content] == ["text"]
    assert create(client, model=CURRENT, messages=answered(current)).content[-1].text == "Hi."
    assert stream_event_types(Reply("Hi."), think_first=True)[1:5] == [
        "content_block_start", "ping", "content_block_delta", "content_block_stop"
    ]  # fmt: skip


def test_thinking_streams_with_a_signature_delta(standin, client):
    standin.set_script([Reply([thinking("x" * 40), text("y")])])
    deltas = []
    with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                deltas.append(event.delta.type)

    assert deltas == ["thinking_delta"] * 3 + ["signature_delta", "text_delta"]


# Documented shapes -------------------------------------------------------------------------------


def test_tool_input_streams_an_empty_delta_then_whole_pairs_and_carries_the_caller(standin, client):
    call = tool_use("query", {"table": "sales", "limit": 10, "where": {"region": "EU"}})
    standin.set_script([Reply([call])])
    pieces = []
    with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                pieces.append(event.delta.partial_json)
        final = stream.get_final_message()

    assert pieces == ["", '{"table": "sales"', ', "limit": 10', ', "where": {"region": "EU"}}']
    assert final.content[0].input == call.input
    assert final.content[0].caller is not None and final.content[0].caller.type == "direct"


def test_a_tool_input_that_is_not_an_object_is_streamed_as_is(standin, client):
    standin.set_script([Reply([tool_use("run_code", [1, 2])])])

    final = stream_final(client)

    assert final.content[0].input == [1, 2]


def test_server_tool_blocks_and_citations(standin, client):
    search = server_tool_use("web_search", {"query": "pandas 3 release"})
    found = web_search_result(search.id, [{"url": "https://example.org/p3", "title": "pandas 3"}])
    citation = {
        "type": "web_search_result_location",
        "url": "https://example.org/p3",
        "title": "pandas 3",
        "encrypted_index": "Eo8BCioIAhgB",
        "cited_text": "pandas 3.0",
    }
    answer = text("pandas 3 is out.", citations=[citation])
    standin.set_script([Reply([search, found, answer])] * 2)  # fmt: skip
    deltas = []
    with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
        for event in stream:
            if event.type == "content_block_delta":
                deltas.append(event.delta.type)
        streamed = stream.get_final_message()
    created = create(client)

    for message in (streamed, created):
        assert [b.type for b in message.content] == [
            "server_tool_use", "web_search_tool_result", "text"
        ]  # fmt: skip
        assert message.content[1].content[0].url == "https://example.org/p3"
        assert message.content[2].citations[0].cited_text == "pandas 3.0"
        assert message.stop_reason == "end_turn"
    assert deltas == ["input_json_delta", "input_json_delta", "citations_delta", "text_delta"]


def test_a_refusal_carries_its_explanation(standin, client):
    details = {"category": "cyber", "explanation": "This looks like malware development."}
    standin.set_script([Reply([text("")], stop_reason="refusal", stop_details=details)])

    message = stream_final(client)

    assert message.stop_details.category == "cyber"
    assert message.stop_details.explanation == "This looks like malware development."
    assert message.content[0].text == ""  # the API does send empty text blocks


def test_a_429_carries_retry_after_and_rate_limit_headers(standin, client):
    standin.set_script([Fault(429)])

    with pytest.raises(anthropic.RateLimitError) as limited:
        create(client)

    headers = limited.value.response.headers
    assert headers["retry-after"] == "1"
    for kind in ("requests", "tokens", "input-tokens", "output-tokens"):
        assert headers[f"anthropic-ratelimit-{kind}-remaining"] == "0"
        assert headers[f"anthropic-ratelimit-{kind}-reset"].endswith("Z")


def test_a_spend_limit_429_has_no_retry_after_and_names_itself(standin, client):
    standin.set_script([spend_limit_reached()])

    with pytest.raises(anthropic.RateLimitError) as limited:
        create(client)

    assert "retry-after" not in limited.value.response.headers
    error = limited.value.body["error"]
    assert error["details"] == {"error_code": "enforced_spend_limit_reached"}
    assert "spend limit" in error["message"]


def test_a_raw_reply_is_sent_byte_for_byte(standin, client):
    body = (
        'event: message_start\ndata: {"type": "message_start", "message": {"id": "msg_1", '
        '"type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, '
        '"stop_sequence": null, "usage": {"input_tokens": 3, "output_tokens": 1}}}\n\n'
        'event: content_block_start\ndata: {"type": "content_block_start", "index": 0, '
        '"content_block": {"type": "thinking", "thinking": "", "signature": ""}}\n\n'
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
        '"delta": {"type": "thinking_delta", "thinking": "Hmm."}}\n\n'
        'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
        '"delta": {"type": "signature_delta", "signature": "EqQBCgIYAh"}}\n\n'
        'event: content_block_stop\ndata: {"type": "content_block_stop", "index": 0}\n\n'
        'event: message_delta\ndata: {"type": "message_delta", "delta": {"stop_reason": '
        '"end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}}\n\n'
        'event: message_stop\ndata: {"type": "message_stop"}\n\n'
    )
    standin.set_script([RawReply(body), Reply("accepted")])

    first = stream_final(client)

    assert (first.content[0].thinking, first.content[0].signature) == ("Hmm.", "EqQBCgIYAh")
    assert create(client, messages=answered(first)).content[0].text == "accepted"


# Prompt-cache rules ------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cached_system(chars: int, ttl: str | None = None) -> list[dict[str, Any]]:
    control: dict[str, Any] = {"type": "ephemeral", **({"ttl": ttl} if ttl else {})}
    return [{"type": "text", "text": "r" * chars, "cache_control": control}]


def test_a_prefix_shorter_than_the_models_minimum_is_not_cached(standin, client):
    standin.set_script([Reply("a")] * 4)
    short, long = cached_system(2000), cached_system(6000)  # about 500 and 1,500 tokens

    for _ in range(2):
        usage = create(client, model=LEGACY, system=short).usage  # minimum 1,024 tokens
        assert (usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (0, 0)
    written = create(client, model=LEGACY, system=long).usage
    read = create(client, model=LEGACY, system=long).usage

    assert written.cache_creation_input_tokens > 1024
    assert read.cache_read_input_tokens == written.cache_creation_input_tokens


def test_a_cache_hit_is_found_only_within_20_blocks_of_a_breakpoint(standin, client):
    standin.set_script([Reply("a")] * 3)
    marked = [{"type": "text", "text": "Rules.", "cache_control": EPHEMERAL}]
    plain = [{"type": "text", "text": "Rules."}]

    def ending_in_a_breakpoint(blocks: int) -> list[dict[str, Any]]:
        notes = [{"type": "text", "text": f"note {i}"} for i in range(blocks)]
        return user(*notes, {"type": "text", "text": "Now.", "cache_control": EPHEMERAL})

    create(client, system=marked)  # writes the prefix that ends with the system block (block 0)
    near = create(client, system=plain, messages=ending_in_a_breakpoint(10)).usage  # block 11
    far = create(client, system=plain, messages=ending_in_a_breakpoint(25)).usage  # block 26

    assert near.cache_read_input_tokens == block_tokens(plain[0])
    assert far.cache_read_input_tokens == 0  # the written entry is more than 20 blocks back


def test_cache_entries_live_five_minutes_from_their_last_use_or_an_hour():
    clock = FakeClock()
    with (
        StandInAPI([Reply("a")] * 6, models=TEST_MODELS, clock=clock) as server,
        make_client(server) as sdk,
    ):
        five = cached_system(800)
        hour = cached_system(900, ttl="1h")
        create(sdk, system=five)
        create(sdk, system=hour)
        clock.now += 240
        kept = create(sdk, system=five).usage  # read 4 minutes on: the entry is refreshed
        clock.now += 240
        refreshed = create(sdk, system=five).usage  # 8 minutes after the write, 4 after the read
        clock.now += 301
        expired = create(sdk, system=five).usage
        long_lived = create(sdk, system=hour).usage  # 17 minutes after its write

    assert kept.cache_read_input_tokens > 0
    assert refreshed.cache_read_input_tokens == kept.cache_read_input_tokens
    assert (expired.cache_read_input_tokens, expired.cache_creation_input_tokens > 0) == (0, True)
    assert long_lived.cache_read_input_tokens > 0
