"""API errors in words a person can act on, shown once: 401 points to the key, a 404 names the
model and `%agent models`, a connection error names the API host and whether a proxy is in the way."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from qloop_kernel.loop import QueryLoop
from qloop_kernel.messages import Failed
from qloop_kernel.model import AnthropicModel, RetryPolicy, _connection_note
from qloop_kernel.policy.permissions import AutoApprover
from qloop_kernel.records import MIME_TYPE
from qloop_kernel.testing import Fault, Reply, StandInAPI
from qloop_kernel.tools.runtime import ToolRuntime
from tests.kernel_client import LabKernel

FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=1.0, read_timeout_s=5.0)
USER = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
PROXIES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.mark.parametrize(
    ("environ", "note"),
    [
        ({}, "api.anthropic.com (no proxy set)"),
        (
            {"https_proxy": "http://user:pw@proxy:3128"},
            "api.anthropic.com (through the proxy in HTTPS_PROXY)",
        ),
        ({"ALL_PROXY": "socks5://p:1"}, "api.anthropic.com (through the proxy in ALL_PROXY)"),
        (
            {"HTTPS_PROXY": "http://p:1", "NO_PROXY": "localhost,.anthropic.com"},
            "api.anthropic.com (directly: NO_PROXY covers it, though HTTPS_PROXY is set)",
        ),
    ],
)
def test_connection_note_names_the_host_and_the_proxy_variable(environ, note) -> None:
    assert _connection_note("api.anthropic.com", environ) == note
    assert "pw@" not in note and "3128" not in note  # a proxy's address may hold a password


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def failure(model: AnthropicModel) -> str:
    with model:
        result = QueryLoop(model, ToolRuntime.of([], AutoApprover()), system="s").run(USER)
    assert isinstance(result.stop, Failed)
    return result.stop.message


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def test_connection_refused_names_the_host_and_no_proxy(no_proxy, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    url = f"http://127.0.0.1:{closed_port()}"
    message = failure(AnthropicModel("claude-sonnet-4-6", base_url=url, retry=FAST))
    assert message.startswith("connection problem reaching 127.0.0.1 (no proxy set): ")
    assert message.endswith("(gave up after 2 attempts)")


def test_connection_through_a_proxy_says_which_variable_sets_it(no_proxy, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{closed_port()}")  # refuses: nothing sent
    model = AnthropicModel("claude-sonnet-4-6", base_url="https://api.example.invalid", retry=FAST)
    message = failure(model)
    assert message.startswith(
        "connection problem reaching api.example.invalid (through the proxy in HTTPS_PROXY): "
    )


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandInAPI]:
    with StandInAPI(api_key="test-key") as server:
        for name, value in server.environment().items():
            monkeypatch.setenv(name, value)
        yield server


def test_a_refused_key_points_to_the_key(api: StandInAPI) -> None:
    api.set_script([Fault(401, message="invalid x-api-key"), Reply("unused")])
    message = failure(AnthropicModel("claude-sonnet-4-6", retry=FAST))
    assert message.startswith("API error 401 (authentication_error): invalid x-api-key — ")
    assert "ANTHROPIC_API_KEY" in message and "`%agent key`" in message


def test_an_unknown_model_is_named_with_the_way_to_list_models(api: StandInAPI) -> None:
    api.set_script([Reply("unused")])
    message = failure(AnthropicModel("claude-nope", retry=FAST))
    assert (
        message
        == "model claude-nope not found: check --model; `%agent models` lists the known ones"
    )


@pytest.mark.kernel
def test_an_api_error_shows_once_in_the_cell(api: StandInAPI) -> None:
    api.set_script([Reply("unused")])
    with LabKernel(api.environment()) as lab:
        lab.run("%load_ext qloop_kernel")
        msg_id = lab.execute("%%agent --new --model claude-nope\nhello", cell_id="error-once")
        reply = lab.complete(msg_id, 60)["content"]
        assert reply["status"] == "error" and reply["ename"] == "AgentError"
        live = [o["content"] for o in lab.outputs(msg_id)]
        shown = [
            *(
                o.get("data", {}).get("text/plain", "")
                for o in live
                if MIME_TYPE not in o.get("data", {})
            ),
            *(line for o in live for line in o.get("traceback", [])),  # the error, as rendered
            *(str(s.get("value", "")) for s in lab.widget_states(parent=msg_id)),
        ]  # the record's mirror is not shown live: the extension folds it
        shown = "\n".join(shown)
        assert shown.count("claude-nope not found") == 1, shown
        assert lab.error_text(msg_id).startswith(
            "AgentError: the agent turn failed: model claude-nope not found: "
        )
        labels = [s.get("value", "") for s in lab.widget_states(parent=msg_id)]
        assert any("ended with an error · model call 0/" in str(v) for v in labels), labels
