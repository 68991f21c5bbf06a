"""One SDK client per platform and environment, kept between turns; a changed key or URL gets a new one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qloop_kernel import model as model_module
from qloop_kernel.loop import CancelToken
from qloop_kernel.messages import ModelError, ModelRequest
from qloop_kernel.model import AnthropicModel
from qloop_kernel.testing import Reply, StandInAPI, text

KEY = "sk-ant-standin-key-0123456789"
REQUEST = ModelRequest(
    messages=[{"role": "user", "content": "hi"}], tools=[], system="", max_tokens=64
)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInAPI]:
    with StandInAPI(api_key=KEY) as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server


def answer(model: AnthropicModel) -> str:
    response = model.complete(REQUEST, lambda e: None, CancelToken())
    return str(response.content[0]["text"])


def test_models_of_one_platform_and_environment_share_the_sdk_client(api: StandInAPI) -> None:
    api.set_script([Reply([text("first")]), Reply([text("second")])])
    first, second = AnthropicModel("claude-sonnet-4-6"), AnthropicModel("claude-sonnet-4-6")
    assert second._client is first._client  # no second TLS context, transport or pool
    assert (answer(first), answer(second)) == ("first", "second")
    strict = AnthropicModel("claude-sonnet-4-6", strict=True)
    assert strict._client is not first._client
    assert AnthropicModel(provider="compatible")._client is not first._client


def test_a_key_typed_later_reaches_the_next_turn_through_a_new_client(
    api: StandInAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong-key-0000000000")
    refused = AnthropicModel("claude-sonnet-4-6")
    with pytest.raises(ModelError, match="401"):
        answer(refused)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)  # what `%agent key` does
    api.set_script([Reply([text("with the new key")])])
    accepted = AnthropicModel("claude-sonnet-4-6")
    assert accepted._client is not refused._client
    assert answer(accepted) == "with the new key"


def test_another_url_or_proxy_setting_gets_its_own_client(
    api: StandInAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = AnthropicModel("claude-sonnet-4-6")
    assert AnthropicModel(base_url=api.base_url + "/")._client is not here._client
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert AnthropicModel("claude-sonnet-4-6")._client is not here._client
    monkeypatch.delenv("HTTPS_PROXY")
    assert AnthropicModel("claude-sonnet-4-6")._client is here._client


def test_a_closed_client_is_never_handed_out_again(api: StandInAPI) -> None:
    api.set_script([Reply([text("fresh")])])
    closed = AnthropicModel("claude-sonnet-4-6")
    closed.close()
    again = AnthropicModel("claude-sonnet-4-6")
    assert again._client is not closed._client and not again._client.is_closed()
    assert answer(again) == "fresh"


def test_clients_given_options_or_other_platforms_are_their_own(
    api: StandInAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = {"default_headers": {"x-team": "data"}}
    one = AnthropicModel("claude-sonnet-4-6", client_options=options)
    assert AnthropicModel("claude-sonnet-4-6", client_options=options)._client is not one._client
    monkeypatch.setenv("AWS_REGION", "us-east-1")  # Bedrock's credentials are read per client
    bedrock = AnthropicModel("claude-sonnet-4-6", provider="bedrock")
    assert AnthropicModel("claude-sonnet-4-6", provider="bedrock")._client is not bedrock._client


def test_the_pool_keeps_no_secret_and_few_clients(
    api: StandInAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = model_module._clients
    models = []
    for i in range(pool.SIZE + 3):
        monkeypatch.setenv("ANTHROPIC_API_KEY", f"sk-ant-rotated-key-{i:012d}")
        models.append(AnthropicModel("claude-sonnet-4-6"))
    assert len(pool._clients) <= pool.SIZE
    assert not any("sk-ant" in key for key in pool._clients)
    # the clients dropped from the pool are closed at once, not left to the garbage collector
    assert [m._client.is_closed() for m in models[:3]] == [True] * 3
    assert not any(m._client.is_closed() for m in models[-pool.SIZE :])


def test_a_model_whose_shared_client_another_closed_takes_a_new_one(api: StandInAPI) -> None:
    api.set_script([Reply([text("still answers")])])
    kept, done = AnthropicModel("claude-sonnet-4-6"), AnthropicModel("claude-sonnet-4-6")
    with done:
        pass  # closes the client the two share
    assert answer(kept) == "still answers"
